//! `cargo bench --bench telegram`: Telegram fan-out of a three-message digest to 1,000
//! chats through the release binary (`kdigest run --once` of the sample day) against a
//! loopback Bot API in another process (this binary started again with `--api`) that
//! enforces 30 messages/s overall (any one-second window) and 1/s per chat, answering 429
//! with retry_after beyond that. A real digest is several messages per chat: the per-chat
//! gap is what a one-message bench cannot see. Reports the sustained rate, 429s provoked,
//! the shortest gap within a chat, duplicates.

mod common;

use kdigest_testkit::TestApp;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kdigest::model::{Filter, Score};
use kdigest::store::Store;
use kdigest::subscriber::Address;
use serde_json::{Value, json};

const CHATS: i64 = 1_000;
const TOKEN_ENV: &str = "KDIGEST_BENCH_TG_TOKEN";

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
    Path((_bot, method)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    if !method.eq_ignore_ascii_case("sendMessage") {
        return Json(json!({"ok": false, "error_code": 404, "description": "Not Found: the bench serves sendMessage only"})).into_response();
    }
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

async fn stats(State(api): State<Arc<Api>>) -> Json<Value> {
    let per_key = api.delivered.per_key();
    Json(json!({
        "messages": api.delivered.total(),
        "chats": per_key.len(),
        "most_per_chat": per_key.iter().max().copied().unwrap_or(0),
        "duplicates": per_key.iter().map(|n| n.saturating_sub(3)).sum::<usize>(),
        "sustained": api.delivered.sustained_rate(),
        "until_all_begun": api.delivered.budget_limited_rate(),
        "rejected": api.rejected.load(Ordering::Relaxed),
        "min_gap_ms": api.min_gap.lock().unwrap().unwrap_or_default().as_secs_f64() * 1e3,
    }))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") {
        return;
    }
    if args.iter().any(|a| a == "--api") {
        let app = Router::new()
            .route("/{bot}/{method}", post(send))
            .route("/stats", get(stats))
            .with_state(Arc::new(Api::default()));
        return kdigest_testkit::net::serve_in_child(app, "127.0.0.1");
    }
    let api = kdigest_testkit::net::ChildServer::start(&["--api"]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.sqlite");
    let config_path = dir.path().join("config.toml");
    let telegram = format!(
        "[telegram]\napi_url = \"{}\"\ntoken_env = \"{TOKEN_ENV}\"\n",
        api.base()
    );
    std::fs::write(
        &config_path,
        kdigest_testkit::config::file_config_text(&db.display().to_string(), &telegram),
    )
    .unwrap();
    // The binary reads the token from the environment it inherits.
    unsafe { std::env::set_var(TOKEN_ENV, "123:bench") };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The lowest threshold whose zh-CN digest is three Telegram messages, read from
        // the same day generated here (the binary generates it again).
        let scratch = TestApp::builder().feeds_on_disk().build().await;
        let digest = scratch.digest().await;
        scratch.store.close().await;
        let cache = kdigest::deliver::RenderCache::new(None);
        let filter = (0..100)
            .map(|t| Filter {
                layers: Default::default(),
                min_score: Score::from_f64(f64::from(t)),
                boost: None,
                follows: Vec::new(),
            })
            .find(|f| {
                cache
                    .messages(&digest, f, "zh-CN", kdigest::subscriber::Channel::Telegram)
                    .unwrap()
                    .len()
                    == 3
            })
            .expect("some threshold gives three messages");
        let store = Store::open(&db).await.unwrap();
        let addresses: Vec<Address> = (1..=CHATS).map(Address::Telegram).collect();
        kdigest_testkit::app::add_readers(&store, &addresses, &filter, "zh-CN").await;
        store.close().await;
    });
    let elapsed = common::run_once(&config_path);
    let s: Value = api.json("/stats");
    println!(
        "telegram (release binary, run --once): {} messages to {} chats ({} each) in {elapsed:.1} s wall; sustained {:.2} msg/s first to last (target >= 29), {:.2} msg/s until every chat had begun; 429s provoked {} (target 0); shortest gap in one chat {:.0} ms; duplicates beyond the digest {}; chats missing {}",
        s["messages"],
        s["chats"],
        s["most_per_chat"],
        s["sustained"].as_f64().unwrap_or(0.0),
        s["until_all_begun"].as_f64().unwrap_or(0.0),
        s["rejected"],
        s["min_gap_ms"].as_f64().unwrap_or(0.0),
        s["duplicates"],
        CHATS - s["chats"].as_i64().unwrap_or(0)
    );
}
