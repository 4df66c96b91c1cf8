//! Managing sources: shorthands for stable feed URLs, the curated catalogue
//! (sources/catalogue.toml), OPML import and export, and the edits `kdigest sources
//! enable|import` make to the configuration file.

pub mod backoff;
pub mod catalogue;
pub mod config_file;
pub mod discover;
pub mod health;
pub mod opml;
