//! `kdigest store copy`: moves everything a kdigest keeps from one store to another
//! (SQLite to Postgres when a community outgrows one machine), table by table in batches,
//! streaming the source so a million rows are never held at once, then compares counts.

use chrono::{DateTime, NaiveDate, Utc};
use futures::TryStreamExt;

use super::Store;

/// Rows per INSERT: the widest table has 14 columns, 14,000 parameters fit both engines.
const BATCH: usize = 1_000;

/// What a copy moved, table by table: (table, rows in the source, rows in the target).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub tables: Vec<(&'static str, i64, i64)>,
}

/// The tables copied, parents before children (deliveries refer to subscribers). Leases,
/// instances, budgets, handled updates and sign-up counters describe running processes and
/// start empty.
const TABLES: &[&str] = &[
    "source_state",
    "items",
    "digests",
    "llm_cache",
    "subscribers",
    "deliveries",
    "votes",
    "destinations",
];

/// Streams the named columns of `$table` from `$from` as tuples (one name and type each)
/// and inserts them into `$to` in batches. Rows the target has already are kept (ON
/// CONFLICT DO NOTHING).
macro_rules! copy_table {
    ($from:expr, $to:expr, $table:literal, ($($field:ident: $t:ty),+)) => {{
        let columns = [$(stringify!($field)),+].join(", ");
        let select = format!("SELECT {columns} FROM {}", $table);
        let insert = format!("INSERT INTO {} ({columns}) ", $table);
        on_db!(&$from.db, src => {
            let mut rows = sqlx::query_as::<_, ($($t,)+)>(&select).fetch(src);
            let mut batch: Vec<($($t,)+)> = Vec::with_capacity(BATCH);
            loop {
                let next = rows.try_next().await?;
                let done = next.is_none();
                batch.extend(next);
                if batch.len() == BATCH || (done && !batch.is_empty()) {
                    on_db!(&$to.db, dst => {
                        let mut query = sqlx::QueryBuilder::new(&insert);
                        query.push_values(batch.iter(), |mut row, ($($field,)+)| {
                            row$(.push_bind($field))+;
                        });
                        query.push(" ON CONFLICT DO NOTHING");
                        query.build().execute(dst).await?;
                    });
                    batch.clear();
                }
                if done {
                    break;
                }
            }
        });
    }};
}

/// Copies every table of `from` into `to`. A target that holds subscribers, digests or
/// deliveries already is refused unless `into_non_empty` (then its rows are kept and the
/// source's are added beside them).
pub async fn copy_store(
    from: &Store,
    to: &Store,
    into_non_empty: bool,
) -> anyhow::Result<CopyReport> {
    let before = to.table_counts().await?;
    let occupied: Vec<String> = before
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(t, n)| format!("{t} ({n} rows)"))
        .collect();
    if !occupied.is_empty() && !into_non_empty {
        anyhow::bail!(
            "The target store is not empty: {}. Copy into an empty database, or pass --into-non-empty to keep its rows and add the source's",
            occupied.join(", ")
        );
    }
    copy_table!(from, to, "source_state", (source: String, etag: Option<String>, last_modified: Option<String>, last_success_at: Option<DateTime<Utc>>, last_attempt_at: Option<DateTime<Utc>>, last_error: Option<String>, consecutive_failures: i64));
    copy_table!(from, to, "items", (source: String, item_key: String, published_ts: i64, first_seen_at: DateTime<Utc>, data: String));
    copy_table!(from, to, "digests", (digest_date: NaiveDate, generated_at: DateTime<Utc>, generation_mode: String, window_start: DateTime<Utc>, window_end: DateTime<Utc>, data: String, reads: i64));
    copy_table!(from, to, "llm_cache", (model: String, prompt_hash: String, reply: String, created_at: DateTime<Utc>));
    copy_table!(from, to, "subscribers", (id: i64, address: String, channel: String, layers: String, min_score: i64, language: String, status: String, status_reason: Option<String>, notify_empty: bool, created_at: DateTime<Utc>, updated_at: DateTime<Utc>, options: Option<String>, deliver_at: Option<String>, cadence: String, boost_layers: Option<String>, follows: Option<String>));
    copy_table!(from, to, "deliveries", (id: String, digest_date: NaiveDate, subscriber_id: i64, channel: String, status: String, attempts: i64, parts_sent: i64, next_attempt_at: i64, last_error: Option<String>, created_at: DateTime<Utc>, sent_at: Option<DateTime<Utc>>, destination: String, claim_token: Option<String>, claim_expires_at: Option<i64>, edition: String));
    copy_table!(from, to, "votes", (event_id: String, reader: String, subscriber_id: Option<i64>, vote: i64, voted_at: DateTime<Utc>));
    copy_table!(from, to, "destinations", (channel: String, key: String, paused_until: i64, reason: String));
    to.after_copy().await?;

    let source = from.table_counts().await?;
    let target = to.table_counts().await?;
    let mut report = CopyReport::default();
    let mut short = Vec::new();
    for (((table, s), (_, t)), (_, b)) in source.iter().zip(&target).zip(&before) {
        report.tables.push((table, *s, *t));
        // Every source row is in the target: exactly, or beside the rows it had.
        let expected = if into_non_empty { *s.max(b) } else { *s };
        if (into_non_empty && *t < expected) || (!into_non_empty && *t != expected) {
            short.push(format!("{table}: {s} in the source, {t} in the target"));
        }
    }
    if !short.is_empty() {
        anyhow::bail!("The copy does not match: {}", short.join("; "));
    }
    Ok(report)
}

impl Store {
    /// Rows per copied table, in [`TABLES`] order.
    pub async fn table_counts(&self) -> anyhow::Result<Vec<(&'static str, i64)>> {
        let mut counts = Vec::with_capacity(TABLES.len());
        for table in TABLES {
            let sql = format!("SELECT COUNT(*) FROM {table}");
            let n: i64 = on_db!(&self.db, pool => sqlx::query_scalar(&sql).fetch_one(pool).await?);
            counts.push((*table, n));
        }
        Ok(counts)
    }

    /// Ids inserted by hand leave Postgres's identity behind: new subscribers would collide
    /// with copied ones. SQLite's AUTOINCREMENT follows inserted ids by itself.
    async fn after_copy(&self) -> anyhow::Result<()> {
        if let super::Db::Postgres(pool) = &self.db {
            sqlx::query(
                "SELECT setval(pg_get_serial_sequence('subscribers', 'id'),
                               (SELECT COALESCE(MAX(id), 0) + 1 FROM subscribers), false)",
            )
            .execute(pool)
            .await?;
        }
        // The archive rows are derived from the digests: built here, not copied.
        self.reindex_archive().await?;
        Ok(())
    }
}
