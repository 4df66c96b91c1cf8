//! Telegram: Telegram-HTML messages through the Bot API (teloxide) to private chats, groups
//! and channels, and the bot that answers `/digest`, `/subscribe` and the rest.

pub mod config;
pub mod render;
pub mod send;

use super::{ChannelSpec, Meta, SendError};
use super::{ChannelsConfig, Setup};
use kdigest_core::settings::ChannelLimits;
use kdigest_core::settings::read::{Doc, section};
use kdigest_core::model::Digest;
use kdigest_core::render::Renderer;

pub use send::{TelegramSender, api_bot, no_preview, redact_token};

pub struct Spec;

impl ChannelSpec for Spec {
    const NAME: &'static str = "telegram";
    const FORMS: &'static str = "telegram:<chat id>";
    // A chat id is no credential (the bot token is the channel's, from the environment).
    const EXAMPLE: (&'static str, &'static str) = ("telegram:-1001234567890", "");
    // 30 messages/s per bot and 1/s per chat (groups: telegram.group_per_minute).
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 30.0,
        per_destination_per_sec: 1.0,
        concurrency: 30,
    };
    // Each message is JSON: its Telegram HTML and the vote buttons of its events.
    const FORMAT: Option<&'static str> = Some("json");

    fn group_per_minute(sections: &ChannelsConfig) -> Option<f64> {
        Some(sections.telegram.group_per_minute)
    }

    type Section = config::TelegramConfig;

    fn section(doc: &Doc, _site: &url::Url, problems: &mut Vec<String>) -> config::TelegramConfig {
        config::validate(section(doc, Self::NAME, problems), problems)
    }

    /// A private chat, group, supergroup or channel id.
    type Target = i64;
    type Sender = TelegramSender;

    fn parse(target: &str) -> Result<i64, String> {
        target.parse::<i64>().ok().filter(|id| *id != 0).ok_or_else(|| {
            format!(
                "\"{target}\" is not a Telegram chat id; expected a number such as 123456789 or -1001234567890"
            )
        })
    }

    fn stored(chat: &i64) -> String {
        chat.to_string()
    }

    /// Negative ids are groups and channels, which Telegram limits more tightly.
    fn is_group(chat: &i64) -> bool {
        *chat < 0
    }

    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
        // Each message with the vote buttons of its events, for the sender to attach.
        render::messages_with_votes(renderer, digest)?
            .iter()
            .map(|m| Ok(serde_json::to_string(m)?))
            .collect()
    }

    /// A message's text: 1 to 4,096 characters after entity parsing (counted here on the
    /// HTML itself, which is never shorter), with at most 100 vote buttons.
    /// The Bot API answers `{"ok":false,"error_code":N,"description":"<reason>: …"}`;
    /// teloxide reads the description, and a 429 carries `retry_after`.
    fn refusal(code: u16) -> SendError {
        use teloxide::{ApiError, RequestError};
        let error = if code == 429 {
            RequestError::RetryAfter(teloxide::types::Seconds::from_seconds(1))
        } else {
            let description = reqwest::StatusCode::from_u16(code)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Error");
            RequestError::Api(
                serde_json::from_value(serde_json::Value::String(description.into()))
                    .unwrap_or_else(|_| ApiError::Unknown(description.into())),
            )
        };
        send::classify(error)
    }

    fn limit_problems(message: &str) -> Vec<String> {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(message) else {
            return vec!["not a rendered Telegram message".into()];
        };
        let html = m["html"].as_str().unwrap_or("");
        let n = render::length(html);
        let mut problems = Vec::new();
        if n == 0 || n > render::MAX_MESSAGE_CHARS {
            problems.push(format!("text of {n} UTF-16 units, not 1 to {}", render::MAX_MESSAGE_CHARS));
        }
        let buttons = m["votes"].as_array().map_or(0, |v| v.len() * 2);
        if buttons > 100 {
            problems.push(format!("{buttons} buttons, above 100"));
        }
        problems
    }

    fn sender(setup: &Setup) -> anyhow::Result<Option<TelegramSender>> {
        match api_bot(&setup.sections.telegram) {
            Ok(bot) => Ok(Some(TelegramSender::new(bot))),
            Err(_) => {
                tracing::info!(
                    message = "No Telegram token; Telegram subscribers are not delivered to",
                    variable = %setup.sections.telegram.token_env
                );
                Ok(None)
            }
        }
    }

    async fn send(
        sender: &TelegramSender,
        chat: &i64,
        message: &str,
        _meta: Meta<'_>,
    ) -> Result<(), SendError> {
        sender.send(*chat, message).await
    }
}
