//! Discord through serenity's HTTP client against a loopback mock API (every request body
//! checked against Discord's OpenAPI schemas), and the signed interactions endpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use ed25519_dalek::{Signer, SigningKey};
use kdigest::bot::discord::{DiscordBot, command_text};
use kdigest::store::Store;
use kdigest::subscriber::{Address, Status};
use serde_json::{Value, json};

use kdigest_testkit::TestApp;
use kdigest_testkit::config::write_file_config;
use kdigest_testkit::discord::discord_spec;
use kdigest_testkit::discord::schema_problems;
use kdigest_testkit::feeds::reference_dir;

const OK_CHANNEL: u64 = 290_926_798_999_357_250;
const GONE_CHANNEL: u64 = 290_926_798_999_357_251;
const FORBIDDEN_CHANNEL: u64 = 290_926_798_999_357_252;
const HOOK_ID: u64 = 223_704_706_495_545_344;
const HOOK_TOKEN: &str = "3d89bb7572e0fb30d8128367b3b1b44fecd1726de135cbe28a41f8b2f777c372ba2939e72279b94526ff5d1bd4358d65cf11";
const GONE_HOOK_ID: u64 = 223_704_706_495_545_345;
/// Its first request is answered with Discord's global rate limit.
const GLOBAL_429_HOOK_ID: u64 = 223_704_706_495_545_400;
const GLOBAL_RETRY_SECS: f64 = 2.0;

#[derive(Default)]
struct Mock {
    /// (route, body) of every request.
    calls: Mutex<Vec<(String, Value)>>,
    problems: Mutex<Vec<String>>,
    spec: Value,
    /// Every webhook request: (webhook id, when).
    arrivals: Mutex<Vec<(u64, std::time::Instant)>>,
    /// When the global 429 was answered.
    global_429: Mutex<Option<std::time::Instant>>,
}

impl Mock {
    fn check_command(&self, command: &Value) {
        let reference = json!({"$ref": "#/components/schemas/ApplicationCommandCreateRequest"});
        let problems = schema_problems(
            &self.spec,
            &reference,
            command,
            "ApplicationCommandCreateRequest",
        );
        self.problems.lock().unwrap().extend(problems);
    }

    fn bodies(&self, route: &str) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(r, _)| r == route)
            .map(|(_, b)| b.clone())
            .collect()
    }

    fn check(&self, schema: &str, body: &Value) {
        let reference = json!({"$ref": format!("#/components/schemas/{schema}")});
        let mut problems = schema_problems(&self.spec, &reference, body, schema);
        let total: usize = body["embeds"].as_array().map_or(0, |e| {
            e.iter()
                .map(kdigest::channels::discord::render::embed_chars)
                .sum()
        });
        if total > 6000 {
            problems.push(format!("{schema}: {total} characters of embeds"));
        }
        if body["allowed_mentions"] != json!({"parse": []}) {
            problems.push(format!(
                "{schema}: allowed_mentions must have no parse targets"
            ));
        }
        self.problems.lock().unwrap().extend(problems);
    }
}

fn discord_error(status: u16, code: u32, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        axum::Json(json!({"code": code, "message": message})),
    )
        .into_response()
}

async fn channel_message(
    State(m): State<Arc<Mock>>,
    Path(channel): Path<u64>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    m.check("MessageCreateRequest", &body);
    m.calls
        .lock()
        .unwrap()
        .push((format!("channel:{channel}"), body));
    match channel {
        GONE_CHANNEL => discord_error(404, 10003, "Unknown Channel"),
        FORBIDDEN_CHANNEL => discord_error(403, 50013, "Missing Permissions"),
        _ => {
            let text = std::fs::read_to_string(
                reference_dir()
                    .join("platform/discord_payloads/message__example_message__L167.json"),
            )
            .unwrap();
            let mut message: Value = serde_json::from_str(&text).unwrap();
            message["channel_id"] = json!(channel.to_string());
            axum::Json(message).into_response()
        }
    }
}

async fn webhook(
    State(m): State<Arc<Mock>>,
    Path((id, _token)): Path<(u64, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    m.check("IncomingWebhookRequestPartial", &body);
    let now = std::time::Instant::now();
    m.arrivals.lock().unwrap().push((id, now));
    if id == GLOBAL_429_HOOK_ID {
        let mut first = m.global_429.lock().unwrap();
        if first.is_none() {
            *first = Some(now);
            // As Discord answers it: the body and the headers both say global.
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    ("retry-after", "2"),
                    ("x-ratelimit-global", "true"),
                    ("x-ratelimit-scope", "global"),
                ],
                axum::Json(json!({
                    "message": "You are being rate limited.",
                    "retry_after": GLOBAL_RETRY_SECS,
                    "global": true
                })),
            )
                .into_response();
        }
    }
    m.calls
        .lock()
        .unwrap()
        .push((format!("webhook:{id}"), body));
    if id == GONE_HOOK_ID {
        discord_error(404, 10015, "Unknown Webhook")
    } else {
        StatusCode::NO_CONTENT.into_response()
    }
}

async fn guild_commands(
    State(m): State<Arc<Mock>>,
    Path((app, guild)): Path<(u64, u64)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    for command in body.as_array().cloned().unwrap_or_default() {
        m.check_command(&command);
    }
    m.calls
        .lock()
        .unwrap()
        .push((format!("commands:{app}:{guild}"), body));
    axum::Json(json!([])).into_response()
}

async fn spawn_discord() -> (String, Arc<Mock>) {
    let mock = Arc::new(Mock {
        spec: discord_spec(),
        ..Mock::default()
    });
    let app = Router::new()
        .route(
            "/api/v10/applications/{app}/guilds/{guild}/commands",
            axum::routing::put(guild_commands),
        )
        .route(
            "/api/v10/channels/{channel}/messages",
            post(channel_message),
        )
        .route("/api/v10/webhooks/{id}/{token}", post(webhook))
        .with_state(mock.clone());
    let base = kdigest_testkit::net::serve(app).await;
    (base, mock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_posts_embeds_to_channels_and_webhooks_and_disables_dead_ones() {
    let (api, mock) = spawn_discord().await;
    let dir = tempfile::tempdir().unwrap();
    let env = "KDIGEST_TEST_DISCORD_TOKEN";
    let config_path = write_file_config(
        dir.path(),
        "k.sqlite",
        &format!(
            "[discord]\napi_url = \"{api}\"\ntoken_env = \"{env}\"\n[delivery.discord]\nper_sec = 100.0\nper_destination_per_sec = 20.0\nconcurrency = 8\n"
        ),
    );
    let kdigest = |args: &[&str]| {
        crate::kdigest(&config_path, args)
            .env(env, "bot-token-secret")
            .output()
            .unwrap()
    };
    let hook = format!("https://discord.com/api/webhooks/{HOOK_ID}/{HOOK_TOKEN}");
    let gone_hook = format!("https://discord.com/api/webhooks/{GONE_HOOK_ID}/{HOOK_TOKEN}");
    for address in [
        format!("discord:{OK_CHANNEL}"),
        format!("discord:{GONE_CHANNEL}"),
        format!("discord:{FORBIDDEN_CHANNEL}"),
        format!("discord:{hook}"),
        format!("discord:{gone_hook}"),
    ] {
        let out = kdigest(&["subscribers", "add", &address, "--lang", "en"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = kdigest(&["run", "--once", "--date", "2026-10-28"]);
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{logs}");
    assert!(
        !logs.contains(HOOK_TOKEN) && !logs.contains("bot-token-secret"),
        "credentials never logged: {logs}"
    );
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());

    let store = Store::open(&dir.path().join("k.sqlite")).await.unwrap();
    let digest = store
        .load_digest(kdigest::demo::demo_date())
        .await
        .unwrap()
        .unwrap();
    let english = digest.clone().in_language("en");
    let english = kdigest::digest::filter(
        &english,
        &Default::default(),
        &kdigest::locale::Locale::builtin("en"),
    );
    let expected = kdigest::channels::discord::render::messages(
        &english,
        &kdigest::locale::Locale::builtin("en"),
    );
    assert_eq!(
        mock.bodies(&format!("channel:{OK_CHANNEL}")),
        expected,
        "every message, in order"
    );
    // The bot's messages carry 👍/👎 buttons; a channel webhook cannot (it is not our
    // application's), so its messages go without them.
    assert!(expected.iter().any(|m| m.get("components").is_some()));
    let without_buttons: Vec<serde_json::Value> = expected
        .iter()
        .cloned()
        .map(|mut m| {
            m.as_object_mut().unwrap().remove("components");
            m
        })
        .collect();
    assert_eq!(mock.bodies(&format!("webhook:{HOOK_ID}")), without_buttons);
    for (route, address, code) in [
        (
            format!("channel:{GONE_CHANNEL}"),
            format!("discord:{GONE_CHANNEL}"),
            "10003",
        ),
        (
            format!("channel:{FORBIDDEN_CHANNEL}"),
            format!("discord:{FORBIDDEN_CHANNEL}"),
            "50013",
        ),
        (
            format!("webhook:{GONE_HOOK_ID}"),
            format!("discord:{gone_hook}"),
            "10015",
        ),
    ] {
        assert_eq!(mock.bodies(&route).len(), 1, "{route} is never retried");
        let s = store
            .subscriber_by_address(&Address::parse(&address).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(&s.status, Status::Disabled(r) if r.contains(code)),
            "{route}: {:?}",
            s.status
        );
    }
    let list = String::from_utf8_lossy(&kdigest(&["subscribers", "list"]).stdout).to_string();
    assert!(!list.contains(HOOK_TOKEN), "webhook tokens never printed");
}

/// The link-signing key the global-429 run is given.
const SIGNING_KEY: &str = "trace-level-signing-key-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_429_holds_back_every_webhook_for_its_retry_after() {
    let (api, mock) = spawn_discord().await;
    let dir = tempfile::tempdir().unwrap();
    let config_path = write_file_config(
        dir.path(),
        "k.sqlite",
        &format!(
            "[discord]\napi_url = \"{api}\"\n[delivery.discord]\nper_sec = 100.0\nper_destination_per_sec = 20.0\nconcurrency = 4\n"
        ),
    );
    let kdigest = |args: &[&str]| crate::kdigest(&config_path, args).output().unwrap();
    // The rate-limited webhook sorts first, then six others.
    let ids: Vec<u64> = std::iter::once(GLOBAL_429_HOOK_ID)
        .chain((1..=6).map(|i| GLOBAL_429_HOOK_ID + i))
        .collect();
    for id in &ids {
        let address = format!("discord:https://discord.com/api/webhooks/{id}/{HOOK_TOKEN}");
        let out = kdigest(&["subscribers", "add", &address, "--lang", "en"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Runs until every message went: a run that meets the pause leaves the rest queued.
    let started = std::time::Instant::now();
    let mut logs = String::new();
    loop {
        // At trace level, where every dependency logs its requests: the webhook's token
        // (plain or URL-encoded) and the signing key must still appear nowhere.
        let out = crate::kdigest(&config_path, &["run", "--once", "--date", "2026-10-28"])
            .env("RUST_LOG", "trace")
            .env(kdigest::tokens::SECRET_ENV, SIGNING_KEY)
            .output()
            .unwrap();
        logs.push_str(&String::from_utf8_lossy(&out.stderr));
        logs.push_str(&String::from_utf8_lossy(&out.stdout));
        assert!(out.status.success(), "{logs}");
        let store = Store::open(&dir.path().join("k.sqlite")).await.unwrap();
        let counts = store
            .delivery_counts(kdigest::demo::demo_date())
            .await
            .unwrap();
        store.close().await;
        if counts.pending == 0 && counts.sending == 0 {
            assert_eq!((counts.sent, counts.failed), (7, 0), "{logs}");
            break;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "not delivered: {counts:?}\n{logs}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    assert!(
        !logs.contains(HOOK_TOKEN) && !logs.contains(&HOOK_TOKEN[..24]),
        "the webhook token is never logged, at any level"
    );
    assert!(
        logs.contains("TRACE"),
        "the dependencies logged at trace level"
    );
    assert!(
        !logs.contains(SIGNING_KEY),
        "the signing key is never logged"
    );
    assert!(logs.contains("global rate limit"), "{logs}");
    let at = mock
        .global_429
        .lock()
        .unwrap()
        .expect("the 429 was answered");
    // Nothing reached any webhook inside the Retry-After (requests already on the wire
    // when the 429 came back excepted: 500 ms, for a debug build logging at trace level on
    // a busy machine; the window under test is GLOBAL_RETRY_SECS).
    let inside: Vec<(u64, f64)> = mock
        .arrivals
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, t)| *t > at + std::time::Duration::from_millis(500))
        .map(|(id, t)| (*id, t.duration_since(at).as_secs_f64()))
        .filter(|(_, s)| *s < GLOBAL_RETRY_SECS)
        .collect();
    assert!(
        inside.is_empty(),
        "requests inside the global Retry-After: {inside:?}"
    );
    for id in &ids {
        assert!(
            !mock.bodies(&format!("webhook:{id}")).is_empty(),
            "webhook {id} got its digest"
        );
    }
    let subscribers = kdigest(&["subscribers", "list"]);
    assert!(
        !String::from_utf8_lossy(&subscribers.stdout).contains("disabled"),
        "nobody is disabled by a rate limit"
    );
}

/// The subscription of a Discord channel, which the test has made.
async fn channel_subscriber(
    store: &kdigest::store::Store,
    channel: u64,
) -> kdigest::subscriber::Subscriber {
    store
        .subscriber_by_address(&Address::Discord(
            kdigest::channels::discord::Target::Channel(channel),
        ))
        .await
        .unwrap()
        .expect("the channel is subscribed")
}

fn signing_key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

fn signed(body: &Value, key: &SigningKey) -> (String, String, Vec<u8>) {
    let bytes = serde_json::to_vec(body).unwrap();
    let timestamp = chrono::Utc::now().timestamp().to_string();
    let signature = key.sign(&[timestamp.as_bytes(), &bytes].concat());
    (kdigest::parse::hex(&signature.to_bytes()), timestamp, bytes)
}

fn interaction(name: &str, options: Value, permissions: &str) -> Value {
    let text = std::fs::read_to_string(
        reference_dir()
            .join("platform/discord_payloads/application-commands__example_interaction__L500.json"),
    )
    .unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["data"]["name"] = json!(name);
    v["data"]["options"] = options;
    v["member"]["permissions"] = json!(permissions);
    // The bot may view, send and embed here (the documented example's bits lack them).
    v["app_permissions"] = json!(((1u64 << 10) | (1 << 11) | (1 << 14) | 442_368).to_string());
    v["application_id"] = json!("0");
    // Every interaction has its own id (a snowflake); one id is answered once.
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    v["id"] = json!(format!("{}", 786_008_729_715_212_338u64 + id));
    // The documented example is an en-US client; these members use Discord in Chinese.
    v["locale"] = json!("zh-CN");
    v["guild_locale"] = json!("zh-CN");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interactions_endpoint_verifies_signatures_and_runs_the_shared_commands() {
    let key = signing_key();
    let public = kdigest::parse::hex(key.verifying_key().as_bytes());
    let app = TestApp::builder()
        // No /digest cooldown: the channel asks twice (the cooldown is the Telegram
        // tests' and the shared handler's).
        .toml(&format!(
            "[discord]\npublic_key = \"{public}\"\n[daemon]\ndigest_cooldown_secs = 0\n"
        ))
        .build()
        .await;
    let config = &app.config;
    let store = &app.store;
    app.digest().await;
    let bot = DiscordBot::new(store.clone(), Arc::new(config.clone()));
    let services = kdigest::web::Services {
        bots: kdigest::bot::routes::Bots {
            discord: Some(Arc::new(bot)),
            ..Default::default()
        },
        ..Default::default()
    };
    let router = kdigest::web::router(Arc::new(kdigest::metrics::Metrics::default()), services);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/discord/interactions",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let client = reqwest::Client::new();
    let send = |body: Value, key: SigningKey| {
        let (signature, timestamp, bytes) = signed(&body, &key);
        client
            .post(&url)
            .header("X-Signature-Ed25519", signature)
            .header("X-Signature-Timestamp", timestamp)
            .header("content-type", "application/json")
            .body(bytes)
            .send()
    };

    let pong: Value = send(
        json!({"type": 1, "id": "1", "application_id": "0", "token": "t", "version": 1}),
        key.clone(),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(pong, json!({"type": 1}));
    let forged = send(json!({"type": 1}), SigningKey::from_bytes(&[8u8; 32]))
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);

    let channel = 645_027_906_669_510_667u64;
    let denied: Value = send(interaction("subscribe", json!([]), "0"), key.clone())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        denied["data"]["flags"], 64,
        "settings replies are ephemeral"
    );
    assert_eq!(
        denied["data"]["content"],
        "只有本群管理员可以修改本群的订阅。"
    );
    // An interaction that reaches an instance twice (or two instances) is answered once.
    let repeated = interaction("subscribe", json!([]), "0");
    let first = send(repeated.clone(), key.clone()).await.unwrap();
    assert_eq!(first.status(), 200);
    let again = send(repeated, key.clone()).await.unwrap();
    assert_eq!(again.status(), 409, "one answer per interaction id");
    // The same refusal to a member whose Discord is in English (the documented payload).
    let mut english = interaction("subscribe", json!([]), "0");
    english["locale"] = json!("en-US");
    let denied_en: Value = send(english, key.clone())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        denied_en["data"]["content"],
        "Only this chat's admins can change its subscription."
    );
    let options = json!([{"type": 4, "name": "min_score", "value": 70}, {"type": 3, "name": "layer", "value": "runtime"}]);
    let ok: Value = send(interaction("subscribe", options, "2147483647"), key.clone())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        ok["data"]["content"]
            .as_str()
            .unwrap()
            .starts_with("已订阅"),
        "{ok}"
    );
    let s = channel_subscriber(store, channel).await;
    assert_eq!(
        s.filter.layers.iter().cloned().collect::<Vec<_>>(),
        vec!["runtime"]
    );
    assert_eq!(s.filter.min_score.to_string(), "70.0");

    let bad: Value = send(
        interaction(
            "threshold",
            json!([{"type": 4, "name": "value", "value": 300}]),
            "2147483647",
        ),
        key.clone(),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert!(
        bad["data"]["content"]
            .as_str()
            .unwrap()
            .contains("/threshold [0-100]"),
        "{bad}"
    );

    let digest: Value = send(
        interaction(
            "digest",
            json!([{"type": 3, "name": "date", "value": "2026-10-28"}]),
            "0",
        ),
        key.clone(),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(digest["type"], 4);
    let embeds = digest["data"]["embeds"].as_array().unwrap();
    assert!(!embeds.is_empty());
    assert_eq!(digest["data"]["allowed_mentions"], json!({"parse": []}));
    let spec = discord_spec();
    for e in embeds {
        assert_eq!(
            schema_problems(
                &spec,
                &json!({"$ref": "#/components/schemas/RichEmbed"}),
                e,
                "embed"
            ),
            Vec::<String>::new()
        );
    }
    let text = serde_json::to_string(embeds).unwrap();
    assert!(
        text.contains("Tessera") && !text.contains("ShapeTrace"),
        "the channel's filter (runtime, 70) applies"
    );

    // The reply carries a 👍 and a 👎 per event; a press (a message-component
    // interaction) is one vote per member, replaced when they press again.
    let rows = digest["data"]["components"].as_array().unwrap();
    assert!(rows.len() <= 5);
    let first = rows[0]["components"][0]["custom_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(first.starts_with("vu:"), "{first}");
    let event = first.trim_start_matches("vu:").to_string();
    let press = |custom_id: String, user: &str| {
        let mut v = interaction("digest", json!([]), "0");
        v["type"] = json!(3);
        v["data"] = json!({"custom_id": custom_id, "component_type": 2});
        v["member"]["user"]["id"] = json!(user);
        v
    };
    let mut answers = Vec::new();
    for (data, user) in [
        (format!("vu:{event}"), "1001"),
        (format!("vu:{event}"), "1001"),
        (format!("vd:{event}"), "1002"),
        (format!("vu:{event}"), "1002"),
    ] {
        let answer: Value = send(press(data, user), key.clone())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["data"]["flags"], 64, "only the member sees it");
        answers.push(answer["data"]["content"].as_str().unwrap().to_string());
    }
    // Once per member; the second member changes theirs.
    let expected = ["👍 1 · 👎 0", "👍 1 · 👎 0", "👍 1 · 👎 1", "👍 2 · 👎 0"];
    for (answer, tally) in answers.iter().zip(expected) {
        assert!(answer.ends_with(tally), "{answers:?}");
    }
    assert_eq!(
        store.tally(&event).await.unwrap(),
        kdigest::feedback::Tally { up: 2, down: 0 }
    );

    // /follow through the endpoint: only admins change the channel's follows; a followed
    // paper outside the channel's filter (ShapeTrace: frontend, not runtime) then reaches
    // it, marked ★; /unfollow of a phrase not followed answers with the list.
    let phrase = |value: &str| json!([{"type": 3, "name": "phrase", "value": value}]);
    let answer = |body: Value| {
        let sent = send(body, key.clone());
        async move { sent.await.unwrap().json::<Value>().await.unwrap() }
    };
    let refused = answer(interaction("follow", phrase("ShapeTrace"), "0")).await;
    assert_eq!(
        refused["data"]["content"],
        "只有本群管理员可以修改本群的订阅。"
    );
    let followed = answer(interaction("follow", phrase("ShapeTrace"), "2147483647")).await;
    assert_eq!(followed["data"]["flags"], 64, "{followed}");
    // Quoted as a reader would type it back (/unfollow "…").
    assert_eq!(
        followed["data"]["content"], "关注：\"ShapeTrace\"",
        "{followed}"
    );
    let s = channel_subscriber(store, channel).await;
    assert_eq!(s.filter.follows, vec!["ShapeTrace".to_string()]);
    let digest = answer(interaction(
        "digest",
        json!([{"type": 3, "name": "date", "value": "2026-10-28"}]),
        "0",
    ))
    .await;
    let text = serde_json::to_string(&digest["data"]["embeds"]).unwrap();
    assert!(
        text.contains("★ ShapeTrace") && text.contains("Tessera"),
        "the followed paper joins the channel's own: {text:.600}"
    );
    let not_followed = answer(interaction("unfollow", phrase("nope"), "2147483647")).await;
    assert_eq!(
        not_followed["data"]["content"],
        "未关注“nope”。已关注：\"ShapeTrace\""
    );
    let unfollowed = answer(interaction("unfollow", phrase("shapetrace"), "2147483647")).await;
    assert!(
        unfollowed["data"]["content"]
            .as_str()
            .unwrap()
            .starts_with("关注：暂无"),
        "{unfollowed}"
    );
}

#[test]
fn real_interaction_payloads_map_to_command_text() {
    let dir = reference_dir().join("platform/discord_payloads");
    let mut mapped = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("application-commands") || !name.ends_with(".json") {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        mapped.insert(name, command_text(&v));
    }
    assert_eq!(
        mapped["application-commands__example_interaction__L500.json"].as_deref(),
        Some("/cardsearch")
    );
    // Anything that is not an application-command interaction maps to nothing.
    assert!(
        mapped.values().filter(|m| m.is_none()).count() >= 1,
        "{mapped:?}"
    );
    let layered = json!({"type": 2, "data": {"name": "digest", "options": [{"name": "layer", "value": "runtime"}, {"name": "date", "value": "latest"}]}});
    assert_eq!(
        command_text(&layered).as_deref(),
        Some("/digest latest runtime")
    );
    // /why takes the number first, then the date, as its text form does.
    let why = json!({"type": 2, "data": {"name": "why", "options": [{"name": "date", "value": "2026-10-28"}, {"name": "n", "value": 4}]}});
    assert_eq!(command_text(&why).as_deref(), Some("/why 4 2026-10-28"));
    // A followed phrase keeps its words (layers typed with spaces become a list).
    let follow = json!({"type": 2, "data": {"name": "follow", "options": [{"name": "phrase", "value": "Flash  Attention"}]}});
    assert_eq!(
        command_text(&follow).as_deref(),
        Some("/follow Flash Attention")
    );
    // Gateway mode serialises serenity's model back to JSON: the mapping must not change.
    let text =
        std::fs::read_to_string(dir.join("application-commands__example_interaction__L500.json"))
            .unwrap();
    let mut raw: Value = serde_json::from_str(&text).unwrap();
    raw["application_id"] = json!("775799577604522054");
    raw["version"] = json!(1);
    // Fields today's gateway sends that this older documentation example lacks.
    raw["member"]["flags"] = json!(0);
    raw["entitlements"] = json!([]);
    raw["authorizing_integration_owners"] = json!({});
    raw["attachment_size_limit"] = json!(26_214_400);
    raw["data"]["options"] = json!([{"type": 3, "name": "layer", "value": "runtime"}, {"type": 4, "name": "min_score", "value": 70}]);
    raw["data"]["name"] = json!("subscribe");
    let model: serenity::model::application::Interaction =
        serde_json::from_value(raw.clone()).expect("serenity reads the payload");
    let round_trip = kdigest::bot::discord::gateway_json(&model).unwrap();
    assert_eq!(
        command_text(&round_trip),
        command_text(&raw),
        "{round_trip:#}"
    );
    assert_eq!(command_text(&raw).as_deref(), Some("/subscribe runtime 70"));
    assert!(kdigest::bot::discord::can_manage(&round_trip));
    // Mapped text goes through the same parser as Telegram's.
    let layers = ["runtime"];
    assert!(matches!(
        kdigest::bot::parse("/digest latest runtime", None, &layers),
        Ok(Some(kdigest::bot::Command::Digest { .. }))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_registered_per_guild_with_typed_options() {
    let (api, mock) = spawn_discord().await;
    let env = "KDIGEST_TEST_DISCORD_TOKEN_REGISTER";
    unsafe { std::env::set_var(env, "bot-token") };
    let config = kdigest::config::Config::parse(&format!(
        "[discord]\napi_url = \"{api}\"\ntoken_env = \"{env}\"\napplication_id = 775799577604522054\nguild_id = 290926798626357999\n"
    ))
    .unwrap();
    kdigest::bot::discord::register_commands(&config)
        .await
        .unwrap();
    let bodies = mock.bodies("commands:775799577604522054:290926798626357999");
    assert_eq!(bodies.len(), 1);
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());
    let commands = bodies[0].as_array().unwrap();
    let names: Vec<&str> = commands
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![
            "help",
            "subscribe",
            "unsubscribe",
            "layers",
            "threshold",
            "settings",
            "lang",
            "digest",
            "why",
            "time",
            "cadence",
            "boost",
            "follow",
            "unfollow",
        ]
    );
    let (follow, unfollow) = (&commands[12]["options"][0], &commands[13]["options"][0]);
    assert_eq!(
        (follow["name"].as_str(), follow["max_length"].as_u64()),
        (Some("phrase"), Some(60))
    );
    assert_eq!(unfollow["required"], true);
    let cadence = &commands[10]["options"];
    assert_eq!(cadence[0]["choices"].as_array().unwrap().len(), 3);
    assert_eq!(cadence[1]["choices"].as_array().unwrap().len(), 7);
    let subscribe = &commands[1];
    let layer = &subscribe["options"][0];
    assert_eq!(layer["type"], 3);
    assert_eq!(
        layer["choices"].as_array().unwrap().len(),
        7,
        "six layers and all"
    );
    assert_eq!(subscribe["options"][1]["min_value"], 0);
    assert_eq!(subscribe["options"][1]["max_value"], 100);
    assert!(
        subscribe["description_localizations"]["zh-CN"]
            .as_str()
            .unwrap()
            .contains("订阅")
    );
}
