//! The archive of stored digests as readers search it: what words of an event are
//! searchable, and how a query becomes terms. Pure; the SQL is in `store/archive.rs`, the
//! pages in `web/archive.rs`.
//!
//! A query is words and "quoted phrases"; an event matches when every term occurs in its
//! words, in any reader language, as a case-insensitive substring. Substrings, not words:
//! Chinese has no spaces between words, so "编译器" must be found inside "新的编译器后端".

use crate::model::{Digest, DigestEvent};

/// Terms a query may have; the rest are ignored (each one narrows the result, so more
/// would find nothing anyway).
pub const MAX_TERMS: usize = 8;
/// Characters a term may have.
pub const MAX_TERM_CHARS: usize = 100;

/// An event as the archive stores it: which digest, and the event as it was shown there.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedEvent {
    pub date: chrono::NaiveDate,
    /// When that digest's window ended: the moment it was news.
    pub published: chrono::DateTime<chrono::Utc>,
    pub event: DigestEvent,
}

/// The text search reads for one event of a digest: its title, texts in every language,
/// its watch-list lines, and its sources' names and addresses (so an arXiv id or a
/// repository name finds it).
pub fn searchable_text(d: &Digest, e: &DigestEvent) -> String {
    let mut parts: Vec<&str> = vec![&e.title, &e.summary, &e.why_it_matters, &e.brief];
    for words in e.translations.values() {
        parts.extend(words.summary.as_deref());
        parts.extend(words.why_it_matters.as_deref());
        parts.extend(words.brief.as_deref());
    }
    for w in d.watchlist.iter().filter(|w| w.event_id == e.id) {
        parts.push(&w.text);
        parts.extend(w.translations.values().map(String::as_str));
    }
    for s in &e.sources {
        parts.push(&s.name);
        parts.push(&s.url);
    }
    parts.join("\n")
}

/// The terms of a query: words split at white space, "double-quoted phrases" (or “these”)
/// kept whole,
/// at most [`MAX_TERMS`] of at most [`MAX_TERM_CHARS`] characters each. Empty when the
/// query has nothing to look for.
pub fn terms(query: &str) -> Vec<String> {
    let mut terms = Vec::new();
    // Chinese keyboards type “curly” quotes: they quote a phrase too.
    let query = query.replace(['“', '”'], "\"");
    for (i, chunk) in query.split('"').enumerate() {
        // Odd chunks sit between quotes: a phrase.
        if i % 2 == 1 {
            terms.push(chunk.split_whitespace().collect::<Vec<_>>().join(" "));
        } else {
            terms.extend(chunk.split_whitespace().map(str::to_string));
        }
    }
    let mut kept: Vec<String> = Vec::new();
    for term in terms {
        let term: String = term.chars().take(MAX_TERM_CHARS).collect();
        let lower = term.to_lowercase();
        if !term.is_empty() && !kept.iter().any(|k| k.to_lowercase() == lower) {
            kept.push(term);
        }
    }
    kept.truncate(MAX_TERMS);
    kept
}

/// A LIKE pattern that matches `term` anywhere, with `\` escaping the wildcards.
pub fn like_pattern(term: &str) -> String {
    let mut p = String::with_capacity(term.len() + 2);
    p.push('%');
    for c in term.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// An FTS5 query that matches every term as a phrase (with the trigram tokenizer: as a
/// substring). Only terms of three characters or more: a trigram index cannot look up
/// shorter ones, which the caller matches with LIKE instead.
pub fn fts_query(terms: &[String]) -> Option<String> {
    let phrases: Vec<String> = terms
        .iter()
        .filter(|t| t.chars().count() >= 3)
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    (!phrases.is_empty()).then(|| phrases.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_split_into_words_and_quoted_phrases() {
        assert_eq!(
            terms(r#"  fp8 "flash   attention" Triton fp8 "#),
            ["fp8", "flash attention", "Triton"]
        );
        assert_eq!(terms("编译器 后端"), ["编译器", "后端"]);
        assert_eq!(terms("“矩阵 乘法” fp8"), ["矩阵 乘法", "fp8"]);
        assert!(terms("  \"\"  ").is_empty());
        assert_eq!(terms(&"a ".repeat(20)).len(), 1);
        let many: String = (0..20).map(|i| format!("w{i} ")).collect();
        assert_eq!(terms(&many).len(), MAX_TERMS);
        assert_eq!(terms(&"x".repeat(500))[0].chars().count(), MAX_TERM_CHARS);
    }

    #[test]
    fn wildcards_and_quotes_are_literal() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
        assert_eq!(
            fts_query(&["ab".into(), "say \"hi\"".into(), "编译器".into()]).as_deref(),
            Some("\"say \"\"hi\"\"\" \"编译器\"")
        );
        assert_eq!(fts_query(&["ab".into(), "后端".into()]), None);
    }
}
