//! Configuration: `config.toml` text -> raw serde structs -> a validated [`Config`].
//!
//! Parsing is separate from reading the file so tests can feed strings. Every problem is
//! collected (not just the first) and each names the key path, the bad value and what is
//! allowed; unknown keys name the nearest valid key.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use chrono::NaiveTime;
use chrono_tz::Tz;

use crate::model::{Score, SourceKind};

mod keys;
mod raw;
mod secret;
mod service;
mod validate;

use keys::*;
pub use raw::*;
pub use secret::Secret;
pub use service::parse_cron;
use service::*;
pub use validate::parse_location;
use validate::*;

pub const LANGUAGES: &[&str] = &["zh-CN", "en"];
pub const DEFAULT_LAYERS: &[&str] = &[
    "frontend",
    "optimization",
    "kernel_codegen",
    "hardware_backend",
    "runtime",
    "benchmark",
];

/// All problems found in one configuration. Exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "Invalid configuration ({n} problem{}):",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

// ---------------------------------------------------------------------------------------------
// Validated form: what the rest of the program uses.

#[derive(Debug, Clone)]
pub struct Config {
    pub digest: DigestConfig,
    pub sources: Vec<SourceConfig>,
    /// Layer name -> keywords, in configuration order.
    pub layers: Vec<LayerConfig>,
    pub score: ScoreWeights,
    pub summarize: SummarizeConfig,
    pub fetch: FetchConfig,
    pub storage: StorageConfig,
    pub schedule: ScheduleConfig,
    pub delivery: DeliveryConfig,
    pub daemon: DaemonConfig,
    pub telegram: TelegramConfig,
    pub discord: DiscordConfig,
    pub email: EmailConfig,
    pub signup: SignupConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// TLS from the first byte (port 465).
    Implicit,
    /// STARTTLS upgrade (port 587).
    StartTls,
    /// Plain text: only for a relay on the same machine.
    None,
}

#[derive(Debug, Clone)]
pub struct EmailConfig {
    pub smtp_host: String,
    pub smtp_port: u16,
    pub tls: SmtpTls,
    /// Empty: no authentication.
    pub username: String,
    /// Name of the environment variable holding the SMTP password.
    pub password_env: String,
    pub from: lettre::message::Mailbox,
    pub reply_to: Option<lettre::message::Mailbox>,
    pub list_id: String,
    /// Base URL of the web site, for unsubscribe links.
    pub public_url: url::Url,
    pub unsubscribe_mailto: Option<String>,
    pub pool_size: u32,
    /// DKIM signing, when a selector is configured.
    pub dkim: Option<DkimConfig>,
}

#[derive(Debug, Clone)]
pub struct DkimConfig {
    pub selector: String,
    pub domain: String,
    pub algorithm: DkimAlgorithm,
    /// Name of the environment variable holding the private key.
    pub key_env: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DkimAlgorithm {
    Rsa,
    Ed25519,
}

/// Web sign-up limits.
#[derive(Debug, Clone)]
pub struct SignupConfig {
    pub per_ip_per_hour: u32,
    pub per_address_per_day: u32,
    /// Behind a reverse proxy: take the client address from the last X-Forwarded-For entry.
    pub trust_forwarded_for: bool,
}

#[derive(Debug, Clone)]
pub struct DiscordConfig {
    /// Another API server (tests); None means Discord itself, with serenity's rate limiter.
    pub api_url: Option<url::Url>,
    /// Name of the environment variable holding the bot token.
    pub token_env: String,
    pub application_id: Option<u64>,
    /// Register slash commands in this guild only (instant, for testing) instead of globally.
    pub guild_id: Option<u64>,
    /// The application's Ed25519 public key (hex): enables `/discord/interactions`.
    pub public_key: Option<String>,
    pub register_commands: bool,
}

#[derive(Debug, Clone)]
pub struct TelegramConfig {
    /// The Bot API base URL; tests point it at a loopback mock.
    pub api_url: url::Url,
    /// Name of the environment variable holding the bot token.
    pub token_env: String,
    /// Run the command bot (long polling) inside `kdigest run`.
    pub bot: bool,
    /// Telegram user ids allowed /status and /run.
    pub admins: Vec<i64>,
    pub poll_timeout_secs: u32,
    pub digest_cooldown: Duration,
    /// Messages per minute to one group (Telegram allows about 20).
    pub group_per_minute: f64,
    /// Public base URL for webhook mode; None means long polling.
    pub webhook_url: Option<url::Url>,
}

#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// Normalised to the 6/7-field form the cron crate reads.
    pub cron: cron::Schedule,
    /// The expression as written, for messages.
    pub expression: String,
    pub timezone: Tz,
}

/// Rate limits and concurrency of one channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelLimits {
    pub per_sec: f64,
    pub per_destination_per_sec: f64,
    pub concurrency: usize,
}

#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub timeout: Duration,
    pub webhook_secret_env: String,
    pub telegram: ChannelLimits,
    pub discord: ChannelLimits,
    pub email: ChannelLimits,
    pub webhook: ChannelLimits,
}

impl DeliveryConfig {
    pub fn limits(&self, channel: crate::subscriber::Channel) -> ChannelLimits {
        use crate::subscriber::Channel;
        match channel {
            Channel::Telegram => self.telegram,
            Channel::Discord => self.discord,
            Channel::Email => self.email,
            Channel::Webhook => self.webhook,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub listen: std::net::SocketAddr,
    pub log_format: LogFormat,
    pub lease: Duration,
}

#[derive(Debug, Clone)]
pub struct DigestConfig {
    pub language: String,
    pub timezone: Tz,
    pub window_end: NaiveTime,
    pub window_hours: i64,
    pub key_changes: usize,
    pub min_score: Score,
    pub title_similarity: f64,
    pub templates_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceConfig {
    pub name: String,
    pub location: SourceLocation,
    pub kind: SourceKind,
    pub weight: f64,
    pub max_items: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceLocation {
    Http(url::Url),
    File(PathBuf),
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceLocation::Http(u) => write!(f, "{u}"),
            SourceLocation::File(p) => write!(f, "{}", p.display()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LayerConfig {
    pub name: String,
    pub keywords: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScoreWeights {
    pub source: f64,
    pub relevance: f64,
    pub impact: f64,
    pub corroboration: f64,
    pub freshness: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummarizeMode {
    Extractive,
    Llm,
}

#[derive(Debug, Clone)]
pub struct SummarizeConfig {
    pub mode: SummarizeMode,
    pub summary_chars: usize,
    pub llm: LlmConfig,
}

#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub provider: String,
    pub base_url: url::Url,
    pub model: String,
    /// Name of the environment variable that holds the key; the key itself is never stored here.
    pub api_key_env: String,
    pub timeout: Duration,
    pub concurrency: usize,
    pub retries: u32,
}

#[derive(Debug, Clone)]
pub struct FetchConfig {
    pub concurrency: usize,
    pub per_host_concurrency: usize,
    pub timeout: Duration,
    pub max_body_bytes: u64,
    pub max_redirects: usize,
    pub retries: u32,
    pub user_agent: String,
}

#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub path: PathBuf,
}

const TOP_LEVEL_KEYS: &[&str] = &[
    "digest",
    "sources",
    "layers",
    "score",
    "summarize",
    "fetch",
    "storage",
    "schedule",
    "delivery",
    "daemon",
    "telegram",
    "discord",
    "email",
    "signup",
];

impl Config {
    /// Parses and validates configuration text. Relative file paths stay relative to the
    /// working directory; [`Config::load`] resolves them against the config file instead.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError {
            problems: vec![format!("TOML syntax error: {}", e.message().trim())],
        })?;
        let mut problems = Vec::new();
        for key in table.keys() {
            if !TOP_LEVEL_KEYS.contains(&key.as_str()) {
                problems.push(unknown_key_message(key, "", TOP_LEVEL_KEYS));
            }
        }
        let digest: RawDigest = section(&table, "digest", &mut problems);
        let score: RawScore = section(&table, "score", &mut problems);
        let summarize: RawSummarize = section(&table, "summarize", &mut problems);
        let fetch: RawFetch = section(&table, "fetch", &mut problems);
        let storage: RawStorage = section(&table, "storage", &mut problems);
        let schedule: RawSchedule = section(&table, "schedule", &mut problems);
        let delivery: RawDelivery = section(&table, "delivery", &mut problems);
        let daemon: RawDaemon = section(&table, "daemon", &mut problems);
        let telegram: RawTelegram = section(&table, "telegram", &mut problems);
        let discord: RawDiscord = section(&table, "discord", &mut problems);
        let email: RawEmail = section(&table, "email", &mut problems);
        let signup: RawSignup = section(&table, "signup", &mut problems);
        let sources = raw_sources(&table, &mut problems);
        let layers = raw_layers(&table, &mut problems);

        let digest = validate_digest(digest, &mut problems);
        let config = Config {
            schedule: validate_schedule(schedule, digest.timezone, &mut problems),
            delivery: validate_delivery(delivery, &mut problems),
            daemon: validate_daemon(daemon, &mut problems),
            telegram: validate_telegram(telegram, &mut problems),
            discord: validate_discord(discord, &mut problems),
            email: validate_email(email, &mut problems),
            signup: validate_signup(signup, &mut problems),
            digest,
            sources: validate_sources(sources, &mut problems),
            layers: validate_layers(layers, &mut problems),
            score: validate_score(score, &mut problems),
            summarize: validate_summarize(summarize, &mut problems),
            fetch: validate_fetch(fetch, &mut problems),
            storage: StorageConfig {
                path: PathBuf::from(storage.path),
            },
        };
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { problems })
        }
    }

    /// Reads and parses a file; relative source, storage and template paths are taken
    /// relative to the file's directory.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            problems: vec![format!(
                "Cannot read config file {}: {e}; pass --config PATH or set KDIGEST_CONFIG",
                path.display()
            )],
        })?;
        let mut config = Config::parse(&text)?;
        let base = path.parent().unwrap_or(std::path::Path::new("."));
        config.resolve_relative_paths(base);
        Ok(config)
    }

    pub fn resolve_relative_paths(&mut self, base: &std::path::Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        for source in &mut self.sources {
            if let SourceLocation::File(p) = &mut source.location {
                fix(p);
            }
        }
        fix(&mut self.storage.path);
        if let Some(dir) = &mut self.digest.templates_dir {
            fix(dir);
        }
    }

    pub fn layer_names(&self) -> Vec<&str> {
        self.layers.iter().map(|l| l.name.as_str()).collect()
    }

    pub fn source(&self, name: &str) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| s.name == name)
    }
}

/// Deserialises one `[section]`, recording a problem (and using defaults) when it is invalid.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_a_working_configuration() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.digest.language, "zh-CN");
        assert_eq!(c.layer_names(), DEFAULT_LAYERS);
        assert_eq!(c.sources.len(), 5);
        assert_eq!(c.digest.min_score, Score::from_f64(60.0));
    }

    #[test]
    fn unknown_key_names_the_nearest_valid_key() {
        let err = Config::parse("[digest]\nlanguge = \"en\"\n").unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(
            err.problems[0].starts_with("digest.languge: unknown key; did you mean `language`?"),
            "{err}"
        );
        let err = Config::parse("[fech]\n").unwrap_err();
        assert!(err.problems[0].contains("did you mean `fetch`?"), "{err}");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = r#"
[digest]
timezone = "Mars/Olympus"
min_score = 120

[[sources]]
name = "a"
url = "ftp://example.org/feed"
kind = "blog"
weight = -1

[[sources]]
name = "b"
url = "https://example.org/feed"
kind = "podcast"
"#;
        let err = Config::parse(text).unwrap_err();
        let all = err.to_string();
        for needle in [
            "digest.timezone: \"Mars/Olympus\" is not an IANA time zone",
            "digest.min_score: 120 is out of range",
            "sources[0].url: \"ftp://example.org/feed\" uses scheme ftp",
            "sources[0].weight: -1 is out of range",
            "sources[1].kind: \"podcast\" is not a source kind",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in {all}");
        }
        assert_eq!(err.problems.len(), 5, "{all}");
    }

    #[test]
    fn score_weights_must_sum_to_100() {
        let err = Config::parse("[score]\nsource = 50\n").unwrap_err();
        assert!(err.problems[0].contains("add up to 130"), "{err}");
    }

    #[test]
    fn locations_are_classified() {
        assert!(matches!(
            parse_location("https://x.org/a"),
            Ok(SourceLocation::Http(_))
        ));
        assert_eq!(
            parse_location("feeds/a.xml"),
            Ok(SourceLocation::File("feeds/a.xml".into()))
        );
        assert_eq!(
            parse_location("file:///tmp/a.xml"),
            Ok(SourceLocation::File("/tmp/a.xml".into()))
        );
        assert!(parse_location("https://").is_err());
    }
}
