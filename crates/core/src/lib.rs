//! kdigest-core: the pure stages of kdigest. Data in, data out: no file, network or
//! database access and no clock (times, templates and bytes are parameters; clippy's
//! `disallowed-methods` in crates/core/clippy.toml holds the line). Its Cargo.toml lists no
//! tokio, reqwest, sqlx, axum, hyper, teloxide, serenity or lettre.
//!
//! ```text
//! bytes -parse-> items -cluster-> events -classify(+learned)-> layers -score-> candidates
//!   -summarize (extractive; LLM prompts and reply checks)-> -digest (assemble, filter)->
//!   Digest -render-> md | html | json | email
//! ```

#![forbid(unsafe_code)]

pub mod archive;
pub mod classify;
pub mod cluster;
pub mod crontab;
pub mod digest;
pub mod feedback;
pub mod following;
pub mod followup;
pub mod learned;
pub mod locale;
pub mod model;
pub mod parse;
pub mod redact;
pub mod release_notes;
pub mod render;
pub mod schedule;
pub mod score;
pub mod settings;
pub mod summarize;
#[cfg(any(test, feature = "test-support"))]
pub mod testkit;
pub mod text;
pub mod tokens;
pub mod weekly;
