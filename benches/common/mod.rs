//! Shared by the benchmark binaries.

/// Peak resident set size of this process so far (VmHWM), in MiB.
#[allow(dead_code)]
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The demo configuration reading the bundled feeds from disk, plus `extra` TOML, with its
/// database in `dir`.
#[allow(dead_code)] // not every bench binary uses every helper
pub fn config(dir: &std::path::Path, extra: &str) -> kdigest::config::Config {
    let feeds = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/feeds");
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", &format!("file://{}", feeds.display()));
    let mut c = kdigest::config::Config::parse(&format!("{text}\n{extra}")).unwrap();
    c.storage.path = dir.join("bench.sqlite");
    // The benches' receivers listen on 127.0.0.1.
    c.fetch.allow_private_networks = true;
    c.delivery.allow_private_networks = true;
    c
}

/// TOML for configurations the benches hand to the binary: their receivers listen on
/// loopback addresses, which kdigest refuses by default. Followed by `[delivery.*]` tables.
#[allow(dead_code)]
pub const LOOPBACK_RECEIVERS: &str = "[delivery]\nallow_private_networks = true\n";

/// The configuration file for `kdigest run --once` through the release binary: the demo's
/// sources read from examples/feeds, the store at `db`, loopback receivers allowed, then
/// `delivery` (`[delivery.*]` tables).
#[allow(dead_code)]
pub fn binary_config(db: &std::path::Path, delivery: &str) -> String {
    let feeds = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/feeds");
    format!(
        "{}\n[storage]\npath = \"{}\"\n{LOOPBACK_RECEIVERS}{delivery}",
        kdigest::demo::DEMO_CONFIG.replace("{base}", &format!("file://{}", feeds.display())),
        db.display(),
    )
}

/// `kdigest --config <config> run --once` of the fixture day (2026-10-28) through the
/// release binary, errors only on stderr; not yet waited for.
#[allow(dead_code)]
pub fn spawn_run_once(config: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_kdigest"))
        .arg("--config")
        .arg(config)
        .args(["run", "--once", "--date", "2026-10-28"])
        .env("KDIGEST_WEBHOOK_SECRET", "bench-secret")
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap()
}

/// [`spawn_run_once`] to its end; panics unless it succeeded. Returns its wall time (s).
#[allow(dead_code)]
pub fn run_once(config: &std::path::Path) -> f64 {
    let t = std::time::Instant::now();
    let status = spawn_run_once(config).wait().unwrap();
    assert!(status.success(), "kdigest run --once failed: {status}");
    t.elapsed().as_secs_f64()
}

/// The store and the fixture day's digest (2026-10-28) for `config`.
#[allow(dead_code)]
pub async fn fixture(
    config: &kdigest::config::Config,
) -> (kdigest::store::Store, kdigest::model::Digest) {
    let store = kdigest::store::Store::open(&config.storage.path)
        .await
        .unwrap();
    let d = kdigest::pipeline::generate(config, &store, kdigest::demo::demo_date(), &|_| {})
        .await
        .unwrap();
    (store, d)
}

/// Serves `app` on a free loopback port; returns `http://127.0.0.1:<port>`.
#[allow(dead_code)]
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// What a mock API accepted: messages per destination and every arrival, for the
/// sustained rate (messages after the first / time from first to last) and the rate while
/// the channel's budget was the only limit.
#[allow(dead_code)]
#[derive(Default)]
pub struct Tally<K> {
    per_key: std::sync::Mutex<std::collections::HashMap<K, usize>>,
    span: std::sync::Mutex<Option<(std::time::Instant, std::time::Instant)>>,
    arrivals: std::sync::Mutex<Vec<std::time::Instant>>,
    first_per_key: std::sync::Mutex<std::collections::HashMap<K, std::time::Instant>>,
}

#[allow(dead_code)]
impl<K: std::hash::Hash + Eq + Copy> Tally<K> {
    pub fn record(&self, key: K, now: std::time::Instant) {
        *self.per_key.lock().unwrap().entry(key).or_default() += 1;
        let mut span = self.span.lock().unwrap();
        let first = span.map_or(now, |(first, _)| first);
        *span = Some((first, now));
        self.arrivals.lock().unwrap().push(now);
        self.first_per_key.lock().unwrap().entry(key).or_insert(now);
    }

    pub fn total(&self) -> usize {
        self.per_key.lock().unwrap().values().sum()
    }

    /// Per destination, in no particular order.
    pub fn per_key(&self) -> Vec<usize> {
        self.per_key.lock().unwrap().values().copied().collect()
    }

    /// Messages per second from the first to the last.
    pub fn sustained_rate(&self) -> f64 {
        let (first, last) = self.span.lock().unwrap().expect("something arrived");
        (self.total() - 1) as f64 / last.duration_since(first).as_secs_f64()
    }

    /// Messages per second from the first arrival until every destination had its first
    /// message. Up to then deliveries were waiting to start and only the channel's budget
    /// held them back; after it, a multi-message digest's last messages wait their
    /// destination's own spacing (a second per chat), so the first-to-last rate also
    /// measures that drain, which no channel budget could shorten.
    pub fn budget_limited_rate(&self) -> f64 {
        let end = *self
            .first_per_key
            .lock()
            .unwrap()
            .values()
            .max()
            .expect("something arrived");
        let arrivals = self.arrivals.lock().unwrap();
        let first = arrivals[0];
        let count = arrivals.iter().filter(|t| **t <= end).count();
        (count - 1) as f64 / end.duration_since(first).as_secs_f64()
    }
}

/// Adds one active English subscriber per address, all with the filter that keeps every
/// event.
#[allow(dead_code)]
pub async fn add_readers_of_everything(
    store: &kdigest::store::Store,
    addresses: &[kdigest::subscriber::Address],
) {
    add_readers(store, addresses, &kdigest::model::Filter::default(), "en").await;
}

/// Active readers at `addresses`, each with `filter` and `language`.
#[allow(dead_code)]
pub async fn add_readers(
    store: &kdigest::store::Store,
    addresses: &[kdigest::subscriber::Address],
    filter: &kdigest::model::Filter,
    language: &str,
) {
    let active = kdigest::subscriber::Status::Active;
    let rows: Vec<kdigest::store::NewSubscriber> = addresses
        .iter()
        .map(|a| kdigest::store::NewSubscriber {
            address: a,
            filter,
            language,
            status: &active,
            notify_empty: false,
        })
        .collect();
    store
        .add_subscribers(&rows, chrono::Utc::now())
        .await
        .unwrap();
}

/// A receiver's limit: at most `limit` requests accepted in any one second (a sliding
/// window of arrival times). `admit` says whether a request arriving `now` is accepted.
#[allow(dead_code)]
#[derive(Default)]
pub struct SlidingWindow {
    arrivals: std::sync::Mutex<std::collections::VecDeque<std::time::Instant>>,
}

#[allow(dead_code)]
impl SlidingWindow {
    pub fn admit(&self, limit: usize, now: std::time::Instant) -> bool {
        let mut w = self.arrivals.lock().unwrap();
        while w
            .front()
            .is_some_and(|t| now.duration_since(*t) >= std::time::Duration::from_secs(1))
        {
            w.pop_front();
        }
        if w.len() >= limit {
            return false;
        }
        w.push_back(now);
        true
    }
}

/// For readers of both editions: how many destinations got both (by delivery id), how many
/// got the daily first, and how many copies repeated an id. `received` holds each
/// destination's delivery ids in arrival order, `subscribers` its subscriber id.
#[allow(dead_code)]
pub fn check_both_editions(
    date: chrono::NaiveDate,
    received: &std::collections::HashMap<usize, Vec<String>>,
    subscribers: &std::collections::HashMap<usize, i64>,
) -> (usize, usize, usize) {
    use kdigest::deliver::delivery_id;
    use kdigest::subscriber::Edition;
    let (mut both, mut daily_first, mut repeats) = (0, 0, 0);
    for (i, ids) in received {
        let sid = subscribers[i];
        let daily = delivery_id(date, Edition::Daily, sid);
        let weekly = delivery_id(date, Edition::Weekly, sid);
        let distinct: std::collections::HashSet<&String> = ids.iter().collect();
        repeats += ids.len() - distinct.len();
        if distinct.contains(&daily) && distinct.contains(&weekly) {
            both += 1;
        }
        if ids.first() == Some(&daily) {
            daily_first += 1;
        }
    }
    (both, daily_first, repeats)
}

/// Sets every active reader's cadence.
#[allow(dead_code)]
pub async fn set_cadence(store: &kdigest::store::Store, cadence: kdigest::subscriber::Cadence) {
    let mut after = 0;
    loop {
        let page = store.active_subscribers_page(after, 5_000).await.unwrap();
        let Some(last) = page.last() else { break };
        after = last.id;
        for mut s in page {
            s.cadence = cadence;
            store
                .update_subscriber(&s, chrono::Utc::now())
                .await
                .unwrap();
        }
    }
}

/// Subscriber ids by destination index, for `addresses[i]`.
#[allow(dead_code)]
pub async fn subscriber_ids(
    store: &kdigest::store::Store,
    addresses: &[kdigest::subscriber::Address],
) -> std::collections::HashMap<usize, i64> {
    let page = store
        .active_subscribers_page(0, addresses.len() as i64 * 2)
        .await
        .unwrap();
    let by_address: std::collections::HashMap<String, i64> = page
        .into_iter()
        .map(|s| (s.address.to_string(), s.id))
        .collect();
    addresses
        .iter()
        .enumerate()
        .map(|(i, a)| (i, by_address[&a.to_string()]))
        .collect()
}

/// A bench's receiver or mock API in a process of its own, as in production the receivers
/// are not in kdigest's process: this bench binary started again with `args`, which
/// serves with [`serve_in_child`] and prints its port first. Killed when dropped.
#[allow(dead_code)]
pub struct ChildServer {
    child: std::process::Child,
    pub port: u16,
}

#[allow(dead_code)]
impl ChildServer {
    pub fn start(args: &[&str]) -> ChildServer {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let port = line.trim().parse().unwrap();
        ChildServer { child, port }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// GET `path` as JSON; from synchronous code (it runs a runtime of its own).
    pub fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let url = format!("{}{path}", self.base());
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async { reqwest::get(url).await.unwrap().json().await.unwrap() })
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In the child of a [`ChildServer`]: serves `app` on a free port of `ip` (0.0.0.0 reaches
/// every 127.x.y.z), prints the port, and serves until killed.
#[allow(dead_code)]
pub fn serve_in_child(app: axum::Router, ip: &str) {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
            println!("{}", listener.local_addr().unwrap().port());
            axum::serve(listener, app).await.unwrap();
        });
}
