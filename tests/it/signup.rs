//! Email sign-up over HTTP: the form, double opt-in through a real SMTP server, confirmation
//! (GET shows, POST confirms, once), preferences, rate limits per client IP and per address,
//! forged and expired tokens; and the DKIM signature, checked by dkimpy.

use std::sync::Arc;

use base64::Engine as _;
use chrono::Utc;
use kdigest::channels::email::EmailSender;
use kdigest::config::Secret;
use kdigest::model::Score;
use kdigest::subscriber::{Address, Status};
use kdigest::tokens::{Purpose, link, sign};

use kdigest_testkit::TestApp;
use kdigest_testkit::app::serve_account;
use kdigest_testkit::smtp::{Mails, header, parts, spawn_smtp};

fn email_config(smtp_port: u16, public_url: &str, extra: &str) -> String {
    format!(
        "[web]\npublic_url = \"{public_url}\"\n[email]\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {smtp_port}\ntls = \"none\"\nfrom = \"kdigest <digest@example.org>\"\nlist_id = \"digest.example.org\"\n{extra}"
    )
}

/// The link in the newest mail to `to` (confirmation or preferences).
fn confirm_link(mails: &Mails, to: &str) -> String {
    let mails = mails.lock().unwrap();
    let (_, mail) = mails
        .iter()
        .rev()
        .find(|(rcpt, _)| rcpt.iter().any(|r| r == to))
        .unwrap_or_else(|| panic!("no mail to {to}"));
    let text = parts(mail, "text/plain").join("\n");
    let start = text.find("http://").expect("a link in the text part");
    text[start..].split_whitespace().next().unwrap().to_string()
}

fn mails_to(mails: &Mails, to: &str) -> usize {
    let mails = mails.lock().unwrap();
    mails
        .iter()
        .filter(|(rcpt, _)| rcpt.iter().any(|r| r == to))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_sign_up_confirm_once_and_change_their_preferences() {
    let (smtp_port, mails) = spawn_smtp();
    let web = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", web.local_addr().unwrap());
    let extra = email_config(
        smtp_port,
        &base,
        "[signup]\nper_ip_per_hour = 3\nper_address_per_day = 2\ntrust_forwarded_for = true\n",
    );
    let app = TestApp::builder().toml(&extra).build().await;
    let config = &app.config;
    let store = &app.store;
    let secret = Secret::new("signup-test-key");
    let mailer =
        EmailSender::with_secrets(&config.channels.email, secret.clone(), None, None).unwrap();
    serve_account(web, store, config, secret.clone(), Some(Arc::new(mailer)));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // Each part of the test comes from its own client address (through the trusted proxy
    // header), so the per-IP limit is tested on its own at the end.
    let post = |path: String, body: &str, ip: &str| {
        client
            .post(format!("{base}{path}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-forwarded-for", format!("198.51.100.250, {ip}"))
            .body(body.to_string())
            .send()
    };

    // The form, in English on request, with every layer, in Chinese by Accept-Language.
    let form = client
        .get(format!("{base}subscribe?lang=en"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    assert!(
        form.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    let html = form.text().await.unwrap();
    assert!(html.contains("<html lang=\"en\">") && html.contains("name=\"email\""));
    for layer in config.layer_names() {
        assert!(html.contains(&format!("value=\"{layer}\"")), "{layer}");
    }
    assert!(!html.contains("<script"), "no JavaScript needed");
    let zh = client
        .get(format!("{base}subscribe"))
        .header("accept-language", "zh-CN,zh;q=0.9")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(zh.contains("<html lang=\"zh-CN\">") && zh.contains("订阅"));

    // A body that is not a form (text/plain, as a cross-site form can send): refused
    // before it is read, nothing stored.
    let plain = client
        .post(format!("{base}subscribe"))
        .header("content-type", "text/plain")
        .header("x-forwarded-for", "198.51.100.250, 192.0.2.9")
        .body("email=plain@example.org")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 415);

    // A bad address: 400 naming the problem, the typed values kept, nothing stored or sent.
    let bad = post(
        "subscribe".into(),
        "email=not-an-address&layers=runtime&min_score=55&language=en",
        "192.0.2.1",
    )
    .await
    .unwrap();
    assert_eq!(bad.status(), 400);
    let body = bad.text().await.unwrap();
    assert!(
        body.contains("is not an email address") && body.contains("value=\"not-an-address\""),
        "{body}"
    );
    assert!(body.contains("value=\"55\""), "the threshold typed is kept");
    let bad_layer = post(
        "subscribe".into(),
        "email=a@example.org&layers=gpu&language=en",
        "192.0.2.1",
    )
    .await
    .unwrap();
    assert_eq!(bad_layer.status(), 400);
    assert!(
        bad_layer
            .text()
            .await
            .unwrap()
            .contains("gpu&quot; is not a layer")
    );
    assert!(store.subscribers().await.unwrap().is_empty());
    assert!(mails.lock().unwrap().is_empty());

    // A good sign-up: pending with the chosen filter, one confirmation email, no list headers.
    let ok = post(
        "subscribe".into(),
        "email=reader@example.org&layers=kernel_codegen&layers=runtime&min_score=60&language=en&at=07%3A45&tz=America%2FLos_Angeles",
        "192.0.2.2",
    )
    .await
    .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.text().await.unwrap().contains("Check your inbox"));
    let address = Address::parse("email:reader@example.org").unwrap();
    let reader = store
        .subscriber_by_address(&address)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.status, Status::Pending);
    assert_eq!(
        reader.filter.layers.iter().collect::<Vec<_>>(),
        ["kernel_codegen", "runtime"]
    );
    assert_eq!(reader.filter.min_score, Score::from_tenths(600));
    assert_eq!(reader.language, "en");
    assert_eq!(
        reader.deliver_at.map(|t| t.to_string()).as_deref(),
        Some("07:45 America/Los_Angeles"),
        "the sign-up form's delivery time"
    );
    assert_eq!(mails_to(&mails, "reader@example.org"), 1);
    {
        let mails = mails.lock().unwrap();
        let mail = &mails[0].1;
        assert!(header(mail, "Subject").unwrap().contains("Confirm"));
        assert!(header(mail, "List-Unsubscribe").is_none());
        // Gmail refuses mail without a Message-ID; one-off mails carry their own.
        let id = header(mail, "Message-ID").expect("a Message-ID");
        assert!(
            id.starts_with('<') && id.ends_with('>') && id.contains('@'),
            "{id}"
        );
        assert!(
            header(mail, "Content-Type")
                .unwrap()
                .starts_with("multipart/alternative")
        );
    }
    let confirm = confirm_link(&mails, "reader@example.org");
    assert!(
        confirm.starts_with(&format!("{base}confirm/{}.", reader.id)),
        "{confirm}"
    );

    // GET shows a button and changes nothing (link scanners); POST confirms, once.
    let shown = client.get(&confirm).send().await.unwrap();
    assert_eq!(shown.status(), 200);
    assert!(
        shown
            .text()
            .await
            .unwrap()
            .contains("<form method=\"post\"")
    );
    let status = |id| {
        let store = store.clone();
        async move { store.subscriber(id).await.unwrap().map(|s| s.status) }
    };
    assert_eq!(status(reader.id).await, Some(Status::Pending));
    let path = confirm.trim_start_matches(&base).to_string();
    let confirmed = post(path.clone(), "", "192.0.2.3").await.unwrap();
    assert_eq!(confirmed.status(), 200);
    assert!(confirmed.text().await.unwrap().contains("confirmed"));
    assert_eq!(status(reader.id).await, Some(Status::Active));
    let again = post(path, "", "192.0.2.3").await.unwrap();
    assert_eq!(again.status(), 200, "pressed twice: a page that says so");
    assert!(again.text().await.unwrap().contains("already confirmed"));
    assert_eq!(status(reader.id).await, Some(Status::Active));

    // Signing up again while active: the same answer, nothing changes, and the mailbox
    // (not the page) learns it is subscribed: a link to its preferences.
    let repeat = post(
        "subscribe".into(),
        "email=reader@example.org&language=en",
        "192.0.2.4",
    )
    .await
    .unwrap();
    assert_eq!(repeat.status(), 200);
    assert!(repeat.text().await.unwrap().contains("Check your inbox"));
    assert_eq!(mails_to(&mails, "reader@example.org"), 2);
    let known = confirm_link(&mails, "reader@example.org");
    assert!(
        known.starts_with(&format!("{base}preferences/{}.", reader.id)),
        "{known}"
    );
    assert_eq!(status(reader.id).await, Some(Status::Active));

    // Expired and forged confirmation tokens: 404 for GET and POST, the sign-up stays pending.
    post(
        "subscribe".into(),
        "email=late@example.org&language=en",
        "192.0.2.5",
    )
    .await
    .unwrap();
    let late = store
        .subscriber_by_address(&Address::parse("email:late@example.org").unwrap())
        .await
        .unwrap()
        .unwrap();
    let expired = sign(
        &secret,
        Purpose::Confirm,
        late.id,
        Utc::now().timestamp() - 1,
    );
    let forged = sign(&Secret::new("wrong-key"), Purpose::Confirm, late.id, 0);
    let other_purpose = sign(&secret, Purpose::Unsubscribe, late.id, 0);
    for token in [expired, forged, other_purpose, "garbage".into()] {
        let get = client
            .get(format!("{base}confirm/{token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(get.status(), 404, "{token}");
        let post = post(format!("confirm/{token}"), "", "192.0.2.5")
            .await
            .unwrap();
        assert_eq!(post.status(), 404, "{token}");
    }
    assert_eq!(status(late.id).await, Some(Status::Pending));

    // Preferences: the form shows the current choice; POST changes it; bad input changes nothing.
    let prefs = link(
        &config.web.public_url,
        &secret,
        Purpose::Preferences,
        reader.id,
        0,
    );
    let prefs_path = prefs.trim_start_matches(&base).to_string();
    let page = client.get(&prefs).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("reader@example.org"));
    assert!(page.contains("value=\"kernel_codegen\" checked"));
    assert!(page.contains("value=\"60\""));
    let refused = post(prefs_path.clone(), "min_score=500", "192.0.2.6")
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("a number from 0 to 100")
    );
    assert_eq!(
        store
            .subscriber(reader.id)
            .await
            .unwrap()
            .unwrap()
            .filter
            .min_score,
        Score::from_tenths(600)
    );
    let saved = post(
        prefs_path.clone(),
        "layers=frontend&min_score=80&language=zh-CN",
        "192.0.2.6",
    )
    .await
    .unwrap();
    assert_eq!(saved.status(), 200);
    assert!(
        saved.text().await.unwrap().contains("已保存"),
        "the page answers in the new language"
    );
    let changed = store.subscriber(reader.id).await.unwrap().unwrap();
    assert_eq!(
        changed.filter.layers.iter().collect::<Vec<_>>(),
        ["frontend"]
    );
    assert_eq!(changed.filter.min_score, Score::from_tenths(800));
    assert_eq!(changed.language, "zh-CN");
    assert_eq!(
        changed.deliver_at.map(|t| t.to_string()).as_deref(),
        Some("07:45 America/Los_Angeles"),
        "a form without a time field keeps the one set"
    );
    // The reader's own hour: set, shown, refused when invalid, cleared.
    let prefs = |body: &'static str, ip: &'static str| post(prefs_path.clone(), body, ip);
    // Followed projects and phrases: one per line, shown back; a bad one changes nothing.
    let follow = prefs(
        "follows=triton%0D%0A+%22Flash+Attention%22%0D%0A%0D%0A",
        "192.0.2.30",
    )
    .await
    .unwrap();
    assert_eq!(follow.status(), 200);
    let page = follow.text().await.unwrap();
    assert!(
        page.contains(">triton\nFlash Attention</textarea>"),
        "{page}"
    );
    let follows = || async {
        store
            .subscriber(reader.id)
            .await
            .unwrap()
            .unwrap()
            .filter
            .follows
    };
    assert_eq!(follows().await, ["triton", "Flash Attention"]);
    let bad = prefs("follows=triton%0D%0A%21%21%21", "192.0.2.31")
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    // In the reader's language (the page is zh-CN since the language was changed above).
    assert!(bad.text().await.unwrap().contains("不含可匹配的字母或数字"));
    assert_eq!(follows().await, ["triton", "Flash Attention"]);
    let set = prefs("at=09%3A30&tz=Europe%2FBerlin", "192.0.2.20")
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let page = set.text().await.unwrap();
    assert!(
        page.contains("value=\"09:30\"") && page.contains("value=\"Europe&#x2f;Berlin\""),
        "{page}"
    );
    assert_eq!(
        store
            .subscriber(reader.id)
            .await
            .unwrap()
            .unwrap()
            .deliver_at
            .map(|t| t.to_string())
            .as_deref(),
        Some("09:30 Europe/Berlin")
    );
    let bad = prefs("at=09%3A30&tz=Mars%2FBase", "192.0.2.21")
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("Mars&#x2f;Base"));
    // The cadence: the weekly roll-up on Friday, shown chosen; a bad day is refused.
    let weekly = prefs("cadence=weekly&cadence_day=fri", "192.0.2.23")
        .await
        .unwrap();
    assert_eq!(weekly.status(), 200);
    let page = weekly.text().await.unwrap();
    assert!(
        page.contains("<option value=\"weekly\" selected>")
            && page.contains("<option value=\"fri\" selected>"),
        "{page}"
    );
    assert_eq!(
        store.subscriber(reader.id).await.unwrap().unwrap().cadence,
        kdigest::subscriber::Cadence::Weekly(chrono::Weekday::Fri)
    );
    let bad = prefs("cadence=weekly&cadence_day=funday", "192.0.2.24")
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("funday"));
    let cleared = prefs("at=&tz=Europe%2FBerlin", "192.0.2.22").await.unwrap();
    assert_eq!(cleared.status(), 200);
    assert_eq!(
        store
            .subscriber(reader.id)
            .await
            .unwrap()
            .unwrap()
            .deliver_at,
        None
    );
    let forged = sign(
        &Secret::new("wrong-key"),
        Purpose::Preferences,
        reader.id,
        0,
    );
    let forged_post = post(format!("preferences/{forged}"), "min_score=0", "192.0.2.6")
        .await
        .unwrap();
    assert_eq!(forged_post.status(), 404);
    assert_eq!(
        store
            .subscriber(reader.id)
            .await
            .unwrap()
            .unwrap()
            .filter
            .min_score,
        Score::from_tenths(800)
    );

    // Per address: two sign-ups a day, from anywhere; the third is refused and sends nothing.
    for (n, ip) in ["192.0.2.7", "192.0.2.8", "192.0.2.9"].iter().enumerate() {
        let r = post(
            "subscribe".into(),
            "email=eager@example.org&language=en",
            ip,
        )
        .await
        .unwrap();
        assert_eq!(r.status(), if n < 2 { 200 } else { 429 }, "sign-up {n}");
    }
    assert_eq!(mails_to(&mails, "eager@example.org"), 2);

    // Per client IP: three sign-ups an hour, whatever the addresses.
    for n in 0..4 {
        let r = post(
            "subscribe".into(),
            &format!("email=reader{n}@example.org&language=en"),
            "203.0.113.9",
        )
        .await
        .unwrap();
        assert_eq!(r.status(), if n < 3 { 200 } else { 429 }, "sign-up {n}");
    }
    assert_eq!(mails_to(&mails, "reader3@example.org"), 0);
}

/// Runs dkimpy's verifier over `mail` with `record` as the DNS TXT record of the selector.
/// None when python3 with dkimpy is missing (outside CI, where .ci/run installs it).
fn dkimpy_verify(mail: &str, record: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mail.eml");
    std::fs::write(&path, mail).unwrap();
    let script = "import sys, dkim\nmsg = open(sys.argv[1], 'rb').read()\nrecord = sys.argv[2].encode()\nprint('pass' if dkim.verify(msg, dnsfunc=lambda name, timeout=5: record) else 'fail')\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .arg(record)
        .output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named") => None,
        Ok(o) => panic!("dkimpy failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dkim_signatures_cover_the_list_headers_and_verify() {
    let (smtp_port, mails) = spawn_smtp();
    let extra = email_config(
        smtp_port,
        "https://digest.example.org/",
        "dkim_selector = \"k2026\"\ndkim_algorithm = \"ed25519\"\nunsubscribe_mailto = \"unsubscribe@example.org\"\n",
    );
    let app = TestApp::builder().toml(&extra).build().await;
    let config = &app.config;
    let seed = [7u8; 32];
    let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = Secret::new(b64.encode(seed));
    let mailer =
        EmailSender::with_secrets(&config.channels.email, Secret::new("k"), None, Some(key))
            .unwrap();
    let newsletter = kdigest::render::Email {
        subject: "2026-10-28: Triton 3.5 lands".into(),
        html: "<p>Hello</p>".into(),
        text: "Hello\n".into(),
    };
    mailer
        .send(
            "reader@example.org",
            &serde_json::to_string(&newsletter).unwrap(),
            "2026-10-28-7",
            7,
        )
        .await
        .unwrap();
    let mail = mails.lock().unwrap()[0].1.clone();
    let signature = header(&mail, "DKIM-Signature").expect("a DKIM-Signature header");
    assert!(signature.contains("d=example.org") && signature.contains("s=k2026"));
    let signed: String = signature
        .split(';')
        .find_map(|t| t.trim().strip_prefix("h="))
        .unwrap()
        .split_whitespace()
        .collect();
    for h in [
        "from",
        "subject",
        "list-id",
        "list-unsubscribe",
        "list-unsubscribe-post",
        "message-id",
    ] {
        assert!(signed.split(':').any(|s| s == h), "{h} not in h={signed}");
    }
    let record = format!("v=DKIM1; k=ed25519; p={}", b64.encode(public.as_bytes()));
    match dkimpy_verify(&mail, &record) {
        Some(verdict) => assert_eq!(verdict, "pass", "{mail}"),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must have python3 with dkimpy (.ci/run installs it)"
            );
            eprintln!(
                "dkimpy is not installed; skipped the verification (pip install dkimpy pynacl)"
            );
        }
    }
    // Altering a signed header breaks the signature.
    let tampered = mail.replacen(
        "List-Unsubscribe-Post: List-Unsubscribe=One-Click",
        "List-Unsubscribe-Post: nothing",
        1,
    );
    if let Some(verdict) = dkimpy_verify(&tampered, &record) {
        assert_eq!(verdict, "fail");
    }
}
