//! A loopback Matrix homeserver, written from the client-server API (spec.matrix.org v1.x):
//! `GET /_matrix/client/v3/directory/room/{alias}` and `PUT
//! /_matrix/client/v3/rooms/{roomId}/send/m.room.message/{txnId}` behind a bearer token; a
//! transaction id seen before (for the same token) answers the first event id and posts
//! nothing; events above 65,536 bytes answer `M_TOO_LARGE`; a room the bot has not joined
//! answers `M_FORBIDDEN`; the account's message limit answers 429 `M_LIMIT_EXCEEDED` with
//! `retry_after_ms`. Anything outside the spec kdigest should never send is recorded as a
//! problem.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde_json::{Value, json};

/// The bot's access token the mock accepts.
pub const TOKEN: &str = "syt_a2RpZ2VzdA_secretsecret_0x1a2b";

#[derive(Debug, Clone)]
pub struct Posted {
    pub room: String,
    pub txn: String,
    pub body: String,
    pub formatted_body: String,
    pub at: Instant,
}

#[derive(Default)]
pub struct MatrixMock {
    pub posted: Mutex<Vec<Posted>>,
    pub problems: Mutex<Vec<String>>,
    /// Rooms the bot has joined.
    pub joined: Mutex<HashSet<String>>,
    pub aliases: Mutex<HashMap<String, String>>,
    /// Transaction ids seen, with their event ids.
    txns: Mutex<HashMap<String, String>>,
    /// Per room: store the event, then answer this status anyway (a lost answer), once each.
    pub lose_answers: Mutex<HashMap<String, Vec<u16>>>,
    /// Requests that answered 429.
    pub limited: Mutex<usize>,
    /// The account's message limit: a burst, then one per interval.
    limit: Mutex<Option<(f64, Duration, f64, Instant)>>,
    /// Every PUT, accepted or not.
    pub requests: Mutex<usize>,
}

impl MatrixMock {
    pub fn join(&self, room: &str) {
        self.joined.lock().unwrap().insert(room.into());
    }

    pub fn alias(&self, alias: &str, room: &str) {
        self.aliases
            .lock()
            .unwrap()
            .insert(alias.into(), room.into());
    }

    pub fn lose_answers(&self, room: &str, statuses: &[u16]) {
        self.lose_answers
            .lock()
            .unwrap()
            .insert(room.into(), statuses.to_vec());
    }

    pub fn limit(&self, burst: f64, every: Duration) {
        *self.limit.lock().unwrap() = Some((burst, every, burst, Instant::now()));
    }

    pub fn messages(&self, room: &str) -> Vec<Posted> {
        self.posted
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.room == room)
            .cloned()
            .collect()
    }

    fn problem(&self, p: String) {
        self.problems.lock().unwrap().push(p);
    }

    /// None when admitted; else how long until the next message is.
    fn admit(&self) -> Option<Duration> {
        let mut limit = self.limit.lock().unwrap();
        let (burst, every, tokens, last) = limit.as_mut()?;
        let now = Instant::now();
        *tokens =
            (*tokens + now.duration_since(*last).as_secs_f64() / every.as_secs_f64()).min(*burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            None
        } else {
            Some(every.mul_f64(1.0 - *tokens))
        }
    }
}

pub async fn spawn() -> (String, Arc<MatrixMock>) {
    let mock = Arc::new(MatrixMock::default());
    let app = Router::new()
        .route("/_matrix/client/v3/directory/room/{alias}", get(resolve))
        .route(
            "/_matrix/client/v3/rooms/{room}/send/{event_type}/{txn}",
            put(send),
        )
        .fallback(|| async { error(404, "M_UNRECOGNIZED", "Unrecognized request") })
        .with_state(mock.clone());
    (crate::net::serve(app).await, mock)
}

fn error(status: u16, code: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        axum::Json(json!({"errcode": code, "error": message})),
    )
        .into_response()
}

/// The refusal of a request without the bot's token; None when it has it.
fn unauthorised(headers: &HeaderMap) -> Option<Response> {
    match headers.get("authorization").and_then(|h| h.to_str().ok()) {
        None => Some(error(401, "M_MISSING_TOKEN", "Missing access token")),
        Some(h) if h != format!("Bearer {TOKEN}") => Some(error(
            401,
            "M_UNKNOWN_TOKEN",
            "Invalid access token passed.",
        )),
        Some(_) => None,
    }
}

async fn resolve(
    State(mock): State<Arc<MatrixMock>>,
    headers: HeaderMap,
    Path(alias): Path<String>,
) -> Response {
    if let Some(r) = unauthorised(&headers) {
        return r;
    }
    match mock.aliases.lock().unwrap().get(&alias) {
        Some(room) => {
            axum::Json(json!({"room_id": room, "servers": ["example.org"]})).into_response()
        }
        None => error(404, "M_NOT_FOUND", &format!("Room alias {alias} not found")),
    }
}

async fn send(
    State(mock): State<Arc<MatrixMock>>,
    headers: HeaderMap,
    Path((room, event_type, txn)): Path<(String, String, String)>,
    body: String,
) -> Response {
    *mock.requests.lock().unwrap() += 1;
    if let Some(r) = unauthorised(&headers) {
        return r;
    }
    if event_type != "m.room.message" {
        mock.problem(format!("event type {event_type}"));
    }
    if let Some(event_id) = mock.txns.lock().unwrap().get(&txn) {
        // Idempotent: the same transaction answers its first event and posts nothing.
        return axum::Json(json!({"event_id": event_id})).into_response();
    }
    if let Some(wait) = mock.admit() {
        *mock.limited.lock().unwrap() += 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": wait.as_millis() as u64})),
        )
            .into_response();
    }
    if body.len() > 65_536 {
        mock.problem(format!("{room}: an event of {} bytes", body.len()));
        return error(413, "M_TOO_LARGE", "event too large");
    }
    let Ok(v) = serde_json::from_str::<Value>(&body) else {
        mock.problem(format!("{room}: not JSON"));
        return error(400, "M_NOT_JSON", "Content not JSON.");
    };
    if !mock.joined.lock().unwrap().contains(&room) {
        return error(
            403,
            "M_FORBIDDEN",
            &format!("User @kdigest:example.org not in room {room}"),
        );
    }
    let msgtype = v["msgtype"].as_str().unwrap_or("");
    if !matches!(msgtype, "m.text" | "m.notice") || v["body"].as_str().is_none_or(str::is_empty) {
        mock.problem(format!("{room}: msgtype {msgtype:?} or no body"));
        return error(400, "M_BAD_JSON", "msgtype and body are required");
    }
    if v["formatted_body"].is_string() && v["format"] != "org.matrix.custom.html" {
        mock.problem(format!("{room}: formatted_body without its format"));
    }
    for key in v
        .as_object()
        .map(|o| o.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if !["msgtype", "body", "format", "formatted_body"].contains(&key.as_str()) {
            mock.problem(format!("{room}: unexpected field {key}"));
        }
    }
    let event_id = format!("$event{}", mock.txns.lock().unwrap().len());
    mock.txns
        .lock()
        .unwrap()
        .insert(txn.clone(), event_id.clone());
    mock.posted.lock().unwrap().push(Posted {
        room: room.clone(),
        txn,
        body: v["body"].as_str().unwrap_or("").into(),
        formatted_body: v["formatted_body"].as_str().unwrap_or("").into(),
        at: Instant::now(),
    });
    if let Some(statuses) = mock.lose_answers.lock().unwrap().get_mut(&room)
        && !statuses.is_empty()
    {
        let status = statuses.remove(0);
        return error(
            status,
            "M_UNKNOWN",
            "the answer was lost after the event was stored",
        );
    }
    axum::Json(json!({"event_id": event_id})).into_response()
}
