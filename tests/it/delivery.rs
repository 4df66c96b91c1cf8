//! Subscribers, planning and the delivery engine against a loopback webhook receiver; the
//! binary's `run --once` under kill -9 and under a second concurrent process.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::Utc;
use kdigest::deliver::engine::Engine;
use kdigest::metrics::Metrics;
use kdigest::model::{Filter, Score};
use kdigest::pipeline;
use kdigest::store::Store;
use kdigest::subscriber::{Address, Status};

use crate::kdigest;
use kdigest_testkit::TestApp;
use kdigest_testkit::config::write_file_config;
use kdigest_testkit::net::Process;
use kdigest_testkit::webhook::spawn_receiver;

async fn add(store: &Store, address: &str, layers: &[&str], min_score: f64) -> i64 {
    let filter = Filter {
        layers: layers.iter().map(|s| s.to_string()).collect(),
        min_score: Score::from_f64(min_score),
        boost: None,
        follows: Vec::new(),
    };
    store
        .add_subscriber(
            &Address::parse(address).unwrap(),
            &filter,
            "en",
            &Status::Active,
            false,
            Utc::now(),
        )
        .await
        .unwrap()
        .unwrap()
}

const DELIVERY_TOML: &str = "[delivery]\nmax_attempts = 3\nbackoff_base_secs = 0.2\nbackoff_max_secs = 1.0\ntimeout_secs = 1.0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_deliveries_are_signed_filtered_retried_and_disabled_per_subscriber() {
    let (hooks, receiver) = spawn_receiver().await;
    let secret_env = "KDIGEST_TEST_WEBHOOK_SECRET_ENGINE";
    unsafe { std::env::set_var(secret_env, "s3cret") };
    let extra = format!("{DELIVERY_TOML}webhook_secret_env = \"{secret_env}\"\n");
    let app = TestApp::builder().toml(&extra).build().await;
    let config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;

    let all = add(store, &format!("webhook:{hooks}/all"), &[], 0.0).await;
    let runtime = add(
        store,
        &format!("webhook:{hooks}/runtime"),
        &["runtime"],
        70.0,
    )
    .await;
    let nothing = add(store, &format!("webhook:{hooks}/nothing"), &[], 100.0).await;
    let gone = add(store, &format!("webhook:{hooks}/gone"), &[], 0.0).await;
    let limited = add(store, &format!("webhook:{hooks}/limited"), &[], 0.0).await;
    let flaky = add(store, &format!("webhook:{hooks}/flaky"), &[], 0.0).await;
    let slow = add(store, &format!("webhook:{hooks}/slow"), &[], 0.0).await;
    // A second subscriber sharing the "all" filter: rendered once, sent twice.
    let all2 = add(store, &format!("webhook:{hooks}/all2"), &[], 0.0).await;
    add(store, "telegram:12345", &[], 0.0).await; // no Telegram sender yet: skipped, not lost

    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    let planned = engine.plan(&digest).await.unwrap();
    assert_eq!(
        planned, 7,
        "every webhook subscriber except the one whose filter matches nothing"
    );
    assert_eq!(
        engine.plan(&digest).await.unwrap(),
        0,
        "planning twice adds nothing"
    );
    kdigest_testkit::app::run_until_idle(&engine, Duration::from_secs(10)).await;

    let log = receiver.log.lock().unwrap().clone();
    let got = |p: &str| log.iter().filter(|r| r.path == p).count();
    assert_eq!(got("all"), 1);
    assert_eq!(got("all2"), 1);
    assert_eq!(got("runtime"), 1);
    assert_eq!(got("nothing"), 0);
    assert_eq!(got("gone"), 1, "a 410 is never retried");
    assert_eq!(got("limited"), 2, "429 then success after Retry-After");
    assert_eq!(got("flaky"), 2, "500 then success");
    assert_eq!(got("slow"), 3, "timeouts retried up to max_attempts");
    assert_eq!(
        engine.distinct_renders(),
        2,
        "two distinct filters were sent, one render each"
    );

    // Filtered JSON, signed with HMAC-SHA256 over "timestamp.body".
    let runtime_body = log.iter().find(|r| r.path == "runtime").unwrap();
    let v: serde_json::Value = serde_json::from_str(&runtime_body.body).unwrap();
    let events: Vec<&serde_json::Value> = ["key_changes", "papers", "other_updates"]
        .iter()
        .flat_map(|k| v[k].as_array().unwrap().iter())
        .collect();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| {
        e["layers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "runtime")
    }));
    assert!(events.iter().all(|e| e["score"].as_f64().unwrap() >= 70.0));
    let expected = kdigest::channels::webhook::signature(
        &kdigest::config::Secret::new("s3cret"),
        runtime_body.timestamp.parse().unwrap(),
        &runtime_body.body,
    );
    assert_eq!(runtime_body.signature.as_deref(), Some(expected.as_str()));
    assert_eq!(
        runtime_body.delivery,
        kdigest::deliver::delivery_id(digest.date, kdigest::subscriber::Edition::Daily, runtime)
    );

    // All these webhooks share one host, which is one rate-limit destination: a 429 from it
    // pauses that host only. (Per-chat independence is tested with Telegram chats.)

    let status = |id| {
        let store = store.clone();
        async move { store.subscriber(id).await.unwrap().unwrap().status }
    };
    match status(gone).await {
        Status::Disabled(reason) => assert!(reason.contains("410"), "{reason}"),
        other => panic!("gone should be disabled, is {other:?}"),
    }
    for id in [all, all2, runtime, nothing, limited, flaky, slow] {
        assert_eq!(status(id).await, Status::Active, "subscriber {id}");
    }
    let counts = store.delivery_counts(digest.date).await.unwrap();
    assert_eq!(
        (counts.sent, counts.failed, counts.pending, counts.sending),
        (5, 2, 0, 0)
    );
}

/// A config with the bundled feeds read from disk and one sequential webhook worker.
fn binary_config(dir: &Path) -> std::path::PathBuf {
    let delivery = "[delivery]\ntimeout_secs = 10.0\n[delivery.webhook]\nper_sec = 500.0\nper_destination_per_sec = 500.0\nconcurrency = 1\n";
    write_file_config(dir, "kdigest.sqlite", delivery)
}

fn add_via_cli(config: &Path, hooks: &str, n: usize) {
    for i in 0..n {
        let out = kdigest(
            config,
            &["subscribers", "add", &format!("webhook:{hooks}/s{i:02}")],
        )
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_fan_out_never_sends_a_second_copy() {
    let (hooks, receiver) = spawn_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let config = binary_config(dir.path());
    add_via_cli(&config, &hooks, 30);
    let (tx, rx) = tokio::sync::oneshot::channel();
    *receiver.trip_after.lock().unwrap() = Some(12);
    *receiver.tripped.lock().unwrap() = Some(tx);

    let mut first = kdigest(&config, &["run", "--once", "--date", "2026-10-28"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), rx)
        .await
        .expect("12 deliveries within 60 s")
        .unwrap();
    first.kill().unwrap(); // SIGKILL while the 12th request is in flight
    first.wait().unwrap();
    assert_eq!(receiver.log.lock().unwrap().len(), 12);

    let second = kdigest(&config, &["run", "--once", "--date", "2026-10-28"])
        .output()
        .unwrap();
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    let hits = receiver.hits.lock().unwrap().clone();
    assert_eq!(hits.len(), 30, "every subscriber got the digest");
    let duplicates: usize = hits.values().map(|n| n - 1).sum();
    assert!(
        duplicates <= 1,
        "at most the one message in flight is repeated: {hits:?}"
    );
    // A repeated message carries the same delivery id, so a receiver can drop it.
    let log = receiver.log.lock().unwrap().clone();
    for (path, n) in hits.iter().filter(|(_, n)| **n > 1) {
        let ids: Vec<&str> = log
            .iter()
            .filter(|r| &r.path == path)
            .map(|r| r.delivery.as_str())
            .collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{path} x{n}: {ids:?}");
    }
    let status = kdigest(&config, &["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("Deliveries for 2026-10-28: 0 pending, 0 sending, 30 sent, 0 failed"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_once_exits_with_a_clear_message_and_nothing_is_doubled() {
    // One at a time, a second each: the first run holds the lease for eight seconds after
    // its first delivery, time enough for a second process to start on a busy machine.
    let (hooks, receiver) = spawn_receiver().await;
    *receiver.delay_ms.lock().unwrap() = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let config = binary_config(dir.path());
    add_via_cli(&config, &hooks, 8);
    let first = kdigest(&config, &["run", "--once", "--date", "2026-10-28"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while receiver.log.lock().unwrap().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "first run delivered nothing"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = kdigest(&config, &["run", "--once", "--date", "2026-10-28"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("Another kdigest run") && err.contains("only one process"),
        "{err}"
    );
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success());
    let hits = receiver.hits.lock().unwrap().clone();
    assert_eq!(hits.len(), 8);
    assert!(hits.values().all(|n| *n == 1), "{hits:?}");
}

#[test]
fn subscribers_cli_validates_and_manages_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let config = binary_config(dir.path());
    let run = |args: &[&str]| kdigest(&config, args).output().unwrap();
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };

    let bad_layer = run(&[
        "subscribers",
        "add",
        "email:alice@example.org",
        "--layers",
        "runtime,gpu",
    ]);
    assert_eq!(bad_layer.status.code(), Some(2));
    assert!(text(&bad_layer).contains("\"gpu\" is not a layer; valid layers: frontend, optimization, kernel_codegen, hardware_backend, runtime, benchmark"));
    let bad_score = run(&[
        "subscribers",
        "add",
        "email:alice@example.org",
        "--min-score",
        "120",
    ]);
    assert_eq!(bad_score.status.code(), Some(2));
    assert!(text(&bad_score).contains("--min-score 120: use a number from 0 to 100"));
    let bad_address = run(&["subscribers", "add", "alice@example.org"]);
    assert_eq!(bad_address.status.code(), Some(2));
    assert!(text(&bad_address).contains("email:<address>"));

    let ok = run(&[
        "subscribers",
        "add",
        "email:alice@example.org",
        "--layers",
        "runtime,benchmark",
        "--min-score",
        "70",
    ]);
    assert!(ok.status.success(), "{}", text(&ok));
    let dup = run(&["subscribers", "add", "email:alice@example.org"]);
    assert_eq!(dup.status.code(), Some(2));
    // The same mailbox typed with capitals is the same subscriber.
    let dup_case = run(&["subscribers", "add", "email:Alice@Example.ORG"]);
    assert_eq!(dup_case.status.code(), Some(2), "{}", text(&dup_case));
    assert!(
        text(&dup_case).contains("already subscribed"),
        "{}",
        text(&dup_case)
    );
    let hook = run(&[
        "subscribers",
        "add",
        "webhook:https://hooks.example.org/services/T0/B0/very-secret",
        "--lang",
        "en",
    ]);
    assert!(hook.status.success());
    // Ids are never reused, so read the one we were given.
    let hook_id = text(&hook)
        .split('#')
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let list = text(&run(&["subscribers", "list"]));
    assert!(
        list.contains(
            "#1 email:alice@example.org [benchmark,runtime] min score 70.0 lang zh-CN — active"
        ),
        "{list}"
    );
    assert!(
        list.contains(&format!(
            "#{hook_id} webhook:https://hooks.example.org/… [all layers]"
        )),
        "{list}"
    );
    assert!(
        !list.contains("very-secret"),
        "webhook credentials never printed"
    );

    assert!(
        run(&[
            "subscribers",
            "set",
            "1",
            "--layers",
            "all",
            "--min-score",
            "50"
        ])
        .status
        .success()
    );
    assert!(
        run(&["subscribers", "pause", "email:alice@example.org"])
            .status
            .success()
    );
    let list = text(&run(&["subscribers", "list"]));
    assert!(
        list.contains("#1 email:alice@example.org [all layers] min score 50.0 lang zh-CN — paused"),
        "{list}"
    );
    assert!(run(&["subscribers", "resume", "1"]).status.success());
    assert!(run(&["subscribers", "remove", &hook_id]).status.success());
    let missing = run(&["subscribers", "remove", &hook_id]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(text(&run(&["subscribers", "list"])).lines().count(), 1);
}

#[test]
fn bad_schedule_exits_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[schedule]\ncron = \"0 8 * *\"\ntimezone = \"Mars/Base\"\n",
    )
    .unwrap();
    let out = kdigest(&path, &["check-config"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("schedule.cron: \"0 8 * *\" has 4 fields"),
        "{err}"
    );
    assert!(
        err.contains("schedule.timezone: \"Mars/Base\" is not an IANA time zone"),
        "{err}"
    );
}

/// Starts `kdigest run` on a fresh config with `extra` TOML, listening on a free port, and
/// waits until /healthz answers. Returns the child (stderr piped; killed when dropped) and
/// the port.
async fn start_daemon(
    dir: &Path,
    extra: &str,
    env: &[(&str, &str)],
) -> (Process, std::path::PathBuf, u16) {
    start_daemon_with(dir, extra, env, |_| {}).await
}

/// [`start_daemon`], with `adjust` applied to the command before it is spawned.
async fn start_daemon_with(
    dir: &Path,
    extra: &str,
    env: &[(&str, &str)],
    adjust: impl FnOnce(&mut Command),
) -> (Process, std::path::PathBuf, u16) {
    let config = binary_config(dir);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("[daemon]\nlisten = \"127.0.0.1:{port}\"\n{extra}"));
    std::fs::write(&config, text).unwrap();
    let mut command = kdigest(&config, &["run"]);
    command.env("RUST_LOG", "info").stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    adjust(&mut command);
    let child = Process::new(command.spawn().unwrap());
    let client = reqwest::Client::new();
    let started = Instant::now();
    while client
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "daemon did not come up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, config, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_comes_up_while_the_platforms_are_unreachable_and_healthz_names_them() {
    // The platforms' APIs at a port where nothing listens, as with no name resolution: the
    // site serves, and each link is retried in the background, in every command mode.
    let webhook = "webhook_url = \"https://digest.example.org/\"\n";
    let telegram = (
        "telegram bot down since",
        "not set up (retrying with backoff)",
    );
    comes_up_with_platforms_unreachable(webhook, &[telegram]).await;
    comes_up_with_platforms_unreachable(
        "",
        &[
            telegram,
            (
                "discord gateway down since",
                "not connected (retrying with backoff)",
            ),
            (
                "discord commands down since",
                "slash commands not registered (retrying with backoff)",
            ),
        ],
    )
    .await;
}

/// Starts the daemon with Telegram (in `telegram_mode`) and, without a webhook, the
/// Discord gateway pointed at a dead port; waits for `/healthz` to name every link in
/// `down`, each "retrying with backoff", with no token in sight.
async fn comes_up_with_platforms_unreachable(telegram_mode: &str, down: &[(&str, &str)]) {
    let dead = kdigest_testkit::net::dead_port();
    let dir = tempfile::tempdir().unwrap();
    let discord = if telegram_mode.is_empty() {
        format!(
            "[discord]\napi_url = \"http://127.0.0.1:{dead}\"\ntoken_env = \"KDIGEST_TEST_DEAD_DC_TOKEN\"\napplication_id = 42\n"
        )
    } else {
        String::new()
    };
    let extra = format!(
        "[telegram]\napi_url = \"http://127.0.0.1:{dead}\"\ntoken_env = \"KDIGEST_TEST_DEAD_TG_TOKEN\"\n{telegram_mode}{discord}"
    );
    let (mut child, _config, port) = start_daemon(
        dir.path(),
        &extra,
        &[
            (
                "KDIGEST_TEST_DEAD_TG_TOKEN",
                "123456:test-token-for-a-dead-api",
            ),
            ("KDIGEST_TEST_DEAD_DC_TOKEN", "discord-token-for-a-dead-api"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let text = loop {
        let r = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        let named = |(link, reason): &(&str, &str)| {
            text.lines()
                .any(|line| line.starts_with(link) && line.contains(reason))
        };
        if status == StatusCode::SERVICE_UNAVAILABLE && down.iter().all(named) {
            break text;
        }
        if started.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("{telegram_mode}: {status} {text}\n{stderr}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        text.matches("(retrying with backoff)").count(),
        down.len(),
        "{text}"
    );
    assert!(!text.contains("for-a-dead-api"), "{text}");
    // The blog is served meanwhile.
    let home = client
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), StatusCode::OK);
    // And the links retrying in the background do not hold up a graceful stop.
    let status = stop_with_sigterm(&mut child).await;
    assert!(status.success(), "{telegram_mode}: {status}");
}

/// Sends SIGTERM and waits up to 30 s for the daemon to exit (it is killed, and the test
/// fails, past that).
async fn stop_with_sigterm(child: &mut std::process::Child) -> std::process::ExitStatus {
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let signalled = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if signalled.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("still running 30 s after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_whose_database_file_is_deleted_stops_and_names_storage_path() {
    // Deleted under a running daemon, the SQLite file takes the scheduler lease with it: a
    // second daemon on the same path would schedule too. The first one stops instead.
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _config, port) = start_daemon(dir.path(), "lease_secs = 5\n", &[]).await;
    std::fs::remove_file(dir.path().join("kdigest.sqlite")).unwrap();
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut unhealthy = Vec::new();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if let Ok(r) = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
            && r.status() == StatusCode::SERVICE_UNAVAILABLE
        {
            unhealthy.push(r.text().await.unwrap());
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the daemon kept running on a deleted database"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("deleted or replaced") && stderr.contains("storage.path"),
        "{stderr}"
    );
    // Until the lease check notices (up to a third of the lease), other parts may fail
    // first and /healthz says so truthfully (a worker's query on the vanished file); the
    // answer that reports the deletion names the setting.
    for text in unhealthy
        .iter()
        .filter(|t| t.contains("deleted or replaced"))
    {
        assert!(text.contains("storage.path"), "{unhealthy:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_serves_health_and_metrics_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (child, _config, port) = start_daemon(dir.path(), "log_format = \"json\"\n", &[]).await;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let health = client
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.text().await.unwrap(), "ok\n");
    // Catch-up generated the missed run's digest.
    let metrics = loop {
        let m = client
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if m.contains("kdigest_digests_generated_total 1")
            || started.elapsed() > Duration::from_secs(30)
        {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        metrics.contains("kdigest_digests_generated_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kdigest_fetch_failures_total{source=\"Example Compiler Weekly\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kdigest_seconds_since_last_success"),
        "{metrics}"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.into_inner().wait_with_output().unwrap();
    assert!(out.status.success(), "graceful exit on SIGTERM");
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(
        logs.lines()
            .any(|l| l.starts_with('{') && l.contains("Shutdown signal received")),
        "JSON logs: {logs}"
    );
}

#[test]
fn the_daemon_logs_the_port_it_bound_when_told_port_0() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let config = binary_config(dir.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[daemon]\nlisten = \"127.0.0.1:0\"\nlog_format = \"json\"\n");
    std::fs::write(&config, text).unwrap();
    let mut child = kdigest(&config, &["run"])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let address = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("Serving /healthz"))
        .and_then(|l| {
            let v: serde_json::Value = serde_json::from_str(&l).ok()?;
            v["fields"]["address"].as_str().map(str::to_string)
        });
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let address = address.expect("a JSON log line naming the address");
    let port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
    assert!(port > 0, "logged {address}, not the bound port");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_bounded_even_when_the_discord_gateway_cannot_connect() {
    let dir = tempfile::tempdir().unwrap();
    // A bot token and no interactions key: the daemon connects to Discord's gateway, which
    // it cannot reach here (no network), and keeps retrying the shard.
    let (mut child, config, _port) = start_daemon(
        dir.path(),
        "shutdown_grace_secs = 2\n[discord]\ntoken_env = \"KDIGEST_TEST_DISCORD_TOKEN_SHUTDOWN\"\n",
        &[("KDIGEST_TEST_DISCORD_TOKEN_SHUTDOWN", "MTIz.bot-token.x")],
    )
    .await;
    // Let the gateway start trying.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = stop_with_sigterm(&mut child).await;
    assert!(status.success(), "exit 0 after the grace period: {status}");
    let out = kdigest(&config, &["status"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Daemon: not running") && !stdout.contains("died"),
        "the lease was released: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_connections_are_cut_off_and_healthz_stays_reachable() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (child, _config, port) = start_daemon(
        dir.path(),
        "header_timeout_secs = 1\nconnection_lifetime_secs = 30\nmax_connections = 8\n",
        &[],
    )
    .await;
    // Eight clients hold every connection slot: four say nothing, four send half a request.
    let mut idle: Vec<std::net::TcpStream> = (0..8)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            if i % 2 == 1 {
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                    .unwrap();
            }
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        })
        .collect();
    let started = Instant::now();
    for s in &mut idle {
        let mut buf = [0u8; 256];
        // The server closes them (EOF, or a reset) or answers 408 and closes: never holds
        // them for ever.
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue,
                // Closed with unread bytes in the server's buffer: a reset is closed too.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("connection still open after {:?}: {e}", started.elapsed()),
            }
        }
    }
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.into_inner().wait_with_output().unwrap();
    assert!(out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_past_the_cap_or_the_file_limit_give_way_and_healthz_answers() {
    // Past daemon.max_connections: 8 slots, 20 clients that connect and say nothing.
    healthz_answers_behind_idle_clients("max_connections = 8\n", None, 20).await;
    // Past the open-file limit: 256 descriptors (soft and hard), the default cap of 512
    // and 400 idle clients; the cap is lowered to keep a reserve.
    healthz_answers_behind_idle_clients("", Some(256), 400).await;
}

/// Starts the daemon (header timeout long enough not to cut anyone), opens `idle` silent
/// connections, then asks `/healthz`: it must answer, and the oldest idle connection
/// must have been closed to make room.
async fn healthz_answers_behind_idle_clients(extra: &str, fd_limit: Option<u64>, idle: usize) {
    use std::io::Read;
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().unwrap();
    let extra = format!("header_timeout_secs = 60\nconnection_lifetime_secs = 300\n{extra}");
    let (mut child, _config, port) = start_daemon_with(dir.path(), &extra, &[], |command| {
        if let Some(limit) = fd_limit {
            // SAFETY: setrlimit is async-signal-safe; nothing else runs before exec.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
    })
    .await;
    let mut clients: Vec<std::net::TcpStream> = (0..idle)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let health = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!("{extra} {fd_limit:?}: /healthz unreachable behind {idle} idle clients: {e}")
        });
    assert_eq!(health.status(), 200, "{extra} {fd_limit:?}");
    let oldest = &mut clients[0];
    oldest
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 16];
    match oldest.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the oldest idle client is still connected: {other:?}"),
    }
    drop(clients);
    child.kill().unwrap();
    let _ = child.wait();
}

/// A reader with their own hour: the delivery is planned due at their next local time
/// (DST-correct), the outbox holds it until then while the others go out, and it is sent
/// when due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_at_0930_berlin_gets_the_digest_then_and_not_before() {
    let (hooks, receiver) = spawn_receiver().await;
    let app = TestApp::builder().toml(DELIVERY_TOML).build().await;
    let config = &app.config;
    let store = &app.store;
    let digest = app.digest().await;
    add(store, &format!("webhook:{hooks}/now"), &[], 0.0).await;
    let berlin = add(store, &format!("webhook:{hooks}/berlin"), &[], 0.0).await;
    let at = kdigest::subscriber::LocalTime::parse("09:30", "Europe/Berlin").unwrap();
    let mut s = store.subscriber(berlin).await.unwrap().unwrap();
    s.deliver_at = Some(at);
    store.update_subscriber(&s, Utc::now()).await.unwrap();
    assert_eq!(
        store.subscriber(berlin).await.unwrap().unwrap().deliver_at,
        Some(at),
        "stored and read back"
    );

    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    let before = Utc::now();
    engine.plan(&digest).await.unwrap();
    let after = Utc::now();
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", config.storage.path.display()))
        .await
        .unwrap();
    let due_ms: i64 =
        sqlx::query_scalar("SELECT next_attempt_at FROM deliveries WHERE subscriber_id = $1")
            .bind(berlin)
            .fetch_one(&db)
            .await
            .unwrap();
    let due = chrono::DateTime::from_timestamp_millis(due_ms).unwrap();
    assert!(
        due == at.due_after(before) || due == at.due_after(after),
        "due at the next 09:30 in Berlin: {due}"
    );
    let local = due.with_timezone(&chrono_tz::Europe::Berlin);
    assert_eq!(local.format("%H:%M").to_string(), "09:30");

    kdigest_testkit::app::run_until_idle(&engine, Duration::from_secs(1)).await;
    let got = |p: &str| {
        receiver
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == p)
            .count()
    };
    assert_eq!(got("now"), 1, "the reader without an hour has it at once");
    assert_eq!(got("berlin"), 0, "not before 09:30 Berlin");

    // The clock reaches 09:30 in Berlin.
    sqlx::query("UPDATE deliveries SET next_attempt_at = $1 WHERE subscriber_id = $2")
        .bind(Utc::now().timestamp_millis() - 1)
        .bind(berlin)
        .execute(&db)
        .await
        .unwrap();
    kdigest_testkit::app::run_until_idle(&engine, Duration::from_secs(1)).await;
    assert_eq!(got("berlin"), 1, "delivered when due");
    assert_eq!(got("now"), 1);
}

/// Cadences: on a reader's roll-up day the weekly roll-up of the seven days ending that day
/// is planned as its own delivery (own id, same story once), a "both" reader gets the daily
/// and the roll-up, a weekly reader on another day gets nothing, a daily reader only the
/// daily.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weekly_and_both_readers_get_the_roll_up_on_their_day() {
    use chrono::Datelike;
    use kdigest::subscriber::Cadence;
    let (hooks, receiver) = spawn_receiver().await;
    let app = TestApp::builder().toml(DELIVERY_TOML).build().await;
    let config = &app.config;
    let store = &app.store;
    let date = kdigest::demo::demo_date();
    let digest = pipeline::generate(config, store, date, &|_| {})
        .await
        .unwrap();
    // The day before had the same lead story (and one of today's others): the roll-up
    // shows each story once.
    let mut yesterday = digest.clone();
    yesterday.date = date.pred_opt().unwrap();
    yesterday.other_updates.clear();
    store.save_digest(&yesterday, Utc::now()).await.unwrap();

    let day = date.weekday();
    let mut ids = Vec::new();
    for (path, cadence) in [
        ("daily", Cadence::Daily),
        ("weekly", Cadence::Weekly(day)),
        ("both", Cadence::Both(day)),
        ("other", Cadence::Weekly(day.succ())),
    ] {
        let id = add(store, &format!("webhook:{hooks}/{path}"), &[], 0.0).await;
        let mut s = store.subscriber(id).await.unwrap().unwrap();
        s.cadence = cadence;
        store.update_subscriber(&s, Utc::now()).await.unwrap();
        assert_eq!(
            store.subscriber(id).await.unwrap().unwrap().cadence,
            cadence
        );
        ids.push(id);
    }

    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    assert_eq!(
        engine.plan(&digest).await.unwrap(),
        4,
        "daily, weekly, both x2"
    );
    assert_eq!(
        engine.plan(&digest).await.unwrap(),
        0,
        "planning again adds nothing"
    );
    kdigest_testkit::app::run_until_idle(&engine, Duration::from_secs(1)).await;
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", config.storage.path.display()))
        .await
        .unwrap();
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT subscriber_id, edition, status FROM deliveries ORDER BY subscriber_id, edition",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    let sent = |id: i64, edition: &str| (id, edition.to_string(), "sent".to_string());
    assert_eq!(
        rows,
        [
            sent(ids[0], "daily"),
            sent(ids[1], "weekly"),
            sent(ids[2], "daily"),
            sent(ids[2], "weekly")
        ]
    );

    let log = receiver.log.lock().unwrap().clone();
    let bodies = |p: &str| -> Vec<serde_json::Value> {
        log.iter()
            .filter(|r| r.path == p)
            .map(|r| serde_json::from_str(&r.body).unwrap())
            .collect()
    };
    assert_eq!(bodies("other").len(), 0, "not their roll-up day");
    let daily = bodies("daily");
    assert_eq!(daily.len(), 1);
    assert!(daily[0].get("week").is_none(), "a daily has no week");
    let weekly = bodies("weekly");
    assert_eq!(weekly.len(), 1, "only the roll-up");
    let first = date - chrono::Days::new(6);
    let week = weekly[0]["week"].as_str().unwrap();
    if day == chrono::Weekday::Sun {
        assert_eq!(week, kdigest::weekly::Week::of(date).to_string());
    } else {
        assert_eq!(week, format!("{first}/{date}"));
    }
    assert_eq!(weekly[0]["date"], date.to_string());
    assert!(
        weekly[0]["title"].as_str().unwrap().len() > 10,
        "the roll-up has its own headline"
    );
    // The same story on both days is one event of the roll-up.
    let event_ids: Vec<&str> = ["key_changes", "papers", "other_updates"]
        .iter()
        .flat_map(|s| weekly[0][s].as_array().unwrap())
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let distinct: std::collections::BTreeSet<&str> = event_ids.iter().copied().collect();
    assert_eq!(event_ids.len(), distinct.len(), "{event_ids:?}");
    assert_eq!(distinct.len(), digest.events().count());
    let both = bodies("both");
    assert_eq!(both.len(), 2, "the daily and the roll-up");
    assert!(
        both[0].get("week").is_none() && both[1].get("week").is_some(),
        "the daily first, then the roll-up"
    );
    let both_ids: std::collections::BTreeSet<&str> = log
        .iter()
        .filter(|r| r.path == "both")
        .map(|r| r.delivery.as_str())
        .collect();
    assert_eq!(both_ids.len(), 2, "each edition has its own delivery id");

    // In a chat, the roll-up speaks as one: the week's words, not the day's.
    let rollup = kdigest::weekly::roll_up(
        kdigest::weekly::Week::ending(date),
        &[yesterday, digest.clone()],
        config.digest.key_changes,
        &kdigest::locale::Locale::builtin("en"),
    )
    .unwrap();
    let cache = kdigest::deliver::RenderCache::new(None);
    let filter = store.subscriber(ids[1]).await.unwrap().unwrap().filter;
    let telegram = cache
        .messages(
            &rollup,
            &filter,
            "en",
            kdigest::subscriber::Channel::Telegram,
        )
        .unwrap()
        .join("");
    assert!(telegram.contains("This week"), "{telegram}");
    assert!(!telegram.contains("Overview"), "{telegram}");
    let email = cache
        .messages(&rollup, &filter, "en", kdigest::subscriber::Channel::Email)
        .unwrap()
        .join("");
    assert!(
        email.contains("Weekly roll-up"),
        "the subject says so: {email}"
    );
}
