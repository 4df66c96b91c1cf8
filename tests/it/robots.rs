//! The team-chat robots (Feishu, DingTalk, WeCom, Slack) through the real delivery engine
//! and reqwest against the loopback mock of the test kit (crates/testkit/src/robots.rs): payloads valid and within each
//! platform's size limits, signed where the robot wants it, keywords added, filters
//! applied, rate limits never exceeded with multi-message digests to 50 robots, no
//! broadcast mentions, and every documented error code acted on.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use kdigest::channels::{Address, Options};
use kdigest::deliver::engine::Engine;
use kdigest::model::{Digest, Filter, Score};
use kdigest::store::Store;
use kdigest::subscriber::Status;

use kdigest_testkit::TestApp;
use kdigest_testkit::app::run_until_idle;
use kdigest_testkit::robots::{self, Platform, RobotConf, RobotMock, Scripted};

const DELIVERY_TOML: &str = "[delivery]\nmax_attempts = 3\nbackoff_base_secs = 0.2\nbackoff_max_secs = 3600.0\ntimeout_secs = 2.0\n";
const ROBOTS: usize = 50;
const KEYWORD: &str = "GPU日报";

/// The demo day's digest with every event repeated `copies` times (distinct ids, titles
/// and numbers), for digests that take several messages on every platform.
fn enlarged(d: &Digest, copies: usize) -> Digest {
    let mut big = d.clone();
    let mut n = 0;
    let mut grow = |events: &Vec<kdigest::model::DigestEvent>| {
        let mut out = Vec::new();
        for k in 0..copies {
            for e in events {
                let mut e = e.clone();
                n += 1;
                e.n = n;
                e.id = format!("{}-{k}", e.id);
                if k > 0 {
                    e.title = format!("{} (#{k})", e.title);
                }
                out.push(e);
            }
        }
        out
    };
    big.key_changes = grow(&d.key_changes);
    big.papers = grow(&d.papers);
    big.other_updates = grow(&d.other_updates);
    big
}

struct Setup {
    mock: Arc<RobotMock>,
    api: String,
    engine: Arc<Engine>,
    digest: Digest,
    app: TestApp,
}

async fn setup(copies: usize) -> Setup {
    let (api, mock) = robots::spawn().await;
    let app = TestApp::builder().toml(DELIVERY_TOML).build().await;
    let base = app.digest().await;
    Setup {
        mock,
        api,
        engine: app.engine(),
        digest: enlarged(&base, copies),
        app,
    }
}

/// The robot URL of `token` on the mock, as a subscriber address.
fn url(platform: Platform, api: &str, token: &str) -> String {
    match platform {
        Platform::Feishu => format!("feishu:{api}/open-apis/bot/v2/hook/{token}"),
        Platform::DingTalk => format!("dingtalk:{api}/robot/send?access_token={token}"),
        Platform::WeCom => format!("wecom:{api}/cgi-bin/webhook/send?key={token}"),
        Platform::Slack => format!("slack:{api}/services/{token}"),
    }
}

fn token(platform: Platform, i: usize) -> String {
    match platform {
        Platform::Slack => format!("T0001/B{i:04}/secret{i:04}"),
        _ => format!("robot-token-{i:04}"),
    }
}

async fn subscribe(
    store: &Store,
    address: &str,
    options: Options,
    layers: &[&str],
    language: &str,
) -> i64 {
    let address = Address::parse(address)
        .unwrap()
        .with_options(options)
        .unwrap();
    let filter = Filter {
        layers: layers.iter().map(|s| s.to_string()).collect(),
        min_score: Score::from_f64(0.0),
        boost: None,
        follows: Vec::new(),
    };
    store
        .add_subscriber(
            &address,
            &filter,
            language,
            &Status::Active,
            false,
            Utc::now(),
        )
        .await
        .unwrap()
        .unwrap()
}

/// 50 robots of one platform receive a digest of `copies` × the demo day: every fifth one
/// filtered to the runtime layer, Feishu and DingTalk robots signed (even ones) and
/// keyword-protected (every third).
async fn fan_out(platform: Platform, copies: usize, min_gap: Duration) {
    let s = setup(copies).await;
    let signs = matches!(platform, Platform::Feishu | Platform::DingTalk);
    let secret_env = format!("KDIGEST_TEST_ROBOT_SECRET_{platform:?}").to_uppercase();
    let secret = format!("robot-secret-{platform:?}");
    unsafe { std::env::set_var(&secret_env, &secret) };
    let mut filtered = BTreeSet::new();
    for i in 0..ROBOTS {
        let signed = signs && i % 2 == 0;
        let keyword = signs && i % 3 == 1;
        let t = token(platform, i);
        s.mock.add(
            platform,
            &t,
            RobotConf {
                secret: signed.then(|| secret.clone()),
                keyword: keyword.then(|| KEYWORD.to_string()),
                ..Default::default()
            },
        );
        let options = Options {
            secret_env: signed.then(|| secret_env.clone()),
            keyword: keyword.then(|| KEYWORD.to_string()),
        };
        let layers: &[&str] = if i % 5 == 0 { &["runtime"] } else { &[] };
        if i % 5 == 0 {
            filtered.insert(t.clone());
        }
        let language = if i % 2 == 0 { "zh-CN" } else { "en" };
        let address = url(platform, &s.api, &t);
        assert!(
            !Address::parse(&address).unwrap().to_string().contains(&t),
            "a robot's token never shows"
        );
        subscribe(&s.app.store, &address, options, layers, language).await;
    }
    assert_eq!(s.engine.plan(&s.digest).await.unwrap(), ROBOTS as u64);
    run_until_idle(&s.engine, Duration::from_secs(10)).await;

    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
    let not_runtime: Vec<String> = s
        .digest
        .events()
        .filter(|e| !e.layers.iter().any(|l| l == "runtime"))
        .map(|e| e.title.chars().take(24).collect())
        .collect();
    assert!(!not_runtime.is_empty());
    let runtime: Vec<String> = s
        .digest
        .events()
        .filter(|e| e.layers.iter().any(|l| l == "runtime"))
        .map(|e| e.title.chars().take(24).collect())
        .collect();
    let mut fewest = usize::MAX;
    for i in 0..ROBOTS {
        let t = token(platform, i);
        let got = s.mock.accepted(platform, &t);
        assert_eq!(
            got.len(),
            s.mock.requests(platform, &t),
            "{platform:?} {t}: every request was accepted (signed, keyword, within limits)"
        );
        assert!(!got.is_empty(), "{platform:?} {t} received nothing");
        for pair in got.windows(2) {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap >= min_gap,
                "{platform:?} {t}: messages {gap:?} apart, under {min_gap:?}"
            );
        }
        let text: String = got.iter().map(|r| r.body.to_string()).collect();
        if filtered.contains(&t) {
            for title in &not_runtime {
                assert!(
                    !text.contains(title.as_str()),
                    "{t} is filtered to runtime but got {title}"
                );
            }
            assert!(
                runtime.iter().any(|title| text.contains(title.as_str())),
                "{t} got its runtime events"
            );
        } else {
            fewest = fewest.min(got.len());
        }
    }
    assert!(
        fewest >= 3,
        "every unfiltered robot got a digest of 3 or more messages (fewest {fewest})"
    );
    let counts = s.app.store.delivery_counts(s.digest.date).await.unwrap();
    assert_eq!(counts.sent, ROBOTS as i64, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feishu_cards_reach_50_signed_and_keyword_robots_within_20kb_and_5_per_second() {
    fan_out(Platform::Feishu, 5, Duration::from_millis(990)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dingtalk_markdown_reaches_50_signed_robots_at_under_20_a_minute() {
    fan_out(Platform::DingTalk, 5, Duration::from_millis(3100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wecom_markdown_reaches_50_robots_within_4096_bytes_at_under_20_a_minute() {
    fan_out(Platform::WeCom, 1, Duration::from_millis(3100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_block_kit_reaches_50_webhooks_within_50_blocks_at_one_a_second() {
    fan_out(Platform::Slack, 4, Duration::from_millis(990)).await;
}

/// What happened to one subscriber: its status and reason, its delivery's status, and
/// whether its destination is paused for at least `paused_for`.
async fn outcome(db: &sqlx::SqlitePool, id: i64) -> (String, String, String) {
    let (status, reason): (String, Option<String>) =
        sqlx::query_as("SELECT status, status_reason FROM subscribers WHERE id = $1")
            .bind(id)
            .fetch_one(db)
            .await
            .unwrap();
    let delivery: String =
        sqlx::query_scalar("SELECT status FROM deliveries WHERE subscriber_id = $1")
            .bind(id)
            .fetch_one(db)
            .await
            .unwrap();
    (status, reason.unwrap_or_default(), delivery)
}

async fn paused_secs(db: &sqlx::SqlitePool, channel: &str) -> Vec<i64> {
    let until: Vec<i64> =
        sqlx::query_scalar("SELECT paused_until FROM destinations WHERE channel = $1")
            .bind(channel)
            .fetch_all(db)
            .await
            .unwrap();
    let now = Utc::now().timestamp_millis();
    until.into_iter().map(|u| (u - now) / 1000).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_platform_error_code_is_acted_on_as_documented() {
    let s = setup(1).await;
    let db = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        s.app.dir.path().join("kdigest.sqlite").display()
    ))
    .await
    .unwrap();
    let wrong_env = "KDIGEST_TEST_ROBOT_WRONG_SECRET";
    unsafe { std::env::set_var(wrong_env, "not-the-robots-secret") };
    let known = |p: Platform, t: &str, conf: RobotConf| s.mock.add(p, t, conf);
    let script = |answers: Vec<Scripted>| RobotConf {
        script: answers.into(),
        ..Default::default()
    };
    let keyword_robot = || RobotConf {
        keyword: Some(KEYWORD.into()),
        ..Default::default()
    };
    let signed_robot = || RobotConf {
        secret: Some("the-robots-secret".into()),
        ..Default::default()
    };
    use Platform::*;
    known(Feishu, "kw", keyword_robot());
    known(Feishu, "badsig", signed_robot());
    known(
        Feishu,
        "busy",
        script(vec![Scripted::Code(11232, "frequency limited psm")]),
    );
    known(
        Feishu,
        "flaky",
        script(vec![Scripted::Http(500, "oops", None)]),
    );
    known(DingTalk, "kw", keyword_robot());
    known(DingTalk, "badsig", signed_robot());
    known(
        DingTalk,
        "throttled",
        script(vec![Scripted::Code(
            130101,
            "send too fast, exceed 20 times per minute",
        )]),
    );
    known(
        WeCom,
        "freq",
        script(vec![Scripted::Code(45009, "api freq out of limit")]),
    );
    known(
        WeCom,
        "toolong",
        script(vec![Scripted::Code(
            40058,
            "markdown.content exceed max length 4096",
        )]),
    );
    known(
        Slack,
        "T1/B1/archived",
        script(vec![Scripted::Http(410, "channel_is_archived", None)]),
    );
    known(
        Slack,
        "T1/B1/blocks",
        script(vec![Scripted::Http(400, "invalid_blocks", None)]),
    );
    known(
        Slack,
        "T1/B1/limited",
        script(vec![Scripted::Http(429, "rate_limited", Some(1))]),
    );

    let add = |p: Platform, t: &'static str, secret_env: Option<&str>| {
        let store = s.app.store.clone();
        let address = url(p, &s.api, t);
        let options = Options {
            secret_env: secret_env.map(str::to_string),
            keyword: None,
        };
        async move { subscribe(&store, &address, options, &[], "en").await }
    };
    let f_gone = add(Feishu, "gone", None).await;
    let f_kw = add(Feishu, "kw", None).await;
    let f_badsig = add(Feishu, "badsig", Some(wrong_env)).await;
    let f_busy = add(Feishu, "busy", None).await;
    let f_flaky = add(Feishu, "flaky", None).await;
    let d_gone = add(DingTalk, "gone", None).await;
    let d_kw = add(DingTalk, "kw", None).await;
    let d_badsig = add(DingTalk, "badsig", Some(wrong_env)).await;
    let d_throttled = add(DingTalk, "throttled", None).await;
    let w_gone = add(WeCom, "gone", None).await;
    let w_freq = add(WeCom, "freq", None).await;
    let w_toolong = add(WeCom, "toolong", None).await;
    let s_gone = add(Slack, "T1/B1/gone", None).await;
    let s_archived = add(Slack, "T1/B1/archived", None).await;
    let s_blocks = add(Slack, "T1/B1/blocks", None).await;
    let s_limited = add(Slack, "T1/B1/limited", None).await;

    s.engine.plan(&s.digest).await.unwrap();
    run_until_idle(&s.engine, Duration::from_secs(5)).await;

    let disabled = |(status, reason, delivery): (String, String, String), why: &str| {
        assert_eq!(status, "disabled", "{reason}");
        assert!(reason.contains(why), "reason {reason:?} should say {why:?}");
        assert_eq!(delivery, "failed");
    };
    disabled(outcome(&db, f_gone).await, "19001");
    disabled(outcome(&db, f_kw).await, "--keyword");
    disabled(outcome(&db, d_gone).await, "300001");
    disabled(outcome(&db, d_kw).await, "--keyword");
    disabled(outcome(&db, w_gone).await, "93000");
    disabled(outcome(&db, s_gone).await, "no_service");
    disabled(outcome(&db, s_archived).await, "channel_is_archived");

    // A refused signature fails that delivery with the fix, is not retried, and never
    // disables or pauses the channel (it is the robot's own setting, or our clock).
    for (id, platform, t) in [(f_badsig, Feishu, "badsig"), (d_badsig, DingTalk, "badsig")] {
        let (status, _, delivery) = outcome(&db, id).await;
        assert_eq!((status.as_str(), delivery.as_str()), ("active", "failed"));
        assert_eq!(s.mock.requests(platform, t), 1, "{platform:?}: not retried");
    }
    // A message the platform refuses fails alone; the subscriber stays.
    for id in [w_toolong, s_blocks] {
        let (status, _, delivery) = outcome(&db, id).await;
        assert_eq!((status.as_str(), delivery.as_str()), ("active", "failed"));
    }
    // Retried and delivered: a 500, a 429 with Retry-After.
    for id in [f_flaky, s_limited] {
        assert_eq!(outcome(&db, id).await.2, "sent");
    }
    // Frequency limits pause that robot and keep its delivery queued: Feishu and WeCom for
    // a minute (their windows), DingTalk for the 10 minutes it throttles.
    for (id, channel, at_least) in [
        (f_busy, "feishu", 50),
        (w_freq, "wecom", 50),
        (d_throttled, "dingtalk", 590),
    ] {
        let (status, _, delivery) = outcome(&db, id).await;
        assert_eq!(
            (status.as_str(), delivery.as_str()),
            ("active", "pending"),
            "{channel}"
        );
        let paused = paused_secs(&db, channel).await;
        assert!(
            paused.iter().any(|secs| *secs >= at_least),
            "{channel} robot paused for at least {at_least} s: {paused:?}"
        );
    }
    assert_eq!(
        s.mock.problems.lock().unwrap().clone(),
        Vec::<String>::new()
    );
}

fn token_of(page: &str) -> String {
    page.split("name=\"token\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("the code form carries a token")
        .to_string()
}

fn code_of(note: &str) -> String {
    note.split(|c: char| !c.is_ascii_digit())
        .find(|w| w.len() == 8)
        .expect("an 8-digit code in the message")
        .to_string()
}

/// The form takes only https robot URLs unless `signup.loopback_robots` (tests) says
/// otherwise: a visitor cannot make the server post to its own ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_chat_form_takes_only_https_robot_urls() {
    let (api, mock) = robots::spawn().await;
    mock.add(Platform::Slack, "T/B/x", RobotConf::default());
    let web = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", web.local_addr().unwrap());
    let app = TestApp::start().await;
    let config = &app.config;
    let store = &app.store;
    kdigest_testkit::app::serve_account(
        web,
        store,
        config,
        kdigest::config::Secret::new("k"),
        None,
    );
    for robot in [
        format!("{api}/services/T/B/x"),
        "https://user@hooks.slack.com/services/T/B/x".to_string(),
        "https://hooks.slack.com:8443/services/T/B/x".to_string(),
        "https://evil.example/services/T/B/x".to_string(),
    ] {
        let answer = reqwest::Client::new()
            .post(format!("{base}subscribe/team"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "robot={}",
                url::form_urlencoded::byte_serialize(robot.as_bytes()).collect::<String>()
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{robot}");
    }
    assert_eq!(
        mock.requests(Platform::Slack, "T/B/x"),
        0,
        "nothing was posted"
    );
}

/// Feed text written to mention everyone, inject links or start markup stays text on every
/// platform, in both languages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_feed_text_cannot_mention_link_or_format_on_any_robot() {
    let s = setup(1).await;
    let mut d = s.digest.clone();
    let hostile = "<at id=all></at> <at user_id=\"all\">x</at> <!channel> <!here> <@all> @all [click](http://evil.example) <http://evil.example|click> &lt;!here&gt;\n# heading\n- item *bold* `code`";
    d.overview = hostile.into();
    for e in d.key_changes.iter_mut().chain(d.papers.iter_mut()) {
        e.title = hostile.into();
        e.summary = hostile.into();
        e.why_it_matters = hostile.into();
    }
    for w in d.watchlist.iter_mut() {
        w.text = hostile.into();
    }
    use kdigest::channels::Channel;
    fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    for channel in [
        Channel::Feishu,
        Channel::Dingtalk,
        Channel::Wecom,
        Channel::Slack,
    ] {
        for language in ["zh-CN", "en"] {
            let renderer = kdigest::render::Renderer::new(language, None).unwrap();
            for message in channel.render(&d, &renderer).unwrap() {
                let v: serde_json::Value = serde_json::from_str(&message).unwrap();
                assert_ne!(v["at"]["isAtAll"], true);
                let mut texts = Vec::new();
                strings(&v, &mut texts);
                // Slack has no [text](url) links: only its <url|text> form is a link there.
                let markdown_link = if channel == Channel::Slack {
                    "<http://evil"
                } else {
                    "](http://evil"
                };
                for text in texts {
                    for bad in [
                        "<at",
                        "<!channel>",
                        "<!here>",
                        "<@",
                        markdown_link,
                        "<http://evil",
                    ] {
                        assert!(
                            !text.contains(bad),
                            "{channel:?} {language}: {bad} in {text}"
                        );
                    }
                    for line in text.lines() {
                        let line = line.trim_start();
                        assert!(
                            !line.starts_with("# heading") && !line.starts_with("- item"),
                            "{channel:?} {language}: feed text starts a block: {line}"
                        );
                    }
                }
            }
        }
    }
}

/// The team-chat form: the robot gets a code, the page asks for it, a wrong code (and a
/// forged token) does nothing, the right one activates; limited per robot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_chat_signs_up_with_the_code_its_robot_received() {
    let (api, mock) = robots::spawn().await;
    mock.add(Platform::WeCom, "team-key", RobotConf::default());
    mock.add(
        Platform::Feishu,
        "kw-robot",
        RobotConf {
            keyword: Some(KEYWORD.into()),
            ..Default::default()
        },
    );
    let web = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", web.local_addr().unwrap());
    let app = TestApp::builder()
        .toml("[signup]\nper_ip_per_hour = 50\nper_address_per_day = 2\nloopback_robots = true\n")
        .build()
        .await;
    let config = &app.config;
    let store = &app.store;
    let secret = kdigest::config::Secret::new("team-signup-test-key");
    kdigest_testkit::app::serve_account(web, store, config, secret.clone(), None);
    let client = reqwest::Client::new();
    let post = |path: &str, body: String| {
        client
            .post(format!("{base}{path}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let form = client
        .get(format!("{base}subscribe/team?lang=en"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        form.contains("name=\"robot\"") && form.contains("name=\"layers\""),
        "{form}"
    );

    let robot = format!("{api}/cgi-bin/webhook/send?key=team-key");
    let body = |robot: &str, extra: &str| {
        format!(
            "robot={}&layers=runtime&min_score=70&language=en{extra}",
            url::form_urlencoded::byte_serialize(robot.as_bytes()).collect::<String>()
        )
    };
    let bad_time = post("subscribe/team", body(&robot, "&at=25%3A00"))
        .await
        .unwrap();
    assert_eq!(
        bad_time.status(),
        400,
        "an invalid delivery time is refused before anything is sent"
    );
    assert_eq!(mock.requests(Platform::WeCom, "team-key"), 0);
    let answer = post(
        "subscribe/team",
        body(&robot, "&at=08%3A15&tz=Asia%2FShanghai"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    let page = answer.text().await.unwrap();
    let token = token_of(&page);
    // The robot received the code.
    let got = mock.accepted(Platform::WeCom, "team-key");
    assert_eq!(got.len(), 1);
    let note = got[0].body["text"]["content"].as_str().unwrap().to_string();
    let code = code_of(&note);
    let address = Address::parse(&format!("wecom:{robot}")).unwrap();
    let pending = store
        .subscriber_by_address(&address)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pending.status, Status::Pending);
    assert_eq!(pending.filter.min_score, Score::from_f64(70.0));
    assert_eq!(
        pending.deliver_at.map(|t| t.to_string()).as_deref(),
        Some("08:15 Asia/Shanghai"),
        "the form's delivery time"
    );

    // A wrong code, and the email confirmation with this token, change nothing.
    let wrong = if code == "00000000" {
        "00000001"
    } else {
        "00000000"
    };
    let answer = post(
        "subscribe/team/confirm",
        format!("token={token}&code={wrong}"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 400);
    let answer = client
        .post(format!("{base}confirm/{token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        404,
        "a team-chat token is not an email confirmation"
    );
    let forged = token.replacen(&pending.id.to_string(), &(pending.id + 1).to_string(), 1);
    let answer = post(
        "subscribe/team/confirm",
        format!("token={forged}&code={code}"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 404);
    assert_eq!(
        store.subscriber(pending.id).await.unwrap().unwrap().status,
        Status::Pending
    );
    // The right code activates.
    let answer = post(
        "subscribe/team/confirm",
        format!("token={token}&code={code}"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(
        store.subscriber(pending.id).await.unwrap().unwrap().status,
        Status::Active
    );

    // A keyword robot: the keyword given in the form travels with every message.
    let kw_robot = format!("{api}/open-apis/bot/v2/hook/kw-robot");
    let kw_form = body(
        &kw_robot,
        &format!(
            "&keyword={}",
            url::form_urlencoded::byte_serialize(KEYWORD.as_bytes()).collect::<String>()
        ),
    );
    let answer = post("subscribe/team", kw_form.clone()).await.unwrap();
    assert_eq!(answer.status(), 200);
    let kw_token = token_of(&answer.text().await.unwrap());
    let got = mock.accepted(Platform::Feishu, "kw-robot");
    assert_eq!(got.len(), 1);
    let kw_code = code_of(got[0].body["content"]["text"].as_str().unwrap());
    // The WeCom robot's code does nothing for this sign-up; five tries an hour, then even
    // the right code is refused.
    for attempt in [
        code.clone(),
        wrong.to_string(),
        wrong.into(),
        wrong.into(),
        wrong.into(),
    ] {
        let answer = post(
            "subscribe/team/confirm",
            format!("token={kw_token}&code={attempt}"),
        )
        .await
        .unwrap();
        assert_eq!(answer.status(), 400, "{attempt}");
    }
    let answer = post(
        "subscribe/team/confirm",
        format!("token={kw_token}&code={kw_code}"),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 429);
    // Signing up again gives a new code: the one in the chat's history is void.
    let again = post("subscribe/team", kw_form).await.unwrap();
    assert_eq!(again.status(), 200);
    let got = mock.accepted(Platform::Feishu, "kw-robot");
    let new_code = code_of(got[1].body["content"]["text"].as_str().unwrap());
    assert_ne!(new_code, kw_code);

    // Not a robot URL: a clear error; a removed robot: its refusal, and no code page.
    let answer = post("subscribe/team", body("https://example.org/hook", ""))
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    assert!(answer.text().await.unwrap().contains("Feishu"));
    let gone = format!("{api}/robot/send?access_token=removed");
    let answer = post("subscribe/team", body(&gone, "")).await.unwrap();
    assert_eq!(answer.status(), 400);
    assert!(answer.text().await.unwrap().contains("300001"));
    // Per robot and day: the third sign-up of one robot is refused.
    assert_eq!(
        post("subscribe/team", body(&gone, ""))
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(
        post("subscribe/team", body(&gone, ""))
            .await
            .unwrap()
            .status(),
        429
    );
    assert_eq!(mock.problems.lock().unwrap().clone(), Vec::<String>::new());
}

/// A quiet day renders as one short message on every robot, saying so in the reader's
/// language (it is sent only to subscribers who asked for a note on empty days).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_day_is_one_short_message_saying_so() {
    let s = setup(1).await;
    let mut quiet = s.digest.clone();
    quiet.key_changes.clear();
    quiet.papers.clear();
    quiet.other_updates.clear();
    quiet.watchlist.clear();
    use kdigest::channels::Channel;
    for channel in [
        Channel::Feishu,
        Channel::Dingtalk,
        Channel::Wecom,
        Channel::Slack,
    ] {
        for language in ["zh-CN", "en"] {
            let renderer = kdigest::render::Renderer::new(language, None).unwrap();
            let messages = channel.render(&quiet, &renderer).unwrap();
            assert_eq!(messages.len(), 1, "{channel:?} {language}");
            let empty = renderer.locale().get("empty");
            assert!(
                messages[0].contains(empty),
                "{channel:?} {language}: {}",
                messages[0]
            );
            serde_json::from_str::<serde_json::Value>(&messages[0]).unwrap();
        }
    }
}
