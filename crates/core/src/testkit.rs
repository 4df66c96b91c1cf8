//! Test fixtures of the core's types, for its own tests and the application's (feature
//! `test-support`, enabled by the application's dev-dependency).

use crate::digest::Candidate;
use crate::model::{ItemKind, ReleaseLevel};
use crate::release_notes;

/// A one-item candidate titled "Some release", without a link: shared by the sibling
/// modules' tests and the application's.
pub fn candidate(kind: ItemKind, text: &str, layers: &[&str]) -> Candidate {
    use crate::classify::Classification;
    use crate::model::{Event, Item, Score};
    use crate::score::Assessment;
    let item = Item {
        key: "k".into(),
        source: "s".into(),
        kind,
        title: "Some release".into(),
        url: String::new(),
        text: text.into(),
        published: chrono::DateTime::UNIX_EPOCH,
        release: (kind == ItemKind::Release).then_some(ReleaseLevel::Minor),
        arxiv_id: None,
        cited_arxiv: vec![],
        links: vec![],
    };
    Candidate {
        event: Event {
            id: "e".into(),
            items: vec![item],
        },
        classification: Classification {
            layers: layers.iter().map(|l| l.to_string()).collect(),
            ..Classification::default()
        },
        assessment: Assessment {
            score: Score::from_f64(70.0),
            breakdown: vec![],
            quantified: vec![],
            release: (kind == ItemKind::Release).then_some(ReleaseLevel::Minor),
            notes: (kind == ItemKind::Release).then(|| release_notes::read(text)),
            prior: 70.0,
        },
    }
}

/// A digest event numbered 1, titled "Event {id}", with no text or source.
pub fn digest_event(id: &str, score: f64, layers: &[&str]) -> crate::model::DigestEvent {
    crate::model::DigestEvent {
        id: id.to_string(),
        n: 1,
        title: format!("Event {id}"),
        summary: String::new(),
        why_it_matters: String::new(),
        brief: String::new(),
        layers: layers.iter().map(|s| s.to_string()).collect(),
        score: crate::model::Score::from_f64(score),
        kind: ItemKind::Release,
        release: None,
        sources: Vec::new(),
        score_breakdown: Vec::new(),
        llm_fallback: false,
        llm_fallback_reason: None,
        translations: Default::default(),
        follow_up: None,
        followed: None,
    }
}
