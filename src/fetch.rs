//! Sources -> bytes. HTTP(S) and files, with every limit a hostile or broken server needs:
//! bounded concurrency (global and per host), one deadline per source covering all attempts
//! (a slow-drip server cannot hold a fetch open), a body cap counted after decompression
//! (gzip bombs stop at the cap), a redirect limit, conditional GET, Retry-After on 429/503 and
//! a few retries with backoff on transient errors. A failure is a value, never a panic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::model::{FailureKind, Validators};
use crate::netguard::Guard;
use crate::settings::{FetchConfig, SourceConfig, SourceLocation};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// New content, with the validators to send next time.
    Fetched {
        body: Vec<u8>,
        validators: Validators,
    },
    /// 304: nothing changed since the validators we sent.
    NotModified,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum FetchError {
    #[error(
        "Timed out after {0:.1} s (fetch.timeout_secs); the server did not answer or finish sending in time"
    )]
    Timeout(f64),
    #[error(
        "Body is larger than {0} bytes after decompression (fetch.max_body_bytes); raise the cap or set max_items"
    )]
    TooLarge(u64),
    #[error("HTTP {status}{hint}")]
    Status { status: u16, hint: String },
    #[error("More than {0} redirects (fetch.max_redirects); the URL probably redirects in a loop")]
    TooManyRedirects(usize),
    #[error("Cannot connect: {0}")]
    Transport(String),
    #[error("Cannot read file {path}: {reason}")]
    File { path: String, reason: String },
    #[error(
        "Not fetched: waited {waited:.1} s for {host}, whose connections (fetch.per_host_concurrency) were held by sources that did not answer"
    )]
    HostBusy { host: String, waited: f64 },
    /// A private or loopback target (or a redirect to one) without
    /// fetch.allow_private_networks.
    #[error("Refused: {0}")]
    PrivateNetwork(String),
}

impl FetchError {
    /// What a reader is told kept the source out (the details stay with the operator).
    pub fn kind(&self) -> FailureKind {
        match self {
            FetchError::Timeout(_)
            | FetchError::Transport(_)
            | FetchError::File { .. }
            | FetchError::HostBusy { .. } => FailureKind::Unreachable,
            FetchError::Status { .. }
            | FetchError::TooManyRedirects(_)
            | FetchError::PrivateNetwork(_) => FailureKind::Refused,
            FetchError::TooLarge(_) => FailureKind::TooLarge,
        }
    }

    fn status(status: StatusCode, attempts: u32) -> FetchError {
        let reason = status.canonical_reason().unwrap_or("");
        let hint = match status.as_u16() {
            404 | 410 => "; check the source URL".to_string(),
            401 | 403 => "; the server refuses access to this feed".to_string(),
            429 => format!(" (rate limited, gave up after {attempts} attempt(s))"),
            s if s >= 500 => format!(" (server error, gave up after {attempts} attempt(s))"),
            _ => String::new(),
        };
        FetchError::Status {
            status: status.as_u16(),
            hint: format!(" {reason}{hint}"),
        }
    }
}

/// One source's result.
#[derive(Debug, Clone)]
pub struct FetchResult {
    pub source: String,
    pub fetched_at: DateTime<Utc>,
    pub outcome: Result<FetchOutcome, FetchError>,
}

pub struct Fetcher {
    client: reqwest::Client,
    guard: Guard,
    config: FetchConfig,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A failed attempt and whether (and when) it may be retried.
struct Attempt {
    error: FetchError,
    transient: bool,
    retry_after: Option<Duration>,
}

impl Fetcher {
    pub fn new(config: &FetchConfig) -> anyhow::Result<Fetcher> {
        let guard = Guard::fetch(config);
        let max_redirects = config.max_redirects;
        // Every hop is checked: a public feed that redirects to loopback is refused.
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max_redirects {
                attempt.error(TooManyRedirects)
            } else if let Err(refusal) = guard.check_url(attempt.url()) {
                attempt.error(RedirectRefused(refusal))
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .user_agent(&config.user_agent)
            .redirect(redirects)
            .dns_resolver(guard.resolver())
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .gzip(true)
            .brotli(true)
            .deflate(true)
            .build()?;
        Ok(Fetcher {
            client,
            guard,
            config: config.clone(),
            hosts: Mutex::new(HashMap::new()),
        })
    }

    /// Fetches every source concurrently. `validators[i]` belongs to `sources[i]`. Results
    /// come back in source order; `on_done` is called as each source finishes (progress).
    pub async fn fetch_all(
        &self,
        sources: &[SourceConfig],
        validators: &[Validators],
        on_done: &(dyn Fn(&str) + Sync),
    ) -> Vec<FetchResult> {
        let mut results: Vec<(usize, FetchResult)> =
            futures::stream::iter(sources.iter().enumerate())
                .map(|(i, source)| async move {
                    let empty = Validators::default();
                    let result = self
                        .fetch(source, validators.get(i).unwrap_or(&empty))
                        .await;
                    on_done(&source.name);
                    (i, result)
                })
                .buffer_unordered(self.config.concurrency)
                .collect()
                .await;
        results.sort_by_key(|(i, _)| *i);
        results.into_iter().map(|(_, r)| r).collect()
    }

    /// Fetches one source within its deadline (fetch.timeout_secs for all attempts together).
    pub async fn fetch(&self, source: &SourceConfig, validators: &Validators) -> FetchResult {
        let deadline = Instant::now() + self.config.timeout;
        let outcome = match &source.location {
            SourceLocation::File(path) => self.read_file(path, deadline).await,
            SourceLocation::Http(url) => self.fetch_http(url, validators, &source.name).await,
        };
        FetchResult {
            source: source.name.clone(),
            fetched_at: Utc::now(),
            outcome,
        }
    }

    async fn fetch_http(
        &self,
        url: &url::Url,
        validators: &Validators,
        name: &str,
    ) -> Result<FetchOutcome, FetchError> {
        let host = format!(
            "{}:{}",
            url.host_str().unwrap_or(""),
            url.port_or_known_default().unwrap_or(0)
        );
        let permit = self.host_semaphore(&host);
        // The deadline covers this source's own attempts: it starts when the source first
        // holds a permit of its host, so a source queued behind slow ones on the same host
        // is not failed by their slowness. But no source waits for its host longer than
        // half a timeout beyond one timeout (`host_deadline`): twenty sources hanging on
        // one host, four at a time, held the fetch phase for five timeouts, and every good
        // source's digest with it. The phase ends within 1.5 timeouts per round of
        // fetch.concurrency.
        let waiting_since = Instant::now();
        let host_deadline = waiting_since + self.config.timeout + self.config.timeout / 2;
        let mut deadline = None;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let result = {
                let acquired = tokio::time::timeout_at(host_deadline, permit.acquire()).await;
                // A permit freed at the host deadline leaves no time to fetch: handed on
                // to the next waiter, each would time out at once and free it again.
                let too_late = Instant::now() + self.config.timeout / 10 >= host_deadline;
                let (Ok(acquired), false) = (acquired, too_late) else {
                    return Err(FetchError::HostBusy {
                        host,
                        waited: waiting_since.elapsed().as_secs_f64(),
                    });
                };
                let _permit = acquired.expect("semaphore is never closed");
                let deadline = *deadline.get_or_insert_with(|| {
                    (Instant::now() + self.config.timeout).min(host_deadline)
                });
                match tokio::time::timeout_at(deadline, self.get_once(url, validators, attempt))
                    .await
                {
                    Ok(r) => r,
                    Err(_) => return Err(FetchError::Timeout(self.config.timeout.as_secs_f64())),
                }
            };
            let failure = match result {
                Ok(outcome) => return Ok(outcome),
                Err(f) => f,
            };
            if !failure.transient || attempt > self.config.retries {
                return Err(failure.error);
            }
            // Exponential backoff, spread a little per source so retries do not align.
            let spread = name.bytes().map(u64::from).sum::<u64>() % 250;
            let backoff = Duration::from_millis(250 * 2u64.pow(attempt - 1) + spread);
            let wait = failure.retry_after.unwrap_or(backoff);
            if deadline.is_some_and(|d| Instant::now() + wait >= d) {
                return Err(failure.error);
            }
            tracing::debug!(message = "Retrying source", source = name, attempt, wait_ms = wait.as_millis() as u64, error = %failure.error);
            tokio::time::sleep(wait).await;
        }
    }

    fn host_semaphore(&self, host: &str) -> Arc<Semaphore> {
        let mut hosts = self.hosts.lock().expect("host map lock is never poisoned");
        hosts
            .entry(host.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.per_host_concurrency)))
            .clone()
    }

    async fn get_once(
        &self,
        url: &url::Url,
        validators: &Validators,
        attempt: u32,
    ) -> Result<FetchOutcome, Attempt> {
        if let Err(refusal) = self.guard.check_url(url) {
            return Err(Attempt {
                error: FetchError::PrivateNetwork(refusal),
                transient: false,
                retry_after: None,
            });
        }
        let mut request = self.client.get(url.clone());
        if let Some(etag) = &validators.etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        if let Some(lm) = &validators.last_modified {
            request = request.header(IF_MODIFIED_SINCE, lm);
        }
        let response = request
            .send()
            .await
            .map_err(|e| transport_error(e, self.config.max_redirects))?;
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED {
            return Ok(FetchOutcome::NotModified);
        }
        if !status.is_success() {
            let transient = status == StatusCode::TOO_MANY_REQUESTS
                || status == StatusCode::REQUEST_TIMEOUT
                || status.is_server_error();
            return Err(Attempt {
                error: FetchError::status(status, attempt),
                transient,
                retry_after: retry_after(response.headers()),
            });
        }
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let new_validators = Validators {
            etag: header(ETAG),
            last_modified: header(LAST_MODIFIED),
        };
        let cap = self.config.max_body_bytes;
        if response.content_length().is_some_and(|len| len > cap) {
            return Err(Attempt {
                error: FetchError::TooLarge(cap),
                transient: false,
                retry_after: None,
            });
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| transport_error(e, self.config.max_redirects))?;
            // reqwest yields decompressed bytes, so the cap applies to what we would parse.
            if body.len() as u64 + chunk.len() as u64 > cap {
                return Err(Attempt {
                    error: FetchError::TooLarge(cap),
                    transient: false,
                    retry_after: None,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(FetchOutcome::Fetched {
            body,
            validators: new_validators,
        })
    }

    async fn read_file(
        &self,
        path: &std::path::Path,
        deadline: Instant,
    ) -> Result<FetchOutcome, FetchError> {
        let file_error = |reason: String| FetchError::File {
            path: path.display().to_string(),
            reason,
        };
        let read = async {
            let file = tokio::fs::File::open(path)
                .await
                .map_err(|e| file_error(e.to_string()))?;
            let cap = self.config.max_body_bytes;
            let mut body = Vec::new();
            file.take(cap + 1)
                .read_to_end(&mut body)
                .await
                .map_err(|e| file_error(e.to_string()))?;
            if body.len() as u64 > cap {
                return Err(FetchError::TooLarge(cap));
            }
            Ok(FetchOutcome::Fetched {
                body,
                validators: Validators::default(),
            })
        };
        tokio::time::timeout_at(deadline, read)
            .await
            .unwrap_or(Err(FetchError::Timeout(self.config.timeout.as_secs_f64())))
    }
}

/// The redirect policy's reasons to stop (reqwest reports both as a redirect error).
#[derive(Debug, thiserror::Error)]
#[error("too many redirects")]
struct TooManyRedirects;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RedirectRefused(String);

fn transport_error(e: reqwest::Error, max_redirects: usize) -> Attempt {
    let refused = std::iter::successors(std::error::Error::source(&e), |c| c.source())
        .find_map(|c| c.downcast_ref::<RedirectRefused>())
        .map(|r| format!("a redirect to {}", r.0))
        .or_else(|| crate::netguard::refusal(&e));
    if let Some(refusal) = refused {
        return Attempt {
            error: FetchError::PrivateNetwork(refusal),
            transient: false,
            retry_after: None,
        };
    }
    if e.is_redirect() {
        return Attempt {
            error: FetchError::TooManyRedirects(max_redirects),
            transient: false,
            retry_after: None,
        };
    }
    let e = e.without_url();
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    Attempt {
        error: FetchError::Transport(message),
        transient: true,
        retry_after: None,
    }
}

// The Retry-After rule is the channels crate's, shared by every HTTP client of kdigest.
pub use kdigest_channels::http::{MAX_RETRY_AFTER, retry_after};
