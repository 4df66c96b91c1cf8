//! `kdigest run`: the scheduler, the delivery workers and the metrics endpoint, under a
//! single-instance lease, with graceful shutdown on SIGINT/SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use tokio::sync::watch;

use crate::config::{Config, Secret};
use crate::deliver::engine::{Engine, Until};
use crate::digest;
use crate::metrics::Metrics;
use crate::model::Window;
use crate::pipeline;
use crate::schedule::{next_run, previous_run};
use crate::store::Store;

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

pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

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

pub async fn run(config: Config, mode: Mode) -> anyhow::Result<()> {
    let store = Store::connect(&config.storage).await?;
    let holder = holder_id();
    let ttl = config.daemon.lease.as_secs() as i64;
    acquire_lease(&store, &holder, ttl).await?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let shutdown_tx = Arc::new(shutdown_tx);
    spawn_signal_handler(shutdown_tx.clone());
    let renewer = spawn_lease_renewal(store.clone(), holder.clone(), ttl, shutdown_tx.clone());

    let requeued = store.requeue_in_flight().await?;
    if requeued > 0 {
        tracing::warn!(
            message = "Re-queued deliveries left in flight by an earlier process",
            requeued
        );
    }
    let metrics = Arc::new(Metrics::default());
    let engine = Arc::new(Engine::new(store.clone(), &config, metrics.clone())?);
    let result = match mode {
        Mode::Once { date } => {
            run_once(&config, &store, &engine, &metrics, date, shutdown_rx).await
        }
        Mode::Forever => run_forever(&config, &store, &engine, &metrics, shutdown_rx).await,
    };
    renewer.abort();
    store.release_lease(LEASE, &holder).await?;
    store.close().await;
    result
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
    engine
        .run(
            Until::Idle {
                max_wait: ONCE_MAX_WAIT,
            },
            shutdown,
        )
        .await
}

async fn run_forever(
    config: &Config,
    store: &Store,
    engine: &Arc<Engine>,
    metrics: &Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
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
    tracing::info!(message = "Serving /healthz and /metrics", address = %bound);
    // Admin /run requests; capacity one, so a request while one is pending is refused.
    let (run_tx, mut run_rx) = tokio::sync::mpsc::channel::<()>(1);
    let (bot, webhook_bot) = start_telegram_bot(
        config,
        store,
        run_tx,
        engine.limits(crate::subscriber::Channel::Telegram),
        shutdown.clone(),
    )
    .await;
    let mut web_shutdown = shutdown.clone();
    // Discord commands: the HTTP endpoint when a public key is set, else the gateway.
    let discord_bot = config.discord.public_key.is_some().then(|| {
        Arc::new(crate::bot::discord::DiscordBot::new(
            store.clone(),
            Arc::new(config.clone()),
        ))
    });
    let gateway = (discord_bot.is_none() && Secret::from_env(&config.discord.token_env, "").is_ok()).then(|| {
        tracing::info!(message = "Discord bot connecting to the gateway");
        let (config, store, mut shutdown) = (Arc::new(config.clone()), store.clone(), shutdown.clone());
        tokio::spawn(async move {
            // Reconnect after failures (network, Discord outages) until shutdown.
            while !*shutdown.borrow() {
                if let Err(error) = crate::bot::discord::run_gateway(config.clone(), store.clone(), shutdown.clone()).await {
                    tracing::error!(message = "Discord gateway failed; reconnecting in 60 s", error = %format!("{error:#}"));
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                    _ = shutdown.wait_for(|stop| *stop) => {}
                }
            }
            Ok::<(), anyhow::Error>(())
        })
    });
    if config.discord.register_commands && Secret::from_env(&config.discord.token_env, "").is_ok() {
        // In the background: a slow Discord must not hold up the daemon's start.
        let config = config.clone();
        tokio::spawn(async move {
            if let Err(error) = crate::bot::discord::register_commands(&config).await {
                tracing::error!(message = "Cannot register the Discord slash commands", error = %format!("{error:#}"));
            }
        });
    }
    let account = match crate::tokens::secret_from_env()? {
        Some(secret) => {
            // The delivery engine's mailer (Engine::new logged why there is none). Without
            // it sign-up answers 503; unsubscribe links still work.
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
    let services = crate::web::Services {
        telegram: webhook_bot,
        discord: discord_bot,
        account,
        blog: Some(blog.clone()),
        delivery: Some(engine.clone()),
    };
    let router = crate::web::router(metrics.clone(), services);
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
    let web = tokio::spawn(crate::web::serve_with(
        listener,
        router,
        config.daemon.web,
        async move {
            let _ = web_shutdown.wait_for(|stop| *stop).await;
        },
    ));
    let workers = {
        let engine = engine.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { engine.run(Until::Shutdown, shutdown).await })
    };

    // Catch-up: the most recent tick, once. Generation is skipped when its digest is stored
    // and planning is idempotent, so this also finishes a run that crashed after generating.
    if let Some(tick) = previous_run(&config.schedule, Utc::now()) {
        tracing::info!(message = "Catching up on the latest run", tick = %tick);
        run_tick_retrying(config, store, engine, metrics, tick, &shutdown).await;
    }
    loop {
        let Some(next) = next_run(&config.schedule, Utc::now()) else {
            tracing::error!(message = "The schedule has no future run", cron = %config.schedule.expression);
            break;
        };
        tracing::info!(message = "Next run scheduled", at = %next);
        metrics.next_run(next.timestamp());
        let wait = (next - Utc::now()).to_std().unwrap_or_default();
        let retry_shutdown = shutdown.clone();
        tokio::select! {
            _ = tokio::time::sleep(wait) => run_tick_retrying(config, store, engine, metrics, next, &retry_shutdown).await,
            Some(()) = run_rx.recv() => {
                let tick = previous_run(&config.schedule, Utc::now()).unwrap_or_else(Utc::now);
                tracing::info!(message = "Run requested by an admin", tick = %tick);
                log_tick_error(run_tick(config, store, engine, metrics, tick).await);
            }
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    let grace = config.daemon.shutdown_grace;
    tracing::info!(
        message = "Shutting down: in-flight deliveries finish, nothing new is claimed",
        grace_secs = grace.as_secs()
    );
    // Every task gets the same grace period, counted from now; what is still running then
    // is cut off, so a gateway that cannot connect never keeps the process (and its lease).
    let deadline = tokio::time::Instant::now() + grace;
    let mut failure = None;
    failure = failure.or(stop_within("delivery workers", workers, deadline).await);
    failure = failure.or(stop_within("web server", web, deadline).await);
    flusher.abort();
    if let Err(error) = blog.flush_reads().await {
        tracing::warn!(message = "Page views of the last seconds were not stored", error = %format!("{error:#}"));
    }
    if let Some(bot) = bot {
        failure = failure.or(stop_within("Telegram bot", bot, deadline).await);
    }
    if let Some(gateway) = gateway {
        // A gateway that failed (bad token, network) has been logged; it does not fail the run.
        if let Some(error) = stop_within("Discord gateway", gateway, deadline).await {
            tracing::warn!(message = "Discord gateway ended", error = %format!("{error:#}"));
        }
    }
    if let Some(error) = failure {
        return Err(error);
    }
    Ok(())
}

type BotTask = Option<tokio::task::JoinHandle<anyhow::Result<()>>>;

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

/// The Telegram command bot, when a token is set and `telegram.bot` is on: a polling task,
/// or (with `telegram.webhook_url`) the bot for the web server's webhook route.
async fn start_telegram_bot(
    config: &Config,
    store: &Store,
    runs: crate::bot::handlers::RunTrigger,
    limits: Arc<crate::deliver::limits::Limits>,
    shutdown: watch::Receiver<bool>,
) -> (BotTask, Option<Arc<crate::bot::telegram::TelegramBot>>) {
    if !config.telegram.bot {
        return (None, None);
    }
    let bot = match crate::deliver::telegram::bot(&config.telegram) {
        Ok(bot) => bot,
        Err(_) => {
            tracing::info!(message = "No Telegram token; the Telegram bot is off", variable = %config.telegram.token_env);
            return (None, None);
        }
    };
    let mut telegram = crate::bot::telegram::TelegramBot::new(
        bot,
        store.clone(),
        Arc::new(config.clone()),
        Some(runs),
    );
    telegram.share_limits(limits);
    match &config.telegram.webhook_url {
        None => {
            tracing::info!(message = "Telegram bot polling for commands");
            (Some(tokio::spawn(telegram.poll(shutdown))), None)
        }
        Some(url) => {
            let ready = async {
                telegram.init().await?;
                telegram.use_webhook(url).await
            };
            match ready.await {
                Ok(()) => {
                    tracing::info!(message = "Telegram bot receiving commands by webhook", url = %url);
                    (None, Some(Arc::new(telegram)))
                }
                Err(error) => {
                    tracing::error!(message = "Cannot set up the Telegram webhook; the bot is off", error = %format!("{error:#}"));
                    (None, None)
                }
            }
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

/// Renews the lease at a third of its lifetime; losing it stops this process.
fn spawn_lease_renewal(
    store: Store,
    holder: String,
    ttl: i64,
    shutdown: Arc<watch::Sender<bool>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = Duration::from_secs((ttl / 3).max(1) as u64);
        loop {
            tokio::time::sleep(period).await;
            match store.try_lease(LEASE, &holder, ttl, Utc::now()).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::error!(
                        message = "Lost the scheduler lease to another process; stopping"
                    );
                    let _ = shutdown.send(true);
                    return;
                }
                Err(error) => tracing::warn!(message = "Cannot renew the scheduler lease", %error),
            }
        }
    })
}
