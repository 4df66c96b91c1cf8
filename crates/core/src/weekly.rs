//! The weekly roll-up: one digest for seven days (an ISO week, or the week a reader's
//! roll-up day closes), from the stored dailies of those days. Pure.
//!
//! Events of the week that are one story become one event: the same event id on several
//! days, or an event that is a follow-up of another event of the week (a paper and its
//! code, an RFC and its merge). A story shows its newest text and title (the latest state),
//! the highest score any day gave it, the layers and sources of all its days, and the
//! earliest follow-up outside the week. Stories are ordered by that score: the top
//! `digest.key_changes` are the week's key changes, then the week's papers and the other
//! releases and posts, at most [`MAX_PER_SECTION`] each. The watch list keeps the newest
//! line of each story shown that no later day resolved.

use std::collections::{BTreeMap, HashMap};

use chrono::{Datelike, NaiveDate, Weekday};

use crate::locale::Locale;
use crate::model::{Digest, DigestEvent, SourceCount, Window};

/// Papers, and other updates, a weekly roll-up shows at most.
pub const MAX_PER_SECTION: usize = 15;

/// Seven days ending on `last`: an ISO week ("2026-W44", Monday to Sunday) when `last` is
/// a Sunday, else the week a reader's roll-up day closes ("2026-11-21/2026-11-27", the ISO
/// 8601 interval).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Week {
    last: NaiveDate,
}

impl Week {
    /// Reads "YYYY-Www" (ISO 8601 week date), e.g. "2026-W44".
    pub fn parse(s: &str) -> Result<Week, String> {
        let bad = || format!("\"{s}\" is not an ISO week; use YYYY-Www, e.g. 2026-W44");
        let (year, week) = s.trim().split_once(['W', 'w']).ok_or_else(bad)?;
        let year: i32 = year.trim_end_matches('-').parse().map_err(|_| bad())?;
        let week: u32 = week.parse().map_err(|_| bad())?;
        let last = NaiveDate::from_isoywd_opt(year, week, Weekday::Sun)
            .ok_or_else(|| format!("{year} has no week {week}; ISO years have 52 or 53 weeks"))?;
        Ok(Week { last })
    }

    /// The ISO week a day is in.
    pub fn of(date: NaiveDate) -> Week {
        let w = date.iso_week();
        Week {
            last: NaiveDate::from_isoywd_opt(w.year(), w.week(), Weekday::Sun)
                .expect("a day's own ISO week exists"),
        }
    }

    /// The seven days ending on `last` (a reader's roll-up day).
    pub fn ending(last: NaiveDate) -> Week {
        Week { last }
    }

    pub fn last(self) -> NaiveDate {
        self.last
    }

    /// Oldest first.
    pub fn days(self) -> [NaiveDate; 7] {
        std::array::from_fn(|i| self.last - chrono::Days::new(6 - i as u64))
    }
}

impl std::fmt::Display for Week {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.last.weekday() == Weekday::Sun {
            let w = self.last.iso_week();
            write!(f, "{}-W{:02}", w.year(), w.week())
        } else {
            write!(f, "{}/{}", self.days()[0], self.last)
        }
    }
}

/// The roll-up of `week` from its stored dailies (any order; days without one are
/// skipped). None when no day of the week has a digest.
pub fn roll_up(week: Week, dailies: &[Digest], key_changes: usize, t: &Locale) -> Option<Digest> {
    let days = week.days();
    let mut dailies: Vec<&Digest> = dailies.iter().filter(|d| days.contains(&d.date)).collect();
    dailies.sort_by_key(|d| d.date);
    let (first, last) = (dailies.first()?, dailies.last()?);

    // Every event of the week with its day, oldest first; stories by union of ids.
    let all: Vec<(NaiveDate, &DigestEvent)> = dailies
        .iter()
        .flat_map(|d| d.events().map(move |e| (d.date, e)))
        .collect();
    let mut story: HashMap<&str, usize> = HashMap::new();
    let mut parent: Vec<usize> = Vec::new();
    for (_, e) in &all {
        if !story.contains_key(e.id.as_str()) {
            story.insert(&e.id, parent.len());
            parent.push(parent.len());
        }
    }
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for (_, e) in &all {
        if let Some(f) = &e.follow_up
            && let Some(&earlier) = story.get(f.event_id.as_str())
        {
            let (a, b) = (
                root(&mut parent, story[e.id.as_str()]),
                root(&mut parent, earlier),
            );
            parent[a] = b;
        }
    }
    let mut stories: BTreeMap<usize, Vec<(NaiveDate, &DigestEvent)>> = BTreeMap::new();
    for (date, e) in &all {
        let r = root(&mut parent, story[e.id.as_str()]);
        stories.entry(r).or_default().push((*date, e));
    }
    let in_week: std::collections::HashSet<&str> = story.keys().copied().collect();
    let mut merged: Vec<DigestEvent> = stories.into_values().map(|s| merge(&s, &in_week)).collect();
    merged.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.id.cmp(&b.id)));

    // The newest watch line of each story, unless a later day resolved it.
    let resolved: std::collections::HashSet<&str> = all
        .iter()
        .filter_map(|(_, e)| e.follow_up.as_ref())
        .filter(|f| f.resolves.is_some())
        .map(|f| f.event_id.as_str())
        .collect();
    let mut watch = Vec::new();
    for d in dailies.iter().rev() {
        for w in &d.watchlist {
            // A watch item about an event its digest does not have (hand-edited, or stored
            // by an older build) has no story to follow.
            let Some(&s) = story.get(w.event_id.as_str()) else {
                continue;
            };
            let r = root(&mut parent, s);
            let shown = merged
                .iter()
                .position(|e| root(&mut parent, story[e.id.as_str()]) == r);
            if let Some(i) = shown
                && !resolved.contains(w.event_id.as_str())
                && !watch.iter().any(|(j, _)| *j == i)
            {
                let mut w = w.clone();
                w.event_id = merged[i].id.clone();
                watch.push((i, w));
            }
        }
    }
    watch.sort_by_key(|(i, _)| *i);

    let mut counts: Vec<SourceCount> = Vec::new();
    for d in &dailies {
        for c in &d.source_counts {
            match counts.iter_mut().find(|x| x.source == c.source) {
                Some(x) => x.items += c.items,
                None => counts.push(c.clone()),
            }
        }
    }
    let mut rollup = Digest {
        date: days[6],
        language: last.language.clone(),
        window: Window {
            start: first.window.start,
            end: last.window.end,
        },
        generation_mode: last.generation_mode.clone(),
        title: String::new(),
        overview: String::new(),
        key_changes: Vec::new(),
        papers: Vec::new(),
        other_updates: Vec::new(),
        watchlist: watch.into_iter().map(|(_, w)| w).take(5).collect(),
        source_counts: counts,
        failed_sources: Vec::new(),
        llm_fallbacks: dailies.iter().map(|d| d.llm_fallbacks).sum(),
        llm_usage: None,
        llm_headline: None,
        repeats: Vec::new(),
        week: Some(week.to_string()),
    };
    crate::digest::section(&mut rollup, merged, key_changes, t);
    rollup.papers.truncate(MAX_PER_SECTION);
    rollup.other_updates.truncate(MAX_PER_SECTION);
    let shown: std::collections::HashSet<String> = rollup.events().map(|e| e.id.clone()).collect();
    rollup.watchlist.retain(|w| shown.contains(&w.event_id));
    rollup.number_events();
    Some(rollup)
}

/// One story's event: the newest day's event, with the best score, every layer and source,
/// and a follow-up only when it points outside the week.
fn merge(
    days: &[(NaiveDate, &DigestEvent)],
    in_week: &std::collections::HashSet<&str>,
) -> DigestEvent {
    let (_, newest) = days.last().expect("a story has an event");
    let mut e = (*newest).clone();
    e.score = days.iter().map(|(_, x)| x.score).max().unwrap_or(e.score);
    for (_, x) in days.iter().rev() {
        for l in &x.layers {
            if !e.layers.contains(l) {
                e.layers.push(l.clone());
            }
        }
        for s in &x.sources {
            if !e.sources.iter().any(|have| have.url == s.url) {
                e.sources.push(s.clone());
            }
        }
    }
    e.follow_up = days
        .iter()
        .filter_map(|(_, x)| x.follow_up.clone())
        .find(|f| !in_week.contains(f.event_id.as_str()));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weeks_parse_and_name_their_days() {
        let w = Week::parse("2026-W44").unwrap();
        assert_eq!(w.to_string(), "2026-W44");
        let days = w.days();
        assert_eq!(days[0], NaiveDate::from_ymd_opt(2026, 10, 26).unwrap());
        assert_eq!(days[6], NaiveDate::from_ymd_opt(2026, 11, 1).unwrap());
        assert_eq!(Week::of(days[3]), w);
        // 2026 has 53 ISO weeks; its week 53 ends on 3 January 2027.
        assert_eq!(
            Week::parse("2026W53").unwrap().days()[6],
            NaiveDate::from_ymd_opt(2027, 1, 3).unwrap()
        );
        assert!(Week::parse("2025-W53").unwrap_err().contains("52 or 53"));
        // A Friday reader's week is Saturday to Friday, named as an interval.
        let fri = NaiveDate::from_ymd_opt(2026, 11, 27).unwrap();
        let theirs = Week::ending(fri);
        assert_eq!(theirs.to_string(), "2026-11-21/2026-11-27");
        assert_eq!(
            theirs.days()[0],
            NaiveDate::from_ymd_opt(2026, 11, 21).unwrap()
        );
        assert_eq!(Week::ending(days[6]), w);
        assert!(Week::parse("2026-10-28").unwrap_err().contains("YYYY-Www"));
    }
}
