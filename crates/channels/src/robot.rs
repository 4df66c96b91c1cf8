//! What the team-chat robots (Feishu, DingTalk, WeCom, Slack) have in common: a robot is an
//! incoming-webhook URL whose path or query holds its token, optionally a signing secret
//! (named by an environment variable) and a keyword the platform requires in every message.
//! Each platform is a [`Platform`] in its own folder; [`RobotSpec`] makes it a channel.
//!
//! Renders are JSON payloads, one per message, cut at event boundaries to the platform's
//! size limit. What differs per subscriber (the keyword, the signature) is added when the
//! message is sent, so one render serves every robot with the same filter.

use std::marker::PhantomData;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{ChannelSpec, Meta, Options, SendError};
use super::{Setup, no_section};
use crate::netguard::Guard;
use kdigest_core::locale::Locale;
use kdigest_core::model::{Digest, DigestEvent};
use kdigest_core::parse::hex;
use kdigest_core::render::Renderer;
use kdigest_core::settings::read::Doc;
use kdigest_core::settings::{ChannelLimits, Secret};

/// One robot: where to post, and how it wants to be addressed.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Robot {
    /// The webhook URL, normalised; it is a credential.
    pub url: url::Url,
    /// The environment variable holding the robot's signing secret.
    pub secret_env: Option<String>,
    /// A word the robot requires in every message (its "custom keyword" setting).
    pub keyword: Option<String>,
}

/// The URL is a credential: Debug shows its fingerprint only.
impl std::fmt::Debug for Robot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Robot")
            .field("url", &fingerprint(&self.url))
            .field("secret_env", &self.secret_env)
            .field("keyword", &self.keyword)
            .finish()
    }
}

/// One team-chat platform's particulars.
pub trait Platform {
    const NAME: &'static str;
    const FORMS: &'static str;
    const LIMITS: ChannelLimits;
    /// Whether its robots can require a signature and a keyword (Feishu, DingTalk).
    const SIGNED: bool;
    /// See [`ChannelSpec::EXAMPLE`].
    const EXAMPLE: (&'static str, &'static str);

    /// Checks a webhook URL's host and path and keeps only what identifies the robot.
    fn normalize(url: url::Url) -> Result<url::Url, String>;
    /// The payloads of one digest. `site` is the digest's page on the web site, if any.
    fn render(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Value>;
    /// A short plain message (the sign-up's confirmation code).
    fn note(text: &str) -> Value;
    /// Puts the robot's keyword into a payload.
    fn add_keyword(payload: &mut Value, keyword: &str);
    /// Signs one request (Feishu in the body, DingTalk in the query).
    fn sign(_url: &mut url::Url, _payload: &mut Value, _secret: &Secret, _now_ms: i64) {}
    /// What in one payload breaks the platform's documented limits.
    fn limit_problems(payload: &Value) -> Vec<String>;
    /// The platform's answer: `Ok` or how the engine should treat the failure.
    fn answer(status: u16, retry_after: Option<Duration>, body: &str) -> Result<(), SendError>;
}

/// The `limit_problems` of the markdown robots: the text at `pointer` (or a plain text
/// message's `text.content`) within `max` UTF-8 bytes.
pub fn text_within(payload: &Value, pointer: &str, max: usize) -> Vec<String> {
    match payload
        .pointer(pointer)
        .or(payload.pointer("/text/content"))
        .and_then(Value::as_str)
    {
        None => vec![format!("neither {pointer} nor /text/content")],
        Some(t) if t.len() > max => vec![format!("{pointer} of {} bytes, above {max}", t.len())],
        Some(_) => Vec::new(),
    }
}

/// A [`Platform`] as a channel of the registry.
pub struct RobotSpec<P>(PhantomData<P>);

impl<P: Platform> ChannelSpec for RobotSpec<P> {
    const NAME: &'static str = P::NAME;
    const FORMS: &'static str = P::FORMS;
    const LIMITS: ChannelLimits = P::LIMITS;
    const FORMAT: Option<&'static str> = Some("json");
    // Each robot is limited on its own; no budget across robots is documented.
    const SHARED_BUDGET: bool = false;
    const EXAMPLE: (&'static str, &'static str) = P::EXAMPLE;

    type Target = Robot;
    type Sender = RobotSender;
    type Section = ();

    fn section(doc: &Doc, _site: &url::Url, problems: &mut Vec<String>) {
        no_section(doc, P::NAME, problems)
    }

    fn parse(target: &str) -> Result<Robot, String> {
        let url = url::Url::parse(target)
            .map_err(|e| format!("\"{target}\" is not a {} robot URL ({e})", P::NAME))?;
        if !super::https_or_loopback(&url) {
            return Err(format!(
                "a {} robot URL must be https (plain http only on loopback, for tests)",
                P::NAME
            ));
        }
        // One robot, one URL: no credentials or other port in front of the platform's host.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "a {} robot URL has no user name or password",
                P::NAME
            ));
        }
        if url.scheme() == "https" && url.port().is_some() {
            return Err(format!("a {} robot URL has no port", P::NAME));
        }
        Ok(Robot {
            url: P::normalize(url)?,
            secret_env: None,
            keyword: None,
        })
    }

    fn stored(robot: &Robot) -> String {
        robot.url.to_string()
    }

    /// The host and a fingerprint of the URL: enough to tell robots apart, never the token.
    fn display(robot: &Robot) -> String {
        let mut shown = format!(
            "{}://{}/… [{}]",
            robot.url.scheme(),
            robot.url.host_str().unwrap_or(""),
            fingerprint(&robot.url)
        );
        if let Some(var) = &robot.secret_env {
            shown.push_str(&format!(" signed with ${var}"));
        }
        if let Some(k) = &robot.keyword {
            shown.push_str(&format!(" keyword \"{k}\""));
        }
        shown
    }

    /// The platform limits each robot on its own; the key must not hold the token.
    fn destination(robot: &Robot) -> String {
        format!("{}:{}", P::NAME, fingerprint(&robot.url))
    }

    fn options(robot: &Robot) -> Options {
        Options {
            secret_env: robot.secret_env.clone(),
            keyword: robot.keyword.clone(),
        }
    }

    fn with_options(mut robot: Robot, options: Options) -> Result<Robot, String> {
        if options.is_empty() {
            return Ok(robot);
        }
        if !P::SIGNED {
            return Err(format!(
                "{} robots have no signing secret or keyword; leave out --secret-env and --keyword",
                P::NAME
            ));
        }
        if let Some(var) = &options.secret_env {
            check_env_name(var, "KDIGEST_FEISHU_SECRET", "secret")?;
        }
        // A keyword goes into every message as written, so it must need no escaping in any
        // platform's markup (and cannot carry a mention).
        if let Some(k) = &options.keyword
            && (k.trim().is_empty()
                || k.chars().count() > 50
                || k.chars()
                    .any(|c| c.is_control() || "<>[]()*_~`\\&|#@!".contains(c)))
        {
            return Err(format!(
                "--keyword {k:?}: expected the robot's keyword, 1 to 50 characters without markup characters (<>[]()*_~`\\&|#@!)"
            ));
        }
        robot.secret_env = options.secret_env;
        robot.keyword = options.keyword;
        Ok(robot)
    }

    fn render(digest: &Digest, renderer: &Renderer) -> anyhow::Result<Vec<String>> {
        let site = renderer.site_url(&format!("digest/{}", digest.date));
        P::render(digest, renderer.locale(), site.as_deref())
            .iter()
            .map(|m| Ok(serde_json::to_string_pretty(m)? + "\n"))
            .collect()
    }

    /// An HTTP error with an empty body: the platform's own codes come in bodies.
    fn refusal(code: u16) -> SendError {
        match P::answer(code, None, "") {
            Err(error) => error,
            Ok(()) => SendError::Failed {
                reason: format!("{} took HTTP {code} with no body as delivered", P::NAME),
            },
        }
    }

    fn limit_problems(message: &str) -> Vec<String> {
        match serde_json::from_str::<Value>(message) {
            Ok(payload) => P::limit_problems(&payload),
            Err(e) => vec![format!("not JSON: {e}")],
        }
    }

    fn note(text: &str) -> Option<String> {
        Some(P::note(text).to_string())
    }

    fn sender(setup: &Setup) -> anyhow::Result<Option<RobotSender>> {
        Ok(Some(RobotSender::new(
            setup.timeout,
            Guard::delivery(setup.allow_private_networks),
        )?))
    }

    async fn send(
        sender: &RobotSender,
        robot: &Robot,
        message: &str,
        _meta: Meta<'_>,
    ) -> Result<(), SendError> {
        sender.post::<P>(robot, message).await
    }
}

/// `--secret-env VAR` names an environment variable (upper case, digits, `_`), never the
/// secret itself, which must not reach the command line or the store.
pub fn check_env_name(var: &str, example: &str, what: &str) -> Result<(), String> {
    let valid = !var.is_empty()
        && var
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !var.starts_with(|c: char| c.is_ascii_digit());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "--secret-env {var}: expected the name of an environment variable such as {example} (the {what} itself never goes on the command line)"
        ))
    }
}

/// Eight hex digits of the URL's hash: names a robot in logs and the rate-limit tables.
pub fn fingerprint(url: &url::Url) -> String {
    hex(&Sha256::digest(url.as_str().as_bytes())[..4])
}

/// One HTTP client for every robot of a platform.
pub struct RobotSender {
    client: reqwest::Client,
    guard: Guard,
}

impl RobotSender {
    pub fn new(timeout: Duration, guard: Guard) -> anyhow::Result<RobotSender> {
        let client = crate::http::reader_client(timeout, &guard, "").build()?;
        Ok(RobotSender { client, guard })
    }

    /// Posts one rendered payload, with the robot's keyword and signature added.
    pub async fn post<P: Platform>(&self, robot: &Robot, message: &str) -> Result<(), SendError> {
        let mut payload: Value = serde_json::from_str(message).map_err(|e| SendError::Failed {
            reason: format!("{} payload is not JSON: {e}", P::NAME),
        })?;
        if let Some(keyword) = &robot.keyword {
            P::add_keyword(&mut payload, keyword);
        }
        self.guard
            .check_url(&robot.url)
            .map_err(|reason| SendError::Permanent { reason })?;
        let mut url = robot.url.clone();
        if let Some(var) = &robot.secret_env {
            // Read at each send: a rotated secret takes effect without a restart.
            let secret = Secret::from_env(var, "the robot's signing secret").map_err(|_| {
                SendError::Transient {
                    reason: format!(
                        "{var} is not set, so the {} robot's messages cannot be signed; set it in kdigest's environment",
                        P::NAME
                    ),
                    retry_after: None,
                }
            })?;
            P::sign(
                &mut url,
                &mut payload,
                &secret,
                chrono::Utc::now().timestamp_millis(),
            );
        }
        let request = self
            .client
            .post(url)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/json; charset=utf-8",
            )
            .body(payload.to_string());
        let answer = crate::http::exchange(P::NAME, request).await?;
        P::answer(answer.status, answer.retry_after, &answer.body)
    }
}

/// The answer of an HTTP error status no platform code explains.
pub fn http_status(name: &str, status: u16, retry_after: Option<Duration>) -> SendError {
    let reason = format!("{name} answered HTTP {status}");
    match status {
        408 | 425 | 429 | 500..=599 => SendError::Transient {
            reason,
            retry_after,
        },
        404 | 410 => SendError::Permanent {
            reason: format!("{reason}: the robot no longer exists"),
        },
        // Our request's credentials (a signing secret from --secret-env, the operator's) as
        // often as the robot's: retried, never disabling; the engine pauses the channel
        // when most robots answer it at once.
        401 => SendError::Refused {
            reason: format!("{reason}: the robot refuses our credentials"),
        },
        _ => SendError::Failed { reason },
    }
}

/// A code the platform's table does not explain: the HTTP status decides (a 429 or 5xx is
/// retried), else this message fails and the subscriber stays.
pub fn unknown_code(status: u16, retry_after: Option<Duration>, reason: String) -> SendError {
    match status {
        408 | 425 | 429 | 500..=599 => SendError::Transient {
            reason,
            retry_after,
        },
        _ => SendError::Failed { reason },
    }
}

/// `code` and `msg` of a JSON answer, under the given field names.
pub fn code_and_message(body: &str, code: &str, message: &str) -> Option<(i64, String)> {
    let v: Value = serde_json::from_str(body).ok()?;
    let c = v.get(code)?.as_i64()?;
    let m = v
        .get(message)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Some((c, m))
}

/// One piece of a digest as the robots show it, in order: the header, each event (with its
/// section's heading before the first of the section), the closing notes.
pub enum Piece<'a> {
    Header,
    Event {
        section: Option<&'a str>,
        n: usize,
        event: &'a DigestEvent,
    },
    Closing,
}

pub fn pieces<'a>(d: &'a Digest, t: &'a Locale) -> Vec<Piece<'a>> {
    let mut out = vec![Piece::Header];
    let mut n = 0;
    for (key, events) in d.sections() {
        for (i, e) in events.iter().enumerate() {
            n += 1;
            out.push(Piece::Event {
                section: (i == 0).then(|| t.get(key)),
                n: if e.n > 0 { e.n } else { n },
                event: e,
            });
        }
    }
    out.push(Piece::Closing);
    out
}

/// The closing lines: the empty-day note, the watch list, the generation notes.
pub fn closing_lines(d: &Digest, t: &Locale) -> (Vec<String>, Vec<String>) {
    let mut watch = Vec::new();
    if d.is_empty() {
        watch.push(t.get("empty").to_string());
    }
    watch.extend(d.watchlist.iter().map(|w| w.text.clone()));
    (watch, kdigest_core::render::notes(d, t))
}

/// Groups units into messages of at most `budget` as `size` measures a message, in order; a
/// unit too large alone is shortened (`shorten(unit, bytes over)`) until it fits.
pub fn pack<U>(
    units: Vec<U>,
    budget: usize,
    size: impl Fn(&[U]) -> usize,
    shorten: impl Fn(U, usize) -> U,
) -> Vec<Vec<U>> {
    let mut messages: Vec<Vec<U>> = Vec::new();
    let mut current: Vec<U> = Vec::new();
    for unit in units {
        current.push(unit);
        if size(&current) <= budget {
            continue;
        }
        let mut unit = current.pop().expect("just pushed");
        if !current.is_empty() {
            messages.push(std::mem::take(&mut current));
        }
        // Each round cuts at least the excess, so this ends; the bound is a guard.
        for _ in 0..8 {
            let alone = size(std::slice::from_ref(&unit));
            if alone <= budget {
                break;
            }
            unit = shorten(unit, alone - budget);
        }
        current.push(unit);
    }
    if !current.is_empty() {
        messages.push(current);
    }
    messages
}

/// `text` shortened by at least `over` bytes, cut at a character boundary, with '…'.
pub fn shorten_text(text: &str, over: usize) -> String {
    let keep = text.len().saturating_sub(over + '…'.len_utf8());
    let mut end = keep.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", text[..end].trim_end())
}

/// Feed text inside DingTalk or WeCom markdown, which have no escape character: one line,
/// and the characters that would start a link, a tag, a mention (`<@all>`), emphasis or
/// code replaced by their full-width forms, which read the same (`batch_size_sweep` came
/// out in italics).
pub fn plain_markdown(text: &str) -> String {
    let one_line: String = kdigest_core::text::collapse_whitespace(text)
        .chars()
        .map(|c| match c {
            '[' => '［',
            ']' => '］',
            '<' => '＜',
            '>' => '＞',
            c => full_width_emphasis(c),
        })
        .collect();
    line_safe(one_line)
}

/// The full-width form of an emphasis or code marker (`*`, `_`, `~`, `` ` ``), which no
/// markdown dialect reads as markup; any other character as it is.
pub fn full_width_emphasis(c: char) -> char {
    match c {
        '*' => '＊',
        '_' => '＿',
        '~' => '～',
        '`' => '｀',
        c => c,
    }
}

/// Text that may start a line without starting a heading, list, quote or rule: a leading
/// marker gets a zero-width space before it.
pub fn line_safe(text: String) -> String {
    let starts_block = text.starts_with(['#', '-', '+', '>', '=', '*', '|'])
        || text.split_once(['.', ')']).is_some_and(|(n, _)| {
            !n.is_empty() && n.len() <= 3 && n.chars().all(|c| c.is_ascii_digit())
        });
    if starts_block {
        format!("\u{200b}{text}")
    } else {
        text
    }
}

/// A URL inside `[...](...)`: parentheses and spaces percent-encoded.
pub fn link_url(url: &str) -> String {
    url.replace('(', "%28")
        .replace(')', "%29")
        .replace(' ', "%20")
}

/// The markdown units (header, events, closing) of DingTalk, WeCom and ntfy, which differ
/// in how a line ends, how a quiet line is shown and how feed text is kept from being
/// markup (`esc`: [`plain_markdown`] for dialects without an escape character).
pub fn markdown_units(
    d: &Digest,
    t: &Locale,
    line: &str,
    muted: fn(&str) -> String,
    esc: fn(&str) -> String,
) -> Vec<String> {
    let (watch, notes) = closing_lines(d, t);
    pieces(d, t)
        .into_iter()
        .map(|piece| match piece {
            Piece::Header => format!("**{}**{line}{}", esc(t.get("overview")), esc(&d.overview)),
            Piece::Event {
                section,
                n,
                event: e,
            } => {
                let mut md = String::new();
                if let Some(s) = section {
                    md.push_str(&format!("#### {}{line}", esc(s)));
                }
                let title = kdigest_core::render::event_title(e);
                let title = match e.sources.first() {
                    Some(s) => format!("[{}]({})", esc(&title), link_url(&s.url)),
                    None => esc(&title),
                };
                let sources: Vec<String> = e
                    .sources
                    .iter()
                    .zip(kdigest_core::render::source_labels(&e.sources, t))
                    .map(|(s, label)| format!("[{}]({})", esc(&label), link_url(&s.url)))
                    .collect();
                md.push_str(&format!(
                    "**{n}. {title}**{line}{}{line}{}{line}{}{}",
                    muted(&format!(
                        "{}{}/100 · {}{}",
                        kdigest_core::render::label_then(&esc(t.get("score")), t),
                        e.score,
                        kdigest_core::render::label_then(&esc(t.get("layers")), t),
                        esc(&t.layer_list(&e.layers))
                    )),
                    esc(&e.summary),
                    kdigest_core::render::label_then(
                        &kdigest_core::render::emphasised_label(&esc(t.get("why")), "**", "**"),
                        t
                    ),
                    esc(&e.why_it_matters),
                ));
                if !sources.is_empty() {
                    md.push_str(&format!("{line}{}", sources.join(" · ")));
                }
                if let Some(f) = &e.follow_up {
                    md.push_str(&format!(
                        "{line}↪ {}",
                        esc(&kdigest_core::render::follow_up_line(f, t))
                    ));
                }
                md
            }
            Piece::Closing => {
                let mut md = String::new();
                if !watch.is_empty() {
                    md.push_str(&format!("**{}**{line}", esc(t.get("watchlist"))));
                    for w in &watch {
                        md.push_str(&format!("- {}{line}", esc(w)));
                    }
                }
                md.push_str(&format!("**{}**{line}", esc(t.get("notes"))));
                for n in &notes {
                    md.push_str(&muted(&format!("- {}", esc(n))));
                    md.push_str(line);
                }
                md.trim_end().to_string()
            }
        })
        .collect()
}

/// "(2/3)" after a title when a digest takes several messages.
pub fn part_suffix(i: usize, total: usize) -> String {
    if total > 1 {
        format!(" ({}/{total})", i + 1)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_order_and_budget_and_shortens_a_lone_giant() {
        let units = vec!["aaaa".to_string(), "bb".into(), "c".repeat(30), "dd".into()];
        let size = |u: &[String]| u.iter().map(String::len).sum::<usize>();
        let packed = pack(units, 10, size, |u, over| shorten_text(&u, over));
        assert_eq!(packed[0], vec!["aaaa".to_string(), "bb".into()]);
        assert!(packed[1][0].len() <= 10 && packed[1][0].ends_with('…'));
        assert_eq!(packed[2], vec!["dd".to_string()]);
    }

    /// Random feed text: markup characters of every dialect, letters, CJK, spaces and
    /// line breaks (a seeded xorshift, so a failure names its case).
    fn random_texts() -> impl Iterator<Item = String> {
        const ALPHABET: &[char] = &[
            '*', '_', '~', '`', '[', ']', '(', ')', '<', '>', '&', '#', '-', '+', '=', '|', '!',
            '\\', '@', '.', '1', 'a', 'b', 'Z', '核', '函', ' ', ' ', '\n',
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..2000).map(move |_| {
            let len = (next() % 24) as usize;
            (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect()
        })
    }

    /// Undoes the full-width markers and Feishu's entities, and drops the zero-width space
    /// that keeps a line from starting a block: what a reader sees, as plain text.
    fn as_read(escaped: &str) -> String {
        let mut out = escaped.trim_start_matches('\u{200b}').to_string();
        for (wide, ascii) in [
            ('＊', '*'),
            ('＿', '_'),
            ('～', '~'),
            ('｀', '`'),
            ('［', '['),
            ('］', ']'),
            ('＜', '<'),
            ('＞', '>'),
        ] {
            out = out.replace(wide, &ascii.to_string());
        }
        for c in ['<', '>', '[', ']', '*', '_', '~', '`', '\\'] {
            out = out.replace(&format!("&#{};", c as u32), &c.to_string());
        }
        out.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace(&format!("&#{};", '&' as u32), "&")
            .replace("&amp;", "&")
    }

    #[test]
    fn no_feed_text_is_ever_markup_in_any_robot_dialect() {
        use crate::{feishu, slack};
        for text in random_texts() {
            let plain = kdigest_core::text::collapse_whitespace(&text);
            // DingTalk and WeCom: no escape character, so no markup character at all.
            let md = plain_markdown(&text);
            assert!(
                !md.contains(['[', ']', '<', '>', '*', '_', '~', '`', '\n']),
                "{text:?} -> {md:?}"
            );
            assert!(
                !md.starts_with(['#', '-', '+', '=', '|']),
                "{text:?} -> {md:?}"
            );
            assert_eq!(as_read(&md), plain, "{text:?}");
            // Feishu card markdown: entities.
            let card = feishu::escape(&text);
            assert!(
                !card.contains(['[', ']', '<', '>', '*', '_', '~', '`', '\\', '\n']),
                "{text:?} -> {card:?}"
            );
            assert!(
                !card.starts_with(['#', '-', '+', '=', '|']),
                "{text:?} -> {card:?}"
            );
            assert_eq!(as_read(&card), plain, "{text:?}");
            // Slack mrkdwn: &, < and > as entities, the rest full-width.
            let mrkdwn = slack::escape(&text);
            assert!(
                !mrkdwn.contains(['<', '>', '*', '_', '~', '`', '\n']),
                "{text:?} -> {mrkdwn:?}"
            );
            assert!(
                mrkdwn
                    .match_indices('&')
                    .all(|(i, _)| ["&amp;", "&lt;", "&gt;"]
                        .iter()
                        .any(|e| mrkdwn[i..].starts_with(e))),
                "{text:?} -> {mrkdwn:?}"
            );
            assert_eq!(as_read(&mrkdwn), plain, "{text:?}");
        }
    }
}
