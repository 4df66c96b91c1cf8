//! Event -> score 0..=100 with a breakdown. Pure and deterministic.
//!
//! score = Σ weight_c × value_c over five components, each value in [0, 1] and the weights
//! (config `[score]`) summing to 100:
//!
//! - source: the highest configured weight among the event's sources.
//! - relevance: the classifier's evidence (weighted layer and field phrases, titles double,
//!   long texts scaled down, neighbouring fields subtracted; see `classify`) as
//!   1 - exp(-evidence / 6).
//! - impact: releases (from release sources only) by level (major 1.0, minor 0.75, patch 0.35, pre-release 0.3,
//!   nightly 0.1, below 1.0 each semver place moves up one), then bonuses that close a share
//!   of the gap to 1 (at most 0.8 of it): 0.5 when the notes have changes to act on
//!   (breaking, behaviour, correctness fixes), 0.1 per quantified result (at most three); papers 0.5, plus 0.15 when built on or measured against the field's
//!   systems (`[relevance] stack`), 0.1 when their code is out, 0.05 per quantified result
//!   (at most three); posts 0.3 plus 0.15 per quantified result, counting at most three. A quantified result is a number with a
//!   unit of effect: "40x", "1.9×", "0.2%", "120 TFLOPS".
//! - corroboration: distinct sources, a cross-post of another's text not counted; one 0,
//!   two 0.7, three or more 1.
//! - freshness: 0.5 at the start of the window rising to 1 at its end (newest item).

use crate::classify::Classification;
use crate::model::{Event, ItemKind, ReleaseLevel, Score, ScoreComponent, Window};
use crate::release_notes::{self, ReleaseNotes};
use crate::settings::Settings;

/// The score of one event and what went into it.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub score: Score,
    pub breakdown: Vec<ScoreComponent>,
    /// Quantified results found in the event's text, in order of appearance, distinct.
    pub quantified: Vec<String>,
    pub release: Option<ReleaseLevel>,
    /// What a release's notes ask of its users, read once here for the score and the
    /// summary; None for papers and posts.
    pub notes: Option<ReleaseNotes>,
    /// The score before the learned component, unrounded: what its gain is read from.
    pub prior: f64,
}

/// The share of the gap to 1 that changes to act on close for a release.
const ACT_ON_SHARE: f64 = 0.5;
const PAPER_BASE: f64 = 0.5;
const STACK_BONUS: f64 = 0.15;
const CODE_BONUS: f64 = 0.1;

/// "Our code is available", "open-sourced", a GitHub link: the paper's code is out.
static CODE_RELEASED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(code (?:and \w+ )?(?:is|are) (?:publicly |openly )?(?:available|open[- ]source)|open[- ]sourced?|we (?:release|open[- ]source)|our code|source code is|github\.com/)",
    )
    .expect("valid regex")
});

/// Whether a paper says its code is out: it raises the paper's impact, and its watch item
/// becomes reproduction rather than the release.
pub fn releases_code(text: &str) -> bool {
    CODE_RELEASED.is_match(text)
}

/// Units that make a number a quantified result, lower-case; a unit that ends in a letter
/// must not run on into a word ("4xl" is not "4x").
const UNITS: &[&str] = &[
    "x", "×", "%", "percent", "tflops", "pflops", "gb/s", "tb/s", "tokens/s",
];

/// Distinct quantified results ("40x", "0.2%") in a text, in order of appearance. A hand
/// scan over digit runs rather than a regex: it runs over every item's full text.
pub fn quantified_results(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found: Vec<String> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // "1,530": the digits after a thousands separator are not a number of their own.
        let after_separator = i >= 2 && bytes[i - 1] == b',' && bytes[i - 2].is_ascii_digit();
        let starts_number = bytes[i].is_ascii_digit()
            && (i == 0 || !is_word_byte(bytes[i - 1]))
            && !after_separator;
        if !starts_number {
            i += 1;
            continue;
        }
        let mut end = i + bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        while bytes.get(end) == Some(&b',')
            && bytes.len() >= end + 4
            && bytes[end + 1..end + 4].iter().all(u8::is_ascii_digit)
            && !bytes.get(end + 4).is_some_and(u8::is_ascii_digit)
        {
            end += 4;
        }
        if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
            end += 1 + bytes[end + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        }
        let unit_at = if bytes.get(end) == Some(&b' ') {
            end + 1
        } else {
            end
        };
        let rest = &text[unit_at..];
        let spaced = unit_at > end;
        let unit = UNITS.iter().find(|u| {
            let multiple = matches!(**u, "x" | "×");
            rest.len() >= u.len()
                && rest.is_char_boundary(u.len())
                && rest[..u.len()].eq_ignore_ascii_case(u)
                // "2× faster", not a product of dimensions ("[1 × C_o]", "1×C"): a
                // multiple is written against its number and ends its word.
                && !(multiple && spaced)
                && (!(multiple || u.ends_with(|c: char| c.is_ascii_alphabetic()))
                    || !rest
                        .as_bytes()
                        .get(u.len())
                        .is_some_and(|b| is_word_byte(*b)))
        });
        // "even when the cache hit rate is 0%": a zero is a condition, never a result; "2x
        // AMD EPYC 9374F", "8x H100": a count of devices, not a multiple of anything.
        let zero = text[i..end]
            .bytes()
            .all(|b| matches!(b, b'0' | b'.' | b','));
        let devices =
            unit.is_some_and(|u| matches!(*u, "x" | "×") && counts_devices(&rest[u.len()..]));
        if let Some(unit) = unit.filter(|_| !zero && !devices) {
            let value = format!("{}{}", &text[i..end], &rest[..unit.len()]);
            if !found.contains(&value) {
                found.push(value);
            }
            i = unit_at + unit.len();
        } else {
            i = end;
        }
    }
    found
}

/// Whether the words after a multiple name hardware: "2x AMD EPYC", "8x H100 GPUs", "4×
/// MI300X" are counts of devices.
fn counts_devices(after: &str) -> bool {
    let Some(word) = after
        .strip_prefix(' ')
        .and_then(|a| a.split_whitespace().next())
    else {
        return false;
    };
    let word = word.trim_end_matches(|c: char| !c.is_alphanumeric());
    let model = word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_digit())
        && !word.contains('.');
    model
        || matches!(
            word,
            "AMD" | "NVIDIA" | "Intel" | "GPU" | "GPUs" | "CPU" | "CPUs" | "nodes" | "GCDs"
        )
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub fn assess(
    event: &Event,
    classification: &Classification,
    window: &Window,
    config: &Settings,
) -> Assessment {
    let w = &config.score;
    let primary = event.primary();
    let mut quantified = Vec::new();
    for item in &event.items {
        for q in quantified_results(&item.title)
            .into_iter()
            .chain(quantified_results(&item.text))
        {
            if !quantified.contains(&q) {
                quantified.push(q);
            }
        }
    }
    let release = primary.release;
    let notes = release.map(|_| release_notes::read(event.main_text()));

    let (source_weight, source_name) = event
        .items
        .iter()
        .map(|i| {
            (
                config.source(&i.source).map_or(0.5, |s| s.weight),
                i.source.as_str(),
            )
        })
        .fold(
            (0.0_f64, ""),
            |best, cur| if cur.0 > best.0 { cur } else { best },
        );

    let r = &classification.relevance;
    let relevance = r.value();
    let relevance_reason = relevance_reason(classification);

    let counted = quantified.len().min(3) as f64;
    let (impact, impact_reason) = match release {
        Some(level) => {
            let base = match level {
                ReleaseLevel::Major => 1.0,
                ReleaseLevel::Minor => 0.75,
                ReleaseLevel::Patch => 0.35,
                ReleaseLevel::PreRelease => 0.3,
                ReleaseLevel::Nightly => 0.1,
            };
            // Breaking and behaviour changes, and fixes for wrong results, are what users
            // must act on: such a release matters more than its number says.
            let notes = notes.as_ref().expect("read for every release");
            let act_on = notes.changes_to_act_on().len() + notes.correctness.len();
            // Each bonus closes part of the gap to 1, so no minor release, however much
            // it asks of its users, ties a major one.
            let act_share = if act_on > 0 { ACT_ON_SHARE } else { 0.0 };
            let share = (act_share + 0.1 * counted).min(0.8);
            let value = base + (1.0 - base) * share;
            (
                value,
                format!(
                    "{} release; changes to act on: {}; quantified results: {}",
                    level.as_str(),
                    if act_on > 0 {
                        format!(
                            "{} breaking/behaviour, {} correctness fixes (closes {ACT_ON_SHARE} of the gap to 1)",
                            notes.changes_to_act_on().len(),
                            notes.correctness.len()
                        )
                    } else {
                        "none".to_string()
                    },
                    list_or_none(&quantified)
                ),
            )
        }
        // A paper is judged on what it contributes: built on or measured against the
        // field's own systems, with its code out; figures add a little, their absence
        // does not make it minor.
        None if primary.kind == ItemKind::Paper => {
            let stack = !classification.stack.is_empty();
            let code = releases_code(event.main_text());
            let value = PAPER_BASE
                + 0.05 * counted
                + if stack { STACK_BONUS } else { 0.0 }
                + if code { CODE_BONUS } else { 0.0 };
            (
                value.min(1.0),
                format!(
                    "paper (base {PAPER_BASE}); the field's systems: {}{}; code released: {}; quantified results: {}",
                    list_or_none(&classification.stack),
                    if stack {
                        format!(" (+{STACK_BONUS})")
                    } else {
                        String::new()
                    },
                    if code {
                        format!("yes (+{CODE_BONUS})")
                    } else {
                        "no".into()
                    },
                    list_or_none(&quantified)
                ),
            )
        }
        None => (
            0.3 + 0.15 * counted,
            format!(
                "post (base 0.3); quantified results: {}",
                list_or_none(&quantified)
            ),
        ),
    };

    // A cross-post is one report under two names.
    let sources = crate::cluster::independent_sources(event);
    let corroboration = match sources {
        0 | 1 => 0.0,
        2 => 0.7,
        _ => 1.0,
    };

    let newest = event
        .items
        .iter()
        .map(|i| i.published)
        .max()
        .unwrap_or(primary.published);
    let span = (window.end - window.start).num_seconds().max(1) as f64;
    let position = ((newest - window.start.to_utc()).num_seconds() as f64 / span).clamp(0.0, 1.0);
    let freshness = 0.5 + 0.5 * position;

    let components = [
        (
            "source",
            source_weight,
            w.source,
            format!("highest source weight {source_weight:.2} ({source_name})"),
        ),
        ("relevance", relevance, w.relevance, relevance_reason),
        ("impact", impact, w.impact, impact_reason),
        (
            "corroboration",
            corroboration,
            w.corroboration,
            format!("{sources} distinct source(s)"),
        ),
        (
            "freshness",
            freshness,
            w.freshness,
            format!("newest item at {:.0}% of the window", position * 100.0),
        ),
    ];
    let total: f64 = components
        .iter()
        .map(|(_, value, weight, _)| value * weight)
        .sum();
    let breakdown: Vec<ScoreComponent> = components
        .into_iter()
        .map(|(name, value, weight, reason)| ScoreComponent {
            name: name.into(),
            value: round(value, 3),
            weight,
            points: round(value * weight, 2),
            reason,
        })
        .collect();
    let mut assessment = Assessment {
        score: Score::from_f64(total),
        breakdown,
        quantified,
        release,
        notes,
        prior: total,
    };
    add_learned(&mut assessment, classification, config);
    assessment
}

/// Adds the learned component of `classification` (none without one): its points are
/// the correction scaled by its gain at the prior score.
pub fn add_learned(
    assessment: &mut Assessment,
    classification: &Classification,
    config: &Settings,
) {
    let Some(c) = &classification.relevance.learned else {
        return;
    };
    let gain = crate::learned::relevance_gain(assessment.prior, config.digest.min_score.as_f64());
    let component = learned_component(c, gain);
    assessment.score = Score::from_f64(assessment.prior + component.points);
    assessment.breakdown.push(component);
}

/// "evidence 7.3 (relevance 1 - e^(-evidence/6)) = title 4.0 (mlir, fusion) + text 4.3 (3
/// phrases: …; ×0.71 for 500 words) − neighbouring fields 0.0 (none)"
fn relevance_reason(c: &Classification) -> String {
    let r = &c.relevance;
    let body = c.keywords.len();
    let mut out = format!(
        "evidence {:.1} (relevance 1 - e^(-evidence/{})) = title {:.1} ({}) + text {:.1} ({body} phrases: {}",
        r.evidence(),
        crate::classify::EVIDENCE_SCALE,
        r.title_points,
        list_or_none(&c.title_keywords),
        r.text_points,
        list_or_none(&c.keywords),
    );
    if r.length_factor < 1.0 {
        out.push_str(&format!("; ×{:.2} for {} words", r.length_factor, r.words));
    }
    out.push_str(&format!(
        ") − neighbouring fields {:.1} ({})",
        r.negative_points,
        list_or_none(&c.negatives)
    ));
    out
}

/// The learned component: the correction's log-odds as points, and the features that moved
/// it most ("t:nvshmem +0.41" is the title word; log-odds before the scale).
fn learned_component(c: &crate::learned::Correction, gain: f64) -> ScoreComponent {
    let points = c.value * gain * crate::learned::SCORE_SCALE;
    let moved: Vec<String> = c.top.iter().map(|(f, v)| format!("{f} {v:+.2}")).collect();
    ScoreComponent {
        name: "learned".into(),
        value: round(c.value, 3),
        weight: crate::learned::SCORE_SCALE,
        points: round(points, 2),
        reason: format!(
            "learned correction {:+.2} log-odds × {} points × gain {:.2} (1 at digest.min_score, 0 {} points away); most moved by: {}",
            c.value,
            crate::learned::SCORE_SCALE,
            gain,
            crate::learned::GAIN_POINTS,
            list_or_none(&moved)
        ),
    }
}

fn round(x: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (x * f).round() / f
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The points an event with every value at 1 would get.
    fn max_points(w: &crate::settings::ScoreWeights) -> f64 {
        w.source + w.relevance + w.impact + w.corroboration + w.freshness
    }

    #[test]
    fn quantified_results_are_found_once_each() {
        let q = quantified_results(
            "Up to 40x faster, 0.2% overhead, 1.9× over FA3, 40x again, 120 TFLOPS, v3.6, 1,530 TFLOPS",
        );
        assert_eq!(q, vec!["40x", "0.2%", "1.9×", "120TFLOPS", "1,530TFLOPS"]);
        // Products of dimensions are no multiples.
        assert!(quantified_results("a vector [1 × C_o] and a 1×C tile, 2 x 4").is_empty());
        // A count of devices is no result.
        assert_eq!(
            quantified_results("8xMI300X with 2x AMD EPYC 9374F, 4× H100 GPUs: 3x faster"),
            ["3x"]
        );
        // A zero is the condition a result holds under, not a result.
        assert_eq!(
            quantified_results(
                "less than 1% decrease in throughput even when the cache hit rate is 0%"
            ),
            ["1%"]
        );
        assert_eq!(
            quantified_results("1.5-2.0× faster (2×)"),
            vec!["2.0×", "2×"]
        );
    }

    #[test]
    fn default_weights_make_a_100_point_scale() {
        let c = Settings::parse("").unwrap();
        assert_eq!(max_points(&c.score), 100.0);
    }
}
