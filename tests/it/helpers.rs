//! Shared test helpers: a scriptable loopback feed server, configs pointing at it, and
//! validators for Telegram HTML and Discord JSON payloads.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kdigest::config::Config;
use kdigest::store::Store;
use serde_json::Value;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Real-world feeds, platform specs and payloads, copied into the repository
/// (tests/fixtures/PROVENANCE.md says where each comes from).
pub fn reference_dir() -> PathBuf {
    repo_root().join("tests/fixtures/reference")
}

#[derive(Default)]
pub struct Hits {
    pub etag: AtomicUsize,
    pub etag_304: AtomicUsize,
    pub flaky_429: AtomicUsize,
    pub always_500: AtomicUsize,
}

pub struct FeedServer {
    pub base: String,
    pub hits: Arc<Hits>,
}

const FEED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/feeds");

fn feed_bytes(name: &str) -> Option<Vec<u8>> {
    if name.contains('/') || name.contains("..") {
        return None;
    }
    std::fs::read(format!("{FEED_DIR}/{name}")).ok()
}

/// Serves examples/feeds under /feeds/{name} and misbehaving endpoints for fault tests.
pub async fn spawn_feed_server() -> FeedServer {
    let hits = Arc::new(Hits::default());
    let app = Router::new()
        .route(
            "/feeds/{name}",
            get(|Path(name): Path<String>| async move {
                match feed_bytes(&name) {
                    Some(b) => ([(header::CONTENT_TYPE, "application/xml")], b).into_response(),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }),
        )
        .route("/etag/{name}", get(etag_feed))
        .route(
            "/hang",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "never"
            }),
        )
        .route(
            "/drip",
            get(|| async {
                // A valid start, then one byte every 200 ms, forever.
                let stream = futures::stream::unfold(0u64, |n| async move {
                    if n > 0 {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    let chunk = if n == 0 {
                        b"<?xml version=\"1.0\"?><rss><channel>".to_vec()
                    } else {
                        b" ".to_vec()
                    };
                    Some((Ok::<_, std::io::Error>(chunk), n + 1))
                });
                Body::from_stream(stream)
            }),
        )
        .route(
            "/huge",
            get(|| async {
                // 50 MB without a Content-Length, so only the streaming cap can stop it.
                let stream = futures::stream::iter(
                    (0..50).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1 << 20])),
                );
                Body::from_stream(stream)
            }),
        )
        .route(
            "/bomb",
            get(|| async {
                // 100 KB of gzip that inflates to 100 MB.
                (
                    [
                        (header::CONTENT_ENCODING, "gzip"),
                        (header::CONTENT_TYPE, "application/xml"),
                    ],
                    gzip_bomb(),
                )
                    .into_response()
            }),
        )
        .route(
            "/loop",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/loop")]).into_response() }),
        )
        .route(
            "/status/{code}",
            get(|Path(code): Path<u16>| async move {
                StatusCode::from_u16(code)
                    .unwrap_or(StatusCode::IM_A_TEAPOT)
                    .into_response()
            }),
        )
        .route(
            "/always500",
            get(|State(h): State<Arc<Hits>>| async move {
                h.always_500.fetch_add(1, Ordering::SeqCst);
                StatusCode::INTERNAL_SERVER_ERROR
            }),
        )
        .route(
            "/slow429",
            get(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, "3600")],
                )
                    .into_response()
            }),
        )
        .route(
            "/flaky429/{name}",
            get(
                |State(h): State<Arc<Hits>>, Path(name): Path<String>| async move {
                    if h.flaky_429.fetch_add(1, Ordering::SeqCst) == 0 {
                        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")])
                            .into_response();
                    }
                    feed_bytes(&name)
                        .map_or(StatusCode::NOT_FOUND.into_response(), |b| b.into_response())
                },
            ),
        )
        .route(
            "/html",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "<!DOCTYPE html><html><body>Login</body></html>",
                )
                    .into_response()
            }),
        )
        .route("/empty", get(|| async { "" }))
        .with_state(hits.clone());
    let base = serve(app).await;
    FeedServer { base, hits }
}

async fn etag_feed(
    State(h): State<Arc<Hits>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    h.etag.fetch_add(1, Ordering::SeqCst);
    let tag = format!("\"v1-{name}\"");
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(tag.as_str())
    {
        h.etag_304.fetch_add(1, Ordering::SeqCst);
        return StatusCode::NOT_MODIFIED.into_response();
    }
    match feed_bytes(&name) {
        Some(b) => ([(header::ETAG, tag)], b).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// 100 KB of gzip that inflates to 100 MB of spaces (made once with Python's gzip module).
fn gzip_bomb() -> &'static [u8] {
    include_bytes!("../fixtures/bomb.xml.gz")
}

/// The demo configuration (examples/demo.toml) pointed at `base` (the `/feeds` prefix
/// included), with its database in `dir`.
pub fn fixture_config(feeds_base: &str, dir: &std::path::Path, extra: &str) -> Config {
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", feeds_base);
    let extra = allowing_private_networks(extra);
    let mut config = Config::parse(&format!("{text}\n{extra}")).unwrap_or_else(|e| panic!("{e}"));
    config.storage.path = dir.join("kdigest.sqlite");
    config
}

/// A loopback port where nothing listens (bound, then let go).
pub fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Serves `app` on a free loopback port; returns `http://127.0.0.1:<port>`.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// The kdigest binary with `--config` and `args`, a clean environment for the config and
/// warn-level logs; callers add variables and run it.
pub fn kdigest(config: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_kdigest"));
    c.arg("--config")
        .arg(config)
        .args(args)
        .env_remove("KDIGEST_CONFIG")
        .env("RUST_LOG", "warn");
    c
}

/// `extra` TOML with `fetch.allow_private_networks` and `delivery.allow_private_networks`
/// on: every server of the tests listens on 127.0.0.1, which kdigest refuses by default.
pub fn allowing_private_networks(extra: &str) -> String {
    let mut out = extra.to_string();
    for table in ["fetch", "delivery"] {
        let header = format!("[{table}]\n");
        let allow = format!("{header}allow_private_networks = true\n");
        if out.starts_with(&header) || out.contains(&format!("\n{header}")) {
            out = out.replacen(&header, &allow, 1);
        } else {
            out.push_str(&format!("\n{allow}"));
        }
    }
    out
}

/// Writes a config file for the binary: the demo configuration reading the bundled feeds from
/// disk, the database at `storage` (relative to the file), and `extra` TOML.
pub fn write_file_config(dir: &std::path::Path, storage: &str, extra: &str) -> PathBuf {
    let feeds = repo_root().join("examples/feeds");
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", &format!("file://{}", feeds.display()));
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "{text}\n[storage]\npath = \"{storage}\"\n{}",
            allowing_private_networks(extra)
        ),
    )
    .unwrap();
    path
}

pub async fn open_store(config: &Config) -> Store {
    Store::open(&config.storage.path).await.unwrap()
}

/// An active English subscriber with every layer and threshold 0; its id.
pub async fn add_reader(store: &Store, address: &str) -> i64 {
    store
        .add_subscriber(
            &kdigest::subscriber::Address::parse(address).unwrap(),
            &kdigest::model::Filter::default(),
            "en",
            &kdigest::subscriber::Status::Active,
            false,
            chrono::Utc::now(),
        )
        .await
        .unwrap()
        .unwrap()
}

/// Problems with a Telegram HTML message: length over 4096 UTF-16 units, tags outside the
/// Bot API's list, unbalanced tags, attributes other than a/href, bare '<', '>' or '&'.
pub fn telegram_html_problems(message: &str) -> Vec<String> {
    const ALLOWED: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-spoiler",
    ];
    let mut problems = Vec::new();
    let units = message.encode_utf16().count();
    if units == 0 || units > 4096 {
        problems.push(format!("length {units} outside 1..=4096"));
    }
    let mut stack: Vec<String> = Vec::new();
    let mut rest = message;
    while let Some(pos) = rest.find(['<', '>', '&']) {
        let c = rest.as_bytes()[pos];
        let after = &rest[pos..];
        match c {
            b'<' => {
                let Some(end) = after.find('>') else {
                    problems.push("unterminated tag".into());
                    break;
                };
                let tag = &after[1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    match stack.pop() {
                        Some(open) if open == name => {}
                        other => {
                            problems.push(format!("closing </{name}> does not match {other:?}"))
                        }
                    }
                } else {
                    let name = tag.split_whitespace().next().unwrap_or("");
                    if !ALLOWED.contains(&name) {
                        problems.push(format!("tag <{name}> is not allowed"));
                    }
                    let attrs = tag[name.len()..].trim();
                    if name == "a" {
                        let href = attrs
                            .strip_prefix("href=\"")
                            .and_then(|h| h.strip_suffix('"'));
                        match href {
                            Some(h) if h.starts_with("http://") || h.starts_with("https://") => {
                                if h.contains('"') || h.contains('<') {
                                    problems.push(format!("unescaped href {h}"));
                                }
                            }
                            _ => problems.push(format!("bad <a> attributes: {attrs}")),
                        }
                    } else if !attrs.is_empty() {
                        problems.push(format!("<{name}> has attributes {attrs}"));
                    }
                    stack.push(name.to_string());
                }
                rest = &after[end + 1..];
            }
            b'&' => {
                let end = after.find(';').unwrap_or(0);
                let entity = &after[..end + 1];
                let ok = matches!(entity, "&lt;" | "&gt;" | "&amp;" | "&quot;")
                    || (entity.starts_with("&#") && entity.len() > 3 && end < 10);
                if !ok {
                    problems.push(format!(
                        "bad entity near {:?}",
                        &after[..after.len().min(12)]
                    ));
                }
                rest = &after[1..];
            }
            _ => {
                problems.push("bare '>' outside a tag".into());
                rest = &after[1..];
            }
        }
    }
    if !stack.is_empty() {
        problems.push(format!("unclosed tags {stack:?}"));
    }
    problems
}

/// Validates `value` against a schema of Discord's OpenAPI spec (the subset of JSON Schema
/// the spec uses: type, properties, required, maxLength, maxItems, minimum, maximum, oneOf,
/// items, $ref). Unknown properties are reported too.
pub fn schema_problems(spec: &Value, schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let schema = resolve(spec, schema);
    let mut out = Vec::new();
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        if !options
            .iter()
            .any(|o| schema_problems(spec, o, value, path).is_empty())
        {
            out.push(format!("{path}: matches no oneOf option"));
        }
        return out;
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !types
            .iter()
            .any(|t| *t == actual || (*t == "number" && actual == "integer"))
        {
            out.push(format!("{path}: {actual} is not {types:?}"));
            return out;
        }
    }
    if let (Some(max), Some(s)) = (
        schema.get("maxLength").and_then(Value::as_u64),
        value.as_str(),
    ) && s.chars().count() as u64 > max
    {
        out.push(format!("{path}: {} characters > {max}", s.chars().count()));
    }
    if let (Some(n), Some(v)) = (
        value.as_f64(),
        schema.get("minimum").and_then(Value::as_f64),
    ) && n < v
    {
        out.push(format!("{path}: {n} < {v}"));
    }
    if let (Some(n), Some(v)) = (
        value.as_f64(),
        schema.get("maximum").and_then(Value::as_f64),
    ) && n > v
    {
        out.push(format!("{path}: {n} > {v}"));
    }
    if let Some(items) = value.as_array() {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            out.push(format!("{path}: {} items > {max}", items.len()));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                out.extend(schema_problems(
                    spec,
                    item_schema,
                    item,
                    &format!("{path}[{i}]"),
                ));
            }
        }
    }
    if let Some(obj) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => out.extend(schema_problems(spec, s, v, &format!("{path}.{k}"))),
                None if props.is_some() => {
                    out.push(format!("{path}.{k}: not a property of the schema"))
                }
                None => {}
            }
        }
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = r.as_str()
                && !obj.contains_key(name)
            {
                out.push(format!("{path}.{name}: required"));
            }
        }
    }
    out
}

fn resolve<'a>(spec: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.trim_start_matches('#');
            resolve(
                spec,
                spec.pointer(pointer)
                    .unwrap_or_else(|| panic!("unresolved $ref {r}")),
            )
        }
        None => schema,
    }
}

pub fn discord_spec() -> Value {
    let text =
        std::fs::read_to_string(reference_dir().join("platform/discord-openapi.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Serves the account pages on `listener`, with client addresses (for the per-IP limit).
pub fn serve_account(
    listener: tokio::net::TcpListener,
    store: &kdigest::store::Store,
    config: &kdigest::config::Config,
    secret: kdigest::config::Secret,
    mailer: Option<std::sync::Arc<kdigest::channels::email::EmailSender>>,
) {
    let account =
        kdigest::web::account::Account::new(store.clone(), config, secret, mailer).unwrap();
    let services = kdigest::web::Services {
        account: Some(std::sync::Arc::new(account)),
        ..Default::default()
    };
    let router = kdigest::web::router(Arc::new(kdigest::metrics::Metrics::default()), services);
    tokio::spawn(kdigest::web::serve(
        listener,
        router,
        std::future::pending(),
    ));
}

/// Runs the delivery engine until nothing is due within `max_wait`.
pub async fn run_until_idle(
    engine: &std::sync::Arc<kdigest::deliver::engine::Engine>,
    max_wait: std::time::Duration,
) {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    engine
        .run(kdigest::deliver::engine::Until::Idle { max_wait }, rx)
        .await
        .unwrap();
}

/// A child process that is killed when dropped: a test that fails (panics) must not leave
/// its daemon or driver running, holding ports and the harness's output open.
pub struct Process(Option<std::process::Child>);

impl Process {
    pub fn new(child: std::process::Child) -> Process {
        Process(Some(child))
    }

    /// The child, no longer killed on drop (to wait for its output).
    pub fn into_inner(mut self) -> std::process::Child {
        self.0.take().expect("a live child")
    }
}

impl std::ops::Deref for Process {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        self.0.as_ref().expect("a live child")
    }
}

impl std::ops::DerefMut for Process {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("a live child")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The fixture day's digest (2026-10-28, examples/feeds) generated through the real fetch
/// path into a fresh SQLite store, with its configuration, store and directory.
pub async fn fixture_digest() -> (kdigest::model::Digest, Config, Store, tempfile::TempDir) {
    let server = spawn_feed_server().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fixture_config(&format!("{}/feeds", server.base), dir.path(), "");
    let store = open_store(&config).await;
    let digest = kdigest::pipeline::generate(&config, &store, kdigest::demo::demo_date(), &|_| {})
        .await
        .unwrap();
    (digest, config, store, dir)
}
