//! `cargo bench --bench robots`: the daily fan-out to team-chat robots, 500 per platform
//! (Feishu, DingTalk, WeCom, Slack) at once, through the release binary (`kdigest run
//! --once` of the sample day, every robot a reader of both the daily and the weekly
//! edition) with the default `[delivery.<robot>]` limits, against a
//! loopback API in another process (this binary started again with `--api`) that enforces
//! each platform's per-robot limit (Feishu 5/s and 100/min, DingTalk and WeCom 20/min,
//! Slack 1/s) and answers its rate-limit error beyond it. The digest is the sample day with
//! the threshold lowered to 40, so that every robot gets several messages (WeCom's
//! 4,096-byte limit makes it the longest) and per-robot pacing is what the bench measures:
//! per platform, the first to the last message, messages per second, the mean and the
//! smallest gap between two messages to one robot against the configured spacing, and
//! refusals (must be 0).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kdigest::store::Store;
use kdigest::subscriber::Address;

const ROBOTS: usize = 500;
const PLATFORMS: [&str; 4] = ["feishu", "dingtalk", "wecom", "slack"];

struct Api {
    started: Instant,
    arrivals: Mutex<HashMap<(&'static str, String), Vec<Instant>>>,
    refused: AtomicUsize,
}

impl Api {
    /// Records one message; false (and counted) when it breaks the platform's limit.
    fn arrive(&self, platform: &'static str, robot: String, windows: &[(Duration, usize)]) -> bool {
        let now = Instant::now();
        let mut all = self.arrivals.lock().unwrap();
        let seen = all.entry((platform, robot)).or_default();
        let over = windows.iter().any(|(window, max)| {
            seen.iter()
                .filter(|t| now.duration_since(**t) < *window)
                .count()
                + 1
                > *max
        });
        if over {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        seen.push(now);
        true
    }
}

async fn feishu(State(api): State<Arc<Api>>, Path(token): Path<String>) -> Response {
    let limits = [(Duration::from_secs(1), 5), (Duration::from_secs(60), 100)];
    let ok = api.arrive("feishu", token, &limits);
    axum::Json(if ok {
        serde_json::json!({"code": 0, "msg": "success"})
    } else {
        serde_json::json!({"code": 11232, "msg": "frequency limited"})
    })
    .into_response()
}

async fn dingtalk(
    State(api): State<Arc<Api>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let ok = api.arrive(
        "dingtalk",
        q["access_token"].clone(),
        &[(Duration::from_secs(60), 20)],
    );
    axum::Json(if ok {
        serde_json::json!({"errcode": 0, "errmsg": "ok"})
    } else {
        serde_json::json!({"errcode": 130101, "errmsg": "send too fast"})
    })
    .into_response()
}

async fn wecom(State(api): State<Arc<Api>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let ok = api.arrive("wecom", q["key"].clone(), &[(Duration::from_secs(60), 20)]);
    axum::Json(if ok {
        serde_json::json!({"errcode": 0, "errmsg": "ok"})
    } else {
        serde_json::json!({"errcode": 45009, "errmsg": "api freq out of limit"})
    })
    .into_response()
}

async fn slack(
    State(api): State<Arc<Api>>,
    Path((t, b, s)): Path<(String, String, String)>,
) -> Response {
    // One a second, with 50 ms for timer jitter.
    let ok = api.arrive(
        "slack",
        format!("{t}/{b}/{s}"),
        &[(Duration::from_millis(950), 1)],
    );
    if ok {
        "ok".into_response()
    } else {
        (
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            "rate_limited",
        )
            .into_response()
    }
}

/// Per platform: robots reached, messages, first and last arrival (ms since the API
/// started), mean and smallest gap between two messages to one robot (ms); refusals.
async fn stats(State(api): State<Arc<Api>>) -> axum::Json<serde_json::Value> {
    let arrivals = api.arrivals.lock().unwrap();
    let ms = |t: Instant| t.duration_since(api.started).as_secs_f64() * 1e3;
    let mut platforms = serde_json::Map::new();
    for platform in PLATFORMS {
        let mine: Vec<&Vec<Instant>> = arrivals
            .iter()
            .filter(|((p, _), _)| *p == platform)
            .map(|(_, v)| v)
            .collect();
        let gaps: Vec<f64> = mine
            .iter()
            .flat_map(|v| v.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e3))
            .collect();
        platforms.insert(
            platform.into(),
            serde_json::json!({
                "robots": mine.len(),
                "messages": mine.iter().map(|v| v.len()).sum::<usize>(),
                "first_ms": mine.iter().filter_map(|v| v.first()).min().map(|t| ms(*t)),
                "last_ms": mine.iter().filter_map(|v| v.last()).max().map(|t| ms(*t)),
                "all_begun_ms": mine.iter().filter_map(|v| v.first()).max().map(|t| ms(*t)),
                "longest_robot_ms": mine
                    .iter()
                    .filter_map(|v| Some(ms(*v.last()?) - ms(*v.first()?)))
                    .fold(0.0, f64::max),
                "mean_gap_ms": gaps.iter().sum::<f64>() / gaps.len().max(1) as f64,
                "min_gap_ms": gaps.iter().copied().fold(f64::INFINITY, f64::min),
            }),
        );
    }
    axum::Json(serde_json::json!({
        "refused": api.refused.load(Ordering::Relaxed),
        "platforms": platforms,
    }))
}

/// `--api`: the platforms' loopback API, in a process of its own.
fn run_api() {
    let api = Arc::new(Api {
        started: Instant::now(),
        arrivals: Mutex::default(),
        refused: AtomicUsize::default(),
    });
    let app = Router::new()
        .route("/open-apis/bot/v2/hook/{token}", post(feishu))
        .route("/robot/send", post(dingtalk))
        .route("/cgi-bin/webhook/send", post(wecom))
        .route("/services/{t}/{b}/{s}", post(slack))
        .route("/stats", get(stats))
        .with_state(api);
    kdigest_testkit::net::serve_in_child(app, "127.0.0.1");
}

/// The spacing kdigest keeps between two messages to one robot by default (ms): Feishu and
/// Slack 1/s, DingTalk and WeCom 19 a minute (their limit is 20), each stretched by the
/// 1/40 arrival margin of `deliver::limits`.
fn configured_gap_ms(platform: &str) -> f64 {
    let per_sec = match platform {
        "dingtalk" | "wecom" => 19.0 / 60.0,
        _ => 1.0,
    };
    1e3 / per_sec * (1.0 + 1.0 / 40.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") {
        return;
    }
    if args.iter().any(|a| a == "--api") {
        return run_api();
    }
    let api = kdigest_testkit::net::ChildServer::start(&["--api"]);
    let base = api.base();

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.sqlite");
    let config_path = dir.path().join("config.toml");
    let config = kdigest_testkit::config::file_config_text(&db.display().to_string(), "")
        .replace("min_score = 60", "min_score = 40");
    std::fs::write(&config_path, config).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut addresses = Vec::new();
    for i in 0..ROBOTS {
        for form in [
            format!("feishu:{base}/open-apis/bot/v2/hook/f{i}"),
            format!("dingtalk:{base}/robot/send?access_token=d{i}"),
            format!("wecom:{base}/cgi-bin/webhook/send?key=w{i}"),
            format!("slack:{base}/services/T0/B{i}/s{i}"),
        ] {
            addresses.push(Address::parse(&form).unwrap());
        }
    }
    rt.block_on(async {
        let store = Store::open(&db).await.unwrap();
        common::add_readers_of_everything(&store, &addresses).await;
        // Readers of both editions on their roll-up day: a daily and a weekly delivery
        // each, so every robot hears several messages in a row.
        let day = chrono::Datelike::weekday(&kdigest::demo::demo_date());
        common::set_cadence(&store, kdigest::subscriber::Cadence::Both(day)).await;
        store.close().await;
    });

    let wall = common::run_once(&config_path);
    let stats: serde_json::Value = api.json("/stats");
    drop(api);
    let sent = rt.block_on(async {
        let store = Store::open(&db).await.unwrap();
        let counts = store
            .delivery_counts(kdigest::demo::demo_date())
            .await
            .unwrap();
        store.close().await;
        counts.sent
    });
    println!(
        "robots (release binary, run --once): {} robots ({ROBOTS} per platform), {sent} deliveries sent, {:.1} s wall; refused by the platforms' limits: {} (target 0)",
        addresses.len(),
        wall,
        stats["refused"]
    );
    for platform in PLATFORMS {
        let p = &stats["platforms"][platform];
        let messages = p["messages"].as_f64().unwrap_or(0.0);
        let span_s =
            (p["last_ms"].as_f64().unwrap_or(0.0) - p["first_ms"].as_f64().unwrap_or(0.0)) / 1e3;
        let per_robot = messages / p["robots"].as_f64().unwrap_or(1.0).max(1.0);
        let want = configured_gap_ms(platform);
        let mean = p["mean_gap_ms"].as_f64().unwrap_or(0.0);
        let first = p["first_ms"].as_f64().unwrap_or(0.0);
        println!(
            "  {platform:>8}: {messages} messages ({per_robot:.1} per robot) in {span_s:.1} s first to last, {:.1} messages/s; every robot begun after {:.1} s, the longest robot {:.1} s; gap between two messages to one robot: mean {:.0} ms, smallest {:.0} ms, configured {:.0} ms",
            messages / span_s.max(0.001),
            (p["all_begun_ms"].as_f64().unwrap_or(0.0) - first) / 1e3,
            p["longest_robot_ms"].as_f64().unwrap_or(0.0) / 1e3,
            mean,
            p["min_gap_ms"].as_f64().unwrap_or(0.0),
            want,
        );
    }
}
