//! `kdigest subscribers add|list|set|remove|pause|resume`.

use std::collections::BTreeSet;

use chrono::Utc;
use clap::{Args, Subcommand};

use super::UsageError;
use crate::config::{Config, LANGUAGES};
use crate::model::{Filter, Score};
use crate::store::Store;
use crate::subscriber::{Address, Cadence, LocalTime, Status, Subscriber};

#[derive(Debug, Subcommand)]
pub enum SubscribersCommand {
    /// Subscribe an address: telegram:<chat id>, discord:<channel id or webhook URL>, email:<address>, webhook:<URL>, feishu:|dingtalk:|wecom:|slack:<robot webhook URL>
    Add {
        address: String,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        robot: RobotArgs,
        #[command(flatten)]
        time: TimeArgs,
        /// Send a short note on days when nothing matches the filter
        #[arg(long)]
        notify_empty: bool,
    },
    /// List subscribers with their filters and status (disabled ones with the reason)
    List,
    /// Change a subscriber's filter, language, delivery time, cadence or empty-day note
    Set {
        /// Subscriber id or address
        subscriber: String,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        robot: RobotArgs,
        #[command(flatten)]
        time: TimeArgs,
        /// Send a short note on days when nothing matches the filter (true or false)
        #[arg(long)]
        notify_empty: Option<bool>,
    },
    /// Remove a subscriber and its delivery history
    Remove { subscriber: String },
    /// Stop deliveries to a subscriber until resumed
    Pause { subscriber: String },
    /// Resume a paused or disabled subscriber
    Resume { subscriber: String },
}

/// The filter and language options shared by `add` and `set`.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Comma-separated layers, or "all" [add default: all]
    #[arg(long)]
    layers: Option<String>,
    /// Minimum event score 0-100 [add default: digest.min_score]
    #[arg(long)]
    min_score: Option<f64>,
    /// zh-CN or en [add default: digest.language]
    #[arg(long)]
    lang: Option<String>,
    /// Boost the layers this subscriber's votes consistently like (true or false): their
    /// events pass the threshold with 10 points less and rank higher [add default: false]
    #[arg(long)]
    boost: Option<bool>,
    /// Follow a project or phrase (repeatable): events about it reach this subscriber
    /// whatever the threshold and layers, marked ★
    #[arg(long, value_name = "PHRASE")]
    follow: Vec<String>,
    /// Stop following a phrase (repeatable)
    #[arg(long, value_name = "PHRASE")]
    unfollow: Vec<String>,
}

/// When the reader hears from us: their own delivery time and their cadence.
#[derive(Debug, Args)]
pub struct TimeArgs {
    /// daily, weekly[:<day>] (only the weekly roll-up of the seven days ending that day) or
    /// both[:<day>]; the day defaults to mon [add default: daily]
    #[arg(long, value_name = "CADENCE")]
    cadence: Option<String>,
    /// Deliver at this local time (HH:MM) instead of as soon as the digest is ready; "off"
    /// to go back to that
    #[arg(long, value_name = "HH:MM")]
    at: Option<String>,
    /// The time zone of --at, an IANA name such as Europe/Berlin [default: digest.timezone]
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
}

impl TimeArgs {
    /// The cadence after --cadence; what is not given stays.
    fn cadence(&self, current: Cadence) -> Result<Cadence, UsageError> {
        match &self.cadence {
            None => Ok(current),
            Some(c) => Cadence::parse(c).map_err(|e| UsageError(format!("--cadence: {e}"))),
        }
    }

    /// The delivery time after these options; what is not given stays.
    fn apply(
        &self,
        config: &Config,
        current: Option<LocalTime>,
    ) -> Result<Option<LocalTime>, UsageError> {
        match (self.at.as_deref(), self.tz.as_deref()) {
            (None, None) => Ok(current),
            (Some("off"), _) => Ok(None),
            (at, tz) => {
                let at = match (at, current) {
                    (Some(a), _) => a.to_string(),
                    (None, Some(c)) => c.at.format("%H:%M").to_string(),
                    (None, None) => {
                        return Err(UsageError(
                            "--tz needs --at HH:MM (the local time to deliver at)".into(),
                        ));
                    }
                };
                let tz = tz.map(str::to_string).unwrap_or_else(|| {
                    current.map_or(config.digest.timezone.name().to_string(), |c| {
                        c.tz.name().to_string()
                    })
                });
                LocalTime::parse(&at, &tz)
                    .map(Some)
                    .map_err(|e| UsageError(format!("--at/--tz: {e}")))
            }
        }
    }
}

/// A Feishu or DingTalk robot's security settings.
#[derive(Debug, Args)]
pub struct RobotArgs {
    /// Name of the environment variable holding the robot's signing secret (Feishu, DingTalk)
    #[arg(long, value_name = "VAR")]
    secret_env: Option<String>,
    /// The keyword the robot requires in every message (Feishu, DingTalk)
    #[arg(long)]
    keyword: Option<String>,
}

impl RobotArgs {
    /// The address with these settings over the ones it has; what is not given stays.
    fn apply(&self, address: Address) -> Result<Address, UsageError> {
        let mut options = address.options();
        if let Some(v) = &self.secret_env {
            options.secret_env = Some(v.clone());
        }
        if let Some(k) = &self.keyword {
            options.keyword = Some(k.clone());
        }
        address.with_options(options).map_err(UsageError)
    }
}

impl FilterArgs {
    /// Validates the options given and applies them over `filter` and `language`; what is not
    /// given stays as it is (for `add`, the defaults).
    fn apply(
        &self,
        config: &Config,
        filter: &mut Filter,
        language: &mut String,
    ) -> Result<(), UsageError> {
        if let Some(l) = &self.layers {
            filter.layers = parse_layers(l, config)?;
        }
        if let Some(score) = parse_min_score(self.min_score)? {
            filter.min_score = score;
        }
        if let Some(l) = parse_language(self.lang.as_deref())? {
            *language = l;
        }
        filter.follows = follows_after(&filter.follows, &self.follow, &self.unfollow)?;
        Ok(())
    }
}

/// `follows` with `add` followed and `remove` unfollowed, each checked
/// (crate::following); unfollowing a phrase not followed is an error naming those that are.
pub fn follows_after(
    follows: &[String],
    add: &[String],
    remove: &[String],
) -> Result<Vec<String>, UsageError> {
    let mut out = crate::following::add_all(follows, add.iter().map(String::as_str))
        .map_err(|e| UsageError(format!("--follow: {e}")))?;
    for phrase in remove {
        out = crate::following::remove(&out, phrase).ok_or_else(|| {
            UsageError(format!(
                "--unfollow: \"{phrase}\" is not followed; followed: {}",
                if out.is_empty() {
                    "nothing".to_string()
                } else {
                    out.join(", ")
                }
            ))
        })?;
    }
    Ok(out)
}

pub async fn run(
    command: SubscribersCommand,
    config: &Config,
    store: &Store,
) -> anyhow::Result<()> {
    match command {
        SubscribersCommand::Add {
            address,
            filter: options,
            robot,
            time,
            notify_empty,
        } => {
            let deliver_at = time.apply(config, None)?;
            let cadence = time.cadence(Cadence::Daily)?;
            // A new subscriber has no votes yet: the boost starts with no layer.
            let boost = options.boost.unwrap_or(false).then(BTreeSet::new);
            let address =
                Address::parse(&address).map_err(|e| UsageError(format!("ADDRESS: {e}")))?;
            let address = robot.apply(address)?;
            let mut filter = Filter {
                layers: BTreeSet::new(),
                min_score: config.digest.min_score,
                ..Filter::default()
            };
            let mut language = config.digest.language.clone();
            options.apply(config, &mut filter, &mut language)?;
            match store
                .add_subscriber(
                    &address,
                    &filter,
                    &language,
                    &Status::Active,
                    notify_empty,
                    Utc::now(),
                )
                .await?
            {
                Some(id) => {
                    if (deliver_at.is_some() || cadence != Cadence::Daily || boost.is_some())
                        && let Some(mut s) = store.subscriber(id).await?
                    {
                        s.deliver_at = deliver_at;
                        s.cadence = cadence;
                        s.filter.boost = boost;
                        store.update_subscriber(&s, Utc::now()).await?;
                    }
                    let at = deliver_at.map_or(String::new(), |t| format!(", delivered at {t}"));
                    let cadence = match cadence {
                        Cadence::Daily => String::new(),
                        c => format!(", {c}"),
                    };
                    println!("Added subscriber #{id} {address}{at}{cadence}");
                }
                None => return Err(UsageError(format!(
                    "{address} is already subscribed; use `kdigest subscribers set` to change it"
                ))
                .into()),
            }
        }
        SubscribersCommand::List => {
            let all = store.subscribers().await?;
            if all.is_empty() {
                println!(
                    "No subscribers yet; add one with `kdigest subscribers add email:alice@example.org`"
                );
            }
            for s in all {
                println!("{}", describe(&s));
            }
        }
        SubscribersCommand::Set {
            subscriber,
            filter: options,
            robot,
            time,
            notify_empty,
        } => {
            let mut s = find(store, &subscriber).await?;
            s.deliver_at = time.apply(config, s.deliver_at)?;
            s.cadence = time.cadence(s.cadence)?;
            options.apply(config, &mut s.filter, &mut s.language)?;
            match options.boost {
                Some(true) => s.filter.boost = Some(store.liked_layers(s.id).await?),
                Some(false) => s.filter.boost = None,
                None => {}
            }
            s.address = robot.apply(s.address)?;
            if let Some(n) = notify_empty {
                s.notify_empty = n;
            }
            store.update_subscriber(&s, Utc::now()).await?;
            println!("{}", describe(&s));
        }
        SubscribersCommand::Remove { subscriber } => {
            let s = find(store, &subscriber).await?;
            store.remove_subscriber(s.id).await?;
            println!("Removed subscriber #{} {}", s.id, s.address);
        }
        SubscribersCommand::Pause { subscriber } => {
            let s = find(store, &subscriber).await?;
            store
                .set_subscriber_status(s.id, &Status::Paused, Utc::now())
                .await?;
            println!("Paused subscriber #{} {}", s.id, s.address);
        }
        SubscribersCommand::Resume { subscriber } => {
            let s = find(store, &subscriber).await?;
            store
                .set_subscriber_status(s.id, &Status::Active, Utc::now())
                .await?;
            println!("Resumed subscriber #{} {}", s.id, s.address);
        }
    }
    Ok(())
}

/// One line per subscriber; webhook URLs are shown without their secret part.
pub fn describe(s: &Subscriber) -> String {
    let layers = if s.filter.layers.is_empty() {
        "all layers".to_string()
    } else {
        s.filter
            .layers
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(",")
    };
    let status = match &s.status {
        Status::Disabled(reason) => format!("disabled: {reason}"),
        other => other.as_str().to_string(),
    };
    let empty = if s.notify_empty {
        ", note on empty days"
    } else {
        ""
    };
    let at = s.deliver_at.map_or(String::new(), |t| format!(", at {t}"));
    let cadence = match s.cadence {
        Cadence::Daily => String::new(),
        c => format!(", {c}"),
    };
    let boost = match &s.filter.boost {
        None => String::new(),
        Some(b) if b.is_empty() => ", boost on (no liked layer yet)".to_string(),
        Some(b) => format!(
            ", boost +{} for {}",
            crate::model::BOOST_POINTS,
            b.iter().cloned().collect::<Vec<_>>().join(",")
        ),
    };
    let follows = if s.filter.follows.is_empty() {
        String::new()
    } else {
        format!(", follows {}", crate::following::listed(&s.filter.follows))
    };
    format!(
        "#{} {} [{}] min score {} lang {}{}{}{}{}{} — {}",
        s.id,
        s.address,
        layers,
        s.filter.min_score,
        s.language,
        at,
        cadence,
        boost,
        follows,
        empty,
        status
    )
}

pub(super) async fn find(store: &Store, key: &str) -> anyhow::Result<Subscriber> {
    let found = match key.trim_start_matches('#').parse::<i64>() {
        Ok(id) => store.subscriber(id).await?,
        Err(_) => {
            let address =
                Address::parse(key).map_err(|e| UsageError(format!("SUBSCRIBER: {e}")))?;
            store.subscriber_by_address(&address).await?
        }
    };
    found.ok_or_else(|| {
        UsageError(format!(
            "No subscriber {key}; `kdigest subscribers list` shows ids and addresses"
        ))
        .into()
    })
}

pub fn parse_layers(raw: &str, config: &Config) -> Result<BTreeSet<String>, UsageError> {
    let raw = raw.trim();
    if raw.is_empty() || raw == "all" {
        return Ok(BTreeSet::new());
    }
    let valid = config.layer_names();
    let mut layers = BTreeSet::new();
    for l in raw.split(',').map(str::trim).filter(|l| !l.is_empty()) {
        if !valid.contains(&l) {
            return Err(UsageError(format!(
                "--layers: \"{l}\" is not a layer; valid layers: {}, or all",
                valid.join(", ")
            )));
        }
        layers.insert(l.to_string());
    }
    Ok(layers)
}

pub(super) fn parse_min_score(raw: Option<f64>) -> Result<Option<Score>, UsageError> {
    raw.map(|v| {
        Score::parse_threshold(v)
            .ok_or_else(|| UsageError(format!("--min-score {v}: use a number from 0 to 100")))
    })
    .transpose()
}

pub(super) fn parse_language(raw: Option<&str>) -> Result<Option<String>, UsageError> {
    match raw {
        None => Ok(None),
        Some(l) if LANGUAGES.contains(&l) => Ok(Some(l.to_string())),
        Some(l) => Err(UsageError(format!(
            "--lang {l}: use one of {}",
            LANGUAGES.join(", ")
        ))),
    }
}
