//! Each configured source's health as the store knows it: last success and attempt,
//! failures in a row, whether it is backed off and until when, items of the last 7 days.
//! `kdigest sources list` prints it; the MCP tool `list_sources` answers it.

use chrono::{DateTime, Utc};

use crate::config::{Config, SourceConfig};
use crate::store::{SourceHealth, Store};

/// One source with what the store knows of it.
pub struct SourceStatus<'c> {
    pub source: &'c SourceConfig,
    /// None when it was never fetched.
    pub health: Option<SourceHealth>,
    /// When the next run may try it again, if that is later than now.
    pub backed_off_until: Option<DateTime<Utc>>,
    pub items_last_7_days: i64,
}

/// Every configured source, in configuration order; `store` None (no database yet): none
/// fetched.
pub async fn statuses<'c>(
    config: &'c Config,
    store: Option<&Store>,
    now: DateTime<Utc>,
) -> anyhow::Result<Vec<SourceStatus<'c>>> {
    let (health, counts) = match store {
        Some(store) => (
            store.source_health().await?,
            store
                .item_counts_since(now - chrono::Duration::days(7))
                .await?,
        ),
        None => Default::default(),
    };
    Ok(config
        .sources
        .iter()
        .map(|source| {
            let health = health.iter().find(|h| h.source == source.name).cloned();
            let backed_off_until = health
                .as_ref()
                .and_then(|h| super::backoff::next_try(h.consecutive_failures, h.last_attempt_at))
                .filter(|t| *t > now);
            SourceStatus {
                source,
                health,
                backed_off_until,
                items_last_7_days: counts.get(&source.name).copied().unwrap_or(0),
            }
        })
        .collect())
}
