//! The application's own section readers: `[delivery]` with its per-channel tables, the
//! sources and the layers. The shared grammar is `crate::settings::read`.

use crate::settings::read::{Doc, deserialize_at};

use super::raw::{RawLayer, RawSource};

/// `[delivery]` with its `[delivery.<channel>]` tables, one per channel of the registry.
pub(super) fn delivery_section(doc: &Doc, problems: &mut Vec<String>) -> super::raw::RawDelivery {
    let Some(item) = doc.get("delivery") else {
        return Default::default();
    };
    let mut item = item.clone();
    let mut channels = Vec::new();
    if let Some(table) = item.as_table_like_mut() {
        for channel in crate::channels::Channel::ALL {
            if let Some(sub) = table.remove(channel.as_str()) {
                let path = format!("delivery.{}", channel.as_str());
                if let Some(limits) = deserialize_at(doc, &sub, &path, problems) {
                    channels.push((*channel, limits));
                }
            }
        }
    }
    let mut raw: super::raw::RawDelivery =
        deserialize_at(doc, &item, "delivery", problems).unwrap_or_default();
    raw.channels = channels;
    raw
}

pub(super) fn raw_sources(doc: &Doc, problems: &mut Vec<String>) -> Option<Vec<RawSource>> {
    let item = doc.get("sources")?;
    let Some(array) = item.as_array_of_tables() else {
        problems
            .push("sources: expected an array of tables ([[sources]]), got a single value".into());
        return Some(Vec::new());
    };
    let parsed = array
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let item = toml_edit::Item::Table(t.clone());
            deserialize_at(doc, &item, &format!("sources[{i}]"), problems)
        })
        .collect();
    Some(parsed)
}

pub(super) fn raw_layers(doc: &Doc, problems: &mut Vec<String>) -> Option<Vec<(String, RawLayer)>> {
    let item = doc.get("layers")?;
    let Some(layers) = item.as_table_like() else {
        problems.push("layers: expected tables such as [layers.runtime]".into());
        return Some(Vec::new());
    };
    let parsed = layers
        .iter()
        .filter_map(|(name, item)| {
            deserialize_at(doc, item, &format!("layers.{name}"), problems)
                .map(|l| (name.to_string(), l))
        })
        .collect();
    Some(parsed)
}
