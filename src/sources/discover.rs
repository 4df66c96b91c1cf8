//! Finding a web page's feed: its `<link rel="alternate" type="application/rss+xml">` (or
//! Atom) elements, as browsers and feed readers do. Pure.

use std::sync::LazyLock;

use regex::Regex;

static LINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)<link\b([^>]*)>").expect("valid regex"));
static ATTR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?is)([a-z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))"#).expect("valid regex")
});

/// The feed URLs a page announces, in page order, resolved against `base`.
pub fn feed_links(html: &str, base: &url::Url) -> Vec<url::Url> {
    let mut out = Vec::new();
    for link in LINK.captures_iter(html) {
        let mut rel = String::new();
        let mut kind = String::new();
        let mut href = None;
        for a in ATTR.captures_iter(&link[1]) {
            let value = a
                .get(2)
                .or_else(|| a.get(3))
                .or_else(|| a.get(4))
                .map_or("", |m| m.as_str())
                .replace("&amp;", "&");
            match a[1].to_ascii_lowercase().as_str() {
                "rel" => rel = value.to_ascii_lowercase(),
                "type" => kind = value.to_ascii_lowercase(),
                "href" => href = Some(value),
                _ => {}
            }
        }
        let is_feed = rel.split_whitespace().any(|r| r == "alternate")
            && matches!(
                kind.as_str(),
                "application/rss+xml"
                    | "application/atom+xml"
                    | "application/feed+json"
                    | "application/json"
            );
        if let (true, Some(href)) = (is_feed, href)
            && let Ok(url) = base.join(href.trim())
            && matches!(url.scheme(), "http" | "https")
            && !out.contains(&url)
        {
            out.push(url);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_links_are_found_in_any_attribute_order() {
        let html = r#"<html><head>
            <link rel="stylesheet" href="/s.css">
            <LINK type='application/atom+xml' href='/feed.atom' rel='alternate' title='Atom'>
            <link rel="alternate" type="application/rss+xml" href="https://blog.example.org/rss?a=1&amp;b=2"/>
            <link rel="alternate" type="text/html" hreflang="zh" href="/zh/">
            </head></html>"#;
        let base = url::Url::parse("https://blog.example.org/posts/").unwrap();
        let links: Vec<String> = feed_links(html, &base)
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(
            links,
            vec![
                "https://blog.example.org/feed.atom",
                "https://blog.example.org/rss?a=1&b=2"
            ]
        );
        assert!(feed_links("<p>no feed</p>", &base).is_empty());
    }
}
