//! What several instances on one database share besides the outbox: who is alive, the
//! platform-wide send budgets, bot updates already handled and the web's sign-up counters.
//! All of it also runs on SQLite, where one process is the only instance.

use chrono::{DateTime, Utc};

use super::{Backend, Store};

/// A live instance, as `kdigest status` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// host:pid
    pub id: String,
    pub roles: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
}

/// The database's clock in unix milliseconds: budget slots are handed out by one clock,
/// whatever the instances' clocks say.
fn db_now_ms(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS BIGINT)",
        Backend::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    }
}

impl Store {
    /// Records that this instance is alive (and with which roles).
    pub async fn heartbeat(
        &self,
        id: &str,
        roles: &str,
        started: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let sql = "INSERT INTO instances (id, roles, started_at, heartbeat_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO UPDATE SET roles = excluded.roles, heartbeat_at = excluded.heartbeat_at";
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(id)
                .bind(roles)
                .bind(started.timestamp())
                .bind(now.timestamp())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// An instance that stops cleanly leaves the list at once.
    pub async fn forget_instance(&self, id: &str) -> anyhow::Result<()> {
        on_db!(&self.db, pool => {
            sqlx::query("DELETE FROM instances WHERE id = $1").bind(id).execute(pool).await?;
        });
        Ok(())
    }

    /// Instances heard from since `since`, oldest first. Rows older than a day are pruned.
    pub async fn live_instances(&self, since: DateTime<Utc>) -> anyhow::Result<Vec<Instance>> {
        let sql = "SELECT id, roles, started_at, heartbeat_at FROM instances
                   WHERE heartbeat_at >= $1 ORDER BY started_at, id";
        let prune = "DELETE FROM instances WHERE heartbeat_at < $1";
        let rows: Vec<(String, String, i64, i64)> = on_db!(&self.db, pool => {
            sqlx::query(prune).bind(since.timestamp() - 86_400).execute(pool).await?;
            sqlx::query_as(sql).bind(since.timestamp()).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(id, roles, started_at, heartbeat_at)| Instance {
                id,
                roles,
                started_at,
                heartbeat_at,
            })
            .collect())
    }

    /// Takes the next slot of a budget shared by every instance (one message every
    /// `gap_ms` over the whole platform) and returns how long to wait for it. Slots are
    /// handed out by the database's clock, one at a time under the row's lock.
    pub async fn take_budget_slot(&self, name: &str, gap_ms: i64) -> anyhow::Result<i64> {
        Ok(self.budget_slot(name, gap_ms).await?.1)
    }

    /// [`Store::take_budget_slot`] with the slot itself: (the slot, in the database
    /// clock's unix milliseconds; the wait for it from the statement's now, >= 0).
    pub async fn budget_slot(&self, name: &str, gap_ms: i64) -> anyhow::Result<(i64, i64)> {
        let now = db_now_ms(self.backend());
        let sql = format!(
            "INSERT INTO budgets (name, next_at) VALUES ($1, {now} + $2)
             ON CONFLICT (name) DO UPDATE SET next_at =
               CASE WHEN budgets.next_at > {now} THEN budgets.next_at ELSE {now} END + $2
             RETURNING next_at - $2, next_at - $2 - {now}"
        );
        let (slot, wait): (i64, i64) = on_db!(&self.db, pool => {
            sqlx::query_as(&sql).bind(name).bind(gap_ms).fetch_one(pool).await?
        });
        Ok((slot, wait.max(0)))
    }

    /// True the first time an update (a Telegram update id, a Discord interaction id) is
    /// seen: of two instances given the same update, one handles it.
    pub async fn first_handling(
        &self,
        source: &str,
        update_id: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let sql = "INSERT INTO handled_updates (source, update_id, handled_at) VALUES ($1, $2, $3)
                   ON CONFLICT (source, update_id) DO NOTHING";
        let inserted = on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(source)
                .bind(update_id)
                .bind(now.timestamp())
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(inserted == 1)
    }

    /// Forgets handled updates older than `before` (platforms retry for minutes, not days).
    pub async fn prune_handled_updates(&self, before: DateTime<Utc>) -> anyhow::Result<u64> {
        let sql = "DELETE FROM handled_updates WHERE handled_at < $1";
        Ok(on_db!(&self.db, pool => {
            sqlx::query(sql).bind(before.timestamp()).execute(pool).await?.rows_affected()
        }))
    }

    /// Counts one hit on `key` in its window of `window_secs` (a window starts at the
    /// key's first hit after the previous one ended) and returns the hits in that window
    /// so far, this one included.
    pub async fn count_hit(
        &self,
        key: &str,
        window_secs: i64,
        now: DateTime<Utc>,
    ) -> anyhow::Result<i64> {
        let now = now.timestamp();
        // In SET, rate_counts.* is the row before the update (on both engines).
        let sql = "INSERT INTO rate_counts (key, window_start, hits) VALUES ($1, $2, 1)
             ON CONFLICT (key) DO UPDATE SET
               hits = CASE WHEN rate_counts.window_start > $2 - $3 THEN rate_counts.hits + 1 ELSE 1 END,
               window_start = CASE WHEN rate_counts.window_start > $2 - $3 THEN rate_counts.window_start ELSE $2 END
             RETURNING hits";
        // Sign-up windows are at most a day long: older rows count for nothing.
        let prune = "DELETE FROM rate_counts WHERE window_start < $1";
        on_db!(&self.db, pool => {
            let hits: i64 = sqlx::query_scalar(sql)
                .bind(key)
                .bind(now)
                .bind(window_secs)
                .fetch_one(pool)
                .await?;
            if hits == 1 {
                // A new window for this key: a good moment to drop windows long over.
                sqlx::query(prune).bind(now - 2 * 86_400).execute(pool).await?;
            }
            Ok(hits)
        })
    }
}
