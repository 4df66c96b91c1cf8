//! Reading sections out of the TOML document and describing serde's errors: key paths, unknown
//! keys with the nearest valid one, every problem collected rather than the first. Shared by
//! the application's configuration and the channels' sections.

use serde::de::{DeserializeOwned, IntoDeserializer};

use super::location::{self, Location, key_at};
use super::{ConfigError, Problem};

/// The parsed document: toml_edit keeps the byte span of every key and value, so a problem
/// can point at its line and column.
pub type Doc = toml_edit::ImDocument<String>;

/// Section `key` of the document, or its defaults when the file has none.
pub fn section<T: DeserializeOwned + Default>(
    doc: &Doc,
    key: &str,
    problems: &mut Vec<String>,
) -> T {
    match doc.get(key) {
        None => T::default(),
        Some(item) => deserialize_at(doc, item, key, problems).unwrap_or_default(),
    }
}

/// Deserialises a table; unknown keys are reported and dropped one by one so the rest of
/// the section is still checked (serde stops at the first error).
pub fn deserialize_at<T: DeserializeOwned>(
    doc: &Doc,
    item: &toml_edit::Item,
    path: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    let Ok(mut value) = item.clone().into_value() else {
        problems.push(format!("{path}: expected a table such as [{path}]"));
        return None;
    };
    loop {
        match T::deserialize(value.clone().into_deserializer()) {
            Ok(v) => return Some(v),
            Err(e) => {
                let at = e.span().and_then(|span| key_at(doc, &span));
                problems.push(describe_serde_error(
                    at.as_deref().unwrap_or(path),
                    e.message(),
                ));
                let removed = match (unknown_field(e.message()), value.as_inline_table_mut()) {
                    (Some(field), Some(table)) => table.remove(&field).is_some(),
                    _ => false,
                };
                if !removed {
                    return None;
                }
            }
        }
    }
}

pub fn unknown_field(message: &str) -> Option<String> {
    let rest = message.trim().strip_prefix("unknown field `")?;
    Some(rest.split('`').next()?.to_string())
}

/// Turns serde's messages into ones that name the key path and suggest the nearest key.
pub fn describe_serde_error(path: &str, message: &str) -> String {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, tail) = rest.split_once('`').unwrap_or((rest, ""));
        let allowed: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
        return unknown_key_message(field, path, &allowed);
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.trim_end_matches('`');
        return format!("{path}.{field}: required key is missing; add `{field} = ...`");
    }
    format!("{path}: {}", plain_types(message))
}

/// serde names Rust types ("expected usize"); a config file's reader thinks in TOML types.
fn plain_types(message: &str) -> String {
    let mut out = message.to_string();
    for (rust, toml) in [
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected u64", "expected a whole number, 0 or more"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u16", "expected a whole number from 0 to 65535"),
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a sequence", "expected an array [...]"),
    ] {
        if let Some(rest) = out.strip_suffix(rust) {
            out = format!("{rest}{toml}");
        }
    }
    out
}

/// The dotted key a TOML line assigns (`[daemon]` ... `lease_secs = ...` ->
/// `daemon.lease_secs`), for syntax errors that toml_edit reports by position only.
pub fn key_at_line(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let key = lines.get(line.checked_sub(1)?)?.split_once('=')?.0.trim();
    if key.is_empty() || key.starts_with('#') {
        return None;
    }
    let table = lines[..line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    Some(match table {
        Some(t) if !t.is_empty() => format!("{t}.{key}"),
        _ => key.to_string(),
    })
}

pub fn unknown_key_message(key: &str, parent: &str, allowed: &[&str]) -> String {
    let full = if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    };
    let nearest = allowed
        .iter()
        .min_by_key(|candidate| edit_distance(key, candidate));
    let mut msg = format!("{full}: unknown key");
    if let Some(n) = nearest.filter(|n| edit_distance(key, n) <= key.len().max(3) / 2 + 1) {
        msg.push_str(&format!("; did you mean `{n}`?"));
    }
    msg.push_str(&format!(" Valid keys here: {}", allowed.join(", ")));
    msg
}

/// Levenshtein distance over chars; inputs are short config keys.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Config names the environment variable that holds a secret, never the secret itself.
pub fn env_var_name(key: &str, value: &str, what: &str, problems: &mut Vec<String>) {
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        problems.push(format!(
            "{key}: \"{value}\" is not an environment variable name; the {what} itself never goes in config.toml"
        ));
    }
}

/// `raw` when it is an http or https URL.
pub fn http_url(raw: &str) -> Option<url::Url> {
    url::Url::parse(raw)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
}

/// Gives each problem the place of the key its message starts with ("fetch.timeout: ...").
pub fn locate(text: &str, doc: &Doc, problems: Vec<String>) -> ConfigError {
    let problems = problems
        .into_iter()
        .map(|message| {
            let at = message
                .split_once(": ")
                .and_then(|(path, _)| location::path_span(doc, path))
                .map(|span| Location::of_span(text, span));
            Problem { message, at }
        })
        .collect();
    ConfigError {
        file: None,
        problems,
    }
}

/// The TOML document of a configuration text, or its syntax error at its line and column.
pub fn document(text: &str) -> Result<Doc, ConfigError> {
    text
            .parse()
            .map_err(|e: toml_edit::TomlError| {
                let at = e.span().map(|span| Location::of_span(text, span));
                let key = at.as_ref().and_then(|l| key_at_line(text, l.line));
                let message = match key {
                    Some(key) if e.message().contains("number too large") => format!(
                        "{key}: the number is too large for TOML (integers go up to 9223372036854775807); use a value in the key's range (config.toml documents it)"
                    ),
                    _ => format!("TOML syntax error: {}", e.message().trim()),
                };
                ConfigError {
                    file: None,
                    problems: vec![Problem { message, at }],
                }
            })
}
