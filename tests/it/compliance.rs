//! Every registered channel passes the same checks, so a new channel folder cannot skip
//! one: its example address survives storing and parsing, its credential never shows in
//! the form logs and listings use, and its renders of the sample day in both languages
//! stay within the platform's documented limits (`ChannelSpec::limit_problems`), and its
//! error table reads every 4xx and 5xx by the delivery rules (`ChannelSpec::refusal`).

use kdigest::channels::{Codes, SendError};
use kdigest::render::Renderer;
use kdigest::subscriber::{Address, Channel};
use serde_json::Value;

use kdigest_testkit::TestApp;

#[test]
fn every_channel_stores_and_shows_its_address_without_its_credential() {
    for channel in Channel::ALL {
        let (example, credential) = channel.example();
        let address = Address::parse(example)
            .unwrap_or_else(|e| panic!("{}: example {example:?}: {e}", channel.as_str()));
        assert_eq!(address.channel(), *channel);
        let stored = address.to_stored();
        assert_eq!(
            Address::parse(&stored).as_ref(),
            Ok(&address),
            "{}: {stored} does not parse back",
            channel.as_str()
        );
        if credential.is_empty() {
            continue;
        }
        assert!(
            stored.contains(credential),
            "{}: the example's credential {credential:?} is not in {stored}",
            channel.as_str()
        );
        for shown in [format!("{address}"), format!("{address:?}")] {
            assert!(
                !shown.contains(credential),
                "{}: {shown} shows the credential",
                channel.as_str()
            );
        }
    }
}

#[tokio::test]
async fn every_channel_renders_the_sample_day_within_its_platforms_limits() {
    let app = TestApp::start().await;
    let digest = app.digest().await;
    let config = &app.config;
    for language in ["zh-CN", "en"] {
        let d = digest.clone().in_language(language);
        let renderer = Renderer::new(language, None)
            .unwrap()
            .with_site(config.web.public_url.clone());
        for channel in Channel::ALL {
            let name = channel.as_str();
            let messages = channel.render(&d, &renderer).unwrap();
            assert!(!messages.is_empty(), "{name} {language}: nothing rendered");
            for (i, m) in messages.iter().enumerate() {
                let problems = channel.limit_problems(m);
                assert!(
                    problems.is_empty(),
                    "{name} {language} message {i}: {problems:?}"
                );
            }
            // The check can fail: every text of the message fifty times over breaks any
            // platform's limit (a webhook's receiver sets its own, so it has none).
            let bloated = bloat(&messages[0]);
            assert_eq!(
                channel.limit_problems(&bloated).is_empty(),
                *channel == Channel::Webhook,
                "{name}: a message fifty times too long"
            );
        }
    }
}

/// `message` (JSON) with every text repeated fifty times (strings of more than 20
/// characters: the short ones are the payload's structure, "type": "header").
fn bloat(message: &str) -> String {
    fn grow(v: &mut Value) {
        match v {
            Value::String(s) if s.chars().count() > 20 => *s = s.repeat(50),
            Value::Array(a) => a.iter_mut().for_each(grow),
            Value::Object(o) => o.values_mut().for_each(grow),
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_str(message).expect("every channel renders JSON");
    grow(&mut v);
    v.to_string()
}

/// The delivery rules every channel's error table keeps, over every 4xx and 5xx: what means
/// "later" (HTTP 408, 425, 429 and 5xx; SMTP 4xx) is retried or pauses the channel, never
/// dropped; only a refusal that says the destination is gone or forbids us (HTTP 401, 403,
/// 404, 410; SMTP 550, 551, 553) disables a subscriber; a credential problem (HTTP 401) is
/// never one message's failure; an SMTP 5xx is never retried as if it were transient.
#[test]
fn every_channels_error_table_reads_every_4xx_and_5xx_by_the_delivery_rules() {
    let kind = |e: &SendError| match e {
        SendError::Transient { .. } => "retry",
        SendError::Outage { .. } => "pause",
        SendError::Refused { .. } => "refused",
        SendError::Permanent { .. } => "disable",
        SendError::Failed { .. } => "fail",
        SendError::Moved(_) => "moved",
    };
    let mut wrong = Vec::new();
    for channel in Channel::ALL {
        for code in 400..=599u16 {
            let answer = channel.refusal(code);
            let k = kind(&answer);
            let allowed: &[&str] = match (channel.codes(), code) {
                (Codes::Http, 408 | 425 | 429 | 500..=599) => &["retry", "pause"],
                (Codes::Http, 401) => &["retry", "pause", "refused", "disable"],
                (Codes::Http, 403 | 404 | 410) => &["retry", "pause", "refused", "disable", "fail"],
                (Codes::Http, _) => &["retry", "pause", "refused", "fail"],
                (Codes::Smtp, 400..=499) => &["retry", "pause"],
                (Codes::Smtp, 550 | 551 | 553) => &["pause", "disable", "fail"],
                (Codes::Smtp, _) => &["pause", "fail"],
            };
            if !allowed.contains(&k) {
                wrong.push(format!(
                    "{} {code}: {k} ({answer}), allowed {allowed:?}",
                    channel.as_str()
                ));
            }
        }
    }
    // The table is read: a webhook's gone address disables, a bot's 429 is retried.
    assert_eq!(kind(&Channel::ALL[0].refusal(429)), "retry");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
