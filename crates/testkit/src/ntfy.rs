//! A loopback ntfy server, written from docs.ntfy.sh ("Publishing": publish as JSON,
//! Markdown, click, priority, tags, access tokens; "Limitations") and the server's error
//! table: JSON published to the root, a topic of 1 to 64 of `[-_A-Za-z0-9]`, a message of
//! at most 4,096 bytes, a title of at most 1 KB, tags of at most 512 bytes together,
//! priority 1 to 5; protected topics answer 403 (40301) without a token and 401 (40101)
//! with a wrong one; each visitor gets a burst of requests and then one per interval,
//! beyond which 429 (42901). Everything outside that is recorded as a problem, so a test
//! asserts there were none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One accepted message.
#[derive(Debug, Clone)]
pub struct Published {
    pub topic: String,
    pub title: String,
    pub message: String,
    pub click: Option<String>,
    pub priority: i64,
    pub at: Instant,
}

/// The request limit of one visitor: `burst` requests, then one per `every`.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimit {
    pub burst: f64,
    pub every: Duration,
}

#[derive(Default)]
pub struct NtfyMock {
    pub published: Mutex<Vec<Published>>,
    pub problems: Mutex<Vec<String>>,
    /// Protected topics and the token each accepts.
    pub tokens: Mutex<HashMap<String, String>>,
    /// Answers to give instead of publishing, per topic, in order (status, ntfy code).
    pub scripted: Mutex<HashMap<String, Vec<(u16, i64)>>>,
    /// Requests seen, accepted or not.
    pub requests: Mutex<usize>,
    /// 429 answers given for the request limit.
    pub limited: Mutex<usize>,
    limit: Mutex<Option<(RequestLimit, f64, Instant)>>,
}

impl NtfyMock {
    /// Every topic's messages, in order.
    pub fn messages(&self, topic: &str) -> Vec<Published> {
        let published = self.published.lock().unwrap();
        published
            .iter()
            .filter(|p| p.topic == topic)
            .cloned()
            .collect()
    }

    pub fn protect(&self, topic: &str, token: &str) {
        self.tokens
            .lock()
            .unwrap()
            .insert(topic.into(), token.into());
    }

    pub fn script(&self, topic: &str, answers: &[(u16, i64)]) {
        self.scripted
            .lock()
            .unwrap()
            .insert(topic.into(), answers.to_vec());
    }

    /// Enforce a visitor request limit (one visitor: every test request is from 127.0.0.1).
    pub fn limit(&self, limit: RequestLimit) {
        *self.limit.lock().unwrap() = Some((limit, limit.burst, Instant::now()));
    }

    fn problem(&self, p: String) {
        self.problems.lock().unwrap().push(p);
    }

    /// Takes one request from the visitor's bucket; false when it is empty.
    fn admit(&self) -> bool {
        let mut limit = self.limit.lock().unwrap();
        let Some((l, tokens, last)) = limit.as_mut() else {
            return true;
        };
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() / l.every.as_secs_f64())
            .min(l.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Serves the mock at `http://127.0.0.1:<port>` (the root is the publish URL; a topic is
/// `<base>/<topic>`).
pub async fn spawn() -> (String, Arc<NtfyMock>) {
    let mock = Arc::new(NtfyMock::default());
    let app = Router::new()
        .route("/", post(publish))
        .fallback(|| async { error(404, 40401, "page not found") })
        .with_state(mock.clone());
    (crate::net::serve(app).await, mock)
}

fn error(status: u16, code: i64, message: &str) -> Response {
    let body = json!({"code": code, "http": status, "error": message, "link": "https://ntfy.sh/docs/publish/"});
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

const KNOWN: &[&str] = &[
    "topic", "message", "title", "tags", "priority", "markdown", "click",
];

async fn publish(State(mock): State<Arc<NtfyMock>>, headers: HeaderMap, body: String) -> Response {
    *mock.requests.lock().unwrap() += 1;
    if !mock.admit() {
        *mock.limited.lock().unwrap() += 1;
        return error(
            429,
            42901,
            "limit reached: too many requests, please be nice",
        );
    }
    let Ok(v) = serde_json::from_str::<Value>(&body) else {
        mock.problem(format!("not JSON: {body:.80}"));
        return error(
            400,
            40017,
            "invalid request: request body must be message JSON",
        );
    };
    for key in v
        .as_object()
        .map(|o| o.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if !KNOWN.contains(&key.as_str()) {
            mock.problem(format!("unexpected field {key}"));
        }
    }
    let topic = v["topic"].as_str().unwrap_or("").to_string();
    let valid_topic = !topic.is_empty()
        && topic.len() <= 64
        && topic
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid_topic {
        mock.problem(format!("invalid topic {topic:?}"));
        return error(400, 40009, "invalid request: topic invalid");
    }
    if let Some(token) = mock.tokens.lock().unwrap().get(&topic).cloned() {
        match headers.get("authorization").and_then(|h| h.to_str().ok()) {
            None => return error(403, 40301, "forbidden"),
            Some(h) if h != format!("Bearer {token}") => return error(401, 40101, "unauthorized"),
            Some(_) => {}
        }
    } else if headers.contains_key("authorization") {
        mock.problem(format!("a token sent to the open topic {topic}"));
    }
    if let Some(answers) = mock.scripted.lock().unwrap().get_mut(&topic)
        && !answers.is_empty()
    {
        let (status, code) = answers.remove(0);
        return error(status, code, "scripted");
    }
    let message = v["message"].as_str().unwrap_or("").to_string();
    let title = v["title"].as_str().unwrap_or("").to_string();
    let mut fail = Vec::new();
    if message.is_empty() {
        fail.push("no message".to_string());
    }
    if message.len() > 4096 {
        fail.push(format!("message of {} bytes", message.len()));
    }
    if title.len() > 1024 {
        fail.push(format!("title of {} bytes", title.len()));
    }
    let tags: usize = v["tags"].as_array().map_or(0, |t| {
        t.iter().filter_map(Value::as_str).map(str::len).sum()
    });
    if tags > 512 {
        fail.push(format!("tags of {tags} bytes"));
    }
    let priority = v["priority"].as_i64().unwrap_or(3);
    if !(1..=5).contains(&priority) || (!v["priority"].is_null() && !v["priority"].is_i64()) {
        mock.problem(format!("priority {}", v["priority"]));
        return error(400, 40007, "invalid priority parameter");
    }
    if !v["markdown"].is_null() && !v["markdown"].is_boolean() {
        fail.push("markdown is not a boolean".into());
    }
    let click = v["click"].as_str().map(str::to_string);
    if let Some(c) = &click
        && reqwest::Url::parse(c).is_err()
    {
        fail.push(format!("click {c:?} is not a URL"));
    }
    if !fail.is_empty() {
        mock.problem(format!("{topic}: {}", fail.join(", ")));
        return error(
            400,
            40024,
            "invalid request: request body must be valid JSON",
        );
    }
    mock.published.lock().unwrap().push(Published {
        topic: topic.clone(),
        title,
        message: message.clone(),
        click,
        priority,
        at: Instant::now(),
    });
    axum::Json(json!({"id": "mock", "event": "message", "topic": topic, "message": message}))
        .into_response()
}
