//! The Discord sender: the embed messages of `render`, posted to a channel with the bot
//! token or executed on a webhook URL, through serenity's HTTP client. Webhook URLs and the
//! token are credentials: errors never include them.
//!
//! In production serenity's rate limiter reads Discord's X-RateLimit headers and waits out
//! route and global buckets; `discord.api_url` (tests) points the client at another server,
//! which needs the rate limiter off (serenity ignores the proxy otherwise).

use serenity::http::{Http, HttpBuilder, HttpError};
use serenity::model::id::ChannelId;

use super::Target;
use crate::SendError;
use super::config::DiscordConfig;
use kdigest_core::settings::Secret;

pub struct DiscordSender {
    /// Client with the bot token, for channel subscribers; None without a token.
    bot: Option<Http>,
    /// Webhooks carry their own token in the URL and are executed with a plain client,
    /// which reads a 429's scope and Retry-After (serenity's error keeps neither).
    webhooks: reqwest::Client,
    /// `https://discord.com`, or `discord.api_url` (tests).
    api: String,
}

/// serenity's own client has no timeout: a stuck request would hold a delivery slot.
fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .connect_timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

pub fn client(config: &DiscordConfig, token: &str) -> Http {
    let builder = HttpBuilder::new(token).client(reqwest_client());
    match &config.api_url {
        Some(url) => builder
            .proxy(url.as_str().trim_end_matches('/'))
            .ratelimiter_disabled(true)
            .build(),
        None => builder.build(),
    }
}

impl DiscordSender {
    pub fn new(config: &DiscordConfig) -> DiscordSender {
        let token = Secret::from_env(&config.token_env, "the Discord bot token").ok();
        if token.is_none() {
            tracing::info!(
                message = "No Discord bot token; Discord channel subscribers fail, webhook subscribers work",
                variable = %config.token_env
            );
        }
        DiscordSender {
            bot: token.map(|t| client(config, t.expose())),
            webhooks: reqwest_client(),
            api: config
                .api_url
                .as_ref()
                .map_or("https://discord.com".to_string(), |u| {
                    u.as_str().trim_end_matches('/').to_string()
                }),
        }
    }

    /// Executes a webhook (`POST /webhooks/{id}/{token}`), in a thread when given.
    async fn execute_webhook(
        &self,
        id: u64,
        token: &str,
        thread: Option<u64>,
        body: &serde_json::Value,
    ) -> Result<(), SendError> {
        let mut url = format!("{}/api/v10/webhooks/{id}/{token}?wait=false", self.api);
        if let Some(thread) = thread {
            url.push_str(&format!("&thread_id={thread}"));
        }
        let response = self
            .webhooks
            .post(&url)
            .json(body)
            .send()
            .await
            .map_err(|e| SendError::Transient {
                // The URL holds the webhook's token: never in an error.
                reason: format!("Discord request failed: {}", e.without_url()),
                retry_after: None,
            })?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let headers = response.headers().clone();
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        let code = body["code"].as_i64().unwrap_or(0);
        let message = body["message"].as_str().unwrap_or("").to_string();
        if status == 429 {
            // Discord says how long in Retry-After (seconds) and in the body (retry_after,
            // fractional seconds); a global limit holds back every webhook, not this one.
            let retry_after = body["retry_after"]
                .as_f64()
                .or_else(|| header("retry-after").and_then(|v| v.parse().ok()))
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(std::time::Duration::from_secs_f64);
            let global = body["global"].as_bool() == Some(true)
                || header("x-ratelimit-global").as_deref() == Some("true")
                || header("x-ratelimit-scope").as_deref() == Some("global");
            let reason = format!("Discord answered HTTP 429 (code {code}): {message}");
            return Err(if global {
                SendError::Outage {
                    reason: format!("{reason}; Discord's global rate limit holds back every request"),
                    retry_after,
                }
            } else {
                SendError::Transient {
                    reason,
                    retry_after,
                }
            });
        }
        Err(by_status(status, code as isize, &message))
    }

    pub async fn send(&self, target: &Target, payload: &str) -> Result<(), SendError> {
        let mut body: serde_json::Value =
            serde_json::from_str(payload).map_err(|e| SendError::Failed {
                reason: format!("Discord payload is not JSON: {e}"),
            })?;
        let webhook = matches!(target, Target::Webhook(_));
        if webhook && let Some(m) = body.as_object_mut() {
            // A channel webhook someone made is not our application's: Discord refuses
            // interactive components there, and nobody would receive the presses.
            m.remove("components");
        }
        let result = match target {
            Target::Channel(id) => {
                let Some(bot) = &self.bot else {
                    return Err(SendError::Failed {
                        reason: "No Discord bot token is set (discord.token_env); channel subscribers need one".into(),
                    });
                };
                bot.send_message(ChannelId::new(*id), Vec::new(), &body)
                    .await
                    .map(|_| ())
            }
            Target::Webhook(url) => {
                let (id, token) = webhook_parts(url).ok_or_else(|| SendError::Permanent {
                    reason: "The Discord webhook URL has no id and token".into(),
                })?;
                // A webhook of a forum or thread posts there only with thread_id.
                let thread = url
                    .query_pairs()
                    .find(|(k, _)| k == "thread_id")
                    .and_then(|(_, v)| v.parse::<u64>().ok())
                    .filter(|t| *t > 0);
                return self
                    .execute_webhook(id, &token, thread, &body)
                    .await
                    .map_err(|e| unauthorized(e, true));
            }
        };
        result.map_err(|e| unauthorized(classify(e), webhook))
    }
}

/// A 401 is decided by who was refused, never retried (Discord counts 401s toward its
/// invalid-request ban): a webhook's own token is invalid (the webhook was deleted or
/// regenerated) -> the subscriber is disabled; the bot token is ours -> the channel pauses
/// with one operator log line, nobody is disabled.
pub(crate) fn unauthorized(error: SendError, webhook: bool) -> SendError {
    match error {
        SendError::Transient { reason, .. } if reason.starts_with("Discord answered HTTP 401") => {
            if webhook {
                SendError::Permanent {
                    reason: format!(
                        "{reason}; the webhook's token is invalid (deleted or regenerated)"
                    ),
                }
            } else {
                SendError::Outage {
                    reason,
                    retry_after: None,
                }
            }
        }
        other => other,
    }
}

/// `https://discord.com/api/webhooks/<id>/<token>` -> (id, token).
pub fn webhook_parts(url: &url::Url) -> Option<(u64, String)> {
    let segments: Vec<&str> = url.path_segments()?.filter(|s| !s.is_empty()).collect();
    let at = segments.iter().position(|s| *s == "webhooks")?;
    let id = segments.get(at + 1)?.parse().ok().filter(|id| *id > 0)?;
    let token = segments.get(at + 2)?.to_string();
    Some((id, token))
}

/// 404 (unknown channel 10003, unknown webhook 10015) and 403 (missing permissions 50013)
/// disable the subscriber and are never retried: Discord bans IPs that keep making invalid
/// requests. 429 and 5xx are retried.
pub fn classify(error: serenity::Error) -> SendError {
    if let serenity::Error::Http(HttpError::UnsuccessfulRequest(response)) = &error {
        return by_status(
            response.status_code.as_u16(),
            response.error.code,
            &response.error.message,
        );
    }
    let reason = match &error {
        serenity::Error::Http(HttpError::Request(e)) => {
            format!("Discord request failed: {}", e.without_url_ref())
        }
        other => format!("Discord request failed: {other}"),
    };
    SendError::Transient {
        reason,
        retry_after: None,
    }
}

/// An answer other than 2xx or 429, by its status and Discord's error code.
pub(crate) fn by_status(status: u16, code: isize, message: &str) -> SendError {
    let reason = format!("Discord answered HTTP {status} (code {code}): {message}");
    match status {
            // Decided by the caller (`unauthorized`): a webhook's token or ours.
            401 => SendError::Transient {
                reason: format!("{reason}; check the bot token (discord.token_env)"),
                retry_after: None,
            },
            408 | 425 | 429 | 500..=599 => SendError::Transient {
                reason,
                retry_after: None,
            },
        403 | 404 => SendError::Permanent { reason },
        _ => SendError::Failed { reason },
    }
}

trait WithoutUrl {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    /// The error text without the request URL, which may hold a webhook token.
    fn without_url_ref(&self) -> String {
        let mut text = self.to_string();
        if let Some(url) = self.url() {
            text = text.replace(url.as_str(), "<discord url>");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_401_disables_a_webhook_and_pauses_the_bot_channel_never_retried() {
        let refused = || SendError::Transient {
            reason: "Discord answered HTTP 401 (code 0): 401: Unauthorized".into(),
            retry_after: None,
        };
        assert!(matches!(
            unauthorized(refused(), true),
            SendError::Permanent { .. }
        ));
        assert!(matches!(
            unauthorized(refused(), false),
            SendError::Outage { .. }
        ));
        let busy = SendError::Transient {
            reason: "Discord answered HTTP 503 (code 0): busy".into(),
            retry_after: None,
        };
        assert_eq!(unauthorized(busy.clone(), true), busy);
    }

    #[test]
    fn webhook_urls_split_into_id_and_token() {
        let url =
            url::Url::parse("https://discord.com/api/webhooks/123456789012345678/AbC-dEf_123")
                .unwrap();
        assert_eq!(
            webhook_parts(&url),
            Some((123456789012345678, "AbC-dEf_123".into()))
        );
        assert_eq!(
            webhook_parts(&url::Url::parse("https://discord.com/api/webhooks/x/y").unwrap()),
            None
        );
    }
}
