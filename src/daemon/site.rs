//! The web role's start-up: the blog with its page-view flusher, sign-up (with the delivery
//! engine's mailer), and the bots' HTTP endpoints (the Telegram webhook, Discord
//! interactions), which work on every instance.

use std::sync::Arc;

use tokio::sync::watch;

use super::*;

/// What the web role runs besides the router.
pub(super) struct Site {
    pub(super) services: crate::web::Services,
    pub(super) blog: Arc<crate::web::blog::Blog>,
    pub(super) flusher: tokio::task::JoinHandle<()>,
}

impl Instance<'_> {
    /// The web role: the blog, sign-up and the bots' HTTP endpoints (the Telegram webhook,
    /// Discord interactions), which work on every instance.
    pub(super) async fn site(
        &self,
        runs: crate::bot::handlers::RunTrigger,
    ) -> anyhow::Result<Site> {
        let (config, store, engine) = (self.config, self.store, self.engine);
        #[cfg(feature = "telegram")]
        let telegram = match &config.channels.telegram.webhook_url {
            Some(url) => self.telegram_bot(runs).map(|t| (t, url.clone())),
            None => None,
        };
        // The webhook route serves at once; Telegram calls it only after setWebhook, which
        // is retried in the background: without DNS or with Telegram down, the site and the
        // other channels come up, and /healthz names the bot until it is set up.
        #[cfg(feature = "telegram")]
        let webhook_bot = telegram.map(|(telegram, url)| {
            let telegram = Arc::new(telegram);
            let (bot, engine) = (telegram.clone(), engine.clone());
            let mut never = watch::channel(false).1;
            tokio::spawn(
                async move { set_up_telegram(&bot, Some(&url), &engine, &mut never).await },
            );
            telegram
        });
        // Discord commands: the HTTP endpoint when a public key is set, else the gateway
        // (on the scheduler).
        #[cfg(feature = "discord")]
        let discord_bot = config.channels.discord.public_key.is_some().then(|| {
            Arc::new(crate::bot::discord::DiscordBot::new(
                store.clone(),
                Arc::new(config.clone()),
            ))
        });
        let account = match crate::tokens::secret_from_env()? {
            Some(secret) => {
                // The delivery engine's mailer (Engine::new logged why there is none).
                // Without it sign-up answers 503; unsubscribe links still work.
                let mailer = engine.mailer();
                if mailer.is_none() {
                    tracing::error!(message = "Email sign-up is off: there is no working mailer");
                }
                Some(Arc::new(crate::web::account::Account::new(
                    store.clone(),
                    config,
                    secret,
                    mailer,
                )?))
            }
            None => None,
        };
        let blog = Arc::new(crate::web::blog::Blog::new(
            store.clone(),
            Arc::new(config.clone()),
            account.as_ref().is_some_and(|a| a.accepts_signups()),
        )?);
        let flusher = {
            let blog = blog.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(crate::web::pages::FLUSH_EVERY);
                loop {
                    every.tick().await;
                    if let Err(error) = blog.flush_reads().await {
                        tracing::warn!(message = "Cannot store page views; they stay counted in memory", error = %format!("{error:#}"));
                    }
                }
            })
        };
        let services = crate::web::Services {
            bots: crate::bot::routes::Bots {
                #[cfg(feature = "telegram")]
                telegram: webhook_bot,
                #[cfg(feature = "discord")]
                discord: discord_bot,
            },
            account,
            blog: Some(blog.clone()),
            delivery: self.role.deliver().then(|| engine.clone()),
            mcp: match config.web.mcp {
                true => {
                    let token = crate::mcp::http::token_from_env(config)?;
                    tracing::info!(message = "MCP server at /mcp", token_variable = %config.web.mcp_token_env);
                    Some(crate::mcp::http::routes(
                        store.clone(),
                        Arc::new(config.clone()),
                        &token,
                    ))
                }
                false => None,
            },
        };
        Ok(Site {
            services,
            blog,
            flusher,
        })
    }

    /// The Telegram command bot, when a token is set and `telegram.bot` is on.
    #[cfg(feature = "telegram")]
    pub(super) fn telegram_bot(
        &self,
        runs: crate::bot::handlers::RunTrigger,
    ) -> Option<crate::bot::telegram::TelegramBot> {
        if !self.config.channels.telegram.bot {
            return None;
        }
        let Ok(bot) = crate::channels::telegram::api_bot(&self.config.channels.telegram) else {
            tracing::info!(message = "No Telegram token; the Telegram bot is off", variable = %self.config.channels.telegram.token_env);
            return None;
        };
        let mut telegram = crate::bot::telegram::TelegramBot::new(
            bot,
            self.store.clone(),
            Arc::new(self.config.clone()),
            Some(runs),
        );
        telegram.share_limits(self.engine.limits(crate::subscriber::Channel::Telegram));
        Some(telegram)
    }
}
