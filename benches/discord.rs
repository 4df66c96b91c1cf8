//! `cargo bench --bench discord`: 500 Discord webhook subscribers through the release binary
//! (`kdigest run --once` of the sample day) against a loopback API in another process (this
//! binary started again with `--api`) that enforces 5 requests per 2 s per webhook and 50/s
//! globally, sending X-RateLimit headers and answering 429 beyond the limits. Reports the
//! rate from the first message to the last (the whole run: a tail of late last messages
//! counts against it), 429s after the first window, and duplicates.

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kdigest::store::Store;
use kdigest::subscriber::Address;

const WEBHOOKS: u64 = 500;

#[derive(Default)]
struct Api {
    global: Mutex<VecDeque<Instant>>,
    per_hook: Mutex<HashMap<u64, VecDeque<Instant>>>,
    delivered: common::Tally<u64>,
    late_429s: AtomicUsize,
    early_429s: AtomicUsize,
    start: Mutex<Option<Instant>>,
}

fn prune(w: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    while w.front().is_some_and(|t| now.duration_since(*t) >= window) {
        w.pop_front();
    }
}

async fn execute(State(api): State<Arc<Api>>, Path((id, _token)): Path<(u64, String)>) -> Response {
    let now = Instant::now();
    let start = *api.start.lock().unwrap().get_or_insert(now);
    let mut headers = HeaderMap::new();
    let limited = {
        let mut global = api.global.lock().unwrap();
        let mut hooks = api.per_hook.lock().unwrap();
        let hook = hooks.entry(id).or_default();
        prune(&mut global, now, Duration::from_secs(1));
        prune(hook, now, Duration::from_secs(2));
        let limited = global.len() >= 50 || hook.len() >= 5;
        if !limited {
            global.push_back(now);
            hook.push_back(now);
        }
        headers.insert("x-ratelimit-limit", HeaderValue::from_static("5"));
        headers.insert(
            "x-ratelimit-remaining",
            HeaderValue::from(5 - hook.len().min(5) as u32),
        );
        headers.insert("x-ratelimit-reset-after", HeaderValue::from_static("2.000"));
        headers.insert("x-ratelimit-bucket", HeaderValue::from_static("webhook"));
        limited
    };
    if limited {
        let counter = if now.duration_since(start) < Duration::from_secs(2) {
            &api.early_429s
        } else {
            &api.late_429s
        };
        counter.fetch_add(1, Ordering::Relaxed);
        headers.insert("retry-after", HeaderValue::from_static("1"));
        return (StatusCode::TOO_MANY_REQUESTS, headers, axum::Json(serde_json::json!({"message": "You are being rate limited.", "retry_after": 1.0, "global": false, "code": 0}))).into_response();
    }
    api.delivered.record(id, now);
    (StatusCode::NO_CONTENT, headers).into_response()
}

async fn stats(State(api): State<Arc<Api>>) -> axum::Json<serde_json::Value> {
    let per_key = api.delivered.per_key();
    axum::Json(serde_json::json!({
        "messages": api.delivered.total(),
        "webhooks": per_key.len(),
        "fewest": per_key.iter().min().copied().unwrap_or(0),
        "most": per_key.iter().max().copied().unwrap_or(0),
        "sustained": api.delivered.sustained_rate(),
        "until_all_begun": api.delivered.budget_limited_rate(),
        "early_429s": api.early_429s.load(Ordering::Relaxed),
        "late_429s": api.late_429s.load(Ordering::Relaxed),
    }))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") {
        return;
    }
    if args.iter().any(|a| a == "--api") {
        let app = Router::new()
            .route("/api/v10/webhooks/{id}/{token}", post(execute))
            .route("/stats", get(stats))
            .with_state(Arc::new(Api::default()));
        return kdigest_testkit::net::serve_in_child(app, "127.0.0.1");
    }
    let api = kdigest_testkit::net::ChildServer::start(&["--api"]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.sqlite");
    let config_path = dir.path().join("config.toml");
    let discord = format!("[discord]\napi_url = \"{}\"\n", api.base());
    std::fs::write(
        &config_path,
        kdigest_testkit::config::file_config_text(&db.display().to_string(), &discord),
    )
    .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = Store::open(&db).await.unwrap();
            let addresses: Vec<Address> = (0..WEBHOOKS)
                .map(|i| {
                    Address::parse(&format!(
                        "discord:https://discord.com/api/webhooks/{}/tok{i}",
                        100_000_000_000_000_000 + i
                    ))
                    .unwrap()
                })
                .collect();
            common::add_readers_of_everything(&store, &addresses).await;
            store.close().await;
        });
    let elapsed = common::run_once(&config_path);
    let s: serde_json::Value = api.json("/stats");
    let rate = s["sustained"].as_f64().unwrap_or(0.0);
    let budget_rate = s["until_all_begun"].as_f64().unwrap_or(0.0);
    println!(
        "discord (release binary, run --once): {} webhook messages to {} webhooks ({}..={} each) in {elapsed:.1} s wall; first to last {rate:.1} req/s = {:.1}% of the 50/s permitted (target >= 97%; the limiter's arrival margin caps it at 97.6%); until every webhook had begun {budget_rate:.1} req/s ({:.1}%); 429s in the first window {}, after it {} (target 0)",
        s["messages"],
        s["webhooks"],
        s["fewest"],
        s["most"],
        rate / 50.0 * 100.0,
        budget_rate / 50.0 * 100.0,
        s["early_429s"],
        s["late_429s"]
    );
}
