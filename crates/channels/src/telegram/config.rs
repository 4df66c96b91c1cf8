//! The `[telegram]` section: what the file says (`RawTelegram`, with defaults) and the validated
//! form the rest of the program uses.

use serde::Deserialize;

use kdigest_core::settings::read::{env_var_name, http_url};

#[derive(Debug, Clone)]
pub struct TelegramConfig {
    /// The Bot API base URL; tests point it at a loopback mock.
    pub api_url: url::Url,
    /// Name of the environment variable holding the bot token.
    pub token_env: String,
    /// Run the command bot (long polling) inside `kdigest run`.
    pub bot: bool,
    /// Telegram user ids allowed /status and /run.
    pub admins: Vec<i64>,
    pub poll_timeout_secs: u32,
    /// Messages per minute to one group (Telegram allows about 20).
    pub group_per_minute: f64,
    /// Public base URL for webhook mode; None means long polling.
    pub webhook_url: Option<url::Url>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTelegram {
    pub api_url: String,
    pub token_env: String,
    pub bot: bool,
    pub admins: Vec<i64>,
    pub poll_timeout_secs: u32,
    /// Read by the application as `daemon.digest_cooldown_secs`'s old key (the cooldown
    /// applies to every bot); accepted here so a file that has it is not refused.
    pub digest_cooldown_secs: Option<u64>,
    pub group_per_minute: f64,
    /// Public base URL of this kdigest; set it to receive updates by webhook instead of polling.
    pub webhook_url: Option<String>,
}

impl Default for RawTelegram {
    fn default() -> Self {
        RawTelegram {
            api_url: "https://api.telegram.org".into(),
            token_env: "KDIGEST_TELEGRAM_TOKEN".into(),
            bot: true,
            admins: Vec::new(),
            poll_timeout_secs: 10,
            digest_cooldown_secs: None,
            group_per_minute: 20.0,
            webhook_url: None,
        }
    }
}

pub(crate) fn validate(raw: RawTelegram, problems: &mut Vec<String>) -> TelegramConfig {
    let api_url = http_url(&raw.api_url).unwrap_or_else(|| {
        problems.push(format!(
            "telegram.api_url: \"{}\" is not an http(s) URL; the default is https://api.telegram.org",
            raw.api_url
        ));
        url::Url::parse("https://api.telegram.org").expect("static URL")
    });
    env_var_name("telegram.token_env", &raw.token_env, "token", problems);
    // teloxide's client gives up after 17 s, so a long poll must end before that.
    if !(1..=15).contains(&raw.poll_timeout_secs) {
        problems.push(format!(
            "telegram.poll_timeout_secs: {} is out of range; use 1 to 15 (the HTTP client times out at 17 s)",
            raw.poll_timeout_secs
        ));
    }
    if !(raw.group_per_minute.is_finite() && raw.group_per_minute > 0.0) {
        problems.push(format!(
            "telegram.group_per_minute: {} must be a positive number",
            raw.group_per_minute
        ));
    }
    let webhook_url = raw.webhook_url.as_deref().and_then(|raw_url| match url::Url::parse(raw_url) {
        Ok(u) if u.scheme() == "https" || u.host_str() == Some("127.0.0.1") => Some(u),
        _ => {
            problems.push(format!(
                "telegram.webhook_url: \"{raw_url}\" is not an https URL; Telegram only calls https webhooks (leave it out to use long polling)"
            ));
            None
        }
    });
    TelegramConfig {
        webhook_url,
        api_url,
        token_env: raw.token_env,
        bot: raw.bot,
        admins: raw.admins,
        poll_timeout_secs: raw.poll_timeout_secs.clamp(1, 15),
        group_per_minute: raw.group_per_minute.max(0.001),
    }
}
