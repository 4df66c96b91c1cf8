//! Subscribers: where a digest goes (an [`Address`] of one of the channels in
//! `crate::channels`), what they want to see (a [`Filter`]), and their status.

use std::fmt;

use chrono::{DateTime, NaiveTime, Utc, Weekday};
use chrono_tz::Tz;

use crate::model::Filter;

pub use crate::channels::{Address, Channel};

/// A reader's own delivery time: a wall-clock time in their time zone. The digest is made
/// once; their delivery is due at the first such time after it is ready (DST-correct, see
/// `schedule::next_local_time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    pub at: NaiveTime,
    pub tz: Tz,
}

impl LocalTime {
    /// `09:30` and an IANA zone such as `Europe/Berlin`.
    pub fn parse(at: &str, tz: &str) -> Result<LocalTime, String> {
        let at = NaiveTime::parse_from_str(at.trim(), "%H:%M")
            .map_err(|_| format!("\"{at}\" is not a time of day; use HH:MM, e.g. 09:30"))?;
        let tz: Tz = tz.trim().parse().map_err(|_| {
            format!("\"{tz}\" is not a time zone; use an IANA name such as Europe/Berlin, America/Los_Angeles or Asia/Shanghai")
        })?;
        Ok(LocalTime { at, tz })
    }

    /// When a digest ready at `ready` is due for this reader.
    pub fn due_after(&self, ready: DateTime<Utc>) -> DateTime<Utc> {
        crate::schedule::next_local_time(self.tz, self.at, ready)
    }

    /// The stored form: `09:30 Europe/Berlin`.
    pub fn from_stored(stored: &str) -> Result<LocalTime, String> {
        let (at, tz) = stored
            .split_once(' ')
            .ok_or_else(|| format!("stored delivery time \"{stored}\" is not \"HH:MM Zone\""))?;
        LocalTime::parse(at, tz)
    }
}

impl fmt::Display for LocalTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.at.format("%H:%M"), self.tz.name())
    }
}

/// Which digest of a date a delivery carries: the day's, or the weekly roll-up of the seven
/// days ending that day (`crate::weekly`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Edition {
    Daily,
    Weekly,
}

impl Edition {
    pub fn as_str(self) -> &'static str {
        match self {
            Edition::Daily => "daily",
            Edition::Weekly => "weekly",
        }
    }

    /// The stored form; anything else is a daily (the column's default).
    pub fn from_stored(s: &str) -> Edition {
        if s == "weekly" {
            Edition::Weekly
        } else {
            Edition::Daily
        }
    }

    /// The edition a digest is: a roll-up has its week set.
    pub fn of(d: &crate::model::Digest) -> Edition {
        if d.week.is_some() {
            Edition::Weekly
        } else {
            Edition::Daily
        }
    }
}

/// How often a reader hears from us: every daily, only the weekly roll-up on a chosen day,
/// or both. The roll-up on day D covers the seven dailies ending with D's, so a Sunday
/// roll-up is the ISO week `kdigest digest --week` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cadence {
    #[default]
    Daily,
    Weekly(Weekday),
    Both(Weekday),
}

/// The day a weekly roll-up comes when none is named: the start of the working week.
pub const DEFAULT_WEEKLY_DAY: Weekday = Weekday::Mon;

impl Cadence {
    /// `daily`, `weekly`, `weekly:fri`, `both:mon` (also with a space: `weekly fri`); day
    /// names in English, three letters or full.
    pub fn parse(s: &str) -> Result<Cadence, String> {
        let bad = || {
            format!(
                "\"{s}\" is not a cadence; use daily, weekly, weekly:<day> or both:<day>, e.g. weekly:mon"
            )
        };
        let lower = s.trim().to_ascii_lowercase();
        let (kind, day) = match lower.split_once([':', ' ']) {
            Some((kind, day)) => (kind.trim(), Some(day.trim())),
            None => (lower.as_str(), None),
        };
        let day = match day {
            None | Some("") => DEFAULT_WEEKLY_DAY,
            Some(day) => day.parse::<Weekday>().map_err(|_| {
                format!(
                    "\"{day}\" is not a day of the week; use mon, tue, wed, thu, fri, sat or sun"
                )
            })?,
        };
        match kind {
            "daily" if lower == "daily" => Ok(Cadence::Daily),
            "weekly" => Ok(Cadence::Weekly(day)),
            "both" => Ok(Cadence::Both(day)),
            _ => Err(bad()),
        }
    }

    /// The editions of `date`'s digest this reader receives (none, one or both).
    pub fn editions(self, date: chrono::NaiveDate) -> Vec<Edition> {
        use chrono::Datelike;
        match self {
            Cadence::Daily => vec![Edition::Daily],
            Cadence::Weekly(day) if date.weekday() == day => vec![Edition::Weekly],
            Cadence::Weekly(_) => Vec::new(),
            Cadence::Both(day) if date.weekday() == day => vec![Edition::Daily, Edition::Weekly],
            Cadence::Both(_) => vec![Edition::Daily],
        }
    }

    /// The roll-up's day, when this reader gets one.
    pub fn weekly_day(self) -> Option<Weekday> {
        match self {
            Cadence::Daily => None,
            Cadence::Weekly(d) | Cadence::Both(d) => Some(d),
        }
    }
}

impl fmt::Display for Cadence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let day = |d: Weekday| d.to_string().to_ascii_lowercase();
        match self {
            Cadence::Daily => write!(f, "daily"),
            Cadence::Weekly(d) => write!(f, "weekly:{}", day(*d)),
            Cadence::Both(d) => write!(f, "both:{}", day(*d)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Waiting for confirmation (email double opt-in).
    Pending,
    Active,
    Paused,
    /// Turned off after a permanent delivery failure; the reason says which.
    Disabled(String),
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Active => "active",
            Status::Paused => "paused",
            Status::Disabled(_) => "disabled",
        }
    }

    pub fn from_parts(status: &str, reason: Option<String>) -> Status {
        match status {
            "pending" => Status::Pending,
            "paused" => Status::Paused,
            "disabled" => Status::Disabled(reason.unwrap_or_default()),
            _ => Status::Active,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Subscriber {
    pub id: i64,
    pub address: Address,
    pub filter: Filter,
    pub language: String,
    pub status: Status,
    /// Send a short "nothing matched today" note instead of skipping empty days.
    pub notify_empty: bool,
    /// Deliver at this local time instead of as soon as the digest is ready.
    pub deliver_at: Option<LocalTime>,
    /// Dailies, the weekly roll-up, or both.
    pub cadence: Cadence,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cadences_parse_print_and_choose_editions() {
        assert_eq!(Cadence::parse("daily").unwrap(), Cadence::Daily);
        assert_eq!(
            Cadence::parse("weekly").unwrap(),
            Cadence::Weekly(Weekday::Mon)
        );
        assert_eq!(
            Cadence::parse(" Weekly:Friday ").unwrap(),
            Cadence::Weekly(Weekday::Fri)
        );
        assert_eq!(
            Cadence::parse("both sun").unwrap(),
            Cadence::Both(Weekday::Sun)
        );
        for c in ["daily", "weekly:fri", "both:sun"] {
            assert_eq!(Cadence::parse(c).unwrap().to_string(), c);
        }
        assert!(
            Cadence::parse("weekly:funday")
                .unwrap_err()
                .contains("mon, tue")
        );
        assert!(
            Cadence::parse("daily:mon")
                .unwrap_err()
                .contains("weekly:<day>")
        );
        assert!(
            Cadence::parse("hourly")
                .unwrap_err()
                .contains("daily, weekly")
        );

        // 2026-11-27 is a Friday.
        let fri = chrono::NaiveDate::from_ymd_opt(2026, 11, 27).unwrap();
        let thu = fri.pred_opt().unwrap();
        assert_eq!(Cadence::Daily.editions(fri), [Edition::Daily]);
        assert_eq!(
            Cadence::Weekly(Weekday::Fri).editions(fri),
            [Edition::Weekly]
        );
        assert!(Cadence::Weekly(Weekday::Fri).editions(thu).is_empty());
        assert_eq!(
            Cadence::Both(Weekday::Fri).editions(fri),
            [Edition::Daily, Edition::Weekly]
        );
        assert_eq!(Cadence::Both(Weekday::Fri).editions(thu), [Edition::Daily]);
    }

    #[test]
    fn addresses_parse_and_never_display_webhook_secrets() {
        assert_eq!(
            Address::parse("telegram:-1001234567890").unwrap(),
            Address::Telegram(-1001234567890)
        );
        assert_eq!(
            Address::parse("email:alice@example.org").unwrap().channel(),
            Channel::Email
        );
        let hook = Address::parse("webhook:https://hooks.example.org/T0/B0/secret-token").unwrap();
        assert_eq!(hook.to_string(), "webhook:https://hooks.example.org/…");
        assert!(!format!("{hook:?}").contains("secret-token"));
        assert!(hook.to_stored().contains("secret-token"));
        let d = Address::parse("discord:https://discord.com/api/webhooks/123456789012345678/tok")
            .unwrap();
        assert!(!d.to_string().contains("tok"));
        assert_eq!(
            Address::parse("discord:123456789012345678")
                .unwrap()
                .channel(),
            Channel::Discord
        );
    }

    #[test]
    fn one_discord_webhook_is_one_subscriber_and_keeps_its_thread() {
        let plain =
            Address::parse("discord:https://discord.com/api/webhooks/123456789012345678/tok")
                .unwrap();
        let slash = Address::parse(
            "discord:https://discord.com/api/webhooks/123456789012345678/tok/?wait=true#x",
        )
        .unwrap();
        assert_eq!(plain.to_stored(), slash.to_stored());
        let thread = Address::parse(
            "discord:https://discord.com/api/webhooks/123456789012345678/tok?thread_id=998877665544332211",
        )
        .unwrap();
        assert!(
            thread
                .to_stored()
                .ends_with("/tok?thread_id=998877665544332211")
        );
        let bad = Address::parse(
            "discord:https://discord.com/api/webhooks/123456789012345678/tok?thread_id=general",
        )
        .unwrap_err();
        assert!(bad.contains("thread_id=general"), "{bad}");
    }

    #[test]
    fn bad_addresses_say_the_expected_form() {
        assert!(
            Address::parse("email:alice")
                .unwrap_err()
                .contains("name@example.org")
        );
        // Display names, comments and brackets would make one mailbox many subscribers.
        for bad in [
            "x<victim@evil.org>",
            "<victim@evil.org>",
            "victim@(c)evil.org",
            "a b@x.org",
        ] {
            assert!(Address::parse(&format!("email:{bad}")).is_err(), "{bad}");
        }
        assert_eq!(
            Address::parse("email:Alice@Example.ORG").unwrap(),
            Address::Email("alice@example.org".into())
        );
        assert!(
            Address::parse("email:名@example.org")
                .unwrap_err()
                .contains("non-ASCII")
        );
        assert!(
            Address::parse("alice@example.org")
                .unwrap_err()
                .contains("telegram:<chat id>")
        );
        assert!(
            Address::parse("telegram:abc")
                .unwrap_err()
                .contains("Telegram chat id")
        );
        assert!(
            Address::parse("discord:12")
                .unwrap_err()
                .contains("17-20 digits")
        );
        assert!(
            Address::parse("webhook:ftp://x.org")
                .unwrap_err()
                .contains("http(s)")
        );
        assert!(
            Address::parse("sms:123")
                .unwrap_err()
                .contains("not a channel")
        );
    }
}
