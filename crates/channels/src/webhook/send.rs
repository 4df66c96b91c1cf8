//! Generic webhook channel: POST the filtered digest as JSON (docs/digest-json.md) with an
//! HMAC-SHA256 signature and a delivery id for idempotency. Useful for Slack or Matrix
//! bridges and automation tools. Webhook URLs may embed credentials: they are never logged.

use std::time::Duration;

use crate::SendError;
use kdigest_core::settings::Secret;
use crate::netguard::Guard;
use kdigest_core::parse::hex;

pub const DELIVERY_HEADER: &str = "X-Kdigest-Delivery";
pub const TIMESTAMP_HEADER: &str = "X-Kdigest-Timestamp";
pub const SIGNATURE_HEADER: &str = "X-Kdigest-Signature";

pub struct WebhookSender {
    client: reqwest::Client,
    secret: Option<Secret>,
    guard: Guard,
}

/// `sha256=<hex of HMAC-SHA256(secret, "<timestamp>.<body>")>`: the timestamp is signed too,
/// so a receiver can refuse replays.
pub fn signature(secret: &Secret, timestamp: i64, body: &str) -> String {
    let mac = secret.hmac_sha256(&[timestamp.to_string().as_bytes(), b".", body.as_bytes()]);
    format!("sha256={}", hex(&mac))
}

impl WebhookSender {
    /// `concurrency`: the most requests in flight at once (the channel's), which is also how
    /// many connections to one host are kept open between them.
    pub fn new(
        timeout: Duration,
        secret: Option<Secret>,
        concurrency: usize,
        guard: Guard,
    ) -> anyhow::Result<WebhookSender> {
        // One host behind many subscribers keeps as many sockets as are in flight: a
        // smaller pool closed and reopened a connection per delivery.
        let client = crate::http::reader_client(timeout, &guard, "webhook")
            .pool_max_idle_per_host(concurrency.max(1))
            .build()?;
        Ok(WebhookSender {
            client,
            secret,
            guard,
        })
    }

    pub async fn send(
        &self,
        url: &url::Url,
        body: &str,
        delivery_id: &str,
    ) -> Result<(), SendError> {
        self.guard
            .check_url(url)
            .map_err(|reason| SendError::Permanent { reason })?;
        let timestamp = chrono::Utc::now().timestamp();
        let mut request = self
            .client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(DELIVERY_HEADER, delivery_id)
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .body(body.to_string());
        if let Some(secret) = &self.secret {
            request = request.header(SIGNATURE_HEADER, signature(secret, timestamp, body));
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                if let Some(reason) = crate::netguard::refusal(&e) {
                    return Err(SendError::Permanent { reason });
                }
                let kind = if e.is_timeout() {
                    "timed out"
                } else {
                    "failed"
                };
                return Err(SendError::Transient {
                    reason: format!("Webhook request {kind}: {}", e.without_url()),
                    retry_after: None,
                });
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let retry_after = crate::http::retry_after(response.headers());
        let code = status.as_u16();
        let reason = format!(
            "Webhook answered HTTP {code} {}",
            status.canonical_reason().unwrap_or("")
        );
        Err(classify(code, reason, retry_after))
    }
}

/// Each status decided deliberately. Only "this webhook is gone" disables a subscriber: a
/// 401/403 is most often our side (a rotated signing key answers 401 at every receiver at
/// once) and must not disable them all, so it is retried with backoff and, after the last
/// attempt, fails that delivery only.
pub(crate) fn classify(code: u16, reason: String, retry_after: Option<std::time::Duration>) -> SendError {
    match code {
        408 | 425 | 429 | 500..=599 => SendError::Transient {
            reason,
            retry_after,
        },
        401 | 403 => SendError::Refused {
            reason: format!(
                "{reason}: the receiver refuses our credentials (check the signing key, delivery.webhook_secret_env)"
            ),
        },
        404 | 410 => SendError::Permanent {
            reason: format!("{reason}: the webhook no longer exists"),
        },
        413 => SendError::Failed {
            reason: format!("{reason}: the digest is larger than the receiver accepts"),
        },
        _ => SendError::Failed {
            reason: format!("{reason}: the receiver refused this delivery"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_webhook_disables_and_auth_refusals_are_retried() {
        let kind = |code| match classify(code, "x".into(), None) {
            SendError::Transient { .. } => "retry",
            SendError::Refused { .. } => "refused",
            SendError::Permanent { .. } => "disable",
            SendError::Failed { .. } => "fail",
            _ => "other",
        };
        assert_eq!(kind(404), "disable");
        assert_eq!(kind(410), "disable");
        assert_eq!(kind(401), "refused");
        assert_eq!(kind(403), "refused");
        assert_eq!(kind(429), "retry");
        assert_eq!(kind(503), "retry");
        assert_eq!(kind(413), "fail");
        assert_eq!(kind(400), "fail");
        assert_eq!(kind(302), "fail");
    }

    #[test]
    fn signature_matches_a_known_hmac() {
        // HMAC-SHA256("key", "1.{}") computed independently (Python hmac module).
        let s = signature(&Secret::new("key"), 1, "{}");
        assert_eq!(
            s,
            "sha256=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224"
        );
    }
}
