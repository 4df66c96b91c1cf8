//! Named leases with an expiry: how instances agree that one of them is the scheduler
//! (generates the digest, plans it, runs long polling and the Discord gateway). The holder
//! renews before expiry; a dead holder's lease lapses and another instance takes it.
//! On SQLite the lease also keeps a second `kdigest run` away altogether.

use chrono::{DateTime, Utc};

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
        let sql = "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
             WHERE leases.expires_at < $4 OR leases.holder = excluded.holder";
        let changed = on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(name)
                .bind(holder)
                .bind(now.timestamp() + ttl_secs)
                .bind(now.timestamp())
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(changed == 1)
    }

    /// Who holds the lease and until when (unix seconds).
    pub async fn lease_holder(&self, name: &str) -> anyhow::Result<Option<(String, i64)>> {
        let sql = "SELECT holder, expires_at FROM leases WHERE name = $1";
        Ok(on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(name).fetch_optional(pool).await?
        }))
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
        let sql = "UPDATE leases SET holder = $1, expires_at = $2 WHERE name = $3 AND holder = $4";
        let changed = on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(holder)
                .bind(now.timestamp() + ttl_secs)
                .bind(name)
                .bind(dead_holder)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(changed == 1)
    }

    pub async fn release_lease(&self, name: &str, holder: &str) -> anyhow::Result<()> {
        let sql = "DELETE FROM leases WHERE name = $1 AND holder = $2";
        on_db!(&self.db, pool => {
            sqlx::query(sql).bind(name).bind(holder).execute(pool).await?;
        });
        Ok(())
    }
}
