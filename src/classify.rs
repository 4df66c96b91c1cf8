//! Event -> compiler-stack layers, by keyword rules from the configuration. Pure.
//!
//! Keywords match case-insensitively on word boundaries (a keyword edge that is a letter or
//! digit must not touch another ASCII letter or digit, so "ir" does not match "their" but
//! "tl." matches "tl.atomic_add"). All keywords of all layers are searched in one pass with an
//! Aho-Corasick automaton, so the cost is linear in the text, not in the number of keywords.
//!
//! A layer is assigned when one of its keywords is in a title, or when the text has two
//! distinct keywords of it, or one keyword at least twice. One stray mention does not tag.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use crate::config::LayerConfig;
use crate::model::Event;

/// Only the start of long texts is read: what an item is about is said early.
const MAX_CLASSIFIED_BYTES: usize = 12_000;

pub struct Classifier {
    automaton: AhoCorasick,
    /// Pattern index -> (layer index, keyword).
    patterns: Vec<(usize, String)>,
    layer_names: Vec<String>,
}

/// What the rules found for one event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Classification {
    /// Assigned layers, in configuration order.
    pub layers: Vec<String>,
    /// Distinct keywords matched anywhere, sorted.
    pub keywords: Vec<String>,
    /// Distinct keywords matched in a title.
    pub title_keywords: Vec<String>,
}

#[derive(Default, Clone)]
struct LayerHits {
    in_title: bool,
    distinct: Vec<usize>,
    occurrences: usize,
}

impl Classifier {
    pub fn new(layers: &[LayerConfig]) -> Classifier {
        let mut patterns = Vec::new();
        for (li, layer) in layers.iter().enumerate() {
            for k in &layer.keywords {
                patterns.push((li, k.to_lowercase()));
            }
        }
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            // A full DFA: a few hundred KB for the keyword set, several times faster to scan.
            .kind(Some(AhoCorasickKind::DFA))
            .build(patterns.iter().map(|(_, k)| k.as_str()))
            .expect("keyword automaton builds");
        Classifier {
            automaton,
            patterns,
            layer_names: layers.iter().map(|l| l.name.clone()).collect(),
        }
    }

    pub fn classify(&self, event: &Event) -> Classification {
        let mut hits = vec![LayerHits::default(); self.layer_names.len()];
        let mut keywords: Vec<usize> = Vec::new();
        let mut title_keywords: Vec<usize> = Vec::new();
        for item in &event.items {
            self.scan(&item.title, |pattern| {
                let layer = &mut hits[self.patterns[pattern].0];
                layer.in_title = true;
                layer.distinct.push(pattern);
                layer.occurrences += 1;
                title_keywords.push(pattern);
                keywords.push(pattern);
            });
            let text = bounded(&item.text, MAX_CLASSIFIED_BYTES);
            self.scan(text, |pattern| {
                let layer = &mut hits[self.patterns[pattern].0];
                layer.distinct.push(pattern);
                layer.occurrences += 1;
                keywords.push(pattern);
            });
        }
        let layers = hits
            .iter_mut()
            .zip(&self.layer_names)
            .filter_map(|(h, name)| {
                h.distinct.sort_unstable();
                h.distinct.dedup();
                (h.in_title || h.distinct.len() >= 2 || h.occurrences >= 2).then(|| name.clone())
            })
            .collect();
        Classification {
            layers,
            keywords: self.distinct_words(keywords),
            title_keywords: self.distinct_words(title_keywords),
        }
    }

    fn distinct_words(&self, patterns: Vec<usize>) -> Vec<String> {
        let mut words: Vec<String> = patterns
            .into_iter()
            .map(|p| self.patterns[p].1.clone())
            .collect();
        words.sort();
        words.dedup();
        words
    }

    fn scan(&self, text: &str, mut on_match: impl FnMut(usize)) {
        let bytes = text.as_bytes();
        for m in self.automaton.find_overlapping_iter(text) {
            let keyword = self.patterns[m.pattern().as_usize()].1.as_bytes();
            let starts_alnum = keyword.first().is_some_and(u8::is_ascii_alphanumeric);
            let ends_alnum = keyword.last().is_some_and(u8::is_ascii_alphanumeric);
            let before_ok =
                !starts_alnum || m.start() == 0 || !bytes[m.start() - 1].is_ascii_alphanumeric();
            let after_ok =
                !ends_alnum || m.end() == bytes.len() || !bytes[m.end()].is_ascii_alphanumeric();
            if before_ok && after_ok {
                on_match(m.pattern().as_usize());
            }
        }
    }
}

fn bounded(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Item, ItemKind};
    use chrono::Utc;

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
                published: Utc::now(),
                release: None,
                arxiv_id: None,
                cited_arxiv: vec![],
            }],
        }
    }

    fn classifier() -> Classifier {
        let layer = |name: &str, kw: &[&str]| LayerConfig {
            name: name.into(),
            keywords: kw.iter().map(|s| s.to_string()).collect(),
        };
        Classifier::new(&[
            layer("frontend", &["tl.", "dsl"]),
            layer("optimization", &["ir", "fusion"]),
            layer("runtime", &["runtime", "cuda graphs"]),
        ])
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
}
