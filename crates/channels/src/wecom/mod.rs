//! WeCom (企业微信) group robots (`/cgi-bin/webhook/send?key=…`): `markdown` messages of at
//! most 4,096 bytes, cut at event boundaries. Never `@all`; feed text cannot mention
//! anyone (`<@…>` is neutralised).
//!
//! Documented (developer.work.weixin.qq.com, 群机器人配置说明): markdown content at most
//! 4096 bytes in UTF-8, at most 20 messages a minute per robot; errcode 45009 is the
//! frequency limit, 93000 an invalid webhook key (the robot was removed). WeCom robots have
//! no signing secret or keyword.

use std::time::Duration;

use serde_json::{Value, json};

use super::SendError;
use super::robot::{self, Platform, RobotSpec};
use kdigest_core::settings::ChannelLimits;
use kdigest_core::locale::Locale;
use kdigest_core::model::Digest;

pub struct WeCom;

pub type Spec = RobotSpec<WeCom>;

/// The documented limit of `markdown.content`, in UTF-8 bytes.
pub const CONTENT_MAX: usize = 4096;

impl Platform for WeCom {
    const NAME: &'static str = "wecom";
    const FORMS: &'static str = "wecom:<robot webhook URL>";
    const EXAMPLE: (&'static str, &'static str) = (
        "wecom:https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7xxx-4bc4",
        "693a91f6-7xxx-4bc4",
    );
    // 20 a minute per robot: 19 a minute keeps any 60-second window at or under 20. A
    // digest of several messages holds its slot for 3.16 s per message, so slots are many:
    // with 64, 500 robots with 4-message digests took 80 s (benches/robots.rs).
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 200.0,
        per_destination_per_sec: 19.0 / 60.0,
        concurrency: 512,
    };
    const SIGNED: bool = false;

    fn normalize(mut url: url::Url) -> Result<url::Url, String> {
        let key = url
            .query_pairs()
            .find(|(k, _)| k == "key")
            .map(|(_, v)| v.into_owned())
            .filter(|k| !k.is_empty());
        let host_ok = url.host_str() == Some("qyapi.weixin.qq.com") || url.scheme() == "http";
        match key {
            Some(k) if host_ok && url.path().trim_end_matches('/') == "/cgi-bin/webhook/send" => {
                url.set_path("/cgi-bin/webhook/send");
                url.query_pairs_mut().clear().append_pair("key", &k);
                url.set_fragment(None);
                Ok(url)
            }
            _ => Err("a WeCom robot URL looks like https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=<key>".into()),
        }
    }

    /// `markdown.content` (or a text message's content) within [`CONTENT_MAX`] bytes.
    fn limit_problems(payload: &Value) -> Vec<String> {
        robot::text_within(payload, "/markdown/content", CONTENT_MAX)
    }

    fn render(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Value> {
        let muted = |s: &str| format!("<font color=\"comment\">{s}</font>");
        let mut units = robot::markdown_units(d, t, "\n", muted, robot::plain_markdown);
        if let Some(site) = site
            && let Some(last) = units.last_mut()
        {
            last.push_str(&format!("\n[Web]({})", robot::link_url(site)));
        }
        let title = kdigest_core::render::dated_title(d);
        let content = |u: &[String], i: usize, total: usize| {
            format!(
                "**{}{}**\n{}",
                robot::plain_markdown(&title),
                robot::part_suffix(i, total),
                u.join("\n\n")
            )
        };
        // Measured as sent, with the longest part suffix.
        let messages = robot::pack(
            units,
            CONTENT_MAX,
            |u| content(u, 9998, 9999).len(),
            |u, over| robot::shorten_text(&u, over),
        );
        let total = messages.len();
        messages
            .iter()
            .enumerate()
            .map(|(i, u)| json!({"msgtype": "markdown", "markdown": {"content": content(u, i, total)}}))
            .collect()
    }

    fn note(text: &str) -> Value {
        json!({"msgtype": "text", "text": {"content": text}})
    }

    fn add_keyword(_payload: &mut Value, _keyword: &str) {}

    /// WeCom answers HTTP 200 with `{"errcode": 0, "errmsg": "ok"}` or a code.
    fn answer(status: u16, retry_after: Option<Duration>, body: &str) -> Result<(), SendError> {
        let Some((code, message)) = robot::code_and_message(body, "errcode", "errmsg") else {
            return if (200..300).contains(&status) {
                Err(SendError::Transient {
                    reason: format!("WeCom answered HTTP {status} without an errcode"),
                    retry_after: None,
                })
            } else {
                Err(robot::http_status("WeCom", status, retry_after))
            };
        };
        let reason = format!("WeCom answered errcode {code}: {message}");
        match code {
            0 => Ok(()),
            45009 => Err(SendError::Transient {
                reason,
                retry_after: Some(retry_after.unwrap_or(Duration::from_secs(60))),
            }),
            93000 => Err(SendError::Permanent {
                reason: format!("{reason}: the robot's key is invalid (the robot was removed?)"),
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
