//! Votes (crate::feedback): one row per event and reader, replaced by a new vote; the
//! tallies, the report's events and a subscriber's layer boost are read from them.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::Store;
use crate::feedback::{Tally, Vote};
use crate::model::DigestEvent;

/// Ids per IN list, well under SQLite's 32,766 parameters per statement.
const CHUNK: usize = 1_000;

impl Store {
    /// Records a reader's vote on an event, replacing their earlier one, and returns the
    /// event's votes; None (nothing recorded) when no stored digest has the event. With a
    /// subscription whose boost is on, its boosted layers follow the new vote.
    pub async fn record_vote(
        &self,
        event_id: &str,
        reader: &str,
        subscriber_id: Option<i64>,
        vote: Vote,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<Tally>> {
        let known =
            "SELECT COUNT(*) FROM (SELECT 1 FROM digest_events WHERE event_id = $1 LIMIT 1) AS e";
        let n: i64 = on_db!(&self.db, pool => {
            sqlx::query_scalar(known).bind(event_id).fetch_one(pool).await?
        });
        if n == 0 {
            return Ok(None);
        }
        let sql = "INSERT INTO votes (event_id, reader, subscriber_id, vote, voted_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (event_id, reader) DO UPDATE SET
                 vote = excluded.vote, voted_at = excluded.voted_at,
                 subscriber_id = COALESCE(excluded.subscriber_id, votes.subscriber_id)";
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(event_id)
                .bind(reader)
                .bind(subscriber_id)
                .bind(vote.value())
                .bind(now)
                .execute(pool)
                .await?;
        });
        if let Some(id) = subscriber_id
            && let Some(mut s) = self.subscriber(id).await?
            && s.filter.boost.is_some()
        {
            s.filter.boost = Some(self.liked_layers(id).await?);
            self.update_subscriber(&s, now).await?;
        }
        Ok(Some(self.tally(event_id).await?))
    }

    /// One reader's vote on an event, if they voted.
    pub async fn vote_of(&self, event_id: &str, reader: &str) -> anyhow::Result<Option<Vote>> {
        let sql = "SELECT vote FROM votes WHERE event_id = $1 AND reader = $2";
        let v: Option<i64> = on_db!(&self.db, pool => {
            sqlx::query_scalar(sql).bind(event_id).bind(reader).fetch_optional(pool).await?
        });
        Ok(v.and_then(|v| Vote::parse(&v.to_string())))
    }

    pub async fn tally(&self, event_id: &str) -> anyhow::Result<Tally> {
        let ids = [event_id.to_string()];
        Ok(self
            .tallies(&ids)
            .await?
            .remove(event_id)
            .unwrap_or_default())
    }

    /// The votes on these events (events without votes are absent).
    pub async fn tallies(&self, event_ids: &[String]) -> anyhow::Result<HashMap<String, Tally>> {
        let mut found = HashMap::new();
        for chunk in event_ids.chunks(CHUNK) {
            let rows: Vec<(String, i64, i64)> = on_db!(&self.db, pool => {
                let mut query = sqlx::QueryBuilder::new(
                    "SELECT event_id, SUM(CASE WHEN vote > 0 THEN 1 ELSE 0 END),
                            SUM(CASE WHEN vote < 0 THEN 1 ELSE 0 END)
                     FROM votes WHERE event_id IN (",
                );
                let mut list = query.separated(", ");
                for id in chunk {
                    list.push_bind(id.as_str());
                }
                query.push(") GROUP BY event_id");
                query.build_query_as().fetch_all(pool).await?
            });
            for (id, up, down) in rows {
                found.insert(id, tally(up, down));
            }
        }
        Ok(found)
    }

    /// Every event voted on since `since`, in its newest archived form, with its votes:
    /// what `kdigest feedback` reports on. Events no stored digest has are left out.
    pub async fn voted_events(
        &self,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<(DigestEvent, Tally)>> {
        let sql = "SELECT event_id, SUM(CASE WHEN vote > 0 THEN 1 ELSE 0 END),
                          SUM(CASE WHEN vote < 0 THEN 1 ELSE 0 END)
             FROM votes WHERE voted_at >= $1 GROUP BY event_id ORDER BY event_id";
        let rows: Vec<(String, i64, i64)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(since).fetch_all(pool).await?
        });
        let ids: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        let mut events = self.newest_events(&ids).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, up, down)| events.remove(&id).map(|e| (e, tally(up, down))))
            .collect())
    }

    /// The newest archived form of each of these events.
    async fn newest_events(&self, ids: &[String]) -> anyhow::Result<HashMap<String, DigestEvent>> {
        let mut found: HashMap<String, DigestEvent> = HashMap::new();
        for chunk in ids.chunks(CHUNK) {
            let rows: Vec<(String, String)> = on_db!(&self.db, pool => {
                let mut query = sqlx::QueryBuilder::new(
                    "SELECT event_id, data FROM digest_events WHERE event_id IN (",
                );
                let mut list = query.separated(", ");
                for id in chunk {
                    list.push_bind(id.as_str());
                }
                query.push(") ORDER BY digest_date");
                query.build_query_as().fetch_all(pool).await?
            });
            // Oldest first, so the newest form is the one that stays.
            for (id, data) in rows {
                found.insert(id, serde_json::from_str(&data)?);
            }
        }
        Ok(found)
    }

    /// The layers a subscription's votes say it consistently likes.
    pub async fn liked_layers(&self, subscriber_id: i64) -> anyhow::Result<BTreeSet<String>> {
        let sql = "SELECT DISTINCT v.event_id, v.reader, v.vote, l.layer FROM votes v
             JOIN digest_event_layers l ON l.event_id = v.event_id
             WHERE v.subscriber_id = $1";
        let rows: Vec<(String, String, i64, String)> = on_db!(&self.db, pool => {
            sqlx::query_as(sql).bind(subscriber_id).fetch_all(pool).await?
        });
        // One vote per event and reader, with the layers of all the event's days.
        let mut votes: HashMap<(String, String), (Vote, Vec<String>)> = HashMap::new();
        for (event, reader, vote, layer) in rows {
            let vote = if vote > 0 { Vote::Up } else { Vote::Down };
            let entry = votes.entry((event, reader)).or_insert((vote, Vec::new()));
            if !entry.1.contains(&layer) {
                entry.1.push(layer);
            }
        }
        Ok(crate::feedback::liked_layers(
            votes.values().map(|(v, layers)| (layers.as_slice(), *v)),
        ))
    }
}

fn tally(up: i64, down: i64) -> Tally {
    Tally {
        up: u32::try_from(up).unwrap_or(0),
        down: u32::try_from(down).unwrap_or(0),
    }
}
