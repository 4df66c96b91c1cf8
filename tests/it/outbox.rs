//! Delivery engine v2 against loopback receivers that enforce limits: claims that are
//! fenced, reaped and skip paused destinations; a paused host that holds no worker and
//! hears nothing inside its Retry-After; multi-message Telegram digests within Telegram's
//! published limits; a store fault and a panic survived and reported by `/healthz`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use kdigest::deliver::engine::{Engine, Until};
use kdigest::metrics::Metrics;
use kdigest::model::{Filter, Score};
use kdigest::store::Store;
use kdigest::subscriber::{Address, Status};

use kdigest_testkit::TestApp;
use kdigest_testkit::app::run_until_idle;
use kdigest_testkit::telegram::{ChatMode, spawn_mock};

async fn add(store: &Store, address: &str, language: &str) -> i64 {
    store
        .add_subscriber(
            &Address::parse(address).unwrap(),
            &Filter {
                layers: Default::default(),
                min_score: Score::from_f64(0.0),
                boost: None,
                follows: Vec::new(),
            },
            language,
            &Status::Active,
            false,
            Utc::now(),
        )
        .await
        .unwrap()
        .unwrap()
}

/// Two webhook hosts (two loopback ports): "paused" answers its first request 429 with
/// Retry-After 3; "other" answers at once. Arrival times per host.
#[derive(Default)]
struct Hosts {
    arrivals: Mutex<BTreeMap<&'static str, Vec<Instant>>>,
    first_429: Mutex<Option<Instant>>,
}

async fn host(State((hosts, name)): State<(Arc<Hosts>, &'static str)>) -> Response {
    let now = Instant::now();
    let first = {
        let mut arrivals = hosts.arrivals.lock().unwrap();
        let list = arrivals.entry(name).or_default();
        list.push(now);
        list.len() == 1
    };
    if name == "paused" && first {
        *hosts.first_429.lock().unwrap() = Some(Instant::now());
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "3")]).into_response();
    }
    StatusCode::NO_CONTENT.into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_host_holds_no_worker_and_hears_nothing_inside_its_retry_after() {
    let hosts = Arc::new(Hosts::default());
    let mut bases = BTreeMap::new();
    for name in ["paused", "other"] {
        let app = Router::new()
            .route("/hook/{n}", post(host))
            .with_state((hosts.clone(), name));
        bases.insert(name, kdigest_testkit::net::serve(app).await);
    }
    // Four workers and a generous per-host rate: with the old engine, the paused host's
    // rows filled every worker for the whole Retry-After.
    let extra = "[delivery]\nmax_attempts = 4\nbackoff_base_secs = 0.2\nbackoff_max_secs = 10.0\ntimeout_secs = 2.0\n[delivery.webhook]\nper_sec = 1000.0\nper_destination_per_sec = 200.0\nconcurrency = 4\n";
    let app = TestApp::builder().toml(extra).build().await;
    let config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;
    for i in 0..12 {
        add(
            store,
            &format!("webhook:{}/hook/p{i}", bases["paused"]),
            "en",
        )
        .await;
    }
    for i in 0..40 {
        add(
            store,
            &format!("webhook:{}/hook/o{i}", bases["other"]),
            "en",
        )
        .await;
    }
    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    engine.plan(&digest).await.unwrap();
    run_until_idle(&engine, Duration::from_secs(15)).await;

    let counts = store.delivery_counts(digest.date).await.unwrap();
    assert_eq!((counts.sent, counts.failed, counts.pending), (52, 0, 0));
    let arrivals = hosts.arrivals.lock().unwrap().clone();
    let first_429 = hosts
        .first_429
        .lock()
        .unwrap()
        .expect("the paused host answered 429");
    let retry_window_end = first_429 + Duration::from_secs(3);
    // Requests already on the wire when the 429 was answered may arrive just after it;
    // nothing sent after the answer arrives inside the window.
    let inside: Vec<Duration> = arrivals["paused"]
        .iter()
        .filter(|t| **t > first_429 + Duration::from_millis(300) && **t < retry_window_end)
        .map(|t| t.duration_since(first_429))
        .collect();
    assert!(inside.is_empty(), "requests inside Retry-After: {inside:?}");
    assert_eq!(
        arrivals["paused"].len(),
        13,
        "12 deliveries and the refused first try"
    );
    // The other host was served while the paused one waited.
    let other_done = *arrivals["other"].iter().max().unwrap();
    assert!(
        other_done < retry_window_end,
        "the other host finished {:?} after the 429, inside the 3 s pause",
        other_done.duration_since(first_429)
    );
    assert_eq!(arrivals["other"].len(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_message_telegram_digests_provoke_no_429_and_keep_each_chat_spaced() {
    let (api, mock) = spawn_mock().await;
    mock.strict_limits.store(true, Ordering::Relaxed);
    let app = TestApp::builder()
        .telegram(&api, "")
        .toml("[delivery.telegram]\nper_sec = 30.0\nper_destination_per_sec = 1.0\nconcurrency = 30\n")
        .build()
        .await;
    let config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;
    // zh-CN and en readers of the whole digest: several messages each.
    let chats: Vec<i64> = (1..=40).collect();
    for chat in &chats {
        let language = if chat % 2 == 0 { "en" } else { "zh-CN" };
        add(store, &format!("telegram:{chat}"), language).await;
        mock.modes.lock().unwrap().insert(*chat, ChatMode::Ok);
    }
    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    engine.plan(&digest).await.unwrap();
    run_until_idle(&engine, Duration::from_secs(20)).await;

    assert_eq!(mock.too_many.load(Ordering::Relaxed), 0, "no 429 provoked");
    let counts = store.delivery_counts(digest.date).await.unwrap();
    assert_eq!(counts.sent, 40);
    let mut messages = 0;
    for chat in &chats {
        let sent = mock.sent_to(*chat);
        assert!(sent.len() >= 2, "chat {chat} got {} messages", sent.len());
        messages += sent.len();
        for pair in sent.windows(2) {
            let gap = pair[1].at.duration_since(pair[0].at);
            assert!(gap >= Duration::from_millis(990), "chat {chat}: {gap:?}");
        }
    }
    assert!(messages >= 100, "{messages} messages in all");
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_fault_and_a_panic_are_survived_and_healthz_reports_them_while_they_last() {
    let hosts = Arc::new(Hosts::default());
    let app = Router::new()
        .route("/hook/{n}", post(host))
        .with_state((hosts.clone(), "other"));
    let base = kdigest_testkit::net::serve(app).await;
    let extra = "[delivery]\nbackoff_base_secs = 0.2\nbackoff_max_secs = 1.0\n";
    let app = TestApp::builder().toml(extra).build().await;
    let config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;
    let panicky = add(store, &format!("webhook:{base}/hook/panicky"), "en").await;
    add(store, &format!("webhook:{base}/hook/calm"), "en").await;
    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    let router = kdigest::web::router(
        Arc::new(Metrics::default()),
        kdigest::web::Services {
            delivery: Some(engine.clone()),
            ..Default::default()
        },
    );
    let web = kdigest_testkit::net::serve(router).await;
    let client = reqwest::Client::new();
    let health = || async {
        let r = client.get(format!("{web}/healthz")).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    let workers = tokio::spawn({
        let engine = engine.clone();
        async move { engine.run(Until::Shutdown, rx).await }
    });
    assert_eq!(health().await.0, 200);

    // The store fault: the outbox table disappears under the running workers.
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", config.storage.path.display()))
        .await
        .unwrap();
    sqlx::query("ALTER TABLE deliveries RENAME TO deliveries_away")
        .execute(&db)
        .await
        .unwrap();
    let started = Instant::now();
    let (status, body) = loop {
        let (status, body) = health().await;
        // Every channel's worker notices on its own next claim; wait for the webhook one.
        if body.contains("webhook delivery worker down")
            || started.elapsed() > Duration::from_secs(20)
        {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("webhook delivery worker down") && body.contains("deliveries"),
        "{body}"
    );
    sqlx::query("ALTER TABLE deliveries_away RENAME TO deliveries")
        .execute(&db)
        .await
        .unwrap();

    // The panic: the first attempt to one subscriber panics; it is retried, the other
    // subscriber is not held up, and the worker stays up.
    engine.inject_panic(panicky);
    engine.plan(&digest).await.unwrap();
    let started = Instant::now();
    loop {
        let counts = store.delivery_counts(digest.date).await.unwrap();
        let (status, _) = health().await;
        if counts.sent == 2 && status == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not healed: {counts:?}, healthz {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let attempts: i64 =
        sqlx::query_scalar("SELECT attempts FROM deliveries WHERE subscriber_id = $1")
            .bind(panicky)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(attempts, 2, "the panicked attempt counts as one");
    let metrics = client
        .get(format!("{web}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("kdigest_outbox_oldest_ready_seconds{channel=\"webhook\"} 0.000"),
        "{metrics}"
    );
    tx.send(true).unwrap();
    workers.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_most_receivers_refuse_our_signature_the_channel_pauses_and_nobody_is_disabled() {
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = TestApp::builder()
        .toml("[delivery]\nmax_attempts = 3\nbackoff_base_secs = 0.1\nbackoff_max_secs = 0.5\n")
        .build()
        .await;
    let config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;
    // Eight receivers (eight hosts) that all refuse the signature, as after a key rotation.
    for i in 0..8 {
        let hits = hits.clone();
        let app = Router::new().route(
            "/hook",
            post(move || async move {
                hits.fetch_add(1, Ordering::Relaxed);
                StatusCode::UNAUTHORIZED
            }),
        );
        let base = kdigest_testkit::net::serve(app).await;
        for j in 0..3 {
            add(store, &format!("webhook:{base}/hook?s={i}{j}"), "en").await;
        }
    }
    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    engine.plan(&digest).await.unwrap();
    run_until_idle(&engine, Duration::from_secs(10)).await;

    let counts = store.delivery_counts(digest.date).await.unwrap();
    assert_eq!(
        counts.failed, 0,
        "no delivery used up its attempts: {counts:?}"
    );
    assert_eq!(
        counts.pending, 24,
        "all wait for the channel's pause to end"
    );
    assert!(
        hits.load(Ordering::Relaxed) < 24 * 3,
        "{} requests: the channel stopped before every attempt was spent",
        hits.load(Ordering::Relaxed)
    );
    let disabled = store
        .subscribers()
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.status != Status::Active)
        .count();
    assert_eq!(disabled, 0);
}
