//! The Model Context Protocol server: read-only tools over the archive, the digests and the
//! sources, so an assistant can ask kdigest what happened. `kdigest mcp` speaks it over
//! stdio (desktop assistants start it as a child process); the daemon serves it over
//! streamable HTTP at `/mcp` when `[web] mcp = true`, behind a bearer token (http.rs). Built
//! on the official Rust SDK (rmcp); docs/mcp.md says how to connect a client.
//!
//! Every input is checked before the store is asked (a bad one is an `invalid_params` error
//! naming the fix), answers are bounded ([`MAX_RESULTS`], [`MAX_ANSWER_CHARS`]), and a store
//! failure is logged here and answered as an internal error without its details.

use std::sync::Arc;

use chrono::NaiveDate;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, schemars, tool, tool_handler};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::Config;
use crate::model::{Digest, DigestEvent, Filter, Score};
use crate::store::Store;

pub mod http;

/// Most results `search_events` returns at once.
pub const MAX_RESULTS: u32 = 50;
/// Most characters of one answer: an assistant's context is not a place for a dump.
pub const MAX_ANSWER_CHARS: usize = 100_000;
/// Characters of an event's summary in a search result.
const SUMMARY_CHARS: usize = 400;
/// Archive rows read per page while the filters keep too few, and at most in all: a
/// question about a narrow range of a busy archive is answered, a query that matches
/// nothing is not a scan of everything.
const SEARCH_PAGE: i64 = 500;
const SEARCH_SCAN_MAX: i64 = 10_000;
/// Characters of a source's last error.
const ERROR_CHARS: usize = 300;
/// Steps of one story, at most.
const MAX_STORY: usize = 50;
/// Days after an event's first digest searched for the stories that continue it.
const FOLLOW_DAYS: i64 = 60;
/// The resource: the latest digest in Markdown.
pub const LATEST_URI: &str = "kdigest://digest/latest";

/// One MCP session's server: cheap to make (the store is a pool), one per connection.
#[derive(Clone)]
pub struct Server {
    store: Store,
    config: Arc<Config>,
    tool_router: ToolRouter<Server>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to find, in English or Chinese (all must occur), e.g. "warp specialization" or
    /// "注意力". May be left out when `layer` is given.
    pub query: Option<String>,
    /// Only events tagged with this layer: frontend, optimization, kernel_codegen,
    /// hardware_backend, runtime or benchmark.
    pub layer: Option<String>,
    /// Only events scoring at least this, 0-100.
    pub min_score: Option<f64>,
    /// Only digests on or after this date, YYYY-MM-DD.
    pub since: Option<String>,
    /// Only digests on or before this date, YYYY-MM-DD.
    pub until: Option<String>,
    /// Only events with a source whose name or link contains this, e.g. "arxiv" or
    /// "triton-lang".
    pub source: Option<String>,
    /// The language of the texts returned: en or zh-CN (default: the digest's).
    pub language: Option<String>,
    /// At most this many results, 1-50 (default 10).
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DigestArgs {
    /// The day: YYYY-MM-DD or "latest" (default). Not with `week`.
    pub date: Option<String>,
    /// An ISO week, e.g. 2026-W44: that week's roll-up instead of one day's digest.
    pub week: Option<String>,
    /// en or zh-CN (default: the digest's).
    pub language: Option<String>,
    /// Only events tagged with one of these layers (default: all).
    pub layers: Option<Vec<String>>,
    /// Only events scoring at least this, 0-100 (default: the configured threshold).
    pub min_score: Option<f64>,
    /// Projects or phrases the reader follows: their events pass whatever the layers and
    /// threshold, marked ★.
    pub follow: Option<Vec<String>>,
    /// markdown (default) or json (the documented digest JSON).
    pub format: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
    /// The event's id (hex, as in search results and digest JSON).
    pub event_id: Option<String>,
    /// Or the event's number in a digest (1 = its first key change)...
    pub n: Option<u32>,
    /// ...of this day's digest, YYYY-MM-DD (default: the latest).
    pub date: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FollowUpsArgs {
    /// The event's id (hex, as in search results and digest JSON).
    pub event_id: String,
}

/// A tool's answer: JSON text. Never cut (a cut would not parse): the tools bound what they
/// put in, and one too large anyway is refused with how to narrow it.
fn answer(value: &Value) -> Result<CallToolResult, McpError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| McpError::internal_error(format!("cannot write the answer: {e}"), None))?;
    Ok(CallToolResult::success(vec![ContentBlock::text(
        within_limit(text)?,
    )]))
}

/// JSON `text` when it is within [`MAX_ANSWER_CHARS`]; else an error saying how to narrow.
fn within_limit(text: String) -> Result<String, McpError> {
    let n = text.chars().count();
    if n <= MAX_ANSWER_CHARS {
        Ok(text)
    } else {
        Err(bad(format!(
            "the answer is {n} characters, more than {MAX_ANSWER_CHARS}; narrow it with layers, min_score or a date, or ask for markdown"
        )))
    }
}

/// Markdown `text` within [`MAX_ANSWER_CHARS`], saying so when it was cut.
fn bounded(text: String) -> String {
    if text.chars().count() <= MAX_ANSWER_CHARS {
        return text;
    }
    let mut cut = crate::text::truncate_chars(&text, MAX_ANSWER_CHARS);
    cut.push_str(
        "\n[cut at 100,000 characters: narrow the question with layers, min_score or a date]",
    );
    cut
}

fn bad(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

/// A store failure: logged whole, answered without its details.
fn failed(error: anyhow::Error) -> McpError {
    tracing::error!(message = "MCP request failed", error = %format!("{error:#}"));
    McpError::internal_error(
        "the archive cannot be read right now; try again later",
        None,
    )
}

fn date_arg(key: &str, raw: &str) -> Result<NaiveDate, McpError> {
    NaiveDate::parse_from_str(raw.trim(), "%Y-%m-%d").map_err(|_| {
        bad(format!(
            "{key}: \"{}\" is not a date; use YYYY-MM-DD, e.g. 2026-10-28",
            crate::text::truncate_chars(raw, 40)
        ))
    })
}

fn score_arg(key: &str, raw: Option<f64>) -> Result<Option<Score>, McpError> {
    raw.map(|v| {
        Score::parse_threshold(v).ok_or_else(|| {
            bad(format!(
                "{key}: {v} is not a score; use a number from 0 to 100"
            ))
        })
    })
    .transpose()
}

fn event_id_arg(raw: &str) -> Result<String, McpError> {
    let id = raw.trim().to_ascii_lowercase();
    if crate::model::is_event_id(&id) {
        Ok(id)
    } else {
        Err(bad(format!(
            "event_id: \"{}\" is not an event id; ids are hex digits, as search_events returns them",
            crate::text::truncate_chars(raw, 40)
        )))
    }
}

impl Server {
    pub fn new(store: Store, config: Arc<Config>) -> Server {
        Server {
            store,
            config,
            tool_router: Self::tool_router(),
        }
    }

    fn language_arg(&self, raw: Option<&str>) -> Result<String, McpError> {
        match raw.map(str::trim) {
            None => Ok(self.config.digest.language.clone()),
            Some("en") => Ok("en".into()),
            Some("zh" | "zh-CN" | "zh-cn") => Ok("zh-CN".into()),
            Some(other) => Err(bad(format!(
                "language: \"{}\" is not offered; use en or zh-CN",
                crate::text::truncate_chars(other, 40)
            ))),
        }
    }

    fn layer_arg(&self, raw: &str) -> Result<String, McpError> {
        let layer = raw.trim().to_ascii_lowercase();
        let known: Vec<&str> = self.config.layers.iter().map(|l| l.name.as_str()).collect();
        if known.contains(&layer.as_str()) {
            Ok(layer)
        } else {
            Err(bad(format!(
                "layer: \"{}\" is not a layer; use one of {}",
                crate::text::truncate_chars(raw, 40),
                known.join(", ")
            )))
        }
    }

    /// The site's page of an event, when the site has an address.
    fn permalink(&self, id: &str) -> Option<String> {
        self.config
            .web
            .public_url
            .join(&format!("e/{id}"))
            .ok()
            .map(|u| u.to_string())
    }

    /// One event as a search result or a step of a story: what an assistant needs to cite it.
    fn event_json(&self, date: NaiveDate, e: &DigestEvent, language: &str) -> Value {
        let words = e.translations.get(language);
        let summary = words
            .and_then(|w| w.summary.as_deref())
            .unwrap_or(&e.summary);
        json!({
            "date": date.to_string(),
            "n": e.n,
            "event_id": e.id,
            "title": e.title,
            "kind": e.kind,
            "score": e.score,
            "layers": e.layers,
            "summary": crate::text::truncate_chars(summary, SUMMARY_CHARS),
            "sources": e.sources,
            "permalink": self.permalink(&e.id),
        })
    }

    /// The digest a `date` argument names: a day's, or the latest with events.
    async fn digest_of(&self, date: Option<&str>) -> Result<Digest, McpError> {
        match date.map(str::trim) {
            None | Some("latest") => self
                .store
                .latest_digest_with_events()
                .await
                .map_err(failed)?
                .ok_or_else(|| bad("there is no digest yet; run `kdigest run` first".into())),
            Some(raw) => {
                let day = date_arg("date", raw)?;
                self.store
                    .load_digest(day)
                    .await
                    .map_err(failed)?
                    .ok_or_else(|| {
                        bad(format!(
                            "date: there is no digest for {day}; list_sources shows what was fetched, get_digest without a date gives the latest"
                        ))
                    })
            }
        }
    }

    /// The latest digest in Markdown, in its own language (the resource).
    async fn latest_markdown(&self) -> Result<String, McpError> {
        let d = self.digest_of(None).await?;
        let renderer =
            crate::templates::renderer(&d.language, self.config.digest.templates_dir.as_deref())
                .map_err(failed)?;
        let parts = renderer
            .render(&d, crate::render::Format::Md)
            .map_err(failed)?;
        Ok(bounded(parts.concat()))
    }
}

#[rmcp::tool_router]
impl Server {
    #[tool(
        description = "Search the archive of kdigest's daily digests (GPU kernels and ML compilers) for events: those with the words in their title first, then newest first. Filters: layer, min_score, since/until (dates), source. Returns each event's date, number, id, title, score, layers, a summary and its links.",
        annotations(read_only_hint = true)
    )]
    async fn search_events(
        &self,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, McpError> {
        let language = self.language_arg(args.language.as_deref())?;
        let layer = args
            .layer
            .as_deref()
            .map(|l| self.layer_arg(l))
            .transpose()?;
        let min_score = score_arg("min_score", args.min_score)?;
        let since = args
            .since
            .as_deref()
            .map(|d| date_arg("since", d))
            .transpose()?;
        let until = args
            .until
            .as_deref()
            .map(|d| date_arg("until", d))
            .transpose()?;
        let limit = match args.limit {
            None => 10,
            Some(n @ 1..=MAX_RESULTS) => n,
            Some(n) => {
                return Err(bad(format!(
                    "limit: {n} is out of range; ask for 1 to {MAX_RESULTS} results"
                )));
            }
        };
        let query = args.query.as_deref().map(str::trim).unwrap_or("");
        if query.chars().count() > 200 {
            return Err(bad(
                "query: longer than 200 characters; search with a few words".into(),
            ));
        }
        let terms = crate::archive::terms(query);
        if terms.is_empty() && layer.is_none() {
            return Err(bad(
                "query: give words to search for, or a layer to list its events".into(),
            ));
        }
        let source = args.source.as_deref().map(|s| s.trim().to_lowercase());
        let wanted = |a: &crate::archive::ArchivedEvent| {
            layer.as_ref().is_none_or(|l| a.event.layers.contains(l))
                && min_score.is_none_or(|m| a.event.score >= m)
                && since.is_none_or(|d| a.date >= d)
                && until.is_none_or(|d| a.date <= d)
                && source.as_ref().is_none_or(|s| {
                    a.event.sources.iter().any(|link| {
                        link.name.to_lowercase().contains(s.as_str())
                            || link.url.to_lowercase().contains(s.as_str())
                    })
                })
        };
        // Page through the matches until enough pass the filters (one more than asked, to
        // say whether there are more), the matches end, or the scan reaches its cap.
        let mut kept = Vec::new();
        let mut offset = 0;
        let mut capped = false;
        loop {
            let page = if terms.is_empty() {
                let l = layer.as_deref().unwrap_or_default();
                self.store.layer_events(l, offset, SEARCH_PAGE).await
            } else {
                self.store.search_events(&terms, offset, SEARCH_PAGE).await
            }
            .map_err(failed)?;
            let n = page.len() as i64;
            kept.extend(page.into_iter().filter(|a| wanted(a)));
            offset += n;
            if kept.len() > limit as usize || n < SEARCH_PAGE {
                break;
            }
            if offset >= SEARCH_SCAN_MAX {
                capped = true;
                break;
            }
        }
        let more = kept.len() > limit as usize || capped;
        let results: Vec<Value> = kept
            .iter()
            .take(limit as usize)
            .map(|a| self.event_json(a.date, &a.event, &language))
            .collect();
        answer(&json!({ "results": results, "more": more }))
    }

    #[tool(
        description = "One day's digest (or an ISO week's roll-up) as a reader with these choices receives it: language, layers, minimum score, followed projects. Markdown by default, or the digest JSON.",
        annotations(read_only_hint = true)
    )]
    async fn get_digest(
        &self,
        Parameters(args): Parameters<DigestArgs>,
    ) -> Result<CallToolResult, McpError> {
        let language = self.language_arg(args.language.as_deref())?;
        let json_format = match args.format.as_deref().map(str::trim) {
            None | Some("markdown") => false,
            Some("json") => true,
            Some(other) => {
                return Err(bad(format!(
                    "format: \"{}\" is not offered; use markdown or json",
                    crate::text::truncate_chars(other, 40)
                )));
            }
        };
        let mut layers = std::collections::BTreeSet::new();
        for l in args.layers.iter().flatten() {
            layers.insert(self.layer_arg(l)?);
        }
        let follows =
            crate::following::add_all(&[], args.follow.iter().flatten().map(String::as_str))
                .map_err(|e| bad(format!("follow: {e}")))?;
        let filter = Filter {
            layers,
            min_score: score_arg("min_score", args.min_score)?
                .unwrap_or(self.config.digest.min_score),
            boost: None,
            follows,
        };
        let renderer =
            crate::templates::renderer(&language, self.config.digest.templates_dir.as_deref())
                .map_err(failed)?;
        let digest = match (&args.week, &args.date) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "date and week: give one, a day (YYYY-MM-DD) or a week (2026-W44)".into(),
                ));
            }
            (Some(raw), None) => {
                let week =
                    crate::weekly::Week::parse(raw).map_err(|e| bad(format!("week: {e}")))?;
                crate::pipeline::roll_up(
                    &self.store,
                    week,
                    self.config.digest.key_changes,
                    renderer.locale(),
                    None,
                )
                .await
                .map_err(failed)?
                .0
                .ok_or_else(|| bad(format!("week: no daily digest is stored for {week}")))?
            }
            (None, date) => self.digest_of(date.as_deref()).await?,
        };
        let edition =
            crate::deliver::reader_edition(&digest, &filter, &language, renderer.locale());
        let format = if json_format {
            crate::render::Format::Json
        } else {
            crate::render::Format::Md
        };
        let text = renderer.render(&edition, format).map_err(failed)?.concat();
        let text = if json_format {
            within_limit(text)?
        } else {
            bounded(text)
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    #[tool(
        description = "Why an event scored what it did: its score breakdown (source, relevance, impact, corroboration, freshness, each with its reason), layers, sources, readers' votes and the digests it appeared in. Name it by event_id, or by its number n in a day's digest.",
        annotations(read_only_hint = true)
    )]
    async fn explain_event(
        &self,
        Parameters(args): Parameters<ExplainArgs>,
    ) -> Result<CallToolResult, McpError> {
        let (date, event) = match (&args.event_id, args.n) {
            (Some(id), None) => {
                let id = event_id_arg(id)?;
                let appearances = self.store.event_appearances(&id).await.map_err(failed)?;
                let newest = appearances.into_iter().next().ok_or_else(|| {
                    bad(format!(
                        "event_id: no digest has event {id}; search_events finds ids"
                    ))
                })?;
                (newest.date, newest.event)
            }
            (None, Some(n)) => {
                let d = self.digest_of(args.date.as_deref()).await?;
                let e = d.event_number(n as usize).cloned().ok_or_else(|| {
                    bad(format!(
                        "n: the digest of {} numbers its events 1 to {}",
                        d.date,
                        d.events().count()
                    ))
                })?;
                (d.date, e)
            }
            _ => {
                return Err(bad(
                    "give event_id, or n (with an optional date): one way to name the event".into(),
                ));
            }
        };
        let tally = self.store.tally(&event.id).await.map_err(failed)?;
        let appeared: Vec<String> = self
            .store
            .event_appearances(&event.id)
            .await
            .map_err(failed)?
            .iter()
            .map(|a| a.date.to_string())
            .collect();
        answer(&json!({
            "date": date.to_string(),
            "n": event.n,
            "event_id": event.id,
            "title": event.title,
            "score": event.score,
            "threshold": self.config.digest.min_score,
            "layers": event.layers,
            "breakdown": event.score_breakdown,
            "sources": event.sources,
            "votes": { "up": tally.up, "down": tally.down },
            "appeared_in": appeared,
            "continues": event.follow_up,
            "permalink": self.permalink(&event.id),
        }))
    }

    #[tool(
        description = "The configured sources with their health: last success, last attempt, failures in a row, whether they are backed off and until when, the last error, and items fetched in the last 7 days.",
        annotations(read_only_hint = true)
    )]
    async fn list_sources(&self) -> Result<CallToolResult, McpError> {
        let statuses =
            crate::sources::health::statuses(&self.config, Some(&self.store), chrono::Utc::now())
                .await
                .map_err(failed)?;
        let sources: Vec<Value> = statuses
            .iter()
            .map(|status| {
                let (s, h) = (status.source, status.health.as_ref());
                json!({
                    "name": s.name,
                    "kind": format!("{:?}", s.kind).to_lowercase(),
                    "location": crate::redact::redact(&s.location.to_string()),
                    "weight": s.weight,
                    "last_success_at": h.and_then(|h| h.last_success_at),
                    "last_attempt_at": h.and_then(|h| h.last_attempt_at),
                    "consecutive_failures": h.map_or(0, |h| h.consecutive_failures),
                    "backed_off_until": status.backed_off_until,
                    // A transport error quotes the feed's URL, which may hold a credential.
                    "last_error": h
                        .filter(|h| h.consecutive_failures > 0)
                        .and_then(|h| h.last_error.as_deref())
                        .map(|e| crate::text::truncate_chars(&crate::redact::redact(e), ERROR_CHARS)),
                    "items_last_7_days": status.items_last_7_days,
                })
            })
            .collect();
        answer(&json!({ "sources": sources }))
    }

    #[tool(
        description = "The story of an event across days: the earlier events it continues (a release after its paper, an update of a story) and the later ones that continue it, oldest first, each with its date, id, title and how it relates.",
        annotations(read_only_hint = true)
    )]
    async fn follow_ups(
        &self,
        Parameters(args): Parameters<FollowUpsArgs>,
    ) -> Result<CallToolResult, McpError> {
        let id = event_id_arg(&args.event_id)?;
        let story = crate::mcp::story(&self.store, &id).await.map_err(failed)?;
        if story.is_empty() {
            return Err(bad(format!(
                "event_id: no digest has event {id}; search_events finds ids"
            )));
        }
        let language = self.config.digest.language.clone();
        let steps: Vec<Value> = story
            .iter()
            .map(|(date, e, relation)| {
                let mut v = self.event_json(*date, e, &language);
                v["relation"] = json!(relation);
                v
            })
            .collect();
        answer(&json!({ "story": steps }))
    }
}

/// The digests around event `id`: (date, event, how it relates) oldest first. Back along
/// the follow-up links each event keeps, then forward through the digests of the next
/// [`FOLLOW_DAYS`] days for events that continue any event of the story.
pub async fn story(
    store: &Store,
    id: &str,
) -> anyhow::Result<Vec<(NaiveDate, DigestEvent, &'static str)>> {
    let appearances = store.event_appearances(id).await?;
    let Some(first) = appearances.last() else {
        return Ok(Vec::new());
    };
    let mut story = vec![(first.date, first.event.clone(), "this event")];
    // Back: the chain of earlier events, at most 30 steps.
    let mut link = first.event.follow_up.clone();
    while let Some(f) = link.take() {
        if story.len() > 30 {
            break;
        }
        let earlier = store
            .load_digest(f.date)
            .await?
            .and_then(|d| d.events().find(|e| e.id == f.event_id).cloned());
        match earlier {
            Some(e) => {
                link = e.follow_up.clone();
                story.insert(0, (f.date, e, "continued by the next"));
            }
            None => break,
        }
    }
    // Forward: later events whose follow-up points into the story.
    let mut ids: Vec<String> = story.iter().map(|(_, e, _)| e.id.clone()).collect();
    let later = store
        .digests_between(
            first.date.succ_opt().unwrap_or(first.date),
            first.date + chrono::Duration::days(FOLLOW_DAYS),
        )
        .await?;
    for d in later {
        for e in d.events() {
            if let Some(f) = &e.follow_up
                && ids.contains(&f.event_id)
                && !ids.contains(&e.id)
                && story.len() < MAX_STORY
            {
                ids.push(e.id.clone());
                story.push((d.date, e.clone(), "continues the story"));
            }
        }
    }
    Ok(story)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::from_build_env())
        .with_instructions(
            "kdigest publishes one digest a day of GPU-kernel and ML-compiler news (releases, papers, vendor posts), each event tagged with compiler-stack layers and scored 0-100. Use search_events to find events, get_digest for a day or a week as a reader receives it, explain_event for why an event scored what it did, follow_ups for a story across days and list_sources for the sources' health. The resource kdigest://digest/latest is the latest digest in Markdown. Everything is read-only.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(LATEST_URI, "latest-digest")
                .with_title("The latest kdigest digest")
                .with_description("The latest daily digest with events, in Markdown")
                .with_mime_type("text/markdown"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri != LATEST_URI {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource {}; the one resource is {LATEST_URI}",
                    crate::text::truncate_chars(&request.uri, 80)
                ),
                None,
            ));
        }
        let text = self.latest_markdown().await?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, LATEST_URI).with_mime_type("text/markdown"),
        ])
        .into())
    }
}

/// `kdigest mcp`: serves one client over stdin/stdout until it closes them. Logs go to
/// stderr (stdout carries the protocol).
pub async fn serve_stdio(store: Store, config: Arc<Config>) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let service = Server::new(store, config)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("The MCP client did not complete the handshake: {e}"))?;
    service.waiting().await?;
    Ok(())
}
