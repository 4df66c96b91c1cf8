//! The delivery outbox: planned, claimed, settled. A claim marks a row 'sending' before the
//! send; a crash leaves it there and [`Store::requeue_in_flight`] puts it back at start, so
//! at most the messages in flight at the crash can be sent twice.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::Row;

use super::Store;
use crate::subscriber::Channel;

/// A planned delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedDelivery {
    pub id: String,
    pub subscriber_id: i64,
    pub channel: Channel,
}

/// A delivery claimed by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub id: String,
    pub digest_date: NaiveDate,
    pub subscriber_id: i64,
    pub attempts: u32,
    pub parts_sent: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryCounts {
    pub pending: i64,
    pub sending: i64,
    pub sent: i64,
    pub failed: i64,
}

impl Store {
    /// Inserts the plan for one digest in one transaction; rows that exist are kept as they
    /// are, so planning twice never doubles a delivery. Returns how many rows were new.
    /// Multi-row INSERTs keep 100,000 rows to well under a second.
    pub async fn plan_deliveries(
        &self,
        date: NaiveDate,
        plan: &[PlannedDelivery],
        now: DateTime<Utc>,
    ) -> anyhow::Result<u64> {
        // 6 parameters a row; SQLite allows 32,766 per statement.
        const ROWS_PER_STATEMENT: usize = 2_000;
        let mut tx = self.pool.begin().await?;
        let mut inserted = 0;
        let created = now.to_rfc3339();
        let date = date.to_string();
        for chunk in plan.chunks(ROWS_PER_STATEMENT) {
            let mut query = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "INSERT INTO deliveries (id, digest_date, subscriber_id, channel, status, next_attempt_at, created_at) ",
            );
            query.push_values(chunk, |mut row, p| {
                row.push_bind(&p.id)
                    .push_bind(&date)
                    .push_bind(p.subscriber_id)
                    .push_bind(p.channel.as_str())
                    .push("'pending'")
                    .push_bind(now.timestamp())
                    .push_bind(&created);
            });
            query.push(" ON CONFLICT (digest_date, subscriber_id) DO NOTHING");
            inserted += query.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(inserted)
    }

    /// Puts rows a crashed process left in 'sending' back in the queue.
    pub async fn requeue_in_flight(&self) -> anyhow::Result<u64> {
        let result =
            sqlx::query("UPDATE deliveries SET status = 'pending' WHERE status = 'sending'")
                .execute(&self.pool)
                .await?;
        Ok(result.rows_affected())
    }

    /// Claims up to `limit` due rows of one channel, oldest first.
    pub async fn claim_due(
        &self,
        channel: Channel,
        now: DateTime<Utc>,
        limit: i64,
    ) -> anyhow::Result<Vec<Claimed>> {
        let rows = sqlx::query(
            "UPDATE deliveries SET status = 'sending'
             WHERE id IN (SELECT id FROM deliveries
                          WHERE status = 'pending' AND channel = $1 AND next_attempt_at <= $2
                          ORDER BY next_attempt_at, id LIMIT $3)
             RETURNING id, digest_date, subscriber_id, attempts, parts_sent",
        )
        .bind(channel.as_str())
        .bind(now.timestamp())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut claimed: Vec<Claimed> = rows
            .iter()
            .map(|r| {
                let date: String = r.get(1);
                Ok(Claimed {
                    id: r.get(0),
                    digest_date: date.parse()?,
                    subscriber_id: r.get(2),
                    attempts: u32::try_from(r.get::<i64, _>(3)).unwrap_or(0),
                    parts_sent: u32::try_from(r.get::<i64, _>(4)).unwrap_or(0),
                })
            })
            .collect::<anyhow::Result<_>>()?;
        claimed.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(claimed)
    }

    /// Earliest time a pending row of this channel becomes due.
    pub async fn next_due(&self, channel: Channel) -> anyhow::Result<Option<i64>> {
        let row = sqlx::query(
            "SELECT MIN(next_attempt_at) FROM deliveries WHERE status = 'pending' AND channel = $1",
        )
        .bind(channel.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(row.get(0))
    }

    pub async fn mark_part_sent(&self, id: &str, parts_sent: u32) -> anyhow::Result<()> {
        sqlx::query("UPDATE deliveries SET parts_sent = $1 WHERE id = $2")
            .bind(i64::from(parts_sent))
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn mark_sent(
        &self,
        id: &str,
        attempts: u32,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        sqlx::query("UPDATE deliveries SET status = 'sent', attempts = $1, sent_at = $2, last_error = NULL WHERE id = $3")
            .bind(i64::from(attempts))
            .bind(now.to_rfc3339())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn mark_retry(
        &self,
        id: &str,
        attempts: u32,
        next_at: DateTime<Utc>,
        error: &str,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE deliveries SET status = 'pending', attempts = $1, next_attempt_at = $2, last_error = $3 WHERE id = $4",
        )
        .bind(i64::from(attempts))
        .bind(next_at.timestamp())
        .bind(error)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn mark_failed(&self, id: &str, attempts: u32, error: &str) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE deliveries SET status = 'failed', attempts = $1, last_error = $2 WHERE id = $3",
        )
        .bind(i64::from(attempts))
        .bind(error)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Other pending rows of a subscriber that was just disabled are failed with the reason.
    pub async fn fail_pending_for(&self, subscriber_id: i64, error: &str) -> anyhow::Result<()> {
        sqlx::query("UPDATE deliveries SET status = 'failed', last_error = $1 WHERE subscriber_id = $2 AND status = 'pending'")
            .bind(error)
            .bind(subscriber_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn delivery_counts(&self, date: NaiveDate) -> anyhow::Result<DeliveryCounts> {
        let rows = sqlx::query(
            "SELECT status, COUNT(*) FROM deliveries WHERE digest_date = $1 GROUP BY status",
        )
        .bind(date.to_string())
        .fetch_all(&self.pool)
        .await?;
        let mut counts = DeliveryCounts::default();
        for r in rows {
            let n: i64 = r.get(1);
            match r.get::<String, _>(0).as_str() {
                "pending" => counts.pending = n,
                "sending" => counts.sending = n,
                "sent" => counts.sent = n,
                _ => counts.failed = n,
            }
        }
        Ok(counts)
    }
}
