//! When digests run: a crontab expression ([`crate::crontab`]) read in a time zone. Pure: the
//! caller passes "now".
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

use crate::settings::ScheduleConfig;

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

/// The first instant at or after `after` whose wall-clock time in `tz` is `at`, under the
/// DST policy above: a time in the spring-forward gap is the end of the gap, a time that
/// occurs twice the earlier instant. A reader's own delivery time.
pub fn next_local_time(tz: Tz, at: chrono::NaiveTime, after: DateTime<Utc>) -> DateTime<Utc> {
    let day = after.with_timezone(&tz).date_naive();
    (0..3)
        .map(|d| resolve_local(tz, (day + Duration::days(d)).and_time(at)))
        .find(|t| *t >= after)
        .unwrap_or(after)
}

/// The first run strictly after `after`.
pub fn next_run(schedule: &ScheduleConfig, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local = after.with_timezone(&schedule.timezone).naive_local();
    // A tick can map to an instant before `after` only around DST changes; skip those.
    std::iter::successors(schedule.cron.next_after(local - Duration::hours(3)), |t| {
        schedule.cron.next_after(*t)
    })
    .take(10_000)
    .map(|t| resolve_local(schedule.timezone, t))
    .find(|t| *t > after)
}

/// The latest run at or before `now`: what catch-up looks for.
pub fn previous_run(schedule: &ScheduleConfig, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local = now.with_timezone(&schedule.timezone).naive_local();
    std::iter::successors(
        schedule.cron.last_at_or_before(local + Duration::hours(3)),
        |t| schedule.cron.last_at_or_before(*t - Duration::minutes(1)),
    )
    .take(10_000)
    .map(|t| resolve_local(schedule.timezone, t))
    .find(|t| *t <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crontab::Crontab;

    fn schedule(cron: &str, tz: &str) -> ScheduleConfig {
        ScheduleConfig {
            cron: Crontab::parse(cron).unwrap(),
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

    /// Next fire times computed outside this code, from the POSIX rules: a brute-force
    /// matcher that walks UTC minutes through Python's zoneinfo, fires on the first instant
    /// a matching local minute is reached, and fires gap minutes at the gap's end (the
    /// policy in the module comment). Columns: expression, zone, after, expected next run.
    const POSIX_TABLE: &[(&str, &str, &str, &str)] = &[
        (
            "0 8 * * 1-5",
            "Asia/Shanghai",
            "2026-12-04T01:00:00Z",
            "2026-12-07T00:00:00Z",
        ),
        (
            "0 8 * * 1-5",
            "Asia/Shanghai",
            "2026-12-06T12:00:00Z",
            "2026-12-07T00:00:00Z",
        ),
        (
            "0 0 * * 0",
            "UTC",
            "2026-12-01T00:00:00Z",
            "2026-12-06T00:00:00Z",
        ),
        (
            "0 0 * * 7",
            "UTC",
            "2026-12-06T00:00:00Z",
            "2026-12-13T00:00:00Z",
        ),
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-03-29T01:00:00Z",
        ),
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:30:00Z",
        ),
        (
            "*/20 2 * * *",
            "Europe/Berlin",
            "2026-03-28T23:00:00Z",
            "2026-03-29T01:00:00Z",
        ),
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-24T12:00:00Z",
            "2026-10-25T00:30:00Z",
        ),
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-25T00:30:00Z",
            "2026-10-26T01:30:00Z",
        ),
        (
            "0 2 * * sun",
            "America/New_York",
            "2026-03-07T12:00:00Z",
            "2026-03-08T07:00:00Z",
        ),
        (
            "30 1 * * *",
            "America/New_York",
            "2026-10-31T12:00:00Z",
            "2026-11-01T05:30:00Z",
        ),
        (
            "30 1 * * *",
            "America/New_York",
            "2026-11-01T05:30:00Z",
            "2026-11-02T06:30:00Z",
        ),
        (
            "15 2 * * *",
            "Australia/Lord_Howe",
            "2026-10-03T12:00:00Z",
            "2026-10-03T15:30:00Z",
        ),
        (
            "0 0 1 * mon",
            "UTC",
            "2026-12-01T00:00:00Z",
            "2026-12-07T00:00:00Z",
        ),
        (
            "0 9 29 2 *",
            "Asia/Tokyo",
            "2026-03-01T00:00:00Z",
            "2028-02-29T00:00:00Z",
        ),
        (
            "@monthly",
            "Europe/London",
            "2026-03-15T00:00:00Z",
            "2026-03-31T23:00:00Z",
        ),
        (
            "0 8 * * mon-fri",
            "Europe/London",
            "2026-10-24T12:00:00Z",
            "2026-10-26T08:00:00Z",
        ),
        (
            "45 23 * * 5",
            "Pacific/Auckland",
            "2026-04-03T00:00:00Z",
            "2026-04-03T10:45:00Z",
        ),
    ];

    #[test]
    fn next_runs_match_the_posix_table_dst_included() {
        for (expr, tz, after, expected) in POSIX_TABLE {
            let s = schedule(expr, tz);
            assert_eq!(
                next_run(&s, utc(after)),
                Some(utc(expected)),
                "{expr} in {tz} after {after}"
            );
        }
    }

    #[test]
    fn previous_run_is_the_table_inverted() {
        // The run before each expected next run's successor is that run itself.
        for (expr, tz, _, expected) in POSIX_TABLE {
            let s = schedule(expr, tz);
            let run = utc(expected);
            assert_eq!(previous_run(&s, run), Some(run), "{expr} in {tz}");
            assert!(
                previous_run(&s, run - Duration::minutes(1)).is_none_or(|p| p < run),
                "{expr} in {tz}"
            );
        }
    }

    #[test]
    fn a_readers_hour_is_dst_correct_in_every_zone() {
        let utc = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        let at = |h, m| chrono::NaiveTime::from_hms_opt(h, m, 0).unwrap();
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let la: Tz = "America/Los_Angeles".parse().unwrap();
        let shanghai: Tz = "Asia/Shanghai".parse().unwrap();
        // A digest ready at 08:00 Shanghai (00:00 UTC) on 2026-10-28.
        let ready = utc("2026-10-28T00:00:00Z");
        // Berlin is on CET (UTC+1) after 25 October: 09:30 local is 08:30 UTC that day.
        assert_eq!(
            next_local_time(berlin, at(9, 30), ready),
            utc("2026-10-28T08:30:00Z")
        );
        // Los Angeles is still on PDT (UTC-7) until 1 November: 07:00 local is 14:00 UTC.
        assert_eq!(
            next_local_time(la, at(7, 0), ready),
            utc("2026-10-28T14:00:00Z")
        );
        // Shanghai at 08:00 is the ready instant itself: due at once, not a day later.
        assert_eq!(next_local_time(shanghai, at(8, 0), ready), ready);
        // Already past today: tomorrow.
        assert_eq!(
            next_local_time(shanghai, at(7, 0), ready),
            utc("2026-10-28T23:00:00Z")
        );
        // Berlin in summer (CEST, UTC+2).
        assert_eq!(
            next_local_time(berlin, at(9, 30), utc("2026-07-01T00:00:00Z")),
            utc("2026-07-01T07:30:00Z")
        );
        // Spring forward: 02:30 does not exist on 29 March in Berlin; the end of the gap.
        assert_eq!(
            next_local_time(berlin, at(2, 30), utc("2026-03-28T23:00:00Z")),
            utc("2026-03-29T01:00:00Z")
        );
        // Fall back: 02:30 happens twice on 25 October; once, at the earlier instant.
        assert_eq!(
            next_local_time(berlin, at(2, 30), utc("2026-10-24T23:00:00Z")),
            utc("2026-10-25T00:30:00Z")
        );
    }
}
