//! Release notes read as an engineer reads them: which lines are breaking changes,
//! deprecations or performance claims, and which sentences change a default. Pure.
//!
//! Works on the plain text of a release entry (`text::html_to_text` turns GitHub's HTML and
//! rendered Markdown into one line per paragraph, heading and list item). A heading is a
//! short line without a full stop; the section it opens lasts until the next heading.

use std::sync::LazyLock;

use regex::Regex;

/// What matters in one release's notes, each line as the notes wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseNotes {
    /// Lines under "Breaking changes", "Backwards incompatible changes", "Behavior changes"
    /// and the like.
    pub breaking: Vec<String>,
    /// Sentences elsewhere that change a default or what users can rely on ("CUDA 13 wheels
    /// by default", "num_stages is now an upper bound").
    pub behaviour: Vec<String>,
    pub deprecations: Vec<String>,
    pub performance: Vec<String>,
    /// Sentences anywhere that fix wrong results: data corruption, miscompilation,
    /// incorrect output, a security hole. Users must upgrade, so the release matters more.
    pub correctness: Vec<String>,
    /// Lines under "Bug fixes" and the like.
    pub fixes: Vec<String>,
    /// The parts of the project the notes are organised by ("CuTe DSL", "NVIDIA backend",
    /// "New Features"), each with its number of lines, in order: the headings of sections
    /// that are neither breaking changes, deprecations nor fixes, without the release's
    /// own title ("CUTLASS 5.0.0") and the headings that sort nothing ("Highlights",
    /// "What's Changed"). Empty sections are left out.
    pub areas: Vec<Area>,
}

/// One part of a project a release's notes report on: a section heading as the notes
/// wrote it, and how many lines stand under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Area {
    pub heading: String,
    pub lines: usize,
}

impl ReleaseNotes {
    /// Breaking changes first, then behaviour changes not already among them.
    pub fn changes_to_act_on(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.breaking.iter().map(String::as_str).collect();
        for b in &self.behaviour {
            if !out.iter().any(|o| o.contains(b.as_str()) || b.contains(o)) {
                out.push(b);
            }
        }
        out
    }
}

/// A release's title as a name: "PyTorch 2.10.0 Release" -> "PyTorch 2.10.0", and
/// "PyTorch 2.9.1 Release, bug fix release" -> "PyTorch 2.9.1", so a heading names the
/// release once and "… 发布" / "… released" does not say it twice; "TensorRT-LLM Release
/// 0.16.0" -> "TensorRT-LLM 0.16.0" likewise. Other titles stay as they are.
pub fn release_name(title: &str) -> std::borrow::Cow<'_, str> {
    let trimmed = title.trim();
    if let Some(c) = NAMED_RELEASE.captures(trimmed) {
        return c.get(1).map_or(trimmed, |m| m.as_str()).into();
    }
    if let Some(c) = RELEASE_THEN_VERSION.captures(trimmed) {
        return format!("{} {}", &c[1], &c[2]).into();
    }
    for suffix in [" release notes", " release", " released", " is released"] {
        let cut = trimmed.len().saturating_sub(suffix.len());
        if trimmed.is_char_boundary(cut) && trimmed[cut..].eq_ignore_ascii_case(suffix) && cut > 0 {
            return trimmed[..cut].trim_end().into();
        }
    }
    trimmed.into()
}

/// A name, the word "Release" and a version that ends the title: "TensorRT-LLM Release
/// 0.16.0".
static RELEASE_THEN_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\S.*?)\s+[Rr]elease\s+(v?\d+(?:\.\d+)+[\w.+-]*)$").expect("valid regex")
});

/// A name and version followed by "Release" and anything after it: "PyTorch 2.9.1 Release,
/// bug fix release", "vLLM v0.8.3 release notes", "TensorRT-LLM Release 0.16.0" is not one
/// (the version comes after).
static NAMED_RELEASE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(.*?\bv?\d+(?:\.\d+)+[\w.+-]*)[\s,:–—-]+(?:is\s+)?release(?:d|\s+notes)?\b")
        .expect("valid regex")
});

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Breaking,
    Deprecations,
    Performance,
    Fixes,
    /// "Known issues": what is still wrong ("a hang can occur; this will be fixed in a
    /// future release") is no fix, no wrong-results fix and no change.
    KnownIssues,
    Other,
}

static CORRECTNESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(data corruption|corrupt(?:s|ed|ing)? (?:data|results|memory)|miscompil\w*|(?:incorrect|wrong|inaccurate) (?:results?|outputs?|answers?|values?|code)|silently (?:wrong|incorrect)|security (?:fix|issue|vulnerability)|cve-\d{4}-\d+)",
    )
    .expect("valid regex")
});

/// A sentence that changes a default or a semantic users rely on, wherever the notes put
/// it: "Atomics are now relaxed by default", "defaults to strict=False", "is now required",
/// "no longer accepts", "changed the default".
static CHANGED_DEFAULT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(by default|(?:now )?defaults? to|no longer defaults?|the default (?:is now|has changed|changed)|default (?:has )?changed|changed? the default|is now an? (?:upper|lower) bound|(?:is|are) now (?:required|mandatory|opt-in|opt-out|relaxed|strict|acq_rel|seq_cst)|now (?:requires?|mandatory|opt-in|opt-out)|now (?:\w+ ){0,3}(?:relaxed|acq_rel|seq_cst) (?:semantics|ordering|memory order)|no longer (?:supported|supports?|accepts?|allowed|available|valid|works?|returns?))\b",
    )
    .expect("valid regex")
});

/// A sentence that removes or renames something users call, or schedules its removal:
/// "X has been removed", "Removed X in favor of Y", "SM101 is renamed to SM110",
/// "deprecated and will be removed". Only counts without [`TRIVIA`].
static REMOVED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(\b(?:has been|have been|was|were|is|are|is now|are now|now(?: we)?) (?:removed|renamed)\b|^(?:removed|renamed)\b|\bremoved support\b|\bwill be removed\b)",
    )
    .expect("valid regex")
});

/// What a removal or rename line is about when it is housekeeping, not a change users act
/// on: "Fixed a crash and removed a spurious warning", "Removed a typo in the docs".
static TRIVIA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(fix\w*|typos?|warnings?|unused|dead code|redundant|duplicated?|spurious|debug|log(?:ging)?|messages?|comments?|whitespace|docs?|documentation|tests?|internal(?:ly)?)\b",
    )
    .expect("valid regex")
});

/// A line that names no fix: thanks, or a summary of unnamed ones ("Various improvements and
/// fixes from the community and CUTLASS team. Thanks to everyone who submitted PRs!"). A
/// fix that credits someone ("Fixed a use-after-free (thanks @alice)") or names what it
/// fixes ("Minor fixes to the FP8 epilogue rounding") is one.
fn says_nothing_fixed(line: &str) -> bool {
    static NOTHING_NAMED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^(?:thanks?\b|thank you\b|(?:various|many|several|misc\w*|minor) (?:bug ?)?(?:fixes|improvements)(?: and (?:bug ?)?(?:fixes|improvements))?(?: (?:from|by) [^.!]*)?(?:[.!]|$))")
            .expect("valid regex")
    });
    NOTHING_NAMED.is_match(line)
}

/// Whether a sentence of release notes changes what users rely on. `in_fixes`: the line
/// stands under a "Bug fixes" heading, where a sentence that is itself a fix restores
/// documented behaviour and is no change to act on.
fn changes_behaviour(sentence: &str, in_fixes: bool) -> bool {
    let trivial = TRIVIA.is_match(sentence);
    if in_fixes && trivial {
        return false;
    }
    CHANGED_DEFAULT.is_match(sentence) || (REMOVED.is_match(sentence) && !trivial)
}

pub fn read(text: &str) -> ReleaseNotes {
    let mut notes = ReleaseNotes::default();
    let mut section = Section::Other;
    // Whether the lines now read stand under the last of `notes.areas`.
    let mut area_open = false;
    for raw in with_their_lists(text) {
        let line = raw.trim().trim_start_matches(['-', '*', '•']).trim();
        if line.is_empty() {
            continue;
        }
        if is_heading(line) {
            section = classify(line);
            area_open = matches!(
                section,
                Section::Other | Section::Performance | Section::KnownIssues
            ) && is_area(line);
            if area_open {
                notes.areas.push(Area {
                    heading: line.to_string(),
                    lines: 0,
                });
            }
            continue;
        }
        if is_closing(line) {
            section = Section::Other;
            area_open = false;
            continue;
        }
        if area_open && let Some(area) = notes.areas.last_mut() {
            area.lines += 1;
        }
        if section == Section::KnownIssues {
            continue;
        }
        for sentence in sentences(line) {
            if CORRECTNESS.is_match(sentence) {
                notes.correctness.push(sentence.to_string());
            }
        }
        match section {
            Section::Breaking => notes.breaking.push(line.to_string()),
            Section::Deprecations => notes.deprecations.push(line.to_string()),
            Section::Performance => notes.performance.push(line.to_string()),
            Section::Fixes if says_nothing_fixed(line) => {}
            Section::Fixes => notes.fixes.push(line.to_string()),
            Section::KnownIssues => {}
            Section::Other => {
                // Notes without headings list their fixes as "Fixed …" items.
                let lower = line.to_ascii_lowercase();
                if lower
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .any(|w| matches!(w, "fix" | "fixed" | "fixes"))
                    && !says_nothing_fixed(line)
                {
                    notes.fixes.push(line.to_string());
                }
            }
        }
        // Changed defaults and semantics count wherever they are written, in plain lines
        // as under any heading but a breaking one (whose lines count already).
        if section != Section::Breaking {
            let parts = sentences(line);
            for (i, sentence) in parts.iter().enumerate() {
                if !changes_behaviour(sentence, section == Section::Fixes) {
                    continue;
                }
                let change = explained(&parts, i);
                match notes.behaviour.last_mut() {
                    // A caption's explanation that is itself a change is said once, with it.
                    Some(last) if last.contains(*sentence) => {}
                    // A change that leans on the one before it says it again: one change.
                    Some(last) if change.starts_with(last.as_str()) => *last = change,
                    _ => notes.behaviour.push(change),
                }
            }
        }
    }
    notes.areas.retain(|a| a.lines > 0);
    notes
}

/// The text's lines, with a sentence that introduces a list of names joined to it: "The
/// constant expression variants of the following instructions have been removed:" and
/// its items "mul", "shl" are one change ("…have been removed: mul, shl."), which alone
/// would end on its colon. Only a sentence (six words or more) takes its list, and only
/// items of at most three words (names, not list items of their own).
fn with_their_lists(text: &str) -> Vec<String> {
    let item = |line: &str| {
        let t = line.trim();
        t.starts_with(['-', '*', '•'])
            && matches!(
                t.trim_start_matches(['-', '*', '•'])
                    .split_whitespace()
                    .count(),
                1..=3
            )
    };
    let mut out: Vec<String> = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let mut line = line.to_string();
        if line.trim_end().ends_with(':') && line.split_whitespace().count() >= 6 {
            let mut names = Vec::new();
            while let Some(next) = lines.next_if(|l| item(l)) {
                names.push(
                    next.trim()
                        .trim_start_matches(['-', '*', '•'])
                        .trim()
                        .to_string(),
                );
            }
            if !names.is_empty() {
                line = format!("{} {}.", line.trim_end(), names.join(", "));
            }
        }
        out.push(line);
    }
    out
}

/// The change the `i`th sentence of a line says, with the sentence after it when it is
/// the line's caption: a list item's bold lead-in ("**CUDA 13 wheels by default.** The
/// Linux wheels on PyPI are now built against CUDA 13.0.") names the change in a few words
/// without a verb, and alone says little.
/// A sentence with no subject of its own that leans on the one before it ([`leans_back`])
/// is said with it.
fn explained(parts: &[&str], i: usize) -> String {
    match parts.get(i + 1) {
        Some(next) if i == 0 && is_caption(parts[0]) => format!("{} {next}", parts[0]),
        _ if i > 0 && leans_back(parts[i]) => format!("{} {}", parts[i - 1], parts[i]),
        _ => parts[i].to_string(),
    }
}

/// A sentence that opens on how something is set, with no subject: "Disabled by default,
/// set NCCL_LAUNCH_ORDER_IMPLICIT=1 to enable." after "Allow to prevent deadlocks … by
/// implicitly ordering NCCL operations using the host program order." (NCCL 2.26.2-1).
/// Alone it does not say what is disabled.
fn leans_back(sentence: &str) -> bool {
    let lower = sentence.to_ascii_lowercase();
    ["enabled", "disabled", "on", "off", "opt-in", "opt-out"]
        .iter()
        .any(|state| lower.starts_with(&format!("{state} by default")))
}

/// A sentence of at most six words without a verb that says what it states: "CUDA 13
/// wheels by default.", not "Python 3.9 is no longer supported.".
fn is_caption(sentence: &str) -> bool {
    const STATES: &[&str] = &[
        "is", "are", "was", "were", "has", "have", "had", "will", "can", "now", "no", "not",
        "does", "do", "must", "should", "may",
    ];
    let words: Vec<String> = sentence
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_ascii_lowercase()
        })
        .collect();
    words.len() <= 6 && !words.iter().any(|w| STATES.contains(&w.as_str()))
}

/// Whether a heading names a part of the project: not the release's own title (it holds a
/// version, "CUTLASS 5.0.0", or says "release") and not one that sorts nothing.
fn is_area(heading: &str) -> bool {
    static VERSION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\d+\.\d+").expect("valid regex"));
    let h = heading.to_ascii_lowercase();
    let h = h.trim_end_matches([':', '!']).trim();
    !VERSION.is_match(h)
        && !h.contains("release")
        && !matches!(
            h,
            "highlights"
                | "key highlights"
                | "major highlights"
                | "what's changed"
                | "what’s changed"
                | "changelog"
                | "changes"
                | "summary"
                | "overview"
                | "notes"
                | "tl;dr"
                | "contributors"
        )
}

fn is_heading(line: &str) -> bool {
    !line.ends_with(['.', '!', '?', ':', ';', ')']) && line.split_whitespace().count() <= 5
}

/// The thanks and changelog lines that end GitHub release notes: not part of any section.
fn is_closing(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.starts_with("thanks to")
        || lower.starts_with("full changelog")
        || lower.starts_with("new contributors")
}

fn classify(heading: &str) -> Section {
    let h = heading.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| h.contains(w));
    if any(&[
        "breaking",
        "incompatib",
        "behavior change",
        "behaviour change",
        "removal",
        "removed",
        "migration",
        "upgrade note",
    ]) {
        Section::Breaking
    } else if any(&["known issue", "known limitation"]) {
        Section::KnownIssues
    } else if h.contains("deprecat") {
        Section::Deprecations
    } else if any(&["performance", "speedup"]) {
        Section::Performance
    } else if any(&["bug fix", "fixes", "fixed"]) {
        Section::Fixes
    } else {
        Section::Other
    }
}

/// Sentences of one line: split after ". " before a letter or digit, except after an
/// abbreviation, so "v3.6.0" and "e.g. the" stay whole and "heuristics. num_stages" splits.
fn sentences(line: &str) -> Vec<&str> {
    const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "etc", "vs", "cf", "approx"];
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    for i in 0..bytes.len() {
        let ends = matches!(bytes[i], b'.' | b'!' | b'?')
            && bytes.get(i + 1) == Some(&b' ')
            && bytes
                .get(i + 2)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'`');
        let word = line
            .get(start..i)
            .and_then(|w| w.rsplit(' ').next())
            .unwrap_or("");
        if ends && !ABBREVIATIONS.contains(&word.to_ascii_lowercase().as_str()) {
            out.push(line[start..=i].trim());
            start = i + 2;
        }
    }
    if start < line.len() {
        out.push(line[start..].trim());
    }
    out.retain(|s| !s.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thanks_and_unnamed_fixes_are_no_fix() {
        // CUTLASS 4.0.0's last line (tests/fixtures/eval/2026-12-23-*).
        let notes = read(
            "- Fixes for split-kv output in MLA.\n\
             - Various improvements and fixes from the community and CUTLASS team. Thanks to everyone who submitted PRs!\n\
             Bug fixes\n\
             - Minor bug fixes and improvements.\n\
             - Fixed a crash in the profiler (thanks @alice).\n\
             - Minor fixes to the FP8 epilogue rounding.",
        );
        assert_eq!(
            notes.fixes,
            vec![
                "Fixes for split-kv output in MLA.",
                "Fixed a crash in the profiler (thanks @alice).",
                "Minor fixes to the FP8 epilogue rounding."
            ]
        );
    }

    #[test]
    fn a_default_said_without_its_subject_is_read_with_the_sentence_before() {
        // NCCL v2.26.2-1's notes (tests/fixtures/eval/2027-01-12-*/feeds/nccl-releases.atom).
        let notes = read(
            "Add implicit launch order\n\
             - Allow to prevent deadlocks when using multiple NCCL communicators per device by implicitly ordering NCCL operations using the host program order. Disabled by default, set NCCL_LAUNCH_ORDER_IMPLICIT=1 to enable.\n\
             - Add a complementary mechanism to detect host threads racing to launch to the same device. Enabled by default, set NCCL_LAUNCH_RACE_FATAL=0 to disable.",
        );
        assert_eq!(notes.behaviour.len(), 2, "{:?}", notes.behaviour);
        assert!(notes.behaviour[0].starts_with("Allow to prevent deadlocks"));
        assert!(notes.behaviour[0].ends_with("NCCL_LAUNCH_ORDER_IMPLICIT=1 to enable."));
        assert!(notes.behaviour[1].starts_with("Add a complementary mechanism"));
        // A sentence with a subject stands alone, whatever word it opens with.
        let notes = read("- Faster kernels. Atomics are now relaxed by default.");
        assert_eq!(notes.behaviour, vec!["Atomics are now relaxed by default."]);
        let notes =
            read("- Faster kernels. On Blackwell, FP8 attention is now enabled by default.");
        assert_eq!(
            notes.behaviour,
            vec!["On Blackwell, FP8 attention is now enabled by default."]
        );
    }

    // Shapes of real GitHub release notes (Triton, PyTorch, CUTLASS), as html_to_text gives
    // them: one line per heading, paragraph and list item.
    const TRITON: &str = "Highlights\nTriton 3.6 is the first release with Blackwell support.\nCompiler\nSoftware pipelining rewrite. The new pass replaces the heuristics. num_stages is now an upper bound rather than an exact count, and the scheduler uses fewer stages when needed.\nBug fixes\nFixed a miscompilation; TRITON_CACHE no longer defaults to the home directory in CI.\nBreaking changes\nPython 3.9 is no longer supported.\nThe TRITON_F32_DEFAULT environment variable has been removed. Use input_precision on tl.dot instead.\nThanks to the 118 people who contributed to this release.\nFull Changelog: v3.5.1...v3.6.0";
    const PYTORCH: &str = "PyTorch 2.10.0 Release Notes\nHighlights\nCUDA 13 wheels by default. The Linux wheels on PyPI are now built against CUDA 13.0.\nBackwards Incompatible Changes\ntorch.export.export defaults to strict=False. Pass strict=True to get the old tracer back (#169951)\nDeprecations\ntorch.jit.script is deprecated (#170001)\nPerformance\nInductor geomean speedup of 1.18x on HuggingFace (#170002)";

    #[test]
    fn fixes_for_wrong_results_and_plain_fix_items_are_found() {
        let notes = read(
            "Patch release.\n- Fixed a miscompilation of tl.dot with a transposed operand.\n- Fixed a build failure with GCC 14.\n- Faster autotuning.",
        );
        assert_eq!(
            notes.correctness,
            vec!["Fixed a miscompilation of tl.dot with a transposed operand."]
        );
        assert_eq!(notes.fixes.len(), 2);
        assert!(notes.changes_to_act_on().is_empty());
    }

    #[test]
    fn breaking_sections_are_read_until_the_closing_lines() {
        let n = read(TRITON);
        assert_eq!(
            n.breaking,
            [
                "Python 3.9 is no longer supported.",
                "The TRITON_F32_DEFAULT environment variable has been removed. Use input_precision on tl.dot instead."
            ]
        );
        assert!(n.deprecations.is_empty());
    }

    #[test]
    fn areas_are_the_sections_that_sort_the_notes_by_part_of_the_project() {
        let area = |heading: &str, lines: usize| Area {
            heading: heading.to_string(),
            lines,
        };
        // Highlights sorts nothing; fixes and breaking changes are counted apart.
        assert_eq!(read(TRITON).areas, [area("Compiler", 1)]);
        // The release's own title is no area.
        assert_eq!(read(PYTORCH).areas, [area("Performance", 1)]);
        let cutlass = read(
            "CUTLASS 5.0.0\nCUTLASS 5.0 is a major release.\nCuTe DSL\nCuTe DSL is out of beta.\nNew cutlass.pipeline abstractions.\nBlackwell SM100 kernels\nNVFP4 GEMM: up to 1.6x over cuBLAS.\nBreaking changes\nRequires CUDA 13.0.\nWhat's Changed\nBump version (#1)\nThanks to everyone.",
        );
        assert_eq!(
            cutlass.areas,
            [area("CuTe DSL", 2), area("Blackwell SM100 kernels", 1)]
        );
        // Notes without headings have no areas; neither has a heading with nothing under it.
        assert!(read("Faster autotuning.\nFixed a crash.").areas.is_empty());
        assert!(read("Compiler\nRuntime\nA line.").areas == [area("Runtime", 1)]);
    }

    #[test]
    fn changed_defaults_are_found_outside_the_breaking_section_but_not_in_fixes() {
        let n = read(TRITON);
        assert_eq!(
            n.behaviour,
            [
                "num_stages is now an upper bound rather than an exact count, and the scheduler uses fewer stages when needed."
            ]
        );
        let p = read(PYTORCH);
        // The bold caption of a list item comes with the sentence that explains it.
        assert_eq!(
            p.behaviour,
            [
                "CUDA 13 wheels by default. The Linux wheels on PyPI are now built against CUDA 13.0."
            ]
        );
        assert_eq!(p.breaking.len(), 1);
        assert_eq!(p.deprecations, ["torch.jit.script is deprecated (#170001)"]);
        assert_eq!(p.performance.len(), 1);
        assert_eq!(
            p.changes_to_act_on(),
            [
                "torch.export.export defaults to strict=False. Pass strict=True to get the old tracer back (#169951)",
                "CUDA 13 wheels by default. The Linux wheels on PyPI are now built against CUDA 13.0."
            ]
        );
    }

    #[test]
    fn a_caption_is_said_with_its_explanation_and_a_short_sentence_alone() {
        let n = read(
            "Highlights\n- Relaxed atomics by default. tl.atomic_add and tl.atomic_cas use sem=\"relaxed\" unless told otherwise.\n- Python 3.9 is no longer supported. Wheels are built for 3.10 to 3.13.",
        );
        assert_eq!(
            n.behaviour,
            [
                "Relaxed atomics by default. tl.atomic_add and tl.atomic_cas use sem=\"relaxed\" unless told otherwise.",
                "Python 3.9 is no longer supported."
            ]
        );
    }

    #[test]
    fn a_changed_memory_ordering_in_a_plain_line_is_a_behaviour_change() {
        let n = read(
            "Triton 3.9.1\nCompiler\n- Atomics are now relaxed by default; pass sem=\"acq_rel\" for the old ordering.\n- Faster autotuning for grouped GEMM.",
        );
        assert_eq!(
            n.behaviour,
            ["Atomics are now relaxed by default; pass sem=\"acq_rel\" for the old ordering."]
        );
        assert_eq!(n.changes_to_act_on().len(), 1);
    }

    /// Real lines of release notes (JAX, CUTLASS, from tests/fixtures/eval/*/feeds), each
    /// with whether it changes what users rely on.
    #[test]
    fn real_release_note_lines_are_told_apart() {
        let changes = [
            "jax_enable_memories flag is set to True by default.",
            "The MHLO MLIR dialect (jax.extend.mlir.mhlo) has been removed. Use the stablehlo dialect instead.",
            "Complex inputs to jax.numpy.clip and jax.numpy.hypot are no longer allowed, after being deprecated since JAX v0.4.27.",
            "From CUDA 13.0, the Blackwell SM101 for Thor GPUs is renamed to SM110.",
            "Exposed jax.set_mesh which acts as a global setter and a context manager. Removed jax.sharding.use_mesh in favor of jax.set_mesh.",
            "The parameters enable_xla and native_serialization for jax2tf.convert are deprecated and will be removed in a future version of JAX.",
            "jax.ShapeDtypeStruct no longer accepts the named_shape argument.",
            "Atomic RMW operations now use relaxed semantics unless sem is given.",
            "Changed the default of num_warps to 8 on Blackwell.",
        ];
        for line in changes {
            assert!(!read(line).behaviour.is_empty(), "missed: {line}");
        }
        let ordinary = [
            "Fixed a crash in the autotuner and removed a warning.",
            "Removed a typo in the README.",
            "Added new jax.process_indices function to replace the jax.process_indexs() function that was deprecated in JAX v0.2.13.",
            "jax.lax.zeros_like_array is deprecated. Please use jax.numpy.zeros_like instead.",
            "Modify default cluster callback values to none 0 to avoid profiler failure when these values are not set in command line.",
            "Removed unused helper functions from the internal test suite.",
            "Faster autotuning for grouped GEMM.",
        ];
        for line in ordinary {
            assert!(read(line).behaviour.is_empty(), "flagged: {line}");
        }
        // Under "Bug fixes", a sentence that is itself a fix restores documented behaviour.
        let n = read(
            "Bug fixes\nFixed a miscompilation; TRITON_CACHE no longer defaults to the home directory in CI.\nPython 3.9 is no longer supported.",
        );
        assert_eq!(n.behaviour, ["Python 3.9 is no longer supported."]);
    }

    #[test]
    fn sentences_split_before_identifiers_but_not_after_abbreviations() {
        assert_eq!(
            sentences("It is new. num_stages changed, e.g. the default. Done"),
            [
                "It is new.",
                "num_stages changed, e.g. the default.",
                "Done"
            ]
        );
    }

    #[test]
    fn release_names_drop_a_trailing_release_word() {
        assert_eq!(release_name("PyTorch 2.10.0 Release"), "PyTorch 2.10.0");
        assert_eq!(
            release_name("PyTorch 2.10.0 Release Notes"),
            "PyTorch 2.10.0"
        );
        assert_eq!(release_name("triton v3.6.0"), "triton v3.6.0");
        assert_eq!(release_name("Release"), "Release");
        assert_eq!(
            release_name("PyTorch 2.9.1 Release, bug fix release"),
            "PyTorch 2.9.1"
        );
        assert_eq!(release_name("vLLM v0.8.3 is released"), "vLLM v0.8.3");
        // The word between the name and the version goes too.
        assert_eq!(
            release_name("TensorRT-LLM Release 0.16.0"),
            "TensorRT-LLM 0.16.0"
        );
        assert_eq!(release_name("Release 1.0"), "Release 1.0");
        assert_eq!(
            release_name("CUDA 13.1 Introduces cuTile Python"),
            "CUDA 13.1 Introduces cuTile Python"
        );
    }

    #[test]
    fn a_change_that_introduces_a_list_of_names_is_said_with_them() {
        let notes = read(
            "Changes to the LLVM IR\n- The constant expression variants of the following instructions have been removed:\n  - mul\n  - shl\n- Inline asm calls no longer accept label arguments.\nHighlights:\n- CUDA 13\n- Blackwell",
        );
        assert_eq!(
            notes.behaviour,
            [
                "The constant expression variants of the following instructions have been removed: mul, shl.",
                "Inline asm calls no longer accept label arguments."
            ]
        );
    }

    #[test]
    fn known_issues_are_no_fixes_nor_changes() {
        let notes = read(
            "Known Issues\n- When using disaggregated serving with KV cache reuse, a hang can occur. This will be fixed in a future release.\n- FP8 GEMM may return incorrect results on SM89; chunked prefill is enabled by default.\nBug Fixes\n- Fixed a crash in the sampler.",
        );
        assert_eq!(notes.fixes, ["Fixed a crash in the sampler."]);
        assert!(notes.correctness.is_empty(), "{:?}", notes.correctness);
        assert!(notes.behaviour.is_empty(), "{:?}", notes.behaviour);
        assert_eq!(notes.areas.len(), 1, "{:?}", notes.areas);
    }

    #[test]
    fn notes_without_sections_have_nothing_to_act_on() {
        let n = read("Patch release for the 4.4 branch.\nFixed a JIT cache collision (#2981).");
        assert!(n.changes_to_act_on().is_empty());
    }
}
