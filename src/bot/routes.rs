//! The bots' HTTP side: Telegram's webhook (webhook mode) and Discord's HTTP interactions,
//! as routes the daemon hands the web server (`web::Services::bots`). The web server
//! knows no bot.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;

#[cfg(feature = "discord")]
use super::discord::{DiscordBot, INTERACTIONS_PATH};
#[cfg(feature = "telegram")]
use super::telegram::{TelegramBot, WEBHOOK_PATH};
#[cfg(feature = "telegram")]
use crate::channels::telegram::redact_token;

/// The bots that take their updates over HTTP; each is optional.
#[derive(Default, Clone)]
pub struct Bots {
    #[cfg(feature = "telegram")]
    pub telegram: Option<Arc<TelegramBot>>,
    #[cfg(feature = "discord")]
    pub discord: Option<Arc<DiscordBot>>,
}

impl Bots {
    /// Their routes: `/telegram/webhook`, `/discord/interactions`.
    pub fn routes(self) -> Router {
        let router = Router::new();
        #[cfg(feature = "telegram")]
        let router = match self.telegram {
            Some(bot) => router.route(WEBHOOK_PATH, post(telegram_webhook).with_state(bot)),
            None => router,
        };
        #[cfg(feature = "discord")]
        let router = match self.discord {
            Some(bot) => router.route(INTERACTIONS_PATH, post(discord_interaction).with_state(bot)),
            None => router,
        };
        router
    }
}

#[cfg(feature = "telegram")]
/// Telegram webhook mode: checks the secret header, answers at once and handles the update
/// in the background (Telegram retries webhooks that answer slowly).
async fn telegram_webhook(
    State(bot): State<Arc<TelegramBot>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let secret = headers
        .get("x-telegram-bot-api-secret-token")
        .and_then(|v| v.to_str().ok());
    if secret != Some(bot.webhook_secret().as_str()) {
        return StatusCode::UNAUTHORIZED;
    }
    match serde_json::from_slice::<teloxide::types::Update>(&body) {
        Ok(update) => {
            tokio::spawn(async move {
                // Telegram retries an update that was answered late; behind a load
                // balancer the retry may reach another instance. One of them handles it.
                if !bot.first_handling(&update.id.0.to_string()).await {
                    return;
                }
                if let Err(error) = bot.handle_update(update.kind).await {
                    tracing::warn!(message = "Telegram update failed", error = %redact_token(&format!("{error:#}")));
                }
            });
            StatusCode::OK
        }
        Err(error) => {
            tracing::warn!(message = "Webhook body is not a Telegram update", %error);
            StatusCode::BAD_REQUEST
        }
    }
}

#[cfg(feature = "discord")]
/// Discord's HTTP interactions: 401 unless the Ed25519 signature over timestamp + body checks
/// out (Discord sends bad signatures on purpose to test endpoints), then the response JSON.
async fn discord_interaction(
    State(bot): State<Arc<DiscordBot>>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    if !bot.verify(
        header("x-signature-ed25519"),
        header("x-signature-timestamp"),
        &body,
    ) {
        return (StatusCode::UNAUTHORIZED, "invalid request signature").into_response();
    }
    let Ok(interaction) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    // One answer per interaction, whichever instance it reached first.
    if interaction["type"] != 1
        && let Some(id) = interaction["id"].as_str()
        && !bot.first_handling(id).await
    {
        return StatusCode::CONFLICT.into_response();
    }
    match bot.respond(&interaction).await {
        Ok(response) => axum::Json(response).into_response(),
        Err(error) => {
            tracing::warn!(message = "Discord interaction failed", error = %format!("{error:#}"));
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
