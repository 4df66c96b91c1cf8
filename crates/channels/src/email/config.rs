//! The `[email]` section: what the file says (`RawEmail`, with defaults) and the validated
//! form the rest of the program uses.

use serde::Deserialize;

use kdigest_core::settings::read::env_var_name;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// TLS from the first byte (port 465).
    Implicit,
    /// STARTTLS upgrade (port 587).
    StartTls,
    /// Plain text: only for a relay on the same machine.
    None,
}

#[derive(Debug, Clone)]
pub struct EmailConfig {
    pub smtp_host: String,
    pub smtp_port: u16,
    pub tls: SmtpTls,
    /// Empty: no authentication.
    pub username: String,
    /// Name of the environment variable holding the SMTP password.
    pub password_env: String,
    pub from: lettre::message::Mailbox,
    pub reply_to: Option<lettre::message::Mailbox>,
    pub list_id: String,
    /// Base URL of the web site (`[web] public_url`, given by the app's configuration), for
    /// the confirmation, preferences, unsubscribe and vote links.
    pub public_url: url::Url,
    pub unsubscribe_mailto: Option<String>,
    pub pool_size: u32,
    /// Bounds each step with the relay: connecting (greeting, EHLO, STARTTLS, login) and
    /// each message's transaction.
    pub timeout: std::time::Duration,
    /// DKIM signing, when a selector is configured.
    pub dkim: Option<DkimConfig>,
}

#[derive(Debug, Clone)]
pub struct DkimConfig {
    pub selector: String,
    pub domain: String,
    pub algorithm: DkimAlgorithm,
    /// Name of the environment variable holding the private key.
    pub key_env: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DkimAlgorithm {
    Rsa,
    Ed25519,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawEmail {
    pub smtp_host: String,
    pub smtp_port: u16,
    pub tls: String,
    pub username: String,
    pub password_env: String,
    pub from: String,
    pub reply_to: Option<String>,
    pub list_id: String,
    /// Deprecated: the site's address is `[web] public_url` (still read when that is unset).
    pub public_url: Option<String>,
    pub unsubscribe_mailto: Option<String>,
    pub pool_size: u32,
    pub timeout_secs: f64,
    pub dkim_selector: Option<String>,
    pub dkim_domain: Option<String>,
    pub dkim_algorithm: String,
    pub dkim_key_env: String,
}

impl Default for RawEmail {
    fn default() -> Self {
        RawEmail {
            smtp_host: "localhost".into(),
            smtp_port: 587,
            tls: "starttls".into(),
            username: String::new(),
            password_env: "KDIGEST_SMTP_PASSWORD".into(),
            from: "kdigest <digest@example.org>".into(),
            reply_to: None,
            list_id: "digest.example.org".into(),
            public_url: None,
            unsubscribe_mailto: None,
            pool_size: 4,
            timeout_secs: 30.0,
            dkim_selector: None,
            dkim_domain: None,
            dkim_algorithm: "rsa".into(),
            dkim_key_env: "KDIGEST_DKIM_KEY".into(),
        }
    }
}

/// The `[email]` section; `site` is the web site's address (`[web] public_url`), the base of
/// the links in every email.
pub(crate) fn validate(raw: RawEmail, site: &url::Url, problems: &mut Vec<String>) -> EmailConfig {
    let mailbox = |key: &str, value: &str, problems: &mut Vec<String>| {
        value.parse::<lettre::message::Mailbox>().map_err(|e| {
            problems.push(format!(
                "email.{key}: \"{value}\" is not an address ({e}); use Name <name@example.org>"
            ));
        })
    };
    let from = mailbox("from", &raw.from, problems).unwrap_or_else(|_| {
        "kdigest <digest@example.org>"
            .parse()
            .expect("static mailbox")
    });
    let reply_to = raw
        .reply_to
        .as_deref()
        .and_then(|r| mailbox("reply_to", r, problems).ok());
    let tls = match raw.tls.as_str() {
        "implicit" => SmtpTls::Implicit,
        "starttls" => SmtpTls::StartTls,
        "none" => SmtpTls::None,
        other => {
            problems.push(format!("email.tls: \"{other}\" is not a TLS mode; use implicit (465), starttls (587) or none (local relay only)"));
            SmtpTls::StartTls
        }
    };
    if raw.list_id.trim().is_empty()
        || raw.list_id.contains(char::is_whitespace)
        || raw.list_id.contains(['<', '>'])
    {
        problems.push(format!("email.list_id: \"{}\" is not a list id; use a domain-like name such as digest.example.org", raw.list_id));
    }
    if let Some(mailto) = &raw.unsubscribe_mailto
        && mailto.parse::<lettre::Address>().is_err()
    {
        problems.push(format!(
            "email.unsubscribe_mailto: \"{mailto}\" is not an email address"
        ));
    }
    if tls == SmtpTls::None && !raw.username.is_empty() {
        problems.push("email.tls: \"none\" would send the SMTP password in clear text; use starttls or implicit with a username".into());
    }
    if raw.smtp_host.trim().is_empty() {
        problems.push("email.smtp_host: must not be empty".into());
    }
    if !(1..=64).contains(&raw.pool_size) {
        problems.push(format!(
            "email.pool_size: {} is out of range; use 1 to 64",
            raw.pool_size
        ));
    }
    if !(raw.timeout_secs > 0.0 && raw.timeout_secs <= 3600.0) {
        problems.push(format!(
            "email.timeout_secs: {} is out of range; use a number of seconds above 0 and at most 3600 (30 is the default)",
            raw.timeout_secs
        ));
    }
    env_var_name(
        "email.password_env",
        &raw.password_env,
        "password",
        problems,
    );
    let dkim = raw.dkim_selector.as_ref().map(|selector| {
        let algorithm = match raw.dkim_algorithm.as_str() {
            "rsa" => DkimAlgorithm::Rsa,
            "ed25519" => DkimAlgorithm::Ed25519,
            other => {
                problems.push(format!(
                    "email.dkim_algorithm: \"{other}\" is not supported; use rsa or ed25519"
                ));
                DkimAlgorithm::Rsa
            }
        };
        if selector.is_empty() || !selector.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            problems.push(format!("email.dkim_selector: \"{selector}\" is not a selector; use letters, digits, dots and dashes, as in the DNS name <selector>._domainkey.<domain>"));
        }
        env_var_name("email.dkim_key_env", &raw.dkim_key_env, "private key", problems);
        DkimConfig {
            selector: selector.clone(),
            domain: raw
                .dkim_domain
                .clone()
                .unwrap_or_else(|| from.email.domain().to_string()),
            algorithm,
            key_env: raw.dkim_key_env.clone(),
        }
    });
    EmailConfig {
        smtp_host: raw.smtp_host,
        smtp_port: raw.smtp_port,
        tls,
        username: raw.username,
        password_env: raw.password_env,
        from,
        reply_to,
        list_id: raw.list_id,
        public_url: site.clone(),
        unsubscribe_mailto: raw.unsubscribe_mailto,
        dkim,
        pool_size: raw.pool_size.clamp(1, 64),
        timeout: std::time::Duration::from_secs_f64(raw.timeout_secs.clamp(0.001, 3600.0)),
    }
}
