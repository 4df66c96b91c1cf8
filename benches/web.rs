//! `cargo bench --bench web`: the blog's `/digest/{date}` under load from a second process
//! (wrk, Debian's `wrk` package), plain and filtered. Figures in docs/PERFORMANCE.md.
//! Target: at least 5,000 requests/s with p99 under 10 ms on this 2-core machine, with wrk
//! on the same machine (so both share the cores).

mod common;

use kdigest_testkit::TestApp;

use std::process::Command;
use std::sync::Arc;

struct WrkResult {
    requests: u64,
    per_sec: f64,
    p50: String,
    p99: String,
    errors: String,
}

fn wrk(url: &str, seconds: u32, connections: u32) -> Option<WrkResult> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{connections}"),
            &format!("-d{seconds}s"),
            "--latency",
            url,
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let requests = text
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let errors = text
        .lines()
        .filter(|l| l.contains("Non-2xx") || l.contains("Socket errors"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("; ");
    Some(WrkResult {
        requests,
        per_sec: field("Requests/sec:").parse().unwrap_or(0.0),
        p50: field("50%"),
        p99: field("99%"),
        errors: if errors.is_empty() {
            "none".into()
        } else {
            errors
        },
    })
}

#[tokio::main]
async fn main() {
    if Command::new("wrk").arg("--version").output().is_err() {
        eprintln!("wrk is not installed: apt-get install wrk");
        std::process::exit(1);
    }
    let app = TestApp::builder().feeds_on_disk().toml("").build().await;
    let digest = app.digest().await;
    let (config, store) = (&app.config, &app.store);
    let blog = Arc::new(
        kdigest::web::blog::Blog::new(store.clone(), Arc::new(config.clone()), false).unwrap(),
    );
    let services = kdigest::web::Services {
        blog: Some(blog.clone()),
        ..Default::default()
    };
    let router = kdigest::web::router(Arc::new(kdigest::metrics::Metrics::default()), services);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(kdigest::web::serve(
        listener,
        router,
        std::future::pending(),
    ));

    let date = digest.date;
    let page = format!("{base}/digest/{date}");
    let body = reqwest::get(&page).await.unwrap().text().await.unwrap();
    println!(
        "page: {} bytes, {} events",
        body.len(),
        digest.events().count()
    );
    // Warm-up, then the measured runs.
    let warm_up = tokio::task::spawn_blocking({
        let page = page.clone();
        move || wrk(&page, 2, 32)
    })
    .await
    .unwrap()
    .unwrap();
    // The page fetched above, the warm-up, then the measured runs.
    let mut total = 1 + warm_up.requests;
    for (name, url) in [
        ("digest page", page.clone()),
        (
            "filtered view",
            format!("{page}?layers=kernel_codegen,runtime&min_score=50"),
        ),
        ("blog home", format!("{base}/")),
    ] {
        let r = tokio::task::spawn_blocking(move || wrk(&url, 10, 32))
            .await
            .unwrap()
            .unwrap();
        if name != "blog home" {
            total += r.requests;
        }
        println!(
            "{name}: {:.0} requests/s ({} in 10 s, 32 connections, wrk 1 thread), p50 {}, p99 {}, errors: {}",
            r.per_sec, r.requests, r.p50, r.p99, r.errors
        );
    }
    // Every page view is counted: what is still in memory is written as at shutdown.
    blog.flush_reads().await.unwrap();
    let reads = store
        .digests_page(0, 1)
        .await
        .unwrap()
        .first()
        .map_or(0, |(_, r)| *r);
    // wrk does not count responses still in flight when it stops, so stored >= counted.
    println!("reads stored: {reads} (page views wrk counted: {total})");
}
