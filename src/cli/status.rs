//! `kdigest status`: last and next run, deliveries of the latest digest, disabled subscribers.

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::schedule::next_run;
use crate::store::Store;
use crate::subscriber::Status;

pub async fn run(config: &Config, store: Option<&Store>) -> anyhow::Result<()> {
    let now = Utc::now();
    let Some(store) = store else {
        println!(
            "Last digest: none yet (no database at {})",
            config.storage.describe()
        );
        print_next_run(config, now);
        println!("Daemon: not running");
        return Ok(());
    };
    match store.latest_digest().await? {
        Some(d) => {
            println!(
                "Last digest: {} ({} events, {} failed sources, mode {})",
                d.date,
                d.events().count(),
                d.failed_sources.len(),
                d.generation_mode
            );
            let c = store.delivery_counts(d.date).await?;
            println!(
                "Deliveries for {}: {} pending, {} sending, {} sent, {} failed",
                d.date, c.pending, c.sending, c.sent, c.failed
            );
        }
        None => println!("Last digest: none yet"),
    }
    print_next_run(config, now);
    match store.lease_holder(crate::daemon::lease::LEASE).await? {
        Some((holder, until)) if until >= now.timestamp() => {
            let until =
                DateTime::from_timestamp(until, 0).map_or_else(String::new, |t| t.to_rfc3339());
            // A lease outlives a kill -9; a holder on this host that no longer exists is
            // not running, and the next `kdigest run` takes its lease over at once.
            if crate::daemon::lease::holder_is_dead(&holder) {
                println!(
                    "Daemon: not running (its last holder {holder} died without releasing the lease, which lapses at {until}; `kdigest run` takes it over at once)"
                );
            } else {
                println!("Daemon: running ({holder}, lease until {until})");
            }
        }
        _ => println!("Daemon: not running"),
    }
    // Every instance heartbeats; the ones heard from lately are alive.
    let recent = now
        - chrono::Duration::from_std(crate::daemon::lease::HEARTBEAT_EVERY * 3).unwrap_or_default();
    let instances = store.live_instances(recent).await?;
    let scheduler = store
        .lease_holder(crate::daemon::lease::LEASE)
        .await?
        .filter(|(_, until)| *until >= now.timestamp())
        .map(|(holder, _)| holder);
    println!("Instances: {} live", instances.len());
    for i in &instances {
        let elected = if scheduler.as_deref() == Some(i.id.as_str()) {
            ", holds the scheduler"
        } else {
            ""
        };
        let started =
            DateTime::from_timestamp(i.started_at, 0).map_or_else(String::new, |t| t.to_rfc3339());
        println!(
            "  {} roles {} since {started}, last heard {} s ago{elected}",
            i.id,
            i.roles,
            (now.timestamp() - i.heartbeat_at).max(0)
        );
    }
    let disabled: Vec<_> = store
        .subscribers()
        .await?
        .into_iter()
        .filter_map(|s| match &s.status {
            Status::Disabled(reason) => Some(format!("  #{} {}: {reason}", s.id, s.address)),
            _ => None,
        })
        .collect();
    println!("Disabled subscribers: {}", disabled.len());
    for line in disabled {
        println!("{line}");
    }
    Ok(())
}

fn print_next_run(config: &Config, now: DateTime<Utc>) {
    match next_run(&config.schedule, now) {
        Some(t) => println!(
            "Next run: {} (cron \"{}\" in {})",
            t.with_timezone(&config.schedule.timezone).to_rfc3339(),
            config.schedule.expression,
            config.schedule.timezone
        ),
        None => println!(
            "Next run: none (cron \"{}\" has no future run)",
            config.schedule.expression
        ),
    }
}
