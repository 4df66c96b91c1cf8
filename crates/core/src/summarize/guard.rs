//! What an LLM reply's prose may not do, besides inventing numbers ([`super::numbers`]):
//! link anywhere but the event's own sources, name a project or company no source names, or
//! be written in another script than the digest's language. Pure.
//!
//! Each check finds the first offence and returns it, so the fallback note and the log can
//! say what was refused.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::locale::Locale;
use crate::model::Item;

/// Final labels that make a dotted token a domain name. Deliberately not every TLD: file
/// endings (`.py`, `.so`, `.cc`, `.md`, `.rs`, `.sh`) and code paths (`torch.compile`,
/// `tl.dot`) must not read as links.
const TLDS: &[&str] = &[
    "com", "org", "net", "io", "ai", "dev", "cn", "gov", "edu", "co", "app", "info", "biz", "me",
    "us", "uk", "de", "fr", "jp", "kr", "ru", "eu", "hk", "tw", "xyz", "site", "online", "tech",
    "top", "tv", "ly", "gg", "blog", "cloud", "news", "link",
];

/// Field words and units a reply may use although no source spells them.
const COMMON_WORDS: &[&str] = &[
    "gpu",
    "cpu",
    "tpu",
    "npu",
    "api",
    "llm",
    "ml",
    "ai",
    "fp4",
    "fp6",
    "fp8",
    "fp16",
    "fp32",
    "fp64",
    "bf16",
    "tf32",
    "int4",
    "int8",
    "flops",
    "tflops",
    "pflops",
    "gflops",
    "kb",
    "mb",
    "gb",
    "tb",
    "gib",
    "mib",
    "gbps",
    "tbps",
    "ghz",
    "mhz",
    "hbm",
    "sram",
    "dram",
    "ram",
    "vram",
    "simd",
    "simt",
    "isa",
    "ir",
    "jit",
    "aot",
    "dsl",
    "sdk",
    "abi",
    "cli",
    "os",
    "io",
    "ci",
    "pr",
    "kv",
    "moe",
    "gemm",
    "gemv",
    "blas",
    "rl",
    "nlp",
    "hpc",
    "ok",
    "q1",
    "q2",
    "q3",
    "q4",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// URLs with a scheme (`https://`, `ftp://`, ...): the characters RFC 3986 allows, less the
/// parentheses and quotes that usually close them in prose.
static SCHEME_URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)[a-z][a-z0-9+.\-]*://[A-Za-z0-9\-._~:/?#\[\]@!$&*+,;=%]+").expect("regex")
});
/// Markdown links `[text](target)`; the target is group 1.
static MARKDOWN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[[^\]\n]*\]\(\s*<?([^)\s>]*)>?[^)]*\)").expect("regex"));
/// Angle-bracket autolinks with a scheme (`<https://x>`, `<mailto:a@b>`).
static AUTOLINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^<>\s]*)>").expect("regex"));
/// `www.` hosts, whatever their ending.
static WWW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)www\.[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*(?:/[A-Za-z0-9\-._~/?#=&%]*)?")
        .expect("regex")
});
/// Scheme-less host names with an optional path; kept only when the final label is a TLD.
static HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?\.)+([A-Za-z]{2,24})(?::\d+)?(?:/[A-Za-z0-9\-._~/?#=&%]*)?",
    )
    .expect("regex")
});
/// Runs of ASCII letters and digits: the unit a name is checked in.
static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z0-9]+").expect("regex"));

/// What the event's sources allow a reply to link and name.
pub struct Sources {
    /// Titles, texts and source names, lowercased: names are looked up here.
    haystack: String,
    /// The sources' URLs, normalised and without scheme or `www.`.
    links: Vec<String>,
    /// Their hosts, without `www.`.
    hosts: Vec<String>,
}

impl Sources {
    /// `links`: the URLs a reply may cite (none for the headline).
    pub fn new(items: &[&Item], links: &[&str]) -> Sources {
        let mut haystack = String::new();
        for item in items {
            for part in [&item.source, &item.title, &item.text] {
                haystack.push_str(&part.to_lowercase());
                haystack.push('\n');
            }
        }
        let links: Vec<String> = links.iter().filter_map(|l| bare(l)).collect();
        let hosts = links
            .iter()
            .map(|l| l.split('/').next().unwrap_or("").to_string())
            .collect();
        Sources {
            haystack,
            links,
            hosts,
        }
    }

    /// Whether `word` starts a word of the sources ("cuBLAS" in "cuBLASLt" counts; "AI"
    /// in "maintain" does not).
    fn names(&self, word: &str) -> bool {
        let word = word.to_lowercase();
        self.haystack.match_indices(&word).any(|(i, _)| {
            !self.haystack[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric())
        })
    }

    /// Whether a written link (with or without scheme) is one of the sources, or a bare host
    /// of one of them.
    fn allows(&self, link: &str) -> bool {
        let Some(written) = bare(link) else {
            return false;
        };
        self.links.contains(&written) || (!written.contains('/') && self.hosts.contains(&written))
    }
}

/// A URL without scheme, `www.`, fragment, `utm_` parameters or trailing slash; with or
/// without a scheme in the input. None when it is not an http(s) URL.
fn bare(link: &str) -> Option<String> {
    let link = link.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '"']);
    let with_scheme = if link.contains("://") {
        link.to_string()
    } else {
        format!("https://{link}")
    };
    let normalized = crate::text::normalize_url(&with_scheme)?;
    let rest = normalized.split_once("://").map_or("", |(_, r)| r);
    let rest = rest.strip_prefix("www.").unwrap_or(rest);
    Some(rest.trim_end_matches('/').to_lowercase())
}

/// The first link in `written` that is not one of the sources, in any form: with a scheme,
/// a Markdown link's target, an autolink, a `www.` host or a scheme-less domain.
pub fn foreign_link(written: &str, sources: &Sources) -> Option<String> {
    // Each form is blanked once checked, so a URL is not checked again as a bare host.
    let mut text = written.to_string();
    for pattern in [&*MARKDOWN, &*AUTOLINK] {
        for c in pattern.captures_iter(written) {
            if !sources.allows(&c[1]) {
                return Some(c[0].to_string());
            }
        }
        text = pattern.replace_all(&text, " ").into_owned();
    }
    for m in SCHEME_URL.find_iter(&text) {
        if !sources.allows(m.as_str()) {
            return Some(m.as_str().to_string());
        }
    }
    let text = SCHEME_URL.replace_all(&text, " ");
    for m in WWW.find_iter(&text) {
        if !sources.allows(m.as_str()) {
            return Some(m.as_str().to_string());
        }
    }
    let text = WWW.replace_all(&text, " ");
    HOST.captures_iter(&text)
        .filter(|c| TLDS.contains(&c[1].to_ascii_lowercase().as_str()))
        .map(|c| c[0].to_string())
        .find(|link| !sources.allows(link))
}

/// Words a reply may capitalise without a source naming them: the field's common words and
/// units, and every word of the digest's locale.
pub struct Allowed {
    words: BTreeSet<String>,
    chinese: bool,
}

impl Allowed {
    pub fn new(language: &str, locale: &Locale) -> Allowed {
        let mut words: BTreeSet<String> = COMMON_WORDS.iter().map(|w| w.to_string()).collect();
        for phrase in locale.phrases() {
            words.extend(WORD.find_iter(phrase).map(|w| w.as_str().to_lowercase()));
        }
        Allowed {
            words,
            chinese: language != "en",
        }
    }

    fn contains(&self, word: &str) -> bool {
        self.words.contains(&word.to_lowercase())
    }
}

/// The first name-like word of `field` that no source names: CamelCase and ALLCAPS tokens
/// (`FooBarNet`, `cuBLAS`, `NVDA`), capitalised tokens with digits (`B300`), and capitalised
/// words not at a sentence start (`Acme Corp`). In Chinese text every capitalised Latin
/// word is a name. Compared case-insensitively; a plural `s` is forgiven.
pub fn unknown_name(field: &str, sources: &Sources, allowed: &Allowed) -> Option<String> {
    WORD.find_iter(field)
        .filter(|m| {
            let w = m.as_str();
            let mut chars = w.chars();
            let first = chars.next().unwrap_or('0');
            if w.len() < 2 || !first.is_ascii_alphabetic() {
                return false;
            }
            let inner_upper = chars.any(|c| c.is_ascii_uppercase());
            let digit = w.chars().any(|c| c.is_ascii_digit());
            let capital = first.is_ascii_uppercase();
            inner_upper
                || (capital && digit)
                || (capital && (allowed.chinese || !sentence_start(&field[..m.start()])))
        })
        .map(|m| m.as_str())
        .find(|w| {
            let known = |w: &str| allowed.contains(w) || sources.names(w);
            !(known(w)
                || w.strip_suffix('s')
                    .is_some_and(|stem| stem.len() > 1 && known(stem)))
        })
        .map(str::to_string)
}

/// Whether a word after `before` starts a sentence: the text's start, or after a full stop,
/// colon or line break (ASCII ones followed by a space), past opening quotes and brackets.
fn sentence_start(before: &str) -> bool {
    let mut spaced = false;
    for c in before.chars().rev() {
        match c {
            c if c.is_whitespace() => spaced = true,
            '"' | '\'' | '“' | '‘' | '(' | '（' | '[' | '「' | '『' | '*' | '-' | '–' | '—' =>
                {}
            '。' | '！' | '？' | '：' | '；' => return true,
            '.' | '!' | '?' | ':' | ';' => return spaced,
            _ => return false,
        }
    }
    true
}

/// Share of Han a Chinese field needs: Han characters over Han characters plus Latin words.
/// A Latin name counts as one word, so name-dense Chinese ("TileFuse 在 B200 上达到 1,530
/// TFLOPS", 57%) passes, and English with a Chinese word or two (under 25%) does not.
pub const MIN_HAN_SHARE: f64 = 0.35;
/// Share of Han letters an English field may have (a Chinese project name, not prose).
pub const MAX_HAN_IN_ENGLISH: f64 = 0.2;
/// Letters of other scripts (Greek, kana, Hangul, ...) a field may hold: an α or a β.
const MAX_OTHER_LETTERS: usize = 2;

#[derive(Debug, Default, PartialEq)]
struct Letters {
    han: usize,
    latin: usize,
    latin_words: usize,
    cyrillic: usize,
    other: usize,
}

fn letters(text: &str) -> Letters {
    let mut l = Letters::default();
    let mut in_word = false;
    for c in text.chars() {
        let latin = c.is_ascii_alphabetic() || matches!(c, 'À'..='ɏ') && c != '×' && c != '÷';
        if latin && !in_word {
            l.latin_words += 1;
        }
        in_word = latin;
        match c {
            _ if latin => l.latin += 1,
            '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '\u{F900}'..='\u{FAFF}' => {
                l.han += 1
            }
            '\u{0400}'..='\u{052F}' => l.cyrillic += 1,
            // Micro signs and CJK symbols (〇) are not prose.
            'µ' | 'μ' | '\u{3000}'..='\u{303F}' => {}
            c if c.is_alphabetic() => l.other += 1,
            _ => {}
        }
    }
    l
}

/// Why `text` is not in the digest's language, if it is not: Cyrillic or other scripts, too
/// little Han in Chinese, Han prose in English.
pub fn wrong_script(text: &str, language: &str) -> Option<String> {
    let l = letters(text);
    if l.cyrillic > 0 {
        return Some(format!("{} Cyrillic letters", l.cyrillic));
    }
    if l.other > MAX_OTHER_LETTERS {
        return Some(format!("{} letters of another script", l.other));
    }
    if language == "en" {
        let share = l.han as f64 / (l.han + l.latin).max(1) as f64;
        (share > MAX_HAN_IN_ENGLISH).then(|| format!("{:.0}% Han letters", share * 100.0))
    } else {
        let share = l.han as f64 / (l.han + l.latin_words).max(1) as f64;
        (share < MIN_HAN_SHARE).then(|| format!("only {:.0}% Han", share * 100.0))
    }
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
