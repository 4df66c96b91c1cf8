//! Discord: embed messages posted to a channel with the bot token or executed on a webhook
//! URL (serenity), and the bot that answers slash commands over the gateway or the
//! interactions endpoint.

pub mod render;
pub mod config;
pub mod send;

use super::{ChannelSpec, Meta, SendError};
use super::Setup;
use kdigest_core::settings::ChannelLimits;
use kdigest_core::settings::read::{Doc, section};
use kdigest_core::model::Digest;
use kdigest_core::render::Renderer;

pub use send::DiscordSender;

/// Where a Discord subscriber receives the digest.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A channel id (sent through the bot token).
    Channel(u64),
    /// A webhook URL; it is a credential.
    Webhook(url::Url),
}

/// A webhook URL is a credential: Debug shows the safe form.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&<Spec as ChannelSpec>::display(self))
    }
}

pub struct Spec;

impl ChannelSpec for Spec {
    const NAME: &'static str = "discord";
    const FORMS: &'static str = "discord:<channel id>, discord:<webhook URL>";
    const EXAMPLE: (&'static str, &'static str) = (
        "discord:https://discord.com/api/webhooks/112233445566778899/SeCrEt-WeBhOoK-ToKeN",
        "SeCrEt-WeBhOoK-ToKeN",
    );
    // 50 requests/s per bot (the limiter's 1/40 arrival margin makes it 48.8/s) and 5 per
    // 5 s per channel. The concurrency
    // is high because a multi-message digest holds its slot while the per-destination limit
    // spaces its messages.
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 50.0,
        per_destination_per_sec: 1.0,
        concurrency: 64,
    };
    const FORMAT: Option<&'static str> = Some("json");

    type Target = Target;
    // Boxed: serenity's clients are large.
    type Sender = Box<DiscordSender>;
    type Section = config::DiscordConfig;

    fn section(doc: &Doc, _site: &url::Url, problems: &mut Vec<String>) -> config::DiscordConfig {
        config::validate(section(doc, Self::NAME, problems), problems)
    }

    fn parse(target: &str) -> Result<Target, String> {
        if target.starts_with("https://") {
            let url = url::Url::parse(target)
                .map_err(|e| format!("Discord webhook URL is invalid: {e}"))?;
            let is_webhook =
                url.path().starts_with("/api/webhooks/") || url.path().contains("/webhooks/");
            if !is_webhook {
                return Err("a Discord webhook URL looks like https://discord.com/api/webhooks/<id>/<token>".into());
            }
            return normalize_webhook(url).map(Target::Webhook);
        }
        target
            .parse::<u64>()
            .ok()
            .filter(|id| (17..=20).contains(&target.len()) && *id > 0)
            .map(Target::Channel)
            .ok_or_else(|| {
                format!("\"{target}\" is not a Discord channel id (17-20 digits) or webhook URL")
            })
    }

    fn stored(target: &Target) -> String {
        match target {
            Target::Channel(id) => id.to_string(),
            Target::Webhook(url) => url.to_string(),
        }
    }

    fn display(target: &Target) -> String {
        match target {
            Target::Channel(id) => id.to_string(),
            Target::Webhook(url) => format!("webhook@{}/…", url.host_str().unwrap_or("")),
        }
    }

    fn destination(target: &Target) -> String {
        match target {
            Target::Channel(id) => format!("discord:{id}"),
            // Discord limits each webhook on its own; the id is not a secret, the token is.
            Target::Webhook(url) => {
                let id = url.path_segments().and_then(|mut s| {
                    s.find(|p| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty())
                });
                format!("discord:webhook:{}", id.unwrap_or(""))
            }
        }
    }

    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
        Ok(render::messages(digest, renderer.locale())
            .iter()
            .map(|m| serde_json::to_string_pretty(m).map(|s| s + "\n"))
            .collect::<Result<_, _>>()?)
    }

    /// As a bot's channel message: a 401 is our token (the channel pauses); a webhook's own
    /// 401 disables that subscriber.
    fn refusal(code: u16) -> SendError {
        send::unauthorized(send::by_status(code, 0, ""), false)
    }

    fn limit_problems(message: &str) -> Vec<String> {
        match serde_json::from_str(message) {
            Ok(payload) => render::limit_problems(&payload),
            Err(e) => vec![format!("not JSON: {e}")],
        }
    }

    /// Webhook subscribers need no bot token, so the Discord channel is always there.
    fn sender(setup: &Setup) -> anyhow::Result<Option<Box<DiscordSender>>> {
        Ok(Some(Box::new(DiscordSender::new(&setup.sections.discord))))
    }

    async fn send(
        sender: &Box<DiscordSender>,
        target: &Target,
        message: &str,
        _meta: Meta<'_>,
    ) -> Result<(), SendError> {
        sender.send(target, message).await
    }
}

/// One webhook is one subscriber: no trailing slash, no fragment, and of the query only
/// `thread_id` (the thread or forum post to post in), which must be a snowflake.
fn normalize_webhook(mut url: url::Url) -> Result<url::Url, String> {
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
