//! Telegram channel: one Telegram-HTML message through the Bot API (teloxide), link
//! previews off, with the 👍/👎 buttons of the events it ends, errors classified for the
//! engine. The token never reaches a log: error
//! texts pass through [`redact_token`].

use std::sync::LazyLock;

use regex::Regex;
use teloxide::prelude::*;
use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions, ParseMode};
use teloxide::{ApiError, RequestError};

use crate::SendError;
use super::config::TelegramConfig;
use kdigest_core::settings::Secret;
use crate::Address;

static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"bot\d+:[A-Za-z0-9_-]+").expect("valid regex"));

/// Replaces `bot<id>:<secret>` (as in Bot API URLs) with `bot<redacted>`.
pub fn redact_token(text: &str) -> String {
    TOKEN.replace_all(text, "bot<redacted>").into_owned()
}

pub fn no_preview() -> LinkPreviewOptions {
    LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    }
}

/// A teloxide bot pointed at the configured API URL, with the token from the environment.
pub fn api_bot(config: &TelegramConfig) -> Result<Bot, kdigest_core::settings::ConfigError> {
    let token = Secret::from_env(&config.token_env, "the Telegram bot token from @BotFather")?;
    Ok(Bot::new(token.expose()).set_api_url(config.api_url.clone()))
}

pub struct TelegramSender {
    bot: Bot,
}

impl TelegramSender {
    pub fn new(bot: Bot) -> TelegramSender {
        TelegramSender { bot }
    }

    /// Sends one rendered message: a [`super::render::Message`] as JSON (HTML and its
    /// vote buttons), or bare HTML.
    pub async fn send(&self, chat: i64, message: &str) -> Result<(), SendError> {
        let message: super::render::Message =
            serde_json::from_str(message).unwrap_or_else(|_| super::render::Message {
                html: message.to_string(),
                votes: Vec::new(),
            });
        let keyboard = vote_keyboard(&message.votes);
        let mut request = self
            .bot
            .send_message(ChatId(chat), &message.html)
            .parse_mode(ParseMode::Html)
            .link_preview_options(no_preview());
        if let Some(k) = &keyboard {
            request = request.reply_markup(k.clone());
        }
        match request.await {
            Ok(_) => Ok(()),
            Err(RequestError::Api(ApiError::CantParseEntities(why))) => {
                // A render bug: the message still goes out, as plain text.
                tracing::error!(message = "Telegram rejected our HTML; resending as plain text", chat, error = %why);
                let plain = html_to_plain(&message.html);
                let mut request = self
                    .bot
                    .send_message(ChatId(chat), plain)
                    .link_preview_options(no_preview());
                if let Some(k) = keyboard {
                    request = request.reply_markup(k);
                }
                request.await.map(|_| ()).map_err(classify)
            }
            Err(e) => Err(classify(e)),
        }
    }
}

/// One row per event: "👍 3" and "👎 3" (the number the message shows). None without
/// events.
pub fn vote_keyboard(votes: &[(usize, String)]) -> Option<InlineKeyboardMarkup> {
    use kdigest_core::feedback::{Vote, button_data};
    if votes.is_empty() {
        return None;
    }
    let rows = votes.iter().map(|(n, id)| {
        [Vote::Up, Vote::Down]
            .map(|v| InlineKeyboardButton::callback(format!("{} {n}", v.emoji()), button_data(v, id)))
            .to_vec()
    });
    Some(InlineKeyboardMarkup::new(rows))
}

/// Text of a Telegram-HTML message without its tags.
fn html_to_plain(html: &str) -> String {
    kdigest_core::text::html_to_text(&html.replace('\n', "<br>")).0
}

pub fn classify(error: RequestError) -> SendError {
    let reason = redact_token(&error.to_string());
    match error {
        RequestError::RetryAfter(secs) => SendError::Transient {
            reason,
            retry_after: Some(secs.duration()),
        },
        RequestError::MigrateToChatId(id) => SendError::Moved(Box::new(Address::Telegram(id.0))),
        RequestError::Network(_) | RequestError::Io(_) | RequestError::InvalidJson { .. } => {
            SendError::Transient {
                reason,
                retry_after: None,
            }
        }
        RequestError::Api(api) => match api {
            // "Unauthorized" or "Not Found" for the bot's own URL: our token is wrong, for
            // every chat at once. Pause the channel with one line for the operator; failing
            // each message (as before) marked every reader's delivery failed.
            ApiError::InvalidToken => SendError::Outage {
                reason: format!("{reason}; check the bot token (telegram.token_env)"),
                retry_after: None,
            },
            ApiError::BotBlocked
            | ApiError::UserDeactivated
            | ApiError::ChatNotFound
            | ApiError::BotKicked
            | ApiError::BotKickedFromSupergroup
            | ApiError::BotKickedFromChannel
            | ApiError::CantInitiateConversation
            | ApiError::CantTalkWithBots
            | ApiError::GroupDeactivated
            | ApiError::NotEnoughRightsToPostMessages => SendError::Permanent { reason },
            // Every 403 means the bot cannot reach the chat any more, including texts
            // teloxide does not know ("Forbidden: bot was kicked from the group chat", for
            // basic groups): retrying daily would only hammer the API.
            ApiError::Unknown(text) if text.trim_start().starts_with("Forbidden") => {
                SendError::Permanent { reason }
            }
            // Other errors teloxide does not know include the API's own 5xx answers: retry
            // them (bounded by delivery.max_attempts).
            ApiError::Unknown(_) => SendError::Transient {
                reason,
                retry_after: None,
            },
            // Anything else is about this message (too long, bad markup): not worth a
            // retry, and no reason to drop the subscriber.
            _ => SendError::Failed { reason },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_forbidden_text_disables_the_subscriber() {
        for text in [
            "Forbidden: bot was kicked from the group chat",
            "Forbidden: bot is not a member of the channel chat",
        ] {
            let error = RequestError::Api(ApiError::Unknown(text.into()));
            assert!(
                matches!(classify(error), SendError::Permanent { .. }),
                "{text}"
            );
        }
        let error = RequestError::Api(ApiError::Unknown("Internal Server Error".into()));
        assert!(matches!(classify(error), SendError::Transient { .. }));
    }

    #[test]
    fn tokens_are_redacted() {
        let msg =
            "error sending request for url (http://127.0.0.1:9/bot123456:AAH-secret_x/SendMessage)";
        assert_eq!(
            redact_token(msg),
            "error sending request for url (http://127.0.0.1:9/bot<redacted>/SendMessage)"
        );
    }
}
