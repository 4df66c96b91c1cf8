//! The last line of defence for logs: every log line passes through [`redact`] on its way
//! to stderr (`cli::progress::LogWriter`), whoever wrote it, kdigest or a dependency
//! logging a request at debug level. It removes every secret read from the environment
//! (remembered by `Secret::from_env`), plain and URL-encoded, and the credential parts of
//! the URLs kdigest talks to: Telegram bot tokens, Discord webhook tokens, robot keys and
//! hook ids, Slack hook paths, `Authorization` and bearer values.

use std::borrow::Cow;
use std::sync::{LazyLock, RwLock};

use regex::Regex;

/// Secrets read from the environment, and their URL-encoded forms.
static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Credential-shaped text and what replaces it (`$1` keeps the part that names it).
static PATTERNS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Telegram: <bot id>:<35 characters>, in API URLs after "bot".
        (r"\d{5,}:[A-Za-z0-9_-]{30,}", "<redacted>"),
        // Discord webhooks: /webhooks/<id>/<token>, also URL-encoded.
        (
            r"(?i)(webhooks(?:/|%2F)\d+(?:/|%2F))[A-Za-z0-9_.-]+",
            "$1<redacted>",
        ),
        // DingTalk access_token, WeCom key, signatures and tokens in query strings.
        (
            r"(?i)([?&](?:access_token|key|token|sign|secret|signature)=)[^&\s'\x22]+",
            "$1<redacted>",
        ),
        // Feishu and Lark robot hooks.
        (
            r"(?i)(/open-apis/bot/v2/hook/)[A-Za-z0-9-]+",
            "$1<redacted>",
        ),
        // Slack incoming webhooks.
        (
            r"(?i)(hooks\.slack\.com/services/)[A-Za-z0-9/]+",
            "$1<redacted>",
        ),
        // Authorization headers and bearer tokens.
        (
            r"(?i)(authorization\W{1,4}|bearer\s+)[A-Za-z0-9._~+/=:-]{8,}",
            "$1<redacted>",
        ),
    ]
    .into_iter()
    .map(|(pattern, with)| (Regex::new(pattern).expect("valid pattern"), with))
    .collect()
});

/// Remembers a secret so that no log line shows it. Short values are not remembered:
/// replacing every "abc" in the logs would hide more than it protects.
pub fn remember(secret: &str) {
    if secret.len() < 8 {
        return;
    }
    let encoded: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    for form in [secret.to_string(), encoded] {
        if !known.contains(&form) {
            known.push(form);
        }
    }
    // Longest first, so a secret containing another is replaced whole.
    known.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` without any secret or credential.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for secret in KNOWN.read().unwrap_or_else(|p| p.into_inner()).iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), "<redacted>"));
        }
    }
    for (pattern, with) in PATTERNS.iter() {
        if let Cow::Owned(replaced) = pattern.replace_all(&out, *with) {
            out = Cow::Owned(replaced);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_removed_whoever_logs_them() {
        let lines = [
            (
                "POST https://discord.com/api/v10/webhooks/1234567890/aBc-DeF_ghIJ.kl?wait=true",
                "aBc-DeF_ghIJ.kl",
            ),
            (
                "span{path=\"webhooks%2F1234567890%2FaBc-DeF_ghIJkl\"}",
                "aBc-DeF_ghIJkl",
            ),
            (
                "GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
                "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            ),
            (
                "https://oapi.dingtalk.com/robot/send?access_token=0123abcd&timestamp=1&sign=xyz%3D",
                "0123abcd",
            ),
            (
                "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7xxx",
                "693a91f6",
            ),
            (
                "https://open.feishu.cn/open-apis/bot/v2/hook/2b6a1c1e-aaaa-bbbb",
                "2b6a1c1e",
            ),
            (
                "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX",
                "XXXXXXXXXXXXXXXX",
            ),
            (
                "authorization: Bearer sk-live-0123456789abcdef",
                "sk-live-0123456789abcdef",
            ),
        ];
        for (line, secret) in lines {
            let out = redact(line);
            assert!(!out.contains(secret), "{out}");
            assert!(out.contains("<redacted>"), "{out}");
        }
        // Ordinary text is left alone.
        assert_eq!(
            redact("fetched 12 sources in 1.2 s"),
            "fetched 12 sources in 1.2 s"
        );
    }

    #[test]
    fn a_remembered_secret_is_removed_plain_and_url_encoded() {
        remember("p@ss w0rd/with+symbols");
        let out = redact("login p@ss w0rd/with+symbols, form p%40ss+w0rd%2Fwith%2Bsymbols");
        assert_eq!(out, "login <redacted>, form <redacted>");
        remember("short");
        assert_eq!(redact("short"), "short");
    }
}
