//! `/mcp` on the daemon's web server (`[web] mcp = true`): the MCP server over streamable
//! HTTP, behind a bearer token from the environment (`[web] mcp_token_env`, by default
//! KDIGEST_MCP_TOKEN).
//!
//! Stateless: every POST is answered on its own with JSON, so any instance of a cluster
//! answers any request and nothing is kept between them. The SDK checks the Host header
//! (loopback and the site's own host: a DNS-rebinding page cannot reach a local server) and
//! bounds request bodies; the token is checked before the SDK sees the request.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
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
