//! What the engine does with a send's answer, decided without a store, a clock or a
//! network: retry when, pause whom, fail, or disable the subscriber. The engine
//! (`engine.rs`) applies the decision (settles the row, pauses the limiter, logs, counts).
//! The one policy that needs memory, the "most receivers refuse us at once" verdict, is
//! here too, as a small state machine the engine feeds.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use super::SendError;
use crate::config::DeliveryConfig;

/// How long a channel waits out an outage when the platform does not say.
pub const OUTAGE_PAUSE: Duration = Duration::from_secs(60);

/// `[delivery]` max_attempts, backoff_base_secs and backoff_max_secs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
}

impl From<&DeliveryConfig> for RetryPolicy {
    fn from(d: &DeliveryConfig) -> RetryPolicy {
        RetryPolicy {
            max_attempts: d.max_attempts,
            backoff_base: d.backoff_base,
            backoff_max: d.backoff_max,
        }
    }
}

/// The decision for one failed send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Back to the queue in `wait`, the attempt counted. `pause_destination`: the receiver
    /// asked for that wait (a 429's Retry-After), so its other rows wait with this one.
    Retry {
        wait: Duration,
        pause_destination: Option<Duration>,
    },
    /// Settled as failed; the subscriber stays active (the message cannot be delivered, or
    /// the last attempt failed). `pause_destination` as for a retry.
    Fail { pause_destination: Option<Duration> },
    /// The whole channel waits `wait` (an outage, a global rate limit): back to the queue
    /// without using an attempt, nobody bounced.
    PauseChannel { wait: Duration },
    /// Failed, and the subscriber disabled with the reason (blocked, deleted, gone).
    Disable,
}

/// What to do after `error` on attempt `attempts` (1 for the first) of delivery `id`. A
/// server may ask for any wait; it is never honoured beyond the longest backoff. A move is
/// the engine's to follow (it knows the store); one it cannot follow fails.
pub fn decide(error: &SendError, attempts: u32, id: &str, policy: RetryPolicy) -> Outcome {
    let capped = |w: Duration| w.min(policy.backoff_max);
    match error {
        SendError::Transient { retry_after, .. } => {
            let pause_destination = retry_after.map(capped);
            if attempts >= policy.max_attempts {
                return Outcome::Fail { pause_destination };
            }
            Outcome::Retry {
                wait: pause_destination
                    .unwrap_or_default()
                    .max(backoff(policy, id, attempts)),
                pause_destination,
            }
        }
        // Our credentials refused: retried like a transient fault, never disabling (the
        // engine pauses the channel when most receivers say it at once).
        SendError::Refused { .. } if attempts >= policy.max_attempts => Outcome::Fail {
            pause_destination: None,
        },
        SendError::Refused { .. } => Outcome::Retry {
            wait: backoff(policy, id, attempts),
            pause_destination: None,
        },
        SendError::Outage { retry_after, .. } => Outcome::PauseChannel {
            wait: retry_after.map_or(capped(OUTAGE_PAUSE), capped),
        },
        SendError::Permanent { .. } => Outcome::Disable,
        SendError::Failed { .. } | SendError::Moved(_) => Outcome::Fail {
            pause_destination: None,
        },
    }
}

/// Exponential backoff with jitter: base × 2^(attempt-1), capped, times a factor in
/// [0.5, 1) derived from the delivery id so retries of many rows do not align.
pub fn backoff(policy: RetryPolicy, id: &str, attempt: u32) -> Duration {
    let exp = policy
        .backoff_base
        .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1).min(20)));
    let capped = exp.min(policy.backoff_max);
    let hash = Sha256::digest(format!("{id}/{attempt}").as_bytes());
    let jitter = 0.5 + f64::from(hash[0]) / 512.0;
    capped.mul_f64(jitter)
}

/// The latest answers of one channel: which destinations refused our credentials.
#[derive(Default)]
pub struct Refusals {
    recent: VecDeque<(String, bool)>,
}

impl Refusals {
    /// Answers remembered; a verdict needs at least [`Refusals::QUORUM`] of them.
    const WINDOW: usize = 40;
    const QUORUM: usize = 10;
    /// Refusals from this many distinct destinations at least: one receiver that changed
    /// its key is that receiver's problem.
    const DISTINCT: usize = 5;

    /// Records one answer; true when most recent answers are refusals from several
    /// destinations: then the fault is ours (a rotated signing key), not theirs.
    pub fn note(&mut self, destination: &str, refused: bool) -> bool {
        self.recent.push_back((destination.to_string(), refused));
        if self.recent.len() > Self::WINDOW {
            self.recent.pop_front();
        }
        let refusing: BTreeSet<&str> = self
            .recent
            .iter()
            .filter(|(_, r)| *r)
            .map(|(d, _)| d.as_str())
            .collect();
        let refused = self.recent.iter().filter(|(_, r)| *r).count();
        self.recent.len() >= Self::QUORUM
            && refused * 2 > self.recent.len()
            && refusing.len() >= Self::DISTINCT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy {
        max_attempts: 3,
        backoff_base: Duration::from_secs(2),
        backoff_max: Duration::from_secs(600),
    };

    fn transient(retry_after: Option<u64>) -> SendError {
        SendError::Transient {
            reason: "HTTP 503".into(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn a_transient_fault_is_retried_with_backoff_until_the_last_attempt() {
        let Outcome::Retry {
            wait,
            pause_destination: None,
        } = decide(&transient(None), 2, "d1", POLICY)
        else {
            panic!("retried")
        };
        // Attempt 2: base × 2, times a jitter in [0.5, 1).
        assert!(
            wait >= Duration::from_secs(2) && wait < Duration::from_secs(4),
            "{wait:?}"
        );
        assert_eq!(
            decide(&transient(None), 3, "d1", POLICY),
            Outcome::Fail {
                pause_destination: None
            }
        );
    }

    #[test]
    fn a_retry_after_pauses_the_destination_within_the_longest_backoff() {
        assert_eq!(
            decide(&transient(Some(30)), 1, "d1", POLICY),
            Outcome::Retry {
                wait: Duration::from_secs(30),
                pause_destination: Some(Duration::from_secs(30)),
            }
        );
        // A day asked for is ten minutes given; the pause holds even on the last attempt.
        assert_eq!(
            decide(&transient(Some(86_400)), 3, "d1", POLICY),
            Outcome::Fail {
                pause_destination: Some(Duration::from_secs(600))
            }
        );
    }

    #[test]
    fn outages_pause_the_channel_and_only_permanent_refusals_disable() {
        let outage = |retry_after| SendError::Outage {
            reason: "relay down".into(),
            retry_after,
        };
        assert_eq!(
            decide(&outage(None), 3, "d1", POLICY),
            Outcome::PauseChannel { wait: OUTAGE_PAUSE },
            "no attempt is used: even the last one pauses"
        );
        assert_eq!(
            decide(&outage(Some(Duration::from_secs(4))), 1, "d1", POLICY),
            Outcome::PauseChannel {
                wait: Duration::from_secs(4)
            }
        );
        let refused = SendError::Refused {
            reason: "HTTP 401".into(),
        };
        assert!(matches!(
            decide(&refused, 1, "d1", POLICY),
            Outcome::Retry { .. }
        ));
        let permanent = SendError::Permanent {
            reason: "blocked".into(),
        };
        assert_eq!(decide(&permanent, 1, "d1", POLICY), Outcome::Disable);
        let failed = SendError::Failed {
            reason: "too long".into(),
        };
        assert_eq!(
            decide(&failed, 1, "d1", POLICY),
            Outcome::Fail {
                pause_destination: None
            }
        );
    }

    #[test]
    fn backoff_doubles_is_capped_and_spreads_rows() {
        let waits: Vec<Duration> = (1..=12).map(|a| backoff(POLICY, "d1", a)).collect();
        assert!(waits.iter().all(|w| *w < POLICY.backoff_max));
        assert!(waits[11] >= POLICY.backoff_max / 2, "{waits:?}");
        let spread: BTreeSet<Duration> = (0..20)
            .map(|i| backoff(POLICY, &format!("d{i}"), 3))
            .collect();
        assert!(spread.len() > 10, "ids spread their retries");
    }

    #[test]
    fn most_destinations_refusing_at_once_is_our_fault_one_is_theirs() {
        let mut one = Refusals::default();
        let verdicts: Vec<bool> = (0..40)
            .map(|i| one.note(if i % 2 == 0 { "a" } else { "b" }, i % 2 == 0 || i % 3 == 0))
            .collect();
        assert!(
            !verdicts.iter().any(|v| *v),
            "two receivers are not most of them"
        );
        let mut many = Refusals::default();
        let verdicts: Vec<bool> = (0..12)
            .map(|i| many.note(&format!("host{i}"), true))
            .collect();
        assert_eq!(verdicts.iter().position(|v| *v), Some(9), "a quorum first");
        let mut healthy = Refusals::default();
        for i in 0..40 {
            assert!(!healthy.note(&format!("host{i}"), i % 4 == 0));
        }
    }
}
