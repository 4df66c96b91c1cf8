//! Persistence. Every SQL statement of kdigest lives under this module; statements use `$N`
//! placeholders and portable SQL so a Postgres backend is an added module, not a rewrite.
//!
//! SQLite runs in WAL mode with a busy timeout, so a CLI invocation can read while the
//! daemon writes.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use crate::model::{Digest, Item, Validators, Window};

mod lease;
mod outbox;
mod subscribers;

pub use outbox::{Backlog, Claimed, DeliveryCounts, PlannedDelivery, Settled, WHOLE_CHANNEL};
pub use subscribers::{NewSubscriber, Signup};

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceHealth {
    pub source: String,
    pub last_success_at: Option<String>,
    pub last_error: Option<String>,
    pub consecutive_failures: i64,
}

impl Store {
    /// Opens (creating if needed) the database file and applies migrations.
    pub async fn open(path: &Path) -> anyhow::Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| {
                format!("Cannot create the storage directory {}", dir.display())
            })?;
        }
        // Two processes opening a fresh database at once raced on creating it (switching it
        // to WAL: "database is locked") and on the migrations ("table already exists"): they
        // take turns, from connecting to migrated, under an exclusive lock on a file beside it.
        let lock_path = path.with_extension("migrate.lock");
        let lock = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)?;
            file.lock()?;
            Ok(file)
        })
        .await?
        .context("Cannot lock the database for its migrations")?;
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .with_context(|| {
                format!("Cannot open the database {} (storage.path)", path.display())
            })?;
        let migrated = sqlx::migrate!("./migrations").run(&pool).await;
        drop(lock);
        migrated.context("Cannot apply database migrations")?;
        Ok(Store { pool })
    }

    pub async fn validators(&self, source: &str) -> anyhow::Result<Validators> {
        let row = sqlx::query("SELECT etag, last_modified FROM source_state WHERE source = $1")
            .bind(source)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map_or_else(Validators::default, |r| Validators {
            etag: r.get(0),
            last_modified: r.get(1),
        }))
    }

    /// Records a successful fetch (200 or 304). Validators are replaced only when given.
    pub async fn record_fetch_success(
        &self,
        source: &str,
        validators: Option<&Validators>,
        at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let at = at.to_rfc3339();
        sqlx::query(
            "INSERT INTO source_state (source, etag, last_modified, last_success_at, last_attempt_at, last_error, consecutive_failures)
             VALUES ($1, $2, $3, $4, $4, NULL, 0)
             ON CONFLICT (source) DO UPDATE SET
               etag = CASE WHEN $5 THEN excluded.etag ELSE source_state.etag END,
               last_modified = CASE WHEN $5 THEN excluded.last_modified ELSE source_state.last_modified END,
               last_success_at = excluded.last_success_at,
               last_attempt_at = excluded.last_attempt_at,
               last_error = NULL,
               consecutive_failures = 0",
        )
        .bind(source)
        .bind(validators.and_then(|v| v.etag.clone()))
        .bind(validators.and_then(|v| v.last_modified.clone()))
        .bind(&at)
        .bind(validators.is_some())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn record_fetch_failure(
        &self,
        source: &str,
        error: &str,
        at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO source_state (source, last_attempt_at, last_error, consecutive_failures)
             VALUES ($1, $2, $3, 1)
             ON CONFLICT (source) DO UPDATE SET
               last_attempt_at = excluded.last_attempt_at,
               last_error = excluded.last_error,
               consecutive_failures = source_state.consecutive_failures + 1",
        )
        .bind(source)
        .bind(at.to_rfc3339())
        .bind(error)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn source_health(&self) -> anyhow::Result<Vec<SourceHealth>> {
        let rows = sqlx::query(
            "SELECT source, last_success_at, last_error, consecutive_failures FROM source_state ORDER BY source",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| SourceHealth {
                source: r.get(0),
                last_success_at: r.get(1),
                last_error: r.get(2),
                consecutive_failures: r.get(3),
            })
            .collect())
    }

    /// Inserts new items and refreshes known ones. An item keeps the earliest time it was
    /// given, so an undated entry stays dated by when it was first seen.
    pub async fn upsert_items(&self, items: &[Item], seen_at: DateTime<Utc>) -> anyhow::Result<()> {
        let mut tx = self.pool.begin().await?;
        for item in items {
            sqlx::query(
                "INSERT INTO items (source, item_key, published_ts, first_seen_at, data)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (source, item_key) DO UPDATE SET
                   published_ts = CASE WHEN excluded.published_ts < items.published_ts
                                       THEN excluded.published_ts ELSE items.published_ts END,
                   data = excluded.data",
            )
            .bind(&item.source)
            .bind(&item.key)
            .bind(item.published.timestamp())
            .bind(seen_at.to_rfc3339())
            .bind(serde_json::to_string(item)?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Items of the given sources published inside the window, in (source, key) order.
    pub async fn items_in_window(
        &self,
        sources: &[String],
        window: &Window,
    ) -> anyhow::Result<Vec<Item>> {
        let rows = sqlx::query(
            "SELECT source, published_ts, data FROM items
             WHERE published_ts >= $1 AND published_ts < $2 ORDER BY source, item_key",
        )
        .bind(window.start.timestamp())
        .bind(window.end.timestamp())
        .fetch_all(&self.pool)
        .await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            let source: String = row.get(0);
            if !sources.contains(&source) {
                continue;
            }
            let mut item: Item =
                serde_json::from_str(row.get(2)).context("Stored item is not valid JSON")?;
            item.published = DateTime::from_timestamp(row.get(1), 0).unwrap_or(item.published);
            items.push(item);
        }
        Ok(items)
    }

    pub async fn save_digest(
        &self,
        digest: &Digest,
        generated_at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO digests (digest_date, generated_at, generation_mode, window_start, window_end, data)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (digest_date) DO UPDATE SET
               generated_at = excluded.generated_at, generation_mode = excluded.generation_mode,
               window_start = excluded.window_start, window_end = excluded.window_end, data = excluded.data",
        )
        .bind(digest.date.to_string())
        .bind(generated_at.to_rfc3339())
        .bind(&digest.generation_mode)
        .bind(digest.window.start.to_rfc3339())
        .bind(digest.window.end.to_rfc3339())
        .bind(serde_json::to_string(digest)?)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn load_digest(&self, date: NaiveDate) -> anyhow::Result<Option<Digest>> {
        let row = sqlx::query("SELECT data FROM digests WHERE digest_date = $1")
            .bind(date.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| digest_from_json(r.get(0))).transpose()
    }

    /// Stored digests, newest first: (date, digest, reads).
    pub async fn digests_page(
        &self,
        offset: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<(Digest, i64)>> {
        let rows = sqlx::query(
            "SELECT data, reads FROM digests ORDER BY digest_date DESC LIMIT $1 OFFSET $2",
        )
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((digest_from_json(r.get(0))?, r.get(1))))
            .collect()
    }

    pub async fn digest_count(&self) -> anyhow::Result<i64> {
        Ok(sqlx::query("SELECT COUNT(*) FROM digests")
            .fetch_one(&self.pool)
            .await?
            .get(0))
    }

    /// A digest's stored read count; None when no digest has that date.
    pub async fn digest_reads(&self, date: NaiveDate) -> anyhow::Result<Option<i64>> {
        let row = sqlx::query("SELECT reads FROM digests WHERE digest_date = $1")
            .bind(date.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Adds `n` page views to a digest; returns the new count.
    pub async fn add_reads(&self, date: NaiveDate, n: i64) -> anyhow::Result<Option<i64>> {
        let row = sqlx::query(
            "UPDATE digests SET reads = reads + $1 WHERE digest_date = $2 RETURNING reads",
        )
        .bind(n)
        .bind(date.to_string())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The date of the newest stored digest, without loading it.
    pub async fn latest_digest_date(&self) -> anyhow::Result<Option<NaiveDate>> {
        let row = sqlx::query("SELECT digest_date FROM digests ORDER BY digest_date DESC LIMIT 1")
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let date: String = r.get(0);
            NaiveDate::parse_from_str(&date, "%Y-%m-%d").context("Stored digest date is invalid")
        })
        .transpose()
    }

    /// The newest stored digest that has at least one event, looking back at most 60
    /// digests: what "the latest digest" means to a reader asking about its events.
    pub async fn latest_digest_with_events(&self) -> anyhow::Result<Option<Digest>> {
        Ok(self
            .digests_page(0, 60)
            .await?
            .into_iter()
            .map(|(d, _)| d)
            .find(|d| !d.is_empty()))
    }

    /// What is stored, newest first: one row per digest, without the page counts.
    pub async fn list_digests(&self) -> anyhow::Result<Vec<StoredDigest>> {
        let rows = sqlx::query("SELECT generated_at, data FROM digests ORDER BY digest_date DESC")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let d = digest_from_json(r.get(1))?;
                Ok(StoredDigest {
                    generated_at: r.get(0),
                    events: d.events().count(),
                    digest: d,
                })
            })
            .collect()
    }

    pub async fn latest_digest(&self) -> anyhow::Result<Option<Digest>> {
        let row = sqlx::query("SELECT data FROM digests ORDER BY digest_date DESC LIMIT 1")
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| digest_from_json(r.get(0))).transpose()
    }

    pub async fn llm_cache_get(
        &self,
        model: &str,
        prompt_hash: &str,
    ) -> anyhow::Result<Option<String>> {
        let row = sqlx::query("SELECT reply FROM llm_cache WHERE model = $1 AND prompt_hash = $2")
            .bind(model)
            .bind(prompt_hash)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    pub async fn llm_cache_put(
        &self,
        model: &str,
        prompt_hash: &str,
        reply: &str,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO llm_cache (model, prompt_hash, reply, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (model, prompt_hash) DO UPDATE SET reply = excluded.reply, created_at = excluded.created_at",
        )
        .bind(model)
        .bind(prompt_hash)
        .bind(reply)
        .bind(Utc::now().to_rfc3339())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// One stored digest, as `kdigest digests list` shows it.
pub struct StoredDigest {
    pub generated_at: String,
    pub events: usize,
    pub digest: Digest,
}

fn digest_from_json(data: &str) -> anyhow::Result<Digest> {
    serde_json::from_str(data).context("Stored digest is not valid JSON")
}

/// Whether a store error is the database being busy or locked by another connection, or
/// the pool being exhausted: worth retrying soon, unlike a fault to report (a missing table,
/// a full disk, a corrupt file).
pub fn is_busy(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|e| match e.downcast_ref::<sqlx::Error>() {
            Some(sqlx::Error::PoolTimedOut) => true,
            // SQLITE_BUSY, SQLITE_LOCKED and their extended codes.
            Some(sqlx::Error::Database(db)) => {
                matches!(
                    db.code().as_deref(),
                    Some("5" | "6" | "261" | "262" | "517")
                )
            }
            _ => false,
        })
}
