//! The reader's side of the newsletter, all plain HTML forms (no JavaScript):
//!
//! - `/subscribe`: email, layers, threshold, language. POST records a pending subscriber and
//!   sends a confirmation link (double opt-in). Limited per client IP and per address. The
//!   page answers the same whether or not the address was already subscribed; an address
//!   that already is gets a link to its preferences instead.
//! - `/confirm/{token}`: GET shows a button, POST confirms. Link scanners fetch GET links, so
//!   GET never changes anything. Tokens expire after 48 hours and act only on a pending
//!   subscriber, so they work once.
//! - `/unsubscribe/{token}`: GET shows a button, POST unsubscribes; the RFC 8058 one-click
//!   POST is the same POST: 200, no redirect, and 200 again when repeated.
//! - `/preferences/{token}`: change layers, threshold and language.
//!
//! Invalid, altered or expired tokens get 404 and change nothing. Pages are in the
//! subscriber's language (sign-up: `?lang=`, then Accept-Language, then the digest language).

pub(in crate::web) mod forms;
pub(in crate::web) mod manage;
pub(in crate::web) mod signup;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;

use crate::channels::Mailer;
use crate::config::{Config, LANGUAGES, Secret};
use crate::deliver::SendError;
use crate::model::Filter;
use crate::render::Renderer;
use crate::render::pages::{
    AccountForm, AccountPage, CadenceForm, Choice, LinkEmail, SettingsForm,
};
use crate::store::{Signup, Store};
use crate::subscriber::{Address, Subscriber};
use crate::tokens::{CONFIRM_TTL_SECS, Purpose, link, verify};
use forms::*;

pub struct Account {
    pub(super) store: Store,
    pub(super) secret: Secret,
    /// The team-chat channels' senders, for the sign-up's confirmation codes.
    pub(super) chat_senders: BTreeMap<crate::channels::Channel, crate::channels::Sender>,
    /// Sends confirmation emails; without it sign-up answers 503 (unsubscribe still works).
    mailer: Option<Arc<Mailer>>,
    renderers: BTreeMap<&'static str, Renderer>,
    pub(super) default_language: String,
    pub(super) layers: Vec<String>,
    pub(super) default_filter: Filter,
    pub(super) public_url: url::Url,
    /// Sign-ups per client address and hour, per mailbox and day. Counted in the store, so
    /// every instance behind a load balancer holds the same limits.
    pub(super) per_ip_per_hour: i64,
    pub(super) per_address_per_day: i64,
    pub(super) loopback_robots: bool,
    /// The digest's time zone: the default of the preferences' delivery time.
    pub(super) default_zone: String,
    trust_forwarded_for: bool,
}

impl Account {
    pub fn new(
        store: Store,
        config: &Config,
        secret: Secret,
        mailer: Option<Arc<Mailer>>,
    ) -> anyhow::Result<Account> {
        let mut renderers = BTreeMap::new();
        for language in LANGUAGES {
            let renderer =
                crate::templates::renderer(language, config.digest.templates_dir.as_deref())?;
            renderers.insert(*language, renderer);
        }
        let signup = &config.signup;
        let mut chat_senders = BTreeMap::new();
        for channel in crate::channels::Channel::ALL {
            if channel.note("").is_some()
                && let Some(sender) = channel.sender(&config.channel_setup())?
            {
                chat_senders.insert(*channel, sender);
            }
        }
        Ok(Account {
            store,
            secret,
            chat_senders,
            mailer,
            renderers,
            default_language: config.digest.language.clone(),
            layers: config.layer_names().iter().map(|l| l.to_string()).collect(),
            default_filter: Filter {
                layers: BTreeSet::new(),
                min_score: config.digest.min_score,
                boost: None,
                follows: Vec::new(),
            },
            public_url: config.web.public_url.clone(),
            per_ip_per_hour: i64::from(signup.per_ip_per_hour.max(1)),
            per_address_per_day: i64::from(signup.per_address_per_day.max(1)),
            trust_forwarded_for: signup.trust_forwarded_for,
            loopback_robots: signup.loopback_robots,
            default_zone: config.digest.timezone.name().to_string(),
        })
    }

    /// Counts one sign-up attempt on `key` in its window; false when over `limit`. A store
    /// that cannot count refuses (the sign-up could not be stored either).
    pub(super) async fn within_limit(&self, key: &str, window_secs: i64, limit: i64) -> bool {
        match self.store.count_hit(key, window_secs, Utc::now()).await {
            Ok(hits) => hits <= limit,
            Err(error) => {
                tracing::warn!(message = "Cannot count a sign-up attempt; refusing it", error = %format!("{error:#}"));
                false
            }
        }
    }

    /// Sign-up can send its emails (the home page links to the form only then).
    pub fn accepts_signups(&self) -> bool {
        self.mailer.is_some()
    }

    pub(super) fn renderer(&self, language: &str) -> &Renderer {
        self.renderers
            .get(language)
            .or_else(|| self.renderers.get(self.default_language.as_str()))
            .or_else(|| self.renderers.values().next())
            .expect("one renderer per supported language")
    }

    /// The subscriber a token names, if it is valid for `purpose` and the subscriber exists.
    async fn subscriber(
        &self,
        purpose: Purpose,
        token: &str,
    ) -> anyhow::Result<Option<Subscriber>> {
        match self.verify(purpose, token) {
            Some(id) => self.store.subscriber(id).await,
            None => Ok(None),
        }
    }

    /// The subscriber id a token names, if it is valid for `purpose` now.
    pub(super) fn verify(&self, purpose: Purpose, token: &str) -> Option<i64> {
        verify(&self.secret, purpose, token, Utc::now().timestamp())
    }

    /// The delivery time a form gives: `None` when it has no time field, `Some(None)` for an
    /// empty one (as soon as the digest is ready); the zone defaults to the digest's.
    pub(super) fn form_time(
        &self,
        fields: &Fields,
    ) -> Result<Option<Option<crate::subscriber::LocalTime>>, String> {
        match fields.at.as_deref() {
            None => Ok(None),
            Some("") => Ok(Some(None)),
            Some(at) => {
                let tz = fields
                    .tz
                    .as_deref()
                    .filter(|z| !z.is_empty())
                    .unwrap_or(&self.default_zone);
                crate::subscriber::LocalTime::parse(at, tz).map(|t| Some(Some(t)))
            }
        }
    }

    /// Stores a new sign-up's delivery time (the store's sign-up takes filter and language)
    /// and returns the sign-up as stored.
    pub(super) async fn set_time(
        &self,
        id: i64,
        at: Option<crate::subscriber::LocalTime>,
    ) -> anyhow::Result<Subscriber> {
        let mut s = self
            .store
            .subscriber(id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("sign-up {id} vanished"))?;
        if s.deliver_at != at {
            s.deliver_at = at;
            self.store.update_subscriber(&s, Utc::now()).await?;
        }
        Ok(s)
    }

    /// The empty delivery-time fields of a sign-up form.
    pub(super) fn blank_time(&self) -> Option<(String, String)> {
        Some((String::new(), self.default_zone.clone()))
    }

    /// The subscriber's language, or the digest language once they are gone.
    async fn language_of(&self, id: i64) -> String {
        match self.store.subscriber(id).await {
            Ok(Some(s)) => s.language,
            _ => self.default_language.clone(),
        }
    }

    pub(super) fn page(&self, status: StatusCode, language: &str, page: &AccountPage) -> Response {
        match self.renderer(language).account_page(page) {
            Ok(body) => html(status, body),
            Err(error) => failure(error),
        }
    }

    /// A page with a title and one paragraph.
    pub(super) fn message(
        &self,
        status: StatusCode,
        language: &str,
        title: &str,
        text: &str,
    ) -> Response {
        let t = self.renderer(language).locale();
        self.page(
            status,
            language,
            &AccountPage {
                title: t.get(title).to_string(),
                paragraphs: vec![t.get(text).to_string()],
                ..AccountPage::default()
            },
        )
    }

    /// A page whose one button POSTs to `action`: what a GET of a link in an email shows, so
    /// that fetching the link changes nothing. `keys`: title, text and button.
    fn button_page(&self, language: &str, keys: [&str; 3], action: String) -> Response {
        let form = AccountForm {
            action,
            ..AccountForm::default()
        };
        self.form_page(StatusCode::OK, language, keys, None, form)
    }

    /// A page with a title, one paragraph and `form`, whose button it labels. `keys`:
    /// title, text and button.
    pub(super) fn form_page(
        &self,
        status: StatusCode,
        language: &str,
        keys: [&str; 3],
        error: Option<String>,
        form: AccountForm,
    ) -> Response {
        let t = self.renderer(language).locale();
        let [title, text, button] = keys.map(|k| t.get(k).to_string());
        self.page(
            status,
            language,
            &AccountPage {
                title,
                paragraphs: vec![text],
                error,
                form: Some(AccountForm { button, ..form }),
                ..AccountPage::default()
            },
        )
    }

    fn not_found(&self, language: &str) -> Response {
        self.message(
            StatusCode::NOT_FOUND,
            language,
            "blog_title",
            "link_invalid",
        )
    }

    /// The layer, threshold and language fields, filled in from `filter` and `language`.
    pub(super) fn settings_form(&self, filter: &Filter, language: &str) -> SettingsForm {
        SettingsForm {
            layers: self
                .layers
                .iter()
                .map(|l| Choice {
                    value: l.clone(),
                    label: l.clone(),
                    checked: filter.layers.contains(l),
                    href: String::new(),
                })
                .collect(),
            min_score: match filter.min_score.tenths() {
                t if t % 10 == 0 => (t / 10).to_string(),
                t => format!("{}.{}", t / 10, t % 10),
            },
            languages: self
                .renderers
                .iter()
                .map(|(code, r)| Choice {
                    value: code.to_string(),
                    label: r.locale().get("language_name").to_string(),
                    checked: *code == language,
                    href: String::new(),
                })
                .collect(),
            boost: None,
            follows: None,
        }
    }

    /// The sign-up page, with `error` and the values the reader typed when a POST failed.
    fn signup_page(
        &self,
        status: StatusCode,
        language: &str,
        error: Option<String>,
        email: &str,
        filter: &Filter,
    ) -> Response {
        let t = self.renderer(language).locale();
        let switch = self
            .renderers
            .iter()
            .filter(|(code, _)| **code != language)
            .map(|(code, r)| Choice {
                value: code.to_string(),
                label: r.locale().get("language_name").to_string(),
                checked: false,
                href: format!("/subscribe?lang={code}"),
            })
            .collect();
        self.page(
            status,
            language,
            &AccountPage {
                title: t.get("signup_title").to_string(),
                paragraphs: vec![t.get("signup_lead").to_string()],
                error,
                form: Some(AccountForm {
                    action: "/subscribe".into(),
                    button: t.get("signup_button").to_string(),
                    email: Some(email.to_string()),
                    settings: Some(self.settings_form(filter, language)),
                    time: self.blank_time(),
                    ..AccountForm::default()
                }),
                switch,
            },
        )
    }

    fn preferences_page(
        &self,
        subscriber: &Subscriber,
        token: &str,
        saved: bool,
        error: Option<String>,
    ) -> Response {
        let language = subscriber.language.as_str();
        let t = self.renderer(language).locale();
        let email = match &subscriber.address {
            #[cfg(feature = "email")]
            Address::Email(e) => e.clone(),
            other => other.to_string(),
        };
        let mut paragraphs = vec![t.fill("preferences_lead", &[("email", &email)])];
        if saved {
            paragraphs.push(t.get("preferences_saved").to_string());
        }
        let status = if error.is_some() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        self.page(
            status,
            language,
            &AccountPage {
                title: t.get("preferences_title").to_string(),
                paragraphs,
                error,
                form: Some(AccountForm {
                    action: format!("/preferences/{token}"),
                    time: Some(match subscriber.deliver_at {
                        Some(t) => (t.at.format("%H:%M").to_string(), t.tz.name().to_string()),
                        None => (String::new(), self.default_zone.clone()),
                    }),
                    cadence: Some(cadence_form(subscriber.cadence, t)),
                    button: t.get("preferences_button").to_string(),
                    email: None,
                    settings: Some(SettingsForm {
                        boost: Some((
                            subscriber.filter.boost.is_some(),
                            crate::bot::handlers::boost_text(&subscriber.filter, t),
                        )),
                        follows: Some(subscriber.filter.follows.join("\n")),
                        ..self.settings_form(&subscriber.filter, language)
                    }),
                    ..AccountForm::default()
                }),
                ..AccountPage::default()
            },
        )
    }

    /// The client's address (`web::client_ip`).
    pub(super) fn client_ip(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        crate::web::client_ip(peer, headers, self.trust_forwarded_for)
    }
}
