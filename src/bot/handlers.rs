//! One function per command. Platform-neutral: they read and change subscribers through the
//! store and return a [`Reply`]; Telegram and Discord render it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use tokio::sync::mpsc;

use super::{Command, DateArg, Reply};
use crate::config::Config;
use crate::digest;
use crate::locale::Locale;
use crate::model::{Digest, Filter};
use crate::schedule::next_run;
use crate::store::Store;
use crate::subscriber::{Address, Status, Subscriber};

/// Per-chat cooldown on /digest, so one chat cannot flood the bot.
pub struct Cooldowns {
    period: Duration,
    last: Mutex<HashMap<String, Instant>>,
}

impl Cooldowns {
    pub fn new(period: Duration) -> Cooldowns {
        Cooldowns {
            period,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// None when the chat may go ahead (and starts its cooldown), else the seconds left.
    pub fn check(&self, key: &str) -> Option<u64> {
        let mut last = self.last.lock().expect("cooldown lock");
        let now = Instant::now();
        if let Some(at) = last.get(key) {
            let elapsed = now.duration_since(*at);
            if elapsed < self.period {
                return Some((self.period - elapsed).as_secs().max(1));
            }
        }
        last.insert(key.to_string(), now);
        None
    }
}

/// Asks the daemon to generate and deliver now (admin /run).
pub type RunTrigger = mpsc::Sender<()>;

pub struct Ctx<'a> {
    pub store: &'a Store,
    pub config: &'a Config,
    /// The chat the command came from.
    pub address: Address,
    /// May change this chat's subscription: a private chat, or an admin of the group.
    pub can_manage: bool,
    /// A kdigest admin (user id listed in the configuration).
    pub is_owner: bool,
    pub now: DateTime<Utc>,
    /// The language the user's app is set to (Telegram `language_code`, Discord `locale`),
    /// when kdigest has that language.
    pub client_language: Option<String>,
    pub cooldowns: &'a Cooldowns,
    pub runs: Option<&'a RunTrigger>,
    /// Permissions the bot lacks to post the digest here (Discord's `app_permissions`);
    /// empty where the platform does not say (Telegram reports it at send time).
    pub missing_permissions: Vec<&'static str>,
}

impl Ctx<'_> {
    async fn subscriber(&self) -> anyhow::Result<Option<Subscriber>> {
        self.store.subscriber_by_address(&self.address).await
    }

    fn layer_names(&self) -> Vec<&str> {
        self.config.layer_names()
    }
}

/// The language a chat's answers are in: its subscriber's setting, else the language of
/// the user's app, else the digest language.
pub async fn chat_language(
    store: &Store,
    config: &Config,
    address: &Address,
    client: Option<&str>,
) -> anyhow::Result<String> {
    Ok(language_of(
        store.subscriber_by_address(address).await?.as_ref(),
        client,
        config,
    ))
}

fn language_of(subscriber: Option<&Subscriber>, client: Option<&str>, config: &Config) -> String {
    match (subscriber, client) {
        (Some(s), _) => s.language.clone(),
        (None, Some(c)) => c.to_string(),
        (None, None) => config.digest.language.clone(),
    }
}

/// A client's language tag ("en-US", "zh-hans", "zh-TW", "de") as one kdigest has.
pub fn client_language(tag: Option<&str>) -> Option<String> {
    let tag = tag?.trim().to_ascii_lowercase();
    let primary = tag.split(['-', '_']).next()?;
    match primary {
        "en" => Some("en".into()),
        "zh" => Some("zh-CN".into()),
        _ => None,
    }
}

fn layers_text(layers: &BTreeSet<String>, t: &Locale) -> String {
    if layers.is_empty() {
        t.get("bot_all_layers").to_string()
    } else {
        // "运行时（runtime）": the reader's name, and the id a command takes.
        layers
            .iter()
            .map(|id| match t.layer(id) {
                name if name == id => id.clone(),
                name => t.fill("layer_with_id", &[("name", name), ("id", id)]),
            })
            .collect::<Vec<_>>()
            .join(t.get("list_separator"))
    }
}

/// Runs one command. Errors are I/O failures; user mistakes are replies.
pub async fn handle(command: Command, ctx: &Ctx<'_>) -> anyhow::Result<Reply> {
    let subscriber = ctx.subscriber().await?;
    let language = language_of(
        subscriber.as_ref(),
        ctx.client_language.as_deref(),
        ctx.config,
    );
    let t = crate::templates::locale(&language, ctx.config.digest.templates_dir.as_deref())?;
    let text = |s: String| Ok(Reply::Text(s));
    let manage_denied = || Reply::Text(t.get("bot_admins_only").to_string());
    match command {
        Command::Start | Command::Help => {
            text(t.fill("bot_help", &[("layers", &ctx.layer_names().join(", "))]))
        }
        Command::Subscribe { layers, min_score } => {
            if !ctx.can_manage {
                return Ok(manage_denied());
            }
            // Subscribing a channel the bot cannot post to would only disable it at the
            // first delivery: say now what to grant.
            if !ctx.missing_permissions.is_empty() {
                return text(t.fill(
                    "bot_missing_permissions",
                    &[("permissions", &ctx.missing_permissions.join(", "))],
                ));
            }
            match subscriber {
                Some(mut s) => {
                    // Only what is given changes; a bare /subscribe re-activates and confirms.
                    let changed =
                        !layers.is_empty() || min_score.is_some() || s.status != Status::Active;
                    if !layers.is_empty() {
                        s.filter.layers = layers;
                    }
                    if let Some(score) = min_score {
                        s.filter.min_score = score;
                    }
                    ctx.store.update_subscriber(&s, ctx.now).await?;
                    ctx.store
                        .set_subscriber_status(s.id, &Status::Active, ctx.now)
                        .await?;
                    let key = if changed {
                        "bot_subscribed"
                    } else {
                        "bot_already_subscribed"
                    };
                    text(t.fill(
                        key,
                        &[
                            ("layers", &layers_text(&s.filter.layers, &t)),
                            ("score", &s.filter.min_score.to_string()),
                        ],
                    ))
                }
                None => {
                    let min_score = min_score.unwrap_or(ctx.config.digest.min_score);
                    let filter = Filter {
                        layers,
                        min_score,
                        boost: None,
                        follows: Vec::new(),
                    };
                    ctx.store
                        .add_subscriber(
                            &ctx.address,
                            &filter,
                            &language,
                            &Status::Active,
                            false,
                            ctx.now,
                        )
                        .await?;
                    text(t.fill(
                        "bot_subscribed",
                        &[
                            ("layers", &layers_text(&filter.layers, &t)),
                            ("score", &min_score.to_string()),
                        ],
                    ))
                }
            }
        }
        Command::Unsubscribe => {
            if !ctx.can_manage {
                return Ok(manage_denied());
            }
            match subscriber {
                Some(s) => {
                    ctx.store.remove_subscriber(s.id).await?;
                    text(t.get("bot_unsubscribed").to_string())
                }
                None => text(t.get("bot_not_subscribed").to_string()),
            }
        }
        Command::Layers(new) => {
            let Some(mut s) = subscriber else {
                return text(t.get("bot_not_subscribed").to_string());
            };
            if let Some(layers) = new {
                if !ctx.can_manage {
                    return Ok(manage_denied());
                }
                s.filter.layers = layers;
                ctx.store.update_subscriber(&s, ctx.now).await?;
            }
            Ok(Reply::Layers {
                text: t.fill(
                    "bot_layers",
                    &[("layers", &layers_text(&s.filter.layers, &t))],
                ),
                selected: s.filter.layers.clone(),
                all: ctx.layer_names().iter().map(|l| l.to_string()).collect(),
                language: s.language.clone(),
            })
        }
        Command::Threshold(new) => {
            let Some(mut s) = subscriber else {
                return text(t.get("bot_not_subscribed").to_string());
            };
            if let Some(score) = new {
                if !ctx.can_manage {
                    return Ok(manage_denied());
                }
                s.filter.min_score = score;
                ctx.store.update_subscriber(&s, ctx.now).await?;
            }
            text(t.fill(
                "bot_threshold",
                &[("score", &s.filter.min_score.to_string())],
            ))
        }
        Command::Time(arg) => {
            let new = match arg {
                crate::bot::TimeArg::Show => None,
                crate::bot::TimeArg::Off => Some(None),
                crate::bot::TimeArg::Set { at, tz } => Some(Some(crate::subscriber::LocalTime {
                    at,
                    tz: tz.unwrap_or(ctx.config.digest.timezone),
                })),
            };
            setting(
                ctx,
                subscriber,
                &t,
                new.map(|at| move |s: &mut Subscriber| s.deliver_at = at),
                |s, t| t.fill("bot_time", &[("time", &time_text(s.deliver_at, t))]),
            )
            .await
        }
        Command::Cadence(new) => {
            setting(
                ctx,
                subscriber,
                &t,
                new.map(|c| move |s: &mut Subscriber| s.cadence = c),
                |s, t| t.fill("bot_cadence", &[("cadence", &cadence_text(s.cadence, t))]),
            )
            .await
        }
        Command::Boost(new) => {
            // The liked layers when the boost is being turned on (asked for only then).
            let liked = match (new, &subscriber) {
                (Some(true), Some(s)) if ctx.can_manage => {
                    Some(ctx.store.liked_layers(s.id).await?)
                }
                _ => None,
            };
            setting(
                ctx,
                subscriber,
                &t,
                new.map(|on| {
                    move |s: &mut Subscriber| s.filter.boost = on.then(|| liked.unwrap_or_default())
                }),
                |s, t| t.fill("bot_boost", &[("boost", &boost_text(&s.filter, t))]),
            )
            .await
        }
        Command::Follow(new) => follow(ctx, subscriber, &t, new.map(|p| (true, p))).await,
        Command::Unfollow(phrase) => follow(ctx, subscriber, &t, Some((false, phrase))).await,
        Command::Settings | Command::Lang(None) => match subscriber {
            Some(s) => text(settings(&s, &t)),
            None => text(t.get("bot_not_subscribed").to_string()),
        },
        Command::Lang(Some(lang)) => {
            let Some(mut s) = subscriber else {
                return text(t.get("bot_not_subscribed").to_string());
            };
            if !ctx.can_manage {
                return Ok(manage_denied());
            }
            s.language = lang.clone();
            ctx.store.update_subscriber(&s, ctx.now).await?;
            let t = crate::templates::locale(&lang, ctx.config.digest.templates_dir.as_deref())?;
            text(t.fill("bot_lang_set", &[("lang", &lang)]))
        }
        Command::Digest { date, layers } => {
            digest_reply(ctx, subscriber.as_ref(), &language, &t, date, layers).await
        }
        Command::Why { n, date } => {
            let found = match date.map(|d| requested_day(ctx, d)) {
                Some(Some(day)) => ctx.store.load_digest(day).await?,
                // No date (or `latest`): the latest digest with events, not an empty day
                // stored by a catch-up run.
                _ => ctx.store.latest_digest_with_events().await?,
            };
            let Some(d) = found else {
                return text(t.get("bot_no_digest").to_string());
            };
            let Some(e) = d.event_number(n) else {
                return text(t.fill(
                    "bot_why_missing",
                    &[
                        ("n", &n.to_string()),
                        ("count", &d.events().count().to_string()),
                        ("date", &d.date.to_string()),
                    ],
                ));
            };
            let mut out = format!(
                "{} · {}. {}\n{} {}/100",
                d.date,
                n,
                e.title,
                t.get("score"),
                e.score
            );
            for c in &e.score_breakdown {
                out.push_str(&format!(
                    "\n• {} {:.3} × {} = {:.2} ({})",
                    c.name, c.value, c.weight, c.points, c.reason
                ));
            }
            let tally = ctx.store.tally(&e.id).await?;
            out.push_str(&format!("\n{} {tally}", t.get("vote_readers")));
            text(out)
        }
        Command::Status => {
            if !ctx.is_owner {
                return text(t.get("bot_owner_only").to_string());
            }
            let latest = ctx.store.latest_digest().await?;
            let (date, events, counts) = match &latest {
                Some(d) => (
                    d.date.to_string(),
                    d.events().count(),
                    ctx.store.delivery_counts(d.date).await?,
                ),
                None => ("-".into(), 0, Default::default()),
            };
            let next = next_run(&ctx.config.schedule, ctx.now).map_or("-".into(), |n| {
                n.with_timezone(&ctx.config.schedule.timezone).to_rfc3339()
            });
            text(t.fill(
                "bot_status",
                &[
                    ("date", &date),
                    ("events", &events.to_string()),
                    ("pending", &(counts.pending + counts.sending).to_string()),
                    ("sent", &counts.sent.to_string()),
                    ("failed", &counts.failed.to_string()),
                    ("next", &next),
                ],
            ))
        }
        Command::Run => {
            if !ctx.is_owner {
                return text(t.get("bot_owner_only").to_string());
            }
            match ctx.runs.map(|r| r.try_send(())) {
                Some(Ok(())) => text(t.get("bot_run_started").to_string()),
                _ => text(t.get("bot_run_busy").to_string()),
            }
        }
    }
}

/// A chat setting (delivery time, cadence, boost): without a change it is shown; a change
/// (admins only in groups) is stored. The answer is `answer` of the subscriber after it.
async fn setting(
    ctx: &Ctx<'_>,
    subscriber: Option<Subscriber>,
    t: &Locale,
    change: Option<impl FnOnce(&mut Subscriber)>,
    answer: impl FnOnce(&Subscriber, &Locale) -> String,
) -> anyhow::Result<Reply> {
    let Some(mut s) = subscriber else {
        return Ok(Reply::Text(t.get("bot_not_subscribed").to_string()));
    };
    if let Some(change) = change {
        if !ctx.can_manage {
            return Ok(Reply::Text(t.get("bot_admins_only").to_string()));
        }
        change(&mut s);
        ctx.store.update_subscriber(&s, ctx.now).await?;
    }
    Ok(Reply::Text(answer(&s, t)))
}

/// `/follow` and `/unfollow`: `edit` is (true, phrase) to follow it, (false, phrase) to stop;
/// none shows what the chat follows. A full list, or a phrase not followed, is answered
/// with what is.
async fn follow(
    ctx: &Ctx<'_>,
    subscriber: Option<Subscriber>,
    t: &Locale,
    edit: Option<(bool, String)>,
) -> anyhow::Result<Reply> {
    let follows = match (edit, &subscriber) {
        (Some((true, phrase)), Some(s)) => {
            match crate::following::add(&s.filter.follows, &phrase) {
                Ok(f) => Some(f),
                Err(_) => {
                    return Ok(Reply::Text(t.fill(
                        "bot_follows_full",
                        &[("n", &crate::following::MAX_FOLLOWS.to_string())],
                    )));
                }
            }
        }
        (Some((false, phrase)), Some(s)) => {
            match crate::following::remove(&s.filter.follows, &phrase) {
                Some(f) => Some(f),
                None => {
                    return Ok(Reply::Text(t.fill(
                        "bot_not_followed",
                        &[
                            ("phrase", &phrase),
                            ("follows", &follows_text(&s.filter, t)),
                        ],
                    )));
                }
            }
        }
        _ => None,
    };
    setting(
        ctx,
        subscriber,
        t,
        follows.map(|f| move |s: &mut Subscriber| s.filter.follows = f),
        |s, t| t.fill("bot_follows", &[("follows", &follows_text(&s.filter, t))]),
    )
    .await
}

/// A 👍/👎 button pressed in a chat: records `reader`'s vote (one per event and reader, a
/// new one replaces it) through the chat's subscription, if it has one, and answers with
/// the event's votes so far.
pub async fn vote(
    ctx: &Ctx<'_>,
    reader: &str,
    vote: crate::feedback::Vote,
    event_id: &str,
) -> anyhow::Result<String> {
    let subscriber = ctx.subscriber().await?;
    let language = language_of(
        subscriber.as_ref(),
        ctx.client_language.as_deref(),
        ctx.config,
    );
    let t = crate::templates::locale(&language, ctx.config.digest.templates_dir.as_deref())?;
    let recorded = ctx
        .store
        .record_vote(event_id, reader, subscriber.map(|s| s.id), vote, ctx.now)
        .await?;
    Ok(match recorded {
        Some(tally) => t.fill(
            "vote_recorded",
            &[("vote", vote.emoji()), ("tally", &tally.to_string())],
        ),
        None => t.get("vote_unknown").to_string(),
    })
}

/// "09:30 Europe/Berlin", or "as soon as the digest is ready".
fn time_text(at: Option<crate::subscriber::LocalTime>, t: &Locale) -> String {
    at.map_or_else(|| t.get("bot_time_now").to_string(), |a| a.to_string())
}

/// "off", "on: kernel_codegen (+10 points)", in the reader's words.
pub fn boost_text(f: &crate::model::Filter, t: &Locale) -> String {
    use crate::feedback::{BOOST_MIN_APPROVAL, BOOST_MIN_VOTES};
    use crate::model::BOOST_POINTS;
    match &f.boost {
        None => t.get("boost_off").to_string(),
        Some(layers) if layers.is_empty() => t.fill(
            "boost_on_none",
            &[
                ("votes", &BOOST_MIN_VOTES.to_string()),
                ("share", &format!("{:.0}", BOOST_MIN_APPROVAL * 100.0)),
            ],
        ),
        Some(layers) => t.fill(
            "boost_on",
            &[
                (
                    "layers",
                    &layers.iter().cloned().collect::<Vec<_>>().join(", "),
                ),
                ("points", &BOOST_POINTS.to_string()),
            ],
        ),
    }
}

/// The followed phrases, quoted, or how to follow one.
pub fn follows_text(f: &crate::model::Filter, t: &Locale) -> String {
    if f.follows.is_empty() {
        t.get("follows_none").to_string()
    } else {
        crate::following::listed(&f.follows)
    }
}

/// "daily", "the weekly roll-up on Friday", in the reader's words.
pub fn cadence_text(c: crate::subscriber::Cadence, t: &Locale) -> String {
    use crate::subscriber::Cadence;
    let day = |d: chrono::Weekday| {
        t.get(&format!("day_{}", d.to_string().to_ascii_lowercase()))
            .to_string()
    };
    match c {
        Cadence::Daily => t.get("cadence_daily").to_string(),
        Cadence::Weekly(d) => t.fill("cadence_weekly", &[("day", &day(d))]),
        Cadence::Both(d) => t.fill("cadence_both", &[("day", &day(d))]),
    }
}

fn settings(s: &Subscriber, t: &Locale) -> String {
    let status = match &s.status {
        Status::Disabled(reason) => format!("disabled ({reason})"),
        other => other.as_str().to_string(),
    };
    t.fill(
        "bot_settings",
        &[
            ("layers", &layers_text(&s.filter.layers, t)),
            ("score", &s.filter.min_score.to_string()),
            ("lang", &s.language),
            ("status", &status),
            ("time", &time_text(s.deliver_at, t)),
            ("cadence", &cadence_text(s.cadence, t)),
            ("boost", &boost_text(&s.filter, t)),
            ("follows", &follows_text(&s.filter, t)),
        ],
    )
}

async fn digest_reply(
    ctx: &Ctx<'_>,
    subscriber: Option<&Subscriber>,
    language: &str,
    t: &Locale,
    date: DateArg,
    layers: BTreeSet<String>,
) -> anyhow::Result<Reply> {
    if let Some(secs) = ctx.cooldowns.check(&ctx.address.to_stored()) {
        return Ok(Reply::Text(
            t.fill("bot_cooldown", &[("secs", &secs.to_string())]),
        ));
    }
    let tz = ctx.config.digest.timezone;
    let wanted = requested_day(ctx, date);
    let (note, found) = match wanted {
        None => (None, ctx.store.latest_digest().await?),
        Some(day) => match ctx.store.load_digest(day).await? {
            Some(d) => (None, Some(d)),
            None => {
                let window = digest::window_for(day, ctx.config);
                if window.end.to_utc() > ctx.now {
                    // Not out yet: say when, and offer the latest one.
                    let latest = ctx.store.latest_digest().await?;
                    let when = window
                        .end
                        .with_timezone(&tz)
                        .format("%Y-%m-%d %H:%M %Z")
                        .to_string();
                    let latest_date = latest
                        .as_ref()
                        .map_or("-".to_string(), |d| d.date.to_string());
                    let note = t.fill(
                        "bot_not_out_yet",
                        &[
                            ("date", &day.to_string()),
                            ("when", &when),
                            ("latest", &latest_date),
                        ],
                    );
                    match latest {
                        Some(d) => (Some(note), Some(d)),
                        None => {
                            return Ok(Reply::Text(format!("{note}\n{}", t.get("bot_no_digest"))));
                        }
                    }
                } else {
                    return Ok(Reply::Text(
                        t.fill("bot_no_digest_for", &[("date", &day.to_string())]),
                    ));
                }
            }
        },
    };
    let Some(d) = found else {
        return Ok(Reply::Text(t.get("bot_no_digest").to_string()));
    };
    let filter = match (layers.is_empty(), subscriber) {
        (false, s) => Filter {
            layers,
            min_score: s.map_or(ctx.config.digest.min_score, |s| s.filter.min_score),
            boost: s.and_then(|s| s.filter.boost.clone()),
            follows: s.map(|s| s.filter.follows.clone()).unwrap_or_default(),
        },
        (true, Some(s)) => s.filter.clone(),
        (true, None) => Filter {
            layers: BTreeSet::new(),
            min_score: ctx.config.digest.min_score,
            boost: None,
            follows: Vec::new(),
        },
    };
    let filtered: Digest = digest::filter(&d.in_language(language), &filter, t);
    Ok(Reply::Digest {
        note,
        digest: Box::new(filtered),
    })
}

/// Toggles one layer of a subscriber (the inline keyboard); `None` toggles to all layers.
pub fn toggle_layer(current: &BTreeSet<String>, layer: Option<&str>) -> BTreeSet<String> {
    match layer {
        None => BTreeSet::new(),
        Some(l) => {
            let mut next = current.clone();
            if !next.remove(l) {
                next.insert(l.to_string());
            }
            next
        }
    }
}

/// The day a date argument names in the digest's time zone; None for `latest`.
fn requested_day(ctx: &Ctx<'_>, date: DateArg) -> Option<NaiveDate> {
    let today = ctx
        .now
        .with_timezone(&ctx.config.digest.timezone)
        .date_naive();
    match date {
        DateArg::Today => Some(today),
        DateArg::Yesterday => today.pred_opt(),
        DateArg::Latest => None,
        DateArg::Date(d) => Some(d),
    }
}
