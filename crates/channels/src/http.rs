//! The rules every outbound HTTP client of kdigest keeps (the channels' senders, feed
//! fetching, the LLM client): how long a peer may ask us to wait.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, RETRY_AFTER};

use crate::netguard::Guard;

/// The client for destinations a reader chose (webhooks, robots): every address checked by
/// the guard when it resolves, no redirects (a 3xx could point anywhere), a connect timeout
/// of at most 10 s, idle sockets closed after 10 s (thousands of receivers each get a
/// message or two a day: the default 90 s would hold a file descriptor per subscriber).
/// `agent` follows "kdigest/<version>" in the User-Agent.
pub fn reader_client(timeout: Duration, guard: &Guard, agent: &str) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .dns_resolver(guard.resolver())
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(Duration::from_secs(10))
        .user_agent(format!("kdigest/{} {agent}", env!("CARGO_PKG_VERSION")).trim_end())
}

/// The longest Retry-After any caller honours: a peer asking for more (or for u64::MAX
/// seconds, which overflowed `Instant::now() + wait`) is asked again after this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3_600);

/// Retry-After as seconds or as an HTTP date, clamped to [`MAX_RETRY_AFTER`]. Every HTTP
/// client of kdigest (fetch, webhook, LLM) reads it here.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let wait = if let Ok(secs) = value.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        let when = DateTime::parse_from_rfc2822(value).ok()?;
        (when.to_utc() - Utc::now()).to_std().ok()?
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// A platform's answer: its status, the wait it asked for and the start of its body.
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<Duration>,
    pub body: String,
}

/// Sends `request` to `platform` and reads its answer (at most 8 KB of body). A request
/// that fails is a [`crate::SendError`]: refused by the private-network guard, permanent;
/// anything else (a timeout, a dropped connection), transient. The reason never shows the
/// URL, which may hold a token.
pub async fn exchange(
    platform: &str,
    request: reqwest::RequestBuilder,
) -> Result<Answer, crate::SendError> {
    let response = request
        .send()
        .await
        .map_err(|e| match crate::netguard::refusal(&e) {
            Some(reason) => crate::SendError::Permanent { reason },
            None => crate::SendError::Transient {
                reason: format!(
                    "{platform} request {}: {}",
                    if e.is_timeout() {
                        "timed out"
                    } else {
                        "failed"
                    },
                    e.without_url()
                ),
                retry_after: None,
            },
        })?;
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let body = body_start(response, 8192).await;
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

/// The start of an answer's body, at most `limit` bytes, as text: a platform's answer is a
/// few hundred bytes, and a hostile or broken server must not make us read more.
async fn body_start(mut response: reqwest::Response, limit: usize) -> String {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(limit);
    String::from_utf8_lossy(&body).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None, "a date in the past means no wait");
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_static("18446744073709551615"),
        );
        assert_eq!(
            retry_after(&h),
            Some(MAX_RETRY_AFTER),
            "clamped, not an overflow"
        );
    }
}
