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
            Metric::Speed => "metric_speed",
        }
    }
}

/// Which way the figure moves the measure: a change up or down, or a level reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
    Level,
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
    /// A level given as a share of a named system's: "91% of cuBLAS throughput".
    pub of: Option<String>,
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
        (
            r"correct|pass(?:es|ed)?\b|pass rate|accura|success|solve",
            Metric::PassRate,
        ),
        (r"overhead", Metric::Overhead),
        (
            r"faster|speed-?ups?|speeds? up|outperform|\bover\b|\bthan\b",
            Metric::Speed,
        ),
    ]
    .into_iter()
    .map(|(p, m)| (Regex::new(&format!("(?i){p}")).expect("valid regex"), m))
    .collect()
});

/// Words that move a measure down or up ("40% lower", "2.4x faster").
static DOWN: LazyLock<Regex> = LazyLock::new(|| {
    words(&[
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
    words(&[
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
fn words(alternatives: &[&str]) -> Regex {
    Regex::new(&format!(r"(?i)\b({})\b", alternatives.join("|"))).expect("valid regex")
}

/// What `figure` measures in `clause` (the words around it, as `figure_phrase` gives
/// them), or None when no cue says.
pub fn read(clause: &str, figure: &str) -> Option<Fact> {
    let lower_figure = figure.to_ascii_lowercase();
    // The unit says it first ("tokens/s", "TFLOPS"); then the words.
    let metric = CUES
        .iter()
        .find(|(cue, _)| cue.is_match(&lower_figure))
        .or_else(|| CUES.iter().find(|(cue, _)| cue.is_match(clause)))
        .map(|(_, m)| *m)?;
    let multiple = figure.ends_with(['x', '×']);
    let percent = figure.ends_with('%');
    let direction = if DOWN.is_match(clause) {
        Direction::Down
    } else if multiple || (percent && UP.is_match(clause)) {
        Direction::Up
    } else {
        Direction::Level
    };
    // "Faster compilation" is compile speed going up, whatever the time does.
    let metric = match (metric, direction) {
        (Metric::CompileSpeed, Direction::Down) => Metric::CompileTime,
        (m, _) => m,
    };
    let lower = clause.to_ascii_lowercase();
    let at_most = lower.contains("up to") || lower.contains("as much as");
    let of = (direction == Direction::Level && percent)
        .then(|| share_of(clause, figure))
        .flatten();
    Some(Fact {
        metric,
        direction,
        figure: figure.to_string(),
        at_most,
        of,
    })
}

/// The named system a percentage is a share of: "91% of cuBLAS throughput" -> cuBLAS.
/// Only a name (a word with a capital or a digit after its first letter), not "of tasks".
fn share_of(clause: &str, figure: &str) -> Option<String> {
    let after = &clause[clause.find(figure)? + figure.len()..];
    let mut words = after.split_whitespace();
    if words.next()? != "of" {
        return None;
    }
    let word = words.next()?.trim_end_matches([',', '.', ';', ')']);
    let word = if word.eq_ignore_ascii_case("the") {
        words.next()?.trim_end_matches([',', '.', ';', ')'])
    } else {
        word
    };
    word.chars()
        .skip(1)
        .any(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        .then(|| word.to_string())
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
        (Direction::Up, _) if times.is_some() => "fact_up_times",
        (Direction::Up, _) => "fact_up",
        (Direction::Down, _) => "fact_down",
        (Direction::Level, Some(_)) => "fact_level_of",
        (Direction::Level, None) => "fact_level",
    };
    t.fill(
        key,
        &[
            ("metric", t.get(fact.metric.key())),
            ("max", if fact.at_most { t.get("fact_max") } else { "" }),
            ("figure", &figure),
            ("of", fact.of.as_deref().unwrap_or("")),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(read("across 96 configurations, 3% of them", "3%").is_none());
    }
}
