//! OpenAI-compatible chat-completions client (DeepSeek, OpenAI, Ollama, vLLM) and the
//! validation every reply must pass before it is used.
//!
//! Feed text is untrusted: it goes to the model as JSON data under a system prompt that says
//! so, and the reply is checked, not trusted: the HTTP envelope and the JSON the model wrote
//! are parsed against one strict schema (exact types, no unknown fields in the reply), the
//! lengths are bounded, every number must be a source figure, however written
//! ([`super::numbers`]), and [`super::guard`] refuses links that are not the event's sources,
//! names no source mentions and text in another script than the digest's language.
//! A reply that fails any check (or a request that fails after retries) makes that event fall
//! back to extractive text. Validated replies are cached in the store by (model, prompt hash).

use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::extractive;
use super::guard::Allowed;
use super::prompt::*;
use crate::config::{ConfigError, LlmConfig, Secret};
use crate::digest::Candidate;
use crate::locale::Locale;
use crate::model::{EventText, Headline, LlmUsage, Summaries};
use crate::parse::hex;
use crate::store::Store;

const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

pub struct LlmClient {
    http: reqwest::Client,
    endpoint: url::Url,
    provider: String,
    model: String,
    key: Secret,
    concurrency: usize,
    retries: u32,
    max_tokens: u32,
    deadline: Duration,
    prices: (Option<f64>, Option<f64>),
    /// Requests, prompt tokens and completion tokens of the current digest.
    usage: std::sync::Mutex<LlmUsage>,
}

impl LlmClient {
    pub fn from_config(config: &LlmConfig) -> Result<LlmClient, ConfigError> {
        let key = Secret::from_env(
            &config.api_key_env,
            "the LLM API key (or set summarize.mode = \"extractive\")",
        )?;
        let mut base = config.base_url.clone();
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let endpoint = base.join("chat/completions").map_err(|e| {
            ConfigError::new(format!(
                "summarize.base_url: cannot build the chat endpoint: {e}"
            ))
        })?;
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ConfigError::new(format!("Cannot build the HTTP client: {e}")))?;
        Ok(LlmClient {
            http,
            endpoint,
            provider: config.provider.clone(),
            model: config.model.clone(),
            key,
            concurrency: config.concurrency,
            retries: config.retries,
            max_tokens: config.max_tokens,
            deadline: config.deadline,
            prices: (config.price_input_per_mtok, config.price_output_per_mtok),
            usage: std::sync::Mutex::new(LlmUsage::default()),
        })
    }

    /// Summarises every candidate, in order, falling back to extractive per event. The whole
    /// phase has one deadline (`summarize.deadline_secs`): what is not done by then falls
    /// back, so a hanging API cannot hold the daily run.
    pub async fn summarize_all(
        &self,
        candidates: &[Candidate],
        language: &str,
        locale: &Locale,
        budget: usize,
        store: &Store,
    ) -> Summaries {
        *self.usage.lock().expect("usage lock") = LlmUsage::default();
        let deadline = tokio::time::Instant::now() + self.deadline;
        let policy = &Policy {
            language: language.to_string(),
            allowed: Allowed::new(language, locale),
        };
        let results: Vec<Result<EventText, LlmError>> = futures::stream::iter(candidates)
            .map(|c| async move {
                tokio::time::timeout_at(deadline, self.summarize_one(c, policy, budget, store))
                    .await
                    .unwrap_or(Err(LlmError::Deadline))
            })
            .buffered(self.concurrency)
            .collect()
            .await;
        let mut texts = Vec::with_capacity(candidates.len());
        let mut fell_back = Vec::with_capacity(candidates.len());
        for (candidate, result) in candidates.iter().zip(results) {
            match result {
                Ok(text) => {
                    texts.push(text);
                    fell_back.push(None);
                }
                Err(error) => {
                    tracing::warn!(message = "LLM summary rejected; using extractive text", event = %candidate.event.id, reason = error.reason(), %error);
                    texts.push(extractive::summarize(candidate, locale, budget));
                    fell_back.push(Some(error.reason().to_string()));
                }
            }
        }
        let headline = if candidates.is_empty() {
            None
        } else {
            let asked = self.headline(candidates, &texts, policy, store);
            match tokio::time::timeout_at(deadline, asked)
                .await
                .unwrap_or(Err(LlmError::Deadline))
            {
                Ok(h) => Some(h),
                Err(error) => {
                    tracing::warn!(message = "LLM headline rejected; using the built one", reason = error.reason(), %error);
                    None
                }
            }
        };
        Summaries {
            texts,
            fell_back,
            mode: self.provider.clone(),
            other_languages: Vec::new(),
            usage: self.usage(),
            headline,
        }
    }

    /// Requests and tokens so far, with the cost estimate; None before any request.
    fn usage(&self) -> Option<LlmUsage> {
        let mut usage = *self.usage.lock().expect("usage lock");
        usage.cost = match self.prices {
            (None, None) => None,
            (input, output) => Some(
                usage.prompt_tokens as f64 / 1e6 * input.unwrap_or(0.0)
                    + usage.completion_tokens as f64 / 1e6 * output.unwrap_or(0.0),
            ),
        };
        (usage.requests > 0).then_some(usage)
    }

    /// `summarize.rank`: rates the highest-scoring events that could reach the digest
    /// (at least `min_score - rank::MARGIN`, with a layer; at most `rank::MAX_RATED`) and
    /// blends each rating into its score. Within the LLM deadline; an event whose rating
    /// fails keeps its score and says why. Returns this phase's usage.
    pub async fn rate_all(
        &self,
        candidates: &mut [Candidate],
        layer_names: &[&str],
        min_score: f64,
        store: &Store,
    ) -> Option<LlmUsage> {
        use super::rank;
        let chosen: Vec<usize> = (0..candidates.len())
            .filter(|&i| {
                let c = &candidates[i];
                c.assessment.score.as_f64() >= min_score - rank::MARGIN
                    && !c.classification.layers.is_empty()
            })
            .take(rank::MAX_RATED)
            .collect();
        let deadline = tokio::time::Instant::now() + self.deadline;
        let ratings: Vec<Result<rank::Rating, LlmError>> = {
            let candidates = &*candidates;
            futures::stream::iter(&chosen)
                .map(|&i| async move {
                    let body =
                        rank::request(&self.model, &candidates[i], layer_names, self.max_tokens);
                    let asked =
                        self.ask_checked(&body, store, |reply| rank::validate(reply, layer_names));
                    tokio::time::timeout_at(deadline, asked)
                        .await
                        .unwrap_or(Err(LlmError::Deadline))
                })
                .buffered(self.concurrency)
                .collect()
                .await
        };
        for (i, rating) in chosen.into_iter().zip(ratings) {
            match rating {
                Ok(r) => rank::apply(&mut candidates[i], &r, layer_names),
                Err(error) => {
                    tracing::warn!(message = "LLM rating rejected; keeping the rule score", event = %candidates[i].event.id, reason = error.reason(), %error);
                    rank::note_unrated(&mut candidates[i], &error);
                }
            }
        }
        self.usage()
    }

    /// The digest's headline and overview, from the events' titles and briefs, checked like
    /// an event's text against every source of the day.
    async fn headline(
        &self,
        candidates: &[Candidate],
        texts: &[EventText],
        policy: &Policy,
        store: &Store,
    ) -> Result<Headline, LlmError> {
        let body = headline_request(
            &self.model,
            candidates,
            texts,
            &policy.language,
            self.max_tokens,
        );
        self.ask_checked(&body, store, |reply| {
            validate_headline(reply, candidates, policy)
        })
        .await
    }

    async fn summarize_one(
        &self,
        candidate: &Candidate,
        policy: &Policy,
        budget: usize,
        store: &Store,
    ) -> Result<EventText, LlmError> {
        let body = request_body(
            &self.model,
            candidate,
            &policy.language,
            budget,
            self.max_tokens,
        );
        self.ask_checked(&body, store, |reply| {
            validate(reply, candidate, budget, policy)
        })
        .await
    }

    /// A validated reply to `body`: from the cache (by model and request hash) when a cached
    /// reply still validates, else asked, validated and then cached.
    async fn ask_checked<T>(
        &self,
        body: &serde_json::Value,
        store: &Store,
        check: impl Fn(&str) -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        let hash = hex(&Sha256::digest(body.to_string().as_bytes()));
        if let Ok(Some(cached)) = store.llm_cache_get(&self.model, &hash).await
            && let Ok(checked) = check(&cached)
        {
            return Ok(checked);
        }
        let reply = self.complete(body).await?;
        let checked = check(&reply)?;
        if let Err(error) = store.llm_cache_put(&self.model, &hash, &reply).await {
            tracing::warn!(message = "Cannot cache LLM reply", %error);
        }
        Ok(checked)
    }

    /// One chat completion with retries on transient failures, honouring Retry-After.
    async fn complete(&self, body: &serde_json::Value) -> Result<String, LlmError> {
        let mut attempt = 0;
        loop {
            let (result, retry_after) = self.complete_once(body).await;
            match result {
                Err(e) if e.is_transient() && attempt < self.retries => {
                    attempt += 1;
                    let backoff =
                        retry_after.unwrap_or(Duration::from_millis(500 * 2u64.pow(attempt)));
                    tokio::time::sleep(backoff.min(MAX_RETRY_AFTER)).await;
                }
                other => return other,
            }
        }
    }

    async fn complete_once(
        &self,
        body: &serde_json::Value,
    ) -> (Result<String, LlmError>, Option<Duration>) {
        let response = self
            .http
            .post(self.endpoint.clone())
            .bearer_auth(self.key.expose())
            .json(body)
            .send()
            .await;
        let response = match response {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return (Err(LlmError::Timeout), None),
            Err(e) => return (Err(LlmError::Transport(e.without_url().to_string())), None),
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = crate::fetch::retry_after(response.headers());
            return (Err(LlmError::Status(status.as_u16())), retry_after);
        }
        let body = match response.bytes().await {
            Ok(b) => b,
            Err(e) if e.is_timeout() => return (Err(LlmError::Timeout), None),
            Err(e) => return (Err(LlmError::Transport(e.without_url().to_string())), None),
        };
        let result = match serde_json::from_slice::<ChatResponse>(&body) {
            Err(e) => Err(LlmError::parse("response body", &e)),
            Ok(chat) if chat.error.is_some() => Err(LlmError::Schema(
                "response body: an error object instead of a completion".into(),
            )),
            Ok(chat) => {
                let mut usage = self.usage.lock().expect("usage lock");
                usage.requests += 1;
                if let Some(u) = &chat.usage {
                    usage.prompt_tokens += u.prompt_tokens;
                    usage.completion_tokens += u.completion_tokens;
                }
                drop(usage);
                match chat.choices.into_iter().next() {
                    None => Err(LlmError::Empty),
                    Some(choice) if choice.finish_reason.as_deref() == Some("length") => {
                        Err(LlmError::Truncated)
                    }
                    Some(choice) => {
                        let content = choice.message.content;
                        if content.trim().is_empty() {
                            Err(LlmError::Empty)
                        } else {
                            Ok(content)
                        }
                    }
                }
            }
        };
        (result, None)
    }
}

/// The HTTP envelope of a completion. Exact types for what is read (`content` must be a
/// string: an array, object or null refuses the reply) and an `error` object refuses it even
/// beside `choices`. Unknown fields are allowed here, unlike in the model's own JSON:
/// providers add their own (`id`, `system_fingerprint`, `reasoning_content`, ...).
#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ApiUsage>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct ApiUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct Choice {
    message: ChatMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    content: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ItemKind;
    use serde_json::json;

    const TEXT: &str =
        "CuTe DSL is now the primary Python interface. Up to 1.6x over cuBLAS on FP4 GEMM.";

    fn candidate() -> Candidate {
        let mut c = kdigest_core::testkit::candidate(ItemKind::Release, TEXT, &[]);
        c.event.items[0].title = "CUTLASS 5.0.0".into();
        c.event.items[0].url = "https://github.com/NVIDIA/cutlass/releases/tag/v5.0.0".into();
        c
    }

    fn policy(language: &str) -> Policy {
        Policy {
            language: language.into(),
            allowed: Allowed::new(language, &Locale::builtin(language)),
        }
    }

    fn reply(summary: serde_json::Value, extra: Option<(&str, serde_json::Value)>) -> String {
        let mut r = json!({
            "summary": summary,
            "why_it_matters": "CuTe DSL 让 Python 内核作者少写样板代码。",
            "brief": "CUTLASS 5.0 发布",
            "watch": "关注 CuTe DSL 的采用。",
        });
        if let Some((k, v)) = extra {
            r[k] = v;
        }
        r.to_string()
    }

    fn reason(reply: &str, language: &str) -> &'static str {
        match validate(reply, &candidate(), 300, &policy(language)) {
            Ok(_) => "ok",
            Err(e) => e.reason(),
        }
    }

    #[test]
    fn the_reply_schema_is_exact() {
        let good =
            json!("CUTLASS 5.0 让 CuTe DSL 成为主要接口，FP4 GEMM 最高比 cuBLAS 快 1.6 倍。");
        assert_eq!(reason(&reply(good.clone(), None), "zh-CN"), "ok");
        for (bad, why) in [
            (reply(json!(["a", "b"]), None), "array"),
            (reply(json!({"text": "a"}), None), "object"),
            (reply(json!(42), None), "number"),
            (reply(json!(null), None), "null"),
            (
                reply(good.clone(), Some(("sources", json!("x")))),
                "unknown field",
            ),
            (
                json!({"summary": "CUTLASS 5.0 发布"}).to_string(),
                "missing fields",
            ),
            ("[\"CUTLASS 5.0 发布\"]".to_string(), "not an object"),
        ] {
            assert_eq!(reason(&bad, "zh-CN"), "schema", "{why}: {bad}");
        }
        assert_eq!(reason("{\"summary\": \"CUTLASS", "zh-CN"), "json");
    }

    #[test]
    fn the_guard_names_its_reason() {
        for (summary, language, why) in [
            ("CUTLASS 5.0 发布，详见 evil.com/cutlass。", "zh-CN", "link"),
            ("CUTLASS 5.0 与 FooBarNet 一同发布。", "zh-CN", "name"),
            (
                "CUTLASS 5.0 makes CuTe DSL the primary Python interface.",
                "zh-CN",
                "language",
            ),
            (
                "CUTLASS 5.0 делает CuTe DSL основным интерфейсом.",
                "zh-CN",
                "language",
            ),
        ] {
            assert_eq!(
                reason(&reply(json!(summary), None), language),
                why,
                "{summary}"
            );
        }
    }

    #[test]
    fn envelopes_of_the_wrong_shape_are_schema_errors() {
        let parse = |body: &str| match serde_json::from_str::<ChatResponse>(body) {
            Err(e) => Some(LlmError::parse("response body", &e).reason()),
            Ok(chat) if chat.error.is_some() => Some("schema"),
            Ok(_) => None,
        };
        let message = |content: &str| {
            format!(
                r#"{{"id": "x", "choices": [{{"index": 0, "message": {{"role": "assistant", "content": {content}}}, "finish_reason": "stop"}}]}}"#
            )
        };
        assert_eq!(parse(&message("\"{}\"")), None);
        for bad in [
            r#"{"error": {"message": "Invalid API key", "type": "invalid_request_error"}}"#
                .to_string(),
            r#"{"object": "chat.completion"}"#.to_string(),
            r#"{"choices": [], "error": {"message": "overloaded"}}"#.to_string(),
            message("[{\"type\": \"text\", \"text\": \"{}\"}]"),
            message("{\"text\": \"{}\"}"),
            message("null"),
        ] {
            assert_eq!(parse(&bad), Some("schema"), "{bad}");
        }
        assert_eq!(parse("<html>502</html>"), Some("json"));
    }
}
