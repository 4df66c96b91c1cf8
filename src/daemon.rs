//! `kdigest run`: the scheduler, the delivery workers, the web site and the metrics
//! endpoint, with graceful shutdown on SIGINT/SIGTERM. On SQLite one process does all of
//! it under a lease that keeps a second process away. On Postgres any number of instances
//! run (`--role` splits the work): every instance delivers and serves, one at a time is
//! elected scheduler by the lease, and another takes over within `daemon.lease_secs` when
//! it dies.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use tokio::sync::watch;

use crate::config::{Config, Secret};
use crate::deliver::engine::{Engine, Until};
use crate::digest;
use crate::instance::host_name;
use crate::metrics::{DATABASE_GONE, Metrics};
use crate::model::Window;
use crate::pipeline;
use crate::schedule::{next_run, previous_run};
use crate::store::{Backend, Store};

pub const LEASE: &str = "scheduler";

/// Another process holds the lease.
#[derive(Debug, thiserror::Error)]
#[error(
    "Another kdigest run ({holder}) is active until {until}; only one process may generate and deliver. Stop it or wait for its lease to lapse"
)]
pub struct LeaseHeld {
    pub holder: String,
    pub until: String,
}

/// `--once`: how long to wait for retries that are due soon before exiting.
const ONCE_MAX_WAIT: Duration = Duration::from_secs(60);

fn holder_id() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

/// True when `holder` is a process on this host that no longer exists: a crashed (kill -9)
/// daemon, whose lease a restart may take over at once instead of waiting for it to lapse.
pub fn holder_is_dead(holder: &str) -> bool {
    let Some((host, pid)) = holder.rsplit_once(':') else {
        return false;
    };
    host == host_name()
        && pid
            .parse::<u32>()
            .is_ok_and(|pid| pid != std::process::id())
        && cfg!(target_os = "linux")
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Takes the scheduler lease, or fails with [`LeaseHeld`] naming the live holder.
async fn acquire_lease(store: &Store, holder: &str, ttl: i64) -> anyhow::Result<()> {
    if store.try_lease(LEASE, holder, ttl, Utc::now()).await? {
        return Ok(());
    }
    let (current, until) = store.lease_holder(LEASE).await?.unwrap_or_default();
    if holder_is_dead(&current)
        && store
            .take_over_lease(LEASE, &current, holder, ttl, Utc::now())
            .await?
    {
        tracing::warn!(message = "Took over the lease of a process that is gone", previous = %current);
        return Ok(());
    }
    let until = DateTime::from_timestamp(until, 0).map_or_else(String::new, |t| t.to_rfc3339());
    Err(LeaseHeld {
        holder: current,
        until,
    }
    .into())
}

/// How long `run` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Until SIGINT/SIGTERM.
    Forever,
    /// One digest (the latest scheduled run's, or `date`'s), delivered, then exit.
    Once { date: Option<NaiveDate> },
}

/// What one `kdigest run` process does (`--role`). On SQLite one process does everything;
/// on Postgres any number of instances share the work and operators may split it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Scheduler (when elected), delivery and the web site.
    All,
    /// Stands for election; when elected generates and plans each digest and runs Telegram
    /// long polling and the Discord gateway.
    Scheduler,
    /// Delivery workers only.
    Deliver,
    /// The web site, the Telegram webhook and the Discord interactions endpoint.
    Web,
}

impl Role {
    fn scheduler(self) -> bool {
        matches!(self, Role::All | Role::Scheduler)
    }
    fn deliver(self) -> bool {
        matches!(self, Role::All | Role::Deliver)
    }
    fn web(self) -> bool {
        matches!(self, Role::All | Role::Web)
    }
    /// As `kdigest status` lists it.
    fn describe(self) -> &'static str {
        match self {
            Role::All => "scheduler,deliver,web",
            Role::Scheduler => "scheduler",
            Role::Deliver => "deliver",
            Role::Web => "web",
        }
    }
}

/// How often an instance records that it is alive; `kdigest status` lists the instances
/// heard from within three of these.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

pub async fn run(config: Config, mode: Mode, role: Role) -> anyhow::Result<()> {
    let store = Store::connect(&config.storage).await?;
    let shared = store.backend() == Backend::Postgres;
    if !shared && role != Role::All {
        anyhow::bail!(
            "--role {} needs a shared Postgres store (storage.url or {}); on SQLite one process does everything (--role all)",
            role.describe(),
            crate::config::DATABASE_URL_ENV
        );
    }
    let holder = holder_id();
    let ttl = config.daemon.lease.as_secs() as i64;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let shutdown_tx = Arc::new(shutdown_tx);
    // SQLite: this process owns the database, or it does not run. Postgres: instances
    // come and go; the scheduler is elected among them (Scheduler::standby).
    let renewer = if shared {
        None
    } else {
        acquire_lease(&store, &holder, ttl).await?;
        let requeued = store.requeue_in_flight().await?;
        if requeued > 0 {
            tracing::warn!(
                message = "Re-queued deliveries left in flight by an earlier process",
                requeued
            );
        }
        Some(spawn_lease_renewal(
            store.clone(),
            holder.clone(),
            ttl,
            shutdown_tx.clone(),
            Some(DatabaseFile::of(&config.storage.path)),
        ))
    };
    spawn_signal_handler(shutdown_tx.clone());
    let heartbeat = spawn_heartbeat(store.clone(), holder.clone(), role);
    let metrics = Arc::new(Metrics::default());
    let engine = Arc::new(Engine::new(store.clone(), &config, metrics.clone())?);
    let result = match mode {
        Mode::Once { date } => {
            run_once(&config, &store, &engine, &metrics, date, shutdown_rx).await
        }
        Mode::Forever => {
            let instance = Instance {
                config: &config,
                store: &store,
                engine: &engine,
                metrics: &metrics,
                holder: &holder,
                role,
            };
            instance.run_forever(shutdown_rx).await
        }
    };
    if let Some(renewer) = renewer {
        renewer.abort();
    }
    heartbeat.abort();
    if DATABASE_GONE.load(std::sync::atomic::Ordering::Relaxed) {
        store.close().await;
        anyhow::bail!(
            "The database file {} (storage.path) was deleted or replaced while kdigest ran; it stopped so that only one scheduler runs. Restore the file, or start kdigest again to begin a new database",
            config.storage.path.display()
        );
    }
    store.release_lease(LEASE, &holder).await?;
    store.forget_instance(&holder).await?;
    store.close().await;
    result
}

/// Heartbeats this instance's row (see `kdigest status`) until aborted.
fn spawn_heartbeat(store: Store, holder: String, role: Role) -> tokio::task::JoinHandle<()> {
    let started = Utc::now();
    tokio::spawn(async move {
        loop {
            if let Err(error) = store
                .heartbeat(&holder, role.describe(), started, Utc::now())
                .await
            {
                tracing::warn!(message = "Cannot record this instance's heartbeat", error = %format!("{error:#}"));
            }
            tokio::time::sleep(HEARTBEAT_EVERY).await;
        }
    })
}

async fn run_once(
    config: &Config,
    store: &Store,
    engine: &Arc<Engine>,
    metrics: &Metrics,
    date: Option<NaiveDate>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let (date, window) = match date {
        Some(d) => (d, digest::window_for(d, config)),
        None => {
            let now = Utc::now();
            digest::window_ending(previous_run(&config.schedule, now).unwrap_or(now), config)
        }
    };
    prepare(config, store, engine, metrics, date, window).await?;
    // Alone on SQLite: deliver what is due and stop. On Postgres other instances deliver
    // too: help them until this digest's outbox is drained, whoever sends.
    let until = match store.backend() {
        Backend::Sqlite => Until::Idle {
            max_wait: ONCE_MAX_WAIT,
        },
        Backend::Postgres => Until::Drained { date },
    };
    engine.run(until, shutdown).await
}

/// The parts of one `kdigest run --forever` process.
struct Instance<'a> {
    config: &'a Config,
    store: &'a Store,
    engine: &'a Arc<Engine>,
    metrics: &'a Arc<Metrics>,
    holder: &'a str,
    role: Role,
}

impl Instance<'_> {
    async fn run_forever(&self, shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let config = self.config;
        let listener = tokio::net::TcpListener::bind(config.daemon.listen)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "Cannot listen on {} (daemon.listen): {e}",
                    config.daemon.listen
                )
            })?;
        // The bound address, not the configured one: with port 0 that is the port to use.
        let bound = listener
            .local_addr()
            .map_or_else(|_| config.daemon.listen.to_string(), |a| a.to_string());
        tracing::info!(message = "Serving /healthz and /metrics", address = %bound, role = self.role.describe());
        // Admin /run requests; capacity one, so a request while one is pending is refused.
        let (run_tx, run_rx) = tokio::sync::mpsc::channel::<()>(1);
        let site = if self.role.web() {
            Some(self.site(run_tx.clone()).await?)
        } else {
            None
        };
        let services = match &site {
            Some(site) => site.services.clone(),
            None => crate::web::Services {
                delivery: self.role.deliver().then(|| self.engine.clone()),
                ..Default::default()
            },
        };
        let router = crate::web::router(self.metrics.clone(), services);
        let mut web_shutdown = shutdown.clone();
        let web = tokio::spawn(crate::web::serve_with(
            listener,
            router,
            config.daemon.web,
            async move {
                let _ = web_shutdown.wait_for(|stop| *stop).await;
            },
        ));
        let workers = self.role.deliver().then(|| {
            let engine = self.engine.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move { engine.run(Until::Shutdown, shutdown).await })
        });

        let mut failure = None;
        if self.role.scheduler() {
            let scheduler = Scheduler {
                instance: self,
                runs: run_tx,
            };
            failure = scheduler.standby(run_rx, shutdown.clone()).await.err();
        } else {
            let mut stop = shutdown.clone();
            let _ = stop.wait_for(|stop| *stop).await;
        }
        let grace = config.daemon.shutdown_grace;
        tracing::info!(
            message = "Shutting down: in-flight deliveries finish, nothing new is claimed",
            grace_secs = grace.as_secs()
        );
        // Every task gets the same grace period, counted from now; what is still running
        // then is cut off, so a task that cannot finish never keeps the process.
        let deadline = tokio::time::Instant::now() + grace;
        if let Some(workers) = workers {
            failure = failure.or(stop_within("delivery workers", workers, deadline).await);
        }
        failure = failure.or(stop_within("web server", web, deadline).await);
        if let Some(site) = site {
            site.flusher.abort();
            if let Err(error) = site.blog.flush_reads().await {
                tracing::warn!(message = "Page views of the last seconds were not stored", error = %format!("{error:#}"));
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The web role: the blog, sign-up and the bots' HTTP endpoints (the Telegram webhook,
    /// Discord interactions), which work on every instance.
    async fn site(&self, runs: crate::bot::handlers::RunTrigger) -> anyhow::Result<Site> {
        let (config, store, engine) = (self.config, self.store, self.engine);
        let telegram = match &config.telegram.webhook_url {
            Some(url) => self.telegram_bot(runs).map(|t| (t, url.clone())),
            None => None,
        };
        // The webhook route serves at once; Telegram calls it only after setWebhook, which
        // is retried in the background: without DNS or with Telegram down, the site and the
        // other channels come up, and /healthz names the bot until it is set up.
        let webhook_bot = telegram.map(|(telegram, url)| {
            let telegram = Arc::new(telegram);
            let (bot, engine) = (telegram.clone(), engine.clone());
            let mut never = watch::channel(false).1;
            tokio::spawn(
                async move { set_up_telegram(&bot, Some(&url), &engine, &mut never).await },
            );
            telegram
        });
        // Discord commands: the HTTP endpoint when a public key is set, else the gateway
        // (on the scheduler).
        let discord_bot = config.discord.public_key.is_some().then(|| {
            Arc::new(crate::bot::discord::DiscordBot::new(
                store.clone(),
                Arc::new(config.clone()),
            ))
        });
        let account = match crate::tokens::secret_from_env()? {
            Some(secret) => {
                // The delivery engine's mailer (Engine::new logged why there is none).
                // Without it sign-up answers 503; unsubscribe links still work.
                let mailer = engine.mailer();
                if mailer.is_none() {
                    tracing::error!(message = "Email sign-up is off: there is no working mailer");
                }
                Some(Arc::new(crate::web::account::Account::new(
                    store.clone(),
                    config,
                    secret,
                    mailer,
                )?))
            }
            None => None,
        };
        let blog = Arc::new(crate::web::blog::Blog::new(
            store.clone(),
            Arc::new(config.clone()),
            account.as_ref().is_some_and(|a| a.accepts_signups()),
        )?);
        let flusher = {
            let blog = blog.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(crate::web::pages::FLUSH_EVERY);
                loop {
                    every.tick().await;
                    if let Err(error) = blog.flush_reads().await {
                        tracing::warn!(message = "Cannot store page views; they stay counted in memory", error = %format!("{error:#}"));
                    }
                }
            })
        };
        let services = crate::web::Services {
            telegram: webhook_bot,
            discord: discord_bot,
            account,
            blog: Some(blog.clone()),
            delivery: self.role.deliver().then(|| engine.clone()),
        };
        Ok(Site {
            services,
            blog,
            flusher,
        })
    }

    /// The Telegram command bot, when a token is set and `telegram.bot` is on.
    fn telegram_bot(
        &self,
        runs: crate::bot::handlers::RunTrigger,
    ) -> Option<crate::bot::telegram::TelegramBot> {
        if !self.config.telegram.bot {
            return None;
        }
        let Ok(bot) = crate::channels::telegram::api_bot(&self.config.telegram) else {
            tracing::info!(message = "No Telegram token; the Telegram bot is off", variable = %self.config.telegram.token_env);
            return None;
        };
        let mut telegram = crate::bot::telegram::TelegramBot::new(
            bot,
            self.store.clone(),
            Arc::new(self.config.clone()),
            Some(runs),
        );
        telegram.share_limits(self.engine.limits(crate::subscriber::Channel::Telegram));
        Some(telegram)
    }
}

/// What the web role runs besides the router.
struct Site {
    services: crate::web::Services,
    blog: Arc<crate::web::blog::Blog>,
    flusher: tokio::task::JoinHandle<()>,
}

/// The scheduler's duties, held by one instance at a time: the catch-up and scheduled
/// ticks, admin run requests, Telegram long polling and the Discord gateway.
struct Scheduler<'a, 'b> {
    instance: &'a Instance<'b>,
    runs: crate::bot::handlers::RunTrigger,
}

impl Scheduler<'_, '_> {
    /// Until shutdown: on SQLite the lease is held already; on Postgres waits to be
    /// elected (the lease is free, lapsed, or its holder on this host is dead), serves
    /// while the lease is renewed, and stands by again when it is lost.
    async fn standby(
        &self,
        mut runs: tokio::sync::mpsc::Receiver<()>,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let Instance {
            config,
            store,
            holder,
            ..
        } = *self.instance;
        if store.backend() == Backend::Sqlite {
            return self.serve(&mut runs, shutdown).await;
        }
        let ttl = config.daemon.lease.as_secs() as i64;
        let period = Duration::from_secs((ttl / 3).max(1) as u64);
        let mut stop = shutdown.clone();
        loop {
            match acquire_lease(store, holder, ttl).await {
                Ok(()) => {
                    tracing::info!(message = "Elected scheduler", instance = %holder);
                    let (lost_tx, lost_rx) = watch::channel(false);
                    let lost_tx = Arc::new(lost_tx);
                    let renewer = spawn_lease_renewal(
                        store.clone(),
                        holder.to_string(),
                        ttl,
                        lost_tx.clone(),
                        // Postgres: no file to watch.
                        None,
                    );
                    // Duties end on shutdown or when the lease is lost, whichever is first.
                    let (duty_tx, duty_rx) = watch::channel(false);
                    let forward = {
                        let (mut stop, mut lost) = (shutdown.clone(), lost_rx.clone());
                        tokio::spawn(async move {
                            tokio::select! {
                                _ = stop.wait_for(|s| *s) => {}
                                _ = lost.wait_for(|l| *l) => {}
                            }
                            let _ = duty_tx.send(true);
                        })
                    };
                    let served = self.serve(&mut runs, duty_rx).await;
                    forward.abort();
                    renewer.abort();
                    served?;
                    if *shutdown.borrow() {
                        return Ok(());
                    }
                    tracing::warn!(message = "Scheduler lease lost; standing by", instance = %holder);
                }
                Err(error) if error.downcast_ref::<LeaseHeld>().is_some() => {}
                Err(error) => {
                    tracing::warn!(message = "Cannot reach the store to stand for scheduler", error = %format!("{error:#}"))
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.wait_for(|s| *s) => return Ok(()),
            }
        }
    }

    /// The duties, until `stop`.
    async fn serve(
        &self,
        runs: &mut tokio::sync::mpsc::Receiver<()>,
        stop: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let Instance {
            config,
            store,
            engine,
            metrics,
            ..
        } = *self.instance;
        let polling = match config.telegram.webhook_url {
            None => self
                .instance
                .telegram_bot(self.runs.clone())
                .map(|telegram| {
                    let (engine, mut stop) = (engine.clone(), stop.clone());
                    tokio::spawn(async move {
                        // Up before polling: retried with backoff, named by /healthz.
                        if !set_up_telegram(&telegram, None, &engine, &mut stop).await {
                            return Ok(());
                        }
                        tracing::info!(message = "Telegram bot polling for commands");
                        telegram.poll(stop).await
                    })
                }),
            Some(_) => None,
        };
        let discord_token = Secret::from_env(&config.discord.token_env, "").is_ok();
        let gateway = (config.discord.public_key.is_none() && discord_token).then(|| {
            tracing::info!(message = "Discord bot connecting to the gateway");
            let (config, store, engine, stop) = (
                Arc::new(config.clone()),
                store.clone(),
                engine.clone(),
                stop.clone(),
            );
            tokio::spawn(keep_discord_gateway(config, store, engine, stop))
        });
        if config.discord.register_commands && discord_token {
            // In the background: a slow Discord must not hold up the scheduler.
            let (config, engine, mut stop) = (config.clone(), engine.clone(), stop.clone());
            tokio::spawn(async move {
                const LINK: &str = "discord commands";
                let mut backoff = Backoff::default();
                loop {
                    match crate::bot::discord::register_commands(&config).await {
                        Ok(()) => return engine.health().link_up(LINK),
                        Err(error) => {
                            let wait = backoff.next();
                            tracing::error!(message = "Cannot register the Discord slash commands; retrying", wait_secs = wait.as_secs(), error = %format!("{error:#}"));
                            engine.health().link_down(LINK, &format!("slash commands not registered (retrying with backoff): {error:#}"), Utc::now());
                            if !sleep_unless_stopped(wait, &mut stop).await {
                                return;
                            }
                        }
                    }
                }
            });
        }
        // Catch-up: the most recent tick, once. Generation is skipped when its digest is
        // stored and planning is idempotent, so this also finishes a run that crashed (or
        // whose scheduler died) after generating.
        let mut stopped = stop.clone();
        if let Some(tick) = previous_run(&config.schedule, Utc::now()) {
            tracing::info!(message = "Catching up on the latest run", tick = %tick);
            run_tick_retrying(config, store, engine, metrics, tick, &stop).await;
        }
        while !*stop.borrow() {
            let Some(next) = next_run(&config.schedule, Utc::now()) else {
                tracing::error!(message = "The schedule has no future run", cron = %config.schedule.expression);
                break;
            };
            tracing::info!(message = "Next run scheduled", at = %next);
            metrics.next_run(next.timestamp());
            let wait = (next - Utc::now()).to_std().unwrap_or_default();
            tokio::select! {
                _ = tokio::time::sleep(wait) => run_tick_retrying(config, store, engine, metrics, next, &stop).await,
                Some(()) = runs.recv() => {
                    let tick = previous_run(&config.schedule, Utc::now()).unwrap_or_else(Utc::now);
                    tracing::info!(message = "Run requested by an admin", tick = %tick);
                    log_tick_error(run_tick(config, store, engine, metrics, tick).await);
                }
                _ = stopped.wait_for(|stop| *stop) => break,
            }
        }
        let deadline = tokio::time::Instant::now() + config.daemon.shutdown_grace;
        let mut failure = None;
        if let Some(bot) = polling {
            failure = failure.or(stop_within("Telegram bot", bot, deadline).await);
        }
        if let Some(gateway) = gateway {
            // A gateway that failed (bad token, network) has been logged; it does not fail
            // the run.
            if let Some(error) = stop_within("Discord gateway", gateway, deadline).await {
                tracing::warn!(message = "Discord gateway ended", error = %format!("{error:#}"));
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// Waits for one background task until `deadline`, then cuts it off with a warning. Returns
/// the task's error, if it ended with one.
async fn stop_within<T, E: Into<anyhow::Error>>(
    name: &str,
    task: tokio::task::JoinHandle<Result<T, E>>,
    deadline: tokio::time::Instant,
) -> Option<anyhow::Error> {
    let abort = task.abort_handle();
    match tokio::time::timeout_at(deadline, task).await {
        Ok(Ok(Ok(_))) => None,
        Ok(Ok(Err(error))) => Some(error.into()),
        Ok(Err(join)) if join.is_cancelled() => None,
        Ok(Err(join)) => Some(anyhow::anyhow!("{name} panicked: {join}")),
        Err(_) => {
            abort.abort();
            tracing::warn!(
                message = "A task did not stop within the shutdown grace period (daemon.shutdown_grace_secs); it was cut off",
                task = name
            );
            None
        }
    }
}

fn log_tick_error(result: anyhow::Result<()>) {
    if let Err(error) = result {
        tracing::error!(message = "Scheduled run failed; the next tick will try again", error = %format!("{error:#}"));
    }
}

/// First wait before a tick whose sources failed is tried again; it doubles up to the cap.
const SOURCES_RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(60);
const SOURCES_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// A tick on which too few sources answered is tried again with backoff until the next
/// tick is due (a failed day is retried, never stored as a quiet one); any other error waits
/// for the next tick.
async fn run_tick_retrying(
    config: &Config,
    store: &Store,
    engine: &Engine,
    metrics: &Metrics,
    tick: DateTime<Utc>,
    shutdown: &watch::Receiver<bool>,
) {
    let deadline = next_run(&config.schedule, tick);
    let mut delay = SOURCES_RETRY_FIRST;
    loop {
        let result = run_tick(config, store, engine, metrics, tick).await;
        let Err(error) = &result else {
            return;
        };
        if error.downcast_ref::<pipeline::SourcesFailed>().is_none() {
            return log_tick_error(result);
        }
        let retry_at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
        if deadline.is_some_and(|d| retry_at >= d) {
            tracing::error!(message = "Too few sources answered; giving up on this run before the next one", error = %format!("{error:#}"));
            return;
        }
        tracing::warn!(message = "Too few sources answered; nothing stored, trying again", in_secs = delay.as_secs(), error = %format!("{error:#}"));
        let mut stop = shutdown.clone();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
        delay = (delay * 2).min(SOURCES_RETRY_MAX);
    }
}

/// Generates the digest of the window ending at `tick` (unless stored) and plans it.
async fn run_tick(
    config: &Config,
    store: &Store,
    engine: &Engine,
    metrics: &Metrics,
    tick: DateTime<Utc>,
) -> anyhow::Result<()> {
    let (date, window) = digest::window_ending(tick, config);
    prepare(config, store, engine, metrics, date, window).await
}

async fn prepare(
    config: &Config,
    store: &Store,
    engine: &Engine,
    metrics: &Metrics,
    date: NaiveDate,
    window: Window,
) -> anyhow::Result<()> {
    let digest = match store.load_digest(date).await? {
        Some(d) => d,
        None => {
            let d = match pipeline::generate_window(config, store, date, window, &|_| {}).await {
                Ok(d) => d,
                Err(error) => {
                    if let Some(failed) = error.downcast_ref::<pipeline::SourcesFailed>() {
                        for f in &failed.failed {
                            metrics.fetch_failure(&f.source);
                        }
                    }
                    return Err(error);
                }
            };
            metrics.digest_generated(Utc::now().timestamp());
            if let Some(usage) = &d.llm_usage {
                metrics.llm_usage(usage);
            }
            for failed in &d.failed_sources {
                metrics.fetch_failure(&failed.source);
            }
            tracing::info!(message = "Digest generated", %date, events = d.events().count(), failed_sources = d.failed_sources.len());
            d
        }
    };
    engine.plan(&digest).await?;
    Ok(())
}

fn spawn_signal_handler(shutdown: Arc<watch::Sender<bool>>) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler installs");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!(message = "Shutdown signal received");
        let _ = shutdown.send(true);
    });
}

/// Sets up the Telegram bot (getMe, the command menu, and setWebhook when `webhook` is
/// given), retrying with backoff until it works: without DNS or with Telegram down, the rest
/// of the daemon runs and `/healthz` names the bot meanwhile. False when stopped first.
async fn set_up_telegram(
    bot: &crate::bot::telegram::TelegramBot,
    webhook: Option<&url::Url>,
    engine: &Engine,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    const LINK: &str = "telegram bot";
    let mut backoff = Backoff::default();
    loop {
        let ready = async {
            bot.init().await?;
            match webhook {
                Some(url) => bot.use_webhook(url).await,
                None => Ok(()),
            }
        };
        match ready.await {
            Ok(()) => {
                engine.health().link_up(LINK);
                if let Some(url) = webhook {
                    tracing::info!(message = "Telegram bot receiving commands by webhook", url = %url);
                }
                return true;
            }
            Err(error) => {
                let wait = backoff.next();
                let error = crate::channels::telegram::redact_token(&format!("{error:#}"));
                tracing::error!(message = "Telegram bot cannot start; retrying", wait_secs = wait.as_secs(), %error);
                engine.health().link_down(
                    LINK,
                    &format!("not set up (retrying with backoff): {error}"),
                    Utc::now(),
                );
                if !sleep_unless_stopped(wait, stop).await {
                    return false;
                }
            }
        }
    }
}

/// Keeps the Discord gateway connected until stopped: each failure (no DNS, Discord down,
/// a session that ends) is retried with backoff, and `/healthz` names the gateway until a
/// session is ready again.
async fn keep_discord_gateway(
    config: Arc<Config>,
    store: Store,
    engine: Arc<Engine>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    const LINK: &str = "discord gateway";
    let mut backoff = Backoff::default();
    while !*stop.borrow() {
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on_session = {
            let (engine, ready) = (engine.clone(), ready.clone());
            Box::new(move |session: Result<(), String>| match session {
                Ok(()) => {
                    ready.store(true, std::sync::atomic::Ordering::Relaxed);
                    engine.health().link_up(LINK);
                }
                // serenity reconnects on its own from here (every 5 s).
                Err(reason) => engine.health().link_down(
                    LINK,
                    &format!("not connected (retrying): {reason}"),
                    Utc::now(),
                ),
            })
        };
        let ended = crate::bot::discord::run_gateway(
            config.clone(),
            store.clone(),
            on_session,
            stop.clone(),
        )
        .await;
        if *stop.borrow() {
            break;
        }
        if ready.load(std::sync::atomic::Ordering::Relaxed) {
            // A session that worked: the next failure starts the backoff over.
            backoff = Backoff::default();
        }
        let wait = backoff.next();
        let error = match ended {
            Ok(()) => "the session ended".to_string(),
            Err(error) => format!("{error:#}"),
        };
        tracing::error!(message = "Discord gateway not connected; retrying", wait_secs = wait.as_secs(), %error);
        engine.health().link_down(
            LINK,
            &format!("not connected (retrying with backoff): {error}"),
            Utc::now(),
        );
        if !sleep_unless_stopped(wait, &mut stop).await {
            break;
        }
    }
    Ok(())
}

/// Waits between attempts to reach a platform: 30 s, doubling to 10 min.
struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(Duration::from_secs(30))
    }
}

impl Backoff {
    fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(600));
        wait
    }
}

/// Sleeps for `wait`; false when stopped first.
async fn sleep_unless_stopped(wait: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = stop.wait_for(|stop| *stop) => false,
    }
}

/// The SQLite file this process opened, by device and inode: the lease lives in that file,
/// so when the file at `storage.path` is deleted or replaced, the lease this process renews
/// no longer guards anything (a second daemon started on the path would find no lease in
/// its new file and schedule too).
struct DatabaseFile {
    path: std::path::PathBuf,
    identity: Option<(u64, u64)>,
}

impl DatabaseFile {
    fn of(path: &std::path::Path) -> DatabaseFile {
        DatabaseFile {
            path: path.to_path_buf(),
            identity: DatabaseFile::identity(path),
        }
    }

    fn identity(path: &std::path::Path) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }

    /// Why the file is no longer the one opened, if it is not.
    fn gone(&self) -> Option<&'static str> {
        match (self.identity, DatabaseFile::identity(&self.path)) {
            (Some(_), None) => Some("deleted"),
            (Some(opened), Some(now)) if opened != now => Some("replaced"),
            _ => None,
        }
    }
}

/// Renews the lease at a third of its lifetime; losing it sends `lost` (on SQLite that is
/// the shutdown signal: a process that lost the database's lease stops). So does the
/// database file being deleted or replaced under the running process.
fn spawn_lease_renewal(
    store: Store,
    holder: String,
    ttl: i64,
    lost: Arc<watch::Sender<bool>>,
    file: Option<DatabaseFile>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = Duration::from_secs((ttl / 3).max(1) as u64);
        loop {
            tokio::time::sleep(period).await;
            if let Some((file, what)) = file.as_ref().and_then(|f| Some((f, f.gone()?))) {
                tracing::error!(
                    message = "The database file at storage.path was deleted or replaced while this daemon ran; stopping, so that a daemon started on the new file is the only scheduler. Restore the file or start kdigest again",
                    path = %file.path.display(),
                    what
                );
                DATABASE_GONE.store(true, std::sync::atomic::Ordering::Relaxed);
                let _ = lost.send(true);
                return;
            }
            match store.try_lease(LEASE, &holder, ttl, Utc::now()).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::error!(message = "Lost the scheduler lease to another process");
                    let _ = lost.send(true);
                    return;
                }
                Err(error) => tracing::warn!(message = "Cannot renew the scheduler lease", %error),
            }
        }
    })
}
