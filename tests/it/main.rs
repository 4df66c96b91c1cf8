//! One integration-test binary: real HTTP (reqwest) against loopback servers, real SQLite.

mod blog;
mod browser;
mod cli;
mod cluster;
mod delivery;
mod discord;
mod email;
mod engines;
mod eval;
mod faults;
mod feedback;
mod fixture_day;
mod followup;
mod helpers;
mod llm;
mod outbox;
mod pg;
mod reference_feeds;
mod renders;
mod robots;
mod robots_mock;
mod signup;
mod smtp;
mod sources;
mod telegram;
mod telegram_mock;
