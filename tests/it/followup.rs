//! Follow-ups across days, on the two-day fixture (tests/fixtures/followup): the second
//! day's paper code and "merged" post are linked to the first day's paper and RFC (with the
//! RFC's watch item resolved), and a mirror's repost of the first day's release is left
//! out, in the JSON and in what a reader sees; the week's roll-up merges each story.

use serde_json::Value;

use crate::kdigest;
use kdigest_testkit::feeds::repo_root;

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
    let release = find(&first, "Triton v3.6.0").clone();
    let rfc_watch = first["watchlist"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["event_id"] == rfc["id"])
        .map(|w| w["text"].as_str().unwrap().to_string())
        .expect("the RFC is on the first day's watch list");

    let second: Value = serde_json::from_str(&digest(&config, "2026-11-11", "json")).unwrap();
    let code = find(&second, "TileFlow v0.1.0");
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
        md.contains("Already reported with nothing new, left out: Triton v3.6.0 (2026-11-10)"),
        "{md}"
    );
    // The Telegram payloads are JSON; their HTML is what the reader sees.
    let telegram = digest(&config, "2026-11-11", "telegram").replace("\\\"", "\"");
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

#[test]
fn the_weekly_roll_up_merges_each_story_across_its_days() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "");
    let first: Value = serde_json::from_str(&digest(&config, "2026-11-10", "json")).unwrap();
    let second: Value = serde_json::from_str(&digest(&config, "2026-11-11", "json")).unwrap();
    let week = |args: &[&str]| {
        kdigest(&config, &[&["digest"], args].concat())
            .output()
            .unwrap()
    };

    let out = week(&["--week", "2026-W46", "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no stored digest for 2026-11-09, 2026-11-12"),
        "the days without a digest are named"
    );
    let rollup: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rollup["week"], "2026-W46");
    assert_eq!(rollup["date"], "2026-11-15");
    // Five events on two days are three stories: the paper and its code, the RFC and its
    // merge, the release.
    let stories = events(&rollup);
    assert_eq!(stories.len(), 3, "{rollup:#}");
    let code = find(&rollup, "TileFlow v0.1.0");
    let paper = find(&first, "TileFlow");
    let urls: Vec<&str> = code["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap())
        .collect();
    assert!(
        urls.contains(&"https://arxiv.org/abs/2611.01234"),
        "{urls:?}"
    );
    assert!(
        code.get("follow_up").is_none(),
        "a link inside the week is merged, not shown"
    );
    assert!(code["score"].as_f64() >= paper["score"].as_f64());
    let merged = find(&rollup, "merged into Triton main");
    assert_eq!(merged["sources"].as_array().unwrap().len(), 2);
    assert_eq!(
        find(&rollup, "Triton v3.6.0")["id"],
        find(&first, "Triton v3.6.0")["id"]
    );
    let numbers: Vec<u64> = stories.iter().map(|e| e["n"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [1, 2, 3]);
    // The RFC's watch line was resolved on the second day: not on the week's list.
    let rfc = find(&first, "RFC");
    let rfc_watch = first["watchlist"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["event_id"] == rfc["id"])
        .unwrap();
    assert!(
        !rollup["watchlist"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["text"] == rfc_watch["text"])
    );
    assert!(second["watchlist"].as_array().is_some());

    let md = String::from_utf8(week(&["--week", "2026-W46", "--format", "md"]).stdout).unwrap();
    assert!(md.starts_with("# 2026-W46 · "), "{md}");
    assert!(
        md.contains("## This week") && md.contains("## The week's key changes"),
        "{md}"
    );
    let telegram =
        String::from_utf8(week(&["--week", "2026-W46", "--format", "telegram"]).stdout).unwrap();
    assert!(telegram.contains("<b>This week</b>"), "{telegram}");

    let bad = week(&["--week", "2026-46"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("use YYYY-Www"));
    let empty = week(&["--week", "2026-W50"]);
    assert_eq!(empty.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("kdigest digest --date"));
}
