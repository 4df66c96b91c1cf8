//! Publishing one message to one topic, and reading ntfy's answer.

use std::time::Duration;

use kdigest_core::settings::Secret;
use serde_json::Value;

use super::Topic;
use crate::SendError;
use crate::netguard::Guard;

/// The shortest wait after a 429 that says nothing of when to come back.
const MIN_LIMIT_WAIT: Duration = Duration::from_secs(1);
/// The daily message quota (42908) renews at midnight UTC; look again in an hour.
const DAILY_LIMIT_WAIT: Duration = Duration::from_secs(3600);

/// One HTTP client for every topic.
pub struct NtfySender {
    client: reqwest::Client,
    priority: u8,
    /// After a 429 without a Retry-After: one interval of the pace configured for a server
    /// (`[delivery.ntfy] per_destination_per_sec`, ntfy.sh's one request per 5 s by default),
    /// the time the server takes to grant one more request.
    limit_wait: Duration,
    guard: Guard,
}

impl NtfySender {
    pub fn new(
        timeout: Duration,
        priority: u8,
        per_server_per_sec: f64,
        guard: Guard,
    ) -> anyhow::Result<NtfySender> {
        let client = crate::http::reader_client(timeout, &guard, "").build()?;
        let limit_wait = Duration::from_secs_f64(1.0 / per_server_per_sec.max(1e-3)).max(MIN_LIMIT_WAIT);
        Ok(NtfySender {
            client,
            priority,
            limit_wait,
            guard,
        })
    }

    /// Publishes one rendered message to `topic`: the topic and priority are added here, so
    /// one render serves every topic.
    pub async fn send(&self, topic: &Topic, message: &str) -> Result<(), SendError> {
        let mut payload: Value = serde_json::from_str(message).map_err(|e| SendError::Failed {
            reason: format!("ntfy message is not JSON: {e}"),
        })?;
        payload["topic"] = Value::from(topic.name());
        payload["priority"] = Value::from(self.priority);
        let url = topic.publish_url();
        self.guard
            .check_url(&url)
            .map_err(|reason| SendError::Permanent { reason })?;
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(payload.to_string());
        if let Some(var) = &topic.token_env {
            // Read at each send: a new token takes effect without a restart.
            let token = Secret::from_env(var, "the ntfy access token").map_err(|_| {
                SendError::Transient {
                    reason: format!(
                        "{var} is not set, so the ntfy topic's access token is missing; set it in kdigest's environment"
                    ),
                    retry_after: None,
                }
            })?;
            request = request.bearer_auth(token.expose());
        }
        let answer = crate::http::exchange("ntfy", request).await?;
        send_answer(&answer, self.limit_wait, topic.token_env.is_some())
    }
}

/// The answer to a publish, a 429 without Retry-After waiting `limit_wait`.
fn send_answer(a: &crate::http::Answer, limit_wait: Duration, token: bool) -> Result<(), SendError> {
    let retry_after = a.retry_after.or((a.status == 429).then_some(limit_wait));
    answer(a.status, retry_after, &a.body, token)
}

/// ntfy's answer as a delivery outcome. `token` says whether we sent an access token,
/// which decides what a 401 or 403 means; `retry_after` is the server's, or the sender's
/// own wait after a 429.
pub fn answer(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
    token: bool,
) -> Result<(), SendError> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    let (code, error) = serde_json::from_str::<Value>(body)
        .ok()
        .map(|v| {
            (
                v["code"].as_i64().unwrap_or(0),
                v["error"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default();
    let reason = if error.is_empty() {
        format!("ntfy answered HTTP {status}")
    } else {
        format!("ntfy answered HTTP {status} ({code}: {error})")
    };
    Err(match (status, code) {
        // The server limits its visitor (us, from one address or one account), not the
        // topic: the wait pauses the destination, which is the server, so every topic on
        // it waits; the channel's other servers go on.
        (429, 42908) => SendError::Transient {
            reason: format!("{reason}: the daily message quota is used up"),
            retry_after: Some(retry_after.unwrap_or(DAILY_LIMIT_WAIT)),
        },
        (429, _) => SendError::Transient {
            reason,
            retry_after: Some(retry_after.unwrap_or(MIN_LIMIT_WAIT)),
        },
        (408 | 425 | 500..=599, _) => SendError::Transient {
            reason,
            retry_after,
        },
        // Our token (the operator's to fix): retried, never disabling; the channel pauses
        // when most topics answer it at once.
        (401, _) if token => SendError::Refused {
            reason: format!("{reason}: the server does not accept the access token"),
        },
        (401, _) => SendError::Permanent {
            reason: format!("{reason}: the topic needs an access token; add the subscriber again with --secret-env"),
        },
        (403, _) if token => SendError::Permanent {
            reason: format!("{reason}: the access token may not publish to this topic"),
        },
        (403, _) => SendError::Permanent {
            reason: format!("{reason}: the topic is protected; add the subscriber again with --secret-env naming an access token"),
        },
        (404 | 410, _) | (400, 40009 | 40010) => SendError::Permanent {
            reason: format!("{reason}: no such topic on this server"),
        },
        // 400 (this message's JSON or fields), 413 (too large): this message only.
        _ => SendError::Failed { reason },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_answers_map_to_outcomes() {
        let json = |code: i64, http: u16, error: &str| {
            format!(r#"{{"code":{code},"http":{http},"error":"{error}","link":"https://ntfy.sh/docs/publish/#limitations"}}"#)
        };
        assert!(answer(200, None, "{}", false).is_ok());
        let limit = answer(429, None, &json(42901, 429, "limit reached: too many requests, please be nice"), false).unwrap_err();
        assert!(matches!(limit, SendError::Transient { retry_after: Some(w), .. } if w == MIN_LIMIT_WAIT));
        let daily = answer(429, None, &json(42908, 429, "limit reached: too many messages"), false).unwrap_err();
        assert!(matches!(daily, SendError::Transient { retry_after: Some(w), .. } if w == DAILY_LIMIT_WAIT));
        assert!(matches!(answer(401, None, &json(40101, 401, "unauthorized"), true).unwrap_err(), SendError::Refused { .. }));
        assert!(matches!(answer(401, None, &json(40101, 401, "unauthorized"), false).unwrap_err(), SendError::Permanent { .. }));
        let forbidden = answer(403, None, &json(40301, 403, "forbidden"), true).unwrap_err();
        assert!(matches!(&forbidden, SendError::Permanent { reason } if reason.contains("40301: forbidden")), "{forbidden:?}");
        assert!(matches!(answer(400, None, &json(40010, 400, "invalid request: topic name is disallowed"), false).unwrap_err(), SendError::Permanent { .. }));
        assert!(matches!(answer(413, None, &json(41303, 413, "JSON body too large"), false).unwrap_err(), SendError::Failed { .. }));
        assert!(matches!(answer(400, None, &json(40007, 400, "invalid priority parameter"), false).unwrap_err(), SendError::Failed { .. }));
        assert!(matches!(answer(503, None, "", false).unwrap_err(), SendError::Transient { .. }));
    }
}
