//! Where a problem is in the file: key paths (`fetch.concurrency`, `sources[2].url`) to line
//! and column, and the byte span of a bad value back to its key path.

use std::ops::Range;

use toml_edit::{Item, Table, Value};

use super::read::Doc;

/// A position in the config text, with the line itself for the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub source_line: String,
    /// Characters to underline, at least 1.
    pub width: usize,
}

impl Location {
    pub fn of_span(text: &str, span: Range<usize>) -> Location {
        let start = text.floor_char_boundary(span.start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let source_line = text[line_start..line_end]
            .trim_end_matches('\r')
            .to_string();
        let end = text.floor_char_boundary(span.end.clamp(start, line_end));
        Location {
            line: text[..start].matches('\n').count() + 1,
            column: text[line_start..start].chars().count() + 1,
            width: text[start..end].chars().count().max(1),
            source_line,
        }
    }
}

/// The span to show for a key path: the key itself, or its nearest ancestor that exists
/// (a missing key points at its section).
pub fn path_span(doc: &Doc, path: &str) -> Option<Range<usize>> {
    let mut table: &dyn toml_edit::TableLike = doc.as_table();
    let mut best = None;
    let segments = segments(path)?;
    for (i, (name, index)) in segments.iter().enumerate() {
        let Some((key, item)) = table.get_key_value(name) else {
            break;
        };
        best = key.span().or(best);
        let item = match (item, index) {
            (Item::ArrayOfTables(a), Some(n)) => match a.get(*n) {
                Some(t) => {
                    best = t.span().or(best);
                    t as &dyn toml_edit::TableLike
                }
                None => break,
            },
            (item, None) => match item.as_table_like() {
                Some(t) => t,
                None => {
                    if i + 1 == segments.len() {
                        best = item.span().or(best);
                    }
                    break;
                }
            },
            _ => break,
        };
        table = item;
    }
    best
}

/// `a.b[2].c` -> [("a", None), ("b", Some(2)), ("c", None)]; None if it is not a key path.
fn segments(path: &str) -> Option<Vec<(String, Option<usize>)>> {
    path.split('.')
        .map(|seg| match seg.split_once('[') {
            Some((name, rest)) => {
                let n = rest.strip_suffix(']')?.parse().ok()?;
                Some((name.to_string(), Some(n)))
            }
            None if !seg.is_empty() && !seg.contains(' ') => Some((seg.to_string(), None)),
            None => None,
        })
        .collect()
}

/// The deepest key path whose value contains `span` (the value a serde error points at).
pub fn key_at(doc: &Doc, span: &Range<usize>) -> Option<String> {
    in_table(doc.as_table(), span, "")
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn contains(outer: Option<Range<usize>>, inner: &Range<usize>) -> bool {
    outer.is_some_and(|o| o.start <= inner.start && inner.end <= o.end)
}

fn in_table(table: &Table, span: &Range<usize>, prefix: &str) -> Option<String> {
    for (key, item) in table.iter() {
        let path = join(prefix, key);
        let found = match item {
            Item::Value(v) => in_value(v, span, &path),
            Item::Table(t) => in_table(t, span, &path),
            Item::ArrayOfTables(a) => a
                .iter()
                .enumerate()
                .find_map(|(i, t)| in_table(t, span, &format!("{path}[{i}]"))),
            Item::None => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

fn in_value(value: &Value, span: &Range<usize>, path: &str) -> Option<String> {
    if !contains(value.span(), span) {
        return None;
    }
    let deeper = match value {
        Value::InlineTable(t) => t
            .iter()
            .find_map(|(k, v)| in_value(v, span, &join(path, k))),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| in_value(v, span, &format!("{path}[{i}]"))),
        _ => None,
    };
    Some(deeper.unwrap_or_else(|| path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Doc {
        text.parse().unwrap()
    }

    #[test]
    fn key_paths_resolve_to_lines() {
        let text = "[fetch]\nconcurrency = \"32\"\n\n[[sources]]\nname = \"a\"\n\n[[sources]]\nname = \"b\"\nurl = 3\n";
        let d = doc(text);
        let at = |p: &str| Location::of_span(text, path_span(&d, p).unwrap());
        assert_eq!(at("fetch.concurrency").line, 2);
        assert_eq!(at("sources[1].url").line, 9);
        assert_eq!(at("sources[1].missing").line, 7, "falls back to the table");
        assert_eq!(at("fetch.nothing").line, 1);
        assert!(path_span(&d, "nowhere").is_none());
    }

    #[test]
    fn value_spans_resolve_to_key_paths() {
        let text = "[delivery.telegram]\nrate = [1, \"x\"]\n";
        let d = doc(text);
        let start = text.find("\"x\"").unwrap();
        assert_eq!(
            key_at(&d, &(start..start + 3)).as_deref(),
            Some("delivery.telegram.rate[1]")
        );
    }

    #[test]
    fn columns_count_characters() {
        let text = "title = \"日本\"\nx = 1";
        let start = text.find("x =").unwrap();
        let loc = Location::of_span(text, start..start + 1);
        assert_eq!((loc.line, loc.column, loc.width), (2, 1, 1));
        let loc = Location::of_span(text, 8..16);
        assert_eq!((loc.line, loc.column, loc.width), (1, 9, 4));
    }
}
