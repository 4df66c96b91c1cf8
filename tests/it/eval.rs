//! The labelled evaluation (issue 10): the built-in relevance model, run through the real
//! binary on the labelled days in tests/fixtures/eval, must hold the thresholds CI holds it
//! to. The labels were written before the model was tuned; see that folder's README.

use std::process::Command;

use kdigest_testkit::feeds::repo_root;

fn eval(dir: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kdigest"))
        .arg("eval")
        .arg(dir)
        .env_remove("KDIGEST_CONFIG")
        .env("RUST_LOG", "error")
        .output()
        .unwrap()
}

/// The overall row of the table headed `heading`: precision, recall, layer F1, leads right.
fn overall(stdout: &str, heading: &str) -> (f64, f64, f64, usize) {
    let table = &stdout[stdout.find(heading).expect("the table is printed")..];
    let row = table
        .lines()
        .find(|l| l.starts_with("overall"))
        .expect("an overall row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    let number = |i: usize| cells[i].parse::<f64>().unwrap();
    let leads = cells[7].split('/').next().unwrap().parse().unwrap();
    (number(4), number(5), number(6), leads)
}

/// The labelled days scored by weights that never saw them (leave one day out) must not
/// fall below the floor reached when the eight unseen days were added (docs/scoring.md).
/// The targets (recall 0.95, layer F1 0.85, 90% of leads) are what `kdigest eval`
/// itself exits 1 under; the floor keeps what was won from slipping back meanwhile.
#[test]
fn eval_holds_its_cross_validated_floor() {
    let out = eval(&repo_root().join("tests/fixtures/eval"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let days = std::fs::read_dir(repo_root().join("tests/fixtures/eval"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("labels.toml").is_file())
        .count();
    assert!(days >= 12, "at least twelve labelled days, found {days}");
    let (precision, recall, f1, leads) = overall(&stdout, "Cross-validated");
    // Floors just under the figures of 2026-12-07 on forty days (0.943 / 0.967 / 0.785,
    // 28 leads of 40; docs/scoring.md): the days moved in from the fourth to the seventh
    // sealed sets brought their layer F1 of about 0.7 to 0.8.
    assert!(
        precision >= 0.94 && recall >= 0.965 && f1 >= 0.78 && leads + 12 >= days,
        "cross-validated precision {precision}, recall {recall}, layer F1 {f1}, leads {leads}/{days}\n{stdout}"
    );
    // The learned weights must earn their place: cross-validated, they beat the phrases.
    let (_, phrase_recall, phrase_f1, _) = overall(&stdout, "The phrase model alone");
    assert!(recall > phrase_recall && f1 > phrase_f1, "{stdout}");
    // The same-story groups, cross-validated run (the last such line).
    let joined = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("one story, one event"))
        .unwrap();
    let (a, b) = joined
        .split_whitespace()
        .find_map(|t| t.split_once('/'))
        .unwrap();
    // Every release and the post announcing it came out as one event, the CUDA 13.2 post
    // (a section headed "cuTile Python") and the cutile-python v1.2.0 release, vLLM v0.7.0
    // and the V1 post its notes call "our blog", and a cross-post, included.
    assert_eq!(a, b, "{joined}");
    assert!(!stdout.contains("one story in 2 events"), "{stdout}");
    // A second editor chose a lead for every day, blind (tests/fixtures/eval/SECOND_EDITOR.md):
    // the two agree on 26 of 40, the ceiling against which the lead figure is read.
    let second = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("second editor (blind)"))
        .expect("the second editor's line is printed");
    assert!(
        second.contains("40 days: the editors agree on 26;"),
        "{second}"
    );
    // A second annotator tagged every relevant item's layers, blind: 0.906 micro-F1 with
    // the labels, so the 0.85 layer target is within what two people reach.
    assert!(
        stdout.contains("layers: the annotators agree at micro-F1 0.906;"),
        "{stdout}"
    );
}

#[test]
fn eval_fails_when_a_relevant_item_is_missed_and_says_which() {
    // A copy of a real day with one more relevant label: an off-topic item that the model
    // rightly leaves out. The run must fail, exit 1, and name the miss.
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("2024-09-17-jax-rocm");
    let src = repo_root().join("tests/fixtures/eval/2024-09-17-jax-rocm");
    std::fs::create_dir_all(day.join("feeds")).unwrap();
    for entry in std::fs::read_dir(src.join("feeds")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, day.join("feeds").join(path.file_name().unwrap())).unwrap();
    }
    std::fs::copy(src.join("config.toml"), day.join("config.toml")).unwrap();
    let labels = std::fs::read_to_string(src.join("labels.toml")).unwrap();
    let feed = std::fs::read_to_string(day.join("feeds/rocm-blogs.xml")).unwrap();
    let title = "Stone Ridge Expands Reservoir Simulation Options";
    let at = feed
        .find(title)
        .expect("the reservoir-simulation post is in the feed");
    let link_start = feed[at..].find("<link>").unwrap() + at + "<link>".len();
    let link_end = feed[link_start..].find("</link>").unwrap() + link_start;
    let link = &feed[link_start..link_end];
    std::fs::write(
        day.join("labels.toml"),
        format!(
            "{labels}\n[[relevant]]\nurl = \"{link}\"\ntitle = \"{title}\"\nlayers = [\"hardware_backend\"]\nwhy = \"deliberately wrong label for this test\"\n"
        ),
    )
    .unwrap();
    let out = eval(dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(&format!("missed: {title}")), "{stdout}");
    assert!(stdout.contains("FAIL: recall"), "{stdout}");
}

#[test]
fn a_label_naming_an_item_outside_the_window_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("2024-11-28-x");
    std::fs::create_dir_all(day.join("feeds")).unwrap();
    std::fs::copy(
        repo_root().join("tests/fixtures/eval/2024-11-28-arxiv/config.toml"),
        day.join("config.toml"),
    )
    .unwrap();
    std::fs::write(
        day.join("feeds/arxiv_rss_listing.xml"),
        std::fs::read(repo_root().join("tests/fixtures/reference/feeds/arxiv_rss_empty.xml"))
            .unwrap(),
    )
    .unwrap();
    std::fs::write(
        day.join("labels.toml"),
        "about = \"x\"\nlead = [\"https://arxiv.org/abs/2411.99999\"]\n",
    )
    .unwrap();
    let out = eval(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("https://arxiv.org/abs/2411.99999 is not an item in the window"),
        "{stderr}"
    );
}

/// The sealed held-out days (tests/fixtures/eval-holdout) load and are scored, every
/// same-story group of them included. No figure of theirs is held here: a floor on them
/// would make them one more set the model is tuned to (docs/scoring.md).
#[test]
fn the_sealed_held_out_days_load_and_are_scored() {
    let out = eval(&repo_root().join("tests/fixtures/eval-holdout"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rows = stdout
        .lines()
        .take_while(|l| !l.starts_with("overall"))
        .filter(|l| l.starts_with("20"))
        .count();
    assert_eq!(rows, 4, "{stdout}\n{stderr}");
    // Not "in-sample": the shipped weights never saw these days.
    assert!(
        stdout.starts_with(
            "The shipped configuration (its learned weights never saw 4 of these 4 days)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("same-story groups joined"),
        "{stdout}\n{stderr}"
    );
}
