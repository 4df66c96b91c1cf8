//! When digests run: a cron expression read in a time zone. Pure: the caller passes "now".
//!
//! The cron expression is matched against local wall-clock time, then each local time is
//! turned into an instant with this DST policy:
//! - a local time that does not exist (the spring-forward gap) runs at the next valid
//!   instant, the end of the gap;
//! - a local time that occurs twice (the fall-back hour) runs once, at the earlier instant.
//!
//! Catch-up after downtime runs the most recent missed tick once, not once per missed tick.

use chrono::{DateTime, Duration, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::config::ScheduleConfig;

/// Local wall-clock time as a UTC value, so the cron crate sees no DST at all.
fn naive_as_utc(t: NaiveDateTime) -> DateTime<Utc> {
    Utc.from_utc_datetime(&t)
}

/// The instant of a local time under the DST policy above.
pub fn resolve_local(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let mut probe = local;
    loop {
        if let Some(t) = tz.from_local_datetime(&probe).earliest() {
            return t.with_timezone(&Utc);
        }
        // Inside a gap: step to the first minute that exists.
        probe += Duration::minutes(1);
    }
}

/// The first run strictly after `after`.
pub fn next_run(schedule: &ScheduleConfig, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local = after.with_timezone(&schedule.timezone).naive_local();
    // A tick can map to an instant before `after` only around DST changes; skip those.
    schedule
        .cron
        .after(&naive_as_utc(local - Duration::hours(3)))
        .take(10_000)
        .map(|t| resolve_local(schedule.timezone, t.naive_utc()))
        .find(|t| *t > after)
}

/// The latest run at or before `now`: what catch-up looks for.
pub fn previous_run(schedule: &ScheduleConfig, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local = now.with_timezone(&schedule.timezone).naive_local();
    schedule
        .cron
        .after(&naive_as_utc(local + Duration::hours(3)))
        .rev()
        .take(10_000)
        .map(|t| resolve_local(schedule.timezone, t.naive_utc()))
        .find(|t| *t <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_cron;

    fn schedule(cron: &str, tz: &str) -> ScheduleConfig {
        ScheduleConfig {
            cron: parse_cron(cron).unwrap(),
            expression: cron.into(),
            timezone: tz.parse().unwrap(),
        }
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn daily_run_at_eight_in_shanghai() {
        let s = schedule("0 8 * * *", "Asia/Shanghai");
        let next = next_run(&s, utc("2026-10-27T23:59:00Z")).unwrap();
        assert_eq!(next, utc("2026-10-28T00:00:00Z"));
        assert_eq!(next_run(&s, next).unwrap(), utc("2026-10-29T00:00:00Z"));
        assert_eq!(previous_run(&s, utc("2026-10-28T05:00:00Z")).unwrap(), next);
        assert_eq!(
            previous_run(&s, next).unwrap(),
            next,
            "a tick at exactly now counts"
        );
    }

    #[test]
    fn nonexistent_local_time_runs_at_the_next_valid_instant() {
        // Berlin, 2026-03-29: 02:00 -> 03:00. A 02:30 run happens at 03:00 CEST.
        let s = schedule("30 2 * * *", "Europe/Berlin");
        let next = next_run(&s, utc("2026-03-28T12:00:00Z")).unwrap();
        assert_eq!(next, utc("2026-03-29T01:00:00Z"));
        // And the day after is back to 02:30.
        assert_eq!(next_run(&s, next).unwrap(), utc("2026-03-30T00:30:00Z"));
    }

    #[test]
    fn ambiguous_local_time_runs_once() {
        // Berlin, 2026-10-25: 03:00 -> 02:00, so 02:30 happens twice.
        let s = schedule("30 2 * * *", "Europe/Berlin");
        let first = next_run(&s, utc("2026-10-24T12:00:00Z")).unwrap();
        assert_eq!(
            first,
            utc("2026-10-25T00:30:00Z"),
            "the earlier instant (CEST)"
        );
        let second = next_run(&s, first).unwrap();
        assert_eq!(
            second,
            utc("2026-10-26T01:30:00Z"),
            "not again at 02:30 CET the same night"
        );
    }

    #[test]
    fn six_field_form_with_seconds_is_accepted() {
        let s = schedule("0 0 8 * * *", "UTC");
        assert_eq!(
            next_run(&s, utc("2026-10-28T07:00:00Z")).unwrap(),
            utc("2026-10-28T08:00:00Z")
        );
    }
}
