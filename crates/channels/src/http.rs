//! The rules every outbound HTTP client of kdigest keeps (the channels' senders, feed
//! fetching, the LLM client): how long a peer may ask us to wait.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, RETRY_AFTER};

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
