//! Follow-ups across days, on the two-day fixture (tests/fixtures/followup): the second
//! day's paper code and "merged" post are linked to the first day's paper and RFC (with the
//! RFC's watch item resolved), and a mirror's repost of the first day's release is left
//! out, in the JSON and in what a reader sees.

use serde_json::Value;

use crate::helpers::{kdigest, repo_root};

fn config(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let feeds = repo_root().join("tests/fixtures/followup/feeds");
    let source = |name: &str, file: &str, kind: &str| {
        format!(
            "[[sources]]\nname = \"{name}\"\nurl = \"file://{}/{file}\"\nkind = \"{kind}\"\n",
            feeds.display()
        )
    };
    let text = format!(
        "[digest]\nlanguage = \"en\"\ntimezone = \"UTC\"\nwindow_end = \"20:00\"\nmin_score = 0\n{extra}\n[storage]\npath = \"{}\"\n{}{}{}{}{}",
        dir.join("k.sqlite").display(),
        source("triton-lang/triton", "triton.atom", "github_releases"),
        source(
            "tileflow-project/tileflow",
            "tileflow.atom",
            "github_releases"
        ),
        source("arXiv cs.PL", "arxiv.xml", "arxiv"),
        source("Triton forum", "forum.xml", "blog"),
        source("Release mirror", "mirror.xml", "blog"),
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn digest(config: &std::path::Path, date: &str, format: &str) -> String {
    let out = kdigest(config, &["digest", "--date", date, "--format", format])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn events(d: &Value) -> Vec<&Value> {
    ["key_changes", "papers", "other_updates"]
        .iter()
        .flat_map(|s| d[s].as_array().unwrap())
        .collect()
}

fn find<'a>(d: &'a Value, title: &str) -> &'a Value {
    events(d)
        .into_iter()
        .find(|e| e["title"].as_str().unwrap().contains(title))
        .unwrap_or_else(|| panic!("no event {title} in {d:#}"))
}

#[test]
fn the_second_day_links_what_continues_and_leaves_out_what_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "");
    let first: Value = serde_json::from_str(&digest(&config, "2026-11-10", "json")).unwrap();
    let titles: Vec<&str> = events(&first)
        .iter()
        .map(|e| e["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles.len(), 3, "{titles:?}");
    assert!(events(&first).iter().all(|e| e.get("follow_up").is_none()));
    let paper = find(&first, "TileFlow").clone();
    let rfc = find(&first, "RFC").clone();
    let release = find(&first, "triton v3.6.0").clone();
    let rfc_watch = first["watchlist"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["event_id"] == rfc["id"])
        .map(|w| w["text"].as_str().unwrap().to_string())
        .expect("the RFC is on the first day's watch list");

    let second: Value = serde_json::from_str(&digest(&config, "2026-11-11", "json")).unwrap();
    let code = find(&second, "tileflow v0.1.0");
    assert_eq!(code["follow_up"]["reason"], "code");
    assert_eq!(code["follow_up"]["event_id"], paper["id"]);
    assert_eq!(code["follow_up"]["date"], "2026-11-10");
    let merged = find(&second, "merged into Triton main");
    assert_eq!(merged["follow_up"]["reason"], "continues");
    assert_eq!(merged["follow_up"]["event_id"], rfc["id"]);
    assert_eq!(merged["follow_up"]["resolves"], rfc_watch.as_str());
    // The mirror's repost of the release: not presented as new, named in the notes.
    assert_eq!(events(&second).len(), 2, "{second:#}");
    assert_eq!(second["repeats"][0]["event_id"], release["id"]);
    assert_eq!(second["repeats"][0]["reason"], "repeat");

    // What a reader sees: the follow-up line with a link to the first day's digest, the
    // resolved watch item, and the repeat in the notes.
    let md = digest(&config, "2026-11-11", "md");
    assert!(
        md.contains(&format!(
            "↪ [The code or a write-up of the paper “{}” (2026-11-10)](https://digest.example.org/digest/2026-11-10#event-{})",
            paper["title"].as_str().unwrap(),
            paper["id"].as_str().unwrap()
        )),
        "{md}"
    );
    assert!(md.contains("Resolves that day's watch item:"), "{md}");
    assert!(
        md.contains("Already reported with nothing new, left out: triton v3.6.0 (2026-11-10)"),
        "{md}"
    );
    let telegram = digest(&config, "2026-11-11", "telegram");
    assert!(
        telegram.contains("↪ <a href=\"https://digest.example.org/digest/2026-11-10#event-"),
        "{telegram}"
    );
}

#[test]
fn linking_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "follow_up_days = 0");
    digest(&config, "2026-11-10", "json");
    let second: Value = serde_json::from_str(&digest(&config, "2026-11-11", "json")).unwrap();
    assert_eq!(events(&second).len(), 3);
    assert!(events(&second).iter().all(|e| e.get("follow_up").is_none()));
    assert!(second.get("repeats").is_none());
}
