//! The core settings: the sections the pure stages read (digest, sources, layers,
//! relevance, score, summarize, fetch), the limits a channel declares, secrets, and the
//! grammar of configuration problems (`ConfigError`, key paths, locations) that every
//! section's reader shares, the channels' included.
//!
//! This module names no channel and no server: the application's configuration
//! (`crate::config`) holds these settings beside the channels' sections
//! (`crate::channels::ChannelsConfig`) and its own (storage, daemon, web).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use chrono::NaiveTime;
use chrono_tz::Tz;

use crate::model::{Score, SourceKind};

pub mod location;
pub mod raw;
pub mod read;
mod secret;
pub mod shorthand;
pub mod validate;

pub use location::Location;
pub use raw::{RawSource, default_sources as builtin_sources};
pub use secret::Secret;
pub use validate::{parse_location, parse_source_kind};

/// The core settings: what the pure stages read.
#[derive(Debug, Clone)]
pub struct Settings {
    pub digest: DigestConfig,
    pub sources: Vec<SourceConfig>,
    /// Layer name -> keywords, in configuration order.
    pub layers: Vec<LayerConfig>,
    pub relevance: RelevanceConfig,
    pub score: ScoreWeights,
    pub summarize: SummarizeConfig,
    pub fetch: FetchConfig,
}

impl Settings {
    /// Reads and validates the core sections of a document; the other sections are the
    /// application's to read (and to refuse when unknown).
    pub fn read(doc: &read::Doc, problems: &mut Vec<String>) -> Settings {
        use read::section;
        let digest: raw::RawDigest = section(doc, "digest", problems);
        let score: raw::RawScore = section(doc, "score", problems);
        let relevance: raw::RawRelevance = section(doc, "relevance", problems);
        let summarize: raw::RawSummarize = section(doc, "summarize", problems);
        let fetch: raw::RawFetch = section(doc, "fetch", problems);
        let sources = raw::raw_sources(doc, problems);
        let layers = raw::raw_layers(doc, problems);
        Settings {
            digest: validate::validate_digest(digest, problems),
            sources: validate::validate_sources(sources, problems),
            layers: validate::validate_layers(layers, problems),
            relevance: validate::validate_relevance(relevance),
            score: validate::validate_score(score, problems),
            summarize: validate::validate_summarize(summarize, problems),
            fetch: validate::validate_fetch(fetch, problems),
        }
    }

    /// The core settings of a configuration text (its other sections are not read).
    pub fn parse(text: &str) -> Result<Settings, ConfigError> {
        let doc = read::document(text)?;
        let mut problems = Vec::new();
        let settings = Settings::read(&doc, &mut problems);
        if problems.is_empty() {
            Ok(settings)
        } else {
            Err(read::locate(text, &doc, problems))
        }
    }

    pub fn layer_names(&self) -> Vec<&str> {
        self.layers.iter().map(|l| l.name.as_str()).collect()
    }

    pub fn source(&self, name: &str) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| s.name == name)
    }
}

/// When the scheduler runs (`[schedule]`).
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// Crontab's five fields, matched against local time in `timezone`.
    pub cron: crate::crontab::Crontab,
    /// The expression as written, for messages.
    pub expression: String,
    pub timezone: Tz,
}

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
    /// The file the problems are in, once known (set by [`Config::load`]).
    pub file: Option<PathBuf>,
    pub problems: Vec<Problem>,
}

/// One problem: a message that starts with the key path, and where that key is in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    pub at: Option<Location>,
}

impl ConfigError {
    /// A problem with no place in the file (a missing variable, an unreadable file).
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: None,
            problems: vec![Problem {
                message: message.into(),
                at: None,
            }],
        }
    }
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
            let Some(at) = &p.at else {
                write!(f, "\n  - {}", p.message)?;
                continue;
            };
            match &self.file {
                Some(file) => write!(f, "\n  - {}:{}:{}: ", file.display(), at.line, at.column)?,
                None => write!(f, "\n  - line {}, column {}: ", at.line, at.column)?,
            }
            let number = at.line.to_string();
            let pad = " ".repeat(number.len());
            write!(
                f,
                "{}\n      {pad} |\n      {number} | {}\n      {pad} | {}{}",
                p.message,
                at.source_line,
                " ".repeat(at.column - 1),
                "^".repeat(at.width)
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Rate limits and concurrency of one channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelLimits {
    pub per_sec: f64,
    pub per_destination_per_sec: f64,
    pub concurrency: usize,
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
    /// How many days back a new event is linked to the story it continues, and a story
    /// already reported is not presented as new again (crate::followup); 0: never.
    pub follow_up_days: i64,
    pub templates_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceConfig {
    pub name: String,
    pub location: SourceLocation,
    pub kind: SourceKind,
    pub weight: f64,
    pub max_items: Option<usize>,
    /// Keep only items whose title or text contains one of these (lower-cased); empty: all.
    pub include: Vec<String>,
    /// Drop items whose title or text contains one of these (lower-cased).
    pub exclude: Vec<String>,
}

impl SourceConfig {
    /// Whether an item with this title and text passes the source's include and exclude
    /// phrases (case-insensitive).
    pub fn keeps(&self, title: &str, text: &str) -> bool {
        if self.include.is_empty() && self.exclude.is_empty() {
            return true;
        }
        let haystack = format!("{title}\n{text}").to_lowercase();
        (self.include.is_empty() || self.include.iter().any(|p| haystack.contains(p.as_str())))
            && !self.exclude.iter().any(|p| haystack.contains(p.as_str()))
    }
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
    /// Ordinary evidence for the layer (weight 1).
    pub keywords: Vec<String>,
    /// Unambiguous terms of the layer: one mention tags it (weight 2).
    pub strong: Vec<String>,
    /// Words that mean the layer only in company ("latency", "layout"): weight 1/2.
    pub weak: Vec<String>,
    /// The field's systems whose home is this layer ("vllm" for runtime, "cutlass" for
    /// kernel_codegen): a release of one, named in its title or its repository, touches it.
    pub projects: Vec<String>,
}

/// Phrases that are not one layer's: evidence that an item is about this field at all, and
/// neighbouring fields whose items mention GPUs or kernels without being about them.
#[derive(Debug, Clone, PartialEq)]
pub struct RelevanceConfig {
    pub field: Vec<String>,
    pub negative: Vec<String>,
    /// The systems this field's engineers use (vLLM, FlashAttention, cuBLAS, ...): a paper
    /// that builds on or measures against them lands in the readers' own stack.
    pub stack: Vec<String>,
    /// Apply the learned corrections (`learned`, crates/core/src/learned_model.tsv) on top of the
    /// phrases; `false` leaves the phrase model alone.
    pub learned: bool,
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

impl SummarizeMode {
    /// As written in config.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            SummarizeMode::Extractive => "extractive",
            SummarizeMode::Llm => "llm",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SummarizeConfig {
    pub mode: SummarizeMode,
    pub summary_chars: usize,
    /// LLM mode: the model also rates each event near the threshold 1-10 and proposes
    /// layers; the rating moves the score by up to ±10 points (summarize::rank).
    pub rank: bool,
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
    /// Sent as `max_tokens` with every request.
    pub max_tokens: u32,
    /// For the whole LLM phase of one digest; events not done by then fall back.
    pub deadline: Duration,
    /// For the cost estimate in the notes, per million tokens; None: no estimate.
    pub price_input_per_mtok: Option<f64>,
    pub price_output_per_mtok: Option<f64>,
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
    /// Feeds (and their redirects, and discovery) may be on loopback or private networks.
    pub allow_private_networks: bool,
    /// Below this share of sources answering (and always when none does) a run stores and
    /// delivers nothing: a failed day is not a quiet day.
    pub min_success_share: f64,
    /// How long parsing one source's body may take before the source is failed.
    pub parse_budget: Duration,
}
