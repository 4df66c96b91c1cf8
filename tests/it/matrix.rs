//! Matrix through the real delivery engine and reqwest against the loopback homeserver of
//! the test kit (crates/testkit/src/matrix.rs): the sample day in both languages within an
//! event's limit, HTML and plain bodies, rooms by id and by alias, transaction ids that keep
//! a retried message from posting twice, `M_LIMIT_EXCEEDED` waited out, and the error table.

use std::sync::Arc;
use std::time::Duration;

use kdigest::channels::Address;
use kdigest::deliver::engine::Engine;
use kdigest::model::Digest;
use kdigest::store::Store;
use kdigest::subscriber::Status;

use kdigest_testkit::TestApp;
use kdigest_testkit::app::{add_reader_in, run_until_idle, secret_env};
use kdigest_testkit::matrix::{self, MatrixMock, TOKEN};

struct Setup {
    mock: Arc<MatrixMock>,
    engine: Arc<Engine>,
    digest: Digest,
    app: TestApp,
}

/// Matrix with the bot's `token` and an account limit of `per_second` for kdigest.
async fn setup(token: &str, per_second: f64) -> Setup {
    let (base, mock) = matrix::spawn().await;
    let env = secret_env(token);
    let app = TestApp::builder()
        .toml(&format!(
            "[delivery]\nmax_attempts = 6\nbackoff_base_secs = 0.2\ntimeout_secs = 2.0\n[delivery.matrix]\nper_sec = {per_second}\nper_destination_per_sec = {per_second}\nconcurrency = 4\n[matrix]\nhomeserver = \"{base}\"\ntoken_env = \"{env}\"\n"
        ))
        .build()
        .await;
    let digest = app.digest().await;
    Setup {
        mock,
        engine: app.engine(),
        digest,
        app,
    }
}

async fn subscribe(store: &Store, room: &str, language: &str) -> i64 {
    let address = Address::parse(&format!("matrix:{room}")).unwrap();
    add_reader_in(store, &address, language).await
}

async fn status(store: &Store, id: i64) -> (String, String) {
    match store.subscriber(id).await.unwrap().unwrap().status {
        Status::Disabled(reason) => ("disabled".into(), reason),
        other => (other.as_str().into(), String::new()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_posts_the_sample_day_in_both_languages_to_rooms_by_id_and_alias() {
    let s = setup(TOKEN, 50.0).await;
    s.mock.join("!en:example.org");
    s.mock.join("!zh:example.org");
    s.mock.alias("#gpu-zh:example.org", "!zh:example.org");
    let en = subscribe(&s.app.store, "!en:example.org", "en").await;
    let zh = subscribe(&s.app.store, "#gpu-zh:example.org", "zh-CN").await;
    assert_eq!(s.engine.plan(&s.digest).await.unwrap(), 2);
    run_until_idle(&s.engine, Duration::from_secs(20)).await;

    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
    let date = s.digest.date.to_string();
    for (room, id, why) in [
        ("!en:example.org", en, "Why it matters"),
        ("!zh:example.org", zh, "为什么重要"),
    ] {
        let got = s.mock.messages(room);
        assert!(!got.is_empty(), "{room} got nothing");
        let body: String = got.iter().map(|m| m.body.as_str()).collect();
        let html: String = got.iter().map(|m| m.formatted_body.as_str()).collect();
        assert!(
            body.starts_with(&format!("{date} · ")),
            "{room}: {body:.80}"
        );
        assert!(
            body.contains(why) && html.contains(why),
            "{room} reads in its language"
        );
        assert!(
            html.contains("<a href=\"https://github.com/NVIDIA/cutlass/releases/tag/v5.0.0\">"),
            "{room}"
        );
        for e in s.digest.events() {
            let head: String = e.title.chars().take(20).collect();
            assert!(body.contains(&head), "{room} lacks {head}");
        }
        assert_eq!(status(&s.app.store, id).await.0, "active");
    }
    assert_eq!(
        s.app
            .store
            .delivery_counts(s.digest.date)
            .await
            .unwrap()
            .sent,
        2
    );
}

/// The homeserver stores two messages but their answers are lost (502, 504), and its
/// message limit (a burst of 2, then one per 200 ms) answers M_LIMIT_EXCEEDED to a
/// kdigest told it may send 20 a second: every retry carries its message's transaction
/// id, so each part is posted exactly once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_retries_reuse_their_transaction_so_nothing_posts_twice() {
    let s = setup(TOKEN, 20.0).await;
    let rooms = ["!a:example.org", "!b:example.org", "!c:example.org"];
    for room in rooms {
        s.mock.join(room);
        subscribe(&s.app.store, room, "en").await;
    }
    s.mock.lose_answers("!a:example.org", &[502, 504]);
    s.mock.limit(2.0, Duration::from_millis(200));
    s.engine.plan(&s.digest).await.unwrap();
    run_until_idle(&s.engine, Duration::from_secs(30)).await;

    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
    assert!(*s.mock.limited.lock().unwrap() > 0, "the limit was hit");
    let expected: Vec<String> = s
        .mock
        .messages(rooms[1])
        .iter()
        .map(|m| m.body.clone())
        .collect();
    assert!(!expected.is_empty());
    for room in rooms {
        let got: Vec<String> = s
            .mock
            .messages(room)
            .iter()
            .map(|m| m.body.clone())
            .collect();
        assert_eq!(got, expected, "{room}: every part once, in order");
    }
    assert_eq!(
        s.app
            .store
            .delivery_counts(s.digest.date)
            .await
            .unwrap()
            .sent,
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_disables_rooms_it_cannot_post_to_and_pauses_on_a_bad_token() {
    let s = setup(TOKEN, 50.0).await;
    s.mock.join("!ok:example.org");
    let ok = subscribe(&s.app.store, "!ok:example.org", "en").await;
    let kicked = subscribe(&s.app.store, "!kicked:example.org", "en").await;
    let gone = subscribe(&s.app.store, "#gone:example.org", "en").await;
    s.engine.plan(&s.digest).await.unwrap();
    run_until_idle(&s.engine, Duration::from_secs(20)).await;
    assert_eq!(status(&s.app.store, ok).await.0, "active");
    let (st, reason) = status(&s.app.store, kicked).await;
    assert_eq!(st, "disabled");
    assert!(
        reason.contains("M_FORBIDDEN") && reason.contains("invite"),
        "{reason}"
    );
    let (st, reason) = status(&s.app.store, gone).await;
    assert_eq!(st, "disabled");
    assert!(
        reason.contains("M_NOT_FOUND") && reason.contains("#gone:example.org"),
        "{reason}"
    );

    // The operator's token is wrong: nobody is disabled, nothing is lost, the channel waits.
    let s = setup("syt_wrong", 50.0).await;
    s.mock.join("!ok:example.org");
    let ok = subscribe(&s.app.store, "!ok:example.org", "en").await;
    s.engine.plan(&s.digest).await.unwrap();
    run_until_idle(&s.engine, Duration::from_secs(5)).await;
    assert_eq!(status(&s.app.store, ok).await.0, "active");
    let counts = s.app.store.delivery_counts(s.digest.date).await.unwrap();
    assert_eq!(counts.sent, 0, "{counts:?}");
    assert!(s.mock.messages("!ok:example.org").is_empty());
    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
}
