//! Extractive summaries: offline, deterministic, no model. Pure.
//!
//! - summary: the leading sentences of the primary item (else of any item) within the
//!   `summarize.summary_chars` budget; headings and boiler-plate lines are skipped. When they
//!   are not in the reader's script (English notes for a zh-CN reader), they are a quote:
//!   marked, after a lead in the reader's language ("主版本发布，5 项变化需处理。发布说明摘录：「…」").
//! - why it matters: for a release, its breaking changes and its behaviour changes
//!   (changed defaults and semantics wherever the notes write them), quoted and marked
//!   apart ([`crate::release_notes`]); then up to two later sentences carrying impact cues (a quantified result or words such as "faster", "outperforms"); else a line
//!   built from the locale table out of the event kind, its layers (when it has any) and its
//!   quantified results. Each kind of evidence has template variants: within a digest no
//!   lead-in ([`lead_in`]) starts more than [`MAX_SAME_LEAD_IN`] events.
//! - brief (for the overview): a clause without quotes, naming the event and its main
//!   figure with what it measures ([`super::gloss`]).
//! - watch: a locale phrase for what to follow: the changed default to check, else the
//!   first change to plan for in a release with breaking changes, regressions in a
//!   pre-release, reproduction of a paper whose code is out (else whether it will be),
//!   follow-ups of a post.

use std::sync::LazyLock;

use regex::Regex;

use super::gloss;
use crate::digest::Candidate;
use crate::locale::Locale;
use crate::model::{EventText, Item, ItemKind, ReleaseLevel};
use crate::release_notes;
use crate::text::{truncate_chars, truncate_outside_parens};

const WHY_CHARS: usize = 360;
/// Each quoted breaking or behaviour change, at most.
const CHANGE_CHARS: usize = 200;

/// Whether a sentence reports a result, to be quoted after "results given" (发布说明给出的结果,
/// 作者的实测): it holds a quantified result ([`crate::score::quantified_results`]: "2.4x",
/// "40%", "900 GB/s"). Words alone are no measurement ("for dramatic speedups",
/// "state-of-the-art ML workloads"), nor is a deprecation ("Non-grouped convolutions are
/// deprecated.") or a GPU's name ("MI300X"), nor the problem a text sets out to solve
/// ("However, one important challenge is the AllReduce … can contribute up to 30% of
/// end-to-end latency"): a figure of the motivation is no result. Nor is a reference the
/// work is measured against ("the achievable bandwidth of a single MI250X GCD, which
/// according to BabelStream is roughly 1.4 TB/s").
fn reports_a_result(sentence: &str) -> bool {
    !crate::score::quantified_results(sentence).is_empty()
        && !HYPOTHETICAL.is_match(sentence)
        && (!(MOTIVATION.is_match(sentence) || super::gloss::REFERENCE.is_match(sentence))
            || RESULT_VERB.is_match(sentence))
}

/// A figure supposed, not measured: "even a 1% latency or power gain can bring huge
/// savings".
static HYPOTHETICAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\beven an? [\d.]+\s?(?:%|x\b|×)").expect("valid regex"));

/// Words of a problem statement, or of the opening a paper sets out from ("The emergence of
/// hardware support for FP8 …, offering up to 2x the throughput of FP16, presents an
/// attractive opportunity").
static MOTIVATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:challenges?|bottlenecks?|drawbacks?|prohibitive(?:ly)?|owing to|can (?:contribute|account|take|consume|cost)|emergence|opportunit(?:y|ies))\b")
        .expect("valid regex")
});

/// Words with which a text reports what it achieved.
static RESULT_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:achiev(?:e[sd]?|ing|ements?)\b|(?:improv|reduc|outperform|deliver|speed|accelerat|faster|lower|higher|cut|sav)\w*)")
        .expect("valid regex")
});

/// The sentence in which a paper says what it does ("We present TileFuse, a compiler that
/// …", "In this paper, we propose …").
static CONTRIBUTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:(?:in )?this (?:paper|work)|here|to (?:this|that) end)?,?\s*(?:we|this (?:paper|work))\s+(?:\w+\s+){0,2}?(?:present|propose|introduce|describe|design|build|develop|contribute)s?\b",
    )
    .expect("valid regex")
});

/// A contribution sentence that leans on the one before it ("a runtime that combines the
/// two", "to address this", "these limitations"): read alone, it names nothing.
static BACK_REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:the (?:two|three|both|former|latter)|both of them|these (?:two|three|problems|challenges|limitations|issues|gaps|approaches|techniques|methods)|(?:this|that|such a?) (?:problem|challenge|limitation|issue|gap|trade-?off|tension|bottleneck)|address(?:es)? (?:this|that|these|them|it)\b|(?:combines|unifies|bridges|reconciles) (?:them|these|both))",
    )
    .expect("valid regex")
});

/// What a contribution sentence presents: a name and the kind of thing it is ("We present
/// TileFuse, a compiler that …", "We introduce KernelArena, a benchmark of …"). The kinds
/// are the locale's `thing_*` words; anything else is not named.
static PRESENTS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:present|propose|introduce|describe|design|build|develop)s?\s+(?P<name>[A-Z][A-Za-z0-9.+-]*[A-Za-z0-9]|[a-z]+[A-Z][A-Za-z0-9.+-]*),\s+an?\s+(?:[\w-]+\s+){0,3}?(?P<what>compiler|runtime|benchmark|framework|library|system|scheduler|frontend|DSL|tool|profiler|simulator|dataset|autotuner|engine|algorithm|technique|abstraction|IR|allocator)s?\b",
    )
    .expect("valid regex")
});

/// The name and the `thing_*` key of what a paper presents, read from its contribution
/// sentence among its first five `sentences`.
fn presented(sentences: &[String]) -> Option<(String, String)> {
    sentences
        .iter()
        .take(5)
        .filter(|s| CONTRIBUTION.is_match(s))
        .find_map(|s| {
            let c = PRESENTS.captures(s)?;
            Some((
                c["name"].to_string(),
                format!("thing_{}", c["what"].to_lowercase()),
            ))
        })
}

/// A post title that announces things: "CUDA 13.1 Introduces cuTile Python, Faster NVCC
/// Builds, and Tile-Aware Profiling in Nsight", "Introducing ROCprofiler SDK - The Latest
/// Toolkit …". The subject is optional; a subtitle after a dash or colon is not announced.
static ANNOUNCES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:(?P<subject>.+?)\s+)?(?:introduc(?:es|ing)|announc(?:es|ing)|unveil(?:s|ing)|launch(?:es|ing)|brings)\s+(?P<objects>.+?)(?:\s+[-–—]\s+|:\s|[?!.]?$)",
    )
    .expect("valid regex")
});

/// What a post's title announces, in the reader's language (`post_introduces`): each thing
/// the title lists that [`gloss::area`] can say without English words but names ("cuTile
/// Python", "New Python Features" -> 新 Python 功能), "等" for those it cannot, and the
/// subject when it is a name ("CUDA 13.2"). None when the title announces nothing sayable.
fn announced(title: &str, text: &str, known: &[String], t: &Locale) -> Option<String> {
    let c = ANNOUNCES.captures(title)?;
    let objects: Vec<&str> = c["objects"]
        .split(", and ")
        .flat_map(|o| o.split(", "))
        .flat_map(|o| o.split(" and "))
        .map(|o| {
            let o = o.trim();
            ["the ", "a ", "an "]
                .iter()
                .find_map(|a| o.strip_prefix(a))
                .unwrap_or(o)
        })
        .collect();
    let said: Vec<String> = objects
        .iter()
        .filter_map(|o| gloss::area(o, t, text, known))
        .collect();
    if said.is_empty() {
        return None;
    }
    let subject = c
        .name("subject")
        .and_then(|s| gloss::area(s.as_str(), t, text, known));
    let more = if said.len() < objects.len() {
        t.get("list_more")
    } else {
        ""
    };
    let what = said.join(t.get("list_separator"));
    let filled = match subject {
        Some(subject) => t.fill(
            "post_introduces_of",
            &[("subject", &subject), ("what", &what), ("more", more)],
        ),
        None => t.fill("post_introduces", &[("what", &what), ("more", more)]),
    };
    // The template spaces every slot; between two Han characters the space goes.
    Some(tidy_han_spacing(filled.trim_end()))
}

/// A paper's sentences from the one that says what it does: an abstract opens with the
/// problem, and a reader scanning a digest wants the contribution first. All of them when
/// no sentence says (or only a late one does: then the opening is the contribution). When
/// the contribution refers back ("combines the two") and the sentence it refers to fits
/// beside it in `room` characters, that sentence comes first; when it does not, the
/// contribution still leads: what the paper does matters more than its background.
fn from_contribution(sentences: Vec<String>, room: usize) -> Vec<String> {
    match sentences.iter().position(|s| CONTRIBUTION.is_match(s)) {
        Some(i) if i > 0 && i < 5 => {
            let both = sentences[i - 1].chars().count() + 1 + sentences[i].chars().count();
            let start = if BACK_REFERENCE.is_match(&sentences[i]) && both <= room {
                i - 1
            } else {
                i
            };
            sentences[start..].to_vec()
        }
        _ => sentences,
    }
}

/// How many events of one digest may start "why it matters" with the same lead-in.
pub const MAX_SAME_LEAD_IN: usize = 2;

/// The lead-ins of "why it matters" lines already given in one digest, with their counts.
#[derive(Debug, Default)]
pub struct LeadIns(std::collections::BTreeMap<String, usize>);

/// The first three words of a text before any quote, lower-case, each Han character a word
/// of its own and marks and punctuation ignored: "论文报告（对比 X）：" -> "论文报", "The
/// paper reports: “…”" -> "the paper reports". Two lines with the same lead-in read as one
/// template, whatever they quote.
pub fn lead_in(text: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    const QUOTES: [char; 4] = ['「', '“', '"', '‘'];
    // A line may start with a quoted title ("“A Method for…” reports"): that is its lead.
    let text = text.trim_start_matches(|c: char| c == '⚠' || c.is_whitespace());
    let text = text.trim_start_matches(QUOTES);
    let before_quote = text.split(QUOTES).next().unwrap_or("");
    for c in before_quote.chars() {
        let han = ('\u{3400}'..='\u{9fff}').contains(&c);
        if c.is_alphanumeric() && !han || (c == '.' && !word.is_empty()) {
            word.extend(c.to_lowercase());
            continue;
        }
        if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if han {
            words.push(c.to_string());
        }
        if words.len() >= 3 {
            break;
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words.truncate(3);
    words.join(" ")
}

pub fn summarize(candidate: &Candidate, locale: &Locale, budget: usize) -> EventText {
    summarize_varied(candidate, locale, budget, &mut LeadIns::default())
}

/// [`summarize`] for one event of a digest: "why it matters" takes the first variant of
/// its template whose lead-in the digest has used fewer than [`MAX_SAME_LEAD_IN`] times
/// (else the least used, preferring the last, which names the event).
pub fn summarize_varied(
    candidate: &Candidate,
    locale: &Locale,
    budget: usize,
    lead_ins: &mut LeadIns,
) -> EventText {
    let event = &candidate.event;
    let text = event.main_text();
    let sentences = sentences(text);

    // Breaking and behaviour changes are the first thing an engineer needs from release
    // notes: they always lead "why it matters", quoted and marked.
    // Scoring read them (a post announcing a release has notes for its score, but its
    // summary is a post's).
    let notes = candidate
        .assessment
        .notes
        .as_ref()
        .filter(|_| event.primary().kind == ItemKind::Release);
    let all_changes: Vec<&str> = notes
        .as_ref()
        .map(|n| n.changes_to_act_on())
        .unwrap_or_default();
    // Breaking changes fail loudly; a changed default or semantic does not, so one of
    // each is shown when the notes have both.
    let breaking_n = notes.map_or(0, |n| n.breaking.len());
    let (breaking, behaviour) = all_changes.split_at(breaking_n.min(all_changes.len()));
    let (breaking, behaviour): (Vec<&str>, Vec<&str>) = match (breaking, behaviour) {
        ([], b) => (vec![], b.iter().take(2).copied().collect()),
        (b, []) => (b.iter().take(2).copied().collect(), vec![]),
        // The first behaviour change that does not say the breaking one again; when every
        // one does, a second breaking change instead.
        (b, h) => match h.iter().find(|c| !restates(c, b[0])) {
            Some(c) => (vec![b[0]], vec![*c]),
            None => (b.iter().take(2).copied().collect(), vec![]),
        },
    };
    let changes: Vec<&str> = breaking.iter().chain(&behaviour).copied().collect();
    // Each sentence is quoted once per event: the changes "why it matters" quotes are left
    // out of the summary, which goes on with the next sentences instead.
    let quoted_elsewhere = |s: &str| changes.iter().any(|c| c.contains(s) || s.contains(c));
    // A list item is one thought: what follows a quoted change in its item leans on it
    // ("CUDA 12.8 wheels remain available…" after "…now built against CUDA 13.0"), so it
    // is left out with it rather than opening the excerpt mid-thought.
    let leaning = if changes.is_empty() {
        Vec::new()
    } else {
        rest_of_items(text, quoted_elsewhere)
    };
    let quoted_elsewhere = |s: &str| quoted_elsewhere(s) || leaning.iter().any(|l| l == s);
    // Whole sentences up to the room the summary has: all of it in the reader's language,
    // what the lead leaves when the source is quoted (so the quote does not end mid-clause).
    // Built once, from the sentences as written (what a paper presents is read from them).
    let mut lead = sentences
        .first()
        .filter(|first| !in_reader_script(first, locale))
        .map(|_| QuotedLead::new(candidate, locale, all_changes.len(), &sentences));
    let room = lead.as_ref().map_or(budget, |l| l.room(budget));
    let sentences = match event.primary().kind {
        ItemKind::Paper => from_contribution(sentences, room),
        _ => sentences,
    };
    let mut used = 0;
    let mut summary = String::new();
    for (i, s) in sentences.iter().enumerate() {
        if quoted_elsewhere(s) {
            continue;
        }
        let len = s.chars().count();
        if !summary.is_empty() && summary.chars().count() + 1 + len > room {
            break;
        }
        if !summary.is_empty() {
            summary.push(' ');
        }
        summary.push_str(s);
        used = i + 1;
    }
    if summary.is_empty() {
        // Notes that are nothing but their changes: the summary still says what they are.
        if let Some(first) = sentences.first() {
            summary.push_str(first);
            used = 1;
        }
    }
    let extract = truncate_chars(&summary, room);
    let summary = if in_reader_script(&extract, locale) {
        extract.clone()
    } else {
        let lead = lead.get_or_insert_with(|| {
            QuotedLead::new(candidate, locale, all_changes.len(), &sentences)
        });
        lead.fill(&truncate_chars(&extract, lead.room(budget)))
    };
    let cues: Vec<&String> = sentences[used.min(sentences.len())..]
        .iter()
        .filter(|s| reports_a_result(s) && !quoted_elsewhere(s))
        .take(2)
        .collect();
    let cues: Vec<&str> = cues.iter().map(|s| s.as_str()).collect();
    // The results are the source's words: quoted, after a lead-in in the reader's language
    // that says whose words they are. Whole sentences, as many as fit; only a first
    // sentence longer than the room is cut (inside the quote, so it always closes).
    // Against what: the field's own systems the quoted results name ("FlashAttention-3",
    // "vLLM"), as the source spells them.
    // The system the gloss names comes first, so the two never disagree ("（对比 H100、
    // SGLang）：每秒 token 数达到 H100 的 2.7 倍").
    let against_of = |quoted: &str, glossed: Option<String>| {
        let mut names = named_systems(quoted, &candidate.classification.stack);
        // FlashAttention-4's paper is not measured against FlashAttention-4.
        names.retain(|n| !is_own_system(candidate.event.primary(), n));
        if let Some(n) = glossed
            && !names.iter().any(|x| x.eq_ignore_ascii_case(&n))
        {
            names.insert(0, n);
        }
        if names.is_empty() {
            String::new()
        } else {
            locale.fill("why_against", &[("names", &locale.list(&names))])
        }
    };
    let name = name_ref(candidate, locale);
    let reports_key = match event.primary().kind {
        ItemKind::Release => "why_reports_release",
        ItemKind::Paper if crate::score::releases_code(text) => "why_reports_paper_code",
        ItemKind::Paper => "why_reports_paper",
        ItemKind::Post => "why_reports_post",
    };
    // Results in another language than the reader's are said first in the reader's (what
    // each figure measures, as the overview says it), then quoted.
    let report_quote = |budget: usize| {
        (!cues.is_empty()).then(|| {
            let gloss = !in_reader_script(cues[0], locale);
            let reserve = if gloss { GLOSS_CHARS } else { 0 };
            let quoted = whole_sentences(&cues, budget.saturating_sub(reserve));
            // The gloss reads the quoted sentences whole: a quote cut after "to within 8%"
            // still means "of FlashAttention-3", which the gloss must say.
            let (facts, glossed) = if gloss {
                let shown = self::sentences(&quoted).len().min(cues.len());
                let whole: Vec<String> = cues[..shown].iter().map(|s| s.to_string()).collect();
                glossed_fact_of(&whole, event.primary().kind, locale).unwrap_or_default()
            } else {
                (String::new(), None)
            };
            let quote = locale.fill("quote", &[("text", &quoted)]);
            let text = if facts.is_empty() {
                quote
            } else {
                locale.fill("glossed_results", &[("facts", &facts), ("quote", &quote)])
            };
            (text, against_of(&quoted, glossed))
        })
    };
    // A change in another language than the reader's is said in the reader's when its line
    // is one plain shape ("不再支持 Python 3.9"), else quoted.
    let change_text = |line: &str, chars: usize| {
        (!in_reader_script(line, locale))
            .then(|| glossed_change(line, locale))
            .flatten()
            .unwrap_or_else(|| {
                // A quoted line is a sentence: "…(#9023)" gets its full stop inside the
                // quote, so the next sentence does not run on after it.
                let mut line = truncate_chars(line, chars);
                if !line.ends_with(['.', '!', '?', '。', '！', '？', '…']) {
                    let cjk = has_cjk(&line);
                    line.push(if cjk { '。' } else { '.' });
                }
                locale.fill("quote", &[("text", &line)])
            })
    };
    // A gloss ends its sentence, so what follows it ("行为变化：…") does not run on.
    let quote_lines = |lines: &[&str], n: usize| {
        let text = lines
            .iter()
            .take(n)
            .map(|l| change_text(l, CHANGE_CHARS))
            .collect::<Vec<_>>()
            .join(locale.get("change_separator"));
        if text.ends_with(['」', '”', '。', '.']) {
            text
        } else {
            text + locale.get("sentence_end")
        }
    };
    let correctness: Vec<&str> = notes.map_or(vec![], |n| {
        n.correctness.iter().map(String::as_str).collect()
    });
    // Plain fixes the summary already quotes are not quoted again (a wrong-results fix is,
    // marked: it is the reason to upgrade).
    let fixes: Vec<&str> = notes.map_or(vec![], |n| {
        n.fixes
            .iter()
            .map(String::as_str)
            .filter(|f| !extract.contains(f))
            .collect()
    });
    // The evidence decides the template ("why_<key>_<variant>"); what follows its lead
    // (the results after the changes) is the same in every variant.
    let tail_reports = |budget: usize| {
        report_quote(budget).map(|(q, against)| {
            locale.fill(
                &format!("{reports_key}_0"),
                &[("quote", &q), ("against", &against), ("name", &name)],
            )
        })
    };
    let (key, vars, tail): (&str, Vec<(&str, String)>, Vec<String>) = if !breaking.is_empty() {
        let mark = (!behaviour.is_empty()).then(|| {
            locale.fill(
                "why_behaviour_mark",
                &[("changes", &quote_lines(&behaviour, 2))],
            )
        });
        (
            "why_breaking",
            vec![("changes", quote_lines(&breaking, 2))],
            mark.into_iter()
                .chain(tail_reports(WHY_CHARS / 2))
                .collect(),
        )
    } else if !behaviour.is_empty() {
        (
            "why_behaviour",
            vec![("changes", quote_lines(&behaviour, 2))],
            tail_reports(WHY_CHARS / 2).into_iter().collect(),
        )
    } else if !correctness.is_empty() {
        (
            "why_correctness",
            vec![("fixes", quote_lines(&correctness, 2))],
            tail_reports(WHY_CHARS / 2).into_iter().collect(),
        )
    } else if let Some((quote, against)) = report_quote(WHY_CHARS) {
        (
            reports_key,
            vec![("quote", quote), ("against", against)],
            vec![],
        )
    } else if !fixes.is_empty() {
        ("why_fixes", vec![("fixes", quote_lines(&fixes, 2))], vec![])
    } else {
        ("why_fallback", fallback_vars(candidate, locale), vec![])
    };
    let why_it_matters = lead_ins.choose(key, locale, |k| {
        let mut vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
        vars.push(("name", &name));
        let parts: Vec<String> = std::iter::once(locale.fill(k, &vars))
            .chain(tail.iter().cloned())
            .collect();
        join_clauses(&parts, locale)
    });

    // The main result with what it measures: the overview's clause and the watch item say it.
    let fact = glossed_fact(&sentences, event.primary().kind, locale);
    let brief = brief(candidate, locale, fact.clone(), all_changes.len());
    // What to follow, specific to the event: the changed default to check, the first
    // change to plan for, the fix that makes upgrading urgent, or the results a reader
    // would want reproduced.
    // The main result with what it measures (「延迟降低 6 倍」) when it can be said, else
    // the first sentence that holds a result, as written: a bare 「71.4%」 says nothing of
    // what was measured, and the sentence may stress another figure ("…, but only 23.8%").
    let quotes_a_sentence = fact.is_none();
    let claims: Vec<String> = match fact {
        Some(fact) => vec![locale.fill("quote", &[("text", &fact)])],
        None => sentences
            .iter()
            .find(|s| reports_a_result(s))
            .map(|s| locale.fill("quote", &[("text", &truncate_chars(s, 100))]))
            .into_iter()
            .collect(),
    };
    let has_claims = !claims.is_empty();
    let watch_key = match (event.primary().kind, candidate.assessment.release) {
        (ItemKind::Release, _) if !behaviour.is_empty() => "watch_release_behaviour",
        (ItemKind::Release, _) if !breaking.is_empty() => "watch_release_breaking",
        (ItemKind::Release, Some(ReleaseLevel::PreRelease | ReleaseLevel::Nightly)) => {
            "watch_prerelease"
        }
        (ItemKind::Release, _) if !correctness.is_empty() => "watch_release_correctness",
        (ItemKind::Release, _) => "watch_release",
        (ItemKind::Paper, _) if crate::score::releases_code(text) && has_claims => {
            "watch_paper_code_claims"
        }
        (ItemKind::Paper, _) if crate::score::releases_code(text) => "watch_paper_code",
        (ItemKind::Paper, _) if has_claims => "watch_paper_claims",
        (ItemKind::Paper, _) => "watch_paper",
        (ItemKind::Post, _) if has_claims => "watch_post_claims",
        (ItemKind::Post, _) => "watch_post",
    };
    let first_change = behaviour
        .first()
        .or(breaking.first())
        .or(correctness.first())
        .map_or(String::new(), |c| change_text(c, 90));
    // A quoted sentence ends the item ("…, watch for reproductions of its results: “…”"):
    // "「a whole sentence」等结果" does not read.
    let watch_key = if has_claims && quotes_a_sentence && watch_key.ends_with("_claims") {
        format!("{watch_key}_quote")
    } else {
        watch_key.to_string()
    };
    let watch = locale.fill(
        &watch_key,
        &[
            // "TileFuse：代码尚未公开…", not the title cut at 80 characters mid-phrase.
            (
                "title",
                &short_name(candidate).unwrap_or_else(|| truncate_chars(&event.heading(), 80)),
            ),
            ("change", &first_change),
            ("claims", &claims.join(locale.get("list_separator"))),
        ],
    );
    EventText {
        summary,
        why_it_matters,
        brief,
        watch,
    }
}

impl LeadIns {
    /// The text of the first variant `<key>_0`, `<key>_1`, … whose lead-in has been used
    /// fewer than [`MAX_SAME_LEAD_IN`] times, else of the least used one (the later on a
    /// tie: the last variant names the event); its lead-in is counted.
    fn choose(&mut self, key: &str, locale: &Locale, render: impl Fn(&str) -> String) -> String {
        let mut best: Option<(usize, String, String)> = None;
        for v in 0.. {
            let k = format!("{key}_{v}");
            if !locale.has(&k) {
                break;
            }
            let text = render(&k);
            let lead = lead_in(&text);
            let count = self.0.get(&lead).copied().unwrap_or(0);
            if count < MAX_SAME_LEAD_IN {
                best = Some((count, lead, text));
                break;
            }
            if best.as_ref().is_none_or(|(c, _, _)| count <= *c) {
                best = Some((count, lead, text));
            }
        }
        let (_, lead, text) = best.unwrap_or_else(|| (0, String::new(), render(key)));
        *self.0.entry(lead).or_default() += 1;
        text
    }
}

/// The event as a name in a sentence: the release's name ("CUTLASS 5.0.0"), a paper's or
/// post's system name (the title before its colon, "TileFuse"), else its title, cut and
/// marked as a title.
fn name_ref(candidate: &Candidate, locale: &Locale) -> String {
    short_name(candidate).unwrap_or_else(|| {
        let title = without_dangling_word(truncate_chars(&candidate.event.primary().title, 40));
        locale.fill("title_ref", &[("title", &title)])
    })
}

/// Whether `name` is the event's own system: the project a release's title starts with
/// ("vLLM v0.8.3"), or the name a paper's or post's title gives before its colon
/// ("FlashAttention-4: Algorithm and …").
fn is_own_system(primary: &Item, name: &str) -> bool {
    let name = name.to_lowercase();
    let title = primary.title.to_lowercase();
    match primary.kind {
        ItemKind::Release => title.starts_with(&name),
        _ => title
            .split_once(':')
            .is_some_and(|(head, _)| head.trim() == name),
    }
}

/// A name for the event that a sentence in any language may carry: the release's name, or
/// the system a paper or post is about when its title names it before a colon
/// ("TileFuse: Compiling …").
pub fn short_name(candidate: &Candidate) -> Option<String> {
    let primary = candidate.event.primary();
    if primary.kind == ItemKind::Release {
        return Some(truncate_chars(
            &release_notes::release_name(&primary.title),
            80,
        ));
    }
    let (head, _) = primary.title.split_once(':')?;
    let head = head.trim();
    let words: Vec<&str> = head
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .collect();
    // A post's phrase before a colon is no name: "AMD in Action:", "Detailed Summary:",
    // but "vLLM TPU:" is. A paper's head is its system's name even in plain words ("Flex
    // Attention:").
    let named = primary.kind == ItemKind::Paper
        || words.len() == 1
        || words.iter().any(|w| name_by_form(w));
    ((1..=3).contains(&words.len()) && named && !is_phrase(&words) && head.chars().count() <= 32)
        .then(|| head.to_string())
}

/// Words before a colon that say what a paper does rather than name it: "Demystifying
/// NVSHMEM:", "Rethinking Attention:", "Towards Scalable MoE:". A one-word head is a name
/// ("Swing:").
fn is_phrase(words: &[&str]) -> bool {
    let Some(first) = words.first().filter(|_| words.len() > 1) else {
        return false;
    };
    let gerund = first.len() >= 7 && first.ends_with("ing") && !name_by_form(first);
    gerund
        || matches!(
            *first,
            "Towards" | "Toward" | "Beyond" | "On" | "When" | "Why" | "How"
        )
}

/// Whether a word is written as a name: a capital after its first letter ("vLLM", "ROCm",
/// "DeepseekV3", "RCCL") or letters then digits ("MI300", "H100"), in some part of a
/// compound that is not generic ("TensorRT-LLM", "CK-Tile"; not "GPU-Initiated",
/// "Inter-Chiplet"), and not a compound ending in a plain word ("GPU-aware") nor a
/// quantity ("100T", "2-Bit").
fn name_by_form(w: &str) -> bool {
    let name_part = |part: &str| {
        let mixed = part.chars().skip(1).any(|c| c.is_uppercase());
        let numbered = part.contains(|c: char| c.is_ascii_digit());
        part.starts_with(|c: char| c.is_alphabetic())
            && (mixed || numbered)
            && !crate::text::GENERIC_ACRONYMS.contains(&part)
    };
    let plain_tail = w
        .rsplit_once('-')
        .is_some_and(|(_, tail)| tail.chars().all(|c| c.is_lowercase()));
    w.starts_with(|c: char| c.is_alphabetic())
        && !plain_tail
        && !crate::text::GENERIC_ACRONYMS.contains(&w)
        && w.split('-').any(name_part)
}

/// Names a title writes, at most two: words [`name_by_form`], run together with the
/// names and version beside them ("ROCprofiler SDK", "ROCm 6.3.1"), but not a name its
/// source already gives ("ROCm" in a ROCm Blogs post).
fn title_names<'a>(title: &'a str, source: &str) -> Vec<&'a str> {
    let in_source = |w: &str| source.split_whitespace().any(|s| s.eq_ignore_ascii_case(w));
    let is_name = |w: &str| name_by_form(w) && !in_source(w);
    // Each word with its byte range in `title` (a trimmed word is a slice of it).
    let words: Vec<(usize, &str)> = title
        .split(|c: char| c.is_whitespace() || c == '/')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let word = w.trim_matches(|c: char| !c.is_alphanumeric());
            // "vLLM's Core Architecture" names vLLM.
            let word = word
                .strip_suffix("'s")
                .or_else(|| word.strip_suffix("’s"))
                .unwrap_or(word);
            (word.as_ptr() as usize - title.as_ptr() as usize, word)
        })
        .collect();
    let mut names: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (start, first) = words[i];
        if !is_name(first) {
            i += 1;
            continue;
        }
        let mut end = start + first.len();
        i += 1;
        // Only a space may stand between the parts of one name: "SDK - The" ends it.
        while let Some(&(at, next)) = words.get(i) {
            let joined = title[end..at].chars().all(char::is_whitespace);
            if !(joined && (is_name(next) || crate::parse::is_bare_version(next))) {
                break;
            }
            end = at + next.len();
            i += 1;
        }
        let name = &title[start..end];
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.truncate(2);
    names
}

/// The names a post's title holds ([`title_names`]) as a list in the reader's language.
fn said_title_names(primary: &Item, t: &Locale) -> Option<String> {
    let names = title_names(&primary.title, &primary.source);
    (!names.is_empty()).then(|| t.list(&names))
}

/// What a title is about in the reader's words, at most two topics: its runs of two to four
/// words that are each a word the locale glosses (`area_<word>`) or a name, one of them
/// glossed ("LLM Inference" -> LLM 推理, "KV Cache" -> KV 缓存). Punctuation ends a run;
/// "2-Bit" and "Layer-Discriminative" are neither, so they end one too.
fn title_topics(title: &str, t: &Locale, text: &str, known: &[String]) -> Vec<String> {
    let glossed = |w: &str| {
        let key = format!("area_{}", w.to_lowercase());
        t.has(&key) && !t.get(&key).is_empty()
    };
    let sayable =
        |w: &str| glossed(w) || name_by_form(w) || crate::text::GENERIC_ACRONYMS.contains(&w);
    let mut runs: Vec<Vec<&str>> = vec![Vec::new()];
    for token in title.split_whitespace() {
        let word = token.trim_matches(|c: char| !c.is_alphanumeric());
        let run = runs.last_mut().expect("one run at least");
        if sayable(word) && token.starts_with(|c: char| c.is_alphanumeric()) {
            run.push(word);
            if !token.ends_with(|c: char| c.is_alphanumeric()) {
                runs.push(Vec::new());
            }
        } else if !run.is_empty() {
            runs.push(Vec::new());
        }
    }
    // A run neither starts nor ends with a conjunction: "Tracing and Profiling" is not
    // "与性能分析".
    let connector = |w: &&str| w.eq_ignore_ascii_case("and");
    let mut topics: Vec<String> = runs
        .iter_mut()
        .map(|run| {
            while run.first().is_some_and(connector) {
                run.remove(0);
            }
            while run.last().is_some_and(connector) {
                run.pop();
            }
            &*run
        })
        .filter(|run| (2..=4).contains(&run.len()) && run.iter().any(|w| glossed(w)))
        .filter_map(|run| gloss::area(&run.join(" "), t, text, known))
        .collect();
    topics.dedup();
    topics.truncate(2);
    topics
}

/// Whether a source's name names who publishes it ("NVIDIA Technical Blog", "arXiv",
/// "heise online") rather than describing a collection in a phrase of plain words after a
/// capital ("Systems and infrastructure news", "GPU news reading list", "Reading list"), or
/// a query or list of them ("arXiv query: cs.AR, cs.PF, cs.DC", "arXiv cs.DC+cs.PL").
fn names_a_publisher(source: &str) -> bool {
    if source.contains([':', ',', ';', '+']) {
        return false;
    }
    let mut words = source.split_whitespace();
    let first_capital = words
        .next()
        .is_some_and(|w| w.starts_with(|c: char| c.is_uppercase()));
    let rest: Vec<&str> = words.collect();
    !(first_capital
        && !rest.is_empty()
        && rest
            .iter()
            .all(|w| w.chars().all(|c| !c.is_alphabetic() || c.is_lowercase())))
}

/// A figure as a reader writes it: "1,530 TFLOPS" and "3.9 TB/s", but "40x" and "68%"
/// (quantified results are kept without the space, as keys).
pub fn spaced_figure(figure: &str) -> String {
    let unit_at = figure
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .unwrap_or(figure.len());
    let unit = &figure[unit_at..];
    if unit.chars().count() > 1 && unit.starts_with(|c: char| c.is_ascii_alphabetic()) {
        format!("{} {unit}", &figure[..unit_at])
    } else {
        figure.to_string()
    }
}

/// A text cut with '…' (a long paper title) without the word or the colon that led into
/// the cut: "… for Blackwell GPUs through an…" -> "… for Blackwell GPUs through…",
/// "… with MXFP4:…" -> "… with MXFP4…".
fn without_dangling_word(cut: String) -> String {
    let Some(kept) = cut.strip_suffix('…') else {
        return cut;
    };
    let mut words: Vec<&str> = kept.split_whitespace().collect();
    while words.len() > 1
        && words
            .last()
            .is_some_and(|w| DANGLING.contains(&w.to_ascii_lowercase().as_str()))
    {
        words.pop();
    }
    let kept = words.join(" ");
    format!(
        "{}…",
        kept.trim_end_matches([':', ';', ',', '-', '–', '—'])
            .trim_end()
    )
}

/// Words that lead into the rest of a clause: a quote cut after one of them dangles.
const DANGLING: &[&str] = &[
    "a", "an", "the", "at", "in", "on", "of", "for", "to", "with", "by", "from", "as", "than",
    "and", "or", "over", "per", "across", "into", "under", "against", "via", "vs", "through",
    "using", "within", "without", "between", "about", "is", "are",
];

/// Whether `text` is written in the reader's script (the locale's `script`: han or latin).
/// Text that is not is the source's words in another language: a quote.
/// As many of `sentences` as fit in `budget` characters, whole and in order, then the start
/// of the next one when a useful share of the room is left (the comparison a result is
/// measured against often comes second), cut outside parentheses and not after a word that
/// leads into what was cut.
fn whole_sentences(sentences: &[&str], budget: usize) -> String {
    /// Less room than this is not worth a cut sentence.
    const MIN_PART: usize = 40;
    let mut out = String::new();
    for s in sentences {
        let gap = usize::from(!out.is_empty());
        let room = budget.saturating_sub(out.chars().count() + gap);
        if s.chars().count() <= room {
            out.push_str(&" ".repeat(gap));
            out.push_str(s);
            continue;
        }
        if room >= MIN_PART || out.is_empty() {
            out.push_str(&" ".repeat(gap));
            out.push_str(&without_dangling_word(truncate_outside_parens(s, room)));
        }
        break;
    }
    out
}

fn in_reader_script(text: &str, locale: &Locale) -> bool {
    let han = text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    match locale.get("script") {
        "han" => han,
        _ => !han,
    }
}

/// The summary for a reader of another language than the source: a lead in the reader's
/// language that says what the event is (its kind, its source, how many changes it asks
/// for, what a paper presents), then the source's own sentences, quoted.
struct QuotedLead<'a> {
    locale: &'a Locale,
    key: &'static str,
    kind: String,
    source: &'a str,
    changes: String,
    /// "；更新涉及 CuTe DSL（5 条）、Blackwell SM100 内核（4 条）": where a release's
    /// notes put their work, in the reader's language; for notes not sorted by part
    /// (a patch release's list of fixes) how many fixes they hold ("；含 3 项修复").
    outline: String,
    presents: String,
}

impl<'a> QuotedLead<'a> {
    fn new(
        candidate: &'a Candidate,
        locale: &'a Locale,
        changes: usize,
        sentences: &[String],
    ) -> QuotedLead<'a> {
        let primary = candidate.event.primary();
        let key = match primary.kind {
            ItemKind::Release => "summary_quoted_release",
            ItemKind::Paper => "summary_quoted_paper",
            ItemKind::Post => "summary_quoted_post",
        };
        let changes = if changes > 0 {
            locale.count("summary_changes", changes)
        } else {
            String::new()
        };
        // "arXiv 新论文，提出编译器 TileFuse": what the paper is, in the reader's language,
        // before its words are quoted.
        let presents = match primary.kind {
            ItemKind::Paper => presented(sentences).map(|(name, what)| {
                locale.fill(
                    "paper_presents",
                    &[("what", locale.get(&what)), ("name", &name)],
                )
            }),
            // "NVIDIA 技术文章，介绍 CUDA 13.1 的 cuTile Python 等": what the post announces.
            // Else the names its title holds: "ROCm Blogs 技术文章，涉及 MI300X、RCCL".
            ItemKind::Post => announced(
                &primary.title,
                candidate.event.main_text(),
                &candidate.classification.keywords,
                locale,
            )
            .or_else(|| {
                said_title_names(primary, locale)
                    .map(|names| locale.fill("post_about", &[("what", &names)]))
            }),
            ItemKind::Release => None,
        };
        let outline = match (primary.kind, &candidate.assessment.notes) {
            (ItemKind::Release, Some(notes)) => outline(notes, locale, candidate),
            _ => String::new(),
        };
        QuotedLead {
            locale,
            key,
            kind: locale.get(&kind_key(candidate)).to_string(),
            // A collection ("Reading list") is no publisher: "技术文章，涉及 GEMMs", not
            // "Reading list 技术文章".
            source: if names_a_publisher(&primary.source) {
                &primary.source
            } else {
                ""
            },
            changes,
            outline,
            presents: presents.unwrap_or_default(),
        }
    }

    fn fill(&self, quote: &str) -> String {
        let filled = self.locale.fill(
            self.key,
            &[
                ("kind", &self.kind),
                ("source", self.source),
                ("changes", &self.changes),
                ("areas", &self.outline),
                ("presents", &self.presents),
                ("quote", &self.locale.fill("quote", &[("text", quote)])),
            ],
        );
        filled.trim_start().to_string()
    }

    /// The characters left for the quote once the lead ("主版本发布，6 项变化需处理。发布说明
    /// 摘录：") has taken its share of the budget: the quote gets the rest and always closes.
    fn room(&self, budget: usize) -> usize {
        budget.saturating_sub(self.fill("").chars().count()).max(60)
    }
}

/// Areas said at most, in the notes' order; more are "等".
const MAX_AREAS: usize = 3;

/// The parts of the project a release's notes report on, in the reader's language, with
/// their number of lines ("；更新涉及 CuTe DSL（5 条）、Blackwell SM100 内核（4 条）"). Only
/// headings [`gloss::area`] can say without English words but names. When none can (notes
/// not sorted by part, as a patch release's list of fixes), how many fixes they hold
/// ("；含 3 项修复"); else empty.
fn outline(notes: &release_notes::ReleaseNotes, locale: &Locale, candidate: &Candidate) -> String {
    let text = candidate.event.main_text();
    let known = &candidate.classification.keywords;
    let said: Vec<String> = notes
        .areas
        .iter()
        .filter_map(|a| {
            let area = gloss::area(&a.heading, locale, text, known)?;
            Some(locale.fill(
                "area_lines",
                &[("area", &area), ("n", &a.lines.to_string())],
            ))
        })
        .collect();
    if said.is_empty() {
        return match notes.fixes.len() {
            0 => String::new(),
            n => locale.fill("summary_fixes", &[("n", &n.to_string())]),
        };
    }
    let mut list = said[..said.len().min(MAX_AREAS)].join(locale.get("list_separator"));
    if said.len() > MAX_AREAS {
        list.push_str(locale.get("list_more"));
    }
    // "更新涉及 编译器": the template's space before the list stays only beside a name.
    let template = locale.get("summary_areas");
    let (before, after) = template.split_once("{list}").unwrap_or((template, ""));
    format!("{}{after}", gloss::join_words(before.trim_end(), &list))
}

/// The locale key naming the event's kind ("主版本发布", "A new paper").
fn kind_key(candidate: &Candidate) -> String {
    match (candidate.event.primary().kind, candidate.assessment.release) {
        (ItemKind::Release, Some(level)) => format!("kind_release_{}", level.as_str()),
        (ItemKind::Release, None) => "kind_release_minor".to_string(),
        (ItemKind::Paper, _) => "kind_paper".to_string(),
        (ItemKind::Post, _) => "kind_post".to_string(),
    }
}

/// The names in `stack` (lower-case phrases) that `text` mentions, spelled as the text
/// spells them, in order of appearance. A name inside a longer one ("flashattention" in
/// "FlashAttention-3") is dropped.
fn named_systems(text: &str, stack: &[String]) -> Vec<String> {
    let lower = text.to_lowercase();
    // Byte offsets agree between `text` and `lower` only for ASCII; elsewhere give up on
    // the spelling and use the phrase itself.
    let same_offsets = lower.len() == text.len();
    let mut found: Vec<(usize, usize)> = Vec::new();
    for name in stack {
        let mut from = 0;
        while let Some(at) = lower[from..].find(name.as_str()) {
            let start = from + at;
            let end = start + name.len();
            let bounded = |i: usize| {
                lower
                    .as_bytes()
                    .get(i)
                    .is_none_or(|b| !b.is_ascii_alphabetic())
            };
            // A name starts a word ("2Triton" does not); digits may follow it (a version).
            let starts_word = start == 0 || !lower.as_bytes()[start - 1].is_ascii_alphanumeric();
            if starts_word && bounded(end) {
                // Keep a version suffix: "FlashAttention-3", "FlashAttention2".
                let tail = lower.as_bytes()[end..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit() || **b == b'-')
                    .count();
                let tail = if lower.as_bytes()[end..end + tail]
                    .iter()
                    .any(u8::is_ascii_digit)
                {
                    tail
                } else {
                    0
                };
                // "Triton2Triton" is a task's name, not Triton 2.
                if bounded(end + tail) {
                    found.push((start, end + tail));
                    break;
                }
            }
            from = end;
        }
    }
    found.sort();
    found.dedup();
    // Drop spans inside another span.
    let spans: Vec<(usize, usize)> = found
        .iter()
        .filter(|(s, e)| {
            !found
                .iter()
                .any(|(s2, e2)| (s2, e2) != (s, e) && s2 <= s && e <= e2)
        })
        .copied()
        .collect();
    let mut names: Vec<String> = Vec::new();
    for (s, e) in spans.into_iter().take(3) {
        let name = if same_offsets {
            &text[s..e]
        } else {
            &lower[s..e]
        };
        if !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            names.push(name.to_string());
        }
    }
    names
}

/// The parts of "why it matters" as one text: in English separated by a space (each ends
/// its own sentence), in Chinese without spaces, a part that does not end a sentence (a
/// quote 「…」) closed with "。" first.
/// Whether a text ends its sentence: with a full stop, or with a quote whose last
/// sentence has its own ("…compiler.」" takes no "。" after it).
fn ends_a_sentence(text: &str) -> bool {
    let inner = text.trim_end_matches(['」', '”']);
    text.ends_with(['。', '！', '？'])
        || (inner.len() < text.len() && inner.ends_with(['.', '!', '?', '。', '！', '？']))
}

fn join_clauses(parts: &[String], locale: &Locale) -> String {
    let han = locale.get("script") == "han";
    let mut out = String::new();
    for part in parts {
        if !out.is_empty() {
            if !han {
                out.push(' ');
            } else if !ends_a_sentence(&out) {
                out.push_str(locale.get("sentence_end"));
            }
        }
        out.push_str(part);
    }
    out
}

/// Room kept for the gloss before a quote of another language.
const GLOSS_CHARS: usize = 30;

/// What the first figure of `sentences` whose measure the words around it say measures, in
/// the reader's language ("编译速度达到此前的 2.4 倍"): the figure the overview names too.
/// One only: a second figure's words are more often a share of cases ("6.1% beat the
/// reference by more than 10%") than a result, and a wrong gloss is worse than none.
fn glossed_fact(sentences: &[String], kind: ItemKind, t: &Locale) -> Option<String> {
    glossed_fact_of(sentences, kind, t).map(|(fact, _)| fact)
}

/// [`glossed_fact`] with the system the figure is measured against, when it names one
/// ("vLLM" of 吞吐量达到 vLLM 的 1.42 倍).
fn glossed_fact_of(
    sentences: &[String],
    kind: ItemKind,
    t: &Locale,
) -> Option<(String, Option<String>)> {
    sentences
        .iter()
        .filter(|s| reports_a_result(s))
        .flat_map(|s| {
            crate::score::quantified_results(s)
                .into_iter()
                .map(move |figure| (s, figure))
        })
        .find_map(|(s, figure)| super::gloss::read(s, &figure))
        .map(|mut fact| {
            // A paper's or a post's multiple compared with nothing named is against its
            // baseline: only a release has a "before" (此前) of its own.
            if kind != ItemKind::Release
                && fact.of.is_none()
                && matches!(
                    fact.direction,
                    super::gloss::Direction::Up | super::gloss::Direction::Down
                )
                && fact.figure.ends_with(['x', '×'])
            {
                fact.of = Some(super::gloss::Against::Baseline);
            }
            let named = match &fact.of {
                Some(super::gloss::Against::Named(n)) => Some(n.clone()),
                _ => None,
            };
            (super::gloss::render(&fact, t), named)
        })
}

/// A release-note line said in the reader's language when each of its sentences is one of
/// the plain shapes of [`super::gloss::change`] ("不再支持 Python 3.9；最低版本要求改为
/// Python 3.10"); None when any is not.
fn glossed_change(line: &str, t: &Locale) -> Option<String> {
    let parts: Option<Vec<String>> = sentences(line)
        .iter()
        .map(|s| super::gloss::change(s, t))
        .collect();
    parts
        .filter(|p| !p.is_empty())
        .map(|p| p.join(t.get("change_separator")))
}

/// One clause for the overview, in the reader's language and without quotes: the event by
/// name, how many changes it asks of its users, and its main reported figure with what the
/// figure measures ("CUTLASS 5.0.0 发布，含 5 项需处理的变化，编译速度达到此前的 2.4 倍"). The
/// source's own words stay in the event's body.
fn brief(candidate: &Candidate, t: &Locale, fact: Option<String>, changes: usize) -> String {
    let primary = candidate.event.primary();
    // A post without a system name before a colon is named by the names its title holds
    // ("ROCm Blogs 关于 DeepseekV3、SGLang 的技术文章"), not left as "a post".
    let name = short_name(candidate).or_else(|| {
        (primary.kind == ItemKind::Post)
            .then(|| said_title_names(primary, t))
            .flatten()
    });
    let text = if primary.kind == ItemKind::Release {
        let changes = if changes > 0 {
            t.count("brief_changes", changes)
        } else {
            String::new()
        };
        // Without changes to act on, the fixes it brings.
        let fixes = candidate
            .assessment
            .notes
            .as_ref()
            .map_or(0, |n| n.fixes.len());
        let changes = if changes.is_empty() && fixes > 0 {
            t.count("brief_fixes", fixes)
        } else {
            changes
        };
        let fact = fact.map_or(String::new(), |f| {
            t.fill("brief_release_fact", &[("fact", &f)])
        });
        let level = candidate.assessment.release.map_or("minor", |l| l.as_str());
        t.fill(
            "brief_release",
            &[
                ("name", name.as_deref().unwrap_or(&primary.title)),
                ("level", t.get(&format!("brief_level_{level}"))),
                ("changes", &changes),
                ("fact", &fact),
            ],
        )
    } else {
        let kind = if primary.kind == ItemKind::Paper {
            "paper"
        } else {
            "post"
        };
        // A source that describes a collection ("Systems and infrastructure news") is no
        // publisher to name: "a post on ROCm 6.3.1", not "Systems and infrastructure news's".
        let anon = if names_a_publisher(&primary.source) {
            ""
        } else {
            "_anon"
        };
        // Unnamed, it is said by what its title is about ("arXiv 上一篇关于 LLM 推理、KV 缓存的
        // 新论文") when the locale can say that, not as only "a new paper".
        let topics = || {
            let topics = title_topics(
                &primary.title,
                t,
                candidate.event.main_text(),
                &candidate.classification.keywords,
            );
            (!topics.is_empty()).then(|| t.list(&topics))
        };
        let subject = match (&name, name.is_none().then(topics).flatten()) {
            (Some(n), _) => t.fill(
                &format!("brief_subject_{kind}{anon}"),
                &[("name", n), ("source", &primary.source)],
            ),
            (None, Some(topic)) => t.fill(
                &format!("brief_subject_{kind}_topic{anon}"),
                &[("name", &topic), ("source", &primary.source)],
            ),
            // A locale whose readers read the title's language may quote it (en: "a post
            // from ROCm Blogs, “Seismic stencil codes - part 1”,"); zh-CN does not.
            // zh-CN says what part of the stack it touches ("ROCm Blogs 的一篇关于基准测试的技术
            // 文章"), when the event has layers.
            (None, None) => {
                let title = without_dangling_word(truncate_chars(&primary.title, 60));
                // The one layer it touches most: three in a headline ("一篇关于前端、优化、
                // 内核代码生成的技术文章") say little and read long; the body lists them all.
                let layers = main_layer(&candidate.classification)
                    .map_or(String::new(), |l| t.layer(l).to_string());
                let by_layers = if layers.is_empty() { "" } else { "_layers" };
                t.fill(
                    &format!("brief_subject_{kind}_unnamed{by_layers}{anon}"),
                    &[
                        ("source", &primary.source),
                        ("title", &t.fill("title_ref", &[("title", &title)])),
                        ("layers", &layers),
                    ],
                )
            }
        };
        match fact {
            Some(f) => t.fill("brief_reports", &[("subject", &subject), ("fact", &f)]),
            None => t.fill(&format!("brief_plain_{kind}"), &[("subject", &subject)]),
        }
    };
    tidy_han_spacing(&text)
}

/// The tagged layer with the most phrase points (the first in configuration order on a
/// tie).
fn main_layer(c: &crate::classify::Classification) -> Option<&str> {
    let points = |layer: &str| {
        c.layer_points
            .iter()
            .find(|(l, _)| l == layer)
            .map_or(0.0, |(_, p)| *p)
    };
    c.layers
        .iter()
        .map(String::as_str)
        .reduce(|best, l| if points(l) > points(best) { l } else { best })
}

/// Drops a space between two Han characters, which a template can leave where a name
/// would have stood ("一篇新论文 报告" -> "一篇新论文报告").
fn tidy_han_spacing(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let han = |c: Option<&char>| c.is_some_and(|c| ('\u{3400}'..='\u{9fff}').contains(c));
    chars
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            !(**c == ' ' && han(chars.get(i.wrapping_sub(1))) && han(chars.get(i + 1)))
        })
        .map(|(_, c)| *c)
        .collect()
}

/// The variables of the "why it matters" line for texts without an impact sentence: the
/// kind of event, its layers (when it has any) and its quantified results.
fn fallback_vars(candidate: &Candidate, locale: &Locale) -> Vec<(&'static str, String)> {
    let layers: Vec<&str> = candidate
        .classification
        .layers
        .iter()
        .map(|l| locale.layer(l))
        .collect();
    let layers = locale.list(&layers);
    // Figures of the sentences that report a result: a problem statement's "up to 90% of
    // the time" or a table cell, bare, tells the reader nothing.
    let reported: Vec<String> = sentences(candidate.event.main_text())
        .into_iter()
        .filter(|s| reports_a_result(s))
        .collect();
    let results: Vec<&str> = candidate
        .assessment
        .quantified
        .iter()
        .filter(|q| reported.iter().any(|s| s.contains(q.as_str())))
        .take(3)
        .map(String::as_str)
        .collect();
    let signal = if results.is_empty() {
        String::new()
    } else {
        locale.fill(
            "why_signal",
            &[("results", &results.join(locale.get("list_separator")))],
        )
    };
    // No layers: no "touching ," with nothing after it.
    let layers = if layers.is_empty() {
        String::new()
    } else {
        // "涉及运行时", but "涉及 robotics" for a configured layer the locale cannot name.
        tidy_han_spacing(&locale.fill("why_layers", &[("layers", &layers)]))
    };
    // Whom it concerns: the field's systems its title names ("与 vLLM、ROCm 的用户相关"),
    // but not a phrase of the list that names no product ("CUDA kernels": a name of
    // several words is written in title case, "Composable Kernel"), nor a release's own
    // system ("vLLM v0.8.3" concerns vLLM's users, which says nothing).
    let primary = candidate.event.primary();
    let title_case = |w: &str| {
        let mut chars = w.chars();
        chars.next().is_some_and(char::is_uppercase) && chars.all(|c| !c.is_uppercase())
    };
    let users: Vec<String> = named_systems(&primary.title, &candidate.classification.stack)
        .into_iter()
        .filter(|n| !n.contains(' ') || n.split_whitespace().all(title_case))
        .filter(|n| !is_own_system(primary, n))
        .collect();
    let audience = if users.is_empty() {
        String::new()
    } else {
        locale.fill("why_audience", &[("names", &locale.list(&users))])
    };
    // A paper or post whose code is out can be tried today.
    let code = if primary.kind != ItemKind::Release
        && crate::score::releases_code(candidate.event.main_text())
    {
        locale.get("why_code").to_string()
    } else {
        String::new()
    };
    let kind = locale.get(&kind_key(candidate)).to_string();
    // After "“Title”:" the kind goes on the sentence: "a technical post", not "A".
    let mut chars = kind.chars();
    let kind_after_colon = chars
        .next()
        .map_or(String::new(), |c| c.to_lowercase().chain(chars).collect());
    vec![
        ("kind", kind),
        ("kind_after_colon", kind_after_colon),
        ("layers", layers),
        ("audience", audience),
        ("code", code),
        ("signal", signal),
    ]
}

/// The locale's "why it matters" line for texts without an impact sentence (its first
/// variant).
pub fn fallback_why(candidate: &Candidate, locale: &Locale) -> String {
    let vars = fallback_vars(candidate, locale);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
    locale.fill("why_fallback_0", &vars)
}

/// Whether a text holds CJK characters (and so splits and ends sentences as Chinese does).
fn has_cjk(text: &str) -> bool {
    text.chars().any(|c| c > '\u{2e80}')
}

/// Sentences of a text, in order, each ending with punctuation. Lines are units of their own
/// (list items in release notes); short lines without punctuation are headings and skipped.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        let list_item = trimmed.starts_with(['-', '*', '•']);
        let line = trimmed.trim_start_matches(['-', '*', '•']).trim();
        // A Markdown table's row ("| 1 | 971 GB/s | 948 GB/s |") is no sentence: its figures
        // mean nothing without the header.
        if line.is_empty() || is_boilerplate(line) || line.matches('|').count() >= 3 {
            continue;
        }
        // Headings: short lines without a full stop ("Highlights", "Backwards Incompatible
        // Changes", "Highlights include:"); list items may be shorter.
        let ends_with_stop = line.ends_with(['.', '!', '?', '。', '！', '？']);
        let words = line.split_whitespace().count();
        let cjk = has_cjk(line);
        let short = if cjk {
            line.chars().count() < 12
        } else {
            words < if list_item { 5 } else { 7 }
        };
        if !ends_with_stop && short {
            continue;
        }
        for sentence in split_sentences(line) {
            let mut s = sentence.trim().to_string();
            if s.is_empty() {
                continue;
            }
            // "Highlights include:" introduces a list; bold lead-ins such as "TorchInductor
            // performance." name one. Neither says anything on its own.
            let cjk = has_cjk(&s);
            if s.ends_with(':')
                || (!cjk && s.split_whitespace().count() < 3)
                || is_instruction(&s)
                || is_announcement(&s)
            {
                continue;
            }
            if s.ends_with(';') {
                s.pop();
                s.push('.');
            } else if !s.ends_with(['.', '!', '?', '。', '！', '？', '"']) {
                s.push('.');
            }
            out.push(s);
        }
    }
    out
}

/// The sentences of each list item ("- …") that come after one `quoted` accepts.
fn rest_of_items(text: &str, quoted: impl Fn(&str) -> bool) -> Vec<String> {
    text.lines()
        .filter(|line| line.trim_start().starts_with(['-', '*', '•']))
        .flat_map(|line| {
            let item = sentences(line);
            let first = item.iter().position(|s| quoted(s));
            item.into_iter().skip(first.map_or(usize::MAX, |i| i + 1))
        })
        .collect()
}

/// A sentence that tells the reader what to do rather than what happened ("Please read the
/// migration guide before upgrading.", "pip install x==5.0.0 installs the DSL"): no news
/// for a digest, and in another language than the reader's, a quote they read for nothing.
fn is_instruction(sentence: &str) -> bool {
    let lower = sentence.to_ascii_lowercase();
    [
        "please ",
        "pip install ",
        "conda install ",
        "to install",
        "refer to ",
        "see the ",
    ]
    .iter()
    .any(|start| lower.starts_with(start))
}

/// A sentence that announces rather than says ("We are excited to announce the release of
/// PyTorch 2.9", "This release is composed of 3161 commits from 536 contributors"): the title
/// already names the release, and the reader learns nothing from the ceremony.
fn is_announcement(sentence: &str) -> bool {
    // Every sentence of every summary passes here (both languages): no allocation beyond
    // the lower-case copy, and the regex only for a sentence that says "release".
    let lower = sentence.to_ascii_lowercase().replace('\u{2019}', "'");
    let lower = lower.strip_prefix("today, ").unwrap_or(&lower);
    let pleased = ["we are ", "we're ", "i am ", "i'm "]
        .iter()
        .filter_map(|who| lower.strip_prefix(who))
        .any(|rest| {
            [
                "excited",
                "pleased",
                "happy",
                "thrilled",
                "proud",
                "delighted",
            ]
            .iter()
            .any(|w| {
                rest.strip_prefix(w)
                    .is_some_and(|r| r.starts_with(" to announce"))
            })
        });
    let tally = lower.starts_with("this release")
        && lower.contains(" commits")
        && lower.contains("contributor");
    pleased || tally || (lower.contains(" release") && RELEASE_LEVEL_ONLY.is_match(lower))
}

/// A sentence that only says what kind of release it is ("CUTLASS 5.0 is a major release
/// with breaking changes."): the lead says that already (主版本发布，6 项变化需处理), and
/// the breaking changes are listed.
static RELEASE_LEVEL_ONLY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[\w .®-]{1,40}? v?\d[\w.]* is an? (?:major|minor|patch|bug[- ]?fix|maintenance|feature|point) release(?: with (?:breaking changes|bug fixes|many improvements))?[.!]?$",
    )
    .expect("valid regex")
});

/// A line that says nothing about the news: links, "read more", and the bibliographic
/// lines a paper summary or a reading list opens with ("Citation: A. Author, B. Author.
/// arXiv:2511.15076v2, …"), whose names would fill the quote instead of the finding.
fn is_boilerplate(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    [
        "citation:",
        "cite as:",
        "cite this",
        "authors:",
        "author:",
        "bibtex",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
        || lower.starts_with("full changelog")
        || lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("the post ")
        || lower.starts_with("continue reading")
        || lower.starts_with("read more")
}

/// Splits after '.', '!' or '?' followed by a space and a letter or digit, unless the word
/// before is an abbreviation ("e.g. the" stays whole; "v3.6.0" has no space), and after CJK
/// full stops. A sentence may start in lower case: release notes often begin one with a
/// command or an identifier ("pip install …", "num_stages is now …").
fn split_sentences(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for w in 0..chars.len() {
        let (i, c) = chars[w];
        let end = i + c.len_utf8();
        let split = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => {
                let next = chars.get(w + 1).map(|x| x.1);
                let after = chars.get(w + 2).map(|x| x.1);
                // "82. 42%" is a decimal broken by the source, not two sentences: digits
                // on both sides, and a percentage or multiple after.
                let broken_decimal = c == '.'
                    && w > 0
                    && chars[w - 1].1.is_ascii_digit()
                    && after.is_some_and(|a| a.is_ascii_digit())
                    && chars[w + 2..]
                        .iter()
                        .map(|x| x.1)
                        .find(|c| !c.is_ascii_digit())
                        .is_some_and(|c| matches!(c, '%' | 'x' | '×'));
                next == Some(' ')
                    && after.is_some_and(char::is_alphanumeric)
                    && !broken_decimal
                    && !ends_with_abbreviation(&line[start..end])
            }
            _ => false,
        };
        if split {
            parts.push(&line[start..end]);
            start = end;
        }
    }
    if start < line.len() {
        parts.push(&line[start..]);
    }
    parts
}

fn ends_with_abbreviation(s: &str) -> bool {
    let last = s.rsplit(' ').next().unwrap_or("").to_ascii_lowercase();
    matches!(
        last.as_str(),
        "e.g."
            | "i.e."
            | "et al."
            | "al."
            | "vs."
            | "fig."
            | "eq."
            | "sec."
            | "approx."
            | "etc."
            | "cf."
            | "resp."
            | "incl."
            | "ca."
            | "no."
    )
}

/// Whether `change` says again what `said` says: it names two figures or more (a version,
/// "C++20", "13.0") and `said` names them all. CUTLASS 5.0's opening line ("… the minimum
/// toolchain is CUDA 13.0 with a C++20 host compiler") after its breaking change "Requires
/// CUDA Toolkit 13.0 or newer and C++20 (GCC 11+, …)".
fn restates(change: &str, said: &str) -> bool {
    // Versions and standards ("13.0", "C++20", "3.9"), not names with a digit ("FP8",
    // "SM90", "H100"), which two different changes share.
    fn figures(text: &str) -> std::collections::BTreeSet<String> {
        text.split(|c: char| c.is_whitespace() || ",;:()[]\"“”「」".contains(c))
            .map(|w| w.trim_end_matches(['.', '!']))
            .filter(|w| {
                w.chars().any(|c| c.is_ascii_digit())
                    && (w.starts_with(|c: char| c.is_ascii_digit()) || w.contains(['.', '+']))
            })
            .map(|w| w.trim_end_matches('+'))
            .map(str::to_lowercase)
            .collect()
    }
    let named = figures(change);
    named.len() >= 2 && named.is_subset(&figures(said))
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_a_paper_presents_is_named_by_its_kind() {
        let abstract_ = "Kernels are written by hand. We present TileFuse, a compiler that generates fused attention kernels. It is fast.";
        assert_eq!(
            presented(&sentences(abstract_)),
            Some(("TileFuse".into(), "thing_compiler".into()))
        );
        for (text, expected) in [
            (
                "We present Tessera, a serving runtime that combines the two.",
                Some(("Tessera", "thing_runtime")),
            ),
            (
                "We introduce KernelArena, a benchmark of 412 kernel-generation tasks.",
                Some(("KernelArena", "thing_benchmark")),
            ),
            (
                "In this paper, we propose vTensor, a GPU memory allocator for LLM serving.",
                Some(("vTensor", "thing_allocator")),
            ),
            // Not a kind the locale names, or no name: nothing is said.
            ("We present Foo, a study of kernels.", None),
            ("We present a compiler that fuses kernels.", None),
            ("We find that X, a compiler, is slow.", None),
        ] {
            assert_eq!(
                presented(&sentences(text)),
                expected.map(|(n, w)| (n.to_string(), w.to_string())),
                "{text}"
            );
        }
    }

    #[test]
    fn only_a_release_has_a_before_to_be_compared_with() {
        let t = Locale::builtin("zh-CN");
        let said =
            vec!["The TMA model achieves a 1.5x speedup in matrix multiplication.".to_string()];
        assert_eq!(
            glossed_fact(&said, ItemKind::Release, &t).as_deref(),
            Some("速度达到此前的 1.5 倍")
        );
        for kind in [ItemKind::Paper, ItemKind::Post] {
            assert_eq!(
                glossed_fact(&said, kind, &t).as_deref(),
                Some("速度达到对比基线的 1.5 倍")
            );
        }
        // A GPU's name is not a multiple; words without a figure measure nothing.
        for no_result in [
            "we benchmarked six configurations on AMD Instinct MI300X",
            "Non-grouped convolutions are deprecated.",
            "memory is only considered up to date at kernel boundaries",
            "like FlashAttention for dramatic speedups and memory savings",
            "CUDA 13.1 accepts bytecode from any 13.x toolkit",
            "However, one important challenge is the AllReduce communication operation can contribute up to 30% of end-to-end (E2E) latency.",
            "Owing to the prohibitively large overhead (e.g., 10×) of GPUs' native memory allocator, DNN frameworks adopt a caching allocator.",
            "However, its disadvantage is that it provides the maximum bandwidth of 50 GB/s between GCDs.",
            "This is why model optimization is paramount at each and every level: when one deals with these kinds of scale, even a 1% latency or power gain can bring huge savings.",
            "All of these numbers fall significantly short of the achievable bandwidth of a single MI250X GCD, which according to the BabelStream case studies is roughly 1.3 TB/s to 1.4 TB/s.",
            // A GPU's data sheet, not the post's measurement (tests/fixtures/eval/2027-01-14-*).
            "The peak memory bandwidth is 5.3 TB/s.",
            "All that gets fed with eight HBM3 stacks, providing 5.3 TB/s of bandwidth and 192 GB of DRAM capacity.",
            "Our inference throughput data was generated on a H100 SXM5 box which has 3.35TB per second of memory bandwidth (compared to the 2.04TB/s of H100 PCIe).",
            // The hardware the paper builds on, not its result (NestedFP, 2506.02024).
            "The emergence of hardware support for FP8 arithmetic, offering up to 2x the throughput of FP16, presents an attractive opportunity for interactive LLM serving.",
        ] {
            assert!(!reports_a_result(no_result), "{no_result}");
        }
        assert!(reports_a_result("a 2.4x speedup"));
        assert!(reports_a_result(
            "SGEMM-cube achieves up to 77% of the theoretical FP32-equivalent peak performance."
        ));
        assert!(reports_a_result(
            "RCCLX removes the bottleneck and reduces AllReduce latency by 30%."
        ));
        // A table's rows are no sentences.
        assert_eq!(
            sentences("Bandwidth by radius.\n| Radius | x | y |\n| 1 | 971 GB/s | 948 GB/s |"),
            ["Bandwidth by radius."]
        );
    }

    #[test]
    fn a_posts_title_names_what_it_is_about() {
        let names = |title| title_names(title, "Tech news");
        assert_eq!(
            names("Optimizing DeepseekV3 Inference on SGLang Using ROCm Profiling Tools"),
            vec!["DeepseekV3", "SGLang"]
        );
        assert_eq!(
            names("Deep dive into the MI300 compute and memory partition modes"),
            vec!["MI300"]
        );
        assert_eq!(names("GPU-aware MPI with ROCm"), vec!["MPI", "ROCm"]);
        assert_eq!(names("ROCm 6.3.1 release notes"), vec!["ROCm 6.3.1"]);
        assert_eq!(
            names("Introducing ROCprofiler SDK - The Latest Toolkit"),
            vec!["ROCprofiler SDK"]
        );
        assert_eq!(
            names("MI300X Inter-Chiplet Bandwidth with TensorRT-LLM"),
            vec!["MI300X", "TensorRT-LLM"]
        );
        assert_eq!(
            title_names("Benchmarking using ROCm and AMD GPUs: MLPerf", "ROCm Blogs"),
            vec!["MLPerf"]
        );
        assert!(names("Boosting AI Performance on GPUs: a Guide").is_empty());
        // A possessive names its owner, once.
        assert_eq!(
            names("A Major Upgrade to vLLM's Core: vLLM’s Scheduler"),
            vec!["vLLM"]
        );
        let zh = Locale::builtin("zh-CN");
        assert_eq!(
            title_topics(
                "Pushing the Limits of LLM Inference via 2-Bit Layer-Discriminative KV Cache",
                &zh,
                "",
                &[]
            ),
            vec!["LLM 推理", "KV 缓存"]
        );
        assert!(title_topics("Efficient Communication: a Study", &zh, "", &[]).is_empty());
        assert!(title_topics("Application Tracing and Profiling", &zh, "", &[]).is_empty());
        assert!(names("Quantization Down to 2-Bit with 100T Tokens").is_empty());
        assert_eq!(
            names("Building NVSHMEM: GPU-Initiated Networking at 2.2k tok/s/H200"),
            vec!["NVSHMEM", "H200"]
        );
    }

    #[test]
    fn a_source_that_describes_a_collection_is_not_named_as_a_publisher() {
        for publisher in [
            "NVIDIA Technical Blog",
            "arXiv",
            "heise online",
            "ROCm Blogs",
            "NVIDIA",
        ] {
            assert!(names_a_publisher(publisher), "{publisher}");
        }
        for collection in [
            "Systems and infrastructure news",
            "GPU news reading list",
            "Reading list",
            "arXiv query: cs.AR, cs.PF, cs.DC",
            "arXiv cs.DC+cs.PL+cs.AR",
        ] {
            assert!(!names_a_publisher(collection), "{collection}");
        }
        // Nor is it named in the summary's lead.
        let mut c = candidate(ItemKind::Post, "Decode GEMMs are latency-bound.", &[]);
        c.event.items[0].source = "Reading list".into();
        let summary = summarize(&c, &Locale::builtin("zh-CN"), 300).summary;
        assert!(summary.starts_with("技术文章"), "{summary}");
    }

    #[test]
    fn what_a_post_announces_is_said_in_chinese_with_names_as_written() {
        let t = Locale::builtin("zh-CN");
        let text = "This release brings a Python front end called cuTile. Builds are faster.";
        let known = vec!["nsight".to_string()];
        for (title, expected) in [
            (
                "CUDA 13.1 Introduces cuTile Python, Faster NVCC Builds, and Tile-Aware Profiling in Nsight",
                Some("，介绍 CUDA 13.1 的 cuTile Python 等"),
            ),
            (
                "CUDA 13.2 Introduces Enhanced CUDA Tile Support and New Python Features",
                Some("，介绍 CUDA 13.2 的新 Python 功能等"),
            ),
            (
                "Introducing ROCprofiler SDK - The Latest Toolkit for Performance Profiling.",
                Some("，介绍 ROCprofiler SDK"),
            ),
            // Nothing it lists can be said without English words; no announcement at all.
            ("Announcing faster builds", None),
            (
                "Fusing Communication and Compute with a New Device API",
                None,
            ),
        ] {
            assert_eq!(
                announced(title, text, &known, &t).as_deref(),
                expected,
                "{title}"
            );
        }
    }

    #[test]
    fn a_paper_is_summarised_from_its_contribution() {
        let abstract_ = vec![
            "Attention kernels are still written by hand.".to_string(),
            "They must orchestrate TMA copies.".to_string(),
            "We present TileFuse, a compiler that generates fused attention kernels.".to_string(),
            "TileFuse reaches 1,530 TFLOPS.".to_string(),
        ];
        assert_eq!(from_contribution(abstract_.clone(), 300)[0], abstract_[2]);
        for opening in [
            "In this paper, we propose X, a scheduler.",
            "Here we introduce X.",
            "This work presents X.",
            "We further develop X.",
        ] {
            assert!(CONTRIBUTION.is_match(opening), "{opening}");
        }
        assert!(!CONTRIBUTION.is_match("We find that kernels are slow."));
        let none = vec!["Kernels are slow.".to_string(), "X is fast.".to_string()];
        assert_eq!(from_contribution(none.clone(), 300), none);
        // A contribution that leans on the sentence before it keeps that sentence.
        let leaning = vec![
            "Serving is bound by CPU overhead.".to_string(),
            "CUDA Graphs remove launch cost, while persistent kernels avoid launches.".to_string(),
            "We present Tessera, a serving runtime that combines the two: graphs drive kernels."
                .to_string(),
            "Tessera is 1.42x faster.".to_string(),
        ];
        assert_eq!(
            from_contribution(leaning.clone(), 300),
            leaning[1..].to_vec()
        );
        // Without room for both, the contribution leads alone.
        assert_eq!(
            from_contribution(leaning.clone(), 100),
            leaning[2..].to_vec()
        );
        for back in [
            "To address these limitations, we propose X.",
            "We present X, which bridges this gap.",
            "We introduce X to address this.",
        ] {
            assert!(BACK_REFERENCE.is_match(back), "{back}");
        }
        for alone in [
            "We present X, a compiler for two-CTA kernels.",
            "We introduce X, this paper's scheduler for these GPUs.",
        ] {
            assert!(!BACK_REFERENCE.is_match(alone), "{alone}");
        }
    }

    #[test]
    fn announcement_ceremony_is_not_news() {
        assert!(is_announcement(
            "We are excited to announce the release of PyTorch 2.9 (release notes)!"
        ));
        assert!(is_announcement(
            "This release is composed of 3161 commits from 536 contributors since PyTorch 2.8."
        ));
        assert!(!is_announcement(
            "This release adds FP8 GEMM kernels for sm_100a."
        ));
        assert!(!is_announcement("We announce a 2x faster scheduler."));
        assert!(is_announcement(
            "CUTLASS 5.0 is a major release with breaking changes."
        ));
        assert!(!is_announcement(
            "CUTLASS 5.0 is a major release that adds CuTe DSL AOT compilation."
        ));
        assert!(is_announcement(
            "Today, we\u{2019}re thrilled to announce Triton 3.6."
        ));
    }

    #[test]
    fn a_citation_line_is_not_the_news() {
        // A reading list's paper summary (tests/fixtures/eval/2025-10-22-arxiv-and-posts):
        // its first paragraph names the authors, its second says what the paper is about.
        let text = "Citation: Khaled Hamidouche, John Bachan, Pak Markthub. NVIDIA Corporation. arXiv:2511.15076v2, November 24, 2025.\nAbstract\nGIN (GPU-Initiated Networking) is part of NCCL 2.28's new Device API.";
        assert_eq!(
            sentences(text),
            ["GIN (GPU-Initiated Networking) is part of NCCL 2.28's new Device API."]
        );
        // A sentence that merely mentions authors stays.
        assert_eq!(
            sentences("Authors of kernels can now register them as custom ops.").len(),
            1
        );
    }

    #[test]
    fn figures_read_as_written() {
        assert_eq!(spaced_figure("1,530TFLOPS"), "1,530 TFLOPS");
        assert_eq!(spaced_figure("3.9TB/s"), "3.9 TB/s");
        assert_eq!(spaced_figure("40x"), "40x");
        assert_eq!(spaced_figure("68%"), "68%");
    }

    #[test]
    fn named_systems_keep_the_sources_spelling_and_version() {
        let stack: Vec<String> = ["flashattention", "cudnn", "vllm", "cute"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            named_systems(
                "1.9x faster than FlashAttention-3 and cuDNN 9.13; vLLM too; execute",
                &stack
            ),
            vec!["FlashAttention-3", "cuDNN", "vLLM"]
        );
        let triton = vec!["triton".to_string()];
        assert!(named_systems("2.75× on 20 Triton2Triton tasks", &triton).is_empty());
        assert_eq!(
            named_systems("Triton2 and Triton", &triton),
            vec!["Triton2"]
        );
    }

    use super::*;
    use crate::testkit::candidate;

    #[test]
    fn sentences_skip_headings_and_keep_versions_whole() {
        let text = "Highlights\nBackwards Incompatible Changes\n- Adds tl.atomic_poll for all v3.6.0 users\n• Bug fixes\nWe compare with FA3, e.g. Hopper. It is 1.9x faster. That is all!\nFull Changelog: https://x";
        assert_eq!(
            sentences(text),
            vec![
                "Adds tl.atomic_poll for all v3.6.0 users.",
                "We compare with FA3, e.g. Hopper.",
                "It is 1.9x faster.",
                "That is all!"
            ]
        );
        // A sentence may start in lower case (a command, an identifier); an abbreviation
        // before a lower-case word does not end one; an install command is no news.
        assert_eq!(
            sentences(
                "CuTe DSL is out of beta, e.g. the DSL is stable. pip install nvidia-cutlass-dsl installs it. num_stages is now an upper bound."
            ),
            vec![
                "CuTe DSL is out of beta, e.g. the DSL is stable.",
                "num_stages is now an upper bound."
            ]
        );
        // A decimal the source broke with a space stays in its sentence; a year that ends
        // one does not join the next.
        assert_eq!(
            sentences(
                "IntJudge agrees at 82. 42% with humans. It shipped in 2023. 42 teams use it."
            ),
            vec![
                "IntJudge agrees at 82. 42% with humans.",
                "It shipped in 2023.",
                "42 teams use it."
            ]
        );
    }

    #[test]
    fn chinese_sentences_split_on_full_stops() {
        assert_eq!(
            sentences("第一句话足够长。第二句。"),
            vec!["第一句话足够长。", "第二句。"]
        );
    }

    #[test]
    fn lead_ins_are_the_templates_words_not_the_quotes() {
        assert_eq!(lead_in("⚠ 不兼容变化：「Python 3.9」"), "不 兼 容");
        assert_eq!(lead_in("论文报告（对比 vLLM）：「…」"), "论 文 报");
        assert_eq!(
            lead_in("⚠ Breaking changes: “Python 3.9”"),
            "breaking changes"
        );
        assert_eq!(
            lead_in("The paper reports (against vLLM): “…”"),
            "the paper reports"
        );
        assert_eq!(lead_in("PyTorch 2.10.0 修复：「…」"), "pytorch 2.10.0 修");
    }

    #[test]
    fn why_it_matters_varies_its_lead_in_across_a_digest() {
        let t = Locale::builtin("zh-CN");
        let c = candidate(
            ItemKind::Paper,
            "We present a tile compiler. It is 1.9x faster than the baseline on B200.",
            &["kernel_codegen"],
        );
        let mut used = LeadIns::default();
        let leads: Vec<String> = (0..5)
            .map(|_| lead_in(&summarize_varied(&c, &t, 40, &mut used).why_it_matters))
            .collect();
        for lead in &leads {
            let n = leads.iter().filter(|l| *l == lead).count();
            assert!(n <= MAX_SAME_LEAD_IN, "{lead} starts {n} of {leads:?}");
        }
    }

    /// For each language, whether the notes' "why it matters" and watch item carry the
    /// behaviour-change mark, with the texts.
    fn behaviour_marked(notes: &str) -> Vec<(bool, bool, EventText)> {
        [
            ("zh-CN", "行为变化：", "行为变化「"),
            ("en", "Behaviour change:", "Behaviour change:"),
        ]
        .into_iter()
        .map(|(lang, mark, watch_mark)| {
            let t = Locale::builtin(lang);
            let text = summarize(&candidate(ItemKind::Release, notes, &["runtime"]), &t, 60);
            (
                text.why_it_matters.contains(mark),
                text.watch.contains(watch_mark),
                text,
            )
        })
        .collect()
    }

    #[test]
    fn a_default_changed_in_a_plain_line_reaches_why_and_watch_marked() {
        let notes = "Highlights\nTriton 3.9.1 is a bug-fix release for Blackwell users.\n- Atomics are now relaxed by default; pass sem=\"acq_rel\" to keep the old ordering.\n- Improved autotuning for grouped GEMM.";
        for (why, watch, text) in behaviour_marked(notes) {
            assert!(why && watch, "{text:?}");
            assert!(
                text.why_it_matters
                    .contains("Atomics are now relaxed by default")
            );
            assert!(text.watch.contains("Atomics are now relaxed"));
        }
    }

    #[test]
    fn a_behaviour_change_that_repeats_the_breaking_one_is_not_quoted_twice() {
        // The demo's CUTLASS 5.0.0 (examples/feeds/cutlass-releases.atom), shortened: its
        // opening line restates the toolchain requirement its breaking section lists.
        let notes = "CUTLASS 5.0 is a major release with breaking changes. CuTe DSL is now the primary Python interface to CUTLASS, and the minimum toolchain is CUDA 13.0 with a C++20 host compiler.\n\nBreaking changes\n- Requires CUDA Toolkit 13.0 or newer and C++20 (GCC 11+, Clang 17+, MSVC 19.38+).\n- CUTLASS 2.x device-level kernels for Volta and Turing (SM70/SM75) have been removed.";
        for lang in ["zh-CN", "en"] {
            let t = Locale::builtin(lang);
            let text = summarize(&candidate(ItemKind::Release, notes, &["runtime"]), &t, 300);
            let why = &text.why_it_matters;
            assert_eq!(why.matches("13.0").count(), 1, "{why}");
            assert!(
                why.contains("Volta and Turing"),
                "the second breaking change: {why}"
            );
        }
        assert!(restates(
            "the minimum toolchain is CUDA 13.0 with a C++20 host compiler.",
            "Requires CUDA Toolkit 13.0 or newer and C++20 (GCC 11+, Clang 17+)."
        ));
        // One shared figure, or a figure of its own, is a change of its own; names with
        // a digit are no figures.
        assert!(!restates(
            "SM90 kernels now use FP8 accumulation by default.",
            "The FP8 path for SM90 kernels has been removed."
        ));
        assert!(!restates(
            "CUDA 13.0 wheels by default.",
            "Requires CUDA 13.0."
        ));
        assert!(!restates(
            "Builds now use CUDA 13.0 and C++23.",
            "Requires CUDA 13.0 and C++20."
        ));
    }

    #[test]
    fn the_excerpt_does_not_open_with_what_leans_on_a_quoted_change() {
        let notes = "Highlights\n- **CUDA 13 wheels by default.** The wheels on PyPI are now built against CUDA 13.0. CUDA 12.8 wheels remain available from the cu128 index.\n- Inductor is 1.18x faster on the HuggingFace suite than in 2.9.";
        for lang in ["zh-CN", "en"] {
            let t = Locale::builtin(lang);
            let text = summarize(&candidate(ItemKind::Release, notes, &["runtime"]), &t, 300);
            assert!(
                text.why_it_matters.contains("now built against CUDA 13.0"),
                "{text:?}"
            );
            assert!(!text.summary.contains("remain available"), "{text:?}");
            assert!(
                text.summary.contains("Inductor is 1.18x faster"),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_quoted_change_ends_its_sentence_once() {
        let notes = "Highlights\nTriton 3.9.1 is a bug-fix release for Blackwell users.\n- num_stages is now an upper bound rather than an exact count by default (#9023)\n- Compile time is 40% lower than in 3.5.1 on TritonBench.";
        let why = |lang: &str| {
            let t = Locale::builtin(lang);
            summarize(&candidate(ItemKind::Release, notes, &["runtime"]), &t, 60).why_it_matters
        };
        let (en, zh) = (why("en"), why("zh-CN"));
        assert!(en.contains("(#9023).” "), "{en}");
        assert!(zh.contains("(#9023).」发布说明"), "{zh}");
    }

    #[test]
    fn ordinary_lines_of_release_notes_are_no_behaviour_change() {
        let notes = "Highlights\nA patch release for the 4.4 branch with two fixes.\n- Fixed a crash in the autotuner and removed a warning.\n- Removed a typo in the README.";
        for (why, watch, text) in behaviour_marked(notes) {
            assert!(!why && !watch, "{text:?}");
        }
    }

    #[test]
    fn an_event_without_layers_gets_no_dangling_layer_list() {
        let t = Locale::builtin("zh-CN");
        let c = candidate(ItemKind::Release, "A small release with one change.", &[]);
        assert_eq!(summarize(&c, &t, 300).why_it_matters, "次版本发布。");
        let c = candidate(
            ItemKind::Release,
            "A small release with one change.",
            &["runtime"],
        );
        assert_eq!(
            summarize(&c, &t, 300).why_it_matters,
            "次版本发布，涉及运行时。"
        );
    }

    #[test]
    fn a_papers_name_is_its_system_not_a_phrase_of_what_it_does() {
        let named = |title: &str| {
            let mut c = candidate(ItemKind::Paper, "", &[]);
            c.event.items[0].title = title.into();
            short_name(&c)
        };
        assert_eq!(
            named("Swing: Short-cutting Rings").as_deref(),
            Some("Swing")
        );
        assert_eq!(
            named("Flex Attention: A Model").as_deref(),
            Some("Flex Attention")
        );
        assert_eq!(named("Demystifying NVSHMEM: An Analysis"), None);
        assert_eq!(named("Towards Scalable MoE: A Study"), None);
    }

    #[test]
    fn a_watch_item_that_quotes_a_sentence_ends_with_it() {
        let zh = Locale::builtin("zh-CN");
        let c = candidate(
            ItemKind::Paper,
            "We present a benchmark of kernels. The strongest agent produces correct kernels for 71.4% of tasks, but only 23.8% of tasks are both correct and fast.",
            &["benchmark"],
        );
        let watch = summarize(&c, &zh, 300).watch;
        assert!(
            watch.contains("关注其结果能否被独立复现：「The strongest agent"),
            "{watch}"
        );
        assert!(!watch.contains("等结果"), "{watch}");
    }

    #[test]
    fn a_paper_whose_code_is_out_is_watched_for_reproduction() {
        let t = Locale::builtin("en");
        let c = candidate(
            ItemKind::Paper,
            "We present a compiler for tiles that generates attention kernels. Our code is publicly available at github.com/x/y.",
            &["kernel_codegen"],
        );
        assert!(summarize(&c, &t, 300).watch.contains("its code is public"));
    }

    #[test]
    fn the_system_a_gloss_names_is_among_those_the_results_are_against() {
        let mut post = candidate(
            ItemKind::Post,
            "We deployed DeepSeek on GB200 NVL72. SGLang achieved 7,583 tokens per second per GPU for decoding, a 2.7x speedup compared to the H100 for 2,000-token inputs.",
            &["runtime"],
        );
        post.classification.stack = vec!["sglang".into()];
        let why = summarize(&post, &Locale::builtin("zh-CN"), 60).why_it_matters;
        assert!(
            why.contains("（对比 H100、SGLang）：速度达到 H100 的 2.7 倍"),
            "{why}"
        );
    }

    #[test]
    fn a_paper_is_not_said_to_be_measured_against_its_own_system() {
        let mut paper = candidate(
            ItemKind::Paper,
            "Attention is the bottleneck of long-context inference on new GPUs. We demonstrate that our method, FlashAttention-4, achieves up to 1.3× speedup over cuDNN 9.13 and 2.7× over Triton on B200 GPUs with BF16.",
            &["kernel_codegen"],
        );
        paper.event.items[0].title =
            "FlashAttention-4: Algorithm and Kernel Pipelining Co-Design".into();
        paper.classification.stack = vec!["flashattention".into(), "cudnn".into(), "triton".into()];
        let why = summarize(&paper, &Locale::builtin("en"), 60).why_it_matters;
        assert!(why.contains("(against cuDNN and Triton)"), "{why}");
    }

    #[test]
    fn why_it_matters_without_results_says_whom_it_concerns_and_whether_code_is_out() {
        let zh = Locale::builtin("zh-CN");
        let en = Locale::builtin("en");
        let stack = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        let mut post = candidate(
            ItemKind::Post,
            "Per-token activation scaling for FP8. The code is available at https://github.com/vllm-project/vllm.",
            &["optimization"],
        );
        post.event.items[0].title = "PTPC-FP8: Boosting vLLM Performance on AMD ROCm".into();
        post.classification.stack = stack(&["vllm", "rocm"]);
        assert_eq!(
            fallback_why(&post, &zh),
            "技术文章，涉及优化，与 vLLM、ROCm 的用户相关，代码已公开。"
        );
        assert_eq!(
            fallback_why(&post, &en),
            "A technical post touching optimization; of interest to users of vLLM and ROCm; its code is out."
        );
        // The variant that names the event first goes on after its colon in lower case.
        let mut vars = fallback_vars(&post, &en);
        vars.push(("name", "PTPC-FP8".into()));
        let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
        assert!(
            en.fill("why_fallback_1", &vars)
                .starts_with("PTPC-FP8: a technical post touching optimization;")
        );
        // A release's own project, and a phrase that names no product, concern no one.
        let mut release = candidate(ItemKind::Release, "Fixes.", &["runtime"]);
        release.event.items[0].title = "vLLM v0.8.3 for CUDA Kernel users".into();
        release.classification.stack = stack(&["vllm", "cuda kernel"]);
        assert_eq!(fallback_why(&release, &zh), "次版本发布，涉及运行时。");
    }

    #[test]
    fn a_cut_text_does_not_end_on_a_word_that_leads_into_the_cut() {
        assert_eq!(
            without_dangling_word("Fused Attention Kernels for Blackwell GPUs through an…".into()),
            "Fused Attention Kernels for Blackwell GPUs…"
        );
        assert_eq!(without_dangling_word("Whole title".into()), "Whole title");
        assert_eq!(
            without_dangling_word("Unveiling the Potential of Quantization with MXFP4:…".into()),
            "Unveiling the Potential of Quantization with MXFP4…"
        );
    }

    #[test]
    fn an_english_overview_quotes_the_title_of_a_post_it_cannot_name() {
        let en = Locale::builtin("en");
        let mut c = candidate(
            ItemKind::Post,
            "Seismic workloads run on GPUs.",
            &["runtime"],
        );
        c.event.items[0].title = "Seismic stencil codes - part 1".into();
        c.event.items[0].source = "ROCm Blogs".into();
        assert_eq!(
            summarize(&c, &en, 300).brief,
            "a post from ROCm Blogs, “Seismic stencil codes - part 1”, is out"
        );
        // zh-CN readers are not handed an English title in the overview: the post is said by
        // the part of the stack it touches.
        let zh = Locale::builtin("zh-CN");
        assert_eq!(
            summarize(&c, &zh, 300).brief,
            "ROCm Blogs 的一篇关于运行时的技术文章发布"
        );
        // Of several layers, the one it touches most: the body lists them all.
        c.classification.layers = vec!["frontend".into(), "runtime".into(), "benchmark".into()];
        c.classification.layer_points = vec![
            ("frontend".into(), 2.5),
            ("runtime".into(), 9.0),
            ("benchmark".into(), 4.0),
        ];
        assert_eq!(
            summarize(&c, &zh, 300).brief,
            "ROCm Blogs 的一篇关于运行时的技术文章发布"
        );
    }
}
