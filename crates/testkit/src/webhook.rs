//! A webhook receiver on loopback: records every delivery (path, id, signature, body) and
//! answers by path as receivers do — `gone` 410, `limited` 429 once, `flaky` 500 once,
//! `slow` after 30 s, anything else 204.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::net::serve;

#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub delivery: String,
    pub signature: Option<String>,
    pub timestamp: String,
    pub body: String,
}

#[derive(Default)]
pub struct Receiver {
    pub log: Mutex<Vec<Received>>,
    pub hits: Mutex<BTreeMap<String, usize>>,
    /// Delay (ms) before answering, for every request.
    pub delay_ms: Mutex<u64>,
    /// After this many requests, report on `tripped` and hold the answer for 5 s.
    pub trip_after: Mutex<Option<usize>>,
    pub tripped: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

async fn hook(
    State(r): State<Arc<Receiver>>,
    UrlPath(path): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let n = {
        let mut hits = r.hits.lock().unwrap();
        let n = hits.entry(path.clone()).or_default();
        *n += 1;
        *n
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let total = {
        let mut log = r.log.lock().unwrap();
        log.push(Received {
            path: path.clone(),
            delivery: header("x-kdigest-delivery").unwrap_or_default(),
            signature: header("x-kdigest-signature"),
            timestamp: header("x-kdigest-timestamp").unwrap_or_default(),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        log.len()
    };
    if *r.trip_after.lock().unwrap() == Some(total) {
        if let Some(tx) = r.tripped.lock().unwrap().take() {
            let _ = tx.send(());
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let delay = *r.delay_ms.lock().unwrap();
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    match path.as_str() {
        "gone" => StatusCode::GONE.into_response(),
        "limited" if n == 1 => {
            (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response()
        }
        "flaky" if n == 1 => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        "slow" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::NO_CONTENT.into_response(),
    }
}

pub async fn spawn_receiver() -> (String, Arc<Receiver>) {
    let receiver = Arc::new(Receiver::default());
    let app = Router::new()
        .route("/hook/{path}", post(hook))
        .with_state(receiver.clone());
    let base = format!("{}/hook", serve(app).await);
    (base, receiver)
}
