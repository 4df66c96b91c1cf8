//! The delivery engine: per-channel workers claim due outbox rows whose destination is
//! ready, wait for the rate limits, send, and settle each row (sent, retry with backoff,
//! deferred while its destination is paused, or failed and the subscriber disabled).
//!
//! It heals itself: each channel worker is supervised and restarted after an error or a
//! panic (and reported by `/healthz` while it is down); a panic in one delivery settles
//! that row as a retry; a reaper returns claims whose expiry passed; a settle that no
//! longer holds its row's claim token changes nothing. Concurrency per channel is bounded
//! by config; on shutdown nothing new is claimed and in-flight sends finish.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use futures::FutureExt as _;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::health::Health;
use super::limits::Limits;
use super::outcome::{self, OUTAGE_PAUSE, Outcome, Refusals, RetryPolicy};
use super::{Editions, RenderCache, SendError, Sender, plan};
use crate::config::{Config, DeliveryConfig};
use crate::metrics::Metrics;
use crate::model::Digest;
use crate::store::{Claimed, Settled, Store, WHOLE_CHANNEL, is_busy};
use crate::subscriber::{Channel, Edition, Status, Subscriber};

/// How often expired claims are returned to the queue, at most (a sixth of a claim's life
/// when that is shorter).
const REAP_EVERY: Duration = Duration::from_secs(15);
/// A worker that stopped is restarted after 1, 2, 4 ... at most this many seconds.
const RESTART_MAX: Duration = Duration::from_secs(30);
/// A one-off run gives up after this many restarts of one worker.
const ONCE_MAX_RESTARTS: u32 = 5;
/// How long a worker waits when the database is busy before it claims again.
const BUSY_WAIT: Duration = Duration::from_millis(250);
/// Digests kept in memory (the newest dates and editions); older ones are loaded, or
/// rolled up, again when needed.
const CACHED_DIGESTS: usize = 7;
/// Subscribers planned per page (memory stays at one page whatever the audience).
const PLAN_PAGE: i64 = 20_000;
/// How often `run --once` beside other instances looks whether its digest is drained.
const DRAINED_POLL: Duration = Duration::from_millis(500);
/// `/healthz` calls the outbox stuck when ready rows are this overdue and nothing was
/// settled for as long.
/// How long the claim loop gathers freed slots into one batch before claiming anyway.
const BATCH_WAIT: Duration = Duration::from_millis(5);
const STUCK_AFTER: Duration = Duration::from_secs(120);

/// When a worker stops.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// `run --once`: when nothing is due, after waiting at most this long for retries.
    Idle { max_wait: Duration },
    /// The daemon: when shutdown is signalled.
    Shutdown,
    /// `run --once` beside other instances (Postgres): when this digest's outbox has
    /// nothing pending or in flight, whoever delivered it.
    Drained { date: NaiveDate },
}

/// A reader this process is sending to. Dropping it frees the reader, also when its task
/// is aborted because the worker stopped with an error: a reader left marked would send
/// every later claim of theirs back to the queue, and a one-off run would never drain.
struct ReaderClaim {
    engine: Arc<Engine>,
    id: i64,
}

impl ReaderClaim {
    /// None while another of this reader's editions is being sent.
    fn take(engine: &Arc<Engine>, id: i64) -> Option<ReaderClaim> {
        engine.reader_lock().insert(id).then(|| ReaderClaim {
            engine: engine.clone(),
            id,
        })
    }
}

impl Drop for ReaderClaim {
    fn drop(&mut self) {
        self.engine.reader_lock().remove(&self.id);
    }
}

pub struct Engine {
    store: Store,
    delivery: DeliveryConfig,
    senders: HashMap<Channel, Sender>,
    limits: HashMap<Channel, Arc<Limits>>,
    cache: Arc<RenderCache>,
    digests: Mutex<BTreeMap<(NaiveDate, Edition), Arc<Digest>>>,
    /// What a weekly roll-up is made with: the digest language's words and
    /// `digest.key_changes`.
    language: String,
    key_changes: usize,
    metrics: Arc<Metrics>,
    health: Health,
    refusals: Mutex<HashMap<Channel, Refusals>>,
    /// Claim tokens are this prefix (process and start time) and a counter.
    token_prefix: String,
    claims: AtomicU64,
    /// Instances share the database (Postgres): platform-wide budgets are taken from it.
    shared_budgets: bool,
    /// Subscribers this process is sending to: a reader's other edition waits for them.
    readers_in_flight: Mutex<std::collections::HashSet<i64>>,
    /// Fault injection for tests: the next delivery to these subscribers panics.
    panic_for: Mutex<std::collections::HashSet<i64>>,
    /// Sent rows are marked together (group commit).
    sent: super::sent::SentLog,
}

impl Engine {
    /// An engine with every channel that can send here (see `channels::senders`).
    pub fn new(store: Store, config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<Engine> {
        let senders: HashMap<Channel, Sender> = crate::channels::senders(&config.channel_setup())?
            .into_iter()
            .map(|s| (s.channel(), s))
            .collect();
        let limits = Channel::ALL
            .iter()
            .map(|c| {
                let group = c.group_per_minute(&config.channels);
                (
                    *c,
                    Arc::new(Limits::new(&config.delivery.limits(*c), group)),
                )
            })
            .collect();
        let shared_budgets = store.backend() == crate::store::Backend::Postgres;
        Ok(Engine {
            store,
            delivery: config.delivery.clone(),
            senders,
            limits,
            cache: Arc::new(
                RenderCache::new(config.digest.templates_dir.clone())
                    .with_site(config.web.public_url.clone()),
            ),
            digests: Mutex::new(BTreeMap::new()),
            language: config.digest.language.clone(),
            key_changes: config.digest.key_changes,
            metrics,
            health: Health::default(),
            refusals: Mutex::new(HashMap::new()),
            // Unique among instances: host, process and start time.
            token_prefix: format!(
                "{}-{}-{}",
                crate::instance::host_name(),
                std::process::id(),
                Utc::now().timestamp_micros()
            ),
            shared_budgets,
            claims: AtomicU64::new(0),
            panic_for: Mutex::new(Default::default()),
            sent: Default::default(),
            readers_in_flight: Mutex::new(Default::default()),
        })
    }

    /// A channel's limits, for the bots to share (their replies count against them too).
    pub fn limits(&self, channel: Channel) -> Arc<Limits> {
        self.limits[&channel].clone()
    }

    /// Channels with a sender, in a fixed order.
    pub fn channels(&self) -> Vec<Channel> {
        Channel::ALL
            .iter()
            .copied()
            .filter(|c| self.senders.contains_key(c))
            .collect()
    }

    /// Plans the digest for every active subscriber, a page of subscribers at a time (one
    /// transaction each), and the weekly roll-up ending with it for the readers whose
    /// cadence makes this their roll-up day. Idempotent: planning again, or after a crash
    /// between pages, adds only the rows that are missing.
    pub async fn plan(&self, digest: &Digest) -> anyhow::Result<u64> {
        // This digest is the current version of its date (it may have been regenerated).
        self.remember_digest(Edition::Daily, Arc::new(digest.clone()));
        self.cache.forget(digest.date);
        let mut weekly: Option<Arc<Digest>> = None;
        let channels = self.channels();
        let (mut planned, mut inserted, mut skipped) = (0, 0, 0);
        let load = |after: i64| {
            let store = self.store.clone();
            tokio::spawn(async move { store.active_subscribers_page(after, PLAN_PAGE).await })
        };
        let mut next = load(0);
        loop {
            let page = next.await??;
            let Some(last) = page.last() else { break };
            // The next page loads while this one is planned and stored.
            next = load(last.id);
            skipped += page
                .iter()
                .filter(|s| !self.senders.contains_key(&s.address.channel()))
                .count();
            let roll_up_day = page
                .iter()
                .any(|s| s.cadence.weekly_day() == Some(digest.date.weekday()));
            if roll_up_day && weekly.is_none() {
                weekly = Some(self.roll_up(digest).await?);
            }
            let editions = Editions {
                daily: digest,
                weekly: weekly.as_deref(),
            };
            let rows = plan(editions, &page, &channels, Utc::now());
            planned += rows.len();
            inserted += self
                .store
                .plan_deliveries(digest.date, &rows, Utc::now())
                .await?;
        }
        if skipped > 0 {
            tracing::warn!(
                message = "Subscribers on channels without a sender are skipped",
                skipped
            );
        }
        tracing::info!(message = "Deliveries planned", date = %digest.date, planned, new = inserted);
        Ok(inserted)
    }

    /// Runs one supervised worker per channel, and the reaper, until `until`.
    pub async fn run(
        self: &Arc<Self>,
        until: Until,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let reaper = tokio::spawn(self.clone().reap(shutdown.clone()));
        let mut workers = JoinSet::new();
        for channel in self.channels() {
            let engine = self.clone();
            let shutdown = shutdown.clone();
            workers.spawn(async move { engine.supervise(channel, until, shutdown).await });
        }
        let mut result = Ok(());
        while let Some(joined) = workers.join_next().await {
            if let Err(error) = joined.map_err(anyhow::Error::from).and_then(|r| r) {
                result = Err(error);
            }
        }
        reaper.abort();
        result
    }

    /// Returns expired claims to the queue every [`REAP_EVERY`].
    async fn reap(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        for round in 0u64.. {
            // Hourly: bot updates handled over a day ago are forgotten (platforms retry
            // for minutes).
            if round % 240 == 0
                && let Err(error) = self
                    .store
                    .prune_handled_updates(Utc::now() - chrono::Duration::days(1))
                    .await
            {
                tracing::warn!(message = "Cannot prune handled bot updates", error = %format!("{error:#}"));
            }
            match self.store.requeue_expired(Utc::now()).await {
                Ok(0) => {}
                Ok(requeued) => tracing::warn!(
                    message = "Re-queued deliveries whose claim expired (a worker hung or died)",
                    requeued
                ),
                Err(error) => {
                    tracing::warn!(message = "Cannot re-queue expired claims", error = %format!("{error:#}"))
                }
            }
            // Often enough that a lapsed claim waits little beyond its expiry.
            let every = (self.delivery.claim / 6).clamp(Duration::from_secs(1), REAP_EVERY);
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// Runs one channel's worker and restarts it after an error or a panic, with backoff,
    /// until it ends normally (shutdown, or idle in a one-off run).
    async fn supervise(
        self: Arc<Self>,
        channel: Channel,
        until: Until,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let mut restarts = 0u32;
        loop {
            let worker = tokio::spawn(self.clone().run_channel(channel, until, shutdown.clone()));
            let error = match worker.await {
                Ok(Ok(())) => {
                    self.health.up(channel);
                    return Ok(());
                }
                Ok(Err(error)) => format!("{error:#}"),
                Err(join) => format!("the worker panicked: {}", panic_text(join.into_panic())),
            };
            restarts += 1;
            self.health.down(channel, &error, Utc::now());
            self.metrics.worker_restart(channel.as_str());
            if !matches!(until, Until::Shutdown) && restarts > ONCE_MAX_RESTARTS {
                anyhow::bail!(
                    "The {} delivery worker failed {restarts} times; its deliveries stay queued: {error}",
                    channel.as_str()
                );
            }
            let wait = Duration::from_secs(1 << restarts.min(5)).min(RESTART_MAX);
            tracing::error!(message = "Delivery worker stopped; restarting it", channel = channel.as_str(), restart_in_secs = wait.as_secs(), error = %error);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            }
        }
    }

    /// The spacing of a channel's platform-wide budget in milliseconds, when instances
    /// share one (Telegram's 30/s per bot, Discord's global limit, the mail relay's rate).
    /// Webhooks have no platform: each host is its own destination. Stretched like a
    /// destination's spacing, because the platform counts arrivals.
    fn shared_gap(&self, channel: Channel) -> Option<i64> {
        if !self.shared_budgets || !channel.shared_budget() {
            return None;
        }
        let per_sec = self.delivery.limits(channel).per_sec.max(0.001);
        let gap = 1000.0 / per_sec;
        // Stretched by a tenth: slots are handed out by the database's clock, but messages
        // from several instances arrive with their own delays, and at exactly 30/s a message
        // sent 25 ms late put 31 into one second at the platform (seen under CI load). A
        // tenth leaves 100 ms of such jitter at Telegram's 30/s (27.3/s across instances).
        Some((gap + gap / 10.0).ceil() as i64)
    }

    /// A claim token no other claim has: this process, this claim.
    fn new_token(&self) -> String {
        format!(
            "{}-{}",
            self.token_prefix,
            self.claims.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// How long a claim stays ours (`delivery.claim_secs`): a whole send with its retries
    /// inside one attempt, plus the waits a worker holds a row for. Extended after every
    /// message of a unit.
    fn claim_expiry(&self) -> DateTime<Utc> {
        after(self.delivery.claim)
    }

    async fn run_channel(
        self: Arc<Self>,
        channel: Channel,
        until: Until,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let concurrency = self.delivery.limits(channel).concurrency;
        let slots = Arc::new(Semaphore::new(concurrency));
        let mut in_flight = JoinSet::new();
        // A claim is a write transaction and a subscriber query: claiming the one row each
        // finished delivery frees spent both per delivery (and held SQLite's write lock
        // while the settles waited). A batch waits for a quarter of the slots, or
        // BATCH_WAIT, whichever comes first.
        let batch_size = concurrency.div_ceil(4).max(1);
        let mut gathering: Option<tokio::time::Instant> = None;
        loop {
            if *shutdown.borrow() {
                break;
            }
            // A one-off run does not wait out an outage: the deliveries stay queued for the
            // next run (the daemon keeps retrying after each pause).
            if matches!(until, Until::Idle { .. }) && self.limits[&channel].channel_paused() {
                tracing::warn!(
                    message =
                        "Channel paused by an outage; its deliveries stay queued for the next run",
                    channel = channel.as_str()
                );
                break;
            }
            while in_flight.try_join_next().is_some() {}
            let free = slots.available_permits();
            if free == 0 {
                in_flight.join_next().await;
                continue;
            }
            if free < batch_size && !in_flight.is_empty() {
                let deadline =
                    *gathering.get_or_insert_with(|| tokio::time::Instant::now() + BATCH_WAIT);
                if tokio::time::Instant::now() < deadline {
                    // join_next is cancel-safe: a task that ends later is joined later.
                    let _ = tokio::time::timeout_at(deadline, in_flight.join_next()).await;
                    continue;
                }
            }
            gathering = None;
            // Claim only what can start now: a claimed row is one in flight.
            let now = Utc::now();
            let token = self.new_token();
            let claimed = self
                .store
                .claim_due(channel, now, free as i64, &token, self.claim_expiry())
                .await;
            let batch = match claimed {
                Ok(batch) => batch,
                Err(error) if is_busy(&error) => {
                    tokio::time::sleep(BUSY_WAIT).await;
                    continue;
                }
                Err(error) => return Err(error.context("Cannot claim deliveries")),
            };
            self.health.up(channel);
            if batch.is_empty() {
                if !in_flight.is_empty() {
                    in_flight.join_next().await;
                    continue;
                }
                let next_due = self.store.next_due(channel).await?;
                let wait = next_due.map(|t| {
                    (t - Utc::now())
                        .to_std()
                        .unwrap_or_default()
                        .max(Duration::from_millis(10))
                });
                let wait = match (until, wait) {
                    (Until::Idle { max_wait }, Some(w)) if w <= max_wait => w,
                    (Until::Idle { .. }, _) => break,
                    (Until::Drained { date }, w) => {
                        if self.store.outstanding(date).await? == 0 {
                            break;
                        }
                        w.unwrap_or(DRAINED_POLL).min(DRAINED_POLL)
                    }
                    (Until::Shutdown, Some(w)) => w.min(Duration::from_secs(2)),
                    (Until::Shutdown, None) => Duration::from_secs(2),
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
                continue;
            }
            // The batch's subscribers in one query, not one per delivery.
            let ids: Vec<i64> = batch.iter().map(|c| c.subscriber_id).collect();
            let mut subscribers = self.store.subscribers_with_ids(&ids).await?;
            // A reader's editions of one date (the daily and the roll-up) go one after the
            // other, daily first, so their messages never interleave in one chat.
            let mut by_reader: BTreeMap<i64, Vec<Claimed>> = BTreeMap::new();
            for claimed in batch {
                by_reader
                    .entry(claimed.subscriber_id)
                    .or_default()
                    .push(claimed);
            }
            for (id, mut claims) in by_reader {
                claims.sort_by_key(|c| c.edition);
                let Some(reader) = ReaderClaim::take(&self, id) else {
                    // Their other edition is being sent: this one goes back to the queue
                    // (no attempt used) and follows it.
                    for c in &claims {
                        let settle = self
                            .store
                            .mark_retry(
                                c,
                                c.attempts,
                                after(Duration::from_secs(1)),
                                "Waiting for this reader's other edition",
                            )
                            .await;
                        self.settled(c, settle)?;
                    }
                    continue;
                };
                let subscriber = subscribers.remove(&id);
                let permit = slots
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("semaphore is never closed");
                let engine = self.clone();
                in_flight.spawn(async move {
                    for claimed in &claims {
                        // A panic in one delivery is that delivery's failure, not the worker's.
                        let delivery =
                            AssertUnwindSafe(engine.deliver(claimed, subscriber.clone(), channel));
                        if let Err(panic) = delivery.catch_unwind().await {
                            let error =
                                anyhow::anyhow!("the delivery panicked: {}", panic_text(panic));
                            engine.settle_unexpected(claimed, &error).await;
                        }
                    }
                    drop(reader);
                    drop(permit);
                });
            }
        }
        // Graceful shutdown: what was claimed finishes; nothing new is claimed.
        while in_flight.join_next().await.is_some() {}
        Ok(())
    }

    fn reader_lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<i64>> {
        self.readers_in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// What `reader` receives for `date`, exactly as delivery would send it: each edition
    /// its cadence takes that day, rendered for its channel, or None for an edition its
    /// filter empties and it did not ask to hear about (`notify_empty`). Errors when no
    /// digest is stored for `date`.
    pub async fn preview(
        &self,
        reader: &Subscriber,
        date: NaiveDate,
    ) -> anyhow::Result<Vec<(Edition, Option<Arc<Vec<String>>>)>> {
        let mut out = Vec::new();
        for edition in reader.cadence.editions(date) {
            let Some(digest) = self.digest(date, edition).await? else {
                anyhow::bail!(
                    "No digest is stored for {date}; make it with `kdigest digest --date {date}`"
                );
            };
            // The planner's own test (`plan`).
            let wanted = reader.notify_empty || super::any_passes(&digest, &reader.filter);
            let messages = if !wanted {
                None
            } else {
                Some(self.cache.messages(
                    &digest,
                    &reader.filter,
                    &reader.language,
                    reader.address.channel(),
                )?)
            };
            out.push((edition, messages));
        }
        Ok(out)
    }

    /// The roll-up of the seven days ending with `daily` (its own day from the value in
    /// hand, which may be newer than the stored one; the other days from the store).
    async fn roll_up(&self, daily: &Digest) -> anyhow::Result<Arc<Digest>> {
        let week = crate::weekly::Week::ending(daily.date);
        let renderer = self.cache.renderer(&self.language)?;
        let (rollup, _) = crate::pipeline::roll_up(
            &self.store,
            week,
            self.key_changes,
            renderer.locale(),
            Some(daily),
        )
        .await?;
        let rollup = Arc::new(rollup.expect("the week has its last day's digest"));
        self.remember_digest(Edition::Weekly, rollup.clone());
        Ok(rollup)
    }

    async fn digest(
        &self,
        date: NaiveDate,
        edition: Edition,
    ) -> anyhow::Result<Option<Arc<Digest>>> {
        if let Some(d) = self.cached_digests().get(&(date, edition)) {
            return Ok(Some(d.clone()));
        }
        let cached = self.cached_digests().get(&(date, Edition::Daily)).cloned();
        let daily = match cached {
            Some(d) => d,
            None => match self.store.load_digest(date).await? {
                Some(d) => {
                    let d = Arc::new(d);
                    self.remember_digest(Edition::Daily, d.clone());
                    d
                }
                None => return Ok(None),
            },
        };
        Ok(Some(match edition {
            Edition::Daily => daily,
            Edition::Weekly => self.roll_up(&daily).await?,
        }))
    }

    fn cached_digests(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<(NaiveDate, Edition), Arc<Digest>>> {
        self.digests.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the digest of its date and edition, and only the newest [`CACHED_DIGESTS`].
    fn remember_digest(&self, edition: Edition, digest: Arc<Digest>) {
        let mut digests = self.cached_digests();
        if edition == Edition::Daily {
            // A new daily changes the roll-up ending with it: made again when asked for.
            digests.remove(&(digest.date, Edition::Weekly));
        }
        digests.insert((digest.date, edition), digest);
        while digests.len() > CACHED_DIGESTS {
            digests.pop_first();
        }
    }

    /// Sends one claimed delivery and settles its row. Errors are logged, never propagated:
    /// one failing subscriber never stops the others.
    async fn deliver(
        &self,
        c: &Claimed,
        subscriber: Option<crate::subscriber::Subscriber>,
        channel: Channel,
    ) {
        if let Err(error) = self.try_deliver(c, subscriber, channel).await {
            self.settle_unexpected(c, &error).await;
        }
    }

    /// A delivery failed in kdigest rather than at the receiver (a store error, a render
    /// error, a panic): the row goes back to the queue with backoff rather than stay
    /// claimed, and fails after the last attempt.
    async fn settle_unexpected(&self, c: &Claimed, error: &anyhow::Error) {
        tracing::error!(message = "Delivery failed unexpectedly; it will be retried", delivery = %c.id, error = %format!("{error:#}"));
        let attempts = c.attempts + 1;
        let reason = format!("{error:#}");
        let settle = if attempts >= self.delivery.max_attempts {
            self.store.mark_failed(c, attempts, &reason).await
        } else {
            let next = after(outcome::backoff(self.retry_policy(), &c.id, attempts));
            self.store.mark_retry(c, attempts, next, &reason).await
        };
        if let Err(error) = self.settled(c, settle) {
            tracing::error!(message = "Cannot settle the delivery row; the reaper will re-queue it", delivery = %c.id, error = %format!("{error:#}"));
        }
    }

    /// Logs a settle that found its claim gone (fenced off) and counts progress.
    fn settled(&self, c: &Claimed, settle: anyhow::Result<Settled>) -> anyhow::Result<()> {
        match settle? {
            Settled::Done => self.health.progress(Utc::now()),
            Settled::Lost => tracing::warn!(
                message = "Delivery claim expired and was taken over; this worker's outcome is dropped",
                delivery = %c.id
            ),
        }
        Ok(())
    }

    /// The messages of one delivery, rendered off the async threads (a first render of a
    /// large digest is milliseconds of CPU).
    async fn messages(
        &self,
        digest: Arc<Digest>,
        subscriber: &crate::subscriber::Subscriber,
        channel: Channel,
    ) -> anyhow::Result<Arc<Vec<String>>> {
        if let Some(hit) =
            self.cache
                .cached(&digest, &subscriber.filter, &subscriber.language, channel)
        {
            return Ok(hit);
        }
        let cache = self.cache.clone();
        let filter = subscriber.filter.clone();
        let language = subscriber.language.clone();
        tokio::task::spawn_blocking(move || cache.messages(&digest, &filter, &language, channel))
            .await?
    }

    /// The fault-injection seam of the tests: the next delivery attempt to this subscriber
    /// panics, as a bug in a sender or a template would.
    #[doc(hidden)]
    pub fn inject_panic(&self, subscriber_id: i64) {
        self.panic_for
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(subscriber_id);
    }

    async fn try_deliver(
        &self,
        c: &Claimed,
        subscriber: Option<crate::subscriber::Subscriber>,
        channel: Channel,
    ) -> anyhow::Result<()> {
        let attempts = c.attempts + 1;
        let injected = self
            .panic_for
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&c.subscriber_id);
        assert!(
            !injected,
            "injected panic for subscriber {}",
            c.subscriber_id
        );
        let subscriber = match subscriber {
            Some(s) if s.status == Status::Active => s,
            Some(s) => {
                let reason = format!("Subscriber is {} now", s.status.as_str());
                return self.settled(c, self.store.mark_failed(c, c.attempts, &reason).await);
            }
            None => {
                let settle = self
                    .store
                    .mark_failed(c, c.attempts, "Subscriber was removed")
                    .await;
                return self.settled(c, settle);
            }
        };
        let Some(digest) = self.digest(c.digest_date, c.edition).await? else {
            let settle = self
                .store
                .mark_failed(c, c.attempts, "The digest is not stored")
                .await;
            return self.settled(c, settle);
        };
        let messages = self.messages(digest, &subscriber, channel).await?;
        let sender = &self.senders[&channel];
        let limits = &self.limits[&channel];
        let mut subscriber = subscriber;
        let mut destination = subscriber.address.destination_key();
        let mut moved = false;
        let mut part = c.parts_sent as usize;
        while part < messages.len() {
            if let Err(until) = limits
                .acquire(
                    &destination,
                    subscriber.address.is_group(),
                    messages.len() - part,
                )
                .await
            {
                // Paused, or queued behind many messages to the same place: back to the
                // queue without using an attempt, so this worker serves someone else.
                let next = utc_at(until);
                let reason = "Waiting for the destination (paused or busy)";
                return self.settled(c, self.store.mark_retry(c, c.attempts, next, reason).await);
            }
            if let Some(gap) = self.shared_gap(channel) {
                // The platform's budget is shared with the other instances: wait for this
                // message's slot in it, and count the destination's spacing from the send.
                let wait = self.store.take_budget_slot(channel.as_str(), gap).await?;
                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                limits.sent(&destination, subscriber.address.is_group());
            }
            match sender
                .send(
                    &subscriber.address,
                    &messages[part],
                    crate::channels::Meta {
                        delivery_id: &c.id,
                        subscriber_id: subscriber.id,
                    },
                )
                .await
            {
                Err(SendError::Moved(address))
                    if !moved && self.store.subscriber_by_address(&address).await?.is_some() =>
                {
                    // The new chat already has its own subscription: this one is obsolete.
                    let reason = format!("Chat moved to {address}, which has its own subscription");
                    self.fail(c, channel, attempts, &reason).await?;
                    return self
                        .store
                        .set_subscriber_status(subscriber.id, &Status::Disabled(reason), Utc::now())
                        .await
                        .map(|_| ());
                }
                Err(SendError::Moved(address)) if !moved => {
                    // The chat has a new id: remember it and send this part again, once.
                    tracing::info!(message = "Destination moved; updating the subscriber", from = %subscriber.address, to = %address);
                    self.store
                        .set_subscriber_address(subscriber.id, &address, Utc::now())
                        .await?;
                    subscriber.address = *address;
                    destination = subscriber.address.destination_key();
                    self.store
                        .move_pending_destination(subscriber.id, &destination)
                        .await?;
                    moved = true;
                }
                Err(SendError::Moved(address)) => {
                    let reason = format!("Destination moved twice (last to {address})");
                    return self.fail(c, channel, attempts, &reason).await;
                }
                Ok(()) => {
                    let _ = self.note_answer(channel, &destination, false);
                    part += 1;
                    if part < messages.len() {
                        let settle = self
                            .store
                            .mark_part_sent(c, part as u32, self.claim_expiry())
                            .await?;
                        if settle == Settled::Lost {
                            // Someone else holds the row now; they resume from what we stored.
                            return self.settled(c, Ok(settle));
                        }
                    }
                }
                Err(error) => {
                    let reason = error.to_string();
                    if matches!(error, SendError::Refused { .. })
                        && self.note_answer(channel, &destination, true)
                        && self.pause_channel(channel, OUTAGE_PAUSE, &reason).await
                    {
                        tracing::error!(
                            message = "Most receivers refuse our credentials (401/403) at once: check the signing key (delivery.webhook_secret_env). The channel is paused; nobody is disabled",
                            channel = channel.as_str(),
                            pause_secs = OUTAGE_PAUSE.as_secs()
                        );
                        self.metrics.delivery(channel.as_str(), "paused");
                    }
                    let decision = outcome::decide(&error, attempts, &c.id, self.retry_policy());
                    return self
                        .apply(
                            c,
                            channel,
                            &subscriber,
                            &destination,
                            attempts,
                            &reason,
                            decision,
                        )
                        .await;
                }
            }
        }
        self.metrics.delivery(channel.as_str(), "sent");
        let settle = self.sent.mark_sent(&self.store, c, attempts).await;
        self.settled(c, settle)
    }

    /// Carries out the decision for a failed send (see [`outcome::decide`]).
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        c: &Claimed,
        channel: Channel,
        subscriber: &crate::subscriber::Subscriber,
        destination: &str,
        attempts: u32,
        reason: &str,
        decision: Outcome,
    ) -> anyhow::Result<()> {
        match decision {
            Outcome::Retry {
                wait,
                pause_destination,
            } => {
                if let Some(pause) = pause_destination {
                    self.pause(channel, destination, pause, reason).await;
                }
                self.metrics.delivery(channel.as_str(), "retry");
                tracing::info!(message = "Delivery will be retried", subscriber = %subscriber.address, attempts, wait_secs = wait.as_secs_f64(), error = %reason);
                let settle = self
                    .store
                    .mark_retry(c, attempts, after(wait), reason)
                    .await;
                self.settled(c, settle)
            }
            Outcome::Fail { pause_destination } => {
                if let Some(pause) = pause_destination {
                    self.pause(channel, destination, pause, reason).await;
                }
                tracing::warn!(message = "Delivery failed; not retried", subscriber = %subscriber.address, attempts, error = %reason);
                self.fail(c, channel, attempts, reason).await
            }
            Outcome::PauseChannel { wait } => {
                // Nobody's fault but the relay's or the platform's: no attempt is used, and
                // every delivery of the channel waits. Reported once per pause, not once
                // per recipient.
                if self.pause_channel(channel, wait, reason).await {
                    tracing::error!(message = "Channel paused: it is down, refused our login or is rate-limited as a whole; deliveries wait, nobody is marked bounced", channel = channel.as_str(), pause_secs = wait.as_secs_f64(), error = %reason);
                }
                self.metrics.delivery(channel.as_str(), "paused");
                let settle = self
                    .store
                    .mark_retry(c, c.attempts, after(wait), reason)
                    .await;
                self.settled(c, settle)
            }
            Outcome::Disable => {
                tracing::warn!(message = "Subscriber disabled after a permanent delivery failure", subscriber = %subscriber.address, error = %reason);
                self.fail(c, channel, attempts, reason).await?;
                self.store
                    .set_subscriber_status(
                        subscriber.id,
                        &Status::Disabled(reason.to_string()),
                        Utc::now(),
                    )
                    .await?;
                self.store.fail_pending_for(subscriber.id, reason).await
            }
        }
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::from(&self.delivery)
    }

    /// Pauses one destination, here and in the store (so rows not yet claimed stay queued
    /// and hold no worker).
    async fn pause(&self, channel: Channel, destination: &str, wait: Duration, reason: &str) {
        self.limits[&channel].pause(destination, tokio::time::Instant::now() + wait);
        if let Err(error) = self
            .store
            .pause_destination(channel, destination, after(wait), reason)
            .await
        {
            tracing::warn!(message = "Cannot store a destination's pause; it holds in this process", error = %format!("{error:#}"));
        }
    }

    /// Pauses a whole channel; true when it was not paused already.
    async fn pause_channel(&self, channel: Channel, wait: Duration, reason: &str) -> bool {
        let fresh = self.limits[&channel].pause_channel(tokio::time::Instant::now() + wait);
        if !fresh {
            return false;
        }
        self.health.paused(channel, after(wait), reason);
        if let Err(error) = self
            .store
            .pause_destination(channel, WHOLE_CHANNEL, after(wait), reason)
            .await
        {
            tracing::warn!(message = "Cannot store the channel's pause; it holds in this process", error = %format!("{error:#}"));
        }
        true
    }

    /// Remembers whether a destination refused our credentials; true when most recent
    /// answers on the channel are such refusals from several destinations. Then the fault
    /// is ours (a rotated signing key), not theirs: the caller pauses the channel once,
    /// with one operator log, instead of every receiver using up its attempts.
    fn note_answer(&self, channel: Channel, destination: &str, refused: bool) -> bool {
        let mut refusals = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        refusals
            .entry(channel)
            .or_default()
            .note(destination, refused)
    }

    /// Settles a delivery as failed and counts it.
    async fn fail(
        &self,
        c: &Claimed,
        channel: Channel,
        attempts: u32,
        reason: &str,
    ) -> anyhow::Result<()> {
        self.metrics.delivery(channel.as_str(), "failed");
        let settle = self.store.mark_failed(c, attempts, reason).await;
        self.settled(c, settle)
    }

    /// What `/healthz` reports; the daemon adds the platform links it keeps trying.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The email sender, when email delivery is on (the web sign-up shares it).
    #[cfg(feature = "email")]
    pub fn mailer(&self) -> Option<Arc<crate::channels::Mailer>> {
        match self.senders.get(&Channel::Email) {
            Some(Sender::Email(mailer)) => Some(mailer.clone()),
            _ => None,
        }
    }

    /// Built without email: there is no mailer, and sign-up answers that it is off.
    #[cfg(not(feature = "email"))]
    pub fn mailer(&self) -> Option<Arc<crate::channels::Mailer>> {
        None
    }

    pub fn distinct_renders(&self) -> usize {
        self.cache.len()
    }

    /// What is wrong with delivery now, one line each; empty when healthy. A worker that
    /// is down, or ready rows overdue by [`STUCK_AFTER`] while nothing was settled for as
    /// long (a large backlog that moves is not stuck).
    pub async fn problems(&self) -> Vec<String> {
        let mut problems = self.health.workers_down();
        problems.extend(self.health.channels_paused(Utc::now()));
        problems.extend(self.health.links_down());
        let now = Utc::now();
        let stale = |t: DateTime<Utc>| (now - t).to_std().unwrap_or_default() > STUCK_AFTER;
        if self.health.last_progress().is_none_or(stale) {
            for channel in self.channels() {
                match self.store.oldest_ready_due(channel, now).await {
                    Ok(Some(due)) if stale(due) => problems.push(format!(
                        "{} outbox stuck: ready deliveries waiting since {}",
                        channel.as_str(),
                        due.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    )),
                    Ok(_) => {}
                    Err(error) => {
                        problems.push(format!("cannot read the outbox: {error:#}"));
                        break;
                    }
                }
            }
        }
        problems
    }

    /// The outbox gauges for `/metrics`: rows by channel and state, and the age of the
    /// oldest ready row.
    pub async fn outbox_metrics(&self) -> anyhow::Result<String> {
        let now = Utc::now();
        let mut out = String::new();
        out.push_str("# HELP kdigest_outbox_rows Deliveries waiting (pending) or in flight (sending), by channel.\n");
        out.push_str("# TYPE kdigest_outbox_rows gauge\n");
        for b in self.store.backlog().await? {
            out.push_str(&format!(
                "kdigest_outbox_rows{{channel=\"{}\",state=\"{}\"}} {}\n",
                b.channel, b.status, b.rows
            ));
        }
        out.push_str("# HELP kdigest_outbox_oldest_ready_seconds How long the oldest ready delivery has been due, by channel (0: none).\n");
        out.push_str("# TYPE kdigest_outbox_oldest_ready_seconds gauge\n");
        for channel in self.channels() {
            let age = self
                .store
                .oldest_ready_due(channel, now)
                .await?
                .map_or(0.0, |due| (now - due).num_milliseconds() as f64 / 1000.0);
            out.push_str(&format!(
                "kdigest_outbox_oldest_ready_seconds{{channel=\"{}\"}} {age:.3}\n",
                channel.as_str()
            ));
        }
        Ok(out)
    }
}

/// The time `wait` from now.
fn after(wait: Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default()
}

/// The wall-clock time of a monotonic instant.
fn utc_at(at: tokio::time::Instant) -> DateTime<Utc> {
    after(at.saturating_duration_since(tokio::time::Instant::now()))
}

fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_are_described() {
        assert_eq!(panic_text(Box::new("boom")), "boom");
        assert_eq!(panic_text(Box::new(String::from("bang"))), "bang");
        assert_eq!(panic_text(Box::new(1)), "a panic without a message");
    }
}
