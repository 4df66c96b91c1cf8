//! Domain values shared by every stage: items, events, scores, the digest and subscriber filters.
//!
//! Everything here is plain data. The digest is JSON-serialisable because it is stored as data
//! and every output (Markdown, HTML, Telegram, Discord, JSON) is a render of it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use chrono::{DateTime, FixedOffset, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

/// What a source publishes; decides how its items are parsed and which kind they get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Arxiv,
    GithubReleases,
    Blog,
    Feed,
}

/// What an item or event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    Release,
    Paper,
    Post,
}

/// How big a release is, from its version tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseLevel {
    Major,
    Minor,
    Patch,
    PreRelease,
    Nightly,
}

impl ReleaseLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseLevel::Major => "major",
            ReleaseLevel::Minor => "minor",
            ReleaseLevel::Patch => "patch",
            ReleaseLevel::PreRelease => "pre_release",
            ReleaseLevel::Nightly => "nightly",
        }
    }
}

/// One entry of one source, reduced to what the pipeline needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Stable key: `arxiv:<id>`, `url:<normalised link>`, `guid:<source>:<guid>` or `hash:<hex>`.
    pub key: String,
    /// Name of the configured source.
    pub source: String,
    pub kind: ItemKind,
    pub title: String,
    /// Normalised link to the item, empty when the entry had none.
    pub url: String,
    /// Plain text (HTML removed), used for classification and summaries.
    pub text: String,
    pub published: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseLevel>,
    /// arXiv id without version, for papers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arxiv_id: Option<String>,
    /// arXiv ids this item links to (a blog post about a paper).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cited_arxiv: Vec<String>,
    /// Other pages its text links to, normalised (release notes pointing to "our blog", a
    /// post linking the project's repository); at most [`crate::parse::MAX_LINKS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

impl Item {
    /// "owner/name" of the item's link into a GitHub repository, "" for any other link.
    pub fn github_repository(&self) -> &str {
        github_repository(&self.url)
    }
}

/// "owner/name" of a link into a GitHub repository, "" for any other link.
pub fn github_repository(url: &str) -> &str {
    let Some(at) = url.find("github.com/") else {
        return "";
    };
    let path = &url[at + "github.com/".len()..];
    let end = path
        .match_indices('/')
        .nth(1)
        .map_or(path.len(), |(i, _)| i);
    &path[..end]
}

/// Items about the same thing, primary item first (the one whose title the event shows).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Stable id derived from the primary item's key.
    pub id: String,
    pub items: Vec<Item>,
}

impl Event {
    pub fn primary(&self) -> &Item {
        &self.items[0]
    }

    /// The text the event is read from: the first item's that has one, else the primary
    /// title. Scoring and summaries read the same text.
    pub fn main_text(&self) -> &str {
        self.items
            .iter()
            .map(|i| i.text.as_str())
            .find(|t| !t.trim().is_empty())
            .unwrap_or(self.primary().title.as_str())
    }

    /// The title a heading gives the event: a release by its name and version ("PyTorch
    /// 2.9.1", not "PyTorch 2.9.1 Release, bug fix release"; its body says what kind of
    /// release it is), anything else by its primary item's title.
    pub fn heading(&self) -> String {
        let primary = self.primary();
        match primary.kind {
            ItemKind::Release => crate::release_notes::release_name(&primary.title).to_string(),
            _ => primary.title.clone(),
        }
    }

    /// Distinct source names in item order.
    pub fn source_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for item in &self.items {
            if !names.contains(&item.source.as_str()) {
                names.push(&item.source);
            }
        }
        names
    }
}

/// A score in 0..=100 with one decimal, kept as tenths so that it orders and prints exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Score(u16);

impl Score {
    pub const MAX: Score = Score(1000);

    /// Rounds to one decimal and clamps to 0..=100.
    pub fn from_f64(value: f64) -> Score {
        let tenths = (value * 10.0).round();
        Score(tenths.clamp(0.0, 1000.0) as u16)
    }

    /// Parses a user-given threshold; `None` when outside 0..=100 or not a number.
    pub fn parse_threshold(value: f64) -> Option<Score> {
        (value.is_finite() && (0.0..=100.0).contains(&value)).then(|| Score::from_f64(value))
    }

    pub fn from_tenths(tenths: u16) -> Score {
        Score(tenths.min(1000))
    }

    pub fn tenths(self) -> u16 {
        self.0
    }

    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 10.0
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0 / 10, self.0 % 10)
    }
}

impl Serialize for Score {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.as_f64())
    }
}

impl<'de> Deserialize<'de> for Score {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Score, D::Error> {
        let value = f64::deserialize(d)?;
        Score::parse_threshold(value)
            .ok_or_else(|| serde::de::Error::custom(format!("score {value} is outside 0..=100")))
    }
}

/// One component of a score, as `kdigest explain` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreComponent {
    /// Component name: source, relevance, impact, corroboration, freshness.
    pub name: String,
    /// Raw value in 0..=1.
    pub value: f64,
    /// Configured weight (points this component is worth at value 1).
    pub weight: f64,
    /// value * weight, rounded to two decimals.
    pub points: f64,
    /// Why the value is what it is, in words.
    pub reason: String,
}

/// A link to one source of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLink {
    pub name: String,
    pub url: String,
}

/// Event ids are hex digits (ten from `cluster`); anything else in a URL, button or link is
/// refused before it reaches the store.
pub fn is_event_id(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// An event as the digest shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestEvent {
    pub id: String,
    /// Position in the full digest (1 = first key change), kept by filtering, so "event 4"
    /// means the same event in every render, `/why 4` and `kdigest explain 4`. 0 in digests
    /// stored before numbers were kept: renders count positions instead.
    #[serde(default)]
    pub n: usize,
    pub title: String,
    pub summary: String,
    pub why_it_matters: String,
    /// One sentence for the overview paragraph.
    pub brief: String,
    pub layers: Vec<String>,
    pub score: Score,
    pub kind: ItemKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseLevel>,
    pub sources: Vec<SourceLink>,
    pub score_breakdown: Vec<ScoreComponent>,
    /// True when the LLM was asked but this event fell back to extractive text.
    #[serde(default)]
    pub llm_fallback: bool,
    /// Why it fell back: `timeout`, `deadline`, `http`, `json`, `schema`, `too_long`,
    /// `link`, `number`, `name` or `language`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_fallback_reason: Option<String>,
    /// What kdigest wrote for this event in the other reader languages, by language, where
    /// it differs from the text above (see [`Digest::in_language`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub translations: BTreeMap<String, EventWords>,
    /// The earlier story this event continues (crate::followup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<FollowUp>,
    /// In one reader's edition: the phrase they follow that this event is about
    /// (crate::following); renders mark the event. None in the stored digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followed: Option<String>,
}

impl DigestEvent {
    /// What a followed phrase is looked for in (crate::following): the title, the texts in
    /// every language, the sources' names and links.
    pub fn followable_text(&self) -> impl Iterator<Item = &str> {
        let own = [&self.title, &self.summary, &self.why_it_matters]
            .into_iter()
            .map(String::as_str);
        let translated = self.translations.values().flat_map(|w| {
            [&w.summary, &w.why_it_matters]
                .into_iter()
                .flatten()
                .map(String::as_str)
        });
        let sources = self
            .sources
            .iter()
            .flat_map(|s| [s.name.as_str(), s.url.as_str()]);
        own.chain(translated).chain(sources)
    }
}

/// A link from a new event to the event of an earlier digest it continues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowUp {
    /// The earlier digest.
    pub date: NaiveDate,
    pub event_id: String,
    pub title: String,
    pub reason: FollowUpReason,
    /// The earlier digest's watch-list line about that event, which this one resolves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolves: Option<String>,
    /// That line in the other reader languages.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resolves_translations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowUpReason {
    /// The same story, with sources the earlier digest did not have.
    Update,
    /// A paper's code, or a post about a paper, after the paper.
    Code,
    /// The same project and feature (the titles share its words, or it links the earlier
    /// story's page).
    Continues,
    /// The same story with nothing new: left out of the new digest.
    Repeat,
}

/// An event's own words in one more language; None keeps the digest language's text (a
/// quoted extract reads the same for every reader).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EventWords {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_it_matters: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brief: Option<String>,
}

/// A follow-up bullet, tied to the event it is about so that filtering can drop it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchItem {
    pub event_id: String,
    pub text: String,
    /// The text in the other reader languages, by language.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub translations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub start: DateTime<FixedOffset>,
    pub end: DateTime<FixedOffset>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCount {
    pub source: String,
    pub items: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedSource {
    pub source: String,
    /// The details, for operators (logs, `kdigest status`, the JSON form).
    pub error: String,
    /// Why, in words a reader's locale says (`failed_<kind>`): a zh-CN reader is not handed
    /// a parser's English message.
    #[serde(default)]
    pub kind: FailureKind,
}

/// What kind of failure kept a source out of a digest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Timed out, could not connect, or the file could not be read.
    Unreachable,
    /// An HTTP error status, a redirect loop, or a target the configuration refuses.
    Refused,
    /// The answer was not a feed: empty, an HTML page, or XML/JSON that does not parse.
    NotAFeed,
    /// Larger than the fetch limits, or slower to parse than its budget.
    TooLarge,
    /// Not fetched this run: it failed several times in a row and waits out its backoff.
    BackingOff,
    /// Anything else, and digests stored before kinds were recorded: the details are shown.
    #[default]
    Other,
}

impl FailureKind {
    /// The locale key of its words; None for [`FailureKind::Other`], said by its details.
    pub fn locale_key(self) -> Option<&'static str> {
        match self {
            FailureKind::Unreachable => Some("failed_unreachable"),
            FailureKind::Refused => Some("failed_refused"),
            FailureKind::NotAFeed => Some("failed_not_a_feed"),
            FailureKind::TooLarge => Some("failed_too_large"),
            FailureKind::BackingOff => Some("failed_backing_off"),
            FailureKind::Other => None,
        }
    }
}

/// One day's digest. The JSON form is documented in docs/digest-json.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    pub date: NaiveDate,
    pub language: String,
    pub window: Window,
    /// `extractive` or the LLM provider's name.
    pub generation_mode: String,
    pub title: String,
    pub overview: String,
    pub key_changes: Vec<DigestEvent>,
    pub papers: Vec<DigestEvent>,
    pub other_updates: Vec<DigestEvent>,
    pub watchlist: Vec<WatchItem>,
    pub source_counts: Vec<SourceCount>,
    pub failed_sources: Vec<FailedSource>,
    /// Events whose LLM summary failed validation and were summarised extractively instead.
    #[serde(default)]
    pub llm_fallbacks: usize,
    /// Token use reported by the LLM API, and its estimated cost when prices are configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_usage: Option<LlmUsage>,
    /// The LLM's headline and overview of the full digest: the title and overview of every
    /// render that shows all events in that language; others build their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_headline: Option<Headline>,
    /// Stories left out because a recent digest had them and nothing is new (reason
    /// `repeat`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<FollowUp>,
    /// Set on a weekly roll-up (crate::weekly): its week, "2026-W44" (an ISO week) or
    /// "2026-11-21/2026-11-27" (a reader's roll-up day); `date` is the week's last day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub week: Option<String>,
}

/// A headline and overview written for one set of events in one language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Headline {
    pub language: String,
    pub title: String,
    pub overview: String,
}

/// Tokens one digest's LLM requests used, from the API's `usage` fields.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LlmUsage {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// In the currency of the configured prices; None without prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

impl LlmUsage {
    /// Two phases' usage together (summaries and ratings).
    pub fn sum(a: Option<LlmUsage>, b: Option<LlmUsage>) -> Option<LlmUsage> {
        match (a, b) {
            (Some(a), Some(b)) => Some(LlmUsage {
                requests: a.requests + b.requests,
                prompt_tokens: a.prompt_tokens + b.prompt_tokens,
                completion_tokens: a.completion_tokens + b.completion_tokens,
                cost: match (a.cost, b.cost) {
                    (None, None) => None,
                    (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
                },
            }),
            (a, b) => a.or(b),
        }
    }
}

impl Digest {
    /// All events in reading order: key changes, papers, other updates.
    pub fn events(&self) -> impl Iterator<Item = &DigestEvent> {
        self.sections().into_iter().flat_map(|(_, events)| events)
    }

    /// The events in reading order, to change them.
    pub fn events_mut(&mut self) -> impl Iterator<Item = &mut DigestEvent> {
        self.key_changes
            .iter_mut()
            .chain(&mut self.papers)
            .chain(&mut self.other_updates)
    }

    /// Numbers the events 1, 2, ... in reading order (see [`DigestEvent::n`]).
    pub fn number_events(&mut self) {
        for (n, e) in self.events_mut().enumerate() {
            e.n = n + 1;
        }
    }

    /// The sections in reading order, named by their locale key.
    pub fn sections(&self) -> [(&'static str, &[DigestEvent]); 3] {
        [
            ("key_changes", &self.key_changes),
            ("papers", &self.papers),
            ("other_updates", &self.other_updates),
        ]
    }

    pub fn is_empty(&self) -> bool {
        self.events().next().is_none()
    }

    /// The digest as a reader of `language` gets it: every text kdigest wrote in that
    /// language where it has one; source text stays as it is. Pure.
    pub fn in_language(mut self, language: &str) -> Digest {
        if self.language == language {
            return self;
        }
        for e in self.events_mut() {
            if let Some(w) = e.translations.get(language) {
                let w = w.clone();
                e.summary = w.summary.unwrap_or(std::mem::take(&mut e.summary));
                e.why_it_matters = w
                    .why_it_matters
                    .unwrap_or(std::mem::take(&mut e.why_it_matters));
                e.brief = w.brief.unwrap_or(std::mem::take(&mut e.brief));
            }
            if let Some(f) = &mut e.follow_up
                && let Some(text) = f.resolves_translations.get(language)
            {
                f.resolves = Some(text.clone());
            }
        }
        for w in &mut self.watchlist {
            if let Some(text) = w.translations.get(language) {
                w.text = text.clone();
            }
        }
        self.language = language.to_string();
        self
    }

    /// The event numbered `n` (see [`DigestEvent::n`]); by position for older digests.
    pub fn event_number(&self, n: usize) -> Option<&DigestEvent> {
        self.events()
            .find(|e| e.n == n)
            .or_else(|| self.events().filter(|e| e.n == 0).nth(n.checked_sub(1)?))
    }
}

/// A layer a reader consistently likes (crate::feedback decides which) lets its events pass
/// that reader's threshold with this many points less. Here, beside the filter that applies
/// it, so the model names no module above it.
pub const BOOST_POINTS: u16 = 10;

/// What one subscriber wants to see.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Filter {
    /// Empty means every layer.
    pub layers: BTreeSet<String>,
    pub min_score: Score,
    /// The reader's layer boost (crate::feedback): None when off; else the layers their
    /// votes say they consistently like, whose events pass with
    /// [`BOOST_POINTS`] less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<BTreeSet<String>>,
    /// Projects and phrases the reader follows (crate::following): an event about one
    /// passes whatever its score and layers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub follows: Vec<String>,
}

impl Filter {
    pub fn accepts(&self, event: &DigestEvent) -> bool {
        // The cheap test first: reading the event's words for a followed phrase is not.
        self.passes_threshold_and_layers(event) || self.follows(event).is_some()
    }

    /// The event reaches the reader's threshold and has one of their layers (the filter
    /// without what they follow).
    pub fn passes_threshold_and_layers(&self, event: &DigestEvent) -> bool {
        self.threshold_for(event) <= event.score
            && (self.layers.is_empty() || event.layers.iter().any(|l| self.layers.contains(l)))
    }

    /// The followed phrase `event` is about, if any: one in its title, its texts in any
    /// language, or its sources' names and links.
    pub fn follows(&self, event: &DigestEvent) -> Option<&str> {
        if self.follows.is_empty() {
            return None;
        }
        crate::following::matched(&self.follows, event.followable_text())
    }

    /// The event has a layer the reader's boost holds.
    pub fn boosts(&self, event: &DigestEvent) -> bool {
        self.boost
            .as_ref()
            .is_some_and(|b| event.layers.iter().any(|l| b.contains(l)))
    }

    /// Where the event ranks for this reader: its score, plus the boost's points when it
    /// has a layer they like (the score shown stays the event's own).
    pub fn rank(&self, event: &DigestEvent) -> u16 {
        let points = if self.boosts(event) {
            BOOST_POINTS * 10
        } else {
            0
        };
        event.score.tenths() + points
    }

    /// The score `event` must reach: the reader's threshold, less the boost when the event
    /// has a layer they like.
    pub fn threshold_for(&self, event: &DigestEvent) -> Score {
        if self.boosts(event) {
            Score::from_tenths(self.min_score.tenths().saturating_sub(BOOST_POINTS * 10))
        } else {
            self.min_score
        }
    }
}

/// The generated text of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventText {
    pub summary: String,
    pub why_it_matters: String,
    pub brief: String,
    pub watch: String,
}

/// Texts for each digest candidate (same order), plus what the generation notes report:
/// what summarising hands to assembly.
#[derive(Debug, Clone, PartialEq)]
pub struct Summaries {
    pub texts: Vec<EventText>,
    /// Per candidate: why extractive text was used although the LLM was asked (a
    /// [`crate::summarize::prompt::LlmError::reason`] code); None when it was not asked or
    /// answered well.
    pub fell_back: Vec<Option<String>>,
    /// Tokens the LLM API reported for this digest (cached replies cost none).
    pub usage: Option<LlmUsage>,
    /// The digest's headline and overview as the LLM wrote them, when it did and they
    /// passed validation.
    pub headline: Option<Headline>,
    /// `extractive` or the provider's name.
    pub mode: String,
    /// The extractive texts in every other reader language, same order as `texts`: what a
    /// reader of that language gets for what kdigest writes itself.
    pub other_languages: Vec<(String, Vec<EventText>)>,
}

/// Conditional-GET validators of one source, kept between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_rounds_to_one_decimal_and_clamps() {
        assert_eq!(Score::from_f64(89.84).to_string(), "89.8");
        assert_eq!(Score::from_f64(89.85).to_string(), "89.9");
        assert_eq!(Score::from_f64(-3.0).to_string(), "0.0");
        assert_eq!(Score::from_f64(250.0), Score::MAX);
        assert_eq!(
            serde_json::to_string(&Score::from_f64(76.8)).unwrap(),
            "76.8"
        );
    }

    #[test]
    fn threshold_outside_range_is_refused() {
        assert!(Score::parse_threshold(100.5).is_none());
        assert!(Score::parse_threshold(-1.0).is_none());
        assert!(Score::parse_threshold(f64::NAN).is_none());
        assert_eq!(Score::parse_threshold(70.0), Some(Score::from_f64(70.0)));
    }
}
