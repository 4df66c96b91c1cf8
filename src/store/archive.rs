//! The archive tables (digest_events, digest_event_layers and, on SQLite, the FTS5 index
//! event_search): written with each digest, rebuilt for digests indexed by an older
//! version of this code, and read by the search, layer and permalink pages.
//!
//! Search is the same on both engines: every term must occur in the event's words as a
//! case-insensitive substring; events whose title holds every term come first, then the
//! newest, then the highest score. SQLite finds candidates through its trigram index
//! (terms of three characters or more) and checks shorter terms with LIKE; Postgres uses
//! ILIKE, through a pg_trgm index when the extension could be created.

use chrono::{DateTime, NaiveDate, Utc};

use super::Store;
use crate::archive::{ArchivedEvent, fts_query, like_pattern, searchable_text};
use crate::model::{Digest, DigestEvent};

/// What the archive rows are built from; a digest indexed with an older version is indexed
/// again when the store opens. Raise it when `searchable_text` or the rows change.
const ARCHIVE_VERSION: i64 = 1;

impl Store {
    /// Writes the archive rows of one stored digest, replacing the ones it had.
    pub(super) async fn index_digest(&self, digest: &Digest) -> anyhow::Result<()> {
        let rows: Vec<(&DigestEvent, String, String)> = digest
            .events()
            .map(|e| Ok((e, searchable_text(digest, e), serde_json::to_string(e)?)))
            .collect::<anyhow::Result<_>>()?;
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            // First, so that two instances indexing one digest take turns (the row lock).
            sqlx::query("UPDATE digests SET search_version = $1 WHERE digest_date = $2")
                .bind(ARCHIVE_VERSION)
                .bind(digest.date)
                .execute(&mut *tx)
                .await?;
            for table in ["digest_events", "digest_event_layers"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE digest_date = $1"))
                    .bind(digest.date)
                    .execute(&mut *tx)
                    .await?;
            }
            for (e, body, data) in &rows {
                sqlx::query(
                    "INSERT INTO digest_events (digest_date, event_id, n, score, title, body, data)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                )
                .bind(digest.date)
                .bind(&e.id)
                .bind(e.n as i64)
                .bind(e.score.as_f64())
                .bind(&e.title)
                .bind(body)
                .bind(data)
                .execute(&mut *tx)
                .await?;
                for layer in &e.layers {
                    sqlx::query(
                        "INSERT INTO digest_event_layers (digest_date, event_id, layer)
                         VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                    )
                    .bind(digest.date)
                    .bind(&e.id)
                    .bind(layer)
                    .execute(&mut *tx)
                    .await?;
                }
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Indexes every digest whose archive rows are missing or older than this code's;
    /// returns how many. Runs when the store opens: digests stored before the archive
    /// existed become searchable.
    pub async fn reindex_archive(&self) -> anyhow::Result<usize> {
        let sql = "SELECT digest_date FROM digests WHERE search_version < $1 ORDER BY digest_date";
        let dates: Vec<NaiveDate> = on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(ARCHIVE_VERSION).fetch_all(pool).await?
        });
        for date in &dates {
            if let Some(d) = self.load_digest(*date).await? {
                self.index_digest(&d).await?;
            }
        }
        Ok(dates.len())
    }

    /// Events whose words hold every term, best first (see the module comment), from
    /// `offset`, at most `limit`. No terms: nothing.
    pub async fn search_events(
        &self,
        terms: &[String],
        offset: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<ArchivedEvent>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let patterns: Vec<String> = terms.iter().map(|t| like_pattern(t)).collect();
        // $1 limit, $2 offset, $3.. the patterns, then (SQLite) the FTS5 query.
        let placeholders: Vec<String> =
            (0..patterns.len()).map(|i| format!("${}", i + 3)).collect();
        let all_in = |column: &str, op: &str| {
            placeholders
                .iter()
                .map(|p| format!("{column} {op} {p} ESCAPE '\\'"))
                .collect::<Vec<_>>()
                .join(" AND ")
        };
        // SQLite: candidates from the trigram index, then LIKE (ASCII case-insensitive, as
        // the index). Postgres: ILIKE alone.
        let (like, fts) = match self.backend() {
            super::Backend::Sqlite => ("LIKE", fts_query(terms)),
            super::Backend::Postgres => ("ILIKE", None),
        };
        let candidates = match &fts {
            Some(_) => format!(
                "e.rowid IN (SELECT rowid FROM event_search WHERE event_search MATCH ${}) AND ",
                patterns.len() + 3
            ),
            None => String::new(),
        };
        let sql = format!(
            "SELECT e.digest_date, d.window_end, e.data FROM digest_events e
             JOIN digests d ON d.digest_date = e.digest_date
             WHERE {candidates}{}
             ORDER BY CASE WHEN {} THEN 0 ELSE 1 END, e.digest_date DESC, e.score DESC, e.n
             LIMIT $1 OFFSET $2",
            all_in("e.body", like),
            all_in("e.title", like),
        );
        let rows: Vec<Row> = on_db!(&self.db, pool => {
            let mut query = sqlx::query_as(&sql).bind(limit).bind(offset);
            for p in &patterns {
                query = query.bind(p);
            }
            if let Some(f) = &fts {
                query = query.bind(f);
            }
            query.fetch_all(pool).await?
        });
        archived(rows)
    }

    /// Events tagged with `layer`, newest digest first, then by score.
    pub async fn layer_events(
        &self,
        layer: &str,
        offset: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<ArchivedEvent>> {
        let sql = "SELECT e.digest_date, d.window_end, e.data FROM digest_event_layers l
             JOIN digest_events e ON e.digest_date = l.digest_date AND e.event_id = l.event_id
             JOIN digests d ON d.digest_date = e.digest_date
             WHERE l.layer = $1
             ORDER BY e.digest_date DESC, e.score DESC, e.n LIMIT $2 OFFSET $3";
        let rows: Vec<Row> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(layer).bind(limit).bind(offset).fetch_all(pool).await?
        });
        archived(rows)
    }

    /// Every digest an event appeared in, newest first.
    pub async fn event_appearances(&self, event_id: &str) -> anyhow::Result<Vec<ArchivedEvent>> {
        let sql = "SELECT e.digest_date, d.window_end, e.data FROM digest_events e
             JOIN digests d ON d.digest_date = e.digest_date
             WHERE e.event_id = $1 ORDER BY e.digest_date DESC LIMIT 100";
        let rows: Vec<Row> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(event_id).fetch_all(pool).await?
        });
        archived(rows)
    }
}

/// A digest's date, its window's end and one event's JSON.
type Row = (NaiveDate, DateTime<Utc>, String);

fn archived(rows: Vec<Row>) -> anyhow::Result<Vec<ArchivedEvent>> {
    rows.into_iter()
        .map(|(date, published, data)| {
            let event = serde_json::from_str(&data)
                .map_err(|e| anyhow::anyhow!("Archived event of {date} is not valid JSON: {e}"))?;
            Ok(ArchivedEvent {
                date,
                published,
                event,
            })
        })
        .collect()
}
