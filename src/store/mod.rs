//! Persistence. Every SQL statement of kdigest lives under this module, and every statement
//! runs on both engines: SQLite (one process, the default) and PostgreSQL (several
//! instances on one database, docs/deploy.md). Statements use `$N` placeholders and SQL both
//! accept; the few that differ (a claim's `FOR UPDATE SKIP LOCKED`) say so where they are.
//! Each engine has its own migrations (migrations/sqlite, migrations/postgres): the Postgres
//! schema is typed (DATE, TIMESTAMPTZ, BOOLEAN), SQLite keeps the same values as text.
//!
//! SQLite runs in WAL mode with a busy timeout, so a CLI invocation can read while the
//! daemon writes.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use crate::model::{Digest, Item, Validators, Window};

/// Runs the same code on whichever engine the store has: `$pool` is that engine's pool,
/// and the body is compiled once per engine, so one statement serves both.
macro_rules! on_db {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::store::Db::Sqlite($pool) => $body,
            $crate::store::Db::Postgres($pool) => $body,
        }
    };
}

mod archive;
mod cluster;
mod copy;
mod feedback;
mod lease;
mod outbox;
mod subscribers;

pub use cluster::Instance;
pub use copy::{CopyReport, copy_store};
pub use outbox::{Backlog, Claimed, DeliveryCounts, PlannedDelivery, Settled, WHOLE_CHANNEL};
pub use subscribers::{NewSubscriber, Signup};

#[derive(Clone)]
pub(crate) enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Which engine a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One process owns the database (a second `kdigest run` is refused).
    Sqlite,
    /// Any number of instances share the database.
    Postgres,
}

#[derive(Clone)]
pub struct Store {
    db: Db,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceHealth {
    pub source: String,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub consecutive_failures: i64,
}

/// Connections a Postgres store keeps: the delivery workers of every channel, the reaper,
/// the web and the bots of one instance.
const POSTGRES_CONNECTIONS: u32 = 16;

impl Store {
    /// The configured store: Postgres when `storage.url` (or KDIGEST_DATABASE_URL) is set,
    /// else the SQLite file at `storage.path`.
    pub async fn connect(storage: &crate::config::StorageConfig) -> anyhow::Result<Store> {
        match &storage.url {
            Some(url) => Store::open_postgres(url.expose()).await,
            None => Store::open(&storage.path).await.with_context(|| {
                format!(
                    "storage.path = \"{}\" cannot be used as the SQLite database; set storage.path to a file in a directory kdigest may create and write",
                    storage.path.display()
                )
            }),
        }
    }

    /// Connects to a Postgres database and applies its migrations (under sqlx's advisory
    /// lock, so instances starting together migrate once). The URL may carry a password: it
    /// is never part of an error message.
    pub async fn open_postgres(url: &str) -> anyhow::Result<Store> {
        let options = PgConnectOptions::from_str(url).map_err(|_| {
            anyhow::anyhow!(
                "storage.url is not a valid Postgres URL; use postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
            )
        })?;
        let target = format!(
            "{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("")
        );
        let pool = PgPoolOptions::new()
            .max_connections(POSTGRES_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "Cannot connect to Postgres at {target} (storage.url or KDIGEST_DATABASE_URL): {}",
                    describe_connect_error(&e)
                )
            })?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .context("Cannot apply the Postgres migrations")?;
        let store = Store {
            db: Db::Postgres(pool),
        };
        store.reindex_archive().await?;
        Ok(store)
    }

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
        let migrated = sqlx::migrate!("./migrations/sqlite").run(&pool).await;
        drop(lock);
        migrated.context("Cannot apply database migrations")?;
        let store = Store {
            db: Db::Sqlite(pool),
        };
        store.reindex_archive().await?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        match self.db {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    pub async fn validators(&self, source: &str) -> anyhow::Result<Validators> {
        let sql = "SELECT etag, last_modified FROM source_state WHERE source = $1";
        on_db!(&self.db, pool => {
            let row = sqlx::query(sql).bind(source).fetch_optional(pool).await?;
            Ok(row.map_or_else(Validators::default, |r| Validators {
                etag: r.get(0),
                last_modified: r.get(1),
            }))
        })
    }

    /// Records a successful fetch (200 or 304). Validators are replaced only when given.
    pub async fn record_fetch_success(
        &self,
        source: &str,
        validators: Option<&Validators>,
        at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let sql = "INSERT INTO source_state (source, etag, last_modified, last_success_at, last_attempt_at, last_error, consecutive_failures)
             VALUES ($1, $2, $3, $4, $4, NULL, 0)
             ON CONFLICT (source) DO UPDATE SET
               etag = CASE WHEN $5 THEN excluded.etag ELSE source_state.etag END,
               last_modified = CASE WHEN $5 THEN excluded.last_modified ELSE source_state.last_modified END,
               last_success_at = excluded.last_success_at,
               last_attempt_at = excluded.last_attempt_at,
               last_error = NULL,
               consecutive_failures = 0";
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(source)
                .bind(validators.and_then(|v| v.etag.clone()))
                .bind(validators.and_then(|v| v.last_modified.clone()))
                .bind(at)
                .bind(validators.is_some())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    pub async fn record_fetch_failure(
        &self,
        source: &str,
        error: &str,
        at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let sql =
            "INSERT INTO source_state (source, last_attempt_at, last_error, consecutive_failures)
             VALUES ($1, $2, $3, 1)
             ON CONFLICT (source) DO UPDATE SET
               last_attempt_at = excluded.last_attempt_at,
               last_error = excluded.last_error,
               consecutive_failures = source_state.consecutive_failures + 1";
        on_db!(&self.db, pool => {
            sqlx::query(sql).bind(source).bind(at).bind(error).execute(pool).await?;
        });
        Ok(())
    }

    pub async fn source_health(&self) -> anyhow::Result<Vec<SourceHealth>> {
        let sql = "SELECT source, last_success_at, last_error, consecutive_failures, last_attempt_at FROM source_state ORDER BY source";
        on_db!(&self.db, pool => {
            let rows = sqlx::query(sql).fetch_all(pool).await?;
            Ok(rows
                .into_iter()
                .map(|r| SourceHealth {
                    source: r.get(0),
                    last_success_at: r.get(1),
                    last_error: r.get(2),
                    consecutive_failures: r.get(3),
                    last_attempt_at: r.get(4),
                })
                .collect())
        })
    }

    /// Stored items per source published at or after `since`.
    pub async fn item_counts_since(
        &self,
        since: DateTime<Utc>,
    ) -> anyhow::Result<std::collections::HashMap<String, i64>> {
        let sql = "SELECT source, COUNT(*) FROM items WHERE published_ts >= $1 GROUP BY source";
        let rows: Vec<(String, i64)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(since.timestamp()).fetch_all(pool).await?
        });
        Ok(rows.into_iter().collect())
    }

    /// Inserts new items and refreshes known ones. An item keeps the earliest time it was
    /// given, so an undated entry stays dated by when it was first seen.
    pub async fn upsert_items(&self, items: &[Item], seen_at: DateTime<Utc>) -> anyhow::Result<()> {
        let sql = "INSERT INTO items (source, item_key, published_ts, first_seen_at, data)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (source, item_key) DO UPDATE SET
                   published_ts = CASE WHEN excluded.published_ts < items.published_ts
                                       THEN excluded.published_ts ELSE items.published_ts END,
                   data = excluded.data";
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            for item in items {
                sqlx::query(sql)
                    .bind(&item.source)
                    .bind(&item.key)
                    .bind(item.published.timestamp())
                    .bind(seen_at)
                    .bind(serde_json::to_string(item)?)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Items of the given sources published inside the window, in (source, key) order.
    pub async fn items_in_window(
        &self,
        sources: &[String],
        window: &Window,
    ) -> anyhow::Result<Vec<Item>> {
        let sql = "SELECT source, published_ts, data FROM items
             WHERE published_ts >= $1 AND published_ts < $2 ORDER BY source, item_key";
        let rows: Vec<(String, i64, String)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql)
                .bind(window.start.timestamp())
                .bind(window.end.timestamp())
                .fetch_all(pool)
                .await?
        });
        let mut items = Vec::with_capacity(rows.len());
        for (source, published, data) in rows {
            if !sources.contains(&source) {
                continue;
            }
            let mut item: Item =
                serde_json::from_str(&data).context("Stored item is not valid JSON")?;
            item.published = DateTime::from_timestamp(published, 0).unwrap_or(item.published);
            items.push(item);
        }
        Ok(items)
    }

    pub async fn save_digest(
        &self,
        digest: &Digest,
        generated_at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let sql = "INSERT INTO digests (digest_date, generated_at, generation_mode, window_start, window_end, data)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (digest_date) DO UPDATE SET
               generated_at = excluded.generated_at, generation_mode = excluded.generation_mode,
               window_start = excluded.window_start, window_end = excluded.window_end, data = excluded.data,
               search_version = 0";
        let data = serde_json::to_string(digest)?;
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(digest.date)
                .bind(generated_at)
                .bind(&digest.generation_mode)
                .bind(digest.window.start)
                .bind(digest.window.end)
                .bind(&data)
                .execute(pool)
                .await?;
        });
        // Stored first: should indexing fail, search_version 0 has it indexed again when
        // the store next opens.
        self.index_digest(digest).await
    }

    pub async fn load_digest(&self, date: NaiveDate) -> anyhow::Result<Option<Digest>> {
        let sql = "SELECT data FROM digests WHERE digest_date = $1";
        let data: Option<String> = on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(date).fetch_optional(pool).await?
        });
        data.as_deref().map(digest_from_json).transpose()
    }

    /// Stored digests dated `from` up to, not including, `before`.
    pub async fn digests_between(
        &self,
        from: NaiveDate,
        before: NaiveDate,
    ) -> anyhow::Result<Vec<Digest>> {
        let sql = "SELECT data FROM digests WHERE digest_date >= $1 AND digest_date < $2 ORDER BY digest_date";
        let rows: Vec<String> = on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(from).bind(before).fetch_all(pool).await?
        });
        rows.iter().map(|d| digest_from_json(d)).collect()
    }

    /// Stored digests, newest first: (date, digest, reads).
    pub async fn digests_page(
        &self,
        offset: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<(Digest, i64)>> {
        let sql = "SELECT data, reads FROM digests ORDER BY digest_date DESC LIMIT $1 OFFSET $2";
        let rows: Vec<(String, i64)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(limit).bind(offset).fetch_all(pool).await?
        });
        rows.iter()
            .map(|(data, reads)| Ok((digest_from_json(data)?, *reads)))
            .collect()
    }

    pub async fn digest_count(&self) -> anyhow::Result<i64> {
        let sql = "SELECT COUNT(*) FROM digests";
        Ok(on_db!(&self.db, pool => sqlx::query_scalar(sql).fetch_one(pool).await?))
    }

    /// A digest's stored read count; None when no digest has that date.
    pub async fn digest_reads(&self, date: NaiveDate) -> anyhow::Result<Option<i64>> {
        let sql = "SELECT reads FROM digests WHERE digest_date = $1";
        Ok(on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(date).fetch_optional(pool).await?
        }))
    }

    /// Adds `n` page views to a digest; returns the new count.
    pub async fn add_reads(&self, date: NaiveDate, n: i64) -> anyhow::Result<Option<i64>> {
        let sql = "UPDATE digests SET reads = reads + $1 WHERE digest_date = $2 RETURNING reads";
        Ok(on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(n).bind(date).fetch_optional(pool).await?
        }))
    }

    /// The date of the newest stored digest, without loading it.
    pub async fn latest_digest_date(&self) -> anyhow::Result<Option<NaiveDate>> {
        let sql = "SELECT digest_date FROM digests ORDER BY digest_date DESC LIMIT 1";
        Ok(on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).fetch_optional(pool).await?
        }))
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
        let sql = "SELECT generated_at, data FROM digests ORDER BY digest_date DESC";
        let rows: Vec<(DateTime<Utc>, String)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).fetch_all(pool).await?
        });
        rows.into_iter()
            .map(|(generated_at, data)| {
                let d = digest_from_json(&data)?;
                Ok(StoredDigest {
                    generated_at,
                    events: d.events().count(),
                    digest: d,
                })
            })
            .collect()
    }

    pub async fn latest_digest(&self) -> anyhow::Result<Option<Digest>> {
        let sql = "SELECT data FROM digests ORDER BY digest_date DESC LIMIT 1";
        let data: Option<String> = on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).fetch_optional(pool).await?
        });
        data.as_deref().map(digest_from_json).transpose()
    }

    pub async fn llm_cache_get(
        &self,
        model: &str,
        prompt_hash: &str,
    ) -> anyhow::Result<Option<String>> {
        let sql = "SELECT reply FROM llm_cache WHERE model = $1 AND prompt_hash = $2";
        Ok(on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(model).bind(prompt_hash).fetch_optional(pool).await?
        }))
    }

    pub async fn llm_cache_put(
        &self,
        model: &str,
        prompt_hash: &str,
        reply: &str,
    ) -> anyhow::Result<()> {
        let sql = "INSERT INTO llm_cache (model, prompt_hash, reply, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (model, prompt_hash) DO UPDATE SET reply = excluded.reply, created_at = excluded.created_at";
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(model)
                .bind(prompt_hash)
                .bind(reply)
                .bind(Utc::now())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    pub async fn close(&self) {
        on_db!(&self.db, pool => pool.close().await)
    }
}

/// One stored digest, as `kdigest digests list` shows it.
pub struct StoredDigest {
    pub generated_at: DateTime<Utc>,
    pub events: usize,
    pub digest: Digest,
}

fn digest_from_json(data: &str) -> anyhow::Result<Digest> {
    serde_json::from_str(data).context("Stored digest is not valid JSON")
}

/// A connection failure in words, without the URL (it may carry a password).
fn describe_connect_error(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Io(e) => e.to_string(),
        sqlx::Error::Database(db) => db.message().to_string(),
        sqlx::Error::PoolTimedOut => "no connection within 10 s".into(),
        sqlx::Error::Tls(e) => format!("TLS: {e}"),
        other => other.to_string(),
    }
}

/// Whether a store error is transient: the database busy or locked by another connection,
/// the pool exhausted, the server unreachable or restarting, a serialization conflict.
/// Worth retrying soon, unlike a fault to report (a missing table, a full disk, a corrupt
/// file, a constraint).
pub fn is_busy(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|e| match e.downcast_ref::<sqlx::Error>() {
            Some(
                sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::WorkerCrashed,
            ) => true,
            Some(sqlx::Error::Database(db)) => {
                matches!(
                    db.code().as_deref(),
                    // SQLite: SQLITE_BUSY, SQLITE_LOCKED and their extended codes.
                    Some("5" | "6" | "261" | "262" | "517")
                    // Postgres: serialization failure, deadlock, lock not available, the
                    // server shutting down or starting, too many connections.
                    | Some("40001" | "40P01" | "55P03" | "57P01" | "57P02" | "57P03" | "53300")
                )
            }
            _ => false,
        })
}
