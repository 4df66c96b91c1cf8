//! `[delivery]` with its per-channel tables. The shared grammar is `crate::settings::read`.

use crate::settings::read::{Doc, deserialize_at};

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
