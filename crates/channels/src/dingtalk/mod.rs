//! DingTalk group robots (`/robot/send?access_token=…`): `markdown` messages, the dated
//! headline as the title (what the notification shows), cut at event boundaries. Never
//! `isAtAll`; feed text cannot mention anyone.
//!
//! Documented (open.dingtalk.com, custom robot): at most 20 messages a minute per robot,
//! beyond which the robot is throttled for 10 minutes (errcode 130101 / 410100, "send too
//! fast"); a signed robot wants `timestamp` (milliseconds) and `sign` in the query:
//! url-encoded base64(HMAC-SHA256(secret, "<timestamp>\n<secret>")); security refusals
//! answer errcode 310000 with the reason in errmsg; an unknown token 300001.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::SendError;
use super::robot::{self, Platform, RobotSpec};
use kdigest_core::settings::{ChannelLimits, Secret};
use kdigest_core::locale::Locale;
use kdigest_core::model::Digest;

pub struct DingTalk;

pub type Spec = RobotSpec<DingTalk>;

/// What one message's markdown text may take, in bytes. DingTalk's pages give no number
/// for markdown; 20,000 bytes is the figure integrations work with, and this stays under
/// it with room for a keyword.
pub const TEXT_MAX: usize = 18_000;

impl Platform for DingTalk {
    const NAME: &'static str = "dingtalk";
    const FORMS: &'static str = "dingtalk:<robot webhook URL>";
    const EXAMPLE: (&'static str, &'static str) = (
        "dingtalk:https://oapi.dingtalk.com/robot/send?access_token=9f3ac0ffee51d1e",
        "9f3ac0ffee51d1e",
    );
    // 20 a minute per robot: 19 a minute keeps any 60-second window at or under 20. A
    // digest of several messages holds its slot for 3.16 s per message, so slots are many:
    // with 64, 500 robots with 4-message digests took 80 s (benches/robots.rs).
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 200.0,
        per_destination_per_sec: 19.0 / 60.0,
        concurrency: 512,
    };
    const SIGNED: bool = true;

    fn normalize(mut url: url::Url) -> Result<url::Url, String> {
        let token = url
            .query_pairs()
            .find(|(k, _)| k == "access_token")
            .map(|(_, v)| v.into_owned())
            .filter(|t| !t.is_empty());
        let host_ok = url.host_str() == Some("oapi.dingtalk.com") || url.scheme() == "http";
        match token {
            Some(t) if host_ok && url.path().trim_end_matches('/') == "/robot/send" => {
                url.set_path("/robot/send");
                url.query_pairs_mut().clear().append_pair("access_token", &t);
                url.set_fragment(None);
                Ok(url)
            }
            _ => Err("a DingTalk robot URL looks like https://oapi.dingtalk.com/robot/send?access_token=<token>".into()),
        }
    }

    /// The markdown text within the 20,000 bytes integrations work with.
    fn limit_problems(payload: &Value) -> Vec<String> {
        robot::text_within(payload, "/markdown/text", 20_000)
    }

    fn render(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Value> {
        let mut units = robot::markdown_units(d, t, "\n\n", |s| s.to_string(), robot::plain_markdown);
        if let Some(site) = site
            && let Some(last) = units.last_mut()
        {
            last.push_str(&format!("\n\n[Web]({})", robot::link_url(site)));
        }
        let title = kdigest_core::render::dated_title(d);
        let messages = robot::pack(
            units,
            TEXT_MAX,
            |u| u.iter().map(|s| s.len() + 2).sum::<usize>() + title.len() + 16,
            |u, over| robot::shorten_text(&u, over),
        );
        let total = messages.len();
        messages
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let heading = format!("{title}{}", robot::part_suffix(i, total));
                json!({
                    "msgtype": "markdown",
                    "markdown": {
                        "title": heading,
                        "text": format!("### {}\n\n{}", robot::plain_markdown(&heading), u.join("\n\n")),
                    },
                    "at": {"isAtAll": false, "atMobiles": [], "atUserIds": []},
                })
            })
            .collect()
    }

    fn note(text: &str) -> Value {
        json!({"msgtype": "text", "text": {"content": text}, "at": {"isAtAll": false}})
    }

    fn add_keyword(payload: &mut Value, keyword: &str) {
        for pointer in ["/markdown/text", "/text/content"] {
            if let Some(Value::String(text)) = payload.pointer_mut(pointer) {
                text.push_str(&format!("\n\n{}", robot::plain_markdown(keyword)));
            }
        }
    }

    fn sign(url: &mut url::Url, _payload: &mut Value, secret: &Secret, now_ms: i64) {
        let timestamp = now_ms.to_string();
        url.query_pairs_mut()
            .append_pair("timestamp", &timestamp)
            .append_pair("sign", &signature(secret, &timestamp));
    }

    /// DingTalk answers HTTP 200 with `{"errcode": 0, "errmsg": "ok"}` or a code.
    fn answer(status: u16, retry_after: Option<Duration>, body: &str) -> Result<(), SendError> {
        let Some((code, message)) = robot::code_and_message(body, "errcode", "errmsg") else {
            return if (200..300).contains(&status) {
                Err(SendError::Transient {
                    reason: format!("DingTalk answered HTTP {status} without an errcode"),
                    retry_after: None,
                })
            } else {
                Err(robot::http_status("DingTalk", status, retry_after))
            };
        };
        let reason = format!("DingTalk answered errcode {code}: {message}");
        match code {
            0 => Ok(()),
            // Throttled for 10 minutes.
            130101 | 410100 => Err(SendError::Transient {
                reason,
                retry_after: Some(retry_after.unwrap_or(Duration::from_secs(600))),
            }),
            300001 => Err(SendError::Permanent {
                reason: format!("{reason}: the robot's access token does not exist (the robot was removed?)"),
            }),
            // The group was dismissed, or its owner stopped the robot: nobody reads it any
            // more, and retrying would only be refused again.
            400013 => Err(SendError::Permanent {
                reason: format!("{reason}: the robot's group was dismissed"),
            }),
            400102 => Err(SendError::Permanent {
                reason: format!("{reason}: the robot was stopped by the group's owner"),
            }),
            310000 if message.contains("keywords") => Err(SendError::Permanent {
                reason: format!("{reason}: the robot requires a keyword; add the subscriber again with --keyword"),
            }),
            // Signature, timestamp or IP allow-list: see feishu::answer.
            310000 => Err(SendError::Failed {
                reason: format!("{reason}: check the robot's signing secret (--secret-env), this machine's clock and the robot's IP allow-list"),
            }),
            // -1: the system is busy.
            -1 => Err(SendError::Transient {
                reason,
                retry_after,
            }),
            _ => Err(robot::unknown_code(status, retry_after, reason)),
        }
    }
}

/// base64(HMAC-SHA256(key = secret, message = "<timestamp>\n<secret>")); the query
/// encoding of `url` does the url-encoding.
pub fn signature(secret: &Secret, timestamp: &str) -> String {
    let mac = secret.hmac_sha256(&[format!("{timestamp}\n{}", secret.expose()).as_bytes()]);
    base64::engine::general_purpose::STANDARD.encode(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_query_matches_the_documented_algorithm() {
        // Independently: python3 hmac + base64 + urllib.parse.quote_plus.
        let mut url = url::Url::parse("https://oapi.dingtalk.com/robot/send?access_token=x").unwrap();
        DingTalk::sign(&mut url, &mut json!({}), &Secret::new("SECtest"), 1577262236757);
        assert!(
            url.as_str()
                .ends_with("&timestamp=1577262236757&sign=Za%2Fne6w2koB8B4ROVlgTNd%2FX%2B%2FFbyDpZrXLz57xNZSA%3D"),
            "{url}"
        );
    }

    #[test]
    fn a_dismissed_group_or_a_stopped_robot_disables_the_subscriber() {
        for (code, why) in [(400013, "dismissed"), (400102, "stopped")] {
            let body = format!(r#"{{"errcode": {code}, "errmsg": "x"}}"#);
            match DingTalk::answer(200, None, &body) {
                Err(SendError::Permanent { reason }) => assert!(reason.contains(why), "{reason}"),
                other => panic!("{code}: {other:?}"),
            }
        }
    }

    #[test]
    fn one_robot_is_one_url() {
        let a = DingTalk::normalize(url::Url::parse("https://oapi.dingtalk.com/robot/send/?x=1&access_token=T#f").unwrap()).unwrap();
        assert_eq!(a.as_str(), "https://oapi.dingtalk.com/robot/send?access_token=T");
        assert!(DingTalk::normalize(url::Url::parse("https://oapi.dingtalk.com/robot/send").unwrap()).is_err());
    }
}
