//! Renders of a stored digest: Markdown, HTML page, email HTML and text, Telegram HTML
//! messages, Discord message payloads, JSON. Pure.
//!
//! Templates live in templates/ and are embedded; a file of the same name in
//! `digest.templates_dir` overrides one. minijinja escapes by file name: `.html` templates
//! HTML-escape every value, `.md` ones use the `md` filter for untrusted text.

use anyhow::Context as _;
use minijinja::{AutoEscape, Environment, Value, context};
use serde::Serialize;

use crate::locale::{Locale, Templates};
use crate::model::{Digest, DigestEvent, FollowUp, FollowUpReason, SourceLink};
use crate::text::collapse_whitespace;

pub mod pages;

/// Separates units inside the Telegram template; never occurs in escaped text.
pub const UNIT_SEPARATOR: &str = "\u{1e}";

/// The names of the templates the renderer has, for the application to read overrides of.
pub fn template_names() -> impl Iterator<Item = &'static str> {
    TEMPLATES.iter().map(|(name, _)| *name)
}

const TEMPLATES: &[(&str, &str)] = &[
    (
        "digest.md.j2",
        include_str!("../../../../templates/digest.md.j2"),
    ),
    (
        "digest.html.j2",
        include_str!("../../../../templates/digest.html.j2"),
    ),
    (
        "email.html.j2",
        include_str!("../../../../templates/email.html.j2"),
    ),
    (
        "email.txt.j2",
        include_str!("../../../../templates/email.txt.j2"),
    ),
    (
        "archive.html.j2",
        include_str!("../../../../templates/archive.html.j2"),
    ),
    (
        "telegram.html.j2",
        include_str!("../../../../templates/telegram.html.j2"),
    ),
    (
        "home.html.j2",
        include_str!("../../../../templates/home.html.j2"),
    ),
    (
        "account.html.j2",
        include_str!("../../../../templates/account.html.j2"),
    ),
    (
        "link_email.html.j2",
        include_str!("../../../../templates/link_email.html.j2"),
    ),
    (
        "link_email.txt.j2",
        include_str!("../../../../templates/link_email.txt.j2"),
    ),
];

/// The document formats: Markdown, the HTML page, JSON and the newsletter's two parts.
/// Each channel's own payloads are the channel's render (`channels::Channel::render`);
/// `cli::output::Output` lists both for `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Md,
    Html,
    Json,
    EmailText,
    EmailHtml,
}

impl Format {
    pub const ALL: &'static [Format] = &[
        Format::Md,
        Format::Html,
        Format::Json,
        Format::EmailText,
        Format::EmailHtml,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Md => "md",
            Format::Html => "html",
            Format::Json => "json",
            Format::EmailText => "email-text",
            Format::EmailHtml => "email-html",
        }
    }

    /// File name for `--out DIR`.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Md => "digest.md",
            Format::Html => "digest.html",
            Format::Json => "digest.json",
            Format::EmailText => "email.txt",
            Format::EmailHtml => "email.html",
        }
    }
}

/// One rendered newsletter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Email {
    pub subject: String,
    pub html: String,
    pub text: String,
}

#[derive(Clone)]
pub struct Renderer {
    env: Environment<'static>,
    locale: Locale,
    language: String,
    /// The web site's base URL (`[web] public_url`), for "read on the web" links.
    site: Option<url::Url>,
}

/// What templates see of one event.
#[derive(Serialize)]
struct LayerLink {
    id: String,
    name: String,
}

#[derive(Serialize)]
struct EventView {
    n: usize,
    id: String,
    title: String,
    url: String,
    summary: String,
    why: String,
    layers: String,
    /// Each layer's id and name, for pages that link each one.
    layer_list: Vec<LayerLink>,
    /// "Continues “…” (date)" when the event continues an earlier digest's story.
    follow_up: Option<String>,
    /// That digest on the web site, when its address is known.
    follow_up_url: Option<String>,
    /// The same, relative: for the blog's own pages.
    follow_up_path: Option<String>,
    /// The earlier watch-list line this event resolves.
    resolves: Option<String>,
    score: String,
    kind: String,
    sources: Vec<LinkView>,
}

#[derive(Serialize)]
struct LinkView {
    label: String,
    name: String,
    url: String,
}

#[derive(Serialize)]
struct SectionView {
    key: &'static str,
    heading: String,
    events: Vec<EventView>,
}

impl Renderer {
    /// The renderer for `language`, with the operator's templates where they override
    /// the built-in ones.
    pub fn new(language: &str, templates: Option<&Templates>) -> anyhow::Result<Renderer> {
        let locale = Locale::load(language, templates)?;
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_filter("md", md_escape);
        env.add_filter("md_url", md_url);
        // The locale's own gap after a label (`label_gap`), as the other templates use it.
        let gap = locale.get("label_gap").to_string();
        env.add_filter("md_label", move |label: String| {
            format!("{}{gap}", emphasised_label(&label, "**", "**"))
        });
        // Telegram templates get Telegram's own escaping: its HTML accepts only the named
        // entities &lt; &gt; &amp; &quot;, and hrefs stay readable (no &#x2f;).
        env.set_auto_escape_callback(|name| {
            if name.starts_with("telegram") {
                AutoEscape::Custom("telegram")
            } else {
                minijinja::default_auto_escape_callback(name)
            }
        });
        env.set_formatter(|out, state, value| {
            if state.auto_escape() != AutoEscape::Custom("telegram") {
                return minijinja::escape_formatter(out, state, value);
            }
            if value.is_undefined() || value.is_none() {
                return Ok(());
            }
            let text = value.to_string();
            let escaped = if value.is_safe() {
                text
            } else {
                escape_html(&text)
            };
            out.write_str(&escaped).map_err(|e| {
                minijinja::Error::new(minijinja::ErrorKind::WriteFailure, e.to_string())
            })
        });
        for (name, builtin) in TEMPLATES {
            let source = templates
                .and_then(|t| t.get(name))
                .map_or(*builtin, |(_, text)| text);
            env.add_template_owned(name.to_string(), source.to_string())
                .with_context(|| format!("Template {name} has a syntax error"))?;
        }
        Ok(Renderer {
            env,
            locale,
            language: language.to_string(),
            site: None,
        })
    }

    /// Links to the web site under this base URL.
    pub fn with_site(mut self, site: url::Url) -> Renderer {
        self.site = Some(site);
        self
    }

    /// `path` on the web site, when it is known.
    pub fn site_url(&self, path: &str) -> Option<String> {
        Some(self.site.as_ref()?.join(path).ok()?.to_string())
    }

    pub fn locale(&self) -> &Locale {
        &self.locale
    }

    /// One render; multi-message formats (Telegram, Discord) give one string per message.
    pub fn render(&self, digest: &Digest, format: Format) -> anyhow::Result<Vec<String>> {
        self.for_digest(digest).render_as_is(digest, format)
    }

    /// This renderer, or for a weekly roll-up one with the locale's weekly words.
    pub fn for_digest(&self, digest: &Digest) -> std::borrow::Cow<'_, Renderer> {
        match digest.week {
            Some(_) => std::borrow::Cow::Owned(Renderer {
                locale: self.locale.for_week(),
                ..self.clone()
            }),
            None => std::borrow::Cow::Borrowed(self),
        }
    }

    fn render_as_is(&self, digest: &Digest, format: Format) -> anyhow::Result<Vec<String>> {
        Ok(match format {
            Format::Md => vec![self.template("digest.md.j2", digest)?],
            Format::Html => vec![self.template("digest.html.j2", digest)?],
            Format::EmailHtml => vec![self.template("email.html.j2", digest)?],
            Format::EmailText => vec![self.template("email.txt.j2", digest)?],
            Format::Json => vec![serde_json::to_string_pretty(digest)? + "\n"],
        })
    }

    pub fn template(&self, name: &str, digest: &Digest) -> anyhow::Result<String> {
        let template = self.env.get_template(name)?;
        let ctx = self.context(digest);
        template
            .render(ctx)
            .with_context(|| format!("Cannot render template {name}"))
    }

    /// The blog page of one digest, with a link home and its read count.
    /// `reads` is the count as text (the blog renders a stand-in and caches the page).
    /// The blog home: (date, title, overview excerpt, reads) per digest, and paging links.
    /// A search, layer or permalink page of the archive.
    /// A newsletter: subject, HTML and text, with preferences and unsubscribe links in both
    /// parts.
    pub fn email(
        &self,
        digest: &Digest,
        unsubscribe_url: &str,
        preferences_url: &str,
        vote_url: Option<&str>,
    ) -> anyhow::Result<Email> {
        self.for_digest(digest)
            .email_as_is(digest, unsubscribe_url, preferences_url, vote_url)
    }

    /// `vote_url`: where each event's 👍/👎 links go, `<vote_url><event id>/up`.
    fn email_as_is(
        &self,
        digest: &Digest,
        unsubscribe_url: &str,
        preferences_url: &str,
        vote_url: Option<&str>,
    ) -> anyhow::Result<Email> {
        let ctx = context! {
            unsubscribe_url => unsubscribe_url,
            preferences_url => preferences_url,
            vote_url => vote_url,
            ..self.context(digest)
        };
        let render = |name: &str| {
            self.env
                .get_template(name)?
                .render(&ctx)
                .with_context(|| format!("Cannot render template {name}"))
        };
        let when = digest
            .week
            .clone()
            .unwrap_or_else(|| digest.date.to_string());
        let date = self.locale.fill("digest_for", &[("date", &when)]);
        Ok(Email {
            subject: crate::text::truncate_chars(
                &collapse_whitespace(&format!("{date}: {}", digest.title)),
                150,
            ),
            html: render("email.html.j2")?,
            text: render("email.txt.j2")?,
        })
    }

    /// A sign-up, confirmation, preferences or unsubscribe page.
    /// A short email around one link, its texts from the locale keys `<kind>_subject`,
    /// `_intro`, `_action` and `_ignore`: `confirm_email` (double opt-in) or `known_email`
    /// (a sign-up for an address that is already subscribed: a preferences link).
    fn context(&self, d: &Digest) -> Value {
        let t = &self.locale;
        // Events are numbered once per digest, across sections, as `/why N` and `explain N`
        // count them.
        let mut n = 0;
        let sections: Vec<SectionView> = d
            .sections()
            .into_iter()
            .filter(|(_, events)| !events.is_empty())
            .map(|(key, events)| SectionView {
                key,
                heading: t.get(key).to_string(),
                events: events
                    .iter()
                    .map(|e| {
                        n += 1;
                        self.event_view(if e.n > 0 { e.n } else { n }, e)
                    })
                    .collect(),
            })
            .collect();
        context! {
            t => Value::from_serialize(t),
            lang => d.language,
            date => d.date.to_string(),
            title => d.title,
            heading => dated_title(d),
            overview => collapse_whitespace(&d.overview),
            sections => Value::from_serialize(&sections),
            empty => d.is_empty(),
            watchlist => d.watchlist.iter().map(|w| collapse_whitespace(&w.text)).collect::<Vec<_>>(),
            notes => notes(d, t),
            cut => Value::from_safe_string(UNIT_SEPARATOR.to_string()),
        }
    }

    fn event_view(&self, n: usize, e: &DigestEvent) -> EventView {
        let t = &self.locale;
        EventView {
            n,
            id: e.id.clone(),
            title: collapse_whitespace(&event_title(e)),
            url: e.sources.first().map(|s| s.url.clone()).unwrap_or_default(),
            summary: collapse_whitespace(&e.summary),
            why: collapse_whitespace(&e.why_it_matters),
            layers: t.layer_list(&e.layers),
            layer_list: e
                .layers
                .iter()
                .map(|id| LayerLink {
                    id: id.clone(),
                    name: t.layer(id).to_string(),
                })
                .collect(),
            follow_up: e
                .follow_up
                .as_ref()
                .map(|f| collapse_whitespace(&follow_up_line(f, t))),
            follow_up_url: e
                .follow_up
                .as_ref()
                .and_then(|f| self.site_url(&follow_up_path(f))),
            follow_up_path: e
                .follow_up
                .as_ref()
                .map(|f| format!("/{}", follow_up_path(f))),
            resolves: e
                .follow_up
                .as_ref()
                .and_then(|f| resolves_line(f, t))
                .map(|w| collapse_whitespace(&w)),
            score: e.score.to_string(),
            kind: format!("{:?}", e.kind).to_lowercase(),
            sources: e
                .sources
                .iter()
                .zip(source_labels(&e.sources, t))
                .map(|(s, label)| LinkView {
                    label,
                    name: s.name.clone(),
                    url: s.url.clone(),
                })
                .collect(),
        }
    }
}

/// A label ("Why it matters:", "为什么重要：") emphasised with `open`…`close` in a Markdown
/// dialect; the locale's `label_gap` goes after it ([`label_then`]). Markdown ends emphasis
/// at a closing mark after punctuation only when whitespace or punctuation follows it, so
/// "**为什么重要：**" would need a space after it that Chinese typography does not put after
/// a full-width colon (zh-CN's `label_gap` is empty); the colon goes outside instead,
/// "**为什么重要**：". Other labels keep their colon inside: "**Why it matters:**".
pub fn emphasised_label(label: &str, open: &str, close: &str) -> String {
    match label.strip_suffix('：') {
        Some(words) => format!("{open}{words}{close}："),
        None => format!("{open}{label}{close}"),
    }
}

/// A label followed by the locale's gap before its text (`label_gap`): "Score: ",
/// "评分：".
pub fn label_then(label: &str, t: &Locale) -> String {
    format!("{label}{}", t.get("label_gap"))
}

/// The text of each of an event's source links: the source's name ("arXiv",
/// "NVIDIA/cutlass"), numbered when two links share one ("arXiv 1", "arXiv 2"), "Source n"
/// when it has none. A reader sees where a link goes before following it, which "Source 1"
/// did not say. Plain text: each render escapes it for its markup.
pub fn source_labels(sources: &[SourceLink], t: &Locale) -> Vec<String> {
    let names: Vec<String> = sources
        .iter()
        .map(|s| collapse_whitespace(&s.name))
        .collect();
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            if name.is_empty() {
                return t.fill("source_n", &[("n", &(i + 1).to_string())]);
            }
            let shared = names.iter().filter(|n| *n == name).count() > 1;
            let nth = seen.entry(name).or_default();
            *nth += 1;
            if shared {
                format!("{name} {nth}")
            } else {
                name.clone()
            }
        })
        .collect()
}

/// An event's title as a reader sees it: marked ★ when it is about something they follow
/// (crate::following). Every render heads an event with this.
pub fn event_title(e: &DigestEvent) -> std::borrow::Cow<'_, str> {
    match &e.followed {
        Some(_) => std::borrow::Cow::Owned(format!("★ {}", e.title)),
        None => std::borrow::Cow::Borrowed(&e.title),
    }
}

/// What marks a follow-up, in the reader's language: "Continues “title” (date)".
pub fn follow_up_line(f: &FollowUp, t: &Locale) -> String {
    let key = match f.reason {
        FollowUpReason::Update | FollowUpReason::Repeat => "follow_up_update",
        FollowUpReason::Code => "follow_up_code",
        FollowUpReason::Continues => "follow_up_continues",
    };
    let title = crate::text::truncate_chars(&collapse_whitespace(&f.title), 120);
    t.fill(key, &[("title", &title), ("date", &f.date.to_string())])
}

/// "Resolves that day's watch item: …", when the follow-up answers one.
pub fn resolves_line(f: &FollowUp, t: &Locale) -> Option<String> {
    let watch = f.resolves.as_deref()?;
    Some(t.fill("follow_up_resolves", &[("watch", watch)]))
}

/// The earlier digest's event, relative to the site: `digest/<date>#event-<id>`.
pub fn follow_up_path(f: &FollowUp) -> String {
    format!("digest/{}#event-{}", f.date, f.event_id)
}

/// The generation-notes lines, from the locale table.
pub fn notes(d: &Digest, t: &Locale) -> Vec<String> {
    let mut lines = vec![
        t.fill(
            "window",
            &[
                ("start", &d.window.start.to_rfc3339()),
                ("end", &d.window.end.to_rfc3339()),
            ],
        ),
        t.fill("mode", &[("mode", &d.generation_mode)]),
        t.get("disclaimer").to_string(),
    ];
    if !d.repeats.is_empty() {
        let list: Vec<String> = d
            .repeats
            .iter()
            .map(|f| {
                format!(
                    "{} ({})",
                    crate::text::truncate_chars(&collapse_whitespace(&f.title), 120),
                    f.date
                )
            })
            .collect();
        lines.push(t.fill(
            "note_repeats",
            &[("list", &list.join(t.get("list_separator")))],
        ));
    }
    let counts: Vec<String> = d
        .source_counts
        .iter()
        .filter(|c| c.items > 0)
        .map(|c| {
            t.fill(
                "raw_item",
                &[("source", &c.source), ("n", &c.items.to_string())],
            )
        })
        .collect();
    let none = "0".to_string();
    lines.push(format!(
        "{}{}",
        t.get("raw_items"),
        if counts.is_empty() {
            none
        } else {
            counts.join(t.get("list_separator"))
        }
    ));
    if !d.failed_sources.is_empty() {
        let failed: Vec<String> = d
            .failed_sources
            .iter()
            .map(|f| {
                let reason = f.kind.locale_key().map_or(f.error.as_str(), |k| t.get(k));
                t.fill(
                    "failed_source",
                    &[("source", &f.source), ("reason", reason)],
                )
            })
            .collect();
        lines.push(format!(
            "{}{}",
            t.get("failed"),
            failed.join(t.get("list_separator"))
        ));
    }
    // Which events fell back and why: the ones this reader sees, by name.
    let fell_back: Vec<String> = d
        .events()
        .filter(|e| e.llm_fallback)
        .map(|e| {
            let reason = e
                .llm_fallback_reason
                .as_deref()
                .map_or_else(String::new, |r| t.get(&format!("fallback_{r}")).to_string());
            t.fill(
                "llm_fallback_event",
                &[
                    ("title", &crate::text::truncate_chars(&e.title, 60)),
                    ("reason", &reason),
                ],
            )
        })
        .collect();
    if !fell_back.is_empty() {
        lines.push(t.fill(
            "llm_fallbacks",
            &[
                ("n", &fell_back.len().to_string()),
                ("events", &fell_back.join(t.get("list_separator"))),
            ],
        ));
    }
    if let Some(u) = &d.llm_usage {
        let cost = u.cost.map_or_else(String::new, |c| {
            t.fill("llm_cost", &[("cost", &format!("{c:.4}"))])
        });
        lines.push(t.fill(
            "llm_usage",
            &[
                ("requests", &u.requests.to_string()),
                ("prompt", &u.prompt_tokens.to_string()),
                ("completion", &u.completion_tokens.to_string()),
                ("cost", &cost),
            ],
        ));
    }
    lines
}

/// Escapes & < > " for HTML text and attributes (and Telegram's HTML parse mode).
pub fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn md_escape(value: String) -> String {
    crate::text::markdown_escape(&value)
}

fn md_url(value: String) -> String {
    crate::text::markdown_url(&value)
}

/// The first line of every render: the date, then the title, so a forwarded or archived
/// copy always says which day it is.
pub fn dated_title(d: &Digest) -> String {
    let when = d.week.clone().unwrap_or_else(|| d.date.to_string());
    collapse_whitespace(&format!("{when} · {}", d.title))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str) -> SourceLink {
        SourceLink {
            name: name.into(),
            url: format!("https://example.com/{name}"),
        }
    }

    #[test]
    fn a_full_width_colon_stays_outside_the_emphasis_with_nothing_after_it() {
        // CommonMark would not close "**为什么重要：**" before a Han character.
        let (zh, en) = (Locale::builtin("zh-CN"), Locale::builtin("en"));
        assert_eq!(
            label_then(&emphasised_label("为什么重要：", "**", "**"), &zh),
            "**为什么重要**："
        );
        assert_eq!(
            label_then(&emphasised_label("Why it matters:", "**", "**"), &en),
            "**Why it matters:** "
        );
        assert_eq!(label_then("事件评分：", &zh), "事件评分：");
        assert_eq!(label_then("Event score:", &en), "Event score: ");
        let md = Renderer::new("zh-CN", None).unwrap();
        let env_label = md
            .env
            .render_str(
                "{{ l | md_label }}x",
                minijinja::context! { l => "涉及层级：" },
            )
            .unwrap();
        assert_eq!(env_label, "**涉及层级**：x");
    }

    #[test]
    fn source_links_are_labelled_by_their_source() {
        let zh = Locale::builtin("zh-CN");
        let labels = source_labels(
            &[link("arXiv"), link("NVIDIA"), link("arXiv"), link(" ")],
            &zh,
        );
        assert_eq!(labels, ["arXiv 1", "NVIDIA", "arXiv 2", "原始来源 4"]);
        let en = Locale::builtin("en");
        assert_eq!(
            source_labels(&[link("NVIDIA/cutlass")], &en),
            ["NVIDIA/cutlass"]
        );
    }
}
