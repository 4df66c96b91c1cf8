//! A subscriber's own pages: `/unsubscribe/{token}` (and the RFC 8058 one-click POST) and
//! `/preferences/{token}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;

use super::*;
use crate::model::Filter;

pub async fn unsubscribe_form(
    State(a): State<Arc<Account>>,
    Path(token): Path<String>,
) -> Response {
    let Some(id) = a.verify(Purpose::Unsubscribe, &token) else {
        return a.not_found(&a.default_language);
    };
    let language = a.language_of(id).await;
    a.button_page(
        &language,
        ["unsubscribe_title", "unsubscribe_confirm", "unsubscribe"],
        format!("/unsubscribe/{token}"),
    )
}

/// Also the RFC 8058 one-click POST: a valid token answers 200 even when the subscriber is
/// already gone, so repeating it is harmless.
pub async fn unsubscribe(State(a): State<Arc<Account>>, Path(token): Path<String>) -> Response {
    let Some(id) = a.verify(Purpose::Unsubscribe, &token) else {
        return a.not_found(&a.default_language);
    };
    let language = a.language_of(id).await;
    match a.store.remove_subscriber(id).await {
        Ok(removed) => {
            if removed {
                tracing::info!(message = "Unsubscribed by link", subscriber = id);
            }
            a.message(
                StatusCode::OK,
                &language,
                "unsubscribe_title",
                "unsubscribe_done",
            )
        }
        Err(error) => failure(error),
    }
}

pub async fn preferences_form(
    State(a): State<Arc<Account>>,
    Path(token): Path<String>,
) -> Response {
    match a.subscriber(Purpose::Preferences, &token).await {
        Ok(Some(s)) => a.preferences_page(&s, &token, false, None),
        Ok(None) => a.not_found(&a.default_language),
        Err(error) => failure(error),
    }
}

pub async fn preferences(
    State(a): State<Arc<Account>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    let mut subscriber = match a.subscriber(Purpose::Preferences, &token).await {
        Ok(Some(s)) => s,
        Ok(None) => return a.not_found(&a.default_language),
        Err(error) => return failure(error),
    };
    let fields = parse_fields(&body);
    // The delivery time: empty for "as soon as it is ready"; absent (an older form) keeps it.
    let deliver_at = match a.form_time(&fields) {
        Ok(None) => subscriber.deliver_at,
        Ok(Some(d)) => d,
        Err(why) => {
            let t = a.renderer(&subscriber.language).locale();
            let error = t.fill("prefs_bad_time", &[("layer", &why)]);
            return a.preferences_page(&subscriber, &token, false, Some(error));
        }
    };
    let cadence = match form_cadence(&fields) {
        Ok(c) => c.unwrap_or(subscriber.cadence),
        Err(why) => {
            let t = a.renderer(&subscriber.language).locale();
            let error = t.fill("prefs_bad_cadence", &[("layer", &why)]);
            return a.preferences_page(&subscriber, &token, false, Some(error));
        }
    };
    let follows = match form_follows(&fields) {
        Ok(f) => f.unwrap_or_else(|| subscriber.filter.follows.clone()),
        Err(why) => {
            let t = a.renderer(&subscriber.language).locale();
            let error = t.fill("prefs_bad_follows", &[("layer", &why.say(t))]);
            return a.preferences_page(&subscriber, &token, false, Some(error));
        }
    };
    match parse_settings(&fields, &a.layers, &subscriber.filter) {
        Ok((filter, language)) => {
            // The form sets layers and threshold; the boost follows its checkbox below.
            subscriber.filter = Filter {
                boost: subscriber.filter.boost.take(),
                follows,
                ..filter
            };
            subscriber.deliver_at = deliver_at;
            subscriber.cadence = cadence;
            match (fields.boost, subscriber.filter.boost.is_some()) {
                (Some(true), false) => match a.store.liked_layers(subscriber.id).await {
                    Ok(liked) => subscriber.filter.boost = Some(liked),
                    Err(error) => return failure(error),
                },
                (Some(false), true) => subscriber.filter.boost = None,
                _ => {}
            }
            if let Some(language) = language {
                subscriber.language = language;
            }
            if let Err(error) = a.store.update_subscriber(&subscriber, Utc::now()).await {
                return failure(error);
            }
            tracing::info!(message = "Preferences saved", subscriber = subscriber.id);
            a.preferences_page(&subscriber, &token, true, None)
        }
        Err((key, value)) => {
            let t = a.renderer(&subscriber.language).locale();
            let error = t.fill(key, &[("layer", &value)]);
            a.preferences_page(&subscriber, &token, false, Some(error))
        }
    }
}
