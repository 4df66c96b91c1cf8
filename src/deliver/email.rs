//! Email channel: the digest as a multipart/alternative newsletter through an SMTP relay
//! (lettre, pooled connections): List-Id, List-Unsubscribe with a signed one-click URL (RFC
//! 8058) and optional mailto, and a Message-ID stable per (digest, subscriber).
//!
//! A refused mailbox (550, 551, 553) disables the subscriber as bounced; 4xx answers and relay
//! problems (connection, TLS, a refused login) are retried and never mark anyone bounced.

use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::PoolConfig;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::Tls;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::SendError;
use crate::config::{EmailConfig, Secret, SmtpTls};
use crate::render::Email;
use crate::tokens::{Purpose, sign};

/// Stands in for the per-subscriber unsubscribe URL in the cached render.
/// Letters and dashes only, so no template escaping changes it.
pub const UNSUBSCRIBE_PLACEHOLDER: &str = "KDIGEST-UNSUBSCRIBE-URL-PLACEHOLDER";

pub struct EmailSender {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    config: EmailConfig,
    /// Signs unsubscribe links (KDIGEST_SECRET).
    secret: Secret,
}

impl EmailSender {
    pub fn new(config: &EmailConfig, secret: Secret) -> anyhow::Result<EmailSender> {
        let host = config.smtp_host.as_str();
        let builder = match config.tls {
            SmtpTls::Implicit => AsyncSmtpTransport::<Tokio1Executor>::relay(host)?,
            SmtpTls::StartTls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host)?,
            SmtpTls::None => {
                AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host).tls(Tls::None)
            }
        };
        let mut builder = builder
            .port(config.smtp_port)
            .timeout(Some(std::time::Duration::from_secs(30)))
            .pool_config(PoolConfig::new().max_size(config.pool_size));
        if !config.username.is_empty() {
            let password = Secret::from_env(&config.password_env, "the SMTP password")?;
            builder = builder.credentials(Credentials::new(
                config.username.clone(),
                password.expose().to_string(),
            ));
        }
        Ok(EmailSender {
            transport: builder.build(),
            config: config.clone(),
            secret,
        })
    }

    pub fn unsubscribe_url(&self, subscriber_id: i64) -> String {
        let token = sign(&self.secret, Purpose::Unsubscribe, subscriber_id, 0);
        self.config
            .public_url
            .join(&format!("unsubscribe/{token}"))
            .map(|u| u.to_string())
            .unwrap_or_default()
    }

    /// The newsletter for one subscriber, ready to send.
    pub fn message(
        &self,
        to: &str,
        payload: &str,
        delivery_id: &str,
        subscriber_id: i64,
    ) -> Result<Message, SendError> {
        let failed = |reason: String| SendError::Failed { reason };
        let email: Email = serde_json::from_str(payload)
            .map_err(|e| failed(format!("Email payload is not valid: {e}")))?;
        let to: Mailbox = to.parse().map_err(|e| SendError::Permanent {
            reason: format!("Recipient address is invalid: {e}"),
        })?;
        let url = self.unsubscribe_url(subscriber_id);
        let html = email
            .html
            .replace(UNSUBSCRIBE_PLACEHOLDER, &crate::render::escape_html(&url));
        let text = email.text.replace(UNSUBSCRIBE_PLACEHOLDER, &url);
        let mut unsubscribe = format!("<{url}>");
        if let Some(mailto) = &self.config.unsubscribe_mailto {
            unsubscribe.push_str(&format!(", <mailto:{mailto}?subject=unsubscribe>"));
        }
        let raw = |name: &'static str, value: String| {
            HeaderValue::new(HeaderName::new_from_ascii_str(name), value)
        };
        let mut builder = Message::builder()
            .from(self.config.from.clone())
            .to(to)
            .subject(email.subject)
            .message_id(Some(format!("<{delivery_id}@{}>", self.config.list_id)))
            .raw_header(raw("List-Id", format!("kdigest <{}>", self.config.list_id)))
            .raw_header(raw("List-Unsubscribe", unsubscribe))
            .raw_header(raw(
                "List-Unsubscribe-Post",
                "List-Unsubscribe=One-Click".into(),
            ));
        if let Some(reply_to) = &self.config.reply_to {
            builder = builder.reply_to(reply_to.clone());
        }
        builder
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| failed(format!("Cannot build the email: {e}")))
    }

    pub async fn send(
        &self,
        to: &str,
        payload: &str,
        delivery_id: &str,
        subscriber_id: i64,
    ) -> Result<(), SendError> {
        let message = self.message(to, payload, delivery_id, subscriber_id)?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| classify(&e))
    }
}

/// Only a refused mailbox is a bounce. A refused login or sender is the relay's or the
/// operator's problem: retried, and nobody is marked bounced. Other 5xx refuse this message.
fn classify(e: &lettre::transport::smtp::Error) -> SendError {
    let code = e.status().map(|c| c.to_string()).unwrap_or_default();
    match code.as_str() {
        "550" | "551" | "553" => SendError::Permanent {
            reason: format!("Bounced: {e}"),
        },
        "530" | "534" | "535" | "538" => SendError::Transient {
            reason: format!("SMTP relay refused our login: {e}"),
            retry_after: None,
        },
        c if c.starts_with('5') => SendError::Failed {
            reason: format!("SMTP relay refused the message: {e}"),
        },
        _ => SendError::Transient {
            reason: format!("SMTP relay: {e}"),
            retry_after: None,
        },
    }
}
