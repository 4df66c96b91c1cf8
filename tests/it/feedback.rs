//! Feedback over HTTP and the command line: the 👍/👎 links of an email (signed per
//! subscriber: a GET shows a button and records nothing, a POST records, a forged or
//! altered token records nothing), the buttons of the web pages (a browser cookie is the
//! reader, one vote each, changeable, no JavaScript), the tally on the permalink page, and
//! `kdigest feedback`'s report by source and layer.

use std::sync::Arc;

use chrono::Utc;
use kdigest::channels::email::EmailSender;
use kdigest::config::Secret;
use kdigest::feedback::Tally;
use kdigest::metrics::Metrics;
use kdigest::model::Score;
use kdigest::tokens::{Purpose, sign};
use kdigest::web::Services;
use kdigest::web::account::Account;
use kdigest::web::blog::Blog;

use crate::kdigest;
use kdigest_testkit::TestApp;
use kdigest_testkit::app::add_reader;
use kdigest_testkit::config::write_file_config;

const FORM: &str = "application/x-www-form-urlencoded";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_links_and_web_buttons_count_one_vote_per_reader_and_refuse_forgeries() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let app = TestApp::builder().toml(&format!(
            "[email]\nsmtp_host = \"127.0.0.1\"\ntls = \"none\"\nfrom = \"kdigest <digest@example.org>\"\nlist_id = \"digest.example.org\"\n[web]\npublic_url = \"{base}\"\n"
        )).build().await;
    let config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;
    let secret = Secret::new("feedback-test-signing-key-0123456789");
    let blog = Arc::new(Blog::new(store.clone(), Arc::new(config.clone()), false).unwrap());
    let account = Account::new(store.clone(), config, secret.clone(), None).unwrap();
    let router = kdigest::web::router(
        Arc::new(Metrics::default()),
        Services {
            blog: Some(blog),
            account: Some(Arc::new(account)),
            ..Default::default()
        },
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let event = digest.events().next().unwrap().id.clone();

    // The newsletter a subscriber receives has a 👍 and a 👎 link per event, signed for them.
    let alice = add_reader(store, "email:alice@example.org").await;
    let bob = add_reader(store, "email:bob@example.org").await;
    let mailer =
        EmailSender::with_secrets(&config.channels.email, secret.clone(), None, None).unwrap();
    let renderer = kdigest::render::Renderer::new("en", None)
        .unwrap()
        .with_site(config.web.public_url.clone());
    let payload = kdigest::channels::Channel::Email
        .render(&digest, &renderer)
        .unwrap()
        .remove(0);
    let mail = String::from_utf8(
        mailer
            .message("alice@example.org", &payload, "d1", alice)
            .unwrap()
            .formatted(),
    )
    .unwrap();
    let text = kdigest_testkit::smtp::parts(&mail, "text/plain").join("\n");
    let html = kdigest_testkit::smtp::parts(&mail, "text/html").join("\n");
    let up_link = format!(
        "{base}vote/{}/{event}/up",
        sign(&secret, Purpose::Vote, alice, 0)
    );
    assert!(text.contains(&up_link), "{text}");
    // The HTML part has the same link, its URL part entity-escaped by the template.
    let token = sign(&secret, Purpose::Vote, alice, 0);
    assert!(html.contains(&format!("{token}&#x2f;{event}/up")), "{html}");
    assert!(!text.contains("PLACEHOLDER") && !html.contains("PLACEHOLDER"));
    for e in digest.events() {
        assert!(text.contains(&format!("/{}/down", e.id)), "{}", e.id);
    }

    // A GET (a mail scanner prefetching every link) shows a button and records nothing.
    let shown = client.get(&up_link).send().await.unwrap();
    assert_eq!(shown.status(), 200);
    let page = shown.text().await.unwrap();
    assert!(page.contains("method=\"post\""), "{page}");
    assert!(!page.contains("<script"));
    assert_eq!(store.tally(&event).await.unwrap().total(), 0);
    let post = |url: String| {
        client
            .post(url)
            .header("content-type", FORM)
            .body("")
            .send()
    };
    let recorded = post(up_link.clone()).await.unwrap();
    assert_eq!(recorded.status(), 200);
    assert!(recorded.text().await.unwrap().contains("👍 1 · 👎 0"));
    // Twice from the same reader is one vote; the other link changes it.
    post(up_link.clone()).await.unwrap();
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 1, down: 0 });
    post(up_link.replace("/up", "/down")).await.unwrap();
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 0, down: 1 });

    // Forgeries record nothing: another subscriber's id under Alice's signature, a token
    // signed with another key, a token signed for another purpose, a bad vote.
    let mac = token.rsplit('.').next().unwrap();
    let forged = [
        format!("{base}vote/{bob}.0.{mac}/{event}/up"),
        format!(
            "{base}vote/{}/{event}/up",
            sign(
                &Secret::new("another-key-another-key-another-key"),
                Purpose::Vote,
                alice,
                0
            )
        ),
        format!(
            "{base}vote/{}/{event}/up",
            sign(&secret, Purpose::Preferences, alice, 0)
        ),
        format!("{base}vote/{token}/{event}/sideways"),
        format!("{base}vote/{token}/not-an-id/up"),
    ];
    for url in forged {
        let r = post(url.clone()).await.unwrap();
        assert_eq!(r.status(), 404, "{url}");
    }
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 0, down: 1 });

    // The web buttons: a browser without a cookie is given one and sent back to the event.
    let vote = |body: String, cookie: Option<String>| {
        let mut r = client
            .post(format!("{base}vote"))
            .header("content-type", FORM)
            .body(body);
        if let Some(c) = cookie {
            r = r.header("cookie", c);
        }
        r.send()
    };
    let first = vote(
        format!("event={event}&vote=up&back=%2Fdigest%2F2026-10-28"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(first.status(), 303);
    assert_eq!(
        first.headers()["location"],
        format!("/digest/2026-10-28#event-{event}").as_str()
    );
    let set_cookie = first.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"));
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 1, down: 1 });
    // The same browser again, then changing its mind: still one vote.
    vote(format!("event={event}&vote=up"), Some(cookie.clone()))
        .await
        .unwrap();
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 1, down: 1 });
    let back = vote(
        format!("event={event}&vote=down&back=%2F%2Fevil.example"),
        Some(cookie.clone()),
    )
    .await
    .unwrap();
    assert_eq!(
        back.headers()["location"],
        format!("/e/{event}#event-{event}").as_str(),
        "never sent to another site"
    );
    assert!(back.headers().get("set-cookie").is_none());
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 0, down: 2 });
    // Another browser is another reader.
    vote(format!("event={event}&vote=up"), None).await.unwrap();
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 1, down: 2 });
    // Bad requests record nothing.
    let unknown = vote("event=ffffffffff&vote=up".into(), None).await.unwrap();
    assert_eq!(unknown.status(), 404);
    let bad = vote(format!("event={event}&vote=maybe"), None)
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let plain = client
        .post(format!("{base}vote"))
        .header("content-type", "text/plain")
        .body(format!("event={event}&vote=up"))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 415);
    assert_eq!(store.tally(&event).await.unwrap(), Tally { up: 1, down: 2 });

    // The pages: buttons on the digest, buttons and the tally on the permalink.
    let page = |path: String| {
        let client = client.clone();
        async move { client.get(path).send().await.unwrap().text().await.unwrap() }
    };
    let digest_page = page(format!("{base}digest/2026-10-28")).await;
    assert!(digest_page.contains("action=\"/vote\""), "{digest_page}");
    assert!(digest_page.contains(&format!("name=\"event\" value=\"{event}\"")));
    let permalink = page(format!("{base}e/{event}")).await;
    assert!(permalink.contains("👍 1 · 👎 2"), "{permalink}");

    // The editor's report: by source and by layer.
    let file = write_file_config(app.dir.path(), "kdigest.sqlite", "");
    let out = kdigest(&file, &["feedback", "--days", "7"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8(out.stdout).unwrap();
    let e = digest.events().next().unwrap();
    assert!(report.contains("👍 1 · 👎 2 on 1 events"), "{report}");
    assert!(report.contains("By source:") && report.contains(&e.sources[0].name));
    assert!(report.contains("By layer:") && report.contains(&e.layers[0]));
    assert!(report.contains("Liked least:") && report.contains(&e.title));
    let bad = kdigest(&file, &["feedback", "--days", "0"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "a bad --days is a usage error");
}

/// A subscriber who opted into the boost gets the layers their votes consistently like:
/// recomputed as they vote, and their events pass a threshold they would otherwise miss.
#[tokio::test]
async fn a_boosted_reader_s_liked_layer_passes_their_threshold() {
    let app = TestApp::start().await;
    let _config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;
    let id = add_reader(store, "telegram:4242").await;
    let mut s = store.subscriber(id).await.unwrap().unwrap();
    s.filter.boost = Some(Default::default());
    store.update_subscriber(&s, Utc::now()).await.unwrap();

    // Three 👍 on papers (their layer) from the chat's members.
    let papers: Vec<_> = digest
        .events()
        .filter(|e| e.kind == kdigest::model::ItemKind::Paper)
        .collect();
    let layer = papers[0].layers[0].clone();
    let liked: Vec<_> = digest
        .events()
        .filter(|e| e.layers.contains(&layer))
        .take(3)
        .collect();
    assert_eq!(liked.len(), 3);
    for (i, e) in liked.iter().enumerate() {
        store
            .record_vote(
                &e.id,
                &format!("telegram:{i}"),
                Some(id),
                kdigest::feedback::Vote::Up,
                Utc::now(),
            )
            .await
            .unwrap()
            .unwrap();
    }
    let s = store.subscriber(id).await.unwrap().unwrap();
    let boost = s.filter.boost.clone().unwrap();
    assert!(boost.contains(&layer), "{boost:?}");

    // A threshold just above an event of that layer: passed only with the boost.
    let target = liked[0];
    let mut filter = s.filter.clone();
    filter.min_score = Score::from_tenths(target.score.tenths() + 50);
    assert!(filter.accepts(target));
    filter.boost = None;
    assert!(!filter.accepts(target));
}
