//! Channels: where a digest goes. Each channel is one folder under `crates/channels/` holding
//! everything that is particular to it: its address (parsing, normalisation, the safe
//! display form, the rate-limit key), its render, its sender with its error
//! classification, its config section and, where it has one, its bot. The rest of the
//! program sees only the registry below: [`Channel`], [`Address`], [`Sender`] and the
//! dispatch functions are generated from one line per channel.
//!
//! Adding a channel (docs/channels.md walks through the webhook channel as the example):
//! write `crates/channels/src/<name>/mod.rs` with a `Spec` that implements [`ChannelSpec`],
//! then add `Variant => name` to the `registry!` line at the bottom of this file and the
//! feature to this crate's Cargo.toml (and the application's).
//!
//! This crate is outbound only: it knows the core's types (kdigest-core) and HTTP, and
//! nothing of the store, the delivery engine, the bots or the web site.

// A build without some channels leaves helpers idle; the default build, every channel, is
// the one clippy holds to `-D warnings`.
#![cfg_attr(not(feature = "all-channels"), allow(unused))]

pub mod http;
pub mod netguard;

use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use kdigest_core::model::Digest;
use kdigest_core::render::Renderer;
use kdigest_core::settings::ChannelLimits;
use kdigest_core::settings::read::Doc;

#[cfg(any(
    feature = "feishu",
    feature = "dingtalk",
    feature = "wecom",
    feature = "slack",
    feature = "ntfy",
    feature = "matrix"
))]
// The team-chat robots' common parts; ntfy and Matrix borrow their pieces and packing.
pub mod robot;

/// Why one send failed, as the delivery engine needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Worth retrying: timeouts, 5xx, 429 (with the wait the server asked for).
    #[error("{reason}")]
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// The receiver refuses our credentials (a webhook's 401/403): retried like a
    /// transient fault and never disabling; when most receivers of the channel answer it at
    /// once, the engine pauses the channel (our signing key changed, not theirs).
    #[error("{reason}")]
    Refused { reason: String },
    /// Never retried; the subscriber is disabled with this reason (blocked, deleted, 404/410).
    #[error("{reason}")]
    Permanent { reason: String },
    /// This message cannot be delivered (too long, rejected markup); not retried, and the
    /// subscriber stays active.
    #[error("{reason}")]
    Failed { reason: String },
    /// The destination moved (a Telegram group upgraded to a supergroup): store the new
    /// address and send again.
    #[error("Destination moved to {0}")]
    // Boxed: an address is large next to the other variants' reasons.
    Moved(Box<Address>),
    /// The channel itself is down or holds everyone back (SMTP relay unreachable, our login
    /// refused, Discord's global rate limit): the whole channel pauses, for `retry_after`
    /// when the platform says how long, the delivery goes back to the queue without using
    /// an attempt, and nobody is marked bounced or failed.
    #[error("{reason}")]
    Outage {
        reason: String,
        retry_after: Option<std::time::Duration>,
    },
}

/// What a sender may need besides the address and the message.
#[derive(Debug, Clone, Copy)]
pub struct Meta<'a> {
    /// Stable per (digest, subscriber): receivers use it to drop duplicates.
    pub delivery_id: &'a str,
    pub subscriber_id: i64,
}

/// Per-subscriber settings of a channel that are not part of its address: the environment
/// variable holding a robot's signing secret (never the secret itself) and a robot's
/// keyword. Stored beside the address (`subscribers.options`, JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Options {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
}

impl Options {
    pub fn is_empty(&self) -> bool {
        self.secret_env.is_none() && self.keyword.is_none()
    }

    /// `None` for no options, else the JSON stored in `subscribers.options`.
    pub fn to_stored(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(self).expect("plain struct"))
    }

    pub fn from_stored(stored: Option<&str>) -> Result<Options, String> {
        match stored.map(str::trim).filter(|s| !s.is_empty()) {
            None => Ok(Options::default()),
            Some(json) => serde_json::from_str(json)
                .map_err(|e| format!("stored channel options are not valid: {e}")),
        }
    }
}

/// What a platform's refusals are numbered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codes {
    /// HTTP statuses (4xx, 5xx).
    Http,
    /// SMTP reply codes (4xx transient, 5xx permanent).
    Smtp,
}

/// What the senders are built from: the channels' own sections and the delivery settings
/// they share. The application's configuration builds it (`Config::channel_setup`); the
/// channels never see that configuration.
pub struct Setup<'a> {
    pub sections: &'a ChannelsConfig,
    /// One request's timeout.
    pub timeout: Duration,
    /// Readers' webhooks and robots may be on loopback or private networks.
    pub allow_private_networks: bool,
    /// The environment variable holding the webhook signing key.
    pub webhook_secret_env: &'a str,
    /// `[delivery.<name>]` limits, where the file sets them.
    pub limits: &'a BTreeMap<Channel, ChannelLimits>,
}

/// The `[<name>]` section of a channel that has no settings of its own: refused with a
/// pointer to where its settings are.
pub fn no_section(doc: &Doc, name: &str, problems: &mut Vec<String>) {
    if doc.contains_key(name) {
        problems.push(format!(
            "{name}: the {name} channel has no section of its own; remove it (its rate limits are [delivery.{name}], its addresses are subscribers')"
        ));
    }
}

/// What one channel is. Implemented by a unit `Spec` in each channel's folder; the registry
/// calls it with static dispatch.
// The futures are only awaited inside the crate, where their concrete types (and so their
// Send-ness) are known.
#[allow(async_fn_in_trait)]
pub trait ChannelSpec {
    /// The channel's name: the address prefix, the `[delivery.<name>]` key, the store's
    /// `channel` column.
    const NAME: &'static str;
    /// The address forms, for help and error texts (`telegram:<chat id>`).
    const FORMS: &'static str;
    /// The default `[delivery.<name>]` limits: the platform's published rate limits.
    const LIMITS: ChannelLimits;
    /// `render --format <name>` and `demo --format <name>` print this channel's payloads,
    /// files with this extension under `--out` (channels that post the JSON or email
    /// renders have no format of their own).
    const FORMAT: Option<&'static str> = None;
    /// Whether `per_sec` is a platform-wide budget that instances sharing a Postgres store
    /// take slots of together (Telegram's 30/s per bot); false where each destination is
    /// its own platform (webhooks, robots).
    const SHARED_BUDGET: bool = true;

    /// Messages a minute to one group destination, when the platform limits groups more
    /// tightly than other destinations (Telegram).
    fn group_per_minute(_sections: &ChannelsConfig) -> Option<f64> {
        None
    }

    /// The channel's own `[<name>]` section, validated (`()` for a channel without one).
    type Section: fmt::Debug + Clone;
    /// Reads and validates `[<name>]`; `site` is the web site's public address (the base of
    /// the links a channel's messages carry). Channels without a section call
    /// [`no_section`].
    fn section(doc: &Doc, site: &url::Url, problems: &mut Vec<String>) -> Self::Section;

    /// An address as a reader gives it, with a credential where the channel's addresses
    /// carry one, and that credential ("" when none): the channel compliance test
    /// (tests/it/compliance.rs) parses, stores and shows it, and checks that the credential
    /// never appears in the form shown in logs and listings.
    const EXAMPLE: (&'static str, &'static str);

    /// The address within the channel (a chat id, a URL).
    type Target: Clone + PartialEq + Eq + Hash + fmt::Debug;
    type Sender;

    /// Parses and normalises the text after `<name>:`; one destination, one form.
    fn parse(target: &str) -> Result<Self::Target, String>;
    /// The full form after `<name>:`, credentials included: for the database only.
    fn stored(target: &Self::Target) -> String;
    /// The form safe for logs and listings (credentials hidden), without the prefix.
    fn display(target: &Self::Target) -> String {
        Self::stored(target)
    }
    /// The rate-limit key of the destination (one chat, one robot, one host).
    fn destination(target: &Self::Target) -> String {
        format!("{}:{}", Self::NAME, Self::stored(target))
    }
    /// Whether the platform limits this destination as a group (Telegram).
    fn is_group(_target: &Self::Target) -> bool {
        false
    }
    fn options(_target: &Self::Target) -> Options {
        Options::default()
    }
    /// Applies per-subscriber options; channels without any refuse them.
    fn with_options(target: Self::Target, options: Options) -> Result<Self::Target, String> {
        if options.is_empty() {
            Ok(target)
        } else {
            Err(format!(
                "{} addresses take no --secret-env or --keyword (robot channels do)",
                Self::NAME
            ))
        }
    }

    /// The messages of one filtered digest, in sending order.
    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>>;
    /// What in one rendered message breaks the platform's documented limits (empty: it is
    /// within them). The compliance test holds every channel's renders to it.
    fn limit_problems(message: &str) -> Vec<String>;
    /// A short plain message in this channel's payload form (the sign-up's confirmation
    /// code), for channels that take one.
    fn note(_text: &str) -> Option<String> {
        None
    }
    /// What the platform's refusals are numbered in.
    const CODES: Codes = Codes::Http;
    /// The channel's error table: how its sender reads a refusal that says nothing but its
    /// code (an HTTP status with an empty body, or an SMTP reply code without an enhanced
    /// status). The compliance test holds every channel's table, over every 4xx and 5xx, to
    /// the delivery rules (tests/it/compliance.rs).
    fn refusal(code: u16) -> SendError;

    /// The sender, or `None` when the channel cannot send here (no token); says why in the
    /// log.
    fn sender(setup: &Setup) -> anyhow::Result<Option<Self::Sender>>;
    async fn send(
        sender: &Self::Sender,
        target: &Self::Target,
        message: &str,
        meta: Meta<'_>,
    ) -> Result<(), SendError>;
}

macro_rules! registry {
    ($($(#[$meta:meta])* $variant:ident => $module:ident),* $(,)?) => {
        $($(#[$meta])* pub mod $module;)*

        /// The channels kdigest can deliver to.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum Channel {
            $($(#[$meta])* $variant),*
        }

        impl Channel {
            pub const ALL: &'static [Channel] = &[$($(#[$meta])* Channel::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::NAME,)*
                }
            }

            pub fn from_name(name: &str) -> Option<Channel> {
                Channel::ALL.iter().copied().find(|c| c.as_str() == name)
            }

            /// The platform's limits, before `[delivery.<name>]` overrides them.
            pub fn default_limits(self) -> ChannelLimits {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::LIMITS,)*
                }
            }

            /// The limits in force: `[delivery.<name>]` where the file sets them, else the
            /// platform's.
            pub fn limits_in(self, set: &BTreeMap<Channel, ChannelLimits>) -> ChannelLimits {
                set.get(&self).copied().unwrap_or_else(|| self.default_limits())
            }

            /// Whether instances share this channel's `per_sec` as one platform budget.
            pub fn shared_budget(self) -> bool {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::SHARED_BUDGET,)*
                }
            }

            /// The per-minute limit of a group destination, if the platform has one.
            pub fn group_per_minute(self, sections: &ChannelsConfig) -> Option<f64> {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::group_per_minute(sections),)*
                }
            }

            /// The file extension of this channel's own render format, if it has one.
            pub fn format(self) -> Option<&'static str> {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::FORMAT,)*
                }
            }

            /// The messages of one filtered digest for this channel (a weekly roll-up in the
            /// locale's weekly words).
            pub fn render(self, digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
                let renderer = renderer.for_digest(digest);
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::render(digest, &renderer),)*
                }
            }

            /// An example address and its credential ("" when none); see
            /// [`ChannelSpec::EXAMPLE`].
            pub fn example(self) -> (&'static str, &'static str) {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::EXAMPLE,)*
                }
            }

            /// What in one rendered message breaks the platform's limits.
            pub fn limit_problems(self, message: &str) -> Vec<String> {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::limit_problems(message),)*
                }
            }

            /// What the platform's refusals are numbered in.
            pub fn codes(self) -> Codes {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::CODES,)*
                }
            }

            /// The channel's error table; see [`ChannelSpec::refusal`].
            pub fn refusal(self, code: u16) -> SendError {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::refusal(code),)*
                }
            }

            /// A short plain message as this channel's payload, if it takes one.
            pub fn note(self, text: &str) -> Option<String> {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::note(text),)*
                }
            }

            /// This channel's sender on its own (the web sign-up's confirmation messages).
            pub fn sender(self, setup: &Setup) -> anyhow::Result<Option<Sender>> {
                Ok(match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::sender(setup)?.map(Sender::$variant),)*
                })
            }

            fn parse(self, target: &str) -> Result<Address, String> {
                match self {
                    $($(#[$meta])* Channel::$variant => <$module::Spec as ChannelSpec>::parse(target).map(Address::$variant),)*
                }
            }
        }

        /// Where one subscriber receives the digest: a channel and its own kind of target.
        #[derive(Clone, PartialEq, Eq, Hash)]
        pub enum Address {
            $($(#[$meta])* $variant(<$module::Spec as ChannelSpec>::Target)),*
        }

        impl Address {
            pub fn channel(&self) -> Channel {
                match self {
                    $($(#[$meta])* Address::$variant(_) => Channel::$variant,)*
                }
            }

            /// The full form, credentials included: for the database only.
            pub fn to_stored(&self) -> String {
                match self {
                    $($(#[$meta])* Address::$variant(t) => format!(
                        "{}:{}",
                        <$module::Spec as ChannelSpec>::NAME,
                        <$module::Spec as ChannelSpec>::stored(t)
                    ),)*
                }
            }

            /// The rate-limit key of the destination (one chat, one channel, one host).
            pub fn destination_key(&self) -> String {
                match self {
                    $($(#[$meta])* Address::$variant(t) => <$module::Spec as ChannelSpec>::destination(t),)*
                }
            }

            /// A destination the platform limits as a group (Telegram groups).
            pub fn is_group(&self) -> bool {
                match self {
                    $($(#[$meta])* Address::$variant(t) => <$module::Spec as ChannelSpec>::is_group(t),)*
                }
            }

            pub fn options(&self) -> Options {
                match self {
                    $($(#[$meta])* Address::$variant(t) => <$module::Spec as ChannelSpec>::options(t),)*
                }
            }

            /// The same address with these per-subscriber options.
            pub fn with_options(self, options: Options) -> Result<Address, String> {
                match self {
                    $($(#[$meta])* Address::$variant(t) => <$module::Spec as ChannelSpec>::with_options(t, options).map(Address::$variant),)*
                }
            }
        }

        /// Safe to log: credentials (tokens in URLs) are hidden.
        impl fmt::Display for Address {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $($(#[$meta])* Address::$variant(t) => write!(
                        f,
                        "{}:{}",
                        <$module::Spec as ChannelSpec>::NAME,
                        <$module::Spec as ChannelSpec>::display(t)
                    ),)*
                }
            }
        }

        /// The sender of one channel.
        pub enum Sender {
            $($(#[$meta])* $variant(<$module::Spec as ChannelSpec>::Sender)),*
        }

        impl Sender {
            pub fn channel(&self) -> Channel {
                match self {
                    $($(#[$meta])* Sender::$variant(_) => Channel::$variant,)*
                }
            }

            /// Sends one rendered message to one address.
            pub async fn send(&self, address: &Address, message: &str, meta: Meta<'_>) -> Result<(), SendError> {
                match (self, address) {
                    $($(#[$meta])* (Sender::$variant(s), Address::$variant(t)) => {
                        <$module::Spec as ChannelSpec>::send(s, t, message, meta).await
                    })*
                    #[allow(unreachable_patterns)]
                    (_, other) => Err(SendError::Permanent {
                        reason: format!(
                            "Address {other} does not belong to the {} channel",
                            self.channel().as_str()
                        ),
                    }),
                }
            }
        }

        /// Every channel that can send with this configuration, in registry order.
        pub fn senders(setup: &Setup) -> anyhow::Result<Vec<Sender>> {
            let mut senders = Vec::new();
            $(
                $(#[$meta])*
                if let Some(s) = <$module::Spec as ChannelSpec>::sender(setup)? {
                    senders.push(Sender::$variant(s));
                }
            )*
            Ok(senders)
        }

        /// Every channel kdigest has, built into this binary or not (the cargo features):
        /// the registry's folder names, which are the channels' names (and the names of
        /// their sections in the configuration file).
        pub const EVERY_CHANNEL: &[&str] = &[$(stringify!($module)),*];

        /// Each built channel's own section of the configuration file (`[telegram]`,
        /// `[discord]`, `[email]`; `()` for a channel without one). The application's
        /// configuration holds it, so the core settings never name a channel.
        #[derive(Debug, Clone)]
        pub struct ChannelsConfig {
            $($(#[$meta])* pub $module: <$module::Spec as ChannelSpec>::Section,)*
        }

        impl ChannelsConfig {
            /// Reads every built channel's section; the section of a channel this binary
            /// was built without is refused by name.
            pub fn read(doc: &Doc, site: &url::Url, problems: &mut Vec<String>) -> ChannelsConfig {
                for name in EVERY_CHANNEL {
                    if Channel::from_name(name).is_none() && doc.contains_key(name) {
                        problems.push(format!("{name}: this kdigest was built without the {name} channel; remove the section, or build with `cargo build --release --features {name}`"));
                    }
                }
                ChannelsConfig {
                    $($(#[$meta])* $module: <$module::Spec as ChannelSpec>::section(doc, site, problems),)*
                }
            }
        }

        /// Every address form, for help and error texts.
        pub fn address_forms() -> String {
            [$($(#[$meta])* <$module::Spec as ChannelSpec>::FORMS),*].join(", ")
        }
    };
}

/// What sends single emails outside a digest (the web sign-up's confirmations): the email
/// channel's sender, shared with delivery.
#[cfg(feature = "email")]
pub type Mailer = email::EmailSender;

/// Built without the email channel there is no mailer (this type has no values): sign-up
/// answers that it is off, and the other account pages work as before.
#[cfg(not(feature = "email"))]
pub enum Mailer {}

#[cfg(not(feature = "email"))]
impl Mailer {
    pub async fn send_single(
        &self,
        _to: &str,
        _email: kdigest_core::render::Email,
    ) -> Result<(), SendError> {
        match *self {}
    }
}

impl Setup<'_> {
    pub fn limits(&self, channel: Channel) -> ChannelLimits {
        channel.limits_in(self.limits)
    }
}

impl Address {
    /// Parses `channel:target`, e.g. `email:alice@example.org`.
    pub fn parse(raw: &str) -> Result<Address, String> {
        let raw = raw.trim();
        let Some((scheme, target)) = raw.split_once(':') else {
            return Err(format!(
                "\"{raw}\" has no channel prefix; use one of {}",
                address_forms()
            ));
        };
        match Channel::from_name(scheme) {
            Some(channel) => channel.parse(target.trim()),
            None if EVERY_CHANNEL.contains(&scheme) => Err(format!(
                "this kdigest was built without the {scheme} channel (cargo feature \"{scheme}\"); it delivers to {}",
                address_forms()
            )),
            None => Err(format!(
                "\"{scheme}\" is not a channel; use one of {}",
                address_forms()
            )),
        }
    }

    /// An address as stored: the address column and the options column.
    pub fn from_stored(address: &str, options: Option<&str>) -> Result<Address, String> {
        Address::parse(address)?.with_options(Options::from_stored(options)?)
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A URL channel target must be https, except on loopback (tests and local receivers).
pub fn https_or_loopback(url: &url::Url) -> bool {
    match url.scheme() {
        "https" => url.host_str().is_some(),
        "http" => {
            matches!(
                url.host(),
                Some(url::Host::Ipv4(ip)) if ip.is_loopback()
            ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
                || url.host_str() == Some("localhost")
        }
        _ => false,
    }
}

#[cfg(not(any(
    feature = "telegram",
    feature = "discord",
    feature = "email",
    feature = "webhook",
    feature = "feishu",
    feature = "dingtalk",
    feature = "wecom",
    feature = "slack",
    feature = "ntfy",
    feature = "matrix"
)))]
compile_error!(
    "kdigest delivers through at least one channel: enable one of the features telegram, discord, email, webhook, feishu, dingtalk, wecom, slack, ntfy, matrix"
);

// Each channel is a cargo feature (default: all), so an operator who needs only some builds
// only those (and none of the others' dependencies: teloxide, serenity, lettre).
registry! {
    #[cfg(feature = "telegram")]
    Telegram => telegram,
    #[cfg(feature = "discord")]
    Discord => discord,
    #[cfg(feature = "email")]
    Email => email,
    #[cfg(feature = "webhook")]
    Webhook => webhook,
    #[cfg(feature = "feishu")]
    Feishu => feishu,
    #[cfg(feature = "dingtalk")]
    Dingtalk => dingtalk,
    #[cfg(feature = "wecom")]
    Wecom => wecom,
    #[cfg(feature = "slack")]
    Slack => slack,
    #[cfg(feature = "ntfy")]
    Ntfy => ntfy,
    #[cfg(feature = "matrix")]
    Matrix => matrix,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A channel's folder is named as the channel, so a build that leaves it out can name
    /// it (this runs in the default build, every channel in).
    #[test]
    fn every_channel_is_the_registry() {
        let names: Vec<&str> = Channel::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names, EVERY_CHANNEL);
    }
}
