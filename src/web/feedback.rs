//! 👍/👎 on the web: the buttons of the digest and permalink pages (`POST /vote`, no
//! JavaScript: a form, then a redirect back to the event), and the signed links of the
//! email (`/vote/<token>/<event>/<up|down>`: a GET shows a button, so a mail scanner that
//! fetches every link records nothing; the POST records the vote).
//!
//! A browser is one reader, named by a random cookie; an email reader is their
//! subscription, named by the signed token (a forged or altered token records nothing).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use crate::feedback::Vote;
use crate::model::is_event_id;
use crate::render::pages::{AccountForm, AccountPage};
use crate::tokens::Purpose;
use crate::web::account::Account;
use crate::web::account::forms::{failure, not_a_form};
use crate::web::blog::Blog;

/// The cookie that names a browser's votes.
pub const READER_COOKIE: &str = "kdigest_reader";
/// Two years.
const READER_COOKIE_MAX_AGE: i64 = 2 * 365 * 24 * 3600;

/// `POST /vote` from a page's buttons: `event`, `vote` (up or down) and `back` (the page
/// to return to, a path on this site).
pub async fn vote_button(
    State(blog): State<Arc<Blog>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    let mut event = String::new();
    let mut vote = None;
    let mut back = String::new();
    for (key, value) in url::form_urlencoded::parse(&body) {
        match key.as_ref() {
            "event" => event = value.trim().to_string(),
            "vote" => vote = Vote::parse(value.trim()),
            "back" => back = value.trim().to_string(),
            _ => {}
        }
    }
    let (Some(vote), true) = (vote, is_event_id(&event)) else {
        return (
            StatusCode::BAD_REQUEST,
            "A vote needs event=<event id> and vote=up or vote=down",
        )
            .into_response();
    };
    let (reader, new_cookie) = match reader_cookie(&headers) {
        Some(id) => (id, None),
        None => {
            let id = new_reader_id();
            (id.clone(), Some(id))
        }
    };
    let recorded = blog
        .store
        .record_vote(&event, &format!("web:{reader}"), None, vote, Utc::now())
        .await;
    match recorded {
        Ok(Some(_)) => {}
        Ok(None) => return crate::web::blog::not_found(&blog),
        Err(error) => return crate::web::blog::failure(error),
    }
    let back = if is_local_path(&back) {
        back
    } else {
        format!("/e/{event}")
    };
    let mut response = (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("{back}#event-{event}"))],
    )
        .into_response();
    if let Some(id) = new_cookie {
        let secure = if blog.config.web.public_url.scheme() == "https" {
            "; Secure"
        } else {
            ""
        };
        let cookie = format!(
            "{READER_COOKIE}={id}; Path=/; Max-Age={READER_COOKIE_MAX_AGE}; HttpOnly; SameSite=Lax{secure}"
        );
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    response
}

/// The browser's reader id, when it sent a well-formed one.
fn reader_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == READER_COOKIE)
        .map(|(_, v)| v.to_string())
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// 128 bits no one can guess: std's per-process random hash keys over a counter and the
/// clock, through SHA-256.
fn new_reader_id() -> String {
    use sha2::{Digest as _, Sha256};
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let seed = format!(
        "{}/{:?}/{}",
        h.finish(),
        std::time::SystemTime::now(),
        std::process::id()
    );
    crate::parse::hex(&Sha256::digest(seed.as_bytes())[..16])
}

/// A path on this site (`/digest/2026-10-28`), never another site (`//evil.org`,
/// `https://…`, `/\evil.org`).
fn is_local_path(p: &str) -> bool {
    p.starts_with('/')
        && !p.starts_with("//")
        && !p.contains(['\\', '#', '\r', '\n'])
        && p.len() <= 200
}

/// `GET /vote/<token>/<event>/<up|down>`: the email link. Shows the event and one button
/// that records the vote; records nothing itself.
pub async fn email_vote_form(
    State(a): State<Arc<Account>>,
    Path((token, event, vote)): Path<(String, String, String)>,
) -> Response {
    email_vote(a, token, event, vote, false).await
}

/// `POST /vote/<token>/<event>/<up|down>`: records the email reader's vote.
pub async fn email_vote_post(
    State(a): State<Arc<Account>>,
    Path((token, event, vote)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    email_vote(a, token, event, vote, true).await
}

async fn email_vote(
    a: Arc<Account>,
    token: String,
    event: String,
    vote: String,
    record: bool,
) -> Response {
    let result = async {
        let (Some(id), Some(vote), true) = (
            a.verify(Purpose::Vote, &token),
            Vote::parse(&vote),
            is_event_id(&event),
        ) else {
            return Ok(None);
        };
        let Some(subscriber) = a.store.subscriber(id).await? else {
            return Ok(None);
        };
        let Some(seen) = a.store.event_appearances(&event).await?.into_iter().next() else {
            return Ok(None);
        };
        let t = a.renderer(&subscriber.language).locale();
        let title = seen.event.title.clone();
        let mut paragraphs = vec![title];
        let form = if record {
            let reader = format!("email:{id}");
            let tally = a
                .store
                .record_vote(&event, &reader, Some(id), vote, Utc::now())
                .await?
                .unwrap_or_default();
            paragraphs.push(t.fill(
                "vote_recorded",
                &[("vote", vote.emoji()), ("tally", &tally.to_string())],
            ));
            None
        } else {
            paragraphs.push(t.get("vote_confirm_lead").to_string());
            Some(AccountForm {
                action: format!("/vote/{token}/{event}/{}", vote.as_str()),
                button: format!("{} {}", vote.emoji(), t.get("vote_confirm_button")),
                ..AccountForm::default()
            })
        };
        let page = AccountPage {
            title: t.get("vote_title").to_string(),
            paragraphs,
            form,
            ..AccountPage::default()
        };
        anyhow::Ok(Some((subscriber.language, page)))
    };
    match result.await {
        Ok(Some((language, page))) => a.page(StatusCode::OK, &language, &page),
        Ok(None) => a.message(
            StatusCode::NOT_FOUND,
            &a.default_language,
            "vote_title",
            "link_invalid",
        ),
        Err(error) => failure(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_on_this_site_are_returned_to() {
        assert!(is_local_path("/digest/2026-10-28"));
        assert!(is_local_path("/e/0a1b2c3d4e"));
        for bad in [
            "//evil.org",
            "https://evil.org",
            "/\\evil.org",
            "",
            "evil",
            "/x\r\nSet-Cookie: a=b",
        ] {
            assert!(!is_local_path(bad), "{bad}");
        }
    }

    #[test]
    fn reader_ids_are_new_each_time_and_cookies_are_checked() {
        let (a, b) = (new_reader_id(), new_reader_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("x=1; {READER_COOKIE}={a}")).unwrap(),
        );
        assert_eq!(reader_cookie(&h), Some(a));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("kdigest_reader=../../etc"),
        );
        assert_eq!(reader_cookie(&h), None);
    }
}
