//! Summaries for each event: extractive (default, offline, deterministic) or an
//! OpenAI-compatible LLM, with per-event fallback to extractive when the LLM fails or its
//! answer does not pass validation.

pub mod llm;

// The pure parts live in the core crate.
pub use kdigest_core::summarize::{extractive, gloss, guard, numbers, prompt, rank};

use crate::config::{Config, SummarizeMode};
use crate::digest::Candidate;
use crate::locale::Locale;
use crate::model::{EventText, Summaries};
use crate::store::Store;

/// Extractive texts of every candidate in each reader language but the digest's.
pub fn other_languages(
    candidates: &[Candidate],
    config: &Config,
) -> anyhow::Result<Vec<(String, Vec<EventText>)>> {
    crate::config::LANGUAGES
        .iter()
        .filter(|l| **l != config.digest.language)
        .map(|l| {
            let locale = crate::templates::locale(l, config.digest.templates_dir.as_deref())?;
            let texts = extractive_all(candidates, &locale, config.summarize.summary_chars).texts;
            Ok((l.to_string(), texts))
        })
        .collect()
}

pub fn extractive_all(candidates: &[Candidate], locale: &Locale, budget: usize) -> Summaries {
    Summaries {
        // One digest: its "why it matters" lines vary their lead-ins across events.
        texts: {
            let mut lead_ins = extractive::LeadIns::default();
            candidates
                .iter()
                .map(|c| extractive::summarize_varied(c, locale, budget, &mut lead_ins))
                .collect()
        },
        fell_back: vec![None; candidates.len()],
        usage: None,
        headline: None,
        mode: "extractive".into(),
        other_languages: Vec::new(),
    }
}

/// `summarize.rank`: the model's ratings blended into the scores (LLM mode only; a no-op
/// otherwise), candidates sorted again. Returns the rating phase's usage, to be added to
/// the digest's.
pub async fn rank(
    candidates: &mut [Candidate],
    config: &Config,
    store: &Store,
) -> anyhow::Result<Option<crate::model::LlmUsage>> {
    if !config.summarize.rank || config.summarize.mode != SummarizeMode::Llm {
        return Ok(None);
    }
    let client = llm::LlmClient::from_config(&config.summarize.llm)?;
    let names = config.layer_names();
    let usage = client
        .rate_all(candidates, &names, config.digest.min_score.as_f64(), store)
        .await;
    crate::digest::sort_candidates(candidates);
    Ok(usage)
}

/// Fails early (exit 2) when LLM mode is configured without its key in the environment,
/// so a run does not fetch every source first and then stop.
pub fn check_ready(config: &Config) -> Result<(), crate::config::ConfigError> {
    match config.summarize.mode {
        SummarizeMode::Extractive => Ok(()),
        SummarizeMode::Llm => llm::LlmClient::from_config(&config.summarize.llm).map(|_| ()),
    }
}

/// Summarises with the configured mode. LLM mode needs the key in the environment
/// variable named by `summarize.api_key_env`; without it this fails before any request.
pub async fn summarize(
    candidates: &[Candidate],
    config: &Config,
    locale: &Locale,
    store: &Store,
) -> anyhow::Result<Summaries> {
    let budget = config.summarize.summary_chars;
    match config.summarize.mode {
        SummarizeMode::Extractive => Ok(extractive_all(candidates, locale, budget)),
        SummarizeMode::Llm => {
            let client = llm::LlmClient::from_config(&config.summarize.llm)?;
            Ok(client
                .summarize_all(candidates, &config.digest.language, locale, budget, store)
                .await)
        }
    }
}
