//! Delivery: planning (which subscriber gets which digest) and rendering per distinct
//! (filter, language, channel). The engine in `engine.rs` owns claiming, rate limiting,
//! retries and bookkeeping; a channel's sender (`crate::channels`) only knows how to send
//! one rendered message and how to classify its errors.

pub mod engine;
pub mod health;
pub mod limits;
pub mod outcome;
mod sent;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use sha2::{Digest as _, Sha256};

use crate::digest;
use crate::model::{Digest, Filter};
use crate::parse::hex;
use crate::render::Renderer;
use crate::store::PlannedDelivery;
use crate::subscriber::{Channel, Edition, Subscriber};

pub use crate::channels::{SendError, Sender};

/// Stable id of the delivery of one edition of a date to one subscriber; receivers use it
/// to drop duplicates. A daily's id is the one it had before there were editions.
pub fn delivery_id(date: NaiveDate, edition: Edition, subscriber_id: i64) -> String {
    let key = match edition {
        Edition::Daily => format!("{date}/{subscriber_id}"),
        Edition::Weekly => format!("{date}/weekly/{subscriber_id}"),
    };
    hex(&Sha256::digest(key.as_bytes())[..12])
}

/// The editions of one date: its daily, and the weekly roll-up ending that day when some
/// reader's cadence asks for one (the planner makes it only then).
#[derive(Clone, Copy)]
pub struct Editions<'a> {
    pub daily: &'a Digest,
    pub weekly: Option<&'a Digest>,
}

impl<'a> Editions<'a> {
    fn get(self, edition: Edition) -> Option<&'a Digest> {
        match edition {
            Edition::Daily => Some(self.daily),
            Edition::Weekly => self.weekly,
        }
    }
}

/// What a reader of `language` with `filter` gets of `d`: the digest in their language
/// first (the overview is built from the events' briefs; no copy when it is in that
/// language already), then only the events that pass their filter. Delivery renders this,
/// and so does `kdigest digest --lang/--layers/--min-score` and `kdigest preview`. Pure.
pub fn reader_edition(
    d: &Digest,
    filter: &Filter,
    language: &str,
    locale: &crate::locale::Locale,
) -> Digest {
    let localized = if d.language == language {
        std::borrow::Cow::Borrowed(d)
    } else {
        std::borrow::Cow::Owned(d.clone().in_language(language))
    };
    digest::filter(&localized, filter, locale)
}

/// Whether any event of `digest` passes `filter`: a reader whose edition has none gets
/// nothing that day (unless they asked for a note on empty days).
pub fn any_passes(digest: &Digest, filter: &Filter) -> bool {
    digest.events().any(|e| filter.accepts(e))
}

/// One row per subscriber and edition their cadence takes on this date, when their channel
/// can be sent to and their filtered edition is not empty (or they asked for a note on
/// empty days). Pure.
pub fn plan(
    editions: Editions<'_>,
    subscribers: &[Subscriber],
    channels: &[Channel],
    ready: chrono::DateTime<chrono::Utc>,
) -> Vec<PlannedDelivery> {
    let date = editions.daily.date;
    // Readers' filters as they act on each edition (followed phrases no event is about
    // left out), so readers following different quiet projects share one answer.
    let indexes = EditionIndexes::new(&editions);
    let mut matches: HashMap<(Edition, Cow<'_, Filter>), bool> = HashMap::new();
    let mut rows = Vec::new();
    for s in subscribers
        .iter()
        .filter(|s| channels.contains(&s.address.channel()))
    {
        for edition in s.cadence.editions(date) {
            let Some(digest) = editions.get(edition) else {
                continue;
            };
            let wanted = s.notify_empty
                || *matches
                    .entry((edition, indexes.acting(edition, &s.filter)))
                    .or_insert_with_key(|(_, f)| any_passes(digest, f));
            if wanted {
                rows.push(PlannedDelivery {
                    id: delivery_id(date, edition, s.id),
                    subscriber_id: s.id,
                    edition,
                    channel: s.address.channel(),
                    destination: s.address.destination_key(),
                    // A reader with their own hour gets it then; the outbox holds it until due.
                    // The roll-up is due a second after the daily, so it is claimed after it.
                    due: match (edition, s.deliver_at.map(|at| at.due_after(ready))) {
                        (Edition::Daily, due) => due,
                        (Edition::Weekly, due) => {
                            Some(due.unwrap_or(ready) + chrono::Duration::seconds(1))
                        }
                    },
                });
            }
        }
    }
    rows
}

type RenderKey = (NaiveDate, Edition, Filter, String, Channel);

/// The [`following::Index`](crate::following::Index) of each edition a plan serves.
struct EditionIndexes {
    daily: crate::following::Index,
    weekly: Option<crate::following::Index>,
}

impl EditionIndexes {
    fn new(editions: &Editions<'_>) -> EditionIndexes {
        let index =
            |d: &Digest| crate::following::Index::new(d.events().map(|e| e.followable_text()));
        EditionIndexes {
            daily: index(editions.daily),
            weekly: editions.weekly.map(index),
        }
    }

    fn acting<'f>(&self, edition: Edition, filter: &'f Filter) -> Cow<'f, Filter> {
        let index = match edition {
            Edition::Daily => Some(&self.daily),
            Edition::Weekly => self.weekly.as_ref(),
        };
        match index {
            Some(index) if !filter.follows.is_empty() => Cow::Owned(acting(filter, index)),
            _ => Cow::Borrowed(filter),
        }
    }
}

/// `filter` as it acts on the edition `index` was made of: without the followed phrases no
/// event is about, which change nothing that day.
fn acting(filter: &Filter, index: &crate::following::Index) -> Filter {
    Filter {
        follows: index.acting(&filter.follows),
        ..filter.clone()
    }
}

fn render_key(d: &Digest, filter: &Filter, language: &str, channel: Channel) -> RenderKey {
    (
        d.date,
        Edition::of(d),
        filter.clone(),
        language.to_string(),
        channel,
    )
}

/// Renders are kept for this many digest dates (the newest); older dates render again.
const RENDERED_DATES: usize = 3;
/// And for at most this many distinct renders: beyond it the oldest date is dropped.
const RENDERS_MAX: usize = 4096;

/// Takes a cache lock whatever happened to its last holder: a panic while rendering leaves
/// the map as it was (the insert comes after the render), so it is still consistent.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Renders once per distinct (digest edition, filter, language, channel): 100,000 subscribers with
/// 20 distinct filters render 20 times per channel. Bounded by date and size.
#[derive(Default)]
pub struct RenderCache {
    renders: Mutex<HashMap<RenderKey, Arc<Vec<String>>>>,
    /// Per digest edition, its events made ready for followed phrases
    /// (`following::Index`), so a reader's phrases are checked without reading the digest
    /// again.
    indexes: Mutex<HashMap<(NaiveDate, Edition), Arc<crate::following::Index>>>,
    renderers: Mutex<HashMap<String, Arc<Renderer>>>,
    templates_dir: Option<std::path::PathBuf>,
    site: Option<url::Url>,
}

impl RenderCache {
    pub fn new(templates_dir: Option<std::path::PathBuf>) -> RenderCache {
        RenderCache {
            templates_dir,
            ..RenderCache::default()
        }
    }

    /// `filter` without the followed phrases no event of `d` is about.
    fn acting(&self, d: &Digest, filter: &Filter) -> Filter {
        if filter.follows.is_empty() {
            return filter.clone();
        }
        let index = {
            let mut all = lock(&self.indexes);
            if all.len() > RENDERED_DATES * 2 {
                all.clear();
            }
            all.entry((d.date, Edition::of(d)))
                .or_insert_with(|| {
                    Arc::new(crate::following::Index::new(
                        d.events().map(|e| e.followable_text()),
                    ))
                })
                .clone()
        };
        acting(filter, &index)
    }

    /// Renders link to the web site under this base URL.
    pub fn with_site(mut self, site: url::Url) -> RenderCache {
        self.site = Some(site);
        self
    }

    pub fn messages(
        &self,
        d: &Digest,
        filter: &Filter,
        language: &str,
        channel: Channel,
    ) -> anyhow::Result<Arc<Vec<String>>> {
        // Followed phrases that no event of the digest is about change nothing: left out,
        // readers following different projects share a render on a day none is in the news
        // (100,000 readers following phrases of their own rendered 100,000 times before).
        let filter = &self.acting(d, filter);
        let key = render_key(d, filter, language, channel);
        // Held while rendering: workers that miss the same key at the start of a run wait
        // for the one render instead of each making their own.
        let mut renders = lock(&self.renders);
        if let Some(hit) = renders.get(&key) {
            return Ok(hit.clone());
        }
        let renderer = self.renderer(language)?;
        let filtered = reader_edition(d, filter, language, renderer.locale());
        // Through `Renderer::render`, so a weekly roll-up gets the locale's weekly words.
        let messages = Arc::new(channel.render(&filtered, &renderer)?);
        renders.insert(key, messages.clone());
        loop {
            let dates: std::collections::BTreeSet<NaiveDate> =
                renders.keys().map(|k| k.0).collect();
            let oldest = dates.first().copied();
            match oldest {
                Some(oldest)
                    if dates.len() > RENDERED_DATES
                        || (renders.len() > RENDERS_MAX && dates.len() > 1) =>
                {
                    renders.retain(|k, _| k.0 != oldest)
                }
                _ => break,
            }
        }
        if renders.len() > RENDERS_MAX {
            // One date with more distinct renders than the bound: start that date afresh.
            renders.clear();
        }
        Ok(messages)
    }

    /// The render when it is made already; never waits for one in progress.
    pub fn cached(
        &self,
        d: &Digest,
        filter: &Filter,
        language: &str,
        channel: Channel,
    ) -> Option<Arc<Vec<String>>> {
        let key = render_key(d, filter, language, channel);
        self.renders.try_lock().ok()?.get(&key).cloned()
    }

    /// The renderer of one language, built once.
    pub fn renderer(&self, language: &str) -> anyhow::Result<Arc<Renderer>> {
        let mut renderers = lock(&self.renderers);
        if let Some(r) = renderers.get(language) {
            return Ok(r.clone());
        }
        let mut r = crate::templates::renderer(language, self.templates_dir.as_deref())?;
        if let Some(site) = &self.site {
            r = r.with_site(site.clone());
        }
        let r = Arc::new(r);
        renderers.insert(language.to_string(), r.clone());
        Ok(r)
    }

    /// Drops the renders of one date, both editions, and what was indexed of them (its
    /// digest was regenerated): an index of the old digest would leave out a followed
    /// phrase that only the new one is about.
    pub fn forget(&self, date: NaiveDate) {
        lock(&self.renders).retain(|key, _| key.0 != date);
        lock(&self.indexes).retain(|key, _| key.0 != date);
    }

    /// How many distinct renders were made (for tests and the benchmark).
    pub fn len(&self) -> usize {
        lock(&self.renders).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
