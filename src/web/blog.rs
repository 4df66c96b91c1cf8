//! The blog: `/` (digests newest first, paged), `/digest/{date}` (one digest, optionally
//! filtered with `?layers=a,b&min_score=70`, with a read count), `/feed.xml` (Atom 1.0),
//! `/week/{YYYY-Www}` (the weekly roll-up of an ISO week from its stored dailies) and
//! `/weekly.xml` (Atom 1.0 of the roll-ups).
//! Everything is rendered from stored digests; feed text is escaped by the templates. Digest
//! pages are cached and views counted in memory ([`crate::web::pages`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::NaiveDate;
use serde::Deserialize;

use crate::config::Config;
use crate::digest::filter;
use crate::model::{Filter, Score};
use crate::render::{Renderer, escape_html};
use crate::store::Store;
use crate::web::html;
use crate::web::pages::{CachedPage, PageCache, ReadCounter};

const PAGE_SIZE: i64 = 10;
const FEED_ENTRIES: i64 = 20;
/// Roll-ups in the weekly feed.
const WEEKLY_ENTRIES: usize = 8;

pub struct Blog {
    pub store: Store,
    pub config: Arc<Config>,
    pub renderer: Renderer,
    pages: PageCache,
    reads: Arc<ReadCounter>,
    /// Stands in for the read count in cached pages.
    marker: String,
    /// Sign-up is served: the home page links to it.
    pub signup: bool,
}

impl Blog {
    pub fn new(store: Store, config: Arc<Config>, signup: bool) -> anyhow::Result<Blog> {
        let renderer = crate::templates::renderer(
            &config.digest.language,
            config.digest.templates_dir.as_deref(),
        )?;
        Ok(Blog {
            store,
            config,
            renderer,
            signup,
            pages: PageCache::default(),
            reads: Arc::default(),
            marker: count_marker(),
        })
    }
}

/// 24 digits from the clock and the process id, hashed: unknown to anything a page shows.
fn count_marker() -> String {
    use sha2::{Digest as _, Sha256};
    let seed = format!("{:?}/{}", std::time::SystemTime::now(), std::process::id());
    let hash = Sha256::digest(seed.as_bytes());
    hash.iter()
        .take(12)
        .map(|b| format!("{:02}", b % 100))
        .collect()
}

impl Blog {
    /// Writes the page views counted in memory; the daemon calls it on a timer and when it
    /// stops.
    pub async fn flush_reads(&self) -> anyhow::Result<()> {
        self.reads.flush(&self.store).await
    }
}

pub(super) fn failure(error: anyhow::Error) -> Response {
    tracing::error!(message = "Blog page failed", error = %format!("{error:#}"));
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

#[derive(Deserialize)]
pub struct PageQuery {
    page: Option<i64>,
}

pub async fn home(State(blog): State<Arc<Blog>>, Query(q): Query<PageQuery>) -> Response {
    let page = q.page.unwrap_or(1).max(1);
    let result = async {
        let total = blog.store.digest_count().await?;
        let last_page = ((total + PAGE_SIZE - 1) / PAGE_SIZE).max(1);
        // Past the end (or a number too large to multiply): there is no such page.
        if page > last_page {
            return Ok(None);
        }
        let mut digests = blog
            .store
            .digests_page((page - 1) * PAGE_SIZE, PAGE_SIZE)
            .await?;
        // Views not written yet count too, as on the digest pages.
        for (d, reads) in &mut digests {
            if let Some(shown) = blog.reads.shown(d.date) {
                *reads = shown;
            }
        }
        let newer = (page > 1).then_some(page - 1);
        let older = (page < last_page).then_some(page + 1);
        blog.renderer
            .home(&digests, newer, older, blog.signup)
            .map(Some)
    };
    match result.await {
        Ok(Some(body)) => html(StatusCode::OK, body),
        Ok(None) => not_found(&blog),
        Err(e) => failure(e),
    }
}

/// A 404 that is a page: what is missing and the way home.
pub(super) fn not_found(blog: &Blog) -> Response {
    let t = blog.renderer.locale();
    let page = crate::render::pages::AccountPage {
        title: t.get("not_found_title").to_string(),
        paragraphs: vec![t.get("not_found_text").to_string()],
        ..Default::default()
    };
    match blog.renderer.account_page(&page) {
        Ok(body) => html(StatusCode::NOT_FOUND, body),
        Err(e) => failure(e),
    }
}

#[derive(Deserialize)]
pub struct DigestQuery {
    layers: Option<String>,
    min_score: Option<f64>,
}

pub async fn digest_page(
    State(blog): State<Arc<Blog>>,
    Path(date): Path<String>,
    Query(q): Query<DigestQuery>,
) -> Response {
    let Ok(date) = NaiveDate::parse_from_str(&date, "%Y-%m-%d") else {
        return not_found(&blog);
    };
    // The filtered view asked for, normalised: unknown layers dropped, a threshold outside
    // 0-100 read as 0. It is also the cache key, so equivalent queries share one render.
    let view = (q.layers.is_some() || q.min_score.is_some()).then(|| {
        let valid = blog.config.layer_names();
        let layers: BTreeSet<String> = q
            .layers
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|l| valid.contains(l))
            .map(str::to_string)
            .collect();
        let min_score = q
            .min_score
            .and_then(Score::parse_threshold)
            .unwrap_or_default();
        Filter {
            layers,
            min_score,
            boost: None,
            follows: Vec::new(),
        }
    });
    let key = view.as_ref().map_or_else(String::new, |f| {
        let layers: Vec<&str> = f.layers.iter().map(String::as_str).collect();
        format!("{}|{}", layers.join(","), f.min_score.tenths())
    });
    let result = async {
        // Count first: an unknown date is a 404 before any rendering.
        let Some(reads) = blog.reads.record(&blog.store, date).await? else {
            return Ok(None);
        };
        if let Some(page) = blog.pages.get(date, &key) {
            return Ok(Some(page.with_reads(reads)));
        }
        let Some(mut digest) = blog.store.load_digest(date).await? else {
            return Ok(None);
        };
        if let Some(f) = &view {
            digest = filter(&digest, f, blog.renderer.locale());
        }
        // Rendered once with a stand-in for the count: digits drawn at start, so no feed or
        // LLM text can know them.
        let page = Arc::new(CachedPage::new(
            blog.renderer.page(&digest, &blog.marker)?,
            &blog.marker,
        ));
        blog.pages.put(date, &key, page.clone());
        Ok(Some(page.with_reads(reads)))
    };
    match result.await {
        Ok(Some(body)) => html(StatusCode::OK, body),
        Ok(None) => not_found(&blog),
        // The store is unreachable (a Postgres restart): a page rendered before is still
        // the digest of that day; serve it, with the count this instance last knew.
        Err(e) if crate::store::is_busy(&e) => match blog.pages.stale(date, &key) {
            Some(page) => html(
                StatusCode::OK,
                page.with_reads(blog.reads.shown(date).unwrap_or(0)),
            ),
            None => failure(e),
        },
        Err(e) => failure(e),
    }
}

/// Atom 1.0: one entry per digest, newest first.
pub async fn feed(State(blog): State<Arc<Blog>>) -> Response {
    let base = blog.config.web.public_url.clone();
    let result = async {
        let digests = blog.store.digests_page(0, FEED_ENTRIES).await?;
        let t = blog.renderer.locale();
        let entries = digests
            .iter()
            .map(|(d, _)| {
                Ok(AtomEntry {
                    id: base.join(&format!("digest/{}", d.date))?.to_string(),
                    link: base.join(&format!("digest/{}", d.date))?.to_string(),
                    title: d.title.clone(),
                    updated: d.window.end.to_rfc3339(),
                    summary: d.overview.clone(),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        anyhow::Ok(atom(
            t.get("blog_title"),
            t.get("blog_tagline"),
            base.as_str(),
            base.join("feed.xml")?.as_str(),
            &entries,
        ))
    };
    match result.await {
        Ok(xml) => atom_response(xml),
        Err(e) => failure(e),
    }
}

/// The roll-up of one ISO week, made from its stored dailies as `kdigest digest --week`
/// makes it; None when none of its days has a digest.
async fn roll_up(
    blog: &Blog,
    week: crate::weekly::Week,
) -> anyhow::Result<Option<crate::model::Digest>> {
    let (digest, _) = crate::pipeline::roll_up(
        &blog.store,
        week,
        blog.config.digest.key_changes,
        blog.renderer.locale(),
        None,
    )
    .await?;
    Ok(digest)
}

pub async fn week_page(State(blog): State<Arc<Blog>>, Path(week): Path<String>) -> Response {
    let Ok(week) = crate::weekly::Week::parse(&week) else {
        return not_found(&blog);
    };
    // A roll-up reads its seven dailies: cached like a day's page (keyed by the week's
    // Monday), so a busy week page costs one roll-up per PAGE_TTL.
    let monday = week.days()[0];
    let result = async {
        if let Some(page) = blog.pages.get(monday, WEEK_PAGE) {
            return Ok(Some(page.with_reads(0)));
        }
        let Some(digest) = roll_up(&blog, week).await? else {
            return Ok(None);
        };
        let mut pages = blog.renderer.render(&digest, crate::render::Format::Html)?;
        let Some(html) = pages.pop() else {
            return Ok(None);
        };
        let page = Arc::new(CachedPage::new(html, &blog.marker));
        blog.pages.put(monday, WEEK_PAGE, page.clone());
        anyhow::Ok(Some(page.with_reads(0)))
    };
    match result.await {
        Ok(Some(body)) => html(StatusCode::OK, body),
        Ok(None) => not_found(&blog),
        Err(e) => failure(e),
    }
}

/// The page cache's keys for the weekly views: a week's page under its Monday, the feed
/// under the first day there is.
const WEEK_PAGE: &str = "week";
const WEEKLY_FEED: &str = "weekly.xml";

/// Atom 1.0: one entry per ISO week that has stored dailies, newest first. Made of up to
/// eight roll-ups, so cached for PAGE_TTL like a page.
pub async fn weekly_feed(State(blog): State<Arc<Blog>>) -> Response {
    if let Some(xml) = blog.pages.get(NaiveDate::MIN, WEEKLY_FEED) {
        return atom_response(xml.with_reads(0));
    }
    let base = blog.config.web.public_url.clone();
    let result = async {
        let recent = blog
            .store
            .digests_page(0, (WEEKLY_ENTRIES * 7) as i64)
            .await?;
        let mut weeks: Vec<crate::weekly::Week> = Vec::new();
        for (d, _) in &recent {
            let week = crate::weekly::Week::of(d.date);
            if !weeks.contains(&week) && weeks.len() < WEEKLY_ENTRIES {
                weeks.push(week);
            }
        }
        let mut entries = Vec::new();
        for week in weeks {
            let Some(digest) = roll_up(&blog, week).await? else {
                continue;
            };
            let url = base.join(&format!("week/{week}"))?.to_string();
            entries.push(AtomEntry {
                id: url.clone(),
                link: url,
                // "2026-W44 · …": a roll-up's title is made like a day's.
                title: crate::render::dated_title(&digest),
                updated: digest.window.end.to_rfc3339(),
                summary: digest.overview.clone(),
            });
        }
        let t = blog.renderer.locale();
        anyhow::Ok(atom(
            &format!("{} · {}", t.get("blog_title"), t.get("weekly_feed")),
            t.get("blog_tagline"),
            base.as_str(),
            base.join("weekly.xml")?.as_str(),
            &entries,
        ))
    };
    match result.await {
        Ok(xml) => {
            blog.pages.put(
                NaiveDate::MIN,
                WEEKLY_FEED,
                Arc::new(CachedPage::new(xml.clone(), &blog.marker)),
            );
            atom_response(xml)
        }
        Err(e) => failure(e),
    }
}

/// One entry of an Atom feed; every field is plain text, escaped by [`atom`].
pub(super) struct AtomEntry {
    pub id: String,
    pub link: String,
    pub title: String,
    /// RFC 3339.
    pub updated: String,
    pub summary: String,
}

/// An Atom 1.0 document: its id is the alternate (HTML) page; updated is the newest
/// entry's (the epoch for an empty feed).
pub(super) fn atom(
    title: &str,
    subtitle: &str,
    alternate: &str,
    self_url: &str,
    entries: &[AtomEntry],
) -> String {
    let updated = entries
        .iter()
        .map(|e| e.updated.as_str())
        .max()
        .unwrap_or("1970-01-01T00:00:00Z");
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\">\n<id>{}</id>\n<title>{}</title>\n<subtitle>{}</subtitle>\n<updated>{updated}</updated>\n<link rel=\"self\" href=\"{}\"/>\n<link rel=\"alternate\" href=\"{}\"/>\n",
        escape_html(alternate),
        escape_html(title),
        escape_html(subtitle),
        escape_html(self_url),
        escape_html(alternate),
    );
    for e in entries {
        xml.push_str(&format!(
            "<entry>\n<id>{}</id>\n<title>{}</title>\n<updated>{}</updated>\n<link rel=\"alternate\" href=\"{}\"/>\n<author><name>kdigest</name></author>\n<summary>{}</summary>\n</entry>\n",
            escape_html(&e.id),
            escape_html(&e.title),
            escape_html(&e.updated),
            escape_html(&e.link),
            escape_html(&e.summary)
        ));
    }
    xml.push_str("</feed>\n");
    xml
}

pub(super) fn atom_response(xml: String) -> Response {
    (
        [(header::CONTENT_TYPE, "application/atom+xml; charset=utf-8")],
        xml,
    )
        .into_response()
}
