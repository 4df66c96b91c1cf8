//! kdigest's test kit, for the integration tests (tests/it) and the benches only: one
//! [`TestApp`] builder (feed server, configuration, store, Telegram mock and LLM stand-in
//! wired in), and the loopback stand-ins the tests talk to — each written from the
//! platform's documentation or specification, enforcing its limits and error answers.
//!
//! It depends on the application crate, so it is a dev-dependency only; nothing in
//! `src/` may use it.

pub mod app;
pub mod config;
pub mod discord;
pub mod feeds;
pub mod fuzz;
pub mod llm;
pub mod matrix;
pub mod net;
pub mod ntfy;
pub mod pg;
pub mod robots;
pub mod smtp;
pub mod telegram;
pub mod webhook;

pub use app::TestApp;
