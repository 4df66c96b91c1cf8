//! Shared by the benchmark binaries: what only benches need (peak memory, arrival tallies,
//! the release binary's `run --once`); the set-ups they share with the tests are in the
//! test kit (crates/testkit).

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

/// One active English reader of everything per address.
#[allow(dead_code)]
pub async fn add_readers_of_everything(
    store: &kdigest::store::Store,
    addresses: &[kdigest::subscriber::Address],
) {
    let everything = kdigest::model::Filter::default();
    kdigest_testkit::app::add_readers(store, addresses, &everything, "en").await;
}
