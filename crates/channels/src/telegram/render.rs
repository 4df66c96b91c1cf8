//! Telegram HTML messages: the template's units packed into messages. Pure.
//!
//! The template keeps every line tag-balanced, so a unit too long for one message can be
//! split between lines without breaking HTML. Lengths are counted in UTF-16 code units of
//! the raw HTML, which is never less than what Telegram counts after parsing entities.

use kdigest_core::model::Digest;
use kdigest_core::render::{Renderer, UNIT_SEPARATOR};

pub const MAX_MESSAGE_CHARS: usize = 4096;

/// One Telegram message: its HTML and the events that end in it, whose 👍/👎 buttons go
/// under it (number as shown, event id).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub html: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<(usize, String)>,
}

/// Telegram HTML messages, each at most 4096 characters, split at event boundaries.
pub fn messages(renderer: &Renderer, digest: &Digest) -> anyhow::Result<Vec<String>> {
    Ok(messages_with_votes(renderer, digest)?
        .into_iter()
        .map(|m| m.html)
        .collect())
}

/// The messages with the vote buttons of the events each one ends. The template makes one
/// unit per event between the header and the footer; a template that does not (an
/// override) gets no buttons rather than wrong ones.
pub fn messages_with_votes(renderer: &Renderer, digest: &Digest) -> anyhow::Result<Vec<Message>> {
    let html = renderer.template("telegram.html.j2", digest)?;
    let units: Vec<&str> = html
        .split(UNIT_SEPARATOR)
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect();
    let events: Vec<(usize, String)> = digest
        .events()
        .enumerate()
        .map(|(i, e)| (if e.n > 0 { e.n } else { i + 1 }, e.id.clone()))
        .collect();
    let tagged: Vec<(&str, Option<(usize, String)>)> = if units.len() == events.len() + 2 {
        units
            .iter()
            .enumerate()
            .map(|(i, u)| (*u, (1..=events.len()).contains(&i).then(|| events[i - 1].clone())))
            .collect()
    } else {
        units.iter().map(|u| (*u, None)).collect()
    };
    Ok(pack_tagged(&tagged, MAX_MESSAGE_CHARS)
        .into_iter()
        .map(|(html, votes)| Message { html, votes })
        .collect())
}

pub fn length(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Packs units in order into as few messages as fit in `max` each.
pub fn pack(units: &[&str], max: usize) -> Vec<String> {
    let tagged: Vec<(&str, Option<()>)> = units.iter().map(|u| (*u, None)).collect();
    pack_tagged(&tagged, max)
        .into_iter()
        .map(|(m, _)| m)
        .collect()
}

/// [`pack`], keeping each unit's tag with the message its last piece is in.
fn pack_tagged<T: Clone>(units: &[(&str, Option<T>)], max: usize) -> Vec<(String, Vec<T>)> {
    let mut messages: Vec<(String, Vec<T>)> = Vec::new();
    let mut current = String::new();
    let mut tags: Vec<T> = Vec::new();
    for (unit, tag) in units {
        for piece in split_long(unit, max) {
            let joined = if current.is_empty() {
                length(&piece)
            } else {
                length(&current) + 2 + length(&piece)
            };
            if joined > max && !current.is_empty() {
                messages.push((std::mem::take(&mut current), std::mem::take(&mut tags)));
            }
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&piece);
        }
        tags.extend(tag.clone());
    }
    if !current.is_empty() {
        messages.push((current, tags));
    }
    messages
}

/// A unit that fits is returned whole; a longer one is cut between lines, and a single
/// line longer than `max` is cut at a space outside any tag or entity.
fn split_long(unit: &str, max: usize) -> Vec<String> {
    if length(unit) <= max {
        return vec![unit.to_string()];
    }
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in unit.lines().flat_map(|l| split_line(l, max)) {
        if !current.is_empty() && length(&current) + 1 + length(&line) > max {
            parts.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(&line);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Where a line can be cut: a byte index outside any tag or entity, and the elements open
/// there (name, opening tag), which the cut closes and the next part reopens.
struct Cut {
    at: usize,
    open: Vec<(String, String)>,
}

fn closers(open: &[(String, String)]) -> String {
    open.iter()
        .rev()
        .map(|(name, _)| format!("</{name}>"))
        .collect()
}

/// Cuts a line longer than `max` into parts that are each valid Telegram HTML: at a space
/// between elements where there is one, else at a space inside elements (closing them at
/// the cut and reopening them in the next part), else at a character boundary outside any
/// tag or entity. A hostile title or summary can therefore never yield a part cut inside
/// `<b><a href>`.
fn split_line(line: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line.to_string();
    while length(&rest) > max {
        let (mut between, mut inside, mut boundary): (Option<Cut>, Option<Cut>, Option<Cut>) =
            (None, None, None);
        let mut open: Vec<(String, String)> = Vec::new();
        let mut units = 0;
        let mut in_entity = false;
        let mut chars = rest.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if units + length(&closers(&open)) > max {
                break;
            }
            if c == '<' {
                let Some(end) = rest[i..].find('>').map(|e| i + e) else {
                    break;
                };
                let tag = &rest[i..=end];
                if let Some(name) = tag.strip_prefix("</") {
                    let name = name.trim_end_matches('>').trim();
                    if let Some(pos) = open.iter().rposition(|(n, _)| n == name) {
                        open.truncate(pos);
                    }
                } else if !tag.ends_with("/>") {
                    let name: String = tag[1..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    open.push((name, tag.to_string()));
                }
                units += length(tag);
                while chars.peek().is_some_and(|(j, _)| *j <= end) {
                    chars.next();
                }
                continue;
            }
            if !in_entity {
                let cut = || Cut {
                    at: i,
                    open: open.clone(),
                };
                if c == ' ' && open.is_empty() {
                    between = Some(cut());
                } else if c == ' ' {
                    inside = Some(cut());
                } else if c != '&' && i > 0 {
                    boundary = Some(cut());
                }
            }
            match c {
                '&' => in_entity = true,
                ';' => in_entity = false,
                _ => {}
            }
            units += c.len_utf16();
        }
        let Some(cut) = between.or(inside).or(boundary) else {
            // Nothing but one tag longer than a message: it cannot be sent as HTML anyway.
            out.push(rest.clone());
            return out;
        };
        let mut part = rest[..cut.at].trim_end().to_string();
        part.push_str(&closers(&cut.open));
        let reopen: String = cut.open.iter().map(|(_, tag)| tag.as_str()).collect();
        let next = format!("{reopen}{}", rest[cut.at..].trim_start());
        if next.len() >= rest.len() {
            // The reopened tags would undo the progress (absurdly long tags): cut plainly.
            out.push(part);
            rest = rest[cut.at..].trim_start().to_string();
            continue;
        }
        out.push(part);
        rest = next;
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_packed_in_order_without_exceeding_the_limit() {
        let units = ["a".repeat(40), "b".repeat(40), "c".repeat(40)];
        let refs: Vec<&str> = units.iter().map(String::as_str).collect();
        let messages = pack(&refs, 90);
        assert_eq!(
            messages,
            vec![format!("{}\n\n{}", units[0], units[1]), units[2].clone()]
        );
    }

    #[test]
    fn a_cut_inside_elements_closes_and_reopens_them() {
        let title = "FlashAttention kernel ".repeat(40);
        let line = format!("<b><a href=\"https://example.org/x\">{title}</a></b> &amp; more");
        let parts = split_long(&line, 200);
        assert!(parts.len() > 3);
        for p in &parts {
            assert!(length(p) <= 200, "{p}");
            assert_eq!(p.matches("<b>").count(), p.matches("</b>").count(), "{p}");
            assert_eq!(p.matches("<a ").count(), p.matches("</a>").count(), "{p}");
            assert!(!p.ends_with('&') && !p.contains("&am "), "{p}");
        }
        assert!(parts[1].starts_with("<b><a href=\"https://example.org/x\">"));
        let words = |s: &str| {
            s.replace("</a>", " ")
                .replace("</b>", " ")
                .split_whitespace()
                .filter(|w| !w.starts_with('<'))
                .count()
        };
        assert!(words(&parts.join(" ")) >= words(&line) - 1);
        // No space at all: cut at a character boundary, still balanced.
        let dense = format!("<i>{}</i>", "字".repeat(500));
        for p in split_long(&dense, 100) {
            assert!(
                p.starts_with("<i>") && p.ends_with("</i>") && length(&p) <= 100,
                "{p}"
            );
        }
    }

    #[test]
    fn an_oversized_line_is_cut_at_a_space_outside_tags() {
        let line = format!("<b>{}</b> {}", "x".repeat(10), "word ".repeat(30));
        let parts = split_long(&line, 50);
        assert!(parts.iter().all(|p| length(p) <= 50), "{parts:?}");
        assert!(parts[0].starts_with("<b>xxxxxxxxxx</b>"));
        assert_eq!(
            parts.join(" ").split_whitespace().count(),
            line.split_whitespace().count()
        );
    }
}
