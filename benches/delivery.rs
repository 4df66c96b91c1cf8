//! `cargo bench --bench delivery`: delivery targets of docs/PERFORMANCE.md, measured.
//!
//! 1. Planning + rendering for 100,000 subscribers with 20 distinct filters; then again with
//!    every subscriber following two phrases of their own (1 in 100 following a project in
//!    the day's news), so no two filters are alike.
//! 2. 10,000 webhook subscribers against a loopback receiver with no limit.
//! 3. A receiver enforcing 30 requests/s: sustained rate, 429s provoked, duplicates, losses.

mod common;

use kdigest_testkit::TestApp;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use kdigest::deliver::engine::{Engine, Until};
use kdigest::deliver::{Editions, RenderCache, plan};
use kdigest::metrics::Metrics;
use kdigest::model::{Filter, Score};
use kdigest::store::{NewSubscriber, Store};
use kdigest::subscriber::{Address, Channel, Status};

fn filters() -> Vec<Filter> {
    let layers = kdigest::config::DEFAULT_LAYERS;
    (0..20)
        .map(|i| Filter {
            layers: if i % 4 == 0 {
                BTreeSet::new()
            } else {
                BTreeSet::from([layers[i % 6].to_string()])
            },
            min_score: Score::from_f64(60.0 + (i / 4) as f64 * 5.0),
            boost: None,
            follows: Vec::new(),
        })
        .collect()
}

/// Subscribers with the 20 filters; `following`: each also follows two phrases of its own,
/// and one in 100 a project of the sample day ("Tessera").
async fn add_subscribers_following(
    store: &Store,
    urls: impl Iterator<Item = String>,
    following: bool,
) {
    let filters = filters();
    let addresses: Vec<Address> = urls
        .map(|u| Address::parse(&format!("webhook:{u}")).unwrap())
        .collect();
    let own: Vec<Filter> = (0..addresses.len())
        .map(|i| {
            let mut f = filters[i % filters.len()].clone();
            if following {
                f.follows = vec![format!("project-{i}"), format!("phrase {i}")];
                if i % 100 == 0 {
                    f.follows.push("Tessera".into());
                }
            }
            f
        })
        .collect();
    let rows: Vec<NewSubscriber> = addresses
        .iter()
        .enumerate()
        .map(|(i, a)| NewSubscriber {
            address: a,
            filter: &own[i],
            language: if i % 2 == 0 { "zh-CN" } else { "en" },
            status: &Status::Active,
            notify_empty: false,
        })
        .collect();
    store.add_subscribers(&rows, Utc::now()).await.unwrap();
}

async fn bench_planning(following: bool) {
    let app = TestApp::builder().feeds_on_disk().toml("").build().await;
    let digest = app.digest().await;
    let (_config, store) = (&app.config, &app.store);
    add_subscribers_following(
        store,
        (0..100_000).map(|i| format!("https://hooks.example.org/h/{i}")),
        following,
    )
    .await;
    let label = if following {
        "planning (every reader following 2 phrases of their own)"
    } else {
        "planning"
    };
    let rss_before = common::peak_rss_mib();
    let t = Instant::now();
    let subscribers = store.active_subscribers_page(0, i64::MAX).await.unwrap();
    let loaded = t.elapsed();
    let rows = plan(
        Editions {
            daily: &digest,
            weekly: None,
        },
        &subscribers,
        &[Channel::Webhook],
        chrono::Utc::now(),
    );
    let planned = t.elapsed();
    store
        .plan_deliveries(digest.date, &rows, Utc::now())
        .await
        .unwrap();
    let stored = t.elapsed();
    let cache = RenderCache::new(None);
    let by_id: HashMap<i64, &kdigest::subscriber::Subscriber> =
        subscribers.iter().map(|s| (s.id, s)).collect();
    let mut bytes = 0usize;
    for row in &rows {
        let s = by_id[&row.subscriber_id];
        bytes += cache
            .messages(&digest, &s.filter, &s.language, Channel::Webhook)
            .unwrap()[0]
            .len();
    }
    let total = t.elapsed();
    println!(
        "{label}: {} subscribers, 20 filters x 2 languages -> {} deliveries, {} distinct renders ({} MB of payload served from the cache)",
        subscribers.len(),
        rows.len(),
        cache.len(),
        bytes / 1_000_000
    );
    println!(
        "{label}: load {:.0} ms, plan {:.0} ms, outbox insert {:.0} ms, render {:.0} ms; total {:.2} s; peak RSS {:.0} MiB ({:.0} MiB before)",
        loaded.as_secs_f64() * 1e3,
        (planned - loaded).as_secs_f64() * 1e3,
        (stored - planned).as_secs_f64() * 1e3,
        (total - stored).as_secs_f64() * 1e3,
        total.as_secs_f64(),
        common::peak_rss_mib(),
        rss_before
    );
}

#[derive(Default)]
struct Receiver {
    per_path: Mutex<HashMap<String, usize>>,
    ok: AtomicUsize,
    rejected: AtomicUsize,
    /// Sliding one-second window of accepted requests, when limited.
    window: common::SlidingWindow,
    limit: Option<usize>,
}

async fn receive(
    State(r): State<Arc<Receiver>>,
    Path(path): Path<String>,
    _h: HeaderMap,
    // Read, as a real receiver does: a server that answers without reading the body
    // closes the connection, and every delivery paid for a new one.
    _body: axum::body::Bytes,
) -> Response {
    if let Some(limit) = r.limit
        && !r.window.admit(limit, Instant::now())
    {
        r.rejected.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response();
    }
    *r.per_path.lock().unwrap().entry(path).or_default() += 1;
    r.ok.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT.into_response()
}

async fn spawn_receiver(limit: Option<usize>) -> (String, Arc<Receiver>) {
    let r = Arc::new(Receiver {
        limit,
        ..Receiver::default()
    });
    let app = Router::new()
        .route("/h/{path}", post(receive))
        .with_state(r.clone());
    let base = format!("{}/h", kdigest_testkit::net::serve(app).await);
    (base, r)
}

async fn bench_fan_out(label: &str, n: usize, limit: Option<usize>, delivery_toml: &str) {
    let app = TestApp::builder()
        .feeds_on_disk()
        .toml(delivery_toml)
        .build()
        .await;
    let digest = app.digest().await;
    let (config, store) = (&app.config, &app.store);
    let (base, receiver) = spawn_receiver(limit).await;
    // One filter that matches, so every subscriber gets one message.
    let addresses: Vec<Address> = (0..n)
        .map(|i| Address::parse(&format!("webhook:{base}/{i}")).unwrap())
        .collect();
    common::add_readers_of_everything(store, &addresses).await;
    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    engine.plan(&digest).await.unwrap();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let t = Instant::now();
    engine
        .run(
            Until::Idle {
                max_wait: Duration::from_secs(30),
            },
            rx,
        )
        .await
        .unwrap();
    let elapsed = t.elapsed().as_secs_f64();
    let per_path = receiver.per_path.lock().unwrap();
    let duplicates: usize = per_path.values().map(|c| c - 1).sum();
    let lost = n - per_path.len();
    println!(
        "{label}: {n} webhook deliveries in {elapsed:.2} s = {:.0}/s; 429s provoked {}; duplicates {duplicates}; lost {lost}",
        receiver.ok.load(Ordering::Relaxed) as f64 / elapsed,
        receiver.rejected.load(Ordering::Relaxed)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    unsafe { std::env::set_var("KDIGEST_WEBHOOK_SECRET", "bench-secret") };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        bench_planning(false).await;
        bench_planning(true).await;
        // `cargo bench --bench delivery -- planning`: the planning cases alone.
        if std::env::args().any(|a| a == "planning") {
            return;
        }
        bench_fan_out(
            "fan-out (no limit)",
            10_000,
            None,
            "[delivery.webhook]\nper_sec = 1000000.0\nper_destination_per_sec = 1000000.0\nconcurrency = 64\n",
        )
        .await;
        bench_fan_out(
            "fan-out (receiver limit 30/s)",
            450,
            Some(30),
            "[delivery.webhook]\nper_sec = 30.0\nper_destination_per_sec = 30.0\nconcurrency = 8\n",
        )
        .await;
    });
}
