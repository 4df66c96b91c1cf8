//! Telegram through the real teloxide stack against the loopback Bot API of the test kit (crates/testkit/src/telegram.rs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kdigest::bot::telegram::TelegramBot;
use kdigest::store::Store;
use kdigest::subscriber::{Address, Status};

use kdigest_testkit::TestApp;
use kdigest_testkit::config::write_file_config;
use kdigest_testkit::telegram::{
    ChatMode, Mock, TOKEN, callback_update, spawn_mock, text_update, text_update_from,
};

/// Waits until the mock has served every scripted update and nothing new was sent for a while.
async fn settle(mock: &Mock) {
    let started = Instant::now();
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let n = mock
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method != "GetUpdates")
            .count();
        if mock.updates.lock().unwrap().is_empty() && n == last {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "bot did not settle"
        );
        last = n;
    }
}

/// Long-polls the mock with the real bot until every scripted update is answered, then
/// shuts the bot down.
async fn poll_until_settled(config: &kdigest::config::Config, store: &Store, mock: &Mock) {
    let bot = kdigest::channels::telegram::api_bot(&config.channels.telegram).unwrap();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let telegram = TelegramBot::new(bot, store.clone(), Arc::new(config.clone()), None);
    // As the daemon does: set up (getMe, the command menu), then poll.
    telegram.init().await.unwrap();
    let handle = tokio::spawn(telegram.poll(rx));
    settle(mock).await;
    tx.send(true).unwrap();
    handle.await.unwrap().unwrap();
}

fn texts(mock: &Mock, chat: i64) -> Vec<String> {
    mock.sent_to(chat)
        .iter()
        .map(|c| c.body["text"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_subscribes_tunes_its_filter_and_reads_the_digest() {
    let (api, mock) = spawn_mock().await;
    mock.admins.lock().unwrap().push(1);
    let app = TestApp::builder()
        .telegram(&api, "admins = [9]\n")
        .toml("[daemon]\ndigest_cooldown_secs = 60\n")
        .build()
        .await;
    let (config, store) = (&app.config, &app.store);
    app.digest().await;

    let private = 1001;
    let group = -100_200;
    let script = [
        text_update(1, private, 1, "/start"),
        text_update(2, private, 1, "/subscribe runtime 70"),
        text_update(3, private, 1, "/layers"),
        callback_update(4, private, 1, "layer:benchmark"),
        text_update(5, private, 1, "/threshold 150"),
        text_update(6, private, 1, "/threshold 65"),
        text_update(7, private, 1, "/lang en"),
        text_update(8, private, 1, "/settings"),
        text_update(9, private, 1, "/digest 2026-10-28"),
        text_update(10, private, 1, "/digest 2026-10-28"),
        text_update(11, private, 1, "/why 1"),
        text_update(12, private, 1, "/status"),
        text_update(13, group, 2, "/subscribe@kdigest_bot"),
        text_update(14, group, 2, "/digest@kdigest_bot latest runtime"),
        text_update(15, group, 2, "/help@some_other_bot"),
        text_update(16, private, 1, "/frobnicate"),
        text_update(17, private, 1, "just chatting"),
        text_update_from(18, 3003, 3, "/help", "en-US"),
        text_update_from(19, 3003, 3, "/why x", "en-US"),
        text_update_from(20, 3003, 3, "/why 4 2026-10-28", "en-US"),
    ];
    mock.updates.lock().unwrap().extend(script);

    poll_until_settled(config, store, &mock).await;

    assert_eq!(
        mock.problems.lock().unwrap().clone(),
        Vec::<String>::new(),
        "every request matches the Bot API spec"
    );
    let commands = mock.calls_of("SetMyCommands");
    assert_eq!(commands.len(), 2);
    assert_eq!(commands[0].body["language_code"], "zh");
    assert!(commands[1].body.get("language_code").is_none());
    assert!(
        commands[1].body["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["command"] == "digest")
    );

    let private_texts = texts(&mock, private);
    assert!(
        private_texts[0].contains("/subscribe"),
        "help: {}",
        private_texts[0]
    );
    assert!(
        private_texts[1].starts_with("已订阅")
            && private_texts[1].contains("runtime")
            && private_texts[1].contains("70.0"),
        "{}",
        private_texts[1]
    );
    let layers_msg = &mock.sent_to(private)[2].body;
    assert!(
        layers_msg["reply_markup"]["inline_keyboard"]
            .as_array()
            .unwrap()
            .len()
            >= 3,
        "layer keyboard"
    );
    assert_eq!(mock.calls_of("AnswerCallbackQuery").len(), 1);
    assert_eq!(mock.calls_of("EditMessageReplyMarkup").len(), 1);
    assert!(
        private_texts[3].contains("“150”") && private_texts[3].contains("/threshold [0-100]"),
        "{}",
        private_texts[3]
    );
    assert!(private_texts[4].contains("65.0"), "{}", private_texts[4]);
    assert_eq!(private_texts[5], "Language set to en.");
    assert!(
        private_texts[6].contains("Layers: benchmark, runtime")
            && private_texts[6].contains("Score threshold: 65.0"),
        "{}",
        private_texts[6]
    );
    // The digest, filtered by this chat's settings, as Telegram HTML messages.
    let digest_calls: Vec<_> = mock
        .sent_to(private)
        .into_iter()
        .filter(|c| c.body["parse_mode"] == "HTML")
        .collect();
    assert!(!digest_calls.is_empty());
    let digest_text: String = digest_calls
        .iter()
        .map(|c| c.body["text"].as_str().unwrap().to_string())
        .collect();
    assert!(
        digest_text.contains("Key changes") && digest_text.contains("Tessera"),
        "filtered to runtime/benchmark, in English"
    );
    assert!(
        !digest_text.contains("ShapeTrace"),
        "ShapeTrace is frontend/optimization only"
    );
    let after_digest: Vec<&String> = private_texts.iter().skip(7 + digest_calls.len()).collect();
    assert!(
        after_digest[0].starts_with("Please wait"),
        "cooldown: {after_digest:?}"
    );
    assert!(
        after_digest[1].starts_with("2026-10-28 · 1. CUTLASS 5.0.0")
            && after_digest[1].contains("impact"),
        "{}",
        after_digest[1]
    );
    assert_eq!(after_digest[2], "This command is for kdigest admins only.");
    assert_eq!(
        after_digest[3],
        "Unknown command /frobnicate; send /help for the list."
    );
    assert_eq!(after_digest.len(), 4, "plain text gets no answer");

    let group_texts = texts(&mock, group);
    assert_eq!(group_texts[0], "只有本群管理员可以修改本群的订阅。");
    assert!(
        group_texts.len() >= 2,
        "anyone may ask for /digest in a group"
    );
    assert!(group_texts[1..].iter().all(|t| !t.contains("ShapeTrace")));
    assert_eq!(
        mock.calls_of("GetChatMember").len(),
        1,
        "membership is asked only for changes"
    );

    let s = store
        .subscriber_by_address(&Address::Telegram(private))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.filter.layers.iter().cloned().collect::<Vec<_>>(),
        vec!["benchmark", "runtime"]
    );
    assert_eq!(s.language, "en");
    assert!(
        store
            .subscriber_by_address(&Address::Telegram(group))
            .await
            .unwrap()
            .is_none()
    );

    // A user whose Telegram is in English gets English before choosing anything.
    let english = texts(&mock, 3003);
    assert_eq!(english.len(), 3, "{english:?}");
    assert!(
        english[0].starts_with("kdigest sends one daily digest"),
        "{}",
        english[0]
    );
    assert!(
        english[1].contains("is not an event number"),
        "{}",
        english[1]
    );
    // Event 4 of that day is its first paper, numbered as the renders number it.
    assert!(
        english[2].starts_with("2026-10-28 · 4. TileFuse"),
        "{}",
        english[2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_delivers_to_telegram_chats_and_handles_each_failure_on_its_own() {
    let (api, mock) = spawn_mock().await;
    let ok_chat = 1001;
    let blocked = 2002;
    let limited = 3003;
    let old_group = -4004;
    let new_group = -1_000_000_004_004;
    let bad_html = 5005;
    {
        let mut modes = mock.modes.lock().unwrap();
        modes.insert(blocked, ChatMode::Blocked);
        modes.insert(limited, ChatMode::RateLimitedOnce);
        modes.insert(old_group, ChatMode::MigrateTo(new_group));
        modes.insert(bad_html, ChatMode::BadHtmlOnce);
    }
    let dir = tempfile::tempdir().unwrap();
    let env = "KDIGEST_TEST_TG_TOKEN_RUN";
    let config_path = write_file_config(
        dir.path(),
        "k.sqlite",
        &format!(
            "[delivery]\nbackoff_base_secs = 0.5\n[telegram]\napi_url = \"{api}\"\ntoken_env = \"{env}\"\ngroup_per_minute = 600\n"
        ),
    );
    let kdigest = |args: &[&str]| {
        crate::kdigest(&config_path, args)
            .env(env, TOKEN)
            .env("RUST_LOG", "info")
            .output()
            .unwrap()
    };
    for chat in [ok_chat, blocked, limited, old_group, bad_html] {
        assert!(
            kdigest(&["subscribers", "add", &format!("telegram:{chat}")])
                .status
                .success()
        );
    }
    let out = kdigest(&["run", "--once", "--date", "2026-10-28"]);
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{logs}");
    assert!(
        !logs.contains("TEST-token_secret"),
        "the token never reaches a log"
    );
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());

    // The healthy chat gets the whole digest, in order, each message within the limits.
    let store = Store::open(&dir.path().join("k.sqlite")).await.unwrap();
    let digest = store
        .load_digest(kdigest::demo::demo_date())
        .await
        .unwrap()
        .unwrap();
    let expected = kdigest::channels::telegram::render::messages(
        &kdigest::render::Renderer::new("zh-CN", None).unwrap(),
        &digest,
    )
    .unwrap();
    let got: Vec<String> = texts(&mock, ok_chat);
    assert_eq!(got, expected);
    // A 429 for one chat waits that chat only: the others were done before its retry.
    let limited_calls = mock.sent_to(limited);
    assert_eq!(
        limited_calls.len(),
        expected.len() + 1,
        "one retry after the 429"
    );
    let ok_done = mock.sent_to(ok_chat).last().unwrap().at;
    assert!(
        limited_calls[1].at >= limited_calls[0].at + Duration::from_millis(900),
        "retry_after honoured"
    );
    assert!(mock.sent_to(ok_chat)[0].at < limited_calls[1].at);
    assert!(ok_done < limited_calls.last().unwrap().at + Duration::from_secs(5));
    // Blocked: disabled with the reason, not retried.
    assert_eq!(mock.sent_to(blocked).len(), 1);
    let b = store
        .subscriber_by_address(&Address::Telegram(blocked))
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&b.status, Status::Disabled(r) if r.contains("blocked")),
        "{:?}",
        b.status
    );
    // Migrated group: the stored id follows, and the digest goes to the new id.
    assert!(
        store
            .subscriber_by_address(&Address::Telegram(new_group))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(texts(&mock, new_group), expected);
    // Rejected HTML: resent once as plain text, then the rest as HTML.
    let bad = mock.sent_to(bad_html);
    assert_eq!(bad[0].body["parse_mode"], "HTML");
    assert!(bad[1].body.get("parse_mode").is_none());
    assert_eq!(bad.len(), expected.len() + 1);
    let list = String::from_utf8_lossy(&kdigest(&["subscribers", "list"]).stdout).to_string();
    assert!(
        list.contains("disabled: A Telegram's error: Forbidden: bot was blocked by the user"),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_mode_accepts_signed_updates_only() {
    let (api, mock) = spawn_mock().await;
    let app = TestApp::builder().telegram(&api, "").build().await;
    let (config, store) = (&app.config, &app.store);
    let bot = TelegramBot::new(
        kdigest::channels::telegram::api_bot(&config.channels.telegram).unwrap(),
        store.clone(),
        Arc::new(config.clone()),
        None,
    );
    bot.init().await.unwrap();
    let public: url::Url = "https://digest.example.org/".parse().unwrap();
    bot.use_webhook(&public).await.unwrap();
    let set = mock.calls_of("SetWebhook");
    assert_eq!(
        set[0].body["url"],
        "https://digest.example.org/telegram/webhook"
    );
    let secret = set[0].body["secret_token"].as_str().unwrap().to_string();
    assert!(
        !secret.contains("TEST-token"),
        "the secret is derived, not the token itself"
    );

    let services = kdigest::web::Services {
        bots: kdigest::bot::routes::Bots {
            telegram: Some(Arc::new(bot)),
            ..Default::default()
        },
        ..Default::default()
    };
    let router = kdigest::web::router(Arc::new(kdigest::metrics::Metrics::default()), services);
    let base = kdigest_testkit::net::serve(router).await;
    let client = reqwest::Client::new();
    let post = |secret: &str, update: serde_json::Value| {
        client
            .post(format!("{base}/telegram/webhook"))
            .header("X-Telegram-Bot-Api-Secret-Token", secret)
            .json(&update)
            .send()
    };
    let forged = post("wrong", text_update(1, 1001, 1, "/start"))
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let real = post(&secret, text_update(2, 1002, 1, "/start"))
        .await
        .unwrap();
    assert_eq!(real.status(), 200);
    let started = Instant::now();
    while mock.sent_to(1002).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no reply to the webhook update"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(mock.sent_to(1001).is_empty(), "a forged update is ignored");
    // Telegram retries an update it thinks was lost (behind a load balancer the retry may
    // reach another instance): the retry is accepted and not answered a second time.
    let replies = mock.sent_to(1002).len();
    let retry = post(&secret, text_update(2, 1002, 1, "/start"))
        .await
        .unwrap();
    assert_eq!(retry.status(), 200);
    let later = post(&secret, text_update(3, 1003, 1, "/start"))
        .await
        .unwrap();
    assert_eq!(later.status(), 200);
    let started = Instant::now();
    while mock.sent_to(1003).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no reply to update 3"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        mock.sent_to(1002).len(),
        replies,
        "update 2 is answered once"
    );
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_reply_of_several_messages_keeps_to_one_per_second_in_the_chat() {
    let (api, mock) = spawn_mock().await;
    let app = TestApp::builder().telegram(&api, "").build().await;
    let (config, store) = (&app.config, &app.store);
    app.digest().await;
    let chat = 4004;
    mock.modes
        .lock()
        .unwrap()
        .insert(chat, ChatMode::OnePerSecond);
    let junk = "y".repeat(4_000);
    mock.updates.lock().unwrap().extend([
        text_update(1, chat, 4, "/digest 2026-10-28"),
        text_update(2, chat, 4, &format!("/digest {junk}")),
    ]);
    poll_until_settled(config, store, &mock).await;

    let calls = mock.sent_to(chat);
    let sent: Vec<String> = texts(&mock, chat);
    assert!(
        calls.len() >= 3,
        "a digest of several messages and one answer: {}",
        calls.len()
    );
    // Spaced by the chat's limit: no 429 was provoked, so no message was sent twice.
    let mut distinct = sent.clone();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        sent.len(),
        "a message was refused and resent"
    );
    for pair in calls.windows(2) {
        assert!(
            pair[1].at.duration_since(pair[0].at) >= Duration::from_millis(1_000),
            "two messages less than a second apart"
        );
    }
    // The whole digest arrived: its last message carries the generation notes.
    let digest_last = &sent[sent.len() - 2];
    assert!(digest_last.contains("生成模式"), "{digest_last}");
    // A 4,000-character bad argument is quoted short, so the answer fits one message.
    let answer = sent.last().unwrap();
    assert!(
        answer.chars().count() < 300 && answer.contains("yyyy"),
        "{answer}"
    );
}

/// `/time` sets, shows and clears a chat's own delivery hour; bad values name the form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_chooses_its_delivery_hour_with_time() {
    let (api, mock) = spawn_mock().await;
    let app = TestApp::builder().telegram(&api, "").build().await;
    let (config, store) = (&app.config, &app.store);
    let chat = 4004;
    mock.updates.lock().unwrap().extend([
        text_update_from(1, chat, 4, "/subscribe", "en"),
        text_update_from(2, chat, 4, "/time 09:30 Europe/Berlin", "en"),
        text_update_from(3, chat, 4, "/settings", "en"),
        text_update_from(4, chat, 4, "/time 9h30", "en"),
        text_update_from(5, chat, 4, "/time 07:15 Mars/Base", "en"),
    ]);
    poll_until_settled(config, store, &mock).await;
    let got = texts(&mock, chat);
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[1], "Delivery: 09:30 Europe/Berlin");
    assert!(
        got[2].contains("Delivery: 09:30 Europe/Berlin"),
        "{}",
        got[2]
    );
    assert!(
        got[3].contains("\"9h30\"") && got[3].contains("/time HH:MM"),
        "{}",
        got[3]
    );
    assert!(
        got[4].contains("Mars/Base") && got[4].contains("IANA"),
        "{}",
        got[4]
    );
    let s = store
        .subscriber_by_address(&Address::Telegram(chat))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.deliver_at.map(|t| t.to_string()).as_deref(),
        Some("09:30 Europe/Berlin")
    );

    mock.updates
        .lock()
        .unwrap()
        .push_back(text_update_from(6, chat, 4, "/time off", "en"));
    poll_until_settled(config, store, &mock).await;
    assert_eq!(
        texts(&mock, chat).last().unwrap(),
        "Delivery: as soon as the digest is ready"
    );
    let s = store
        .subscriber_by_address(&Address::Telegram(chat))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.deliver_at, None);

    // The cadence: the weekly roll-up on Friday, in the chat's words; a bad day is named.
    mock.updates.lock().unwrap().extend([
        text_update_from(7, chat, 4, "/cadence weekly fri", "en"),
        text_update_from(8, chat, 4, "/cadence weekly funday", "en"),
        text_update_from(9, chat, 4, "/settings", "en"),
    ]);
    poll_until_settled(config, store, &mock).await;
    let got = texts(&mock, chat);
    let last = &got[got.len() - 3..];
    assert_eq!(last[0], "Cadence: only the weekly roll-up, on Friday");
    assert!(
        last[1].contains("funday") && last[1].contains("/cadence daily"),
        "{}",
        last[1]
    );
    assert!(last[2].contains("Cadence: only the weekly roll-up, on Friday"));
    let s = store
        .subscriber_by_address(&Address::Telegram(chat))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.cadence,
        kdigest::subscriber::Cadence::Weekly(chrono::Weekday::Fri)
    );
}

/// The digest in a chat carries 👍/👎 buttons under the message that ends each event; a
/// press is one vote per person (a group's members each have their own), a second press
/// changes it rather than adding one, an unknown event records nothing, and `/why` shows
/// the tally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_vote_with_the_buttons_once_each_and_can_change_their_vote() {
    let (api, mock) = spawn_mock().await;
    let app = TestApp::builder().telegram(&api, "").build().await;
    let (config, store) = (&app.config, &app.store);
    let digest = app.digest().await;
    let chat = -100_500;
    // User 11 administers the group (may set its language); 12 is a member.
    mock.admins.lock().unwrap().push(11);
    mock.updates.lock().unwrap().extend([
        text_update_from(1, chat, 11, "/subscribe", "en"),
        text_update_from(2, chat, 11, "/lang en", "en"),
        text_update_from(3, chat, 11, "/digest 2026-10-28", "en"),
    ]);
    poll_until_settled(config, store, &mock).await;

    // Every event of the digest has its two buttons once, under its message, in order.
    let digest_calls: Vec<_> = mock
        .sent_to(chat)
        .into_iter()
        .filter(|c| c.body["parse_mode"] == "HTML")
        .collect();
    assert!(!digest_calls.is_empty());
    let mut buttons: Vec<(String, String)> = Vec::new();
    for call in &digest_calls {
        // A message that holds no event (the footer with the watch list, when it does not
        // fit beside the last event) has no buttons.
        let Some(rows) = call.body["reply_markup"]["inline_keyboard"].as_array() else {
            continue;
        };
        for row in rows {
            for b in row.as_array().unwrap() {
                buttons.push((
                    b["text"].as_str().unwrap().to_string(),
                    b["callback_data"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    let expected: Vec<(String, String)> = digest
        .events()
        .flat_map(|e| {
            [
                (format!("👍 {}", e.n), format!("vu:{}", e.id)),
                (format!("👎 {}", e.n), format!("vd:{}", e.id)),
            ]
        })
        .collect();
    assert_eq!(buttons, expected);
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());

    let first = digest.events().next().unwrap().id.clone();
    mock.updates.lock().unwrap().extend([
        callback_update(4, chat, 11, &format!("vu:{first}")),
        callback_update(5, chat, 12, &format!("vu:{first}")),
        // The same person again: still one vote.
        callback_update(6, chat, 11, &format!("vu:{first}")),
        // Changed their mind: the vote is replaced.
        callback_update(7, chat, 12, &format!("vd:{first}")),
        callback_update(8, chat, 12, "vu:ffffffffff"),
        text_update_from(9, chat, 11, "/why 1", "en"),
    ]);
    poll_until_settled(config, store, &mock).await;
    let answers: Vec<String> = mock
        .calls_of("AnswerCallbackQuery")
        .iter()
        .map(|c| c.body["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(answers.len(), 5, "{answers:?}");
    // One vote each: the repeat changes nothing, the change replaces the vote.
    let expected = ["👍 1 · 👎 0", "👍 2 · 👎 0", "👍 2 · 👎 0", "👍 1 · 👎 1"];
    for (answer, tally) in answers.iter().zip(expected) {
        assert!(answer.ends_with(tally), "{answers:?}");
    }
    assert!(
        answers[4].contains("no longer in the archive"),
        "{}",
        answers[4]
    );
    assert_eq!(
        store.tally(&first).await.unwrap(),
        kdigest::feedback::Tally { up: 1, down: 1 }
    );
    assert_eq!(store.tally("ffffffffff").await.unwrap().total(), 0);
    let why = texts(&mock, chat).last().unwrap().clone();
    assert!(why.contains("Readers: 👍 1 · 👎 1"), "{why}");
}

/// A chat follows a project with `/follow`: its story reaches the chat whatever the
/// threshold and layers, marked ★; `/settings` and a bare `/follow` list what is followed;
/// `/unfollow` of something not followed says what is; after `/unfollow` the story is
/// held back by the threshold again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_follows_a_project_whose_stories_pass_its_filter_marked() {
    let (api, mock) = spawn_mock().await;
    let app = TestApp::builder().telegram(&api, "").build().await;
    let (config, store) = (&app.config, &app.store);
    app.digest().await;
    let chat = 5005;
    mock.updates.lock().unwrap().extend([
        text_update_from(1, chat, 5, "/subscribe benchmark 100", "en"),
        text_update_from(2, chat, 5, "/lang en", "en"),
        text_update_from(3, chat, 5, "/follow", "en"),
        text_update_from(4, chat, 5, "/follow \"Tessera\"", "en"),
        text_update_from(5, chat, 5, "/follow flash  attention", "en"),
        text_update_from(6, chat, 5, "/unfollow triton", "en"),
        text_update_from(7, chat, 5, "/settings", "en"),
        text_update_from(8, chat, 5, "/digest 2026-10-28", "en"),
    ]);
    poll_until_settled(config, store, &mock).await;
    assert_eq!(
        mock.problems.lock().unwrap().clone(),
        Vec::<String>::new(),
        "every request matches the Bot API spec"
    );
    let menu = mock.calls_of("SetMyCommands");
    assert!(
        menu[1].body["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["command"] == "follow")
    );
    let got = texts(&mock, chat);
    assert!(got[2].starts_with("Following: nothing yet"), "{}", got[2]);
    assert_eq!(got[3], "Following: \"Tessera\"");
    assert_eq!(got[4], "Following: \"Tessera\", \"flash attention\"");
    assert_eq!(
        got[5],
        "\"triton\" is not followed. Following: \"Tessera\", \"flash attention\""
    );
    assert!(
        got[6].contains("Following: \"Tessera\", \"flash attention\""),
        "{}",
        got[6]
    );
    // Threshold 100 and the benchmark layer: only the followed story, marked.
    let digest = got[7..].join("\n");
    assert!(digest.contains("★ Tessera"), "{digest:.800}");
    assert!(!digest.contains("CUTLASS 5.0.0"), "{digest:.800}");
    let s = store
        .subscriber_by_address(&Address::Telegram(chat))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.filter.follows, ["Tessera", "flash attention"]);

    mock.updates.lock().unwrap().extend([
        text_update_from(9, chat, 5, "/unfollow TESSERA", "en"),
        text_update_from(10, chat, 5, "/digest 2026-10-28", "en"),
    ]);
    poll_until_settled(config, store, &mock).await;
    let got = texts(&mock, chat);
    let after = got
        .iter()
        .rposition(|t| t == "Following: \"flash attention\"");
    let after = &got[after.expect("the unfollow is confirmed") + 1..].join("\n");
    assert!(!after.contains("Tessera"), "{after:.800}");
}
