//! Subscribers: where a digest goes (one closed enum of channel addresses), what they want to
//! see (a [`Filter`]), and their status. Parsing validates; Display never shows credentials.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::Filter;

/// The channels kdigest can deliver to. A closed set: adding one is a new variant and a
/// sender in `deliver/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Telegram,
    Discord,
    Email,
    Webhook,
}

impl Channel {
    pub const ALL: [Channel; 4] = [
        Channel::Telegram,
        Channel::Discord,
        Channel::Email,
        Channel::Webhook,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Telegram => "telegram",
            Channel::Discord => "discord",
            Channel::Email => "email",
            Channel::Webhook => "webhook",
        }
    }
}

/// A bare address (`name@example.org`, no display name, comment or angle brackets), ASCII
/// only, lower-cased, so one mailbox is one subscriber however it is typed. RFC 5321 lets a
/// server treat the local part's case as significant, but the mail systems readers use do
/// not, and `Alice@` and `alice@` as two subscribers would mail one reader twice.
/// One webhook is one subscriber: no trailing slash, no fragment, and of the query only
/// `thread_id` (the thread or forum post to post in), which must be a snowflake.
fn normalize_discord_webhook(mut url: url::Url) -> Result<url::Url, String> {
    let thread: Option<String> = url
        .query_pairs()
        .find(|(k, _)| k == "thread_id")
        .map(|(_, v)| v.into_owned());
    if let Some(t) = &thread
        && t.parse::<u64>().ok().filter(|id| *id > 0).is_none()
    {
        return Err(format!(
            "thread_id={t} in the Discord webhook URL is not a thread id (a number)"
        ));
    }
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/').to_string();
    url.set_path(&path);
    url.set_query(thread.map(|t| format!("thread_id={t}")).as_deref());
    Ok(url)
}

fn normalize_email(target: &str) -> Result<String, String> {
    let invalid = || format!("\"{target}\" is not an email address; expected name@example.org");
    if !target.is_ascii() {
        return Err(format!(
            "\"{target}\" has non-ASCII characters; use the ASCII form of the address (the domain in punycode, xn--...)"
        ));
    }
    let parsed: lettre::Address = target.parse().map_err(|_| invalid())?;
    let domain = parsed.domain().to_ascii_lowercase();
    let well_formed = domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && target.len() <= 254;
    if !well_formed {
        return Err(invalid());
    }
    Ok(format!("{}@{domain}", parsed.user().to_ascii_lowercase()))
}

/// Where one subscriber receives the digest.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// A private chat, group, supergroup or channel id.
    Telegram(i64),
    /// A channel id (sent through the bot token).
    DiscordChannel(u64),
    /// A webhook URL; it is a credential.
    DiscordWebhook(url::Url),
    Email(String),
    /// A generic webhook URL; it may embed a credential.
    Webhook(url::Url),
}

pub const ADDRESS_FORMS: &str = "telegram:<chat id>, discord:<channel id>, discord:<webhook URL>, \
                                 email:<address>, webhook:<http(s) URL>";

impl Address {
    /// Parses `channel:target`, e.g. `email:alice@example.org`.
    pub fn parse(raw: &str) -> Result<Address, String> {
        let raw = raw.trim();
        let Some((scheme, target)) = raw.split_once(':') else {
            return Err(format!(
                "\"{raw}\" has no channel prefix; use one of {ADDRESS_FORMS}"
            ));
        };
        let target = target.trim();
        match scheme {
            "telegram" => target
                .parse::<i64>()
                .ok()
                .filter(|id| *id != 0)
                .map(Address::Telegram)
                .ok_or_else(|| format!("\"{target}\" is not a Telegram chat id; expected a number such as 123456789 or -1001234567890")),
            "discord" if target.starts_with("https://") => {
                let url = url::Url::parse(target).map_err(|e| format!("Discord webhook URL is invalid: {e}"))?;
                let is_webhook = url.path().starts_with("/api/webhooks/") || url.path().contains("/webhooks/");
                if !is_webhook {
                    return Err("a Discord webhook URL looks like https://discord.com/api/webhooks/<id>/<token>".into());
                }
                normalize_discord_webhook(url).map(Address::DiscordWebhook)
            }
            "discord" => target
                .parse::<u64>()
                .ok()
                .filter(|id| (17..=20).contains(&target.len()) && *id > 0)
                .map(Address::DiscordChannel)
                .ok_or_else(|| format!("\"{target}\" is not a Discord channel id (17-20 digits) or webhook URL")),
            "email" => normalize_email(target).map(Address::Email),
            "webhook" => {
                let url = url::Url::parse(target).map_err(|e| format!("\"{target}\" is not a URL ({e})"))?;
                if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() {
                    Ok(Address::Webhook(url))
                } else {
                    Err("a webhook address needs an http(s) URL with a host".into())
                }
            }
            other => Err(format!("\"{other}\" is not a channel; use one of {ADDRESS_FORMS}")),
        }
    }

    pub fn channel(&self) -> Channel {
        match self {
            Address::Telegram(_) => Channel::Telegram,
            Address::DiscordChannel(_) | Address::DiscordWebhook(_) => Channel::Discord,
            Address::Email(_) => Channel::Email,
            Address::Webhook(_) => Channel::Webhook,
        }
    }

    /// The full form, credentials included: for the database only.
    pub fn to_stored(&self) -> String {
        match self {
            Address::Telegram(id) => format!("telegram:{id}"),
            Address::DiscordChannel(id) => format!("discord:{id}"),
            Address::DiscordWebhook(url) => format!("discord:{url}"),
            Address::Email(e) => format!("email:{e}"),
            Address::Webhook(url) => format!("webhook:{url}"),
        }
    }

    /// A group chat, which Telegram limits more tightly than private chats.
    pub fn is_group(&self) -> bool {
        matches!(self, Address::Telegram(id) if *id < 0)
    }

    /// The rate-limit key of the destination (one chat, one channel, one host).
    pub fn destination_key(&self) -> String {
        match self {
            // Discord limits each webhook on its own; the id is not a secret, the token is.
            Address::DiscordWebhook(url) => {
                let id = url.path_segments().and_then(|mut s| {
                    s.find(|p| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty())
                });
                format!("discord:webhook:{}", id.unwrap_or(""))
            }
            Address::Webhook(url) => {
                format!(
                    "{}:{}",
                    url.host_str().unwrap_or(""),
                    url.port_or_known_default().unwrap_or(0)
                )
            }
            other => other.to_stored(),
        }
    }
}

/// Safe to log: webhook URLs show only their host and a hint of the path.
impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Webhook(url) => write!(
                f,
                "webhook:{}://{}/…",
                url.scheme(),
                url.host_str().unwrap_or("")
            ),
            Address::DiscordWebhook(url) => {
                write!(f, "discord:webhook@{}/…", url.host_str().unwrap_or(""))
            }
            other => f.write_str(&other.to_stored()),
        }
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Waiting for confirmation (email double opt-in).
    Pending,
    Active,
    Paused,
    /// Turned off after a permanent delivery failure; the reason says which.
    Disabled(String),
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Active => "active",
            Status::Paused => "paused",
            Status::Disabled(_) => "disabled",
        }
    }

    pub fn from_parts(status: &str, reason: Option<String>) -> Status {
        match status {
            "pending" => Status::Pending,
            "paused" => Status::Paused,
            "disabled" => Status::Disabled(reason.unwrap_or_default()),
            _ => Status::Active,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Subscriber {
    pub id: i64,
    pub address: Address,
    pub filter: Filter,
    pub language: String,
    pub status: Status,
    /// Send a short "nothing matched today" note instead of skipping empty days.
    pub notify_empty: bool,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_never_display_webhook_secrets() {
        assert_eq!(
            Address::parse("telegram:-1001234567890").unwrap(),
            Address::Telegram(-1001234567890)
        );
        assert_eq!(
            Address::parse("email:alice@example.org").unwrap().channel(),
            Channel::Email
        );
        let hook = Address::parse("webhook:https://hooks.example.org/T0/B0/secret-token").unwrap();
        assert_eq!(hook.to_string(), "webhook:https://hooks.example.org/…");
        assert!(!format!("{hook:?}").contains("secret-token"));
        assert!(hook.to_stored().contains("secret-token"));
        let d = Address::parse("discord:https://discord.com/api/webhooks/123456789012345678/tok")
            .unwrap();
        assert!(!d.to_string().contains("tok"));
        assert_eq!(
            Address::parse("discord:123456789012345678")
                .unwrap()
                .channel(),
            Channel::Discord
        );
    }

    #[test]
    fn one_discord_webhook_is_one_subscriber_and_keeps_its_thread() {
        let plain =
            Address::parse("discord:https://discord.com/api/webhooks/123456789012345678/tok")
                .unwrap();
        let slash = Address::parse(
            "discord:https://discord.com/api/webhooks/123456789012345678/tok/?wait=true#x",
        )
        .unwrap();
        assert_eq!(plain.to_stored(), slash.to_stored());
        let thread = Address::parse(
            "discord:https://discord.com/api/webhooks/123456789012345678/tok?thread_id=998877665544332211",
        )
        .unwrap();
        assert!(
            thread
                .to_stored()
                .ends_with("/tok?thread_id=998877665544332211")
        );
        let bad = Address::parse(
            "discord:https://discord.com/api/webhooks/123456789012345678/tok?thread_id=general",
        )
        .unwrap_err();
        assert!(bad.contains("thread_id=general"), "{bad}");
    }

    #[test]
    fn bad_addresses_say_the_expected_form() {
        assert!(
            Address::parse("email:alice")
                .unwrap_err()
                .contains("name@example.org")
        );
        // Display names, comments and brackets would make one mailbox many subscribers.
        for bad in [
            "x<victim@evil.org>",
            "<victim@evil.org>",
            "victim@(c)evil.org",
            "a b@x.org",
        ] {
            assert!(Address::parse(&format!("email:{bad}")).is_err(), "{bad}");
        }
        assert_eq!(
            Address::parse("email:Alice@Example.ORG").unwrap(),
            Address::Email("alice@example.org".into())
        );
        assert!(
            Address::parse("email:名@example.org")
                .unwrap_err()
                .contains("non-ASCII")
        );
        assert!(
            Address::parse("alice@example.org")
                .unwrap_err()
                .contains("telegram:<chat id>")
        );
        assert!(
            Address::parse("telegram:abc")
                .unwrap_err()
                .contains("Telegram chat id")
        );
        assert!(
            Address::parse("discord:12")
                .unwrap_err()
                .contains("17-20 digits")
        );
        assert!(
            Address::parse("webhook:ftp://x.org")
                .unwrap_err()
                .contains("http(s)")
        );
        assert!(
            Address::parse("sms:123")
                .unwrap_err()
                .contains("not a channel")
        );
    }
}
