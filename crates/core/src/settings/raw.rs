//! The core sections as serde reads them, with defaults, so an empty file is a working
//! configuration. `validate.rs` turns them into the validated settings.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::DEFAULT_LAYERS;
use super::read::{Doc, deserialize_at};

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
    pub follow_up_days: i64,
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
            follow_up_days: 14,
            templates_dir: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    pub name: String,
    pub url: String,
    /// Optional when the URL is a shorthand that implies it (config::shorthand).
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub max_items: Option<i64>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLayer {
    pub keywords: Vec<String>,
    #[serde(default)]
    pub strong: Vec<String>,
    #[serde(default)]
    pub weak: Vec<String>,
    #[serde(default)]
    pub projects: Vec<String>,
}

/// `[relevance]`: phrases about the field as a whole and about its neighbours. A missing
/// list keeps the built-in one (crates/core/src/default_relevance.toml).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawRelevance {
    pub field: Vec<String>,
    pub negative: Vec<String>,
    pub stack: Vec<String>,
    /// Whether the learned corrections (crates/core/src/learned_model.tsv) apply on top of the phrases.
    pub learned: bool,
}

impl Default for RawRelevance {
    fn default() -> Self {
        // Not `toml::from_str::<RawRelevance>`: its serde default would call this again.
        #[derive(Deserialize)]
        struct Builtin {
            field: Vec<String>,
            negative: Vec<String>,
            stack: Vec<String>,
        }
        let b: Builtin =
            toml::from_str(DEFAULT_RELEVANCE_TOML).expect("built-in relevance phrases parse");
        RawRelevance {
            field: b.field,
            negative: b.negative,
            stack: b.stack,
            learned: true,
        }
    }
}

const DEFAULT_RELEVANCE_TOML: &str = include_str!("../default_relevance.toml");

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
    pub max_tokens: u32,
    pub deadline_secs: u64,
    pub price_input_per_mtok: Option<f64>,
    pub price_output_per_mtok: Option<f64>,
    pub rank: bool,
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
            max_tokens: 1024,
            deadline_secs: 300,
            price_input_per_mtok: None,
            price_output_per_mtok: None,
            rank: false,
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
    pub min_success_share: f64,
    pub parse_budget_secs: f64,
    pub allow_private_networks: bool,
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
            min_success_share: 0.0,
            parse_budget_secs: 30.0,
            allow_private_networks: false,
            user_agent: concat!(
                "kdigest/",
                env!("CARGO_PKG_VERSION"),
                " (daily GPU-kernel digest)"
            )
            .into(),
        }
    }
}

/// The bundled defaults: the same values as config.toml, so an empty file works.
pub fn default_sources() -> Vec<RawSource> {
    let src = |name: &str, url: &str, kind: &str, weight: f64| RawSource {
        name: name.into(),
        url: url.into(),
        kind: Some(kind.into()),
        weight,
        max_items: None,
        include: Vec::new(),
        exclude: Vec::new(),
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

pub fn default_layers() -> Vec<(String, RawLayer)> {
    let table: BTreeMap<String, RawLayer> =
        toml::from_str(DEFAULT_LAYERS_TOML).expect("built-in layers parse");
    DEFAULT_LAYERS
        .iter()
        .map(|name| (name.to_string(), table[*name].clone()))
        .collect()
}

/// Built-in layer keywords; config.toml repeats them so users can see and edit them.
const DEFAULT_LAYERS_TOML: &str = include_str!("../default_layers.toml");

pub fn raw_sources(doc: &Doc, problems: &mut Vec<String>) -> Option<Vec<RawSource>> {
    let item = doc.get("sources")?;
    let Some(array) = item.as_array_of_tables() else {
        problems
            .push("sources: expected an array of tables ([[sources]]), got a single value".into());
        return Some(Vec::new());
    };
    let parsed = array
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let item = toml_edit::Item::Table(t.clone());
            deserialize_at(doc, &item, &format!("sources[{i}]"), problems)
        })
        .collect();
    Some(parsed)
}

pub fn raw_layers(doc: &Doc, problems: &mut Vec<String>) -> Option<Vec<(String, RawLayer)>> {
    let item = doc.get("layers")?;
    let Some(layers) = item.as_table_like() else {
        problems.push("layers: expected tables such as [layers.runtime]".into());
        return Some(Vec::new());
    };
    let parsed = layers
        .iter()
        .filter_map(|(name, item)| {
            deserialize_at(doc, item, &format!("layers.{name}"), problems)
                .map(|l| (name.to_string(), l))
        })
        .collect();
    Some(parsed)
}
