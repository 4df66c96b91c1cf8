//! `kdigest eval DIR`: how well the selection path (parse, window, cluster, classify, score,
//! eligibility) does on labelled days. Each day folder holds a configuration whose sources
//! are feed files, and `labels.toml`: what an editor would run, with which layers, and what
//! should lead (format in tests/fixtures/eval/README.md).
//!
//! Items are the unit: an item is selected when its event is eligible. Precision and recall
//! count relevant items, ignoring the optional ones; layer F1 is micro-averaged over
//! (relevant item, layer) pairs using the layers of the item's event, selected or not; the
//! lead is right when the highest-scoring eligible event holds a `lead` item.
//!
//! Three measurements, so a model cannot look better than it is: in-sample (the shipped
//! configuration, whose learned weights were fitted on these same days), the phrase model
//! alone, and leave-one-day-out cross-validation: for each day, a model is fitted on the
//! other days and scored on the day left out. CI gates on the cross-validated figures.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use chrono::NaiveDate;
use serde::Deserialize;

use std::sync::Arc;

use crate::classify::Classifier;
use crate::config::{Config, SourceLocation};
use crate::digest::{self, Candidate};
use crate::learned::{self, Example, FitParams, Learned};
use crate::model::{Item, Window};
use crate::parse::parse_feed;
use crate::text::normalize_url;

/// What CI holds the model to, on the cross-validated figures (issue 28): nearly every
/// relevant item selected, few wrong ones, layers mostly right, and the right lead on nine
/// days of ten.
pub const MIN_RECALL: f64 = 0.95;
pub const MIN_PRECISION: f64 = 0.9;
pub const MIN_LAYER_F1: f64 = 0.85;
pub const MIN_LEAD_SHARE: f64 = 0.9;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    pub about: String,
    pub date: Option<NaiveDate>,
    pub lead: Vec<String>,
    #[serde(default)]
    pub relevant: Vec<Relevant>,
    #[serde(default)]
    pub optional: Vec<Optional>,
    /// Groups of links an editor would run as one story (a release and the post announcing
    /// it): each group must end up in one event.
    #[serde(default)]
    pub same_story: Vec<Vec<String>>,
    /// The lead a second editor chose, blind to `lead` and to kdigest's scores. It is not a
    /// gate: it measures how often two editors agree, the ceiling any lead rule can reach
    /// against one editor's labels.
    #[serde(default)]
    pub second_lead: Vec<String>,
}

impl Labels {
    /// Whether `url` names the labelled lead's story: a lead link, or a link run as one
    /// story with one.
    fn is_lead_story(&self, url: &str) -> bool {
        let key = link_key(url);
        let leads: BTreeSet<String> = self.lead.iter().map(|u| link_key(u)).collect();
        leads.contains(&key)
            || self.same_story.iter().any(|group| {
                let group: BTreeSet<String> = group.iter().map(|u| link_key(u)).collect();
                group.contains(&key) && !group.is_disjoint(&leads)
            })
    }

    /// Whether the two editors chose the same story to lead; None without a second editor.
    pub fn editors_agree(&self) -> Option<bool> {
        (!self.second_lead.is_empty())
            .then(|| self.second_lead.iter().any(|u| self.is_lead_story(u)))
    }

    /// The relevant labels and the optional links, by normalised link.
    fn by_link(&self) -> (HashMap<String, &Relevant>, BTreeSet<String>) {
        let relevant = self
            .relevant
            .iter()
            .map(|r| (link_key(&r.url), r))
            .collect();
        let optional = self.optional.iter().map(|o| link_key(&o.url)).collect();
        (relevant, optional)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relevant {
    pub url: String,
    pub title: String,
    pub layers: Vec<String>,
    pub why: String,
    /// The layers a second annotator gave the item, blind to `layers` and to kdigest
    /// (SECOND_EDITOR.md): not a gate, the measure of how far two people agree.
    #[serde(default)]
    pub second_layers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Optional {
    pub url: String,
    pub title: String,
    pub why: String,
}

/// One labelled day, loaded.
pub struct Day {
    pub name: String,
    pub date: NaiveDate,
    pub config: Config,
    pub labels: Labels,
}

/// Counts for one day (or summed over days).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub items: usize,
    pub relevant: usize,
    pub selected: usize,
    pub true_positives: usize,
    pub false_positives: usize,
    /// The model's layers against the labels.
    pub layers: LayerTally,
    /// `same_story` groups, and those that came out as one event.
    pub stories: usize,
    pub stories_joined: usize,
    /// kdigest's layers against the second annotator's, and the second annotator's
    /// against the first (the labels), on the items that have both.
    pub second: LayerTally,
    pub editors: LayerTally,
}

/// (item, layer) pairs: found in both, only in the one judged, only in the reference.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LayerTally {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
}

impl LayerTally {
    fn count(&mut self, reference: &BTreeSet<&str>, judged: &BTreeSet<&str>) {
        let tp = reference.intersection(judged).count();
        self.tp += tp;
        self.fp += judged.len() - tp;
        self.fn_ += reference.len() - tp;
    }

    fn add(&mut self, o: &LayerTally) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }

    /// Micro-F1; None when nothing was counted.
    pub fn f1(&self) -> Option<f64> {
        (self.tp + self.fp + self.fn_ > 0)
            .then(|| 2.0 * self.tp as f64 / (2 * self.tp + self.fp + self.fn_) as f64)
    }
}

impl Counts {
    pub fn precision(&self) -> f64 {
        ratio(
            self.true_positives,
            self.true_positives + self.false_positives,
        )
    }

    pub fn recall(&self) -> f64 {
        ratio(self.true_positives, self.relevant)
    }

    /// Layer micro-F1; 1 when there was nothing to tag.
    pub fn layer_f1(&self) -> f64 {
        self.layers.f1().unwrap_or(1.0)
    }

    pub fn add(&mut self, o: &Counts) {
        self.items += o.items;
        self.relevant += o.relevant;
        self.selected += o.selected;
        self.true_positives += o.true_positives;
        self.false_positives += o.false_positives;
        self.layers.add(&o.layers);
        self.stories += o.stories;
        self.stories_joined += o.stories_joined;
        self.second.add(&o.second);
        self.editors.add(&o.editors);
    }
}

/// An empty denominator is a perfect score: nothing to find, nothing wrongly found.
fn ratio(num: usize, den: usize) -> f64 {
    if den == 0 {
        1.0
    } else {
        num as f64 / den as f64
    }
}

/// The outcome of one day, with what went wrong in words.
#[derive(Debug, Clone)]
pub struct DayReport {
    pub name: String,
    pub counts: Counts,
    pub lead_right: bool,
    /// Whether the lead is the second editor's choice; None when the day has none.
    pub second_lead_right: Option<bool>,
    /// Whether the two editors agree on the lead; None without a second editor.
    pub editors_agree: Option<bool>,
    /// The title of the event that leads, if any is eligible.
    pub lead: Option<String>,
    /// One line per miss, wrong selection, layer error or wrong lead.
    pub errors: Vec<String>,
}

/// Every day folder under `dir` (folders holding a labels.toml), in name order.
pub fn load_days(dir: &Path) -> anyhow::Result<Vec<Day>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("Cannot read the eval directory {}", dir.display()))?;
    let mut folders: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("labels.toml").is_file())
        .collect();
    folders.sort();
    if folders.is_empty() {
        anyhow::bail!(
            "{} holds no labelled day (a folder with config.toml and labels.toml); see tests/fixtures/eval/README.md",
            dir.display()
        );
    }
    folders.iter().map(|f| load_day(f)).collect()
}

pub fn load_day(folder: &Path) -> anyhow::Result<Day> {
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let config = Config::load(&folder.join("config.toml"))?;
    let path = folder.join("labels.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("Cannot read {}", path.display()))?;
    let labels: Labels =
        toml::from_str(&text).with_context(|| format!("{} is not valid", path.display()))?;
    let date = match labels.date {
        Some(d) => d,
        None => name
            .get(..10)
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
            .with_context(|| {
                format!(
                    "{}: no `date` and the folder name does not start with YYYY-MM-DD",
                    path.display()
                )
            })?,
    };
    Ok(Day {
        name,
        date,
        config,
        labels,
    })
}

/// The day's items inside its window, read from the source files.
pub fn items(day: &Day) -> anyhow::Result<(Window, Vec<Item>)> {
    let window = digest::window_for(day.date, &day.config);
    let mut items = Vec::new();
    for source in &day.config.sources {
        let SourceLocation::File(path) = &source.location else {
            anyhow::bail!(
                "{}: source {} is not a file; an eval day reads only files (url = \"feeds/NAME\")",
                day.name,
                source.name
            );
        };
        let body =
            std::fs::read(path).with_context(|| format!("Cannot read {}", path.display()))?;
        let parsed = parse_feed(&body, source, window.end.to_utc())
            .with_context(|| format!("{}: source {} does not parse", day.name, source.name))?;
        items.extend(
            parsed.into_iter().filter(|i| {
                i.published >= window.start.to_utc() && i.published < window.end.to_utc()
            }),
        );
    }
    // What the store does: one row per key.
    items.sort_by(|a, b| a.key.cmp(&b.key));
    items.dedup_by(|a, b| a.key == b.key);
    Ok((window, items))
}

fn link_key(url: &str) -> String {
    normalize_url(url).unwrap_or_else(|| url.trim().to_string())
}

/// A day with its items read once: every measurement runs on the same items.
pub struct Loaded {
    pub day: Day,
    pub window: Window,
    pub items: Vec<Item>,
}

pub fn load(day: Day) -> anyhow::Result<Loaded> {
    let (window, items) = items(&day)?;
    check_labels(&day, &items)?;
    Ok(Loaded { day, window, items })
}

/// A label naming an item that is not in the window, or a layer that is not configured,
/// is an error: the labels must describe the data.
fn check_labels(day: &Day, items: &[Item]) -> anyhow::Result<()> {
    let known: BTreeSet<String> = items.iter().map(|i| link_key(&i.url)).collect();
    let labels = &day.labels;
    let layer_names: BTreeSet<&str> = day.config.layers.iter().map(|l| l.name.as_str()).collect();
    let mut problems = Vec::new();
    for url in labels
        .relevant
        .iter()
        .map(|r| &r.url)
        .chain(labels.optional.iter().map(|o| &o.url))
        .chain(&labels.lead)
        .chain(&labels.second_lead)
    {
        if !known.contains(&link_key(url)) {
            problems.push(format!("{url} is not an item in the window"));
        }
    }
    for r in &labels.relevant {
        for l in r.layers.iter().chain(r.second_layers.iter().flatten()) {
            if !layer_names.contains(l.as_str()) {
                problems.push(format!("{}: unknown layer {l}", r.url));
            }
        }
    }
    if labels.lead.is_empty() && !labels.relevant.is_empty() {
        problems.push("lead is empty although the day has relevant items".into());
    }
    for url in labels.same_story.iter().flatten() {
        if !known.contains(&link_key(url)) {
            problems.push(format!("same_story: {url} is not an item in the window"));
        }
    }
    if !problems.is_empty() {
        anyhow::bail!("{}/labels.toml: {}", day.name, problems.join("; "));
    }
    Ok(())
}

/// Which classifier a measurement uses.
#[derive(Clone)]
pub enum Model {
    /// What the day's configuration asks for (the built-in learned weights by default).
    Configured,
    /// The phrase lists alone.
    Phrases,
    /// The phrases with these learned weights.
    Fitted(Arc<Learned>),
}

fn classifier(day: &Day, model: &Model) -> Classifier {
    let (layers, relevance) = (&day.config.layers, &day.config.relevance);
    match model {
        Model::Configured => Classifier::new(layers, relevance),
        Model::Phrases => Classifier::with_model(layers, relevance, None),
        Model::Fitted(m) => Classifier::with_model(layers, relevance, Some(m.clone())),
    }
}

/// Runs the selection path on one day with `model` and compares it with the labels.
pub fn evaluate(loaded: &Loaded, model: &Model) -> DayReport {
    let Loaded { day, window, items } = loaded;
    let item_count = items.len();
    let labels = &day.labels;
    let classifier = classifier(day, model);
    let all = digest::candidates(items.clone(), window, &day.config, &classifier);
    let by_link: HashMap<String, &Candidate> = all
        .iter()
        .flat_map(|c| c.event.items.iter().map(move |i| (link_key(&i.url), c)))
        .collect();
    let eligible = digest::eligible(all.clone(), &day.config);
    let selected: BTreeSet<String> = eligible
        .iter()
        .flat_map(|c| c.event.items.iter().map(|i| link_key(&i.url)))
        .collect();
    let (relevant, optional) = labels.by_link();

    let mut counts = Counts {
        items: item_count,
        relevant: relevant.len(),
        selected: selected.len(),
        ..Counts::default()
    };
    let mut errors = Vec::new();
    let describe = |c: &Candidate| {
        let points: Vec<String> = c
            .classification
            .layer_points
            .iter()
            .map(|(l, p)| format!("{l} {p}"))
            .collect();
        format!(
            "score {}, layers [{}], points [{}], evidence {:.1}",
            c.assessment.score,
            c.classification.layers.join(", "),
            points.join(", "),
            c.classification.relevance.evidence()
        )
    };
    for link in &selected {
        if relevant.contains_key(link) {
            counts.true_positives += 1;
        } else if !optional.contains(link) {
            counts.false_positives += 1;
            let c = by_link[link];
            errors.push(format!(
                "wrongly selected: {} ({})",
                title_of(c, link),
                describe(c)
            ));
        }
    }
    let mut relevant_sorted: Vec<(&String, &&Relevant)> = relevant.iter().collect();
    relevant_sorted.sort_by_key(|(link, _)| *link);
    for (link, label) in relevant_sorted {
        let c = by_link[link];
        if !selected.contains(link) {
            errors.push(format!("missed: {} ({})", label.title, describe(c)));
        }
        let want: BTreeSet<&str> = label.layers.iter().map(String::as_str).collect();
        let got: BTreeSet<&str> = c.classification.layers.iter().map(String::as_str).collect();
        counts.layers.count(&want, &got);
        if let Some(second) = &label.second_layers {
            let second: BTreeSet<&str> = second.iter().map(String::as_str).collect();
            counts.second.count(&second, &got);
            counts.editors.count(&want, &second);
        }
        if want != got {
            errors.push(format!(
                "layers of {}: labelled [{}], got [{}] (phrases: {})",
                label.title,
                want.into_iter().collect::<Vec<_>>().join(", "),
                got.into_iter().collect::<Vec<_>>().join(", "),
                c.classification.keywords.join(", ")
            ));
        }
    }
    let top = eligible.first();
    let holds_one_of = |links: &[String]| {
        let links: BTreeSet<String> = links.iter().map(|u| link_key(u)).collect();
        match top {
            Some(c) => c
                .event
                .items
                .iter()
                .any(|i| links.contains(&link_key(&i.url))),
            None => links.is_empty(),
        }
    };
    let lead_right = holds_one_of(&labels.lead);
    let second_lead_right =
        (!labels.second_lead.is_empty()).then(|| holds_one_of(&labels.second_lead));
    if !lead_right {
        let want: Vec<String> = labels
            .lead
            .iter()
            .map(|u| {
                by_link.get(&link_key(u)).map_or(u.clone(), |c| {
                    format!("{} ({})", title_of(c, &link_key(u)), describe(c))
                })
            })
            .collect();
        errors.push(format!(
            "wrong lead: {} leads, the labels want {}",
            top.map_or("nothing".to_string(), |c| format!(
                "{} ({})",
                c.event.primary().title,
                describe(c)
            )),
            want.join(" or ")
        ));
    }
    for group in &labels.same_story {
        let events: BTreeSet<&str> = group
            .iter()
            .filter_map(|u| by_link.get(&link_key(u)).map(|c| c.event.id.as_str()))
            .collect();
        counts.stories += 1;
        if events.len() == 1 {
            counts.stories_joined += 1;
        } else {
            errors.push(format!(
                "one story in {} events: {}",
                events.len(),
                group.join(" + ")
            ));
        }
    }
    DayReport {
        name: day.name.clone(),
        counts,
        lead_right,
        second_lead_right,
        editors_agree: labels.editors_agree(),
        lead: top.map(|c| c.event.primary().title.clone()),
        errors,
    }
}

/// The day's events as training examples, classified by the phrases alone: an event is
/// relevant when it holds a relevant item, unlabelled when it holds only optional ones.
pub fn examples(loaded: &Loaded) -> Vec<Example> {
    let Loaded { day, window, items } = loaded;
    let labels = &day.labels;
    let (relevant, optional) = labels.by_link();
    let phrases = classifier(day, &Model::Phrases);
    digest::candidates(items.clone(), window, &day.config, &phrases)
        .into_iter()
        .map(|c| {
            let links: Vec<String> = c.event.items.iter().map(|i| link_key(&i.url)).collect();
            let labelled: Vec<&&Relevant> = links.iter().filter_map(|l| relevant.get(l)).collect();
            let relevant = if !labelled.is_empty() {
                Some(true)
            } else if links.iter().any(|l| optional.contains(l)) {
                None
            } else {
                Some(false)
            };
            Example {
                features: learned::features(&c.event),
                score: c.assessment.score.as_f64(),
                min_score: day.config.digest.min_score.as_f64(),
                layer_points: c.classification.anchored_points.iter().cloned().collect(),
                relevant,
                layers: labelled
                    .iter()
                    .flat_map(|r| r.layers.iter().cloned())
                    .collect(),
            }
        })
        .collect()
}

/// Fits the learned weights on training examples of days judged with `config`'s layers.
fn fit(config: &Config, examples: &[&Example], params: FitParams) -> Learned {
    let layer_names: Vec<String> = config.layers.iter().map(|l| l.name.clone()).collect();
    learned::fit(examples, &layer_names, params)
}

/// Leave-one-day-out: each day scored by weights fitted on the other days.
pub fn cross_validate(days: &[Loaded]) -> Vec<DayReport> {
    cross_validate_with(days, FitParams::default())
}

/// Leave-one-day-out with other training settings (how the defaults were chosen).
pub fn cross_validate_with(days: &[Loaded], params: FitParams) -> Vec<DayReport> {
    let examples: Vec<Vec<Example>> = days.iter().map(examples).collect();
    days.iter()
        .enumerate()
        .map(|(out, day)| {
            let rest: Vec<&Example> = examples
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != out)
                .flat_map(|(_, e)| e)
                .collect();
            let model = fit(&day.day.config, &rest, params);
            evaluate(day, &Model::Fitted(Arc::new(model)))
        })
        .collect()
}

fn title_of(c: &Candidate, link: &str) -> String {
    c.event
        .items
        .iter()
        .find(|i| link_key(&i.url) == link)
        .map_or_else(|| c.event.primary().title.clone(), |i| i.title.clone())
}

/// One measurement as a table: a row per day, then the overall row.
pub fn table(out: &mut String, title: &str, days: &[DayReport]) -> (Counts, usize) {
    let mut total = Counts::default();
    let _ = writeln!(out, "{title}");
    let _ = writeln!(
        out,
        "{:<34} {:>6} {:>8} {:>8} {:>9} {:>7} {:>8}  lead",
        "day", "items", "relevant", "selected", "precision", "recall", "layer F1"
    );
    for d in days {
        total.add(&d.counts);
        let _ = writeln!(
            out,
            "{:<34} {:>6} {:>8} {:>8} {:>9.3} {:>7.3} {:>8.3}  {}",
            d.name,
            d.counts.items,
            d.counts.relevant,
            d.counts.selected,
            d.counts.precision(),
            d.counts.recall(),
            d.counts.layer_f1(),
            if d.lead_right { "right" } else { "WRONG" }
        );
    }
    let leads_right = days.iter().filter(|d| d.lead_right).count();
    let _ = writeln!(
        out,
        "{:<34} {:>6} {:>8} {:>8} {:>9.3} {:>7.3} {:>8.3}  {}/{} right",
        "overall",
        total.items,
        total.relevant,
        total.selected,
        total.precision(),
        total.recall(),
        total.layer_f1(),
        leads_right,
        days.len()
    );
    if total.stories > 0 {
        let _ = writeln!(
            out,
            "one story, one event: {}/{} same-story groups joined",
            total.stories_joined, total.stories
        );
    }
    second_editor(out, days);
    if let (Some(editors), Some(second)) = (total.editors.f1(), total.second.f1()) {
        let _ = writeln!(
            out,
            "second annotator (blind), layers: the annotators agree at micro-F1 {editors:.3}; kdigest against the second annotator {second:.3}"
        );
    }
    (total, leads_right)
}

/// Each day's errors under a heading.
pub fn errors(out: &mut String, title: &str, days: &[DayReport]) {
    if days.iter().all(|d| d.errors.is_empty()) {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    for d in days.iter().filter(|d| !d.errors.is_empty()) {
        let _ = writeln!(out, "\n{}:", d.name);
        for e in &d.errors {
            let _ = writeln!(out, "  - {e}");
        }
    }
}

/// On the days a second editor chose a lead blind: how often the two editors agree (the
/// ceiling for any lead rule judged against one of them), how often the lead is the second
/// editor's, and how often it is either editor's.
fn second_editor(out: &mut String, days: &[DayReport]) {
    let judged: Vec<&DayReport> = days.iter().filter(|d| d.editors_agree.is_some()).collect();
    if judged.is_empty() {
        return;
    }
    let count = |f: &dyn Fn(&DayReport) -> bool| judged.iter().filter(|d| f(d)).count();
    let _ = writeln!(
        out,
        "second editor (blind), {} days: the editors agree on {}; the lead is the second editor's on {}, either editor's on {}",
        judged.len(),
        count(&|d| d.editors_agree == Some(true)),
        count(&|d| d.second_lead_right == Some(true)),
        count(&|d| d.lead_right || d.second_lead_right == Some(true)),
    );
}

/// What falls short of the gates, in words; empty when they hold.
pub fn shortfalls(total: &Counts, leads_right: usize, days: usize) -> Vec<String> {
    let mut failed = Vec::new();
    if total.recall() < MIN_RECALL {
        failed.push(format!("recall {:.3} < {MIN_RECALL}", total.recall()));
    }
    if total.precision() < MIN_PRECISION {
        failed.push(format!(
            "precision {:.3} < {MIN_PRECISION}",
            total.precision()
        ));
    }
    if total.layer_f1() < MIN_LAYER_F1 {
        failed.push(format!("layer F1 {:.3} < {MIN_LAYER_F1}", total.layer_f1()));
    }
    if (leads_right as f64) < MIN_LEAD_SHARE * days as f64 - 1e-9 {
        failed.push(format!(
            "lead right on {leads_right} of {days} days (< {:.0}%)",
            MIN_LEAD_SHARE * 100.0
        ));
    }
    failed
}

/// The whole evaluation as `kdigest eval` prints it: the shipped model in-sample, the
/// phrase model alone, then the cross-validated figures, which the gates read. Returns the
/// text and whether the gates hold.
pub fn run(days: &[Loaded]) -> (String, bool) {
    let shipped: Vec<DayReport> = days
        .iter()
        .map(|d| evaluate(d, &Model::Configured))
        .collect();
    let phrases: Vec<DayReport> = days.iter().map(|d| evaluate(d, &Model::Phrases)).collect();
    let crossed = cross_validate(days);
    let mut out = String::new();
    // In-sample only on the days the shipped weights were fitted on: on sealed held-out days
    // the same table is the figure a new reader would see.
    let fitted = crate::learned::fitted_days();
    let unseen = days
        .iter()
        .filter(|d| !fitted.contains(&d.day.name.as_str()))
        .count();
    let shipped_title = if unseen == 0 {
        "In-sample: the shipped configuration (its learned weights were fitted on these days)"
            .to_string()
    } else {
        format!(
            "The shipped configuration (its learned weights never saw {unseen} of these {} days)",
            days.len()
        )
    };
    table(&mut out, &shipped_title, &shipped);
    out.push('\n');
    table(
        &mut out,
        "The phrase model alone (no learned weights)",
        &phrases,
    );
    out.push('\n');
    let (total, leads) = table(
        &mut out,
        "Cross-validated: each day scored by weights fitted on the other days (CI gates on this)",
        &crossed,
    );
    errors(&mut out, "Errors, cross-validated:", &crossed);
    let failed = shortfalls(&total, leads, days.len());
    let pass = failed.is_empty();
    if pass {
        let _ = writeln!(
            out,
            "\nPASS (cross-validated): recall >= {MIN_RECALL}, precision >= {MIN_PRECISION}, layer F1 >= {MIN_LAYER_F1}, lead right on >= {:.0}% of days",
            MIN_LEAD_SHARE * 100.0
        );
    } else {
        let _ = writeln!(out, "\nFAIL: {}", failed.join("; "));
    }
    (out, pass)
}

/// `kdigest eval --fit`: weights fitted on every day, as the file crates/core/src/learned_model.tsv
/// holds them, with a header that says what they were fitted on.
pub fn fit_file(days: &[Loaded]) -> String {
    let examples: Vec<Example> = days.iter().flat_map(examples).collect();
    let rows: Vec<&Example> = examples.iter().collect();
    // load_days refuses a folder without days, so there is a first one.
    let model = fit(&days[0].day.config, &rows, FitParams::default());
    let count = examples.len();
    let p = FitParams::default();
    let names: Vec<&str> = days.iter().map(|d| d.day.name.as_str()).collect();
    model.to_tsv(&format!(
        "kdigest learned model: corrections to the phrase model (src/learned.rs, docs/scoring.md).\n\
         Written by `kdigest eval --fit`; do not edit by hand, refit after changing a labelled day.\n\
         Fitted on {} labelled days, {count} events: {}.\n\
         Settings: l2 {}, l1 {}, {} steps, positive share {} (layers {}).\n\
         head<TAB>feature<TAB>weight (log-odds per unit of feature value)",
        days.len(),
        names.join(", "),
        p.l2,
        p.l1,
        p.steps,
        p.positive_share,
        p.layer_positive_share
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_denominators_count_as_perfect_and_f1_combines_both() {
        let c = Counts::default();
        assert_eq!((c.precision(), c.recall()), (1.0, 1.0));
        let c = Counts {
            layers: LayerTally {
                tp: 6,
                fp: 2,
                fn_: 4,
            },
            ..Counts::default()
        };
        // p = 0.75, r = 0.6
        assert!((c.layer_f1() - 2.0 * 0.75 * 0.6 / 1.35).abs() < 1e-9);
    }

    #[test]
    fn editors_agree_on_a_story_not_only_on_a_link() {
        let labels = |second: &str| -> Labels {
            toml::from_str(&format!(
                r#"about = "x"
lead = ["https://github.com/o/p/releases/tag/v2.0.0"]
second_lead = [{second}]
same_story = [["https://github.com/o/p/releases/tag/v2.0.0", "https://p.dev/blog/p-2-0"]]
"#
            ))
            .unwrap()
        };
        // The same link, or the post run as one story with the labelled release: agreement.
        assert_eq!(
            labels(r#""https://github.com/o/p/releases/tag/v2.0.0""#).editors_agree(),
            Some(true)
        );
        assert_eq!(
            labels(r#""https://p.dev/blog/p-2-0/""#).editors_agree(),
            Some(true)
        );
        // Another story: disagreement; no second editor: nothing to say.
        assert_eq!(
            labels(r#""https://arxiv.org/abs/2411.1""#).editors_agree(),
            Some(false)
        );
        assert_eq!(labels("").editors_agree(), None);
    }

    #[test]
    fn layer_tallies_count_pairs_and_say_nothing_when_empty() {
        let mut t = LayerTally::default();
        assert_eq!(t.f1(), None);
        let set = |l: &[&'static str]| l.iter().copied().collect::<BTreeSet<&str>>();
        t.count(
            &set(&["runtime", "kernel_codegen"]),
            &set(&["runtime", "benchmark"]),
        );
        assert_eq!((t.tp, t.fp, t.fn_), (1, 1, 1));
        assert_eq!(t.f1(), Some(0.5));
    }
}
