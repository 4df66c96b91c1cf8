//! The pure parts of summarizing: extractive texts (the default, offline and
//! deterministic), figures and plain change lines said in the reader's language, and the
//! LLM's requests, reply schema and checks. The application's `summarize` module sends the
//! requests (its `llm.rs`) and re-exports these.

pub mod extractive;
pub mod gloss;
pub mod guard;
pub mod numbers;
pub mod prompt;
pub mod rank;
