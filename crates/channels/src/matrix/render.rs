//! The digest as Matrix messages: `m.text` with a plain body (the fallback clients without
//! HTML show, and what notifications quote) and an `org.matrix.custom.html` formatted body
//! using only tags the spec suggests clients allow (`h4`, `p`, `b`, `i`, `a`, `br`, `ul`,
//! `li`), cut at event boundaries so both bodies stay well inside an event's 65,536 bytes.

use serde_json::{Value, json};

use crate::robot::{self, Piece};
use kdigest_core::locale::Locale;
use kdigest_core::model::Digest;
use kdigest_core::render::{
    dated_title, emphasised_label, escape_html, event_title, follow_up_line, label_then,
    source_labels,
};
use kdigest_core::text::collapse_whitespace;

/// Both bodies of one message together, in bytes: the rest of 65,536 is the envelope's.
pub const BODIES_MAX: usize = 60_000;

/// One piece of the digest in both forms.
struct Unit {
    plain: String,
    html: String,
}

fn h(text: &str) -> String {
    escape_html(&collapse_whitespace(text))
}

/// A link's address inside `href="…"`: only http(s), escaped.
fn href(url: &str) -> Option<String> {
    (url.starts_with("https://") || url.starts_with("http://")).then(|| escape_html(url))
}

fn link(text: &str, url: &str) -> String {
    match href(url) {
        Some(u) => format!("<a href=\"{u}\">{}</a>", h(text)),
        None => h(text),
    }
}

fn units(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Unit> {
    let (watch, notes) = robot::closing_lines(d, t);
    robot::pieces(d, t)
        .into_iter()
        .map(|piece| match piece {
            Piece::Header => Unit {
                plain: format!("{}\n{}", t.get("overview"), collapse_whitespace(&d.overview)),
                html: format!("<p><b>{}</b><br>{}</p>", h(t.get("overview")), h(&d.overview)),
            },
            Piece::Event { section, n, event: e } => {
                let mut plain = String::new();
                let mut html = String::new();
                if let Some(s) = section {
                    plain.push_str(&format!("{s}\n"));
                    html.push_str(&format!("<h4>{}</h4>", h(s)));
                }
                let url = e.sources.first().map_or("", |s| s.url.as_str());
                let meta = format!(
                    "{}{}/100 · {}{}",
                    label_then(t.get("score"), t),
                    e.score,
                    label_then(t.get("layers"), t),
                    t.layer_list(&e.layers)
                );
                plain.push_str(&format!(
                    "{n}. {}\n{meta}\n{}\n{}{}",
                    collapse_whitespace(&event_title(e)),
                    collapse_whitespace(&e.summary),
                    label_then(t.get("why"), t),
                    collapse_whitespace(&e.why_it_matters)
                ));
                html.push_str(&format!(
                    "<p><b>{n}. {}</b><br><i>{}</i><br>{}<br>{}{}",
                    link(&event_title(e), url),
                    h(&meta),
                    h(&e.summary),
                    label_then(&emphasised_label(&h(t.get("why")), "<b>", "</b>"), t),
                    h(&e.why_it_matters)
                ));
                let labels = source_labels(&e.sources, t);
                if !e.sources.is_empty() {
                    plain.push_str(&format!(
                        "\n{}",
                        e.sources.iter().map(|s| s.url.as_str()).collect::<Vec<_>>().join(" ")
                    ));
                    let links: Vec<String> =
                        e.sources.iter().zip(&labels).map(|(s, l)| link(l, &s.url)).collect();
                    html.push_str(&format!("<br>{}", links.join(" · ")));
                }
                if let Some(f) = &e.follow_up {
                    let line = follow_up_line(f, t);
                    plain.push_str(&format!("\n↪ {line}"));
                    html.push_str(&format!("<br>↪ {}", h(&line)));
                }
                html.push_str("</p>");
                Unit { plain, html }
            }
            Piece::Closing => {
                let mut plain = String::new();
                let mut html = String::new();
                if !watch.is_empty() {
                    plain.push_str(&format!("{}\n", t.get("watchlist")));
                    html.push_str(&format!("<p><b>{}</b></p><ul>", h(t.get("watchlist"))));
                    for w in &watch {
                        plain.push_str(&format!("- {w}\n"));
                        html.push_str(&format!("<li>{}</li>", h(w)));
                    }
                    html.push_str("</ul>");
                }
                plain.push_str(&format!("{}\n", t.get("notes")));
                html.push_str(&format!("<p><b>{}</b></p><ul>", h(t.get("notes"))));
                for line in &notes {
                    plain.push_str(&format!("- {line}\n"));
                    html.push_str(&format!("<li>{}</li>", h(line)));
                }
                html.push_str("</ul>");
                if let Some(site) = site {
                    plain.push_str(site);
                    html.push_str(&format!("<p>{}</p>", link("Web", site)));
                }
                Unit {
                    plain: plain.trim_end().to_string(),
                    html,
                }
            }
        })
        .collect()
}

/// The digest's messages, in order, without room or transaction (added when sending).
pub fn messages(d: &Digest, t: &Locale, site: Option<&str>) -> Vec<Value> {
    let title = dated_title(d);
    let groups = robot::pack(
        units(d, t, site),
        BODIES_MAX - 2 * title.len() - 64,
        |u: &[Unit]| u.iter().map(|u| u.plain.len() + u.html.len() + 2).sum(),
        |u, over| Unit {
            plain: robot::shorten_text(&u.plain, over / 2 + 1),
            html: format!("<p>{}</p>", h(&robot::shorten_text(&u.plain, over / 2 + 1))),
        },
    );
    let total = groups.len();
    groups
        .into_iter()
        .enumerate()
        .map(|(i, units)| {
            let heading = format!("{title}{}", robot::part_suffix(i, total));
            let plain: Vec<&str> = units.iter().map(|u| u.plain.as_str()).collect();
            let html: String = units.iter().map(|u| u.html.as_str()).collect();
            json!({
                "msgtype": "m.text",
                "body": format!("{heading}\n\n{}", plain.join("\n\n")),
                "format": "org.matrix.custom.html",
                "formatted_body": format!("<h3>{}</h3>{html}", h(&heading)),
            })
        })
        .collect()
}

/// What in one message breaks Matrix's limits or the shape kdigest sends.
pub fn limit_problems(message: &str) -> Vec<String> {
    let v: Value = match serde_json::from_str(message) {
        Ok(v) => v,
        Err(e) => return vec![format!("not JSON: {e}")],
    };
    let mut problems = Vec::new();
    if !matches!(v["msgtype"].as_str(), Some("m.text" | "m.notice")) {
        problems.push(format!("msgtype {}", v["msgtype"]));
    }
    if v["body"].as_str().is_none_or(str::is_empty) {
        problems.push("no body".into());
    }
    if v["formatted_body"].is_string() && v["format"] != "org.matrix.custom.html" {
        problems.push("a formatted body without its format".into());
    }
    let size = message.len();
    if size > super::EVENT_MAX - 1024 {
        problems.push(format!("{size} bytes, above {} with the envelope", super::EVENT_MAX));
    }
    problems
}
