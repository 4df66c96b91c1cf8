//! Delivery: planning (which subscriber gets which digest), rendering per distinct
//! (filter, language, channel), and the channel senders. The engine in `engine.rs` owns
//! claiming, rate limiting, retries and bookkeeping; a sender only knows how to send one
//! rendered message and how to classify its errors.

pub mod discord;
pub mod email;
pub mod engine;
pub mod health;
pub mod limits;
pub mod telegram;
pub mod webhook;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::NaiveDate;
use sha2::{Digest as _, Sha256};

use crate::digest;
use crate::model::{Digest, Filter};
use crate::parse::hex;
use crate::render::{Format, Renderer};
use crate::store::PlannedDelivery;
use crate::subscriber::{Address, Channel, Subscriber};

/// Why one send failed, as the engine needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Worth retrying: timeouts, 5xx, 429 (with the wait the server asked for).
    #[error("{reason}")]
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// The receiver refuses our credentials (a webhook's 401/403): retried like a
    /// transient fault and never disabling; when most receivers of the channel answer it at
    /// once, the engine pauses the channel (our signing key changed, not theirs).
    #[error("{reason}")]
    Refused { reason: String },
    /// Never retried; the subscriber is disabled with this reason (blocked, deleted, 404/410).
    #[error("{reason}")]
    Permanent { reason: String },
    /// This message cannot be delivered (too long, rejected markup); not retried, and the
    /// subscriber stays active.
    #[error("{reason}")]
    Failed { reason: String },
    /// The destination moved (a Telegram group upgraded to a supergroup): store the new
    /// address and send again.
    #[error("Destination moved to {0}")]
    Moved(Address),
    /// The channel itself is down (SMTP relay unreachable, our login refused): the whole
    /// channel pauses, the delivery goes back to the queue without using an attempt, and
    /// nobody is marked bounced or failed.
    #[error("{reason}")]
    Outage { reason: String },
}

/// The channels that have a sender. Telegram, Discord and email plug in here.
pub enum Sender {
    Webhook(webhook::WebhookSender),
    Telegram(telegram::TelegramSender),
    // Boxed: serenity's clients are large, and the enum is stored per channel.
    Discord(Box<discord::DiscordSender>),
    // Shared: the web sign-up sends its confirmations through the same SMTP pool.
    Email(Arc<email::EmailSender>),
}

impl Sender {
    pub fn channel(&self) -> Channel {
        match self {
            Sender::Webhook(_) => Channel::Webhook,
            Sender::Telegram(_) => Channel::Telegram,
            Sender::Discord(_) => Channel::Discord,
            Sender::Email(_) => Channel::Email,
        }
    }

    /// Sends one rendered message to one address.
    pub async fn send(
        &self,
        address: &Address,
        message: &str,
        delivery_id: &str,
        subscriber_id: i64,
    ) -> Result<(), SendError> {
        match (self, address) {
            (Sender::Webhook(s), Address::Webhook(url)) => s.send(url, message, delivery_id).await,
            (Sender::Telegram(s), Address::Telegram(chat)) => s.send(*chat, message).await,
            (Sender::Email(s), Address::Email(to)) => {
                s.send(to, message, delivery_id, subscriber_id).await
            }
            (
                Sender::Discord(s),
                address @ (Address::DiscordChannel(_) | Address::DiscordWebhook(_)),
            ) => s.send(address, message).await,
            (_, other) => Err(SendError::Permanent {
                reason: format!(
                    "Address {other} does not belong to the {} channel",
                    self.channel().as_str()
                ),
            }),
        }
    }
}

/// Stable id of the delivery of one digest to one subscriber; receivers use it to drop
/// duplicates.
pub fn delivery_id(date: NaiveDate, subscriber_id: i64) -> String {
    hex(&Sha256::digest(format!("{date}/{subscriber_id}").as_bytes())[..12])
}

/// One row per subscriber whose channel can be sent to and whose filtered digest is not
/// empty (or who asked for a note on empty days). Pure.
pub fn plan(
    digest: &Digest,
    subscribers: &[Subscriber],
    channels: &[Channel],
) -> Vec<PlannedDelivery> {
    let mut matches: HashMap<&Filter, bool> = HashMap::new();
    subscribers
        .iter()
        .filter(|s| channels.contains(&s.address.channel()))
        .filter(|s| {
            s.notify_empty
                || *matches
                    .entry(&s.filter)
                    .or_insert_with(|| digest.events().any(|e| s.filter.accepts(e)))
        })
        .map(|s| PlannedDelivery {
            id: delivery_id(digest.date, s.id),
            subscriber_id: s.id,
            channel: s.address.channel(),
            destination: s.address.destination_key(),
        })
        .collect()
}

/// The messages of one channel for a filtered digest, in sending order.
pub fn render_messages(
    digest: &Digest,
    channel: Channel,
    renderer: &Renderer,
) -> anyhow::Result<Vec<String>> {
    Ok(match channel {
        Channel::Webhook => renderer.render(digest, Format::Json)?,
        Channel::Telegram => renderer.render(digest, Format::Telegram)?,
        Channel::Discord => renderer.render(digest, Format::Discord)?,
        // The unsubscribe and preferences links differ per subscriber: the sender fills
        // them in.
        Channel::Email => vec![serde_json::to_string(&renderer.email(
            digest,
            email::UNSUBSCRIBE_PLACEHOLDER,
            email::PREFERENCES_PLACEHOLDER,
        )?)?],
    })
}

type RenderKey = (NaiveDate, Filter, String, Channel);

/// Renders are kept for this many digest dates (the newest); older dates render again.
const RENDERED_DATES: usize = 3;
/// And for at most this many distinct renders: beyond it the oldest date is dropped.
const RENDERS_MAX: usize = 4096;

/// Takes a cache lock whatever happened to its last holder: a panic while rendering leaves
/// the map as it was (the insert comes after the render), so it is still consistent.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Renders once per distinct (digest, filter, language, channel): 100,000 subscribers with
/// 20 distinct filters render 20 times per channel. Bounded by date and size.
#[derive(Default)]
pub struct RenderCache {
    renders: Mutex<HashMap<RenderKey, Arc<Vec<String>>>>,
    renderers: Mutex<HashMap<String, Arc<Renderer>>>,
    templates_dir: Option<std::path::PathBuf>,
}

impl RenderCache {
    pub fn new(templates_dir: Option<std::path::PathBuf>) -> RenderCache {
        RenderCache {
            templates_dir,
            ..RenderCache::default()
        }
    }

    pub fn messages(
        &self,
        d: &Digest,
        filter: &Filter,
        language: &str,
        channel: Channel,
    ) -> anyhow::Result<Arc<Vec<String>>> {
        let key = (d.date, filter.clone(), language.to_string(), channel);
        // Held while rendering: workers that miss the same key at the start of a run wait
        // for the one render instead of each making their own.
        let mut renders = lock(&self.renders);
        if let Some(hit) = renders.get(&key) {
            return Ok(hit.clone());
        }
        let renderer = self.renderer(language)?;
        // In the reader's language first: the overview is built from the events' briefs. No
        // copy when the digest is in that language already.
        let localized = if d.language == language {
            std::borrow::Cow::Borrowed(d)
        } else {
            std::borrow::Cow::Owned(d.clone().in_language(language))
        };
        let filtered = digest::filter(&localized, filter, renderer.locale());
        let messages = Arc::new(render_messages(&filtered, channel, &renderer)?);
        renders.insert(key, messages.clone());
        loop {
            let dates: std::collections::BTreeSet<NaiveDate> =
                renders.keys().map(|k| k.0).collect();
            let oldest = dates.first().copied();
            match oldest {
                Some(oldest)
                    if dates.len() > RENDERED_DATES
                        || (renders.len() > RENDERS_MAX && dates.len() > 1) =>
                {
                    renders.retain(|k, _| k.0 != oldest)
                }
                _ => break,
            }
        }
        if renders.len() > RENDERS_MAX {
            // One date with more distinct renders than the bound: start that date afresh.
            renders.clear();
        }
        Ok(messages)
    }

    /// The render when it is made already; never waits for one in progress.
    pub fn cached(
        &self,
        d: &Digest,
        filter: &Filter,
        language: &str,
        channel: Channel,
    ) -> Option<Arc<Vec<String>>> {
        let key = (d.date, filter.clone(), language.to_string(), channel);
        self.renders.try_lock().ok()?.get(&key).cloned()
    }

    /// The renderer of one language, built once.
    pub fn renderer(&self, language: &str) -> anyhow::Result<Arc<Renderer>> {
        let mut renderers = lock(&self.renderers);
        if let Some(r) = renderers.get(language) {
            return Ok(r.clone());
        }
        let r = Arc::new(Renderer::new(language, self.templates_dir.as_deref())?);
        renderers.insert(language.to_string(), r.clone());
        Ok(r)
    }

    /// Drops the renders of one date (its digest was regenerated).
    pub fn forget(&self, date: NaiveDate) {
        lock(&self.renders).retain(|key, _| key.0 != date);
    }

    /// How many distinct renders were made (for tests and the benchmark).
    pub fn len(&self) -> usize {
        lock(&self.renders).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
