//! `cargo bench --bench telegram`: Telegram fan-out of a three-message digest to 1,000
//! chats against a loopback Bot API that enforces 30 messages/s overall (any one-second
//! window) and 1/s per chat, answering 429 with retry_after beyond that. A real digest is
//! several messages per chat: the per-chat gap is what a one-message bench cannot see.
//! Reports the sustained rate, 429s provoked, the shortest gap within a chat, duplicates.

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use kdigest::deliver::engine::{Engine, Until};
use kdigest::metrics::Metrics;
use kdigest::model::{Filter, Score};
use kdigest::store::NewSubscriber;
use kdigest::subscriber::{Address, Status};
use serde_json::{Value, json};

#[derive(Default)]
struct Api {
    window: Mutex<VecDeque<Instant>>,
    last_per_chat: Mutex<HashMap<i64, Instant>>,
    delivered: common::Tally<i64>,
    rejected: AtomicUsize,
    previous: Mutex<HashMap<i64, Instant>>,
    min_gap: Mutex<Option<Duration>>,
}

async fn send(
    State(api): State<Arc<Api>>,
    Path((_bot, _method)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    let chat = body["chat_id"].as_i64().unwrap_or(0);
    let now = Instant::now();
    let too_many = || {
        (axum::http::StatusCode::TOO_MANY_REQUESTS, Json(json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}})))
            .into_response()
    };
    {
        let mut last = api.last_per_chat.lock().unwrap();
        if last
            .get(&chat)
            .is_some_and(|t| now.duration_since(*t) < Duration::from_millis(1000))
        {
            api.rejected.fetch_add(1, Ordering::Relaxed);
            return too_many();
        }
        let mut w = api.window.lock().unwrap();
        while w
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
        {
            w.pop_front();
        }
        if w.len() >= 30 {
            api.rejected.fetch_add(1, Ordering::Relaxed);
            return too_many();
        }
        w.push_back(now);
        last.insert(chat, now);
    }
    api.delivered.record(chat, now);
    {
        let mut previous = api.previous.lock().unwrap();
        if let Some(before) = previous.insert(chat, now) {
            let gap = now.duration_since(before);
            let mut min = api.min_gap.lock().unwrap();
            *min = Some(min.map_or(gap, |m: Duration| m.min(gap)));
        }
    }
    Json(json!({"ok": true, "result": {"message_id": 1, "date": 0, "chat": {"id": chat, "type": "private", "first_name": "A"}, "text": "x"}}))
        .into_response()
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
        let app = Router::new().route("/{bot}/{method}", post(send)).with_state(api.clone());
        let base = common::serve(app).await;

        let dir = tempfile::tempdir().unwrap();
        unsafe { std::env::set_var("KDIGEST_BENCH_TG_TOKEN", "123:bench") };
        let config = common::config(dir.path(), &format!("[telegram]\napi_url = \"{base}\"\ntoken_env = \"KDIGEST_BENCH_TG_TOKEN\"\n"));
        let (store, digest) = common::fixture(&config).await;
        // The lowest threshold whose zh-CN digest is three Telegram messages.
        let cache = kdigest::deliver::RenderCache::new(None);
        let filter = (0..100)
            .map(|t| Filter { layers: Default::default(), min_score: Score::from_f64(f64::from(t)), boost: None })
            .find(|f| cache.messages(&digest, f, "zh-CN", kdigest::subscriber::Channel::Telegram).unwrap().len() == 3)
            .expect("some threshold gives three messages");
        let addresses: Vec<Address> = (1..=1000).map(Address::Telegram).collect();
        let rows: Vec<NewSubscriber> = addresses
            .iter()
            .map(|a| NewSubscriber { address: a, filter: &filter, language: "zh-CN", status: &Status::Active, notify_empty: false })
            .collect();
        store.add_subscribers(&rows, Utc::now()).await.unwrap();
        let engine = Arc::new(Engine::new(store.clone(), &config, Arc::new(Metrics::default())).unwrap());
        engine.plan(&digest).await.unwrap();
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let t = Instant::now();
        engine.run(Until::Idle { max_wait: Duration::from_secs(60) }, rx).await.unwrap();
        let elapsed = t.elapsed().as_secs_f64();
        let ok = api.delivered.total();
        let per_key = api.delivered.per_key();
        let duplicates: usize = per_key.iter().map(|n| n.saturating_sub(3)).sum();
        println!(
            "telegram: {ok} messages to {} chats ({} each) in {elapsed:.1} s; sustained {:.2} msg/s first to last (target >= 29), {:.2} msg/s until every chat had begun; 429s provoked {} (target 0); shortest gap in one chat {:.0} ms; duplicates beyond the digest {duplicates}; chats missing {}",
            per_key.len(),
            per_key.iter().max().unwrap_or(&0),
            api.delivered.sustained_rate(),
            api.delivered.budget_limited_rate(),
            api.rejected.load(Ordering::Relaxed),
            api.min_gap.lock().unwrap().unwrap_or_default().as_secs_f64() * 1e3,
            1000 - per_key.len()
        );
        println!("telegram: peak RSS {:.0} MiB", common::peak_rss_mib());
    });
}
