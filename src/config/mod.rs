//! Configuration: `config.toml` text -> raw serde structs -> a validated [`Config`].
//!
//! Parsing is separate from reading the file so tests can feed strings. Every problem is
//! collected (not just the first) and each names the key path, the bad value and what is
//! allowed; unknown keys name the nearest valid key.

use std::path::PathBuf;
use std::time::Duration;

mod keys;
mod raw;
mod service;

use crate::settings::read::*;
pub use raw::*;
// The core settings, re-exported: the application reads them as `config::DigestConfig`.
pub use crate::settings::raw::{DEFAULT_ARXIV_QUERY, RawSource};
pub use crate::settings::{
    ChannelLimits, ConfigError, DEFAULT_LAYERS, DigestConfig, FetchConfig, LANGUAGES, LayerConfig,
    LlmConfig, Location, Problem, RelevanceConfig, ScheduleConfig, ScoreWeights, Secret, Settings,
    SourceConfig, SourceLocation, SummarizeConfig, SummarizeMode, builtin_sources, parse_location,
    parse_source_kind, shorthand,
};
use service::*;

// Each channel's section lives in its folder (crates/channels/src/<name>/config.rs); the registry
// reads them all into one `ChannelsConfig`.
pub use crate::channels::ChannelsConfig;
#[cfg(feature = "discord")]
pub use crate::channels::discord::config::DiscordConfig;
#[cfg(feature = "email")]
pub use crate::channels::email::config::{DkimAlgorithm, DkimConfig, EmailConfig, SmtpTls};
#[cfg(feature = "telegram")]
pub use crate::channels::telegram::config::TelegramConfig;

// ---------------------------------------------------------------------------------------------
// Validated form: what the rest of the program uses.

/// The whole configuration: the core settings, which the pure stages read, and the
/// application's sections.
#[derive(Debug, Clone)]
pub struct Config {
    /// Digest, sources, layers, relevance, score, summarize and fetch. `Config` derefs to
    /// them (`config.digest`), so a stage that needs only the core takes `&Settings` and is
    /// handed `&config`.
    pub core: Settings,
    pub storage: StorageConfig,
    pub schedule: ScheduleConfig,
    pub delivery: DeliveryConfig,
    pub daemon: DaemonConfig,
    /// Every built channel's own section (`config.channels.telegram`).
    pub channels: ChannelsConfig,
    pub web: WebConfig,
    pub signup: SignupConfig,
    /// Keys still read but deprecated, each with where it moved: `check-config` prints
    /// them and every command logs them once at start.
    pub notes: Vec<String>,
}

/// The web site (`[web]`).
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// The site's public address, ending in '/': the base of the links in emails (sign-up
    /// confirmation, preferences, unsubscribe, votes), of the Atom feed and the chat
    /// buttons' "read on the web", and of Telegram's webhook.
    pub public_url: url::Url,
    /// Serve the Model Context Protocol at `/mcp` (crate::mcp::http), behind the bearer
    /// token in the environment variable `mcp_token_env`.
    pub mcp: bool,
    pub mcp_token_env: String,
}

/// Web sign-up limits.
#[derive(Debug, Clone)]
pub struct SignupConfig {
    pub per_ip_per_hour: u32,
    pub per_address_per_day: u32,
    /// Behind a reverse proxy: take the client address from the last X-Forwarded-For entry.
    pub trust_forwarded_for: bool,
    /// The team-chat form accepts plain-http robot URLs on loopback (tests and local
    /// bridges only: otherwise a visitor could make the server post to its own ports).
    pub loopback_robots: bool,
}

#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub timeout: Duration,
    /// How long a claim holds its row before the reaper returns it to the queue.
    pub claim: Duration,
    pub webhook_secret_env: String,
    /// Readers' webhooks and robots may be on loopback or private networks.
    pub allow_private_networks: bool,
    /// Every channel of the registry: `[delivery.<channel>]` over its defaults.
    pub limits: std::collections::BTreeMap<crate::channels::Channel, ChannelLimits>,
}

impl DeliveryConfig {
    pub fn limits(&self, channel: crate::channels::Channel) -> ChannelLimits {
        channel.limits_in(&self.limits)
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
    /// How long background tasks get to stop after SIGINT/SIGTERM before they are cut off.
    pub shutdown_grace: Duration,
    /// The web server's limits against slow and idle clients.
    pub web: ServeLimits,
    /// How long one chat waits between two `/digest` answers, on every bot.
    pub digest_cooldown: Duration,
}

/// What the web server allows a client (`[daemon]` header_timeout_secs,
/// connection_lifetime_secs, max_connections).
#[derive(Debug, Clone, Copy)]
pub struct ServeLimits {
    /// A request's headers must arrive within this (slow-loris clients are cut off).
    pub header_read: std::time::Duration,
    /// A connection is closed after this, gracefully (the request in progress finishes):
    /// idle keep-alive connections cannot pile up.
    pub lifetime: std::time::Duration,
    /// Connections open at once (lowered to fit the open-file limit with a reserve); at
    /// the cap a new connection closes the oldest idle one (`web::admission`), so idle clients
    /// cannot lock `/healthz` out.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            header_read: std::time::Duration::from_secs(10),
            lifetime: std::time::Duration::from_secs(60),
            max_connections: 512,
        }
    }
}

#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// The SQLite file (the default engine).
    pub path: PathBuf,
    /// A Postgres URL (`storage.url` or KDIGEST_DATABASE_URL, which wins): several
    /// instances share that database and `path` is not used.
    pub url: Option<Secret>,
}

/// The environment variable that selects a Postgres store (it may carry a password).
pub const DATABASE_URL_ENV: &str = "KDIGEST_DATABASE_URL";

impl StorageConfig {
    /// Whether there is a store to read: a Postgres URL, or the SQLite file exists.
    pub fn exists(&self) -> bool {
        self.url.is_some() || self.path.exists()
    }

    /// Where the store is, for messages (never the URL: it may carry a password).
    pub fn describe(&self) -> String {
        match &self.url {
            Some(_) => "the Postgres database of storage.url".into(),
            None => format!("{} (storage.path)", self.path.display()),
        }
    }
}

/// The sections of the file besides the channels' own (`crate::channels::EVERY_CHANNEL`).
const TOP_LEVEL_KEYS: &[&str] = &[
    "digest",
    "sources",
    "layers",
    "relevance",
    "score",
    "summarize",
    "fetch",
    "storage",
    "schedule",
    "delivery",
    "daemon",
    "web",
    "signup",
];

impl std::ops::Deref for Config {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.core
    }
}

impl std::ops::DerefMut for Config {
    fn deref_mut(&mut self) -> &mut Settings {
        &mut self.core
    }
}

impl Config {
    /// Parses and validates configuration text. Relative file paths stay relative to the
    /// working directory; [`Config::load`] resolves them against the config file instead.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let table = document(text)?;
        let mut problems = Vec::new();
        let known: Vec<&str> = TOP_LEVEL_KEYS
            .iter()
            .chain(crate::channels::EVERY_CHANNEL)
            .copied()
            .collect();
        for (key, _) in table.iter() {
            if !known.contains(&key) {
                problems.push(unknown_key_message(key, "", &known));
            }
        }
        let core = Settings::read(&table, &mut problems);
        let storage: RawStorage = section(&table, "storage", &mut problems);
        let schedule: RawSchedule = section(&table, "schedule", &mut problems);
        let delivery: RawDelivery = keys::delivery_section(&table, &mut problems);
        let daemon: RawDaemon = section(&table, "daemon", &mut problems);
        // The site's address under its old key, `email.public_url` (the email section
        // still accepts the key, so a file that has it is not refused).
        let old_site = table
            .get("email")
            .and_then(|email| email.get("public_url"))
            .and_then(|url| url.as_str())
            .map(str::to_string);
        // The /digest cooldown under its old key (the Telegram section still accepts it).
        let old_cooldown = table
            .get("telegram")
            .and_then(|telegram| telegram.get("digest_cooldown_secs"))
            .and_then(|secs| secs.as_integer());
        let signup: RawSignup = section(&table, "signup", &mut problems);
        let web: RawWeb = section(&table, "web", &mut problems);
        let mut notes = Vec::new();
        let web = validate_web(web, old_site.as_deref(), &mut problems, &mut notes);
        let daemon = validate_daemon(daemon, old_cooldown, &mut problems, &mut notes);
        let config = Config {
            schedule: validate_schedule(schedule, core.digest.timezone, &mut problems),
            delivery: validate_delivery(delivery, &mut problems),
            daemon,
            channels: ChannelsConfig::read(&table, &web.public_url, &mut problems),
            web,
            signup: validate_signup(signup, &mut problems),
            notes,
            core,
            storage: validate_storage(storage, &mut problems),
        };
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(locate(text, &table, problems))
        }
    }

    /// Reads and parses a file; relative source, storage and template paths are taken
    /// relative to the file's directory.
    /// What the channels' senders are built from: their sections and the delivery
    /// settings they share.
    pub fn channel_setup(&self) -> crate::channels::Setup<'_> {
        crate::channels::Setup {
            sections: &self.channels,
            timeout: self.delivery.timeout,
            allow_private_networks: self.delivery.allow_private_networks,
            webhook_secret_env: &self.delivery.webhook_secret_env,
            limits: &self.delivery.limits,
        }
    }

    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(format!(
                "Cannot read config file {}: {e}; pass --config PATH or set KDIGEST_CONFIG",
                path.display()
            ))
        })?;
        let mut config = Config::parse(&text).map_err(|mut e| {
            e.file = Some(path.to_path_buf());
            e
        })?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Score;

    #[test]
    fn a_syntax_error_gives_line_column_and_the_line() {
        let text = "[digest]\nlanguage = \"en\"\n\n[fetch]\nconcurrency = 32\ntimeout_secs = = 5\n";
        let err = Config::parse(text).unwrap_err();
        let at = err.problems[0].at.as_ref().expect("a position");
        assert_eq!((at.line, at.column), (6, 16), "{err}");
        assert_eq!(at.source_line, "timeout_secs = = 5");
        let shown = err.to_string();
        assert!(
            shown.contains("line 6, column 16: TOML syntax error"),
            "{shown}"
        );
        assert!(shown.contains("6 | timeout_secs = = 5"), "{shown}");
    }

    #[test]
    fn numbers_out_of_range_name_the_key_and_the_range() {
        let err =
            Config::parse("[daemon]\nlog_format = \"text\"\nlease_secs = 99999999999999999999\n")
                .unwrap_err();
        let p = &err.problems[0];
        assert!(
            p.message
                .starts_with("daemon.lease_secs: the number is too large for TOML"),
            "{}",
            p.message
        );
        assert_eq!(p.at.as_ref().unwrap().line, 3);
        let err = Config::parse("[delivery]\nmax_attempts = 99999999999\n").unwrap_err();
        assert_eq!(
            err.problems[0].message,
            "delivery.max_attempts: invalid value: integer `99999999999`, expected a whole number from 0 to 4294967295"
        );
        let err = Config::parse("[delivery]\nmax_attempts = -3\n").unwrap_err();
        assert!(
            err.problems[0]
                .message
                .ends_with("expected a whole number from 0 to 4294967295")
        );
        for bad in ["nan", "inf", "-1.0"] {
            let err = Config::parse(&format!("[delivery]\ntimeout_secs = {bad}\n")).unwrap_err();
            assert!(
                err.problems
                    .iter()
                    .any(|p| p.message.starts_with("delivery.timeout_secs")),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_type_error_names_the_key_its_line_and_the_toml_type() {
        let text = "[digest]\nlanguage = \"en\"\n\n[fetch]\nconcurrency = \"32\"\n";
        let mut err = Config::parse(text).unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        let p = &err.problems[0];
        assert_eq!(
            p.message,
            "fetch.concurrency: invalid type: string \"32\", expected a whole number, 0 or more"
        );
        let at = p.at.as_ref().unwrap();
        assert_eq!(
            (at.line, at.column, at.width),
            (5, 15, 4),
            "the value is underlined"
        );
        err.file = Some("config.toml".into());
        let shown = err.to_string();
        assert!(
            shown.contains("- config.toml:5:15: fetch.concurrency: invalid type"),
            "{shown}"
        );
        assert!(shown.contains("5 | concurrency = \"32\""), "{shown}");
    }

    #[test]
    fn problems_in_an_array_of_tables_point_at_that_entry() {
        let text = "[[sources]]\nname = \"a\"\nurl = \"https://a.example/feed\"\n\n[[sources]]\nname = \"b\"\nurl = \"https://b.example/feed\"\nweight = \"high\"\n";
        let err = Config::parse(text).unwrap_err();
        let p = err
            .problems
            .iter()
            .find(|p| p.message.starts_with("sources[1].weight: invalid type"))
            .unwrap_or_else(|| panic!("{err}"));
        assert!(p.message.ends_with("expected a number"), "{err}");
        assert_eq!(p.at.as_ref().unwrap().line, 8, "{err}");
        let missing = err
            .problems
            .iter()
            .find(|p| p.message.starts_with("sources[0].kind: missing"))
            .unwrap_or_else(|| panic!("{err}"));
        assert_eq!(
            missing.at.as_ref().unwrap().line,
            1,
            "a missing key points at its table"
        );
    }

    #[test]
    fn nan_durations_are_problems_not_panics() {
        let err =
            Config::parse("[fetch]\ntimeout_secs = nan\n[delivery]\nbackoff_base_secs = nan\n")
                .unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains("fetch.timeout_secs: NaN is out of range"),
            "{shown}"
        );
        assert!(shown.contains("delivery.backoff_base_secs"), "{shown}");
    }

    #[test]
    fn empty_file_is_a_working_configuration() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.digest.language, "zh-CN");
        assert_eq!(c.layer_names(), DEFAULT_LAYERS);
        assert_eq!(c.sources.len(), 5);
        assert_eq!(c.digest.min_score, Score::from_f64(60.0));
    }

    #[test]
    fn the_digest_cooldown_is_one_daemon_setting_and_its_telegram_key_still_works() {
        let cooldown =
            |text: &str| Config::parse(text).map(|c| (c.daemon.digest_cooldown.as_secs(), c.notes));
        assert_eq!(cooldown("").unwrap(), (30, vec![]));
        assert_eq!(
            cooldown("[daemon]\ndigest_cooldown_secs = 0\n").unwrap(),
            (0, vec![])
        );
        // The old key, under [telegram] where it was first, with a note saying where it
        // moved (it applies to Discord too).
        let (secs, notes) = cooldown("[telegram]\ndigest_cooldown_secs = 45\n").unwrap();
        assert_eq!(secs, 45);
        assert!(
            notes.len() == 1 && notes[0].contains("[daemon] digest_cooldown_secs"),
            "{notes:?}"
        );
        let (_, notes) = cooldown(
            "[daemon]\ndigest_cooldown_secs = 45\n[telegram]\ndigest_cooldown_secs = 45\n",
        )
        .unwrap();
        assert!(notes[0].contains("remove it"), "{notes:?}");
        let err = cooldown(
            "[daemon]\ndigest_cooldown_secs = 10\n[telegram]\ndigest_cooldown_secs = 45\n",
        )
        .unwrap_err();
        assert!(
            err.problems[0]
                .message
                .starts_with("telegram.digest_cooldown_secs: 45 differs"),
            "{err}"
        );
        assert!(cooldown("[daemon]\ndigest_cooldown_secs = 100000\n").is_err());
    }

    #[test]
    #[cfg(feature = "email")]
    fn the_sites_address_is_read_from_web_and_from_its_old_key_with_a_note() {
        let site = |text: &str| {
            Config::parse(text).map(|c| {
                (
                    c.web.public_url.to_string(),
                    c.channels.email.public_url.to_string(),
                    c.notes,
                )
            })
        };
        let (web, email, notes) =
            site("[web]\npublic_url = \"https://news.example.com/kd\"\n").unwrap();
        assert_eq!(web, "https://news.example.com/kd/");
        assert_eq!(email, web, "the email links are under the site's address");
        assert!(notes.is_empty());
        // The old key still works, and says where it moved.
        let (web, _, notes) = site("[email]\npublic_url = \"https://old.example.com/\"\n").unwrap();
        assert_eq!(web, "https://old.example.com/");
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("[web] public_url"), "{notes:?}");
        // Both: the same address is a note, two addresses an error naming the old key.
        let (_, _, notes) = site("[web]\npublic_url = \"https://a.example/\"\n[email]\npublic_url = \"https://a.example\"\n").unwrap();
        assert!(notes[0].contains("remove it"), "{notes:?}");
        let err = site("[web]\npublic_url = \"https://a.example/\"\n[email]\npublic_url = \"https://b.example/\"\n").unwrap_err();
        assert!(
            err.problems[0].message.starts_with("email.public_url: "),
            "{err}"
        );
        assert_eq!(
            err.problems[0].at.as_ref().map(|l| l.line),
            Some(4),
            "{err}"
        );
        let err = site("[web]\npublic_url = \"ftp://a.example/\"\n").unwrap_err();
        assert!(
            err.problems[0]
                .message
                .starts_with("web.public_url: \"ftp://a.example/\" is not an http(s) URL"),
            "{err}"
        );
        let err = site("[web]\npublic_ur = \"https://a.example/\"\n").unwrap_err();
        assert!(err.to_string().contains("public_url"), "{err}");
        // Unset: the documented placeholder.
        assert_eq!(site("").unwrap().0, "https://digest.example.org/");
    }

    #[test]
    fn shipped_config_repeats_the_built_in_relevance_model() {
        // config.toml shows the built-in lists so they can be edited; they must not drift.
        let shipped = Config::parse(include_str!("../../config.toml")).unwrap();
        let builtin = Config::parse("").unwrap();
        assert_eq!(shipped.layers, builtin.layers);
        assert_eq!(shipped.relevance, builtin.relevance);
    }

    #[test]
    fn unknown_key_names_the_nearest_valid_key() {
        let err = Config::parse("[digest]\nlanguge = \"en\"\n").unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(
            err.problems[0]
                .message
                .starts_with("digest.languge: unknown key; did you mean `language`?"),
            "{err}"
        );
        let err = Config::parse("[fech]\n").unwrap_err();
        assert!(
            err.problems[0].message.contains("did you mean `fetch`?"),
            "{err}"
        );
        // The channels' sections are the registry's: a near miss is pointed at them too,
        // and a channel without settings of its own says where they are.
        let err = Config::parse("[telegran]\n").unwrap_err();
        assert!(
            err.problems[0].message.contains("did you mean `telegram`?"),
            "{err}"
        );
        let err = Config::parse("[webhook]\ntimeout_secs = 5\n").unwrap_err();
        assert_eq!(
            err.problems[0].message,
            "webhook: the webhook channel has no section of its own; remove it (its rate limits are [delivery.webhook], its addresses are subscribers')",
        );
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
        assert!(err.problems[0].message.contains("add up to 130"), "{err}");
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
