//! What `/healthz` reports about delivery: each channel worker's state (a worker that
//! stopped on an error is down until its restart claims again) and whether the outbox is
//! moving. Written by the engine, read by the web server; no I/O.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};

use crate::subscriber::Channel;

#[derive(Default)]
pub struct Health {
    /// Channels whose worker is down: since when, and why.
    down: Mutex<BTreeMap<&'static str, (DateTime<Utc>, String)>>,
    /// Channels paused by an outage (a relay that refuses or misses us): until when, and
    /// why.
    paused: Mutex<BTreeMap<&'static str, (DateTime<Utc>, String)>>,
    /// When a delivery was last settled (unix ms; 0 before the first).
    last_progress_ms: AtomicI64,
}

impl Health {
    fn down_map(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, (DateTime<Utc>, String)>> {
        self.down.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn paused_map(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, (DateTime<Utc>, String)>> {
        self.paused.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn paused(&self, channel: Channel, until: DateTime<Utc>, reason: &str) {
        self.paused_map()
            .insert(channel.as_str(), (until, reason.to_string()));
    }

    /// One line per channel paused at `now`.
    pub fn channels_paused(&self, now: DateTime<Utc>) -> Vec<String> {
        let mut paused = self.paused_map();
        paused.retain(|_, (until, _)| *until > now);
        paused
            .iter()
            .map(|(channel, (until, reason))| {
                format!(
                    "{channel} delivery paused until {}: {reason}",
                    until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            })
            .collect()
    }

    pub fn up(&self, channel: Channel) {
        self.down_map().remove(channel.as_str());
    }

    pub fn down(&self, channel: Channel, error: &str, now: DateTime<Utc>) {
        self.down_map()
            .entry(channel.as_str())
            .or_insert((now, String::new()))
            .1 = error.to_string();
    }

    pub fn progress(&self, now: DateTime<Utc>) {
        self.last_progress_ms
            .store(now.timestamp_millis(), Ordering::Relaxed);
    }

    pub fn last_progress(&self) -> Option<DateTime<Utc>> {
        match self.last_progress_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => DateTime::from_timestamp_millis(ms),
        }
    }

    /// One line per worker that is down.
    pub fn workers_down(&self) -> Vec<String> {
        self.down_map()
            .iter()
            .map(|(channel, (since, error))| {
                format!(
                    "{channel} delivery worker down since {}: {error}",
                    since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_down_until_it_is_up_again() {
        let health = Health::default();
        let now = Utc::now();
        assert!(health.workers_down().is_empty());
        health.down(Channel::Telegram, "no such table: deliveries", now);
        health.down(Channel::Telegram, "no such table: deliveries (again)", now);
        let down = health.workers_down();
        assert_eq!(down.len(), 1);
        assert!(
            down[0].starts_with("telegram delivery worker down since"),
            "{down:?}"
        );
        assert!(down[0].ends_with("(again)"));
        health.up(Channel::Telegram);
        assert!(health.workers_down().is_empty());
    }

    #[test]
    fn a_paused_channel_is_reported_until_its_pause_ends() {
        let health = Health::default();
        let now = Utc::now();
        health.paused(
            Channel::Email,
            now + chrono::Duration::seconds(600),
            "SMTP relay does not offer STARTTLS",
        );
        let paused = health.channels_paused(now);
        assert_eq!(paused.len(), 1);
        assert!(paused[0].starts_with("email delivery paused until"));
        assert!(paused[0].ends_with("does not offer STARTTLS"));
        assert!(
            health
                .channels_paused(now + chrono::Duration::seconds(601))
                .is_empty()
        );
    }
}
