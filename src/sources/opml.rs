//! OPML, the subscription-list format feed readers import and export (OPML 1.0 and 2.0:
//! `<outline>` elements with `xmlUrl`, nested in folder outlines). Pure.

use quick_xml::events::{BytesStart, Event};

use crate::config::{SourceConfig, SourceLocation};
use crate::model::SourceKind;

/// One subscription of an OPML file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outline {
    /// `title`, else `text`, else the feed URL.
    pub title: String,
    pub xml_url: String,
    /// The folders it sits in and its `category` attribute (split at `,` and `/`).
    pub categories: Vec<String>,
}

fn attribute(e: &BytesStart<'_>, name: &str) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        let key: &str = a.key.as_ref();
        key.eq_ignore_ascii_case(name)
            .then(|| {
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .ok()
                    .map(|v| v.trim().to_string())
            })
            .flatten()
    })
}

/// Every outline with an `xmlUrl`, in document order.
pub fn parse(text: &str) -> Result<Vec<Outline>, String> {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut folders: Vec<Option<String>> = Vec::new();
    let mut out = Vec::new();
    let mut saw_opml = false;
    loop {
        let event = reader.read_event().map_err(|e| {
            format!(
                "not valid OPML (XML error at byte {}: {e})",
                reader.buffer_position()
            )
        })?;
        let (e, empty) = match event {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(e) if AsRef::<str>::as_ref(&e.name()) == "outline" => {
                folders.pop();
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let name = e.name();
        match AsRef::<str>::as_ref(&name) {
            "opml" => saw_opml = true,
            "outline" => {
                let label = attribute(&e, "title")
                    .filter(|t| !t.is_empty())
                    .or_else(|| attribute(&e, "text").filter(|t| !t.is_empty()));
                match attribute(&e, "xmlUrl").filter(|u| !u.is_empty()) {
                    Some(xml_url) => {
                        let mut categories: Vec<String> =
                            folders.iter().flatten().cloned().collect();
                        if let Some(c) = attribute(&e, "category") {
                            categories.extend(
                                c.split([',', '/'])
                                    .map(|p| p.trim().to_string())
                                    .filter(|p| !p.is_empty()),
                            );
                        }
                        out.push(Outline {
                            title: label.unwrap_or_else(|| xml_url.clone()),
                            xml_url,
                            categories,
                        });
                        if !empty {
                            folders.push(None);
                        }
                    }
                    None if !empty => folders.push(label),
                    None => {}
                }
            }
            _ => {}
        }
    }
    if !saw_opml {
        return Err("not an OPML file (no <opml> element)".into());
    }
    Ok(out)
}

fn escape(s: &str) -> String {
    quick_xml::escape::escape(s).into_owned()
}

/// The configured web sources as OPML 2.0, one folder per kind (files are left out: a
/// reader cannot fetch them).
pub fn export(sources: &[SourceConfig], title: &str) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<opml version=\"2.0\">\n  <head>\n    <title>{}</title>\n  </head>\n  <body>\n",
        escape(title)
    );
    for (kind, folder) in [
        (SourceKind::GithubReleases, "github_releases"),
        (SourceKind::Arxiv, "arxiv"),
        (SourceKind::Blog, "blog"),
        (SourceKind::Feed, "feed"),
    ] {
        let mine: Vec<&SourceConfig> = sources
            .iter()
            .filter(|s| s.kind == kind && matches!(s.location, SourceLocation::Http(_)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "    <outline text=\"{folder}\" title=\"{folder}\">\n"
        ));
        for s in mine {
            let name = escape(&s.name);
            out.push_str(&format!(
                "      <outline type=\"rss\" text=\"{name}\" title=\"{name}\" xmlUrl=\"{}\" category=\"{folder}\"/>\n",
                escape(&s.location.to_string())
            ));
        }
        out.push_str("    </outline>\n");
    }
    out.push_str("  </body>\n</opml>\n");
    out
}

/// The kind of an imported feed: a folder or category naming a kind wins, then what the
/// URL says (GitHub releases or tags, the arXiv API), else `feed` (decided per item).
pub fn kind_of(outline: &Outline) -> &'static str {
    let named = outline.categories.iter().find_map(|c| {
        let c = c.to_lowercase();
        match c.as_str() {
            "arxiv" | "papers" => Some("arxiv"),
            "github_releases" | "releases" => Some("github_releases"),
            "blog" | "blogs" => Some("blog"),
            "feed" => Some("feed"),
            _ => None,
        }
    });
    if let Some(k) = named {
        return k;
    }
    let url = outline.xml_url.to_lowercase();
    if url.contains("github.com/")
        && (url.ends_with("/releases.atom") || url.ends_with("/tags.atom"))
    {
        "github_releases"
    } else if url.contains("export.arxiv.org/api/") {
        "arxiv"
    } else {
        "feed"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_and_categories_are_kept() {
        let text = r#"<?xml version="1.0"?><opml version="1.0"><body>
            <outline text="Compilers"><outline text="T &amp; co" xmlUrl="https://github.com/a/b/releases.atom"/></outline>
            <outline title="Solo" xmlUrl="https://x.org/feed" category="/papers,gpu"/>
            <outline text="Empty folder"/></body></opml>"#;
        let o = parse(text).unwrap();
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].title, "T & co");
        assert_eq!(o[0].categories, vec!["Compilers".to_string()]);
        assert_eq!(kind_of(&o[0]), "github_releases");
        assert_eq!(o[1].categories, vec!["papers".to_string(), "gpu".into()]);
        assert_eq!(kind_of(&o[1]), "arxiv");
        assert!(parse("<rss/>").unwrap_err().contains("OPML"));
        assert!(parse("<opml><body><outline").is_err());
    }
}
