//! `cargo bench --bench webhooks`: 10,000 webhook destinations through the release binary
//! (`kdigest run --once`, the whole daily job) and a receiver in another process (this
//! bench binary started again with `--receiver`).
//!
//! Every subscriber is its own destination: URLs spread over 10,000 loopback addresses
//! (127.0.x.y, all on `lo`; the receiver listens on 0.0.0.0 for the bench's seconds), so
//! the per-host limit (`delivery.webhook.per_destination_per_sec`, default 10/s) holds
//! as in production and each destination is a new connection, not one kept-alive socket.
//!
//! 1. Steady state: deliveries per second from the first arrival to the last.
//! 2. One destination answers 429 with `Retry-After: 60`: how much later the other 9,999
//!    finish than in run 1, whether anything reached the paused host inside its 60 s, and
//!    that it got its digest after them.
//! 3. Many subscribers behind one host: 2,000 at `per_destination_per_sec = 200` against a
//!    receiver that answers 429 past 200 requests in any second (target >= 190/s), and 100
//!    at the default 10/s (target <= 11 s).
//! 4. 10,000 readers of both editions on their roll-up day (`-- --both` alone): every
//!    reader gets the daily and the weekly roll-up, the daily first, no repeat.
//! 5. `-- --kill9 [RUNS]` (not in the default run): SIGKILL at random moments of the
//!    10,000-destination fan-out, then a second run: nothing lost, repeats only of the
//!    messages in flight, with their first delivery id.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kdigest::store::Store;
use kdigest::subscriber::Address;

const DESTINATIONS: usize = 10_000;
const PAUSE_SECS: u64 = 60;
/// `delivery.webhook.concurrency` in every scenario.
const CONCURRENCY: usize = 256;

/// The receiver process: arrivals per path, with the paused destination (if any)
/// answering 429 for [`PAUSE_SECS`] after its first request.
struct Receiver {
    started: Instant,
    paused: Option<usize>,
    /// Requests accepted in any one second, when the receiver enforces a limit.
    limit: Option<usize>,
    window: common::SlidingWindow,
    rejected: std::sync::atomic::AtomicUsize,
    arrivals: Mutex<HashMap<usize, Vec<Instant>>>,
    /// The delivery ids (X-Kdigest-Delivery) each destination was sent.
    ids: Mutex<HashMap<usize, Vec<String>>>,
    first_429: Mutex<Option<Instant>>,
}

async fn receive(
    State(r): State<Arc<Receiver>>,
    Path(i): Path<usize>,
    headers: axum::http::HeaderMap,
    // Read, as a real receiver does (an unread body makes the server close the connection).
    _body: axum::body::Bytes,
) -> Response {
    let now = Instant::now();
    if let Some(limit) = r.limit
        && !r.window.admit(limit, now)
    {
        r.rejected
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response();
    }
    r.arrivals.lock().unwrap().entry(i).or_default().push(now);
    let id = headers
        .get(kdigest::channels::webhook::send::DELIVERY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    r.ids.lock().unwrap().entry(i).or_default().push(id);
    if Some(i) == r.paused {
        let mut first = r.first_429.lock().unwrap();
        let since = *first.get_or_insert(now);
        if now.duration_since(since) < Duration::from_secs(PAUSE_SECS) {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, PAUSE_SECS.to_string())],
            )
                .into_response();
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

/// Milliseconds since the receiver started, as JSON numbers.
async fn stats(State(r): State<Arc<Receiver>>) -> axum::Json<serde_json::Value> {
    let ms = |t: Instant| t.duration_since(r.started).as_secs_f64() * 1e3;
    let arrivals = r.arrivals.lock().unwrap();
    let first_429 = *r.first_429.lock().unwrap();
    let others: Vec<Instant> = arrivals
        .iter()
        .filter(|(i, _)| Some(**i) != r.paused)
        .flat_map(|(_, t)| t.iter().copied())
        .collect();
    let duplicates: usize = arrivals
        .iter()
        .filter(|(i, _)| Some(**i) != r.paused)
        .map(|(_, t)| t.len() - 1)
        .sum();
    let paused: Vec<Instant> = r
        .paused
        .and_then(|i| arrivals.get(&i).cloned())
        .unwrap_or_default();
    // Requests that reached the paused host inside its Retry-After (the first answer
    // excluded, and 200 ms for requests already on the wire).
    let inside = first_429.map_or(0, |f| {
        paused
            .iter()
            .filter(|t| {
                **t > f + Duration::from_millis(200)
                    && t.duration_since(f) < Duration::from_secs(PAUSE_SECS)
            })
            .count()
    });
    // A repeat that carries another delivery id than the first copy: the receiver could not
    // drop it (none expected).
    let ids = r.ids.lock().unwrap();
    let repeats_with_another_id = ids
        .values()
        .filter(|v| v.iter().any(|id| id.is_empty() || *id != v[0]))
        .count();
    axum::Json(serde_json::json!({
        "destinations": arrivals.len(),
        "repeats_with_another_id": repeats_with_another_id,
        "duplicates": duplicates,
        "others_first_ms": others.iter().copied().min().map(ms),
        "others_last_ms": others.iter().copied().max().map(ms),
        "others": others.len(),
        "paused_requests": paused.len(),
        "paused_inside_retry_after": inside,
        "paused_delivered_ms": paused.last().map(|t| ms(*t)),
        "first_429_ms": first_429.map(ms),
        "rejected": r.rejected.load(std::sync::atomic::Ordering::Relaxed),
    }))
}

/// The delivery ids each destination received, in arrival order.
async fn ids(State(r): State<Arc<Receiver>>) -> axum::Json<HashMap<usize, Vec<String>>> {
    axum::Json(r.ids.lock().unwrap().clone())
}

fn run_receiver(paused: Option<usize>, limit: Option<usize>) {
    let r = Arc::new(Receiver {
        started: Instant::now(),
        paused,
        limit,
        window: Default::default(),
        rejected: Default::default(),
        arrivals: Mutex::new(HashMap::new()),
        ids: Mutex::new(HashMap::new()),
        first_429: Mutex::new(None),
    });
    let app = Router::new()
        .route("/h/{i}", post(receive))
        .route("/stats", get(stats))
        .route("/ids", get(ids))
        .with_state(r);
    kdigest_testkit::net::serve_in_child(app, "0.0.0.0");
}

/// The loopback address of destination `i`: 127.0.x.y with y in 1..=250.
fn host(i: usize) -> String {
    format!("127.0.{}.{}", i / 250, i % 250 + 1)
}

struct Run {
    rate: f64,
    others_span_ms: f64,
    stats: serde_json::Value,
    wall_s: f64,
    /// The delivery ids each destination received, in arrival order.
    ids: HashMap<usize, Vec<String>>,
    /// The run's configuration and database.
    dir: tempfile::TempDir,
    port: u16,
}

/// One `run --once` against a receiver process.
struct Scenario {
    destinations: usize,
    /// Every subscriber behind 127.0.0.1 (one destination), not one host each.
    one_host: bool,
    paused: Option<usize>,
    /// The receiver's limit per second (429 past it).
    limit: Option<usize>,
    /// `delivery.webhook.per_destination_per_sec`; None: the default.
    per_destination: Option<f64>,
    /// Every reader's cadence; None: daily.
    cadence: Option<kdigest::subscriber::Cadence>,
}

impl Scenario {
    /// [`DESTINATIONS`] readers, one host each, default limits, daily.
    fn many() -> Scenario {
        Scenario {
            destinations: DESTINATIONS,
            one_host: false,
            paused: None,
            limit: None,
            per_destination: None,
            cadence: None,
        }
    }
}

/// Starts the receiver process (this binary with `--receiver`).
fn start_receiver(
    paused: Option<usize>,
    limit: Option<usize>,
) -> kdigest_testkit::net::ChildServer {
    let arg = |v: Option<usize>| v.map_or("none".to_string(), |p| p.to_string());
    kdigest_testkit::net::ChildServer::start(&["--receiver", &arg(paused), &arg(limit)])
}

/// A configuration and store in `dir` with `destinations` webhook readers of everything
/// pointing at the receiver on `port`; returns the configuration's path.
fn prepare(dir: &std::path::Path, scenario: &Scenario, port: u16) -> std::path::PathBuf {
    let db = dir.join("bench.sqlite");
    let config_text = kdigest_testkit::config::file_config_text(
        &db.display().to_string(),
        &format!(
            "[delivery.webhook]\nper_sec = 100000.0\nconcurrency = {CONCURRENCY}\n{}",
            scenario.per_destination.map_or(String::new(), |p| format!(
                "per_destination_per_sec = {p:.1}\n"
            ))
        ),
    );
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, config_text).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Store::open(&db).await.unwrap();
        let addresses: Vec<Address> = (0..scenario.destinations)
            .map(|i| {
                let host = if scenario.one_host {
                    "127.0.0.1".into()
                } else {
                    host(i)
                };
                Address::parse(&format!("webhook:http://{host}:{port}/h/{i}")).unwrap()
            })
            .collect();
        common::add_readers_of_everything(&store, &addresses).await;
        if let Some(cadence) = scenario.cadence {
            common::set_cadence(&store, cadence).await;
        }
        store.close().await;
    });
    config_path
}

fn one_run(scenario: Scenario) -> Run {
    let receiver = start_receiver(scenario.paused, scenario.limit);
    let port = receiver.port;
    let dir = tempfile::tempdir().unwrap();
    let config_path = prepare(dir.path(), &scenario, port);
    let wall_s = common::run_once(&config_path);
    let stats: serde_json::Value = receiver.json("/stats");
    let ids = receiver.json("/ids");
    drop(receiver);
    let first = stats["others_first_ms"].as_f64().unwrap();
    let last = stats["others_last_ms"].as_f64().unwrap();
    let others = stats["others"].as_f64().unwrap();
    Run {
        rate: (others - 1.0) / ((last - first) / 1e3),
        others_span_ms: last - first,
        stats,
        wall_s,
        ids,
        dir,
        port,
    }
}

/// `-- --kill9 [RUNS]`: RUNS times, a 10,000-destination fan-out whose `run --once` is
/// killed with SIGKILL at a random moment (seeded), then run again to the end. Target: 0
/// lost; repeats only of messages in flight at the kill (at most `concurrency`), each with
/// the delivery id of its first copy.
fn kill9_runs(runs: usize) {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut lost, mut repeats, mut most_repeats, mut foreign_ids) = (0, 0, 0, 0);
    for run in 1..=runs {
        let scenario = Scenario::many();
        let receiver = start_receiver(None, None);
        let port = receiver.port;
        let dir = tempfile::tempdir().unwrap();
        let config_path = prepare(dir.path(), &scenario, port);
        // Anywhere from the pipeline (before any delivery) to the end of the fan-out (the
        // steady run takes about 4 s in all).
        let kill_at = Duration::from_millis(200 + next() % 4_000);
        let mut victim = common::spawn_run_once(&config_path);
        std::thread::sleep(kill_at);
        let finished_first = victim.try_wait().unwrap().is_some();
        let _ = victim.kill(); // SIGKILL
        let _ = victim.wait();
        let before = receiver.json::<serde_json::Value>("/stats")["destinations"]
            .as_u64()
            .unwrap_or(0);
        let status = common::spawn_run_once(&config_path).wait().unwrap();
        assert!(
            status.success(),
            "run {run}: the second run --once failed: {status}"
        );
        let stats: serde_json::Value = receiver.json("/stats");
        drop(receiver);
        let reached = stats["destinations"].as_u64().unwrap() as usize;
        let dup = stats["duplicates"].as_u64().unwrap() as usize;
        let another = stats["repeats_with_another_id"].as_u64().unwrap() as usize;
        lost += DESTINATIONS - reached;
        repeats += dup;
        most_repeats = most_repeats.max(dup);
        foreign_ids += another;
        println!(
            "  kill -9 run {run}: killed at {:.2} s{}, {before} reached before the kill; after the second run: reached {reached}, repeats {dup}, repeats with another delivery id {another}",
            kill_at.as_secs_f64(),
            if finished_first {
                " (it had already finished)"
            } else {
                ""
            },
        );
    }
    println!(
        "webhooks, kill -9 at random moments of a {DESTINATIONS}-destination fan-out, {runs} runs: lost {lost} (target 0); repeats {repeats} in all, at most {most_repeats} in one run (target <= {CONCURRENCY}, the requests in flight); repeats with another delivery id {foreign_ids} (target 0)"
    );
}

/// `-- --both`: 10,000 readers of "both" on the fixture day's weekday: each gets the daily
/// and the weekly roll-up, two deliveries with their own ids. Targets: every reader both
/// editions, the daily first, no repeat; the rate counts deliveries (20,000).
fn both_editions() {
    let date = chrono::NaiveDate::from_ymd_opt(2026, 10, 28).unwrap();
    let scenario = Scenario {
        cadence: Some(kdigest::subscriber::Cadence::Both(
            chrono::Datelike::weekday(&date),
        )),
        ..Scenario::many()
    };
    let run = one_run(scenario);
    let port = run.port;
    // Subscriber ids by destination, to name each edition's delivery id.
    let addresses: Vec<Address> = (0..DESTINATIONS)
        .map(|i| Address::parse(&format!("webhook:http://{}:{port}/h/{i}", host(i))).unwrap())
        .collect();
    let sids = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = Store::open(&run.dir.path().join("bench.sqlite"))
                .await
                .unwrap();
            let sids = common::subscriber_ids(&store, &addresses).await;
            store.close().await;
            sids
        });
    let (both, daily_first, repeats) = common::check_both_editions(date, &run.ids, &sids);
    println!(
        "webhooks, {DESTINATIONS} readers of both editions: {} deliveries in {:.1} s wall, {:.0}/s (first to last arrival); readers with both editions {both} (target {DESTINATIONS}); the daily first for {daily_first} (target {DESTINATIONS}); repeats {repeats} (target 0)",
        run.stats["others"], run.wall_s, run.rate,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") {
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--receiver") {
        return run_receiver(
            args.get(i + 1).and_then(|p| p.parse().ok()),
            args.get(i + 2).and_then(|p| p.parse().ok()),
        );
    }
    if let Some(i) = args.iter().position(|a| a == "--kill9") {
        return kill9_runs(args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(20));
    }
    let many = |paused| Scenario {
        paused,
        ..Scenario::many()
    };
    if args.iter().any(|a| a == "--both") {
        return both_editions();
    }
    let steady = one_run(many(None));
    println!(
        "webhooks: {DESTINATIONS} destinations through `kdigest run --once` in {:.1} s; {:.0} deliveries/s (first to last arrival, {:.0} ms); duplicates {}; destinations reached {}",
        steady.wall_s,
        steady.rate,
        steady.others_span_ms,
        steady.stats["duplicates"],
        steady.stats["destinations"]
    );
    // `cargo bench --bench webhooks -- --steady-only`: the first figure alone.
    if args.iter().any(|a| a == "--steady-only") {
        return;
    }
    let paused = one_run(many(Some(0)));
    let s = &paused.stats;
    let first_429 = s["first_429_ms"].as_f64().unwrap_or(0.0);
    println!(
        "webhooks, one host paused {PAUSE_SECS} s: the other {} finished in {:.0} ms ({:+.0} ms against the steady run, {:.0}/s); requests to the paused host inside its Retry-After {}; it got its digest {:.1} s after its 429 ({} requests in all); duplicates {}; wall {:.1} s",
        DESTINATIONS - 1,
        paused.others_span_ms,
        paused.others_span_ms - steady.others_span_ms,
        paused.rate,
        s["paused_inside_retry_after"],
        (s["paused_delivered_ms"].as_f64().unwrap_or(0.0) - first_429) / 1e3,
        s["paused_requests"],
        s["duplicates"],
        paused.wall_s
    );
    let limited = one_run(Scenario {
        destinations: 2_000,
        one_host: true,
        paused: None,
        limit: Some(200),
        per_destination: Some(200.0),
        cadence: None,
    });
    println!(
        "webhooks, 2,000 subscribers behind one host allowing 200/s (per_destination_per_sec = 200): {:.1}/s (target >= 190/s) over {:.1} s; 429s provoked {}; duplicates {}; reached {}",
        limited.rate,
        limited.others_span_ms / 1e3,
        limited.stats["rejected"],
        limited.stats["duplicates"],
        limited.stats["destinations"]
    );
    let default = one_run(Scenario {
        destinations: 100,
        one_host: true,
        paused: None,
        limit: None,
        per_destination: None,
        cadence: None,
    });
    println!(
        "webhooks, 100 subscribers behind one host at the default 10/s: first to last arrival {:.2} s (target <= 11 s); duplicates {}; reached {}",
        default.others_span_ms / 1e3,
        default.stats["duplicates"],
        default.stats["destinations"]
    );
    both_editions();
    println!(
        "webhooks: peak RSS of the bench process {:.0} MiB",
        common::peak_rss_mib()
    );
}
