//! The stricter LLM guard end to end: the real client against a loopback OpenAI-compatible
//! server that answers one event (CUTLASS 5.0.0) with a fault and every other event well.
//! Each kind of fault makes that event fall back to extractive text, and the generation
//! notes name the reason.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kdigest::model::DigestEvent;
use kdigest_testkit::TestApp;
use serde_json::{Value, json};

use kdigest_testkit::llm::{HEADLINE, OVERVIEW, good, reply};

const TARGET: &str = "CUTLASS 5.0.0";

/// How the server answers the target event.
#[derive(Clone)]
enum Fault {
    /// This whole HTTP body (status 200) instead of a completion.
    Body(Value),
    /// A well-formed completion whose content is this.
    Content(String),
}

/// A good reply for the target event with `summary` instead, and one more field, if any.
fn content(summary: Value, extra: Option<(&str, Value)>) -> Fault {
    let mut r: Value = serde_json::from_str(&good(GOOD_ZH)).unwrap();
    r["summary"] = summary;
    if let Some((k, v)) = extra {
        r[k] = v;
    }
    Fault::Content(r.to_string())
}

fn summary(text: &str) -> Fault {
    content(json!(text), None)
}

async fn chat(State(fault): State<Arc<Fault>>, Json(body): Json<Value>) -> Response {
    let system = body["messages"][0]["content"].as_str().unwrap_or("");
    let english = system.contains("Write in English");
    if system.contains("headline") {
        return reply(
            &json!({"headline": HEADLINE, "overview": OVERVIEW}).to_string(),
            "stop",
        );
    }
    let data: Value =
        serde_json::from_str(body["messages"][1]["content"].as_str().unwrap_or("")).unwrap();
    let title = data["title"].as_str().unwrap_or("");
    if title.starts_with(TARGET) {
        return match &*fault {
            Fault::Body(body) => Json(body.clone()).into_response(),
            Fault::Content(c) => reply(c, "stop"),
        };
    }
    let name = title.split(' ').next().unwrap_or("");
    if english {
        let text = json!({"summary": format!("News from {name}."), "why_it_matters": "It changes how kernels are written.", "brief": format!("News from {name}."), "watch": "Watch adoption."});
        reply(&text.to_string(), "stop")
    } else {
        reply(&good(&format!("{name} 的最新进展。")), "stop")
    }
}

/// Generates the demo day in `language` with the server answering `fault`; returns the
/// target event, the same event in extractive mode, and the Markdown render.
async fn generate(language: &str, fault: Fault) -> (DigestEvent, DigestEvent, String) {
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(Arc::new(fault));
    let llm_base = kdigest_testkit::llm::serve(app).await;
    let mut events = Vec::new();
    let mut md = String::new();
    for llm in [true, false] {
        let builder = TestApp::builder();
        let builder = if llm {
            builder.llm(&llm_base, "retries = 0\n")
        } else {
            builder
        };
        let mut app = builder.build().await;
        app.config.digest.language = language.to_string();
        let d = app.digest().await;
        if llm {
            let renderer = kdigest::render::Renderer::new(&d.language, None).unwrap();
            md = renderer
                .render(&d, kdigest::render::Format::Md)
                .unwrap()
                .join("");
            assert!(
                d.events().any(|e| !e.llm_fallback),
                "the other events' good replies are used"
            );
        }
        events.push(d.events().find(|e| e.title == TARGET).unwrap().clone());
    }
    let extractive = events.pop().unwrap();
    (events.pop().unwrap(), extractive, md)
}

/// The target event fell back to its extractive text and the notes say why, in `words`.
async fn falls_back(tag: &str, language: &str, fault: Fault, reason: &str, words: &str) {
    let (event, extractive, md) = generate(language, fault).await;
    assert!(event.llm_fallback, "{tag}: {}", event.summary);
    assert_eq!(event.llm_fallback_reason.as_deref(), Some(reason), "{tag}");
    assert_eq!(event.summary, extractive.summary, "{tag}");
    assert_eq!(event.why_it_matters, extractive.why_it_matters, "{tag}");
    let note = if language == "en" {
        format!("{TARGET} ({words})")
    } else {
        format!("{TARGET}（{words}）")
    };
    assert!(md.contains(&note), "{tag}: no {note} in\n{md}");
}

const SCHEMA_ZH: &str = "拒绝：回复结构不符";
const GOOD_ZH: &str = "CUTLASS 5.0 让 CuTe DSL 成为主要接口，FP4 GEMM 最高比 cuBLAS 快 1.6 倍。";

#[tokio::test]
async fn an_error_object_falls_back_as_schema() {
    let body = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
    falls_back("ERROR", "zh-CN", Fault::Body(body), "schema", SCHEMA_ZH).await;
}

#[tokio::test]
async fn missing_choices_fall_back_as_schema() {
    let body = json!({"id": "x", "object": "chat.completion", "usage": {"prompt_tokens": 10, "completion_tokens": 0}});
    falls_back("CHOICES", "zh-CN", Fault::Body(body), "schema", SCHEMA_ZH).await;
}

#[tokio::test]
async fn content_as_an_array_falls_back_as_schema() {
    let Fault::Content(text) = summary(GOOD_ZH) else {
        unreachable!()
    };
    let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}, "finish_reason": "stop"}]});
    falls_back("ARRAY", "zh-CN", Fault::Body(body), "schema", SCHEMA_ZH).await;
}

#[tokio::test]
async fn a_field_of_the_wrong_type_falls_back_as_schema() {
    let fault = content(json!(["CUTLASS 5.0 发布", "CuTe DSL 成为主要接口"]), None);
    falls_back("TYPE", "zh-CN", fault, "schema", SCHEMA_ZH).await;
}

#[tokio::test]
async fn an_unknown_field_falls_back_as_schema() {
    let fault = content(json!(GOOD_ZH), Some(("confidence", json!("high"))));
    falls_back("UNKNOWN", "zh-CN", fault, "schema", SCHEMA_ZH).await;
}

const LINK_ZH: &str = "拒绝：含不属于来源的链接";

#[tokio::test]
async fn a_bare_domain_link_falls_back_as_link() {
    let fault = summary("CUTLASS 5.0 发布，镜像见 cutlass-mirror.com/5.0。");
    falls_back("DOMAIN", "zh-CN", fault, "link", LINK_ZH).await;
}

#[tokio::test]
async fn a_markdown_link_falls_back_as_link() {
    let fault = summary("CUTLASS 5.0 发布，详见[发布说明](cutlass-notes.example/5.0)。");
    falls_back("MARKDOWN", "zh-CN", fault, "link", LINK_ZH).await;
}

#[tokio::test]
async fn a_www_link_falls_back_as_link() {
    let fault = summary("CUTLASS 5.0 发布，详见 www.cutlass-mirror.example。");
    falls_back("WWW", "zh-CN", fault, "link", LINK_ZH).await;
}

#[tokio::test]
async fn an_invented_name_falls_back_as_name() {
    let fault = summary("CUTLASS 5.0 由 FooBarNet 团队与 Acme Corp 联合发布。");
    falls_back("NAME", "zh-CN", fault, "name", "拒绝：含来源中没有的名称").await;
}

#[tokio::test]
async fn an_english_reply_in_a_chinese_digest_falls_back_as_language() {
    let fault = summary(
        "CUTLASS 5.0 makes CuTe DSL the primary Python interface, up to 1.6x over cuBLAS on FP4 GEMM.",
    );
    falls_back(
        "ENGLISH",
        "zh-CN",
        fault,
        "language",
        "拒绝：不是本期摘要的语言",
    )
    .await;
}

#[tokio::test]
async fn a_russian_reply_in_an_english_digest_falls_back_as_language() {
    let fault = Fault::Content(
        json!({"summary": "CUTLASS 5.0 делает CuTe DSL основным интерфейсом Python.", "why_it_matters": "It matters for CuTe DSL kernel authors.", "brief": "CUTLASS 5.0 is out.", "watch": "Watch CuTe DSL adoption."})
            .to_string(),
    );
    let words = "refused: not written in the digest's language";
    falls_back("RUSSIAN", "en", fault, "language", words).await;
}
