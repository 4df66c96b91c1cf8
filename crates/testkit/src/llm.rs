//! An OpenAI-compatible chat-completions stand-in: the key it expects, replies shaped as
//! DeepSeek answers, and the day's headline and overview as a model writes them. Each test
//! serves its own handler (its scenario) with [`serve`].

use axum::Json;
use axum::Router;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The API key the stand-ins expect (in a variable of its own: [`crate::TestApp`]'s
/// builder sets it).
pub const KEY: &str = "sk-test-secret-value-123";
/// The day's headline and overview as a model writes them: versions shorter than the tags,
/// Chinese around the sources' figures.
pub const HEADLINE: &str = "CUTLASS 5.0 与 Triton 3.6 发布，另有四篇内核与编译论文";
pub const OVERVIEW: &str = "CUTLASS 5.0 让 CuTe DSL 成为主要接口，FP4 GEMM 最高比 cuBLAS 快 1.6 倍；TileFuse 在 B200 上达到 1,530 TFLOPS。";

/// A chat completion as DeepSeek answers it, with its `usage`.
pub fn reply(content: &str, finish: &str) -> Response {
    Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
    }))
    .into_response()
}

/// A good reply in the digest's language (zh-CN, the demo's): the guard refuses others.
pub fn good(summary: &str) -> String {
    json!({"summary": summary, "why_it_matters": "它改变了内核的编写方式。", "brief": summary, "watch": "关注后续采用情况。"})
        .to_string()
}

/// Serves `app` (its routes under `/v1`, e.g. `/v1/chat/completions`) on loopback; the
/// base URL for `[summarize] base_url`.
pub async fn serve(app: Router) -> String {
    format!("{}/v1", crate::net::serve(app).await)
}
