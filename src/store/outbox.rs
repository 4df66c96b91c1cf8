//! The delivery outbox: planned, claimed, settled. A claim marks a row 'sending' with a
//! claim token and an expiry before the send. Every settle names the token it holds and
//! changes nothing when the row has been claimed again since (fencing: a process that lost
//! its claim, or a send that outlived its expiry, cannot overwrite the newer claim's
//! outcome). Expired claims go back to the queue ([`Store::requeue_expired`]); at start
//! the single SQLite process also re-queues every claim a crash left ([`Store::requeue_in_flight`]),
//! so at most the messages in flight at the crash can be sent twice.
//!
//! Times in this table are unix milliseconds. A destination (chat, webhook host, mailbox
//! domain) can be paused (`destinations`): its rows are not claimed until the pause ends,
//! so a paused destination never holds a worker.

use super::{Backend, Store};
use crate::subscriber::{Channel, Edition};
use chrono::{DateTime, NaiveDate, Utc};

/// The key of a pause that holds back a whole channel (its relay is down).
pub const WHOLE_CHANNEL: &str = "*";

/// A planned delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedDelivery {
    pub id: String,
    pub subscriber_id: i64,
    /// The daily, or the weekly roll-up ending on the plan's date.
    pub edition: Edition,
    pub channel: Channel,
    /// `Address::destination_key` of the subscriber's address.
    pub destination: String,
    /// When it is due; `None`: at once (when planned).
    pub due: Option<DateTime<Utc>>,
}

/// A delivery claimed by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub id: String,
    pub digest_date: NaiveDate,
    pub edition: Edition,
    pub subscriber_id: i64,
    pub attempts: u32,
    pub parts_sent: u32,
    /// The claim this worker holds; every settle must name it.
    pub token: String,
}

/// Whether a settle took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Settled {
    Done,
    /// The row is no longer held by this claim (it expired and was re-queued, maybe claimed
    /// by another worker): nothing was changed.
    Lost,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryCounts {
    pub pending: i64,
    pub sending: i64,
    pub sent: i64,
    pub failed: i64,
}

/// Outbox rows by channel and status, for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backlog {
    pub channel: String,
    pub status: String,
    pub rows: i64,
}

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// A settle's UPDATE: `set` uses $1..$`values`; the row's key (subscriber, date, edition)
/// and claim token follow, and only a row still claimed by that token changes (it returns
/// its id when it did). Rows are found by their key, not their id: on Postgres the id has
/// no index (migration 0010).
fn fenced(set: &str, values: usize) -> String {
    format!(
        "UPDATE deliveries SET {set}
         WHERE subscriber_id = ${} AND digest_date = ${} AND edition = ${}
           AND claim_token = ${} AND status = 'sending' RETURNING id",
        values + 1,
        values + 2,
        values + 3,
        values + 4
    )
}

/// What every final settle sets: the claim is over.
const RELEASE: &str = "claim_token = NULL, claim_expires_at = NULL";

/// Runs one settle under the claim's fence: `$sql` comes from [`fenced`], the SET clause's
/// values follow in order, then the row's key and the claim's token are bound. A row comes
/// back when the claim was still ours.
macro_rules! settle {
    ($store:expr, $sql:expr, $c:expr $(, $value:expr)*) => {{
        let sql = $sql;
        let found = on_db!(&$store.db, pool => {
            sqlx::query(&sql)
                $(.bind($value))*
                .bind($c.subscriber_id)
                .bind($c.digest_date)
                .bind($c.edition.as_str())
                .bind(&$c.token)
                .fetch_optional(pool)
                .await?
                .is_some()
        });
        Ok(if found { Settled::Done } else { Settled::Lost })
    }};
}

/// The rows a claim takes. On Postgres several instances claim at once: `FOR UPDATE SKIP
/// LOCKED` lets each take rows the others are not taking, instead of waiting on them.
///
/// A reader's roll-up is not claimed while the daily of its date is pending or being sent,
/// by any instance: the editions cannot interleave in one chat, and two instances cannot
/// take one each (a claim sees the daily as pending until the claim that took it commits).
/// The check runs for roll-up rows only, through the (subscriber, date, edition) key.
fn claim_sql(backend: Backend) -> String {
    let lock = match backend {
        Backend::Sqlite => "",
        Backend::Postgres => " FOR UPDATE OF d SKIP LOCKED",
    };
    format!(
        "UPDATE deliveries SET status = 'sending', claim_token = $4, claim_expires_at = $5
         WHERE (subscriber_id, digest_date, edition) IN
                     (SELECT d.subscriber_id, d.digest_date, d.edition FROM deliveries d
                      WHERE d.status = 'pending' AND d.channel = $1 AND d.next_attempt_at <= $2
                        AND NOT EXISTS (SELECT 1 FROM destinations p
                                        WHERE p.channel = d.channel
                                          AND (p.key = d.destination OR p.key = $6)
                                          AND p.paused_until > $2)
                        AND (d.edition <> 'weekly'
                             OR NOT EXISTS (SELECT 1 FROM deliveries o
                                            WHERE o.subscriber_id = d.subscriber_id
                                              AND o.digest_date = d.digest_date
                                              AND o.edition = 'daily'
                                              AND o.status IN ('pending', 'sending')))
                      ORDER BY d.next_attempt_at, d.subscriber_id LIMIT $3{lock})
         RETURNING id, digest_date, subscriber_id, attempts, parts_sent, edition"
    )
}

impl Store {
    /// Inserts the plan for one digest in one transaction; rows that exist are kept as they
    /// are, so planning twice never doubles a delivery. Returns how many rows were new.
    /// SQLite takes multi-row INSERTs (2,000 rows a statement); Postgres takes the whole
    /// plan as four arrays in one statement (UNNEST), several times faster than VALUES.
    /// The id is derived from (date, subscriber, edition), so the id and that key name the
    /// same row: `ON CONFLICT DO NOTHING` without a target covers every unique key (on
    /// SQLite the id is one too), which matters when instances plan the same date at once
    /// (with a target, a concurrent insert can trip another key and fail the whole plan).
    pub async fn plan_deliveries(
        &self,
        date: NaiveDate,
        plan: &[PlannedDelivery],
        now: DateTime<Utc>,
    ) -> anyhow::Result<u64> {
        match &self.db {
            super::Db::Postgres(pool) => {
                let ids: Vec<&str> = plan.iter().map(|p| p.id.as_str()).collect();
                let subscribers: Vec<i64> = plan.iter().map(|p| p.subscriber_id).collect();
                let channels: Vec<&str> = plan.iter().map(|p| p.channel.as_str()).collect();
                let destinations: Vec<&str> = plan.iter().map(|p| p.destination.as_str()).collect();
                let due: Vec<i64> = plan.iter().map(|p| ms(p.due.unwrap_or(now))).collect();
                let editions: Vec<&str> = plan.iter().map(|p| p.edition.as_str()).collect();
                let inserted = sqlx::query(
                    "INSERT INTO deliveries (id, digest_date, subscriber_id, channel, destination, status, next_attempt_at, created_at, edition)
                     SELECT u.id, $1, u.subscriber_id, u.channel, u.destination, 'pending', u.due, $2, u.edition
                     FROM UNNEST($3::TEXT[], $4::BIGINT[], $5::TEXT[], $6::TEXT[], $7::BIGINT[], $8::TEXT[])
                          AS u (id, subscriber_id, channel, destination, due, edition)
                     ON CONFLICT DO NOTHING",
                )
                .bind(date)
                .bind(now)
                .bind(ids)
                .bind(subscribers)
                .bind(channels)
                .bind(destinations)
                .bind(due)
                .bind(editions)
                .execute(pool)
                .await?
                .rows_affected();
                Ok(inserted)
            }
            super::Db::Sqlite(pool) => {
                // 9 columns a row, 8 of them parameters; SQLite allows 32,766 per statement.
                const ROWS_PER_STATEMENT: usize = 2_000;
                let mut inserted = 0;
                let mut tx = pool.begin().await?;
                for chunk in plan.chunks(ROWS_PER_STATEMENT) {
                    let mut query = sqlx::QueryBuilder::new(
                        "INSERT INTO deliveries (id, digest_date, subscriber_id, channel, destination, status, next_attempt_at, created_at, edition) ",
                    );
                    query.push_values(chunk, |mut row, p| {
                        row.push_bind(&p.id)
                            .push_bind(date)
                            .push_bind(p.subscriber_id)
                            .push_bind(p.channel.as_str())
                            .push_bind(&p.destination)
                            .push("'pending'")
                            .push_bind(ms(p.due.unwrap_or(now)))
                            .push_bind(now)
                            .push_bind(p.edition.as_str());
                    });
                    query.push(" ON CONFLICT DO NOTHING");
                    inserted += query.build().execute(&mut *tx).await?.rows_affected();
                }
                tx.commit().await?;
                Ok(inserted)
            }
        }
    }

    /// Puts every row left in 'sending' back in the queue. Only for the single SQLite
    /// process at start, when no other process can hold a claim (on Postgres other
    /// instances may be sending: their claims expire instead, [`Store::requeue_expired`]).
    pub async fn requeue_in_flight(&self) -> anyhow::Result<u64> {
        let sql =
            format!("UPDATE deliveries SET status = 'pending', {RELEASE} WHERE status = 'sending'");
        Ok(on_db!(&self.db, pool => sqlx::query(&sql).execute(pool).await?.rows_affected()))
    }

    /// The reaper: claims whose expiry has passed go back to the queue (their worker died,
    /// hung or lost the database). Their late settles are fenced off by the token.
    pub async fn requeue_expired(&self, now: DateTime<Utc>) -> anyhow::Result<u64> {
        let requeue = format!(
            "UPDATE deliveries SET status = 'pending', {RELEASE}
             WHERE status = 'sending' AND claim_expires_at < $1"
        );
        // Ended pauses are state nobody needs: the table stays as small as the live pauses.
        let prune = "DELETE FROM destinations WHERE paused_until < $1";
        on_db!(&self.db, pool => {
            let requeued = sqlx::query(&requeue).bind(ms(now)).execute(pool).await?.rows_affected();
            sqlx::query(prune).bind(ms(now)).execute(pool).await?;
            Ok(requeued)
        })
    }

    /// Claims up to `limit` due rows of one channel whose destination is not paused, oldest
    /// first, under one new token that expires at `expires`.
    pub async fn claim_due(
        &self,
        channel: Channel,
        now: DateTime<Utc>,
        limit: i64,
        token: &str,
        expires: DateTime<Utc>,
    ) -> anyhow::Result<Vec<Claimed>> {
        let sql = claim_sql(self.backend());
        let rows: Vec<(String, NaiveDate, i64, i64, i64, String)> = on_db!(&self.db, pool => {
            sqlx::query_as(&sql)
                .bind(channel.as_str())
                .bind(ms(now))
                .bind(limit)
                .bind(token)
                .bind(ms(expires))
                .bind(WHOLE_CHANNEL)
                .fetch_all(pool)
                .await?
        });
        let mut claimed: Vec<Claimed> = rows
            .into_iter()
            .map(
                |(id, digest_date, subscriber_id, attempts, parts_sent, edition)| Claimed {
                    id,
                    digest_date,
                    edition: Edition::from_stored(&edition),
                    subscriber_id,
                    attempts: u32::try_from(attempts).unwrap_or(0),
                    parts_sent: u32::try_from(parts_sent).unwrap_or(0),
                    token: token.to_string(),
                },
            )
            .collect();
        claimed.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(claimed)
    }

    /// When the next pending row of this channel can be claimed: its due time, or the end
    /// of its destination's pause when that is later.
    pub async fn next_due(&self, channel: Channel) -> anyhow::Result<Option<DateTime<Utc>>> {
        let sql = "SELECT MIN(CASE WHEN p.paused_until > d.next_attempt_at THEN p.paused_until
                             ELSE d.next_attempt_at END)
             FROM deliveries d
             LEFT JOIN destinations p ON p.channel = d.channel AND p.key = d.destination
             WHERE d.status = 'pending' AND d.channel = $1";
        let due: Option<i64> = on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(channel.as_str()).fetch_one(pool).await?
        });
        Ok(due.and_then(DateTime::from_timestamp_millis))
    }

    /// Holds back one destination (or the whole channel, key [`WHOLE_CHANNEL`]) until
    /// `until`; a later pause already there is kept.
    pub async fn pause_destination(
        &self,
        channel: Channel,
        key: &str,
        until: DateTime<Utc>,
        reason: &str,
    ) -> anyhow::Result<()> {
        let sql = "INSERT INTO destinations (channel, key, paused_until, reason) VALUES ($1, $2, $3, $4)
             ON CONFLICT (channel, key) DO UPDATE SET paused_until = excluded.paused_until, reason = excluded.reason
             WHERE excluded.paused_until > destinations.paused_until";
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(channel.as_str())
                .bind(key)
                .bind(ms(until))
                .bind(reason)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Records that the first `parts_sent` messages went out, and extends the claim.
    pub async fn mark_part_sent(
        &self,
        c: &Claimed,
        parts_sent: u32,
        expires: DateTime<Utc>,
    ) -> anyhow::Result<Settled> {
        settle!(
            self,
            fenced("parts_sent = $1, claim_expires_at = $2", 2),
            c,
            i64::from(parts_sent),
            ms(expires)
        )
    }

    pub async fn mark_sent(
        &self,
        c: &Claimed,
        attempts: u32,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Settled> {
        settle!(
            self,
            fenced(
                &format!(
                    "status = 'sent', attempts = $1, sent_at = $2, last_error = NULL, {RELEASE}"
                ),
                2
            ),
            c,
            i64::from(attempts),
            now
        )
    }

    /// [`Store::mark_sent`] for several claims in one statement per chunk (256, 64, 16, 4
    /// or 1 rows, so a handful of statements are prepared); each row under its own fence
    /// and with its own attempt count. Returns the ids that were still held by their
    /// claims.
    pub async fn mark_sent_many(
        &self,
        claims: &[(&Claimed, u32)],
        now: DateTime<Utc>,
    ) -> anyhow::Result<std::collections::HashSet<String>> {
        let mut settled = std::collections::HashSet::new();
        let mut rest = claims;
        while !rest.is_empty() {
            let size = [256, 64, 16, 4, 1]
                .into_iter()
                .find(|n| *n <= rest.len())
                .unwrap_or(1);
            let (chunk, tail) = rest.split_at(size);
            rest = tail;
            const COLUMNS: usize = 5;
            let rows: Vec<String> = (0..size)
                .map(|i| {
                    let first = COLUMNS * i + 2;
                    let params: Vec<String> =
                        (first..first + COLUMNS).map(|p| format!("${p}")).collect();
                    format!("({})", params.join(", "))
                })
                .collect();
            // VALUES columns are column1.. on both engines; rows are found by their key.
            let sql = format!(
                "UPDATE deliveries SET status = 'sent', attempts = v.column5, sent_at = $1, last_error = NULL, {RELEASE}
                 FROM (VALUES {}) AS v
                 WHERE deliveries.subscriber_id = v.column1 AND deliveries.digest_date = v.column2
                   AND deliveries.edition = v.column3 AND deliveries.claim_token = v.column4
                   AND deliveries.status = 'sending'
                 RETURNING deliveries.id",
                rows.join(", ")
            );
            let ids: Vec<String> = on_db!(&self.db, pool => {
                let mut q = sqlx::query_scalar(&sql).bind(now);
                for (c, attempts) in chunk {
                    q = q
                        .bind(c.subscriber_id)
                        .bind(c.digest_date)
                        .bind(c.edition.as_str())
                        .bind(&c.token)
                        .bind(i64::from(*attempts));
                }
                q.fetch_all(pool).await?
            });
            settled.extend(ids);
        }
        Ok(settled)
    }

    /// Back to the queue, due at `next_at`. With `attempts` unchanged this is a deferral
    /// (the destination was paused), not a failed attempt.
    pub async fn mark_retry(
        &self,
        c: &Claimed,
        attempts: u32,
        next_at: DateTime<Utc>,
        error: &str,
    ) -> anyhow::Result<Settled> {
        settle!(
            self,
            fenced(
                &format!(
                    "status = 'pending', attempts = $1, next_attempt_at = $2, last_error = $3, {RELEASE}"
                ),
                3
            ),
            c,
            i64::from(attempts),
            ms(next_at),
            error
        )
    }

    pub async fn mark_failed(
        &self,
        c: &Claimed,
        attempts: u32,
        error: &str,
    ) -> anyhow::Result<Settled> {
        settle!(
            self,
            fenced(
                &format!("status = 'failed', attempts = $1, last_error = $2, {RELEASE}"),
                2
            ),
            c,
            i64::from(attempts),
            error
        )
    }

    /// Other pending rows of a subscriber that was just disabled are failed with the reason.
    pub async fn fail_pending_for(&self, subscriber_id: i64, error: &str) -> anyhow::Result<()> {
        let sql = "UPDATE deliveries SET status = 'failed', last_error = $1 WHERE subscriber_id = $2 AND status = 'pending'";
        on_db!(&self.db, pool => {
            sqlx::query(sql).bind(error).bind(subscriber_id).execute(pool).await?;
        });
        Ok(())
    }

    /// A subscriber's address changed (a Telegram group became a supergroup): its queued
    /// rows go to the new destination.
    pub async fn move_pending_destination(
        &self,
        subscriber_id: i64,
        destination: &str,
    ) -> anyhow::Result<()> {
        let sql = "UPDATE deliveries SET destination = $1 WHERE subscriber_id = $2 AND status IN ('pending', 'sending')";
        on_db!(&self.db, pool => {
            sqlx::query(sql).bind(destination).bind(subscriber_id).execute(pool).await?;
        });
        Ok(())
    }

    pub async fn delivery_counts(&self, date: NaiveDate) -> anyhow::Result<DeliveryCounts> {
        let sql = "SELECT status, COUNT(*) FROM deliveries WHERE digest_date = $1 GROUP BY status";
        let rows: Vec<(String, i64)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(date).fetch_all(pool).await?
        });
        let mut counts = DeliveryCounts::default();
        for (status, n) in rows {
            match status.as_str() {
                "pending" => counts.pending = n,
                "sending" => counts.sending = n,
                "sent" => counts.sent = n,
                _ => counts.failed = n,
            }
        }
        Ok(counts)
    }

    /// Rows of one digest still waiting or in flight, whoever holds them. Served by the
    /// index of the live outbox, so it costs what is queued, not the outbox's history.
    pub async fn outstanding(&self, date: NaiveDate) -> anyhow::Result<i64> {
        // One count per status, each matching a partial index of the Postgres schema.
        let sql = "SELECT (SELECT COUNT(*) FROM deliveries WHERE status = 'pending' AND digest_date = $1)
                        + (SELECT COUNT(*) FROM deliveries WHERE status = 'sending' AND digest_date = $1)";
        Ok(on_db!(&self.db, pool => sqlx::query_scalar(sql).bind(date).fetch_one(pool).await?))
    }

    /// Rows waiting or in flight, by channel and status (sent and failed rows are history).
    pub async fn backlog(&self) -> anyhow::Result<Vec<Backlog>> {
        let sql = "SELECT channel, status, COUNT(*) FROM deliveries WHERE status IN ('pending', 'sending')
             GROUP BY channel, status ORDER BY channel, status";
        let rows: Vec<(String, String, i64)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(channel, status, rows)| Backlog {
                channel,
                status,
                rows,
            })
            .collect())
    }

    /// The oldest due time of a pending row that is not held back by a pause: how long the
    /// outbox has been failing to keep up (None when nothing is overdue).
    pub async fn oldest_ready_due(
        &self,
        channel: Channel,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<DateTime<Utc>>> {
        let sql = "SELECT MIN(d.next_attempt_at) FROM deliveries d
             WHERE d.status = 'pending' AND d.channel = $3 AND d.next_attempt_at <= $1
               AND NOT EXISTS (SELECT 1 FROM destinations p
                               WHERE p.channel = d.channel
                                 AND (p.key = d.destination OR p.key = $2)
                                 AND p.paused_until > $1)";
        let due: Option<i64> = on_db!(&self.db, pool => {
            sqlx::query_scalar(sql)
                .bind(ms(now))
                .bind(WHOLE_CHANNEL)
                .bind(channel.as_str())
                .fetch_one(pool)
                .await?
        });
        Ok(due.and_then(DateTime::from_timestamp_millis))
    }
}
