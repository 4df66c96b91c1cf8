//! Command-line interface: arguments, config loading, dispatch and exit codes.
//!
//! Exit codes: 0 success (also when some sources failed: the digest says so), 2 bad
//! configuration or arguments (the message names the key or flag), 1 anything else.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use chrono::{NaiveDate, Utc};
use clap::{Parser, Subcommand};

pub mod output;
mod progress;
pub mod sources;
mod status;
pub mod subscribers;

use crate::classify::Classifier;
use crate::config::{Config, ConfigError};
use crate::digest;
use crate::model::{Digest, DigestEvent, ScoreComponent};
use crate::render::Renderer;

use crate::store::Store;
use output::Output;

#[derive(Debug, Parser)]
#[command(
    name = "kdigest",
    version,
    about = "Daily digest of GPU-kernel and ML-compiler news"
)]
pub struct Cli {
    /// Configuration file [default: ./config.toml when it exists, else built-in defaults]
    #[arg(long, global = true, env = "KDIGEST_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// A reader's view of a digest: `kdigest digest` renders what a reader with this language,
/// these layers, this threshold and these followed phrases receives.
#[derive(Debug, clap::Args)]
pub struct ReaderView {
    /// The reader's language: zh-CN or en [default: digest.language]
    #[arg(long)]
    lang: Option<String>,
    /// The reader's layers, comma-separated, or "all" [default: all]
    #[arg(long)]
    layers: Option<String>,
    /// The reader's minimum event score, 0-100 [default: digest.min_score]
    #[arg(long)]
    min_score: Option<f64>,
    /// A project or phrase the reader follows (repeatable): events about it pass, marked ★
    #[arg(long, value_name = "PHRASE")]
    follow: Vec<String>,
}

impl ReaderView {
    /// The reader's language and filter, when any of them is given.
    fn read(&self, config: &Config) -> Result<Option<(String, crate::model::Filter)>, UsageError> {
        if self.lang.is_none()
            && self.layers.is_none()
            && self.min_score.is_none()
            && self.follow.is_empty()
        {
            return Ok(None);
        }
        let language = subscribers::parse_language(self.lang.as_deref())?
            .unwrap_or_else(|| config.digest.language.clone());
        let filter = crate::model::Filter {
            layers: match &self.layers {
                Some(l) => subscribers::parse_layers(l, config)?,
                None => Default::default(),
            },
            min_score: subscribers::parse_min_score(self.min_score)?
                .unwrap_or(config.digest.min_score),
            boost: None,
            follows: subscribers::follows_after(&[], &self.follow, &[])?,
        };
        Ok(Some((language, filter)))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print (or write) one day's digest; generates it when it is not stored yet
    Digest {
        /// YYYY-MM-DD, today, yesterday or latest (the latest window that has ended)
        #[arg(long, default_value = "today")]
        date: String,
        #[arg(long, value_enum, default_value = "md")]
        format: Output,
        /// Write every format into this directory instead of printing one
        #[arg(long)]
        out: Option<PathBuf>,
        /// Fetch and regenerate even when the digest is stored
        #[arg(long)]
        force: bool,
        /// The weekly roll-up of an ISO week (YYYY-Www, e.g. 2026-W44) from its stored dailies
        #[arg(long, conflicts_with_all = ["date", "force"])]
        week: Option<String>,
        #[command(flatten)]
        reader: ReaderView,
    },
    /// Render what one subscriber receives next, exactly as delivery sends it: its editions
    /// of the day, in its channel's format, language and filter
    Preview {
        /// Subscriber id or address
        #[arg(long)]
        subscriber: String,
        /// YYYY-MM-DD, today, yesterday or latest
        #[arg(long, default_value = "latest")]
        date: String,
    },
    /// Show how an event's score was computed
    Explain {
        /// Event number in digest order (1 = first key change), event id, or part of its title
        // A negative number is an argument to refuse by name, not an unknown flag.
        #[arg(allow_hyphen_values = true)]
        event: String,
        #[arg(long, default_value = "latest")]
        date: String,
    },
    /// Which sources and layers readers value: their 👍/👎 votes, by source and by layer
    Feedback {
        /// The votes of the last N days
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3650))]
        days: u32,
    },
    /// Validate the configuration and report every problem at once
    CheckConfig,
    /// Run the scheduler and delivery workers (with /healthz and /metrics) until SIGINT/SIGTERM
    Run {
        /// Generate the digest of the latest scheduled run if missing, deliver it, and exit
        #[arg(long)]
        once: bool,
        /// With --once: the digest of this day (YYYY-MM-DD) instead of the latest run
        #[arg(long, requires = "once")]
        date: Option<String>,
        /// What this process does; on Postgres instances may split the work
        #[arg(long, value_enum, default_value = "all")]
        role: crate::daemon::Role,
    },
    /// Show the last and next run, deliveries of the latest digest and disabled subscribers
    Status,
    /// Manage subscribers
    #[command(subcommand)]
    Subscribers(subscribers::SubscribersCommand),
    /// Manage sources: health, the catalogue, adding, checking, OPML
    #[command(subcommand)]
    Sources(sources::SourcesCommand),
    /// What is stored
    #[command(subcommand)]
    Digests(DigestsCommand),
    /// Move the store to another engine
    #[command(subcommand)]
    Store(StoreCommand),
    /// Serve the Model Context Protocol over stdin/stdout: read-only tools over the archive
    /// for an assistant (search_events, get_digest, explain_event, list_sources,
    /// follow_ups); see docs/mcp.md
    Mcp,
    /// Run the full pipeline on bundled sample feeds served from 127.0.0.1 (no network)
    Demo {
        #[arg(long, value_enum, default_value = "md")]
        format: Output,
        /// zh-CN or en
        #[arg(long)]
        lang: Option<String>,
    },
    /// Score the selection on labelled days (tests/fixtures/eval): precision, recall, layer
    /// F1 and the lead per day; exits 1 below the thresholds CI holds the model to
    Eval {
        /// A folder of day folders, each with config.toml, labels.toml and feeds/
        #[arg(default_value = "tests/fixtures/eval")]
        dir: PathBuf,
        /// Fit the learned weights on every day and write them to --out instead of
        /// evaluating (rebuild to ship them)
        #[arg(long)]
        fit: bool,
        /// Where --fit writes the weights
        #[arg(
            long,
            default_value = "crates/core/src/learned_model.tsv",
            requires = "fit"
        )]
        out: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum DigestsCommand {
    /// Every stored digest, newest first: date, events, mode, when it was made, title
    List,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy items, digests, subscribers, deliveries and source state from one store to
    /// another (sqlite:PATH or postgres://...; a password belongs in the environment: use
    /// env:VAR to read a URL from VAR), then compare the row counts
    Copy {
        /// sqlite:PATH, postgres://... or env:VAR
        #[arg(long)]
        from: String,
        /// sqlite:PATH, postgres://... or env:VAR
        #[arg(long)]
        to: String,
        /// Copy into a target that holds rows already (they are kept)
        #[arg(long)]
        into_non_empty: bool,
    },
}

/// Opens a store named on the command line: `sqlite:PATH`, a postgres:// URL, or `env:VAR`
/// for a URL kept in an environment variable.
async fn open_named_store(name: &str, flag: &str) -> anyhow::Result<Store> {
    if let Some(path) = name.strip_prefix("sqlite:") {
        let path = std::path::Path::new(path);
        if flag == "--from" && !path.exists() {
            return Err(
                UsageError(format!("{flag} sqlite:{}: no such file", path.display())).into(),
            );
        }
        return Store::open(path).await;
    }
    let url = match name.strip_prefix("env:") {
        Some(var) => std::env::var(var).map_err(|_| {
            UsageError(format!(
                "{flag} env:{var}: the environment variable {var} is not set"
            ))
        })?,
        None => name.to_string(),
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Store::open_postgres(&url).await;
    }
    Err(UsageError(format!(
        "{flag}: expected sqlite:PATH, postgres://USER@HOST/DATABASE or env:VAR"
    ))
    .into())
}

/// A bad command-line argument; exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Maps an error to the documented exit code.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    let usage = error
        .chain()
        .any(|e| e.is::<ConfigError>() || e.is::<UsageError>());
    if usage { 2 } else { 1 }
}

pub fn load_config(path: Option<&Path>) -> Result<Config, ConfigError> {
    match path {
        Some(p) => Config::load(p),
        None if Path::new("config.toml").exists() => Config::load(Path::new("config.toml")),
        None => Config::parse(""),
    }
}

/// Logs go to stderr; JSON lines when `daemon.log_format = "json"`. RUST_LOG overrides the
/// level (default: warn for one-shot commands, info for the daemon).
pub fn init_logging(format: crate::config::LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // Colour only on a terminal: escape codes in a log file or a pipe are noise.
    let builder = tracing_subscriber::fmt()
        .with_writer(progress::LogWriter::default)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter);
    let _ = match format {
        crate::config::LogFormat::Json => builder.json().try_init(),
        crate::config::LogFormat::Text => builder.try_init(),
    };
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    // The demo brings its own sources and storage; it reads a configuration only when one
    // is named, for its layers, scoring, language and templates.
    let config = match (&cli.command, cli.config.as_deref()) {
        (Command::Demo { .. }, None) => None,
        // Every labelled day brings its own configuration.
        (Command::Eval { .. }, _) => None,
        // Both stores are named on the command line.
        (Command::Store(_), _) => None,
        (_, path) => Some(load_config(path)?),
    };
    let format = config
        .as_ref()
        .map_or(crate::config::LogFormat::Text, |c| c.daemon.log_format);
    let daemon = matches!(cli.command, Command::Run { once: false, .. });
    init_logging(format, if daemon { "info" } else { "warn" });
    // Deprecated keys still work; each command says once where they moved (check-config
    // prints them with its verdict).
    if !matches!(cli.command, Command::CheckConfig) {
        for note in config.iter().flat_map(|c| &c.notes) {
            tracing::warn!(message = "Deprecated configuration key", note = %note);
        }
    }
    // The configuration of every command but demo, eval and store (loaded above).
    let loaded = || config.clone().expect("loaded above");
    match cli.command {
        Command::Run { once, date, role } => run_daemon(loaded(), once, date, role).await,
        Command::Status => status_command(&loaded()).await,
        Command::Store(StoreCommand::Copy {
            from,
            to,
            into_non_empty,
        }) => store_copy(&from, &to, into_non_empty).await,
        Command::Digests(DigestsCommand::List) => digests_list(&loaded()).await,
        Command::Sources(command) => sources::run(command, &loaded(), cli.config.as_deref()).await,
        Command::Subscribers(command) => subscribers_command(command, &loaded()).await,
        Command::CheckConfig => check_config(&loaded()),
        Command::Digest {
            date,
            format,
            out,
            force,
            week,
            reader,
        } => {
            digest_command(
                &loaded(),
                &date,
                format,
                out.as_deref(),
                force,
                week,
                &reader,
            )
            .await
        }
        Command::Preview { subscriber, date } => {
            preview_command(&loaded(), &subscriber, &date).await
        }
        Command::Explain { event, date } => explain_command(&loaded(), &event, &date).await,
        Command::Feedback { days } => feedback_command(&loaded(), days).await,
        Command::Eval { dir, fit, out } => eval_command(&dir, fit, &out),
        Command::Demo { format, lang } => demo_command(config, format, lang.as_deref()).await,
        Command::Mcp => {
            let config = loaded();
            // An assistant configured with a wrong path would otherwise be served a new,
            // empty archive and answer every question with nothing.
            if config.storage.url.is_none() && !config.storage.path.exists() {
                anyhow::bail!(
                    "No kdigest archive at storage.path = \"{}\": `kdigest mcp` serves the digests the daemon stored. Point --config (or storage.path) at the daemon's database, or run `kdigest run` once to make one",
                    config.storage.path.display()
                );
            }
            let store = Store::connect(&config.storage).await?;
            crate::mcp::serve_stdio(store, std::sync::Arc::new(config)).await
        }
    }
}

async fn run_daemon(
    config: Config,
    once: bool,
    date: Option<String>,
    role: crate::daemon::Role,
) -> anyhow::Result<()> {
    let date = match date {
        Some(d) => Some(
            NaiveDate::parse_from_str(&d, "%Y-%m-%d")
                .map_err(|_| UsageError(format!("--date {d}: expected YYYY-MM-DD")))?,
        ),
        None => None,
    };
    let mode = if once {
        crate::daemon::Mode::Once { date }
    } else {
        crate::daemon::Mode::Forever
    };
    crate::daemon::run(config, mode, role).await
}

async fn status_command(config: &Config) -> anyhow::Result<()> {
    // Looking must not create: without a database there is nothing to report.
    let store = if config.storage.exists() {
        Some(Store::connect(&config.storage).await?)
    } else {
        None
    };
    status::run(config, store.as_ref()).await
}

async fn store_copy(from: &str, to: &str, into_non_empty: bool) -> anyhow::Result<()> {
    let source = open_named_store(from, "--from").await?;
    let target = open_named_store(to, "--to").await?;
    let report = crate::store::copy_store(&source, &target, into_non_empty).await?;
    for (table, source_rows, target_rows) in &report.tables {
        println!("{table:<14} {source_rows:>9} copied, {target_rows:>9} in the target");
    }
    println!("Counts verified: every row of the source is in the target");
    source.close().await;
    target.close().await;
    Ok(())
}

async fn digests_list(config: &Config) -> anyhow::Result<()> {
    if !config.storage.exists() {
        println!(
            "No digests stored: {} does not exist yet",
            config.storage.describe()
        );
        return Ok(());
    }
    let store = Store::connect(&config.storage).await?;
    list_digests(&store).await
}

async fn subscribers_command(
    command: subscribers::SubscribersCommand,
    config: &Config,
) -> anyhow::Result<()> {
    let store = Store::connect(&config.storage).await?;
    subscribers::run(command, config, &store).await
}

fn check_config(config: &Config) -> anyhow::Result<()> {
    crate::summarize::check_ready(config)?;
    for note in &config.notes {
        eprintln!("Note: {note}");
    }
    // The catalogue `sources enable` draws from, checked against this configuration
    // (its layers may be named differently: a note, not an error).
    for problem in crate::sources::catalogue::problems(
        &crate::sources::catalogue::builtin(),
        &config.layer_names(),
    ) {
        eprintln!("Note: {problem}");
    }
    println!(
        "Configuration is valid: {} sources, {} layers, summarize mode {}, storage {}",
        config.sources.len(),
        config.layers.len(),
        config.summarize.mode.as_str(),
        config.storage.describe()
    );
    Ok(())
}

/// The configured renderer, linking to the site.
fn site_renderer(config: &Config) -> anyhow::Result<Renderer> {
    Ok(crate::templates::renderer(
        &config.digest.language,
        config.digest.templates_dir.as_deref(),
    )?
    .with_site(config.web.public_url.clone()))
}

async fn digest_command(
    config: &Config,
    date: &str,
    format: Output,
    out: Option<&Path>,
    force: bool,
    week: Option<String>,
    reader: &ReaderView,
) -> anyhow::Result<()> {
    let week = week
        .map(|w| crate::weekly::Week::parse(&w).map_err(|e| UsageError(format!("--week {e}"))))
        .transpose()?;
    let reader = reader.read(config)?;
    let store = Store::connect(&config.storage).await?;
    if let Some(week) = week {
        let digest = weekly(config, &store, week).await?;
        return reader_output(config, &digest, reader, format, out);
    }
    let date = resolve_date(date, config).await?;
    let stored = if force {
        None
    } else {
        store.load_digest(date).await?
    };
    let digest = match stored {
        Some(d) => d,
        None => progress::generate(config, &store, date).await?,
    };
    reader_output(config, &digest, reader, format, out)
}

/// The digest as it is, or as a reader with this language and filter receives it.
fn reader_output(
    config: &Config,
    digest: &Digest,
    reader: Option<(String, crate::model::Filter)>,
    format: Output,
    out: Option<&Path>,
) -> anyhow::Result<()> {
    let Some((language, filter)) = reader else {
        return output(&site_renderer(config)?, digest, format, out);
    };
    let renderer = crate::templates::renderer(&language, config.digest.templates_dir.as_deref())?
        .with_site(config.web.public_url.clone());
    let edition = crate::deliver::reader_edition(digest, &filter, &language, renderer.locale());
    output(&renderer, &edition, format, out)
}

async fn preview_command(config: &Config, key: &str, date: &str) -> anyhow::Result<()> {
    let store = Store::connect(&config.storage).await?;
    let reader = subscribers::find(&store, key).await?;
    let date = resolve_date(date, config).await?;
    if store.load_digest(date).await?.is_none() {
        progress::generate(config, &store, date).await?;
    }
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::default());
    let engine = crate::deliver::engine::Engine::new(store, config, metrics)?;
    let editions = engine.preview(&reader, date).await?;
    println!("{}", subscribers::describe(&reader));
    if editions.is_empty() {
        println!(
            "Nothing on {date}: its cadence ({}) takes no edition that day",
            reader.cadence
        );
    }
    for (edition, messages) in editions {
        match messages {
            None => println!(
                "── {} of {date}: nothing passes its filter, so nothing is sent (notify-empty is off)",
                edition.as_str()
            ),
            Some(messages) => {
                let total = messages.len();
                for (i, m) in messages.iter().enumerate() {
                    println!(
                        "──── {} of {date} to {}: message {}/{total} ────",
                        edition.as_str(),
                        reader.address,
                        i + 1
                    );
                    print!("{m}");
                    if !m.ends_with('\n') {
                        println!();
                    }
                }
            }
        }
    }
    Ok(())
}

async fn explain_command(config: &Config, event: &str, date: &str) -> anyhow::Result<()> {
    let store = Store::connect(&config.storage).await?;
    let date = resolve_date(date, config).await?;
    explain(config, &store, date, event).await
}

async fn feedback_command(config: &Config, days: u32) -> anyhow::Result<()> {
    let store = Store::connect(&config.storage).await?;
    let since = Utc::now() - chrono::Duration::days(i64::from(days));
    let voted = store.voted_events(since).await?;
    print!(
        "{}",
        crate::feedback::report_text(&crate::feedback::report(&voted), days)
    );
    Ok(())
}

fn eval_command(dir: &Path, fit: bool, out: &Path) -> anyhow::Result<()> {
    let days = crate::eval::load_days(dir)?
        .into_iter()
        .map(crate::eval::load)
        .collect::<anyhow::Result<Vec<_>>>()?;
    if fit {
        std::fs::write(out, crate::eval::fit_file(&days))
            .with_context(|| format!("Cannot write the weights to {}", out.display()))?;
        println!(
            "Wrote the weights fitted on {} days to {}; rebuild to ship them, then run `kdigest eval`.",
            days.len(),
            out.display()
        );
        return Ok(());
    }
    let (text, pass) = crate::eval::run(&days);
    print!("{text}");
    if pass {
        Ok(())
    } else {
        anyhow::bail!("The selection is below the eval thresholds (see above)")
    }
}

async fn demo_command(
    config: Option<Config>,
    format: Output,
    lang: Option<&str>,
) -> anyhow::Result<()> {
    let lang = subscribers::parse_language(lang)?;
    // The site's base from the configuration, if one was given: the robots' "read on the
    // web" buttons link there.
    let site = config.as_ref().map(|c| c.web.public_url.clone());
    let digest = crate::demo::run(config, lang.as_deref()).await?;
    let mut renderer = crate::templates::renderer(&digest.language, None)?;
    if let Some(site) = site {
        renderer = renderer.with_site(site);
    }
    output(&renderer, &digest, format, None)
}

fn output(
    renderer: &Renderer,
    digest: &Digest,
    format: Output,
    out: Option<&Path>,
) -> anyhow::Result<()> {
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("Cannot create --out directory {}", dir.display()))?;
            for f in Output::all().iter().copied() {
                let parts = f.render(renderer, digest)?;
                for (i, part) in parts.iter().enumerate() {
                    let path = dir.join(f.file_name(i + 1, parts.len()));
                    std::fs::write(&path, part)
                        .with_context(|| format!("Cannot write {}", path.display()))?;
                }
            }
            eprintln!("Wrote every render of {} to {}", digest.date, dir.display());
        }
        None => {
            let parts = format.render(renderer, digest)?;
            let total = parts.len();
            for (i, part) in parts.iter().enumerate() {
                if total > 1 {
                    println!("──── message {}/{total} ────", i + 1);
                }
                print!("{part}");
                if !part.ends_with('\n') {
                    println!();
                }
            }
        }
    }
    Ok(())
}

async fn list_digests(store: &Store) -> anyhow::Result<()> {
    let stored = store.list_digests().await?;
    if stored.is_empty() {
        println!("No digests stored yet; `kdigest digest --date latest` makes one");
        return Ok(());
    }
    println!("date        events  mode        generated at               title");
    for s in stored {
        println!(
            "{}  {:>6}  {:<10}  {:<25}  {}",
            s.digest.date,
            s.events,
            s.digest.generation_mode,
            s.generated_at,
            crate::text::truncate_chars(&s.digest.title, 80)
        );
    }
    Ok(())
}

/// `YYYY-MM-DD`, `today`, `yesterday` (in the configured time zone) or `latest`: the latest
/// window that has ended (made when it is not stored), never an older stored digest.
/// The roll-up of `week` from the stored dailies; says which days have none.
async fn weekly(
    config: &Config,
    store: &Store,
    week: crate::weekly::Week,
) -> anyhow::Result<crate::model::Digest> {
    let locale = crate::templates::locale(
        &config.digest.language,
        config.digest.templates_dir.as_deref(),
    )?;
    let (digest, missing) =
        crate::pipeline::roll_up(store, week, config.digest.key_changes, &locale, None).await?;
    let Some(digest) = digest else {
        let days = week.days();
        anyhow::bail!(
            "No digest is stored for any day of {week} ({} to {}); make them first with `kdigest digest --date YYYY-MM-DD`",
            days[0],
            days[6]
        );
    };
    if !missing.is_empty() {
        eprintln!(
            "{week}: no stored digest for {}; the roll-up covers the other {} days",
            missing
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            7 - missing.len()
        );
    }
    Ok(digest)
}

pub async fn resolve_date(raw: &str, config: &Config) -> anyhow::Result<NaiveDate> {
    let today = Utc::now()
        .with_timezone(&config.digest.timezone)
        .date_naive();
    match raw {
        "today" => Ok(today),
        "yesterday" => Ok(today.pred_opt().unwrap_or(today)),
        "latest" => Ok(digest::latest_complete_date(Utc::now(), config)),
        other => NaiveDate::parse_from_str(other, "%Y-%m-%d").map_err(|_| {
            UsageError(format!(
                "--date {other}: expected YYYY-MM-DD, today, yesterday or latest"
            ))
            .into()
        }),
    }
}

async fn explain(
    config: &Config,
    store: &Store,
    date: NaiveDate,
    query: &str,
) -> anyhow::Result<()> {
    let stored = store.load_digest(date).await?;
    if let Some(d) = &stored
        && let Some((n, e)) = find_event(d.events().collect(), query)
    {
        print_breakdown(
            n,
            e.id.as_str(),
            &e.title,
            e.score.to_string(),
            &e.layers,
            &e.score_breakdown,
        );
        println!("Readers: {}", store.tally(&e.id).await?);
        return Ok(());
    }
    // Not in the digest: recompute from stored items, which also explains low scores.
    let window = digest::window_for(date, config);
    let names: Vec<String> = config.sources.iter().map(|s| s.name.clone()).collect();
    let items = store.items_in_window(&names, &window).await?;
    let classifier = Classifier::new(&config.layers, &config.relevance);
    let all = digest::candidates(items, &window, config, &classifier);
    let hit = all.iter().find(|c| {
        c.event.id == query
            || (!looks_like_number(query) && contains_ci(&c.event.primary().title, query))
    });
    match hit {
        Some(c) => {
            print_breakdown(0, &c.event.id, &c.event.primary().title, c.assessment.score.to_string(), &c.classification.layers, &c.assessment.breakdown);
            if c.assessment.score < config.digest.min_score {
                println!("Below digest.min_score {} so it is not in the digest.", config.digest.min_score);
            }
            if c.classification.layers.is_empty() {
                println!("It matches no keyword of any layer, so it is off-topic and not in the digest.");
            }
            if crate::classify::talks_prices(c.event.primary()) {
                println!("It is about what GPUs cost (prices by the hour, or renting and pricing three times or more): a rental or pricing guide, not in the digest.");
            }
            Ok(())
        }
        None if stored.is_none() && all.is_empty() => Err(UsageError(format!(
            "No digest and no items stored for {date}; run `kdigest digest --date {date}` first"
        ))
        .into()),
        None if looks_like_number(query) => {
            let count = stored.as_ref().map_or(0, |d| d.events().count());
            let range = match count {
                0 => format!("the digest of {date} has no events"),
                n => format!("the digest of {date} numbers its events 1 to {n}"),
            };
            Err(UsageError(format!(
                "EVENT {query} is not an event number: {range}; give a number in that range, an event id, or part of a title"
            ))
            .into())
        }
        None => Err(UsageError(format!(
            "No event matches \"{query}\" on {date}; give its number in the digest, its id, or part of its title"
        ))
        .into()),
    }
}

/// A query meant as a number: digits with an optional sign, or a power (`2^70`).
fn looks_like_number(query: &str) -> bool {
    let digits = query.trim_start_matches(['-', '+']);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '^')
}

fn contains_ci(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

fn find_event<'a>(events: Vec<&'a DigestEvent>, query: &str) -> Option<(usize, &'a DigestEvent)> {
    // An id wins over a position: ids are hex and may be all digits.
    let by_id = events.iter().position(|e| e.id == query);
    // Numbers as every render shows them (DigestEvent::n), else positions (older digests).
    let by_number = query.parse::<usize>().ok().and_then(|n| {
        events
            .iter()
            .position(|e| e.n == n)
            .or_else(|| Some(n.checked_sub(1)?).filter(|i| *i < events.len() && events[*i].n == 0))
    });
    // A number is a position, never a piece of a title ("0" is in "CUTLASS 5.0.0").
    let by_title = || {
        (!looks_like_number(query))
            .then(|| events.iter().position(|e| contains_ci(&e.title, query)))
            .flatten()
    };
    let index = by_id.or(by_number).or_else(by_title)?;
    let e = events[index];
    Some((if e.n > 0 { e.n } else { index + 1 }, e))
}

fn print_breakdown(
    n: usize,
    id: &str,
    title: &str,
    score: String,
    layers: &[String],
    breakdown: &[ScoreComponent],
) {
    let position = if n > 0 {
        format!("#{n} ")
    } else {
        String::new()
    };
    println!("{position}{title}");
    println!(
        "id {id}; layers: {}",
        if layers.is_empty() {
            "none".to_string()
        } else {
            layers.join(", ")
        }
    );
    println!(
        "score {score}/100 = sum of the points (value × weight; an llm_rating adds -10 to +10):"
    );
    println!(
        "  {:<14} {:>6} {:>7} {:>7}  reason",
        "component", "value", "weight", "points"
    );
    for c in breakdown {
        println!(
            "  {:<14} {:>6.3} {:>7.1} {:>7.2}  {}",
            c.name, c.value, c.weight, c.points, c.reason
        );
    }
}
