//! The MCP server through a real MCP client (the official SDK's, rmcp): over the stdio of a
//! `kdigest mcp` child process, and over streamable HTTP at the daemon router's `/mcp`
//! behind its bearer token. Tools, the resource, bad arguments and a missing token.

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use serde_json::{Value, json};

use kdigest_testkit::TestApp;
use kdigest_testkit::config::write_file_config;

type Client = RunningService<RoleClient, ()>;

/// Calls `tool` with `args`: the answer's text as JSON (or as a string when it is not JSON),
/// or the refusal's message (a JSON-RPC error, or a tool error result: the SDK answers
/// arguments that do not fit the schema that way, so the model can correct them).
async fn ask(client: &Client, tool: &str, args: Value) -> Result<Value, (i32, String)> {
    let args = args.as_object().cloned().unwrap_or_default();
    let result = match client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
    {
        Ok(r) => r,
        Err(ServiceError::McpError(e)) => return Err((e.code.0, e.message.to_string())),
        Err(other) => panic!("{tool}: {other}"),
    };
    let text = result.content[0].as_text().expect("text").text.clone();
    if result.is_error == Some(true) {
        return Err((0, text));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn call(client: &Client, tool: &str, args: Value) -> Result<Value, ServiceError> {
    Ok(ask(client, tool, args.clone())
        .await
        .unwrap_or_else(|e| panic!("{tool} {args}: {e:?}")))
}

/// The refusal of a call that must fail: its JSON-RPC code (0 for a tool error result) and
/// message.
async fn refused(client: &Client, tool: &str, args: Value) -> (i32, String) {
    match ask(client, tool, args.clone()).await {
        Err(refusal) => refusal,
        Ok(answer) => panic!("{tool} {args}: expected a refusal, got {answer}"),
    }
}

fn has_cjk(s: &str) -> bool {
    s.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// What both transports must answer: every tool on the stored fixture day, the resource,
/// and bad arguments refused with `invalid_params` naming the fix.
async fn tools_answer(client: &Client) {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "explain_event",
            "follow_ups",
            "get_digest",
            "list_sources",
            "search_events"
        ]
    );

    // Search: English words, the zh-CN texts, filters, a bound.
    let found = call(client, "search_events", json!({"query": "Tessera"}))
        .await
        .unwrap();
    let first = &found["results"][0];
    assert!(
        first["title"].as_str().unwrap().starts_with("Tessera"),
        "{found}"
    );
    let id = first["event_id"].as_str().unwrap().to_string();
    let zh = call(
        client,
        "search_events",
        json!({"query": "tessera", "language": "zh-CN"}),
    )
    .await
    .unwrap();
    assert!(
        has_cjk(zh["results"][0]["summary"].as_str().unwrap()),
        "{zh}"
    );
    let runtime = call(
        client,
        "search_events",
        json!({"layer": "runtime", "min_score": 70, "since": "2026-10-01", "limit": 2}),
    )
    .await
    .unwrap();
    let results = runtime["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() <= 2, "{runtime}");
    for r in results {
        assert!(r["layers"].as_array().unwrap().contains(&json!("runtime")));
        assert!(r["score"].as_f64().unwrap() >= 70.0);
    }
    let none = call(
        client,
        "search_events",
        json!({"query": "Tessera", "until": "2026-01-01"}),
    )
    .await
    .unwrap();
    assert_eq!(none["results"], json!([]));
    let arxiv = call(
        client,
        "search_events",
        json!({"query": "kernels", "source": "arxiv"}),
    )
    .await
    .unwrap();
    assert!(!arxiv["results"].as_array().unwrap().is_empty(), "{arxiv}");
    for r in arxiv["results"].as_array().unwrap() {
        assert!(
            r["sources"].to_string().to_lowercase().contains("arxiv"),
            "{r}"
        );
    }

    // A reader's view of the day, as JSON and as Markdown; a week's roll-up.
    let view = call(
        client,
        "get_digest",
        json!({"date": "2026-10-28", "language": "en", "layers": ["runtime"], "min_score": 75, "format": "json"}),
    )
    .await
    .unwrap();
    assert_eq!(view["language"], "en");
    let events: Vec<&Value> = ["key_changes", "papers", "other_updates"]
        .iter()
        .flat_map(|k| view[k].as_array().unwrap())
        .collect();
    assert!(!events.is_empty());
    for e in &events {
        assert!(e["layers"].as_array().unwrap().contains(&json!("runtime")));
        assert!(e["score"].as_f64().unwrap() >= 75.0);
    }
    let followed = call(
        client,
        "get_digest",
        json!({"min_score": 100, "follow": ["tessera"]}),
    )
    .await
    .unwrap();
    let md = followed.as_str().unwrap();
    assert!(
        md.contains("★ Tessera") && !md.contains("CUTLASS 5.0.0"),
        "{md:.600}"
    );
    let week = call(client, "get_digest", json!({"week": "2026-W44"}))
        .await
        .unwrap();
    assert!(week.as_str().unwrap().contains("Tessera"), "{week:.300}");

    // Why an event scored what it did, by number and by id: the same event.
    let by_n = call(
        client,
        "explain_event",
        json!({"n": 1, "date": "2026-10-28"}),
    )
    .await
    .unwrap();
    assert!(!by_n["breakdown"].as_array().unwrap().is_empty(), "{by_n}");
    let by_id = call(
        client,
        "explain_event",
        json!({"event_id": by_n["event_id"]}),
    )
    .await
    .unwrap();
    assert_eq!(by_id["title"], by_n["title"]);
    assert_eq!(by_id["appeared_in"], json!(["2026-10-28"]));

    let sources = call(client, "list_sources", json!({})).await.unwrap();
    let sources = sources["sources"].as_array().unwrap();
    assert!(sources.len() >= 5, "{sources:?}");
    assert!(
        sources.iter().any(|s| !s["last_success_at"].is_null()),
        "{sources:?}"
    );
    let story = call(client, "follow_ups", json!({"event_id": id}))
        .await
        .unwrap();
    assert_eq!(story["story"][0]["event_id"], json!(id));
    assert_eq!(story["story"][0]["relation"], "this event");

    // The resource: the latest digest in Markdown.
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources[0].uri, kdigest::mcp::LATEST_URI);
    let latest = client
        .read_resource(ReadResourceRequestParams::new(kdigest::mcp::LATEST_URI))
        .await
        .unwrap();
    let text = serde_json::to_value(&latest.contents[0]).unwrap();
    assert!(
        text["text"].as_str().unwrap().contains("Tessera"),
        "{text:.300}"
    );
    assert!(
        client
            .read_resource(ReadResourceRequestParams::new("kdigest://secrets"))
            .await
            .is_err()
    );

    // Bad arguments: invalid_params (-32602) from kdigest's checks, a tool error (0) from
    // the SDK's schema check, each naming the fix.
    for (tool, args, says) in [
        (
            "search_events",
            json!({"query": "x", "limit": 0}),
            "1 to 50",
        ),
        ("search_events", json!({"q": "x"}), "unknown field `q`"),
        ("search_events", json!({}), "give words"),
        (
            "search_events",
            json!({"query": "x", "layer": "gpu"}),
            "not a layer",
        ),
        (
            "search_events",
            json!({"query": "x", "since": "yesterday"}),
            "YYYY-MM-DD",
        ),
        (
            "search_events",
            json!({"query": "x", "min_score": 150}),
            "0 to 100",
        ),
        ("get_digest", json!({"date": "2026-13-01"}), "not a date"),
        (
            "get_digest",
            json!({"date": "2025-01-01"}),
            "no digest for 2025-01-01",
        ),
        ("get_digest", json!({"week": "W99"}), "ISO week"),
        ("get_digest", json!({"language": "fr"}), "en or zh-CN"),
        ("get_digest", json!({"format": "pdf"}), "markdown or json"),
        ("get_digest", json!({"follow": ["!!!"]}), "no letter"),
        (
            "explain_event",
            json!({"event_id": "zz<script>"}),
            "not an event id",
        ),
        (
            "explain_event",
            json!({"n": 999, "date": "2026-10-28"}),
            "numbers its events 1 to",
        ),
        ("explain_event", json!({}), "give event_id"),
        (
            "follow_ups",
            json!({"event_id": "00000000ff"}),
            "no digest has event",
        ),
        ("search_events", json!({"query": 42}), "invalid type"),
    ] {
        let (code, message) = refused(client, tool, args.clone()).await;
        let schema = says.starts_with("unknown field") || says == "invalid type";
        assert_eq!(
            code,
            if schema { 0 } else { -32602 },
            "{tool} {args}: {message}"
        );
        assert!(message.contains(says), "{tool} {args}: {message}");
    }
    let (code, _) = refused(client, "delete_everything", json!({})).await;
    assert!(code == -32602 || code == -32601, "unknown tool: {code}");
}

/// A desktop assistant's way in: `kdigest mcp` as a child process, over its stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_queries_the_archive_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file_config(dir.path(), "kdigest.sqlite", "");
    stdio_session(&config, None).await;
}

/// The same over an archive on Postgres (`KDIGEST_DATABASE_URL`): the stdio server reads
/// what a cluster stored, and its SQLite guard does not stand in the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_queries_a_postgres_archive_over_stdio() {
    let Some(schema) = kdigest_testkit::pg::schema().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // No SQLite file will exist at this path: the archive is the schema.
    let config = write_file_config(dir.path(), "not-used.sqlite", "");
    stdio_session(&config, Some(&schema.url)).await;
    assert!(!dir.path().join("not-used.sqlite").exists());
}

/// Stores the sample day (on `database_url`'s Postgres, else on the config's SQLite file),
/// then runs `kdigest mcp` as a child process and asks it every tool through the SDK.
async fn stdio_session(config: &std::path::Path, database_url: Option<&str>) {
    let with_database = |command: &mut std::process::Command| {
        if let Some(url) = database_url {
            command.env(kdigest::config::DATABASE_URL_ENV, url);
        }
    };
    let mut made = crate::kdigest(
        config,
        &["digest", "--date", "2026-10-28", "--format", "json"],
    );
    with_database(&mut made);
    let made = made.output().unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kdigest"));
    command
        .arg("--config")
        .arg(config)
        .arg("mcp")
        .env_remove("KDIGEST_CONFIG")
        .env_remove(kdigest::config::DATABASE_URL_ENV)
        .env("RUST_LOG", "warn");
    if let Some(url) = database_url {
        command.env(kdigest::config::DATABASE_URL_ENV, url);
    }
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client: Client = ().serve(transport).await.unwrap();
    let info = client.peer_info().expect("the server introduced itself");
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or("")
            .contains("search_events")
    );
    tools_answer(&client).await;
    client.cancel().await.unwrap();
}

/// A remote assistant's way in: `/mcp` on the daemon's router, streamable HTTP behind the
/// bearer token; no token or a wrong one is a 401 that names the fix, a foreign Host
/// header is refused, a body that is not JSON-RPC is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_queries_the_archive_over_http_with_its_token() {
    let app = TestApp::start().await;
    app.digest().await;
    let token = "mcp-test-token-0123456789abcdef";
    let services = kdigest::web::Services {
        mcp: Some(kdigest::mcp::http::routes(
            app.store.clone(),
            Arc::new(app.config.clone()),
            token,
        )),
        ..Default::default()
    };
    let router = kdigest::web::router(Arc::new(kdigest::metrics::Metrics::default()), services);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(kdigest::web::serve(
        listener,
        router,
        std::future::pending(),
    ));

    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token),
    );
    let client: Client = ().serve(transport).await.unwrap();
    tools_answer(&client).await;
    client.cancel().await.unwrap();

    // Without the token (or with another), the SDK's client cannot even start.
    for auth in [None, Some("not-the-token-at-all-000000")] {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
        if let Some(a) = auth {
            config = config.auth_header(a);
        }
        let refused = ().serve(StreamableHttpClientTransport::from_config(config)).await;
        assert!(refused.is_err(), "{auth:?}");
    }
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let post = |body: String, auth: Option<&str>, host: Option<&str>| {
        let mut r = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(a) = auth {
            r = r.header("authorization", format!("Bearer {a}"));
        }
        if let Some(h) = host {
            r = r.header("host", h);
        }
        r.send()
    };
    let missing = post(initialize.to_string(), None, None).await.unwrap();
    assert_eq!(missing.status(), 401);
    assert!(
        missing.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let says = missing.text().await.unwrap();
    assert!(
        says.contains("KDIGEST_MCP_TOKEN") && !says.contains(token),
        "{says}"
    );
    let wrong = post(initialize.to_string(), Some("wrong"), None)
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    // The scheme is case-insensitive (RFC 9110): `bearer` is the same scheme.
    let lower = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("bearer {token}"))
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(lower.status(), 200);
    let good = post(initialize.to_string(), Some(token), None)
        .await
        .unwrap();
    assert_eq!(good.status(), 200);
    let foreign = post(initialize.to_string(), Some(token), Some("evil.example"))
        .await
        .unwrap();
    assert_eq!(
        foreign.status(),
        403,
        "DNS rebinding: a foreign Host is refused"
    );
    let garbage = post("{not json".into(), Some(token), None).await.unwrap();
    assert!(garbage.status().is_client_error(), "{}", garbage.status());
    let huge = post(format!("\"{}\"", "x".repeat(200_000)), Some(token), None)
        .await
        .unwrap();
    assert_eq!(huge.status(), 413, "bodies are bounded");

    // One address may make REQUESTS_PER_MINUTE requests a minute, wrong tokens included:
    // a loop is answered 429 with Retry-After before its token is read.
    let limit = kdigest::mcp::http::REQUESTS_PER_MINUTE as usize;
    let mut statuses = Vec::new();
    // Until the first 429 (the bucket refills 2 a second while the loop runs, so on a slow
    // machine it takes more than `limit` requests; twice that and no 429 is a failure).
    for _ in 0..2 * limit {
        let r = post(initialize.to_string(), Some("guess"), None)
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            let wait: u64 = r.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=60).contains(&wait), "{wait}");
            let says = r.text().await.unwrap();
            assert!(
                says.contains(&format!("at most {limit} a minute")),
                "{says}"
            );
            break;
        }
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    assert!(statuses[..statuses.len() - 1].iter().all(|s| *s == 401));
    // Held whatever its token. The bucket refills continuously, so the request right
    // after the 429 may find the one token that came back meanwhile; of two in a row,
    // at least one is held.
    let mut held = Vec::new();
    for _ in 0..2 {
        let r = post(initialize.to_string(), Some(token), None)
            .await
            .unwrap();
        held.push(r.status().as_u16());
    }
    assert!(
        held.contains(&429),
        "the address is held whatever its token: {held:?}"
    );
}

/// `kdigest mcp` pointed at a database that does not exist refuses to start, naming the
/// path and the fix, and creates nothing: an assistant is never served an empty archive.
#[test]
fn mcp_over_stdio_refuses_a_missing_archive() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file_config(dir.path(), "no-such.sqlite", "");
    let out = crate::kdigest(&config, &["mcp"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("No kdigest archive") && stderr.contains("no-such.sqlite"),
        "{stderr}"
    );
    assert!(!dir.path().join("no-such.sqlite").exists());
}

/// `[web] mcp = true` without a usable token in the environment: the daemon does not
/// start, and says which variable to set (never a value).
#[test]
fn the_daemon_refuses_mcp_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file_config(
        dir.path(),
        "kdigest.sqlite",
        "[web]\nmcp = true\nmcp_token_env = \"KDIGEST_TEST_MCP_TOKEN\"\n[daemon]\nlisten = \"127.0.0.1:0\"\n",
    );
    let out = crate::kdigest(&config, &["run"])
        .env("KDIGEST_TEST_MCP_TOKEN", "short-secret")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("KDIGEST_TEST_MCP_TOKEN") && stderr.contains("at least 16"),
        "{stderr}"
    );
    assert!(!stderr.contains("short-secret"), "{stderr}");
}
