//! `cargo bench --bench email`: 1,000 newsletters through the release binary (`kdigest run
//! --once` of the sample day, its pooled lettre transport) to a local SMTP server, then rss2email (PyPI) delivering 1,000 feed items of the same size to
//! the same server, and the ratio. The server is aiosmtpd (PyPI) counting what it accepts.
//! Needs: pip install aiosmtpd rss2email. Figures in docs/PERFORMANCE.md.
//!
//! First, the same 1,000 newsletters to a sink that is not the bottleneck: the tests' SMTP
//! server (crates/testkit/src/smtp.rs, a thread per connection), run in a process of its own by this
//! binary re-executing itself with `--sink`. aiosmtpd is one Python thread and tops out
//! near the rates measured here, so the throughput target is read against the fast sink.

mod common;

use kdigest_testkit::TestApp;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kdigest::model::Filter;
use kdigest::subscriber::Address;

const NEWSLETTERS: usize = 1_000;

/// An SMTP server that accepts everything and prints how many messages it took, and the
/// seconds from the first to the last, when its standard input closes.
const SINK: &str = r#"
import sys
from aiosmtpd.controller import Controller
import time
class Count:
    n = 0
    first = last = 0.0
    async def handle_DATA(self, server, session, envelope):
        Count.n += 1
        Count.last = time.monotonic()
        if Count.n == 1:
            Count.first = Count.last
        return '250 OK'
c = Controller(Count(), hostname='127.0.0.1', port=int(sys.argv[1]))
c.start()
print('ready', flush=True)
sys.stdin.read()
print(Count.n, Count.last - Count.first, flush=True)
c.stop()
"#;

struct Sink {
    child: Child,
    port: u16,
}

impl Sink {
    /// aiosmtpd.
    fn start() -> Sink {
        Sink::spawn(
            Command::new("python3").args(["-c", SINK]),
            "aiosmtpd did not start: pip install aiosmtpd",
        )
    }

    /// The tests' SMTP server, in a process of its own (see the module comment).
    fn start_fast() -> Sink {
        Sink::spawn(
            Command::new(std::env::current_exe().unwrap()).arg("--sink"),
            "the sink did not start",
        )
    }

    /// Runs `command` with a free port as its last argument, until it says ready.
    fn spawn(command: &mut Command, failure: &str) -> Sink {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = command
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the sink runs");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "{failure}");
        Sink { child, port }
    }

    /// Stops the server; returns how many messages it accepted and the seconds from the
    /// first to the last.
    fn stop(mut self) -> (usize, f64) {
        drop(self.child.stdin.take());
        let mut line = String::new();
        BufReader::new(self.child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let _ = self.child.wait();
        let mut words = line.split_whitespace();
        let n = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let span = words.next().and_then(|w| w.parse().ok()).unwrap_or(0.0);
        (n, span)
    }
}

/// `--sink PORT`: the tests' SMTP server on PORT until standard input closes, then the
/// number of messages it took and the seconds from the first to the last (read by
/// watching the inbox every millisecond).
fn sink(port: u16) {
    let (_, mails) = kdigest_testkit::smtp::spawn_smtp_on(port);
    let span = Arc::new(std::sync::Mutex::new((None::<Instant>, None::<Instant>, 0)));
    let watch = span.clone();
    std::thread::spawn(move || {
        loop {
            let n = mails.lock().unwrap().len();
            let mut s = watch.lock().unwrap();
            if n > s.2 {
                let now = Instant::now();
                s.0.get_or_insert(now);
                s.1 = Some(now);
                s.2 = n;
            }
            drop(s);
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    println!("ready");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    std::thread::sleep(Duration::from_millis(5));
    let (first, last, n) = *span.lock().unwrap();
    let secs = match (first, last) {
        (Some(f), Some(l)) => l.duration_since(f).as_secs_f64(),
        _ => 0.0,
    };
    println!("{n} {secs}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--sink") {
        return sink(args[i + 1].parse().expect("a port"));
    }
    if args.iter().any(|a| a == "--test") {
        return;
    }
    // The signing key for unsubscribe links, set before any thread starts.
    unsafe {
        std::env::set_var(
            kdigest::tokens::SECRET_ENV,
            "bench-signing-key-0123456789abcdef",
        )
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}

/// 1,000 newsletters through the release binary (`kdigest run --once` of the sample day)
/// to `sink` with `pool` SMTP connections (and as many in flight): messages accepted,
/// seconds from the first to the last at the server, the run's wall time.
fn kdigest_run(sink: Sink, pool: u32) -> (usize, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.sqlite");
    let tables = format!(
        "[email]\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {}\ntls = \"none\"\npool_size = {pool}\n[web]\npublic_url = \"https://digest.example.org/\"\n[delivery.email]\nper_sec = 10000.0\nper_destination_per_sec = 10.0\nconcurrency = {pool}\n",
        sink.port
    );
    let config_path = dir.path().join("config.toml");
    std::fs::write(
        &config_path,
        kdigest_testkit::config::file_config_text(&db.display().to_string(), &tables),
    )
    .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = kdigest::store::Store::open(&db).await.unwrap();
            let address =
                |i: usize| Address::parse(&format!("email:reader{i}@example.org")).unwrap();
            let (zh, en): (Vec<usize>, Vec<usize>) = (0..NEWSLETTERS).partition(|i| i % 2 == 0);
            let all = Filter::default();
            for (readers, language) in [(zh, "zh-CN"), (en, "en")] {
                let addresses: Vec<Address> = readers.into_iter().map(address).collect();
                kdigest_testkit::app::add_readers(&store, &addresses, &all, language).await;
            }
            store.close().await;
        });
    let wall = common::run_once(&config_path);
    let (accepted, span) = sink.stop();
    assert_eq!(accepted, NEWSLETTERS, "every newsletter reached the server");
    (accepted, span, wall)
}

/// One newsletter of the sample day, for its size and for rss2email's feed.
async fn sample_newsletter() -> kdigest::render::Email {
    let app = TestApp::builder().feeds_on_disk().build().await;
    let digest = app.digest().await;
    app.store.close().await;
    kdigest::render::Renderer::new("en", None)
        .unwrap()
        .email(
            &digest,
            "https://x/u",
            "https://x/p",
            Some("https://x/vote/T/"),
        )
        .unwrap()
}

async fn run() {
    let rate = |accepted: usize, span: f64| (accepted - 1) as f64 / span;
    for pool in [4, 16] {
        let (accepted, span, wall) =
            tokio::task::spawn_blocking(move || kdigest_run(Sink::start_fast(), pool))
                .await
                .unwrap();
        println!(
            "kdigest (release binary, run --once), fast sink (a thread per connection, own process): {accepted} newsletters, {span:.2} s first to last = {:.0} msg/s with {pool} SMTP connections (target >= 400 msg/s); run --once {wall:.2} s wall",
            rate(accepted, span)
        );
    }
    let (accepted, span, wall) = tokio::task::spawn_blocking(|| kdigest_run(Sink::start(), 16))
        .await
        .unwrap();
    let sample = sample_newsletter().await;
    let size = sample.html.len() + sample.text.len();
    let kdigest_rate = rate(accepted, span);
    println!(
        "kdigest (release binary), aiosmtpd: {accepted} newsletters (HTML + text about {} KB each), {span:.2} s first to last = {kdigest_rate:.0} msg/s (pool of 16 SMTP connections, 16 in flight); run --once {wall:.2} s wall",
        size / 1000
    );

    let dir = tempfile::tempdir().unwrap();
    // rss2email: one feed of 1,000 items whose HTML is the newsletter's, sent to the same
    // kind of server.
    if Command::new("r2e").arg("--version").output().is_err() {
        println!("rss2email: not installed (pip install rss2email); no comparison");
        return;
    }
    let mut atom = String::from(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><feed xmlns=\"http://www.w3.org/2005/Atom\"><id>urn:bench</id><title>bench</title><updated>2026-10-28T00:00:00Z</updated>",
    );
    let content = kdigest::render::escape_html(&sample.html);
    for i in 0..NEWSLETTERS {
        atom.push_str(&format!(
            "<entry><id>urn:bench:{i}</id><title>Item {i}</title><updated>2026-10-28T00:00:00Z</updated><link href=\"https://example.org/{i}\"/><content type=\"html\">{content}</content></entry>"
        ));
    }
    atom.push_str("</feed>");
    let app = axum::Router::new().route(
        "/feed.xml",
        axum::routing::get(move || {
            let atom = atom.clone();
            async move { ([("content-type", "application/atom+xml")], atom) }
        }),
    );
    let feed_base = kdigest_testkit::net::serve(app).await;
    let sink = Sink::start();
    let r2e_dir = dir.path().join("r2e");
    std::fs::create_dir_all(&r2e_dir).unwrap();
    let cfg = r2e_dir.join("r2e.cfg");
    let data = r2e_dir.join("r2e.json");
    let r2e = |args: &[&str]| {
        let out = Command::new("r2e")
            .arg("-c")
            .arg(&cfg)
            .arg("-d")
            .arg(&data)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "r2e {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    r2e(&["new", "reader@example.org"]);
    // Our settings replace the generated ones in [DEFAULT].
    let settings = [
        ("from", "bench@example.org".to_string()),
        ("email-protocol", "smtp".into()),
        ("smtp-server", format!("127.0.0.1:{}", sink.port)),
        ("smtp-auth", "False".into()),
        ("smtp-ssl", "False".into()),
        ("html-mail", "True".into()),
    ];
    let generated = std::fs::read_to_string(&cfg).unwrap();
    let mut text = String::new();
    for line in generated.lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        if settings.iter().any(|(k, _)| *k == key) {
            continue;
        }
        text.push_str(line);
        text.push('\n');
        if line.trim() == "[DEFAULT]" {
            for (k, v) in &settings {
                text.push_str(&format!("{k} = {v}\n"));
            }
        }
    }
    std::fs::write(&cfg, text).unwrap();
    r2e(&["add", "bench", &format!("{feed_base}/feed.xml")]);
    let start = Instant::now();
    r2e(&["run"]);
    let r2e_secs = start.elapsed().as_secs_f64();
    let (r2e_accepted, _) = sink.stop();
    let r2e_rate = r2e_accepted as f64 / r2e_secs;
    println!(
        "rss2email 3.14: {r2e_accepted} items in {r2e_secs:.2} s = {r2e_rate:.0} msg/s (one SMTP connection per message; fetch and parse included)"
    );
    println!("ratio kdigest / rss2email: {:.1}x", kdigest_rate / r2e_rate);
}
