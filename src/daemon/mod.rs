//! `kdigest run`: the scheduler, the delivery workers, the web site and the metrics
//! endpoint, with graceful shutdown on SIGINT/SIGTERM. On SQLite one process does all of
//! it under a lease that keeps a second process away. On Postgres any number of instances
//! run (`--role` splits the work): every instance delivers and serves, one at a time is
//! elected scheduler by the lease, and another takes over within `daemon.lease_secs` when
//! it dies.

mod bots;
pub mod lease;
mod scheduler;
mod site;

use std::sync::Arc;
use std::time::Duration;

use chrono::{NaiveDate, Utc};
use tokio::sync::watch;

use crate::config::Config;
use crate::deliver::engine::{Engine, Until};
use crate::digest;
use crate::instance::host_name;
use crate::metrics::{DATABASE_GONE, Metrics};
use crate::model::Window;
use crate::pipeline;
use crate::schedule::{next_run, previous_run};
use crate::store::{Backend, Store};
use bots::*;
use lease::*;
use scheduler::*;

/// `--once`: how long to wait for retries that are due soon before exiting.
const ONCE_MAX_WAIT: Duration = Duration::from_secs(60);

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
