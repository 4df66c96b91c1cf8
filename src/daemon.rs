//! `kdigest run`: the scheduler, the delivery workers and the metrics endpoint, under a
//! single-instance lease, with graceful shutdown on SIGINT/SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::config::Config;
use crate::deliver::engine::{Engine, Until};
use crate::digest;
use crate::metrics::Metrics;
use crate::pipeline;
use crate::schedule::{next_run, previous_run};
use crate::store::Store;

pub const LEASE: &str = "scheduler";

/// Another process holds the lease.
#[derive(Debug, thiserror::Error)]
#[error("Another kdigest run ({holder}) is active until {until}; only one process may generate and deliver. Stop it or wait for its lease to lapse")]
pub struct LeaseHeld {
    pub holder: String,
    pub until: String,
}

/// `--once`: how long to wait for retries that are due soon before exiting.
const ONCE_MAX_WAIT: Duration = Duration::from_secs(60);

fn holder_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

pub async fn run(config: Config, once: bool) -> anyhow::Result<()> {
    let store = Store::open(&config.storage.path).await?;
    let holder = holder_id();
    let ttl = config.daemon.lease.as_secs() as i64;
    if !store.try_lease(LEASE, &holder, ttl, Utc::now()).await? {
        let (holder, until) = store.lease_holder(LEASE).await?.unwrap_or_default();
        let until = DateTime::from_timestamp(until, 0).map_or_else(String::new, |t| t.to_rfc3339());
        return Err(LeaseHeld { holder, until }.into());
    }
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let shutdown_tx = Arc::new(shutdown_tx);
    spawn_signal_handler(shutdown_tx.clone());
    let renewer = spawn_lease_renewal(store.clone(), holder.clone(), ttl, shutdown_tx.clone());

    let requeued = store.requeue_in_flight().await?;
    if requeued > 0 {
        tracing::warn!(message = "Re-queued deliveries left in flight by an earlier process", requeued);
    }
    let metrics = Arc::new(Metrics::default());
    let engine = Arc::new(Engine::new(store.clone(), &config, metrics.clone())?);
    let result = if once {
        run_once(&config, &store, &engine, &metrics, shutdown_rx).await
    } else {
        run_forever(&config, &store, &engine, &metrics, shutdown_rx).await
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
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let now = Utc::now();
    let tick = previous_run(&config.schedule, now).unwrap_or(now);
    run_tick(config, store, engine, metrics, tick).await?;
    engine.run(Until::Idle { max_wait: ONCE_MAX_WAIT }, shutdown).await
}

async fn run_forever(
    config: &Config,
    store: &Store,
    engine: &Arc<Engine>,
    metrics: &Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.daemon.listen).await.map_err(|e| {
        anyhow::anyhow!("Cannot listen on {} (daemon.listen): {e}", config.daemon.listen)
    })?;
    tracing::info!(message = "Serving /healthz and /metrics", address = %config.daemon.listen);
    let mut web_shutdown = shutdown.clone();
    let web = tokio::spawn(crate::web::serve(listener, metrics.clone(), async move {
        let _ = web_shutdown.wait_for(|stop| *stop).await;
    }));
    let workers = {
        let engine = engine.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { engine.run(Until::Shutdown, shutdown).await })
    };

    // Catch-up: the most recent tick, once, if its digest is missing.
    if let Some(tick) = previous_run(&config.schedule, Utc::now()) {
        let (date, _) = digest::window_ending(tick, config);
        if store.load_digest(date).await?.is_none() {
            tracing::info!(message = "Catching up on the missed run", tick = %tick);
            log_tick_error(run_tick(config, store, engine, metrics, tick).await);
        }
    }
    loop {
        let Some(next) = next_run(&config.schedule, Utc::now()) else {
            tracing::error!(message = "The schedule has no future run", cron = %config.schedule.expression);
            break;
        };
        tracing::info!(message = "Next run scheduled", at = %next);
        let wait = (next - Utc::now()).to_std().unwrap_or_default();
        tokio::select! {
            _ = tokio::time::sleep(wait) => log_tick_error(run_tick(config, store, engine, metrics, next).await),
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    tracing::info!(message = "Shutting down: in-flight deliveries finish, nothing new is claimed");
    workers.await??;
    web.await??;
    Ok(())
}

fn log_tick_error(result: anyhow::Result<()>) {
    if let Err(error) = result {
        tracing::error!(message = "Scheduled run failed; the next tick will try again", error = %format!("{error:#}"));
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
    let digest = match store.load_digest(date).await? {
        Some(d) => d,
        None => {
            let d = pipeline::generate_window(config, store, date, window, &|_| {}).await?;
            metrics.digest_generated(Utc::now().timestamp());
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
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
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
fn spawn_lease_renewal(store: Store, holder: String, ttl: i64, shutdown: Arc<watch::Sender<bool>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = Duration::from_secs((ttl / 3).max(1) as u64);
        loop {
            tokio::time::sleep(period).await;
            match store.try_lease(LEASE, &holder, ttl, Utc::now()).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::error!(message = "Lost the scheduler lease to another process; stopping");
                    let _ = shutdown.send(true);
                    return;
                }
                Err(error) => tracing::warn!(message = "Cannot renew the scheduler lease", %error),
            }
        }
    })
}
