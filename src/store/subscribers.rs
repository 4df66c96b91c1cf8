//! Subscriber rows.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::Store;
use crate::model::{Filter, Score};
use crate::subscriber::{Address, Status, Subscriber};

const COLUMNS: &str = "id, address, layers, min_score, language, status, status_reason, notify_empty, created_at, updated_at, options, deliver_at, cadence, boost_layers, follows";

const INSERT: &str = "INSERT INTO subscribers (address, channel, layers, min_score, language, status, status_reason, notify_empty, created_at, updated_at, options, follows)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11)
         ON CONFLICT (address) DO NOTHING RETURNING id";

/// Inserts one subscriber through `$executor` (a pool or a transaction of either engine):
/// `Some(id)`, or `None` when the address is subscribed already.
macro_rules! insert_subscriber {
    ($executor:expr, $s:expr, $now:expr) => {{
        let s: &NewSubscriber<'_> = $s;
        let id: Option<i64> = sqlx::query_scalar(INSERT)
            .bind(s.address.to_stored())
            .bind(s.address.channel().as_str())
            .bind(layers_column(s.filter)?)
            .bind(min_score_column(s.filter))
            .bind(s.language)
            .bind(s.status.as_str())
            .bind(reason(s.status))
            .bind(s.notify_empty)
            .bind($now)
            .bind(s.address.options().to_stored())
            .bind(follows_column(s.filter)?)
            .fetch_optional($executor)
            .await?;
        id
    }};
}

/// The subscriber with this address, through `$executor`.
macro_rules! by_address {
    ($executor:expr, $address:expr) => {{
        let sql = format!("SELECT {COLUMNS} FROM subscribers WHERE address = $1");
        let row = sqlx::query(&sql)
            .bind($address.to_stored())
            .fetch_optional($executor)
            .await?;
        row.as_ref().map(subscriber_from_row).transpose()?
    }};
}

impl Store {
    /// Adds a subscriber; `Ok(None)` when the address is already subscribed.
    pub async fn add_subscriber(
        &self,
        address: &Address,
        filter: &Filter,
        language: &str,
        status: &Status,
        notify_empty: bool,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<i64>> {
        let new = NewSubscriber {
            address,
            filter,
            language,
            status,
            notify_empty,
        };
        Ok(on_db!(&self.db, pool => insert_subscriber!(pool, &new, now)))
    }

    /// Adds many subscribers in one transaction (imports, benchmarks); returns how many
    /// were new.
    pub async fn add_subscribers(
        &self,
        subscribers: &[NewSubscriber<'_>],
        now: DateTime<Utc>,
    ) -> anyhow::Result<usize> {
        let mut added = 0;
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            for s in subscribers {
                added += usize::from(insert_subscriber!(&mut *tx, s, now).is_some());
            }
            tx.commit().await?;
        });
        Ok(added)
    }

    pub async fn subscribers(&self) -> anyhow::Result<Vec<Subscriber>> {
        let sql = format!("SELECT {COLUMNS} FROM subscribers ORDER BY id");
        on_db!(&self.db, pool => {
            let rows = sqlx::query(&sql).fetch_all(pool).await?;
            rows.iter().map(subscriber_from_row).collect()
        })
    }

    /// Active subscribers, the ones a digest is planned for: up to `limit` of them with
    /// ids above `after`, by id. Planning reads them page by page (keyset, not OFFSET), so
    /// a million subscribers are never in memory at once.
    pub async fn active_subscribers_page(
        &self,
        after: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<Subscriber>> {
        use futures::TryStreamExt;
        let sql = format!(
            "SELECT {COLUMNS} FROM subscribers WHERE status = 'active' AND id > $1 ORDER BY id LIMIT $2"
        );
        let mut out = Vec::new();
        on_db!(&self.db, pool => {
            let mut rows = sqlx::query(&sql).bind(after).bind(limit).fetch(pool);
            while let Some(row) = rows.try_next().await? {
                out.push(subscriber_from_row(&row)?);
            }
        });
        Ok(out)
    }

    pub async fn subscriber(&self, id: i64) -> anyhow::Result<Option<Subscriber>> {
        let sql = format!("SELECT {COLUMNS} FROM subscribers WHERE id = $1");
        on_db!(&self.db, pool => {
            let row = sqlx::query(&sql).bind(id).fetch_optional(pool).await?;
            row.as_ref().map(subscriber_from_row).transpose()
        })
    }

    /// The subscribers with these ids (one query for a claimed batch), by id.
    pub async fn subscribers_with_ids(
        &self,
        ids: &[i64],
    ) -> anyhow::Result<std::collections::HashMap<i64, Subscriber>> {
        let mut found = std::collections::HashMap::new();
        // Well under SQLite's 32,766 parameters per statement.
        for chunk in ids.chunks(1_000) {
            on_db!(&self.db, pool => {
                let mut query = sqlx::QueryBuilder::new(format!(
                    "SELECT {COLUMNS} FROM subscribers WHERE id IN ("
                ));
                let mut list = query.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                query.push(")");
                for row in query.build().fetch_all(pool).await? {
                    let s = subscriber_from_row(&row)?;
                    found.insert(s.id, s);
                }
            });
        }
        Ok(found)
    }

    pub async fn subscriber_by_address(
        &self,
        address: &Address,
    ) -> anyhow::Result<Option<Subscriber>> {
        Ok(on_db!(&self.db, pool => by_address!(pool, address)))
    }

    /// Replaces filter, language, the empty-day option, delivery time and cadence.
    pub async fn update_subscriber(
        &self,
        s: &Subscriber,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let sql = "UPDATE subscribers SET layers = $1, min_score = $2, language = $3, notify_empty = $4, updated_at = $5,
             options = $6, deliver_at = $8, cadence = $9, boost_layers = $10, follows = $11 WHERE id = $7";
        let layers = layers_column(&s.filter)?;
        let boost = s
            .filter
            .boost
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(&layers)
                .bind(min_score_column(&s.filter))
                .bind(&s.language)
                .bind(s.notify_empty)
                .bind(now)
                .bind(s.address.options().to_stored())
                .bind(s.id)
                .bind(s.deliver_at.map(|t| t.to_string()))
                .bind(s.cadence.to_string())
                .bind(&boost)
                .bind(follows_column(&s.filter)?)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    pub async fn set_subscriber_status(
        &self,
        id: i64,
        status: &Status,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let sql =
            "UPDATE subscribers SET status = $1, status_reason = $2, updated_at = $3 WHERE id = $4";
        let changed = on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(status.as_str())
                .bind(reason(status))
                .bind(now)
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(changed == 1)
    }

    /// Moves a subscriber to a new address (a Telegram group that became a supergroup).
    pub async fn set_subscriber_address(
        &self,
        id: i64,
        address: &Address,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let sql =
            "UPDATE subscribers SET address = $1, channel = $2, updated_at = $3 WHERE id = $4";
        on_db!(&self.db, pool => {
            sqlx::query(sql)
                .bind(address.to_stored())
                .bind(address.channel().as_str())
                .bind(now)
                .bind(id)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// A sign-up from the web form, in one transaction. A new or still pending address
    /// becomes (or stays) pending with the filter and language given; an address turned off
    /// after a bounce may opt in again, with the layers, threshold and language of the form
    /// and what only the preferences page sets (followed phrases, delivery hour, cadence,
    /// layer boost) kept from before: the same mailbox, confirmed again by its owner.
    /// Active or paused subscribers are left as they are.
    /// Pending sign-ups older than `stale_before` are removed first: their links expired.
    pub async fn signup(
        &self,
        address: &Address,
        filter: &Filter,
        language: &str,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
    ) -> anyhow::Result<Signup> {
        let layers = layers_column(filter)?;
        let renew =
            "UPDATE subscribers SET layers = $1, min_score = $2, language = $3, status = 'pending',
                     status_reason = NULL, created_at = $4, updated_at = $4, options = $6 WHERE id = $5";
        on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM subscribers WHERE status = 'pending' AND created_at < $1")
                .bind(stale_before)
                .execute(&mut *tx)
                .await?;
            let existing: Option<Subscriber> = by_address!(&mut *tx, address);
            let outcome = match existing {
                None => {
                    let new = NewSubscriber {
                        address,
                        filter,
                        language,
                        status: &Status::Pending,
                        notify_empty: false,
                    };
                    let id = insert_subscriber!(&mut *tx, &new, now)
                        .ok_or_else(|| anyhow::anyhow!("sign-up raced with another insert"))?;
                    Signup::Pending(id)
                }
                Some(s) if matches!(s.status, Status::Pending | Status::Disabled(_)) => {
                    // A robot's signing secret is the operator's (set from the command
                    // line); the form may change only its keyword.
                    let options = crate::channels::Options {
                        secret_env: s.address.options().secret_env,
                        keyword: address.options().keyword,
                    };
                    sqlx::query(renew)
                        .bind(&layers)
                        .bind(min_score_column(filter))
                        .bind(language)
                        .bind(now)
                        .bind(s.id)
                        .bind(options.to_stored())
                        .execute(&mut *tx)
                        .await?;
                    Signup::Pending(s.id)
                }
                Some(s) => Signup::AlreadySubscribed(s.id),
            };
            tx.commit().await?;
            Ok(outcome)
        })
    }

    /// Double opt-in: pending becomes active. False when the subscriber is not pending (already
    /// confirmed, unsubscribed or expired), so a confirmation link works once.
    pub async fn confirm_subscriber(&self, id: i64, now: DateTime<Utc>) -> anyhow::Result<bool> {
        let sql = "UPDATE subscribers SET status = 'active', updated_at = $1 WHERE id = $2 AND status = 'pending'";
        let changed = on_db!(&self.db, pool => {
            sqlx::query(sql).bind(now).bind(id).execute(pool).await?.rows_affected()
        });
        Ok(changed == 1)
    }

    /// Removes a subscriber and its deliveries (Postgres has no cascading foreign key on
    /// the outbox: see its schema).
    pub async fn remove_subscriber(&self, id: i64) -> anyhow::Result<bool> {
        let changed = on_db!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM deliveries WHERE subscriber_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            let changed = sqlx::query("DELETE FROM subscribers WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            changed
        });
        Ok(changed == 1)
    }
}

/// What a web sign-up did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signup {
    /// Waiting for confirmation; send a confirmation link for this id.
    Pending(i64),
    /// Already receiving the digest (or paused): nothing changed.
    AlreadySubscribed(i64),
}

/// A subscriber to insert.
pub struct NewSubscriber<'a> {
    pub address: &'a Address,
    pub filter: &'a Filter,
    pub language: &'a str,
    pub status: &'a Status,
    pub notify_empty: bool,
}

/// The filter's columns: layers as a JSON array, the threshold in tenths.
fn layers_column(filter: &Filter) -> anyhow::Result<String> {
    Ok(serde_json::to_string(&filter.layers)?)
}

fn min_score_column(filter: &Filter) -> i64 {
    i64::from(filter.min_score.tenths())
}

fn reason(status: &Status) -> Option<&str> {
    match status {
        Status::Disabled(r) => Some(r.as_str()),
        _ => None,
    }
}

/// The followed phrases as stored: a JSON array, NULL for none.
fn follows_column(f: &Filter) -> anyhow::Result<Option<String>> {
    Ok(if f.follows.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&f.follows)?)
    })
}

/// A subscriber from a row of [`COLUMNS`], on either engine.
fn subscriber_from_row<R>(row: &R) -> anyhow::Result<Subscriber>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> DateTime<Utc>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let address: String = row.try_get(1)?;
    let options: Option<String> = row.try_get(10)?;
    let deliver_at: Option<String> = row.try_get(11)?;
    let cadence: String = row.try_get(12)?;
    let boost: Option<String> = row.try_get(13)?;
    let follows: Option<String> = row.try_get(14)?;
    let min_score: i64 = row.try_get(3)?;
    let layers: String = row.try_get(2)?;
    let status: String = row.try_get(5)?;
    let status_reason: Option<String> = row.try_get(6)?;
    Ok(Subscriber {
        id: row.try_get(0)?,
        address: Address::from_stored(&address, options.as_deref())
            .map_err(|e| anyhow::anyhow!("Stored subscriber address is invalid: {e}"))?,
        filter: Filter {
            layers: serde_json::from_str(&layers)?,
            min_score: Score::from_tenths(u16::try_from(min_score.clamp(0, 1000)).unwrap_or(0)),
            boost: boost.as_deref().map(serde_json::from_str).transpose()?,
            follows: follows
                .as_deref()
                .map(serde_json::from_str)
                .transpose()?
                .unwrap_or_default(),
        },
        language: row.try_get(4)?,
        status: Status::from_parts(&status, status_reason),
        notify_empty: row.try_get(7)?,
        deliver_at: deliver_at
            .as_deref()
            .map(crate::subscriber::LocalTime::from_stored)
            .transpose()
            .map_err(|e| anyhow::anyhow!("Stored subscriber {e}"))?,
        cadence: crate::subscriber::Cadence::parse(&cadence)
            .map_err(|e| anyhow::anyhow!("Stored subscriber cadence: {e}"))?,
        created_at: row.try_get(8)?,
        updated_at: row.try_get(9)?,
    })
}
