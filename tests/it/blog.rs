//! The blog over HTTP: home page, digest pages with read counts and filters, the Atom feed
//! (parsed back with feed-rs).

use std::sync::Arc;

use chrono::{NaiveDate, Utc};
use kdigest::metrics::Metrics;
use kdigest::web::{Services, blog::Blog};

use kdigest_testkit::TestApp;

/// A blog on a loopback port over a store with the fixture day (zh-CN) and a copy of it
/// a day earlier, titled with markup.
struct Site {
    base: String,
    blog: Arc<Blog>,
    newest: kdigest::model::Digest,
    client: reqwest::Client,
    app: TestApp,
}

impl Site {
    async fn start() -> Site {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/", listener.local_addr().unwrap());
        let app = TestApp::builder()
            .toml(&format!("[web]\npublic_url = \"{base}\"\n"))
            .build()
            .await;
        let newest = app.digest().await;
        let mut older = newest.clone();
        older.date = NaiveDate::from_ymd_opt(2026, 10, 27).unwrap();
        older.title = "An older <digest> & friends".into();
        app.store.save_digest(&older, Utc::now()).await.unwrap();

        let config = Arc::new(app.config.clone());
        let blog = Arc::new(Blog::new(app.store.clone(), config, false).unwrap());
        let router = kdigest::web::router(
            Arc::new(Metrics::default()),
            Services {
                blog: Some(blog.clone()),
                ..Default::default()
            },
        );
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Site {
            base,
            blog,
            newest,
            client: reqwest::Client::new(),
            app,
        }
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{}", self.base, path.trim_start_matches('/')))
            .send()
            .await
            .unwrap()
    }

    async fn page(&self, path: &str) -> String {
        let r = self.get(path).await;
        assert_eq!(r.status(), 200, "{path}");
        r.text().await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_browse_digests_read_counts_and_the_atom_feed() {
    let site = &Site::start().await;
    let (base, store, blog) = (&site.base, &site.app.store, &site.blog);
    let get = |path: &'static str| async move { Ok::<_, ()>(site.get(path).await) };

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

/// The archive: search in English and Chinese (a two-character word too), a query with
/// markup shown escaped, results linked to permalinks; a permalink lists both days; layer
/// pages and their Atom feeds; digest pages link both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_search_the_archive_and_follow_permalinks_and_layers() {
    let site = Site::start().await;
    let cutlass = site
        .newest
        .events()
        .find(|e| e.title.contains("CUTLASS"))
        .unwrap()
        .clone();

    let home = site.page("/").await;
    assert!(
        home.contains("action=\"/search\""),
        "the home page has a search box"
    );
    let found = site.page("/search?q=cutlass").await;
    assert!(
        found.contains(&format!("href=\"/e/{}\"", cutlass.id)),
        "{found}"
    );
    assert!(found.contains("2026-10-28") && found.contains("2026-10-27"));
    assert!(found.contains("提到“cutlass”的事件"));
    // The first result is the one whose title has the word.
    let first_link = found.find("href=\"/e/").unwrap();
    assert_eq!(
        &found[first_link + 9..first_link + 9 + cutlass.id.len()],
        cutlass.id
    );

    // A Chinese word the digest wrote (its why-it-matters line), at two and three characters.
    let why: Vec<char> = site
        .newest
        .events()
        .map(|e| e.why_it_matters.clone())
        .collect::<String>()
        .chars()
        .collect();
    let cjk = |c: &char| ('\u{4e00}'..='\u{9fff}').contains(c);
    let at = why.windows(3).position(|w| w.iter().all(cjk)).unwrap();
    for n in [2, 3] {
        let word: String = why[at..at + n].iter().collect();
        let page = site.page(&format!("/search?q={}", url_encode(&word))).await;
        assert!(page.contains("href=\"/e/"), "{word}: {page}");
        assert!(page.contains(&format!("提到“{word}”的事件")), "{word}");
    }

    let none = site.page("/search?q=%3Cscript%3Ezzqx").await;
    assert!(
        none.contains("存档中没有提到“&lt;script&gt;zzqx”的事件"),
        "{none}"
    );
    assert!(!none.contains("<script"));
    let empty = site.page("/search?q=").await;
    assert!(
        empty.contains("每个词都须出现"),
        "an empty query explains the search"
    );

    let permalink = site.page(&format!("/e/{}", cutlass.id)).await;
    assert!(permalink.contains("出现在以下日期的日报中"));
    for date in ["2026-10-28", "2026-10-27"] {
        assert!(
            permalink.contains(&format!("/digest/{date}#event-{}", cutlass.id)),
            "{date}: {permalink}"
        );
    }
    let why_start: String = cutlass
        .why_it_matters
        .chars()
        .take_while(|c| !"<>&\"'/".contains(*c))
        .take(15)
        .collect();
    assert!(
        permalink.contains(&why_start),
        "the event in full: {why_start}"
    );
    for missing in [
        "/e/0000000000",
        "/e/..%2Fetc",
        "/layer/not_a_layer",
        "/layer/not_a_layer/feed.xml",
    ] {
        assert_eq!(site.get(missing).await.status(), 404, "{missing}");
    }

    let layer = &cutlass.layers[0];
    let in_layer = site
        .newest
        .events()
        .filter(|e| e.layers.contains(layer))
        .count();
    let listing = site.page(&format!("/layer/{layer}")).await;
    assert_eq!(listing.matches("<article>").count(), (2 * in_layer).min(20));
    assert!(listing.contains(&format!("&#x2f;layer&#x2f;{layer}&#x2f;feed.xml")));
    let feed = site.get(&format!("/layer/{layer}/feed.xml")).await;
    let parsed =
        feed_rs::parser::parse(feed.bytes().await.unwrap().as_ref()).expect("the feed parses");
    assert_eq!(parsed.entries.len(), (2 * in_layer).min(30));
    assert!(
        parsed
            .entries
            .iter()
            .any(|e| e.links[0].href == format!("{}e/{}", site.base, cutlass.id))
    );
    let ids: std::collections::HashSet<_> = parsed.entries.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), parsed.entries.len(), "entry ids are unique");

    let digest = site.page("/digest/2026-10-28").await;
    assert!(digest.contains(&format!("href=\"/e/{}\"", cutlass.id)));
    assert!(digest.contains(&format!("href=\"/layer/{layer}\"")));
}

fn url_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Weekly roll-ups on the web (issue 32 item 5): a page per ISO week made from its stored
/// dailies, an Atom feed of them, both linked from the blog's home page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weekly_roll_ups_have_pages_and_a_feed_linked_from_the_blog() {
    let site = &Site::start().await;
    // 2026-10-27 and 2026-10-28 are in ISO week 2026-W44.
    let home = site.page("/").await;
    assert!(home.contains("href=\"/week/2026-W44\""), "{home}");
    assert!(home.contains("href=\"/weekly.xml\""), "{home}");

    let week = site.page("/week/2026-W44").await;
    assert!(
        week.contains("本周概览"),
        "the roll-up's own words: {week:.600}"
    );
    assert!(week.contains("CUTLASS 5.0.0"), "{week:.600}");
    assert!(!week.contains("<digest>"), "titles stay escaped");
    for missing in ["/week/2026-W30", "/week/nope", "/week/2026-W99"] {
        assert_eq!(site.get(missing).await.status(), 404, "{missing}");
    }

    let feed = site.get("/weekly.xml").await;
    assert_eq!(feed.status(), 200);
    assert!(
        feed.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/atom+xml")
    );
    let feed =
        feed_rs::parser::parse(feed.bytes().await.unwrap().as_ref()).expect("the feed parses");
    assert_eq!(feed.entries.len(), 1, "one week has dailies");
    let entry = &feed.entries[0];
    assert_eq!(entry.links[0].href, format!("{}week/2026-W44", site.base));
    let title = entry.title.as_ref().unwrap().content.clone();
    assert!(title.starts_with("2026-W44 · "), "{title}");
}
