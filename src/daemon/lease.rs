//! The scheduler lease and the instance's heartbeat: on SQLite one process holds the lease
//! in the database file (renewed while that file is still the one opened); on Postgres the
//! lease elects the scheduler among instances.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::*;

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

pub(super) fn holder_id() -> String {
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
pub(super) async fn acquire_lease(store: &Store, holder: &str, ttl: i64) -> anyhow::Result<()> {
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

/// How often an instance records that it is alive; `kdigest status` lists the instances
/// heard from within three of these.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// Heartbeats this instance's row (see `kdigest status`) until aborted.
pub(super) fn spawn_heartbeat(
    store: Store,
    holder: String,
    role: Role,
) -> tokio::task::JoinHandle<()> {
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

/// The SQLite file this process opened, by device and inode: the lease lives in that file,
/// so when the file at `storage.path` is deleted or replaced, the lease this process renews
/// no longer guards anything (a second daemon started on the path would find no lease in
/// its new file and schedule too).
pub(super) struct DatabaseFile {
    path: std::path::PathBuf,
    identity: Option<(u64, u64)>,
}

impl DatabaseFile {
    pub(super) fn of(path: &std::path::Path) -> DatabaseFile {
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
pub(super) fn spawn_lease_renewal(
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
