//! A loopback Bot API: scripted getUpdates, per-chat failure modes for sendMessage, and a
//! check of every request against tests/fixtures/reference/platform/telegram-bot-api.json.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::feeds::reference_dir;
use crate::net::serve;

pub const TOKEN: &str = "123456:TEST-token_secret";

/// How sendMessage answers for one chat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChatMode {
    Ok,
    Blocked,
    /// 429 with retry_after 1 on the first message, then fine.
    RateLimitedOnce,
    /// As Telegram does in one chat: a message less than a second after the previous one
    /// gets 429 with retry_after 1.
    OnePerSecond,
    /// "group chat was upgraded": migrate to this id.
    MigrateTo(i64),
    /// Rejects the first HTML message as unparsable.
    BadHtmlOnce,
}

#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
pub struct Mock {
    pub calls: Mutex<Vec<Call>>,
    pub problems: Mutex<Vec<String>>,
    pub updates: Mutex<VecDeque<Value>>,
    pub modes: Mutex<BTreeMap<i64, ChatMode>>,
    /// User ids that are group admins.
    pub admins: Mutex<Vec<i64>>,
    spec: Value,
    served: Mutex<BTreeMap<i64, usize>>,
    /// Enforce Telegram's published limits for every chat: 30 messages in any second
    /// overall and one per second per chat, 429 with retry_after 1 beyond them.
    pub strict_limits: std::sync::atomic::AtomicBool,
    /// 429s answered because of those limits.
    pub too_many: std::sync::atomic::AtomicUsize,
}

impl Mock {
    pub fn sent_to(&self, chat: i64) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == "SendMessage" && c.body["chat_id"].as_i64() == Some(chat))
            .cloned()
            .collect()
    }

    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }
}

pub async fn spawn_mock() -> (String, Arc<Mock>) {
    let spec_text =
        std::fs::read_to_string(reference_dir().join("platform/telegram-bot-api.json")).unwrap();
    let mock = Arc::new(Mock {
        spec: serde_json::from_str(&spec_text).unwrap(),
        ..Mock::default()
    });
    let app = Router::new()
        .route("/{bot}/{method}", post(api))
        .with_state(mock.clone());
    let base = serve(app).await;
    (base, mock)
}

fn ok(result: Value) -> Response {
    Json(json!({"ok": true, "result": result})).into_response()
}

fn error(code: u16, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": code, "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (axum::http::StatusCode::from_u16(code).unwrap(), Json(body)).into_response()
}

/// Whether more than 30 SendMessage calls (this one included) arrived in the last second.
fn over_global_limit(mock: &Mock) -> bool {
    let calls = mock.calls.lock().unwrap();
    calls
        .iter()
        .rev()
        .filter(|c| c.method == "SendMessage")
        .take_while(|c| c.at.elapsed() < Duration::from_secs(1))
        .count()
        > 30
}

/// Whether the chat's previous answered SendMessage (before this one) was less than a
/// second ago. The current call is the last one recorded.
fn too_soon(mock: &Mock, chat: i64) -> bool {
    let sent = mock.sent_to(chat);
    match sent.as_slice() {
        [.., previous, _current] => previous.at.elapsed() < Duration::from_millis(1_000),
        _ => false,
    }
}

pub fn chat_json(id: i64) -> Value {
    if id < 0 {
        json!({"id": id, "type": "supergroup", "title": "Kernel hackers"})
    } else {
        json!({"id": id, "type": "private", "first_name": "Alice"})
    }
}

pub fn message_json(id: i64, chat: i64, text: &str) -> Value {
    json!({"message_id": id, "date": 1_761_500_000, "chat": chat_json(chat), "text": text})
}

/// teloxide sends most methods as JSON and a few (setWebhook) as multipart forms.
fn request_body(headers: &axum::http::HeaderMap, body: &[u8]) -> Value {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(boundary) = content_type.split("boundary=").nth(1) else {
        return if body.is_empty() {
            json!({})
        } else {
            serde_json::from_slice(body).unwrap_or(json!({}))
        };
    };
    let text = String::from_utf8_lossy(body);
    let mut fields = serde_json::Map::new();
    for part in text.split(&format!("--{boundary}")) {
        let Some((head, value)) = part.split_once("\r\n\r\n") else {
            continue;
        };
        let Some(name) = head
            .split("name=\"")
            .nth(1)
            .and_then(|n| n.split('"').next())
        else {
            continue;
        };
        let value = value.trim_end_matches("\r\n");
        fields.insert(
            name.to_string(),
            serde_json::from_str(value).unwrap_or(Value::String(value.to_string())),
        );
    }
    Value::Object(fields)
}

async fn api(
    State(mock): State<Arc<Mock>>,
    Path((bot, method)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body = request_body(&headers, &body);
    if bot != format!("bot{TOKEN}") {
        return error(401, "Unauthorized", None);
    }
    let problems = check_against_spec(&mock.spec, &method, &body);
    mock.problems.lock().unwrap().extend(problems);
    mock.calls.lock().unwrap().push(Call {
        method: method.clone(),
        body: body.clone(),
        at: Instant::now(),
    });
    match method.as_str() {
        "GetMe" => ok(json!({
            "id": 42, "is_bot": true, "first_name": "kdigest", "username": "kdigest_bot",
            "can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false,
            "can_connect_to_business": false, "has_main_web_app": false
        })),
        "GetUpdates" => {
            let next: Vec<Value> = mock
                .updates
                .lock()
                .unwrap()
                .pop_front()
                .into_iter()
                .collect();
            if next.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            ok(Value::Array(next))
        }
        "SetMyCommands" | "AnswerCallbackQuery" | "DeleteWebhook" | "SetWebhook" => ok(json!(true)),
        "GetChatMember" => {
            let user = body["user_id"].as_i64().unwrap_or(0);
            let status = if mock.admins.lock().unwrap().contains(&user) {
                "creator"
            } else {
                "member"
            };
            let mut member =
                json!({"status": status, "user": {"id": user, "is_bot": false, "first_name": "U"}});
            if status == "creator" {
                member["is_anonymous"] = json!(false);
            }
            ok(member)
        }
        "EditMessageReplyMarkup" => {
            let chat = body["chat_id"].as_i64().unwrap_or(0);
            ok(message_json(
                body["message_id"].as_i64().unwrap_or(1),
                chat,
                "layers",
            ))
        }
        "SendMessage" => {
            let chat = body["chat_id"].as_i64().unwrap_or(0);
            let n = {
                let mut served = mock.served.lock().unwrap();
                let n = served.entry(chat).or_default();
                *n += 1;
                *n
            };
            let mode = mock
                .modes
                .lock()
                .unwrap()
                .get(&chat)
                .copied()
                .unwrap_or(ChatMode::Ok);
            if mock
                .strict_limits
                .load(std::sync::atomic::Ordering::Relaxed)
                && (too_soon(&mock, chat) || over_global_limit(&mock))
            {
                mock.too_many
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return error(
                    429,
                    "Too Many Requests: retry after 1",
                    Some(json!({"retry_after": 1})),
                );
            }
            match mode {
                ChatMode::Blocked => error(403, "Forbidden: bot was blocked by the user", None),
                ChatMode::RateLimitedOnce if n == 1 => error(
                    429,
                    "Too Many Requests: retry after 1",
                    Some(json!({"retry_after": 1})),
                ),
                ChatMode::OnePerSecond if too_soon(&mock, chat) => error(
                    429,
                    "Too Many Requests: retry after 1",
                    Some(json!({"retry_after": 1})),
                ),
                ChatMode::MigrateTo(new) => error(
                    400,
                    "Bad Request: group chat was upgraded to a supergroup chat",
                    Some(json!({"migrate_to_chat_id": new})),
                ),
                ChatMode::BadHtmlOnce if n == 1 => error(
                    400,
                    "Bad Request: can't parse entities: Unsupported start tag \"p\" at byte offset 0",
                    None,
                ),
                _ => ok(message_json(
                    n as i64,
                    chat,
                    body["text"].as_str().unwrap_or(""),
                )),
            }
        }
        other => error(
            404,
            &format!("Not Found: method {other} is not mocked"),
            None,
        ),
    }
}

/// teloxide sends PascalCase method names; the spec uses camelCase.
fn check_against_spec(spec: &Value, method: &str, body: &Value) -> Vec<String> {
    let name = format!("{}{}", method[..1].to_lowercase(), &method[1..]);
    let Some(m) = spec["methods"].get(&name) else {
        return vec![format!("{method}: not a Bot API method")];
    };
    let fields = m["fields"].as_array().cloned().unwrap_or_default();
    let mut problems = Vec::new();
    for f in &fields {
        let field = f["name"].as_str().unwrap_or("");
        if f["required"].as_bool() == Some(true) && body.get(field).is_none() {
            problems.push(format!("{name}: required parameter {field} missing"));
        }
    }
    if let Some(obj) = body.as_object() {
        for (key, value) in obj {
            let Some(f) = fields.iter().find(|f| f["name"] == *key) else {
                problems.push(format!("{name}: {key} is not a parameter of this method"));
                continue;
            };
            let types: Vec<&str> = f["types"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let fits = types.iter().any(|t| match *t {
                "Integer" => value.is_i64() || value.is_u64(),
                "Float" => value.is_number(),
                "String" => value.is_string(),
                "Boolean" => value.is_boolean(),
                t if t.starts_with("Array of") => value.is_array(),
                _ => value.is_object(),
            });
            if !fits {
                problems.push(format!(
                    "{name}: {key} = {value} does not have type {types:?}"
                ));
            }
        }
    }
    if name == "sendMessage" {
        let text = body["text"].as_str().unwrap_or("");
        if body["parse_mode"] == "HTML" {
            problems.extend(
                telegram_html_problems(text)
                    .into_iter()
                    .map(|p| format!("sendMessage: {p}")),
            );
        } else if text.is_empty() || text.encode_utf16().count() > 4096 {
            problems.push("sendMessage: text outside 1..=4096".into());
        }
        if body["link_preview_options"]["is_disabled"] != true {
            problems.push("sendMessage: link previews must be off".into());
        }
    }
    problems
}

/// A text message from a user whose Telegram app is in Chinese.
pub fn text_update(update_id: i64, chat: i64, user: i64, text: &str) -> Value {
    text_update_from(update_id, chat, user, text, "zh-hans")
}

/// A text message from a user whose app language is `language_code`.
pub fn text_update_from(
    update_id: i64,
    chat: i64,
    user: i64,
    text: &str,
    language_code: &str,
) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 1_761_500_000,
            "chat": chat_json(chat),
            "from": {"id": user, "is_bot": false, "first_name": "User", "language_code": language_code},
            "text": text,
        }
    })
}

pub fn callback_update(update_id: i64, chat: i64, user: i64, data: &str) -> Value {
    json!({
        "update_id": update_id,
        "callback_query": {
            "id": format!("cb{update_id}"),
            "from": {"id": user, "is_bot": false, "first_name": "User"},
            "message": message_json(77, chat, "layers"),
            "chat_instance": "1",
            "data": data,
        }
    })
}

/// Problems with a Telegram HTML message: length over 4096 UTF-16 units, tags outside the
/// Bot API's list, unbalanced tags, attributes other than a/href, bare '<', '>' or '&'.
pub fn telegram_html_problems(message: &str) -> Vec<String> {
    const ALLOWED: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-spoiler",
    ];
    let mut problems = Vec::new();
    let units = message.encode_utf16().count();
    if units == 0 || units > 4096 {
        problems.push(format!("length {units} outside 1..=4096"));
    }
    let mut stack: Vec<String> = Vec::new();
    let mut rest = message;
    while let Some(pos) = rest.find(['<', '>', '&']) {
        let c = rest.as_bytes()[pos];
        let after = &rest[pos..];
        match c {
            b'<' => {
                let Some(end) = after.find('>') else {
                    problems.push("unterminated tag".into());
                    break;
                };
                let tag = &after[1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    match stack.pop() {
                        Some(open) if open == name => {}
                        other => {
                            problems.push(format!("closing </{name}> does not match {other:?}"))
                        }
                    }
                } else {
                    let name = tag.split_whitespace().next().unwrap_or("");
                    if !ALLOWED.contains(&name) {
                        problems.push(format!("tag <{name}> is not allowed"));
                    }
                    let attrs = tag[name.len()..].trim();
                    if name == "a" {
                        let href = attrs
                            .strip_prefix("href=\"")
                            .and_then(|h| h.strip_suffix('"'));
                        match href {
                            Some(h) if h.starts_with("http://") || h.starts_with("https://") => {
                                if h.contains('"') || h.contains('<') {
                                    problems.push(format!("unescaped href {h}"));
                                }
                            }
                            _ => problems.push(format!("bad <a> attributes: {attrs}")),
                        }
                    } else if !attrs.is_empty() {
                        problems.push(format!("<{name}> has attributes {attrs}"));
                    }
                    stack.push(name.to_string());
                }
                rest = &after[end + 1..];
            }
            b'&' => {
                let end = after.find(';').unwrap_or(0);
                let entity = &after[..end + 1];
                let ok = matches!(entity, "&lt;" | "&gt;" | "&amp;" | "&quot;")
                    || (entity.starts_with("&#") && entity.len() > 3 && end < 10);
                if !ok {
                    problems.push(format!(
                        "bad entity near {:?}",
                        &after[..after.len().min(12)]
                    ));
                }
                rest = &after[1..];
            }
            _ => {
                problems.push("bare '>' outside a tag".into());
                rest = &after[1..];
            }
        }
    }
    if !stack.is_empty() {
        problems.push(format!("unclosed tags {stack:?}"));
    }
    problems
}
