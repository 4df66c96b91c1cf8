//! Source shorthands: the feed URLs that are stable by construction, written short. Pure.
//!
//! - `github:owner/repo`: the releases feed (`/releases.atom`), kind `github_releases`;
//!   `github:owner/repo@tags` for projects that only tag (`/tags.atom`).
//! - `arxiv:cs.PL+cs.DC "query"`: the arXiv API, newest first, in any of the categories and
//!   (with a quoted query) with the phrase in the abstract, kind `arxiv`.
//! - `discourse:https://host/c/category[/id]`: a Discourse category's RSS
//!   (`/c/category/id.rss`); `discourse:https://host` the whole forum (`/latest.rss`),
//!   kind `blog`.

use crate::model::SourceKind;

/// What a shorthand stands for: the URL to fetch and the kind it implies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub url: String,
    pub kind: SourceKind,
}

/// `Ok(None)` for a value that is not a shorthand (a URL or a path); `Err` names what is
/// wrong with a shorthand and the form it takes.
pub fn expand(raw: &str) -> Result<Option<Expanded>, String> {
    let raw = raw.trim();
    let Some((scheme, rest)) = raw.split_once(':') else {
        return Ok(None);
    };
    let rest = rest.trim();
    match scheme {
        "github" => github(rest).map(Some),
        "arxiv" => arxiv(rest).map(Some),
        "discourse" => discourse(rest).map(Some),
        _ => Ok(None),
    }
}

fn github(rest: &str) -> Result<Expanded, String> {
    let (repo, tags) = match rest.split_once('@') {
        Some((repo, "tags")) => (repo, true),
        Some((_, other)) => {
            return Err(format!(
                "github:{rest}: \"@{other}\" is not a feed; use github:owner/repo (releases) or github:owner/repo@tags"
            ));
        }
        None => (rest, false),
    };
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match repo.split_once('/') {
        Some((owner, name)) if valid(owner) && valid(name) => Ok(Expanded {
            url: format!(
                "https://github.com/{owner}/{name}/{}.atom",
                if tags { "tags" } else { "releases" }
            ),
            kind: SourceKind::GithubReleases,
        }),
        _ => Err(format!(
            "github:{rest} is not a repository; use github:owner/repo, e.g. github:triton-lang/triton"
        )),
    }
}

fn arxiv(rest: &str) -> Result<Expanded, String> {
    let (categories, query) = match rest.split_once('"') {
        Some((cats, q)) => {
            let q = q.strip_suffix('"').ok_or_else(|| {
                format!("arxiv:{rest}: the query has no closing quote; use arxiv:cs.PL+cs.DC \"GPU kernel\"")
            })?;
            (cats.trim(), Some(q.trim()))
        }
        None => (rest, None),
    };
    let cats: Vec<&str> = categories.split('+').map(str::trim).collect();
    let valid = |c: &&str| {
        c.split_once('.').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.chars().all(|x| x.is_ascii_lowercase() || x == '-')
                && b.chars().all(|x| x.is_ascii_alphabetic())
        })
    };
    if cats.is_empty() || !cats.iter().all(valid) {
        return Err(format!(
            "arxiv:{rest}: expected categories such as cs.PL+cs.DC, then an optional \"query\""
        ));
    }
    let mut search = format!(
        "({})",
        cats.iter()
            .map(|c| format!("cat:{c}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    );
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        search.push_str(&format!(" AND abs:\"{q}\""));
    }
    let encoded: String = url::form_urlencoded::byte_serialize(search.as_bytes()).collect();
    Ok(Expanded {
        url: format!(
            "https://export.arxiv.org/api/query?search_query={encoded}&sortBy=submittedDate&sortOrder=descending&max_results=100"
        ),
        kind: SourceKind::Arxiv,
    })
}

fn discourse(rest: &str) -> Result<Expanded, String> {
    let url = url::Url::parse(rest).map_err(|_| {
        format!("discourse:{rest}: expected the forum's URL, e.g. discourse:https://discourse.llvm.org/c/mlir/31")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("discourse:{rest}: the forum's URL must be http(s)"));
    }
    let path = url.path().trim_end_matches('/').trim_end_matches(".rss");
    let feed = if path.is_empty() {
        "/latest.rss".to_string()
    } else if path.starts_with("/c/") {
        format!("{path}.rss")
    } else {
        return Err(format!(
            "discourse:{rest}: expected the forum's root or a category (/c/<category>[/<id>])"
        ));
    };
    let mut out = url.clone();
    out.set_path(&feed);
    out.set_query(None);
    out.set_fragment(None);
    Ok(Expanded {
        url: out.to_string(),
        kind: SourceKind::Blog,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthands_expand_to_stable_feed_urls() {
        assert_eq!(
            expand("github:triton-lang/triton").unwrap().unwrap().url,
            "https://github.com/triton-lang/triton/releases.atom"
        );
        assert_eq!(
            expand("github:HazyResearch/ThunderKittens@tags")
                .unwrap()
                .unwrap()
                .url,
            "https://github.com/HazyResearch/ThunderKittens/tags.atom"
        );
        let a = expand("arxiv:cs.PL+cs.DC \"GPU kernel\"").unwrap().unwrap();
        assert_eq!(a.kind, SourceKind::Arxiv);
        assert!(
            a.url.contains(
                "search_query=%28cat%3Acs.PL+OR+cat%3Acs.DC%29+AND+abs%3A%22GPU+kernel%22"
            ),
            "{}",
            a.url
        );
        assert_eq!(
            expand("discourse:https://discourse.llvm.org/c/mlir/31")
                .unwrap()
                .unwrap()
                .url,
            "https://discourse.llvm.org/c/mlir/31.rss"
        );
        assert_eq!(
            expand("discourse:https://dev-discuss.pytorch.org/")
                .unwrap()
                .unwrap()
                .url,
            "https://dev-discuss.pytorch.org/latest.rss"
        );
        assert_eq!(expand("https://pytorch.org/feed.xml").unwrap(), None);
        assert_eq!(expand("feeds/a.xml").unwrap(), None);
    }

    #[test]
    fn bad_shorthands_name_the_form() {
        assert!(
            expand("github:triton")
                .unwrap_err()
                .contains("github:owner/repo")
        );
        assert!(expand("github:a/b@main").unwrap_err().contains("@tags"));
        assert!(expand("arxiv:PL").unwrap_err().contains("cs.PL+cs.DC"));
        assert!(
            expand("arxiv:cs.PL \"open")
                .unwrap_err()
                .contains("closing quote")
        );
        assert!(
            expand("discourse:https://x.org/t/topic/1")
                .unwrap_err()
                .contains("/c/")
        );
    }
}
