//! Sending one message to one room as the bot account, and reading the homeserver's answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kdigest_core::parse::hex;
use kdigest_core::settings::Secret;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::Room;
use crate::SendError;

pub struct MatrixSender {
    client: reqwest::Client,
    homeserver: url::Url,
    token: Secret,
    /// Aliases resolved to room ids (a room's alias rarely moves; a 404 on send forgets it).
    rooms: Mutex<HashMap<String, String>>,
}

/// The transaction id of one message of one delivery: the same on every retry of that
/// message (so the homeserver posts it once), different for each part of a digest.
pub fn transaction_id(delivery_id: &str, message: &str) -> String {
    let digest = Sha256::digest(message.as_bytes());
    format!("kdigest-{delivery_id}-{}", hex(&digest[..8]))
}

impl MatrixSender {
    /// The homeserver is the operator's (like the Telegram API URL), not a reader's, so the
    /// client is not behind the private-network guard.
    pub fn new(homeserver: url::Url, token: Secret, timeout: Duration) -> anyhow::Result<MatrixSender> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(MatrixSender {
            client,
            homeserver,
            token,
            rooms: Mutex::new(HashMap::new()),
        })
    }

    fn url(&self, segments: &[&str]) -> url::Url {
        let mut url = self.homeserver.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            // Each segment is percent-encoded: '#' and '!' in room ids and aliases.
            path.extend(["_matrix", "client", "v3"]).extend(segments);
        }
        url
    }

    async fn request(&self, request: reqwest::RequestBuilder) -> Result<crate::http::Answer, SendError> {
        crate::http::exchange("Matrix", request.bearer_auth(self.token.expose())).await
    }

    /// The room's id: itself, or the alias resolved through the room directory.
    async fn room_id(&self, room: &Room) -> Result<String, SendError> {
        let alias = match room {
            Room::Id(id) => return Ok(id.clone()),
            Room::Alias(alias) => alias,
        };
        if let Some(id) = self.rooms.lock().unwrap().get(alias) {
            return Ok(id.clone());
        }
        let reply = self
            .request(self.client.get(self.url(&["directory", "room", alias])))
            .await?;
        answer(reply.status, reply.retry_after, &reply.body)?;
        let id = serde_json::from_str::<Value>(&reply.body)
            .ok()
            .and_then(|v| v["room_id"].as_str().map(str::to_string))
            .ok_or_else(|| SendError::Transient {
                reason: format!("Matrix resolved {alias} without a room_id"),
                retry_after: None,
            })?;
        self.rooms.lock().unwrap().insert(alias.clone(), id.clone());
        Ok(id)
    }

    pub async fn send(&self, room: &Room, message: &str, delivery_id: &str) -> Result<(), SendError> {
        let room_id = self.room_id(room).await?;
        let txn = transaction_id(delivery_id, message);
        let url = self.url(&["rooms", &room_id, "send", "m.room.message", &txn]);
        let request = self
            .client
            .put(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(message.to_string());
        let reply = self.request(request).await?;
        let result = answer(reply.status, reply.retry_after, &reply.body);
        if matches!(result, Err(SendError::Permanent { .. }))
            && let Room::Alias(alias) = room
        {
            self.rooms.lock().unwrap().remove(alias);
        }
        result.map_err(|e| match e {
            SendError::Permanent { reason } => SendError::Permanent {
                reason: format!("{reason} (room {})", room.as_str()),
            },
            other => other,
        })
    }
}

/// The homeserver's answer as a delivery outcome.
pub fn answer(status: u16, retry_after: Option<Duration>, body: &str) -> Result<(), SendError> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let code = v["errcode"].as_str().unwrap_or("");
    let reason = match v["error"].as_str() {
        Some(e) => format!("Matrix answered HTTP {status} {code}: {e}"),
        None => format!("Matrix answered HTTP {status} {code}").trim_end().to_string(),
    };
    let retry_after_ms = v["retry_after_ms"]
        .as_u64()
        .map(Duration::from_millis)
        .or(retry_after);
    Err(match (status, code) {
        // The account's message limit: every room waits (the destination is the account).
        (429, _) | (_, "M_LIMIT_EXCEEDED") => SendError::Transient {
            reason,
            retry_after: Some(retry_after_ms.unwrap_or(Duration::from_secs(5))),
        },
        (408 | 425 | 500..=599, _) => SendError::Transient {
            reason,
            retry_after,
        },
        // Our access token: nothing will get through until the operator fixes it.
        (401, _) | (_, "M_UNKNOWN_TOKEN" | "M_MISSING_TOKEN") => SendError::Outage {
            reason: format!("{reason}: check the bot's access token (matrix.token_env)"),
            retry_after: None,
        },
        (403, _) | (_, "M_FORBIDDEN") => SendError::Permanent {
            reason: format!("{reason}: the bot may not post in this room (invite it, or it was removed)"),
        },
        (404 | 410, _) | (_, "M_NOT_FOUND") => SendError::Permanent {
            reason: format!("{reason}: no such room"),
        },
        // M_TOO_LARGE, M_BAD_JSON, M_NOT_JSON: this message only.
        _ => SendError::Failed { reason },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_reuses_its_transaction_id_and_parts_have_their_own() {
        assert_eq!(transaction_id("d1", "part 1"), transaction_id("d1", "part 1"));
        assert_ne!(transaction_id("d1", "part 1"), transaction_id("d1", "part 2"));
        assert_ne!(transaction_id("d1", "part 1"), transaction_id("d2", "part 1"));
    }

    #[test]
    fn the_homeservers_answers_map_to_outcomes() {
        let limited = answer(429, None, r#"{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":2500}"#);
        assert!(matches!(limited, Err(SendError::Transient { retry_after: Some(w), .. }) if w == Duration::from_millis(2500)));
        assert!(matches!(answer(401, None, r#"{"errcode":"M_UNKNOWN_TOKEN","error":"Invalid access token"}"#), Err(SendError::Outage { .. })));
        assert!(matches!(answer(403, None, r#"{"errcode":"M_FORBIDDEN","error":"User not in room"}"#), Err(SendError::Permanent { .. })));
        assert!(matches!(answer(404, None, r#"{"errcode":"M_NOT_FOUND","error":"Room alias not found"}"#), Err(SendError::Permanent { .. })));
        assert!(matches!(answer(413, None, r#"{"errcode":"M_TOO_LARGE","error":"event too large"}"#), Err(SendError::Failed { .. })));
        assert!(matches!(answer(502, None, ""), Err(SendError::Transient { .. })));
        assert!(answer(200, None, r#"{"event_id":"$e"}"#).is_ok());
    }
}
