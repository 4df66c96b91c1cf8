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

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;

use crate::channels::email::EmailSender;
use crate::config::{Config, LANGUAGES, Secret};
use crate::deliver::SendError;
use crate::model::{Filter, Score};
use crate::render::Renderer;
use crate::render::pages::{
    AccountForm, AccountPage, CadenceForm, Choice, LinkEmail, SettingsForm,
};
use crate::store::{Signup, Store};
use crate::subscriber::{Address, Subscriber};
use crate::tokens::{CONFIRM_TTL_SECS, Purpose, link, verify};

pub struct Account {
    pub(super) store: Store,
    pub(super) secret: Secret,
    /// The team-chat channels' senders, for the sign-up's confirmation codes.
    pub(super) chat_senders: BTreeMap<crate::channels::Channel, crate::channels::Sender>,
    /// Sends confirmation emails; without it sign-up answers 503 (unsubscribe still works).
    mailer: Option<Arc<EmailSender>>,
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
        mailer: Option<Arc<EmailSender>>,
    ) -> anyhow::Result<Account> {
        let mut renderers = BTreeMap::new();
        for language in LANGUAGES {
            let renderer = Renderer::new(language, config.digest.templates_dir.as_deref())?;
            renderers.insert(*language, renderer);
        }
        let signup = &config.signup;
        let mut chat_senders = BTreeMap::new();
        for channel in crate::channels::Channel::ALL {
            if channel.note("").is_some()
                && let Some(sender) = channel.sender(config)?
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
                        ..self.settings_form(&subscriber.filter, language)
                    }),
                    ..AccountForm::default()
                }),
                ..AccountPage::default()
            },
        )
    }

    /// The client's address: the socket peer, or behind a trusted reverse proxy the last
    /// X-Forwarded-For entry (the one the proxy added; earlier ones are client-supplied).
    /// When that entry does not parse, the peer: never an earlier, client-chosen entry.
    pub(super) fn client_ip(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trust_forwarded_for {
            return peer.ip();
        }
        headers
            .get_all("x-forwarded-for")
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|v| v.trim().parse::<IpAddr>().ok())
            .unwrap_or(peer.ip())
    }
}

/// The rate-limit key of a client: its IPv4 address, or the /64 of an IPv6 address (one
/// host usually has a whole /64 to rotate through).
pub(super) fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            IpAddr::V6(octets.into())
        }
    }
}

/// An account page: never stored by caches (it can show an address).
fn html(status: StatusCode, body: String) -> Response {
    let mut response = super::html(status, body);
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

pub(super) fn failure(error: anyhow::Error) -> Response {
    tracing::error!(message = "Account page failed", error = %format!("{error:#}"));
    StatusCode::SERVICE_UNAVAILABLE.into_response()
}

/// What a settings form sends; `layers` repeats, one per ticked box.
#[derive(Default)]
pub(super) struct Fields {
    pub(super) email: String,
    pub(super) layers: Vec<String>,
    pub(super) min_score: Option<String>,
    pub(super) language: Option<String>,
    /// The team-chat form: the robot's URL and keyword; the code form: its token and code.
    pub(super) robot: String,
    pub(super) keyword: String,
    pub(super) token: String,
    pub(super) code: String,
    /// The preferences form's delivery time and zone.
    pub(super) at: Option<String>,
    pub(super) tz: Option<String>,
    /// The preferences form's cadence kind and roll-up day.
    pub(super) cadence: Option<String>,
    pub(super) cadence_day: Option<String>,
    /// The preferences form has the boost checkbox (`boost_field`), and it is ticked.
    pub(super) boost: Option<bool>,
}

/// The forms post `application/x-www-form-urlencoded`; anything else (text/plain from a
/// cross-site form, JSON) is refused before it is read.
pub(super) fn not_a_form(headers: &HeaderMap) -> Option<Response> {
    let form = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    (!form).then(|| {
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Send the form as application/x-www-form-urlencoded\n",
        )
            .into_response()
    })
}

pub(super) fn parse_fields(body: &[u8]) -> Fields {
    let mut fields = Fields::default();
    for (key, value) in url::form_urlencoded::parse(body) {
        match key.as_ref() {
            "email" => fields.email = value.trim().to_string(),
            "layers" => fields.layers.push(value.into_owned()),
            "min_score" => fields.min_score = Some(value.trim().to_string()),
            "language" => fields.language = Some(value.into_owned()),
            "robot" => fields.robot = value.trim().to_string(),
            "keyword" => fields.keyword = value.trim().to_string(),
            "token" => fields.token = value.trim().to_string(),
            "code" => fields.code = value.trim().to_string(),
            "at" => fields.at = Some(value.trim().to_string()),
            "tz" => fields.tz = Some(value.trim().to_string()),
            "cadence" => fields.cadence = Some(value.trim().to_string()),
            "cadence_day" => fields.cadence_day = Some(value.trim().to_string()),
            "boost_field" => fields.boost = Some(fields.boost.unwrap_or(false)),
            "boost" => fields.boost = Some(value == "on"),
            _ => {}
        }
    }
    fields
}

/// The cadence a form gives; `None` when it has no cadence field (an older form).
fn form_cadence(fields: &Fields) -> Result<Option<crate::subscriber::Cadence>, String> {
    let Some(kind) = fields.cadence.as_deref() else {
        return Ok(None);
    };
    let text = match (kind, fields.cadence_day.as_deref()) {
        ("daily", _) | (_, None) => kind.to_string(),
        (kind, Some(day)) => format!("{kind}:{day}"),
    };
    crate::subscriber::Cadence::parse(&text).map(Some)
}

/// The cadence selects with `current` chosen; the day is the current roll-up day (Monday
/// for a daily reader).
fn cadence_form(current: crate::subscriber::Cadence, t: &crate::locale::Locale) -> CadenceForm {
    use crate::subscriber::{Cadence, DEFAULT_WEEKLY_DAY};
    let kind = match current {
        Cadence::Daily => "daily",
        Cadence::Weekly(_) => "weekly",
        Cadence::Both(_) => "both",
    };
    let day = current.weekly_day().unwrap_or(DEFAULT_WEEKLY_DAY);
    let choice = |value: &str, label: String, checked: bool| Choice {
        value: value.to_string(),
        label,
        checked,
        href: String::new(),
    };
    CadenceForm {
        kinds: ["daily", "weekly", "both"]
            .into_iter()
            .map(|k| {
                choice(
                    k,
                    t.get(&format!("cadence_kind_{k}")).to_string(),
                    k == kind,
                )
            })
            .collect(),
        days: (0..7)
            .map(|i| {
                let d = chrono::Weekday::try_from(i as u8).expect("0-6 are days");
                let v = d.to_string().to_ascii_lowercase();
                choice(&v, t.get(&format!("day_{v}")).to_string(), d == day)
            })
            .collect(),
    }
}

/// Validates layers, threshold and language; the error is a locale key and its value.
pub(super) fn parse_settings(
    fields: &Fields,
    known_layers: &[String],
    default: &Filter,
) -> Result<(Filter, Option<String>), (&'static str, String)> {
    let mut layers = BTreeSet::new();
    for l in &fields.layers {
        if !known_layers.contains(l) {
            return Err(("signup_bad_layer", l.clone()));
        }
        layers.insert(l.clone());
    }
    let min_score = match fields.min_score.as_deref() {
        None | Some("") => default.min_score,
        Some(s) => s
            .parse::<f64>()
            .ok()
            .and_then(Score::parse_threshold)
            .ok_or(("signup_bad_score", s.to_string()))?,
    };
    let language = match fields.language.as_deref() {
        None => None,
        Some(l) if LANGUAGES.contains(&l) => Some(l.to_string()),
        Some(l) => return Err(("signup_bad_language", l.to_string())),
    };
    Ok((
        Filter {
            layers,
            min_score,
            boost: None,
        },
        language,
    ))
}

#[derive(Deserialize)]
pub struct LangQuery {
    pub(super) lang: Option<String>,
}

/// `?lang=` when supported, else the first supported Accept-Language tag, else `default`.
pub(super) fn page_language(query: Option<&str>, headers: &HeaderMap, default: &str) -> String {
    let supported = |tag: &str| {
        let tag = tag.trim().to_ascii_lowercase();
        LANGUAGES
            .iter()
            .find(|l| {
                let l = l.to_ascii_lowercase();
                tag == l || l.split('-').next() == Some(tag.split('-').next().unwrap_or(""))
            })
            .map(|l| l.to_string())
    };
    if let Some(l) = query.and_then(supported) {
        return l;
    }
    let accept = headers
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // The supported language with the highest q (1 when absent; q=0 means "not this one");
    // among equals, the first listed.
    let mut best: Option<(f32, String)> = None;
    for part in accept.split(',') {
        let mut pieces = part.split(';');
        let Some(language) = supported(pieces.next().unwrap_or("")) else {
            continue;
        };
        let q = pieces
            .find_map(|p| p.trim().strip_prefix("q="))
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q > 0.0 && best.as_ref().is_none_or(|(b, _)| q > *b) {
            best = Some((q, language));
        }
    }
    best.map_or_else(|| default.to_string(), |(_, language)| language)
}

pub async fn signup_form(
    State(a): State<Arc<Account>>,
    Query(q): Query<LangQuery>,
    headers: HeaderMap,
) -> Response {
    let language = page_language(q.lang.as_deref(), &headers, &a.default_language);
    a.signup_page(StatusCode::OK, &language, None, "", &a.default_filter)
}

pub async fn signup(
    State(a): State<Arc<Account>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    let fields = parse_fields(&body);
    let language = fields
        .language
        .clone()
        .filter(|l| LANGUAGES.contains(&l.as_str()))
        .unwrap_or_else(|| page_language(None, &headers, &a.default_language));
    let client = format!("signup-ip:{}", client_key(a.client_ip(peer, &headers)));
    if !a.within_limit(&client, 3_600, a.per_ip_per_hour).await {
        return a.message(
            StatusCode::TOO_MANY_REQUESTS,
            &language,
            "signup_title",
            "signup_limited",
        );
    }
    let t = a.renderer(&language).locale();
    let invalid = |error: String, filter: &Filter| {
        a.signup_page(
            StatusCode::BAD_REQUEST,
            &language,
            Some(error),
            &fields.email,
            filter,
        )
    };
    let (filter, _) = match parse_settings(&fields, &a.layers, &a.default_filter) {
        Ok(settings) => settings,
        Err((key, value)) => {
            let error = t.fill(key, &[("layer", &value)]);
            return invalid(error, &a.default_filter);
        }
    };
    // The normalised address: one mailbox is one key and one subscriber.
    let (address, mailbox) = match Address::parse(&format!("email:{}", fields.email)) {
        Ok(Address::Email(mailbox)) => (Address::Email(mailbox.clone()), mailbox),
        _ => {
            let error = t.fill("signup_bad_email", &[("email", &fields.email)]);
            return invalid(error, &filter);
        }
    };
    let mailbox_key = format!("signup-mailbox:{}", mailbox.to_lowercase());
    if !a
        .within_limit(&mailbox_key, 86_400, a.per_address_per_day)
        .await
    {
        return a.message(
            StatusCode::TOO_MANY_REQUESTS,
            &language,
            "signup_title",
            "signup_limited",
        );
    }
    let Some(mailer) = &a.mailer else {
        return a.message(
            StatusCode::SERVICE_UNAVAILABLE,
            &language,
            "signup_title",
            "signup_unavailable",
        );
    };
    let now = Utc::now();
    let stale = now - chrono::Duration::seconds(CONFIRM_TTL_SECS);
    let deliver_at = match a.form_time(&fields) {
        Ok(at) => at.flatten(),
        Err(why) => {
            let error = t.fill("prefs_bad_time", &[("layer", &why)]);
            return invalid(error, &filter);
        }
    };
    let outcome = a
        .store
        .signup(&address, &filter, &language, now, stale)
        .await;
    if let Ok(Signup::Pending(id)) = &outcome
        && let Err(error) = a.set_time(*id, deliver_at).await
    {
        return failure(error);
    }
    // The same answer either way: the page must not tell who is subscribed. The mailbox
    // learns it: a confirmation link, or a preferences link when already subscribed.
    let (kind, purpose, id) = match outcome {
        Ok(Signup::Pending(id)) => (LinkEmail::Confirm, Purpose::Confirm, id),
        Ok(Signup::AlreadySubscribed(id)) => {
            (LinkEmail::AlreadySubscribed, Purpose::Preferences, id)
        }
        Err(error) => return failure(error),
    };
    let url = link(&a.public_url, &a.secret, purpose, id, now.timestamp());
    let email = match a.renderer(&language).link_email(kind, &url) {
        Ok(email) => email,
        Err(error) => return failure(error),
    };
    match mailer.send_single(&mailbox, email).await {
        Ok(()) => tracing::info!(message = "Sign-up email sent", subscriber = id, kind = ?kind),
        Err(SendError::Permanent { reason }) => {
            tracing::info!(message = "Sign-up email refused by the relay", subscriber = id, %reason);
        }
        Err(error) => {
            tracing::error!(message = "Cannot send the sign-up email", subscriber = id, error = %error);
            return a.message(
                StatusCode::SERVICE_UNAVAILABLE,
                &language,
                "signup_title",
                "signup_unavailable",
            );
        }
    }
    a.message(
        StatusCode::OK,
        &language,
        "signup_sent_title",
        "signup_sent",
    )
}

pub async fn confirm_form(State(a): State<Arc<Account>>, Path(token): Path<String>) -> Response {
    match a.subscriber(Purpose::Confirm, &token).await {
        Ok(Some(s)) if s.status == crate::subscriber::Status::Pending => a.button_page(
            &s.language,
            ["confirm_title", "confirm_lead", "confirm_button"],
            format!("/confirm/{token}"),
        ),
        Ok(_) => a.not_found(&a.default_language),
        Err(error) => failure(error),
    }
}

pub async fn confirm(State(a): State<Arc<Account>>, Path(token): Path<String>) -> Response {
    let subscriber = match a.subscriber(Purpose::Confirm, &token).await {
        Ok(Some(s)) => s,
        Ok(None) => return a.not_found(&a.default_language),
        Err(error) => return failure(error),
    };
    match a.store.confirm_subscriber(subscriber.id, Utc::now()).await {
        Ok(true) => {
            tracing::info!(
                message = "Subscription confirmed",
                subscriber = subscriber.id
            );
            a.message(
                StatusCode::OK,
                &subscriber.language,
                "confirm_title",
                "confirm_done",
            )
        }
        // Pressed twice, or opened again: say so, change nothing.
        Ok(false) if subscriber.status == crate::subscriber::Status::Active => a.message(
            StatusCode::OK,
            &subscriber.language,
            "confirm_title",
            "confirm_already",
        ),
        Ok(false) => a.not_found(&subscriber.language),
        Err(error) => failure(error),
    }
}

pub async fn unsubscribe_form(
    State(a): State<Arc<Account>>,
    Path(token): Path<String>,
) -> Response {
    let Some(id) = a.verify(Purpose::Unsubscribe, &token) else {
        return a.not_found(&a.default_language);
    };
    let language = a.language_of(id).await;
    a.button_page(
        &language,
        ["unsubscribe_title", "unsubscribe_confirm", "unsubscribe"],
        format!("/unsubscribe/{token}"),
    )
}

/// Also the RFC 8058 one-click POST: a valid token answers 200 even when the subscriber is
/// already gone, so repeating it is harmless.
pub async fn unsubscribe(State(a): State<Arc<Account>>, Path(token): Path<String>) -> Response {
    let Some(id) = a.verify(Purpose::Unsubscribe, &token) else {
        return a.not_found(&a.default_language);
    };
    let language = a.language_of(id).await;
    match a.store.remove_subscriber(id).await {
        Ok(removed) => {
            if removed {
                tracing::info!(message = "Unsubscribed by link", subscriber = id);
            }
            a.message(
                StatusCode::OK,
                &language,
                "unsubscribe_title",
                "unsubscribe_done",
            )
        }
        Err(error) => failure(error),
    }
}

pub async fn preferences_form(
    State(a): State<Arc<Account>>,
    Path(token): Path<String>,
) -> Response {
    match a.subscriber(Purpose::Preferences, &token).await {
        Ok(Some(s)) => a.preferences_page(&s, &token, false, None),
        Ok(None) => a.not_found(&a.default_language),
        Err(error) => failure(error),
    }
}

pub async fn preferences(
    State(a): State<Arc<Account>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    let mut subscriber = match a.subscriber(Purpose::Preferences, &token).await {
        Ok(Some(s)) => s,
        Ok(None) => return a.not_found(&a.default_language),
        Err(error) => return failure(error),
    };
    let fields = parse_fields(&body);
    // The delivery time: empty for "as soon as it is ready"; absent (an older form) keeps it.
    let deliver_at = match a.form_time(&fields) {
        Ok(None) => subscriber.deliver_at,
        Ok(Some(d)) => d,
        Err(why) => {
            let t = a.renderer(&subscriber.language).locale();
            let error = t.fill("prefs_bad_time", &[("layer", &why)]);
            return a.preferences_page(&subscriber, &token, false, Some(error));
        }
    };
    let cadence = match form_cadence(&fields) {
        Ok(c) => c.unwrap_or(subscriber.cadence),
        Err(why) => {
            let t = a.renderer(&subscriber.language).locale();
            let error = t.fill("prefs_bad_cadence", &[("layer", &why)]);
            return a.preferences_page(&subscriber, &token, false, Some(error));
        }
    };
    match parse_settings(&fields, &a.layers, &subscriber.filter) {
        Ok((filter, language)) => {
            // The form sets layers and threshold; the boost follows its checkbox below.
            subscriber.filter = Filter {
                boost: subscriber.filter.boost.take(),
                ..filter
            };
            subscriber.deliver_at = deliver_at;
            subscriber.cadence = cadence;
            match (fields.boost, subscriber.filter.boost.is_some()) {
                (Some(true), false) => match a.store.liked_layers(subscriber.id).await {
                    Ok(liked) => subscriber.filter.boost = Some(liked),
                    Err(error) => return failure(error),
                },
                (Some(false), true) => subscriber.filter.boost = None,
                _ => {}
            }
            if let Some(language) = language {
                subscriber.language = language;
            }
            if let Err(error) = a.store.update_subscriber(&subscriber, Utc::now()).await {
                return failure(error);
            }
            tracing::info!(message = "Preferences saved", subscriber = subscriber.id);
            a.preferences_page(&subscriber, &token, true, None)
        }
        Err((key, value)) => {
            let t = a.renderer(&subscriber.language).locale();
            let error = t.fill(key, &[("layer", &value)]);
            a.preferences_page(&subscriber, &token, false, Some(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_accept_known_layers_whole_scores_and_languages() {
        let known = vec!["frontend".to_string(), "runtime".to_string()];
        let default = Filter::default();
        let fields = parse_fields(b"layers=runtime&layers=frontend&min_score=70&language=en");
        let (filter, language) = parse_settings(&fields, &known, &default).unwrap();
        assert_eq!(filter.layers.len(), 2);
        assert_eq!(filter.min_score, Score::from_tenths(700));
        assert_eq!(language.as_deref(), Some("en"));
        let bad = |body: &[u8]| parse_settings(&parse_fields(body), &known, &default).unwrap_err();
        assert_eq!(bad(b"layers=gpu").0, "signup_bad_layer");
        assert_eq!(bad(b"min_score=101").0, "signup_bad_score");
        assert_eq!(bad(b"min_score=abc").0, "signup_bad_score");
        let half = parse_settings(&parse_fields(b"min_score=7.5"), &known, &default).unwrap();
        assert_eq!(half.0.min_score, Score::from_tenths(75));
        assert_eq!(bad(b"language=fr").0, "signup_bad_language");
    }

    #[test]
    fn clients_are_keyed_by_ipv4_address_or_ipv6_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(client_key(a), client_key(c));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(client_key(v4), v4);
    }

    #[test]
    fn page_language_prefers_query_then_accept_language() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_LANGUAGE,
            "fr-CH, en-US;q=0.8, zh;q=0.5".parse().unwrap(),
        );
        assert_eq!(page_language(Some("zh-CN"), &headers, "zh-CN"), "zh-CN");
        assert_eq!(page_language(None, &headers, "zh-CN"), "en");
        assert_eq!(
            page_language(Some("xx"), &HeaderMap::new(), "zh-CN"),
            "zh-CN"
        );
        let mut weighted = HeaderMap::new();
        weighted.insert(
            header::ACCEPT_LANGUAGE,
            "en;q=0.3, zh-CN;q=0.9".parse().unwrap(),
        );
        assert_eq!(page_language(None, &weighted, "en"), "zh-CN", "q decides");
        let mut refused = HeaderMap::new();
        refused.insert(header::ACCEPT_LANGUAGE, "en;q=0".parse().unwrap());
        assert_eq!(
            page_language(None, &refused, "zh-CN"),
            "zh-CN",
            "q=0 is a no"
        );
    }
}
