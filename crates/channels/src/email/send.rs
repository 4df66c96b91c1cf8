//! Email channel: the digest as a multipart/alternative newsletter through an SMTP relay
//! (lettre, pooled connections): List-Id, List-Unsubscribe with a signed one-click URL (RFC
//! 8058) and optional mailto, a Message-ID stable per (digest, subscriber), and an optional
//! DKIM signature over those headers. Also the one-off sign-up confirmation.
//!
//! A refused mailbox (5.1.x, 5.2.1, or a bare 550/551/553) disables the subscriber as
//! bounced; 4xx answers and a connection dropped mid-message are retried; the relay refusing
//! or missing us (no connection, no greeting, no STARTTLS, 421, a refused login, a 5.7.x
//! policy refusal) pauses the channel and marks nobody. See [`classify_reply`] and
//! [`super::relay`].

use lettre::message::dkim::{
    DkimCanonicalization, DkimCanonicalizationType, DkimConfig, DkimSigningAlgorithm,
    DkimSigningKey,
};
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MessageBuilder, MultiPart};
use lettre::Message;
use lettre::transport::smtp::authentication::Credentials;

use super::relay::Relay;
use crate::SendError;
use super::config::{DkimAlgorithm, EmailConfig};
use kdigest_core::settings::Secret;
use kdigest_core::render::Email;
use kdigest_core::tokens::{Purpose, link};

/// Stand in for the per-subscriber links in the cached render.
/// Letters and dashes only, so no template escaping changes them.
pub const UNSUBSCRIBE_PLACEHOLDER: &str = "KDIGEST-UNSUBSCRIBE-URL-PLACEHOLDER";
pub const PREFERENCES_PLACEHOLDER: &str = "KDIGEST-PREFERENCES-URL-PLACEHOLDER";
/// Stands for the subscriber's signed vote token in `/vote/<token>/<event>/<up|down>`.
pub const VOTE_TOKEN_PLACEHOLDER: &str = "KDIGEST-VOTE-TOKEN-PLACEHOLDER";

/// Headers the DKIM signature covers. Absent ones are signed as absent, so nobody can add a
/// Reply-To or a List-Unsubscribe on the way. Not Content-Type: lettre writes the multipart
/// Content-Type only when it formats the message, after signing, so a signature covering it
/// never verifies (checked with dkimpy). The body hash covers the parts and boundaries.
const DKIM_HEADERS: &[&str] = &[
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "Reply-To",
    "List-Id",
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
    "MIME-Version",
];

pub struct EmailSender {
    relay: Relay,
    config: EmailConfig,
    /// Signs the links in emails (KDIGEST_SECRET).
    secret: Secret,
    dkim: Option<DkimConfig>,
}

impl EmailSender {
    /// Reads the SMTP password and the DKIM key from the environment variables the config
    /// names.
    pub fn new(config: &EmailConfig, secret: Secret) -> anyhow::Result<EmailSender> {
        let password = (!config.username.is_empty())
            .then(|| Secret::from_env(&config.password_env, "the SMTP password"))
            .transpose()?;
        let dkim_key = config
            .dkim
            .as_ref()
            .map(|d| Secret::from_env(&d.key_env, "the DKIM private key"))
            .transpose()?;
        EmailSender::with_secrets(config, secret, password, dkim_key)
    }

    pub fn with_secrets(
        config: &EmailConfig,
        secret: Secret,
        password: Option<Secret>,
        dkim_key: Option<Secret>,
    ) -> anyhow::Result<EmailSender> {
        let credentials = password
            .filter(|_| !config.username.is_empty())
            .map(|password| {
                Credentials::new(config.username.clone(), password.expose().to_string())
            });
        let dkim = match (&config.dkim, dkim_key) {
            (Some(d), Some(key)) => {
                let algorithm = match d.algorithm {
                    DkimAlgorithm::Rsa => DkimSigningAlgorithm::Rsa,
                    DkimAlgorithm::Ed25519 => DkimSigningAlgorithm::Ed25519,
                };
                // The error says which decoding failed, never the key.
                let key = DkimSigningKey::new(key.expose().trim(), algorithm).map_err(|e| {
                    anyhow::anyhow!(
                        "The DKIM key in ${} cannot be read ({e}); rsa needs a PKCS#1 PEM key (BEGIN RSA PRIVATE KEY), ed25519 the base64 of the 32-byte seed",
                        d.key_env
                    )
                })?;
                Some(DkimConfig::new(
                    d.selector.clone(),
                    d.domain.clone(),
                    key,
                    DKIM_HEADERS
                        .iter()
                        .map(|h| HeaderName::new_from_ascii_str(h))
                        .collect(),
                    DkimCanonicalization {
                        header: DkimCanonicalizationType::Relaxed,
                        body: DkimCanonicalizationType::Relaxed,
                    },
                ))
            }
            _ => None,
        };
        Ok(EmailSender {
            relay: Relay::new(config, credentials),
            config: config.clone(),
            secret,
            dkim,
        })
    }

    /// The signed link for one subscriber, under `[web] public_url`.
    pub fn link(&self, purpose: Purpose, subscriber_id: i64) -> String {
        link(
            &self.config.public_url,
            &self.secret,
            purpose,
            subscriber_id,
            chrono::Utc::now().timestamp(),
        )
    }

    /// The newsletter for one subscriber, ready to send.
    pub fn message(
        &self,
        to: &str,
        payload: &str,
        delivery_id: &str,
        subscriber_id: i64,
    ) -> Result<Message, SendError> {
        let email: Email = serde_json::from_str(payload).map_err(|e| SendError::Failed {
            reason: format!("Email payload is not valid: {e}"),
        })?;
        let unsubscribe_url = self.link(Purpose::Unsubscribe, subscriber_id);
        let preferences_url = self.link(Purpose::Preferences, subscriber_id);
        // Digits, dots and hex: the same in HTML and in text.
        let vote_token = kdigest_core::tokens::sign(&self.secret, Purpose::Vote, subscriber_id, 0);
        let escape = kdigest_core::render::escape_html;
        let html = email
            .html
            .replace(UNSUBSCRIBE_PLACEHOLDER, &escape(&unsubscribe_url))
            .replace(PREFERENCES_PLACEHOLDER, &escape(&preferences_url))
            .replace(VOTE_TOKEN_PLACEHOLDER, &vote_token);
        let text = email
            .text
            .replace(UNSUBSCRIBE_PLACEHOLDER, &unsubscribe_url)
            .replace(PREFERENCES_PLACEHOLDER, &preferences_url)
            .replace(VOTE_TOKEN_PLACEHOLDER, &vote_token);
        let mut unsubscribe = format!("<{unsubscribe_url}>");
        if let Some(mailto) = &self.config.unsubscribe_mailto {
            unsubscribe.push_str(&format!(", <mailto:{mailto}?subject=unsubscribe>"));
        }
        let raw = |name: &'static str, value: String| {
            HeaderValue::new(HeaderName::new_from_ascii_str(name), value)
        };
        let builder = self
            .builder(to, email.subject)?
            .message_id(Some(format!("<{delivery_id}@{}>", self.config.list_id)))
            .raw_header(raw("List-Id", format!("kdigest <{}>", self.config.list_id)))
            .raw_header(raw("List-Unsubscribe", unsubscribe))
            .raw_header(raw(
                "List-Unsubscribe-Post",
                "List-Unsubscribe=One-Click".into(),
            ));
        self.finish(builder, text, html)
    }

    /// From, To, Subject and Reply-To: what every message has.
    fn builder(&self, to: &str, subject: String) -> Result<MessageBuilder, SendError> {
        let mut builder = Message::builder()
            .from(self.config.from.clone())
            .to(recipient(to)?)
            .subject(subject);
        if let Some(reply_to) = &self.config.reply_to {
            builder = builder.reply_to(reply_to.clone());
        }
        Ok(builder)
    }

    /// The multipart/alternative body, then the DKIM signature when configured.
    fn finish(
        &self,
        builder: MessageBuilder,
        text: String,
        html: String,
    ) -> Result<Message, SendError> {
        let mut message = builder
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| SendError::Failed {
                reason: format!("Cannot build the email: {e}"),
            })?;
        if let Some(dkim) = &self.dkim {
            message.sign(dkim);
        }
        Ok(message)
    }

    pub async fn send(
        &self,
        to: &str,
        payload: &str,
        delivery_id: &str,
        subscriber_id: i64,
    ) -> Result<(), SendError> {
        let message = self.message(to, payload, delivery_id, subscriber_id)?;
        self.deliver(message).await
    }

    /// A one-off message to one address (the sign-up confirmation, a preferences link): no
    /// list headers, but a Message-ID of its own (Gmail refuses mail without one).
    pub async fn send_single(&self, to: &str, email: Email) -> Result<(), SendError> {
        let builder = self
            .builder(to, email.subject)?
            .message_id(Some(single_message_id(to, &self.config.list_id)));
        let message = self.finish(builder, email.text, email.html)?;
        self.deliver(message).await
    }

    async fn deliver(&self, message: Message) -> Result<(), SendError> {
        self.relay
            .send(message.envelope(), &message.formatted())
            .await
    }
}

fn recipient(to: &str) -> Result<Mailbox, SendError> {
    to.parse().map_err(|e| SendError::Permanent {
        reason: format!("Recipient address is invalid: {e}"),
    })
}

/// What a reply code means once the relay has taken up a message. Only a refused mailbox is
/// a bounce: 5.1.x (bad address) or 5.2.1 (mailbox disabled), or a bare 550/551/553 from a
/// relay that gives no enhanced code. The relay refusing *us* is an outage that pauses the
/// channel and marks nobody: 421 (closing), a refused login, and 5.7.x policy refusals
/// (relaying denied, sender not ours). Other 5xx refuse this message only; 4xx (451, 452,
/// greylisting) are retried. Faults without a reply (no connection, a drop, silence) are
/// sorted in [`super::relay`], by the step they happened in.
pub(super) fn classify_reply(code: &str, text: &str) -> SendError {
    let enhanced = enhanced_status(text);
    let permanent = code.starts_with('5');
    match (code, enhanced.map(|(_, subject, _)| subject)) {
        ("421", _) => SendError::Outage {
            reason: format!("SMTP relay is closing connections: {text}"),
            retry_after: None,
        },
        ("530" | "534" | "535" | "538", _) => SendError::Outage {
            reason: format!(
                "SMTP relay refused our login (check email.username and the password): {text}"
            ),
            retry_after: None,
        },
        (_, Some(7)) if permanent => SendError::Outage {
            reason: format!(
                "SMTP relay refused us by policy (check email.from and the relay's sending rules): {text}"
            ),
            retry_after: None,
        },
        ("550" | "551" | "553", None | Some(1)) => SendError::Permanent {
            reason: format!("Bounced: {text}"),
        },
        _ if permanent && enhanced == Some((5, 2, 1)) => SendError::Permanent {
            reason: format!("Bounced: {text}"),
        },
        _ if permanent => SendError::Failed {
            reason: format!("SMTP relay refused the message: {text}"),
        },
        _ => SendError::Transient {
            reason: format!("SMTP relay: {text}"),
            retry_after: None,
        },
    }
}

/// The first RFC 3463 enhanced status code in a reply (`5.1.1` -> (5, 1, 1)).
fn enhanced_status(text: &str) -> Option<(u8, u16, u16)> {
    text.split(|c: char| c.is_whitespace() || c == ':' || c == '(' || c == ')')
        .find_map(|word| {
            let mut parts = word.split('.');
            let class: u8 = parts.next()?.parse().ok()?;
            let subject: u16 = parts.next()?.parse().ok()?;
            let detail: u16 = parts.next()?.parse().ok()?;
            let valid = matches!(class, 2 | 4 | 5) && parts.next().is_none();
            valid.then_some((class, subject, detail))
        })
}

/// A Message-ID unique per one-off message: a hash of the address and the time, at the
/// list's domain.
fn single_message_id(to: &str, list_id: &str) -> String {
    use sha2::{Digest, Sha256};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let digest = Sha256::digest(format!("{to}\n{now}\n{n}").as_bytes());
    format!("<{}@{list_id}>", kdigest_core::parse::hex(&digest[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(code: Option<&str>, text: &str) -> &'static str {
        match classify_reply(code.expect("a reply code"), text) {
            SendError::Permanent { .. } => "bounce",
            SendError::Outage { .. } => "outage",
            SendError::Failed { .. } => "failed",
            SendError::Transient { .. } => "retry",
            SendError::Refused { .. } => "refused",
            SendError::Moved(_) => "moved",
        }
    }

    #[test]
    fn only_refused_mailboxes_bounce_and_relay_refusals_pause() {
        assert_eq!(
            kind(Some("550"), "permanent error (550): 5.1.1 No such user"),
            "bounce"
        );
        assert_eq!(
            kind(Some("550"), "permanent error (550): mailbox unavailable"),
            "bounce"
        );
        assert_eq!(
            kind(Some("550"), "permanent error (550): 5.2.1 Mailbox disabled"),
            "bounce"
        );
        assert_eq!(
            kind(Some("550"), "permanent error (550): 5.7.54 Unable to relay"),
            "outage"
        );
        assert_eq!(
            kind(
                Some("553"),
                "permanent error (553): 5.7.1 Sender address rejected: not owned by user"
            ),
            "outage"
        );
        assert_eq!(
            kind(
                Some("554"),
                "permanent error (554): 5.7.1 Relay access denied"
            ),
            "outage"
        );
        assert_eq!(
            kind(
                Some("535"),
                "permanent error (535): 5.7.8 Authentication failed"
            ),
            "outage"
        );
        assert_eq!(
            kind(Some("421"), "transient error (421): closing"),
            "outage"
        );
        assert_eq!(
            kind(Some("552"), "permanent error (552): 5.3.4 Message too big"),
            "failed"
        );
        assert_eq!(
            kind(Some("451"), "transient error (451): 4.7.1 Greylisted"),
            "retry"
        );
    }
}
