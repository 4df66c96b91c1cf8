//! With default settings kdigest refuses to contact loopback and private addresses that a
//! feed or a reader chose: the webhook receiver and the feed server here listen on
//! 127.0.0.1, as a probe of this machine would. Every other test turns the two keys on
//! (kdigest_testkit::config::allowing_private_networks).

use std::sync::Arc;
use std::time::Duration;

use kdigest::deliver::engine::Engine;
use kdigest::fetch::{FetchError, Fetcher};
use kdigest::metrics::Metrics;
use kdigest::subscriber::Status;
use kdigest_testkit::TestApp;

use kdigest_testkit::app::add_reader;
use kdigest_testkit::app::run_until_idle;
use kdigest_testkit::webhook::spawn_receiver;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_loopback_is_refused_by_default_and_the_reader_told_why() {
    let (hooks, receiver) = spawn_receiver().await;
    let mut app = TestApp::start().await;
    app.config.delivery.allow_private_networks = false;
    let digest = app.digest().await;
    let (config, store) = (&app.config, &app.store);
    // The receiver's own address, and a name for it.
    let by_ip = add_reader(store, &format!("webhook:{hooks}/ip")).await;
    let by_name = add_reader(
        store,
        &format!("webhook:{}/name", hooks.replace("127.0.0.1", "localhost")),
    )
    .await;
    let engine =
        Arc::new(Engine::new(store.clone(), config, Arc::new(Metrics::default())).unwrap());
    assert_eq!(engine.plan(&digest).await.unwrap(), 2);
    run_until_idle(&engine, Duration::from_secs(3)).await;
    assert!(
        receiver.log.lock().unwrap().is_empty(),
        "nothing reached the receiver"
    );
    for id in [by_ip, by_name] {
        let s = store.subscriber(id).await.unwrap().unwrap();
        let Status::Disabled(reason) = &s.status else {
            panic!("{:?}", s.status)
        };
        assert!(
            reason.contains("loopback")
                && reason.contains("delivery.allow_private_networks = true"),
            "{reason}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_on_loopback_is_refused_by_default_with_the_key_named() {
    let mut app = TestApp::start().await;
    let config = &mut app.config;
    config.fetch.allow_private_networks = false;
    // One source by address, one by a name that resolves to loopback.
    config.sources.truncate(2);
    let by_name = config.sources[1].clone();
    let kdigest::config::SourceLocation::Http(url) = &mut config.sources[1].location else {
        panic!("an http source")
    };
    url.set_host(Some("localhost")).unwrap();
    let fetcher = Fetcher::new(&config.fetch).unwrap();
    let results = fetcher.fetch_all(&config.sources, &[], &|_| {}).await;
    for r in &results {
        match &r.outcome {
            Err(e @ FetchError::PrivateNetwork(reason)) => {
                assert!(
                    reason.contains("fetch.allow_private_networks = true"),
                    "{e}"
                );
            }
            other => panic!("{}: {:?}", r.source, other.as_ref().err()),
        }
    }
    // Allowed, the same sources are fetched.
    config.fetch.allow_private_networks = true;
    config.sources[1] = by_name;
    let results = Fetcher::new(&config.fetch)
        .unwrap()
        .fetch_all(&config.sources, &[], &|_| {})
        .await;
    assert!(results.iter().all(|r| r.outcome.is_ok()));
}
