//! Validation of the digest-engine sections: raw values -> validated ones, each problem
//! naming the key, the bad value and what is allowed.

use std::path::PathBuf;
use std::time::Duration;

use chrono::NaiveTime;
use chrono_tz::Tz;

use super::raw::*;
use super::read::{env_var_name, http_url};
use super::*;
use crate::model::{Score, SourceKind};

pub fn validate_digest(raw: RawDigest, problems: &mut Vec<String>) -> DigestConfig {
    if !LANGUAGES.contains(&raw.language.as_str()) {
        problems.push(format!(
            "digest.language: \"{}\" is not supported; use one of {}",
            raw.language,
            LANGUAGES.join(", ")
        ));
    }
    let timezone = timezone("digest.timezone", &raw.timezone, problems);
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
    if !(0..=90).contains(&raw.follow_up_days) {
        problems.push(format!(
            "digest.follow_up_days: {} is out of range; use 0 (no follow-up linking) to 90 days",
            raw.follow_up_days
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
        follow_up_days: raw.follow_up_days,
        templates_dir: raw.templates_dir.map(PathBuf::from),
    }
}

pub fn validate_sources(
    raw: Option<Vec<RawSource>>,
    problems: &mut Vec<String>,
) -> Vec<SourceConfig> {
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
        // A shorthand (github:, arxiv:, discourse:) stands for a URL and implies a kind.
        let expanded = match super::shorthand::expand(&s.url) {
            Ok(e) => e,
            Err(why) => {
                problems.push(format!("{path}.url: {why}"));
                continue;
            }
        };
        let kind = match (s.kind.as_deref(), &expanded) {
            (Some(k), _) => parse_source_kind(k).unwrap_or_else(|| {
                problems.push(format!(
                    "{path}.kind: \"{k}\" is not a source kind; use arxiv, github_releases, blog or feed"
                ));
                SourceKind::Feed
            }),
            (None, Some(e)) => e.kind,
            (None, None) => {
                problems.push(format!(
                    "{path}.kind: missing; use arxiv, github_releases, blog or feed (or a github:, arxiv: or discourse: shorthand as the url)"
                ));
                SourceKind::Feed
            }
        };
        let phrases = |key: &str, list: &[String], problems: &mut Vec<String>| {
            list.iter()
                .filter_map(|p| {
                    let p = p.trim().to_lowercase();
                    if p.is_empty() {
                        problems.push(format!(
                            "{path}.{key}: an empty phrase matches everything; remove it"
                        ));
                        None
                    } else {
                        Some(p)
                    }
                })
                .collect::<Vec<_>>()
        };
        let include = phrases("include", &s.include, problems);
        let exclude = phrases("exclude", &s.exclude, problems);
        let url = expanded.map_or(s.url.clone(), |e| e.url);
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
        match parse_location(&url) {
            Ok(location) => out.push(SourceConfig {
                name,
                location,
                kind,
                weight: s.weight,
                max_items,
                include,
                exclude,
            }),
            Err(why) => problems.push(format!("{path}.url: \"{}\" {why}", s.url)),
        }
    }
    out
}

pub fn parse_source_kind(kind: &str) -> Option<SourceKind> {
    Some(match kind {
        "arxiv" => SourceKind::Arxiv,
        "github_releases" => SourceKind::GithubReleases,
        "blog" => SourceKind::Blog,
        "feed" => SourceKind::Feed,
        _ => return None,
    })
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

pub fn validate_layers(
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
        let keywords = phrases(&layer.keywords);
        if keywords.is_empty() {
            problems.push(format!("layers.{name}.keywords: give at least one keyword"));
        }
        out.push(LayerConfig {
            name,
            keywords,
            strong: phrases(&layer.strong),
            weak: phrases(&layer.weak),
            projects: phrases(&layer.projects),
        });
    }
    out
}

/// Trimmed, lower-case, non-empty: what the keyword matcher expects.
fn phrases(raw: &[String]) -> Vec<String> {
    raw.iter()
        .map(|k| k.trim().to_lowercase())
        .filter(|k| !k.is_empty())
        .collect()
}

pub fn validate_relevance(raw: RawRelevance) -> RelevanceConfig {
    RelevanceConfig {
        field: phrases(&raw.field),
        negative: phrases(&raw.negative),
        stack: phrases(&raw.stack),
        learned: raw.learned,
    }
}

pub fn validate_score(raw: RawScore, problems: &mut Vec<String>) -> ScoreWeights {
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

pub fn validate_summarize(raw: RawSummarize, problems: &mut Vec<String>) -> SummarizeConfig {
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
    let base_url = http_url(&raw.base_url).unwrap_or_else(|| {
        problems.push(format!(
            "summarize.base_url: \"{}\" is not an http(s) URL; e.g. https://api.deepseek.com",
            raw.base_url
        ));
        url::Url::parse("http://invalid.invalid").expect("static URL")
    });
    env_var_name("summarize.api_key_env", &raw.api_key_env, "key", problems);
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
    if !(64..=32_768).contains(&raw.max_tokens) {
        problems.push(format!(
            "summarize.max_tokens: {} is out of range; use 64 to 32768",
            raw.max_tokens
        ));
    }
    if raw.deadline_secs == 0 || raw.deadline_secs > 3_600 {
        problems.push(format!(
            "summarize.deadline_secs: {} is out of range; use 1 to 3600 seconds for the whole LLM phase",
            raw.deadline_secs
        ));
    }
    for (key, price) in [
        ("price_input_per_mtok", raw.price_input_per_mtok),
        ("price_output_per_mtok", raw.price_output_per_mtok),
    ] {
        if price.is_some_and(|p| !(p.is_finite() && p >= 0.0)) {
            problems.push(format!(
                "summarize.{key}: must be a price per million tokens of 0 or more"
            ));
        }
    }
    if raw.rank && mode != SummarizeMode::Llm {
        problems.push(
            "summarize.rank: needs summarize.mode = \"llm\" (the model rates the events); set rank = false or use llm mode"
                .into(),
        );
    }
    SummarizeConfig {
        mode,
        summary_chars: raw.summary_chars,
        rank: raw.rank,
        llm: LlmConfig {
            provider: raw.provider,
            base_url,
            model: raw.model,
            api_key_env: raw.api_key_env,
            timeout: Duration::from_secs(raw.timeout_secs),
            concurrency: raw.concurrency.clamp(1, 64),
            retries: raw.retries,
            max_tokens: raw.max_tokens,
            deadline: Duration::from_secs(raw.deadline_secs.clamp(1, 3_600)),
            price_input_per_mtok: raw.price_input_per_mtok,
            price_output_per_mtok: raw.price_output_per_mtok,
        },
    }
}

pub fn validate_fetch(raw: RawFetch, problems: &mut Vec<String>) -> FetchConfig {
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
    if !(0.0..=1.0).contains(&raw.min_success_share) {
        problems.push(format!(
            "fetch.min_success_share: {} is out of range; use a share from 0 (at least one source must answer) to 1 (every source must)",
            raw.min_success_share
        ));
    }
    let budget_ok = raw.parse_budget_secs.is_finite()
        && raw.parse_budget_secs > 0.0
        && raw.parse_budget_secs <= 600.0;
    if !budget_ok {
        problems.push(format!(
            "fetch.parse_budget_secs: {} is out of range; use a number of seconds in (0, 600]",
            raw.parse_budget_secs
        ));
    }
    FetchConfig {
        parse_budget: Duration::from_secs_f64(if budget_ok {
            raw.parse_budget_secs.max(0.000_001)
        } else {
            30.0
        }),
        min_success_share: raw.min_success_share.clamp(0.0, 1.0),
        concurrency: raw.concurrency.clamp(1, 1024),
        per_host_concurrency: raw.per_host_concurrency.max(1),
        // NaN is reported above; it must not reach from_secs_f64, which panics on it.
        timeout: Duration::from_secs_f64(if raw.timeout_secs.is_nan() {
            20.0
        } else {
            raw.timeout_secs.clamp(0.001, 600.0)
        }),
        max_body_bytes: raw.max_body_bytes,
        max_redirects: raw.max_redirects,
        retries: raw.retries,
        user_agent: raw.user_agent,
        allow_private_networks: raw.allow_private_networks,
    }
}

/// An IANA time zone; UTC and a problem naming `key` otherwise.
pub fn timezone(key: &str, name: &str, problems: &mut Vec<String>) -> Tz {
    name.parse::<Tz>().unwrap_or_else(|_| {
        problems.push(format!(
            "{key}: \"{name}\" is not an IANA time zone; use a name such as Asia/Shanghai or UTC"
        ));
        Tz::UTC
    })
}
