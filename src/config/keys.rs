//! Reading sections out of the TOML table and describing serde's errors: key paths, unknown
//! keys with the nearest valid one, every problem collected rather than the first.

use serde::de::DeserializeOwned;

use super::raw::{RawLayer, RawSource};

pub(super) fn section<T: DeserializeOwned + Default>(
    table: &toml::Table,
    key: &str,
    problems: &mut Vec<String>,
) -> T {
    match table.get(key) {
        None => T::default(),
        Some(value) => deserialize_at(value.clone(), key, problems).unwrap_or_default(),
    }
}

/// Deserialises a table; unknown keys are reported and dropped one by one so the rest of
/// the section is still checked (serde stops at the first error).
pub(super) fn deserialize_at<T: DeserializeOwned>(
    mut value: toml::Value,
    path: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    loop {
        match value.clone().try_into::<T>() {
            Ok(v) => return Some(v),
            Err(e) => {
                problems.push(describe_serde_error(path, e.message()));
                let removed = match (unknown_field(e.message()), value.as_table_mut()) {
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

pub(super) fn unknown_field(message: &str) -> Option<String> {
    let rest = message.trim().strip_prefix("unknown field `")?;
    Some(rest.split('`').next()?.to_string())
}

pub(super) fn raw_sources(
    table: &toml::Table,
    problems: &mut Vec<String>,
) -> Option<Vec<RawSource>> {
    let value = table.get("sources")?;
    let Some(array) = value.as_array() else {
        problems
            .push("sources: expected an array of tables ([[sources]]), got a single value".into());
        return Some(Vec::new());
    };
    let parsed = array
        .iter()
        .enumerate()
        .filter_map(|(i, v)| deserialize_at(v.clone(), &format!("sources[{i}]"), problems))
        .collect();
    Some(parsed)
}

pub(super) fn raw_layers(
    table: &toml::Table,
    problems: &mut Vec<String>,
) -> Option<Vec<(String, RawLayer)>> {
    let value = table.get("layers")?;
    let Some(layers) = value.as_table() else {
        problems.push("layers: expected tables such as [layers.runtime]".into());
        return Some(Vec::new());
    };
    let parsed = layers
        .iter()
        .filter_map(|(name, v)| {
            deserialize_at(v.clone(), &format!("layers.{name}"), problems)
                .map(|l| (name.clone(), l))
        })
        .collect();
    Some(parsed)
}

/// Turns serde's messages into ones that name the key path and suggest the nearest key.
pub(super) fn describe_serde_error(path: &str, message: &str) -> String {
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
    format!("{path}: {message}")
}

pub(super) fn unknown_key_message(key: &str, parent: &str, allowed: &[&str]) -> String {
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
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
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
