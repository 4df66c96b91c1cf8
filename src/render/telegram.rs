//! Packing Telegram HTML units into messages. Pure.
//!
//! The template keeps every line tag-balanced, so a unit too long for one message can be
//! split between lines without breaking HTML. Lengths are counted in UTF-16 code units of
//! the raw HTML, which is never less than what Telegram counts after parsing entities.

pub const MAX_MESSAGE_CHARS: usize = 4096;

pub fn length(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Packs units in order into as few messages as fit in `max` each.
pub fn pack(units: &[&str], max: usize) -> Vec<String> {
    let mut messages: Vec<String> = Vec::new();
    let mut current = String::new();
    for unit in units.iter().flat_map(|u| split_long(u, max)) {
        let joined = if current.is_empty() {
            length(&unit)
        } else {
            length(&current) + 2 + length(&unit)
        };
        if joined > max && !current.is_empty() {
            messages.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push_str("\n\n");
        }
        current.push_str(&unit);
    }
    if !current.is_empty() {
        messages.push(current);
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

fn split_line(line: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while length(rest) > max {
        // Candidate cut points: spaces outside tags and entities, within the limit.
        let mut in_tag = false;
        let mut in_entity = false;
        let mut cut = None;
        let mut units = 0;
        for (i, c) in rest.char_indices() {
            units += c.len_utf16();
            if units > max {
                break;
            }
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                '&' => in_entity = true,
                ';' => in_entity = false,
                ' ' if !in_tag && !in_entity => cut = Some(i),
                _ => {}
            }
        }
        let at = cut.unwrap_or_else(|| {
            // No space: cut before the last complete character within the limit.
            let mut units = 0;
            rest.char_indices()
                .take_while(|(_, c)| {
                    units += c.len_utf16();
                    units <= max
                })
                .last()
                .map_or(1, |(i, c)| i + c.len_utf8())
        });
        out.push(rest[..at].to_string());
        rest = rest[at..].trim_start();
    }
    if !rest.is_empty() {
        out.push(rest.to_string());
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
