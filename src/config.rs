//! Configuration: `config.toml` text -> raw serde structs -> a validated [`Config`].
//!
//! Parsing is separate from reading the file so tests can feed strings. Every problem is
//! collected (not just the first) and each names the key path, the bad value and what is
//! allowed; unknown keys name the nearest valid key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use chrono::NaiveTime;
use chrono_tz::Tz;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::model::{Score, SourceKind};

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
// Raw form: what serde reads. Defaults live here so an empty file is a working configuration.

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDigest {
    pub language: String,
    pub timezone: String,
    pub window_end: String,
    pub window_hours: i64,
    pub key_changes: usize,
    pub min_score: f64,
    pub title_similarity: f64,
    pub templates_dir: Option<String>,
}

impl Default for RawDigest {
    fn default() -> Self {
        RawDigest {
            language: "zh-CN".into(),
            timezone: "Asia/Shanghai".into(),
            window_end: "08:00".into(),
            window_hours: 24,
            key_changes: 3,
            min_score: 60.0,
            title_similarity: 0.8,
            templates_dir: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    pub name: String,
    pub url: String,
    pub kind: String,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub max_items: Option<i64>,
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLayer {
    pub keywords: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawScore {
    pub source: f64,
    pub relevance: f64,
    pub impact: f64,
    pub corroboration: f64,
    pub freshness: f64,
}

impl Default for RawScore {
    fn default() -> Self {
        RawScore {
            source: 20.0,
            relevance: 35.0,
            impact: 30.0,
            corroboration: 10.0,
            freshness: 5.0,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSummarize {
    pub mode: String,
    pub summary_chars: usize,
    pub provider: String,
    pub base_url: String,
    pub model: String,
    pub api_key_env: String,
    pub timeout_secs: u64,
    pub concurrency: usize,
    pub retries: u32,
}

impl Default for RawSummarize {
    fn default() -> Self {
        RawSummarize {
            mode: "extractive".into(),
            summary_chars: 480,
            provider: "deepseek".into(),
            base_url: "https://api.deepseek.com".into(),
            model: "deepseek-v4-flash".into(),
            api_key_env: "KDIGEST_LLM_API_KEY".into(),
            timeout_secs: 60,
            concurrency: 4,
            retries: 2,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawFetch {
    pub concurrency: usize,
    pub per_host_concurrency: usize,
    pub timeout_secs: f64,
    pub max_body_bytes: u64,
    pub max_redirects: usize,
    pub retries: u32,
    pub user_agent: String,
}

impl Default for RawFetch {
    fn default() -> Self {
        RawFetch {
            concurrency: 32,
            per_host_concurrency: 4,
            timeout_secs: 20.0,
            max_body_bytes: 10 * 1024 * 1024,
            max_redirects: 5,
            retries: 2,
            user_agent: concat!(
                "kdigest/",
                env!("CARGO_PKG_VERSION"),
                " (daily GPU-kernel digest)"
            )
            .into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawStorage {
    pub path: String,
}

impl Default for RawStorage {
    fn default() -> Self {
        RawStorage {
            path: "data/kdigest.sqlite".into(),
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

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub per_sec: f64,
    pub per_destination_per_sec: f64,
    pub concurrency: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDelivery {
    pub max_attempts: u32,
    pub backoff_base_secs: f64,
    pub backoff_max_secs: f64,
    pub timeout_secs: f64,
    pub webhook_secret_env: String,
    pub telegram: RawLimits,
    pub discord: RawLimits,
    pub email: RawLimits,
    pub webhook: RawLimits,
}

impl Default for RawDelivery {
    fn default() -> Self {
        // Platform limits from FACTS.md: Telegram 30 msg/s overall and 1/s per chat; Discord
        // about 50 requests/s per bot and 5 per 5 s per channel; email kept gentle.
        let limits = |per_sec, per_destination_per_sec, concurrency| RawLimits {
            per_sec,
            per_destination_per_sec,
            concurrency,
        };
        RawDelivery {
            max_attempts: 8,
            backoff_base_secs: 2.0,
            backoff_max_secs: 3600.0,
            timeout_secs: 15.0,
            webhook_secret_env: "KDIGEST_WEBHOOK_SECRET".into(),
            telegram: limits(30.0, 1.0, 30),
            discord: limits(40.0, 1.0, 10),
            email: limits(10.0, 1.0, 4),
            webhook: limits(100.0, 10.0, 32),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDaemon {
    pub listen: String,
    pub log_format: String,
    pub lease_secs: u64,
}

impl Default for RawDaemon {
    fn default() -> Self {
        RawDaemon {
            listen: "127.0.0.1:9464".into(),
            log_format: "text".into(),
            lease_secs: 60,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTelegram {
    pub api_url: String,
    pub token_env: String,
    pub bot: bool,
    pub admins: Vec<i64>,
    pub poll_timeout_secs: u32,
    pub digest_cooldown_secs: u64,
    pub group_per_minute: f64,
    /// Public base URL of this kdigest; set it to receive updates by webhook instead of polling.
    pub webhook_url: Option<String>,
}

impl Default for RawTelegram {
    fn default() -> Self {
        RawTelegram {
            api_url: "https://api.telegram.org".into(),
            token_env: "KDIGEST_TELEGRAM_TOKEN".into(),
            bot: true,
            admins: Vec::new(),
            poll_timeout_secs: 10,
            digest_cooldown_secs: 30,
            group_per_minute: 20.0,
            webhook_url: None,
        }
    }
}

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
        let sources = raw_sources(&table, &mut problems);
        let layers = raw_layers(&table, &mut problems);

        let digest = validate_digest(digest, &mut problems);
        let config = Config {
            schedule: validate_schedule(schedule, digest.timezone, &mut problems),
            delivery: validate_delivery(delivery, &mut problems),
            daemon: validate_daemon(daemon, &mut problems),
            telegram: validate_telegram(telegram, &mut problems),
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
fn section<T: DeserializeOwned + Default>(
    table: &toml::Table,
    key: &str,
    problems: &mut Vec<String>,
) -> T {
    match table.get(key) {
        None => T::default(),
        Some(value) => deserialize_at(value.clone(), key, problems).unwrap_or_default(),
    }
}

/// Deserialises a table; unknown keys are reported and dropped one by one so the rest of
/// the section is still checked (serde stops at the first error).
fn deserialize_at<T: DeserializeOwned>(
    mut value: toml::Value,
    path: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    loop {
        match value.clone().try_into::<T>() {
            Ok(v) => return Some(v),
            Err(e) => {
                problems.push(describe_serde_error(path, e.message()));
                let removed = match (unknown_field(e.message()), value.as_table_mut()) {
                    (Some(field), Some(table)) => table.remove(&field).is_some(),
                    _ => false,
                };
                if !removed {
                    return None;
                }
            }
        }
    }
}

fn unknown_field(message: &str) -> Option<String> {
    let rest = message.trim().strip_prefix("unknown field `")?;
    Some(rest.split('`').next()?.to_string())
}

fn raw_sources(table: &toml::Table, problems: &mut Vec<String>) -> Option<Vec<RawSource>> {
    let value = table.get("sources")?;
    let Some(array) = value.as_array() else {
        problems
            .push("sources: expected an array of tables ([[sources]]), got a single value".into());
        return Some(Vec::new());
    };
    let parsed = array
        .iter()
        .enumerate()
        .filter_map(|(i, v)| deserialize_at(v.clone(), &format!("sources[{i}]"), problems))
        .collect();
    Some(parsed)
}

fn raw_layers(table: &toml::Table, problems: &mut Vec<String>) -> Option<Vec<(String, RawLayer)>> {
    let value = table.get("layers")?;
    let Some(layers) = value.as_table() else {
        problems.push("layers: expected tables such as [layers.runtime]".into());
        return Some(Vec::new());
    };
    let parsed = layers
        .iter()
        .filter_map(|(name, v)| {
            deserialize_at(v.clone(), &format!("layers.{name}"), problems)
                .map(|l| (name.clone(), l))
        })
        .collect();
    Some(parsed)
}

/// Turns serde's messages into ones that name the key path and suggest the nearest key.
fn describe_serde_error(path: &str, message: &str) -> String {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, tail) = rest.split_once('`').unwrap_or((rest, ""));
        let allowed: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
        return unknown_key_message(field, path, &allowed);
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.trim_end_matches('`');
        return format!("{path}.{field}: required key is missing; add `{field} = ...`");
    }
    format!("{path}: {message}")
}

fn unknown_key_message(key: &str, parent: &str, allowed: &[&str]) -> String {
    let full = if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    };
    let nearest = allowed
        .iter()
        .min_by_key(|candidate| edit_distance(key, candidate));
    let mut msg = format!("{full}: unknown key");
    if let Some(n) = nearest.filter(|n| edit_distance(key, n) <= key.len().max(3) / 2 + 1) {
        msg.push_str(&format!("; did you mean `{n}`?"));
    }
    msg.push_str(&format!(" Valid keys here: {}", allowed.join(", ")));
    msg
}

/// Levenshtein distance over chars; inputs are short config keys.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn validate_digest(raw: RawDigest, problems: &mut Vec<String>) -> DigestConfig {
    if !LANGUAGES.contains(&raw.language.as_str()) {
        problems.push(format!(
            "digest.language: \"{}\" is not supported; use one of {}",
            raw.language,
            LANGUAGES.join(", ")
        ));
    }
    let timezone = raw.timezone.parse::<Tz>().unwrap_or_else(|_| {
        problems.push(format!(
            "digest.timezone: \"{}\" is not an IANA time zone; use a name such as Asia/Shanghai or UTC",
            raw.timezone
        ));
        Tz::UTC
    });
    let window_end = NaiveTime::parse_from_str(&raw.window_end, "%H:%M").unwrap_or_else(|_| {
        problems.push(format!(
            "digest.window_end: \"{}\" is not a time of day; use HH:MM such as \"08:00\"",
            raw.window_end
        ));
        NaiveTime::MIN
    });
    if !(1..=24 * 14).contains(&raw.window_hours) {
        problems.push(format!(
            "digest.window_hours: {} is out of range; use 1 to 336 hours",
            raw.window_hours
        ));
    }
    if !(1..=20).contains(&raw.key_changes) {
        problems.push(format!(
            "digest.key_changes: {} is out of range; use 1 to 20",
            raw.key_changes
        ));
    }
    let min_score = Score::parse_threshold(raw.min_score).unwrap_or_else(|| {
        problems.push(format!(
            "digest.min_score: {} is out of range; use 0 to 100",
            raw.min_score
        ));
        Score::default()
    });
    if !(raw.title_similarity > 0.0 && raw.title_similarity <= 1.0) {
        problems.push(format!(
            "digest.title_similarity: {} is out of range; use a number in (0, 1], e.g. 0.8",
            raw.title_similarity
        ));
    }
    DigestConfig {
        language: raw.language,
        timezone,
        window_end,
        window_hours: raw.window_hours,
        key_changes: raw.key_changes,
        min_score,
        title_similarity: raw.title_similarity,
        templates_dir: raw.templates_dir.map(PathBuf::from),
    }
}

fn validate_sources(raw: Option<Vec<RawSource>>, problems: &mut Vec<String>) -> Vec<SourceConfig> {
    let raw = raw.unwrap_or_else(default_sources);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (i, s) in raw.into_iter().enumerate() {
        let path = format!("sources[{i}]");
        let name = s.name.trim().to_string();
        if name.is_empty() {
            problems.push(format!("{path}.name: must not be empty"));
        } else if !seen.insert(name.clone()) {
            problems.push(format!(
                "{path}.name: \"{name}\" is used by another source; names must be unique"
            ));
        }
        let kind = match s.kind.as_str() {
            "arxiv" => SourceKind::Arxiv,
            "github_releases" => SourceKind::GithubReleases,
            "blog" => SourceKind::Blog,
            "feed" => SourceKind::Feed,
            other => {
                problems.push(format!(
                    "{path}.kind: \"{other}\" is not a source kind; use arxiv, github_releases, blog or feed"
                ));
                SourceKind::Feed
            }
        };
        if !(s.weight.is_finite() && (0.0..=1.0).contains(&s.weight)) {
            problems.push(format!(
                "{path}.weight: {} is out of range; use 0.0 to 1.0",
                s.weight
            ));
        }
        let max_items = match s.max_items {
            Some(n) if n < 1 => {
                problems.push(format!(
                    "{path}.max_items: {n} must be at least 1 (or leave it out)"
                ));
                None
            }
            other => other.map(|n| n as usize),
        };
        match parse_location(&s.url) {
            Ok(location) => out.push(SourceConfig {
                name,
                location,
                kind,
                weight: s.weight,
                max_items,
            }),
            Err(why) => problems.push(format!("{path}.url: \"{}\" {why}", s.url)),
        }
    }
    out
}

/// http(s) URLs are fetched; `file://` URLs and plain paths are read from disk.
pub fn parse_location(raw: &str) -> Result<SourceLocation, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("is empty; use an http(s) URL or a file path".into());
    }
    if let Some(path) = raw.strip_prefix("file://") {
        return Ok(SourceLocation::File(PathBuf::from(path)));
    }
    // Anything with a scheme ("https:", "htp:/x") is a URL; only plain paths are files.
    let has_scheme = raw.split_once(':').is_some_and(|(scheme, _)| {
        scheme.len() > 1
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if has_scheme {
        let url = url::Url::parse(raw).map_err(|e| format!("is not a valid URL ({e})"))?;
        return match url.scheme() {
            "http" | "https" if url.host_str().is_some() => Ok(SourceLocation::Http(url)),
            "http" | "https" => Err("has no host".into()),
            scheme => Err(format!(
                "uses scheme {scheme}; use http, https or a file path"
            )),
        };
    }
    Ok(SourceLocation::File(PathBuf::from(raw)))
}

fn validate_layers(
    raw: Option<Vec<(String, RawLayer)>>,
    problems: &mut Vec<String>,
) -> Vec<LayerConfig> {
    let raw = raw.unwrap_or_else(default_layers);
    if raw.is_empty() {
        problems.push(
            "layers: at least one layer is needed, e.g. [layers.runtime] keywords = [...]".into(),
        );
    }
    let mut out = Vec::new();
    for (name, layer) in raw {
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid_name {
            problems.push(format!(
                "layers.{name}: layer names use lower-case letters, digits and _ (e.g. kernel_codegen)"
            ));
        }
        let keywords: Vec<String> = layer
            .keywords
            .iter()
            .map(|k| k.trim().to_lowercase())
            .filter(|k| !k.is_empty())
            .collect();
        if keywords.is_empty() {
            problems.push(format!("layers.{name}.keywords: give at least one keyword"));
        }
        out.push(LayerConfig { name, keywords });
    }
    out
}

fn validate_score(raw: RawScore, problems: &mut Vec<String>) -> ScoreWeights {
    let weights = [
        ("source", raw.source),
        ("relevance", raw.relevance),
        ("impact", raw.impact),
        ("corroboration", raw.corroboration),
        ("freshness", raw.freshness),
    ];
    for (name, w) in weights {
        if !(w.is_finite() && w >= 0.0) {
            problems.push(format!(
                "score.{name}: {w} is negative; weights are points >= 0"
            ));
        }
    }
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    if (total - 100.0).abs() > 0.01 {
        problems.push(format!(
            "score: the weights add up to {total}; they must add up to 100 so scores stay in 0..=100"
        ));
    }
    ScoreWeights {
        source: raw.source,
        relevance: raw.relevance,
        impact: raw.impact,
        corroboration: raw.corroboration,
        freshness: raw.freshness,
    }
}

fn validate_summarize(raw: RawSummarize, problems: &mut Vec<String>) -> SummarizeConfig {
    let mode = match raw.mode.as_str() {
        "extractive" => SummarizeMode::Extractive,
        "llm" => SummarizeMode::Llm,
        other => {
            problems.push(format!(
                "summarize.mode: \"{other}\" is not a mode; use extractive or llm"
            ));
            SummarizeMode::Extractive
        }
    };
    if !(120..=4000).contains(&raw.summary_chars) {
        problems.push(format!(
            "summarize.summary_chars: {} is out of range; use 120 to 4000",
            raw.summary_chars
        ));
    }
    let base_url = match url::Url::parse(&raw.base_url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => u,
        _ => {
            problems.push(format!(
                "summarize.base_url: \"{}\" is not an http(s) URL; e.g. https://api.deepseek.com",
                raw.base_url
            ));
            url::Url::parse("http://invalid.invalid").expect("static URL")
        }
    };
    let env_ok = !raw.api_key_env.is_empty()
        && raw
            .api_key_env
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !env_ok {
        problems.push(format!(
            "summarize.api_key_env: \"{}\" is not an environment variable name; the key itself \
             never goes in config.toml",
            raw.api_key_env
        ));
    }
    if raw.concurrency == 0 || raw.concurrency > 64 {
        problems.push(format!(
            "summarize.concurrency: {} is out of range; use 1 to 64",
            raw.concurrency
        ));
    }
    if raw.timeout_secs == 0 {
        problems.push("summarize.timeout_secs: must be at least 1".into());
    }
    if raw.retries > 10 {
        problems.push(format!(
            "summarize.retries: {} is too many; use 0 to 10",
            raw.retries
        ));
    }
    SummarizeConfig {
        mode,
        summary_chars: raw.summary_chars,
        llm: LlmConfig {
            provider: raw.provider,
            base_url,
            model: raw.model,
            api_key_env: raw.api_key_env,
            timeout: Duration::from_secs(raw.timeout_secs),
            concurrency: raw.concurrency.clamp(1, 64),
            retries: raw.retries,
        },
    }
}

fn validate_fetch(raw: RawFetch, problems: &mut Vec<String>) -> FetchConfig {
    if raw.concurrency == 0 || raw.concurrency > 1024 {
        problems.push(format!(
            "fetch.concurrency: {} is out of range; use 1 to 1024",
            raw.concurrency
        ));
    }
    if raw.per_host_concurrency == 0 {
        problems.push("fetch.per_host_concurrency: must be at least 1".into());
    }
    if !(raw.timeout_secs.is_finite() && raw.timeout_secs > 0.0 && raw.timeout_secs <= 600.0) {
        problems.push(format!(
            "fetch.timeout_secs: {} is out of range; use a number of seconds in (0, 600]",
            raw.timeout_secs
        ));
    }
    if raw.max_body_bytes < 1024 {
        problems.push(format!(
            "fetch.max_body_bytes: {} is too small; use at least 1024",
            raw.max_body_bytes
        ));
    }
    if raw.max_redirects > 20 {
        problems.push(format!(
            "fetch.max_redirects: {} is too many; use 0 to 20",
            raw.max_redirects
        ));
    }
    if raw.retries > 10 {
        problems.push(format!(
            "fetch.retries: {} is too many; use 0 to 10",
            raw.retries
        ));
    }
    FetchConfig {
        concurrency: raw.concurrency.clamp(1, 1024),
        per_host_concurrency: raw.per_host_concurrency.max(1),
        timeout: Duration::from_secs_f64(raw.timeout_secs.clamp(0.001, 600.0)),
        max_body_bytes: raw.max_body_bytes,
        max_redirects: raw.max_redirects,
        retries: raw.retries,
        user_agent: raw.user_agent,
    }
}

/// Accepts crontab's 5 fields (minute hour day month weekday) and the cron crate's 6 or 7
/// (with seconds first, optional year last).
pub fn parse_cron(expression: &str) -> Result<cron::Schedule, String> {
    use std::str::FromStr;
    let fields = expression.split_whitespace().count();
    let normalized = match fields {
        5 => format!("0 {expression}"),
        6 | 7 => expression.to_string(),
        n => {
            return Err(format!(
                "has {n} fields; use 5 (\"0 8 * * *\") or 6 with seconds (\"0 0 8 * * *\")"
            ));
        }
    };
    cron::Schedule::from_str(&normalized).map_err(|e| format!("is not a cron expression ({e})"))
}

fn validate_schedule(
    raw: RawSchedule,
    default_tz: Tz,
    problems: &mut Vec<String>,
) -> ScheduleConfig {
    let timezone = match &raw.timezone {
        None => default_tz,
        Some(name) => name.parse::<Tz>().unwrap_or_else(|_| {
            problems.push(format!(
                "schedule.timezone: \"{name}\" is not an IANA time zone; use a name such as Asia/Shanghai or UTC"
            ));
            Tz::UTC
        }),
    };
    let cron = parse_cron(&raw.cron).unwrap_or_else(|why| {
        problems.push(format!("schedule.cron: \"{}\" {why}", raw.cron));
        parse_cron("0 8 * * *").expect("default cron parses")
    });
    ScheduleConfig {
        cron,
        expression: raw.cron,
        timezone,
    }
}

fn validate_delivery(raw: RawDelivery, problems: &mut Vec<String>) -> DeliveryConfig {
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
    if raw.webhook_secret_env.is_empty()
        || !raw
            .webhook_secret_env
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        problems.push(format!(
            "delivery.webhook_secret_env: \"{}\" is not an environment variable name; the secret itself never goes in config.toml",
            raw.webhook_secret_env
        ));
    }
    let mut limits = |name: &str, l: RawLimits| {
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
    let telegram = limits("telegram", raw.telegram);
    let discord = limits("discord", raw.discord);
    let email = limits("email", raw.email);
    let webhook = limits("webhook", raw.webhook);
    let secs = |v: f64| Duration::from_secs_f64(v.clamp(0.001, 86_400.0));
    DeliveryConfig {
        max_attempts: raw.max_attempts.clamp(1, 50),
        backoff_base: secs(raw.backoff_base_secs),
        backoff_max: secs(raw.backoff_max_secs),
        timeout: secs(raw.timeout_secs),
        webhook_secret_env: raw.webhook_secret_env,
        telegram,
        discord,
        email,
        webhook,
    }
}

fn validate_telegram(raw: RawTelegram, problems: &mut Vec<String>) -> TelegramConfig {
    let api_url = match url::Url::parse(&raw.api_url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => u,
        _ => {
            problems.push(format!(
                "telegram.api_url: \"{}\" is not an http(s) URL; the default is https://api.telegram.org",
                raw.api_url
            ));
            url::Url::parse("https://api.telegram.org").expect("static URL")
        }
    };
    if raw.token_env.is_empty()
        || !raw
            .token_env
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        problems.push(format!(
            "telegram.token_env: \"{}\" is not an environment variable name; the token itself never goes in config.toml",
            raw.token_env
        ));
    }
    // teloxide's client gives up after 17 s, so a long poll must end before that.
    if !(1..=15).contains(&raw.poll_timeout_secs) {
        problems.push(format!(
            "telegram.poll_timeout_secs: {} is out of range; use 1 to 15 (the HTTP client times out at 17 s)",
            raw.poll_timeout_secs
        ));
    }
    if !(raw.group_per_minute.is_finite() && raw.group_per_minute > 0.0) {
        problems.push(format!(
            "telegram.group_per_minute: {} must be a positive number",
            raw.group_per_minute
        ));
    }
    let webhook_url = raw.webhook_url.as_deref().and_then(|raw_url| match url::Url::parse(raw_url) {
        Ok(u) if u.scheme() == "https" || u.host_str() == Some("127.0.0.1") => Some(u),
        _ => {
            problems.push(format!(
                "telegram.webhook_url: \"{raw_url}\" is not an https URL; Telegram only calls https webhooks (leave it out to use long polling)"
            ));
            None
        }
    });
    TelegramConfig {
        webhook_url,
        api_url,
        token_env: raw.token_env,
        bot: raw.bot,
        admins: raw.admins,
        poll_timeout_secs: raw.poll_timeout_secs.clamp(1, 15),
        digest_cooldown: Duration::from_secs(raw.digest_cooldown_secs),
        group_per_minute: raw.group_per_minute.max(0.001),
    }
}

fn validate_daemon(raw: RawDaemon, problems: &mut Vec<String>) -> DaemonConfig {
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
    DaemonConfig {
        listen,
        log_format,
        lease: Duration::from_secs(raw.lease_secs.clamp(5, 3600)),
    }
}

/// The bundled defaults: the same values as config.toml, so an empty file works.
fn default_sources() -> Vec<RawSource> {
    let src = |name: &str, url: &str, kind: &str, weight: f64| RawSource {
        name: name.into(),
        url: url.into(),
        kind: kind.into(),
        weight,
        max_items: None,
    };
    vec![
        src(
            "triton-lang/triton",
            "https://github.com/triton-lang/triton/releases.atom",
            "github_releases",
            1.0,
        ),
        src(
            "pytorch/pytorch",
            "https://github.com/pytorch/pytorch/releases.atom",
            "github_releases",
            1.0,
        ),
        src(
            "NVIDIA/cutlass",
            "https://github.com/NVIDIA/cutlass/releases.atom",
            "github_releases",
            0.95,
        ),
        src("arXiv", DEFAULT_ARXIV_QUERY, "arxiv", 0.8),
        src(
            "NVIDIA",
            "https://developer.nvidia.com/blog/feed/",
            "blog",
            0.8,
        ),
    ]
}

pub const DEFAULT_ARXIV_QUERY: &str = "https://export.arxiv.org/api/query?search_query=%28cat%3Acs.DC+OR+cat%3Acs.PL+OR+cat%3Acs.AR+OR+cat%3Acs.PF+OR+cat%3Acs.LG%29+AND+%28abs%3AGPU+OR+abs%3Akernel+OR+abs%3Acompiler%29&sortBy=submittedDate&sortOrder=descending&max_results=200";

fn default_layers() -> Vec<(String, RawLayer)> {
    let table: BTreeMap<String, RawLayer> =
        toml::from_str(DEFAULT_LAYERS_TOML).expect("built-in layers parse");
    DEFAULT_LAYERS
        .iter()
        .map(|name| (name.to_string(), table[*name].clone()))
        .collect()
}

/// Built-in layer keywords; config.toml repeats them so users can see and edit them.
const DEFAULT_LAYERS_TOML: &str = include_str!("default_layers.toml");

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

/// A credential read from the environment. Debug never shows it, and it has no Display, so
/// it cannot reach a log line or an error message by accident.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Reads the variable; the error names the variable and the fix, never a value.
    pub fn from_env(var: &str, purpose: &str) -> Result<Secret, ConfigError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Secret(v.trim().to_string())),
            _ => Err(ConfigError {
                problems: vec![format!(
                    "Environment variable {var} is not set; it must hold {purpose}"
                )],
            }),
        }
    }

    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}
