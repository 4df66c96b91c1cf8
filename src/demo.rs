//! `kdigest demo`: the full pipeline on the sample feeds bundled in examples/feeds, served
//! from a loopback HTTP server so the real fetch path runs, with a temporary SQLite file.
//! Needs no network and no credentials.

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use chrono::NaiveDate;

use crate::config::Config;
use crate::model::Digest;
use crate::store::Store;

pub const DEMO_CONFIG: &str = include_str!("../examples/demo.toml");

/// The bundled feeds, by file name.
pub const FEEDS: &[(&str, &[u8])] = &[
    (
        "triton-releases.atom",
        include_bytes!("../examples/feeds/triton-releases.atom"),
    ),
    (
        "pytorch-releases.atom",
        include_bytes!("../examples/feeds/pytorch-releases.atom"),
    ),
    (
        "cutlass-releases.atom",
        include_bytes!("../examples/feeds/cutlass-releases.atom"),
    ),
    ("arxiv.xml", include_bytes!("../examples/feeds/arxiv.xml")),
    (
        "nvidia-blog.xml",
        include_bytes!("../examples/feeds/nvidia-blog.xml"),
    ),
    ("broken.xml", include_bytes!("../examples/feeds/broken.xml")),
];

/// The day the sample feeds describe.
pub fn demo_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 10, 28).expect("valid date")
}

/// Serves the bundled feeds on 127.0.0.1 (a free port); returns the base URL.
pub async fn serve_feeds() -> anyhow::Result<String> {
    async fn feed(Path(name): Path<String>) -> impl IntoResponse {
        match FEEDS.iter().find(|(n, _)| *n == name) {
            Some((_, body)) => (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/xml")],
                *body,
            )
                .into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/feeds", listener.local_addr()?);
    let app = Router::new().route("/feeds/{name}", get(feed));
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(message = "Demo feed server stopped", %error);
        }
    });
    Ok(base)
}

/// The demo configuration pointed at `base`.
pub fn demo_config(base: &str, language: Option<&str>) -> anyhow::Result<Config> {
    let mut config = Config::parse(&DEMO_CONFIG.replace("{base}", base))?;
    // The demo's feeds come from its own server on 127.0.0.1 (serve_feeds).
    config.fetch.allow_private_networks = true;
    if let Some(l) = language {
        config.digest.language = l.to_string();
    }
    Ok(config)
}

/// `user`: the configuration named with --config, if any; its layers, scoring, language,
/// summarize and template settings apply, its sources and storage do not.
pub async fn run(user: Option<Config>, language: Option<&str>) -> anyhow::Result<Digest> {
    let base = serve_feeds().await?;
    let dir = tempfile::tempdir()?;
    let mut config = demo_config(&base, language)?;
    if let Some(mut user) = user {
        let demo = config.core;
        user.sources = demo.sources;
        user.digest.timezone = demo.digest.timezone;
        user.digest.window_end = demo.digest.window_end;
        user.digest.window_hours = demo.digest.window_hours;
        if let Some(l) = language {
            user.digest.language = l.to_string();
        }
        config = user;
    }
    // The demo never touches a configured database: a fresh SQLite file of its own.
    config.storage.path = dir.path().join("kdigest.sqlite");
    config.storage.url = None;
    let store = Store::open(&config.storage.path).await?;
    let digest = crate::pipeline::generate(&config, &store, demo_date(), &|_| {}).await?;
    store.close().await;
    Ok(digest)
}
