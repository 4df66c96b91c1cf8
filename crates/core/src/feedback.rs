//! Reader feedback: a 👍 or 👎 per event and reader, what buttons and links carry, the
//! tally shown by `/why` and `kdigest explain`, and the report of which sources and layers
//! readers value (`kdigest feedback`). Pure.
//!
//! A reader is one person where the platform says who pressed (a Telegram or Discord
//! user), one subscription where only the link says it (an email subscriber's signed
//! link), one browser on the web site (a cookie). Each reader has one vote per event; a
//! new vote replaces theirs. Votes are keyed by event id, which stays the same for a story
//! across days, so a vote counts wherever the story appears.

use std::collections::BTreeMap;

use crate::model::{DigestEvent, is_event_id};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    Up,
    Down,
}

impl Vote {
    /// The stored value: 1 or -1.
    pub fn value(self) -> i64 {
        match self {
            Vote::Up => 1,
            Vote::Down => -1,
        }
    }

    /// `up`/`down` (links and forms) or the stored 1/-1.
    pub fn parse(s: &str) -> Option<Vote> {
        match s {
            "up" | "1" => Some(Vote::Up),
            "down" | "-1" => Some(Vote::Down),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Vote::Up => "up",
            Vote::Down => "down",
        }
    }

    pub fn emoji(self) -> &'static str {
        match self {
            Vote::Up => "👍",
            Vote::Down => "👎",
        }
    }
}

/// What a chat button carries: `vu:<event id>` or `vd:<event id>` (Telegram allows 64
/// bytes of callback data, Discord 100 of custom_id).
pub fn button_data(vote: Vote, event_id: &str) -> String {
    let v = match vote {
        Vote::Up => 'u',
        Vote::Down => 'd',
    };
    format!("v{v}:{event_id}")
}

/// The vote and event of a button's data; None for any other button.
pub fn parse_button(data: &str) -> Option<(Vote, &str)> {
    let (kind, id) = data.split_once(':')?;
    let vote = match kind {
        "vu" => Vote::Up,
        "vd" => Vote::Down,
        _ => return None,
    };
    is_event_id(id).then_some((vote, id))
}

/// An event's votes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub up: u32,
    pub down: u32,
}

impl Tally {
    pub fn total(self) -> u32 {
        self.up + self.down
    }

    /// Share of 👍 among the votes, 0 when there are none.
    pub fn approval(self) -> f64 {
        if self.total() == 0 {
            0.0
        } else {
            f64::from(self.up) / f64::from(self.total())
        }
    }

    fn add(&mut self, other: Tally) {
        self.up += other.up;
        self.down += other.down;
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "👍 {} · 👎 {}", self.up, self.down)
    }
}

/// One line of the report: a source or a layer, the events of it readers voted on, and
/// their votes.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRow {
    pub key: String,
    pub events: u32,
    pub tally: Tally,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    pub events: u32,
    pub tally: Tally,
    pub sources: Vec<ReportRow>,
    pub layers: Vec<ReportRow>,
    /// The events readers liked most and least (at most five each), with their votes.
    pub liked: Vec<(String, String, Tally)>,
    pub disliked: Vec<(String, String, Tally)>,
}

/// The report over events and their tallies: each event counts once for each of its
/// sources and layers. Rows are ordered by approval, then by votes, so what readers value
/// most comes first.
pub fn report(voted: &[(DigestEvent, Tally)]) -> Report {
    let mut sources: BTreeMap<String, (u32, Tally)> = BTreeMap::new();
    let mut layers: BTreeMap<String, (u32, Tally)> = BTreeMap::new();
    let mut total = Tally::default();
    for (e, t) in voted {
        total.add(*t);
        let mut names: Vec<&str> = e.sources.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let row = sources.entry(name.to_string()).or_default();
            row.0 += 1;
            row.1.add(*t);
        }
        for l in &e.layers {
            let row = layers.entry(l.clone()).or_default();
            row.0 += 1;
            row.1.add(*t);
        }
    }
    let rows = |m: BTreeMap<String, (u32, Tally)>| {
        let mut rows: Vec<ReportRow> = m
            .into_iter()
            .map(|(key, (events, tally))| ReportRow { key, events, tally })
            .collect();
        rows.sort_by(|a, b| {
            b.tally
                .approval()
                .total_cmp(&a.tally.approval())
                .then(b.tally.total().cmp(&a.tally.total()))
                .then(a.key.cmp(&b.key))
        });
        rows
    };
    let net = |t: &Tally| i64::from(t.up) - i64::from(t.down);
    let mut ranked: Vec<(String, String, Tally)> = voted
        .iter()
        .map(|(e, t)| (e.id.clone(), e.title.clone(), *t))
        .collect();
    ranked.sort_by(|a, b| net(&b.2).cmp(&net(&a.2)).then(a.0.cmp(&b.0)));
    let liked = ranked
        .iter()
        .filter(|(_, _, t)| net(t) > 0)
        .take(5)
        .cloned()
        .collect();
    let disliked = ranked
        .iter()
        .rev()
        .filter(|(_, _, t)| net(t) < 0)
        .take(5)
        .cloned()
        .collect();
    Report {
        events: voted.len() as u32,
        tally: total,
        sources: rows(sources),
        layers: rows(layers),
        liked,
        disliked,
    }
}

/// The report as `kdigest feedback` prints it.
pub fn report_text(r: &Report, days: u32) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if r.events == 0 {
        let _ = writeln!(
            out,
            "No votes in the last {days} days. Readers vote with the 👍/👎 buttons under each event (Telegram, Discord), the links in the email and the buttons on the web pages."
        );
        return out;
    }
    let _ = writeln!(
        out,
        "Votes of the last {days} days: {} on {} events ({:.0}% 👍)",
        r.tally,
        r.events,
        r.tally.approval() * 100.0
    );
    for (heading, rows) in [("By source", &r.sources), ("By layer", &r.layers)] {
        let _ = writeln!(out, "\n{heading}:");
        let width = rows
            .iter()
            .map(|x| x.key.chars().count())
            .max()
            .unwrap_or(0);
        for row in rows {
            let _ = writeln!(
                out,
                "  {:<width$}  {:>3.0}% 👍  {}  ({} events)",
                row.key,
                row.tally.approval() * 100.0,
                row.tally,
                row.events
            );
        }
    }
    for (heading, list) in [("Liked most", &r.liked), ("Liked least", &r.disliked)] {
        if !list.is_empty() {
            let _ = writeln!(out, "\n{heading}:");
            for (id, title, tally) in list {
                let _ = writeln!(out, "  {tally}  {title} ({id})");
            }
        }
    }
    out
}

/// A reader's own votes make a layer one they consistently like: at least this many votes
/// on its events ...
pub const BOOST_MIN_VOTES: u32 = 3;
/// ... at least this share of them 👍 ...
pub const BOOST_MIN_APPROVAL: f64 = 0.8;
// ... and then its events pass that reader's threshold with `model::BOOST_POINTS` less
// (defined beside the filter that applies it).

/// The layers a reader consistently likes, from their votes (the event's layers and the
/// vote).
pub fn liked_layers<'a>(
    votes: impl IntoIterator<Item = (&'a [String], Vote)>,
) -> std::collections::BTreeSet<String> {
    let mut by_layer: BTreeMap<&str, Tally> = BTreeMap::new();
    for (layers, vote) in votes {
        for l in layers {
            let t = by_layer.entry(l.as_str()).or_default();
            match vote {
                Vote::Up => t.up += 1,
                Vote::Down => t.down += 1,
            }
        }
    }
    by_layer
        .into_iter()
        .filter(|(_, t)| t.total() >= BOOST_MIN_VOTES && t.approval() >= BOOST_MIN_APPROVAL)
        .map(|(l, _)| l.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SourceLink;

    fn event(id: &str, layers: &[&str], sources: &[&str]) -> DigestEvent {
        let mut e = crate::testkit::digest_event(id, 70.0, layers);
        e.sources = sources
            .iter()
            .map(|s| SourceLink {
                name: s.to_string(),
                url: format!("https://example.org/{s}"),
            })
            .collect();
        e
    }

    #[test]
    fn buttons_carry_the_vote_and_a_checked_event_id() {
        let data = button_data(Vote::Down, "0a1b2c3d4e");
        assert_eq!(data, "vd:0a1b2c3d4e");
        assert!(data.len() <= 64);
        assert_eq!(parse_button(&data), Some((Vote::Down, "0a1b2c3d4e")));
        assert_eq!(
            parse_button("vu:0a1b2c3d4e"),
            Some((Vote::Up, "0a1b2c3d4e"))
        );
        assert_eq!(parse_button("l:runtime"), None);
        assert_eq!(parse_button("vu:'; DROP TABLE votes"), None);
        assert_eq!(Vote::parse("up"), Some(Vote::Up));
        assert_eq!(Vote::parse("sideways"), None);
    }

    #[test]
    fn the_report_ranks_sources_and_layers_by_what_readers_liked() {
        let voted = vec![
            (
                event("a1", &["kernel_codegen"], &["triton", "arxiv"]),
                Tally { up: 4, down: 0 },
            ),
            (
                event("a2", &["runtime"], &["vendor-blog"]),
                Tally { up: 1, down: 3 },
            ),
            (
                event("a3", &["kernel_codegen", "runtime"], &["arxiv"]),
                Tally { up: 2, down: 1 },
            ),
        ];
        let r = report(&voted);
        assert_eq!(r.events, 3);
        assert_eq!(r.tally, Tally { up: 7, down: 4 });
        assert_eq!(r.sources[0].key, "triton");
        assert_eq!(r.sources.last().unwrap().key, "vendor-blog");
        let arxiv = r.sources.iter().find(|s| s.key == "arxiv").unwrap();
        assert_eq!((arxiv.events, arxiv.tally), (2, Tally { up: 6, down: 1 }));
        assert_eq!(r.layers[0].key, "kernel_codegen");
        assert_eq!(r.liked[0].0, "a1");
        assert_eq!(r.disliked[0].0, "a2");
        assert_eq!(Tally { up: 3, down: 1 }.to_string(), "👍 3 · 👎 1");
    }

    #[test]
    fn a_layer_is_liked_after_enough_mostly_positive_votes() {
        let k = vec!["kernel_codegen".to_string()];
        let r = vec!["runtime".to_string()];
        let votes = vec![
            (k.as_slice(), Vote::Up),
            (k.as_slice(), Vote::Up),
            (k.as_slice(), Vote::Up),
            (r.as_slice(), Vote::Up),
            (r.as_slice(), Vote::Up),
        ];
        assert_eq!(
            liked_layers(votes.clone()),
            ["kernel_codegen".to_string()].into()
        );
        let mut mixed = votes;
        mixed.push((k.as_slice(), Vote::Down));
        mixed.push((r.as_slice(), Vote::Up));
        // kernel_codegen: 3 of 4 up is below 80%; runtime: 3 of 3.
        assert_eq!(liked_layers(mixed), ["runtime".to_string()].into());
    }
}
