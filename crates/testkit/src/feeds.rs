//! A scriptable feed server on loopback: the bundled sample feeds (examples/feeds) under
//! `/feeds/{name}`, and endpoints that misbehave as real servers do, for the fault tests.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::net::serve;

/// The repository's top folder (this crate lives in crates/testkit).
pub fn repo_root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit in the repository")
        .to_path_buf()
}

/// Real-world feeds, platform specs and payloads, copied into the repository
/// (tests/fixtures/PROVENANCE.md says where each comes from).
pub fn reference_dir() -> PathBuf {
    repo_root().join("tests/fixtures/reference")
}

#[derive(Default)]
pub struct Hits {
    pub etag: AtomicUsize,
    pub etag_304: AtomicUsize,
    pub flaky_429: AtomicUsize,
    pub always_500: AtomicUsize,
}

pub struct FeedServer {
    pub base: String,
    pub hits: Arc<Hits>,
}

fn feed_bytes(name: &str) -> Option<Vec<u8>> {
    if name.contains('/') || name.contains("..") {
        return None;
    }
    std::fs::read(repo_root().join("examples/feeds").join(name)).ok()
}

/// Serves examples/feeds under /feeds/{name} and misbehaving endpoints for fault tests.
pub async fn spawn_feed_server() -> FeedServer {
    let hits = Arc::new(Hits::default());
    let app = Router::new()
        .route(
            "/feeds/{name}",
            get(|Path(name): Path<String>| async move {
                match feed_bytes(&name) {
                    Some(b) => ([(header::CONTENT_TYPE, "application/xml")], b).into_response(),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }),
        )
        .route("/etag/{name}", get(etag_feed))
        .route(
            "/hang",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "never"
            }),
        )
        .route(
            "/drip",
            get(|| async {
                // A valid start, then one byte every 200 ms, forever.
                let stream = futures::stream::unfold(0u64, |n| async move {
                    if n > 0 {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    let chunk = if n == 0 {
                        b"<?xml version=\"1.0\"?><rss><channel>".to_vec()
                    } else {
                        b" ".to_vec()
                    };
                    Some((Ok::<_, std::io::Error>(chunk), n + 1))
                });
                Body::from_stream(stream)
            }),
        )
        .route(
            "/huge",
            get(|| async {
                // 50 MB without a Content-Length, so only the streaming cap can stop it.
                let stream = futures::stream::iter(
                    (0..50).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1 << 20])),
                );
                Body::from_stream(stream)
            }),
        )
        .route(
            "/bomb",
            get(|| async {
                // 100 KB of gzip that inflates to 100 MB.
                (
                    [
                        (header::CONTENT_ENCODING, "gzip"),
                        (header::CONTENT_TYPE, "application/xml"),
                    ],
                    gzip_bomb(),
                )
                    .into_response()
            }),
        )
        .route(
            "/loop",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/loop")]).into_response() }),
        )
        .route(
            "/status/{code}",
            get(|Path(code): Path<u16>| async move {
                StatusCode::from_u16(code)
                    .unwrap_or(StatusCode::IM_A_TEAPOT)
                    .into_response()
            }),
        )
        .route(
            "/always500",
            get(|State(h): State<Arc<Hits>>| async move {
                h.always_500.fetch_add(1, Ordering::SeqCst);
                StatusCode::INTERNAL_SERVER_ERROR
            }),
        )
        .route(
            "/slow429",
            get(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, "3600")],
                )
                    .into_response()
            }),
        )
        .route(
            "/flaky429/{name}",
            get(
                |State(h): State<Arc<Hits>>, Path(name): Path<String>| async move {
                    if h.flaky_429.fetch_add(1, Ordering::SeqCst) == 0 {
                        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")])
                            .into_response();
                    }
                    feed_bytes(&name)
                        .map_or(StatusCode::NOT_FOUND.into_response(), |b| b.into_response())
                },
            ),
        )
        .route(
            "/html",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "<!DOCTYPE html><html><body>Login</body></html>",
                )
                    .into_response()
            }),
        )
        .route("/empty", get(|| async { "" }))
        .with_state(hits.clone());
    let base = serve(app).await;
    FeedServer { base, hits }
}

async fn etag_feed(
    State(h): State<Arc<Hits>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    h.etag.fetch_add(1, Ordering::SeqCst);
    let tag = format!("\"v1-{name}\"");
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(tag.as_str())
    {
        h.etag_304.fetch_add(1, Ordering::SeqCst);
        return StatusCode::NOT_MODIFIED.into_response();
    }
    match feed_bytes(&name) {
        Some(b) => ([(header::ETAG, tag)], b).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// 100 KB of gzip that inflates to 100 MB of spaces (made once with Python's gzip module).
fn gzip_bomb() -> &'static [u8] {
    include_bytes!("../../../tests/fixtures/bomb.xml.gz")
}
