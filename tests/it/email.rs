//! Email through lettre against a real SMTP server on 127.0.0.1 (mailin-embedded, in
//! process), and the one-click unsubscribe link it carries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use kdigest::deliver::engine::{Engine, Until};
use kdigest::metrics::Metrics;
use kdigest::model::Filter;
use kdigest::subscriber::{Address, Status};
use mailin_embedded::{Handler, Response, Server, response};

use crate::helpers::{fixture_config, open_store, spawn_feed_server};

/// Received mails: (recipients, raw message).
type Mails = Arc<Mutex<Vec<(Vec<String>, String)>>>;

#[derive(Clone, Default)]
struct Inbox {
    mails: Mails,
    current: Vec<u8>,
    to: Vec<String>,
}

impl Handler for Inbox {
    fn rcpt(&mut self, to: &str) -> Response {
        if to.contains("bounce") {
            response::NO_MAILBOX
        } else {
            response::OK
        }
    }

    fn data_start(&mut self, _domain: &str, _from: &str, _is8bit: bool, to: &[String]) -> Response {
        self.current.clear();
        self.to = to.to_vec();
        response::OK
    }

    fn data(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.current.extend_from_slice(buf);
        Ok(())
    }

    fn data_end(&mut self) -> Response {
        let mail = String::from_utf8_lossy(&self.current).into_owned();
        self.mails.lock().unwrap().push((self.to.clone(), mail));
        response::OK
    }
}

fn spawn_smtp() -> (u16, Mails) {
    let inbox = Inbox::default();
    let mails = inbox.mails.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut server = Server::new(inbox);
    server.with_name("localhost").with_tcp_listener(listener);
    std::thread::spawn(move || {
        let _ = server.serve();
    });
    (port, mails)
}

/// The value of a header, unfolded.
fn header(mail: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = mail.split("\r\n").collect();
    let start = lines.iter().position(|l| {
        l.to_ascii_lowercase()
            .starts_with(&format!("{}:", name.to_ascii_lowercase()))
    })?;
    let mut value = lines[start][name.len() + 1..].trim().to_string();
    for l in &lines[start + 1..] {
        if l.starts_with(' ') || l.starts_with('\t') {
            value.push(' ');
            value.push_str(l.trim());
        } else {
            break;
        }
    }
    Some(value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newsletters_arrive_as_multipart_with_list_headers_and_one_click_unsubscribe() {
    let feeds = spawn_feed_server().await;
    let (smtp_port, mails) = spawn_smtp();
    let web = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web_base = format!("http://{}/", web.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    unsafe { std::env::set_var(kdigest::tokens::SECRET_ENV, "test-signing-key") };
    let extra = format!(
        "[email]\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {smtp_port}\ntls = \"none\"\nfrom = \"kdigest <digest@example.org>\"\nreply_to = \"editors@example.org\"\nlist_id = \"digest.example.org\"\npublic_url = \"{web_base}\"\nunsubscribe_mailto = \"unsubscribe@example.org\"\n[delivery]\nmax_attempts = 2\nbackoff_base_secs = 0.2\n"
    );
    let config = fixture_config(&format!("{}/feeds", feeds.base), dir.path(), &extra);
    let store = open_store(&config).await;
    let digest = kdigest::pipeline::generate(&config, &store, kdigest::demo::demo_date(), &|_| {})
        .await
        .unwrap();
    let add = |address: &str| {
        let store = store.clone();
        let address = Address::parse(address).unwrap();
        async move {
            store
                .add_subscriber(
                    &address,
                    &Filter::default(),
                    "en",
                    &Status::Active,
                    false,
                    Utc::now(),
                )
                .await
                .unwrap()
                .unwrap()
        }
    };
    let alice = add("email:alice@example.org").await;
    let bounce = add("email:bounce@example.org").await;

    let engine =
        Arc::new(Engine::new(store.clone(), &config, Arc::new(Metrics::default())).unwrap());
    assert_eq!(engine.plan(&digest).await.unwrap(), 2);
    let (_tx, rx) = tokio::sync::watch::channel(false);
    engine
        .run(
            Until::Idle {
                max_wait: Duration::from_secs(10),
            },
            rx,
        )
        .await
        .unwrap();

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
    let delivery = kdigest::deliver::delivery_id(digest.date, alice);
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
    let secret = kdigest::config::Secret::new("test-signing-key");
    let services = kdigest::web::Services {
        unsubscribe: Some(Arc::new(kdigest::web::unsubscribe::Unsubscribe {
            store: store.clone(),
            secret,
            language: "en".into(),
        })),
        ..Default::default()
    };
    let router = kdigest::web::router(Arc::new(Metrics::default()), services);
    tokio::spawn(async move { axum::serve(web, router).await.unwrap() });
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
