//! Discord slash commands, received through the gateway (serenity's client; the default) or
//! through the HTTP interactions endpoint (`/discord/interactions` on the daemon's web server,
//! when `discord.public_key` is set: Ed25519 verification with serenity's Verifier, PING
//! answered with PONG). Either way each command is mapped onto the shared
//! [`Command`](crate::bot::Command) parser and handlers, and replies become interaction responses
//! (ephemeral text, or the digest embeds with follow-up messages when there are more).

use std::sync::Arc;

use chrono::Utc;
use serde_json::{Value, json};
use serenity::interactions_endpoint::Verifier;
use serenity::model::id::{ApplicationId, GuildId, WebhookId};

use crate::bot::handlers::{Cooldowns, Ctx, handle};
use crate::bot::{Reply, parse};
use crate::channels::discord::render::messages;
use crate::channels::discord::send::client;
use crate::config::{Config, DiscordConfig, Secret};
use crate::locale::Locale;
use crate::store::Store;
use crate::subscriber::Address;
use crate::text::truncate_chars;

pub const INTERACTIONS_PATH: &str = "/discord/interactions";
/// Permission bit that lets a member change the channel's subscription.
const MANAGE_CHANNELS: u64 = 1 << 4;
const EPHEMERAL: u64 = 1 << 6;
const CONTENT_MAX: usize = 2000;

/// The slash commands, with typed options so Discord's own UI validates them, and
/// descriptions in English with Chinese localisations.
pub fn command_definitions(layers: &[&str]) -> Value {
    let en = Locale::builtin("en");
    let zh = Locale::builtin("zh-CN");
    let mut layer_choices: Vec<Value> = layers
        .iter()
        .map(|l| json!({"name": l, "value": l}))
        .collect();
    layer_choices.push(json!({"name": "all", "value": "all"}));
    // Discord allows 25 choices; with more layers the option is free text (still validated).
    let layer = |required: bool| {
        let mut option = json!({"type": 3, "name": "layer", "description": "Compiler-stack layer", "required": required});
        if layer_choices.len() <= 25 {
            option["choices"] = Value::Array(layer_choices.clone());
        }
        option
    };
    let week_days: Vec<Value> = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        .iter()
        .map(|d| json!({"name": d, "value": d}))
        .collect();
    let score = |name: &str| json!({"type": 4, "name": name, "description": "0-100", "min_value": 0, "max_value": 100});
    let command = |name: &str, key: &str, options: Vec<Value>| {
        json!({
            "name": name,
            "type": 1,
            "description": truncate_chars(en.get(key), 100),
            "description_localizations": {"zh-CN": truncate_chars(zh.get(key), 100)},
            "options": options,
        })
    };
    json!([
        command("help", "cmd_help", vec![]),
        command(
            "subscribe",
            "cmd_subscribe",
            vec![layer(false), score("min_score")]
        ),
        command("unsubscribe", "cmd_unsubscribe", vec![]),
        command("layers", "cmd_layers", vec![layer(false)]),
        command("threshold", "cmd_threshold", vec![score("value")]),
        command("settings", "cmd_settings", vec![]),
        command(
            "lang",
            "cmd_lang",
            vec![
                json!({"type": 3, "name": "language", "description": "zh or en", "choices": [{"name": "中文", "value": "zh"}, {"name": "English", "value": "en"}]})
            ]
        ),
        command(
            "digest",
            "cmd_digest",
            vec![
                json!({"type": 3, "name": "date", "description": "today, yesterday, latest or YYYY-MM-DD"}),
                layer(false)
            ]
        ),
        command(
            "why",
            "cmd_why",
            vec![
                json!({"type": 4, "name": "n", "description": "Event number", "min_value": 1, "required": true}),
                json!({"type": 3, "name": "date", "description": "today, yesterday, latest or YYYY-MM-DD (default: the latest digest)"})
            ]
        ),
        command(
            "time",
            "cmd_time",
            vec![
                json!({"type": 3, "name": "at", "description": "HH:MM, or off"}),
                json!({"type": 3, "name": "zone", "description": "IANA time zone, e.g. Europe/Berlin"})
            ]
        ),
        command(
            "cadence",
            "cmd_cadence",
            vec![
                json!({"type": 3, "name": "cadence", "description": "daily, weekly or both", "choices": [{"name": "daily", "value": "daily"}, {"name": "weekly", "value": "weekly"}, {"name": "both", "value": "both"}]}),
                json!({"type": 3, "name": "day", "description": "The weekly roll-up's day (default: Monday)", "choices": week_days})
            ]
        ),
        command(
            "boost",
            "cmd_boost",
            vec![
                json!({"type": 3, "name": "value", "description": "on or off", "choices": [{"name": "on", "value": "on"}, {"name": "off", "value": "off"}]})
            ]
        ),
        command(
            "follow",
            "cmd_follow",
            vec![
                json!({"type": 3, "name": "phrase", "description": "A project or phrase, e.g. triton or FlashAttention (none: show)", "max_length": crate::following::MAX_CHARS})
            ]
        ),
        command(
            "unfollow",
            "cmd_unfollow",
            vec![
                json!({"type": 3, "name": "phrase", "description": "A phrase you follow", "required": true, "max_length": crate::following::MAX_CHARS})
            ]
        ),
    ])
}

/// The text form of a slash command (`/subscribe runtime 70`), so Discord and Telegram share
/// one parser. None for anything that is not an application command.
pub fn command_text(interaction: &Value) -> Option<String> {
    if interaction["type"] != 2 {
        return None;
    }
    let data = &interaction["data"];
    let name = data["name"].as_str()?;
    let mut text = format!("/{name}");
    // Options in the order the text form takes them, whatever order they arrive in.
    let order: &[&str] = if name == "why" {
        &["n", "date"]
    } else if name == "time" {
        &["at", "zone"]
    } else if name == "cadence" {
        &["cadence", "day"]
    } else if name == "follow" || name == "unfollow" {
        &["phrase"]
    } else {
        &["date", "layer", "min_score", "value", "language", "n"]
    };
    let options = data["options"].as_array().cloned().unwrap_or_default();
    for key in order {
        if let Some(o) = options.iter().find(|o| o["name"] == *key) {
            match &o["value"] {
                // Layers typed with spaces are a list; a followed phrase keeps its words.
                Value::String(s) => text.push_str(&format!(
                    " {}",
                    s.split_whitespace()
                        .collect::<Vec<_>>()
                        .join(if *key == "phrase" { " " } else { "," })
                )),
                Value::Number(n) => text.push_str(&format!(" {n}")),
                _ => {}
            }
        }
    }
    Some(text)
}

/// A member with Manage Channels (or any user in a DM) may change the subscription.
pub fn can_manage(interaction: &Value) -> bool {
    match interaction["member"]["permissions"].as_str() {
        Some(bits) => bits.parse::<u64>().is_ok_and(|p| p & MANAGE_CHANNELS != 0),
        None => interaction["guild_id"].is_null(),
    }
}

/// What the bot needs in a channel to post a digest there.
const NEEDED: &[(u64, &str)] = &[
    (1 << 10, "View Channel"),
    (1 << 11, "Send Messages"),
    (1 << 14, "Embed Links"),
];

/// The permissions among [`NEEDED`] that the interaction's `app_permissions` (the bot's
/// permissions in the channel) lacks; none when Discord does not send the field.
pub fn missing_permissions(interaction: &Value) -> Vec<&'static str> {
    let Some(bits) = interaction["app_permissions"]
        .as_str()
        .and_then(|b| b.parse::<u64>().ok())
    else {
        return Vec::new();
    };
    // Administrator (1 << 3) implies every permission.
    if bits & (1 << 3) != 0 {
        return Vec::new();
    }
    NEEDED
        .iter()
        .filter(|(bit, _)| bits & bit == 0)
        .map(|(_, name)| *name)
        .collect()
}

pub struct DiscordBot {
    store: Store,
    config: Arc<Config>,
    cooldowns: Cooldowns,
    /// Only for the HTTP endpoint; the gateway needs no signature check.
    verifier: Option<Verifier>,
    /// Client for follow-up messages (interaction webhooks need no bot token).
    followups: Arc<serenity::http::Http>,
}

impl DiscordBot {
    pub fn new(store: Store, config: Arc<Config>) -> DiscordBot {
        let verifier = config
            .channels
            .discord
            .public_key
            .as_deref()
            .map(Verifier::new);
        let followups = Arc::new(client(&config.channels.discord, ""));
        let cooldowns = Cooldowns::new(config.daemon.digest_cooldown);
        DiscordBot {
            store,
            config,
            cooldowns,
            verifier,
            followups,
        }
    }

    /// Checks `X-Signature-Ed25519` over timestamp + body.
    /// Also refuses timestamps more than five minutes away, so a captured request cannot be
    /// replayed later.
    pub fn verify(&self, signature: &str, timestamp: &str, body: &[u8]) -> bool {
        let fresh = timestamp
            .parse::<i64>()
            .is_ok_and(|t| (Utc::now().timestamp() - t).abs() <= 300);
        fresh
            && self
                .verifier
                .as_ref()
                .is_some_and(|v| v.verify(signature, timestamp, body).is_ok())
    }

    /// True the first time this discord update reaches any instance.
    pub async fn first_handling(&self, id: &str) -> bool {
        crate::bot::first_handling(&self.store, "discord", id).await
    }

    /// The interaction response for one verified interaction.
    pub async fn respond(&self, interaction: &Value) -> anyhow::Result<Value> {
        if interaction["type"] == 1 {
            return Ok(json!({"type": 1}));
        }
        if interaction["type"] == 3 {
            return self.vote(interaction).await;
        }
        let Some(text) = command_text(interaction) else {
            return Ok(ephemeral("This interaction is not supported"));
        };
        let Some(channel) = interaction["channel_id"]
            .as_str()
            .and_then(|c| c.parse::<u64>().ok())
        else {
            return Ok(ephemeral("This command works in a channel"));
        };
        let address = Address::Discord(crate::channels::discord::Target::Channel(channel));
        let layers = self.config.layer_names();
        let command = match parse(&text, None, &layers) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(ephemeral("This interaction is not supported")),
            Err(bad) => {
                let language = crate::bot::handlers::chat_language(
                    &self.store,
                    &self.config,
                    &address,
                    client_language(interaction).as_deref(),
                )
                .await?;
                return Ok(ephemeral(
                    &bad.message(&Locale::builtin(&language), &layers),
                ));
            }
        };
        let ctx = Ctx {
            store: &self.store,
            config: &self.config,
            address,
            can_manage: can_manage(interaction),
            is_owner: false,
            now: Utc::now(),
            client_language: client_language(interaction),
            cooldowns: &self.cooldowns,
            runs: None,
            missing_permissions: missing_permissions(interaction),
        };
        Ok(match handle(command, &ctx).await? {
            Reply::Text(text) | Reply::Layers { text, .. } => ephemeral(&text),
            Reply::Digest { note, digest } => {
                let t = crate::templates::locale(
                    &digest.language,
                    self.config.digest.templates_dir.as_deref(),
                )?;
                let mut payloads = messages(&digest, &t).into_iter();
                let mut first = payloads
                    .next()
                    .unwrap_or_else(|| json!({"allowed_mentions": {"parse": []}}));
                if let Some(note) = note {
                    first["content"] = Value::String(truncate_chars(&note, CONTENT_MAX));
                }
                self.send_followups(interaction, payloads.collect());
                json!({"type": 4, "data": first})
            }
        })
    }

    /// A 👍/👎 button under a digest (a message component): the member who pressed is the
    /// reader; the answer, only to them, has the event's votes.
    async fn vote(&self, interaction: &Value) -> anyhow::Result<Value> {
        let Some((vote, event)) = interaction["data"]["custom_id"]
            .as_str()
            .and_then(crate::feedback::parse_button)
        else {
            return Ok(ephemeral("This interaction is not supported"));
        };
        let user = interaction["member"]["user"]["id"]
            .as_str()
            .or_else(|| interaction["user"]["id"].as_str());
        let (Some(user), Some(channel)) = (
            user,
            interaction["channel_id"]
                .as_str()
                .and_then(|c| c.parse::<u64>().ok()),
        ) else {
            return Ok(ephemeral("This interaction is not supported"));
        };
        let ctx = Ctx {
            store: &self.store,
            config: &self.config,
            address: Address::Discord(crate::channels::discord::Target::Channel(channel)),
            can_manage: false,
            is_owner: false,
            now: Utc::now(),
            client_language: client_language(interaction),
            cooldowns: &self.cooldowns,
            runs: None,
            missing_permissions: Vec::new(),
        };
        let text =
            crate::bot::handlers::vote(&ctx, &format!("discord:{user}"), vote, event).await?;
        Ok(ephemeral(&text))
    }

    /// The rest of a long digest, as follow-up messages on the interaction's webhook. They
    /// wait a moment: a follow-up sent before Discord has the first response is refused.
    fn send_followups(&self, interaction: &Value, rest: Vec<Value>) {
        let (Some(app), Some(token)) = (
            interaction["application_id"]
                .as_str()
                .and_then(|a| a.parse::<u64>().ok()),
            interaction["token"].as_str().map(str::to_string),
        ) else {
            return;
        };
        if rest.is_empty() || app == 0 {
            return;
        }
        let http = self.followups.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            for payload in rest {
                if let Err(error) = http
                    .execute_webhook(
                        WebhookId::new(app),
                        None,
                        &token,
                        false,
                        Vec::new(),
                        &payload,
                    )
                    .await
                {
                    tracing::warn!(message = "Discord follow-up message failed", error = %crate::channels::discord::send::classify(error));
                    return;
                }
            }
        });
    }
}

fn ephemeral(text: &str) -> Value {
    json!({
        "type": 4,
        "data": {"content": truncate_chars(text, CONTENT_MAX), "flags": EPHEMERAL, "allowed_mentions": {"parse": []}}
    })
}

/// Registers the slash commands (per guild when `discord.guild_id` is set: instant; else
/// globally). Needs the bot token and the application id.
pub async fn register_commands(config: &Config) -> anyhow::Result<()> {
    let discord: &DiscordConfig = &config.channels.discord;
    let token = Secret::from_env(&discord.token_env, "the Discord bot token")?;
    let http = client(discord, token.expose());
    let application = match discord.application_id {
        Some(id) => id,
        None => http.get_current_application_info().await?.id.get(),
    };
    http.set_application_id(ApplicationId::new(application));
    let definitions = command_definitions(&config.layer_names());
    match discord.guild_id {
        Some(guild) => {
            http.create_guild_commands(GuildId::new(guild), &definitions)
                .await?
        }
        None => http.create_global_commands(&definitions).await?,
    };
    Ok(())
}

/// Gateway mode: interaction events from serenity's client, answered with the same
/// [`DiscordBot::respond`] as the HTTP endpoint. The interaction is turned back into its JSON
/// form so both paths share one mapping.
struct GatewayHandler {
    bot: Arc<DiscordBot>,
    /// Told of each change of the session: `Ok(())` when it is ready (the daemon marks the
    /// link up), `Err(reason)` when serenity is (re)connecting on its own.
    on_session: SessionCallback,
}

/// See [`GatewayHandler::on_session`].
pub type SessionCallback = Box<dyn Fn(Result<(), String>) + Send + Sync>;

#[serenity::async_trait]
impl serenity::client::EventHandler for GatewayHandler {
    async fn ready(
        &self,
        _ctx: serenity::client::Context,
        _ready: serenity::model::gateway::Ready,
    ) {
        tracing::info!(message = "Discord gateway session ready");
        (self.on_session)(Ok(()));
    }

    async fn resume(
        &self,
        _ctx: serenity::client::Context,
        _event: serenity::model::event::ResumedEvent,
    ) {
        (self.on_session)(Ok(()));
    }

    async fn shard_stage_update(
        &self,
        _ctx: serenity::client::Context,
        event: serenity::gateway::ShardStageUpdateEvent,
    ) {
        use serenity::gateway::ConnectionStage;
        if event.new != ConnectionStage::Connected {
            (self.on_session)(Err(format!("session {:?}", event.new).to_lowercase()));
        }
    }

    async fn interaction_create(
        &self,
        ctx: serenity::client::Context,
        interaction: serenity::model::application::Interaction,
    ) {
        use serenity::model::application::Interaction;
        let (id, token) = match &interaction {
            Interaction::Command(c) => (c.id, c.token.clone()),
            Interaction::Component(c) => (c.id, c.token.clone()),
            _ => return,
        };
        let Some(value) = gateway_json(&interaction) else {
            tracing::warn!(message = "Cannot read a Discord interaction");
            return;
        };
        let response = match self.bot.respond(&value).await {
            Ok(r) => r,
            Err(error) => {
                tracing::warn!(message = "Discord command failed", error = %format!("{error:#}"));
                ephemeral("Something went wrong; try again later")
            }
        };
        if let Err(error) = ctx
            .http
            .create_interaction_response(id, &token, &response, Vec::new())
            .await
        {
            tracing::warn!(message = "Cannot answer a Discord interaction", error = %crate::channels::discord::send::classify(error));
        }
    }
}

/// The JSON form of a gateway command or component interaction (a vote button), as the
/// HTTP endpoint receives it. serenity leaves out the top-level `type` when it serialises
/// the model, so it is put back.
pub fn gateway_json(interaction: &serenity::model::application::Interaction) -> Option<Value> {
    use serenity::model::application::Interaction;
    let kind = match interaction {
        Interaction::Command(_) => 2,
        Interaction::Component(_) => 3,
        _ => return None,
    };
    let mut value = serde_json::to_value(interaction).ok()?;
    value["type"] = json!(kind);
    Some(value)
}

/// Connects to the gateway (no privileged intents: slash commands need none) until shutdown;
/// `on_ready` is called each time a session is ready. The gateway's address is asked of
/// `discord.api_url` when set (tests), as for every other call.
pub async fn run_gateway(
    config: Arc<Config>,
    store: Store,
    on_session: SessionCallback,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let token = Secret::from_env(&config.channels.discord.token_env, "the Discord bot token")?;
    let http = client(&config.channels.discord, token.expose());
    // Asked here, not left to serenity: when the API cannot be reached, serenity falls back
    // to the default gateway address and retries every 5 s without end or error, which the
    // daemon could neither back off from nor name in /healthz.
    let gateway = http.get_bot_gateway().await.map_err(|e| {
        anyhow::anyhow!(
            "cannot get the gateway address: {}",
            crate::channels::discord::send::classify(e)
        )
    })?;
    on_session(Err(format!("connecting to {}", gateway.url)));
    let bot = Arc::new(DiscordBot::new(store, config));
    let mut client = serenity::client::ClientBuilder::new_with_http(
        http,
        serenity::model::gateway::GatewayIntents::empty(),
    )
    .event_handler(GatewayHandler { bot, on_session })
    .await?;
    let shards = client.shard_manager.clone();
    tokio::spawn(async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
        shards.shutdown_all().await;
    });
    client.start().await.map_err(|e| {
        anyhow::anyhow!(
            "Discord gateway stopped: {}",
            crate::channels::discord::send::classify(e)
        )
    })
}

/// The invoking user's client language (`locale`, e.g. "en-US"), else the server's
/// (`guild_locale`), when kdigest has it.
fn client_language(interaction: &Value) -> Option<String> {
    crate::bot::handlers::client_language(
        interaction["locale"]
            .as_str()
            .or(interaction["guild_locale"].as_str()),
    )
}
