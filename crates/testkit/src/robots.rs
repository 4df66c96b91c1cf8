//! A loopback stand-in for the four team-chat robot APIs, written from their published
//! documentation (the sources are named in each channel's module in crates/channels/src/):
//!
//! - Feishu `/open-apis/bot/v2/hook/<token>`: body at most 20 KB; interactive cards in card
//!   JSON 2.0; signed robots need `timestamp` (s, within an hour) and `sign` =
//!   base64(HMAC-SHA256(key "<ts>\n<secret>", "")) in the body (else code 19021); keyword
//!   robots need the keyword (else 19024); 5 a second and 100 a minute per robot (else
//!   11232); unknown token 19001.
//! - DingTalk `/robot/send?access_token=`: 20 a minute per robot (else 130101); signed robots
//!   need `timestamp` (ms, within an hour) and `sign` = base64(HMAC-SHA256(secret,
//!   "<ts>\n<secret>")) in the query (else 310000 "sign not match"); keywords (310000
//!   "keywords not in content"); unknown token 300001; never `isAtAll`.
//! - WeCom `/cgi-bin/webhook/send?key=`: markdown content at most 4096 bytes (else 40058);
//!   20 a minute per robot (else 45009); unknown key 93000; no `@all`.
//! - Slack `/services/T/B/X`: at most 50 blocks, 3,000 characters per section text, 150 per
//!   header, 10 context elements (else 400 invalid_blocks); a `text` fallback; one a second
//!   per webhook (else 429 with Retry-After); unknown webhook 404 no_service.
//!
//! Anything that breaks a rule is answered as the platform would and also recorded in
//! `problems`, so a test can require that kdigest never needed the refusal.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    Feishu,
    DingTalk,
    WeCom,
    Slack,
}

/// One robot the mock knows.
#[derive(Debug, Clone, Default)]
pub struct RobotConf {
    pub secret: Option<String>,
    pub keyword: Option<String>,
    /// Answers given instead of the normal one, first to last, one per request.
    pub script: VecDeque<Scripted>,
}

#[derive(Debug, Clone)]
pub enum Scripted {
    /// A JSON code answer with HTTP 200 (Feishu, DingTalk, WeCom).
    Code(i64, &'static str),
    /// An HTTP status with a text body and optional Retry-After (Slack, any).
    Http(u16, &'static str, Option<u64>),
}

#[derive(Debug, Clone)]
pub struct Received {
    pub platform: Platform,
    pub token: String,
    pub at: Instant,
    pub body: Value,
    /// Whether the mock accepted it.
    pub accepted: bool,
}

#[derive(Default)]
pub struct RobotMock {
    pub robots: Mutex<HashMap<(Platform, String), RobotConf>>,
    pub log: Mutex<Vec<Received>>,
    pub problems: Mutex<Vec<String>>,
}

impl RobotMock {
    pub fn add(&self, platform: Platform, token: &str, conf: RobotConf) {
        self.robots
            .lock()
            .unwrap()
            .insert((platform, token.to_string()), conf);
    }

    /// Bodies the mock accepted for one robot, in arrival order.
    pub fn accepted(&self, platform: Platform, token: &str) -> Vec<Received> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.platform == platform && r.token == token && r.accepted)
            .cloned()
            .collect()
    }

    pub fn requests(&self, platform: Platform, token: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.platform == platform && r.token == token)
            .count()
    }

    fn problem(&self, text: String) {
        self.problems.lock().unwrap().push(text);
    }

    /// How many requests this robot made inside the last `window` (this one included).
    fn recent(&self, platform: Platform, token: &str, window: Duration, now: Instant) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.platform == platform && r.token == token && now - r.at < window)
            .count()
            + 1
    }
}

pub async fn spawn() -> (String, Arc<RobotMock>) {
    let mock = Arc::new(RobotMock::default());
    let app = Router::new()
        .route("/open-apis/bot/v2/hook/{token}", post(feishu))
        .route("/robot/send", post(dingtalk))
        .route("/cgi-bin/webhook/send", post(wecom))
        .route("/services/{t}/{b}/{secret}", post(slack))
        .with_state(mock.clone());
    (crate::net::serve(app).await, mock)
}

fn hmac(key: &[u8], message: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(message);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

fn code(name: &str, c: i64, msg: &str) -> Response {
    let body = match name {
        "feishu" => json!({"code": c, "msg": msg, "data": {}}),
        _ => json!({"errcode": c, "errmsg": msg}),
    };
    axum::Json(body).into_response()
}

fn scripted(name: &str, s: Scripted) -> Response {
    match s {
        Scripted::Code(c, m) => code(name, c, m),
        Scripted::Http(status, body, retry) => {
            let mut r = (StatusCode::from_u16(status).unwrap(), body).into_response();
            if let Some(secs) = retry {
                r.headers_mut()
                    .insert("retry-after", secs.to_string().parse().unwrap());
            }
            r
        }
    }
}

/// Common start of every handler: the robot (None: unknown token), the scripted answer
/// to give instead of the normal one, the arrival time.
fn arrive(
    mock: &RobotMock,
    platform: Platform,
    token: &str,
) -> (Option<RobotConf>, Option<Scripted>, Instant) {
    let now = Instant::now();
    let mut robots = mock.robots.lock().unwrap();
    match robots.get_mut(&(platform, token.to_string())) {
        Some(c) => {
            let s = c.script.pop_front();
            (Some(c.clone()), s, now)
        }
        None => (None, None, now),
    }
}

fn log(mock: &RobotMock, platform: Platform, token: &str, at: Instant, body: Value, ok: bool) {
    mock.log.lock().unwrap().push(Received {
        platform,
        token: token.to_string(),
        at,
        body,
        accepted: ok,
    });
}

fn text_of(v: &Value) -> String {
    v.to_string()
}

async fn feishu(
    State(mock): State<Arc<RobotMock>>,
    Path(token): Path<String>,
    raw: String,
) -> Response {
    let p = Platform::Feishu;
    let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let (conf, script, now) = arrive(&mock, p, &token);
    let answer = (|| {
        let Some(conf) = conf else {
            return Err((
                19001,
                "param invalid: incoming webhook access token invalid",
            ));
        };
        if raw.len() > 20 * 1024 {
            mock.problem(format!(
                "feishu {token}: body of {} bytes > 20 KB",
                raw.len()
            ));
            return Err((9499, "Bad Request"));
        }
        if mock.recent(p, &token, Duration::from_secs(1), now) > 5
            || mock.recent(p, &token, Duration::from_secs(60), now) > 100
        {
            mock.problem(format!("feishu {token}: over 5/s or 100/min"));
            return Err((11232, "frequency limited psm"));
        }
        if let Some(secret) = &conf.secret {
            let ts = body["timestamp"].as_str().unwrap_or("");
            let fresh = ts
                .parse::<i64>()
                .map(|t| (chrono::Utc::now().timestamp() - t).abs() <= 3600)
                .unwrap_or(false);
            let expected = hmac(format!("{ts}\n{secret}").as_bytes(), b"");
            if !fresh || body["sign"].as_str() != Some(expected.as_str()) {
                return Err((
                    19021,
                    "sign match fail or timestamp is not within one hour from current time",
                ));
            }
        }
        if let Some(k) = &conf.keyword
            && !text_of(&body).contains(k.as_str())
        {
            return Err((19024, "Key Words Not Found"));
        }
        let text = text_of(&body);
        if text.contains("<at") {
            mock.problem(format!("feishu {token}: a mention in the message"));
        }
        match body["msg_type"].as_str() {
            Some("interactive") => {
                let card = &body["card"];
                if card["schema"] != "2.0"
                    || card["header"]["title"]["tag"] != "plain_text"
                    || !card["body"]["elements"].is_array()
                {
                    mock.problem(format!("feishu {token}: not a card JSON 2.0: {card}"));
                    return Err((9499, "Bad Request"));
                }
                for e in card["body"]["elements"].as_array().unwrap() {
                    let ok = match e["tag"].as_str() {
                        Some("markdown") => e["content"].is_string(),
                        Some("button") => {
                            e["behaviors"][0]["type"] == "open_url"
                                && e["behaviors"][0]["default_url"].is_string()
                        }
                        _ => false,
                    };
                    if !ok {
                        mock.problem(format!("feishu {token}: bad element {e}"));
                    }
                }
            }
            Some("text") => {}
            other => {
                mock.problem(format!("feishu {token}: msg_type {other:?}"));
                return Err((9499, "Bad Request"));
            }
        }
        Ok(())
    })();
    let ok = answer.is_ok() && script.is_none();
    log(&mock, p, &token, now, body, ok);
    match (script, answer) {
        (Some(s), _) => scripted("feishu", s),
        (None, Ok(())) => code("feishu", 0, "success"),
        (None, Err((c, m))) => code("feishu", c, m),
    }
}

async fn dingtalk(
    State(mock): State<Arc<RobotMock>>,
    Query(query): Query<HashMap<String, String>>,
    raw: String,
) -> Response {
    let p = Platform::DingTalk;
    let token = query.get("access_token").cloned().unwrap_or_default();
    let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let (conf, script, now) = arrive(&mock, p, &token);
    let answer = (|| {
        let Some(conf) = conf else {
            return Err((300001, "token is not exist"));
        };
        if raw.len() > 20_000 {
            mock.problem(format!("dingtalk {token}: body of {} bytes", raw.len()));
            return Err((460101, "message too long"));
        }
        if mock.recent(p, &token, Duration::from_secs(60), now) > 20 {
            mock.problem(format!("dingtalk {token}: over 20 a minute"));
            return Err((130101, "send too fast, exceed 20 times per minute"));
        }
        if let Some(secret) = &conf.secret {
            let ts = query.get("timestamp").cloned().unwrap_or_default();
            let fresh = ts
                .parse::<i64>()
                .map(|t| (chrono::Utc::now().timestamp_millis() - t).abs() <= 3_600_000)
                .unwrap_or(false);
            if !fresh {
                return Err((310000, "invalid timestamp"));
            }
            let expected = hmac(secret.as_bytes(), format!("{ts}\n{secret}").as_bytes());
            if query.get("sign") != Some(&expected) {
                return Err((310000, "sign not match"));
            }
        }
        if let Some(k) = &conf.keyword
            && !text_of(&body).contains(k.as_str())
        {
            return Err((310000, "keywords not in content"));
        }
        if body["at"]["isAtAll"] == true {
            mock.problem(format!("dingtalk {token}: isAtAll"));
        }
        match body["msgtype"].as_str() {
            Some("markdown")
                if body["markdown"]["title"].is_string()
                    && body["markdown"]["text"].is_string() => {}
            Some("text") if body["text"]["content"].is_string() => {}
            _ => {
                mock.problem(format!("dingtalk {token}: not a markdown or text message"));
                return Err((40035, "缺少参数 json"));
            }
        }
        Ok(())
    })();
    let ok = answer.is_ok() && script.is_none();
    log(&mock, p, &token, now, body, ok);
    match (script, answer) {
        (Some(s), _) => scripted("dingtalk", s),
        (None, Ok(())) => code("dingtalk", 0, "ok"),
        (None, Err((c, m))) => code("dingtalk", c, m),
    }
}

async fn wecom(
    State(mock): State<Arc<RobotMock>>,
    Query(query): Query<HashMap<String, String>>,
    raw: String,
) -> Response {
    let p = Platform::WeCom;
    let token = query.get("key").cloned().unwrap_or_default();
    let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let (conf, script, now) = arrive(&mock, p, &token);
    let answer = (|| {
        if conf.is_none() {
            return Err((93000, "invalid webhook url"));
        }
        if mock.recent(p, &token, Duration::from_secs(60), now) > 20 {
            mock.problem(format!("wecom {token}: over 20 a minute"));
            return Err((45009, "api freq out of limit"));
        }
        let content = match body["msgtype"].as_str() {
            Some("markdown") => body["markdown"]["content"].as_str(),
            Some("text") => body["text"]["content"].as_str(),
            _ => None,
        };
        let Some(content) = content else {
            mock.problem(format!("wecom {token}: no markdown or text content"));
            return Err((40008, "invalid message type"));
        };
        if content.len() > 4096 {
            mock.problem(format!(
                "wecom {token}: content of {} bytes > 4096",
                content.len()
            ));
            return Err((40058, "markdown.content exceed max length 4096"));
        }
        if content.contains("<@") || text_of(&body["text"]["mentioned_list"]).contains("@all") {
            mock.problem(format!("wecom {token}: a mention"));
        }
        Ok(())
    })();
    let ok = answer.is_ok() && script.is_none();
    log(&mock, p, &token, now, body, ok);
    match (script, answer) {
        (Some(s), _) => scripted("wecom", s),
        (None, Ok(())) => code("wecom", 0, "ok"),
        (None, Err((c, m))) => code("wecom", c, m),
    }
}

async fn slack(
    State(mock): State<Arc<RobotMock>>,
    Path((t, b, secret)): Path<(String, String, String)>,
    _headers: HeaderMap,
    raw: String,
) -> Response {
    let p = Platform::Slack;
    let token = format!("{t}/{b}/{secret}");
    let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let (conf, script, now) = arrive(&mock, p, &token);
    let answer: Result<(), (u16, &str, Option<u64>)> = (|| {
        if conf.is_none() {
            return Err((404, "no_service", None));
        }
        // One a second; 50 ms of slack for the clocks of two processes.
        if mock.recent(p, &token, Duration::from_millis(950), now) > 1 {
            mock.problem(format!("slack {token}: more than one a second"));
            return Err((429, "rate_limited", Some(1)));
        }
        if !body["text"].is_string() {
            mock.problem(format!("slack {token}: no text fallback"));
            return Err((400, "no_text", None));
        }
        if text_of(&body).contains("<!channel>")
            || text_of(&body).contains("<!here>")
            || text_of(&body).contains("<!everyone>")
        {
            mock.problem(format!("slack {token}: a broadcast mention"));
        }
        if let Some(blocks) = body["blocks"].as_array() {
            let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
            let mut bad = blocks.len() > 50;
            for block in blocks {
                bad |= match block["type"].as_str() {
                    Some("header") => chars(&block["text"]["text"]) > 150,
                    Some("section") => chars(&block["text"]["text"]) > 3000,
                    Some("context") => {
                        let e = block["elements"].as_array().map_or(11, Vec::len);
                        e > 10
                    }
                    Some("divider") => false,
                    _ => true,
                };
            }
            if bad {
                mock.problem(format!("slack {token}: invalid blocks"));
                return Err((400, "invalid_blocks", None));
            }
        }
        Ok(())
    })();
    let ok = answer.is_ok() && script.is_none();
    log(&mock, p, &token, now, body, ok);
    match (script, answer) {
        (Some(s), _) => scripted("slack", s),
        (None, Ok(())) => (StatusCode::OK, "ok").into_response(),
        (None, Err((status, text, retry))) => {
            scripted("slack", Scripted::Http(status, text, retry))
        }
    }
}
