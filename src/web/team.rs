//! Team-chat sign-up, plain HTML forms like the email one (web/account.rs):
//!
//! - `GET /subscribe/team`: the robot's webhook URL (Feishu, DingTalk, WeCom, Slack), an
//!   optional keyword, layers, threshold, language.
//! - `POST /subscribe/team`: records a pending subscriber and posts a message with an
//!   8-digit confirmation code to that robot (the code is derived from the subscriber and
//!   the address, `tokens::chat_code`). The next page asks for the code, carrying a signed
//!   `chat-confirm` token (48 hours), which by itself confirms nothing.
//! - `POST /subscribe/team/confirm`: the token and the code; the right code activates the
//!   subscription. So nobody can point the digest at a chat they cannot read.
//!
//! Limited like the email sign-up: per client address and hour, per robot and day, and
//! code attempts per sign-up and hour. Robots that require a signature need the operator's
//! `--secret-env` (a secret never goes through a web form).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;

use super::account::Account;
use super::account::forms::{
    Fields, LangQuery, client_key, failure, form_language, not_a_form, page_language, parse_fields,
    parse_settings,
};
use crate::channels::{Address, Meta, Options, SendError};
use crate::model::Filter;
use crate::render::pages::AccountForm;
use crate::store::Signup;
use crate::subscriber::Status;
use crate::tokens::{CONFIRM_TTL_SECS, Purpose, chat_code, same_secret, sign, verify};

/// Wrong codes allowed per sign-up and hour: 8 digits stay out of reach.
const CODE_ATTEMPTS_PER_HOUR: i64 = 5;

pub async fn team_form(
    State(a): State<Arc<Account>>,
    Query(q): Query<LangQuery>,
    headers: HeaderMap,
) -> Response {
    let language = page_language(q.lang.as_deref(), &headers, &a.default_language);
    team_page(
        &a,
        StatusCode::OK,
        &language,
        None,
        &Fields::default(),
        &a.default_filter,
    )
}

fn team_page(
    a: &Account,
    status: StatusCode,
    language: &str,
    error: Option<String>,
    fields: &Fields,
    filter: &Filter,
) -> Response {
    let form = AccountForm {
        action: "/subscribe/team".into(),
        robot: Some((fields.robot.clone(), fields.keyword.clone())),
        settings: Some(a.settings_form(filter, language)),
        time: a.blank_time(),
        ..AccountForm::default()
    };
    let keys = ["team_title", "team_lead", "team_button"];
    a.form_page(status, language, keys, error, form)
}

fn code_page(
    a: &Account,
    status: StatusCode,
    language: &str,
    error: Option<String>,
    token: &str,
) -> Response {
    let form = AccountForm {
        action: "/subscribe/team/confirm".into(),
        code: true,
        hidden: vec![("token".into(), token.to_string())],
        ..AccountForm::default()
    };
    let keys = ["team_sent_title", "team_sent", "team_code_button"];
    a.form_page(status, language, keys, error, form)
}

pub async fn team_signup(
    State(a): State<Arc<Account>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    let fields = parse_fields(&body);
    let language = form_language(&fields, &headers, &a.default_language);
    let limited = || {
        a.message(
            StatusCode::TOO_MANY_REQUESTS,
            &language,
            "team_title",
            "signup_limited",
        )
    };
    let client = format!("team-ip:{}", client_key(a.client_ip(peer, &headers)));
    if !a.within_limit(&client, 3_600, a.per_ip_per_hour).await {
        return limited();
    }
    let t = a.renderer(&language).locale();
    let invalid = |error: String, filter: &Filter| {
        team_page(
            &a,
            StatusCode::BAD_REQUEST,
            &language,
            Some(error),
            &fields,
            filter,
        )
    };
    let (filter, _) = match parse_settings(&fields, &a.layers, &a.default_filter) {
        Ok(settings) => settings,
        Err((key, value)) => return invalid(t.fill(key, &[("layer", &value)]), &a.default_filter),
    };
    let address = match robot_address(&a, &fields) {
        Ok(address) => address,
        Err(reason) => return invalid(t.fill("team_bad_url", &[("reason", &reason)]), &filter),
    };
    let deliver_at = match a.form_time(&fields) {
        Ok(at) => at.flatten(),
        Err(why) => return invalid(t.fill("prefs_bad_time", &[("layer", &why)]), &filter),
    };
    let robot_key = format!("team-robot:{}", address.destination_key());
    if !a
        .within_limit(&robot_key, 86_400, a.per_address_per_day)
        .await
    {
        return limited();
    }
    let now = Utc::now();
    let stale = now - chrono::Duration::seconds(CONFIRM_TTL_SECS);
    let expires = now.timestamp() + CONFIRM_TTL_SECS;
    let (id, text) = match a
        .store
        .signup(&address, &filter, &language, now, stale)
        .await
    {
        Ok(Signup::Pending(id)) => match a.set_time(id, deliver_at).await {
            Ok(s) => {
                let code = chat_code(&a.secret, id, &address.to_stored(), s.created_at);
                (id, t.fill("team_note", &[("code", &code)]))
            }
            Err(error) => return failure(error),
        },
        Ok(Signup::AlreadySubscribed(id)) => (id, t.get("team_note_known").to_string()),
        Err(error) => return failure(error),
    };
    if let Err(error) = post_note(&a, &address, &text, id).await {
        tracing::info!(message = "Team-chat sign-up: the robot refused the code", subscriber = id, error = %error);
        let reason = t.fill("team_unreachable", &[("reason", &error.to_string())]);
        return invalid(reason, &filter);
    }
    tracing::info!(message = "Team-chat confirmation code sent", subscriber = id, address = %address);
    // The same page whether the chat was new or subscribed already: the chat learns which.
    let token = sign(&a.secret, Purpose::ChatConfirm, id, expires);
    code_page(&a, StatusCode::OK, &language, None, &token)
}

/// The robot channel address the form names, with its keyword: the first team-chat
/// channel whose address parsing takes the URL (their paths differ).
fn robot_address(a: &Account, fields: &Fields) -> Result<Address, String> {
    let raw = fields.robot.as_str();
    // Only the platforms' own https hosts: anything else would let a visitor make this
    // server post to addresses of their choosing (its own ports included).
    if !raw.starts_with("https://") && !a.loopback_robots {
        return Err("a robot URL starts with https://".into());
    }
    let address = a
        .chat_senders
        .keys()
        .find_map(|c| Address::parse(&format!("{}:{raw}", c.as_str())).ok())
        .ok_or_else(|| {
            "paste the webhook URL of a Feishu, DingTalk or WeCom robot or a Slack incoming webhook (https)".to_string()
        })?;
    let keyword = (!fields.keyword.is_empty()).then(|| fields.keyword.clone());
    if keyword.is_none() {
        return Ok(address);
    }
    address.with_options(Options {
        secret_env: None,
        keyword,
    })
}

async fn post_note(a: &Account, address: &Address, text: &str, id: i64) -> Result<(), SendError> {
    let channel = address.channel();
    let (Some(sender), Some(payload)) = (a.chat_senders.get(&channel), channel.note(text)) else {
        return Err(SendError::Failed {
            reason: format!("{} cannot take a confirmation message", channel.as_str()),
        });
    };
    let delivery_id = format!("signup-{id}");
    sender
        .send(
            address,
            &payload,
            Meta {
                delivery_id: &delivery_id,
                subscriber_id: id,
            },
        )
        .await
}

pub async fn team_confirm(
    State(a): State<Arc<Account>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_a_form(&headers) {
        return refused;
    }
    let fields = parse_fields(&body);
    let fallback = page_language(None, &headers, &a.default_language);
    let Some(id) = verify(
        &a.secret,
        Purpose::ChatConfirm,
        &fields.token,
        Utc::now().timestamp(),
    ) else {
        return a.message(
            StatusCode::NOT_FOUND,
            &fallback,
            "blog_title",
            "link_invalid",
        );
    };
    let subscriber = match a.store.subscriber(id).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return a.message(
                StatusCode::NOT_FOUND,
                &fallback,
                "blog_title",
                "link_invalid",
            );
        }
        Err(error) => return failure(error),
    };
    let language = subscriber.language.clone();
    if subscriber.status == Status::Active {
        return a.message(StatusCode::OK, &language, "team_title", "confirm_already");
    }
    if !a
        .within_limit(&format!("team-code:{id}"), 3_600, CODE_ATTEMPTS_PER_HOUR)
        .await
    {
        return a.message(
            StatusCode::TOO_MANY_REQUESTS,
            &language,
            "team_title",
            "signup_limited",
        );
    }
    let expected = chat_code(
        &a.secret,
        id,
        &subscriber.address.to_stored(),
        subscriber.created_at,
    );
    if !same_secret(&fields.code, &expected) {
        let error = a
            .renderer(&language)
            .locale()
            .get("team_code_wrong")
            .to_string();
        return code_page(
            &a,
            StatusCode::BAD_REQUEST,
            &language,
            Some(error),
            &fields.token,
        );
    }
    match a.store.confirm_subscriber(id, Utc::now()).await {
        Ok(true) => {
            tracing::info!(
                message = "Team-chat subscription confirmed",
                subscriber = id
            );
            a.message(StatusCode::OK, &language, "team_title", "team_done")
        }
        Ok(false) => a.message(
            StatusCode::NOT_FOUND,
            &language,
            "blog_title",
            "link_invalid",
        ),
        Err(error) => failure(error),
    }
}
