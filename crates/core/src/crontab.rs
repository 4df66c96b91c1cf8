//! Crontab's five fields with the meaning crontab(5) gives them. Pure.
//!
//! `minute hour day-of-month month day-of-week`, each a `*`, a number, a range `a-b`, a step
//! `*/n` or `a-b/n` (also `a/n`, from `a` to the end), or a comma list of those. Months take
//! names (`jan`..`dec`), weekdays too (`sun`..`sat`); weekdays are 0-7 with 0 and 7 both
//! Sunday. The macros `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and
//! `@hourly` stand for their usual lines.
//!
//! As in Vixie cron (Debian's, and the one POSIX describes): when both day fields are
//! restricted, a day matches if *either* matches (`0 0 1 * mon` runs on the 1st and on every
//! Monday); when one of them starts with `*`, both must match.
//!
//! We match local wall-clock minutes here and leave time zones to [`crate::schedule`]; the
//! cron crate is not used because its fields mean something else (a seconds field first,
//! 1 = Sunday, both day fields always required).

use std::fmt;

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// A parsed five-field expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crontab {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    /// Bits 0..=6, Sunday = 0 (7 is folded into 0).
    weekdays: u8,
    days_star: bool,
    weekdays_star: bool,
}

/// Why an expression was refused, in crontab terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrontabError(String);

impl fmt::Display for CrontabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CrontabError {}

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    allowed: &'static str,
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    allowed: "0-59",
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    allowed: "0-23",
};
const DAY: Field = Field {
    name: "day of month",
    min: 1,
    max: 31,
    names: &[],
    allowed: "1-31",
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    allowed: "1-12 or jan-dec",
};
const WEEKDAY: Field = Field {
    name: "day of week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    allowed: "0-7 (0 and 7 are Sunday) or sun-sat",
};

const SHAPE: &str = "crontab uses 5 fields: minute hour day-of-month month day-of-week, \
                     e.g. \"0 8 * * 1-5\" for 08:00 Monday to Friday";

impl Crontab {
    pub fn parse(expression: &str) -> Result<Crontab, CrontabError> {
        let expression = expression.trim();
        let expanded = match expression.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            m if m.starts_with('@') => {
                return Err(CrontabError(format!(
                    "{m} is not supported; use @yearly, @monthly, @weekly, @daily or @hourly, or {SHAPE}"
                )));
            }
            _ => expression,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(CrontabError(format!(
                "has {} fields; {SHAPE}",
                fields.len()
            )));
        }
        let weekdays = bits(fields[4], &WEEKDAY)?;
        let crontab = Crontab {
            minutes: bits(fields[0], &MINUTE)?,
            hours: bits(fields[1], &HOUR)? as u32,
            days: bits(fields[2], &DAY)? as u32,
            months: bits(fields[3], &MONTH)? as u16,
            weekdays: ((weekdays | (weekdays >> 7)) & 0x7f) as u8,
            days_star: fields[2].starts_with('*'),
            weekdays_star: fields[4].starts_with('*'),
        };
        if crontab.next_after(date(2024, 1, 1)).is_none() {
            return Err(CrontabError(
                "never fires: no month has that day (e.g. 30 in February); pick days that exist"
                    .into(),
            ));
        }
        Ok(crontab)
    }

    fn day_matches(&self, d: NaiveDate) -> bool {
        if self.months & (1 << d.month()) == 0 {
            return false;
        }
        let dom = self.days & (1 << d.day()) != 0;
        let dow = self.weekdays & (1 << d.weekday().num_days_from_sunday()) != 0;
        if self.days_star || self.weekdays_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    fn time_matches(&self, t: NaiveDateTime) -> bool {
        self.hours & (1 << t.hour()) != 0 && self.minutes & (1 << t.minute()) != 0
    }

    /// The first matching minute strictly after `t`, searched over the next nine years
    /// (29 February can be eight years apart).
    pub fn next_after(&self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut t = minute_floor(t).checked_add_signed(Duration::minutes(1))?;
        let limit = t.checked_add_signed(Duration::days(9 * 366))?;
        while t < limit {
            if !self.day_matches(t.date()) {
                t = t.date().succ_opt()?.and_time(NaiveTime::MIN);
            } else if self.hours & (1 << t.hour()) == 0 {
                t = minute_floor(t) + Duration::minutes(60 - i64::from(t.minute()));
            } else if !self.time_matches(t) {
                t += Duration::minutes(1);
            } else {
                return Some(t);
            }
        }
        None
    }

    /// The last matching minute at or before `t`, searched over the previous nine years.
    pub fn last_at_or_before(&self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut t = minute_floor(t);
        let limit = t.checked_sub_signed(Duration::days(9 * 366))?;
        while t > limit {
            if !self.day_matches(t.date()) {
                t = t.date().and_time(NaiveTime::MIN) - Duration::minutes(1);
            } else if self.hours & (1 << t.hour()) == 0 {
                t = minute_floor(t) - Duration::minutes(i64::from(t.minute()) + 1);
            } else if !self.time_matches(t) {
                t -= Duration::minutes(1);
            } else {
                return Some(t);
            }
        }
        None
    }
}

fn date(y: i32, m: u32, d: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(y, m, d)
        .expect("valid date")
        .and_time(NaiveTime::MIN)
}

fn minute_floor(t: NaiveDateTime) -> NaiveDateTime {
    t.with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(t)
}

/// One field as a bit set over `field.min..=field.max`.
fn bits(text: &str, field: &Field) -> Result<u64, CrontabError> {
    let mut set = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                    error(
                        field,
                        format!("step \"{s}\" in \"{part}\" is not a positive number"),
                    )
                })?;
                (r, Some(step))
            }
            None => (part, None),
        };
        let (lo, hi) = if range == "*" {
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(a, field)?, value(b, field)?);
            // "fri-sun" means Friday to Sunday: Sunday ends a weekday range as 7.
            let b = if field.max == 7 && b == 0 && a > 0 {
                7
            } else {
                b
            };
            (a, b)
        } else {
            let v = value(range, field)?;
            // "a/n" runs from a to the end of the range, as in Vixie cron.
            (v, if step.is_some() { field.max } else { v })
        };
        if lo > hi {
            return Err(error(
                field,
                format!("range \"{range}\" runs backwards; write the smaller value first"),
            ));
        }
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            set |= 1 << v;
            v += step;
        }
    }
    Ok(set)
}

fn value(text: &str, field: &Field) -> Result<u32, CrontabError> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = field.names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + field.min);
    }
    let v: u32 = text.parse().map_err(|_| {
        error(
            field,
            if text.is_empty() {
                "is empty".to_string()
            } else {
                format!("\"{text}\" is not a number")
            },
        )
    })?;
    if !(field.min..=field.max).contains(&v) {
        return Err(error(field, format!("{v} is out of range")));
    }
    Ok(v)
}

fn error(field: &Field, what: String) -> CrontabError {
    CrontabError(format!(
        "{} field: {what}; allowed: {}",
        field.name, field.allowed
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap()
    }

    fn next(expr: &str, after: &str) -> String {
        Crontab::parse(expr)
            .unwrap()
            .next_after(at(after))
            .unwrap()
            .format("%Y-%m-%d %H:%M %a")
            .to_string()
    }

    #[test]
    fn weekdays_mean_what_crontab_means() {
        // 2026-12-04 is a Friday.
        assert_eq!(
            next("0 8 * * 1-5", "2026-12-04 09:00"),
            "2026-12-07 08:00 Mon"
        );
        assert_eq!(
            next("0 0 * * 0", "2026-12-01 00:00"),
            "2026-12-06 00:00 Sun"
        );
        assert_eq!(
            next("0 0 * * 7", "2026-12-01 00:00"),
            "2026-12-06 00:00 Sun"
        );
        assert_eq!(
            next("0 0 * * sat,SUN", "2026-12-01 00:00"),
            "2026-12-05 00:00 Sat"
        );
        assert_eq!(
            next("0 0 * * fri-sun", "2026-12-06 00:00"),
            "2026-12-11 00:00 Fri"
        );
        assert_eq!(
            next("0 0 * * 5-7", "2026-12-06 00:00"),
            "2026-12-11 00:00 Fri"
        );
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        // 1st of the month or any Monday; 2026-12-01 is a Tuesday.
        assert_eq!(
            next("0 0 1 * mon", "2026-12-01 00:00"),
            "2026-12-07 00:00 Mon"
        );
        assert_eq!(
            next("0 0 1 * mon", "2026-12-28 00:00"),
            "2027-01-01 00:00 Fri"
        );
        // A star (even with a step) in one of them means both must match.
        assert_eq!(
            next("0 0 */2 * mon", "2026-12-01 00:00"),
            "2026-12-07 00:00 Mon"
        );
        assert_eq!(
            next("0 0 */2 * mon", "2026-12-08 00:00"),
            "2026-12-21 00:00 Mon"
        );
    }

    #[test]
    fn steps_lists_ranges_names_and_macros() {
        assert_eq!(
            next("*/15 9-10 * * *", "2026-12-01 09:50"),
            "2026-12-01 10:00 Tue"
        );
        assert_eq!(
            next("5/20 * * * *", "2026-12-01 09:50"),
            "2026-12-01 10:05 Tue"
        );
        assert_eq!(
            next("0 0 1 jan,Jul *", "2026-12-01 00:00"),
            "2027-01-01 00:00 Fri"
        );
        assert_eq!(
            next("0 0 29 2 *", "2026-12-01 00:00"),
            "2028-02-29 00:00 Tue"
        );
        assert_eq!(next("@weekly", "2026-12-01 00:00"), "2026-12-06 00:00 Sun");
        assert_eq!(next("@hourly", "2026-12-01 23:00"), "2026-12-02 00:00 Wed");
        assert_eq!(next("@DAILY", "2026-12-31 12:00"), "2027-01-01 00:00 Fri");
    }

    #[test]
    fn last_at_or_before_includes_the_minute_itself() {
        let c = Crontab::parse("0 8 * * 1-5").unwrap();
        assert_eq!(
            c.last_at_or_before(at("2026-12-07 08:00")),
            Some(at("2026-12-07 08:00"))
        );
        assert_eq!(
            c.last_at_or_before(at("2026-12-07 07:59")),
            Some(at("2026-12-04 08:00"))
        );
    }

    #[test]
    fn errors_name_the_field_and_the_crontab_range() {
        let e = |s: &str| Crontab::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("0 25 * * *"),
            "hour field: 25 is out of range; allowed: 0-23"
        );
        assert_eq!(
            e("60 8 * * *"),
            "minute field: 60 is out of range; allowed: 0-59"
        );
        assert_eq!(
            e("0 8 * * 8"),
            "day of week field: 8 is out of range; allowed: 0-7 (0 and 7 are Sunday) or sun-sat"
        );
        assert_eq!(
            e("0 8 0 * *"),
            "day of month field: 0 is out of range; allowed: 1-31"
        );
        assert_eq!(
            e("0 8 * foo *"),
            "month field: \"foo\" is not a number; allowed: 1-12 or jan-dec"
        );
        assert!(e("0 8 * * 5-1").contains("runs backwards"));
        assert!(e("*/0 8 * * *").contains("step \"0\""));
        assert!(e("0 8 * *").starts_with("has 4 fields; crontab uses 5"));
        assert!(e("0 0 8 * * *").starts_with("has 6 fields"));
        assert!(e("0 0 30 2 *").starts_with("never fires"));
        assert!(e("@reboot").contains("not supported"));
    }
}
