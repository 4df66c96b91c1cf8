//! `cargo bench`: the performance targets of docs/PERFORMANCE.md, measured, not asserted.
//!
//! 1. parse + cluster + classify + score + summarize (extractive) + assemble + render of the
//!    2.8 MB arXiv listing (1,504 items, window covering all of them): time and peak RSS.
//! 2. Clustering at 10x that size (15,040 items), to show it does not grow quadratically.
//! 3. Fetch phase: 200 loopback sources, 20 of them hanging, against the fetch timeout.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use chrono::{TimeZone, Utc};
use kdigest::classify::Classifier;
use kdigest::cluster::cluster;
use kdigest::config::{Config, SourceConfig, SourceLocation};
use kdigest::digest::{self, Assembly};
use kdigest::fetch::Fetcher;
use kdigest::locale::Locale;
use kdigest::model::Validators;
use kdigest::model::{Item, SourceKind, Window};
use kdigest::parse::parse_feed;
use kdigest::render::{Format, Renderer};
use kdigest::summarize;

fn stats(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[0], samples[samples.len() / 2])
}

fn one_run(
    bytes: &[u8],
    source: &SourceConfig,
    config: &Config,
    renderer: &Renderer,
) -> (usize, usize, usize) {
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap();
    let items = parse_feed(bytes, source, now).expect("listing parses");
    let n_items = items.len();
    let start = items.iter().map(|i| i.published).min().unwrap();
    let end = items.iter().map(|i| i.published).max().unwrap() + chrono::Duration::seconds(1);
    let window = Window {
        start: start.fixed_offset(),
        end: end.fixed_offset(),
    };
    let counts = digest::count_by_source(&items, config, &[]);
    let classifier = Classifier::new(&config.layers, &config.relevance);
    let all = digest::candidates(items, &window, config, &classifier);
    let n_events = all.len();
    let eligible = digest::eligible(all, config);
    let locale = renderer.locale();
    let mut texts = summarize::extractive_all(&eligible, locale, config.summarize.summary_chars);
    // As the pipeline does: kdigest's own words in every other reader language too.
    texts.other_languages = summarize::other_languages(&eligible, config).expect("locales load");
    let d = digest::assemble(
        &eligible,
        &texts,
        Assembly {
            date: end.date_naive(),
            window,
            config,
            locale,
            source_counts: counts,
            failed_sources: vec![],
        },
    );
    let md = renderer.render(&d, Format::Md).unwrap();
    let tg = kdigest::channels::Channel::Telegram
        .render(&d, renderer)
        .unwrap();
    let js = renderer.render(&d, Format::Json).unwrap();
    std::hint::black_box((&md, &tg, &js));
    (n_items, n_events, d.events().count())
}

fn bench_listing(config: &Config) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference/feeds/arxiv_rss_listing.xml");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let source = SourceConfig {
        name: "arXiv".into(),
        location: SourceLocation::File(path.clone()),
        kind: SourceKind::Arxiv,
        weight: 0.8,
        max_items: None,
        include: Vec::new(),
        exclude: Vec::new(),
    };
    let renderer = Renderer::new("en", None).unwrap();
    let rss_before = common::peak_rss_mib();
    let mut samples = Vec::new();
    let mut shape = (0, 0, 0);
    for _ in 0..15 {
        let t = Instant::now();
        shape = one_run(&bytes, &source, config, &renderer);
        samples.push(t.elapsed());
    }
    let (min, median) = stats(samples);
    let parse_only: Vec<Duration> = (0..15)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(feed_rs::parser::parse(bytes.as_slice()).unwrap());
            t.elapsed()
        })
        .collect();
    let (_, feed_rs_median) = stats(parse_only);
    println!(
        "listing: {} bytes, {} items -> {} events -> {} in digest",
        bytes.len(),
        shape.0,
        shape.1,
        shape.2
    );
    println!(
        "listing: full pure pipeline min {:.1} ms, median {:.1} ms (feed-rs parse alone median {:.1} ms)",
        ms(min),
        ms(median),
        ms(feed_rs_median)
    );
    println!(
        "listing: peak RSS {:.1} MiB (process, after 30 runs; {:.1} MiB before the runs)",
        common::peak_rss_mib(),
        rss_before
    );

    // 10x: the listing's items repeated with distinct keys and perturbed titles.
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap();
    let base = parse_feed(&bytes, &source, now).unwrap();
    for factor in [1usize, 5, 10] {
        let items: Vec<Item> = (0..factor)
            .flat_map(|k| {
                base.iter().map(move |i| {
                    let mut i = i.clone();
                    if k > 0 {
                        i.key = format!("{}#{k}", i.key);
                        i.arxiv_id = i.arxiv_id.as_ref().map(|a| format!("{a}.{k}"));
                        i.url = format!("{}?copy={k}", i.url);
                        i.title = format!("{} (variant {k})", i.title);
                    }
                    i
                })
            })
            .collect();
        let n = items.len();
        let t = Instant::now();
        let events = cluster(items, config.digest.title_similarity);
        println!(
            "cluster: {n} items -> {} events in {:.1} ms",
            events.len(),
            ms(t.elapsed())
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn bench_fetch(config: &Config) {
    const FEED: &str = r#"<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><item><title>Kernel fusion news</title><link>https://example.org/a</link><pubDate>Tue, 27 Oct 2026 12:00:00 +0000</pubDate></item></channel></rss>"#;
    let app = Router::new()
        .route("/ok/{i}", get(|Path(_i): Path<u32>| async { FEED }))
        .route(
            "/hang/{i}",
            get(|Path(_i): Path<u32>| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                ""
            }),
        );
    let base = kdigest_testkit::net::serve(app.clone()).await;
    // The hanging sources of the second scenario live on a host of their own.
    let other_host = kdigest_testkit::net::serve(app).await;
    let source = |i: usize, url: String| SourceConfig {
        name: format!("s{i}"),
        location: SourceLocation::Http(url.parse().unwrap()),
        kind: SourceKind::Blog,
        weight: 1.0,
        max_items: None,
        include: Vec::new(),
        exclude: Vec::new(),
    };

    let sources: Vec<SourceConfig> = (0..200)
        .map(|i| {
            let path = if i % 10 == 0 { "hang" } else { "ok" };
            source(i, format!("{base}/{path}/{i}"))
        })
        .collect();
    let mut fetch = config.fetch.clone();
    // The bench's feed servers listen on 127.0.0.1.
    fetch.allow_private_networks = true;
    fetch.timeout = Duration::from_secs(3);
    fetch.concurrency = 64;
    fetch.per_host_concurrency = 64;
    let fetcher = Fetcher::new(&fetch).unwrap();
    let validators = vec![Validators::default(); sources.len()];
    let t = Instant::now();
    let results = fetcher.fetch_all(&sources, &validators, &|_| {}).await;
    let elapsed = t.elapsed();
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    println!(
        "fetch: 200 loopback sources (20 hanging), timeout {:.0} s, concurrency {}: {:.2} s, {failed} failed",
        fetch.timeout.as_secs_f64(),
        fetch.concurrency,
        elapsed.as_secs_f64()
    );

    // The fault campaign's case: 20 sources hanging on one host, the good ones on another,
    // the default per-host and overall concurrency (4 and 32).
    let sources: Vec<SourceConfig> = (0..200)
        .map(|i| match i % 10 {
            0 => source(i, format!("{other_host}/hang/{i}")),
            _ => source(i, format!("{base}/ok/{i}")),
        })
        .collect();
    fetch.concurrency = 32;
    fetch.per_host_concurrency = 4;
    let fetcher = Fetcher::new(&fetch).unwrap();
    let t = Instant::now();
    let results = fetcher.fetch_all(&sources, &validators, &|_| {}).await;
    let elapsed = t.elapsed();
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    println!(
        "fetch: 180 sources on one host, 20 hanging on another, timeout 3 s, per host 4, concurrency 32: {:.2} s (target <= 1.5 x timeout + 1 s = 5.5 s), {failed} failed",
        elapsed.as_secs_f64()
    );
}

fn main() {
    // `cargo test` also builds benches; only run when asked to bench.
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let config = Config::parse(&std::env::var("KD_BENCH_CONFIG").unwrap_or_default()).unwrap();
    bench_listing(&config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench_fetch(&config));
    let _ = Locale::builtin("en");
}
