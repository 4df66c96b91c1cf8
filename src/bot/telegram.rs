//! The Telegram side of the bot: long polling (getUpdates), command registration in zh and
//! en (setMyCommands), permission checks (getChatMember), rendering [`Reply`] as Telegram
//! messages, and the inline layer keyboard (callback queries).

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::Utc;
use teloxide::payloads::{
    EditMessageReplyMarkupSetters, GetUpdatesSetters, SendMessageSetters, SetMyCommandsSetters,
    SetWebhookSetters,
};
use teloxide::prelude::*;
use teloxide::types::{
    AllowedUpdate, BotCommand, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup,
    ParseMode, UpdateKind,
};
use tokio::sync::watch;

use crate::bot::handlers::{Cooldowns, Ctx, RunTrigger, handle, toggle_layer};
use crate::bot::{MENU, Reply, parse};
use crate::channels::telegram::send::{no_preview, redact_token};
use crate::config::Config;
use crate::locale::Locale;
use crate::store::Store;
use crate::subscriber::Address;

/// Where the web server receives webhook updates.
pub const WEBHOOK_PATH: &str = "/telegram/webhook";

/// Callback data of the layer keyboard: `layer:<name>`, or `layer:*` for all layers.
const LAYER_PREFIX: &str = "layer:";
const ALL_LAYERS: &str = "*";

pub struct TelegramBot {
    bot: Bot,
    store: Store,
    config: Arc<Config>,
    cooldowns: Cooldowns,
    /// Renderers per language, built once rather than for every /digest.
    renders: crate::deliver::RenderCache,
    runs: Option<RunTrigger>,
    /// Learned by `init` (getMe); set once, so a bot shared with the web routes can learn
    /// it after they start.
    username: std::sync::OnceLock<String>,
    /// Telegram's limits (30/s, one message per second per chat, slower in groups). The
    /// daemon shares the delivery engine's, so replies and digest deliveries to one chat
    /// are spaced together.
    limits: Arc<crate::deliver::limits::Limits>,
}

impl TelegramBot {
    pub fn new(
        bot: Bot,
        store: Store,
        config: Arc<Config>,
        runs: Option<RunTrigger>,
    ) -> TelegramBot {
        let cooldowns = Cooldowns::new(config.daemon.digest_cooldown);
        let renders = crate::deliver::RenderCache::new(config.digest.templates_dir.clone());
        let limits = Arc::new(crate::deliver::limits::Limits::new(
            &config.delivery.limits(crate::subscriber::Channel::Telegram),
            Some(config.channels.telegram.group_per_minute),
        ));
        TelegramBot {
            bot,
            store,
            config,
            cooldowns,
            renders,
            runs,
            username: std::sync::OnceLock::new(),
            limits,
        }
    }

    /// Uses these limits instead of its own (the delivery engine's, in the daemon).
    pub fn share_limits(&mut self, limits: Arc<crate::deliver::limits::Limits>) {
        self.limits = limits;
    }

    /// Waits until this chat may get its next message, and takes the slot. A reply waits
    /// out a pause rather than being given back: someone is waiting for it.
    async fn pace(&self, chat: ChatId) {
        let key = crate::subscriber::Address::Telegram(chat.0).destination_key();
        while let Err(until) = self
            .limits
            .acquire(&key, chat.0 < 0, crate::deliver::limits::INTERACTIVE)
            .await
        {
            tokio::time::sleep_until(until).await;
        }
    }

    /// Registers the command menu in Chinese and, as the default, in English.
    pub async fn register_commands(&self) -> anyhow::Result<()> {
        for (language, code) in [("zh-CN", Some("zh")), ("en", None)] {
            let t = Locale::builtin(language);
            let commands: Vec<BotCommand> = MENU
                .iter()
                .map(|(name, key)| BotCommand::new(*name, t.get(key)))
                .collect();
            let mut request = self.bot.set_my_commands(commands);
            if let Some(code) = code {
                request = request.language_code(code);
            }
            request.await.map_err(|e| {
                anyhow::anyhow!("setMyCommands failed: {}", redact_token(&e.to_string()))
            })?;
        }
        Ok(())
    }

    /// Learns the bot's username (for `/cmd@name` in groups) and registers the menu.
    pub async fn init(&self) -> anyhow::Result<()> {
        let me = self
            .bot
            .get_me()
            .await
            .map_err(|e| anyhow::anyhow!("getMe failed: {}", redact_token(&e.to_string())))?;
        if let Some(name) = me.user.username.clone() {
            let _ = self.username.set(name);
        }
        if let Err(error) = self.register_commands().await {
            tracing::warn!(message = "Cannot register the command menu", %error);
        }
        Ok(())
    }

    /// The secret Telegram sends back in `X-Telegram-Bot-Api-Secret-Token` on webhook
    /// calls; derived from the token so there is no second secret to manage.
    pub fn webhook_secret(&self) -> String {
        use sha2::{Digest as _, Sha256};
        crate::parse::hex(
            &Sha256::digest(format!("kdigest-telegram-webhook/{}", self.bot.token()).as_bytes())
                [..16],
        )
    }

    /// Webhook mode: Telegram posts updates to `<public_url>/telegram/webhook`.
    pub async fn use_webhook(&self, public_url: &url::Url) -> anyhow::Result<()> {
        let url = public_url.join(WEBHOOK_PATH.trim_start_matches('/'))?;
        self.bot
            .set_webhook(url)
            .secret_token(self.webhook_secret())
            .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery])
            .await
            .map_err(|e| anyhow::anyhow!("setWebhook failed: {}", redact_token(&e.to_string())))?;
        Ok(())
    }

    /// Long polling until shutdown, after `init` has succeeded (the daemon retries it with
    /// backoff). Each update is handled on its own; one failing update is logged and skipped.
    pub async fn poll(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        // A webhook left from webhook mode would make getUpdates fail.
        if let Err(error) = self.bot.delete_webhook().await {
            tracing::warn!(message = "deleteWebhook failed", error = %redact_token(&error.to_string()));
        }
        let mut offset: i32 = 0;
        loop {
            let request = self
                .bot
                .get_updates()
                .offset(offset)
                .timeout(self.config.channels.telegram.poll_timeout_secs)
                .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
            let updates = tokio::select! {
                r = request.send() => r,
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            };
            match updates {
                Ok(updates) => {
                    for update in updates {
                        offset = offset.max(update.id.as_offset());
                        if let Err(error) = self.handle_update(update.kind).await {
                            tracing::warn!(message = "Telegram update failed", error = %redact_token(&format!("{error:#}")));
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(message = "getUpdates failed; retrying", error = %redact_token(&error.to_string()));
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
                        _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
                    }
                }
            }
        }
    }

    /// True the first time this telegram update reaches any instance.
    pub async fn first_handling(&self, id: &str) -> bool {
        crate::bot::first_handling(&self.store, "telegram", id).await
    }

    pub async fn handle_update(&self, kind: UpdateKind) -> anyhow::Result<()> {
        match kind {
            UpdateKind::Message(message) => self.handle_message(&message).await,
            UpdateKind::CallbackQuery(query) => self.handle_callback(&query).await,
            _ => Ok(()),
        }
    }

    async fn can_manage(
        &self,
        chat: &teloxide::types::Chat,
        user: Option<&teloxide::types::User>,
    ) -> anyhow::Result<bool> {
        if chat.is_private() {
            return Ok(true);
        }
        let Some(user) = user else { return Ok(false) };
        let member = self
            .bot
            .get_chat_member(chat.id, user.id)
            .await
            .map_err(|e| anyhow::anyhow!(redact_token(&e.to_string())))?;
        Ok(member.is_privileged())
    }

    fn addressed_to_me(&self, text: &str) -> bool {
        let head = text.split_whitespace().next().unwrap_or("");
        self.username.get().is_some_and(|me| {
            head.to_lowercase()
                .ends_with(&format!("@{}", me.to_lowercase()))
        })
    }

    fn is_owner(&self, user: Option<&teloxide::types::User>) -> bool {
        user.is_some_and(|u| {
            self.config
                .channels
                .telegram
                .admins
                .contains(&(u.id.0 as i64))
        })
    }

    async fn handle_message(&self, message: &Message) -> anyhow::Result<()> {
        let Some(text) = message.text() else {
            return Ok(());
        };
        let layers = self.config.layer_names();
        let command = match parse(text, self.username.get().map(String::as_str), &layers) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(()),
            // In groups an unknown /command may be meant for another bot: answer it only when
            // it names this bot.
            Err(bad)
                if bad.usage.is_none()
                    && !message.chat.is_private()
                    && !self.addressed_to_me(text) =>
            {
                return Ok(());
            }
            Err(bad) => {
                let address = Address::Telegram(message.chat.id.0);
                let language = crate::bot::handlers::chat_language(
                    &self.store,
                    &self.config,
                    &address,
                    client_language(message).as_deref(),
                )
                .await?;
                let t = Locale::builtin(&language);
                return self
                    .send_text(message.chat.id, &bad.message(&t, &layers))
                    .await;
            }
        };
        let user = message.from.as_ref();
        let needs_manage = matches!(
            command,
            crate::bot::Command::Subscribe { .. }
                | crate::bot::Command::Unsubscribe
                | crate::bot::Command::Layers(Some(_))
                | crate::bot::Command::Threshold(Some(_))
                | crate::bot::Command::Lang(Some(_))
        );
        // Only ask Telegram for membership when the command changes something.
        let can_manage = if needs_manage {
            self.can_manage(&message.chat, user).await?
        } else {
            message.chat.is_private()
        };
        let ctx = Ctx {
            store: &self.store,
            config: &self.config,
            address: Address::Telegram(message.chat.id.0),
            can_manage,
            is_owner: self.is_owner(user),
            now: Utc::now(),
            client_language: client_language(message),
            cooldowns: &self.cooldowns,
            runs: self.runs.as_ref(),
            missing_permissions: Vec::new(),
        };
        let reply = handle(command, &ctx).await?;
        self.send_reply(message.chat.id, reply).await
    }

    async fn handle_callback(&self, query: &CallbackQuery) -> anyhow::Result<()> {
        if let Some((vote, event)) = query
            .data
            .as_deref()
            .and_then(crate::feedback::parse_button)
        {
            return self.handle_vote(query, vote, event).await;
        }
        let Some(data) = query
            .data
            .as_deref()
            .and_then(|d| d.strip_prefix(LAYER_PREFIX))
        else {
            self.bot.answer_callback_query(query.id.clone()).await?;
            return Ok(());
        };
        let Some(message) = query.message.as_ref() else {
            return Ok(());
        };
        let chat = message.chat();
        let address = Address::Telegram(chat.id.0);
        let Some(mut subscriber) = self.store.subscriber_by_address(&address).await? else {
            self.bot.answer_callback_query(query.id.clone()).await?;
            return Ok(());
        };
        let t = Locale::builtin(&subscriber.language);
        if !self.can_manage(chat, Some(&query.from)).await? {
            self.bot
                .answer_callback_query(query.id.clone())
                .text(t.get("bot_admins_only"))
                .await?;
            return Ok(());
        }
        let layer = (data != ALL_LAYERS).then_some(data);
        if layer.is_some_and(|l| !self.config.layer_names().contains(&l)) {
            self.bot.answer_callback_query(query.id.clone()).await?;
            return Ok(());
        }
        subscriber.filter.layers = toggle_layer(&subscriber.filter.layers, layer);
        self.store
            .update_subscriber(&subscriber, Utc::now())
            .await?;
        self.bot.answer_callback_query(query.id.clone()).await?;
        self.bot
            .edit_message_reply_markup(chat.id, message.id())
            .reply_markup(keyboard(
                &subscriber.filter.layers,
                &self.config.layer_names(),
                &t,
            ))
            .await?;
        Ok(())
    }

    /// A 👍/👎 under a digest: the person who pressed is the reader (in a group every
    /// member has their own vote); the answer is a toast with the event's votes.
    async fn handle_vote(
        &self,
        query: &CallbackQuery,
        vote: crate::feedback::Vote,
        event: &str,
    ) -> anyhow::Result<()> {
        let Some(message) = query.message.as_ref() else {
            self.bot.answer_callback_query(query.id.clone()).await?;
            return Ok(());
        };
        let ctx = Ctx {
            store: &self.store,
            config: &self.config,
            address: Address::Telegram(message.chat().id.0),
            can_manage: false,
            is_owner: false,
            now: Utc::now(),
            client_language: crate::bot::handlers::client_language(
                query.from.language_code.as_deref(),
            ),
            cooldowns: &self.cooldowns,
            runs: None,
            missing_permissions: Vec::new(),
        };
        let reader = format!("telegram:{}", query.from.id.0);
        let answer = crate::bot::handlers::vote(&ctx, &reader, vote, event).await?;
        self.bot
            .answer_callback_query(query.id.clone())
            .text(answer)
            .await?;
        Ok(())
    }

    async fn send_text(&self, chat: ChatId, text: &str) -> anyhow::Result<()> {
        self.pace(chat).await;
        with_flood_wait(|| {
            self.bot
                .send_message(chat, text)
                .link_preview_options(no_preview())
                .into_future()
        })
        .await?;
        Ok(())
    }

    async fn send_reply(&self, chat: ChatId, reply: Reply) -> anyhow::Result<()> {
        match reply {
            Reply::Text(text) => self.send_text(chat, &text).await,
            Reply::Layers {
                text,
                selected,
                all,
                language,
            } => {
                let t = crate::templates::locale(
                    &language,
                    self.config.digest.templates_dir.as_deref(),
                )?;
                let names: Vec<&str> = all.iter().map(String::as_str).collect();
                // The keyboard is Telegram's; so is the hint about it.
                let text = format!("{text}\n{}", t.get("bot_layers_hint"));
                self.pace(chat).await;
                self.bot
                    .send_message(chat, text)
                    .link_preview_options(no_preview())
                    .reply_markup(keyboard(&selected, &names, &t))
                    .await
                    .map_err(|e| anyhow::anyhow!(redact_token(&e.to_string())))?;
                Ok(())
            }
            Reply::Digest { note, digest } => {
                if let Some(note) = note {
                    self.send_text(chat, &note).await?;
                }
                let renderer = self.renders.renderer(&digest.language)?;
                // A digest is several messages: spaced by Telegram's one message per second
                // per chat, and a flood-wait is waited out instead of dropping the rest.
                for message in
                    crate::channels::telegram::render::messages_with_votes(&renderer, &digest)?
                {
                    self.pace(chat).await;
                    let keyboard = crate::channels::telegram::send::vote_keyboard(&message.votes);
                    with_flood_wait(|| {
                        let mut request = self
                            .bot
                            .send_message(chat, message.html.clone())
                            .parse_mode(ParseMode::Html)
                            .link_preview_options(no_preview());
                        if let Some(k) = &keyboard {
                            request = request.reply_markup(k.clone());
                        }
                        request.into_future()
                    })
                    .await?;
                }
                Ok(())
            }
        }
    }
}

/// Flood-waits a reply waits out before it gives up.
const FLOOD_WAITS: u32 = 3;

/// Sends, waiting out "Too Many Requests: retry after N" up to [`FLOOD_WAITS`] times (each
/// wait at most a minute).
async fn with_flood_wait<T, F, Fut>(mut send: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, teloxide::RequestError>>,
{
    let mut waits = 0;
    loop {
        match send().await {
            Err(teloxide::RequestError::RetryAfter(secs)) if waits < FLOOD_WAITS => {
                waits += 1;
                let wait = secs.duration().min(std::time::Duration::from_secs(60));
                tracing::info!(
                    message = "Telegram asked to wait before the next reply message",
                    wait_secs = wait.as_secs()
                );
                tokio::time::sleep(wait).await;
            }
            Err(e) => return Err(anyhow::anyhow!(redact_token(&e.to_string()))),
            Ok(v) => return Ok(v),
        }
    }
}

/// One toggle button per layer (checked when selected), two to a row, and "all layers".
pub fn keyboard(selected: &BTreeSet<String>, layers: &[&str], t: &Locale) -> InlineKeyboardMarkup {
    let button = |l: &str| {
        let mark = if selected.contains(l) {
            "✅"
        } else {
            "▫️"
        };
        // The reader's name for the layer on the button, its id in the callback.
        InlineKeyboardButton::callback(
            format!("{mark} {}", t.layer(l)),
            format!("{LAYER_PREFIX}{l}"),
        )
    };
    let mut rows: Vec<Vec<InlineKeyboardButton>> = layers
        .chunks(2)
        .map(|pair| pair.iter().map(|l| button(l)).collect())
        .collect();
    let all_mark = if selected.is_empty() { "✅" } else { "▫️" };
    rows.push(vec![InlineKeyboardButton::callback(
        format!("{all_mark} {}", t.get("bot_all_layers")),
        format!("{LAYER_PREFIX}{ALL_LAYERS}"),
    )]);
    InlineKeyboardMarkup::new(rows)
}

/// The sender's app language (`from.language_code`), when kdigest has it.
fn client_language(message: &Message) -> Option<String> {
    crate::bot::handlers::client_language(
        message
            .from
            .as_ref()
            .and_then(|u| u.language_code.as_deref()),
    )
}
