//! Rate limits per channel and per destination (governor), plus per-destination pauses
//! after a 429 so one rate-limited chat or host never slows the others, and a whole-channel
//! pause while its relay is down (an outage).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;

use crate::config::ChannelLimits;

pub struct Limits {
    channel: DefaultDirectRateLimiter,
    destination: DefaultKeyedRateLimiter<String>,
    /// A slower limit for group chats (Telegram: about 20 messages a minute).
    group: Option<DefaultKeyedRateLimiter<String>>,
    paused: Mutex<HashMap<String, Instant>>,
    /// The whole channel waits until then (an outage of the relay).
    channel_paused: Mutex<Option<Instant>>,
}

/// A quota of `per_sec` cells per second, spaced evenly (burst 1): a receiver that counts
/// requests per second never sees a burst above the rate.
fn quota(per_sec: f64) -> Quota {
    let period = Duration::from_secs_f64(1.0 / per_sec.max(0.001));
    Quota::with_period(period)
        .expect("period is positive")
        .allow_burst(NonZeroU32::MIN)
}

impl Limits {
    pub fn new(limits: &ChannelLimits, group_per_minute: Option<f64>) -> Limits {
        Limits {
            channel: RateLimiter::direct(quota(limits.per_sec)),
            destination: RateLimiter::keyed(quota(limits.per_destination_per_sec)),
            group: group_per_minute.map(|per_minute| RateLimiter::keyed(quota(per_minute / 60.0))),
            paused: Mutex::new(HashMap::new()),
            channel_paused: Mutex::new(None),
        }
    }

    /// Waits until this destination may receive the next message.
    pub async fn wait(&self, destination: &str, is_group: bool) {
        let channel_paused = *self.channel_paused.lock().expect("channel pause lock");
        if let Some(until) = channel_paused {
            tokio::time::sleep_until(until).await;
        }
        let paused_until = self
            .paused
            .lock()
            .expect("pause map lock")
            .get(destination)
            .copied();
        if let Some(until) = paused_until {
            tokio::time::sleep_until(until).await;
        }
        let key = destination.to_string();
        if let (true, Some(group)) = (is_group, &self.group) {
            group.until_key_ready(&key).await;
        }
        self.destination.until_key_ready(&key).await;
        self.channel.until_ready().await;
    }

    /// Pauses every destination of the channel; returns false when it is paused already
    /// (so the outage is reported once per pause, not once per delivery).
    pub fn pause_channel(&self, wait: Duration) -> bool {
        let now = Instant::now();
        let mut paused = self.channel_paused.lock().expect("channel pause lock");
        match *paused {
            Some(until) if until > now => false,
            _ => {
                *paused = Some(now + wait);
                true
            }
        }
    }

    pub fn channel_paused(&self) -> bool {
        let paused = *self.channel_paused.lock().expect("channel pause lock");
        paused.is_some_and(|until| until > Instant::now())
    }

    /// Holds back one destination (a 429 with retry_after) without touching the others.
    pub fn pause(&self, destination: &str, wait: Duration) {
        let until = Instant::now() + wait;
        let mut paused = self.paused.lock().expect("pause map lock");
        let entry = paused.entry(destination.to_string()).or_insert(until);
        if *entry < until {
            *entry = until;
        }
    }
}
