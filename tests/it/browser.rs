//! A real browser against a running kdigest: headless Chromium, driven through ChromeDriver's
//! W3C WebDriver HTTP API (plain reqwest + JSON), at a phone's width. It reads the blog and a
//! digest page, searches the archive, follows a result to its permalink and on to its
//! layer's page, then walks the whole email life: fill in the sign-up form, the confirmation
//! email reaches the SMTP server, the confirm button activates the subscriber, the newsletter
//! arrives, the unsubscribe button ends it. Screenshots go to target/browser/.
//!
//! Needs Debian's chromium and chromium-driver (.ci/run installs them). Without them the test
//! says so and passes outside CI; under CI (CI set) it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::kdigest;
use kdigest_testkit::config::write_file_config;
use kdigest_testkit::feeds::repo_root;
use kdigest_testkit::net::Process;
use kdigest_testkit::smtp::{Mails, header, parts, spawn_smtp};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// W3C WebDriver's key for element references.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the child process when dropped, so a failing assertion leaves nothing running.
struct Browser {
    http: reqwest::Client,
    session: String,
    shots: PathBuf,
    _driver: Process,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts ChromeDriver and a headless Chromium session 412 px wide (a phone).
    async fn start(shots: PathBuf) -> Browser {
        let port = free_port();
        let driver = Process::new(
            Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver starts"),
        );
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let mut ready = false;
        for _ in 0..100 {
            if let Ok(r) = http.get(format!("{base}/status")).send().await
                && r.status().is_success()
            {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "chromedriver did not answer on {base}");
        let profile = tempfile::tempdir().unwrap();
        // The flags this machine needs: no sandbox as root, and no background connections
        // to Google's hosts (the network is closed and refuses them).
        let args = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=412,915".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let session: Value = http
            .post(format!("{base}/session"))
            .json(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args}
            }}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = session["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {session}"));
        std::fs::create_dir_all(&shots).unwrap();
        Browser {
            http,
            session: format!("{base}/session/{id}"),
            shots,
            _driver: driver,
            _profile: profile,
        }
    }

    /// One WebDriver command: its `value`, or the driver's error.
    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> Result<Value, String> {
        let url = format!("{}{path}", self.session);
        let mut request = self.http.request(method, &url);
        if !body.is_null() {
            request = request.json(&body);
        }
        let response: Value = request.send().await.unwrap().json().await.unwrap();
        match response["value"]["error"].as_str() {
            Some(error) => Err(format!(
                "WebDriver {path}: {error}: {}",
                response["value"]["message"]
            )),
            None => Ok(response["value"].clone()),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        self.try_call(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", json!({ "url": url }))
            .await;
    }

    async fn url(&self) -> String {
        let v = self.call(reqwest::Method::GET, "/url", Value::Null).await;
        v.as_str().unwrap().to_string()
    }

    async fn find(&self, css: &str) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("find {css}: {v}"))
            .to_string()
    }

    async fn click(&self, css: &str) {
        let el = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{el}/click"),
            json!({}),
        )
        .await;
    }

    async fn type_into(&self, css: &str, text: &str) {
        let el = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{el}/clear"),
            json!({}),
        )
        .await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{el}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// The rendered, visible text of the page.
    async fn text(&self) -> String {
        let body = self.find("body").await;
        let v = self
            .call(
                reqwest::Method::GET,
                &format!("/element/{body}/text"),
                Value::Null,
            )
            .await;
        v.as_str().unwrap().to_string()
    }

    /// The page text once it contains `needle`: a click that submits a form returns before
    /// the next page has loaded, so the old page (or a stale element) may answer first.
    async fn wait_for_text(&self, needle: &str) -> String {
        let mut last = String::new();
        for _ in 0..100 {
            let text = async {
                let body = self
                    .try_call(
                        reqwest::Method::POST,
                        "/element",
                        json!({"using": "css selector", "value": "body"}),
                    )
                    .await?;
                let id = body[ELEMENT].as_str().unwrap_or_default().to_string();
                self.try_call(
                    reqwest::Method::GET,
                    &format!("/element/{id}/text"),
                    Value::Null,
                )
                .await
            }
            .await;
            if let Ok(Value::String(text)) = text {
                if text.contains(needle) {
                    return text;
                }
                last = text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the page never showed {needle:?}; last text: {last}");
    }

    /// True when the page is no wider than the window: nothing to scroll sideways on a phone.
    async fn fits_width(&self) -> bool {
        let v = self
            .call(
                reqwest::Method::POST,
                "/execute/sync",
                json!({"script": "return document.documentElement.scrollWidth <= window.innerWidth;", "args": []}),
            )
            .await;
        v.as_bool().unwrap()
    }

    async fn screenshot(&self, name: &str) {
        let v = self
            .call(reqwest::Method::GET, "/screenshot", Value::Null)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends Chromium; the driver process is killed after this.
        let http = self.http.clone();
        let session = self.session.clone();
        let _ = std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(async { http.delete(session).send().await })
        })
        .join();
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// The running daemon (`kdigest run`), serving the web pages on `port`.
fn start_daemon(config: &Path, port: u16) -> Process {
    let daemon = Process::new(
        kdigest(config, &["run"])
            .env("KDIGEST_SECRET", "browser-test-key-0123456789abcdef")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    // Wait for the web server.
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return daemon;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("kdigest run did not listen on port {port}");
}

async fn wait_for_mail(mails: &Mails, to: &str, count: usize) -> String {
    for _ in 0..200 {
        {
            let mails = mails.lock().unwrap();
            let for_to: Vec<_> = mails
                .iter()
                .filter(|(rcpt, _)| rcpt.iter().any(|r| r == to))
                .collect();
            if for_to.len() >= count {
                return for_to[count - 1].1.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("mail {count} to {to} did not arrive");
}

fn run_once(config: &Path) {
    let out = kdigest(config, &["run", "--once", "--date", "2026-10-28"])
        .env("KDIGEST_SECRET", "browser-test-key-0123456789abcdef")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "run --once: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_browses_subscribes_confirms_receives_and_leaves_in_chromium() {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs {CHROMIUM} and {CHROMEDRIVER}; .ci/run installs Debian's chromium and chromium-driver"
        );
        eprintln!(
            "SKIPPED: {CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver)"
        );
        return;
    }
    let (smtp_port, mails) = spawn_smtp();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("kdigest.sqlite");
    let base = format!("http://127.0.0.1:{port}/");
    let config = write_file_config(
        dir.path(),
        &storage.display().to_string(),
        &format!(
            "[daemon]\nlisten = \"127.0.0.1:{port}\"\n[schedule]\ncron = \"0 8 1 1 *\"\n[email]\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {smtp_port}\ntls = \"none\"\nfrom = \"kdigest <digest@example.org>\"\nlist_id = \"digest.example.org\"\n[web]\npublic_url = \"{base}\"\n"
        ),
    );
    // The digest of the fixture day, stored (nobody to deliver to yet).
    run_once(&config);
    let daemon = start_daemon(&config, port);
    let browser = Browser::start(target_dir().join("browser")).await;

    // The blog home: the digest is listed; the page fits a phone's width.
    browser.goto(&base).await;
    let home = browser.text().await;
    assert!(home.contains("2026-10-28"), "{home}");
    assert!(home.contains("邮件订阅"), "the home page links to sign-up");
    assert!(
        browser.fits_width().await,
        "no sideways scrolling on a phone"
    );
    browser.screenshot("home").await;

    // The digest page, reached by clicking its title.
    browser.click("a[href='/digest/2026-10-28']").await;
    let page = browser.wait_for_text("返回").await;
    assert_eq!(browser.url().await, format!("{base}digest/2026-10-28"));
    assert!(page.contains("Triton"), "{page}");
    assert!(page.contains("返回"), "a link back to the blog");
    assert!(browser.fits_width().await);
    browser.screenshot("digest").await;

    // Search from the home page's box; a result leads to the event's permalink, whose layer
    // link leads to the layer's page.
    browser.goto(&base).await;
    browser.type_into("input[name='q']", "triton").await;
    browser.click("form[role='search'] button").await;
    let results = browser.wait_for_text("提到“triton”的事件").await;
    assert_eq!(browser.url().await, format!("{base}search?q=triton"));
    assert!(results.contains("Triton"), "{results}");
    assert!(browser.fits_width().await);
    browser.screenshot("search").await;
    browser.click("article h2 a").await;
    let event = browser.wait_for_text("出现在以下日期的日报中").await;
    assert!(browser.url().await.starts_with(&format!("{base}e/")));
    assert!(
        event.contains("2026-10-28") && event.contains("Triton"),
        "{event}"
    );
    assert!(browser.fits_width().await);
    browser.screenshot("permalink").await;
    browser.click("article p.meta a[href^='/layer/']").await;
    let layer = browser.wait_for_text("层：").await;
    assert!(browser.url().await.starts_with(&format!("{base}layer/")));
    assert!(layer.contains("2026-10-28"), "{layer}");
    assert!(browser.fits_width().await);
    browser.screenshot("layer").await;

    // Sign up in English: address, one layer, a threshold.
    browser.goto(&format!("{base}subscribe?lang=en")).await;
    browser.type_into("#email", "reader@example.org").await;
    browser.click("input[value='kernel_codegen']").await;
    browser.type_into("#min_score", "40").await;
    browser.screenshot("subscribe").await;
    browser.click("button[type='submit']").await;
    browser.wait_for_text("Check your inbox").await;

    // The confirmation email; its link shows a button; the button confirms.
    let mail = wait_for_mail(&mails, "reader@example.org", 1).await;
    let text = parts(&mail, "text/plain").join("\n");
    let link = text[text
        .find(&format!("{base}confirm/"))
        .expect("a confirm link")..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    browser.goto(&link).await;
    let store = kdigest::store::Store::open(&storage).await.unwrap();
    let address = kdigest::subscriber::Address::parse("email:reader@example.org").unwrap();
    let pending = store
        .subscriber_by_address(&address)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        pending.status,
        kdigest::subscriber::Status::Pending,
        "opening the link changes nothing"
    );
    assert_eq!(
        pending.filter.layers.iter().collect::<Vec<_>>(),
        ["kernel_codegen"]
    );
    browser.screenshot("confirm").await;
    browser.click("button[type='submit']").await;
    browser.wait_for_text("Subscription confirmed").await;
    let active = store.subscriber(pending.id).await.unwrap().unwrap();
    assert_eq!(active.status, kdigest::subscriber::Status::Active);

    // The newsletter: the daemon stops (it holds the scheduler lease), `run --once` plans
    // and sends the stored digest to the new subscriber, the daemon starts again.
    drop(daemon);
    run_once(&config);
    let newsletter = wait_for_mail(&mails, "reader@example.org", 2).await;
    assert!(
        header(&newsletter, "Content-Type")
            .unwrap()
            .starts_with("multipart/alternative")
    );
    let html = parts(&newsletter, "text/html").join("\n");
    assert!(html.contains("Triton") && !html.to_lowercase().contains("<script"));
    let unsubscribe = header(&newsletter, "List-Unsubscribe").unwrap();
    let unsubscribe = unsubscribe
        .trim_start_matches('<')
        .split('>')
        .next()
        .unwrap()
        .to_string();
    assert!(unsubscribe.starts_with(&format!("{base}unsubscribe/")));

    // Leaving: the link shows a button, the button unsubscribes.
    let _daemon = start_daemon(&config, port);
    browser.goto(&unsubscribe).await;
    assert!(store.subscriber(pending.id).await.unwrap().is_some());
    browser.screenshot("unsubscribe").await;
    browser.click("button[type='submit']").await;
    browser.wait_for_text("You are unsubscribed").await;
    assert!(store.subscriber(pending.id).await.unwrap().is_none());
}
