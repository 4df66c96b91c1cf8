//! ntfy (ntfy.sh or a self-hosted server): the digest as Markdown push notifications to a
//! topic, the dated headline as the title, a click on the notification opening the web
//! version. The address is the topic's URL (`ntfy:https://ntfy.sh/<topic>`); a protected
//! topic takes an access token from the environment variable named by `--secret-env`.
//!
//! Documented (docs.ntfy.sh, "Publishing" and "Limitations"; the server's `errors.go`):
//! messages are published as JSON to the server's root URL (`{"topic", "message", "title",
//! "markdown", "click", "priority", "tags"}`); a message body is at most 4,096 bytes (the
//! server's default `message-size-limit`; larger bodies become attachments), a title at
//! most 1 KB, tags together 512 bytes; topics are 1 to 64 of `[-_A-Za-z0-9]`; each visitor
//! (one IP, or one account with a token) gets a burst of 60 requests and then one every 5
//! seconds, beyond which the server answers 429 (`42901`, `42908` for the daily message
//! quota); errors are JSON `{"code": 40301, "http": 403, "error": "forbidden", "link": …}`.

pub mod send;

use super::{ChannelSpec, Meta, Options, SendError, Setup};
use kdigest_core::model::Digest;
use kdigest_core::render::Renderer;
use kdigest_core::settings::ChannelLimits;
use kdigest_core::settings::read::{Doc, section};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::robot;

pub use send::NtfySender;

/// A message body's limit in bytes (the server's default `message-size-limit`).
pub const MESSAGE_MAX: usize = 4096;
/// A title's limit in bytes.
pub const TITLE_MAX: usize = 1024;
/// The tags' limit in bytes, all together.
pub const TAGS_MAX: usize = 512;
/// The tag every digest carries: ntfy shows it as 📰 before the title.
pub const TAG: &str = "newspaper";

/// One topic on one server.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Topic {
    /// The topic's URL, normalised (no query, fragment or credentials).
    pub url: url::Url,
    /// The environment variable holding the access token (never the token itself).
    pub token_env: Option<String>,
}

impl Topic {
    /// The topic's name: the URL's last path segment.
    pub fn name(&self) -> &str {
        self.url
            .path_segments()
            .and_then(|mut s| s.next_back())
            .unwrap_or("")
    }

    /// Where JSON is published: the server's root, the topic's URL without its name (a
    /// self-hosted server may live under a path).
    pub fn publish_url(&self) -> url::Url {
        let mut url = self.url.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop().push("");
        }
        url
    }
}

/// On the public server the topic is the only secret ("the topic is essentially a
/// password"): Debug shows the server and a fingerprint.
impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&Spec::display(self))
    }
}

/// The `[ntfy]` section.
#[derive(Debug, Clone)]
pub struct NtfyConfig {
    /// The notification priority, 1 (min) to 5 (max); 3 is ntfy's default.
    pub priority: u8,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawNtfy {
    priority: i64,
}

impl Default for RawNtfy {
    fn default() -> Self {
        RawNtfy { priority: 3 }
    }
}

pub struct Spec;

impl ChannelSpec for Spec {
    const NAME: &'static str = "ntfy";
    const FORMS: &'static str = "ntfy:<topic URL, e.g. https://ntfy.sh/kdigest-3f9a> [--secret-env VAR for an access token]";
    const EXAMPLE: (&'static str, &'static str) =
        ("ntfy:https://ntfy.sh/kdigest-7c1e9f2b4d", "kdigest-7c1e9f2b4d");
    // ntfy.sh's defaults per visitor: a burst of 60, then one request every 5 seconds. Every
    // topic on a server shares our visitor's budget, so the server is the destination; a
    // self-hosted server's operator raises it in [delivery.ntfy].
    const LIMITS: ChannelLimits = ChannelLimits {
        per_sec: 100.0,
        per_destination_per_sec: 0.2,
        concurrency: 16,
    };
    const FORMAT: Option<&'static str> = Some("json");
    const SHARED_BUDGET: bool = false;

    type Target = Topic;
    type Sender = NtfySender;
    type Section = NtfyConfig;

    fn section(doc: &Doc, _site: &url::Url, problems: &mut Vec<String>) -> NtfyConfig {
        let raw: RawNtfy = section(doc, Self::NAME, problems);
        let priority = match u8::try_from(raw.priority) {
            Ok(p @ 1..=5) => p,
            _ => {
                problems.push(format!(
                    "ntfy.priority: {} is not an ntfy priority; use 1 (min) to 5 (max), 3 being the default",
                    raw.priority
                ));
                3
            }
        };
        NtfyConfig { priority }
    }

    fn parse(target: &str) -> Result<Topic, String> {
        let mut url = url::Url::parse(target)
            .map_err(|e| format!("\"{target}\" is not an ntfy topic URL ({e}); it looks like https://ntfy.sh/<topic>"))?;
        if !super::https_or_loopback(&url) {
            return Err("an ntfy topic URL must be https (plain http only on loopback, for tests)".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("an ntfy topic URL has no user name or password; give an access token with --secret-env".into());
        }
        url.set_query(None);
        url.set_fragment(None);
        let segments: Vec<String> = url
            .path_segments()
            .map(|s| s.filter(|p| !p.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        let Some(name) = segments.last() else {
            return Err("an ntfy address names a topic: https://ntfy.sh/<topic>".into());
        };
        let valid = name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(format!(
                "\"{name}\" is not an ntfy topic: 1 to 64 letters, digits, '-' or '_'"
            ));
        }
        url.set_path(&format!("/{}", segments.join("/")));
        Ok(Topic {
            url,
            token_env: None,
        })
    }

    fn stored(topic: &Topic) -> String {
        topic.url.to_string()
    }

    /// The server and a fingerprint of the URL: the topic may be the only secret.
    fn display(topic: &Topic) -> String {
        let mut shown = format!(
            "{}://{}/… [{}]",
            topic.url.scheme(),
            topic.url.host_str().unwrap_or(""),
            robot::fingerprint(&topic.url)
        );
        if let Some(var) = &topic.token_env {
            shown.push_str(&format!(" token ${var}"));
        }
        shown
    }

    /// A server limits each visitor, not each topic: our topics on one server share it.
    fn destination(topic: &Topic) -> String {
        format!(
            "ntfy:{}:{}",
            topic.url.host_str().unwrap_or(""),
            topic.url.port_or_known_default().unwrap_or(0)
        )
    }

    fn options(topic: &Topic) -> Options {
        Options {
            secret_env: topic.token_env.clone(),
            keyword: None,
        }
    }

    fn with_options(mut topic: Topic, options: Options) -> Result<Topic, String> {
        if options.keyword.is_some() {
            return Err("ntfy topics have no keyword; leave out --keyword".into());
        }
        if let Some(var) = &options.secret_env {
            robot::check_env_name(var, "KDIGEST_NTFY_TOKEN", "access token")?;
        }
        topic.token_env = options.secret_env;
        Ok(topic)
    }

    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
        let site = renderer.site_url(&format!("digest/{}", digest.date));
        render(digest, renderer.locale(), site.as_deref())
            .iter()
            .map(|m| Ok(serde_json::to_string_pretty(m)? + "\n"))
            .collect()
    }

    /// ntfy's limits on one message: its body, title and tags.
    fn limit_problems(message: &str) -> Vec<String> {
        let payload: Value = match serde_json::from_str(message) {
            Ok(v) => v,
            Err(e) => return vec![format!("not JSON: {e}")],
        };
        let mut problems = Vec::new();
        let bytes = |pointer: &str| payload.pointer(pointer).and_then(Value::as_str).map_or(0, str::len);
        if payload["message"].as_str().is_none_or(str::is_empty) {
            problems.push("no message".into());
        }
        if bytes("/message") > MESSAGE_MAX {
            problems.push(format!("a message of {} bytes, above {MESSAGE_MAX}", bytes("/message")));
        }
        if bytes("/title") > TITLE_MAX {
            problems.push(format!("a title of {} bytes, above {TITLE_MAX}", bytes("/title")));
        }
        let tags: usize = payload["tags"]
            .as_array()
            .map_or(0, |t| t.iter().filter_map(Value::as_str).map(str::len).sum());
        if tags > TAGS_MAX {
            problems.push(format!("tags of {tags} bytes, above {TAGS_MAX}"));
        }
        problems
    }

    fn note(text: &str) -> Option<String> {
        Some(json!({"message": text, "tags": [TAG]}).to_string())
    }

    /// A bare status, as from a proxy in front of the server: without a token.
    fn refusal(code: u16) -> SendError {
        send::answer(code, None, "", false).err().unwrap_or(SendError::Failed {
            reason: format!("ntfy took HTTP {code} with no body as published"),
        })
    }

    fn sender(setup: &Setup) -> anyhow::Result<Option<NtfySender>> {
        Ok(Some(NtfySender::new(
            setup.timeout,
            setup.sections.ntfy.priority,
            setup.limits(crate::Channel::Ntfy).per_destination_per_sec,
            crate::netguard::Guard::delivery(setup.allow_private_networks),
        )?))
    }

    async fn send(
        sender: &NtfySender,
        topic: &Topic,
        message: &str,
        _meta: Meta<'_>,
    ) -> Result<(), SendError> {
        sender.send(topic, message).await
    }
}

/// The digest as ntfy messages without their topic (one render serves every topic with the
/// same filter): Markdown bodies cut at event boundaries within [`MESSAGE_MAX`], the dated
/// headline as the title, a click opening the web version when the site has an address.
pub fn render(d: &Digest, t: &kdigest_core::locale::Locale, site: Option<&str>) -> Vec<Value> {
    let mut units = robot::markdown_units(d, t, "\n\n", |s| s.to_string(), escape);
    if let Some(site) = site
        && let Some(last) = units.last_mut()
    {
        last.push_str(&format!("\n\n[Web]({})", robot::link_url(site)));
    }
    // Units are joined by a blank line; the budget leaves room for nothing else.
    let messages = robot::pack(
        units,
        MESSAGE_MAX,
        |u| u.iter().map(|s| s.len() + 2).sum::<usize>().saturating_sub(2),
        |u, over| robot::shorten_text(&u, over),
    );
    let title = kdigest_core::render::dated_title(d);
    let total = messages.len();
    messages
        .iter()
        .enumerate()
        .map(|(i, units)| {
            let suffix = robot::part_suffix(i, total);
            let budget = TITLE_MAX - suffix.len();
            let title = if title.len() > budget {
                format!("{}{suffix}", robot::shorten_text(&title, title.len() - budget))
            } else {
                format!("{title}{suffix}")
            };
            let mut message = json!({
                "title": title,
                "message": units.join("\n\n"),
                "markdown": true,
                "tags": [TAG],
            });
            if let Some(site) = site {
                message["click"] = json!(site);
            }
            message
        })
        .collect()
}

/// Feed text in ntfy's Markdown (CommonMark, with backslash escapes): one line, its markup
/// characters escaped, and no line starting a list or rule. Identifiers keep their
/// underscores (`kernel_codegen`, `sm_100a`), which the dialects without an escape lose.
pub fn escape(text: &str) -> String {
    robot::line_safe(kdigest_core::text::markdown_escape(
        &kdigest_core::text::collapse_whitespace(text),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_text_is_never_markup_and_identifiers_stay_readable() {
        assert_eq!(escape("kernel_codegen"), "kernel\\_codegen");
        assert_eq!(escape("[click](http://x) *bold*"), "\\[click\\](http://x) \\*bold\\*");
        assert_eq!(escape("# Title\n- item"), "\\# Title - item");
        assert!(escape("1. first").starts_with('\u{200b}'));
    }

    #[test]
    fn a_topic_url_is_normalised_and_bad_ones_say_how_they_look() {
        let t = Spec::parse("https://ntfy.sh/kdigest-gpu?x=1#y").unwrap();
        assert_eq!(t.url.as_str(), "https://ntfy.sh/kdigest-gpu");
        assert_eq!(t.name(), "kdigest-gpu");
        assert_eq!(t.publish_url().as_str(), "https://ntfy.sh/");
        let t = Spec::parse("https://push.example.org/ntfy/alerts/").unwrap();
        assert_eq!(t.name(), "alerts");
        assert_eq!(t.publish_url().as_str(), "https://push.example.org/ntfy/");
        for (bad, says) in [
            ("https://ntfy.sh/", "names a topic"),
            ("https://ntfy.sh/a%20b", "not an ntfy topic"),
            ("http://ntfy.sh/t", "must be https"),
            ("https://u:p@ntfy.sh/t", "--secret-env"),
            ("ntfy.sh/t", "looks like"),
        ] {
            let error = Spec::parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn the_token_is_named_by_its_variable_and_the_topic_never_shown() {
        let t = Spec::parse("https://ntfy.sh/secret-topic-name").unwrap();
        let options = Options {
            secret_env: Some("KDIGEST_NTFY_TOKEN".into()),
            keyword: None,
        };
        let t = Spec::with_options(t, options).unwrap();
        let shown = format!("{} {t:?}", Spec::display(&t));
        assert!(!shown.contains("secret-topic-name"), "{shown}");
        assert!(shown.contains("$KDIGEST_NTFY_TOKEN"), "{shown}");
        let bad = Options {
            secret_env: Some("tk_abc123".into()),
            keyword: None,
        };
        let error = Spec::with_options(t.clone(), bad).unwrap_err();
        assert!(error.contains("environment variable"), "{error}");
        let keyword = Options {
            secret_env: None,
            keyword: Some("kdigest".into()),
        };
        assert!(Spec::with_options(t, keyword).is_err());
    }
}
