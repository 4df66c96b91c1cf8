//! Digest assembly and subscriber filtering. Pure: no clock, no I/O.
//!
//! items -> candidates (cluster, classify, score; sorted by score) -> with texts -> Digest.
//! The title and overview are built from per-event parts (`brief`), so `filter` can rebuild
//! them for a subscriber's subset without another model call.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

use crate::classify::{Classification, Classifier};
use crate::cluster::cluster;
use crate::learned;
use crate::locale::Locale;
use crate::model::{
    Digest, DigestEvent, Event, EventWords, FailedSource, Filter, Item, ItemKind, SourceCount,
    SourceLink, Summaries, WatchItem, Window,
};
use crate::score::{self, Assessment, assess};
use crate::settings::Settings;
use crate::text::truncate_chars;

/// At most this many events are named in the watch list.
const OVERVIEW_EVENTS: usize = 5;
/// At most this many clauses (one an event) make the overview: a morning paragraph of
/// three or four sentences, not a list.
pub const OVERVIEW_CLAUSES: usize = 4;
/// Releases named in the headline, at most.
const HEADLINE_RELEASES: usize = 2;
const TITLE_PART_CHARS: usize = 70;

/// An event with its layers and score, before summaries.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub event: Event,
    pub classification: Classification,
    pub assessment: Assessment,
}

/// The window of the digest dated `date`: it ends on that day at `window_end` in the
/// configured time zone. A nonexistent local end time (DST gap) moves to the next valid
/// instant; an ambiguous one takes the earlier instant.
pub fn window_for(date: NaiveDate, config: &Settings) -> Window {
    let tz: Tz = config.digest.timezone;
    let local = date.and_time(config.digest.window_end);
    let mut end = tz.from_local_datetime(&local).earliest();
    let mut probe = local;
    while end.is_none() {
        probe += Duration::minutes(15);
        end = tz.from_local_datetime(&probe).earliest();
    }
    let end = end.expect("a valid instant exists within hours of any local time");
    let start = end - Duration::hours(config.digest.window_hours);
    Window {
        start: start.fixed_offset(),
        end: end.fixed_offset(),
    }
}

/// The window of the scheduled run at `end`: the configured length ending at that instant,
/// dated by `end`'s day in the digest time zone.
pub fn window_ending(end: DateTime<Utc>, config: &Settings) -> (NaiveDate, Window) {
    let tz: Tz = config.digest.timezone;
    let end = end.with_timezone(&tz);
    let start = end - Duration::hours(config.digest.window_hours);
    (
        end.date_naive(),
        Window {
            start: start.fixed_offset(),
            end: end.fixed_offset(),
        },
    )
}

/// The date of the latest window that has ended at `now`.
pub fn latest_complete_date(now: DateTime<Utc>, config: &Settings) -> NaiveDate {
    let today = now.with_timezone(&config.digest.timezone).date_naive();
    if window_for(today, config).end.to_utc() <= now {
        today
    } else {
        today.pred_opt().unwrap_or(today)
    }
}

/// Clusters, classifies and scores the items; sorted by score (highest first), then id.
pub fn candidates(
    mut items: Vec<Item>,
    window: &Window,
    config: &Settings,
    classifier: &Classifier,
) -> Vec<Candidate> {
    crate::parse::spell_release_names(&mut items);
    let mut out: Vec<Candidate> = cluster(items, config.digest.title_similarity)
        .into_iter()
        .map(|event| {
            let mut classification = classifier.classify(&event);
            let mut assessment = assess(&event, &classification, window, config);
            // The learned correction's gain is 0 GAIN_POINTS or more below the threshold,
            // so such an event cannot reach the digest whatever the correction says: it
            // keeps the phrases' verdict, layers included, and most of a listing (2 of 5
            // arXiv items come within reach) is read once.
            let reach = config.digest.min_score.as_f64() - learned::GAIN_POINTS;
            if classifier.learns() && assessment.prior > reach {
                classifier.correct(&event, &mut classification);
                score::add_learned(&mut assessment, &classification, config);
            }
            Candidate {
                event,
                classification,
                assessment,
            }
        })
        .collect();
    sort_candidates(&mut out);
    out
}

/// Highest score first, then id: the digest's order.
pub fn sort_candidates(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        b.assessment
            .score
            .cmp(&a.assessment.score)
            .then_with(|| a.event.id.cmp(&b.event.id))
    });
}

/// Candidates that make it into the digest: at or above the threshold, about at least one
/// layer, and not about what GPUs cost. An event that matches no keyword of any layer is
/// off-topic whatever its other components add up to (a trusted source and a fresh date do
/// not make a post about warehouse robots relevant), and a reader could not filter it by
/// layer; a GPU rental or pricing guide is the buyer's field, not the builder's.
pub fn eligible(candidates: Vec<Candidate>, config: &Settings) -> Vec<Candidate> {
    candidates
        .into_iter()
        .filter(|c| c.assessment.score >= config.digest.min_score)
        .filter(|c| {
            !c.classification.layers.is_empty() && !crate::classify::talks_prices(c.event.primary())
        })
        .collect()
}

/// Inputs to assembly besides the events.
pub struct Assembly<'a> {
    pub date: NaiveDate,
    pub window: Window,
    pub config: &'a Settings,
    pub locale: &'a Locale,
    /// Raw items inside the window per configured source (config order).
    pub source_counts: Vec<SourceCount>,
    pub failed_sources: Vec<FailedSource>,
}

pub fn assemble(candidates: &[Candidate], summaries: &Summaries, a: Assembly<'_>) -> Digest {
    let events: Vec<(DigestEvent, String)> = candidates
        .iter()
        .zip(&summaries.texts)
        .zip(&summaries.fell_back)
        .map(|((c, text), fell_back)| {
            let event = DigestEvent {
                n: 0,
                id: c.event.id.clone(),
                // A release is headed by its name and version ("PyTorch 2.9.1", not
                // "PyTorch 2.9.1 Release, bug fix release"): the body says what kind it is.
                title: c.event.heading(),
                summary: text.summary.clone(),
                why_it_matters: text.why_it_matters.clone(),
                brief: text.brief.clone(),
                layers: c.classification.layers.clone(),
                score: c.assessment.score,
                kind: c.event.primary().kind,
                release: c.assessment.release,
                sources: source_links(&c.event),
                score_breakdown: c.assessment.breakdown.clone(),
                llm_fallback: fell_back.is_some(),
                llm_fallback_reason: fell_back.clone(),
                translations: BTreeMap::new(),
                follow_up: None,
                followed: None,
            };
            (event, text.watch.clone())
        })
        .collect();
    let mut events = events;
    let mut watch_translations = vec![BTreeMap::new(); events.len()];
    for (language, texts) in &summaries.other_languages {
        for (i, ((event, watch), other)) in events.iter_mut().zip(texts).enumerate() {
            let differs = |mine: &str, theirs: &str| (mine != theirs).then(|| theirs.to_string());
            let words = EventWords {
                summary: differs(&event.summary, &other.summary),
                why_it_matters: differs(&event.why_it_matters, &other.why_it_matters),
                brief: differs(&event.brief, &other.brief),
            };
            if words != EventWords::default() {
                event.translations.insert(language.clone(), words);
            }
            if *watch != other.watch {
                watch_translations[i].insert(language.clone(), other.watch.clone());
            }
        }
    }
    let watchlist = events
        .iter()
        .zip(watch_translations)
        .take(OVERVIEW_EVENTS)
        .map(|((e, watch), translations)| WatchItem {
            event_id: e.id.clone(),
            text: watch.clone(),
            translations,
        })
        .collect();
    let mut digest = Digest {
        date: a.date,
        language: a.config.digest.language.clone(),
        window: a.window,
        generation_mode: summaries.mode.clone(),
        title: String::new(),
        overview: String::new(),
        key_changes: Vec::new(),
        papers: Vec::new(),
        other_updates: Vec::new(),
        watchlist,
        source_counts: a.source_counts,
        failed_sources: a.failed_sources,
        llm_fallbacks: summaries.fell_back.iter().filter(|f| f.is_some()).count(),
        llm_usage: summaries.usage,
        llm_headline: summaries.headline.clone(),
        repeats: Vec::new(),
        week: None,
    };
    section(
        &mut digest,
        events.into_iter().map(|(e, _)| e).collect(),
        a.config.digest.key_changes,
        a.locale,
    );
    use_llm_headline(&mut digest, true);
    digest.number_events();
    digest
}

/// Fills the sections and the title and overview from events sorted by score.
pub(crate) fn section(
    digest: &mut Digest,
    events: Vec<DigestEvent>,
    key_changes: usize,
    locale: &Locale,
) {
    let mut events = events.into_iter();
    digest.key_changes = events.by_ref().take(key_changes).collect();
    let (papers, others): (Vec<_>, Vec<_>) = events.partition(|e| e.kind == ItemKind::Paper);
    digest.papers = papers;
    digest.other_updates = others;
    let ordered: Vec<&DigestEvent> = digest.events().collect();
    // A day with nothing above the threshold still needs a title (blog, feed, subject):
    // `headline` gives the quiet-day one; its overview stays empty.
    let title = headline(&ordered, locale);
    // One clause per event (an LLM's briefs are sentences: their full stops go), each
    // starting as a sentence does.
    let clauses: Vec<String> = ordered
        .iter()
        .take(OVERVIEW_CLAUSES)
        .filter_map(|e| {
            let brief = e.brief.trim().trim_end_matches(['.', '。', ';', '；']);
            (!brief.is_empty()).then(|| capitalised(brief, &e.title, locale))
        })
        .collect();
    let overview = if clauses.is_empty() {
        String::new()
    } else {
        format!(
            "{}{}",
            clauses.join(locale.get("overview_separator")),
            locale.get("overview_end")
        )
    };
    digest.title = title;
    digest.overview = overview;
}

/// A clause as the start of a sentence: "the paper X reports …" -> "The paper X reports …",
/// unless it opens as the event's `title` does or with a name by its form (a capital or a
/// hyphen after its first letter): a name keeps its spelling ("vLLM v0.8.3 …",
/// "cutile-python v1.2.0 …", "arXiv", never "VLLM", "Cutile-python" or "ArXiv"). A script
/// without letter case (Chinese) is left as it is.
fn capitalised(clause: &str, title: &str, t: &Locale) -> String {
    let first = clause.split_whitespace().next().unwrap_or_default();
    if t.get("script") == "han"
        || title.split_whitespace().next() == Some(first)
        || first.chars().skip(1).any(|c| c.is_uppercase() || c == '-')
    {
        return clause.to_string();
    }
    let mut chars = clause.chars();
    match chars.next() {
        Some(first) if first.is_ascii_lowercase() => {
            first.to_ascii_uppercase().to_string() + chars.as_str()
        }
        _ => clause.to_string(),
    }
}

/// The digest's headline, a sentence in the reader's language: the top releases by name (or
/// the top event), then how many more releases, papers and posts the day has ("CUTLASS
/// 5.0.0 与 Triton v3.6.0 发布；另有 1 个版本发布、4 篇论文和 2 篇技术文章"). It is also the
/// email subject and the blog and feed title.
pub fn headline(ordered: &[&DigestEvent], t: &Locale) -> String {
    let Some(top) = ordered.first() else {
        return t.get("empty_title").to_string();
    };
    let short = |e: &DigestEvent| truncate_chars(&e.title, TITLE_PART_CHARS);
    let named: Vec<&DigestEvent> = if top.kind == ItemKind::Release {
        ordered
            .iter()
            .copied()
            .filter(|e| e.kind == ItemKind::Release)
            .take(HEADLINE_RELEASES)
            .collect()
    } else {
        vec![top]
    };
    let lead = match top.kind {
        ItemKind::Release => {
            let names: Vec<String> = named
                .iter()
                .map(|e| {
                    truncate_chars(
                        &crate::release_notes::release_name(&e.title),
                        TITLE_PART_CHARS,
                    )
                })
                .collect();
            t.fill(
                "headline_released",
                &[("names", &names.join(t.get("headline_and")))],
            )
        }
        // A zh-CN reader's headline is Chinese: the table may lead with the event's
        // overview clause (its name and main figure) instead of its English title.
        ItemKind::Paper => t.fill(
            "headline_paper",
            &[
                ("title", &short(top)),
                ("brief", &capitalised(&top.brief, &top.title, t)),
            ],
        ),
        ItemKind::Post => t.fill(
            "headline_post",
            &[
                ("title", &short(top)),
                ("brief", &capitalised(&top.brief, &top.title, t)),
            ],
        ),
    };
    let rest = |kind: ItemKind| {
        ordered
            .iter()
            .filter(|e| e.kind == kind && !named.iter().any(|n| n.id == e.id))
            .count()
    };
    let counts: Vec<String> = [
        (ItemKind::Release, "headline_releases"),
        (ItemKind::Paper, "headline_papers"),
        (ItemKind::Post, "headline_posts"),
    ]
    .into_iter()
    .filter_map(|(kind, key)| {
        let n = rest(kind);
        (n > 0).then(|| t.count(key, n))
    })
    .collect();
    if counts.is_empty() {
        // A release alone: in zh-CN its overview clause (name, level and main figure) makes
        // a Chinese headline where "<name> 发布" would be a name and one word.
        if top.kind == ItemKind::Release && named.len() == 1 && !top.brief.is_empty() {
            let names = crate::release_notes::release_name(&top.title);
            return t.fill(
                "headline_release_alone",
                &[
                    ("names", &names),
                    ("brief", &capitalised(&top.brief, &top.title, t)),
                ],
            );
        }
        return lead;
    }
    let items = match counts.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, init)) => format!(
            "{}{}{last}",
            init.join(t.get("list_separator")),
            t.get("headline_last_and")
        ),
        None => String::new(),
    };
    format!(
        "{lead}{}{}",
        t.get("title_separator"),
        t.fill("headline_rest", &[("items", &items)])
    )
}

/// Numbered source links: one per item with a URL, named by its source.
fn source_links(event: &Event) -> Vec<SourceLink> {
    let mut links: Vec<SourceLink> = Vec::new();
    for item in &event.items {
        if !item.url.is_empty() && !links.iter().any(|l| l.url == item.url) {
            links.push(SourceLink {
                name: item.source.clone(),
                url: item.url.clone(),
            });
        }
    }
    links
}

/// The digest one subscriber sees: only events passing the filter, the highest-scoring of
/// them as key changes, and a title, overview and watch list about those events only.
pub fn filter(digest: &Digest, f: &Filter, locale: &Locale) -> Digest {
    let key_changes = digest.key_changes.len().max(1);
    // Each event's words are read once for a followed phrase: it both passes the event and
    // marks it.
    let mut events: Vec<DigestEvent> = digest
        .events()
        .filter_map(|e| {
            let followed = f.follows(e);
            (followed.is_some() || f.passes_threshold_and_layers(e)).then(|| DigestEvent {
                followed: followed.map(str::to_string),
                ..e.clone()
            })
        })
        .collect();
    // A boosted reader's liked layers rank higher (and so lead as key changes).
    events.sort_by(|a, b| f.rank(b).cmp(&f.rank(a)).then_with(|| a.id.cmp(&b.id)));
    let kept: std::collections::BTreeSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    // Everything but the events, which are cloned once above; `section` fills the
    // sections, title and overview.
    let mut out = Digest {
        date: digest.date,
        language: digest.language.clone(),
        window: digest.window.clone(),
        generation_mode: digest.generation_mode.clone(),
        title: String::new(),
        overview: String::new(),
        key_changes: Vec::new(),
        papers: Vec::new(),
        other_updates: Vec::new(),
        watchlist: digest
            .watchlist
            .iter()
            .filter(|w| kept.contains(w.event_id.as_str()))
            .cloned()
            .collect(),
        source_counts: digest.source_counts.clone(),
        failed_sources: digest.failed_sources.clone(),
        llm_fallbacks: digest.llm_fallbacks,
        llm_usage: digest.llm_usage,
        llm_headline: digest.llm_headline.clone(),
        repeats: digest.repeats.clone(),
        week: digest.week.clone(),
    };
    section(&mut out, events, key_changes, locale);
    let full = out.events().count() == digest.events().count();
    use_llm_headline(&mut out, full);
    out
}

/// The LLM's headline and overview replace the built ones when they were written for these
/// events in this language: the `full` digest, not a reader's subset, and not another
/// language.
fn use_llm_headline(d: &mut Digest, full: bool) {
    if let Some(h) = &d.llm_headline
        && full
        && h.language == d.language
    {
        d.title = h.title.clone();
        d.overview = h.overview.clone();
    }
}

/// Raw items per source, for the generation notes: every source that fetched now, plus
/// failed ones whose earlier items are still in the window.
pub fn count_by_source(
    items: &[Item],
    config: &Settings,
    failed: &[FailedSource],
) -> Vec<SourceCount> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for item in items {
        *counts.entry(item.source.as_str()).or_default() += 1;
    }
    config
        .sources
        .iter()
        .map(|s| SourceCount {
            source: s.name.clone(),
            items: counts.get(s.name.as_str()).copied().unwrap_or(0),
        })
        .filter(|c| c.items > 0 || !failed.iter().any(|f| f.source == c.source))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clause_starts_a_sentence_but_a_name_keeps_its_spelling() {
        let (en, zh) = (Locale::builtin("en"), Locale::builtin("zh-CN"));
        assert_eq!(
            capitalised(
                "the paper TileFuse reports 2x",
                "TileFuse: fused kernels",
                &en
            ),
            "The paper TileFuse reports 2x"
        );
        for (clause, title) in [
            ("vllm v0.8.3 is out", "vllm v0.8.3"),
            ("cutile-python v1.2.0 is out", "Something else"),
            ("arXiv has a new paper", "X: y"),
        ] {
            assert_eq!(capitalised(clause, title, &en), clause);
        }
        assert_eq!(
            capitalised("bitsandbytes 0.39.0 次版本发布", "Other", &zh),
            "bitsandbytes 0.39.0 次版本发布"
        );
    }

    #[test]
    fn the_learned_correction_reads_only_events_it_can_bring_within_reach() {
        let config = Settings::parse("").unwrap();
        let now = Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap();
        let item = |key: &str, title: &str, text: &str| crate::model::Item {
            key: key.into(),
            source: "s".into(),
            kind: crate::model::ItemKind::Post,
            title: title.into(),
            url: format!("https://example.org/{key}"),
            text: text.into(),
            published: now,
            release: None,
            arxiv_id: None,
            cited_arxiv: vec![],
            links: vec![],
        };
        let items = vec![
            item(
                "far",
                "Warehouse robot arms pick parcels",
                "A logistics company shows its new robot arms.",
            ),
            item(
                "near",
                "Fusing attention kernels in Triton for H100",
                "We fuse the attention kernel and tune its tiling, cutting latency by 30%.",
            ),
        ];
        let window = Window {
            start: (now - Duration::days(1)).fixed_offset(),
            end: (now + Duration::hours(1)).fixed_offset(),
        };
        let classifier = Classifier::new(&config.layers, &config.relevance);
        assert!(classifier.learns());
        let all = candidates(items, &window, &config, &classifier);
        let by_key = |key: &str| {
            all.iter()
                .find(|c| c.event.items[0].key == key)
                .expect("an event per item")
        };
        let learned = |c: &Candidate| c.assessment.breakdown.iter().any(|b| b.name == "learned");
        let (far, near) = (by_key("far"), by_key("near"));
        let reach = config.digest.min_score.as_f64() - learned::GAIN_POINTS;
        assert!(far.assessment.prior <= reach, "{}", far.assessment.prior);
        assert!(far.classification.relevance.learned.is_none() && !learned(far));
        assert!(near.assessment.prior > reach, "{}", near.assessment.prior);
        assert!(near.classification.relevance.learned.is_some() && learned(near));
    }

    #[test]
    fn window_matches_the_reference_digest() {
        let config = Settings::parse("").unwrap();
        let w = window_for(NaiveDate::from_ymd_opt(2026, 10, 28).unwrap(), &config);
        assert_eq!(w.start.to_rfc3339(), "2026-10-27T08:00:00+08:00");
        assert_eq!(w.end.to_rfc3339(), "2026-10-28T08:00:00+08:00");
    }

    #[test]
    fn window_end_in_a_dst_gap_moves_to_the_next_valid_instant() {
        let config =
            Settings::parse("[digest]\ntimezone = \"Europe/Berlin\"\nwindow_end = \"02:30\"\n")
                .unwrap();
        // 2026-03-29 02:30 does not exist in Berlin (clocks jump 02:00 -> 03:00).
        let w = window_for(NaiveDate::from_ymd_opt(2026, 3, 29).unwrap(), &config);
        assert_eq!(w.end.to_rfc3339(), "2026-03-29T03:00:00+02:00");
        // Ambiguous 02:30 on 2026-10-25 takes the earlier instant (still summer time).
        let w = window_for(NaiveDate::from_ymd_opt(2026, 10, 25).unwrap(), &config);
        assert_eq!(w.end.to_rfc3339(), "2026-10-25T02:30:00+02:00");
    }

    #[test]
    fn latest_complete_date_respects_the_end_time() {
        let config = Settings::parse("").unwrap();
        let before = Utc.with_ymd_and_hms(2026, 10, 27, 23, 59, 0).unwrap(); // 07:59 +08:00
        let after = Utc.with_ymd_and_hms(2026, 10, 28, 0, 0, 0).unwrap(); // 08:00 +08:00
        assert_eq!(
            latest_complete_date(before, &config).to_string(),
            "2026-10-27"
        );
        assert_eq!(
            latest_complete_date(after, &config).to_string(),
            "2026-10-28"
        );
    }
}
