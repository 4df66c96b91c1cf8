//! The archive pages of the blog: `/search?q=` (every stored digest's events, see
//! [`crate::archive`]), `/e/{id}` (one event in full, with every digest it was in),
//! `/layer/{name}` (events of one layer, newest first, paged) and `/layer/{name}/feed.xml`
//! (its Atom feed, one entry per event and digest). Plain HTML forms and links: no script.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use crate::archive::{ArchivedEvent, terms};
use crate::model::is_event_id;
use crate::render::pages::ArchivePage;
use crate::web::blog::{AtomEntry, Blog, atom, atom_response, failure, not_found};
use crate::web::html;

/// Events per page.
const PAGE_SIZE: i64 = 20;
/// Entries of a layer's feed.
const FEED_ENTRIES: i64 = 30;
/// Characters of a query that are read; the rest is ignored.
const MAX_QUERY_CHARS: usize = 300;

#[derive(Deserialize)]
pub struct SearchQuery {
    q: Option<String>,
    page: Option<i64>,
}

/// Page `page` (from 1) of a list: the offset and how many rows to ask for, one more than
/// a page shows, which tells whether there is a next one.
fn rows_for(page: i64) -> (i64, i64) {
    ((page - 1) * PAGE_SIZE, PAGE_SIZE + 1)
}

/// The rows page `page` shows, with its `?page=N` links (newer, older) on `base` (ending
/// in `?` or `&`).
fn paged(
    mut found: Vec<ArchivedEvent>,
    page: i64,
    base: &str,
) -> (Vec<ArchivedEvent>, Option<String>, Option<String>) {
    let more = found.len() as i64 > PAGE_SIZE;
    found.truncate(PAGE_SIZE as usize);
    (
        found,
        (page > 1).then(|| format!("{base}page={}", page - 1)),
        more.then(|| format!("{base}page={}", page + 1)),
    )
}

fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

pub async fn search(State(blog): State<Arc<Blog>>, Query(q): Query<SearchQuery>) -> Response {
    let query: String =
        q.q.unwrap_or_default()
            .trim()
            .chars()
            .take(MAX_QUERY_CHARS)
            .collect();
    let page = q.page.unwrap_or(1).clamp(1, 1_000);
    let terms = terms(&query);
    let t = blog.renderer.locale();
    let result = async {
        let (offset, limit) = rows_for(page);
        let (found, newer, older) = paged(
            blog.store.search_events(&terms, offset, limit).await?,
            page,
            &format!("/search?q={}&", encode(&query)),
        );
        let shown = terms.join(" ");
        let lead = if terms.is_empty() {
            t.get("search_lead").to_string()
        } else if found.is_empty() {
            String::new()
        } else {
            t.fill("search_results", &[("query", &shown)])
        };
        let empty = (!terms.is_empty() && found.is_empty())
            .then(|| t.fill("search_none", &[("query", &shown)]));
        blog.renderer.archive(&ArchivePage {
            title: t.get("search_title").to_string(),
            lead: (!lead.is_empty()).then_some(lead),
            query: Some(query.clone()),
            results: &found,
            empty,
            newer,
            older,
            ..Default::default()
        })
    };
    match result.await {
        Ok(body) => html(StatusCode::OK, body),
        Err(e) => failure(e),
    }
}

/// Event ids are ten hex digits; anything else is not one.
pub async fn event_page(State(blog): State<Arc<Blog>>, Path(id): Path<String>) -> Response {
    if !is_event_id(&id) {
        return not_found(&blog);
    }
    let result = async {
        let seen = blog.store.event_appearances(&id).await?;
        let Some(latest) = seen.first() else {
            return Ok(None);
        };
        let tally = blog.store.tally(&id).await?;
        blog.renderer
            .archive(&ArchivePage {
                title: latest.event.title.clone(),
                event: Some((&latest.event, &seen)),
                tally: (tally.total() > 0).then(|| tally.to_string()),
                ..Default::default()
            })
            .map(Some)
    };
    match result.await {
        Ok(Some(body)) => html(StatusCode::OK, body),
        Ok(None) => not_found(&blog),
        Err(e) => failure(e),
    }
}

#[derive(Deserialize)]
pub struct LayerQuery {
    page: Option<i64>,
}

pub async fn layer_page(
    State(blog): State<Arc<Blog>>,
    Path(layer): Path<String>,
    Query(q): Query<LayerQuery>,
) -> Response {
    if !blog.config.layer_names().contains(&layer.as_str()) {
        return not_found(&blog);
    }
    let page = q.page.unwrap_or(1).clamp(1, 1_000);
    let t = blog.renderer.locale();
    let result = async {
        let (offset, limit) = rows_for(page);
        let (found, newer, older) = paged(
            blog.store.layer_events(&layer, offset, limit).await?,
            page,
            &format!("/layer/{layer}?"),
        );
        let vars = [("layer", t.layer(&layer))];
        blog.renderer.archive(&ArchivePage {
            title: t.fill("layer_title", &vars),
            lead: Some(t.fill("layer_lead", &vars)),
            results: &found,
            empty: found.is_empty().then(|| t.fill("layer_none", &vars)),
            newer,
            older,
            feed_url: Some(format!("/layer/{layer}/feed.xml")),
            ..Default::default()
        })
    };
    match result.await {
        Ok(body) => html(StatusCode::OK, body),
        Err(e) => failure(e),
    }
}

/// Atom 1.0: the layer's newest events, one entry per event and digest (an event in two
/// digests is two entries: each time it was news), linked to its permalink.
pub async fn layer_feed(State(blog): State<Arc<Blog>>, Path(layer): Path<String>) -> Response {
    if !blog.config.layer_names().contains(&layer.as_str()) {
        return not_found(&blog);
    }
    let base = blog.config.web.public_url.clone();
    let t = blog.renderer.locale();
    let result = async {
        let found = blog.store.layer_events(&layer, 0, FEED_ENTRIES).await?;
        let entries = found
            .iter()
            .map(|a| {
                Ok(AtomEntry {
                    id: base
                        .join(&format!("digest/{}#event-{}", a.date, a.event.id))?
                        .to_string(),
                    link: base.join(&format!("e/{}", a.event.id))?.to_string(),
                    title: a.event.title.clone(),
                    updated: a.published.to_rfc3339(),
                    summary: a.event.summary.clone(),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let vars = [("layer", t.layer(&layer))];
        anyhow::Ok(atom(
            &t.fill("layer_title", &vars),
            &t.fill("layer_lead", &vars),
            base.join(&format!("layer/{layer}"))?.as_str(),
            base.join(&format!("layer/{layer}/feed.xml"))?.as_str(),
            &entries,
        ))
    };
    match result.await {
        Ok(xml) => atom_response(xml),
        Err(e) => failure(e),
    }
}
