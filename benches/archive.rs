//! `cargo bench --bench archive`: the archive behind /search, /layer and /e on a year of
//! digests (SQLite): storing (and indexing) 365 digests of ~25 events each, then the
//! latency of the queries readers make, median of 30 runs each. Every digest is the
//! fixture day with its events made distinct per day (ids, a day word in each title, a
//! Chinese translation), so a term matches what it would in a real year: common words
//! hit hundreds of events, rare ones a few.

mod common;

use kdigest_testkit::TestApp;

use std::time::{Duration, Instant};

use chrono::Utc;
use kdigest::archive::terms;
use kdigest::model::EventWords;

const DAYS: u64 = 365;
const RUNS: usize = 30;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let app = TestApp::builder().feeds_on_disk().toml("").build().await;
    let day = app.digest().await;
    let (_config, store) = (&app.config, &app.store);
    let mut year = Vec::new();
    let start = day.date - chrono::Days::new(DAYS);
    for i in 0..DAYS {
        let mut d = day.clone();
        d.date = start + chrono::Days::new(i);
        let mut k = 0;
        for e in d.events_mut() {
            k += 1;
            e.id = format!("{i:05}{k:05}");
            e.title = format!("{} day{i}", e.title);
            e.translations.insert(
                "en".into(),
                EventWords {
                    summary: Some(format!("第{i}天的编译器后端与内核生成更新")),
                    ..Default::default()
                },
            );
        }
        for w in &mut d.watchlist {
            w.event_id = String::new();
        }
        year.push(d);
    }
    let events: usize = year.iter().map(|d| d.events().count()).sum();
    let t = Instant::now();
    for d in &year {
        store.save_digest(d, Utc::now()).await.unwrap();
    }
    let stored = t.elapsed();
    println!(
        "archive: {DAYS} digests, {events} events stored and indexed in {:.2} s ({:.1} ms a digest)",
        stored.as_secs_f64(),
        stored.as_secs_f64() * 1000.0 / DAYS as f64
    );

    let queries = [
        ("common English word", "kernel"),
        ("rare term (one day)", "day123"),
        ("two terms", "cutlass day200"),
        ("phrase", "\"day17\""),
        ("Chinese, 3 characters (index)", "编译器"),
        ("Chinese, 2 characters (scan)", "后端"),
        ("no match", "zzqxnotaword"),
    ];
    for (what, q) in queries {
        let terms = terms(q);
        let mut samples = Vec::new();
        let mut found = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            found = store.search_events(&terms, 0, 21).await.unwrap().len();
            samples.push(t.elapsed());
        }
        println!(
            "search {what:32} {q:18} first page ({found:2} events): median {:.2} ms",
            median(samples).as_secs_f64() * 1000.0
        );
    }
    let layer = day.events().next().unwrap().layers[0].clone();
    for page in [1, 50] {
        let mut samples = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            store
                .layer_events(&layer, (page - 1) * 20, 21)
                .await
                .unwrap();
            samples.push(t.elapsed());
        }
        println!(
            "layer {layer} page {page}: median {:.2} ms",
            median(samples).as_secs_f64() * 1000.0
        );
    }
    let id = year[100].events().next().unwrap().id.clone();
    let mut samples = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        store.event_appearances(&id).await.unwrap();
        samples.push(t.elapsed());
    }
    println!(
        "permalink: median {:.2} ms; peak RSS {:.0} MiB",
        median(samples).as_secs_f64() * 1000.0,
        common::peak_rss_mib()
    );
}
