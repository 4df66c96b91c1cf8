//! Validation of the service sections: schedule, delivery, daemon and Telegram.

use std::time::Duration;

use chrono_tz::Tz;

use crate::crontab::Crontab;

use super::raw::*;
use super::*;
use crate::settings::validate::timezone;

pub(super) fn validate_schedule(
    raw: RawSchedule,
    default_tz: Tz,
    problems: &mut Vec<String>,
) -> ScheduleConfig {
    let timezone = match &raw.timezone {
        None => default_tz,
        Some(name) => timezone("schedule.timezone", name, problems),
    };
    let cron = Crontab::parse(&raw.cron).unwrap_or_else(|why| {
        problems.push(format!("schedule.cron: \"{}\" {why}", raw.cron));
        Crontab::parse("0 8 * * *").expect("default cron parses")
    });
    ScheduleConfig {
        cron,
        expression: raw.cron,
        timezone,
    }
}

pub(super) fn validate_delivery(raw: RawDelivery, problems: &mut Vec<String>) -> DeliveryConfig {
    if !(1..=50).contains(&raw.max_attempts) {
        problems.push(format!(
            "delivery.max_attempts: {} is out of range; use 1 to 50",
            raw.max_attempts
        ));
    }
    for (key, v) in [
        ("backoff_base_secs", raw.backoff_base_secs),
        ("backoff_max_secs", raw.backoff_max_secs),
        ("timeout_secs", raw.timeout_secs),
    ] {
        if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
            problems.push(format!(
                "delivery.{key}: {v} is out of range; use seconds in (0, 86400]"
            ));
        }
    }
    if raw.backoff_base_secs > raw.backoff_max_secs {
        problems.push(format!(
            "delivery.backoff_base_secs: {} is larger than delivery.backoff_max_secs ({})",
            raw.backoff_base_secs, raw.backoff_max_secs
        ));
    }
    // A claim must outlive a send and its retries inside one attempt.
    let claim_min = (3.0 * raw.timeout_secs).ceil().clamp(0.0, 86_400.0) as u64 + 2;
    if !(claim_min..=86_400).contains(&raw.claim_secs) {
        problems.push(format!(
            "delivery.claim_secs: {} is out of range; use {claim_min} (3 × delivery.timeout_secs + 2) to 86400",
            raw.claim_secs
        ));
    }
    env_var_name(
        "delivery.webhook_secret_env",
        &raw.webhook_secret_env,
        "secret",
        problems,
    );
    let mut limits = |channel: crate::channels::Channel, raw: RawLimits| {
        let name = channel.as_str();
        let d = channel.default_limits();
        let l = ChannelLimits {
            per_sec: raw.per_sec.unwrap_or(d.per_sec),
            per_destination_per_sec: raw
                .per_destination_per_sec
                .unwrap_or(d.per_destination_per_sec),
            concurrency: raw.concurrency.unwrap_or(d.concurrency),
        };
        if !(l.per_sec.is_finite() && l.per_sec > 0.0) {
            problems.push(format!(
                "delivery.{name}.per_sec: {} must be a positive number",
                l.per_sec
            ));
        }
        if !(l.per_destination_per_sec.is_finite() && l.per_destination_per_sec > 0.0) {
            problems.push(format!(
                "delivery.{name}.per_destination_per_sec: {} must be a positive number",
                l.per_destination_per_sec
            ));
        }
        if !(1..=1024).contains(&l.concurrency) {
            problems.push(format!(
                "delivery.{name}.concurrency: {} is out of range; use 1 to 1024",
                l.concurrency
            ));
        }
        ChannelLimits {
            per_sec: l.per_sec.max(0.001),
            per_destination_per_sec: l.per_destination_per_sec.max(0.001),
            concurrency: l.concurrency.clamp(1, 1024),
        }
    };
    let channel_limits = crate::channels::Channel::ALL
        .iter()
        .map(|c| {
            let given = raw.channels.iter().find(|(k, _)| k == c).map(|(_, l)| *l);
            (*c, limits(*c, given.unwrap_or_default()))
        })
        .collect();
    // NaN is reported above; it must not reach from_secs_f64, which panics on it.
    let secs = |v: f64| {
        Duration::from_secs_f64(if v.is_nan() {
            1.0
        } else {
            v.clamp(0.001, 86_400.0)
        })
    };
    DeliveryConfig {
        max_attempts: raw.max_attempts.clamp(1, 50),
        backoff_base: secs(raw.backoff_base_secs),
        backoff_max: secs(raw.backoff_max_secs),
        timeout: secs(raw.timeout_secs),
        claim: Duration::from_secs(raw.claim_secs.clamp(3, 86_400)),
        webhook_secret_env: raw.webhook_secret_env,
        allow_private_networks: raw.allow_private_networks,
        limits: channel_limits,
    }
}

pub(super) fn validate_signup(raw: RawSignup, problems: &mut Vec<String>) -> SignupConfig {
    for (key, value) in [
        ("per_ip_per_hour", raw.per_ip_per_hour),
        ("per_address_per_day", raw.per_address_per_day),
    ] {
        if !(1..=10_000).contains(&value) {
            problems.push(format!(
                "signup.{key}: {value} is out of range; use 1 to 10000"
            ));
        }
    }
    SignupConfig {
        per_ip_per_hour: raw.per_ip_per_hour.clamp(1, 10_000),
        per_address_per_day: raw.per_address_per_day.clamp(1, 10_000),
        trust_forwarded_for: raw.trust_forwarded_for,
        loopback_robots: raw.loopback_robots,
    }
}

/// `[daemon]`. `old_cooldown`: `telegram.digest_cooldown_secs`, the cooldown's first home
/// (it applies to every bot, so it moved here); still read, with a note.
pub(super) fn validate_daemon(
    raw: RawDaemon,
    old_cooldown: Option<i64>,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> DaemonConfig {
    let listen = raw.listen.parse().unwrap_or_else(|_| {
        problems.push(format!(
            "daemon.listen: \"{}\" is not an address; use host:port such as 127.0.0.1:9464",
            raw.listen
        ));
        std::net::SocketAddr::from(([127, 0, 0, 1], 9464))
    });
    let log_format = match raw.log_format.as_str() {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => {
            problems.push(format!(
                "daemon.log_format: \"{other}\" is not a format; use text or json"
            ));
            LogFormat::Text
        }
    };
    if !(5..=3600).contains(&raw.lease_secs) {
        problems.push(format!(
            "daemon.lease_secs: {} is out of range; use 5 to 3600",
            raw.lease_secs
        ));
    }
    if !(1..=300).contains(&raw.shutdown_grace_secs) {
        problems.push(format!(
            "daemon.shutdown_grace_secs: {} is out of range; use 1 to 300",
            raw.shutdown_grace_secs
        ));
    }
    let mut range = |key: &str, value: u64, low: u64, high: u64| {
        if !(low..=high).contains(&value) {
            problems.push(format!(
                "daemon.{key}: {value} is out of range; use {low} to {high}"
            ));
        }
        Duration::from_secs(value.clamp(low, high))
    };
    let header_read = range("header_timeout_secs", raw.header_timeout_secs, 1, 300);
    let lifetime = range(
        "connection_lifetime_secs",
        raw.connection_lifetime_secs,
        1,
        3600,
    );
    if !(8..=100_000).contains(&raw.max_connections) {
        problems.push(format!(
            "daemon.max_connections: {} is out of range; use 8 to 100000 (and below the open-file limit, `ulimit -n`)",
            raw.max_connections
        ));
    }
    let cooldown = match (raw.digest_cooldown_secs, old_cooldown) {
        (Some(new), None) => new,
        (None, Some(old)) => {
            notes.push(format!("telegram.digest_cooldown_secs is deprecated: the /digest cooldown applies to every bot, Telegram and Discord, and is now [daemon] digest_cooldown_secs; move the line there ({old} s is used meanwhile)"));
            u64::try_from(old).unwrap_or(0)
        }
        (Some(new), Some(old)) if i64::try_from(new) == Ok(old) => {
            notes.push("telegram.digest_cooldown_secs is deprecated and repeats daemon.digest_cooldown_secs; remove it".into());
            new
        }
        (Some(new), Some(old)) => {
            problems.push(format!("telegram.digest_cooldown_secs: {old} differs from daemon.digest_cooldown_secs {new}; the /digest cooldown is one setting for every bot, in [daemon]: remove the telegram line"));
            new
        }
        (None, None) => 30,
    };
    if cooldown > 86_400 {
        problems.push(format!(
            "daemon.digest_cooldown_secs: {cooldown} is out of range; use 0 to 86400"
        ));
    }
    DaemonConfig {
        digest_cooldown: Duration::from_secs(cooldown.min(86_400)),
        web: super::ServeLimits {
            header_read,
            lifetime,
            max_connections: raw.max_connections.clamp(8, 100_000),
        },
        listen,
        log_format,
        lease: Duration::from_secs(raw.lease_secs.clamp(5, 3600)),
        shutdown_grace: Duration::from_secs(raw.shutdown_grace_secs.clamp(1, 300)),
    }
}

/// `[storage]`: the SQLite path, or a Postgres URL. KDIGEST_DATABASE_URL wins over
/// `storage.url`; a URL in the file must not carry a password (secrets come from the
/// environment).
pub(super) fn validate_storage(raw: RawStorage, problems: &mut Vec<String>) -> StorageConfig {
    let from_env = std::env::var(DATABASE_URL_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    let url = match from_env {
        Some(url) => Some(url.trim().to_string()),
        None if raw.url.trim().is_empty() => None,
        None => {
            let url = raw.url.trim().to_string();
            if postgres_password(&url) {
                problems.push(format!(
                    "storage.url holds a password; secrets come from the environment: put the URL in {DATABASE_URL_ENV}, or use PGPASSFILE"
                ));
            }
            Some(url)
        }
    };
    if let Some(url) = &url
        && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        problems.push(format!(
            "storage.url (or {DATABASE_URL_ENV}) must be a postgres:// URL; for SQLite set storage.path instead"
        ));
    }
    StorageConfig {
        path: std::path::PathBuf::from(raw.path),
        url: url.map(Secret::new),
    }
}

/// Whether a postgres:// URL carries a password (`user:password@`).
fn postgres_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// `[web]`. The site's address was `email.public_url` before it had a section of its own:
/// that key is still read when `web.public_url` is unset, with a note saying where it moved,
/// and refused when both are set and differ (the site has one address).
pub(super) fn validate_web(
    raw: RawWeb,
    email_url: Option<&str>,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> WebConfig {
    let site_url = |key: &str, raw: &str, problems: &mut Vec<String>| {
        // A base URL without a trailing slash would lose its last segment in Url::join.
        let with_slash = if raw.ends_with('/') {
            raw.to_string()
        } else {
            format!("{raw}/")
        };
        http_url(&with_slash).ok_or_else(|| {
            problems.push(format!("{key}: \"{raw}\" is not an http(s) URL; it is the site's public address, the base of the links in emails and of the Atom feed"));
        })
    };
    let default = || url::Url::parse("https://digest.example.org/").expect("static URL");
    let public_url = match (raw.public_url.as_deref(), email_url) {
        (Some(web), None) => site_url("web.public_url", web, problems).ok(),
        (None, Some(email)) => {
            notes.push(format!("email.public_url is deprecated: the site's address is now [web] public_url; move the line there (\"{email}\" is used meanwhile)"));
            site_url("email.public_url", email, problems).ok()
        }
        (Some(web), Some(email)) => {
            let url = site_url("web.public_url", web, problems).ok();
            if url.is_some() && url == site_url("email.public_url", email, problems).ok() {
                notes.push(
                    "email.public_url is deprecated and repeats web.public_url; remove it".into(),
                );
            } else if url.is_some() {
                problems.push(format!("email.public_url: \"{email}\" differs from web.public_url \"{web}\"; the site has one address, set in [web]: remove email.public_url"));
            }
            url
        }
        (None, None) => Some(default()),
    };
    let mcp_token_env = raw
        .mcp_token_env
        .unwrap_or_else(|| "KDIGEST_MCP_TOKEN".into());
    crate::settings::read::env_var_name(
        "web.mcp_token_env",
        &mcp_token_env,
        "MCP bearer token",
        problems,
    );
    WebConfig {
        public_url: public_url.unwrap_or_else(default),
        mcp: raw.mcp,
        mcp_token_env,
    }
}
