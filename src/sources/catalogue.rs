//! The curated catalogue of sources (sources/catalogue.toml, embedded). Pure.

use std::collections::BTreeSet;

use serde::Deserialize;

/// The catalogue as shipped.
pub const CATALOGUE_TOML: &str = include_str!("../../sources/catalogue.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    /// A feed URL or a shorthand.
    pub url: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub layers: Vec<String>,
    pub why: String,
    /// Could not be checked offline when the catalogue was written.
    #[serde(default)]
    pub unverified: bool,
}

fn one() -> f64 {
    1.0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    source: Vec<Entry>,
}

/// The shipped catalogue.
pub fn builtin() -> Vec<Entry> {
    parse(CATALOGUE_TOML).expect("the shipped catalogue parses (tested)")
}

pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    toml::from_str::<File>(text)
        .map(|f| f.source)
        .map_err(|e| format!("the source catalogue is invalid: {e}"))
}

impl Entry {
    /// The URL fetched: the shorthand expanded.
    pub fn feed_url(&self) -> Result<String, String> {
        Ok(match crate::config::shorthand::expand(&self.url)? {
            Some(e) => e.url,
            None => self.url.clone(),
        })
    }
}

/// Every problem with the catalogue's entries: names and feed URLs unique, a reason each,
/// kinds and layers known (`layers`: the configured layer names), weights in range.
pub fn problems(entries: &[Entry], layers: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let (mut names, mut urls) = (BTreeSet::new(), BTreeSet::new());
    for e in entries {
        let at = format!("catalogue \"{}\"", e.name);
        if e.name.trim().is_empty() || !names.insert(e.name.clone()) {
            problems.push(format!("{at}: the name is empty or used twice"));
        }
        match e.feed_url() {
            Ok(url) => {
                if !urls.insert(url.clone()) {
                    problems.push(format!("{at}: {url} is listed twice"));
                }
                if let Err(why) = crate::config::parse_location(&url) {
                    problems.push(format!("{at}: url {url} {why}"));
                }
            }
            Err(why) => problems.push(format!("{at}: {why}")),
        }
        let implied = crate::config::shorthand::expand(&e.url)
            .ok()
            .flatten()
            .is_some();
        match e.kind.as_deref() {
            Some(k) if crate::config::parse_source_kind(k).is_none() => {
                problems.push(format!("{at}: kind \"{k}\" is not a source kind"))
            }
            None if !implied => problems.push(format!("{at}: needs a kind")),
            _ => {}
        }
        if !(0.0..=1.0).contains(&e.weight) {
            problems.push(format!("{at}: weight {} is out of 0.0-1.0", e.weight));
        }
        for l in &e.layers {
            if !layers.contains(&l.as_str()) {
                problems.push(format!("{at}: layer \"{l}\" is not configured"));
            }
        }
        if e.why.trim().len() < 20 {
            problems.push(format!("{at}: needs a reason (why) of a sentence"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_has_30_distinct_sources_with_reasons() {
        let entries = builtin();
        assert!(entries.len() >= 30, "{}", entries.len());
        assert_eq!(
            problems(&entries, crate::config::DEFAULT_LAYERS),
            Vec::<String>::new()
        );
        let sorts: BTreeSet<&str> = entries
            .iter()
            .map(|e| e.url.split(':').next().unwrap())
            .collect();
        assert!(sorts.contains("github") && sorts.contains("arxiv") && sorts.contains("discourse"));
    }

    #[test]
    fn problems_name_the_entry() {
        let bad = parse(
            "[[source]]\nname = \"x\"\nurl = \"github:only\"\nwhy = \"short\"\nlayers = [\"gpu\"]\n",
        )
        .unwrap();
        let p = problems(&bad, crate::config::DEFAULT_LAYERS);
        assert!(
            p.iter()
                .any(|m| m.contains("catalogue \"x\"") && m.contains("github:owner/repo")),
            "{p:?}"
        );
        assert!(p.iter().any(|m| m.contains("layer \"gpu\"")), "{p:?}");
        assert!(p.iter().any(|m| m.contains("reason")), "{p:?}");
    }
}
