//! Matrix rooms through the client-server API: kdigest posts as one bot account on the
//! operator's homeserver (`[matrix] homeserver`, its access token from the environment
//! variable `[matrix] token_env`) to rooms given by id (`matrix:!abc:example.org`) or alias
//! (`matrix:#gpu-news:example.org`, resolved through the room directory).
//!
//! Documented (spec.matrix.org, client-server API v1.x): `PUT
//! /_matrix/client/v3/rooms/{roomId}/send/m.room.message/{txnId}` with an `m.text` body and an
//! `org.matrix.custom.html` formatted body; the transaction id makes a retry idempotent (the
//! server answers the same event id and posts nothing new); an event is at most 65,536
//! bytes; errors are JSON `{"errcode", "error"}`: `M_LIMIT_EXCEEDED` (429, with
//! `retry_after_ms`), `M_FORBIDDEN` (403: not in the room, no permission), `M_NOT_FOUND`,
//! `M_UNKNOWN_TOKEN`/`M_MISSING_TOKEN` (401), `M_TOO_LARGE` (413). Synapse limits each
//! user's messages (`rc_message`: 0.2 a second after a burst of 10) unless the operator
//! exempts the bot.

pub mod render;
pub mod send;

use serde::Deserialize;

use super::{ChannelSpec, Meta, SendError, Setup};
use kdigest_core::model::Digest;
use kdigest_core::render::Renderer;
use kdigest_core::settings::ChannelLimits;
use kdigest_core::settings::read::{Doc, env_var_name, http_url, section};

pub use send::MatrixSender;

/// An event's limit in bytes, all of it; the message's two bodies stay under
/// [`render::BODIES_MAX`] to leave room for the envelope.
pub const EVENT_MAX: usize = 65_536;

/// A room: its id (`!opaque:server`) or an alias (`#name:server`) resolved when sending.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Room {
    Id(String),
    Alias(String),
}

impl Room {
    pub fn as_str(&self) -> &str {
        match self {
            Room::Id(s) | Room::Alias(s) => s,
        }
    }
}

/// The `[matrix]` section.
#[derive(Debug, Clone)]
pub struct MatrixConfig {
    /// The bot account's homeserver; None: Matrix is not set up.
    pub homeserver: Option<url::Url>,
    /// Name of the environment variable holding the bot's access token.
    pub token_env: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawMatrix {
    homeserver: Option<String>,
    token_env: String,
}

impl Default for RawMatrix {
    fn default() -> Self {
        RawMatrix {
            homeserver: None,
            token_env: "KDIGEST_MATRIX_TOKEN".into(),
        }
    }
}

pub struct Spec;

impl ChannelSpec for Spec {
    const NAME: &'static str = "matrix";
    const FORMS: &'static str = "matrix:<room id !…:server or alias #…:server>";
    const EXAMPLE: (&'static str, &'static str) = ("matrix:#gpu-news:example.org", "");
    // One bot account: Synapse's default rc_message (0.2 a second after a burst of 10) is
    // per user, so every room shares it, across instances too.
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 0.2,
        per_destination_per_sec: 0.2,
        concurrency: 4,
    };
    const FORMAT: Option<&'static str> = Some("json");

    type Target = Room;
    type Sender = MatrixSender;
    type Section = MatrixConfig;

    fn section(doc: &Doc, _site: &url::Url, problems: &mut Vec<String>) -> MatrixConfig {
        let raw: RawMatrix = section(doc, Self::NAME, problems);
        let homeserver = raw.homeserver.as_deref().and_then(|u| {
            let url = http_url(u).filter(super::https_or_loopback);
            if url.is_none() {
                problems.push(format!(
                    "matrix.homeserver: \"{u}\" is not an https URL; give the bot account's homeserver, e.g. https://matrix.example.org"
                ));
            }
            url
        });
        env_var_name("matrix.token_env", &raw.token_env, "access token", problems);
        MatrixConfig {
            homeserver,
            token_env: raw.token_env,
        }
    }

    fn parse(target: &str) -> Result<Room, String> {
        let room = match target.chars().next() {
            Some('!') => Room::Id(target.to_string()),
            Some('#') => Room::Alias(target.to_string()),
            _ => {
                return Err(format!(
                    "\"{target}\" is not a Matrix room: give its id (!abc:example.org) or alias (#name:example.org)"
                ));
            }
        };
        let valid = target.len() <= 255
            && target[1..].split_once(':').is_some_and(|(local, server)| {
                !local.is_empty()
                    && !server.is_empty()
                    && !target.chars().any(|c| c.is_whitespace() || c.is_control())
            });
        if valid {
            Ok(room)
        } else {
            Err(format!(
                "\"{target}\" is not a Matrix room: an id or alias has a server after ':' (!abc:example.org, #name:example.org)"
            ))
        }
    }

    fn stored(room: &Room) -> String {
        room.as_str().to_string()
    }

    /// One account posts to every room: the homeserver limits the account, not the room.
    fn destination(_room: &Room) -> String {
        "matrix:account".into()
    }

    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
        let site = renderer.site_url(&format!("digest/{}", digest.date));
        render::messages(digest, renderer.locale(), site.as_deref())
            .iter()
            .map(|m| Ok(serde_json::to_string_pretty(m)? + "\n"))
            .collect()
    }

    fn limit_problems(message: &str) -> Vec<String> {
        render::limit_problems(message)
    }

    fn note(text: &str) -> Option<String> {
        Some(
            serde_json::json!({"msgtype": "m.notice", "body": text}).to_string(),
        )
    }

    fn refusal(code: u16) -> SendError {
        send::answer(code, None, "").err().unwrap_or(SendError::Failed {
            reason: format!("Matrix took HTTP {code} with no body as sent"),
        })
    }

    fn sender(setup: &Setup) -> anyhow::Result<Option<MatrixSender>> {
        let section = &setup.sections.matrix;
        let Some(homeserver) = &section.homeserver else {
            tracing::info!(message = "No [matrix] homeserver; Matrix subscribers are not delivered to");
            return Ok(None);
        };
        let Ok(token) = kdigest_core::settings::Secret::from_env(&section.token_env, "the Matrix access token") else {
            tracing::info!(
                message = "No Matrix access token; Matrix subscribers are not delivered to",
                variable = %section.token_env
            );
            return Ok(None);
        };
        Ok(Some(MatrixSender::new(
            homeserver.clone(),
            token,
            setup.timeout,
        )?))
    }

    async fn send(
        sender: &MatrixSender,
        room: &Room,
        message: &str,
        meta: Meta<'_>,
    ) -> Result<(), SendError> {
        sender.send(room, message, meta.delivery_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooms_are_ids_or_aliases_with_a_server() {
        assert_eq!(Spec::parse("!abc:example.org").unwrap(), Room::Id("!abc:example.org".into()));
        assert_eq!(Spec::parse("#gpu:example.org").unwrap(), Room::Alias("#gpu:example.org".into()));
        for bad in ["gpu:example.org", "#gpu", "!:example.org", "#gpu:", "#a b:example.org", ""] {
            let error = Spec::parse(bad).unwrap_err();
            assert!(error.contains("!abc:example.org"), "{bad}: {error}");
        }
    }
}
