//! kdigest: a daily news digest for the GPU-kernel and ML-compiler world.
//!
//! Modules in reading order. The pure core (no I/O, no clock) is the `kdigest-core` crate
//! (crates/core: `settings`, `model`, `text`, `parse`, `cluster`, `classify`, `learned`,
//! `score`, `digest`, `locale`, `render`, `schedule`, `crontab`, `tokens`, `archive`,
//! `followup`, `weekly`, `feedback`, `release_notes`, `redact`, the pure parts of
//! `summarize`), re-exported here; with the command parser in `bot`.
//! The edges do I/O: `fetch` (HTTP and files), `store` (SQLite or Postgres),
//! `summarize::llm` (chat-completions API), `pipeline` (runs one digest), `deliver` (the
//! outbox engine), `channels` (one folder per channel: address, render, sender, bot; one
//! registry), `daemon` (`kdigest run`), `web`, `demo` and `cli`.
//!
//! ```text
//! config -> fetch -> parse -> store(items) -> cluster -> classify -> score
//!        -> summarize -> digest (assemble, filter) -> store(digest) -> render
//! ```

// A build without some channels (cargo features, one per channel) leaves helpers that only
// those channels' bots use idle. The default build, every channel, is the one clippy holds
// to `-D warnings`; a partial build is only required to build.
#![cfg_attr(not(feature = "all-channels"), allow(unused))]

// The pure core is its own crate (crates/core, no I/O dependencies); its modules are
// re-exported here so the application and its users name them as before
// (`kdigest::model::Digest`, `crate::digest::assemble`).
pub use kdigest_core::{
    archive, classify, cluster, crontab, digest, feedback, following, followup, learned, locale,
    model, parse, redact, release_notes, render, schedule, score, settings, text, tokens, weekly,
};
// The outbound channels are their own crate too (crates/channels), with the private-network
// guard every outbound client keeps.
pub use kdigest_channels as channels;
pub use kdigest_channels::netguard;

pub mod bot;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod deliver;
pub mod demo;
pub mod eval;
pub mod fetch;
pub mod instance;
pub mod mcp;
pub mod metrics;
pub mod pipeline;
pub mod sources;
pub mod store;
pub mod subscriber;
pub mod summarize;
pub mod templates;
pub mod web;
