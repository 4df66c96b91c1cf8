//! Every registered channel passes the same checks, so a new channel folder cannot skip
//! one: its example address survives storing and parsing, its credential never shows in
//! the form logs and listings use, and its renders of the sample day in both languages
//! stay within the platform's documented limits (`ChannelSpec::limit_problems`).

use kdigest::render::Renderer;
use kdigest::subscriber::{Address, Channel};
use serde_json::Value;

use crate::helpers::fixture_digest;

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
    let (digest, config, _store, _dir) = fixture_digest().await;
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
