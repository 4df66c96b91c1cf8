//! Renders: snapshots of the fixture day, determinism, and limits under generated inputs.

use chrono::{NaiveDate, TimeZone, Utc};
use kdigest::channels::discord::render as discord;
use kdigest::locale::Locale;
use kdigest::model::{
    Digest, DigestEvent, FailedSource, ItemKind, Score, SourceCount, SourceLink, WatchItem, Window,
};
use kdigest::render::{Format, Renderer};
use kdigest_testkit::TestApp;

use kdigest_testkit::discord::discord_spec;
use kdigest_testkit::discord::schema_problems;
use kdigest_testkit::telegram::telegram_html_problems;

async fn fixture_renders(language: &str) -> (Digest, Vec<String>, Vec<String>, String) {
    let mut app = TestApp::start().await;
    app.config.digest.language = language.to_string();
    let d = app.digest().await;
    let r = Renderer::new(language, None).unwrap();
    let md = r.render(&d, Format::Md).unwrap().join("");
    let json = r.render(&d, Format::Json).unwrap().join("");
    // The payloads sent are JSON: each message's HTML (what the reader sees, compared
    // with the snapshots) and the events whose vote buttons go under it.
    let payloads = kdigest::channels::Channel::Telegram.render(&d, &r).unwrap();
    let telegram = kdigest::channels::telegram::render::messages(&r, &d).unwrap();
    let mut voted = Vec::new();
    for (payload, html) in payloads.iter().zip(&telegram) {
        let m: kdigest::channels::telegram::render::Message =
            serde_json::from_str(payload).unwrap();
        assert_eq!(&m.html, html);
        voted.extend(m.votes);
    }
    let events: Vec<(usize, String)> = d.events().map(|e| (e.n, e.id.clone())).collect();
    assert_eq!(voted, events, "every event has its buttons once, in order");
    let html = r.render(&d, Format::Html).unwrap().join("");
    (d, vec![md, json], telegram, html)
}

#[tokio::test]
async fn markdown_and_telegram_renders_match_the_snapshots() {
    let (_, text, telegram, _) = fixture_renders("zh-CN").await;
    // The base URL of the loopback server is random; no render may contain it.
    assert!(!text[0].contains("127.0.0.1"));
    insta::assert_snapshot!("fixture_day_zh_md", text[0]);
    insta::assert_snapshot!("fixture_day_zh_telegram", telegram.join("\n=====\n"));
    let (_, text_en, _, _) = fixture_renders("en").await;
    insta::assert_snapshot!("fixture_day_en_md", text_en[0]);
}

#[tokio::test]
async fn same_inputs_give_byte_identical_json_and_markdown() {
    let (_, first, _, _) = fixture_renders("zh-CN").await;
    let (_, second, _, _) = fixture_renders("zh-CN").await;
    assert_eq!(first[0], second[0]);
    assert_eq!(first[1], second[1]);
}

#[tokio::test]
async fn json_follows_the_documented_schema() {
    let (_, text, telegram, html) = fixture_renders("zh-CN").await;
    let v: serde_json::Value = serde_json::from_str(&text[1]).unwrap();
    for key in [
        "date",
        "window",
        "generation_mode",
        "title",
        "overview",
        "key_changes",
        "papers",
        "other_updates",
        "watchlist",
        "source_counts",
        "failed_sources",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["date"], "2026-10-28");
    assert_eq!(v["window"]["start"], "2026-10-27T08:00:00+08:00");
    let e = &v["key_changes"][0];
    for key in [
        "id",
        "title",
        "summary",
        "why_it_matters",
        "layers",
        "score",
        "kind",
        "sources",
    ] {
        assert!(e.get(key).is_some(), "event lacks {key}");
    }
    assert_eq!(e["kind"], "release");
    let score = e["score"].as_f64().unwrap();
    assert_eq!((score * 10.0).round() / 10.0, score, "one decimal");
    assert!(
        e["sources"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    );
    assert_eq!(v["source_counts"][0]["source"], "triton-lang/triton");
    assert_eq!(v["failed_sources"][0]["source"], "Example Compiler Weekly");
    for message in &telegram {
        assert_eq!(
            telegram_html_problems(message),
            Vec::<String>::new(),
            "{message}"
        );
    }
    assert!(html.starts_with("<!doctype html>") && html.contains("<h2>重点变化</h2>"));
    // zh-CN typography: no space after a full-width colon, lists joined by 、.
    assert!(html.contains("<strong>为什么重要：</strong>⚠"), "{html}");
    assert!(
        html.contains("</a>、<a") && !html.contains("</a>, <a"),
        "{html}"
    );
}

/// A small deterministic generator (xorshift) so failures reproduce.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn text(&mut self, max_len: u64) -> String {
        const PIECES: &[&str] = &[
            "kernel",
            " ",
            "<b>",
            "</i>",
            "&",
            "&amp;",
            "\"",
            "'",
            "<a href=\"x\">",
            ">",
            "<",
            "内核编译器",
            "🚀",
            "@everyone",
            "[link](javascript:alert(1))",
            "**bold**",
            "\n",
            "tl.dot",
            "40x",
            "_",
            "a-very-long-token-without-spaces-",
        ];
        let len = self.below(max_len + 1);
        let mut s = String::new();
        while (s.chars().count() as u64) < len {
            s.push_str(PIECES[self.below(PIECES.len() as u64) as usize]);
        }
        s
    }
}

fn generated_digest(g: &mut Gen, language: &str) -> Digest {
    let event = |g: &mut Gen, i: usize| DigestEvent {
        n: i + 1,
        id: format!("e{i}"),
        title: g.text(400),
        summary: g.text(3000),
        why_it_matters: g.text(900),
        brief: g.text(250),
        layers: vec!["runtime".into(), "kernel_codegen".into()],
        score: Score::from_f64(g.below(1001) as f64 / 10.0),
        kind: if g.below(2) == 0 {
            ItemKind::Paper
        } else {
            ItemKind::Release
        },
        release: None,
        sources: (0..1 + g.below(30))
            .map(|k| SourceLink {
                name: g.text(20),
                url: format!("https://example.org/{k}?q=\"x\"&y=<z>"),
            })
            .collect(),
        score_breakdown: vec![],
        llm_fallback: false,
        llm_fallback_reason: None,
        translations: Default::default(),
        // Every third event continues a story whose title and watch line are feed text too.
        follow_up: i.is_multiple_of(3).then(|| kdigest::model::FollowUp {
            date: NaiveDate::from_ymd_opt(2026, 10, 26).unwrap(),
            event_id: format!("{i:010x}"),
            title: g.text(300),
            reason: kdigest::model::FollowUpReason::Continues,
            resolves: Some(g.text(300)),
            resolves_translations: Default::default(),
        }),
        // Every fourth is about a phrase the reader follows (marked ★ before its title).
        followed: i.is_multiple_of(4).then(|| g.text(60)),
    };
    let n = g.below(25) as usize;
    let events: Vec<DigestEvent> = (0..n).map(|i| event(g, i)).collect();
    let (key, rest) = events.split_at(n.min(3));
    Digest {
        date: NaiveDate::from_ymd_opt(2026, 10, 28).unwrap(),
        language: language.into(),
        window: Window {
            start: Utc
                .with_ymd_and_hms(2026, 10, 27, 0, 0, 0)
                .unwrap()
                .fixed_offset(),
            end: Utc
                .with_ymd_and_hms(2026, 10, 28, 0, 0, 0)
                .unwrap()
                .fixed_offset(),
        },
        generation_mode: "extractive".into(),
        title: g.text(500),
        overview: g.text(5000),
        key_changes: key.to_vec(),
        papers: rest
            .iter()
            .filter(|e| e.kind == ItemKind::Paper)
            .cloned()
            .collect(),
        other_updates: rest
            .iter()
            .filter(|e| e.kind != ItemKind::Paper)
            .cloned()
            .collect(),
        watchlist: (0..g.below(6))
            .map(|i| WatchItem {
                event_id: format!("e{i}"),
                text: g.text(200),
                translations: Default::default(),
            })
            .collect(),
        source_counts: vec![SourceCount {
            source: g.text(30),
            items: 3,
        }],
        failed_sources: vec![FailedSource {
            source: g.text(30),
            error: g.text(300),
            kind: Default::default(),
        }],
        llm_fallbacks: 0,
        llm_usage: None,
        llm_headline: None,
        repeats: vec![],
        week: None,
    }
}

#[test]
fn generated_digests_give_valid_telegram_messages_within_4096() {
    let mut g = Gen(0x9E37_79B9_7F4A_7C15);
    for round in 0..150 {
        let language = if round % 2 == 0 { "zh-CN" } else { "en" };
        let d = generated_digest(&mut g, language);
        let messages = kdigest::channels::telegram::render::messages(
            &Renderer::new(language, None).unwrap(),
            &d,
        )
        .unwrap();
        assert!(!messages.is_empty());
        for m in &messages {
            let problems = telegram_html_problems(m);
            assert!(problems.is_empty(), "round {round}: {problems:?}\n{m}");
        }
        // Order is kept: events appear in digest order across messages.
        let all = messages.join("\n");
        let mut last = 0;
        for e in d.events() {
            let marker = kdigest::text::collapse_whitespace(&e.summary);
            if marker.len() > 40 {
                let escaped: String = marker.chars().take(10).collect();
                if !escaped.contains(['<', '>', '&', '"', '\'']) {
                    let at = all[last..].find(&escaped);
                    assert!(
                        at.is_some(),
                        "round {round}: event {} missing or out of order",
                        e.id
                    );
                    last += at.unwrap();
                }
            }
        }
    }
}

#[test]
fn generated_digests_give_discord_payloads_within_every_limit() {
    let spec = discord_spec();
    let rich_embed = serde_json::json!({"$ref": "#/components/schemas/RichEmbed"});
    let mut g = Gen(0xD1B5_4A32_D192_ED03);
    for round in 0..150 {
        let d = generated_digest(&mut g, if round % 2 == 0 { "zh-CN" } else { "en" });
        let locale = Locale::builtin(&d.language);
        let messages = discord::messages(&d, &locale);
        let embeds: usize = messages
            .iter()
            .map(|m| m["embeds"].as_array().unwrap().len())
            .sum();
        assert_eq!(
            embeds,
            d.events().count() + 2,
            "round {round}: one embed per event plus header and notes"
        );
        for m in &messages {
            assert_eq!(m["allowed_mentions"], serde_json::json!({"parse": []}));
            let text = m.to_string();
            assert!(
                !text.contains("[link](javascript"),
                "round {round}: feed text injected a masked link"
            );
            let list = m["embeds"].as_array().unwrap();
            assert!(list.len() <= discord::EMBEDS_PER_MESSAGE);
            let total: usize = list.iter().map(discord::embed_chars).sum();
            assert!(
                total <= discord::CHARS_PER_MESSAGE,
                "round {round}: {total} characters in one message"
            );
            for (i, e) in list.iter().enumerate() {
                let problems = schema_problems(&spec, &rich_embed, e, &format!("embeds[{i}]"));
                assert!(problems.is_empty(), "round {round}: {problems:?}");
            }
            // The vote buttons: at most 5 action rows of at most 5 buttons (Discord's
            // limits), custom ids within 100 characters, labels within 80.
            let rows = m["components"].as_array().cloned().unwrap_or_default();
            assert!(rows.len() <= 5, "round {round}: {} rows", rows.len());
            for row in &rows {
                assert_eq!(row["type"], 1);
                let buttons = row["components"].as_array().unwrap();
                assert!((1..=5).contains(&buttons.len()));
                for b in buttons {
                    assert!(b["custom_id"].as_str().unwrap().len() <= 100);
                    assert!(b["label"].as_str().unwrap().chars().count() <= 80);
                }
            }
        }
        let buttons: usize = messages
            .iter()
            .filter_map(|m| m["components"].as_array())
            .flatten()
            .map(|row| row["components"].as_array().unwrap().len())
            .sum();
        assert_eq!(
            buttons,
            2 * d.events().count(),
            "round {round}: 👍 and 👎 per event"
        );
    }
}
