//! Managing sources through the binary: shorthands, the catalogue and `enable`, discovery
//! of a page's feed, `check`, health and backoff, OPML import and export round trips.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use kdigest_testkit::feeds::repo_root;

fn kdigest(config: &Path, args: &[&str]) -> Output {
    crate::kdigest(config, args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap()
}

/// The binary run off the async threads (the loopback site answers on them).
async fn kdigest_off_thread(config: &Path, args: &[&str]) -> Output {
    let config = config.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kdigest(&config, &args)
    })
    .await
    .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A site: an HTML page announcing its feed, the feed, a missing page, a page without a
/// feed, and a feed that fails (counted).
async fn site() -> (String, Arc<AtomicUsize>) {
    let feed = std::fs::read_to_string(repo_root().join("examples/feeds/triton-releases.atom"))
        .expect("a bundled feed");
    let broken_hits = Arc::new(AtomicUsize::new(0));
    let hits = broken_hits.clone();
    let app = Router::new()
        .route(
            "/blog/",
            get(|| async {
                axum::response::Html(
                    "<html><head><link rel=\"alternate\" type=\"application/atom+xml\" href=\"/blog/feed.atom\"></head><body>posts</body></html>",
                )
            }),
        )
        .route(
            "/blog/feed.atom",
            get(move || {
                let feed = feed.clone();
                async move { ([("content-type", "application/atom+xml")], feed) }
            }),
        )
        .route("/nofeed", get(|| async { axum::response::Html("<html><body>no feed</body></html>") }))
        .route(
            "/broken.xml",
            get(move || {
                hits.fetch_add(1, Ordering::SeqCst);
                async { (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response() }
            }),
        );
    (kdigest_testkit::net::serve(app).await, broken_hits)
}

fn write_config(dir: &Path, sources: &str) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!("[storage]\npath = \"k.sqlite\"\n[fetch]\ntimeout_secs = 2.0\nallow_private_networks = true\n{sources}"),
    )
    .unwrap();
    path
}

#[test]
fn shorthands_expand_and_bad_ones_name_the_form() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[[sources]]\nname = \"triton\"\nurl = \"github:triton-lang/triton\"\n\n[[sources]]\nname = \"kittens\"\nurl = \"github:HazyResearch/ThunderKittens@tags\"\n\n[[sources]]\nname = \"pl\"\nurl = 'arxiv:cs.PL+cs.DC \"GPU kernel\"'\n\n[[sources]]\nname = \"mlir\"\nurl = \"discourse:https://discourse.llvm.org/c/mlir/31\"\n\n[[sources]]\nname = \"cuda posts\"\nurl = \"https://developer.nvidia.com/blog/feed/\"\nkind = \"blog\"\ninclude = [\"CUDA\"]\nexclude = [\"sponsored\"]\n",
    );
    let ok = kdigest(&config, &["check-config"]);
    assert!(ok.status.success(), "{}", err(&ok));
    let opml = out(&kdigest(&config, &["sources", "export"]));
    for url in [
        "https://github.com/triton-lang/triton/releases.atom",
        "https://github.com/HazyResearch/ThunderKittens/tags.atom",
        "https://discourse.llvm.org/c/mlir/31.rss",
        "search_query=%28cat%3Acs.PL+OR+cat%3Acs.DC%29+AND+abs%3A%22GPU+kernel%22",
    ] {
        assert!(opml.contains(url), "{url} in {opml}");
    }
    let bad = write_config(
        dir.path(),
        "[[sources]]\nname = \"x\"\nurl = \"github:triton\"\n\n[[sources]]\nname = \"y\"\nurl = \"https://e.org/f\"\n\n[[sources]]\nname = \"z\"\nurl = \"https://e.org/g\"\nkind = \"blog\"\ninclude = [\" \"]\n",
    );
    let out = kdigest(&bad, &["check-config"]);
    assert_eq!(out.status.code(), Some(2));
    let text = err(&out);
    assert!(
        text.contains("sources[0].url: github:triton is not a repository"),
        "{text}"
    );
    assert!(text.contains("sources[1].kind: missing"), "{text}");
    assert!(
        text.contains("sources[2].include: an empty phrase"),
        "{text}"
    );
}

#[test]
fn the_catalogue_lists_30_sources_and_enable_adds_to_the_built_in_ones() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let listing = out(&kdigest(&config, &["sources", "catalogue"]));
    let entries = listing
        .lines()
        .filter(|l| l.starts_with("* ") || l.starts_with("  ") && !l.starts_with("    "))
        .count();
    assert!(entries >= 30, "{listing}");
    assert!(
        listing.contains("* triton-lang/triton"),
        "built-in sources are marked followed: {listing}"
    );
    assert!(listing.contains("  vllm-project/vllm"), "{listing}");

    let enable = kdigest(
        &config,
        &[
            "sources",
            "enable",
            "vllm-project/vllm",
            "Dao-AILab/flash-attention",
        ],
    );
    assert!(enable.status.success(), "{}", err(&enable));
    let names = out(&kdigest(&config, &["sources", "list"]));
    for name in [
        "triton-lang/triton",
        "NVIDIA",
        "arXiv",
        "vllm-project/vllm",
        "Dao-AILab/flash-attention",
    ] {
        assert!(names.contains(&format!("{name} (")), "{name} in {names}");
    }
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("url = \"github:vllm-project/vllm\""),
        "{text}"
    );
    let again = kdigest(&config, &["sources", "enable", "vllm-project/vllm"]);
    assert!(out(&again).contains("followed already"));
    let unknown = kdigest(&config, &["sources", "enable", "flash"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        err(&unknown).contains("did you mean Dao-AILab/flash-attention"),
        "{}",
        err(&unknown)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_is_resolved_to_its_feed_once_and_check_reports_each_source() {
    let (base, _) = site().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!("[[sources]]\nname = \"down\"\nurl = \"{base}/broken.xml\"\nkind = \"feed\"\n"),
    );
    let page = format!("{base}/blog/");
    let added = kdigest_off_thread(&config, &["sources", "add", "Example blog", &page]).await;
    assert!(added.status.success(), "{}", err(&added));
    assert!(out(&added).contains("its feed is"), "{}", out(&added));
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains(&format!("url = \"{base}/blog/feed.atom\"")),
        "the feed URL is stored: {text}"
    );
    let no_feed = format!("{base}/nofeed");
    let none = kdigest_off_thread(&config, &["sources", "add", "Nothing", &no_feed]).await;
    assert_eq!(none.status.code(), Some(2));
    assert!(err(&none).contains("announces no feed"), "{}", err(&none));

    let check = kdigest_off_thread(&config, &["sources", "check"]).await;
    assert_eq!(
        check.status.code(),
        Some(1),
        "a failing source fails the check"
    );
    let report = out(&check);
    assert!(
        report.contains("ok    Example blog:") && report.contains("releases"),
        "{report}"
    );
    assert!(report.contains("FAIL  down: HTTP 500"), "{report}");
    let one = kdigest_off_thread(&config, &["sources", "check", "example BLOG"]).await;
    assert!(one.status.success(), "{}", err(&one));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_source_is_backed_off_named_in_the_digest_and_listed() {
    let (base, broken_hits) = site().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "[[sources]]\nname = \"blog\"\nurl = \"{base}/blog/feed.atom\"\nkind = \"github_releases\"\n\n[[sources]]\nname = \"down\"\nurl = \"{base}/broken.xml\"\nkind = \"feed\"\n"
        ),
    );
    let regenerate = [
        "digest",
        "--date",
        "2026-10-28",
        "--force",
        "--format",
        "json",
    ];
    for _ in 0..3 {
        let o = kdigest_off_thread(&config, &regenerate).await;
        assert!(o.status.success(), "{}", err(&o));
    }
    let tried = broken_hits.load(Ordering::SeqCst);
    assert!(
        tried >= 3,
        "fetched on each of the first three runs ({tried} requests)"
    );
    let list = out(&kdigest_off_thread(&config, &["sources", "list"]).await);
    assert!(
        list.contains("3 failures in a row, next try: backed off until"),
        "{list}"
    );
    assert!(list.contains("last error: HTTP 500"), "{list}");
    let fourth = kdigest_off_thread(&config, &regenerate).await;
    assert!(fourth.status.success(), "{}", err(&fourth));
    assert_eq!(
        broken_hits.load(Ordering::SeqCst),
        tried,
        "backed off: not fetched"
    );
    let json: serde_json::Value = serde_json::from_slice(&fourth.stdout).unwrap();
    let failed = json["failed_sources"].to_string();
    assert!(
        failed.contains("Not fetched: 3 failures in a row") && failed.contains("next try after"),
        "{failed}"
    );
    // The JSON form names the kind a reader's notes say ("skipped after failing …").
    assert!(failed.contains(r#""kind":"backing_off""#), "{failed}");
}

#[test]
fn opml_from_four_readers_imports_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let fixtures = repo_root().join("tests/fixtures/opml");
    let mut expected = 5; // the built-in sources, written out by the first import
    for (file, feeds) in [
        ("feedly.opml", 3),
        ("miniflux.opml", 3),
        ("netnewswire.opml", 2),
        ("inoreader.opml", 3),
    ] {
        let o = kdigest(
            &config,
            &["sources", "import", fixtures.join(file).to_str().unwrap()],
        );
        assert!(o.status.success(), "{file}: {}", err(&o));
        assert!(
            out(&o).contains(&format!("{feeds} feeds in")),
            "{file}: {}",
            out(&o)
        );
        let added: usize = out(&o)
            .split(" added")
            .next()
            .and_then(|s| s.rsplit(", ").next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap();
        expected += added;
    }
    let text = std::fs::read_to_string(&config).unwrap();
    // Already followed feeds are not added twice (NVIDIA, PyTorch, CUTLASS, triton).
    assert_eq!(text.matches("[[sources]]").count(), expected, "{text}");
    assert!(
        text.contains("name = \"FlashInfer — releases\""),
        "entities decoded: {text}"
    );
    assert!(
        text.contains("kind = \"arxiv\""),
        "a folder named papers: {text}"
    );
    assert!(
        text.contains("Imported from") && text.contains("(folder: Kernels & libraries)"),
        "{text}"
    );
    let check = kdigest(&config, &["check-config"]);
    assert!(check.status.success(), "{}", err(&check));

    // Export and import into an empty configuration: the same feeds, the same kinds.
    let exported = kdigest(&config, &["sources", "export"]);
    let opml_path = dir.path().join("out.opml");
    std::fs::write(&opml_path, &exported.stdout).unwrap();
    let other = tempfile::tempdir().unwrap();
    let empty = other.path().join("config.toml");
    std::fs::write(&empty, "[[sources]]\nname = \"placeholder\"\nurl = \"https://example.org/feed\"\nkind = \"feed\"\n").unwrap();
    let o = kdigest(&empty, &["sources", "import", opml_path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let urls = |c: &Path| -> std::collections::BTreeSet<(String, String)> {
        let list = out(&kdigest(c, &["sources", "list"]));
        list.lines()
            .filter(|l| !l.starts_with(' '))
            .filter_map(|l| {
                let kind = l.split('(').nth(1)?.split(',').next()?.to_string();
                let url = l.rsplit(' ').next()?.to_string();
                Some((url, kind))
            })
            .filter(|(u, _)| u != "https://example.org/feed")
            .collect()
    };
    let original = urls(&config);
    assert!(original.len() >= 12, "{original:?}");
    assert_eq!(urls(&empty), original);
}
