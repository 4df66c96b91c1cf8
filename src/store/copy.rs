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
    "destinations",
];

/// Streams `$columns` of `$table` from `$from` as tuples of `$types` and inserts them into
/// `$to` in batches, each row bound by `$bind` (`|row, (a, b, ..)| row.push_bind(a)...`).
/// Rows the target has already are kept (ON CONFLICT DO NOTHING).
macro_rules! copy_table {
    ($from:expr, $to:expr, $table:literal, $columns:literal, ($($t:ty),+), |$row:ident, $pat:pat_param| $bind:expr) => {{
        let select = concat!("SELECT ", $columns, " FROM ", $table);
        let insert = concat!("INSERT INTO ", $table, " (", $columns, ") ");
        on_db!(&$from.db, src => {
            let mut rows = sqlx::query_as::<_, ($($t,)+)>(select).fetch(src);
            let mut batch: Vec<($($t,)+)> = Vec::with_capacity(BATCH);
            loop {
                let next = rows.try_next().await?;
                let done = next.is_none();
                batch.extend(next);
                if batch.len() == BATCH || (done && !batch.is_empty()) {
                    on_db!(&$to.db, dst => {
                        let mut query = sqlx::QueryBuilder::new(insert);
                        query.push_values(batch.iter(), |mut $row, $pat| {
                            $bind;
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
    copy_table!(
        from,
        to,
        "source_state",
        "source, etag, last_modified, last_success_at, last_attempt_at, last_error, consecutive_failures",
        (
            String,
            Option<String>,
            Option<String>,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
            Option<String>,
            i64
        ),
        |row, (a, b, c, d, e, f, g)| row
            .push_bind(a)
            .push_bind(b)
            .push_bind(c)
            .push_bind(d)
            .push_bind(e)
            .push_bind(f)
            .push_bind(g)
    );
    copy_table!(
        from,
        to,
        "items",
        "source, item_key, published_ts, first_seen_at, data",
        (String, String, i64, DateTime<Utc>, String),
        |row, (a, b, c, d, e)| row
            .push_bind(a)
            .push_bind(b)
            .push_bind(c)
            .push_bind(d)
            .push_bind(e)
    );
    copy_table!(
        from,
        to,
        "digests",
        "digest_date, generated_at, generation_mode, window_start, window_end, data, reads",
        (
            NaiveDate,
            DateTime<Utc>,
            String,
            DateTime<Utc>,
            DateTime<Utc>,
            String,
            i64
        ),
        |row, (a, b, c, d, e, f, g)| row
            .push_bind(a)
            .push_bind(b)
            .push_bind(c)
            .push_bind(d)
            .push_bind(e)
            .push_bind(f)
            .push_bind(g)
    );
    copy_table!(
        from,
        to,
        "llm_cache",
        "model, prompt_hash, reply, created_at",
        (String, String, String, DateTime<Utc>),
        |row, (a, b, c, d)| row.push_bind(a).push_bind(b).push_bind(c).push_bind(d)
    );
    copy_table!(
        from,
        to,
        "subscribers",
        "id, address, channel, layers, min_score, language, status, status_reason, notify_empty, created_at, updated_at",
        (
            i64,
            String,
            String,
            String,
            i64,
            String,
            String,
            Option<String>,
            bool,
            DateTime<Utc>,
            DateTime<Utc>
        ),
        |row, (a, b, c, d, e, f, g, h, i, j, k)| row
            .push_bind(a)
            .push_bind(b)
            .push_bind(c)
            .push_bind(d)
            .push_bind(e)
            .push_bind(f)
            .push_bind(g)
            .push_bind(h)
            .push_bind(i)
            .push_bind(j)
            .push_bind(k)
    );
    copy_table!(
        from,
        to,
        "deliveries",
        "id, digest_date, subscriber_id, channel, status, attempts, parts_sent, next_attempt_at, last_error, created_at, sent_at, destination, claim_token, claim_expires_at",
        (
            String,
            NaiveDate,
            i64,
            String,
            String,
            i64,
            i64,
            i64,
            Option<String>,
            DateTime<Utc>,
            Option<DateTime<Utc>>,
            String,
            Option<String>,
            Option<i64>
        ),
        |row, (a, b, c, d, e, f, g, h, i, j, k, l, m, n)| row
            .push_bind(a)
            .push_bind(b)
            .push_bind(c)
            .push_bind(d)
            .push_bind(e)
            .push_bind(f)
            .push_bind(g)
            .push_bind(h)
            .push_bind(i)
            .push_bind(j)
            .push_bind(k)
            .push_bind(l)
            .push_bind(m)
            .push_bind(n)
    );
    copy_table!(
        from,
        to,
        "destinations",
        "channel, key, paused_until, reason",
        (String, String, i64, String),
        |row, (a, b, c, d)| row.push_bind(a).push_bind(b).push_bind(c).push_bind(d)
    );
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
        Ok(())
    }
}
