//! Which connections the web server keeps when it is full. At the cap, a new connection
//! closes the oldest idle one (no request in progress: a keep-alive client between
//! requests, or one that has sent nothing yet) and is admitted, as mature servers reuse
//! idle keep-alive connections under pressure; only when every connection is serving a
//! request is the new one closed. Idle clients therefore cannot lock `/healthz` out.
//! The cap itself stays below the open-file limit with a reserve for the database, the
//! outbound clients and the logs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// File descriptors kept for everything but inbound connections: the database and its
/// journal, outbound HTTP and SMTP pools, DNS, logs. A quarter of the limit, at least 64.
fn fd_reserve(limit: u64) -> u64 {
    (limit / 4).max(64)
}

/// How many connections may be open at once: `configured`, lowered to fit under the
/// process's open-file limit with [`fd_reserve`] to spare (at least 8).
pub fn connection_cap(configured: usize, fd_limit: Option<u64>) -> usize {
    match fd_limit {
        Some(limit) => {
            let budget = limit.saturating_sub(fd_reserve(limit)).max(8);
            configured.min(usize::try_from(budget).unwrap_or(usize::MAX))
        }
        None => configured,
    }
}

/// Raises the soft open-file limit to the hard one (as Go's runtime does at start: the soft
/// default of 1,024 is a relic of `select`) and returns the limit now in force.
#[cfg(unix)]
pub fn raise_fd_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    Some(limit.rlim_cur)
}

#[cfg(not(unix))]
pub fn raise_fd_limit() -> Option<u64> {
    None
}

/// One admitted connection: the server marks it busy while a request is in progress, and
/// it is told to close when a newer connection needs its place.
pub struct Admitted {
    id: u64,
    /// Requests in progress (0 or 1 on HTTP/1.1).
    busy: AtomicUsize,
    evict: Notify,
    registry: Arc<Connections>,
}

impl Admitted {
    /// Marks a request in progress until the returned guard is dropped.
    pub fn serving(self: &Arc<Self>) -> Serving {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Serving(self.clone())
    }

    /// Resolves when the server needs this connection's place.
    pub async fn evicted(&self) {
        self.evict.notified().await
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.registry.lock().by_age.remove(&self.id);
    }
}

/// A request in progress on a connection.
pub struct Serving(Arc<Admitted>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The open connections, oldest first.
pub struct Connections {
    cap: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    last_id: u64,
    /// Ids grow with each admission, so the first entry is the oldest connection.
    by_age: BTreeMap<u64, std::sync::Weak<Admitted>>,
}

/// Why a connection was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub struct Full {
    pub cap: usize,
}

impl Connections {
    pub fn new(cap: usize) -> Arc<Connections> {
        Arc::new(Connections {
            cap,
            open: Mutex::new(Open::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn open(&self) -> usize {
        self.lock().by_age.len()
    }

    /// Admits a new connection, closing the oldest idle one when at the cap.
    pub fn admit(self: &Arc<Self>) -> Result<Arc<Admitted>, Full> {
        if self.open() >= self.cap && !self.evict_oldest_idle() {
            return Err(Full { cap: self.cap });
        }
        let mut open = self.lock();
        open.last_id += 1;
        let admitted = Arc::new(Admitted {
            id: open.last_id,
            busy: AtomicUsize::new(0),
            evict: Notify::new(),
            registry: self.clone(),
        });
        open.by_age.insert(admitted.id, Arc::downgrade(&admitted));
        Ok(admitted)
    }

    /// Tells the oldest idle connection to close and forgets it; false when every
    /// connection is serving a request. Also used when the process runs out of files.
    pub fn evict_oldest_idle(&self) -> bool {
        let mut open = self.lock();
        let victim = open.by_age.iter().find_map(|(id, conn)| {
            let conn = conn.upgrade()?;
            (conn.busy.load(Ordering::SeqCst) == 0).then_some((*id, conn))
        });
        let Some((id, conn)) = victim else {
            return false;
        };
        open.by_age.remove(&id);
        // notify_one keeps the permit if the connection is not waiting yet.
        conn.evict.notify_one();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn told_to_close(connection: &Admitted) -> bool {
        tokio::time::timeout(std::time::Duration::from_millis(1), connection.evicted())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let connections = Connections::new(3);
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        let third = connections.admit().unwrap();
        // The oldest is serving a request: the second, idle, is the one told to close.
        let _serving = first.serving();
        let fourth = connections.admit().unwrap();
        assert_eq!(connections.open(), 3);
        assert!(told_to_close(&second).await);
        assert!(!told_to_close(&first).await);
        assert!(!told_to_close(&third).await);
        drop(second);
        assert_eq!(connections.open(), 3);
        drop(fourth);
        assert_eq!(connections.open(), 2);
    }

    #[test]
    fn when_every_connection_is_serving_a_new_one_is_refused() {
        let connections = Connections::new(2);
        let a = connections.admit().unwrap();
        let b = connections.admit().unwrap();
        let (_a, _b) = (a.serving(), b.serving());
        assert_eq!(connections.admit().err(), Some(Full { cap: 2 }));
        drop(_a);
        assert!(connections.admit().is_ok());
    }

    #[test]
    fn the_cap_leaves_a_reserve_of_file_descriptors() {
        assert_eq!(connection_cap(512, None), 512);
        assert_eq!(connection_cap(512, Some(20_000)), 512);
        assert_eq!(connection_cap(10_000, Some(1_024)), 768);
        assert_eq!(connection_cap(512, Some(256)), 192);
        assert_eq!(connection_cap(512, Some(40)), 8);
    }
}
