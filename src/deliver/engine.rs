//! The delivery engine: per-channel workers claim due outbox rows, wait for the rate limits,
//! send, and settle each row (sent, retry with backoff, or failed and the subscriber
//! disabled). Concurrency per channel is bounded by config; on shutdown nothing new is
//! claimed and in-flight sends finish.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use sha2::{Digest as _, Sha256};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::limits::Limits;

/// How long a channel pauses after an outage (at most `delivery.backoff_max`).
const OUTAGE_PAUSE: Duration = Duration::from_secs(60);
use super::webhook::WebhookSender;
use super::{RenderCache, SendError, Sender, plan};
use crate::config::{Config, DeliveryConfig, Secret};
use crate::metrics::Metrics;
use crate::model::Digest;
use crate::store::{Claimed, Store};
use crate::subscriber::{Channel, Status};

/// When a worker stops.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// `run --once`: when nothing is due, after waiting at most this long for retries.
    Idle { max_wait: Duration },
    /// The daemon: when shutdown is signalled.
    Shutdown,
}

pub struct Engine {
    store: Store,
    delivery: DeliveryConfig,
    senders: HashMap<Channel, Sender>,
    limits: HashMap<Channel, Limits>,
    cache: RenderCache,
    digests: Mutex<HashMap<NaiveDate, Arc<Digest>>>,
    metrics: Arc<Metrics>,
}

impl Engine {
    /// An engine with every channel that can send. The webhook signing key comes from the
    /// environment variable named by `delivery.webhook_secret_env`; without it webhooks go
    /// unsigned and a warning says so.
    pub fn new(store: Store, config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<Engine> {
        let secret = Secret::from_env(
            &config.delivery.webhook_secret_env,
            "the webhook signing key",
        )
        .ok();
        if secret.is_none() {
            tracing::warn!(
                message = "Webhook deliveries are not signed; set the signing key to sign them",
                variable = %config.delivery.webhook_secret_env
            );
        }
        let mut senders = HashMap::new();
        senders.insert(
            Channel::Webhook,
            Sender::Webhook(WebhookSender::new(config.delivery.timeout, secret)?),
        );
        match crate::deliver::telegram::bot(&config.telegram) {
            Ok(bot) => {
                senders.insert(
                    Channel::Telegram,
                    Sender::Telegram(crate::deliver::telegram::TelegramSender::new(bot)),
                );
            }
            Err(_) => tracing::info!(
                message = "No Telegram token; Telegram subscribers are not delivered to",
                variable = %config.telegram.token_env
            ),
        }
        // Email needs a relay and the key that signs unsubscribe links.
        match crate::tokens::secret_from_env()? {
            Some(secret) => match crate::deliver::email::EmailSender::new(&config.email, secret) {
                Ok(sender) => {
                    senders.insert(Channel::Email, Sender::Email(Arc::new(sender)));
                }
                Err(error) => {
                    tracing::warn!(message = "Email delivery is off", error = %format!("{error:#}"))
                }
            },
            None => tracing::info!(
                message =
                    "No signing key for unsubscribe links; email subscribers are not delivered to",
                variable = crate::tokens::SECRET_ENV
            ),
        }
        // Webhook subscribers need no bot token, so the Discord channel is always there.
        senders.insert(
            Channel::Discord,
            Sender::Discord(Box::new(crate::deliver::discord::DiscordSender::new(
                &config.discord,
            ))),
        );
        let limits = Channel::ALL
            .iter()
            .map(|c| {
                let group = (*c == Channel::Telegram).then_some(config.telegram.group_per_minute);
                (*c, Limits::new(&config.delivery.limits(*c), group))
            })
            .collect();
        Ok(Engine {
            store,
            delivery: config.delivery.clone(),
            senders,
            limits,
            cache: RenderCache::new(config.digest.templates_dir.clone()),
            digests: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// Channels with a sender, in a fixed order.
    pub fn channels(&self) -> Vec<Channel> {
        Channel::ALL
            .into_iter()
            .filter(|c| self.senders.contains_key(c))
            .collect()
    }

    /// Plans the digest for every active subscriber, in one transaction. Idempotent.
    pub async fn plan(&self, digest: &Digest) -> anyhow::Result<u64> {
        // This digest is the current version of its date (it may have been regenerated).
        self.digests
            .lock()
            .expect("digest cache lock")
            .insert(digest.date, Arc::new(digest.clone()));
        self.cache.forget(digest.date);
        let subscribers = self.store.active_subscribers().await?;
        let skipped = subscribers
            .iter()
            .filter(|s| !self.senders.contains_key(&s.address.channel()))
            .count();
        if skipped > 0 {
            tracing::warn!(
                message = "Subscribers on channels without a sender are skipped",
                skipped
            );
        }
        let rows = plan(digest, &subscribers, &self.channels());
        let inserted = self
            .store
            .plan_deliveries(digest.date, &rows, Utc::now())
            .await?;
        tracing::info!(message = "Deliveries planned", date = %digest.date, planned = rows.len(), new = inserted);
        Ok(inserted)
    }

    /// Runs one worker per channel until `until`.
    pub async fn run(
        self: &Arc<Self>,
        until: Until,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let mut workers = JoinSet::new();
        for channel in self.channels() {
            let engine = self.clone();
            let shutdown = shutdown.clone();
            workers.spawn(async move { engine.run_channel(channel, until, shutdown).await });
        }
        while let Some(result) = workers.join_next().await {
            result??;
        }
        Ok(())
    }

    async fn run_channel(
        self: Arc<Self>,
        channel: Channel,
        until: Until,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let concurrency = self.delivery.limits(channel).concurrency;
        let slots = Arc::new(Semaphore::new(concurrency));
        let mut in_flight = JoinSet::new();
        loop {
            if *shutdown.borrow() {
                break;
            }
            // A one-off run does not wait out an outage: the deliveries stay queued for the
            // next run (the daemon keeps retrying after each pause).
            if matches!(until, Until::Idle { .. }) && self.limits[&channel].channel_paused() {
                tracing::warn!(
                    message =
                        "Channel paused by an outage; its deliveries stay queued for the next run",
                    channel = channel.as_str()
                );
                break;
            }
            while in_flight.try_join_next().is_some() {}
            let free = slots.available_permits();
            if free == 0 {
                in_flight.join_next().await;
                continue;
            }
            // Claim only what can start now: a claimed row is one in flight.
            let batch = self
                .store
                .claim_due(channel, Utc::now(), free as i64)
                .await?;
            if batch.is_empty() {
                if !in_flight.is_empty() {
                    in_flight.join_next().await;
                    continue;
                }
                let next_due = self.store.next_due(channel).await?;
                let wait = next_due.map(|t| {
                    Duration::from_secs(
                        u64::try_from(t - Utc::now().timestamp())
                            .unwrap_or(0)
                            .max(1),
                    )
                });
                let wait = match (until, wait) {
                    (Until::Idle { max_wait }, Some(w)) if w <= max_wait => w,
                    (Until::Idle { .. }, _) => break,
                    (Until::Shutdown, Some(w)) => w.min(Duration::from_secs(2)),
                    (Until::Shutdown, None) => Duration::from_secs(2),
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
                continue;
            }
            for claimed in batch {
                let permit = slots
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("semaphore is never closed");
                let engine = self.clone();
                in_flight.spawn(async move {
                    engine.deliver(claimed, channel).await;
                    drop(permit);
                });
            }
        }
        // Graceful shutdown: what was claimed finishes; nothing new is claimed.
        while in_flight.join_next().await.is_some() {}
        Ok(())
    }

    async fn digest(&self, date: NaiveDate) -> anyhow::Result<Option<Arc<Digest>>> {
        if let Some(d) = self.digests.lock().expect("digest cache lock").get(&date) {
            return Ok(Some(d.clone()));
        }
        let Some(d) = self.store.load_digest(date).await? else {
            return Ok(None);
        };
        let d = Arc::new(d);
        self.digests
            .lock()
            .expect("digest cache lock")
            .insert(date, d.clone());
        Ok(Some(d))
    }

    /// Sends one claimed delivery and settles its row. Errors are logged, never propagated:
    /// one failing subscriber never stops the others.
    async fn deliver(&self, c: Claimed, channel: Channel) {
        if let Err(error) = self.try_deliver(&c, channel).await {
            tracing::error!(message = "Delivery failed unexpectedly; it will be retried", delivery = %c.id, error = %format!("{error:#}"));
            // Put the row back in the queue rather than leave it claimed until a restart.
            let attempts = c.attempts + 1;
            let next = after(self.backoff(&c.id, attempts));
            let settle = if attempts >= self.delivery.max_attempts {
                self.store
                    .mark_failed(&c.id, attempts, &error.to_string())
                    .await
            } else {
                self.store
                    .mark_retry(&c.id, attempts, next, &error.to_string())
                    .await
            };
            if let Err(error) = settle {
                tracing::error!(message = "Cannot settle the delivery row", delivery = %c.id, %error);
            }
        }
    }

    async fn try_deliver(&self, c: &Claimed, channel: Channel) -> anyhow::Result<()> {
        let attempts = c.attempts + 1;
        let subscriber = match self.store.subscriber(c.subscriber_id).await? {
            Some(s) if s.status == Status::Active => s,
            Some(s) => {
                let reason = format!("Subscriber is {} now", s.status.as_str());
                return self.store.mark_failed(&c.id, c.attempts, &reason).await;
            }
            None => {
                return self
                    .store
                    .mark_failed(&c.id, c.attempts, "Subscriber was removed")
                    .await;
            }
        };
        let Some(digest) = self.digest(c.digest_date).await? else {
            return self
                .store
                .mark_failed(&c.id, c.attempts, "The digest is not stored")
                .await;
        };
        let messages =
            self.cache
                .messages(&digest, &subscriber.filter, &subscriber.language, channel)?;
        let sender = &self.senders[&channel];
        let limits = &self.limits[&channel];
        let mut subscriber = subscriber;
        let mut destination = subscriber.address.destination_key();
        let mut moved = false;
        let mut part = c.parts_sent as usize;
        while part < messages.len() {
            limits
                .wait(&destination, subscriber.address.is_group())
                .await;
            match sender
                .send(&subscriber.address, &messages[part], &c.id, subscriber.id)
                .await
            {
                Err(SendError::Moved(address))
                    if !moved && self.store.subscriber_by_address(&address).await?.is_some() =>
                {
                    // The new chat already has its own subscription: this one is obsolete.
                    let reason = format!("Chat moved to {address}, which has its own subscription");
                    self.fail(c, channel, attempts, &reason).await?;
                    return self
                        .store
                        .set_subscriber_status(subscriber.id, &Status::Disabled(reason), Utc::now())
                        .await
                        .map(|_| ());
                }
                Err(SendError::Moved(address)) if !moved => {
                    // The chat has a new id: remember it and send this part again, once.
                    tracing::info!(message = "Destination moved; updating the subscriber", from = %subscriber.address, to = %address);
                    self.store
                        .set_subscriber_address(subscriber.id, &address, Utc::now())
                        .await?;
                    subscriber.address = address;
                    destination = subscriber.address.destination_key();
                    moved = true;
                }
                Err(SendError::Moved(address)) => {
                    let reason = format!("Destination moved twice (last to {address})");
                    return self.fail(c, channel, attempts, &reason).await;
                }
                Err(SendError::Failed { reason }) => {
                    tracing::warn!(message = "Message rejected; not retried", subscriber = %subscriber.address, error = %reason);
                    return self.fail(c, channel, attempts, &reason).await;
                }
                Ok(()) => {
                    part += 1;
                    if part < messages.len() {
                        self.store.mark_part_sent(&c.id, part as u32).await?;
                    }
                }
                Err(SendError::Transient {
                    reason,
                    retry_after,
                }) => {
                    // A server may ask for any wait; never more than the longest backoff.
                    let retry_after = retry_after.map(|w| w.min(self.delivery.backoff_max));
                    if let Some(wait) = retry_after {
                        limits.pause(&destination, wait);
                    }
                    if attempts >= self.delivery.max_attempts {
                        tracing::warn!(message = "Delivery failed after the last attempt", subscriber = %subscriber.address, attempts, error = %reason);
                        return self.fail(c, channel, attempts, &reason).await;
                    }
                    let wait = retry_after
                        .unwrap_or_default()
                        .max(self.backoff(&c.id, attempts));
                    let next = after(wait);
                    self.metrics.delivery(channel.as_str(), "retry");
                    tracing::info!(message = "Delivery will be retried", subscriber = %subscriber.address, attempts, wait_secs = wait.as_secs(), error = %reason);
                    return self.store.mark_retry(&c.id, attempts, next, &reason).await;
                }
                Err(SendError::Outage { reason }) => {
                    // Nobody's fault but the relay's: no attempt is used, and every delivery
                    // of the channel waits. Reported once per pause, not once per recipient.
                    let wait = self.delivery.backoff_max.min(OUTAGE_PAUSE);
                    if limits.pause_channel(wait) {
                        tracing::error!(message = "Channel paused: its relay is down or refused our login; deliveries wait, nobody is marked bounced", channel = channel.as_str(), pause_secs = wait.as_secs_f64(), error = %reason);
                    }
                    self.metrics.delivery(channel.as_str(), "paused");
                    let next = after(wait);
                    return self
                        .store
                        .mark_retry(&c.id, c.attempts, next, &reason)
                        .await;
                }
                Err(SendError::Permanent { reason }) => {
                    tracing::warn!(message = "Subscriber disabled after a permanent delivery failure", subscriber = %subscriber.address, error = %reason);
                    self.fail(c, channel, attempts, &reason).await?;
                    self.store
                        .set_subscriber_status(
                            subscriber.id,
                            &Status::Disabled(reason.clone()),
                            Utc::now(),
                        )
                        .await?;
                    return self.store.fail_pending_for(subscriber.id, &reason).await;
                }
            }
        }
        self.metrics.delivery(channel.as_str(), "sent");
        self.store.mark_sent(&c.id, attempts, Utc::now()).await
    }

    /// Settles a delivery as failed and counts it.
    async fn fail(
        &self,
        c: &Claimed,
        channel: Channel,
        attempts: u32,
        reason: &str,
    ) -> anyhow::Result<()> {
        self.metrics.delivery(channel.as_str(), "failed");
        self.store.mark_failed(&c.id, attempts, reason).await
    }

    /// Exponential backoff with jitter: base × 2^(attempt-1), capped, times a factor in
    /// [0.5, 1) derived from the delivery id so retries of many rows do not align.
    fn backoff(&self, id: &str, attempt: u32) -> Duration {
        let exp = self
            .delivery
            .backoff_base
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1).min(20)));
        let capped = exp.min(self.delivery.backoff_max);
        let hash = Sha256::digest(format!("{id}/{attempt}").as_bytes());
        let jitter = 0.5 + f64::from(hash[0]) / 512.0;
        capped.mul_f64(jitter)
    }

    /// The email sender, when email delivery is on (the web sign-up shares it).
    pub fn mailer(&self) -> Option<Arc<super::email::EmailSender>> {
        match self.senders.get(&Channel::Email) {
            Some(Sender::Email(mailer)) => Some(mailer.clone()),
            _ => None,
        }
    }

    pub fn distinct_renders(&self) -> usize {
        self.cache.len()
    }
}

/// The time `wait` from now.
fn after(wait: Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default()
}
