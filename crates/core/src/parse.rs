//! Feed bytes -> items. Pure: the caller passes the time the bytes were fetched.
//!
//! feed-rs reads RSS 0.9/1.0/2.0, Atom and JSON Feed from raw bytes so the XML prolog's
//! encoding is honoured. This module adds what feed-rs leaves to us: stable item keys (never
//! random), plain text, arXiv ids, item kinds and release levels.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::Regex;
use sha2::{Digest as _, Sha256};

use crate::model::{FailureKind, Item, ItemKind, ReleaseLevel, SourceKind};
use crate::settings::SourceConfig;
use crate::text::{collapse_whitespace, decode_entities, html_to_text, normalize_url};

/// Longest plain text kept per item; summaries and keyword rules never need more.
pub const MAX_TEXT_CHARS: usize = 12_000;
/// Longest title kept (a real one is under 200 characters; a hostile feed's title of a
/// megabyte became 258 Telegram messages). Cut at a word boundary with '…'.
pub const MAX_TITLE_CHARS: usize = 300;
/// Most links kept of one item's text: enough for release notes and a post's references,
/// bounded for a hostile feed.
pub const MAX_LINKS: usize = 64;
/// Longest link kept; a longer one is dropped (a cut URL is a broken link), and the item is
/// shown without one.
pub const MAX_URL_CHARS: usize = 2_048;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("Empty response body; the source returned no content")]
    Empty,
    #[error("Got an HTML page instead of a feed; check that the URL points at the RSS/Atom feed")]
    HtmlPage,
    #[error("Not a valid feed: {0}")]
    Invalid(String),
}

impl ParseError {
    /// Every way of not being a feed is one kind to a reader.
    pub fn kind(&self) -> FailureKind {
        FailureKind::NotAFeed
    }
}

static VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bv?(\d+)\.(\d+)(?:\.(\d+))?(?:[-.+_ ]?(rc|alpha|beta|a|b|dev|pre|preview)\.?\d*)?\b",
    )
    .expect("valid regex")
});

/// The arXiv id (without version) in a URL or OAI identifier: new style `2610.18231` or
/// old style `hep-th/9901001`. Hand-written rather than a regex: it runs for every item.
pub fn arxiv_id(s: &str) -> Option<String> {
    let lower = s.to_ascii_lowercase();
    let start = ["arxiv.org/abs/", "arxiv.org/pdf/", "oai:arxiv.org:"]
        .iter()
        .find_map(|marker| lower.find(marker).map(|i| i + marker.len()))?;
    let rest = &s[start..];
    let bytes = rest.as_bytes();
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    // New style: YYMM.NNNNN
    if digits(0) == 4 && bytes.get(4) == Some(&b'.') {
        let n = digits(5);
        if (4..=5).contains(&n) {
            return Some(rest[..5 + n].to_string());
        }
        return None;
    }
    // Old style: archive(.XX)/NNNNNNN
    let slash = rest.find('/')?;
    let archive = &rest[..slash];
    let archive_ok = !archive.is_empty()
        && archive.split('.').next().is_some_and(|a| {
            !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-')
        });
    (archive_ok && digits(slash + 1) == 7).then(|| rest[..slash + 8].to_string())
}

/// Parses one fetched body. `fetched_at` stands in for entries without dates and caps
/// dates in the future.
pub fn parse_feed(
    bytes: &[u8],
    source: &SourceConfig,
    fetched_at: DateTime<Utc>,
) -> Result<Vec<Item>, ParseError> {
    let trimmed = trim_ascii_start(bytes);
    if trimmed.is_empty() {
        return Err(ParseError::Empty);
    }
    if looks_like_html(trimmed) {
        return Err(ParseError::HtmlPage);
    }
    let body = drop_misplaced_declarations(repair_encoding(bytes));
    // An empty id tells us the entry had no guid; we then derive our own stable key.
    let parser = feed_rs::parser::Builder::new()
        .id_generator(|_, _, _| String::new())
        .build();
    // A panic in the XML stack is a bug there, but it must cost one source, not the fetch
    // task: it becomes this feed's error (found by the fuzzer, benches/fuzz).
    let parsed =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parser.parse(body.as_ref())))
            .map_err(|_| {
                ParseError::Invalid(
                    "the XML parser gave up on this body (a fault in the parser, not a reason to \
             change the source); the source is retried at the next run"
                        .into(),
                )
            })?;
    let feed = parsed.map_err(|e| ParseError::Invalid(e.to_string()))?;
    let mut items: Vec<Item> = feed
        .entries
        .into_iter()
        .map(|entry| to_item(entry, source, fetched_at))
        .collect();
    separate_shared_guids(&mut items);
    // Newest first, then key, so max_items keeps the newest and the order is deterministic.
    items.sort_by(|a, b| {
        b.published
            .cmp(&a.published)
            .then_with(|| a.key.cmp(&b.key))
    });
    items.dedup_by(|a, b| a.key == b.key);
    items.retain(|i| source.keeps(&i.title, &i.text));
    if let Some(max) = source.max_items {
        items.truncate(max);
    }
    Ok(items)
}

/// Some feeds give several entries one guid (a template's placeholder, a CMS bug); keyed
/// by it, they would be stored as one and the others lost. An entry whose guid another
/// entry of the feed shares with a different link or title is known by its guid, link and
/// title instead. Entries that share a guid and are the same stay one.
fn separate_shared_guids(items: &mut [Item]) {
    let mut variants: HashMap<&str, BTreeSet<(&str, &str)>> = HashMap::new();
    for item in items.iter() {
        if item.key.starts_with("guid:") {
            variants
                .entry(item.key.as_str())
                .or_default()
                .insert((item.url.as_str(), item.title.as_str()));
        }
    }
    let shared: HashSet<String> = variants
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(k, _)| k.to_string())
        .collect();
    for item in items.iter_mut().filter(|i| shared.contains(&i.key)) {
        let mut hasher = Sha256::new();
        hasher.update(item.url.as_bytes());
        hasher.update([0]);
        hasher.update(item.title.as_bytes());
        item.key = format!("{}#{}", item.key, hex(&hasher.finalize()[..8]));
    }
}

/// The project's name for a release titled only by its version: the repository's name as
/// the release notes write it as a name ("Triton", "CUTLASS", "vLLM" for triton, cutlass,
/// vllm), or as the repository spells it when the notes never capitalise it. A spelling
/// inside a path, an image tag or an identifier ("vllm/vllm-openai:gemma4", "vllm.config")
/// is code, not the name.
fn project_name<'a>(repo: &'a str, notes: &'a str) -> &'a str {
    if repo.is_empty() || !repo.is_ascii() {
        return repo;
    }
    // "triton-inference-server" as the notes say it: "Triton Inference Server".
    let spoken = repo.replace(['-', '_'], " ");
    name_in(&repo.to_ascii_lowercase(), notes)
        .or_else(|| (spoken != repo).then(|| name_in(&spoken.to_ascii_lowercase(), notes))?)
        .unwrap_or(repo)
}

/// Where `notes` write `wanted` (lower case) as a name, capitalised and not inside code.
fn name_in<'a>(wanted: &str, notes: &'a str) -> Option<&'a str> {
    let lower = notes.to_ascii_lowercase();
    // Code joins a name to what is around it: "vllm/vllm-openai:gemma4", "vllm-ascend",
    // "vllm.config". A colon or a full stop followed by a space ends a sentence or a label
    // instead ("TileFlow: …", "… with vLLM.").
    let code = |b: &u8| b.is_ascii_alphanumeric() || b"/_-@".contains(b);
    let before_ok = |i: Option<usize>| {
        i.is_none_or(|i| !(code(&lower.as_bytes()[i]) || b".:".contains(&lower.as_bytes()[i])))
    };
    let after_ok = |i: usize| match lower.as_bytes().get(i) {
        None => true,
        Some(b) if b".:".contains(b) => !lower.as_bytes().get(i + 1).is_some_and(code),
        Some(b) => !code(b),
    };
    let mut from = 0;
    while let Some(at) = lower[from..].find(wanted) {
        let start = from + at;
        let end = start + wanted.len();
        // `lower` has the same byte offsets as `notes`: only ASCII letters change case.
        if before_ok(start.checked_sub(1))
            && after_ok(end)
            && notes.is_char_boundary(start)
            && notes.is_char_boundary(end)
            && notes[start..end].contains(|c: char| c.is_ascii_uppercase())
        {
            return Some(&notes[start..end]);
        }
        from = end;
    }
    None
}

/// A release named by its repository in lower case ("vllm v0.8.3": its notes never write
/// the project's name as a name) takes the spelling the other items' titles of the day give
/// it, the most frequent one ("Accelerating RLHF with vLLM", "Introducing vLLM Hardware
/// Plugin" -> "vLLM v0.8.3"). Titles only: they are written for readers, texts hold code.
pub fn spell_release_names(items: &mut [Item]) {
    for i in 0..items.len() {
        let item = &items[i];
        let Some((_, repo)) = item.source.rsplit_once('/') else {
            continue;
        };
        let Some(rest) = item.title.strip_prefix(repo) else {
            continue;
        };
        if item.kind != ItemKind::Release
            || repo.is_empty()
            || repo.contains(|c: char| c.is_ascii_uppercase())
            || !rest.starts_with(' ')
        {
            continue;
        }
        let mut spellings: Vec<(&str, usize)> = Vec::new();
        for other in items.iter().filter(|o| o.kind != ItemKind::Release) {
            for word in other.title.split_whitespace() {
                let word = word.trim_matches(|c: char| !c.is_alphanumeric());
                if word.eq_ignore_ascii_case(repo) && word != repo {
                    match spellings.iter_mut().find(|(s, _)| *s == word) {
                        Some((_, n)) => *n += 1,
                        None => spellings.push((word, 1)),
                    }
                }
            }
        }
        // The most frequent; the first seen on a tie (max_by_key keeps the last maximum).
        if let Some(&(name, _)) = spellings.iter().rev().max_by_key(|(_, n)| *n) {
            let title = format!("{name}{rest}");
            items[i].title = title;
        }
    }
}

fn trim_ascii_start(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    &bytes[start..]
}

fn looks_like_html(start: &[u8]) -> bool {
    let head: Vec<u8> = start.iter().take(256).map(u8::to_ascii_lowercase).collect();
    head.starts_with(b"<!doctype html") || head.starts_with(b"<html")
}

/// Feeds that are not valid UTF-8 although they declare (or default to) UTF-8 are repaired
/// instead of rejected: with no declaration the bytes are read as Windows-1252 (what such
/// feeds nearly always are), with a UTF-8 declaration bad sequences become U+FFFD. Feeds that
/// declare another encoding are left for feed-rs to decode.
pub fn repair_encoding(bytes: &[u8]) -> Cow<'_, [u8]> {
    if std::str::from_utf8(bytes).is_ok() {
        return Cow::Borrowed(bytes);
    }
    match declared_encoding(bytes) {
        Some(enc) if !enc.eq_ignore_ascii_case("utf-8") && !enc.eq_ignore_ascii_case("utf8") => {
            Cow::Borrowed(bytes)
        }
        Some(_) => Cow::Owned(String::from_utf8_lossy(bytes).into_owned().into_bytes()),
        None => {
            let (text, _, _) = encoding_rs::WINDOWS_1252.decode(bytes);
            Cow::Owned(text.into_owned().into_bytes())
        }
    }
}

/// Removes XML declarations (`<?xml ...?>`) found after the start of the document, outside
/// CDATA sections and comments. XML allows one, first; feeds glued together by a CMS carry
/// more, and a second one that names an encoding makes quick-xml panic (it cannot switch
/// encodings mid-stream). Without them the entries parse.
fn drop_misplaced_declarations(body: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }
    let is_declaration = |at: &[u8]| {
        at.starts_with(b"<?xml")
            && at
                .get(5)
                .is_some_and(|b| b.is_ascii_whitespace() || *b == b'?')
    };
    let start = body.len() - trim_ascii_start(&body).len();
    let mut pos = start + usize::from(is_declaration(&body[start..]));
    let mut kept: Option<Vec<u8>> = None;
    let mut copied = 0;
    while let Some(lt) = body[pos..].iter().position(|b| *b == b'<') {
        let at = pos + lt;
        let rest = &body[at..];
        let skip_to = |close: &[u8]| find(rest, close).map_or(body.len(), |i| at + i + close.len());
        pos = if rest.starts_with(b"<![CDATA[") {
            skip_to(b"]]>")
        } else if rest.starts_with(b"<!--") {
            skip_to(b"-->")
        } else if is_declaration(rest) {
            let end = skip_to(b"?>");
            let out = kept.get_or_insert_with(|| Vec::with_capacity(body.len()));
            out.extend_from_slice(&body[copied..at]);
            copied = end;
            end
        } else {
            at + 1
        };
    }
    match kept {
        None => body,
        Some(mut out) => {
            out.extend_from_slice(&body[copied..]);
            Cow::Owned(out)
        }
    }
}

fn declared_encoding(bytes: &[u8]) -> Option<String> {
    let head = &bytes[..bytes.len().min(200)];
    let head = String::from_utf8_lossy(head);
    let decl = head.strip_prefix('\u{feff}').unwrap_or(&head).trim_start();
    let decl = &decl[..decl.find("?>")?];
    let at = decl.find("encoding")?;
    let value = decl[at + "encoding".len()..]
        .trim_start()
        .strip_prefix('=')?
        .trim_start();
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    Some(value[1..].split(quote).next()?.to_string())
}

fn to_item(entry: feed_rs::model::Entry, source: &SourceConfig, fetched_at: DateTime<Utc>) -> Item {
    let link = entry
        .links
        .iter()
        .find(|l| l.rel.as_deref().is_none_or(|r| r == "alternate"))
        .or_else(|| entry.links.first())
        .map(|l| l.href.trim().to_string())
        .unwrap_or_default();
    let url = normalize_url(&link)
        .filter(|u| u.len() <= MAX_URL_CHARS)
        .unwrap_or_default();

    let (mut text, links) = match (&entry.content, &entry.summary) {
        (Some(content), _) if content.body.is_some() => body_text(
            content.body.as_deref().unwrap_or(""),
            content.content_type.as_str(),
        ),
        (_, Some(summary)) => body_text(&summary.content, summary.content_type.as_str()),
        _ => (String::new(), Vec::new()),
    };
    text = crate::text::detex(strip_arxiv_listing_prefix(&text)).into_owned();
    text = crate::text::truncate_chars(&text, MAX_TEXT_CHARS);

    let title = entry
        .title
        .as_ref()
        .map(|t| {
            let raw = if t.content_type.as_str().contains("html") {
                html_to_text(&t.content).0
            } else {
                decode_entities(&t.content)
            };
            collapse_whitespace(&crate::text::detex(&raw))
        })
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| crate::text::truncate_chars(&collapse_whitespace(&text), 80));
    let title = if title.is_empty() {
        "(untitled)".to_string()
    } else {
        title
    };

    let arxiv = arxiv_id(&link).or_else(|| arxiv_id(&entry.id));
    let kind = match source.kind {
        SourceKind::Arxiv => ItemKind::Paper,
        SourceKind::GithubReleases => ItemKind::Release,
        SourceKind::Blog => ItemKind::Post,
        SourceKind::Feed if arxiv.is_some() => ItemKind::Paper,
        SourceKind::Feed if link.contains("/releases/tag/") => ItemKind::Release,
        SourceKind::Feed => ItemKind::Post,
    };
    let title = if kind == ItemKind::Release && is_bare_version(&title) {
        let repo = source.name.rsplit('/').next().unwrap_or(&source.name);
        format!("{} {title}", project_name(repo, &text))
    } else if let Some((version, repo)) = github_page_title(&title) {
        format!("{} {version}", project_name(repo, &text))
    } else if let Some(version) = (kind == ItemKind::Release)
        .then(|| version_naming_nothing(&title))
        .flatten()
    {
        let repo = project_of(&source.name, &link);
        // "rocm-6.0.0" of ROCm/composable_kernel: the ROCm release it ships with, not a
        // version of its own ("Composable Kernel 1.1.0 for ROCm 6.0.0"), when the notes
        // write the platform as a name (a tag such as "llvmorg-17.0.1" names none).
        let platform = tag_platform(&title)
            .filter(|p| !p.eq_ignore_ascii_case(repo))
            .map(|p| project_name(p, &text))
            .filter(|spelled| spelled.chars().any(|c| c.is_ascii_uppercase()));
        let project = project_name(repo, &text);
        match platform {
            Some(platform) => format!("{project} for {platform} {version}"),
            None => format!("{project} {version}"),
        }
    } else {
        crate::text::truncate_chars(&title, MAX_TITLE_CHARS)
    };
    // Release sources have versions worth scoring, and so does a post whose title says it
    // announces a release ("PyTorch 2.5 Release Blog"); a bare "3.0" in a blog title
    // ("Vision 3.0 for warehouses") is not a release.
    let release = (kind == ItemKind::Release || announces_release(&title))
        .then(|| release_level(&link, &title));
    let mut cited_arxiv: Vec<String> = links.iter().filter_map(|l| arxiv_id(l)).collect();
    cited_arxiv.sort();
    cited_arxiv.dedup();
    if let Some(own) = &arxiv {
        cited_arxiv.retain(|c| c != own);
    }
    let mut links: Vec<String> = links
        .iter()
        .filter(|l| arxiv_id(l).is_none())
        .filter_map(|l| normalize_url(l))
        .filter(|l| *l != url)
        .collect();
    links.sort();
    links.dedup();
    links.truncate(MAX_LINKS);

    let key = item_key(&arxiv, kind, &url, &entry.id, source, &title, &text);
    let published = entry
        .published
        .or(entry.updated)
        .unwrap_or(fetched_at)
        .min(fetched_at);
    Item {
        key,
        source: source.name.clone(),
        kind,
        title,
        url,
        text,
        published,
        release,
        arxiv_id: if kind == ItemKind::Paper { arxiv } else { None },
        cited_arxiv,
        links,
    }
}

fn body_text(body: &str, content_type: &str) -> (String, Vec<String>) {
    if content_type.contains("html") || body.contains("</") || body.contains("<br") {
        html_to_text(body)
    } else {
        (crate::text::tidy_lines(&decode_entities(body)), Vec::new())
    }
}

/// arXiv's RSS listing prefixes every description with "arXiv:ID Announce Type: new Abstract:".
fn strip_arxiv_listing_prefix(text: &str) -> &str {
    if text.starts_with("arXiv:")
        && let Some(at) = text.find("Abstract:")
    {
        return text[at + "Abstract:".len()..].trim_start();
    }
    text
}

/// Stable key, in order of preference: arXiv id, release tag URL, guid, normalised link,
/// content hash.
fn item_key(
    arxiv: &Option<String>,
    kind: ItemKind,
    url: &str,
    guid: &str,
    source: &SourceConfig,
    title: &str,
    text: &str,
) -> String {
    if let Some(id) = arxiv {
        return format!("arxiv:{id}");
    }
    if kind == ItemKind::Release && url.contains("/releases/tag/") {
        return format!("url:{url}");
    }
    let guid = guid.trim();
    if !guid.is_empty() {
        return format!("guid:{}:{guid}", source.name);
    }
    if !url.is_empty() {
        return format!("url:{url}");
    }
    let mut hasher = Sha256::new();
    hasher.update(source.name.as_bytes());
    hasher.update([0]);
    hasher.update(title.as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    format!("hash:{}", hex(&hasher.finalize()[..12]))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A title that names a version and says "release" / "released" ("PyTorch 2.5 Release
/// Blog", "Triton 3.2 is released").
fn announces_release(title: &str) -> bool {
    let lower = title.to_ascii_lowercase();
    VERSION.is_match(&lower)
        && lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| matches!(w, "release" | "released" | "releases"))
}

/// The version of a release title that names nothing before it: "Release 2.35.0
/// corresponding to NGC container 23.06", "v1.23.0-release", "v0.19.3 Patch release",
/// a lower-case tag "rocm-6.0.0". A title that names something keeps its name ("Mojo
/// v1.0.0" of modular/modular, "NCCL v2.29.2-1"). None when the title has no version.
fn version_naming_nothing(title: &str) -> Option<&str> {
    let version = VERSION.find(title)?;
    let names_something = title[..version.start()]
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !matches!(w.to_lowercase().as_str(), "release" | "version"))
        .any(|w| w.chars().any(char::is_uppercase));
    (!names_something).then_some(version.as_str())
}

/// The platform a lower-case tag names before its version: "rocm" of "rocm-6.0.0". A
/// library's tag that names a platform is the platform's release it ships with.
fn tag_platform(title: &str) -> Option<&str> {
    let (word, rest) = title.split_once('-')?;
    (word.len() >= 3
        && word.chars().all(|c| c.is_ascii_lowercase())
        && !matches!(word, "release" | "version")
        && is_bare_version(rest))
    .then_some(word)
}

/// The repository whose release an item is, by name: from its GitHub link, else from a
/// source named "owner/name"; a repository named by a generic word is its owner's
/// (triton-inference-server/server is "triton-inference-server").
fn project_of<'a>(source: &'a str, link: &'a str) -> &'a str {
    let repository = match crate::model::github_repository(link) {
        "" => source,
        r => r,
    };
    const GENERIC: &[&str] = &[
        "server", "core", "main", "sdk", "api", "app", "cli", "lib", "src", "release", "releases",
    ];
    match repository.split_once('/') {
        Some((owner, name)) if GENERIC.contains(&name.to_lowercase().as_str()) => owner,
        Some((_, name)) => name,
        None => repository,
    }
}

/// "v3.6.0", "3.6.0-rc1": a title that names nothing but a version.
/// GitHub's page title of a release, as a reading list copies it: "Release v1.11.0 ·
/// NVIDIA/warp" gives the version and the repository's name (v1.11.0, warp).
fn github_page_title(title: &str) -> Option<(&str, &str)> {
    let (version, repo) = title.strip_prefix("Release ")?.split_once(" · ")?;
    let (_, name) = repo.split_once('/')?;
    (is_bare_version(version) && !name.is_empty() && !name.contains(char::is_whitespace))
        .then_some((version, name))
}

pub(crate) fn is_bare_version(title: &str) -> bool {
    VERSION
        .find(&title.to_ascii_lowercase())
        .is_some_and(|m| m.start() == 0 && m.end() == title.len())
}

/// Release level from the tag in the release URL, else from the title.
pub fn release_level(url: &str, title: &str) -> ReleaseLevel {
    let tag = url
        .rsplit_once("/releases/tag/")
        .map(|(_, t)| t)
        .unwrap_or("");
    let haystack = format!("{tag} {title}").to_ascii_lowercase();
    if haystack.contains("nightly") {
        return ReleaseLevel::Nightly;
    }
    let Some(caps) = VERSION.captures(&haystack) else {
        return if haystack.contains("pre-release") || haystack.contains("prerelease") {
            ReleaseLevel::PreRelease
        } else {
            ReleaseLevel::Minor
        };
    };
    if caps.get(4).is_some() {
        return ReleaseLevel::PreRelease;
    }
    let major: u64 = caps[1].parse().unwrap_or(0);
    let minor: u64 = caps[2].parse().unwrap_or(0);
    let patch: u64 = caps
        .get(3)
        .and_then(|m| m.as_str().parse().ok())
        .unwrap_or(0);
    // Below 1.0 a project bumps 0.y as its routine feature release (vLLM, JAX and their
    // kin every few weeks), so 0.y.0 is a minor release and 0.y.z (z > 0) counts as one too:
    // JAX 0.4.35 adds features. What such a release breaks is read from its notes, not
    // guessed from the number; only 1.0 and later majors are major.
    match (major, minor, patch) {
        (0, 0, _) => ReleaseLevel::Patch,
        (0, _, 0) => ReleaseLevel::Minor,
        (0, _, _) => ReleaseLevel::Minor,
        (_, 0, 0) => ReleaseLevel::Major,
        (_, _, 0) => ReleaseLevel::Minor,
        _ => ReleaseLevel::Patch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{SourceConfig, SourceLocation};
    use chrono::TimeZone;

    /// The time the tests' feeds are read at: after every date in them.
    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 6, 8, 0, 0).unwrap()
    }

    fn source(kind: SourceKind) -> SourceConfig {
        SourceConfig {
            name: "s".into(),
            location: SourceLocation::File("x".into()),
            kind,
            weight: 1.0,
            max_items: None,
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }

    #[test]
    fn a_github_release_page_title_reads_as_the_project_and_version() {
        assert_eq!(
            github_page_title("Release v1.11.0 · NVIDIA/warp"),
            Some(("v1.11.0", "warp"))
        );
        assert_eq!(github_page_title("Release notes · a blog"), None);
        assert_eq!(github_page_title("Release v2 of our guide"), None);
    }

    #[test]
    fn a_release_named_in_lower_case_takes_the_days_spelling_of_its_project() {
        let item = |source: &str, kind, title: &str| Item {
            key: title.into(),
            source: source.into(),
            kind,
            title: title.into(),
            url: String::new(),
            text: String::new(),
            published: now(),
            release: None,
            arxiv_id: None,
            cited_arxiv: vec![],
            links: vec![],
        };
        let mut items = vec![
            item("vllm-project/vllm", ItemKind::Release, "vllm v0.8.3"),
            item("triton-lang/triton", ItemKind::Release, "Triton 3.6.0"),
            item(
                "vllm-project/vllm-ascend",
                ItemKind::Release,
                "vllm-ascend v0.8.3",
            ),
            item("vLLM Blog", ItemKind::Post, "Accelerating RLHF with vLLM"),
            item(
                "vLLM Blog",
                ItemKind::Post,
                "Introducing vLLM Hardware Plugin",
            ),
            item(
                "Tech news",
                ItemKind::Post,
                "VLLM, SGLang and triton compared",
            ),
        ];
        spell_release_names(&mut items);
        let titles: Vec<&str> = items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(
            &titles[..3],
            ["vLLM v0.8.3", "Triton 3.6.0", "vllm-ascend v0.8.3"]
        );
        // Nothing to take: the repository's spelling stays.
        let mut alone = vec![item("vllm-project/vllm", ItemKind::Release, "vllm v0.8.3")];
        spell_release_names(&mut alone);
        assert_eq!(alone[0].title, "vllm v0.8.3");
    }

    #[test]
    fn entries_sharing_a_guid_stay_apart_unless_they_are_the_same() {
        let entry = |title: &str, link: &str, guid: &str| {
            format!(
                "<item><title>{title}</title><link>{link}</link><guid>{guid}</guid><description>{title} text</description></item>"
            )
        };
        let xml = format!(
            "<?xml version=\"1.0\"?><rss version=\"2.0\"><channel><title>t</title>{}{}{}{}{}</channel></rss>",
            entry("Kernel fusion one", "https://example.org/1", "same"),
            entry("Kernel fusion two", "https://example.org/2", "same"),
            entry("Kernel fusion three", "https://example.org/3", "same"),
            entry("Repeated entry", "https://example.org/r", "twice"),
            entry("Repeated entry", "https://example.org/r", "twice"),
        );
        let items = parse_feed(xml.as_bytes(), &source(SourceKind::Blog), now()).unwrap();
        let titles: BTreeSet<&str> = items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(items.len(), 4, "{titles:?}");
        assert_eq!(titles.len(), 4);
        let keys: BTreeSet<&str> = items.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys.len(), 4);
        // Stable: the same feed gives the same keys.
        let again = parse_feed(xml.as_bytes(), &source(SourceKind::Blog), now()).unwrap();
        let again: BTreeSet<String> = again.into_iter().map(|i| i.key).collect();
        assert_eq!(keys, again.iter().map(String::as_str).collect());
    }

    #[test]
    fn a_release_titled_by_its_version_takes_the_project_name_as_its_notes_write_it() {
        assert_eq!(
            project_name("triton", "Triton 3.6 is the first release"),
            "Triton"
        );
        // A spelling inside a package, path or image tag is code; the name comes after.
        assert_eq!(
            project_name("vllm", "Requires vllm-ascend; vLLM 0.12 ..."),
            "vLLM"
        );
        assert_eq!(
            project_name(
                "vllm",
                "Use the image vllm/vllm-openai:gemma4 or vllm.entrypoints; vLLM 0.19 adds Gemma 4."
            ),
            "vLLM"
        );
        assert_eq!(
            project_name("vllm", "Works with vLLM 0.12 and later"),
            "vLLM"
        );
        assert_eq!(
            project_name("cutlass", "CUTLASS 5.0 is a major release"),
            "CUTLASS"
        );
        // A word containing the name is not the name; notes that never name it keep the
        // repository's spelling.
        assert_eq!(project_name("nccl", "see ncclx and NCCLs"), "nccl");
        assert_eq!(project_name("speculators", "Bug fixes."), "speculators");
        assert_eq!(
            project_name(
                "triton-inference-server",
                "Fixes for the Triton Inference Server model repository."
            ),
            "Triton Inference Server"
        );
        assert_eq!(
            project_name(
                "bitsandbytes",
                "pip install bitsandbytes; bitsandbytes 0.39"
            ),
            "bitsandbytes"
        );
        assert_eq!(project_name("triton", "Ünïcode before TRITON"), "TRITON");
        assert_eq!(
            project_name("tileflow", "Code for TileFlow: tiles"),
            "TileFlow"
        );
    }

    #[test]
    fn a_second_xml_declaration_is_dropped_and_the_entries_parse() {
        // Found by the fuzzer: a declaration naming an encoding inside the document made
        // quick-xml panic. One in CDATA is text and stays.
        let entry = |n: u32, text: &str| {
            format!(
                "<item><title>Kernel fusion {n}</title><link>https://example.org/{n}</link><description>{text}</description></item>"
            )
        };
        let xml = format!(
            "\u{feff} <?xml version=\"1.0\" encoding=\"UTF-8\"?><rss version=\"2.0\"><channel><title>t</title>{}<?xml version=\"1.0\" encoding=\"windows-1251\"?>{}<!-- <?xml version=\"1.0\"?> -->{}</channel></rss>",
            entry(1, "plain"),
            entry(
                2,
                "<![CDATA[<?xml version=\"1.0\" encoding=\"koi8-r\"?> in a sample]]>"
            ),
            entry(3, "plain"),
        );
        let items = parse_feed(xml.as_bytes(), &source(SourceKind::Blog), now()).unwrap();
        assert_eq!(items.len(), 3);
        let kept = drop_misplaced_declarations(Cow::Borrowed(xml.as_bytes()));
        let kept = String::from_utf8_lossy(&kept);
        assert!(!kept.contains("windows-1251"), "{kept}");
        for stays in ["encoding=\"UTF-8\"", "encoding=\"koi8-r\"", "<!-- <?xml"] {
            assert!(kept.contains(stays), "{stays}: {kept}");
        }
        // Where nothing is misplaced, the body is not copied.
        let clean = b"<?xml version=\"1.0\"?><rss/>".as_slice();
        assert!(matches!(
            drop_misplaced_declarations(Cow::Borrowed(clean)),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn release_levels_follow_semver_and_suffixes() {
        let url = |t: &str| format!("https://github.com/o/r/releases/tag/{t}");
        assert_eq!(release_level(&url("v5.0.0"), "v5.0.0"), ReleaseLevel::Major);
        assert_eq!(
            release_level(&url("v3.6.0"), "Triton 3.6.0"),
            ReleaseLevel::Minor
        );
        assert_eq!(
            release_level(&url("v2.9.1"), "PyTorch 2.9.1"),
            ReleaseLevel::Patch
        );
        assert_eq!(
            release_level(&url("v3.6.0-rc1"), "v3.6.0-rc1"),
            ReleaseLevel::PreRelease
        );
        assert_eq!(
            release_level(&url("nightly"), "Nightly build"),
            ReleaseLevel::Nightly
        );
        assert_eq!(release_level("", "CUDA 13.0 released"), ReleaseLevel::Major);
        // Below 1.0 the 0.y.0 bump is the routine feature release: minor, like 0.y.z.
        assert_eq!(
            release_level(&url("jax-v0.5.0"), "JAX v0.5.0"),
            ReleaseLevel::Minor
        );
        assert_eq!(
            release_level(&url("v0.18.0"), "vllm-ascend v0.18.0"),
            ReleaseLevel::Minor
        );
        assert_eq!(
            release_level(&url("jax-v0.4.35"), "JAX v0.4.35"),
            ReleaseLevel::Minor
        );
        assert_eq!(release_level(&url("v0.0.7"), "v0.0.7"), ReleaseLevel::Patch);
        assert!(announces_release("PyTorch 2.5 Release Blog"));
        assert!(!announces_release(
            "Vision 3.0 for warehouse robots is now available"
        ));
    }

    #[test]
    fn arxiv_ids_lose_their_version() {
        assert_eq!(
            arxiv_id("http://arxiv.org/abs/2610.18231v2").as_deref(),
            Some("2610.18231")
        );
        assert_eq!(
            arxiv_id("oai:arXiv.org:2411.17720v1").as_deref(),
            Some("2411.17720")
        );
        assert_eq!(
            arxiv_id("https://arxiv.org/pdf/hep-th/9901001v1").as_deref(),
            Some("hep-th/9901001")
        );
        assert_eq!(arxiv_id("https://example.org/abs/1"), None);
    }

    #[test]
    fn a_release_title_that_names_nothing_is_named_by_its_repository() {
        assert_eq!(
            version_naming_nothing("Release 2.35.0 corresponding to NGC container 23.06"),
            Some("2.35.0")
        );
        assert_eq!(version_naming_nothing("v1.23.0-release"), Some("v1.23.0"));
        assert_eq!(
            version_naming_nothing("v0.19.3 Patch release"),
            Some("v0.19.3")
        );
        assert_eq!(version_naming_nothing("rocm-6.0.0"), Some("6.0.0"));
        assert_eq!(version_naming_nothing("Mojo v1.0.0"), None);
        assert_eq!(version_naming_nothing("NCCL v2.29.2-1"), None);
        assert_eq!(version_naming_nothing("Nightly"), None);
        let server = "https://github.com/triton-inference-server/server/releases/tag/v2.35.0";
        assert_eq!(
            project_of("Triton server", server),
            "triton-inference-server"
        );
        assert_eq!(
            project_of(
                "cudnn",
                "https://github.com/NVIDIA/cudnn-frontend/releases/tag/v1"
            ),
            "cudnn-frontend"
        );
        assert_eq!(project_of("deepspeedai/DeepSpeed", ""), "DeepSpeed");
        // Through the parser: the title an event shows and every text that names it.
        let atom = |title: &str, link: &str| {
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom"><id>x</id><title>r</title><updated>2026-12-16T10:00:00Z</updated><entry><id>e</id><updated>2026-12-16T10:00:00Z</updated><link rel="alternate" href="{link}"/><title>{title}</title><content type="html">Fixes for the Triton Inference Server model repository.</content></entry></feed>"#
            )
        };
        let items = parse_feed(
            atom(
                "Release 2.35.0 corresponding to NGC container 23.06",
                server,
            )
            .as_bytes(),
            &source(SourceKind::GithubReleases),
            now(),
        )
        .unwrap();
        assert_eq!(items[0].title, "Triton Inference Server 2.35.0");
        // A tag naming the platform release a library ships with (ROCm/composable_kernel).
        assert_eq!(tag_platform("rocm-6.0.0"), Some("rocm"));
        assert_eq!(tag_platform("v1.23.0-release"), None);
        assert_eq!(tag_platform("jax-v0.4.30"), Some("jax"));
        let ck = "https://github.com/ROCm/composable_kernel/releases/tag/rocm-6.0.0";
        let mut feed = atom("rocm-6.0.0", ck);
        feed = feed.replace(
            "Fixes for the Triton Inference Server model repository.",
            "Composable Kernel 1.1.0 for ROCm 6.0.0: fixed a hazard with inline v_dot.",
        );
        let items =
            parse_feed(feed.as_bytes(), &source(SourceKind::GithubReleases), now()).unwrap();
        assert_eq!(items[0].title, "Composable Kernel for ROCm 6.0.0");
        // Notes that never write the platform as a name: the tag's word names nothing.
        let items = parse_feed(
            atom(
                "llvmorg-17.0.1",
                "https://github.com/llvm/llvm-project/releases/tag/llvmorg-17.0.1",
            )
            .as_bytes(),
            &source(SourceKind::GithubReleases),
            now(),
        )
        .unwrap();
        assert_eq!(items[0].title, "llvm-project 17.0.1");
        // A tag that names the project itself names no platform: "JAX v0.4.30".
        let jax = "https://github.com/jax-ml/jax/releases/tag/jax-v0.4.30";
        let items = parse_feed(
            atom("jax-v0.4.30", jax)
                .replace("Triton Inference Server", "JAX")
                .as_bytes(),
            &source(SourceKind::GithubReleases),
            now(),
        )
        .unwrap();
        assert_eq!(items[0].title, "JAX v0.4.30");
    }

    #[test]
    fn bare_version_titles_are_recognised() {
        assert!(is_bare_version("v3.6.0"));
        assert!(is_bare_version("3.6.0-rc1"));
        assert!(!is_bare_version("PyTorch 2.10.0 Release"));
    }

    #[test]
    fn html_and_empty_bodies_get_named_errors() {
        let now = now();
        let s = source(SourceKind::Blog);
        assert_eq!(parse_feed(b"  \n", &s, now), Err(ParseError::Empty));
        assert_eq!(
            parse_feed(b"<!DOCTYPE html><html></html>", &s, now),
            Err(ParseError::HtmlPage)
        );
        assert!(matches!(
            parse_feed(b"<rss><channel><item>", &s, now),
            Err(ParseError::Invalid(_))
        ));
    }

    #[test]
    fn a_version_in_a_blog_title_is_not_a_release() {
        let xml = br#"<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
            <item><title>Vision 3.0 for warehouse robots is now available</title><link>https://example.org/a</link><description>We announce the release of Vision 3.0.</description></item>
            </channel></rss>"#;
        let now = Utc.with_ymd_and_hms(2026, 10, 28, 0, 0, 0).unwrap();
        let items = parse_feed(xml, &source(SourceKind::Blog), now).unwrap();
        assert_eq!(items[0].kind, ItemKind::Post);
        assert_eq!(items[0].release, None);
    }

    #[test]
    fn every_field_is_bounded_at_parse_time() {
        let title = "FlashAttention kernel ".repeat(50_000);
        let link = format!("https://example.org/{}", "a".repeat(5_000));
        let body = "word ".repeat(10_000);
        let xml = format!(
            r#"<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
            <item><title>{title}</title><link>{link}</link><description>{body}</description></item>
            <item><title>短标题</title><link>https://example.org/ok</link><description>{}</description></item>
            </channel></rss>"#,
            "字".repeat(20_000)
        );
        let now = Utc.with_ymd_and_hms(2026, 10, 28, 0, 0, 0).unwrap();
        let items = parse_feed(xml.as_bytes(), &source(SourceKind::Blog), now).unwrap();
        let huge = &items[0];
        assert!(huge.title.chars().count() <= MAX_TITLE_CHARS);
        assert!(
            huge.title.ends_with("kernel…"),
            "cut at a word: {}",
            &huge.title[huge.title.len() - 20..]
        );
        assert_eq!(huge.url, "", "a link too long to keep is dropped, not cut");
        assert!(huge.text.chars().count() <= MAX_TEXT_CHARS);
        assert!(huge.text.ends_with("word…"));
        let cjk = &items[1];
        assert_eq!(cjk.title, "短标题");
        assert_eq!(cjk.text.chars().count(), MAX_TEXT_CHARS);
        assert!(cjk.text.ends_with('…'));
    }

    #[test]
    fn entries_without_ids_get_the_same_key_every_time() {
        let xml = br#"<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
            <item><title>No guid  here</title><description>Body &amp; more</description></item>
            <item><title>Linked</title><link>https://Example.org/post/?utm_source=rss</link></item>
            </channel></rss>"#;
        let now = Utc.with_ymd_and_hms(2026, 10, 28, 0, 0, 0).unwrap();
        let a = parse_feed(xml, &source(SourceKind::Blog), now).unwrap();
        let b = parse_feed(xml, &source(SourceKind::Blog), now).unwrap();
        assert_eq!(a, b);
        let keys: Vec<&str> = a.iter().map(|i| i.key.as_str()).collect();
        assert!(keys.contains(&"url:https://example.org/post"), "{keys:?}");
        assert!(keys.iter().any(|k| k.starts_with("hash:")), "{keys:?}");
        assert!(
            a.iter().all(|i| i.published == now),
            "undated entries take the fetch time"
        );
        assert!(a.iter().any(|i| i.title == "No guid here"));
    }

    #[test]
    fn invalid_utf8_is_repaired() {
        let mut xml = br#"<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title><item><title>caf"#.to_vec();
        xml.extend_from_slice(b"\xe9 </title><guid>1</guid></item></channel></rss>");
        let items = parse_feed(&xml, &source(SourceKind::Blog), now()).unwrap();
        assert_eq!(items[0].title, "caf\u{fffd}");
    }

    #[test]
    fn include_and_exclude_phrases_filter_a_sources_items() {
        let mut s = source(SourceKind::Blog);
        s.include = vec!["cuda".into()];
        s.exclude = vec!["webinar".into()];
        let feed = br#"<rss version="2.0"><channel><title>t</title>
            <item><title>New CUDA graphs API</title><link>https://e.org/1</link></item>
            <item><title>CUDA webinar next week</title><link>https://e.org/2</link></item>
            <item><title>Gaming news</title><link>https://e.org/3</link><description>nothing</description></item>
            </channel></rss>"#;
        let items = parse_feed(feed, &s, now()).unwrap();
        let titles: Vec<&str> = items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, vec!["New CUDA graphs API"]);
    }
}
