//! The fetch progress bar of one-shot commands, and the log writer that keeps log lines off
//! it: a warning is printed above the bar, never onto its line.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use chrono::NaiveDate;

use crate::config::Config;
use crate::model::Digest;
use crate::pipeline;
use crate::store::Store;

/// The bar on screen, if any: the log writer suspends it around each log line.
static ACTIVE: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

/// stderr for tracing; while a bar is shown, each line is written with the bar cleared and
/// redrawn after it.
#[derive(Default)]
pub struct LogWriter;

impl Write for LogWriter {
    /// One formatted log event at a time (tracing-subscriber writes each event whole),
    /// without secrets: see `redact`.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let clean = crate::redact::redact(&text);
        let bar = ACTIVE.lock().ok().and_then(|b| b.clone());
        match bar {
            Some(bar) => bar.suspend(|| std::io::stderr().write_all(clean.as_bytes()))?,
            None => std::io::stderr().write_all(clean.as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Generates with a progress bar on stderr when stderr is a terminal; quiet otherwise. The
/// bar names the sources still pending, which is what a user waits for.
pub async fn generate(config: &Config, store: &Store, date: NaiveDate) -> anyhow::Result<Digest> {
    if !std::io::stderr().is_terminal() {
        return pipeline::generate(config, store, date, &|_| {}).await;
    }
    let bar = indicatif::ProgressBar::new(config.sources.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} fetched {pos}/{len} sources · {wide_msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let pending = Mutex::new(
        config
            .sources
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>(),
    );
    bar.set_message(waiting_for(&pending.lock().expect("pending lock")));
    let tick = |name: &str| {
        let mut pending = pending.lock().expect("pending lock");
        if let Some(i) = pending.iter().position(|p| p == name) {
            pending.remove(i);
        }
        bar.inc(1);
        bar.set_message(waiting_for(&pending));
    };
    *ACTIVE.lock().expect("bar lock") = Some(bar.clone());
    let result = pipeline::generate(config, store, date, &tick).await;
    *ACTIVE.lock().expect("bar lock") = None;
    bar.finish_and_clear();
    result
}

/// "waiting for a, b and 3 more" (the bar has one line), then what happens after the fetch.
fn waiting_for(pending: &[String]) -> String {
    const SHOWN: usize = 3;
    if pending.is_empty() {
        return "building the digest".into();
    }
    let mut text = pending
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if pending.len() > SHOWN {
        text.push_str(&format!(" and {} more", pending.len() - SHOWN));
    }
    format!("waiting for {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_names_what_is_still_pending() {
        let names = |n: usize| (0..n).map(|i| format!("s{i}")).collect::<Vec<_>>();
        assert_eq!(waiting_for(&names(2)), "waiting for s0, s1");
        assert_eq!(waiting_for(&names(5)), "waiting for s0, s1, s2 and 2 more");
        assert_eq!(waiting_for(&[]), "building the digest");
    }
}
