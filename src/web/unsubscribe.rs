//! `/unsubscribe/{token}`: GET shows a button (link scanners that fetch links change nothing),
//! POST unsubscribes. The RFC 8058 one-click POST (`List-Unsubscribe=One-Click`) is the same
//! POST: 200, no redirect, and 200 again when repeated. Forged tokens get 404.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::config::Secret;
use crate::locale::Locale;
use crate::store::Store;
use crate::tokens::{Purpose, verify};

pub struct Unsubscribe {
    pub store: Store,
    pub secret: Secret,
    pub language: String,
}

const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

fn page(status: StatusCode, language: &str, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"{language}\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title></head><body style=\"font:16px/1.6 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem\"><h1 style=\"font-size:1.4rem\">{title}</h1>{body}</body></html>"
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
        ],
        html,
    )
        .into_response()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn not_found(t: &Locale, language: &str) -> Response {
    page(
        StatusCode::NOT_FOUND,
        language,
        t.get("unsubscribe_title"),
        "<p>404</p>",
    )
}

pub async fn show(State(u): State<Arc<Unsubscribe>>, Path(token): Path<String>) -> Response {
    let t = Locale::builtin(&u.language);
    if verify(
        &u.secret,
        Purpose::Unsubscribe,
        &token,
        chrono::Utc::now().timestamp(),
    )
    .is_none()
    {
        return not_found(&t, &u.language);
    }
    let form = format!(
        "<p>{}</p><form method=\"post\" action=\"{}\"><button type=\"submit\" style=\"font-size:1rem;padding:.5rem 1.2rem\">{}</button></form>",
        escape(t.get("unsubscribe_confirm")),
        escape(&token),
        escape(t.get("unsubscribe"))
    );
    page(
        StatusCode::OK,
        &u.language,
        t.get("unsubscribe_title"),
        &form,
    )
}

pub async fn confirm(State(u): State<Arc<Unsubscribe>>, Path(token): Path<String>) -> Response {
    let t = Locale::builtin(&u.language);
    let Some(id) = verify(
        &u.secret,
        Purpose::Unsubscribe,
        &token,
        chrono::Utc::now().timestamp(),
    ) else {
        return not_found(&t, &u.language);
    };
    match u.store.remove_subscriber(id).await {
        Ok(removed) => {
            if removed {
                tracing::info!(message = "Unsubscribed by link", subscriber = id);
            }
            page(
                StatusCode::OK,
                &u.language,
                t.get("unsubscribe_title"),
                &format!("<p>{}</p>", escape(t.get("unsubscribe_done"))),
            )
        }
        Err(error) => {
            tracing::error!(message = "Unsubscribe failed", %error);
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    }
}
