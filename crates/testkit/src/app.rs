//! [`TestApp`]: the set-up most tests and benches share — a feed server, the demo
//! configuration pointed at it (plus what the test adds: a Telegram mock, an LLM stand-in,
//! any TOML), a fresh SQLite store in a temporary directory — and the readers, engine runs
//! and account pages the tests build on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kdigest::config::{Config, Secret};
use kdigest::deliver::engine::{Engine, Until};
use kdigest::model::{Digest, Filter};
use kdigest::store::{NewSubscriber, Store};
use kdigest::subscriber::{Address, Status};

use crate::config::{disk_feeds_base, fixture_config};
use crate::feeds::{FeedServer, spawn_feed_server};

/// A kdigest instance under test: its feed server, configuration, store and directory
/// (removed when dropped).
pub struct TestApp {
    pub feeds: FeedServer,
    pub config: Config,
    pub store: Store,
    pub dir: tempfile::TempDir,
}

/// What a [`TestApp`] is built with; from [`TestApp::builder`].
#[derive(Default)]
pub struct Builder {
    toml: String,
    feeds: Option<FeedServer>,
    feeds_on_disk: bool,
}

impl TestApp {
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The demo configuration as it is, reading the feed server.
    pub async fn start() -> TestApp {
        TestApp::builder().build().await
    }

    /// The fixture day's digest (2026-10-28, examples/feeds), generated through the real
    /// fetch path and stored.
    pub async fn digest(&self) -> Digest {
        kdigest::pipeline::generate(
            &self.config,
            &self.store,
            kdigest::demo::demo_date(),
            &|_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// A delivery engine over this store and configuration.
    pub fn engine(&self) -> Arc<Engine> {
        let metrics = Arc::new(kdigest::metrics::Metrics::default());
        Arc::new(Engine::new(self.store.clone(), &self.config, metrics).unwrap())
    }
}

impl Builder {
    /// TOML added to the demo configuration. `[fetch]` and `[delivery]` may appear: the
    /// loopback allowance every test server needs is merged into them.
    pub fn toml(mut self, extra: &str) -> Builder {
        self.toml.push_str(extra);
        if !self.toml.ends_with('\n') {
            self.toml.push('\n');
        }
        self
    }

    /// Telegram at `api` (a [`crate::telegram::spawn_mock`]), its token in a variable of
    /// its own, then `keys` of the `[telegram]` section.
    pub fn telegram(self, api: &str, keys: &str) -> Builder {
        let env = secret_env(crate::telegram::TOKEN);
        self.toml(&format!(
            "[telegram]\napi_url = \"{api}\"\ntoken_env = \"{env}\"\n{keys}"
        ))
    }

    /// LLM mode against an OpenAI-compatible stand-in at `base` (its `/v1`), the key
    /// [`crate::llm::KEY`] in a variable of its own, then `keys` of `[summarize]`.
    pub fn llm(self, base: &str, keys: &str) -> Builder {
        let env = secret_env(crate::llm::KEY);
        self.toml(&format!(
            "[summarize]\nmode = \"llm\"\nbase_url = \"{base}\"\napi_key_env = \"{env}\"\n{keys}"
        ))
    }

    /// The sources read from `server`, started before the build because the TOML names
    /// its fault endpoints (`/hang`, `/status/404`, …).
    pub fn feeds(mut self, server: FeedServer) -> Builder {
        self.feeds = Some(server);
        self
    }

    /// The sources read from examples/feeds on disk (`file://`) rather than from the feed
    /// server: for benches that measure the pipeline without HTTP.
    pub fn feeds_on_disk(mut self) -> Builder {
        self.feeds_on_disk = true;
        self
    }

    pub async fn build(self) -> TestApp {
        let feeds = match self.feeds {
            Some(server) => server,
            None => spawn_feed_server().await,
        };
        let dir = tempfile::tempdir().unwrap();
        let base = if self.feeds_on_disk {
            disk_feeds_base()
        } else {
            format!("{}/feeds", feeds.base)
        };
        let config = fixture_config(&base, dir.path(), &self.toml);
        let store = open_store(&config).await;
        TestApp {
            feeds,
            config,
            store,
            dir,
        }
    }
}

/// Puts `value` in an environment variable of its own and returns its name. The tests of
/// one binary run in parallel threads, so no two may share a variable.
pub fn secret_env(value: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "KDIGEST_TESTKIT_SECRET_{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    // SAFETY: a fresh name no other thread reads or writes before this returns it.
    unsafe { std::env::set_var(&name, value) };
    name
}

pub async fn open_store(config: &Config) -> Store {
    Store::open(&config.storage.path).await.unwrap()
}

/// An active English subscriber with every layer and threshold 0; its id.
pub async fn add_reader(store: &Store, address: &str) -> i64 {
    let address = Address::parse(address).unwrap_or_else(|e| panic!("{address}: {e}"));
    add_reader_in(store, &address, "en").await
}

/// An active subscriber at `address` (options included) reading `language`, with every
/// layer and threshold 0; its id.
pub async fn add_reader_in(store: &Store, address: &Address, language: &str) -> i64 {
    store
        .add_subscriber(
            address,
            &Filter::default(),
            language,
            &Status::Active,
            false,
            chrono::Utc::now(),
        )
        .await
        .unwrap()
        .unwrap()
}

/// Active readers at `addresses`, each with `filter` and `language`, in one batch (as the
/// benches fill their stores).
pub async fn add_readers(store: &Store, addresses: &[Address], filter: &Filter, language: &str) {
    let active = Status::Active;
    let rows: Vec<NewSubscriber> = addresses
        .iter()
        .map(|a| NewSubscriber {
            address: a,
            filter,
            language,
            status: &active,
            notify_empty: false,
        })
        .collect();
    store
        .add_subscribers(&rows, chrono::Utc::now())
        .await
        .unwrap();
}

/// Runs the delivery engine until nothing is due within `max_wait`.
pub async fn run_until_idle(engine: &Arc<Engine>, max_wait: Duration) {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    engine.run(Until::Idle { max_wait }, rx).await.unwrap();
}

/// Serves the account pages on `listener`, with client addresses (for the per-IP limit).
pub fn serve_account(
    listener: tokio::net::TcpListener,
    store: &Store,
    config: &Config,
    secret: Secret,
    mailer: Option<Arc<kdigest::channels::email::EmailSender>>,
) {
    let account =
        kdigest::web::account::Account::new(store.clone(), config, secret, mailer).unwrap();
    let services = kdigest::web::Services {
        account: Some(Arc::new(account)),
        ..Default::default()
    };
    let router = kdigest::web::router(Arc::new(kdigest::metrics::Metrics::default()), services);
    tokio::spawn(kdigest::web::serve(
        listener,
        router,
        std::future::pending(),
    ));
}

/// The fixture day stored, active email readers, and an engine with their deliveries
/// planned: from [`email_day`].
pub struct EmailDay {
    pub app: TestApp,
    pub digest: Digest,
    pub engine: Arc<Engine>,
    pub ids: Vec<i64>,
}

/// A [`TestApp`] with `extra` TOML (an `[email]` section pointing at a test SMTP server),
/// the fixture day's digest, one reader of everything per address, and their deliveries
/// planned.
pub async fn email_day(extra: &str, addresses: &[&str]) -> EmailDay {
    // The engine reads the signing key from the environment; every test sets the same one.
    // SAFETY: every writer writes the same value.
    unsafe {
        std::env::set_var(
            kdigest::tokens::SECRET_ENV,
            "test-signing-key-0123456789abcdef",
        )
    };
    let app = TestApp::builder().toml(extra).build().await;
    let digest = app.digest().await;
    let ids = add_email_readers(&app.store, addresses).await;
    let engine = app.engine();
    assert_eq!(engine.plan(&digest).await.unwrap(), addresses.len() as u64);
    EmailDay {
        app,
        digest,
        engine,
        ids,
    }
}

/// One active English reader of everything per email address; their ids.
pub async fn add_email_readers(store: &Store, addresses: &[&str]) -> Vec<i64> {
    let mut ids = Vec::new();
    for a in addresses {
        ids.push(add_reader(store, &format!("email:{a}")).await);
    }
    ids
}
