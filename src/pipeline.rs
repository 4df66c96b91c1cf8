//! One digest, end to end: fetch -> parse -> store items -> window -> cluster/classify/score
//! -> summarize -> assemble -> store the digest. The I/O steps live here; everything they
//! call in between is pure.

use chrono::{DateTime, NaiveDate, Utc};

use crate::classify::Classifier;
use crate::config::Config;
use crate::digest::{self, Assembly};
use crate::fetch::{FetchOutcome, Fetcher};
use crate::locale::Locale;
use crate::model::{Digest, FailedSource, FailureKind, Window};
use crate::parse::parse_feed;
use crate::store::Store;
use crate::summarize;

/// Too few sources answered: the run stores and delivers nothing (exit 1), so a network
/// outage never goes out as a quiet day. Sources that answered with nothing new count as
/// answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcesFailed {
    pub answered: usize,
    pub total: usize,
    pub failed: Vec<FailedSource>,
}

impl std::fmt::Display for SourcesFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.answered == 0 {
            write!(f, "Every source failed ({} of {})", self.total, self.total)?;
        } else {
            write!(
                f,
                "Only {} of {} sources answered (fewer than fetch.min_success_share)",
                self.answered, self.total
            )?;
        }
        write!(f, "; no digest was stored or delivered. Failed sources:")?;
        for s in &self.failed {
            write!(f, "\n  - {}: {}", s.source, s.error)?;
        }
        write!(
            f,
            "\nCheck the network and the source URLs, then run again (the daemon retries by itself)"
        )
    }
}

impl std::error::Error for SourcesFailed {}

/// The check itself: `Err` when the run must stop.
pub fn enough_sources(
    config: &Config,
    failed: Vec<FailedSource>,
) -> Result<Vec<FailedSource>, SourcesFailed> {
    let total = config.sources.len();
    let answered = total - failed.len().min(total);
    let share = if total == 0 {
        1.0
    } else {
        answered as f64 / total as f64
    };
    if total > 0 && (answered == 0 || share < config.fetch.min_success_share) {
        return Err(SourcesFailed {
            answered,
            total,
            failed,
        });
    }
    Ok(failed)
}

/// Progress callbacks for a terminal; the daemon passes none.
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

/// Fetches every source and records items and source state. Returns the sources that
/// failed, each with an error message that names the problem.
pub async fn refresh_sources(
    config: &Config,
    store: &Store,
    progress: Progress<'_>,
) -> anyhow::Result<Vec<FailedSource>> {
    let fetcher = Fetcher::new(&config.fetch)?;
    // A source that keeps failing waits (sources::backoff); its earlier items still count
    // and the digest's notes say why it was not fetched.
    let health = store.source_health().await?;
    let now = Utc::now();
    let mut failed = Vec::new();
    let mut due = Vec::with_capacity(config.sources.len());
    for source in &config.sources {
        let h = health.iter().find(|h| h.source == source.name);
        let next = h.and_then(|h| {
            crate::sources::backoff::next_try(h.consecutive_failures, h.last_attempt_at)
        });
        match (h, next) {
            (Some(h), Some(next)) if next > now => failed.push(FailedSource {
                source: source.name.clone(),
                error: format!(
                    "Not fetched: {} failures in a row (last: {}); next try after {}",
                    h.consecutive_failures,
                    h.last_error.as_deref().unwrap_or("unknown"),
                    next.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
                kind: FailureKind::BackingOff,
            }),
            _ => due.push(source.clone()),
        }
    }
    let mut validators = Vec::with_capacity(due.len());
    for source in &due {
        validators.push(store.validators(&source.name).await?);
    }
    let results = fetcher.fetch_all(&due, &validators, progress).await;
    for (source, result) in due.iter().zip(results) {
        let (error, kind) = match result.outcome {
            Ok(FetchOutcome::NotModified) => {
                tracing::info!(message = "Source not modified", source = %source.name);
                store
                    .record_fetch_success(&source.name, None, result.fetched_at)
                    .await?;
                continue;
            }
            Ok(FetchOutcome::Fetched { body, validators }) => {
                // Parsing and sanitising a large feed is CPU work: off the async threads.
                let (owned, at) = (source.clone(), result.fetched_at);
                // And within a budget: a feed that would take longer fails alone (the parse
                // finishes in the background; the run does not wait for it).
                // A parse that finished but took longer than the budget fails too: the
                // answer must not depend on when the timer was first looked at.
                let budget = config.fetch.parse_budget;
                let over = (
                    format!(
                        "Parsing took longer than {:.1} s (fetch.parse_budget_secs); the feed is too large or too deeply nested",
                        budget.as_secs_f64()
                    ),
                    FailureKind::TooLarge,
                );
                let started = std::time::Instant::now();
                let parse = tokio::task::spawn_blocking(move || {
                    let items = parse_feed(&body, &owned, at);
                    (items, started.elapsed())
                });
                let parsed = match tokio::time::timeout(budget, parse).await {
                    Ok(joined) => match joined? {
                        (_, took) if took > budget => Err(over),
                        (items, _) => items.map_err(|e| (e.to_string(), e.kind())),
                    },
                    Err(_) => Err(over),
                };
                match parsed {
                    Ok(items) => {
                        tracing::info!(message = "Source fetched", source = %source.name, items = items.len());
                        store.upsert_items(&items, result.fetched_at).await?;
                        store
                            .record_fetch_success(
                                &source.name,
                                Some(&validators),
                                result.fetched_at,
                            )
                            .await?;
                        continue;
                    }
                    Err(failure) => failure,
                }
            }
            Err(e) => (e.to_string(), e.kind()),
        };
        tracing::warn!(message = "Source failed", source = %source.name, error = %error);
        store
            .record_fetch_failure(&source.name, &error, result.fetched_at)
            .await?;
        failed.push(FailedSource {
            source: source.name.clone(),
            error,
            kind,
        });
    }
    Ok(failed)
}

/// Builds the digest dated `date` over `window` from what the store holds (after
/// `refresh_sources`) and saves it when the window is over. `now` is when the run happens;
/// the core never reads the clock itself.
pub async fn build_digest(
    config: &Config,
    store: &Store,
    date: NaiveDate,
    window: Window,
    failed: Vec<FailedSource>,
    now: DateTime<Utc>,
) -> anyhow::Result<Digest> {
    let names: Vec<String> = config.sources.iter().map(|s| s.name.clone()).collect();
    let items = store.items_in_window(&names, &window).await?;
    let source_counts = digest::count_by_source(&items, config, &failed);
    // Clustering, classifying and scoring thousands of items is CPU work: off the async
    // threads, so the web server and the delivery workers keep answering.
    let mut all = {
        let (config, window) = (config.clone(), window.clone());
        tokio::task::spawn_blocking(move || {
            let classifier = Classifier::new(&config.layers, &config.relevance);
            digest::candidates(items, &window, &config, &classifier)
        })
        .await?
    };
    let rank_usage = summarize::rank(&mut all, config, store).await?;
    let mut candidates = digest::eligible(all, config);
    // Linked to the stories of recent digests before anything is written about them: a
    // repeat is left out before it costs an LLM request.
    let links = if config.digest.follow_up_days > 0 {
        let earlier = store
            .digests_between(
                date - chrono::Days::new(config.digest.follow_up_days as u64),
                date,
            )
            .await?;
        crate::followup::link(&candidates, &earlier)
    } else {
        crate::followup::Links::default()
    };
    candidates.retain(|c| !links.is_repeat(&c.event.id));
    let locale = crate::templates::locale(
        &config.digest.language,
        config.digest.templates_dir.as_deref(),
    )?;
    let mut summaries = summarize::summarize(&candidates, config, &locale, store).await?;
    summaries.usage = crate::model::LlmUsage::sum(summaries.usage, rank_usage);
    summaries.other_languages = summarize::other_languages(&candidates, config)?;
    let end = window.end;
    let mut digest = digest::assemble(
        &candidates,
        &summaries,
        Assembly {
            date,
            window,
            config,
            locale: &locale,
            source_counts,
            failed_sources: failed,
        },
    );
    crate::followup::mark(&mut digest, links);
    // A window that has not ended yet gives a partial digest: shown, never stored, so a
    // later request for that date builds the complete one.
    if end.to_utc() <= now {
        store.save_digest(&digest, now).await?;
    } else {
        tracing::warn!(message = "Window not over yet; the digest is partial and not stored", end = %end);
    }
    Ok(digest)
}

/// Fetch and build the digest dated `date` (its configured window): what `digest --force`
/// and `demo` run.
pub async fn generate(
    config: &Config,
    store: &Store,
    date: NaiveDate,
    progress: Progress<'_>,
) -> anyhow::Result<Digest> {
    generate_window(
        config,
        store,
        date,
        digest::window_for(date, config),
        progress,
    )
    .await
}

/// Fetch and build over an explicit window: the scheduler's run at T covers the window
/// that ends at T.
pub async fn generate_window(
    config: &Config,
    store: &Store,
    date: NaiveDate,
    window: Window,
    progress: Progress<'_>,
) -> anyhow::Result<Digest> {
    summarize::check_ready(config)?;
    let failed = enough_sources(config, refresh_sources(config, store, progress).await?)?;
    build_digest(config, store, date, window, failed, Utc::now()).await
}

/// A week's roll-up from its stored dailies (`crate::weekly::roll_up`), and the days of the
/// week that have no stored digest. None when no day has one. `newest`, a daily in hand
/// (the one being planned), stands in for the stored one of its date.
pub async fn roll_up(
    store: &Store,
    week: crate::weekly::Week,
    key_changes: usize,
    locale: &Locale,
    newest: Option<&Digest>,
) -> anyhow::Result<(Option<Digest>, Vec<NaiveDate>)> {
    let days = week.days();
    let mut dailies = store
        .digests_between(days[0], days[6] + chrono::Days::new(1))
        .await?;
    if let Some(n) = newest {
        dailies.retain(|d| d.date != n.date);
        dailies.push(n.clone());
    }
    let missing = days
        .into_iter()
        .filter(|d| !dailies.iter().any(|x| x.date == *d))
        .collect();
    Ok((
        crate::weekly::roll_up(week, &dailies, key_changes, locale),
        missing,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(n: usize) -> Vec<FailedSource> {
        (0..n)
            .map(|i| FailedSource {
                source: format!("s{i}"),
                error: "timed out".into(),
                kind: FailureKind::Unreachable,
            })
            .collect()
    }

    #[test]
    fn too_few_sources_answering_stops_the_run() {
        let mut config = Config::parse("").unwrap();
        let total = config.sources.len();
        assert!(total >= 4);
        assert!(
            enough_sources(&config, failed(total - 1)).is_ok(),
            "one answered"
        );
        let all = enough_sources(&config, failed(total)).unwrap_err();
        assert_eq!((all.answered, all.total), (0, total));
        assert!(all.to_string().starts_with("Every source failed"));
        config.fetch.min_success_share = 0.5;
        let few = enough_sources(&config, failed(total - 1)).unwrap_err();
        assert!(few.to_string().starts_with("Only 1 of"), "{few}");
        assert!(enough_sources(&config, failed(total / 2)).is_ok());
    }
}
