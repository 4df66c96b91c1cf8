//! The learned part of the relevance and layer model: corrections to the phrase model,
//! learned from the labelled days by regularised logistic regression. Pure and
//! deterministic.
//!
//! The phrase lists (`classify`) and the score (`score`) stay the prior. For each event the
//! phrase model gives a score `s` and, per layer, anchored points `p`. The learned model adds
//! a correction made of word and word-pair features of the titles and texts:
//!
//! - relevance: log-odds = (s - min_score) / [`SCORE_SCALE`] + g × c, and the score gains
//!   a `learned` component of [`SCORE_SCALE`] × g × c points: the event is in the digest
//!   when the corrected score reaches `digest.min_score`, which is where the log-odds cross
//!   0, so training fits the very decision the digest makes. The gain g
//!   ([`relevance_gain`]) is 1 at the threshold and fades to 0 [`GAIN_POINTS`] away, so the
//!   correction moves borderline events, not the order of clearly relevant ones;
//! - layer L: log-odds = p - [`TAG_AT`] + c_L, and L is tagged when that is >= 0.
//!
//! c = bias + Σ weight × x over the event's features; x is 1 for a short text and
//! sqrt([`REFERENCE_FEATURES`] / n) for one with n > [`REFERENCE_FEATURES`] features, so a
//! long text does not collect weight by being long. With every weight at zero the model is
//! the phrase model exactly, so regularisation pulls towards the prior, never towards
//! nothing. c is clamped to ±[`MAX_CORRECTION`].
//!
//! Training ([`fit`]) minimises the class-weighted mean log loss plus an elastic-net penalty
//! by accelerated proximal gradient (FISTA), a fixed number of steps from zero: the same
//! examples give the same weights. `kdigest eval --fit` writes the weights to
//! `crates/core/src/learned_model.tsv`, which is reviewed like code and built into the binary.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, LazyLock};

use crate::model::Event;

/// Phrase points at which a layer is tagged (the anchor of the layer heads' log-odds). Here,
/// below the phrase model (`classify`) that tags with it, so the two do not import each other.
pub const TAG_AT: f64 = 2.0;

/// Score points per unit of log-odds.
pub const SCORE_SCALE: f64 = 5.0;
/// Score distance from the threshold at which the relevance correction fades out.
pub const GAIN_POINTS: f64 = 25.0;
/// The most a correction moves an event's log-odds either way.
pub const MAX_CORRECTION: f64 = 3.0;
/// Texts with up to this many features count each in full.
pub const REFERENCE_FEATURES: f64 = 100.0;
/// Only the start of a text is read: what an item is about is said early.
const TEXT_WORDS: usize = 200;
/// Name of the relevance head in the weights file.
pub const RELEVANCE: &str = "relevance";

/// Words too common to mean anything alone; they still separate word pairs.
fn is_stop_word(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "by"
            | "can"
            | "for"
            | "from"
            | "has"
            | "have"
            | "in"
            | "is"
            | "it"
            | "its"
            | "of"
            | "on"
            | "or"
            | "our"
            | "that"
            | "the"
            | "their"
            | "this"
            | "to"
            | "we"
            | "which"
            | "with"
    )
}

/// The shipped weights, trained by `kdigest eval --fit` on tests/fixtures/eval.
const BUILTIN: &str = include_str!("learned_model.tsv");

/// The labelled days the shipped weights were fitted on, from the header `--fit` writes
/// ("# Fitted on 12 labelled days, 1659 events: 2024-09-17-jax-rocm, …."). Empty when the
/// header does not say.
pub fn fitted_days() -> Vec<&'static str> {
    fitted_days_of(BUILTIN)
}

fn fitted_days_of(tsv: &str) -> Vec<&str> {
    tsv.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix("# Fitted on "))
        .and_then(|l| l.split_once(": "))
        .map(|(_, days)| {
            days.trim_end_matches('.')
                .split(", ")
                .filter(|d| !d.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

static BUILTIN_MODEL: LazyLock<Option<Arc<Learned>>> = LazyLock::new(|| {
    let model = Learned::parse(BUILTIN).expect("crates/core/src/learned_model.tsv parses");
    (!model.is_empty()).then(|| Arc::new(model))
});

/// One logistic head: a bias and sparse feature weights.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Head {
    pub bias: f64,
    pub weights: HashMap<String, f64, FnvBuild>,
}

/// A correction and the features that moved it most.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Correction {
    /// In log-odds, clamped to ±MAX_CORRECTION.
    pub value: f64,
    /// The largest contributions (feature, weight × x), largest magnitude first.
    pub top: Vec<(String, f64)>,
}

impl Head {
    fn correct(&self, features: &Features) -> Correction {
        let parts: Vec<(&str, f64)> = features
            .names
            .iter()
            .filter_map(|f| self.weights.get(f).map(|w| (f.as_str(), w * features.x)))
            .collect();
        Head::correction(self.bias, parts)
    }

    /// The bias plus the contributions (in feature-name order), clamped, with the largest.
    fn correction(bias: f64, mut parts: Vec<(&str, f64)>) -> Correction {
        let sum: f64 = bias + parts.iter().map(|(_, c)| c).sum::<f64>();
        parts.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then_with(|| a.0.cmp(b.0)));
        Correction {
            value: sum.clamp(-MAX_CORRECTION, MAX_CORRECTION),
            top: parts
                .into_iter()
                .take(5)
                .map(|(f, c)| (f.to_string(), c))
                .collect(),
        }
    }
}

/// The learned heads: relevance, and one per layer it was trained on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Learned {
    pub relevance: Head,
    pub layers: BTreeMap<String, Head>,
    /// Every feature some head weighs, by its FNV hash (built by [`Learned::indexed`]).
    known: HashMap<u64, Known, BuildHasherDefault<Identity>>,
}

/// A feature some head weighs, and its weight in each (head 0 is relevance, then the
/// layers in name order).
#[derive(Debug, Clone, PartialEq)]
struct Known {
    /// Rank of the name among all known names: hits sort by it, cheaply and in name order.
    id: u32,
    name: String,
    weights: Vec<(usize, f64)>,
}

/// The learned corrections of one event: relevance (with the features that moved it) and,
/// in log-odds, each layer the model has a head for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Corrections<'a> {
    pub relevance: Correction,
    pub layers: Vec<(&'a str, f64)>,
}

/// An event's features: distinct names, and the value each present feature has.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    pub names: Vec<String>,
    pub x: f64,
}

impl Learned {
    /// The weights built into the binary; None when the file holds none.
    pub fn builtin() -> Option<Arc<Learned>> {
        BUILTIN_MODEL.clone()
    }

    /// The heads, with the table of the features they weigh built for [`Learned::correct`].
    pub fn indexed(mut self) -> Learned {
        let mut known: HashMap<u64, Known, BuildHasherDefault<Identity>> = HashMap::default();
        let heads = std::iter::once(&self.relevance).chain(self.layers.values());
        for (i, head) in heads.enumerate() {
            let mut weights: Vec<(&String, &f64)> = head.weights.iter().collect();
            weights.sort_by(|a, b| a.0.cmp(b.0));
            for (name, w) in weights {
                known
                    .entry(fnv(name))
                    .or_insert_with(|| Known {
                        id: 0,
                        name: name.clone(),
                        weights: Vec::new(),
                    })
                    .weights
                    .push((i, *w));
            }
        }
        let mut names: Vec<(String, u64)> =
            known.iter().map(|(h, k)| (k.name.clone(), *h)).collect();
        names.sort();
        for (id, (_, h)) in names.iter().enumerate() {
            if let Some(k) = known.get_mut(h) {
                k.id = id as u32;
            }
        }
        self.known = known;
        self
    }

    /// The corrections of every head for one event, reading the event's n-grams once as
    /// hashes: what [`features`] and [`Head`] would give, without a string per n-gram.
    pub fn correct(&self, event: &Event) -> Corrections<'_> {
        let mut count = 0usize;
        let mut hits: Vec<&Known> = Vec::new();
        let mut visit = |h: u64, prefix: &str, previous: Option<&str>, word: &str| {
            count += 1;
            // The hash finds the candidate; the spelling decides.
            if let Some(k) = self.known.get(&h)
                && spells(&k.name, prefix, previous, word)
            {
                hits.push(k);
            }
        };
        for item in &event.items {
            each_ngram_hash(&item.title, usize::MAX, "t:", &mut visit);
            each_ngram_hash(&item.text, TEXT_WORDS, "", &mut visit);
        }
        let kind = kind_feature(event);
        if let Some(k) = self.known.get(&fnv(&kind))
            && k.name == kind
        {
            hits.push(k);
        }
        hits.sort_unstable_by_key(|k| k.id);
        hits.dedup_by_key(|k| k.id);
        let x = feature_value(count);
        let mut parts: Vec<Vec<(&str, f64)>> = vec![Vec::new(); 1 + self.layers.len()];
        for k in hits {
            for (head, w) in &k.weights {
                parts[*head].push((k.name.as_str(), w * x));
            }
        }
        let mut parts = parts.into_iter();
        let relevance = Head::correction(self.relevance.bias, parts.next().unwrap_or_default());
        // Only the relevance correction's features are shown (explain); the layers need
        // their values alone.
        let layers = self
            .layers
            .iter()
            .zip(parts)
            .map(|((name, head), parts)| {
                let sum = head.bias + parts.iter().map(|(_, c)| c).sum::<f64>();
                (name.as_str(), sum.clamp(-MAX_CORRECTION, MAX_CORRECTION))
            })
            .collect();
        Corrections { relevance, layers }
    }

    pub fn is_empty(&self) -> bool {
        self.relevance == Head::default() && self.layers.values().all(|h| *h == Head::default())
    }

    pub fn relevance(&self, features: &Features) -> Correction {
        self.relevance.correct(features)
    }

    /// None for a layer the model was not trained on: the phrase rule alone decides it.
    pub fn layer(&self, name: &str, features: &Features) -> Option<Correction> {
        self.layers.get(name).map(|h| h.correct(features))
    }

    /// Reads the tab-separated weights file: `head<TAB>feature<TAB>weight` lines, the feature
    /// `(bias)` for the bias; `#` starts a comment line.
    pub fn parse(text: &str) -> Result<Learned, String> {
        let mut model = Learned::default();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split('\t').collect();
            let [head, feature, weight] = fields[..] else {
                return Err(format!(
                    "line {}: expected head, feature and weight separated by tabs",
                    n + 1
                ));
            };
            let weight: f64 = weight
                .parse()
                .ok()
                .filter(|w: &f64| w.is_finite())
                .ok_or_else(|| format!("line {}: weight {weight:?} is not a number", n + 1))?;
            let head = if head == RELEVANCE {
                &mut model.relevance
            } else {
                model.layers.entry(head.to_string()).or_default()
            };
            if feature == BIAS {
                head.bias = weight;
            } else {
                head.weights.insert(feature.to_string(), weight);
            }
        }
        Ok(model.indexed())
    }

    /// The weights file, heads in order, features by weight (largest first) then name.
    pub fn to_tsv(&self, header: &str) -> String {
        let mut out = String::new();
        for line in header.lines() {
            let _ = writeln!(out, "# {line}");
        }
        let heads = std::iter::once((RELEVANCE, &self.relevance))
            .chain(self.layers.iter().map(|(n, h)| (n.as_str(), h)));
        for (name, head) in heads {
            let _ = writeln!(out, "{name}\t{BIAS}\t{:.4}", head.bias);
            let mut weights: Vec<(&String, &f64)> = head.weights.iter().collect();
            weights.sort_by(|a, b| b.1.total_cmp(a.1).then_with(|| a.0.cmp(b.0)));
            for (feature, weight) in weights {
                let _ = writeln!(out, "{name}\t{feature}\t{weight:.4}");
            }
        }
        out
    }
}

const BIAS: &str = "(bias)";

/// Calls `f` with each word of `text` that makes features: lower-case, not a stop word, not
/// a bare number; only the first `limit` words are read. One buffer is reused.
fn each_word(text: &str, limit: usize, f: &mut impl FnMut(&str)) {
    let mut word = String::new();
    for w in alphanumeric_runs(text).take(limit) {
        if w.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        word.clear();
        if w.is_ascii() {
            word.push_str(w);
            word.make_ascii_lowercase();
        } else {
            word.extend(w.chars().flat_map(char::to_lowercase));
        }
        if is_stop_word(&word) {
            continue;
        }
        f(&word);
    }
}

/// The runs of letters and digits of `text`: what `split(|c| !c.is_alphanumeric())` gives
/// without its empty pieces, decoding a character only where a byte is not ASCII.
fn alphanumeric_runs(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        let mut start = None;
        while i < bytes.len() {
            let (word, len) = match bytes[i] {
                b if b < 0x80 => (b.is_ascii_alphanumeric(), 1),
                _ => {
                    let c = text[i..].chars().next().unwrap_or(' ');
                    (c.is_alphanumeric(), c.len_utf8())
                }
            };
            match (word, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    i += len;
                    return Some(&text[s..i - len]);
                }
                _ => {}
            }
            i += len;
        }
        start.map(|s| &text[s..])
    })
}

/// Calls `f` with each word of `text` and each pair of neighbouring words (see
/// [`each_word`]), `prefix`ed: the features training reads.
fn each_ngram(text: &str, limit: usize, prefix: &str, f: &mut impl FnMut(&str)) {
    let (mut previous, mut gram) = (None::<String>, String::new());
    each_word(text, limit, &mut |word| {
        gram.clear();
        gram.push_str(prefix);
        gram.push_str(word);
        f(&gram);
        if let Some(p) = &previous {
            gram.clear();
            gram.push_str(prefix);
            gram.push_str(p);
            gram.push(' ');
            gram.push_str(word);
            f(&gram);
        }
        let p = previous.get_or_insert_with(String::new);
        p.clear();
        p.push_str(word);
    });
}

/// The same n-grams as [`each_ngram`], as their FNV hashes, built without writing a pair
/// out: a pair's hash continues its first word's. `f` gets the hash, the prefix, the
/// previous word (for a pair) and the word, to check the spelling only when the hash is a
/// known one.
fn each_ngram_hash(
    text: &str,
    limit: usize,
    prefix: &str,
    f: &mut impl FnMut(u64, &str, Option<&str>, &str),
) {
    let start = fnv_extend(FNV_OFFSET, prefix.as_bytes());
    let mut previous: Option<(u64, String)> = None;
    each_word(text, limit, &mut |word| {
        let single = fnv_extend(start, word.as_bytes());
        f(single, prefix, None, word);
        if let Some((h, p)) = &previous {
            let pair = fnv_extend(fnv_extend(*h, b" "), word.as_bytes());
            f(pair, prefix, Some(p), word);
        }
        let (h, p) = previous.get_or_insert_with(|| (0, String::new()));
        *h = single;
        p.clear();
        p.push_str(word);
    });
}

/// Whether `name` spells `prefix` + (`previous` + " ")? + `word`.
fn spells(name: &str, prefix: &str, previous: Option<&str>, word: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else {
        return false;
    };
    let rest = match previous {
        Some(p) => match rest.strip_prefix(p).and_then(|r| r.strip_prefix(' ')) {
            Some(r) => r,
            None => return false,
        },
        None => rest,
    };
    rest == word
}

/// Every n-gram of an event: title ones `t:`-prefixed, text ones from the first
/// [`TEXT_WORDS`] words of each item.
fn each_event_ngram(event: &Event, f: &mut impl FnMut(&str)) {
    for item in &event.items {
        each_ngram(&item.title, usize::MAX, "t:", f);
        each_ngram(&item.text, TEXT_WORDS, "", f);
    }
}

fn kind_feature(event: &Event) -> String {
    format!("kind:{:?}", event.primary().kind).to_lowercase()
}

/// The value of each present feature of an event with `n` n-grams (repeats counted: it
/// measures length, and counting needs no set).
fn feature_value(n: usize) -> f64 {
    (REFERENCE_FEATURES / (n as f64).max(REFERENCE_FEATURES)).sqrt()
}

/// The features of an event: title n-grams (`t:`), text n-grams of the first
/// [`TEXT_WORDS`] words of each item, and the primary item's kind (`kind:paper`).
pub fn features(event: &Event) -> Features {
    let mut names = BTreeSet::new();
    let mut count = 0;
    each_event_ngram(event, &mut |g: &str| {
        count += 1;
        if !names.contains(g) {
            names.insert(g.to_string());
        }
    });
    let x = feature_value(count);
    names.insert(kind_feature(event));
    Features {
        names: names.into_iter().collect(),
        x,
    }
}

/// FNV-1a, for the n-gram hashes of [`Learned::correct`]: n-grams are short, and
/// the table's keys are the model's own, so a crafted collision costs a comparison, no more.
#[derive(Default)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let h = if self.0 == 0 { FNV_OFFSET } else { self.0 };
        self.0 = fnv_extend(h, bytes);
    }
}

type FnvBuild = BuildHasherDefault<Fnv>;

/// The keys of [`Learned::known`] are FNV hashes already.
#[derive(Default)]
pub struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv_extend(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn fnv(s: &str) -> u64 {
    fnv_extend(FNV_OFFSET, s.as_bytes())
}

/// The relevance prior in log-odds, from the phrase model's score and the digest's
/// threshold.
pub fn relevance_prior(score: f64, min_score: f64) -> f64 {
    ((score - min_score) / SCORE_SCALE).clamp(-4.0, 4.0)
}

/// How much of the relevance correction applies to an event the phrase model scored
/// `score`: all of it at the threshold, less with distance, none [`GAIN_POINTS`] away. The
/// correction decides what is in the digest; it does not reorder what clearly is (a major
/// release stays ahead of a minor one).
pub fn relevance_gain(score: f64, min_score: f64) -> f64 {
    (1.0 - (score - min_score).abs() / GAIN_POINTS).max(0.0)
}

/// A layer's prior in log-odds, from its anchored phrase points.
pub fn layer_prior(points: f64) -> f64 {
    (points - TAG_AT).clamp(-4.0, 4.0)
}

/// One labelled event, as training reads it.
#[derive(Debug, Clone)]
pub struct Example {
    pub features: Features,
    /// The score without the learned component, and the threshold it is held to.
    pub score: f64,
    pub min_score: f64,
    /// Anchored phrase points per layer name (layers without points are absent).
    pub layer_points: BTreeMap<String, f64>,
    /// None for an event an editor could run or leave out: it trains no relevance.
    pub relevant: Option<bool>,
    /// The labelled layers of a relevant event.
    pub layers: BTreeSet<String>,
}

/// Training settings; [`FitParams::default`] is what `kdigest eval --fit` and the
/// cross-validation use.
#[derive(Debug, Clone, Copy)]
pub struct FitParams {
    pub l2: f64,
    pub l1: f64,
    pub steps: usize,
    /// The share of the total weight the relevant events carry (the rest: irrelevant ones).
    pub positive_share: f64,
    /// The same for the layer heads: events with the layer against those without.
    pub layer_positive_share: f64,
}

impl Default for FitParams {
    fn default() -> FitParams {
        // Chosen by the cross-validated figures of `kdigest eval` (docs/scoring.md).
        FitParams {
            l2: 0.01,
            l1: 0.002,
            steps: 300,
            positive_share: 0.3,
            layer_positive_share: 0.6,
        }
    }
}

/// Trains the relevance head on events labelled relevant or irrelevant, and one head per
/// layer on the relevant events.
pub fn fit(examples: &[&Example], layer_names: &[String], params: FitParams) -> Learned {
    let relevance_rows: Vec<(&Example, bool, f64, f64)> = examples
        .iter()
        .copied()
        .filter_map(|e| {
            e.relevant.map(|r| {
                (
                    e,
                    r,
                    relevance_prior(e.score, e.min_score),
                    relevance_gain(e.score, e.min_score),
                )
            })
        })
        .collect();
    let relevance = train(&relevance_rows, params);
    let relevant: Vec<&Example> = examples
        .iter()
        .copied()
        .filter(|e| e.relevant == Some(true))
        .collect();
    let layers = layer_names
        .iter()
        .map(|name| {
            let rows: Vec<(&Example, bool, f64, f64)> = relevant
                .iter()
                .map(|e| {
                    let points = e.layer_points.get(name).copied().unwrap_or(0.0);
                    (*e, e.layers.contains(name), layer_prior(points), 1.0)
                })
                .collect();
            (
                name.clone(),
                train(
                    &rows,
                    FitParams {
                        positive_share: params.layer_positive_share,
                        ..params
                    },
                ),
            )
        })
        .collect();
    Learned {
        relevance,
        layers,
        ..Learned::default()
    }
    .indexed()
}

/// Logistic regression with a fixed offset (the prior) and a gain on the learned part per
/// row (log-odds = prior + gain × (bias + Σ w x)), elastic net on the feature weights, the
/// bias free. Features are indexed in name order so the sums run in one order.
fn train(rows: &[(&Example, bool, f64, f64)], params: FitParams) -> Head {
    let positives = rows.iter().filter(|r| r.1).count();
    let negatives = rows.len() - positives;
    if positives == 0 || negatives == 0 {
        return Head::default();
    }
    // A feature seen in one training event only is that event's name, not the field's.
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (e, _, _, _) in rows {
        for f in &e.features.names {
            *seen.entry(f.as_str()).or_default() += 1;
        }
    }
    let vocabulary: Vec<&str> = seen
        .into_iter()
        .filter(|(_, n)| *n >= 2)
        .map(|(f, _)| f)
        .collect();
    let index: HashMap<&str, usize> = vocabulary
        .iter()
        .enumerate()
        .map(|(i, f)| (*f, i))
        .collect();
    let sparse: Vec<Vec<usize>> = rows
        .iter()
        .map(|(e, _, _, _)| {
            e.features
                .names
                .iter()
                .filter_map(|f| index.get(f.as_str()).copied())
                .collect()
        })
        .collect();
    let weight_of = |positive: bool| {
        if positive {
            params.positive_share / positives as f64
        } else {
            (1.0 - params.positive_share) / negatives as f64
        }
    };
    // Step size from the largest squared row norm (x² per feature, plus the bias).
    let max_norm = rows
        .iter()
        .zip(&sparse)
        .map(|((e, _, _, _), f)| f.len() as f64 * e.features.x * e.features.x + 1.0)
        .fold(1.0, f64::max);
    let max_weight = weight_of(true).max(weight_of(false));
    let step = 1.0 / (0.25 * max_norm * max_weight * rows.len() as f64 + params.l2);

    let dims = vocabulary.len() + 1; // the last is the bias
    let mut w = vec![0.0; dims];
    let mut previous = w.clone();
    let mut y = w.clone();
    let mut t = 1.0_f64;
    let mut grad = vec![0.0; dims];
    for _ in 0..params.steps {
        grad.iter_mut().for_each(|g| *g = 0.0);
        for ((e, positive, prior, gain), f) in rows.iter().zip(&sparse) {
            let x = e.features.x;
            let z = prior + gain * (y[dims - 1] + f.iter().map(|&j| y[j]).sum::<f64>() * x);
            let p = 1.0 / (1.0 + (-z).exp());
            let target = if *positive { 1.0 } else { 0.0 };
            let g = (p - target) * weight_of(*positive) * gain;
            for &j in f {
                grad[j] += g * x;
            }
            grad[dims - 1] += g;
        }
        for j in 0..dims {
            let mut v = y[j] - step * grad[j];
            if j + 1 < dims {
                // Proximal step: L2 shrink, then L1 soft threshold.
                v /= 1.0 + step * params.l2;
                let cut = step * params.l1;
                v = v.signum() * (v.abs() - cut).max(0.0);
            }
            previous[j] = w[j];
            w[j] = v;
        }
        let next_t = (1.0 + (1.0 + 4.0 * t * t).sqrt()) / 2.0;
        let momentum = (t - 1.0) / next_t;
        for j in 0..dims {
            y[j] = w[j] + momentum * (w[j] - previous[j]);
        }
        t = next_t;
    }
    Head {
        bias: w[dims - 1],
        weights: vocabulary
            .iter()
            .zip(&w)
            .filter(|(_, v)| v.abs() >= 0.005)
            .map(|(f, v)| (f.to_string(), *v))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str) -> crate::model::Item {
        crate::model::Item {
            key: "k".into(),
            source: "s".into(),
            kind: crate::model::ItemKind::Post,
            title: String::new(),
            url: String::new(),
            text: text.into(),
            published: chrono::DateTime::UNIX_EPOCH,
            release: None,
            arxiv_id: None,
            cited_arxiv: vec![],
            links: vec![],
        }
    }

    fn example(text: &str, score: f64, relevant: bool) -> Example {
        let event = crate::model::Event {
            id: "e".into(),
            items: vec![item(text)],
        };
        Example {
            features: features(&event),
            score,
            min_score: 60.0,
            layer_points: BTreeMap::new(),
            relevant: Some(relevant),
            layers: BTreeSet::new(),
        }
    }

    #[test]
    fn the_fitted_days_are_read_from_the_header() {
        let tsv = "# kdigest learned model\n# Fitted on 2 labelled days, 10 events: 2024-01-01-a, 2024-01-02-b.\n# Settings\nrelevance\tx\t1\n";
        assert_eq!(fitted_days_of(tsv), vec!["2024-01-01-a", "2024-01-02-b"]);
        assert!(fitted_days_of("relevance\tx\t1\n").is_empty());
        // The shipped file names its days.
        assert!(fitted_days().contains(&"2024-09-17-jax-rocm"));
    }

    #[test]
    fn features_are_words_and_pairs_without_stop_words_numbers_folded() {
        let e = example("The NVSHMEM library on 8 GPUs", 0.0, true);
        assert_eq!(
            e.features.names,
            vec![
                "gpus",
                "kind:post",
                "library",
                "library gpus",
                "nvshmem",
                "nvshmem library"
            ]
        );
        assert_eq!(e.features.x, 1.0);
    }

    #[test]
    fn training_learns_a_word_the_phrases_lack_and_is_deterministic() {
        // "nvshmem" marks relevance the phrase score (55, under the threshold) misses;
        // "billing" marks irrelevance where the score (65) says relevant.
        let mut rows = Vec::new();
        for i in 0..6 {
            rows.push(example(
                &format!("nvshmem collectives variant{i}"),
                55.0,
                true,
            ));
            rows.push(example(
                &format!("per minute billing offer{i}"),
                65.0,
                false,
            ));
            rows.push(example(
                &format!("tensor core kernels paper{i}"),
                75.0,
                true,
            ));
            rows.push(example(&format!("protein folding study{i}"), 30.0, false));
        }
        let params = FitParams::default();
        let rows: Vec<&Example> = rows.iter().collect();
        let model = fit(&rows, &[], params);
        assert_eq!(
            model,
            fit(&rows, &[], params),
            "same examples, same weights"
        );
        let logit = |e: &Example| {
            relevance_prior(e.score, e.min_score) + model.relevance(&e.features).value
        };
        assert!(logit(&example("nvshmem collectives new", 55.0, true)) > 0.0);
        assert!(logit(&example("per minute billing new", 65.0, false)) < 0.0);
        let top = model
            .relevance(&example("nvshmem collectives", 55.0, true).features)
            .top;
        assert!(
            top.iter()
                .any(|(f, c)| f.starts_with("nvshmem") && *c > 0.0),
            "{top:?}"
        );
    }

    #[test]
    fn the_weights_file_round_trips_and_bad_lines_are_named() {
        let mut model = Learned::default();
        model.relevance.bias = -0.5;
        model.relevance.weights.insert("t:nvshmem".into(), 0.75);
        model
            .layers
            .entry("runtime".into())
            .or_default()
            .weights
            .insert("collectives".into(), 1.25);
        let model = model.indexed();
        let text = model.to_tsv("trained on test data");
        assert!(text.starts_with("# trained on test data\n"));
        assert_eq!(Learned::parse(&text).unwrap(), model);
        let err = Learned::parse("relevance\tx\tmany").unwrap_err();
        assert!(
            err.contains("line 1") && err.contains("not a number"),
            "{err}"
        );
        assert!(
            Learned::parse("relevance x 1")
                .unwrap_err()
                .contains("tabs")
        );
    }

    #[test]
    fn the_fast_path_gives_what_training_features_give() {
        let mut model = Learned::default();
        for (f, w) in [
            ("t:nvshmem", 0.5),
            ("collectives", 1.0),
            ("gpu initiated", 0.25),
            ("kind:post", -0.5),
            ("absent", 2.0),
        ] {
            model.relevance.weights.insert(f.into(), w);
        }
        model.relevance.bias = 0.125;
        let runtime = model.layers.entry("runtime".into()).or_default();
        runtime.weights.insert("collectives".into(), 0.75);
        runtime.weights.insert("nvshmem".into(), 0.5);
        let model = model.indexed();
        let mut one = item("GPU-initiated collectives: 8 GPUs run the collectives in NVSHMEM");
        one.title = "NVSHMEM 3.0".into();
        let event = crate::model::Event {
            id: "e".into(),
            items: vec![one],
        };
        let fast = model.correct(&event);
        let features = features(&event);
        assert_eq!(fast.relevance, model.relevance(&features));
        assert_eq!(
            fast.layers,
            vec![("runtime", model.layer("runtime", &features).unwrap().value)]
        );
        let names: Vec<&str> = fast.relevance.top.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            names,
            vec!["collectives", "kind:post", "t:nvshmem", "gpu initiated"]
        );
    }

    #[test]
    fn words_split_like_the_standard_library() {
        for text in [
            "",
            "  ",
            "GPU-initiated, 2^26 ×3 naïve Straße—café 中文 x",
            "a",
            "tail",
            "—lead",
        ] {
            let expected: Vec<&str> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            assert_eq!(
                alphanumeric_runs(text).collect::<Vec<_>>(),
                expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn an_empty_model_changes_nothing() {
        let model = Learned::default();
        let e = example("anything at all", 50.0, true);
        assert_eq!(model.relevance(&e.features).value, 0.0);
        assert!(model.layer("runtime", &e.features).is_none());
        assert!(model.is_empty());
    }
}
