//! The scheduler's duties, held by one instance at a time: waiting to be elected, the
//! catch-up and scheduled ticks (a failed day retried with backoff), admin run requests,
//! and the bots' long-running tasks.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use tokio::sync::watch;

use super::*;

/// The scheduler's duties, held by one instance at a time: the catch-up and scheduled
/// ticks, admin run requests, Telegram long polling and the Discord gateway.
pub(super) struct Scheduler<'a, 'b> {
    pub(super) instance: &'a Instance<'b>,
    pub(super) runs: crate::bot::handlers::RunTrigger,
}

impl Scheduler<'_, '_> {
    /// Until shutdown: on SQLite the lease is held already; on Postgres waits to be
    /// elected (the lease is free, lapsed, or its holder on this host is dead), serves
    /// while the lease is renewed, and stands by again when it is lost.
    pub(super) async fn standby(
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
        // The bots' long-running parts, when their channels are built and configured.
        let polling = start_telegram_polling(self.instance, &self.runs, &stop);
        let gateway = start_discord(self.instance, &stop);
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

pub(super) fn log_tick_error(result: anyhow::Result<()>) {
    if let Err(error) = result {
        tracing::error!(message = "Scheduled run failed; the next tick will try again", error = %format!("{error:#}"));
    }
}

/// First wait before a tick whose sources failed is tried again; it doubles up to the cap.
pub(super) const SOURCES_RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(60);

pub(super) const SOURCES_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// A tick on which too few sources answered is tried again with backoff until the next
/// tick is due (a failed day is retried, never stored as a quiet one); any other error waits
/// for the next tick.
pub(super) async fn run_tick_retrying(
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
pub(super) async fn run_tick(
    config: &Config,
    store: &Store,
    engine: &Engine,
    metrics: &Metrics,
    tick: DateTime<Utc>,
) -> anyhow::Result<()> {
    let (date, window) = digest::window_ending(tick, config);
    prepare(config, store, engine, metrics, date, window).await
}

pub(super) async fn prepare(
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
