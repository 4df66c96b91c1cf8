//! Generic webhook: the filtered digest as JSON (docs/digest-json.md), signed with
//! HMAC-SHA256, for bridges and automation tools. The smallest channel, and the worked
//! example of docs/channels.md.

pub mod send;

use super::{ChannelSpec, Meta, SendError};
use super::{Setup, no_section};
use kdigest_core::settings::read::Doc;
use kdigest_core::settings::{ChannelLimits, Secret};
use kdigest_core::model::Digest;
use kdigest_core::render::{Format, Renderer};

pub use send::{DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookSender, signature};

pub struct Spec;

impl ChannelSpec for Spec {
    const NAME: &'static str = "webhook";
    const FORMS: &'static str = "webhook:<http(s) URL>";
    const EXAMPLE: (&'static str, &'static str) = (
        "webhook:https://hooks.example.org/kdigest?token=wh-9a8b7c6d",
        "wh-9a8b7c6d",
    );
    // Each host is its own destination; our own receivers, so generous.
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 100.0,
        per_destination_per_sec: 10.0,
        concurrency: 32,
    };
    const SHARED_BUDGET: bool = false;

    /// The receiver's URL; it may embed a credential.
    type Target = url::Url;
    type Sender = WebhookSender;
    type Section = ();

    fn section(doc: &Doc, _site: &url::Url, problems: &mut Vec<String>) {
        no_section(doc, Self::NAME, problems)
    }

    fn parse(target: &str) -> Result<url::Url, String> {
        let url = url::Url::parse(target).map_err(|e| format!("\"{target}\" is not a URL ({e})"))?;
        if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() {
            Ok(url)
        } else {
            Err("a webhook address needs an http(s) URL with a host".into())
        }
    }

    fn stored(url: &url::Url) -> String {
        url.to_string()
    }

    /// Only the host: the path and query may hold a token.
    fn display(url: &url::Url) -> String {
        format!("{}://{}/…", url.scheme(), url.host_str().unwrap_or(""))
    }

    /// One host is one destination (the receiver's capacity, not a platform's quota).
    fn destination(url: &url::Url) -> String {
        format!(
            "{}:{}",
            url.host_str().unwrap_or(""),
            url.port_or_known_default().unwrap_or(0)
        )
    }

    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
        renderer.render(digest, Format::Json)
    }

    /// The receiver's own: kdigest posts the digest's JSON (docs/digest-json.md), which
    /// must be one JSON object.
    fn refusal(code: u16) -> SendError {
        send::classify(code, format!("HTTP {code}"), None)
    }

    fn limit_problems(message: &str) -> Vec<String> {
        match serde_json::from_str::<serde_json::Value>(message) {
            Ok(v) if v.is_object() => Vec::new(),
            Ok(_) => vec!["not a JSON object".into()],
            Err(e) => vec![format!("not JSON: {e}")],
        }
    }

    /// The signing key comes from the variable named by `delivery.webhook_secret_env`;
    /// without it webhooks go unsigned and a warning says so.
    fn sender(setup: &Setup) -> anyhow::Result<Option<WebhookSender>> {
        let secret = Secret::from_env(
            setup.webhook_secret_env,
            "the webhook signing key",
        )
        .ok();
        if secret.is_none() {
            tracing::warn!(
                message = "Webhook deliveries are not signed; set the signing key to sign them",
                variable = %setup.webhook_secret_env
            );
        }
        let concurrency = setup.limits(crate::Channel::Webhook).concurrency;
        Ok(Some(WebhookSender::new(
            setup.timeout,
            secret,
            concurrency,
            crate::netguard::Guard::delivery(setup.allow_private_networks),
        )?))
    }

    async fn send(
        sender: &WebhookSender,
        url: &url::Url,
        message: &str,
        meta: Meta<'_>,
    ) -> Result<(), SendError> {
        sender.send(url, message, meta.delivery_id).await
    }
}
