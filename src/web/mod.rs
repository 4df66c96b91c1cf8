//! The daemon's HTTP side: `/healthz`, Prometheus `/metrics`, the blog (`/`,
//! `/digest/{date}`, `/feed.xml`) and its archive (`/search`, `/e/{id}`, `/layer/{name}`,
//! `/layer/{name}/feed.xml`), the account pages (`/subscribe`, `/confirm/{token}`,
//! `/unsubscribe/{token}`, `/preferences/{token}`) when KDIGEST_SECRET is set, `/mcp` when
//! `[web] mcp` is on (crate::mcp::http), and the routes the bots hand it (`bot::routes`: Telegram's webhook, Discord's interactions).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};

use crate::config::ServeLimits;
use crate::deliver::engine::Engine;
use crate::metrics::Metrics;

pub mod account;
pub mod admission;
pub mod archive;
pub mod blog;
pub mod feedback;
pub mod pages;
pub mod team;

/// The rate-limit key of a client: its IPv4 address, or the /64 of an IPv6 address (one
/// host usually has a whole /64 to rotate through).
pub fn client_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V4(_) => ip,
        std::net::IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            std::net::IpAddr::V6(octets.into())
        }
    }
}

/// A client's address: the socket peer, or behind a trusted reverse proxy
/// (`[signup] trust_forwarded_for`) the last X-Forwarded-For entry (the one the proxy added;
/// earlier ones are client-supplied). When that entry does not parse, the peer: never an
/// earlier, client-chosen entry.
pub fn client_ip(
    peer: std::net::SocketAddr,
    headers: &axum::http::HeaderMap,
    trust_forwarded_for: bool,
) -> std::net::IpAddr {
    if !trust_forwarded_for {
        return peer.ip();
    }
    headers
        .get_all("x-forwarded-for")
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|v| v.trim().parse::<std::net::IpAddr>().ok())
        .unwrap_or(peer.ip())
}

/// What the web server serves besides health and metrics; each part is optional.
#[derive(Default, Clone)]
pub struct Services {
    /// The bots that take their updates over HTTP, with their routes.
    pub bots: crate::bot::routes::Bots,
    pub account: Option<Arc<account::Account>>,
    pub blog: Option<Arc<blog::Blog>>,
    /// The delivery engine, whose health `/healthz` and whose outbox `/metrics` report.
    pub delivery: Option<Arc<Engine>>,
    /// `/mcp`, the MCP server behind its token (crate::mcp::http), when `[web] mcp` is on.
    pub mcp: Option<Router>,
}

#[derive(Clone)]
struct Monitor {
    metrics: Arc<Metrics>,
    delivery: Option<Arc<Engine>>,
}

/// 200 "ok", or 503 with one line per problem (a delivery worker down, a stuck outbox).
async fn healthz(State(m): State<Monitor>) -> impl IntoResponse {
    let mut problems = match &m.delivery {
        Some(engine) => engine.problems().await,
        None => Vec::new(),
    };
    if crate::metrics::DATABASE_GONE.load(std::sync::atomic::Ordering::Relaxed) {
        problems.push(
            "the database file (storage.path) was deleted or replaced; the scheduler lease cannot be kept and this daemon is stopping".into(),
        );
    }
    if problems.is_empty() {
        (StatusCode::OK, "ok\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("unhealthy\n{}\n", problems.join("\n")),
        )
    }
}

async fn metrics(State(m): State<Monitor>) -> impl IntoResponse {
    let mut text = m.metrics.render(chrono::Utc::now().timestamp());
    if let Some(engine) = &m.delivery {
        match engine.outbox_metrics().await {
            Ok(outbox) => text.push_str(&outbox),
            Err(error) => {
                tracing::warn!(message = "Cannot read the outbox for /metrics", error = %format!("{error:#}"))
            }
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

pub fn router(metrics: Arc<Metrics>, services: Services) -> Router {
    let Services {
        bots,
        account,
        blog,
        delivery,
        mcp,
    } = services;
    let mut router = Router::new();
    if let Some(b) = blog {
        router = router
            .route("/", get(blog::home).with_state(b.clone()))
            .route(
                "/digest/{date}",
                get(blog::digest_page).with_state(b.clone()),
            )
            .route("/feed.xml", get(blog::feed).with_state(b.clone()))
            .route("/week/{week}", get(blog::week_page).with_state(b.clone()))
            .route("/weekly.xml", get(blog::weekly_feed).with_state(b.clone()))
            .route("/search", get(archive::search).with_state(b.clone()))
            .route("/e/{id}", get(archive::event_page).with_state(b.clone()))
            .route(
                "/layer/{name}",
                get(archive::layer_page).with_state(b.clone()),
            )
            .route(
                "/layer/{name}/feed.xml",
                get(archive::layer_feed).with_state(b.clone()),
            )
            .route("/vote", post(feedback::vote_button).with_state(b));
    }
    if let Some(a) = account {
        use account::{manage::*, signup::*};
        router = router
            .route(
                "/subscribe",
                get(signup_form).post(signup).with_state(a.clone()),
            )
            .route(
                "/confirm/{token}",
                get(confirm_form).post(confirm).with_state(a.clone()),
            )
            .route(
                "/unsubscribe/{token}",
                get(unsubscribe_form)
                    .post(unsubscribe)
                    .with_state(a.clone()),
            )
            .route(
                "/preferences/{token}",
                get(preferences_form)
                    .post(preferences)
                    .with_state(a.clone()),
            )
            .route(
                "/subscribe/team",
                get(team::team_form)
                    .post(team::team_signup)
                    .with_state(a.clone()),
            )
            .route(
                "/subscribe/team/confirm",
                post(team::team_confirm).with_state(a.clone()),
            )
            .route(
                "/vote/{token}/{event}/{vote}",
                get(feedback::email_vote_form)
                    .post(feedback::email_vote_post)
                    .with_state(a),
            );
    }
    let router = router
        .route("/healthz", get(healthz))
        .route("/metrics", get(self::metrics))
        .with_state(Monitor { metrics, delivery })
        .merge(bots.routes());
    match mcp {
        Some(mcp) => router.merge(mcp),
        None => router,
    }
}

/// The Content-Security-Policy of every HTML page: no scripts at all, inline styles, forms
/// to this site only, no framing.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'";

/// An HTML page with the site's CSP.
fn html(status: StatusCode, body: String) -> axum::response::Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
        ],
        body,
    )
        .into_response()
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, ServeLimits::default(), shutdown).await
}

/// Serves `router` until `shutdown`, with [`ServeLimits`] (they are configuration:
/// `[daemon]`, read into [`crate::config::DaemonConfig`]). Each connection is HTTP/1.1 with
/// the client's address available to handlers (`ConnectInfo`, for sign-up's per-IP limit).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ServeLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt as _;

    let cap = admission::connection_cap(limits.max_connections, admission::raise_fd_limit());
    if cap < limits.max_connections {
        tracing::warn!(
            message = "daemon.max_connections lowered to keep file descriptors in reserve; raise the open-file limit (ulimit -n) to allow more",
            configured = limits.max_connections,
            cap
        );
    }
    let connections = admission::Connections::new(cap);
    let (closing, _) = tokio::sync::watch::channel(false);
    let mut refused_logged_at: Option<tokio::time::Instant> = None;
    let mut warn_once_a_minute = |message: &str| {
        if refused_logged_at.is_none_or(|t| t.elapsed() > std::time::Duration::from_secs(60)) {
            tracing::warn!(message, cap);
            refused_logged_at = Some(tokio::time::Instant::now());
        }
    };
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors (used elsewhere too): close the oldest idle
                    // connection and accept again; otherwise (a connection reset before
                    // accept, or nothing to close) wait a moment rather than spin.
                    let out_of_files = matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                    if !(out_of_files && connections.evict_oldest_idle()) {
                        tracing::warn!(message = "Cannot accept a connection", %error);
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let admitted = match connections.admit() {
            Ok(admitted) => admitted,
            Err(_) => {
                warn_once_a_minute(
                    "Every connection is serving a request; a new one is closed (daemon.max_connections)",
                );
                drop(stream);
                continue;
            }
        };
        let router = router.clone();
        let connection_state = admitted.clone();
        let service = hyper::service::service_fn(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                // Busy until the response is ready: never chosen to make room meanwhile.
                let serving = connection_state.serving();
                let response = router.clone().oneshot(request);
                async move {
                    let response = response.await;
                    drop(serving);
                    response
                }
            },
        );
        let mut close = closing.subscribe();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let finished = tokio::select! {
                _ = connection.as_mut() => true,
                _ = tokio::time::sleep(limits.lifetime) => false,
                _ = close.wait_for(|c| *c) => false,
                _ = admitted.evicted() => false,
            };
            if !finished {
                // Idle connections close at once; a response being written finishes.
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(std::time::Duration::from_secs(5), connection).await;
            }
            drop(admitted);
        });
    }
    // Stop taking requests; those in progress finish (bounded by the daemon's grace).
    closing.send_replace(true);
    while connections.open() > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(())
}
