//! What `/healthz` reports about delivery: each channel worker's state (a worker that
//! stopped on an error is down until its restart claims again) and whether the outbox is
//! moving. Written by the engine, read by the web server; no I/O.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};

use crate::subscriber::Channel;

/// Named entries with a time and a text (what is down or paused, since or until when,
/// and why), behind a lock that survives a panic.
#[derive(Default)]
struct Board(Mutex<BTreeMap<&'static str, (DateTime<Utc>, String)>>);

impl Board {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, (DateTime<Utc>, String)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
pub struct Health {
    /// Channels whose worker is down: since when, and why.
    down: Board,
    /// Channels paused by an outage (a relay that refuses or misses us): until when, and
    /// why.
    paused: Board,
    /// Links to a platform that are down (the Telegram bot's webhook not set up): since
    /// when, and why.
    links: Board,
    /// When a delivery was last settled (unix ms; 0 before the first).
    last_progress_ms: AtomicI64,
}

impl Health {
    pub fn paused(&self, channel: Channel, until: DateTime<Utc>, reason: &str) {
        self.paused
            .lock()
            .insert(channel.as_str(), (until, reason.to_string()));
    }

    /// One line per channel paused at `now`.
    pub fn channels_paused(&self, now: DateTime<Utc>) -> Vec<String> {
        let mut paused = self.paused.lock();
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

    pub fn link_down(&self, name: &'static str, error: &str, now: DateTime<Utc>) {
        self.links
            .lock()
            .entry(name)
            .or_insert((now, String::new()))
            .1 = error.to_string();
    }

    pub fn link_up(&self, name: &'static str) {
        self.links.lock().remove(name);
    }

    /// One line per platform link that is down.
    pub fn links_down(&self) -> Vec<String> {
        self.links
            .lock()
            .iter()
            .map(|(name, (since, error))| {
                format!(
                    "{name} down since {}: {error}",
                    since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            })
            .collect()
    }

    pub fn up(&self, channel: Channel) {
        self.down.lock().remove(channel.as_str());
    }

    pub fn down(&self, channel: Channel, error: &str, now: DateTime<Utc>) {
        self.down
            .lock()
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
        self.down
            .lock()
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
