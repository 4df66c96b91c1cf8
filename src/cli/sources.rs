//! `kdigest sources list|catalogue|enable|add|check|import|export`.

use std::path::{Path, PathBuf};

use chrono::Utc;
use clap::Subcommand;

use super::UsageError;
use crate::config::{Config, SourceConfig, SourceLocation};
use crate::fetch::{FetchOutcome, Fetcher};
use crate::model::{ItemKind, Validators};
use crate::parse::{ParseError, parse_feed};
use crate::sources::config_file::{self, NewSource};
use crate::sources::{catalogue, discover, opml};
use crate::store::Store;

#[derive(Debug, Subcommand)]
pub enum SourcesCommand {
    /// The configured sources and how each is doing: last success, failures in a row, last
    /// error, next try, items of the last 7 days
    List,
    /// The curated catalogue of sources; * marks the ones this configuration follows
    Catalogue,
    /// Add catalogue sources (by name) to the configuration file
    Enable { names: Vec<String> },
    /// Add a source by feed URL, shorthand (github:owner/repo, arxiv:cs.PL "query",
    /// discourse:URL) or web page, whose feed is found once and written to the file
    Add {
        name: String,
        url: String,
        /// arxiv, github_releases, blog or feed [default: implied by a shorthand, else feed]
        #[arg(long)]
        kind: Option<String>,
        /// 0.0 to 1.0: how much the source vouches for an event
        #[arg(long, default_value_t = 0.7)]
        weight: f64,
    },
    /// Fetch now and report what was parsed (items, newest date, kinds) or the exact
    /// failure; exits 1 when a source fails
    Check { name: Option<String> },
    /// Add the feeds of an OPML file (exported by a feed reader) to the configuration file
    Import { file: PathBuf },
    /// Print the configured web sources as OPML
    Export,
}

pub async fn run(
    command: SourcesCommand,
    config: &Config,
    config_path: Option<&Path>,
) -> anyhow::Result<()> {
    let path = || -> Result<PathBuf, UsageError> {
        match config_path {
            Some(p) => Ok(p.to_path_buf()),
            None if Path::new("config.toml").exists() => Ok(PathBuf::from("config.toml")),
            None => Err(UsageError(
                "this writes to the configuration file: pass --config PATH (or run where config.toml is)".into(),
            )),
        }
    };
    match command {
        SourcesCommand::List => list(config).await,
        SourcesCommand::Catalogue => {
            let followed: Vec<String> = config
                .sources
                .iter()
                .map(|s| s.location.to_string())
                .collect();
            for e in catalogue::builtin() {
                let url = e.feed_url().unwrap_or_else(|_| e.url.clone());
                let mark = if followed.contains(&url) { "*" } else { " " };
                let note = if e.unverified {
                    " (URL not verified)"
                } else {
                    ""
                };
                println!(
                    "{mark} {:<36} {:<50} {}{note}\n    {} [{}]",
                    e.name,
                    e.url,
                    e.kind.as_deref().unwrap_or(""),
                    e.why,
                    e.layers.join(", ")
                );
            }
            println!(
                "\n* = followed by this configuration; add others with `kdigest sources enable NAME`"
            );
            Ok(())
        }
        SourcesCommand::Enable { names } => {
            if names.is_empty() {
                return Err(UsageError(
                    "name one or more catalogue sources (see `kdigest sources catalogue`)".into(),
                )
                .into());
            }
            let all = catalogue::builtin();
            let mut add = Vec::new();
            for name in &names {
                let Some(e) = all.iter().find(|e| e.name.eq_ignore_ascii_case(name)) else {
                    let close: Vec<&str> = all
                        .iter()
                        .filter(|e| e.name.to_lowercase().contains(&name.to_lowercase()))
                        .map(|e| e.name.as_str())
                        .collect();
                    return Err(UsageError(format!(
                        "\"{name}\" is not in the catalogue{}; `kdigest sources catalogue` lists it",
                        if close.is_empty() { String::new() } else { format!(" (did you mean {}?)", close.join(", ")) }
                    ))
                    .into());
                };
                if config.sources.iter().any(|s| s.name == e.name) {
                    println!("{} is followed already", e.name);
                    continue;
                }
                add.push(NewSource {
                    name: e.name.clone(),
                    url: e.url.clone(),
                    kind: e.kind.clone(),
                    weight: e.weight,
                    comment: Some(format!("From the catalogue: {}", e.why)),
                });
            }
            write(&path()?, &add)
        }
        SourcesCommand::Add {
            name,
            url,
            kind,
            weight,
        } => {
            if config.sources.iter().any(|s| s.name == name) {
                return Err(UsageError(format!("a source named \"{name}\" exists already")).into());
            }
            let (url, kind) = resolve_page(config, &url, kind).await?;
            write(
                &path()?,
                &[NewSource {
                    name,
                    url,
                    kind,
                    weight,
                    comment: None,
                }],
            )
        }
        SourcesCommand::Check { name } => check(config, name.as_deref()).await,
        SourcesCommand::Import { file } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| UsageError(format!("Cannot read {}: {e}", file.display())))?;
            let outlines =
                opml::parse(&text).map_err(|e| UsageError(format!("{}: {e}", file.display())))?;
            let mut names: Vec<String> = config.sources.iter().map(|s| s.name.clone()).collect();
            let urls: Vec<String> = config
                .sources
                .iter()
                .map(|s| s.location.to_string())
                .collect();
            let mut add = Vec::new();
            for o in &outlines {
                if urls.contains(&o.xml_url) || add.iter().any(|a: &NewSource| a.url == o.xml_url) {
                    continue;
                }
                let mut name = o.title.clone();
                let mut n = 2;
                while names.contains(&name) {
                    name = format!("{} ({n})", o.title);
                    n += 1;
                }
                names.push(name.clone());
                let folders = if o.categories.is_empty() {
                    String::new()
                } else {
                    format!(" (folder: {})", o.categories.join(" / "))
                };
                add.push(NewSource {
                    name,
                    url: o.xml_url.clone(),
                    kind: Some(opml::kind_of(o).to_string()),
                    weight: 0.7,
                    comment: Some(format!("Imported from {}{folders}", file.display())),
                });
            }
            let skipped = outlines.len() - add.len();
            write(&path()?, &add)?;
            println!(
                "{} feeds in {}, {} added, {skipped} followed already",
                outlines.len(),
                file.display(),
                add.len()
            );
            Ok(())
        }
        SourcesCommand::Export => {
            print!("{}", opml::export(&config.sources, "kdigest sources"));
            Ok(())
        }
    }
}

fn write(path: &Path, add: &[NewSource]) -> anyhow::Result<()> {
    if add.is_empty() {
        return Ok(());
    }
    config_file::append(path, add)?;
    for s in add {
        println!("Added {} ({}) to {}", s.name, s.url, path.display());
    }
    Ok(())
}

async fn list(config: &Config) -> anyhow::Result<()> {
    let store = match config.storage.exists() {
        true => Some(Store::connect(&config.storage).await?),
        false => None,
    };
    let when = |t: Option<chrono::DateTime<Utc>>| {
        t.map_or("never".to_string(), |t| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
    };
    for status in crate::sources::health::statuses(config, store.as_ref(), Utc::now()).await? {
        let s = status.source;
        println!(
            "{} ({:?}, weight {}) {}",
            s.name, s.kind, s.weight, s.location
        );
        let items = status.items_last_7_days;
        let Some(h) = &status.health else {
            println!("    never fetched; {items} items in the last 7 days");
            continue;
        };
        let next = match status.backed_off_until {
            Some(t) => format!("backed off until {}", when(Some(t))),
            None => "next run".to_string(),
        };
        println!(
            "    last success {}, last attempt {}, {} failures in a row, next try: {next}; {items} items in the last 7 days",
            when(h.last_success_at),
            when(h.last_attempt_at),
            h.consecutive_failures
        );
        if let Some(e) = h
            .last_error
            .as_deref()
            .filter(|_| h.consecutive_failures > 0)
        {
            println!("    last error: {e}");
        }
    }
    Ok(())
}

/// A web page's feed, found once (the URL written to the file is the feed's): feed URLs
/// and shorthands are kept as given.
async fn resolve_page(
    config: &Config,
    url: &str,
    kind: Option<String>,
) -> anyhow::Result<(String, Option<String>)> {
    if crate::config::shorthand::expand(url)
        .map_err(UsageError)?
        .is_some()
    {
        return Ok((url.to_string(), kind));
    }
    let kind = kind.or_else(|| Some("feed".into()));
    let location =
        crate::config::parse_location(url).map_err(|why| UsageError(format!("{url} {why}")))?;
    let SourceLocation::Http(page) = location else {
        return Ok((url.to_string(), kind));
    };
    let probe = probe_source(&page);
    let fetcher = Fetcher::new(&config.fetch)?;
    let result = fetcher.fetch(&probe, &Validators::default()).await;
    let body = match result.outcome {
        Ok(FetchOutcome::Fetched { body, .. }) => body,
        Ok(FetchOutcome::NotModified) => return Ok((url.to_string(), kind)),
        Err(e) => return Err(UsageError(format!("{url}: {e}")).into()),
    };
    match parse_feed(&body, &probe, Utc::now()) {
        Ok(_) => Ok((url.to_string(), kind)),
        Err(ParseError::HtmlPage) => {
            let html = String::from_utf8_lossy(&body);
            match discover::feed_links(&html, &page).first() {
                Some(feed) => {
                    println!("{url} is a web page; its feed is {feed}");
                    Ok((feed.to_string(), kind))
                }
                None => Err(UsageError(format!(
                    "{url} is a web page that announces no feed (<link rel=\"alternate\">); find the site's RSS or Atom URL and add that"
                ))
                .into()),
            }
        }
        Err(e) => Err(UsageError(format!("{url}: {e}")).into()),
    }
}

fn probe_source(url: &url::Url) -> SourceConfig {
    SourceConfig {
        name: "probe".into(),
        location: SourceLocation::Http(url.clone()),
        kind: crate::model::SourceKind::Feed,
        weight: 1.0,
        max_items: None,
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

async fn check(config: &Config, name: Option<&str>) -> anyhow::Result<()> {
    let chosen: Vec<&SourceConfig> = match name {
        Some(n) => {
            let found: Vec<&SourceConfig> = config
                .sources
                .iter()
                .filter(|s| s.name.eq_ignore_ascii_case(n))
                .collect();
            if found.is_empty() {
                let names: Vec<&str> = config.sources.iter().map(|s| s.name.as_str()).collect();
                return Err(UsageError(format!(
                    "no source named \"{n}\"; the configured ones are {}",
                    names.join(", ")
                ))
                .into());
            }
            found
        }
        None => config.sources.iter().collect(),
    };
    let fetcher = Fetcher::new(&config.fetch)?;
    let mut failures = 0;
    for s in chosen {
        let result = fetcher.fetch(s, &Validators::default()).await;
        let report = match result.outcome {
            Ok(FetchOutcome::Fetched { body, .. }) => match parse_feed(&body, s, result.fetched_at)
            {
                Ok(items) => {
                    let count = |k: ItemKind| items.iter().filter(|i| i.kind == k).count();
                    let newest = items
                        .iter()
                        .map(|i| i.published)
                        .max()
                        .map_or("none".into(), |t| {
                            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                        });
                    Ok(format!(
                        "{} items (newest {newest}): {} releases, {} papers, {} posts{}",
                        items.len(),
                        count(ItemKind::Release),
                        count(ItemKind::Paper),
                        count(ItemKind::Post),
                        if s.include.is_empty() && s.exclude.is_empty() {
                            ""
                        } else {
                            " after include/exclude"
                        }
                    ))
                }
                Err(ParseError::HtmlPage) => {
                    let hint = match &s.location {
                        SourceLocation::Http(page) => {
                            discover::feed_links(&String::from_utf8_lossy(&body), page)
                                .first()
                                .map_or(String::new(), |f| format!("; its feed is {f}"))
                        }
                        SourceLocation::File(_) => String::new(),
                    };
                    Err(format!("{}{hint}", ParseError::HtmlPage))
                }
                Err(e) => Err(e.to_string()),
            },
            Ok(FetchOutcome::NotModified) => Ok("not modified (304)".into()),
            Err(e) => Err(e.to_string()),
        };
        match report {
            Ok(text) => println!("ok    {}: {text}", s.name),
            Err(text) => {
                failures += 1;
                println!("FAIL  {}: {text}", s.name);
            }
        }
    }
    if failures > 0 {
        anyhow::bail!("{failures} source(s) failed the check (see above)");
    }
    Ok(())
}
