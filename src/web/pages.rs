//! What makes `/digest/{date}` cheap: rendered pages cached for a short time, and page views
//! counted in memory and added to SQLite in batches.
//!
//! A page is rendered once per (date, filter) and kept for [`PAGE_TTL`], split around its
//! read count, so serving it is two string copies and a number. A digest stored again (a
//! re-run) shows after at most [`PAGE_TTL`].
//!
//! Views are added to the database every [`FLUSH_EVERY`] (one UPDATE per digest, not one per
//! view: the daemon runs a flush timer, and a view starts a flush when the last one is that
//! old) and when the daemon stops. The count shown is the stored count plus the views not
//! yet written, so readers see every view at once; a crash loses at most the views of the
//! last [`FLUSH_EVERY`]. A failed write keeps the views pending for the next flush.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::NaiveDate;

use crate::store::Store;

pub const PAGE_TTL: Duration = Duration::from_secs(30);
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);
/// Beyond this many cached views (dates x filters) the cache starts over.
const MAX_PAGES: usize = 512;

/// A rendered page, split where its read count goes (`after` is None when a custom template
/// shows no count).
pub struct CachedPage {
    before: String,
    after: Option<String>,
    rendered: Instant,
}

impl CachedPage {
    /// Splits `html` at `mark`, the stand-in the page was rendered with for the count.
    pub fn new(html: String, mark: &str) -> CachedPage {
        let (before, after) = match html.split_once(mark) {
            Some((b, a)) => (b.to_string(), Some(a.to_string())),
            None => (html, None),
        };
        CachedPage {
            before,
            after,
            rendered: Instant::now(),
        }
    }

    pub fn with_reads(&self, reads: i64) -> String {
        let Some(after) = &self.after else {
            return self.before.clone();
        };
        let n = reads.to_string();
        let mut out = String::with_capacity(self.before.len() + n.len() + after.len());
        out.push_str(&self.before);
        out.push_str(&n);
        out.push_str(after);
        out
    }
}

/// (date, normalised filter query) -> page.
type PageKey = (NaiveDate, String);

#[derive(Default)]
pub struct PageCache {
    pages: Mutex<HashMap<PageKey, Arc<CachedPage>>>,
}

impl PageCache {
    pub fn get(&self, date: NaiveDate, filter: &str) -> Option<Arc<CachedPage>> {
        let pages = self.pages.lock().expect("page cache lock");
        pages
            .get(&(date, filter.to_string()))
            .filter(|p| p.rendered.elapsed() < PAGE_TTL)
            .cloned()
    }

    /// The page however old, for when the store cannot be asked (the page of a stored
    /// digest changes only when the day is re-run).
    pub fn stale(&self, date: NaiveDate, filter: &str) -> Option<Arc<CachedPage>> {
        let pages = self.pages.lock().expect("page cache lock");
        pages.get(&(date, filter.to_string())).cloned()
    }

    pub fn put(&self, date: NaiveDate, filter: &str, page: Arc<CachedPage>) {
        let mut pages = self.pages.lock().expect("page cache lock");
        if pages.len() >= MAX_PAGES {
            pages.retain(|_, p| p.rendered.elapsed() < PAGE_TTL);
            if pages.len() >= MAX_PAGES {
                pages.clear();
            }
        }
        pages.insert((date, filter.to_string()), page);
    }
}

#[derive(Default, Clone, Copy)]
struct Count {
    /// The database's count when last read or written.
    stored: i64,
    /// Views being written right now.
    in_flight: i64,
    /// Views not written yet.
    pending: i64,
}

impl Count {
    fn shown(self) -> i64 {
        self.stored + self.in_flight + self.pending
    }
}

pub struct ReadCounter {
    counts: Mutex<HashMap<NaiveDate, Count>>,
    last_flush: Mutex<Instant>,
}

impl Default for ReadCounter {
    fn default() -> Self {
        ReadCounter {
            counts: Mutex::default(),
            last_flush: Mutex::new(Instant::now()),
        }
    }
}

impl ReadCounter {
    /// Counts one view; returns the count to show, or None when no digest has that date.
    /// Starts a background flush when the last one is [`FLUSH_EVERY`] old.
    pub async fn record(
        self: &Arc<Self>,
        store: &Store,
        date: NaiveDate,
    ) -> anyhow::Result<Option<i64>> {
        let known = {
            let mut counts = self.counts.lock().expect("read counter lock");
            counts.get_mut(&date).map(|c| {
                c.pending += 1;
                c.shown()
            })
        };
        let shown = match known {
            Some(shown) => shown,
            None => {
                let Some(stored) = store.digest_reads(date).await? else {
                    return Ok(None);
                };
                let mut counts = self.counts.lock().expect("read counter lock");
                let c = counts.entry(date).or_insert(Count {
                    stored,
                    ..Count::default()
                });
                c.pending += 1;
                c.shown()
            }
        };
        let due = {
            let mut last = self.last_flush.lock().expect("flush time lock");
            let due = last.elapsed() >= FLUSH_EVERY;
            if due {
                *last = Instant::now();
            }
            due
        };
        if due {
            let counter = self.clone();
            let store = store.clone();
            tokio::spawn(async move {
                if let Err(error) = counter.flush(&store).await {
                    tracing::warn!(message = "Cannot store page views; they stay counted in memory", error = %format!("{error:#}"));
                }
            });
        }
        Ok(Some(shown))
    }

    /// Adds the pending views to the database.
    pub async fn flush(&self, store: &Store) -> anyhow::Result<()> {
        let batch: Vec<(NaiveDate, i64)> = {
            let mut counts = self.counts.lock().expect("read counter lock");
            counts
                .iter_mut()
                .filter(|(_, c)| c.pending > 0)
                .map(|(date, c)| {
                    c.in_flight += c.pending;
                    let n = c.pending;
                    c.pending = 0;
                    (*date, n)
                })
                .collect()
        };
        let mut result = Ok(());
        for (date, n) in batch {
            // After a failed write the rest of the batch is not tried: it goes back to
            // pending with the failed date, for the next flush.
            let written = match result {
                Ok(()) => store.add_reads(date, n).await,
                Err(_) => Err(anyhow::anyhow!("not tried after an earlier failure")),
            };
            let mut counts = self.counts.lock().expect("read counter lock");
            let c = counts.entry(date).or_default();
            c.in_flight -= n;
            match written {
                Ok(stored) => c.stored = stored.unwrap_or(c.stored),
                Err(error) => {
                    c.pending += n;
                    if result.is_ok() {
                        result = Err(error);
                    }
                }
            }
        }
        result
    }

    /// The count shown for a date, when it has been viewed since the start.
    pub fn shown(&self, date: NaiveDate) -> Option<i64> {
        let counts = self.counts.lock().expect("read counter lock");
        counts.get(&date).map(|c| c.shown())
    }
}
