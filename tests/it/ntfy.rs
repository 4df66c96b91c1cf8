//! ntfy through the real delivery engine and reqwest against the loopback server of the test
//! kit (crates/testkit/src/ntfy.rs): the sample day in both languages within ntfy's limits,
//! Markdown with a click to the web version, an access token from the environment for a
//! protected topic, the visitor request limit's 429s retried without a message published
//! twice, and the error table acted on.

use std::sync::Arc;
use std::time::Duration;

use kdigest::channels::{Address, Options};
use kdigest::deliver::engine::Engine;
use kdigest::model::Digest;
use kdigest::store::Store;
use kdigest::subscriber::Status;

use kdigest_testkit::TestApp;
use kdigest_testkit::app::{add_reader_in, run_until_idle, secret_env};
use kdigest_testkit::ntfy::{self, NtfyMock, RequestLimit};

const SITE: &str = "https://digest.example.org/";

struct Setup {
    mock: Arc<NtfyMock>,
    base: String,
    engine: Arc<Engine>,
    digest: Digest,
    app: TestApp,
}

/// ntfy at `per_second` per server (ntfy.sh's 0.2 would make a test wait minutes).
async fn setup(per_second: f64) -> Setup {
    let (base, mock) = ntfy::spawn().await;
    let app = TestApp::builder()
        .toml(&format!(
            "[web]\npublic_url = \"{SITE}\"\n[delivery]\nmax_attempts = 6\nbackoff_base_secs = 0.2\ntimeout_secs = 2.0\n[delivery.ntfy]\nper_sec = 100.0\nper_destination_per_sec = {per_second}\nconcurrency = 4\n[ntfy]\npriority = 4\n"
        ))
        .build()
        .await;
    let digest = app.digest().await;
    Setup {
        mock,
        base,
        engine: app.engine(),
        digest,
        app,
    }
}

async fn subscribe(store: &Store, address: &str, token_env: Option<&str>, language: &str) -> i64 {
    let options = Options {
        secret_env: token_env.map(str::to_string),
        keyword: None,
    };
    let address = Address::parse(address)
        .unwrap()
        .with_options(options)
        .unwrap();
    add_reader_in(store, &address, language).await
}

/// A subscriber's status and, when disabled, why.
async fn status(store: &Store, id: i64) -> (String, String) {
    match store.subscriber(id).await.unwrap().unwrap().status {
        Status::Disabled(reason) => ("disabled".into(), reason),
        other => (other.as_str().into(), String::new()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntfy_publishes_the_sample_day_in_both_languages_within_its_limits() {
    let s = setup(50.0).await;
    let token = "tk_7eevizlsiwf9yi4uxsrs83r4352o0";
    s.mock.protect("kdigest-zh", token);
    let var = secret_env(token);
    let en = subscribe(
        &s.app.store,
        &format!("ntfy:{}/kdigest-en", s.base),
        None,
        "en",
    )
    .await;
    let zh = subscribe(
        &s.app.store,
        &format!("ntfy:{}/kdigest-zh", s.base),
        Some(&var),
        "zh-CN",
    )
    .await;
    assert_eq!(s.engine.plan(&s.digest).await.unwrap(), 2);
    run_until_idle(&s.engine, Duration::from_secs(20)).await;

    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
    let date = s.digest.date.to_string();
    for (topic, id, words) in [
        ("kdigest-en", en, "Why it matters"),
        ("kdigest-zh", zh, "为什么重要"),
    ] {
        let got = s.mock.messages(topic);
        assert!(
            got.len() >= 2,
            "{topic}: the sample day takes several 4 KB messages, got {}",
            got.len()
        );
        for (i, m) in got.iter().enumerate() {
            assert!(
                m.message.len() <= 4096,
                "{topic}: {} bytes",
                m.message.len()
            );
            assert!(m.title.contains(&date), "{topic}: title {:?}", m.title);
            assert!(
                m.title.ends_with(&format!("({}/{})", i + 1, got.len())),
                "{:?}",
                m.title
            );
            assert_eq!(m.priority, 4, "[ntfy] priority");
            assert_eq!(
                m.click.as_deref(),
                Some(format!("{SITE}digest/{date}").as_str())
            );
        }
        let text: String = got.iter().map(|m| m.message.as_str()).collect();
        assert!(text.contains(words), "{topic} reads in its language");
        for e in s.digest.events() {
            let head: String = e.title.chars().take(20).collect();
            assert!(
                text.contains(&kdigest::channels::ntfy::escape(&head)),
                "{topic} lacks {head}"
            );
        }
        assert_eq!(status(&s.app.store, id).await.0, "active");
    }
    let counts = s.app.store.delivery_counts(s.digest.date).await.unwrap();
    assert_eq!(counts.sent, 2, "{counts:?}");
}

/// The server allows a burst of 2 and then one request per 300 ms while kdigest is told it
/// may send 5 a second (an operator's guess above the server's pace): the 429s pause the
/// server, are retried after the wait, and every message arrives exactly once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntfy_429s_are_retried_and_no_message_is_published_twice() {
    let s = setup(5.0).await;
    s.mock.limit(RequestLimit {
        burst: 2.0,
        every: Duration::from_millis(300),
    });
    let topics = ["t-one", "t-two", "t-three"];
    for t in topics {
        subscribe(&s.app.store, &format!("ntfy:{}/{t}", s.base), None, "en").await;
    }
    s.engine.plan(&s.digest).await.unwrap();
    run_until_idle(&s.engine, Duration::from_secs(60)).await;

    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
    assert!(*s.mock.limited.lock().unwrap() > 0, "the limit was hit");
    let first = s.mock.messages(topics[0]);
    for t in topics {
        let got = s.mock.messages(t);
        let titles: Vec<&str> = got.iter().map(|m| m.title.as_str()).collect();
        let expected: Vec<&str> = first.iter().map(|m| m.title.as_str()).collect();
        assert_eq!(titles, expected, "{t}: every part once, in order");
    }
    let counts = s.app.store.delivery_counts(s.digest.date).await.unwrap();
    assert_eq!(counts.sent, 3, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntfy_errors_disable_retry_or_fail_as_the_server_means_them() {
    let s = setup(50.0).await;
    s.mock.protect("locked", "tk_right");
    s.mock.protect("also-locked", "tk_right");
    let wrong = secret_env("tk_wrong");
    let forbidden = subscribe(
        &s.app.store,
        &format!("ntfy:{}/forbidden", s.base),
        None,
        "en",
    )
    .await;
    s.mock.script("forbidden", &[(403, 40301)]);
    let flaky = subscribe(&s.app.store, &format!("ntfy:{}/flaky", s.base), None, "en").await;
    s.mock.script("flaky", &[(500, 50001), (503, 0)]);
    let locked = subscribe(
        &s.app.store,
        &format!("ntfy:{}/locked", s.base),
        Some(&wrong),
        "en",
    )
    .await;
    let anonymous = subscribe(
        &s.app.store,
        &format!("ntfy:{}/also-locked", s.base),
        None,
        "zh-CN",
    )
    .await;
    s.engine.plan(&s.digest).await.unwrap();
    run_until_idle(&s.engine, Duration::from_secs(30)).await;

    let (st, reason) = status(&s.app.store, forbidden).await;
    assert_eq!(st, "disabled", "{reason}");
    assert!(reason.contains("40301"), "{reason}");
    assert_eq!(status(&s.app.store, flaky).await.0, "active");
    assert!(
        !s.mock.messages("flaky").is_empty(),
        "delivered after two 5xx"
    );
    // A wrong token is ours to fix: retried, never disabling the subscriber.
    let (st, reason) = status(&s.app.store, locked).await;
    assert_eq!(st, "active", "{reason}");
    // A protected topic without a token: the subscriber needs one.
    let (st, reason) = status(&s.app.store, anonymous).await;
    assert_eq!(st, "disabled", "{reason}");
    assert!(
        reason.contains("--secret-env"),
        "the reason says how to mend it: {reason}"
    );
    assert!(s.mock.messages("locked").is_empty() && s.mock.messages("also-locked").is_empty());
    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
}
