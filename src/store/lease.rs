//! Named leases with an expiry: how two `kdigest run` processes agree that only one of them
//! generates and delivers. The holder renews before expiry; a crashed holder's lease lapses.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::Store;

impl Store {
    /// Takes or renews the lease; false when another live holder has it.
    pub async fn try_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_secs: i64,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let result = sqlx::query(
            "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
             WHERE leases.expires_at < $4 OR leases.holder = excluded.holder",
        )
        .bind(name)
        .bind(holder)
        .bind(now.timestamp() + ttl_secs)
        .bind(now.timestamp())
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// Who holds the lease and until when (unix seconds).
    pub async fn lease_holder(&self, name: &str) -> anyhow::Result<Option<(String, i64)>> {
        let row = sqlx::query("SELECT holder, expires_at FROM leases WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Takes over a lease from a holder known to be dead (same host, process gone).
    pub async fn take_over_lease(
        &self,
        name: &str,
        dead_holder: &str,
        holder: &str,
        ttl_secs: i64,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let result = sqlx::query(
            "UPDATE leases SET holder = $1, expires_at = $2 WHERE name = $3 AND holder = $4",
        )
        .bind(holder)
        .bind(now.timestamp() + ttl_secs)
        .bind(name)
        .bind(dead_holder)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn release_lease(&self, name: &str, holder: &str) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
            .bind(name)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
