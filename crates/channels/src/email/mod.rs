//! Email: the digest as a newsletter through an SMTP relay (lettre), with one-click
//! unsubscribe and preferences links signed per subscriber. The web sign-up (web/account)
//! sends its confirmations through the same sender.

pub mod config;
mod relay;
pub mod send;

use std::sync::Arc;

use super::{ChannelSpec, Meta, SendError};
use super::Setup;
use kdigest_core::settings::ChannelLimits;
use kdigest_core::settings::read::{Doc, section};
use kdigest_core::model::Digest;
use kdigest_core::render::Renderer;

pub use send::{
    EmailSender, PREFERENCES_PLACEHOLDER, UNSUBSCRIBE_PLACEHOLDER, VOTE_TOKEN_PLACEHOLDER,
};

pub struct Spec;

impl ChannelSpec for Spec {
    const NAME: &'static str = "email";
    const FORMS: &'static str = "email:<address>";
    const EXAMPLE: (&'static str, &'static str) = ("email:reader@example.org", "");
    // Gentle on the relay.
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 10.0,
        per_destination_per_sec: 1.0,
        concurrency: 4,
    };

    /// A bare mailbox, lower-cased.
    type Target = String;
    // Shared: the web sign-up sends its confirmations through the same SMTP pool.
    type Sender = Arc<EmailSender>;
    type Section = config::EmailConfig;

    fn section(doc: &Doc, site: &url::Url, problems: &mut Vec<String>) -> config::EmailConfig {
        config::validate(section(doc, Self::NAME, problems), site, problems)
    }

    fn parse(target: &str) -> Result<String, String> {
        normalize(target)
    }

    fn stored(mailbox: &String) -> String {
        mailbox.clone()
    }

    /// The unsubscribe, preferences and vote links differ per subscriber: the cached render holds
    /// placeholders and the sender fills them in.
    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
        let vote_url = renderer
            .site_url("vote/")
            .map(|u| format!("{u}{VOTE_TOKEN_PLACEHOLDER}/"));
        Ok(vec![serde_json::to_string(&renderer.email(
            digest,
            UNSUBSCRIBE_PLACEHOLDER,
            PREFERENCES_PLACEHOLDER,
            vote_url.as_deref(),
        )?)?])
    }

    /// A subject on one line within RFC 5322's 998 characters, and both bodies.
    const CODES: super::Codes = super::Codes::Smtp;

    fn refusal(code: u16) -> SendError {
        send::classify_reply(&code.to_string(), &format!("{code} refused"))
    }

    fn limit_problems(message: &str) -> Vec<String> {
        let Ok(email) = serde_json::from_str::<kdigest_core::render::Email>(message) else {
            return vec!["not a rendered email".into()];
        };
        let mut problems = Vec::new();
        let subject = email.subject.chars().count();
        if subject == 0 || subject > 998 || email.subject.contains(['\r', '\n']) {
            problems.push(format!("subject of {subject} characters (one line, 1 to 998)"));
        }
        if email.html.trim().is_empty() || email.text.trim().is_empty() {
            problems.push("an empty body".into());
        }
        problems
    }

    /// Email needs a relay and the key that signs unsubscribe links.
    fn sender(setup: &Setup) -> anyhow::Result<Option<Arc<EmailSender>>> {
        let Some(secret) = kdigest_core::tokens::secret_from_env()? else {
            tracing::info!(
                message =
                    "No signing key for unsubscribe links; email subscribers are not delivered to",
                variable = kdigest_core::tokens::SECRET_ENV
            );
            return Ok(None);
        };
        match EmailSender::new(&setup.sections.email, secret) {
            Ok(sender) => Ok(Some(Arc::new(sender))),
            Err(error) => {
                tracing::warn!(message = "Email delivery is off", error = %format!("{error:#}"));
                Ok(None)
            }
        }
    }

    async fn send(
        sender: &Arc<EmailSender>,
        mailbox: &String,
        message: &str,
        meta: Meta<'_>,
    ) -> Result<(), SendError> {
        sender
            .send(mailbox, message, meta.delivery_id, meta.subscriber_id)
            .await
    }
}

/// A bare address (`name@example.org`, no display name, comment or angle brackets), ASCII
/// only, lower-cased, so one mailbox is one subscriber however it is typed. RFC 5321 lets a
/// server treat the local part's case as significant, but the mail systems readers use do
/// not, and `Alice@` and `alice@` as two subscribers would mail one reader twice.
fn normalize(target: &str) -> Result<String, String> {
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
