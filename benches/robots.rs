//! `cargo bench --bench robots`: the daily fan-out to team-chat robots, 500 per platform
//! (Feishu, DingTalk, WeCom, Slack) at once, with the default `[delivery.<robot>]` limits,
//! against a loopback API that enforces each platform's per-robot limit (Feishu 5/s and
//! 100/min, DingTalk and WeCom 20/min, Slack 1/s) and answers its rate-limit error beyond
//! it. Every robot gets a busy day's digest (the sample day's events three times), which is
//! several messages on each platform (WeCom's 4,096-byte limit makes it the longest), so
//! per-robot pacing is what the bench measures: how long until the last robot has its digest, messages per second, the
//! smallest gap between two messages to one robot, and refusals (must be 0).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kdigest::deliver::engine::{Engine, Until};
use kdigest::metrics::Metrics;
use kdigest::subscriber::Address;

const ROBOTS: usize = 500;
/// The sample day's events this many times: a busy day, several messages per robot on
/// every platform.
const COPIES: usize = 3;

fn enlarged(d: &kdigest::model::Digest, copies: usize) -> kdigest::model::Digest {
    let mut big = d.clone();
    let mut n = 0;
    let mut grow = |events: &Vec<kdigest::model::DigestEvent>| {
        let mut out = Vec::new();
        for k in 0..copies {
            for e in events {
                let mut e = e.clone();
                n += 1;
                e.n = n;
                e.id = format!("{}-{k}", e.id);
                out.push(e);
            }
        }
        out
    };
    big.key_changes = grow(&d.key_changes);
    big.papers = grow(&d.papers);
    big.other_updates = grow(&d.other_updates);
    big
}

#[derive(Default)]
struct Api {
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

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let api = Arc::new(Api::default());
    let app = Router::new()
        .route("/open-apis/bot/v2/hook/{token}", post(feishu))
        .route("/robot/send", post(dingtalk))
        .route("/cgi-bin/webhook/send", post(wecom))
        .route("/services/{t}/{b}/{s}", post(slack))
        .with_state(api.clone());
    let base = common::serve(app).await;
    let dir = tempfile::tempdir().unwrap();
    let config = common::config(dir.path(), "");
    let (store, day) = common::fixture(&config).await;
    let digest = enlarged(&day, COPIES);
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
    common::add_readers_of_everything(&store, &addresses).await;
    let engine =
        Arc::new(Engine::new(store.clone(), &config, Arc::new(Metrics::default())).unwrap());
    let started = Instant::now();
    engine.plan(&digest).await.unwrap();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    engine
        .run(
            Until::Idle {
                max_wait: Duration::from_secs(10),
            },
            rx,
        )
        .await
        .unwrap();
    let counts = store.delivery_counts(digest.date).await.unwrap();
    let arrivals = api.arrivals.lock().unwrap();
    println!(
        "robots: {} robots ({ROBOTS} per platform), sent {} of {} deliveries, refused by the platforms' limits: {}",
        addresses.len(),
        counts.sent,
        addresses.len(),
        api.refused.load(Ordering::Relaxed)
    );
    for platform in ["feishu", "dingtalk", "wecom", "slack"] {
        let mine: Vec<&Vec<Instant>> = arrivals
            .iter()
            .filter(|((p, _), _)| *p == platform)
            .map(|(_, v)| v)
            .collect();
        let messages: usize = mine.iter().map(|v| v.len()).sum();
        let per_robot = messages as f64 / mine.len().max(1) as f64;
        let last = mine.iter().filter_map(|v| v.last()).max().copied();
        let min_gap = mine
            .iter()
            .flat_map(|v| v.windows(2).map(|w| w[1] - w[0]))
            .min()
            .unwrap_or_default();
        let done = last.map_or(0.0, |l| l.duration_since(started).as_secs_f64());
        println!(
            "  {platform:>8}: {messages} messages ({per_robot:.1} per robot), last robot done after {done:.1} s, {:.1} messages/s, smallest gap to one robot {:.2} s",
            messages as f64 / done.max(0.001),
            min_gap.as_secs_f64()
        );
    }
    println!(
        "  all done after {:.1} s; peak RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        common::peak_rss_mib()
    );
}
