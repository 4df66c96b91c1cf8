//! Several `kdigest run` processes (the real binary) on one Postgres schema: one digest to
//! 2,000 webhook destinations exactly once between three instances; kill -9 of one
//! instance loses nothing and repeats at most what it had in flight, with the same
//! delivery ids; the scheduler fails over within the lease; Telegram's 30 messages a
//! second hold across instances. Skipped without a Postgres server outside CI.

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;
use kdigest::model::Filter;
use kdigest::store::{NewSubscriber, Store};
use kdigest::subscriber::{Address, Status};

use crate::kdigest;
use kdigest_testkit::config::write_file_config;
use kdigest_testkit::pg;
use kdigest_testkit::telegram::{ChatMode, TOKEN, spawn_mock};
use kdigest_testkit::webhook::spawn_receiver;

const DATE: &str = "2026-10-28";

/// The bundled feeds from disk, fast webhooks, short claims (a dead instance's rows come
/// back within seconds) and a short lease.
fn cluster_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let base = "[delivery]\ntimeout_secs = 2.0\nclaim_secs = 8\n[delivery.webhook]\nper_sec = 5000.0\nper_destination_per_sec = 5000.0\nconcurrency = 16\n[daemon]\nlisten = \"127.0.0.1:0\"\nlease_secs = 5\n";
    write_file_config(dir, "unused.sqlite", &format!("{base}{extra}"))
}

/// Starts one instance on the schema; its log goes to a file beside the config.
fn instance(config: &Path, url: &str, args: &[&str], n: usize) -> Child {
    let log = std::fs::File::create(config.with_file_name(format!("instance{n}.log"))).unwrap();
    kdigest(config, args)
        .env(kdigest::config::DATABASE_URL_ENV, url)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Waits for a child to exit (at most `limit`); its log is shown when it failed.
async fn finished(mut child: Child, config: &Path, n: usize, limit: Duration) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            panic!(
                "instance {n} did not finish within {limit:?}\n{}",
                log_tail(config, n)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The log's tail only: a whole log would push the panic message out of a CI record.
    assert!(
        status.success(),
        "instance {n} failed: {status}\n{}",
        log_tail(config, n)
    );
}

/// The last 40 lines of instance `n`'s log.
fn log_tail(config: &Path, n: usize) -> String {
    let log = std::fs::read_to_string(config.with_file_name(format!("instance{n}.log")))
        .unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

async fn add_webhooks(store: &Store, hooks: &str, n: usize) {
    let addresses: Vec<Address> = (0..n)
        .map(|i| Address::parse(&format!("webhook:{hooks}/s{i:04}")).unwrap())
        .collect();
    let filter = Filter::default();
    let new: Vec<NewSubscriber> = addresses
        .iter()
        .map(|address| NewSubscriber {
            address,
            filter: &filter,
            language: "en",
            status: &Status::Active,
            notify_empty: true,
        })
        .collect();
    assert_eq!(store.add_subscribers(&new, Utc::now()).await.unwrap(), n);
}

/// A fresh schema with `n` webhook subscribers of a loopback receiver, and a config.
struct WebhookCluster {
    schema: pg::PgSchema,
    store: Store,
    receiver: Arc<kdigest_testkit::webhook::Receiver>,
    config: std::path::PathBuf,
    /// Holds the config's directory; bind it (`_dir`) for as long as the test runs.
    _dir: tempfile::TempDir,
}

async fn webhook_cluster(n: usize, delay_ms: u64) -> Option<WebhookCluster> {
    let schema = pg::schema().await?;
    let store = Store::open_postgres(&schema.url).await.unwrap();
    let (hooks, receiver) = spawn_receiver().await;
    *receiver.delay_ms.lock().unwrap() = delay_ms;
    add_webhooks(&store, &hooks, n).await;
    let dir = tempfile::tempdir().unwrap();
    let config = cluster_config(dir.path(), "");
    Some(WebhookCluster {
        schema,
        store,
        receiver,
        config,
        _dir: dir,
    })
}

/// Every destination reached more than once got the same delivery id each time.
fn assert_repeats_keep_their_ids(receiver: &kdigest_testkit::webhook::Receiver) {
    let hits = receiver.hits.lock().unwrap().clone();
    let log = receiver.log.lock().unwrap().clone();
    for (path, _) in hits.iter().filter(|(_, n)| **n > 1) {
        let ids: std::collections::BTreeSet<&str> = log
            .iter()
            .filter(|r| &r.path == path)
            .map(|r| r.delivery.as_str())
            .collect();
        assert_eq!(
            ids.len(),
            1,
            "{path}: a repeat carries the same delivery id"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_deliver_one_digest_to_2000_webhooks_exactly_once() {
    let Some(WebhookCluster {
        schema,
        store,
        receiver,
        config,
        _dir,
    }) = webhook_cluster(2_000, 0).await
    else {
        return;
    };
    let args = ["run", "--once", "--date", DATE];
    let children: Vec<Child> = (0..3)
        .map(|n| instance(&config, &schema.url, &args, n))
        .collect();
    for (n, child) in children.into_iter().enumerate() {
        finished(child, &config, n, Duration::from_secs(180)).await;
    }
    let hits = receiver.hits.lock().unwrap().clone();
    assert_eq!(hits.len(), 2_000, "every destination got the digest");
    let repeated: Vec<_> = hits.iter().filter(|(_, n)| **n != 1).collect();
    assert!(repeated.is_empty(), "sent more than once: {repeated:?}");
    let date = DATE.parse().unwrap();
    let counts = store.delivery_counts(date).await.unwrap();
    assert_eq!(
        (counts.sent, counts.pending, counts.sending, counts.failed),
        (2_000, 0, 0, 0)
    );
}

/// Rows of the digest an instance holds in flight: claimed under its tokens (host-pid-n).
async fn claimed_by(db: &sqlx::PgPool, child: &Child) -> i64 {
    let prefix = format!("{}-{}-%", kdigest::instance::host_name(), child.id());
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM deliveries WHERE status = 'sending' AND claim_token LIKE $1",
    )
    .bind(&prefix)
    .fetch_one(db)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_one_instance_loses_nothing_and_repeats_only_its_messages_in_flight() {
    // Slow answers (500 ms, 16 at a time per instance): the victim alone would take
    // nineteen seconds for the 600, so it is still sending when the others have joined in.
    let Some(WebhookCluster {
        schema,
        store,
        receiver,
        config,
        _dir,
    }) = webhook_cluster(600, 500).await
    else {
        return;
    };
    let args = ["run", "--once", "--date", DATE];
    let db = sqlx::PgPool::connect(&schema.url).await.unwrap();
    // The victim starts first and is seen sending before the others start: started
    // together, a victim still building the digest (three debug builds on two cores) can
    // find the outbox drained by the others and die holding nothing, which proves nothing.
    let mut victim = instance(&config, &schema.url, &args, 0);
    let started = Instant::now();
    while claimed_by(&db, &victim).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the first instance never started sending"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let children: Vec<Child> = (1..3)
        .map(|n| instance(&config, &schema.url, &args, n))
        .collect();
    // Every instance has requests in flight when the victim dies (bounded: the victim
    // keeps claiming while rows are pending, so the kill still finds it busy).
    let joined = Instant::now();
    loop {
        let mut busy = 0;
        for child in &children {
            busy += usize::from(claimed_by(&db, child).await > 0);
        }
        if busy == children.len() {
            break;
        }
        assert!(
            joined.elapsed() < Duration::from_secs(60),
            "the other instances never started sending"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    victim.kill().unwrap(); // SIGKILL mid-delivery
    victim.wait().unwrap();
    // What it held at its death: the rows still claimed under its tokens.
    let in_flight = claimed_by(&db, &victim).await;
    db.close().await;
    assert!(in_flight > 0, "the instance died with deliveries in flight");
    for (n, child) in children.into_iter().enumerate() {
        finished(child, &config, n + 1, Duration::from_secs(180)).await;
    }

    let hits = receiver.hits.lock().unwrap().clone();
    assert_eq!(hits.len(), 600, "nothing lost");
    let repeated: usize = hits.values().map(|n| n - 1).sum();
    // At most what the dead instance had in flight.
    assert!(
        repeated as i64 <= in_flight,
        "{repeated} repeated messages, {in_flight} in flight at the kill"
    );
    assert_repeats_keep_their_ids(&receiver);
    let date = DATE.parse().unwrap();
    let counts = store.delivery_counts(date).await.unwrap();
    assert_eq!((counts.sent, counts.pending, counts.sending), (600, 0, 0));
}

/// The instance id (host:pid) a child runs as.
fn id_of(child: &Child) -> String {
    format!("{}:{}", kdigest::instance::host_name(), child.id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_fails_over_within_the_lease_when_its_instance_dies() {
    let Some(schema) = pg::schema().await else {
        return;
    };
    let store = Store::open_postgres(&schema.url).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = cluster_config(dir.path(), "");
    let mut children: Vec<Child> = (0..2)
        .map(|n| instance(&config, &schema.url, &["run"], n))
        .collect();
    let ids: Vec<String> = children.iter().map(id_of).collect();
    let holder = |store: Store| async move {
        store
            .lease_holder(kdigest::daemon::lease::LEASE)
            .await
            .unwrap()
            .filter(|(_, until)| *until >= Utc::now().timestamp())
            .map(|(holder, _)| holder)
    };
    let started = Instant::now();
    let first = loop {
        let live = store
            .live_instances(Utc::now() - chrono::Duration::seconds(15))
            .await
            .unwrap();
        if let Some(h) = holder(store.clone()).await
            && live.len() == 2
        {
            break h;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no scheduler elected"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let victim = ids.iter().position(|id| *id == first).expect("one of ours");
    let status = kdigest(&config, &["status"])
        .env(kdigest::config::DATABASE_URL_ENV, &schema.url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("Instances: 2 live"), "{text}");
    assert!(
        text.contains(&format!("{first} roles scheduler,deliver,web")),
        "{text}"
    );
    assert!(text.contains("holds the scheduler"), "{text}");

    let mut dead = children.remove(victim);
    dead.kill().unwrap();
    dead.wait().unwrap();
    let killed = Instant::now();
    let second = loop {
        if let Some(h) = holder(store.clone()).await
            && h != first
        {
            break h;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(5 + 3),
            "no take-over within the 5 s lease (and one standby period)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(second, ids[1 - victim]);

    // A clean stop leaves the list and the lease at once.
    let survivor = children.remove(0);
    let term = std::process::Command::new("kill")
        .args(["-TERM", &survivor.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    finished(survivor, &config, 1 - victim, Duration::from_secs(30)).await;
    assert_eq!(holder(store.clone()).await, None);
    let live = store
        .live_instances(Utc::now() - chrono::Duration::seconds(15))
        .await
        .unwrap();
    assert!(live.iter().all(|i| i.id != second), "{live:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegrams_30_per_second_hold_across_three_instances() {
    let Some(schema) = pg::schema().await else {
        return;
    };
    let store = Store::open_postgres(&schema.url).await.unwrap();
    let (api, mock) = spawn_mock().await;
    mock.strict_limits.store(true, Ordering::Relaxed);
    // zh-CN and en readers of the whole digest: two or three messages each.
    let chats: Vec<i64> = (1..=60).collect();
    let addresses: Vec<Address> = chats
        .iter()
        .map(|c| Address::parse(&format!("telegram:{c}")).unwrap())
        .collect();
    let filter = Filter::default();
    let new: Vec<NewSubscriber> = addresses
        .iter()
        .zip(&chats)
        .map(|(address, chat)| NewSubscriber {
            address,
            filter: &filter,
            language: if chat % 2 == 0 { "en" } else { "zh-CN" },
            status: &Status::Active,
            notify_empty: true,
        })
        .collect();
    store.add_subscribers(&new, Utc::now()).await.unwrap();
    for chat in &chats {
        mock.modes.lock().unwrap().insert(*chat, ChatMode::Ok);
    }
    let env = "KDIGEST_TEST_TG_TOKEN_CLUSTER";
    let dir = tempfile::tempdir().unwrap();
    let config = cluster_config(
        dir.path(),
        &format!("[telegram]\napi_url = \"{api}\"\ntoken_env = \"{env}\"\n"),
    );
    let args = ["run", "--once", "--date", DATE];
    let children: Vec<Child> = (0..3)
        .map(|n| {
            let log = std::fs::File::create(dir.path().join(format!("instance{n}.log"))).unwrap();
            kdigest(&config, &args)
                .env(kdigest::config::DATABASE_URL_ENV, &schema.url)
                .env(env, TOKEN)
                .stderr(log)
                .spawn()
                .unwrap()
        })
        .collect();
    for (n, child) in children.into_iter().enumerate() {
        finished(child, &config, n, Duration::from_secs(180)).await;
    }
    assert_eq!(mock.too_many.load(Ordering::Relaxed), 0, "no 429 provoked");
    let mut messages = 0;
    for chat in &chats {
        let sent = mock.sent_to(*chat);
        assert!(sent.len() >= 2, "chat {chat} got {} messages", sent.len());
        messages += sent.len();
        for pair in sent.windows(2) {
            let gap = pair[1].at.duration_since(pair[0].at);
            assert!(gap >= Duration::from_millis(990), "chat {chat}: {gap:?}");
        }
    }
    // Three instances, each allowed 30/s on its own, sent at 30/s together.
    let calls = mock.calls_of("SendMessage");
    let span = calls.last().unwrap().at.duration_since(calls[0].at);
    let rate = (calls.len() - 1) as f64 / span.as_secs_f64();
    assert!(
        rate <= 30.0,
        "{rate:.1} messages a second over {messages} messages"
    );
    let date = DATE.parse().unwrap();
    assert_eq!(store.delivery_counts(date).await.unwrap().sent, 60);
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_copy_moves_a_sqlite_store_into_postgres_from_the_command_line() {
    let Some(schema) = pg::schema().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A one-machine store with a digest, subscribers and their deliveries.
    let config = write_file_config(dir.path(), "kdigest.sqlite", "");
    for address in ["telegram:7", "email:reader@example.org"] {
        let out = kdigest(&config, &["subscribers", "add", address])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = kdigest(&config, &["run", "--once", "--date", DATE])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sqlite = format!("sqlite:{}", dir.path().join("kdigest.sqlite").display());
    let copy = |extra: &[&str]| {
        let mut args = vec![
            "store",
            "copy",
            "--from",
            &sqlite,
            "--to",
            "env:KDIGEST_TEST_TARGET",
        ];
        args.extend(extra);
        kdigest(&config, &args)
            .env("KDIGEST_TEST_TARGET", &schema.url)
            .output()
            .unwrap()
    };
    let out = copy(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("subscribers") && text.contains("Counts verified"),
        "{text}"
    );
    let target = Store::open_postgres(&schema.url).await.unwrap();
    assert_eq!(target.subscribers().await.unwrap().len(), 2);
    assert_eq!(
        target.latest_digest_date().await.unwrap(),
        Some(DATE.parse().unwrap())
    );
    // Twice: the target is not empty any more.
    let again = copy(&[]);
    assert_eq!(again.status.code(), Some(1));
    let error = String::from_utf8_lossy(&again.stderr);
    assert!(
        error.contains("not empty") && error.contains("--into-non-empty"),
        "{error}"
    );
    assert!(copy(&["--into-non-empty"]).status.success());
    // A store that is not one: exit 2, naming the forms.
    let bad = kdigest(
        &config,
        &["store", "copy", "--from", &sqlite, "--to", "mysql://x"],
    )
    .output()
    .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("sqlite:PATH"));
}

/// A TCP proxy in front of the Postgres server that can be cut: open connections are
/// dropped and new ones refused until it is restored.
struct CuttableProxy {
    port: u16,
    cut: Arc<std::sync::atomic::AtomicBool>,
    generation: Arc<std::sync::atomic::AtomicUsize>,
}

async fn spawn_proxy(target: &str) -> CuttableProxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let generation = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (target, c, g) = (target.to_string(), cut.clone(), generation.clone());
    tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            if c.load(Ordering::SeqCst) {
                continue; // dropped: refused while cut
            }
            let (target, c, g) = (target.clone(), c.clone(), g.clone());
            let born = g.load(Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else {
                    return;
                };
                let copy = tokio::io::copy_bidirectional(&mut client, &mut server);
                let watch = async {
                    while !c.load(Ordering::SeqCst) && g.load(Ordering::SeqCst) == born {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                tokio::select! {
                    _ = copy => {}
                    _ = watch => {} // the outage: both sockets close
                }
            });
        }
    });
    CuttableProxy {
        port,
        cut,
        generation,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_pauses_while_postgres_is_unreachable_and_resumes_losing_nothing() {
    let Some(WebhookCluster {
        schema,
        store,
        receiver,
        config,
        _dir,
    }) = webhook_cluster(300, 20).await
    else {
        return;
    };
    let server =
        std::env::var("KDIGEST_TEST_POSTGRES").unwrap_or_else(|_| pg::DEFAULT_SERVER.to_string());
    let authority = server
        .split_once('@')
        .map(|(_, rest)| rest.split('/').next().unwrap_or("").to_string())
        .unwrap();
    let proxy = spawn_proxy(&authority).await;
    let through_proxy = schema
        .url
        .replace(&authority, &format!("127.0.0.1:{}", proxy.port));
    let child = instance(
        &config,
        &through_proxy,
        &["run", "--once", "--date", DATE],
        0,
    );
    let started = Instant::now();
    while receiver.log.lock().unwrap().len() < 60 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no deliveries"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Four seconds without the database, in the middle of the fan-out. The count is taken
    // once the cut has taken hold (the proxy polls for it every 20 ms, and requests
    // already on their way land within their 20 ms answer), so what follows is what went
    // out while the database was gone.
    proxy.cut.store(true, Ordering::SeqCst);
    proxy.generation.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_cut = receiver.log.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during = receiver.log.lock().unwrap().len();
    // Delivery paused: at most one batch (webhook concurrency 16) went out.
    assert!(
        during - at_cut <= 16,
        "{at_cut} before the outage, {during} after it"
    );
    assert!(during < 300, "the outage came before the end");
    proxy.cut.store(false, Ordering::SeqCst);
    finished(child, &config, 0, Duration::from_secs(180)).await;
    let hits = receiver.hits.lock().unwrap().clone();
    assert_eq!(
        hits.len(),
        300,
        "nothing lost ({during} sent when the database came back)"
    );
    let date = DATE.parse().unwrap();
    let counts = store.delivery_counts(date).await.unwrap();
    assert_eq!((counts.sent, counts.pending, counts.sending), (300, 0, 0));
    // Repeats (sends whose settle was lost with the connection) keep their delivery id.
    assert_repeats_keep_their_ids(&receiver);
}
