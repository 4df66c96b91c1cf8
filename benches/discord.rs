//! `cargo bench --bench discord`: 500 Discord webhook subscribers against a loopback API that
//! enforces 5 requests per 2 s per webhook and 50/s globally, sending X-RateLimit headers and
//! answering 429 beyond the limits. Reports the rate, 429s after the first window, and
//! duplicates.

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use kdigest::deliver::engine::{Engine, Until};
use kdigest::metrics::Metrics;
use kdigest::model::Filter;
use kdigest::store::NewSubscriber;
use kdigest::subscriber::{Address, Status};

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

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let api = Arc::new(Api::default());
        let app = Router::new().route("/api/v10/webhooks/{id}/{token}", post(execute)).with_state(api.clone());
        let base = common::serve(app).await;

        let dir = tempfile::tempdir().unwrap();
        let config = common::config(dir.path(), &format!("[discord]\napi_url = \"{base}\"\n"));
        let (store, digest) = common::fixture(&config).await;
        let addresses: Vec<Address> = (0..500u64)
            .map(|i| Address::parse(&format!("discord:https://discord.com/api/webhooks/{}/tok{i}", 100_000_000_000_000_000 + i)).unwrap())
            .collect();
        let all = Filter::default();
        let rows: Vec<NewSubscriber> = addresses
            .iter()
            .map(|a| NewSubscriber { address: a, filter: &all, language: "en", status: &Status::Active, notify_empty: false })
            .collect();
        store.add_subscribers(&rows, Utc::now()).await.unwrap();
        let engine = Arc::new(Engine::new(store.clone(), &config, Arc::new(Metrics::default())).unwrap());
        engine.plan(&digest).await.unwrap();
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let t = Instant::now();
        engine.run(Until::Idle { max_wait: Duration::from_secs(30) }, rx).await.unwrap();
        let elapsed = t.elapsed().as_secs_f64();
        let ok = api.delivered.total();
        let per_key = api.delivered.per_key();
        let rate = api.delivered.sustained_rate();
        let budget_rate = api.delivered.budget_limited_rate();
        println!(
            "discord: {ok} webhook messages to {} webhooks ({}..={} each) in {elapsed:.1} s; first to last {rate:.1} req/s ({:.1}% of 50/s); until every webhook had begun {budget_rate:.1} req/s = {:.1}% of the 50/s permitted (target >= 97%); 429s in the first window {}, after it {} (target 0)",
            per_key.len(),
            per_key.iter().min().unwrap(),
            per_key.iter().max().unwrap(),
            rate / 50.0 * 100.0,
            budget_rate / 50.0 * 100.0,
            api.early_429s.load(Ordering::Relaxed),
            api.late_429s.load(Ordering::Relaxed)
        );
        println!("discord: peak RSS {:.0} MiB", common::peak_rss_mib());
    });
}
