//! What a reported figure measures, said in the reader's language: "Cold JIT compilation is
//! 2.4x faster" -> 编译速度达到此前的 2.4 倍 / "compile speed 2.4x higher". Pure.
//!
//! The overview and a zh-CN headline carry no quoted English: a figure goes there with a
//! gloss from the locale table (`metric_*`, `fact_*`), read off the words around it in the
//! source. A figure whose measure is not recognised is left to the event's body.

use std::sync::LazyLock;

use regex::Regex;

use crate::locale::Locale;

/// What a figure measures; the locale key is `metric_<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    TokensPerSecond,
    Compute,
    Bandwidth,
    Recompilations,
    CompileSpeed,
    CompileTime,
    Latency,
    Throughput,
    Memory,
    PassRate,
    Overhead,
    /// Energy used: "28.67% energy reduction". Not efficiency ("1.2x more power
    /// efficient"), which moves the other way.
    Energy,
    /// "geomean speedup of 1.18x": a mean over a suite's models, not one case.
    GeomeanSpeed,
    Speed,
}

impl Metric {
    fn key(self) -> &'static str {
        match self {
            Metric::TokensPerSecond => "metric_tokens_per_second",
            Metric::Compute => "metric_compute",
            Metric::Bandwidth => "metric_bandwidth",
            Metric::Recompilations => "metric_recompilations",
            Metric::CompileSpeed => "metric_compile_speed",
            Metric::CompileTime => "metric_compile_time",
            Metric::Latency => "metric_latency",
            Metric::Throughput => "metric_throughput",
            Metric::Memory => "metric_memory",
            Metric::PassRate => "metric_pass_rate",
            Metric::Overhead => "metric_overhead",
            Metric::Energy => "metric_energy",
            Metric::GeomeanSpeed => "metric_geomean_speed",
            Metric::Speed => "metric_speed",
        }
    }
}

/// Which way the figure moves the measure: a change up or down, a level reached, or a
/// gap left to a named system ("to within 8% of FlashAttention-3": about 92% of it, not 8%).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
    Level,
    Within,
}

/// One figure with what it measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub metric: Metric,
    pub direction: Direction,
    /// The figure as the source writes it ("2.4x", "40%", "1,530TFLOPS").
    pub figure: String,
    /// "up to 3.1x": the figure is a best case.
    pub at_most: bool,
    /// What the figure is measured against: a level given as a share of a named system's
    /// ("91% of cuBLAS throughput"), or a multiple of one ("1.42x the throughput of vLLM",
    /// "1.9x faster than FlashAttention-3").
    pub of: Option<Against>,
    /// The named suite the figure was measured on ("on the HuggingFace suite").
    pub on: Option<String>,
}

/// The base a figure is compared with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Against {
    /// A named system ("vLLM", "cuBLAS").
    Named(String),
    /// Something the source names in words a gloss cannot carry ("than the fused attention
    /// in cuDNN"): not the previous version, so not "此前".
    Baseline,
}

/// Cues in the words around a figure, first match wins: specific measures before general.
static CUES: LazyLock<Vec<(Regex, Metric)>> = LazyLock::new(|| {
    [
        (
            r"tokens?/s|tokens? per second|tok/s",
            Metric::TokensPerSecond,
        ),
        (r"[tp]flops", Metric::Compute),
        (r"[tg]b/s|bandwidth", Metric::Bandwidth),
        (r"recompil", Metric::Recompilations),
        (
            r"compil\w*.*\b(faster|speedup|speeds? up)\b|\b(faster|speedup)\b.*compil",
            Metric::CompileSpeed,
        ),
        (r"compil|build time", Metric::CompileTime),
        (r"latency|tpot|ttft|\bp9\d\b|time per", Metric::Latency),
        (r"throughput", Metric::Throughput),
        (r"memory|\bhbm\b|vram|footprint", Metric::Memory),
        // Not "accuracy": in this field it is a model's accuracy kept under quantization
        // ("recovering 98.5% of accuracy"), not a share of tasks passed. Nor "incorrect":
        // "31% of incorrect submissions" is a share of the failures.
        (
            r"\bcorrect|\bpass(?:es|ed)?\b|pass rate|success|solve",
            Metric::PassRate,
        ),
        (r"overhead", Metric::Overhead),
        (
            r"energy (?:consumption|use|usage|reduction|saving)|(?:reduction|savings?) in energy",
            Metric::Energy,
        ),
        (r"geomean|geometric mean", Metric::GeomeanSpeed),
        (
            r"faster|speed-?ups?|speeds? up|accelerat(?:es|ed|ing|ion)\b",
            Metric::Speed,
        ),
    ]
    .into_iter()
    .map(|(p, m)| (Regex::new(&format!("(?i){p}")).expect("valid regex"), m))
    .collect()
});

/// A comparison that makes a multiple a speed ("outperforms X by 3x", "1.6x over cuBLAS");
/// with a percentage it says nothing of what was measured ("outperforming evaluators by
/// 11.34%" is accuracy).
static COMPARED: LazyLock<Regex> =
    LazyLock::new(|| words(&[r"outperform\w*", r"surpass\w*", "over", "than"]));

/// Words that make a multiple of a time, memory or overhead a speed-up ("6-14x speedup for
/// TTFT", "a 1.64x average latency improvement"): the time went down, not up.
static SPEED_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    words(&[
        "faster",
        "speedups?",
        r"speeds? up",
        r"improv\w*",
        r"accelerat(?:es|ed|ing|ion)",
    ])
});

/// A quantifier right before a figure ("less than 20% of the cases", "over 98.5%", "under
/// 1%"): it bounds the figure, it does not say which way a measure moved.
static QUANTIFIER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:(?:less|more|fewer|greater) than|over|under|above|below|at (?:least|most))\s*$",
    )
    .expect("valid regex")
});

/// The lower end of a range before a figure ("1.4-11.2x", "2.0–2.2×", "1.3× to 1.8×",
/// "29-69%"): the figure is the best case.
static RANGE_FROM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d(?:[\d.,]*\d)?\s?(?:x|×|%|[TGP](?:FLOPS|B/s))?\s?(?:[-–]|to)\s?$")
        .expect("valid regex")
});

/// A figure in a text, for where the words about the one before it end.
static ANY_FIGURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d(?:[\d.,]*\d)?\s?(?:x\b|×|%|[TGP](?:FLOPS|B/s))").expect("valid regex")
});

/// Words that move a measure down or up ("40% lower", "2.4x faster").
static DOWN: LazyLock<Regex> = LazyLock::new(|| {
    verbs(&[
        "lower",
        "less",
        "fewer",
        r"reduc\w*",
        "cuts?",
        r"decreas\w*",
        "shorter",
        "drops?",
        "smaller",
        "saves?",
        "lowers?",
    ])
});
static UP: LazyLock<Regex> = LazyLock::new(|| {
    verbs(&[
        "faster",
        "higher",
        "more",
        "speedups?",
        r"speeds? up",
        r"improv\w*",
        r"increas\w*",
        "boosts?",
        "over",
        "than",
        "gains?",
        r"outperform\w*",
    ])
});

/// A case-insensitive regex matching any of `alternatives` as whole words.
/// Like [`words`], but not inside a hyphenated compound: "reduce-scatter" and "all-reduce"
/// are collectives, not a reduction ("up to 168× for reduce-scatter" is a speed-up).
fn verbs(alternatives: &[&str]) -> Regex {
    Regex::new(&format!(
        r"(?i)(?:^|[^\w-])({})(?:[^\w-]|$)",
        alternatives.join("|")
    ))
    .expect("valid regex")
}

fn words(alternatives: &[&str]) -> Regex {
    Regex::new(&format!(r"(?i)\b({})\b", alternatives.join("|"))).expect("valid regex")
}

/// The words that speak of `figure` in `sentence`: those before it back to the clause's start
/// or the figure before it, and a few after it up to the next figure, "and" or the clause's
/// end ("… reduces P99 TTFT latency by 80.7%", not "2.75x speedup and 54% reduction"). The
/// text of the figure as written is in the middle; `from_range` when a range's lower end
/// stood before it (removed from the words).
struct Window<'a> {
    before: &'a str,
    written: &'a str,
    after: String,
    from_range: bool,
    /// The figure is a foil to the next one: "correct kernels for 71.4% of tasks, but only
    /// 23.8% …": what the sentence stresses is the figure after "but only".
    foil: bool,
}

/// Words that make a figure a reference or another measure than the table's: a peak, what
/// a benchmark says the hardware can do, a part's capacity from its data sheet ("eight
/// HBM3 stacks, providing 5.3 TB/s of bandwidth and 192 GB of DRAM capacity", "an H100
/// SXM5 box which has 3.35TB per second of memory bandwidth"), accuracy.
pub(super) static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:(?:peak|max(?:imum)?) (?:memory )?(?:bandwidth|t?flops|throughput|compute|performance)|theoretical|achievable|rated|according to|accura\w*|(?:dram|hbm\d?e?|memory) capacity|[\d.]+\s?(?:[tg]b/s|[tg]b per second) of (?:memory )?bandwidth)\b")
        .expect("valid regex")
});

/// The words between a foil and the figure the sentence stresses ("…, but only").
static FOIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:but|yet|whereas|while)\s+(?:only|just|merely)\s*$").expect("valid regex")
});

/// Words kept after a figure in a [`Window`].
const WINDOW_WORDS_AFTER: usize = 6;
/// Words after a figure that say first what it measures.
const CUE_WORDS_AFTER: usize = 3;

fn window<'a>(sentence: &'a str, figure: &str) -> Option<Window<'a>> {
    let spaced = super::extractive::spaced_figure(figure);
    let (at, written) = figure_at(sentence, figure)
        .map(|at| (at, &sentence[at..at + figure.len()]))
        .or_else(|| {
            figure_at(sentence, &spaced).map(|at| (at, &sentence[at..at + spaced.len()]))
        })?;
    let mut before = &sentence[..at];
    let from_range = RANGE_FROM
        .find(before)
        .map(|m| before = &before[..m.start()])
        .is_some();
    let clause_start = before.rfind([',', ';', ':', '(', ')']).map_or(0, |i| i + 1);
    let figure_end = ANY_FIGURE.find_iter(before).last().map_or(0, |m| m.end());
    before = &before[clause_start.max(figure_end)..];
    let rest = &sentence[at + written.len()..];
    let mut end = rest
        .find([',', ';', '(', ')'])
        .or_else(|| rest.find(". "))
        .unwrap_or(rest.len());
    for stop in [ANY_FIGURE.find(rest).map(|m| m.start()), rest.find(" and ")] {
        end = end.min(stop.unwrap_or(end));
    }
    let after: Vec<&str> = rest[..end]
        .split_whitespace()
        .take(WINDOW_WORDS_AFTER)
        .collect();
    let foil = ANY_FIGURE
        .find(rest)
        .is_some_and(|next| FOIL.is_match(&rest[..next.start()]));
    Some(Window {
        before,
        written,
        after: format!(" {}", after.join(" ")),
        from_range,
        foil,
    })
}

/// Measures that are better lower: a multiple of one is a speed-up or a reduction, never
/// "8x the memory".
fn lower_is_better(metric: Metric) -> bool {
    matches!(
        metric,
        Metric::Latency
            | Metric::CompileTime
            | Metric::Memory
            | Metric::Overhead
            | Metric::Recompilations
    )
}

/// What `figure` measures in `sentence`, read from the words that speak of it (see
/// [`Window`]), or None when they do not say, or say something a gloss would get wrong:
/// the lower end of a range, a bound ("less than 20% of the cases"), a multiple of a
/// speed-up ("100× the measured speedup", a scoring rule), a multiple of a time or memory
/// that is not a speed-up ("require 8x or even 16x accelerators").
pub fn read(sentence: &str, figure: &str) -> Option<Fact> {
    let w = window(sentence, figure)?;
    let after_lower = w.after.to_ascii_lowercase();
    // A foil is not the result, and "23.8% of tasks are both correct and at least as fast"
    // measures two things, of which the words before "and" say one.
    if w.foil || after_lower.split_whitespace().any(|w| w == "both") {
        return None;
    }
    // "1.3×–1.8×", "from 14.2% to 23.8%": the upper end says it.
    if after_lower.trim() == "to"
        || after_lower.trim_start().starts_with(['-', '–'])
        || after_lower.trim_start().starts_with("to ")
            && after_lower.trim_start()[3..].starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    let multiple = figure.ends_with(['x', '×']);
    let percent = figure.ends_with('%');
    if multiple
        && after_lower.trim_start().starts_with("the ")
        && after_lower
            .split_whitespace()
            .take(3)
            .any(|w| w.starts_with("speedup"))
    {
        return None;
    }
    let bounded = QUANTIFIER.is_match(w.before);
    let before = QUANTIFIER
        .find(w.before)
        .map_or(w.before, |m| &w.before[..m.start()]);
    let words = format!("{before} {}{}", w.written, w.after);
    // "the correct-and-fast rate" measures two things at once, like "both … and"; a
    // hardware's peak ("the achievable bandwidth of a single MI250X GCD, which according to
    // BabelStream is 1.4 TB/s") is a reference, not a result; accuracy is no speed ("up to
    // 2.1x higher in relative accuracy").
    if words.contains("-and-") || REFERENCE.is_match(&words) {
        return None;
    }
    // What is measured is said next to the figure: the words since the last "and" before
    // it and three after it ("delivers up to 1.79x speedup over", not the "bandwidth" of
    // the clause's first half; "23% higher throughput than", not the "compilers" after).
    let near_before = before.rfind(" and ").map_or(before, |i| &before[i + 5..]);
    let near_after: Vec<&str> = w.after.split_whitespace().take(CUE_WORDS_AFTER).collect();
    let near = format!("{near_before} {} {}", w.written, near_after.join(" "));
    let lower_figure = figure.to_ascii_lowercase();
    // The unit says it first ("tokens/s", "TFLOPS"); then the words next to it, then the
    // rest of the window.
    let metric = CUES
        .iter()
        .find(|(cue, _)| cue.is_match(&lower_figure))
        .or_else(|| CUES.iter().find(|(cue, _)| cue.is_match(&near)))
        .or_else(|| CUES.iter().find(|(cue, _)| cue.is_match(&words)))
        .map(|(_, m)| *m)
        .or_else(|| (multiple && COMPARED.is_match(&words)).then_some(Metric::Speed))?;
    // A bounded percentage is a share, not a result: "in less than 20% of the cases", "with
    // less than 50% CPU usage", "over 98.5% of accuracy".
    if bounded && percent {
        return None;
    }
    let before_lower = before.trim_end().to_ascii_lowercase();
    let within = percent && before_lower.ends_with("within");
    // "reduces overhead to just 34.35%": the level reached, not the change ("up to" is a
    // best case).
    let reaches = [
        "to",
        "to just",
        "to only",
        "to approximately",
        "to about",
        "to around",
        "to roughly",
    ]
    .iter()
    .any(|t| before_lower == *t || before_lower.ends_with(&format!(" {t}")))
        && !before_lower.ends_with("up to");
    let direction = if within {
        Direction::Within
    } else if reaches {
        Direction::Level
    } else if DOWN.is_match(&words) {
        Direction::Down
    } else if multiple || (percent && UP.is_match(&words)) {
        Direction::Up
    } else {
        Direction::Level
    };
    // "Faster compilation" is compile speed going up, whatever the time does.
    let mut metric = match (metric, direction) {
        (Metric::CompileSpeed, Direction::Down) => Metric::CompileTime,
        (m, _) => m,
    };
    if lower_is_better(metric) {
        match direction {
            Direction::Up if multiple && SPEED_WORDS.is_match(&words) => metric = Metric::Speed,
            // "a 1% latency gain", "8x or even 16x accelerators": which way is not said.
            Direction::Up => return None,
            Direction::Level if percent && !reaches => return None,
            _ => {}
        }
    }
    let local = words.to_ascii_lowercase();
    let at_most = w.from_range || local.contains("up to") || local.contains("as much as");
    let clause = format!("{before}{figure}{}", w.after);
    let of = match direction {
        Direction::Level | Direction::Within if percent => {
            share_of(&clause, figure).map(Against::Named)
        }
        Direction::Up | Direction::Down if multiple => compared_with(&clause, figure),
        _ => None,
    };
    // A gap to nothing named says nothing a reader can use: leave the figure to the body.
    if direction == Direction::Within && of.is_none() {
        return None;
    }
    Some(Fact {
        metric,
        direction,
        figure: figure.to_string(),
        at_most,
        of,
        on: suite(&words),
    })
}

/// The named suite or benchmark a figure was measured on: "on the HuggingFace suite",
/// "on TIMM benchmarks" -> HuggingFace, TIMM. Only a name: "on the test suite" says none.
fn suite(clause: &str) -> Option<String> {
    static ON: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"\b[Oo]n (?:the )?(?P<name>[A-Z][\w.-]*) (?:benchmark )?(?:suite|benchmarks?)\b",
        )
        .expect("valid regex")
    });
    Some(ON.captures(clause)?["name"].to_string())
}

/// The named system a percentage is a share of: "91% of cuBLAS throughput" -> cuBLAS.
/// Only a name, not "of tasks".
fn share_of(clause: &str, figure: &str) -> Option<String> {
    let after = after_figure(clause, figure)?;
    let rest = after.strip_prefix("of ")?;
    system_name(rest.strip_prefix("the ").unwrap_or(rest))
}

/// What a multiple is measured against: "1.42x the throughput of vLLM", "1.27x that of
/// SGLang", "1.9x faster than FlashAttention-3", "1.6x over cuBLAS". None when the words
/// after the figure compare it with nothing (then it is a change from before: "2.4x
/// faster").
fn compared_with(clause: &str, figure: &str) -> Option<Against> {
    static BASE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^(?:the [\w-]+(?: [\w-]+)? of|that of|(?:[\w-]+ )?(?:than|over|vs\.?|versus|compared (?:to|with)|relative to)) (?P<base>.+)",
        )
        .expect("valid regex")
    });
    static EARLIER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^(?:before|previous|prior|its |in |the (?:previous|prior|last|old)|v?\d)")
            .expect("valid regex")
    });
    let after = after_figure(clause, figure)?;
    let base = BASE.captures(after)?.name("base")?.as_str();
    if EARLIER.is_match(base) {
        return None; // "faster than before", "over v3.5": a change from the last version
    }
    Some(system_name(base).map_or(Against::Baseline, Against::Named))
}

/// The text right after `figure` in `clause`, from its next word.
fn after_figure<'a>(clause: &'a str, figure: &str) -> Option<&'a str> {
    Some(clause[figure_at(clause, figure)? + figure.len()..].trim_start())
}

/// Where `figure` stands in `clause` as a number of its own: "8%" is not the end of "18%".
fn figure_at(clause: &str, figure: &str) -> Option<usize> {
    clause.match_indices(figure).map(|(at, _)| at).find(|&at| {
        !clause[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == ',')
    })
}

/// The first word of `text` when it is a system's name: a word with a capital or a digit
/// after its first letter ("vLLM", "cuBLAS", "FlashAttention-3"), not "tasks" or "the".
fn system_name(text: &str) -> Option<String> {
    // "compared to the H100": the article is no part of the name.
    let text = text
        .strip_prefix("the ")
        .or_else(|| text.strip_prefix("The "))
        .unwrap_or(text);
    let words: Vec<&str> = text
        .split_whitespace()
        .take(2)
        // A phrase cut after a whole word ends it with "…".
        .map(|w| w.trim_end_matches([',', '.', ';', ':', ')', '…']))
        .collect();
    let named = |word: &&str| {
        word.chars()
            .skip(1)
            .any(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    };
    match words.as_slice() {
        [first, ..] if named(first) => Some(first.to_string()),
        // A vendor before its product: "Nvidia H200", "AMD MI300X".
        [vendor, product] if vendor.starts_with(char::is_uppercase) && named(product) => {
            Some(format!("{vendor} {product}"))
        }
        _ => None,
    }
}

/// The fact in the reader's language: "编译速度达到此前的 2.4 倍", "compile time up to 40% lower",
/// "吞吐量达到 cuBLAS 的 91%".
pub fn render(fact: &Fact, t: &Locale) -> String {
    let times = fact.figure.strip_suffix(['x', '×']);
    let figure = match times {
        Some(n) => t.fill("figure_times", &[("n", n)]),
        None => super::extractive::spaced_figure(&fact.figure),
    };
    let key = match (fact.direction, &fact.of) {
        (Direction::Up, Some(Against::Named(_))) if times.is_some() => "fact_up_times_of",
        (Direction::Up, Some(Against::Baseline)) if times.is_some() => "fact_up_times_base",
        (Direction::Up, _) if times.is_some() => "fact_up_times",
        (Direction::Up, _) => "fact_up",
        // "6x lower latency" is said as the share it leaves (延迟降至 1/6): "降低 6 倍"
        // would read as a reduction by six times the whole.
        (Direction::Down, Some(Against::Named(_))) if times.is_some() => "fact_down_times_of",
        (Direction::Down, Some(Against::Baseline)) if times.is_some() => "fact_down_times_base",
        (Direction::Down, _) if times.is_some() => "fact_down_times",
        (Direction::Down, _) => "fact_down",
        (Direction::Level, Some(_)) => "fact_level_of",
        (Direction::Level, None) => "fact_level",
        (Direction::Within, _) => "fact_within_of",
    };
    let metric = match &fact.on {
        Some(suite) => t.fill(
            "metric_on",
            &[("metric", t.get(fact.metric.key())), ("suite", suite)],
        ),
        None => t.get(fact.metric.key()).to_string(),
    };
    t.fill(
        key,
        &[
            ("metric", &metric),
            (
                "max",
                match (fact.at_most, key.starts_with("fact_down_times")) {
                    (false, _) => "",
                    (true, false) => t.get("fact_max"),
                    (true, true) => t.get("fact_max_down"),
                },
            ),
            ("figure", &figure),
            ("n", times.unwrap_or_default()),
            (
                "of",
                match &fact.of {
                    Some(Against::Named(name)) => name,
                    _ => "",
                },
            ),
        ],
    )
}

/// The plain shapes a release note gives a changed requirement, default or name in, each
/// with its locale key (`change_<name>`): the whole line must be one of them, so a gloss is
/// never a guess at a longer sentence. Names, versions and code stay as written.
static CHANGES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (
            r"(?:support for )?(?P<x>.{1,60}?) (?:is|are) no longer supported",
            "unsupported",
        ),
        (
            r"(?:dropped|drops|drop|removed|removes|remove) support for (?P<x>.{1,60})",
            "unsupported",
        ),
        (
            r"(?:now )?requires? (?P<x>.{1,60}?) or (?:newer|later|above|higher) and (?P<y>[^()]{1,40}?)(?: \((?P<z>[^()]{1,80})\))?",
            "requires_and",
        ),
        (
            r"(?:now )?requires? (?P<x>.{1,60}?) or (?:newer|later|above|higher)",
            "requires",
        ),
        (
            r"the minimum (?:supported )?(?:\w+ )?version is now (?P<x>.{1,40})",
            "minimum",
        ),
        (
            r"(?P<x>.{1,60}?) (?:is|are) now (?P<y>[\w-]{1,24}) by default",
            "default_is",
        ),
        (
            r"(?P<x>.{1,60}?) now defaults? to (?P<y>.{1,40})",
            "defaults_to",
        ),
        (
            r"(?P<x>.{1,60}?) (?:is|are|has been|have been) renamed to (?P<y>.{1,60})",
            "renamed",
        ),
        (
            r"(?P<x>.{1,60}?) (?:is|are|has been|have been) deprecated",
            "deprecated",
        ),
        (r"(?P<x>.{1,60}?) (?:has|have) been removed", "removed"),
        (r"removed? (?P<x>.{1,60})", "removed"),
    ]
    .into_iter()
    .map(|(p, key)| (Regex::new(&format!("(?i)^{p}$")).expect("valid regex"), key))
    .collect()
});

/// A release-note line that asks something of users, said in the reader's language when
/// the whole line is one plain shape ("Python 3.9 is no longer supported" -> 不再支持
/// Python 3.9); None for anything else, which is quoted as written.
pub fn change(line: &str, t: &Locale) -> Option<String> {
    // "… (#171204)." and a closing full stop are not part of what changed.
    let line = line.trim().trim_end_matches('.');
    let line = match line.rfind(" (#") {
        Some(i) if line.ends_with(')') => &line[..i],
        _ => line,
    }
    .trim_end_matches('.')
    .trim();
    CHANGES.iter().find_map(|(shape, key)| {
        let c = shape.captures(line)?;
        let part = |name: &str| c.name(name).map_or("", |m| m.as_str().trim());
        let (x, y, z) = (part("x"), part("y"), part("z"));
        let x = x
            .strip_prefix("The ")
            .or_else(|| x.strip_prefix("the "))
            .unwrap_or(x);
        // What changed must be a name or code ("Python 3.9", "tl.dot_scaled", "CUDA
        // Toolkit 13.0"): a phrase such as "the legacy interface" would stay English inside
        // the Chinese sentence, so that line is quoted instead.
        if !is_name(x) || !(y.is_empty() || is_name(y) || !y.contains(' ')) {
            return None;
        }
        // "(GCC 11+, Clang 17+)": a list of names, or the line is quoted.
        let names: Vec<&str> = z.split(", ").map(str::trim).collect();
        if !z.is_empty() && !names.iter().all(|n| is_name(n)) {
            return None;
        }
        let said = t.fill(&format!("change_{key}"), &[("x", x), ("y", y)]);
        Some(if z.is_empty() {
            said
        } else {
            t.fill(
                "change_with_list",
                &[
                    ("said", &said),
                    ("list", &names.join(t.get("list_separator"))),
                ],
            )
        })
    })
}

/// A release-note section heading in the reader's language: each word that the locale
/// glosses (`area_<word>`: "compiler" -> 编译器, "backend" -> 后端) is said in it, every
/// other word must be a name or code, which stays as written ("NVIDIA backend" -> NVIDIA
/// 后端, "Blackwell SM100 kernels" -> Blackwell SM100 内核). None when a word is neither
/// (the heading would stay English), or when one sorts nothing ("Other changes").
///
/// A heading capitalises its first word whatever it is, so a word spelled like
/// "Regressions" or "Blackwell" is a name only when the notes (`text`) capitalise it
/// inside a sentence too ("the NVIDIA Blackwell backends"), or when it is one of the
/// field's phrases the event matched (`known`, lower-case: "blackwell", "inductor").
pub fn area(heading: &str, t: &Locale, text: &str, known: &[String]) -> Option<String> {
    let heading = heading.trim().trim_end_matches(':').trim();
    let mut said = String::new();
    for word in heading.split_whitespace() {
        let key = format!("area_{}", word.to_lowercase());
        let piece = if t.has(&key) {
            t.get(&key)
        } else if is_code_or_acronym(word) || written_as_name(word, text, known) {
            word
        } else {
            return None;
        };
        if piece.is_empty() {
            return None;
        }
        said = join_words(&said, piece);
    }
    (!said.is_empty()).then_some(said)
}

/// "SM100", "CuTe", "NVIDIA", "torch.compile": a capital after the first letter, or a
/// digit or code character.
fn is_code_or_acronym(word: &str) -> bool {
    word.chars().skip(1).any(|c| c.is_uppercase()) || is_code(word)
}

/// A word holding a digit or a code character: "3.9", "tl.dot", "sm_100a", "C++20".
fn is_code(word: &str) -> bool {
    word.contains(|c: char| c.is_ascii_digit() || "._=()`+-".contains(c))
}

/// Whether a capitalised `word` of a heading is a name: the notes (`text`) write it as one
/// ([`crate::text::written_as_name`]: "the NVIDIA Blackwell backends"), or they never write it in
/// lower case and it is one of the field's phrases the event matched (`known`, lower-case:
/// "blackwell", "inductor").
fn written_as_name(word: &str, text: &str, known: &[String]) -> bool {
    crate::text::written_as_name(word, text)
        || (word.starts_with(|c: char| c.is_uppercase())
            && known.contains(&word.to_lowercase())
            && !crate::text::has_word(text, &word.to_lowercase()))
}

/// `a` and `b` as one phrase: a space between them, except where both sides are written
/// without spaces ("编译器" + "改进" -> 编译器改进, "NVIDIA" + "后端" -> NVIDIA 后端).
pub fn join_words(a: &str, b: &str) -> String {
    let unspaced = |c: Option<char>| c.is_some_and(crate::text::unspaced);
    if a.is_empty() {
        b.to_string()
    } else if unspaced(a.chars().last()) && unspaced(b.chars().next()) {
        format!("{a}{b}")
    } else {
        format!("{a} {b}")
    }
}

/// Every word a name or code: capitalised, or holding a digit, a dot, an underscore, a
/// bracket or `=`; at most six words, one clause.
fn is_name(part: &str) -> bool {
    let words: Vec<&str> = part.split_whitespace().collect();
    !words.is_empty()
        && words.len() <= 6
        && !part.contains(". ")
        && !part.contains(';')
        && words
            .iter()
            .all(|w| w.starts_with(|c: char| c.is_uppercase()) || is_code(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_headings_are_said_in_chinese_with_names_as_written() {
        let zh = Locale::builtin("zh-CN");
        let en = Locale::builtin("en");
        let notes = "The NVIDIA Blackwell backends are complete. CuTe DSL is out of beta.\nRegressions fixed. Fix a regression in Inductor, the benchmark runs.\n- Add fp8 support";
        let known = ["hopper".to_string()];
        let area = |h: &str| area(h, &zh, notes, &known);
        assert_eq!(area("Compiler").as_deref(), Some("编译器"));
        assert_eq!(area("New Features").as_deref(), Some("新功能"));
        assert_eq!(area("NVIDIA backend").as_deref(), Some("NVIDIA 后端"));
        assert_eq!(
            area("Blackwell SM100 kernels").as_deref(),
            Some("Blackwell SM100 内核")
        );
        assert_eq!(area("CuTe DSL").as_deref(), Some("CuTe DSL"));
        assert_eq!(
            area("Frontend and compiler:").as_deref(),
            Some("前端与编译器")
        );
        // A word that is neither glossed nor a name keeps the heading out; so does "other".
        assert_eq!(area("Support for ROCm"), None);
        assert_eq!(area("Other changes"), None);
        // A capitalised word is a name when the notes write it so inside a sentence.
        assert_eq!(area("Inductor").as_deref(), Some("Inductor"));
        assert_eq!(area("Regressions"), None);
        assert_eq!(area("Hopper kernels").as_deref(), Some("Hopper 内核"));
        // A list item taken for a heading: its verb is capitalised only as a first word.
        assert_eq!(area("Add fp8 support"), None);
        // A field phrase the notes write in lower case is a word, not a name.
        assert_eq!(area("Benchmark updates").as_deref(), Some("基准测试更新"));
        assert_eq!(
            super::area("NVIDIA backend", &en, notes, &known).as_deref(),
            Some("NVIDIA backend")
        );
    }

    #[test]
    fn plain_change_lines_are_said_in_chinese_and_others_are_left_alone() {
        let zh = Locale::builtin("zh-CN");
        let said = |line: &str| change(line, &zh);
        assert_eq!(
            said("Python 3.9 is no longer supported.").as_deref(),
            Some("不再支持 Python 3.9")
        );
        assert_eq!(
            said("Requires CUDA Toolkit 13.0 or newer").as_deref(),
            Some("需要 CUDA Toolkit 13.0 或更新版本")
        );
        assert_eq!(
            said("The minimum version is now Python 3.10 (#171204)").as_deref(),
            Some("最低版本要求改为 Python 3.10")
        );
        assert_eq!(
            said("Atomics are now relaxed by default").as_deref(),
            Some("Atomics 的默认行为改为 relaxed")
        );
        assert_eq!(
            said("torch.load now defaults to weights_only=True").as_deref(),
            Some("torch.load 的默认值改为 weights_only=True")
        );
        assert_eq!(
            said("tl.dot_scaled has been renamed to tl.scaled_dot.").as_deref(),
            Some("tl.dot_scaled 更名为 tl.scaled_dot")
        );
        assert_eq!(
            said("Removed cutlass.op and cutlass.emit").as_deref(),
            None,
            "\"and\" is not part of a name"
        );
        assert_eq!(
            said("The CUTLASS 2.x Python API has been removed").as_deref(),
            Some("移除了 CUTLASS 2.x Python API")
        );
        assert_eq!(said("The legacy Python interface has been removed"), None);
        // A longer statement is quoted as written, never half-translated.
        assert_eq!(
            said(
                "CuTe DSL is now the primary Python interface to CUTLASS, the legacy Python interface has been removed, and the minimum toolchain is CUDA 13.0."
            ),
            None
        );
        // Two requirements and the compilers that meet the second: one plain shape too.
        assert_eq!(
            said("Requires CUDA Toolkit 13.0 or newer and C++20 (GCC 11+, Clang 17+).").as_deref(),
            Some("需要 CUDA Toolkit 13.0 或更新版本，以及 C++20（GCC 11+、Clang 17+）")
        );
        assert_eq!(
            change(
                "Requires CUDA Toolkit 13.0 or newer and C++20",
                &Locale::builtin("en")
            )
            .as_deref(),
            Some("requires CUDA Toolkit 13.0 or newer and C++20")
        );
        // A parenthesis that is not a list of names is not said half in Chinese.
        assert_eq!(
            said("Requires CUDA 13.0 or newer and C++20 (see the migration guide for details)"),
            None
        );
    }

    #[test]
    fn a_figure_within_a_named_system_is_a_gap_not_a_level() {
        let zh = Locale::builtin("zh-CN");
        let en = Locale::builtin("en");
        let clause = "…brings forward throughput to within 8% of FlashAttention-3 on H100";
        let fact = read(clause, "8%").expect("a throughput figure");
        assert_eq!(fact.direction, Direction::Within);
        assert_eq!(render(&fact, &zh), "吞吐量与 FlashAttention-3 相差不到 8%");
        assert_eq!(
            render(&fact, &en),
            "throughput within 8% of FlashAttention-3"
        );
        // The 8% of its own, not the end of "18%".
        let both = "latency drops 18% and throughput is within 8% of FA3";
        assert_eq!(
            read(both, "8%").map(|f| f.direction),
            Some(Direction::Within)
        );
        // Within nothing named: no gloss rather than a wrong one.
        assert_eq!(read("latency stays within 5% across runs", "5%"), None);
    }

    #[test]
    fn figures_are_glossed_with_what_they_measure() {
        let zh = Locale::builtin("zh-CN");
        let en = Locale::builtin("en");
        let both = |clause: &str, figure: &str| {
            let fact = read(clause, figure).expect("a cue");
            (render(&fact, &zh), render(&fact, &en))
        };
        assert_eq!(
            both("Cold JIT compilation is 2.4x faster", "2.4x"),
            (
                "编译速度达到此前的 2.4 倍".into(),
                "compile speed 2.4x higher".into()
            )
        );
        // PyTorch's "Inductor geomean speedup of 1.18x on the HuggingFace suite": a mean
        // over a named suite, against the previous version.
        assert_eq!(
            both(
                "Inductor geomean speedup of 1.18x on the HuggingFace suite compared with 2.9",
                "1.18x"
            ),
            (
                "HuggingFace 测试集上的几何平均速度达到此前的 1.18 倍".into(),
                "HuggingFace geomean speed 1.18x higher".into()
            )
        );
        assert_eq!(
            both(
                "…the median end-to-end compile time is 40% lower than in 3.5.1",
                "40%"
            )
            .0,
            "编译时间降低 40%"
        );
        assert_eq!(
            both(
                "TileFuse kernels reach 1,530 TFLOPS in BF16…",
                "1,530TFLOPS"
            )
            .0,
            "算力达到 1,530 TFLOPS"
        );
        assert_eq!(
            both(
                "…strongest agent produces correct kernels for 71.4% of tasks",
                "71.4%"
            )
            .0,
            "通过率达到 71.4%"
        );
        assert_eq!(
            both("a cuTile BF16 GEMM reaches 91% of cuBLAS throughput", "91%"),
            (
                "吞吐量达到 cuBLAS 的 91%".into(),
                "throughput at 91% of cuBLAS".into()
            )
        );
        assert_eq!(
            both("the FP8 grouped GEMM tutorial is up to 3.1x faster", "3.1x").1,
            "speed up to 3.1x higher"
        );
        assert_eq!(
            both("serves 12,000 tokens/s on one H100", "12,000tokens/s").0,
            "每秒 token 数达到 12,000 tokens/s"
        );
        assert_eq!(both("reduces p99 TPOT by 37%", "37%").0, "延迟降低 37%");
        // "reduce-scatter" is a collective, not a reduction.
        assert_eq!(
            both(
                "substantial performance speedups over RCCL -- up to 168× for reduce-scatter",
                "168×"
            )
            .1,
            "speed up to 168x higher"
        );
        // A multiple of another system is not a change from before ("此前").
        assert_eq!(
            both("Tessera delivers 1.42x the throughput of vLLM…", "1.42x"),
            (
                "吞吐量达到 vLLM 的 1.42 倍".into(),
                "1.42x the throughput of vLLM".into()
            )
        );
        for (clause, figure, zh) in [
            (
                "They run up to 1.9x faster than FlashAttention-3",
                "1.9x",
                "速度最高达到 FlashAttention-3 的 1.9 倍",
            ),
            (
                "up to 1.6x over cuBLAS on FP4 GEMM",
                "1.6x",
                "速度最高达到 cuBLAS 的 1.6 倍",
            ),
            (
                "1.3x faster than the fused attention in cuDNN",
                "1.3x",
                "速度达到对比基线的 1.3 倍",
            ),
            (
                "inference is 2x faster than before",
                "2x",
                "速度达到此前的 2 倍",
            ),
            (
                "a geomean speedup of 1.18x compared with 2.9",
                "1.18x",
                "几何平均速度达到此前的 1.18 倍",
            ),
        ] {
            assert_eq!(both(clause, figure).0, zh, "{clause}");
        }
        assert!(read("across 96 configurations, 3% of them", "3%").is_none());
        // A rated figure is a specification; "reduce … to approximately" gives a level.
        assert!(
            read(
                "xGMI's raw bandwidth is rated up to 64 GB/s for each link",
                "64GB/s"
            )
            .is_none()
        );
        assert_eq!(
            both(
                "protocol overhead, which reduce the usable bandwidth to approximately 48 GB/s per link",
                "48GB/s"
            )
            .0,
            "带宽达到 48 GB/s"
        );
        // "compared to the H100" names what the multiple is of.
        assert_eq!(
            both(
                "SGLang achieved 7,583 tokens per second per GPU for decoding—a 2.7x speedup compared to the H100 (link)",
                "2.7x"
            ),
            (
                "每秒 token 数达到 H100 的 2.7 倍".into(),
                "2.7x the tokens per second of H100".into()
            )
        );
        assert_eq!(
            both(
                "Our experiments demonstrate an average 28.67% energy reduction on quantized models",
                "28.67%"
            ),
            ("能耗降低 28.67%".into(), "energy use 28.67% lower".into())
        );
        // Efficiency moves the other way: no energy gloss.
        assert_ne!(
            read(
                "our design is 1.2× and 2.87× more power efficient than the GPU",
                "2.87×"
            )
            .map(|f| f.metric),
            Some(Metric::Energy)
        );
        // A multiple lower is the share it leaves: "降低 6 倍" would be a reduction by six
        // times the whole.
        for (clause, figure, zh, en) in [
            (
                "Evaluations show a 22x latency reduction for BERT compared to the state of the art",
                "22x",
                "延迟降至此前的 1/22",
                "latency 22x lower",
            ),
            (
                "during decode phase the latency for MLA is 2x less vs Nvidia H200",
                "2x",
                "延迟降至 Nvidia H200 的 1/2",
                "latency 2x lower than Nvidia H200",
            ),
            (
                "FlashMoE achieves up to 9× higher GPU utilization, 6× lower latency",
                "6×",
                "延迟降至此前的 1/6",
                "latency 6x lower",
            ),
            (
                "it cuts decode latency by up to 3x over vLLM",
                "3x",
                "延迟最低降至 vLLM 的 1/3",
                "latency up to 3x lower than vLLM",
            ),
        ] {
            assert_eq!(both(clause, figure), (zh.into(), en.into()), "{clause}");
        }
    }

    /// Sentences of the labelled days (tests/fixtures/eval, eval-holdout) whose figures the
    /// overview once misread: each is now read as its words mean, or left to the body.
    #[test]
    fn real_sentences_are_read_as_they_mean_or_left_alone() {
        let zh = Locale::builtin("zh-CN");
        let said = |sentence: &str, figure: &str| read(sentence, figure).map(|f| render(&f, &zh));
        for (sentence, figure, expected) in [
            // The verb is more than six words before the figure.
            (
                "Under high loads, Chameleon reduces P99 and P50 TTFT latency by 80.7% and 48.1%, respectively.",
                "80.7%",
                Some("延迟降低 80.7%"),
            ),
            (
                "POD-Attention speeds up attention computation by up to 75% (mean 28%) and increases LLM serving throughput by up to 22% in offline inference.",
                "22%",
                Some("吞吐量最高提升 22%"),
            ),
            // A speed-up of a time is a speed-up, the best of a range.
            (
                "FastSwitch outperforms the state-of-the-art LLM serving system vLLM with speedups of 1.4-11.2x across different tail TTFT and TBT.",
                "11.2x",
                Some("速度最高达到此前的 11.2 倍"),
            ),
            (
                "Achieve 6-14x speedup for TTFT and 2-4x for TPOT v.s.",
                "14x",
                Some("速度最高达到此前的 14 倍"),
            ),
            (
                "FlashInfer achieve 29-69% inter-token-latency reduction compared to compiler backends for LLM serving benchmark",
                "69%",
                Some("延迟最高降低 69%"),
            ),
            (
                "The result: speedups ranging from 1.3×–1.8× on models like Flux, Wan, and LTX.",
                "1.8×",
                Some("速度最高达到此前的 1.8 倍"),
            ),
            // What is measured is the word next to the figure.
            (
                "Iris achieves near-optimal bandwidth utilization in microbenchmarks and delivers up to 1.79x speedup over PyTorch and RCCL for GEMM+All-Scatter workloads",
                "1.79x",
                Some("速度最高达到 PyTorch 的 1.79 倍"),
            ),
            (
                "Nautilus achieves up to 23% higher throughput than state-of-the-art compilers on GH200 and up to 42% on RTX 5090",
                "23%",
                Some("吞吐量最高提升 23%"),
            ),
            (
                "SGLang delivers 2.8x acceleration and reduces performance overhead to just 34.35% (vs.",
                "34.35%",
                Some("开销达到 34.35%"),
            ),
            (
                "Extensive results show up to 2.75x speedup and 54% reduction in energy consumption",
                "2.75x",
                Some("速度最高达到此前的 2.75 倍"),
            ),
            // Left to the body: a range's lower end, a bound on a share of cases, accuracy,
            // a multiple of a speed-up, a count of accelerators, an aside, a gain of latency.
            (
                "The result: speedups ranging from 1.3×–1.8× on models like Flux, Wan, and LTX.",
                "1.3×",
                None,
            ),
            (
                "frontier reasoning models still fall short overall, matching the PyTorch baseline in less than 20% of the cases.",
                "20%",
                None,
            ),
            (
                "MiniKV effectively achieves 86% KV cache compression ratio while recovering over 98.5% of accuracy, outperforming state-of-the-art methods",
                "98.5%",
                None,
            ),
            (
                "bitwidths as low as 2 bits and accuracy losses kept under 1%.",
                "1%",
                None,
            ),
            (
                "42% with human judgments, outperforming GPT-based evaluators by 11.34%.",
                "11.34%",
                None,
            ),
            (
                "One unified evaluator scores every agent the same way: 20 points for compilation, 100 for correctness, and 100× the measured speedup over baseline.",
                "100×",
                None,
            ),
            (
                "The significant memory requirements will normally require 8x or even 16x high-end AI accelerators to deploy.",
                "8x",
                None,
            ),
            (
                "The significant memory requirements will normally require 8x or even 16x high-end AI accelerators to deploy.",
                "16x",
                None,
            ),
            (
                "Owing to the prohibitively large overhead (e.g., 10×) of GPUs' native memory allocator, DNN frameworks adopt a caching allocator.",
                "10×",
                None,
            ),
            (
                "For a serving fleet, even a 1% latency or power gain matters.",
                "1%",
                None,
            ),
            (
                "achieving a generation throughput of 5 to 12 tokens per second with less than 50% CPU and RAM usage.",
                "50%",
                None,
            ),
            // A reference, and another measure.
            (
                "All of these numbers fall significantly short of the achievable bandwidth of a single MI250X GCD, which according to the BabelStream case studies is roughly 1.3 TB/s to 1.4 TB/s.",
                "1.4 TB/s",
                None,
            ),
            (
                "For example, at INT2, it outperforms popular baselines by up to 2.1x higher in relative accuracy.",
                "2.1x",
                None,
            ),
            // Where a change started.
            (
                "Giving agents profiler access raises the correct-and-fast rate from 14.2% to 23.8%, whereas doubling the token budget without tools adds fewer than 2 points.",
                "14.2%",
                None,
            ),
            (
                "Giving agents profiler access raises the correct-and-fast rate from 14.2% to 23.8%, whereas doubling the token budget without tools adds fewer than 2 points.",
                "23.8%",
                None,
            ),
            (
                "The most common failures are silent numerical errors on edge-case shapes (31% of incorrect submissions) and autotuning configurations that overfit to a single shape.",
                "31%",
                None,
            ),
            // A foil ("but only" follows it) and a measure of two things at once.
            (
                "The strongest agent produces correct kernels for 71.4% of tasks, but only 23.8% of tasks are both correct and at least as fast as the reference, and just 6.1% beat the reference by more than 10%.",
                "71.4%",
                None,
            ),
            (
                "The strongest agent produces correct kernels for 71.4% of tasks, but only 23.8% of tasks are both correct and at least as fast as the reference, and just 6.1% beat the reference by more than 10%.",
                "23.8%",
                None,
            ),
            (
                "The strongest agent produces correct kernels for 71.4% of tasks, but only 23.8% of tasks are both correct and at least as fast as the reference, and just 6.1% beat the reference by more than 10%.",
                "6.1%",
                None,
            ),
        ] {
            assert_eq!(
                said(sentence, figure).as_deref(),
                expected,
                "{figure} in {sentence}"
            );
        }
    }
}
