//! Email through lettre against a real SMTP server on 127.0.0.1 (the test kit's smtp.rs, in
//! process), and the one-click unsubscribe link it carries.

use std::time::Duration;

use kdigest::deliver::engine::Until;
use kdigest::subscriber::Status;

use kdigest_testkit::app::email_day;
use kdigest_testkit::app::serve_account;
use kdigest_testkit::smtp::{header, spawn_smtp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newsletters_arrive_as_multipart_with_list_headers_and_one_click_unsubscribe() {
    let (smtp_port, mails) = spawn_smtp();
    let web = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web_base = format!("http://{}/", web.local_addr().unwrap());
    let extra = format!(
        "[email]\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {smtp_port}\ntls = \"none\"\nfrom = \"kdigest <digest@example.org>\"\nreply_to = \"editors@example.org\"\nlist_id = \"digest.example.org\"\nunsubscribe_mailto = \"unsubscribe@example.org\"\n[web]\npublic_url = \"{web_base}\"\n[delivery]\nmax_attempts = 2\nbackoff_base_secs = 0.2\n"
    );
    let day = email_day(&extra, &["alice@example.org", "bounce@example.org"]).await;
    let (config, store, digest, engine) = (day.app.config, day.app.store, day.digest, day.engine);
    let (alice, bounce) = (day.ids[0], day.ids[1]);
    kdigest_testkit::app::run_until_idle(&engine, Duration::from_secs(10)).await;

    let received = mails.lock().unwrap().clone();
    assert_eq!(
        received.len(),
        1,
        "one newsletter, none for the bounced address"
    );
    let (to, mail) = &received[0];
    assert_eq!(to, &vec!["alice@example.org".to_string()]);
    assert!(
        header(mail, "Content-Type")
            .unwrap()
            .starts_with("multipart/alternative"),
        "{mail}"
    );
    assert!(mail.contains("Content-Type: text/plain") && mail.contains("Content-Type: text/html"));
    assert!(header(mail, "Subject").unwrap().contains("2026-10-28"));
    assert_eq!(
        header(mail, "List-Id").unwrap(),
        "kdigest <digest.example.org>"
    );
    assert_eq!(
        header(mail, "List-Unsubscribe-Post").unwrap(),
        "List-Unsubscribe=One-Click"
    );
    assert_eq!(header(mail, "Reply-To").unwrap(), "editors@example.org");
    let delivery =
        kdigest::deliver::delivery_id(digest.date, kdigest::subscriber::Edition::Daily, alice);
    assert_eq!(
        header(mail, "Message-ID").unwrap(),
        format!("<{delivery}@digest.example.org>")
    );
    let unsubscribe = header(mail, "List-Unsubscribe").unwrap();
    assert!(
        unsubscribe.contains("<mailto:unsubscribe@example.org?subject=unsubscribe>"),
        "{unsubscribe}"
    );
    let url = unsubscribe
        .trim_start_matches('<')
        .split('>')
        .next()
        .unwrap()
        .to_string();
    assert!(
        url.starts_with(&format!("{web_base}unsubscribe/{alice}.")),
        "{url}"
    );
    assert!(
        !mail.contains("PLACEHOLDER"),
        "the per-subscriber link replaced the placeholder"
    );
    assert!(
        !mail.to_lowercase().contains("<script"),
        "no script from feed content"
    );
    let b = store.subscriber(bounce).await.unwrap().unwrap();
    assert!(
        matches!(&b.status, Status::Disabled(r) if r.starts_with("Bounced")),
        "{:?}",
        b.status
    );

    // The link: GET changes nothing, the one-click POST unsubscribes, twice is fine, forged is 404.
    let secret = kdigest::config::Secret::new("test-signing-key-0123456789abcdef");
    serve_account(web, &store, &config, secret, None);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = client.get(&url).send().await.unwrap();
    assert_eq!(get.status(), 200);
    assert!(
        get.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    assert!(get.text().await.unwrap().contains("<form method=\"post\""));
    assert!(
        store.subscriber(alice).await.unwrap().is_some(),
        "GET never changes state"
    );
    for _ in 0..2 {
        let post = client
            .post(&url)
            .body("List-Unsubscribe=One-Click")
            .header("content-type", "application/x-www-form-urlencoded")
            .send()
            .await
            .unwrap();
        assert_eq!(
            post.status(),
            200,
            "one-click answers 200 with no redirect, also when repeated"
        );
    }
    assert!(store.subscriber(alice).await.unwrap().is_none());
    let forged = client
        .post(format!(
            "{web_base}unsubscribe/{bounce}.0.00000000000000000000000000000000"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 404);
    assert!(
        store.subscriber(bounce).await.unwrap().is_some(),
        "a forged token changes nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_outage_pauses_email_without_using_attempts_or_bouncing_anyone() {
    // A port with nothing listening: the relay is down.
    let port = kdigest_testkit::net::dead_port();
    let extra = format!(
        "[email]\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {port}\ntls = \"none\"\n[delivery]\nmax_attempts = 2\nbackoff_base_secs = 0.2\nbackoff_max_secs = 0.5\n"
    );
    let addresses = [
        "reader0@example.org",
        "reader1@example.org",
        "reader2@example.org",
    ];
    let day = email_day(&extra, &addresses).await;
    let (store, digest, engine, ids) = (day.app.store, day.digest, day.engine, day.ids);
    // A one-off run does not wait out the outage: it stops with everything still queued.
    // Three runs, each after the last pause ended: with max_attempts = 2, counted attempts
    // would have failed the deliveries.
    let (_tx, rx) = tokio::sync::watch::channel(false);
    for _ in 0..3 {
        let run = engine.run(
            Until::Idle {
                max_wait: Duration::from_secs(5),
            },
            rx.clone(),
        );
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("run --once ends during an outage")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        store.requeue_in_flight().await.unwrap();
    }
    store.requeue_in_flight().await.unwrap();
    for id in &ids {
        let s = store.subscriber(*id).await.unwrap().unwrap();
        assert_eq!(s.status, Status::Active, "nobody is marked bounced");
    }
    let counts = store.delivery_counts(digest.date).await.unwrap();
    assert_eq!(
        (counts.pending, counts.sent, counts.failed),
        (3, 0, 0),
        "max_attempts = 2 was not used up by the outage"
    );

    // The relay comes back on the same port: after the pause everything goes out.
    let (_, mails) = kdigest_testkit::smtp::spawn_smtp_on(port);
    tokio::time::sleep(Duration::from_millis(600)).await;
    kdigest_testkit::app::run_until_idle(&engine, Duration::from_secs(5)).await;
    assert_eq!(mails.lock().unwrap().len(), 3);
    let counts = store.delivery_counts(digest.date).await.unwrap();
    assert_eq!((counts.pending, counts.sent), (0, 3));
}
