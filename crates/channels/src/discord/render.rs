//! Discord message payloads (JSON bodies for "create message" and "execute webhook"). Pure.
//!
//! One header embed (title + overview), one embed per event, one closing embed (watch list
//! and generation notes). Every Discord limit is enforced here, because serenity checks only
//! a few: title 256, description 4096, 25 fields, field name 256 / value 1024, footer 2048,
//! author 256, 10 embeds and 6000 characters per message. Text over a limit is cut at a word
//! boundary and marked with '…'. `allowed_mentions` with no parse targets goes on every
//! message so feed text can never ping anyone.

use serde_json::{Value, json};

use kdigest_core::locale::Locale;
use kdigest_core::model::{Digest, DigestEvent};
use kdigest_core::text::{markdown_escape as esc, markdown_url, truncate_chars};

pub const TITLE_MAX: usize = 256;
pub const DESCRIPTION_MAX: usize = 4096;
pub const FIELDS_MAX: usize = 25;
pub const FIELD_NAME_MAX: usize = 256;
pub const FIELD_VALUE_MAX: usize = 1024;
pub const FOOTER_MAX: usize = 2048;
pub const AUTHOR_MAX: usize = 256;
pub const EMBEDS_PER_MESSAGE: usize = 10;
pub const CHARS_PER_MESSAGE: usize = 6000;

const GREEN: u32 = 0x2E_CC_71;
const BLUE: u32 = 0x34_98_DB;
const GREY: u32 = 0x95_A5_A6;

/// The messages of one digest, in order.
pub fn messages(d: &Digest, t: &Locale) -> Vec<Value> {
    let footer = truncate_chars(&format!("{} · {}", d.date, d.generation_mode), FOOTER_MAX);
    let mut embeds = vec![(
        json!({
            "title": truncate_chars(&esc(&kdigest_core::render::dated_title(d)), TITLE_MAX),
            "description": truncate_chars(&esc(&d.overview), DESCRIPTION_MAX),
            "footer": {"text": footer},
        }),
        None,
    )];
    for (n, (key, e)) in d
        .sections()
        .into_iter()
        .flat_map(|(key, events)| events.iter().map(move |e| (key, e)))
        .enumerate()
    {
        let n = if e.n > 0 { e.n } else { n + 1 };
        embeds.push((
            event_embed(n, e, t.get(key), &footer, t),
            Some((n, e.id.clone())),
        ));
    }
    let mut closing = String::new();
    if d.is_empty() {
        closing.push_str(t.get("empty"));
        closing.push_str("\n\n");
    }
    if !d.watchlist.is_empty() {
        closing.push_str(&format!("**{}**\n", t.get("watchlist")));
        for w in &d.watchlist {
            closing.push_str(&format!("• {}\n", esc(&w.text)));
        }
        closing.push('\n');
    }
    closing.push_str(&format!("**{}**\n", t.get("notes")));
    for line in kdigest_core::render::notes(d, t) {
        closing.push_str(&format!("• {}\n", esc(&line)));
    }
    embeds.push((
        json!({
            "description": truncate_chars(closing.trim_end(), DESCRIPTION_MAX),
            "footer": {"text": footer},
        }),
        None,
    ));
    pack(embeds)
}

fn event_embed(n: usize, e: &DigestEvent, section: &str, footer: &str, t: &Locale) -> Value {
    let follow_up = e.follow_up.as_ref().map_or_else(String::new, |f| {
        let resolves = kdigest_core::render::resolves_line(f, t)
            .map_or_else(String::new, |w| format!(" · {}", esc(&w)));
        format!("↪ {}{resolves}\n\n", esc(&kdigest_core::render::follow_up_line(f, t)))
    });
    let description = format!(
        "{follow_up}{}\n\n{}{}",
        esc(&e.summary),
        kdigest_core::render::label_then(&kdigest_core::render::emphasised_label(t.get("why"), "**", "**"), t),
        esc(&e.why_it_matters)
    );
    let mut fields = vec![
        json!({"name": field_name(t.get("layers")), "value": field_value(&t.layer_list(&e.layers)), "inline": true}),
        json!({"name": field_name(t.get("score")), "value": format!("{}/100", e.score), "inline": true}),
    ];
    // Source links, as many fields as needed, each within the field value limit.
    let mut value = String::new();
    for (s, label) in e.sources.iter().zip(kdigest_core::render::source_labels(&e.sources, t)) {
        let link = format!("[{}]({})", esc(&label), markdown_url(&s.url));
        if !value.is_empty() && value.chars().count() + 2 + link.chars().count() > FIELD_VALUE_MAX {
            fields.push(json!({"name": field_name(t.get("sources")), "value": std::mem::take(&mut value), "inline": false}));
        }
        if !value.is_empty() {
            value.push_str(", ");
        }
        value.push_str(&link);
    }
    if !value.is_empty() {
        fields.push(json!({"name": field_name(t.get("sources")), "value": field_value(&value), "inline": false}));
    }
    fields.truncate(FIELDS_MAX);
    let color = match e.score.as_f64() {
        s if s >= 85.0 => GREEN,
        s if s >= 70.0 => BLUE,
        _ => GREY,
    };
    let mut embed = json!({
        "author": {"name": truncate_chars(section, AUTHOR_MAX)},
        "title": truncate_chars(&format!("{n}. {}", esc(&kdigest_core::render::event_title(e))), TITLE_MAX),
        "description": truncate_chars(&description, DESCRIPTION_MAX),
        "color": color,
        "fields": fields,
        "footer": {"text": footer},
    });
    if let Some(first) = e.sources.first() {
        embed["url"] = Value::String(first.url.clone());
    }
    // One embed alone must fit a message: shorten the description until it does.
    while embed_chars(&embed) > CHARS_PER_MESSAGE {
        let description = embed["description"].as_str().unwrap_or("").to_string();
        let shorter = description
            .chars()
            .count()
            .saturating_sub(embed_chars(&embed) - CHARS_PER_MESSAGE + 1);
        if shorter == 0 {
            break;
        }
        embed["description"] = Value::String(truncate_chars(&description, shorter));
    }
    embed
}

fn field_name(s: &str) -> String {
    let s = s.trim_end_matches([':', '：']);
    truncate_chars(if s.is_empty() { "-" } else { s }, FIELD_NAME_MAX)
}

fn field_value(s: &str) -> String {
    truncate_chars(if s.is_empty() { "-" } else { s }, FIELD_VALUE_MAX)
}

/// Characters of an embed that count toward the 6000 limit.
/// What in one message breaks Discord's embed limits: at most [`EMBEDS_PER_MESSAGE`]
/// embeds of at most [`CHARS_PER_MESSAGE`] characters together, each title, description,
/// field, footer and author within its own limit, at most 5 rows of 5 buttons.
pub fn limit_problems(message: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let embeds = message["embeds"].as_array().map_or(&[][..], Vec::as_slice);
    if embeds.is_empty() || embeds.len() > EMBEDS_PER_MESSAGE {
        problems.push(format!("{} embeds, not 1 to {EMBEDS_PER_MESSAGE}", embeds.len()));
    }
    let total: usize = embeds.iter().map(embed_chars).sum();
    if total > CHARS_PER_MESSAGE {
        problems.push(format!("{total} characters in the embeds, above {CHARS_PER_MESSAGE}"));
    }
    let len = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    for (i, e) in embeds.iter().enumerate() {
        let fields = e["fields"].as_array().map_or(&[][..], Vec::as_slice);
        let checks = [
            ("title", len(&e["title"]), TITLE_MAX),
            ("description", len(&e["description"]), DESCRIPTION_MAX),
            ("footer", len(&e["footer"]["text"]), FOOTER_MAX),
            ("author", len(&e["author"]["name"]), AUTHOR_MAX),
            ("fields", fields.len(), FIELDS_MAX),
        ]
        .into_iter()
        .chain(fields.iter().flat_map(|f| {
            [("field name", len(&f["name"]), FIELD_NAME_MAX), ("field value", len(&f["value"]), FIELD_VALUE_MAX)]
        }));
        for (what, n, max) in checks {
            if n > max {
                problems.push(format!("embed {i}: {what} of {n}, above {max}"));
            }
        }
    }
    let rows = message["components"].as_array().map_or(&[][..], Vec::as_slice);
    if rows.len() > 5 || rows.iter().any(|r| r["components"].as_array().is_some_and(|b| b.len() > 5)) {
        problems.push("more than 5 rows of 5 buttons".into());
    }
    problems
}

pub fn embed_chars(embed: &Value) -> usize {
    let len = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    let mut n = len(&embed["title"])
        + len(&embed["description"])
        + len(&embed["footer"]["text"])
        + len(&embed["author"]["name"]);
    if let Some(fields) = embed["fields"].as_array() {
        n += fields
            .iter()
            .map(|f| len(&f["name"]) + len(&f["value"]))
            .sum::<usize>();
    }
    n
}

/// An embed, and the event (number shown, id) it is about.
type Embed = (Value, Option<(usize, String)>);

fn pack(embeds: Vec<Embed>) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut current: Vec<Embed> = Vec::new();
    let mut chars = 0;
    for embed in embeds {
        let n = embed_chars(&embed.0);
        if !current.is_empty()
            && (current.len() == EMBEDS_PER_MESSAGE || chars + n > CHARS_PER_MESSAGE)
        {
            messages.push(message(std::mem::take(&mut current)));
            chars = 0;
        }
        chars += n;
        current.push(embed);
    }
    if !current.is_empty() {
        messages.push(message(current));
    }
    messages
}

/// Vote buttons per event, two events to a row: ten embeds a message need at most five
/// rows of four buttons, within Discord's five rows of five.
const EVENTS_PER_ROW: usize = 2;

fn message(embeds: Vec<Embed>) -> Value {
    use kdigest_core::feedback::{Vote, button_data};
    let events: Vec<&(usize, String)> = embeds.iter().filter_map(|(_, e)| e.as_ref()).collect();
    let rows: Vec<Value> = events
        .chunks(EVENTS_PER_ROW)
        .map(|chunk| {
            let buttons: Vec<Value> = chunk
                .iter()
                .flat_map(|(n, id)| {
                    [Vote::Up, Vote::Down].map(|v| {
                        json!({"type": 2, "style": 2, "label": format!("{} {n}", v.emoji()), "custom_id": button_data(v, id)})
                    })
                })
                .collect();
            json!({"type": 1, "components": buttons})
        })
        .collect();
    let embeds: Vec<Value> = embeds.into_iter().map(|(e, _)| e).collect();
    let mut m = json!({"embeds": embeds, "allowed_mentions": {"parse": []}});
    if !rows.is_empty() {
        m["components"] = Value::Array(rows);
    }
    m
}
