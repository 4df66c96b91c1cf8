//! Feishu / Lark group robots (`/open-apis/bot/v2/hook/<token>`): each message is an
//! interactive card (card JSON 2.0) with the dated headline in the header, one markdown
//! element per event (its title as a link, score, layers, summary, why it matters) and a
//! button to its source, and a button to the web version on the last card.
//!
//! Documented limits (open.feishu.cn, "自定义机器人使用指南"): a request body of at most
//! 20 KB, 100 requests a minute and 5 a second per robot; error 11232 means the frequency
//! limit was hit. A signed robot wants `timestamp` (seconds) and `sign` in the body:
//! base64(HMAC-SHA256 with key "<timestamp>\n<secret>" over an empty message).

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::SendError;
use super::robot::{self, Piece, Platform, RobotSpec};
use kdigest_core::settings::{ChannelLimits, Secret};
use kdigest_core::locale::Locale;
use kdigest_core::model::Digest;

pub struct Feishu;

pub type Spec = RobotSpec<Feishu>;

/// The documented request-body limit.
pub const BODY_MAX: usize = 20 * 1024;
/// What a rendered card may take: room is left for the signature, the timestamp and a
/// keyword, added at sending.
const CARD_BUDGET: usize = BODY_MAX - 512;

const HOSTS: &[&str] = &["open.feishu.cn", "open.larksuite.com"];
const PATH: &str = "/open-apis/bot/v2/hook/";

impl Platform for Feishu {
    const NAME: &'static str = "feishu";
    const FORMS: &'static str = "feishu:<robot webhook URL>";
    const EXAMPLE: (&'static str, &'static str) = (
        "feishu:https://open.feishu.cn/open-apis/bot/v2/hook/2b7f3c1e-robot-token",
        "2b7f3c1e-robot-token",
    );
    // 5 a second and 100 a minute per robot: one a second keeps under both. No limit across
    // robots is documented; 200 a second is ours. Slots are many because a digest of
    // several cards holds one while its robot's spacing passes (benches/robots.rs).
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 200.0,
        per_destination_per_sec: 1.0,
        concurrency: 256,
    };
    const SIGNED: bool = true;

    fn normalize(mut url: url::Url) -> Result<url::Url, String> {
        let host_ok = HOSTS.contains(&url.host_str().unwrap_or("")) || url.scheme() == "http";
        let token = url.path().strip_prefix(PATH).map(|t| t.trim_end_matches('/'));
        match token {
            Some(t) if host_ok && !t.is_empty() && !t.contains('/') => {
                let path = format!("{PATH}{t}");
                url.set_path(&path);
                url.set_query(None);
                url.set_fragment(None);
                Ok(url)
            }
            _ => Err("a Feishu robot URL looks like https://open.feishu.cn/open-apis/bot/v2/hook/<token> (Lark: open.larksuite.com)".into()),
        }
    }

    /// The request body, at most [`BODY_MAX`] bytes (the keyword and signature are added
    /// within the budget the render leaves).
    fn limit_problems(payload: &Value) -> Vec<String> {
        let bytes = payload.to_string().len();
        (bytes > BODY_MAX)
            .then(|| format!("body of {bytes} bytes, above {BODY_MAX}"))
            .into_iter()
            .collect()
    }

    fn render(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Value> {
        let units = units(d, t);
        let title = kdigest_core::render::dated_title(d);
        let cards = robot::pack(
            units,
            CARD_BUDGET,
            |u| card(&title, u, site, 0, 1).to_string().len(),
            |mut u, over| {
                u.markdown = robot::shorten_text(&u.markdown, over);
                u
            },
        );
        let total = cards.len();
        cards
            .iter()
            .enumerate()
            .map(|(i, u)| card(&title, u, site.filter(|_| i + 1 == total), i, total))
            .collect()
    }

    fn note(text: &str) -> Value {
        json!({"msg_type": "text", "content": {"text": text}})
    }

    /// At the end of the card's body (or the text), where it reads as a signature line.
    fn add_keyword(payload: &mut Value, keyword: &str) {
        if let Some(elements) = payload
            .pointer_mut("/card/body/elements")
            .and_then(Value::as_array_mut)
        {
            elements.push(json!({"tag": "markdown", "content": escape(keyword), "text_size": "notation"}));
        } else if let Some(Value::String(text)) = payload.pointer_mut("/content/text") {
            // Keywords are checked to need no escaping (robot::RobotSpec::with_options).
            text.push_str(&format!("\n{keyword}"));
        }
    }

    fn sign(_url: &mut url::Url, payload: &mut Value, secret: &Secret, now_ms: i64) {
        let timestamp = (now_ms / 1000).to_string();
        payload["timestamp"] = Value::String(timestamp.clone());
        payload["sign"] = Value::String(signature(secret, &timestamp));
    }

    /// Feishu answers HTTP 200 with `{"code": 0, "msg": "success"}`, or a code that says
    /// what went wrong (the older `StatusCode` field is read too).
    fn answer(status: u16, retry_after: Option<Duration>, body: &str) -> Result<(), SendError> {
        let parsed = robot::code_and_message(body, "code", "msg")
            .or_else(|| robot::code_and_message(body, "StatusCode", "StatusMessage"));
        let Some((code, message)) = parsed else {
            return Err(if (200..300).contains(&status) {
                SendError::Transient {
                    reason: format!("Feishu answered HTTP {status} without a code"),
                    retry_after: None,
                }
            } else {
                robot::http_status("Feishu", status, retry_after)
            });
        };
        let reason = format!("Feishu answered code {code}: {message}");
        match code {
            0 => Ok(()),
            // The frequency limit: this robot waits a minute (its window).
            11232 => Err(SendError::Transient {
                reason,
                retry_after: Some(retry_after.unwrap_or(Duration::from_secs(60))),
            }),
            // The robot was removed or the URL's token is wrong.
            19001 => Err(SendError::Permanent {
                reason: format!("{reason}: the robot's webhook URL is no longer valid (the robot was removed?)"),
            }),
            // The robot requires a keyword this message lacks: only the subscriber can say
            // which, so the robot is turned off with the fix.
            19024 => Err(SendError::Permanent {
                reason: format!("{reason}: the robot requires a keyword; add the subscriber again with --keyword"),
            }),
            // A signature or timestamp refusal, or an IP allow-list: the robot's own settings
            // (a secret or allow-list its owner changed) or our clock. Neither is worth a
            // retry; the delivery fails with the fix and the subscriber stays, and one robot
            // cannot pause the channel for the others.
            19021 => Err(SendError::Failed {
                reason: format!("{reason}: check the robot's signing secret (--secret-env) and this machine's clock"),
            }),
            19022 => Err(SendError::Failed {
                reason: format!("{reason}: the robot's IP allow-list does not include this machine"),
            }),
            _ => Err(robot::unknown_code(status, retry_after, reason)),
        }
    }
}

/// `sign` for a timestamp: base64(HMAC-SHA256(key = "<timestamp>\n<secret>", message = "")).
pub fn signature(secret: &Secret, timestamp: &str) -> String {
    let key = Secret::new(format!("{timestamp}\n{}", secret.expose()));
    base64::engine::general_purpose::STANDARD.encode(key.hmac_sha256(&[]))
}

/// One markdown element and, for an event, a button to its first source.
pub struct Unit {
    markdown: String,
    button: Option<(String, String)>,
}

fn units(d: &Digest, t: &Locale) -> Vec<Unit> {
    let (watch, notes) = robot::closing_lines(d, t);
    robot::pieces(d, t)
        .into_iter()
        .map(|piece| match piece {
            Piece::Header => Unit {
                markdown: format!("**{}**\n{}", escape(t.get("overview")), escape(&d.overview)),
                button: None,
            },
            Piece::Event { section, n, event: e } => {
                let mut md = String::new();
                if let Some(s) = section {
                    md.push_str(&format!("**{}**\n", escape(s)));
                }
                let title = kdigest_core::render::event_title(e);
                let title = match e.sources.first() {
                    Some(s) => format!("[{}]({})", escape(&title), robot::link_url(&s.url)),
                    None => escape(&title),
                };
                md.push_str(&format!(
                    "**{n}. {title}**\n{}**{}/100** · {}{}\n{}\n{}{}",
                    kdigest_core::render::label_then(&escape(t.get("score")), t),
                    e.score,
                    kdigest_core::render::label_then(&escape(t.get("layers")), t),
                    escape(&t.layer_list(&e.layers)),
                    escape(&e.summary),
                    kdigest_core::render::label_then(&kdigest_core::render::emphasised_label(&escape(t.get("why")), "*", "*"), t),
                    escape(&e.why_it_matters),
                ));
                if let Some(f) = &e.follow_up {
                    md.push_str(&format!(
                        "\n↪ {}",
                        escape(&kdigest_core::render::follow_up_line(f, t))
                    ));
                }
                Unit {
                    markdown: md,
                    button: e
                        .sources
                        .first()
                        .zip(kdigest_core::render::source_labels(&e.sources, t).into_iter().next())
                        .map(|(s, label)| (label, s.url.clone())),
                }
            }
            Piece::Closing => {
                let mut md = String::new();
                if !watch.is_empty() {
                    md.push_str(&format!("**{}**\n", escape(t.get("watchlist"))));
                    for w in &watch {
                        md.push_str(&format!("- {}\n", escape(w)));
                    }
                }
                md.push_str(&format!("**{}**\n", escape(t.get("notes"))));
                for line in &notes {
                    md.push_str(&format!("- {}\n", escape(line)));
                }
                Unit {
                    markdown: md.trim_end().to_string(),
                    button: None,
                }
            }
        })
        .collect()
}

fn card(title: &str, units: &[Unit], site: Option<&str>, i: usize, total: usize) -> Value {
    let mut elements = Vec::new();
    for u in units {
        elements.push(json!({"tag": "markdown", "content": u.markdown}));
        if let Some((label, url)) = &u.button {
            elements.push(button(label, url, "default"));
        }
    }
    if let Some(site) = site {
        elements.push(button("Web", site, "primary"));
    }
    json!({
        "msg_type": "interactive",
        "card": {
            "schema": "2.0",
            "header": {
                "title": {"tag": "plain_text", "content": format!("{title}{}", robot::part_suffix(i, total))},
                "template": "blue",
            },
            "body": {"elements": elements},
        },
    })
}

fn button(label: &str, url: &str, kind: &str) -> Value {
    json!({
        "tag": "button",
        "text": {"tag": "plain_text", "content": label},
        "type": kind,
        "size": "small",
        "behaviors": [{"type": "open_url", "default_url": url}],
    })
}

/// Feed text inside card markdown: the characters that would start markup (mentions such
/// as `<at id=all>`, links, emphasis) become HTML entities, which Feishu shows as written.
pub fn escape(text: &str) -> String {
    // One line: feed or LLM text cannot start a heading or a list of its own.
    let text = kdigest_core::text::collapse_whitespace(text);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' | '>' | '[' | ']' | '*' | '_' | '~' | '`' | '\\' | '&' => {
                out.push_str(&format!("&#{};", c as u32))
            }
            _ => out.push(c),
        }
    }
    robot::line_safe(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_the_documented_algorithm() {
        // Independently: python3 -c 'import hmac,hashlib,base64;
        // print(base64.b64encode(hmac.new(b"1599360473\nsecret", b"", hashlib.sha256).digest()).decode())'
        assert_eq!(
            signature(&Secret::new("secret"), "1599360473"),
            "q4jswNiMy51J5JuQV566yJat0/lQ/c+22kINzUgKsGU="
        );
    }

    #[test]
    fn feed_text_cannot_mention_or_link() {
        let e = escape("<at id=all></at> [x](http://evil) **b**");
        assert!(!e.contains('<') && !e.contains('[') && !e.contains('*'), "{e}");
    }

    #[test]
    fn feed_text_is_never_emphasis_or_code() {
        // A title like batch_size_sweep must not come out in italics.
        let e = escape("batch_size_sweep _italic_ *bold* ~strike~ `code`");
        assert!(
            !e.contains(['_', '*', '~', '`']),
            "every markup character is an entity: {e}"
        );
        assert!(e.starts_with("batch&#95;size&#95;sweep"), "{e}");
    }
}
