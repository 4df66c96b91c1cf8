//! Every real-world feed in tests/fixtures/reference/feeds: parsed, or a named error; never a panic.

use chrono::{TimeZone, Utc};
use kdigest::config::{SourceConfig, SourceLocation};
use kdigest::model::{ItemKind, ReleaseLevel, SourceKind};
use kdigest::parse::parse_feed;

use kdigest_testkit::feeds::reference_dir;

fn source(name: &str, kind: SourceKind) -> SourceConfig {
    SourceConfig {
        name: name.into(),
        location: SourceLocation::File(name.into()),
        kind,
        weight: 1.0,
        max_items: None,
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

fn kind_for(file: &str) -> SourceKind {
    if file.starts_with("arxiv") {
        SourceKind::Arxiv
    } else if file.starts_with("github_releases") {
        SourceKind::GithubReleases
    } else {
        SourceKind::Feed
    }
}

#[test]
fn every_reference_feed_parses_or_reports_a_named_error() {
    let dir = reference_dir().join("feeds");
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut parsed = 0;
    let mut failed = Vec::new();
    for path in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "xml" || e == "json"))
    {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(path).unwrap();
        match parse_feed(&bytes, &source(&name, kind_for(&name)), now) {
            Ok(items) => {
                parsed += 1;
                for item in &items {
                    assert!(
                        !item.key.is_empty() && !item.title.is_empty(),
                        "{name}: {item:?}"
                    );
                    assert!(item.published <= now, "{name}: future date not clamped");
                    assert!(
                        !item.title.contains('\n') && !item.title.contains("  "),
                        "{name}: {:?}",
                        item.title
                    );
                }
                // Keys are stable across parses (no random ids).
                let again = parse_feed(&bytes, &source(&name, kind_for(&name)), now).unwrap();
                assert_eq!(items, again, "{name}");
            }
            Err(e) => {
                let message = e.to_string();
                assert!(
                    message.starts_with(char::is_uppercase) && !message.ends_with('.'),
                    "{name}: {message}"
                );
                failed.push(name);
            }
        }
    }
    assert_eq!(
        failed,
        vec![
            "broken_reuters_truncated_rss2.xml",
            "illformed_incomplete_cdata.xml"
        ]
    );
    assert_eq!(parsed, 28);
}

#[test]
fn specific_reference_feeds_keep_their_meaning() {
    let dir = reference_dir().join("feeds");
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap();
    let parse = |file: &str| {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        parse_feed(&bytes, &source(file, kind_for(file)), now).unwrap()
    };
    let listing = parse("arxiv_rss_listing.xml");
    assert_eq!(listing.len(), 1504);
    let versioned = regex::Regex::new(r"v\d+$").unwrap();
    assert!(listing.iter().all(|i| i.kind == ItemKind::Paper
        && i.key.starts_with("arxiv:")
        && !versioned.is_match(&i.key)));
    assert!(
        listing.iter().all(|i| !i.text.starts_with("arXiv:")),
        "listing prefix stripped"
    );

    let releases = parse("github_releases_atom.xml");
    let tags: Vec<(&str, Option<ReleaseLevel>)> = releases
        .iter()
        .map(|i| (i.title.as_str(), i.release))
        .collect();
    assert_eq!(tags.len(), 3, "{tags:?}");
    assert!(releases.iter().all(|i| i.url.contains("/releases/tag/")));

    let cyrillic = parse("windows1251_rss2.xml");
    assert!(
        cyrillic
            .iter()
            .any(|i| i.title.chars().any(|c| ('а'..='я').contains(&c))),
        "windows-1251 decoded"
    );
    let latin = parse("no_xmldecl_iso8859_rss2.xml");
    assert!(!latin.is_empty());
    assert!(
        latin.iter().all(|i| !i.title.contains('\u{fffd}')),
        "ISO-8859-1 without a declaration is repaired"
    );
    let api = parse("arxiv_api_query_all_testing_10.xml");
    assert_eq!(api.len(), 10);
    assert!(api.iter().all(|i| i.arxiv_id.is_some()));
}
