//! The `[discord]` section: what the file says (`RawDiscord`, with defaults) and the validated
//! form the rest of the program uses.

use serde::Deserialize;

use kdigest_core::settings::read::{env_var_name, http_url};

#[derive(Debug, Clone)]
pub struct DiscordConfig {
    /// Another API server (tests); None means Discord itself, with serenity's rate limiter.
    pub api_url: Option<url::Url>,
    /// Name of the environment variable holding the bot token.
    pub token_env: String,
    pub application_id: Option<u64>,
    /// Register slash commands in this guild only (instant, for testing) instead of globally.
    pub guild_id: Option<u64>,
    /// The application's Ed25519 public key (hex): enables `/discord/interactions`.
    pub public_key: Option<String>,
    pub register_commands: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDiscord {
    pub api_url: Option<String>,
    pub token_env: String,
    pub application_id: Option<u64>,
    pub guild_id: Option<u64>,
    pub public_key: Option<String>,
    pub register_commands: bool,
}

impl Default for RawDiscord {
    fn default() -> Self {
        RawDiscord {
            api_url: None,
            token_env: "KDIGEST_DISCORD_TOKEN".into(),
            application_id: None,
            guild_id: None,
            public_key: None,
            register_commands: true,
        }
    }
}

pub(crate) fn validate(raw: RawDiscord, problems: &mut Vec<String>) -> DiscordConfig {
    let api_url = raw.api_url.as_deref().and_then(|u| {
        let url = http_url(u);
        if url.is_none() {
            problems.push(format!(
                "discord.api_url: \"{u}\" is not an http(s) URL; leave it out to talk to Discord"
            ));
        }
        url
    });
    env_var_name("discord.token_env", &raw.token_env, "token", problems);
    let public_key = raw.public_key.filter(|k| {
        let ok = k.len() == 64 && k.chars().all(|c| c.is_ascii_hexdigit());
        if !ok {
            problems.push(format!(
                "discord.public_key: \"{k}\" is not an Ed25519 public key; copy the 64 hex characters from the Developer Portal"
            ));
        }
        ok
    });
    DiscordConfig {
        api_url,
        token_env: raw.token_env,
        application_id: raw.application_id,
        guild_id: raw.guild_id,
        public_key,
        register_commands: raw.register_commands,
    }
}
