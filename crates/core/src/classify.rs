//! Event -> compiler-stack layers and relevance evidence, by phrase rules from the
//! configuration. Pure.
//!
//! Phrases match case-insensitively on word boundaries (a phrase edge that is a letter or
//! digit must not touch another ASCII letter or digit, so "ir" does not match "their" but
//! "tl." matches "tl.atomic_add"; a version or plural may follow: "FlashAttention3",
//! "H100s"). All phrases of all layers, the field phrases and the
//! negative ones are searched in one pass with an Aho-Corasick automaton, so the cost is
//! linear in the text, not in the number of phrases.
//!
//! Each layer phrase has a weight: strong 2, ordinary 1, weak 1/2. A layer is tagged when
//! its points reach [`TAG_AT`]: a distinct phrase in a title gives twice its weight, in the
//! text its weight, and each further mention in the text (at most two) half its weight; the
//! text's part is scaled by the length factor below. Weak words never tag a layer alone and
//! their repeats do not count. So
//! one strong term, one ordinary term in a title, or two ordinary terms in the text tag a
//! layer; one stray mention does not.
//!
//! Relevance evidence sums the weights of every distinct positive phrase (layer or field):
//! twice in a title, once in the text scaled by the length factor min(1, sqrt(250 / words)),
//! so a long text does not collect evidence just by being long; each distinct neighbouring
//! field phrase takes [`NEGATIVE_WEIGHT`] away (twice in a title, scaled in the text). Names
//! of the field's own systems (`stack`) are collected for the impact of papers; in the title
//! of a release they are evidence ([`STACK_RELEASE_WEIGHT`]): a JAX release is on topic. Relevance is evidence
//! 1 - exp(-evidence / [`EVIDENCE_SCALE`]), 0 when the evidence is not positive.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use crate::learned::{self, Learned};
use crate::model::{Event, Item};
use crate::settings::{LayerConfig, RelevanceConfig};

/// Only the start of long texts is read: what an item is about is said early.
const MAX_CLASSIFIED_BYTES: usize = 12_000;
pub const STRONG_WEIGHT: f64 = 2.0;
pub const WEIGHT: f64 = 1.0;
pub const WEAK_WEIGHT: f64 = 0.5;
pub const FIELD_WEIGHT: f64 = 1.0;
pub const NEGATIVE_WEIGHT: f64 = 2.0;
/// A stack name in the title of a release.
pub const STACK_RELEASE_WEIGHT: f64 = 2.0;
/// The points a release of one of a layer's `projects` gives that layer: enough to tag it.
/// Release notes are often terse lists of fixes in the project's own words ("Fix allgather
/// for bf16"), and a DeepSpeed or ONNX Runtime release is about its layer whatever they say.
pub const PROJECT_POINTS: f64 = 2.0;
use crate::learned::TAG_AT;
/// Relevance is 1 - exp(-evidence / EVIDENCE_SCALE): 0.57 at 5, 0.81 at 10, 0.96 at 20. It
/// keeps growing with evidence instead of stopping at a cap, so the richer of two relevant
/// events stays ahead.
pub const EVIDENCE_SCALE: f64 = 6.0;
/// Texts up to this many words count in full; longer ones by sqrt(REFERENCE_WORDS / words).
pub const REFERENCE_WORDS: f64 = 250.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Group {
    Layer(usize),
    Field,
    Negative,
    Stack,
}

struct Pattern {
    group: Group,
    phrase: String,
    weight: f64,
}

pub struct Classifier {
    automaton: AhoCorasick,
    patterns: Vec<Pattern>,
    /// The layers' `projects`, longest name first at each position, so that
    /// "triton-inference-server" is not read as "triton"; None when no layer lists any.
    projects: Option<AhoCorasick>,
    /// Per project name, the layers that list it.
    project_layers: Vec<(String, Vec<usize>)>,
    layer_names: Vec<String>,
    /// Learned corrections on top of the phrases (`learned`); None: the phrases alone.
    learned: Option<Arc<Learned>>,
}

/// What the rules found for one event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Classification {
    /// Assigned layers, in configuration order.
    pub layers: Vec<String>,
    /// Distinct positive phrases (layer or field) matched anywhere, sorted.
    pub keywords: Vec<String>,
    /// Distinct positive phrases matched in a title, sorted.
    pub title_keywords: Vec<String>,
    /// Distinct neighbouring-field phrases matched, sorted.
    pub negatives: Vec<String>,
    /// Distinct names of the field's own systems matched (`[relevance] stack`), sorted.
    pub stack: Vec<String>,
    /// Points per layer that has any, in configuration order (tagged at TAG_AT).
    pub layer_points: Vec<(String, f64)>,
    /// The phrase points of layers an ordinary or strong phrase anchored, unrounded: the
    /// prior the learned layer heads correct.
    pub anchored_points: Vec<(String, f64)>,
    /// Learned corrections per layer in log-odds (layers the model has a head for).
    pub layer_corrections: Vec<(String, f64)>,
    /// The layers whose `projects` this release is of: they stay whatever the learned
    /// corrections say (a DeepSpeed release is about the runtime even when its notes read
    /// like no runtime the labelled days have seen).
    pub home_layers: Vec<String>,
    pub relevance: Relevance,
}

/// The relevance evidence of an event and how it was reached.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Relevance {
    pub title_points: f64,
    /// Text points after the length factor.
    pub text_points: f64,
    pub negative_points: f64,
    pub length_factor: f64,
    pub words: usize,
    /// The learned relevance correction in log-odds (`learned`); None without a model.
    /// The score turns it into points.
    pub learned: Option<learned::Correction>,
}

impl Relevance {
    /// Title and text points less the neighbouring fields'.
    pub fn evidence(&self) -> f64 {
        self.title_points + self.text_points - self.negative_points
    }

    /// In [0, 1]: 1 - exp(-evidence / EVIDENCE_SCALE), 0 when the evidence is not positive.
    pub fn value(&self) -> f64 {
        (1.0 - (-self.evidence().max(0.0) / EVIDENCE_SCALE).exp()).clamp(0.0, 1.0)
    }
}

#[derive(Default, Clone, Copy)]
struct Hits {
    in_title: bool,
    in_text: usize,
}

impl Classifier {
    /// The classifier the configuration asks for: the phrases, with the built-in learned
    /// corrections unless `[relevance] learned = false`.
    pub fn new(layers: &[LayerConfig], relevance: &RelevanceConfig) -> Classifier {
        let learned = if relevance.learned {
            Learned::builtin()
        } else {
            None
        };
        Classifier::with_model(layers, relevance, learned)
    }

    /// The phrases with the given learned corrections (None: the phrases alone); the
    /// evaluation's folds use it.
    pub fn with_model(
        layers: &[LayerConfig],
        relevance: &RelevanceConfig,
        learned: Option<Arc<Learned>>,
    ) -> Classifier {
        let mut patterns = Vec::new();
        let mut add = |group: Group, phrases: &[String], weight: f64| {
            for p in phrases {
                patterns.push(Pattern {
                    group,
                    phrase: p.to_lowercase(),
                    weight,
                });
            }
        };
        for (li, layer) in layers.iter().enumerate() {
            add(Group::Layer(li), &layer.strong, STRONG_WEIGHT);
            add(Group::Layer(li), &layer.keywords, WEIGHT);
            add(Group::Layer(li), &layer.weak, WEAK_WEIGHT);
        }
        add(Group::Field, &relevance.field, FIELD_WEIGHT);
        add(Group::Negative, &relevance.negative, NEGATIVE_WEIGHT);
        add(Group::Stack, &relevance.stack, 0.0);
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            // A full DFA: a few hundred KB for the phrase set, several times faster to scan.
            .kind(Some(AhoCorasickKind::DFA))
            .build(patterns.iter().map(|p| p.phrase.as_str()))
            .expect("phrase automaton builds");
        let mut project_layers: Vec<(String, Vec<usize>)> = Vec::new();
        for (li, layer) in layers.iter().enumerate() {
            for name in &layer.projects {
                match project_layers.iter_mut().find(|(n, _)| n == name) {
                    Some((_, lis)) => lis.push(li),
                    None => project_layers.push((name.clone(), vec![li])),
                }
            }
        }
        let projects = (!project_layers.is_empty()).then(|| {
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::LeftmostLongest)
                .build(project_layers.iter().map(|(n, _)| n.as_str()))
                .expect("project automaton builds")
        });
        Classifier {
            automaton,
            patterns,
            projects,
            project_layers,
            layer_names: layers.iter().map(|l| l.name.clone()).collect(),
            learned,
        }
    }

    /// What the phrases say of `event`; [`Classifier::correct`] adds the learned part.
    pub fn classify(&self, event: &Event) -> Classification {
        let mut hits = vec![Hits::default(); self.patterns.len()];
        let mut words = 0;
        for item in &event.items {
            self.scan(&item.title, |p| hits[p].in_title = true);
            let text = bounded(&item.text, MAX_CLASSIFIED_BYTES);
            words += text.split_whitespace().count();
            self.scan(text, |p| hits[p].in_text += 1);
        }
        let release = event.primary().release.is_some();
        let length_factor = (REFERENCE_WORDS / words.max(1) as f64).sqrt().min(1.0);

        let mut layer_points = vec![0.0; self.layer_names.len()];
        let mut anchored = vec![false; self.layer_names.len()];
        let mut relevance = Relevance {
            length_factor,
            words,
            ..Relevance::default()
        };
        let (mut keywords, mut title_keywords) = (Vec::new(), Vec::new());
        let (mut negatives, mut stack) = (Vec::new(), Vec::new());
        let mut stack_in_title = false;
        for (pattern, h) in self.patterns.iter().zip(&hits) {
            if !h.in_title && h.in_text == 0 {
                continue;
            }
            let w = pattern.weight;
            let title = if h.in_title { 2.0 * w } else { 0.0 };
            let text = if h.in_text > 0 { w } else { 0.0 };
            match pattern.group {
                // A release of one of the field's own systems ("JAX v0.4.33") is about the
                // field whatever its notes say; elsewhere the names are only collected
                // (every ML paper says "implemented in PyTorch").
                Group::Stack if h.in_title && release => {
                    stack.push(pattern.phrase.clone());
                    stack_in_title = true;
                    relevance.title_points += 2.0 * STACK_RELEASE_WEIGHT;
                    title_keywords.push(pattern.phrase.clone());
                    keywords.push(pattern.phrase.clone());
                    continue;
                }
                Group::Stack => {
                    stack.push(pattern.phrase.clone());
                    continue;
                }
                Group::Negative => {
                    relevance.negative_points += title + text * length_factor;
                    negatives.push(pattern.phrase.clone());
                    continue;
                }
                Group::Layer(li) => {
                    // A long text mentions every layer somewhere; what it is about, it
                    // says often or in its title. Weak words only add to a layer that an
                    // ordinary or strong term has anchored, and their repeats do not count.
                    let weak = w < WEIGHT;
                    let repeats = if weak {
                        0.0
                    } else {
                        h.in_text.saturating_sub(1).min(2) as f64
                    };
                    layer_points[li] += title + (text + 0.5 * w * repeats) * length_factor;
                    anchored[li] |= !weak;
                }
                Group::Field => {}
            }
            relevance.title_points += title;
            relevance.text_points += text * length_factor;
            keywords.push(pattern.phrase.clone());
            if h.in_title {
                title_keywords.push(pattern.phrase.clone());
            }
        }
        let mut home_layers = Vec::new();
        let projects = if release {
            self.projects_of(event.primary())
        } else {
            Vec::new()
        };
        if !projects.is_empty() {
            let mut touched = vec![false; layer_points.len()];
            for (name, layers) in &projects {
                for &li in layers {
                    touched[li] = true;
                }
                stack.push(name.clone());
            }
            for (li, _) in touched.iter().enumerate().filter(|(_, t)| **t) {
                layer_points[li] += PROJECT_POINTS;
                anchored[li] = true;
                home_layers.push(self.layer_names[li].clone());
            }
            // A release of the field's own system is on topic, like one whose title names
            // a `stack` system (counted once, whichever said it).
            if !stack_in_title {
                relevance.title_points += 2.0 * STACK_RELEASE_WEIGHT;
            }
        }
        let anchored_points: Vec<(String, f64)> = layer_points
            .iter()
            .zip(&anchored)
            .zip(&self.layer_names)
            .filter(|((points, anchored), _)| **anchored && **points > 0.0)
            .map(|((points, _), name)| (name.clone(), *points))
            .collect();
        let prior_points = |name: &str| {
            anchored_points
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0.0, |(_, p)| *p)
        };
        let layers = strongest_layers(
            self.layer_names
                .iter()
                .map(|name| (name, prior_points(name) - TAG_AT)),
            &home_layers,
        );
        let layer_points = layer_points
            .iter()
            .zip(&self.layer_names)
            .filter(|(points, _)| **points > 0.0)
            .map(|(points, name)| (name.clone(), (points * 100.0).round() / 100.0))
            .collect();
        Classification {
            layers,
            layer_points,
            anchored_points,
            layer_corrections: Vec::new(),
            home_layers,
            keywords: sorted_distinct(keywords),
            title_keywords: sorted_distinct(title_keywords),
            negatives: sorted_distinct(negatives),
            stack: sorted_distinct(stack),
            relevance,
        }
    }

    /// Whether [`Classifier::correct`] changes anything: a learned model is loaded.
    pub fn learns(&self) -> bool {
        self.learned.is_some()
    }

    /// Applies the learned corrections to a phrase classification of `event`: the relevance
    /// correction (the score turns it into points) and the layers, each tagged when its
    /// prior plus its correction reaches 0. Without a model it changes nothing.
    pub fn correct(&self, event: &Event, classification: &mut Classification) {
        let Some(model) = &self.learned else {
            return;
        };
        let corrections = model.correct(event);
        let prior_points = |name: &str| {
            classification
                .anchored_points
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0.0, |(_, p)| *p)
        };
        let mut layers = Vec::with_capacity(self.layer_names.len());
        let mut layer_corrections = Vec::new();
        for name in &self.layer_names {
            let prior = learned::layer_prior(prior_points(name));
            let correction = corrections
                .layers
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0.0, |(_, c)| *c);
            if correction != 0.0 {
                layer_corrections.push((name.clone(), (correction * 100.0).round() / 100.0));
            }
            let margin = prior + correction;
            let home = classification.home_layers.contains(name);
            layers.push((name, if home { margin.max(0.0) } else { margin }));
        }
        classification.layers = strongest_layers(layers.into_iter(), &classification.home_layers);
        classification.layer_corrections = layer_corrections;
        classification.relevance.learned = Some(corrections.relevance);
    }

    fn scan(&self, text: &str, mut on_match: impl FnMut(usize)) {
        for m in self.automaton.find_overlapping_iter(text) {
            let phrase = &self.patterns[m.pattern().as_usize()].phrase;
            if on_word_boundaries(text, m.start(), m.end(), phrase) {
                on_match(m.pattern().as_usize());
            }
        }
    }

    /// The layers' `projects` a release names in its title or its GitHub repository
    /// ("Release 2.35.0 corresponding to NGC container 23.06" of
    /// triton-inference-server/server), each with the layers that list it.
    fn projects_of(&self, release: &Item) -> Vec<(String, Vec<usize>)> {
        let Some(automaton) = &self.projects else {
            return Vec::new();
        };
        let text = format!("{} {}", release.title, release.github_repository());
        let mut named: Vec<(String, Vec<usize>)> = Vec::new();
        for m in automaton.find_iter(&text) {
            let (name, layers) = &self.project_layers[m.pattern().as_usize()];
            if on_word_boundaries(&text, m.start(), m.end(), name)
                && !named.iter().any(|(n, _)| n == name)
            {
                named.push((name.clone(), layers.clone()));
            }
        }
        named
    }
}

/// A price by the hour: "$2.49/hr", "$1.99 per GPU-hour", "$3/hour".
static HOURLY_PRICE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"(?i)\$\s?\d[\d.,]*\s*(?:/|per\s+)(?:gpu[- ]?)?(?:hr|hour)s?\b")
        .expect("valid regex")
});
/// Words of renting and pricing.
static PRICE_WORD: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(?:rent|rents|rental|rentals|renting|rented|price|prices|priced|pricing|hourly)\b",
    )
    .expect("valid regex")
});
/// How many words of renting and pricing make an item about prices.
const PRICE_WORDS: usize = 3;

/// Whether `item` is about what GPUs cost: it quotes a price by the hour, or it speaks of
/// renting and pricing three times or more. GPU pricing and rental guides are full of this
/// field's words ("H100 vs A100 vs L40S: GPU Rental Guide": H100, HBM, FP8) and belong to
/// the buyer's field; on the 40 labelled days every item with such talk is irrelevant (30
/// of them) and no relevant item has it. [`crate::digest::eligible`] reads it, for the few
/// events that would otherwise be in the digest, not for every item of a listing.
pub fn talks_prices(item: &Item) -> bool {
    let text = bounded(&item.text, MAX_CLASSIFIED_BYTES);
    HOURLY_PRICE.is_match(&item.title)
        || HOURLY_PRICE.is_match(text)
        || PRICE_WORD.find_iter(&item.title).count() + PRICE_WORD.find_iter(text).count()
            >= PRICE_WORDS
}

/// Whether `phrase`, found at start..end of `text`, stands on word boundaries. A version or
/// plural may follow: "FlashAttention3", "CUDA12", "H100s".
fn on_word_boundaries(text: &str, start: usize, end: usize, phrase: &str) -> bool {
    let bytes = text.as_bytes();
    let phrase = phrase.as_bytes();
    let starts_alnum = phrase.first().is_some_and(u8::is_ascii_alphanumeric);
    let ends_alnum = phrase.last().is_some_and(u8::is_ascii_alphanumeric);
    let before_ok = !starts_alnum || start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
    let after_ok = !ends_alnum
        || match bytes.get(end..).unwrap_or_default() {
            [] => true,
            [next, rest @ ..] => {
                !next.is_ascii_alphanumeric()
                    || (next.is_ascii_digit() && phrase.last().is_some_and(u8::is_ascii_alphabetic))
                    || (*next == b's'
                        && phrase.last().is_some_and(u8::is_ascii_digit)
                        && !rest.first().is_some_and(u8::is_ascii_alphanumeric))
            }
        };
    before_ok && after_ok
}

/// At most this many layers per event. What an item is about fits in three layers: no
/// labelled event of the evaluation (274 layer sets by two annotators) has more, while a long
/// release note mentions every layer somewhere.
pub const MAX_LAYERS: usize = 3;

/// The layers whose margin (log-odds, or phrase points above the tagging mark) is at least
/// 0, the [`MAX_LAYERS`] with the largest margins when more pass, in configuration order.
/// A release's `home` layers come first at the cap: Triton's long notes score optimization,
/// codegen and backends above the frontend, and Triton is a frontend whatever else it touches.
fn strongest_layers<'a>(
    margins: impl Iterator<Item = (&'a String, f64)>,
    home: &[String],
) -> Vec<String> {
    let mut passing: Vec<(usize, &String, f64)> = margins
        .enumerate()
        .filter(|(_, (_, margin))| *margin >= -1e-9)
        .map(|(i, (name, margin))| (i, name, margin))
        .collect();
    // Home layers, then the largest margin first; a tie keeps configuration order, so the
    // choice is deterministic.
    passing.sort_by(|a, b| {
        home.contains(b.1)
            .cmp(&home.contains(a.1))
            .then(b.2.total_cmp(&a.2))
            .then(a.0.cmp(&b.0))
    });
    passing.truncate(MAX_LAYERS);
    passing.sort_by_key(|(i, _, _)| *i);
    passing
        .into_iter()
        .map(|(_, name, _)| name.clone())
        .collect()
}

/// One phrase may be listed under two layers; it is reported once.
fn sorted_distinct(mut words: Vec<String>) -> Vec<String> {
    words.sort();
    words.dedup();
    words
}

fn bounded(text: &str, max_bytes: usize) -> &str {
    &text[..text.floor_char_boundary(max_bytes)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Item, ItemKind};
    use crate::settings::RelevanceConfig;

    fn event(title: &str, text: &str) -> Event {
        Event {
            id: "e".into(),
            items: vec![Item {
                key: "k".into(),
                source: "s".into(),
                kind: ItemKind::Post,
                title: title.into(),
                url: String::new(),
                text: text.into(),
                published: chrono::DateTime::UNIX_EPOCH,
                release: None,
                arxiv_id: None,
                cited_arxiv: vec![],
                links: vec![],
            }],
        }
    }

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn classifier() -> Classifier {
        let layer = |name: &str, kw: &[&str], strong: &[&str], weak: &[&str]| LayerConfig {
            name: name.into(),
            keywords: words(kw),
            strong: words(strong),
            weak: words(weak),
            projects: match name {
                "frontend" => words(&["triton"]),
                "runtime" => words(&["vllm", "triton-inference-server"]),
                _ => vec![],
            },
        };
        Classifier::new(
            &[
                layer("frontend", &["tl.", "dsl"], &[], &[]),
                layer("optimization", &["ir", "fusion"], &["mlir"], &["layout"]),
                layer(
                    "runtime",
                    &["runtime"],
                    &["cuda graphs"],
                    &["latency", "scheduler"],
                ),
            ],
            &RelevanceConfig {
                field: words(&["ml systems"]),
                negative: words(&["robot"]),
                stack: words(&["vllm"]),
                learned: false,
            },
        )
    }

    #[test]
    fn keywords_match_on_word_boundaries_case_insensitively() {
        let c = classifier().classify(&event("Their new IR", "Kernel FUSION and more fusion."));
        assert_eq!(c.layers, vec!["optimization"]);
        assert_eq!(c.keywords, vec!["fusion", "ir"]);
        assert_eq!(c.title_keywords, vec!["ir"]);
    }

    #[test]
    fn one_stray_mention_in_the_text_does_not_tag() {
        let c = classifier().classify(&event("Ocean model", "Trained with a runtime of two days."));
        assert!(c.layers.is_empty());
        let c = classifier().classify(&event(
            "x",
            "Uses tl.atomic_add in a DSL; CUDA Graphs cut runtime.",
        ));
        assert_eq!(c.layers, vec!["frontend", "runtime"]);
    }

    #[test]
    fn a_version_or_plural_may_follow_a_phrase() {
        let c = classifier().classify(&event("x", "MLIR2 and runtimes, fusion"));
        assert_eq!(
            c.keywords,
            vec!["fusion", "mlir"],
            "not runtime+s after a letter"
        );
    }

    #[test]
    fn weights_decide_tagging_strong_tags_alone_weak_needs_company() {
        let c = classifier().classify(&event("x", "Lowered through MLIR."));
        assert_eq!(c.layers, vec!["optimization"], "one strong term tags");
        let c = classifier().classify(&event("Lower latency", "latency latency latency"));
        assert!(
            c.layers.is_empty(),
            "a weak word, even repeated and in the title"
        );
        let c = classifier().classify(&event("Scheduler latency", "scheduler latency"));
        assert!(
            c.layers.is_empty(),
            "weak words alone never tag, whatever their points"
        );
        let c = classifier().classify(&event("Scheduler latency", "in the runtime"));
        assert_eq!(
            c.layers,
            vec!["runtime"],
            "an ordinary term anchors the weak one"
        );
        let c = classifier().classify(&event("x", "fusion, then fusion, then fusion again"));
        assert_eq!(
            c.layers,
            vec!["optimization"],
            "an ordinary term said three times"
        );
        let c = classifier().classify(&event("x", "fusion and fusion"));
        assert!(
            c.layers.is_empty(),
            "an ordinary term said twice is not enough"
        );
    }

    fn release(title: &str, url: &str, text: &str) -> Event {
        let mut e = event(title, text);
        e.items[0].kind = ItemKind::Release;
        e.items[0].url = url.into();
        e.items[0].release = Some(crate::model::ReleaseLevel::Minor);
        e
    }

    #[test]
    fn a_release_of_a_layers_project_touches_it_whatever_its_notes_say() {
        let c = classifier();
        // Terse notes in the project's own words: no phrase of any layer.
        let notes = "Fix a crash when the model repository is empty. Bump the version.";
        let server = c.classify(&release(
            "Release 2.35.0 corresponding to NGC container 23.06",
            "https://github.com/triton-inference-server/server/releases/tag/v2.35.0",
            notes,
        ));
        // The longest name wins: Triton Inference Server is not the Triton language.
        assert_eq!(server.layers, vec!["runtime"]);
        assert_eq!(server.stack, vec!["triton-inference-server"]);
        assert_eq!(server.relevance.title_points, 2.0 * STACK_RELEASE_WEIGHT);
        let triton = c.classify(&release(
            "Triton 3.8.0",
            "https://github.com/triton-lang/triton/releases/tag/v3.8.0",
            notes,
        ));
        assert_eq!(triton.layers, vec!["frontend"]);
        // The title's stack name already made it on topic: counted once.
        let vllm = c.classify(&release(
            "vLLM v0.9.0",
            "https://github.com/vllm-project/vllm/releases/tag/v0.9.0",
            notes,
        ));
        assert_eq!(vllm.layers, vec!["runtime"]);
        assert_eq!(vllm.relevance.title_points, 2.0 * STACK_RELEASE_WEIGHT);
        // A post that names a project is not a release of it.
        let post = c.classify(&event("What we learned running vLLM", notes));
        assert!(post.layers.is_empty(), "{:?}", post.layers);
        assert_eq!(
            release("x", "https://github.com/o/r/releases/tag/v1", "")
                .primary()
                .github_repository(),
            "o/r"
        );
        let mut elsewhere = event("x", "");
        elsewhere.items[0].url = "https://example.com/o/r/releases/tag/v1".into();
        assert_eq!(elsewhere.primary().github_repository(), "");
    }

    #[test]
    fn a_gpu_rental_or_pricing_guide_is_about_prices_whatever_its_hardware_words() {
        // Texts written like the rental and pricing guides of the evaluation days (thirty
        // such items, all irrelevant) and like a hardware benchmark post, which is not.
        let guide = event(
            "H100 vs A100 vs L40S: GPU Rental Guide",
            "Choosing between H100, A100 and L40S comes down to memory, tensor core \
             generation and price. Renting an H100 costs more per hour, but FP8 tensor \
             cores finish the job sooner; the rental price gap narrowed this year.",
        );
        let priced = event(
            "NVIDIA H100 vs H200 vs B200: GPU Benchmarks and Guide",
            "H200 on-demand runs at $3.49/hr against $2.99 per GPU-hour for the H100.",
        );
        assert!(talks_prices(guide.primary()));
        assert!(talks_prices(priced.primary()));
        // A benchmark post may name a price once; a release with "pricing" in passing too.
        let benchmark = event(
            "Testing AMD's Giant MI300X",
            "MI300X has 192 GB of HBM3 and 5.3 TB/s of memory bandwidth. At its price it \
             undercuts the H100 on memory per dollar, and our tests measure cache latency.",
        );
        assert!(!talks_prices(benchmark.primary()));
        let text = "Hourly snapshots of the profiler. Prices of nothing here.";
        assert!(!talks_prices(event("v1.2.0", text).primary()));
    }

    #[test]
    fn an_event_keeps_at_most_its_three_strongest_layers_in_configuration_order() {
        let names = words(&[
            "frontend",
            "optimization",
            "kernel_codegen",
            "runtime",
            "benchmark",
        ]);
        let margins = [0.5, 3.0, 0.0, 2.0, -0.1];
        let layers = strongest_layers(names.iter().zip(margins), &[]);
        // Four pass (benchmark's margin is below 0); kernel_codegen, the weakest, goes.
        assert_eq!(layers, vec!["frontend", "optimization", "runtime"]);
        // A home layer stays at the cap however weak: frontend goes instead.
        let home = words(&["kernel_codegen"]);
        let layers = strongest_layers(names.iter().zip(margins), &home);
        assert_eq!(layers, vec!["optimization", "kernel_codegen", "runtime"]);
        let tied = strongest_layers(names.iter().zip([1.0; 5]), &[]);
        assert_eq!(
            tied,
            vec!["frontend", "optimization", "kernel_codegen"],
            "ties: order"
        );
    }

    #[test]
    fn relevance_counts_titles_double_long_texts_less_and_neighbours_against() {
        let short = classifier().classify(&event("MLIR fusion", "An ML systems paper."));
        let r = &short.relevance;
        assert_eq!((r.title_points, r.text_points), (6.0, 1.0));
        assert!((r.value() - (1.0 - (-7.0f64 / EVIDENCE_SCALE).exp())).abs() < 1e-12);
        let long_text = format!("MLIR fusion. {}", "word ".repeat(998));
        let long = classifier().classify(&event("x", &long_text));
        // 1000 words: the text counts by sqrt(250 / 1000) = 0.5.
        assert_eq!(long.relevance.length_factor, 0.5);
        assert_eq!(long.relevance.text_points, 1.5);
        let robot = classifier().classify(&event("Robot arms", "MLIR fusion."));
        assert_eq!(robot.negatives, vec!["robot"]);
        assert_eq!(robot.relevance.evidence(), 3.0 - 4.0);
        assert_eq!(robot.relevance.value(), 0.0);
    }
}
