//! When a failing source is tried again (miniflux-like). Pure.
//!
//! Two failures in a row are retried at the next run. From the third on, the source waits
//! 2, 4, 8 ... hours after its last attempt, at most 48: a daily run still tries it every
//! day or two, and a `digest --force` straight after a failure does not hammer a server
//! that is down. A success resets the count.

use chrono::{DateTime, Duration, Utc};

/// Failures in a row before a source is backed off.
pub const AFTER_FAILURES: i64 = 3;
/// The longest wait.
pub const MAX_WAIT_HOURS: i64 = 48;

/// When the source may be fetched again; `None`: at once.
pub fn next_try(failures: i64, last_attempt: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    if failures < AFTER_FAILURES {
        return None;
    }
    let hours = 2i64
        .checked_pow(u32::try_from(failures - AFTER_FAILURES + 1).unwrap_or(u32::MAX))
        .unwrap_or(MAX_WAIT_HOURS)
        .min(MAX_WAIT_HOURS);
    Some(last_attempt? + Duration::hours(hours))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_from_the_third_failure_and_are_capped() {
        let t = DateTime::parse_from_rfc3339("2026-10-28T00:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(next_try(2, Some(t)), None);
        assert_eq!(next_try(3, Some(t)), Some(t + Duration::hours(2)));
        assert_eq!(next_try(4, Some(t)), Some(t + Duration::hours(4)));
        assert_eq!(next_try(9, Some(t)), Some(t + Duration::hours(48)));
        assert_eq!(next_try(1_000, Some(t)), Some(t + Duration::hours(48)));
        assert_eq!(next_try(5, None), None);
    }
}
