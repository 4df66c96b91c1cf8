//! Who this process is, for the names it leaves in shared state: the lease holder
//! (`daemon`) and the claim tokens of the delivery engine (`deliver`).

/// This machine's name: /etc/hostname, else $HOSTNAME, else "localhost".
pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}
