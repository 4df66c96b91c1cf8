//! Configurations for tests and benches: the demo configuration (examples/demo.toml)
//! pointed at a feed server or at the bundled feeds on disk, with loopback receivers allowed.

use std::path::{Path, PathBuf};

use kdigest::config::Config;

use crate::feeds::repo_root;

/// The demo configuration (examples/demo.toml) pointed at `base` (the `/feeds` prefix
/// included), with its database in `dir`.
pub fn fixture_config(feeds_base: &str, dir: &Path, extra: &str) -> Config {
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", feeds_base);
    let extra = allowing_private_networks(extra);
    let mut config = Config::parse(&format!("{text}\n{extra}")).unwrap_or_else(|e| panic!("{e}"));
    config.storage.path = dir.join("kdigest.sqlite");
    config
}

/// The bundled sample feeds (examples/feeds) as a `file://` base for the sources.
pub fn disk_feeds_base() -> String {
    format!("file://{}", repo_root().join("examples/feeds").display())
}

/// `extra` TOML with `fetch.allow_private_networks` and `delivery.allow_private_networks`
/// on: every server of the tests listens on 127.0.0.1, which kdigest refuses by default.
pub fn allowing_private_networks(extra: &str) -> String {
    let mut out = extra.to_string();
    for table in ["fetch", "delivery"] {
        let header = format!("[{table}]\n");
        let allow = format!("{header}allow_private_networks = true\n");
        if out.starts_with(&header) || out.contains(&format!("\n{header}")) {
            out = out.replacen(&header, &allow, 1);
        } else {
            out.push_str(&format!("\n{allow}"));
        }
    }
    out
}

/// A config file's text for the binary: the demo configuration reading the bundled feeds
/// from disk, the database at `storage` (absolute, or relative to the file), and `extra`
/// TOML with loopback allowed.
pub fn file_config_text(storage: &str, extra: &str) -> String {
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", &disk_feeds_base());
    format!(
        "{text}\n[storage]\npath = \"{storage}\"\n{}",
        allowing_private_networks(extra)
    )
}

/// Writes [`file_config_text`] to `dir/config.toml`; its path.
pub fn write_file_config(dir: &Path, storage: &str, extra: &str) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, file_config_text(storage, extra)).unwrap();
    path
}
