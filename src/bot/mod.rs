//! Chat commands shared by Telegram and Discord: one [`Command`] enum, one parser, one
//! handler per command (handlers.rs) returning a platform-neutral [`Reply`] that each
//! platform renders its own way. Every text comes from the locale tables.

#[cfg(feature = "discord")]
pub mod discord;
pub mod handlers;
pub mod routes;
#[cfg(feature = "telegram")]
pub mod telegram;

use std::collections::BTreeSet;

use chrono::NaiveDate;

use crate::locale::Locale;
use crate::model::{Digest, Score};

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Start,
    Help,
    Subscribe {
        layers: BTreeSet<String>,
        min_score: Option<Score>,
    },
    Unsubscribe,
    /// None: show; Some(empty set): all layers; Some(set): those layers.
    Layers(Option<BTreeSet<String>>),
    Threshold(Option<Score>),
    Settings,
    Lang(Option<String>),
    Digest {
        date: DateArg,
        layers: BTreeSet<String>,
    },
    /// `/why N [date]`: the score breakdown of event N (numbered as in every render) of that
    /// day's digest, by default the latest one with events.
    Why {
        n: usize,
        date: Option<DateArg>,
    },
    Status,
    Run,
    /// `/time`: show; `/time HH:MM [Zone]`: deliver at that local time (zone: the digest's
    /// by default); `/time off`: as soon as the digest is ready.
    Time(TimeArg),
    /// `/cadence`: show; `/cadence daily | weekly [day] | both [day]`: set.
    Cadence(Option<crate::subscriber::Cadence>),
    /// `/boost`: show; `/boost on|off`: the layer boost from the chat's votes.
    Boost(Option<bool>),
    /// `/follow`: show; `/follow <project or phrase>`: follow it (crate::following).
    Follow(Option<String>),
    /// `/unfollow <phrase>`.
    Unfollow(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeArg {
    Show,
    Off,
    Set {
        at: chrono::NaiveTime,
        tz: Option<chrono_tz::Tz>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateArg {
    Today,
    Yesterday,
    Latest,
    Date(NaiveDate),
}

/// Characters of a bad argument a reply quotes back, at most.
pub const MAX_ECHOED_CHARS: usize = 40;

/// A command that could not be parsed, with what is wrong and the right form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadCommand {
    /// Locale key of the problem (bot_bad_layer, bot_unknown, ...).
    pub problem: &'static str,
    pub arg: String,
    /// The command's usage line, None for an unknown command.
    pub usage: Option<&'static str>,
}

impl BadCommand {
    pub fn message(&self, t: &Locale, layers: &[&str]) -> String {
        // The reply must fit one message whatever was typed: a 4,000-character argument
        // echoed in full made Telegram refuse the reply, so the user saw nothing.
        let arg = crate::text::truncate_chars(&self.arg, MAX_ECHOED_CHARS);
        let problem = t.fill(
            self.problem,
            &[("arg", &arg), ("layers", &layers.join(", "))],
        );
        match self.usage {
            Some(usage) => t.fill("bot_usage", &[("problem", &problem), ("usage", usage)]),
            None => problem,
        }
    }
}

/// What the bot answers, before a platform renders it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Plain text; the platform escapes it.
    Text(String),
    /// A digest (already filtered), optionally after a note.
    Digest {
        note: Option<String>,
        digest: Box<Digest>,
    },
    /// The layer picker: text plus one toggle per layer.
    Layers {
        text: String,
        selected: BTreeSet<String>,
        all: Vec<String>,
        language: String,
    },
}

/// The commands registered with the platforms, with their locale description keys.
pub const MENU: &[(&str, &str)] = &[
    ("start", "cmd_start"),
    ("help", "cmd_help"),
    ("subscribe", "cmd_subscribe"),
    ("unsubscribe", "cmd_unsubscribe"),
    ("layers", "cmd_layers"),
    ("threshold", "cmd_threshold"),
    ("settings", "cmd_settings"),
    ("lang", "cmd_lang"),
    ("digest", "cmd_digest"),
    ("why", "cmd_why"),
    ("time", "cmd_time"),
    ("cadence", "cmd_cadence"),
    ("boost", "cmd_boost"),
    ("follow", "cmd_follow"),
    ("unfollow", "cmd_unfollow"),
];

/// Parses `/command args` (`/command@botname` in groups). `Ok(None)` for text that is not a
/// command or a command addressed to another bot.
pub fn parse(
    text: &str,
    bot_username: Option<&str>,
    layers: &[&str],
) -> Result<Option<Command>, BadCommand> {
    let text = text.trim();
    let Some(rest) = text.strip_prefix('/') else {
        return Ok(None);
    };
    let mut words = rest.split_whitespace();
    let head = words.next().unwrap_or("");
    let (name, target) = head
        .split_once('@')
        .map_or((head, None), |(n, b)| (n, Some(b)));
    if let (Some(target), Some(me)) = (target, bot_username)
        && !target.eq_ignore_ascii_case(me)
    {
        return Ok(None);
    }
    let args: Vec<&str> = words.collect();
    let bad = |problem, arg: &str, usage| BadCommand {
        problem,
        arg: arg.to_string(),
        usage: Some(usage),
    };
    let layer_set = |args: &[&str], usage| -> Result<BTreeSet<String>, BadCommand> {
        let mut set = BTreeSet::new();
        for a in args
            .iter()
            .flat_map(|a| a.split(','))
            .filter(|a| !a.is_empty())
        {
            let a = a.to_lowercase();
            if a == "all" {
                continue;
            }
            if !layers.contains(&a.as_str()) {
                return Err(bad("bot_bad_layer", &a, usage));
            }
            set.insert(a);
        }
        Ok(set)
    };
    let score = |arg: &str, usage| {
        arg.parse::<f64>()
            .ok()
            .and_then(Score::parse_threshold)
            .ok_or_else(|| bad("bot_bad_score", arg, usage))
    };
    Ok(Some(match name.to_lowercase().as_str() {
        "start" => Command::Start,
        "help" => Command::Help,
        "subscribe" => {
            const USAGE: &str = "/subscribe [layer...] [0-100]";
            let (score_arg, layer_args) = match args.split_last() {
                Some((last, rest)) if last.parse::<f64>().is_ok() => (Some(*last), rest),
                _ => (None, &args[..]),
            };
            Command::Subscribe {
                layers: layer_set(layer_args, USAGE)?,
                min_score: score_arg.map(|a| score(a, USAGE)).transpose()?,
            }
        }
        "unsubscribe" | "stop" => Command::Unsubscribe,
        "layers" => {
            const USAGE: &str = "/layers [layer... | all]";
            if args.is_empty() {
                Command::Layers(None)
            } else {
                Command::Layers(Some(layer_set(&args, USAGE)?))
            }
        }
        "threshold" => {
            const USAGE: &str = "/threshold [0-100]";
            match args.as_slice() {
                [] => Command::Threshold(None),
                [a] => Command::Threshold(Some(score(a, USAGE)?)),
                [_, extra, ..] => return Err(bad("bot_bad_score", extra, USAGE)),
            }
        }
        "settings" => Command::Settings,
        "lang" => {
            const USAGE: &str = "/lang zh|en";
            match args.first().map(|a| a.to_lowercase()) {
                None => Command::Lang(None),
                Some(l) if l == "zh" || l == "zh-cn" => Command::Lang(Some("zh-CN".into())),
                Some(l) if l == "en" => Command::Lang(Some("en".into())),
                Some(l) => return Err(bad("bot_bad_lang", &l, USAGE)),
            }
        }
        "digest" => {
            const USAGE: &str = "/digest [today|yesterday|YYYY-MM-DD|latest] [layer...]";
            let (date, rest) = match date_arg(args.first().copied(), USAGE)? {
                Some(d) => (d, &args[1..]),
                None => (DateArg::Today, &args[..]),
            };
            Command::Digest {
                date,
                layers: layer_set(rest, USAGE)?,
            }
        }
        "why" => {
            const USAGE: &str = "/why N [today|yesterday|YYYY-MM-DD|latest]";
            let arg = args.first().copied().unwrap_or("");
            let n = match arg.parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => return Err(bad("bot_bad_number", arg, USAGE)),
            };
            let date = match args.get(1) {
                None => None,
                Some(a) => {
                    Some(date_arg(Some(a), USAGE)?.ok_or_else(|| bad("bot_bad_date", a, USAGE))?)
                }
            };
            Command::Why { n, date }
        }
        "time" => {
            const USAGE: &str = "/time HH:MM [Europe/Berlin] | off";
            match args.as_slice() {
                [] => Command::Time(TimeArg::Show),
                [off] if off.eq_ignore_ascii_case("off") => Command::Time(TimeArg::Off),
                [at, rest @ ..] if rest.len() <= 1 => {
                    let at = chrono::NaiveTime::parse_from_str(at, "%H:%M")
                        .map_err(|_| bad("bot_bad_time", at, USAGE))?;
                    let tz = match rest.first() {
                        None => None,
                        Some(z) => Some(
                            z.parse::<chrono_tz::Tz>()
                                .map_err(|_| bad("bot_bad_zone", z, USAGE))?,
                        ),
                    };
                    Command::Time(TimeArg::Set { at, tz })
                }
                // Three words or more (the guard above takes one or two).
                [.., extra] => return Err(bad("bot_bad_time", extra, USAGE)),
            }
        }
        "cadence" => {
            const USAGE: &str = "/cadence daily | weekly [mon..sun] | both [mon..sun]";
            let cadence = match args.as_slice() {
                [] => None,
                [c] => Some(c.to_string()),
                [c, day] => Some(format!("{c}:{day}")),
                [.., extra] => return Err(bad("bot_bad_cadence", extra, USAGE)),
            };
            match cadence {
                None => Command::Cadence(None),
                Some(c) => Command::Cadence(Some(
                    crate::subscriber::Cadence::parse(&c)
                        .map_err(|_| bad("bot_bad_cadence", &c, USAGE))?,
                )),
            }
        }
        "boost" => {
            const USAGE: &str = "/boost on|off";
            match args.first().map(|a| a.to_ascii_lowercase()) {
                None => Command::Boost(None),
                Some(a) if a == "on" => Command::Boost(Some(true)),
                Some(a) if a == "off" => Command::Boost(Some(false)),
                Some(a) => return Err(bad("bot_bad_boost", &a, USAGE)),
            }
        }
        "follow" | "unfollow" => {
            let usage = if name.eq_ignore_ascii_case("follow") {
                "/follow [project or \"phrase\"]"
            } else {
                "/unfollow project or \"phrase\""
            };
            let typed = args.join(" ");
            let phrase = if typed.is_empty() {
                None
            } else {
                Some(
                    crate::following::normalize(&typed)
                        .map_err(|_| bad("bot_bad_follow", &typed, usage))?,
                )
            };
            match (name.eq_ignore_ascii_case("follow"), phrase) {
                (true, phrase) => Command::Follow(phrase),
                (false, Some(phrase)) => Command::Unfollow(phrase),
                (false, None) => return Err(bad("bot_bad_follow", "", usage)),
            }
        }
        "status" => Command::Status,
        "run" => Command::Run,
        _ => {
            return Err(BadCommand {
                problem: "bot_unknown",
                arg: format!("/{name}"),
                usage: None,
            });
        }
    }))
}

/// A date argument, or None when `arg` is not one (then it is something else, a layer).
fn date_arg(arg: Option<&str>, usage: &'static str) -> Result<Option<DateArg>, BadCommand> {
    let Some(a) = arg.map(str::to_lowercase) else {
        return Ok(None);
    };
    Ok(Some(match a.as_str() {
        "today" => DateArg::Today,
        "yesterday" => DateArg::Yesterday,
        "latest" => DateArg::Latest,
        _ if a.starts_with(|c: char| c.is_ascii_digit()) => DateArg::Date(
            NaiveDate::parse_from_str(&a, "%Y-%m-%d").map_err(|_| BadCommand {
                problem: "bot_bad_date",
                arg: a.clone(),
                usage: Some(usage),
            })?,
        ),
        _ => return Ok(None),
    }))
}

/// True the first time an update reaches any instance (the store remembers handled ids
/// for a day). A store that cannot answer lets the update through: better answered twice
/// than never.
pub(crate) async fn first_handling(store: &crate::store::Store, source: &str, id: &str) -> bool {
    match store.first_handling(source, id, chrono::Utc::now()).await {
        Ok(first) => {
            if !first {
                tracing::info!(
                    message = "Update handled already (a retry); skipped",
                    source,
                    id
                );
            }
            first
        }
        Err(error) => {
            tracing::warn!(message = "Cannot check whether an update was handled; handling it", error = %format!("{error:#}"));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYERS: &[&str] = &["frontend", "runtime", "benchmark"];

    fn p(text: &str) -> Result<Option<Command>, BadCommand> {
        parse(text, Some("kdigest_bot"), LAYERS)
    }

    #[test]
    fn a_huge_bad_argument_is_quoted_short() {
        let junk = "x".repeat(4_000);
        let bad = p(&format!("/digest {junk}")).unwrap_err();
        let text = bad.message(&Locale::builtin("en"), LAYERS);
        assert!(text.chars().count() < 300, "{} chars", text.chars().count());
        assert!(text.contains(&"x".repeat(30)));
    }

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(p("hello").unwrap(), None);
        assert_eq!(p("/start").unwrap(), Some(Command::Start));
        assert_eq!(p("/help@kdigest_bot").unwrap(), Some(Command::Help));
        assert_eq!(p("/help@other_bot").unwrap(), None);
        assert_eq!(
            p("/subscribe runtime Benchmark 75").unwrap(),
            Some(Command::Subscribe {
                layers: BTreeSet::from(["runtime".into(), "benchmark".into()]),
                min_score: Some(Score::from_f64(75.0))
            })
        );
        assert_eq!(
            p("/layers all").unwrap(),
            Some(Command::Layers(Some(BTreeSet::new())))
        );
        assert_eq!(p("/threshold").unwrap(), Some(Command::Threshold(None)));
        assert_eq!(
            p("/lang zh").unwrap(),
            Some(Command::Lang(Some("zh-CN".into())))
        );
        assert_eq!(
            p("/digest 2026-10-28 runtime").unwrap(),
            Some(Command::Digest {
                date: DateArg::Date(NaiveDate::from_ymd_opt(2026, 10, 28).unwrap()),
                layers: BTreeSet::from(["runtime".into()])
            })
        );
        assert_eq!(
            p("/digest runtime").unwrap(),
            Some(Command::Digest {
                date: DateArg::Today,
                layers: BTreeSet::from(["runtime".into()])
            })
        );
        assert_eq!(
            p("/why 2").unwrap(),
            Some(Command::Why { n: 2, date: None })
        );
        assert_eq!(
            p("/why 2 2026-10-28").unwrap(),
            Some(Command::Why {
                n: 2,
                date: Some(DateArg::Date(
                    NaiveDate::from_ymd_opt(2026, 10, 28).unwrap()
                ))
            })
        );
        assert!(p("/why 2 someday").is_err());
    }

    #[test]
    fn wrong_arguments_name_the_problem_and_the_right_form() {
        let t = Locale::builtin("en");
        let msg = |text: &str| p(text).unwrap_err().message(&t, LAYERS);
        assert_eq!(
            msg("/threshold 150"),
            "\"150\" is not a score from 0 to 100. Usage: /threshold [0-100]"
        );
        assert_eq!(
            msg("/layers gpu"),
            "\"gpu\" is not a layer; valid layers: frontend, runtime, benchmark. Usage: /layers [layer... | all]"
        );
        assert_eq!(
            msg("/digest 2026-13-01"),
            "\"2026-13-01\" is not a date; use today, yesterday, latest or YYYY-MM-DD. Usage: /digest [today|yesterday|YYYY-MM-DD|latest] [layer...]"
        );
        assert_eq!(
            msg("/why x"),
            "\"x\" is not an event number; use a number such as 1 or 2. Usage: /why N [today|yesterday|YYYY-MM-DD|latest]"
        );
        assert_eq!(
            msg("/frobnicate"),
            "Unknown command /frobnicate; send /help for the list."
        );
    }

    #[test]
    fn follow_takes_a_project_or_a_quoted_phrase() {
        assert_eq!(p("/follow").unwrap(), Some(Command::Follow(None)));
        assert_eq!(
            p("/follow triton").unwrap(),
            Some(Command::Follow(Some("triton".into())))
        );
        assert_eq!(
            p("/follow \"Flash   Attention\"").unwrap(),
            Some(Command::Follow(Some("Flash Attention".into())))
        );
        assert_eq!(
            p("/unfollow “triton”").unwrap(),
            Some(Command::Unfollow("triton".into()))
        );
        let t = Locale::builtin("en");
        assert_eq!(
            p("/unfollow").unwrap_err().message(&t, LAYERS),
            "\"\" cannot be followed: give a project or words, at most 60 characters. Usage: /unfollow project or \"phrase\""
        );
        assert!(p(&format!("/follow {}", "x".repeat(61))).is_err());
        assert!(p("/follow \"\"").is_err());
    }

    #[test]
    fn cadence_takes_a_kind_and_a_day() {
        use crate::subscriber::Cadence;
        use chrono::Weekday;
        assert_eq!(p("/cadence").unwrap(), Some(Command::Cadence(None)));
        assert_eq!(
            p("/cadence daily").unwrap(),
            Some(Command::Cadence(Some(Cadence::Daily)))
        );
        assert_eq!(
            p("/cadence weekly fri").unwrap(),
            Some(Command::Cadence(Some(Cadence::Weekly(Weekday::Fri))))
        );
        assert_eq!(
            p("/cadence both").unwrap(),
            Some(Command::Cadence(Some(Cadence::Both(Weekday::Mon))))
        );
        let bad = p("/cadence weekly funday").unwrap_err();
        assert_eq!(bad.problem, "bot_bad_cadence");
        assert!(bad.usage.unwrap().contains("weekly [mon..sun]"));
        assert!(p("/cadence weekly fri now").is_err());
    }

    #[test]
    fn time_takes_a_local_time_a_zone_or_off() {
        let at = chrono::NaiveTime::from_hms_opt(9, 30, 0).unwrap();
        assert_eq!(p("/time").unwrap(), Some(Command::Time(TimeArg::Show)));
        assert_eq!(p("/time OFF").unwrap(), Some(Command::Time(TimeArg::Off)));
        assert_eq!(
            p("/time 09:30 Europe/Berlin").unwrap(),
            Some(Command::Time(TimeArg::Set {
                at,
                tz: Some(chrono_tz::Europe::Berlin)
            }))
        );
        assert_eq!(
            p("/time 09:30").unwrap(),
            Some(Command::Time(TimeArg::Set { at, tz: None }))
        );
        assert_eq!(p("/time 9h30").unwrap_err().problem, "bot_bad_time");
        assert_eq!(
            p("/time 09:30 Mars/Base").unwrap_err().problem,
            "bot_bad_zone"
        );
        assert_eq!(
            p("/time 09:30 Europe/Berlin now").unwrap_err().problem,
            "bot_bad_time"
        );
    }
}
