//! Slack incoming webhooks (`https://hooks.slack.com/services/…`): Block Kit messages (a
//! header, the overview, then per event a section with the title as a link, summary and
//! why it matters, a context line with layers, score and sources, and a divider), with a
//! plain `text` fallback for notifications.
//!
//! Documented (api.slack.com): at most 50 blocks a message, 3,000 characters per section
//! text, 150 per header; about one message a second per webhook (429 with Retry-After
//! beyond); mrkdwn escapes `&`, `<` and `>` and nothing else (emphasis, strike and code
//! markers in feed text become their full-width forms); errors come as an HTTP status
//! with a short text body (`invalid_blocks`, `no_service`, `channel_is_archived`, ...).

use std::time::Duration;

use serde_json::{Value, json};

use super::SendError;
use super::robot::{self, Piece, Platform, RobotSpec};
use kdigest_core::settings::ChannelLimits;
use kdigest_core::locale::Locale;
use kdigest_core::model::Digest;
use kdigest_core::text::truncate_chars;

pub struct Slack;

pub type Spec = RobotSpec<Slack>;

pub const BLOCKS_MAX: usize = 50;
pub const SECTION_TEXT_MAX: usize = 3000;
pub const HEADER_TEXT_MAX: usize = 150;
pub const CONTEXT_ELEMENTS_MAX: usize = 10;

impl Platform for Slack {
    const NAME: &'static str = "slack";
    const FORMS: &'static str = "slack:<incoming webhook URL>";
    const EXAMPLE: (&'static str, &'static str) = (
        "slack:https://hooks.slack.com/services/T0001/B0002/XXsecretXXtokenXX",
        "XXsecretXXtokenXX",
    );
    // About one a second per webhook; nothing documented across webhooks.
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 200.0,
        per_destination_per_sec: 1.0,
        concurrency: 256,
    };
    const SIGNED: bool = false;

    fn normalize(mut url: url::Url) -> Result<url::Url, String> {
        let segments: Vec<String> = url
            .path_segments()
            .map(|s| s.filter(|p| !p.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        let host_ok = url.host_str() == Some("hooks.slack.com") || url.scheme() == "http";
        if host_ok && segments.len() == 4 && segments[0] == "services" {
            url.set_path(&format!("/{}", segments.join("/")));
            url.set_query(None);
            url.set_fragment(None);
            Ok(url)
        } else {
            Err("a Slack incoming webhook URL looks like https://hooks.slack.com/services/T…/B…/<secret>".into())
        }
    }

    /// Block Kit's limits: at most [`BLOCKS_MAX`] blocks, section texts within
    /// [`SECTION_TEXT_MAX`] (fields too, at most ten of them), a header within
    /// [`HEADER_TEXT_MAX`], a context within [`CONTEXT_ELEMENTS_MAX`] elements.
    fn limit_problems(payload: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(blocks) = payload["blocks"].as_array() else {
            return match payload["text"].as_str() {
                Some(_) => problems,
                None => vec!["neither blocks nor text".into()],
            };
        };
        if blocks.len() > BLOCKS_MAX {
            problems.push(format!("{} blocks, above {BLOCKS_MAX}", blocks.len()));
        }
        let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
        for (i, b) in blocks.iter().enumerate() {
            let too_long = |text: &Value, max: usize| (chars(text) > max).then(|| format!("block {i}: text of {} characters, above {max}", chars(text)));
            match b["type"].as_str() {
                Some("header") => problems.extend(too_long(&b["text"]["text"], HEADER_TEXT_MAX)),
                Some("section") => {
                    problems.extend(too_long(&b["text"]["text"], SECTION_TEXT_MAX));
                    let fields = b["fields"].as_array().map_or(&[][..], Vec::as_slice);
                    if fields.len() > 10 {
                        problems.push(format!("block {i}: {} fields, above 10", fields.len()));
                    }
                    problems.extend(fields.iter().filter_map(|f| too_long(&f["text"], 2000)));
                }
                Some("context") => {
                    let n = b["elements"].as_array().map_or(0, Vec::len);
                    if n > CONTEXT_ELEMENTS_MAX {
                        problems.push(format!("block {i}: {n} context elements, above {CONTEXT_ELEMENTS_MAX}"));
                    }
                }
                _ => {}
            }
        }
        problems
    }

    fn render(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Value> {
        let title = kdigest_core::render::dated_title(d);
        // Units are groups of blocks; a message's header takes one more.
        let groups = robot::pack(
            units(d, t, site),
            BLOCKS_MAX - 1,
            |u: &[Vec<Value>]| u.iter().map(Vec::len).sum(),
            |u, _| u,
        );
        let total = groups.len();
        groups
            .into_iter()
            .enumerate()
            .map(|(i, group)| {
                let suffix = robot::part_suffix(i, total);
                // The title is cut, never the part number.
                let heading = format!(
                    "{}{suffix}",
                    truncate_chars(&title, HEADER_TEXT_MAX - suffix.chars().count())
                );
                let mut blocks = vec![json!({
                    "type": "header",
                    "text": {"type": "plain_text", "text": heading, "emoji": false},
                })];
                blocks.extend(group.into_iter().flatten());
                json!({
                    "text": truncate_chars(&escape(&format!("{heading}: {}", d.overview)), SECTION_TEXT_MAX),
                    "blocks": blocks,
                    "unfurl_links": false,
                    "unfurl_media": false,
                })
            })
            .collect()
    }

    fn note(text: &str) -> Value {
        json!({"text": escape(text)})
    }

    fn add_keyword(_payload: &mut Value, _keyword: &str) {}

    /// `ok` with HTTP 200; otherwise the status and a code in the body.
    fn answer(status: u16, retry_after: Option<Duration>, body: &str) -> Result<(), SendError> {
        if (200..300).contains(&status) {
            return Ok(());
        }
        let code = body.trim();
        let reason = format!("Slack answered HTTP {status}: {code}");
        Err(match (status, code) {
            (408 | 425 | 429, _) | (500..=599, _) => SendError::Transient {
                reason,
                retry_after,
            },
            (401, "") => SendError::Refused {
                reason: format!("{reason}: the webhook refuses our request"),
            },
            (_, "no_service" | "no_team" | "channel_not_found" | "user_not_found") | (404, _) => {
                SendError::Permanent {
                    reason: format!("{reason}: the webhook was removed or its channel is gone"),
                }
            }
            (_, "channel_is_archived") | (410, _) => SendError::Permanent {
                reason: format!("{reason}: the channel is archived"),
            },
            (_, "action_prohibited" | "team_disabled" | "invalid_token" | "posting_to_general_channel_denied") => {
                SendError::Permanent {
                    reason: format!("{reason}: the workspace does not let this webhook post"),
                }
            }
            // invalid_blocks, invalid_payload, no_text, too_many_attachments: this message.
            _ => SendError::Failed { reason },
        })
    }
}

fn units(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Vec<Value>> {
    let section = |text: String| {
        json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate_chars(&text, SECTION_TEXT_MAX)}})
    };
    let (watch, notes) = robot::closing_lines(d, t);
    robot::pieces(d, t)
        .into_iter()
        .map(|piece| match piece {
            Piece::Header => vec![section(format!("*{}*\n{}", escape(t.get("overview")), escape(&d.overview)))],
            Piece::Event { section: heading, n, event: e } => {
                let mut blocks = Vec::new();
                let title = kdigest_core::render::event_title(e);
                let title = match e.sources.first() {
                    Some(s) => format!("<{}|{n}. {}>", link_url(&s.url), label(&title)),
                    None => format!("{n}. {}", escape(&title)),
                };
                let prefix = heading.map(|h| format!("_{}_\n", escape(h))).unwrap_or_default();
                let follow_up = e.follow_up.as_ref().map_or_else(String::new, |f| {
                    format!("\n↪ {}", escape(&kdigest_core::render::follow_up_line(f, t)))
                });
                blocks.push(section(format!(
                    "{prefix}*{title}*\n{}\n{}{}{follow_up}",
                    escape(&e.summary),
                    kdigest_core::render::label_then(&kdigest_core::render::emphasised_label(&escape(t.get("why")), "_", "_"), t),
                    escape(&e.why_it_matters)
                )));
                let mut context = vec![
                    format!(
                        "{}{}",
                        kdigest_core::render::label_then(&escape(t.get("layers")), t),
                        escape(&t.layer_list(&e.layers))
                    ),
                    // A space before the bold figure even after a full-width colon: Slack
                    // reads `*` as bold only at a word boundary it does not define for CJK.
                    format!("{} *{}/100*", escape(t.get("score")), e.score),
                ];
                context.extend(
                    e.sources
                        .iter()
                        .zip(kdigest_core::render::source_labels(&e.sources, t))
                        .map(|(s, text)| format!("<{}|{}>", link_url(&s.url), label(&text))),
                );
                context.truncate(CONTEXT_ELEMENTS_MAX);
                blocks.push(json!({
                    "type": "context",
                    "elements": context
                        .into_iter()
                        .map(|text| json!({"type": "mrkdwn", "text": truncate_chars(&text, SECTION_TEXT_MAX)}))
                        .collect::<Vec<_>>(),
                }));
                blocks.push(json!({"type": "divider"}));
                blocks
            }
            Piece::Closing => {
                let mut text = String::new();
                if !watch.is_empty() {
                    text.push_str(&format!("*{}*\n", escape(t.get("watchlist"))));
                    for w in &watch {
                        text.push_str(&format!("• {}\n", escape(w)));
                    }
                }
                text.push_str(&format!("*{}*\n", escape(t.get("notes"))));
                for line in &notes {
                    text.push_str(&format!("• {}\n", escape(line)));
                }
                let mut blocks = vec![section(text.trim_end().to_string())];
                if let Some(site) = site {
                    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!("<{}|Web>", link_url(site))}]}));
                }
                blocks
            }
        })
        .collect()
}

/// Slack's mrkdwn escaping: `&`, `<` and `>`, which also keeps feed text from forming
/// `<!channel>` or `<@U…>` mentions.
pub fn escape(text: &str) -> String {
    // mrkdwn has no escape for emphasis, strike or code: their markers become full-width.
    kdigest_core::text::collapse_whitespace(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .chars()
        .map(robot::full_width_emphasis)
        .collect()
}

/// The label of a `<url|label>` link: escaped, and without `|`, which would end it.
fn label(text: &str) -> String {
    escape(text).replace('|', "¦")
}

fn link_url(url: &str) -> String {
    url.replace('|', "%7C").replace('<', "%3C").replace('>', "%3E").replace(' ', "%20")
}
