//! Hostile and broken servers: every failure is named in failed_sources and the digest
//! still completes, bounded by the fetch timeout.

use std::sync::atomic::Ordering;
use std::time::Instant;

use kdigest::model::FailureKind;
use kdigest::pipeline;

use kdigest_testkit::TestApp;
use kdigest_testkit::feeds::spawn_feed_server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_broken_source_is_named_and_the_digest_still_completes() {
    let server = spawn_feed_server().await;
    let b = &server.base;
    let faulty = [
        ("hang", format!("{b}/hang")),
        ("drip", format!("{b}/drip")),
        ("huge", format!("{b}/huge")),
        ("bomb", format!("{b}/bomb")),
        ("loop", format!("{b}/loop")),
        ("missing", format!("{b}/status/404")),
        ("error", format!("{b}/always500")),
        ("slow429", format!("{b}/slow429")),
        ("flaky429", format!("{b}/flaky429/triton-releases.atom")),
        ("html", format!("{b}/html")),
        ("empty", format!("{b}/empty")),
        ("nofile", "/nonexistent/kdigest/feed.xml".to_string()),
    ];
    let mut extra = String::from(
        "[fetch]\ntimeout_secs = 2.0\nretries = 2\nper_host_concurrency = 32\nmax_body_bytes = 5000000\nmax_redirects = 3\n",
    );
    for (name, url) in &faulty {
        extra.push_str(&format!(
            "\n[[sources]]\nname = \"{name}\"\nurl = \"{url}\"\nkind = \"blog\"\n"
        ));
    }
    let app = TestApp::builder().feeds(server).toml(&extra).build().await;
    let started = Instant::now();
    let digest = app.digest().await;
    let elapsed = started.elapsed();
    // Bounded by the per-source deadline (2 s for all of a source's attempts), not by how
    // long the servers would keep us (an hour); the rest of the bound is the digest's own
    // work in a debug build on a possibly busy machine.
    assert!(
        elapsed.as_secs_f64() < 10.0,
        "fetch phase took {elapsed:?} with a 2 s timeout"
    );

    // What a reader is told of each, whatever the details say.
    let kind_of = |name: &str| {
        digest
            .failed_sources
            .iter()
            .find(|f| f.source == name)
            .map(|f| f.kind)
    };
    for (names, kind) in [
        (&["hang", "drip", "nofile"][..], FailureKind::Unreachable),
        (&["huge", "bomb"][..], FailureKind::TooLarge),
        (
            &["loop", "missing", "error", "slow429"][..],
            FailureKind::Refused,
        ),
        (&["html", "empty"][..], FailureKind::NotAFeed),
    ] {
        for name in names {
            assert_eq!(kind_of(name), Some(kind), "{name}");
        }
    }
    let error_of = |name: &str| {
        digest
            .failed_sources
            .iter()
            .find(|f| f.source == name)
            .map(|f| f.error.clone())
            .unwrap_or_default()
    };
    assert!(
        error_of("hang").starts_with("Timed out after 2.0 s"),
        "{}",
        error_of("hang")
    );
    assert!(
        error_of("drip").starts_with("Timed out"),
        "{}",
        error_of("drip")
    );
    assert!(
        error_of("huge").contains("larger than 5000000 bytes after decompression"),
        "{}",
        error_of("huge")
    );
    assert!(
        error_of("bomb").contains("larger than 5000000 bytes after decompression"),
        "{}",
        error_of("bomb")
    );
    assert!(
        error_of("loop").contains("More than 3 redirects"),
        "{}",
        error_of("loop")
    );
    assert!(
        error_of("missing").starts_with("HTTP 404 Not Found; check the source URL"),
        "{}",
        error_of("missing")
    );
    assert!(
        error_of("error").starts_with("HTTP 500"),
        "{}",
        error_of("error")
    );
    assert!(
        error_of("slow429").starts_with("HTTP 429"),
        "{}",
        error_of("slow429")
    );
    assert!(
        error_of("html").contains("HTML page instead of a feed"),
        "{}",
        error_of("html")
    );
    assert!(
        error_of("empty").contains("Empty response body"),
        "{}",
        error_of("empty")
    );
    assert!(
        error_of("nofile").starts_with("Cannot read file /nonexistent"),
        "{}",
        error_of("nofile")
    );
    // 500 is retried (1 + 2 retries); a 429 with Retry-After: 1 is waited out and succeeds.
    assert_eq!(app.feeds.hits.always_500.load(Ordering::SeqCst), 3);
    assert!(error_of("flaky429").is_empty(), "{}", error_of("flaky429"));
    assert_eq!(app.feeds.hits.flaky_429.load(Ordering::SeqCst), 2);
    let counts: Vec<(&str, usize)> = digest
        .source_counts
        .iter()
        .map(|c| (c.source.as_str(), c.items))
        .collect();
    assert!(counts.contains(&("flaky429", 1)), "{counts:?}");
    // The good sources still make a full digest.
    assert_eq!(digest.key_changes.len(), 3);
    assert_eq!(
        digest.failed_sources.len(),
        12,
        "{:#?}",
        digest.failed_sources
    );

    let health = app.store.source_health().await.unwrap();
    let hang = health.iter().find(|h| h.source == "hang").unwrap();
    assert_eq!(hang.consecutive_failures, 1);
    assert!(
        hang.last_error
            .as_deref()
            .unwrap_or("")
            .starts_with("Timed out")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_opening_a_fresh_database_at_once_take_turns_on_the_migrations() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.sqlite");
        let opens = (0..4).map(|_| {
            let path = path.clone();
            tokio::spawn(async move { kdigest::store::Store::open(&path).await })
        });
        for opened in futures::future::join_all(opens).await {
            let store = opened.unwrap().unwrap_or_else(|e| panic!("{e:#}"));
            store.close().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_title_becomes_a_bounded_item_and_valid_telegram_messages() {
    let server = spawn_feed_server().await;
    let dir = tempfile::tempdir().unwrap();
    // A relevant entry (so it reaches the digest) whose title is a megabyte of words.
    let title = "Triton GPU kernel compiler autotuning &amp; codegen ".repeat(20_000);
    let feed = format!(
        r#"<?xml version="1.0"?><rss version="2.0"><channel><title>hostile</title>
        <item><title>{title}</title><link>https://example.org/huge</link>
        <pubDate>Tue, 27 Oct 2026 12:00:00 +0000</pubDate>
        <description>Triton's new GPU kernel compiler pass speeds up FlashAttention kernels by 1.4x on H100 with MLIR lowering.</description></item>
        </channel></rss>"#
    );
    let path = dir.path().join("hostile.xml");
    std::fs::write(&path, feed).unwrap();
    let extra = format!(
        "[[sources]]\nname = \"hostile\"\nurl = \"{}\"\nkind = \"blog\"\n",
        path.display()
    );
    let app = TestApp::builder().feeds(server).toml(&extra).build().await;
    let digest = app.digest().await;
    let hostile = digest
        .events()
        .find(|e| e.sources.iter().any(|s| s.name == "hostile"))
        .expect("the hostile entry is in the digest");
    assert!(hostile.title.chars().count() <= kdigest::parse::MAX_TITLE_CHARS);
    let cache = kdigest::deliver::RenderCache::new(None);
    let everything = kdigest::model::Filter::default();
    for language in ["zh-CN", "en"] {
        let messages = cache
            .messages(
                &digest,
                &everything,
                language,
                kdigest::subscriber::Channel::Telegram,
            )
            .unwrap();
        assert!(messages.len() <= 6, "{} messages", messages.len());
        for m in messages.iter() {
            let m: kdigest::channels::telegram::render::Message = serde_json::from_str(m).unwrap();
            let problems = kdigest_testkit::telegram::telegram_html_problems(&m.html);
            assert!(problems.is_empty(), "{problems:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_queued_behind_slow_ones_on_its_host_is_not_failed_by_them() {
    let server = spawn_feed_server().await;
    let b = &server.base;
    // Four hanging sources hold all four permits of the host; a good source on the same
    // host waits for one. Its deadline starts when it holds a permit, not before. (A 2 s
    // timeout: the permit comes free at one timeout and the host's wait ends at one and a
    // half, a second of room for a loaded machine's late timers.)
    let mut extra =
        String::from("[fetch]\ntimeout_secs = 2.0\nretries = 0\nper_host_concurrency = 4\n");
    for i in 0..4 {
        extra.push_str(&format!(
            "\n[[sources]]\nname = \"hang{i}\"\nurl = \"{b}/hang?n={i}\"\nkind = \"blog\"\n"
        ));
    }
    extra.push_str(&format!(
        "\n[[sources]]\nname = \"queued\"\nurl = \"{b}/feeds/triton-releases.atom\"\nkind = \"github_releases\"\n"
    ));
    let app = TestApp::builder().feeds(server).toml(&extra).build().await;
    let digest = app.digest().await;
    let failed: Vec<&str> = digest
        .failed_sources
        .iter()
        .map(|f| f.source.as_str())
        .collect();
    for i in 0..4 {
        assert!(failed.contains(&format!("hang{i}").as_str()), "{failed:?}");
    }
    assert!(!failed.contains(&"queued"), "{:?}", digest.failed_sources);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_hanging_on_one_host_hold_it_for_at_most_one_and_a_half_timeouts() {
    // Sixteen sources hang on one host, four at a time (per_host_concurrency); the good
    // sources are on another. Waiting four rounds of timeouts held the fetch phase, and
    // every good source's digest, for four timeouts: now no source waits for its host
    // beyond 1.5 timeouts, and those still queued then are named as not fetched.
    let hanging = spawn_feed_server().await;
    let good = spawn_feed_server().await;
    let mut extra =
        String::from("[fetch]\ntimeout_secs = 1.0\nretries = 0\nper_host_concurrency = 4\n");
    for i in 0..16 {
        extra.push_str(&format!(
            "\n[[sources]]\nname = \"hang{i}\"\nurl = \"{}/hang?n={i}\"\nkind = \"blog\"\n",
            hanging.base
        ));
    }
    let app = TestApp::builder().feeds(good).toml(&extra).build().await;
    let digest = app.digest().await;
    // The fixture's one broken feed fails as always; of the others only the hanging ones.
    let (failed, others): (Vec<_>, Vec<_>) = digest
        .failed_sources
        .iter()
        .partition(|f| f.source.starts_with("hang"));
    assert_eq!(failed.len(), 16, "{failed:?}");
    assert!(
        others
            .iter()
            .all(|f| f.error.starts_with("Not a valid feed")),
        "{others:?}"
    );
    let not_fetched = failed
        .iter()
        .filter(|f| {
            f.error.starts_with("Not fetched: waited")
                && f.error.contains("fetch.per_host_concurrency")
        })
        .count();
    // Rounds at 0 and 1 s time out; at 1.5 s at most four waiters find a permit free.
    assert!(not_fetched >= 4, "{failed:?}");
    assert!(digest.events().count() >= 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_that_parses_past_its_budget_fails_alone_and_is_named() {
    // A budget no parse can meet: every source fails, each named with the reason.
    let app = TestApp::builder()
        .toml("[fetch]\nparse_budget_secs = 0.000001\n")
        .build()
        .await;
    let error = pipeline::generate(&app.config, &app.store, kdigest::demo::demo_date(), &|_| {})
        .await
        .unwrap_err();
    let shown = format!("{error:#}");
    assert!(
        shown.contains("Parsing took longer than 0.0 s (fetch.parse_budget_secs)"),
        "{shown}"
    );
}
