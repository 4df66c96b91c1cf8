//! `cargo bench --bench postgres`: the scale-out targets of docs/PERFORMANCE.md on the
//! Postgres server of the machine (127.0.0.1:5432, or KDIGEST_BENCH_POSTGRES), each run in
//! a fresh schema that is dropped afterwards. Prints a skip line without a server.
//!
//! 1. Planning one digest for 1,000,000 subscribers (20 filters, two languages): the
//!    engine's paged planning, time and this process's peak RSS; then planning again
//!    (idempotent: nothing new).
//! 2. Fan-out: 10,000 webhook destinations (127.0.x.y, 10/s per host as in production)
//!    through `kdigest run --once` (the release binary) with 1 and then 3 instances on
//!    one database; the receiver runs in this process.

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use kdigest::deliver::engine::Engine;
use kdigest::metrics::Metrics;
use kdigest::store::Store;
use kdigest::subscriber::Address;
use sqlx::Connection;

const SUBSCRIBERS: i64 = 1_000_000;
const DESTINATIONS: usize = 10_000;
const DATE: &str = "2026-10-28";

/// A schema of its own on the server; dropped when the bench ends.
struct Schema {
    server: String,
    name: String,
    url: String,
}

impl Schema {
    async fn create(server: &str, name: &str) -> Option<Schema> {
        let mut conn = match sqlx::PgConnection::connect(server).await {
            Ok(c) => c,
            Err(e) => {
                println!("postgres: skipped, no server at {server} ({e})");
                return None;
            }
        };
        let name = format!("bench_{name}_{}", std::process::id());
        for sql in [
            format!("DROP SCHEMA IF EXISTS {name} CASCADE"),
            format!("CREATE SCHEMA {name}"),
        ] {
            sqlx::query(&sql).execute(&mut conn).await.unwrap();
        }
        let url = format!("{server}?options[search_path]={name}");
        Some(Schema {
            server: server.to_string(),
            name,
            url,
        })
    }

    async fn drop(self) {
        let mut conn = sqlx::PgConnection::connect(&self.server).await.unwrap();
        sqlx::query(&format!("DROP SCHEMA {} CASCADE", self.name))
            .execute(&mut conn)
            .await
            .unwrap();
    }
}

async fn bench_planning(server: &str) -> Option<()> {
    let schema = Schema::create(server, "plan").await?;
    let dir = tempfile::tempdir().unwrap();
    let config = kdigest_testkit::config::fixture_config(
        &kdigest_testkit::config::disk_feeds_base(),
        dir.path(),
        "",
    );
    let store = Store::open_postgres(&schema.url).await.unwrap();
    let digest = kdigest::pipeline::generate(&config, &store, kdigest::demo::demo_date(), &|_| {})
        .await
        .unwrap();
    // A million subscribers, written by the server itself (setup, not measured): 20
    // filters (layer or none, five thresholds), half of them zh-CN.
    let t = Instant::now();
    sqlx::query(
        "INSERT INTO subscribers (address, channel, layers, min_score, language, status, notify_empty, created_at, updated_at)
         SELECT 'webhook:https://hooks.example.org/h/' || i, 'webhook',
                CASE i % 4 WHEN 0 THEN '[]' WHEN 1 THEN '[\"kernel_codegen\"]' WHEN 2 THEN '[\"runtime\"]' ELSE '[\"optimization\"]' END,
                600 + (i % 5) * 50, CASE WHEN i % 2 = 0 THEN 'zh-CN' ELSE 'en' END, 'active', false, now(), now()
         FROM generate_series(1, $1) AS i",
    )
    .bind(SUBSCRIBERS)
    .execute(&sqlx::PgPool::connect(&schema.url).await.unwrap())
    .await
    .unwrap();
    let setup = t.elapsed();
    // The read side alone: every page of active subscribers.
    let t = Instant::now();
    let (mut after, mut loaded) = (0, 0);
    loop {
        let page = store.active_subscribers_page(after, 20_000).await.unwrap();
        let Some(last) = page.last() else { break };
        after = last.id;
        loaded += page.len();
    }
    let read = t.elapsed();
    let engine = Engine::new(store.clone(), &config, Arc::new(Metrics::default())).unwrap();
    let rss_before = common::peak_rss_mib();
    let t = Instant::now();
    let planned = engine.plan(&digest).await.unwrap();
    let first = t.elapsed();
    let rss = common::peak_rss_mib();
    let t = Instant::now();
    let again = engine.plan(&digest).await.unwrap();
    let second = t.elapsed();
    println!(
        "postgres planning: {SUBSCRIBERS} subscribers -> {planned} deliveries in {:.2} s (peak RSS {:.0} MiB, {:.0} MiB before planning); planning again {:.2} s, {again} new; reading the {loaded} subscribers alone {:.2} s; setup {:.1} s",
        first.as_secs_f64(),
        rss,
        rss_before,
        second.as_secs_f64(),
        read.as_secs_f64(),
        setup.as_secs_f64()
    );
    store.close().await;
    schema.drop().await;
    Some(())
}

/// Arrivals per destination, and the first and last arrival.
#[derive(Default)]
struct Arrivals {
    per_path: Mutex<HashMap<usize, usize>>,
    /// The delivery ids (X-Kdigest-Delivery) per destination, in arrival order.
    ids: Mutex<HashMap<usize, Vec<String>>>,
    span: Mutex<Option<(Instant, Instant)>>,
}

async fn receive(
    State(a): State<Arc<Arrivals>>,
    Path(i): Path<usize>,
    headers: axum::http::HeaderMap,
) -> StatusCode {
    let now = Instant::now();
    *a.per_path.lock().unwrap().entry(i).or_default() += 1;
    let id = headers
        .get(kdigest::channels::webhook::send::DELIVERY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    a.ids.lock().unwrap().entry(i).or_default().push(id);
    let mut span = a.span.lock().unwrap();
    let (first, _) = span.get_or_insert((now, now));
    *span = Some((*first, now));
    StatusCode::NO_CONTENT
}

/// The loopback address of destination `i`: 127.0.x.y with y in 1..=250.
fn host(i: usize) -> String {
    format!("127.0.{}.{}", i / 250, i % 250 + 1)
}

/// `run --once` of `instances` binaries on one schema; with `both`, every reader takes the
/// daily and the weekly roll-up (two deliveries each, the daily first).
async fn bench_fan_out(server: &str, instances: usize, both: bool) -> Option<()> {
    let schema = Schema::create(
        server,
        &format!("fan{instances}{}", if both { "b" } else { "" }),
    )
    .await?;
    let arrivals = Arc::new(Arrivals::default());
    let app = Router::new()
        .route("/h/{i}", post(receive))
        .with_state(arrivals.clone());
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    // The store is on Postgres (below); the [storage] path is never opened.
    let config_text = kdigest_testkit::config::file_config_text(
        "unused.sqlite",
        "[delivery.webhook]\nper_sec = 100000.0\nper_destination_per_sec = 10.0\nconcurrency = 256\n",
    );
    let config_path = dir.path().join("config.toml");
    std::fs::write(&config_path, &config_text).unwrap();
    let config = kdigest::config::Config::parse(&config_text).unwrap();
    // The digest and its plan are ready, as after the scheduler's tick; the instances
    // find both stored and deliver.
    let store = Store::open_postgres(&schema.url).await.unwrap();
    let addresses: Vec<Address> = (0..DESTINATIONS)
        .map(|i| Address::parse(&format!("webhook:http://{}:{port}/h/{i}", host(i))).unwrap())
        .collect();
    common::add_readers_of_everything(&store, &addresses).await;
    if both {
        let day = chrono::Datelike::weekday(&kdigest::demo::demo_date());
        common::set_cadence(&store, kdigest::subscriber::Cadence::Both(day)).await;
    }
    let digest = kdigest::pipeline::generate(&config, &store, kdigest::demo::demo_date(), &|_| {})
        .await
        .unwrap();
    Engine::new(store.clone(), &config, Arc::new(Metrics::default()))
        .unwrap()
        .plan(&digest)
        .await
        .unwrap();

    let t = Instant::now();
    let children: Vec<Child> = (0..instances)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_kdigest"))
                .arg("--config")
                .arg(&config_path)
                .args(["run", "--once", "--date", DATE])
                .env(kdigest::config::DATABASE_URL_ENV, &schema.url)
                .env("KDIGEST_WEBHOOK_SECRET", "bench-secret")
                .env("RUST_LOG", "error")
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        assert!(status.success(), "kdigest run --once failed: {status}");
    }
    let wall = t.elapsed();
    let per_path = arrivals.per_path.lock().unwrap().clone();
    let (first, last) = arrivals.span.lock().unwrap().unwrap();
    let total: usize = per_path.values().sum();
    let rate = (total - 1) as f64 / last.duration_since(first).as_secs_f64();
    let counts = store.delivery_counts(digest.date).await.unwrap();
    if both {
        let received = arrivals.ids.lock().unwrap().clone();
        let sids = common::subscriber_ids(&store, &addresses).await;
        let (with_both, daily_first, repeats) =
            common::check_both_editions(digest.date, &received, &sids);
        println!(
            "postgres fan-out, {instances} instance(s), {DESTINATIONS} readers of both editions: {total} deliveries in {:.1} s wall; {rate:.0} deliveries/s; readers with both editions {with_both} (target {DESTINATIONS}); the daily first for {daily_first} (target {DESTINATIONS}); repeats {repeats} (target 0); outbox sent {} pending {} failed {}",
            wall.as_secs_f64(),
            counts.sent,
            counts.pending,
            counts.failed
        );
        store.close().await;
        schema.drop().await;
        return Some(());
    }
    println!(
        "postgres fan-out, {instances} instance(s): {DESTINATIONS} webhook destinations in {:.1} s wall; {rate:.0} deliveries/s (first to last arrival); reached {}, duplicates {}; outbox sent {} pending {} failed {}",
        wall.as_secs_f64(),
        per_path.len(),
        total - per_path.len(),
        counts.sent,
        counts.pending,
        counts.failed
    );
    store.close().await;
    schema.drop().await;
    Some(())
}

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let server = std::env::var("KDIGEST_BENCH_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if bench_planning(&server).await.is_none() {
            return;
        }
        if std::env::args().any(|a| a == "--planning-only") {
            return;
        }
        for (instances, both) in [(1, false), (3, false), (3, true)] {
            bench_fan_out(&server, instances, both).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });
}
