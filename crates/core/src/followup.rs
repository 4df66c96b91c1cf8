//! Follow-ups across days: a new event is linked to the event of a recent digest it
//! continues, and a story a recent digest had, with nothing new, is left out. Pure: the
//! pipeline hands in the candidates and the digests of the last `digest.follow_up_days`.
//!
//! An event continues an earlier one when (first rule that holds, newest digest first):
//! 1. it is the same story: the same event id (its lead item) or the same lead link. With a
//!    source link the earlier event did not have it is an `update`; with none it is a
//!    `repeat` and is left out;
//! 2. it is a paper's code or a post about it: one of its items cites the arXiv paper an
//!    earlier event was (`code`);
//! 3. it is the same project and feature: one of its items links an earlier event's page,
//!    or the titles share at least [`MIN_SHARED`] distinctive words and half of the
//!    shorter title's distinctive words (`continues`).
//!
//! When the earlier digest had a watch-list line about that event, the follow-up carries it
//! as resolved.

use std::collections::BTreeSet;

use crate::digest::Candidate;
use crate::model::{Digest, DigestEvent, FollowUp, FollowUpReason};

/// Distinctive title words two titles must share to be the same feature.
pub const MIN_SHARED: usize = 3;

/// Words that say nothing about which feature a title is about.
const COMMON: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "from",
    "into",
    "onto",
    "via",
    "new",
    "now",
    "support",
    "supports",
    "release",
    "released",
    "releases",
    "version",
    "update",
    "updates",
    "rfc",
    "proposal",
    "merged",
    "lands",
    "landed",
    "adds",
    "added",
    "using",
    "towards",
    "toward",
    "faster",
    "fast",
    "efficient",
    "how",
    "what",
    "why",
    "our",
    "your",
    "its",
    "are",
    "is",
    "on",
    "in",
    "of",
    "to",
    "a",
    "an",
    "at",
    "by",
    "we",
    "be",
    "as",
    "or",
    "vs",
];

/// What linking decided, by candidate event id.
#[derive(Debug, Default, PartialEq)]
pub struct Links {
    /// Events that continue an earlier story (never `repeat`).
    pub follow_ups: Vec<(String, FollowUp)>,
    /// Events to leave out, with the story they repeat.
    pub repeats: Vec<(String, FollowUp)>,
}

impl Links {
    pub fn is_repeat(&self, event_id: &str) -> bool {
        self.repeats.iter().any(|(id, _)| id == event_id)
    }
}

/// Links each candidate to the earlier event it continues; `earlier` are recent digests,
/// any order (the newest match wins).
pub fn link(candidates: &[Candidate], earlier: &[Digest]) -> Links {
    let mut earlier: Vec<&Digest> = earlier.iter().collect();
    earlier.sort_by_key(|d| std::cmp::Reverse(d.date));
    let mut links = Links::default();
    for c in candidates {
        let found = earlier
            .iter()
            .find_map(|d| continues(c, d).map(|(e, reason)| follow_up(d, e, reason)));
        let id = c.event.id.clone();
        match found {
            Some(f) if f.reason == FollowUpReason::Repeat => links.repeats.push((id, f)),
            Some(f) => links.follow_ups.push((id, f)),
            None => {}
        }
    }
    links
}

/// Puts the follow-ups on the assembled digest's events (by event id) and records the
/// repeats left out.
pub fn mark(digest: &mut Digest, links: Links) {
    for (id, f) in links.follow_ups {
        if let Some(e) = digest.events_mut().find(|e| e.id == id) {
            e.follow_up = Some(f);
        }
    }
    digest.repeats = links.repeats.into_iter().map(|(_, f)| f).collect();
}

fn follow_up(d: &Digest, e: &DigestEvent, reason: FollowUpReason) -> FollowUp {
    let watch = d.watchlist.iter().find(|w| w.event_id == e.id);
    FollowUp {
        date: d.date,
        event_id: e.id.clone(),
        title: e.title.clone(),
        reason,
        resolves: watch.map(|w| w.text.clone()),
        resolves_translations: watch.map(|w| w.translations.clone()).unwrap_or_default(),
    }
}

/// The event of `d` that candidate `c` continues, and how.
fn continues<'d>(c: &Candidate, d: &'d Digest) -> Option<(&'d DigestEvent, FollowUpReason)> {
    let lead = normal(&c.event.primary().url);
    let urls: BTreeSet<String> = c
        .event
        .items
        .iter()
        .map(|i| normal(&i.url))
        .filter(|u| !u.is_empty())
        .collect();
    for e in d.events() {
        let theirs: BTreeSet<String> = e.sources.iter().map(|s| normal(&s.url)).collect();
        if e.id == c.event.id || (!lead.is_empty() && theirs.contains(&lead)) {
            let reason = if urls.is_subset(&theirs) {
                FollowUpReason::Repeat
            } else {
                FollowUpReason::Update
            };
            return Some((e, reason));
        }
    }
    let cited: BTreeSet<&str> = c
        .event
        .items
        .iter()
        .flat_map(|i| i.cited_arxiv.iter().map(String::as_str))
        .collect();
    // Ids as crate::parse::arxiv_id reads them, the way the items' citations were read.
    if let Some(e) = d.events().find(|e| {
        e.sources
            .iter()
            .any(|s| crate::parse::arxiv_id(&s.url).is_some_and(|id| cited.contains(id.as_str())))
    }) {
        return Some((e, FollowUpReason::Code));
    }
    let text: String = c
        .event
        .items
        .iter()
        .map(|i| i.text.to_lowercase())
        .collect::<Vec<_>>()
        .join("\n");
    let words = distinctive(&c.event.primary().title);
    d.events()
        .find(|e| {
            e.sources.iter().any(|s| {
                let u = normal(&s.url);
                u.len() > 12 && text.contains(&u)
            }) || same_feature(&words, &distinctive(&e.title))
        })
        .map(|e| (e, FollowUpReason::Continues))
}

fn same_feature(a: &BTreeSet<String>, b: &BTreeSet<String>) -> bool {
    let shared = a.intersection(b).count();
    shared >= MIN_SHARED && shared * 2 >= a.len().min(b.len())
}

/// A title's words that can name a feature: lower-case, split at anything but letters,
/// digits and '-', without common words and version numbers.
fn distinctive(title: &str) -> BTreeSet<String> {
    title
        .to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .map(|w| w.trim_matches('-'))
        .filter(|w| w.chars().count() >= 3 && !COMMON.contains(w))
        .filter(|w| {
            !w.trim_start_matches('v')
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == '-')
        })
        .map(str::to_string)
        .collect()
}

/// A link as the page it names, for comparing links: [`crate::text::normalize_url`]
/// (no fragment, no tracking parameters, no trailing '/'), then without scheme and "www.",
/// lower-cased, so a mirror's http link and the release's https one compare equal and the
/// form can be looked for in an item's text. Empty for what is not a web link.
fn normal(url: &str) -> String {
    let Some(u) = crate::text::normalize_url(url) else {
        return String::new();
    };
    let u = u.to_lowercase();
    u.trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_start_matches("www.")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_of_one_feature_match_and_releases_do_not() {
        let a = distinctive("RFC: Warp-specialized persistent matmul kernels in Triton");
        let b = distinctive("Warp-specialized persistent matmul merged into Triton main");
        assert!(same_feature(&a, &b), "{a:?} {b:?}");
        let v1 = distinctive("triton v3.6.0");
        let v2 = distinctive("triton v3.6.1");
        assert!(!same_feature(&v1, &v2));
        let c = distinctive("Persistent kernels for sparse attention on AMD GPUs");
        assert!(!same_feature(&a, &c));
    }

    #[test]
    fn links_compare_as_the_page_they_name() {
        assert_eq!(
            normal("https://www.GitHub.com/triton-lang/triton/pull/1/?utm_source=x#c"),
            "github.com/triton-lang/triton/pull/1"
        );
        assert_eq!(
            normal("http://github.com/triton-lang/triton/pull/1"),
            normal("https://github.com/triton-lang/triton/pull/1/")
        );
        assert_eq!(normal("not a link"), "");
    }
}
