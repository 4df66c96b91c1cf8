//! Sign-up (`/subscribe`) and its double opt-in (`/confirm/{token}`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;

use super::*;
use crate::model::Filter;

pub async fn signup_form(
    State(a): State<Arc<Account>>,
    Query(q): Query<LangQuery>,
    headers: HeaderMap,
) -> Response {
    let language = page_language(q.lang.as_deref(), &headers, &a.default_language);
    a.signup_page(StatusCode::OK, &language, None, "", &a.default_filter)
}

// Built without email every address is refused before anything is sent.
#[cfg_attr(not(feature = "email"), allow(unreachable_code))]
pub async fn signup(
    State(a): State<Arc<Account>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    let fields = parse_fields(&body);
    let language = form_language(&fields, &headers, &a.default_language);
    let client = format!("signup-ip:{}", client_key(a.client_ip(peer, &headers)));
    if !a.within_limit(&client, 3_600, a.per_ip_per_hour).await {
        return a.message(
            StatusCode::TOO_MANY_REQUESTS,
            &language,
            "signup_title",
            "signup_limited",
        );
    }
    let t = a.renderer(&language).locale();
    let invalid = |error: String, filter: &Filter| {
        a.signup_page(
            StatusCode::BAD_REQUEST,
            &language,
            Some(error),
            &fields.email,
            filter,
        )
    };
    let (filter, _) = match parse_settings(&fields, &a.layers, &a.default_filter) {
        Ok(settings) => settings,
        Err((key, value)) => {
            let error = t.fill(key, &[("layer", &value)]);
            return invalid(error, &a.default_filter);
        }
    };
    // The normalised address: one mailbox is one key and one subscriber.
    let (address, mailbox): (Address, String) =
        match Address::parse(&format!("email:{}", fields.email)) {
            #[cfg(feature = "email")]
            Ok(Address::Email(mailbox)) => (Address::Email(mailbox.clone()), mailbox),
            _ => {
                let error = t.fill("signup_bad_email", &[("email", &fields.email)]);
                return invalid(error, &filter);
            }
        };
    let mailbox_key = format!("signup-mailbox:{}", mailbox.to_lowercase());
    if !a
        .within_limit(&mailbox_key, 86_400, a.per_address_per_day)
        .await
    {
        return a.message(
            StatusCode::TOO_MANY_REQUESTS,
            &language,
            "signup_title",
            "signup_limited",
        );
    }
    let Some(mailer) = &a.mailer else {
        return a.message(
            StatusCode::SERVICE_UNAVAILABLE,
            &language,
            "signup_title",
            "signup_unavailable",
        );
    };
    let now = Utc::now();
    let stale = now - chrono::Duration::seconds(CONFIRM_TTL_SECS);
    let deliver_at = match a.form_time(&fields) {
        Ok(at) => at.flatten(),
        Err(why) => {
            let error = t.fill("prefs_bad_time", &[("layer", &why)]);
            return invalid(error, &filter);
        }
    };
    let outcome = a
        .store
        .signup(&address, &filter, &language, now, stale)
        .await;
    if let Ok(Signup::Pending(id)) = &outcome
        && let Err(error) = a.set_time(*id, deliver_at).await
    {
        return failure(error);
    }
    // The same answer either way: the page must not tell who is subscribed. The mailbox
    // learns it: a confirmation link, or a preferences link when already subscribed.
    let (kind, purpose, id) = match outcome {
        Ok(Signup::Pending(id)) => (LinkEmail::Confirm, Purpose::Confirm, id),
        Ok(Signup::AlreadySubscribed(id)) => {
            (LinkEmail::AlreadySubscribed, Purpose::Preferences, id)
        }
        Err(error) => return failure(error),
    };
    let url = link(&a.public_url, &a.secret, purpose, id, now.timestamp());
    let email = match a.renderer(&language).link_email(kind, &url) {
        Ok(email) => email,
        Err(error) => return failure(error),
    };
    match mailer.send_single(&mailbox, email).await {
        Ok(()) => tracing::info!(message = "Sign-up email sent", subscriber = id, kind = ?kind),
        Err(SendError::Permanent { reason }) => {
            tracing::info!(message = "Sign-up email refused by the relay", subscriber = id, %reason);
        }
        Err(error) => {
            tracing::error!(message = "Cannot send the sign-up email", subscriber = id, error = %error);
            return a.message(
                StatusCode::SERVICE_UNAVAILABLE,
                &language,
                "signup_title",
                "signup_unavailable",
            );
        }
    }
    a.message(
        StatusCode::OK,
        &language,
        "signup_sent_title",
        "signup_sent",
    )
}

pub async fn confirm_form(State(a): State<Arc<Account>>, Path(token): Path<String>) -> Response {
    match a.subscriber(Purpose::Confirm, &token).await {
        Ok(Some(s)) if s.status == crate::subscriber::Status::Pending => a.button_page(
            &s.language,
            ["confirm_title", "confirm_lead", "confirm_button"],
            format!("/confirm/{token}"),
        ),
        Ok(_) => a.not_found(&a.default_language),
        Err(error) => failure(error),
    }
}

pub async fn confirm(State(a): State<Arc<Account>>, Path(token): Path<String>) -> Response {
    let subscriber = match a.subscriber(Purpose::Confirm, &token).await {
        Ok(Some(s)) => s,
        Ok(None) => return a.not_found(&a.default_language),
        Err(error) => return failure(error),
    };
    match a.store.confirm_subscriber(subscriber.id, Utc::now()).await {
        Ok(true) => {
            tracing::info!(
                message = "Subscription confirmed",
                subscriber = subscriber.id
            );
            a.message(
                StatusCode::OK,
                &subscriber.language,
                "confirm_title",
                "confirm_done",
            )
        }
        // Pressed twice, or opened again: say so, change nothing.
        Ok(false) if subscriber.status == crate::subscriber::Status::Active => a.message(
            StatusCode::OK,
            &subscriber.language,
            "confirm_title",
            "confirm_already",
        ),
        Ok(false) => a.not_found(&subscriber.language),
        Err(error) => failure(error),
    }
}
