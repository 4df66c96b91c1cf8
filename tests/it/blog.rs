//! The blog over HTTP: home page, digest pages with read counts and filters, the Atom feed
//! (parsed back with feed-rs).

use std::sync::Arc;

use chrono::{NaiveDate, Utc};
use kdigest::metrics::Metrics;
use kdigest::web::{Services, blog::Blog};

use crate::helpers::{fixture_config, open_store, spawn_feed_server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_browse_digests_read_counts_and_the_atom_feed() {
    let feeds = spawn_feed_server().await;
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let config = fixture_config(
        &format!("{}/feeds", feeds.base),
        dir.path(),
        &format!("[email]\npublic_url = \"{base}\"\n"),
    );
    let store = open_store(&config).await;
    let newest = kdigest::pipeline::generate(&config, &store, kdigest::demo::demo_date(), &|_| {})
        .await
        .unwrap();
    let mut older = newest.clone();
    older.date = NaiveDate::from_ymd_opt(2026, 10, 27).unwrap();
    older.title = "An older <digest> & friends".into();
    store.save_digest(&older, Utc::now()).await.unwrap();

    let blog = Arc::new(Blog::new(store.clone(), Arc::new(config.clone()), false).unwrap());
    let router = kdigest::web::router(
        Arc::new(Metrics::default()),
        Services {
            blog: Some(blog.clone()),
            ..Default::default()
        },
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let client = reqwest::Client::new();
    let get = |path: &str| {
        client
            .get(format!("{base}{}", path.trim_start_matches('/')))
            .send()
    };

    let home = get("/").await.unwrap();
    assert_eq!(home.status(), 200);
    assert!(
        home.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    let page = home.text().await.unwrap();
    let (a, b) = (
        page.find("/digest/2026-10-28").unwrap(),
        page.find("/digest/2026-10-27").unwrap(),
    );
    assert!(a < b, "newest first");
    assert!(
        page.contains("An older &lt;digest&gt; &amp; friends"),
        "titles are escaped"
    );
    assert!(page.contains("阅读 0"));

    let first = get("/digest/2026-10-28")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        first.contains("返回博客主页") && first.contains("href=\"&#x2f;\""),
        "a link back home"
    );
    assert!(first.contains("阅读 1"));
    assert!(first.contains("CUTLASS 5.0.0") && first.contains("ShapeTrace"));
    assert!(!first.to_lowercase().contains("<script"));
    let second = get("/digest/2026-10-28")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(second.contains("阅读 2"));
    let filtered = get("/digest/2026-10-28?layers=runtime&min_score=70")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        filtered.contains("Tessera") && !filtered.contains("ShapeTrace"),
        "a filtered view"
    );
    assert!(filtered.contains("阅读 3"), "filtered views count too");
    // Views are written in batches; what is in memory is written when the daemon stops.
    blog.flush_reads().await.unwrap();
    let date = kdigest::demo::demo_date();
    assert_eq!(store.digest_reads(date).await.unwrap(), Some(3));
    assert!(
        get("/digest/2026-10-28")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("阅读 4"),
        "the cached page shows the new count"
    );
    // Unknown digests, pages past the end and absurd page numbers: a 404 page with a way
    // home, never a blank body or a negative "older" link.
    for path in [
        "/digest/2030-01-01",
        "/digest/not-a-date",
        "/?page=2",
        "/?page=9223372036854775807",
    ] {
        let r = get(path).await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
        let body = r.text().await.unwrap();
        assert!(
            body.contains("没有这个页面") && body.contains("href=\"/\""),
            "{path}: {body}"
        );
        assert!(!body.contains("page=-"), "{path}: {body}");
    }
    assert_eq!(get("/?page=1").await.unwrap().status(), 200);

    let feed = get("/feed.xml").await.unwrap();
    assert!(
        feed.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/atom+xml")
    );
    let parsed =
        feed_rs::parser::parse(feed.bytes().await.unwrap().as_ref()).expect("the feed parses");
    assert_eq!(parsed.entries.len(), 2);
    assert_eq!(
        parsed.entries[0].links[0].href,
        format!("{base}digest/2026-10-28")
    );
    assert_eq!(
        parsed.entries[1].title.as_ref().unwrap().content,
        "An older <digest> & friends"
    );
    assert!(
        parsed.entries[0]
            .summary
            .as_ref()
            .unwrap()
            .content
            .starts_with("CUTLASS 5.0")
    );
}
