//! One integration-test binary: real HTTP (reqwest) against loopback servers, real SQLite.

mod architecture;
mod blog;
mod browser;
mod cli;
mod cluster;
mod compliance;
mod delivery;
mod discord;
mod email;
mod email_faults;
mod engines;
mod eval;
mod faults;
mod feedback;
mod fixture_day;
mod followup;
mod fuzz;
mod llm;
mod llm_guard;
mod matrix;
mod mcp;
mod morning;
mod ntfy;
mod outbox;
mod private_networks;
mod reference_feeds;
mod renders;
mod robots;
mod signup;
mod sources;
mod telegram;

/// The kdigest binary with `--config` and `args`, a clean environment for the config and
/// warn-level logs; callers add variables and run it. (Here, not in the test kit: only an
/// integration test knows where cargo built the binary.)
pub fn kdigest(config: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_kdigest"));
    c.arg("--config")
        .arg(config)
        .args(args)
        .env_remove("KDIGEST_CONFIG")
        .env("RUST_LOG", "warn");
    c
}
