//! The application's sections as serde reads them, with defaults, so an empty file is a
//! working configuration. Validation (config/service.rs) turns them into `Config`; the core
//! sections' raw forms are `crate::settings::raw`.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawStorage {
    pub path: String,
    pub url: String,
}

impl Default for RawStorage {
    fn default() -> Self {
        RawStorage {
            path: "data/kdigest.sqlite".into(),
            url: String::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSchedule {
    pub cron: String,
    /// Defaults to digest.timezone.
    pub timezone: Option<String>,
}

impl Default for RawSchedule {
    fn default() -> Self {
        RawSchedule {
            cron: "0 8 * * *".into(),
            timezone: None,
        }
    }
}

/// `[delivery.<channel>]`: any key left out keeps the channel's default (its
/// `ChannelSpec::LIMITS`, the platform's published limit).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub per_sec: Option<f64>,
    pub per_destination_per_sec: Option<f64>,
    pub concurrency: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDelivery {
    pub max_attempts: u32,
    pub backoff_base_secs: f64,
    pub backoff_max_secs: f64,
    pub timeout_secs: f64,
    pub claim_secs: u64,
    pub webhook_secret_env: String,
    pub allow_private_networks: bool,
    /// `[delivery.<channel>]` tables, taken out of the section before the rest is read
    /// (keys::delivery_section), one per channel of the registry.
    #[serde(skip)]
    pub channels: Vec<(crate::channels::Channel, RawLimits)>,
}

impl Default for RawDelivery {
    fn default() -> Self {
        RawDelivery {
            max_attempts: 8,
            backoff_base_secs: 2.0,
            backoff_max_secs: 3600.0,
            timeout_secs: 15.0,
            claim_secs: 105,
            webhook_secret_env: "KDIGEST_WEBHOOK_SECRET".into(),
            allow_private_networks: false,
            channels: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDaemon {
    pub listen: String,
    pub log_format: String,
    pub lease_secs: u64,
    pub shutdown_grace_secs: u64,
    pub header_timeout_secs: u64,
    pub connection_lifetime_secs: u64,
    pub max_connections: usize,
    /// How long one chat waits between two `/digest` answers, on every bot (Telegram and
    /// Discord); None: `telegram.digest_cooldown_secs`, where it was first, else 30.
    pub digest_cooldown_secs: Option<u64>,
}

impl Default for RawDaemon {
    fn default() -> Self {
        RawDaemon {
            listen: "127.0.0.1:9464".into(),
            log_format: "text".into(),
            lease_secs: 60,
            shutdown_grace_secs: 5,
            header_timeout_secs: 10,
            connection_lifetime_secs: 60,
            max_connections: 512,
            digest_cooldown_secs: None,
        }
    }
}
/// `[web]`: the web site.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawWeb {
    pub public_url: Option<String>,
    pub mcp: bool,
    pub mcp_token_env: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSignup {
    pub per_ip_per_hour: u32,
    pub per_address_per_day: u32,
    pub trust_forwarded_for: bool,
    pub loopback_robots: bool,
}

impl Default for RawSignup {
    fn default() -> Self {
        RawSignup {
            per_ip_per_hour: 5,
            per_address_per_day: 3,
            trust_forwarded_for: false,
            loopback_robots: false,
        }
    }
}
