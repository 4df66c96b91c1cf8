//! The bots' long-running parts the daemon starts: Telegram (webhook or long polling, with
//! retries) and the Discord gateway (reconnected with backoff).

#[cfg(feature = "discord")]
use std::sync::Arc;

use chrono::Utc;
use tokio::sync::watch;

use super::*;
#[cfg(feature = "discord")]
use crate::config::Secret;

/// Sets up the Telegram bot (getMe, the command menu, and setWebhook when `webhook` is
/// given), retrying with backoff until it works: without DNS or with Telegram down, the rest
/// of the daemon runs and `/healthz` names the bot meanwhile. False when stopped first.
#[cfg(feature = "telegram")]
pub(super) async fn set_up_telegram(
    bot: &crate::bot::telegram::TelegramBot,
    webhook: Option<&url::Url>,
    engine: &Engine,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    const LINK: &str = "telegram bot";
    let mut backoff = Backoff::default();
    loop {
        let ready = async {
            bot.init().await?;
            match webhook {
                Some(url) => bot.use_webhook(url).await,
                None => Ok(()),
            }
        };
        match ready.await {
            Ok(()) => {
                engine.health().link_up(LINK);
                if let Some(url) = webhook {
                    tracing::info!(message = "Telegram bot receiving commands by webhook", url = %url);
                }
                return true;
            }
            Err(error) => {
                let wait = backoff.next();
                let error = crate::channels::telegram::redact_token(&format!("{error:#}"));
                tracing::error!(message = "Telegram bot cannot start; retrying", wait_secs = wait.as_secs(), %error);
                engine.health().link_down(
                    LINK,
                    &format!("not set up (retrying with backoff): {error}"),
                    Utc::now(),
                );
                if !sleep_unless_stopped(wait, stop).await {
                    return false;
                }
            }
        }
    }
}

/// Keeps the Discord gateway connected until stopped: each failure (no DNS, Discord down,
/// a session that ends) is retried with backoff, and `/healthz` names the gateway until a
/// session is ready again.
#[cfg(feature = "discord")]
pub(super) async fn keep_discord_gateway(
    config: Arc<Config>,
    store: Store,
    engine: Arc<Engine>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    const LINK: &str = "discord gateway";
    let mut backoff = Backoff::default();
    while !*stop.borrow() {
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on_session = {
            let (engine, ready) = (engine.clone(), ready.clone());
            Box::new(move |session: Result<(), String>| match session {
                Ok(()) => {
                    ready.store(true, std::sync::atomic::Ordering::Relaxed);
                    engine.health().link_up(LINK);
                }
                // serenity reconnects on its own from here (every 5 s).
                Err(reason) => engine.health().link_down(
                    LINK,
                    &format!("not connected (retrying): {reason}"),
                    Utc::now(),
                ),
            })
        };
        let ended = crate::bot::discord::run_gateway(
            config.clone(),
            store.clone(),
            on_session,
            stop.clone(),
        )
        .await;
        if *stop.borrow() {
            break;
        }
        if ready.load(std::sync::atomic::Ordering::Relaxed) {
            // A session that worked: the next failure starts the backoff over.
            backoff = Backoff::default();
        }
        let wait = backoff.next();
        let error = match ended {
            Ok(()) => "the session ended".to_string(),
            Err(error) => format!("{error:#}"),
        };
        tracing::error!(message = "Discord gateway not connected; retrying", wait_secs = wait.as_secs(), %error);
        engine.health().link_down(
            LINK,
            &format!("not connected (retrying with backoff): {error}"),
            Utc::now(),
        );
        if !sleep_unless_stopped(wait, &mut stop).await {
            break;
        }
    }
    Ok(())
}

/// Telegram long polling on the scheduler, when the bot is on and no webhook is set: set
/// up first (retried with backoff, named by /healthz), then polling until stopped.
#[cfg(feature = "telegram")]
pub(super) fn start_telegram_polling(
    instance: &Instance<'_>,
    runs: &crate::bot::handlers::RunTrigger,
    stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<anyhow::Result<()>>> {
    let engine = instance.engine;
    match instance.config.channels.telegram.webhook_url {
        None => instance.telegram_bot(runs.clone()).map(|telegram| {
            let (engine, mut stop) = (engine.clone(), stop.clone());
            tokio::spawn(async move {
                if !set_up_telegram(&telegram, None, &engine, &mut stop).await {
                    return Ok(());
                }
                tracing::info!(message = "Telegram bot polling for commands");
                telegram.poll(stop).await
            })
        }),
        Some(_) => None,
    }
}

#[cfg(not(feature = "telegram"))]
pub(super) fn start_telegram_polling(
    _instance: &Instance<'_>,
    _runs: &crate::bot::handlers::RunTrigger,
    _stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<anyhow::Result<()>>> {
    None
}

/// The Discord gateway on the scheduler, when a bot token is set and no interactions
/// endpoint (public key) is; and the slash commands registered in the background (a slow
/// Discord must not hold up the scheduler).
#[cfg(feature = "discord")]
pub(super) fn start_discord(
    instance: &Instance<'_>,
    stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<anyhow::Result<()>>> {
    let Instance {
        config,
        store,
        engine,
        ..
    } = *instance;
    let discord_token = Secret::from_env(&config.channels.discord.token_env, "").is_ok();
    let gateway = (config.channels.discord.public_key.is_none() && discord_token).then(|| {
        tracing::info!(message = "Discord bot connecting to the gateway");
        let (config, store, engine, stop) = (
            Arc::new(config.clone()),
            store.clone(),
            engine.clone(),
            stop.clone(),
        );
        tokio::spawn(keep_discord_gateway(config, store, engine, stop))
    });
    if config.channels.discord.register_commands && discord_token {
        // In the background: a slow Discord must not hold up the scheduler.
        let (config, engine, mut stop) = (config.clone(), engine.clone(), stop.clone());
        tokio::spawn(async move {
            const LINK: &str = "discord commands";
            let mut backoff = Backoff::default();
            loop {
                match crate::bot::discord::register_commands(&config).await {
                    Ok(()) => return engine.health().link_up(LINK),
                    Err(error) => {
                        let wait = backoff.next();
                        tracing::error!(message = "Cannot register the Discord slash commands; retrying", wait_secs = wait.as_secs(), error = %format!("{error:#}"));
                        engine.health().link_down(
                            LINK,
                            &format!(
                                "slash commands not registered (retrying with backoff): {error:#}"
                            ),
                            Utc::now(),
                        );
                        if !sleep_unless_stopped(wait, &mut stop).await {
                            return;
                        }
                    }
                }
            }
        });
    }
    gateway
}

#[cfg(not(feature = "discord"))]
pub(super) fn start_discord(
    _instance: &Instance<'_>,
    _stop: &watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<anyhow::Result<()>>> {
    None
}
