//! `/mcp` on the daemon's web server (`[web] mcp = true`): the MCP server over streamable
//! HTTP, behind a bearer token from the environment (`[web] mcp_token_env`, by default
//! KDIGEST_MCP_TOKEN).
//!
//! Stateless: every POST is answered on its own with JSON, so any instance of a cluster
//! answers any request and nothing is kept between them. The SDK checks the Host header
//! (loopback and the site's own host: a DNS-rebinding page cannot reach a local server) and
//! bounds request bodies; the token is checked before the SDK sees the request, and each
//! client address may make [`REQUESTS_PER_MINUTE`] requests a minute (checked first, so
//! wrong tokens count too).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest as _, Sha256};

use crate::config::Config;
use crate::store::Store;

/// Shortest token accepted: a guessable token would open the archive to anyone.
pub const MIN_TOKEN_CHARS: usize = 16;
/// Largest request body: tool arguments are a few hundred bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// Requests one client address may make in a minute, all at once or spread. An assistant
/// makes a few per question; a loop that makes more would hold the store (one search reads
/// up to 10,000 rows) from the digests' own readers.
pub const REQUESTS_PER_MINUTE: u32 = 120;
/// Client addresses remembered at most; beyond it those idle for a minute (full again) are
/// dropped.
const CLIENTS_MAX: usize = 10_000;

/// A token bucket per client address: [`REQUESTS_PER_MINUTE`] to start with, refilled at
/// that rate.
pub struct Limiter {
    per_minute: f64,
    clients: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Limiter {
    pub fn new(per_minute: u32) -> Limiter {
        Limiter {
            per_minute: f64::from(per_minute.max(1)),
            clients: Mutex::default(),
        }
    }

    /// Takes one request from `client`'s bucket: None when it may go on, else the whole
    /// seconds until it may.
    pub fn take(&self, client: IpAddr, now: Instant) -> Option<u64> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.len() >= CLIENTS_MAX {
            clients.retain(|_, (_, at)| now.duration_since(*at) < Duration::from_secs(60));
        }
        let per_second = self.per_minute / 60.0;
        let (tokens, at) = clients.entry(client).or_insert((self.per_minute, now));
        let refill = now.saturating_duration_since(*at).as_secs_f64() * per_second;
        *tokens = (*tokens + refill).min(self.per_minute);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            None
        } else {
            Some(((1.0 - *tokens) / per_second).ceil().max(1.0) as u64)
        }
    }
}

/// The bearer token from the environment variable `[web] mcp_token_env`; an error naming the
/// variable and the fix (never the value) when it is missing or short. The token is
/// remembered by `redact`, so no log line can show it.
pub fn token_from_env(config: &Config) -> anyhow::Result<String> {
    let var = &config.web.mcp_token_env;
    let token = std::env::var(var).unwrap_or_default();
    if token.trim().chars().count() < MIN_TOKEN_CHARS {
        anyhow::bail!(
            "[web] mcp = true needs a bearer token of at least {MIN_TOKEN_CHARS} characters in the environment variable {var} (e.g. `export {var}=$(openssl rand -hex 32)`); set it, or turn [web] mcp off"
        );
    }
    let token = token.trim().to_string();
    crate::redact::remember(&token);
    Ok(token)
}

/// The `/mcp` route: the SDK's streamable HTTP service behind the token check.
pub fn routes(store: Store, config: Arc<Config>, token: &str) -> Router {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    if let Some(host) = config.web.public_url.host_str() {
        hosts.push(host.to_string());
        if let Some(port) = config.web.public_url.port() {
            hosts.push(format!("{host}:{port}"));
        }
    }
    let limits = Arc::new((
        Limiter::new(REQUESTS_PER_MINUTE),
        config.signup.trust_forwarded_for,
    ));
    let service = StreamableHttpService::new(
        move || Ok(super::Server::new(store.clone(), config.clone())),
        Arc::new(NeverSessionManager::default()),
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_max_request_body_bytes(MAX_BODY_BYTES)
            .with_allowed_hosts(hosts),
    );
    let expected: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(expected),
            require_token,
        ))
        // Outermost: a client over its rate is answered before its token is read.
        .layer(axum::middleware::from_fn_with_state(limits, within_rate))
}

/// 429 with Retry-After when the client's address is over [`REQUESTS_PER_MINUTE`].
async fn within_rate(
    State(limits): State<Arc<(Limiter, bool)>>,
    request: Request,
    next: Next,
) -> Response {
    let (limiter, trust_forwarded_for) = &*limits;
    // Served without connection info (a test's router), every request is one client.
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0);
    let client = crate::web::client_key(crate::web::client_ip(
        peer,
        request.headers(),
        *trust_forwarded_for,
    ));
    match limiter.take(client, Instant::now()) {
        None => next.run(request).await,
        Some(wait) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, wait.to_string())],
            format!(
                "Too many requests to /mcp: at most {REQUESTS_PER_MINUTE} a minute from one address; retry in {wait} s\n"
            ),
        )
            .into_response(),
    }
}

/// 401 unless the request carries `Authorization: Bearer <token>`. The hashes are compared,
/// so the comparison's time says nothing about the token.
async fn require_token(
    State(expected): State<Arc<[u8; 32]>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110 11.1).
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| <[u8; 32]>::from(Sha256::digest(t.trim().as_bytes())));
    if given.as_ref() == Some(&*expected) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer realm=\"kdigest-mcp\"")],
        "The MCP endpoint needs `Authorization: Bearer <token>`: the token in the server's [web] mcp_token_env variable (KDIGEST_MCP_TOKEN by default)\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_bucket_refilled_over_the_minute() {
        let limiter = Limiter::new(120);
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let start = Instant::now();
        for _ in 0..120 {
            assert_eq!(limiter.take(a, start), None);
        }
        // Two a second come back: the next one in half a second, said as 1 s.
        assert_eq!(limiter.take(a, start), Some(1));
        assert_eq!(limiter.take(b, start), None, "another address is not held");
        let later = start + Duration::from_secs(30);
        for _ in 0..60 {
            assert_eq!(limiter.take(a, later), None);
        }
        assert!(limiter.take(a, later).is_some());
        // Never more than the minute's worth, however long the client was away.
        let much_later = later + Duration::from_secs(3_600);
        for _ in 0..120 {
            assert_eq!(limiter.take(a, much_later), None);
        }
        assert!(limiter.take(a, much_later).is_some());
    }
}
