//! The store contract, run on both engines: every statement the daemon, CLI, bots and web
//! use behaves the same on SQLite and on Postgres (a fresh schema per test). Postgres-only
//! behaviour (concurrent claims with SKIP LOCKED, copying SQLite into Postgres) is here too.

use std::collections::HashSet;

use chrono::{Duration, SubsecRound, Utc};
use kdigest::model::{Filter, Score};
use kdigest::store::{PlannedDelivery, Settled, Store};
use kdigest::subscriber::{Address, Channel, Edition, Status};

use kdigest_testkit::pg;

/// Runs one contract on a fresh SQLite file and on a fresh Postgres schema.
macro_rules! on_both_engines {
    ($contract:ident) => {
        mod $contract {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let dir = tempfile::tempdir().unwrap();
                let store = kdigest::store::Store::open(&dir.path().join("k.sqlite"))
                    .await
                    .unwrap();
                super::$contract(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(schema) = kdigest_testkit::pg::schema().await else {
                    return;
                };
                let store = kdigest::store::Store::open_postgres(&schema.url)
                    .await
                    .unwrap();
                super::$contract(store).await;
            }
        }
    };
}

on_both_engines!(claims_are_fenced_reaped_and_skip_paused_destinations);
on_both_engines!(subscribers_sign_up_confirm_and_change);
on_both_engines!(items_digests_and_source_state_round_trip);
on_both_engines!(leases_budgets_updates_and_counters);
on_both_engines!(a_date_s_daily_and_weekly_editions_are_two_deliveries);
on_both_engines!(sent_rows_are_marked_together_each_under_its_own_fence);

async fn add(store: &Store, address: &str) -> i64 {
    store
        .add_subscriber(
            &Address::parse(address).unwrap(),
            &Filter {
                layers: Default::default(),
                min_score: Score::from_f64(0.0),
                boost: None,
                follows: Vec::new(),
            },
            "en",
            &Status::Active,
            false,
            Utc::now(),
        )
        .await
        .unwrap()
        .unwrap()
}

/// A "both" reader's roll-up day: the daily and the weekly roll-up of one date are two
/// outbox rows (the key is date, subscriber and edition), each planned once and claimed
/// with its edition.
async fn a_date_s_daily_and_weekly_editions_are_two_deliveries(store: Store) {
    let a = add(&store, "webhook:https://a.example/hook").await;
    let date = kdigest::demo::demo_date();
    let plan: Vec<PlannedDelivery> = [Edition::Daily, Edition::Weekly]
        .into_iter()
        .map(|edition| PlannedDelivery {
            id: kdigest::deliver::delivery_id(date, edition, a),
            subscriber_id: a,
            edition,
            channel: Channel::Webhook,
            destination: "a.example:443".into(),
            due: None,
        })
        .collect();
    assert_ne!(plan[0].id, plan[1].id);
    let now = Utc::now();
    assert_eq!(store.plan_deliveries(date, &plan, now).await.unwrap(), 2);
    assert_eq!(store.plan_deliveries(date, &plan, now).await.unwrap(), 0);
    let expires = now + chrono::Duration::seconds(60);
    // Both are due, but only the daily is claimed: the roll-up waits for it, whichever
    // instance claims next (another token here).
    let claimed = store
        .claim_due(Channel::Webhook, now, 10, "t1", expires)
        .await
        .unwrap();
    let ids: Vec<(&str, Edition)> = claimed.iter().map(|c| (c.id.as_str(), c.edition)).collect();
    assert_eq!(ids, [(plan[0].id.as_str(), Edition::Daily)]);
    assert_eq!(claimed[0].digest_date, date);
    let meanwhile = store
        .claim_due(Channel::Webhook, now, 10, "t2", expires)
        .await
        .unwrap();
    assert!(meanwhile.is_empty(), "{meanwhile:?}");
    // A daily put back for a retry still holds the roll-up back.
    assert_eq!(
        store.mark_retry(&claimed[0], 1, now, "503").await.unwrap(),
        Settled::Done
    );
    let again = store
        .claim_due(Channel::Webhook, now, 10, "t3", expires)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].edition, Edition::Daily);
    // Once the daily is sent, the roll-up goes.
    assert_eq!(
        store.mark_sent(&again[0], 2, now).await.unwrap(),
        Settled::Done
    );
    let weekly = store
        .claim_due(Channel::Webhook, now, 10, "t4", expires)
        .await
        .unwrap();
    let ids: Vec<(&str, Edition)> = weekly.iter().map(|c| (c.id.as_str(), c.edition)).collect();
    assert_eq!(ids, [(plan[1].id.as_str(), Edition::Weekly)]);
}

/// The engine's group commit: many rows marked sent in one call (across chunk sizes),
/// each only while its own claim holds it.
async fn sent_rows_are_marked_together_each_under_its_own_fence(store: Store) {
    let date = kdigest::demo::demo_date();
    let now = Utc::now();
    let mut plan = Vec::new();
    for i in 0..23 {
        let id = add(&store, &format!("webhook:https://h{i}.example/hook")).await;
        plan.push(PlannedDelivery {
            id: format!("d{id}"),
            subscriber_id: id,
            channel: Channel::Webhook,
            destination: format!("h{i}.example:443"),
            due: None,
            edition: Edition::Daily,
        });
    }
    store.plan_deliveries(date, &plan, now).await.unwrap();
    let expires = now + Duration::seconds(60);
    let claimed = store
        .claim_due(Channel::Webhook, now, 100, "t1", expires)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 23);
    // One claim was lost to another worker: its stale token must change nothing.
    let mut stale = claimed[0].clone();
    stale.token = "someone else's".into();
    let mut rows: Vec<(&kdigest::store::Claimed, u32)> =
        claimed[1..].iter().map(|c| (c, 1)).collect();
    rows.push((&stale, 1));
    let done = store.mark_sent_many(&rows, now).await.unwrap();
    assert_eq!(done.len(), 22);
    assert!(!done.contains(&claimed[0].id));
    let counts = store.delivery_counts(date).await.unwrap();
    assert_eq!((counts.sent, counts.sending), (22, 1));
    // Marking again changes nothing: the claims are over.
    assert!(store.mark_sent_many(&rows, now).await.unwrap().is_empty());
    assert_eq!(
        store.mark_sent(&claimed[0], 1, now).await.unwrap(),
        Settled::Done
    );
}

/// Claims are fenced, reaped, skip paused destinations and are due to the millisecond.
async fn claims_are_fenced_reaped_and_skip_paused_destinations(store: Store) {
    let a = add(&store, "webhook:https://a.example/hook").await;
    let b = add(&store, "webhook:https://b.example/hook").await;
    let date = kdigest::demo::demo_date();
    let now = Utc::now();
    let plan = [(a, "a.example:443"), (b, "b.example:443")].map(|(id, dest)| PlannedDelivery {
        id: format!("d{id}"),
        subscriber_id: id,
        channel: Channel::Webhook,
        destination: dest.to_string(),
        due: None,
        edition: Edition::Daily,
    });
    store.plan_deliveries(date, &plan, now).await.unwrap();

    // A paused destination's row is not claimed; the other one is.
    let later = now + chrono::Duration::seconds(120);
    store
        .pause_destination(Channel::Webhook, "a.example:443", later, "429")
        .await
        .unwrap();
    let expires = now + chrono::Duration::seconds(60);
    let first = store
        .claim_due(Channel::Webhook, now, 10, "t1", expires)
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|c| c.subscriber_id).collect::<Vec<_>>(),
        [b]
    );
    // The paused row's next chance is the end of its pause, to the millisecond.
    let next = store.next_due(Channel::Webhook).await.unwrap().unwrap();
    assert_eq!(next.timestamp_millis(), later.timestamp_millis());

    // The claim expires, the reaper returns it, a new worker claims it under a new token:
    // the first worker's late settle changes nothing.
    let reaped = store
        .requeue_expired(expires + chrono::Duration::seconds(1))
        .await
        .unwrap();
    assert_eq!(reaped, 1);
    let second = store
        .claim_due(Channel::Webhook, now, 10, "t2", expires)
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(
        store.mark_sent(&first[0], 1, now).await.unwrap(),
        Settled::Lost
    );
    assert_eq!(
        store.mark_part_sent(&first[0], 1, expires).await.unwrap(),
        Settled::Lost
    );
    assert_eq!(store.delivery_counts(date).await.unwrap().sent, 0);
    assert_eq!(
        store.mark_sent(&second[0], 1, now).await.unwrap(),
        Settled::Done
    );
    assert_eq!(store.delivery_counts(date).await.unwrap().sent, 1);

    // A retry is due to the millisecond, not rounded down to the second.
    let after_pause = later + chrono::Duration::seconds(1);
    let retry_at =
        chrono::DateTime::from_timestamp_millis(after_pause.timestamp_millis() + 1_999).unwrap();
    let third = store
        .claim_due(Channel::Webhook, after_pause, 10, "t3", expires)
        .await
        .unwrap();
    assert_eq!(third.len(), 1, "the pause is over");
    assert_eq!(
        store.mark_retry(&third[0], 1, retry_at, "x").await.unwrap(),
        Settled::Done
    );
    let early = retry_at - chrono::Duration::milliseconds(1);
    assert!(
        store
            .claim_due(Channel::Webhook, early, 10, "t4", expires)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .claim_due(Channel::Webhook, retry_at, 10, "t4", expires)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Subscribers: add, list, find, change, sign-up and double opt-in, status, removal.
async fn subscribers_sign_up_confirm_and_change(store: Store) {
    let t = add(&store, "telegram:1001").await;
    assert_eq!(
        add_again(&store, "telegram:1001").await,
        None,
        "one address, one subscriber"
    );
    let mail = Address::parse("email:Reader@Example.org").unwrap();
    let filter = Filter {
        layers: ["kernel_codegen".to_string()].into_iter().collect(),
        min_score: Score::from_f64(55.5),
        boost: None,
        follows: Vec::new(),
    };
    let now = Utc::now();
    let stale = now - Duration::days(2);
    let kdigest::store::Signup::Pending(m) = store
        .signup(&mail, &filter, "zh-CN", now, stale)
        .await
        .unwrap()
    else {
        panic!("a new address is pending")
    };
    assert!(store.confirm_subscriber(m, now).await.unwrap());
    assert!(
        !store.confirm_subscriber(m, now).await.unwrap(),
        "a link works once"
    );
    assert_eq!(
        store
            .signup(&mail, &filter, "en", now, stale)
            .await
            .unwrap(),
        kdigest::store::Signup::AlreadySubscribed(m)
    );
    let mut s = store.subscriber_by_address(&mail).await.unwrap().unwrap();
    assert_eq!(
        (s.id, s.language.as_str(), &s.filter),
        (m, "zh-CN", &filter)
    );
    assert_eq!(s.status, Status::Active);
    s.notify_empty = true;
    s.language = "en".into();
    s.filter.follows = vec!["Tessera".into(), "flash attention".into()];
    store.update_subscriber(&s, now).await.unwrap();
    let again = store.subscriber(m).await.unwrap().unwrap();
    assert!(again.notify_empty);
    assert_eq!(again.filter.follows, ["Tessera", "flash attention"]);
    assert_eq!(again.language, "en");
    assert_eq!(
        again.created_at.timestamp(),
        now.timestamp(),
        "timestamps are typed and kept"
    );

    assert!(
        store
            .set_subscriber_status(
                t,
                &Status::Disabled("Forbidden: bot was blocked".into()),
                now
            )
            .await
            .unwrap()
    );
    let active: Vec<i64> = store
        .active_subscribers_page(0, 100)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(active, [m]);
    let by_id = store.subscribers_with_ids(&[t, m, 999]).await.unwrap();
    assert_eq!(by_id.len(), 2);
    assert_eq!(
        by_id[&t].status,
        Status::Disabled("Forbidden: bot was blocked".into())
    );
    let moved = Address::parse("telegram:-1002").unwrap();
    store.set_subscriber_address(t, &moved, now).await.unwrap();
    assert_eq!(store.subscriber(t).await.unwrap().unwrap().address, moved);
    assert!(store.remove_subscriber(t).await.unwrap());
    assert_eq!(store.subscribers().await.unwrap().len(), 1);
    // Ids are never reused: a new subscriber gets a new one.
    let next = add(&store, "telegram:1001").await;
    assert!(next > t.max(m));
}

async fn add_again(store: &Store, address: &str) -> Option<i64> {
    store
        .add_subscriber(
            &Address::parse(address).unwrap(),
            &Filter::default(),
            "en",
            &Status::Active,
            false,
            Utc::now(),
        )
        .await
        .unwrap()
}

/// The pipeline's writes and the web's reads: items, the digest, page views, the LLM
/// cache and per-source state.
async fn items_digests_and_source_state_round_trip(store: Store) {
    let base = kdigest::demo::serve_feeds().await.unwrap();
    let config = kdigest::demo::demo_config(&base, None).unwrap();
    let date = kdigest::demo::demo_date();
    let digest = kdigest::pipeline::generate(&config, &store, date, &|_| {})
        .await
        .unwrap();
    assert!(digest.events().count() >= 5);
    let stored = store.load_digest(date).await.unwrap().unwrap();
    assert_eq!(
        serde_json::to_value(&stored).unwrap(),
        serde_json::to_value(&digest).unwrap()
    );
    assert_eq!(store.latest_digest_date().await.unwrap(), Some(date));
    assert_eq!(store.digest_count().await.unwrap(), 1);
    assert_eq!(store.add_reads(date, 3).await.unwrap(), Some(3));
    assert_eq!(store.digest_reads(date).await.unwrap(), Some(3));
    assert_eq!(store.digests_page(0, 10).await.unwrap()[0].1, 3);
    assert_eq!(
        store.list_digests().await.unwrap()[0].events,
        digest.events().count()
    );
    // Votes: one per event and reader, a new one replaces it; unknown events record
    // nothing; the report's events; a subscription's liked layers.
    {
        use kdigest::feedback::{Tally, Vote};
        let e = digest.events().next().unwrap();
        let sub = add(&store, "webhook:https://votes.example/hook").await;
        let now = Utc::now();
        for (reader, vote) in [
            ("telegram:1", Vote::Up),
            ("telegram:1", Vote::Up),
            ("telegram:2", Vote::Down),
            ("telegram:2", Vote::Up),
            ("email:9", Vote::Up),
        ] {
            store
                .record_vote(&e.id, reader, Some(sub), vote, now)
                .await
                .unwrap()
                .unwrap();
        }
        assert_eq!(store.tally(&e.id).await.unwrap(), Tally { up: 3, down: 0 });
        assert_eq!(
            store.vote_of(&e.id, "telegram:2").await.unwrap(),
            Some(Vote::Up)
        );
        let unknown = store
            .record_vote("ffffffffff", "telegram:1", None, Vote::Up, now)
            .await
            .unwrap();
        assert!(unknown.is_none());
        let voted = store
            .voted_events(now - chrono::Duration::days(1))
            .await
            .unwrap();
        assert_eq!(voted.len(), 1);
        assert_eq!(
            (voted[0].0.id.as_str(), voted[0].1),
            (e.id.as_str(), Tally { up: 3, down: 0 })
        );
        assert_eq!(
            store.liked_layers(sub).await.unwrap(),
            e.layers.iter().cloned().collect()
        );
    }
    let sources: Vec<String> = config.sources.iter().map(|s| s.name.clone()).collect();
    let items = store
        .items_in_window(&sources, &digest.window)
        .await
        .unwrap();
    assert!(items.len() >= digest.events().count());
    let health = store.source_health().await.unwrap();
    assert_eq!(health.len(), config.sources.len());
    // The sample day has a source that fails on purpose; the others are recorded as fetched.
    let fetched = health.iter().filter(|h| h.last_error.is_none()).count();
    assert!(fetched >= health.len() - 1);
    assert!(
        health
            .iter()
            .filter(|h| h.last_error.is_none())
            .all(|h| h.last_success_at.is_some() && h.consecutive_failures == 0)
    );
    let now = Utc::now();
    store
        .record_fetch_success(&sources[0], None, now)
        .await
        .unwrap();
    store
        .record_fetch_failure(&sources[0], "HTTP 503", now)
        .await
        .unwrap();
    store
        .record_fetch_failure(&sources[0], "HTTP 503", now)
        .await
        .unwrap();
    let health = store.source_health().await.unwrap();
    let h = health.iter().find(|h| h.source == sources[0]).unwrap();
    assert_eq!(
        (h.consecutive_failures, h.last_error.as_deref()),
        (2, Some("HTTP 503"))
    );
    store.llm_cache_put("m", "h", "reply").await.unwrap();
    store.llm_cache_put("m", "h", "newer").await.unwrap();
    assert_eq!(
        store.llm_cache_get("m", "h").await.unwrap().as_deref(),
        Some("newer")
    );
}

/// What instances share: the scheduler lease, budget slots, handled updates, counters.
async fn leases_budgets_updates_and_counters(store: Store) {
    let now = Utc::now();
    assert!(store.try_lease("scheduler", "a:1", 10, now).await.unwrap());
    assert!(!store.try_lease("scheduler", "b:2", 10, now).await.unwrap());
    assert!(
        store.try_lease("scheduler", "a:1", 10, now).await.unwrap(),
        "renewal"
    );
    let later = now + Duration::seconds(11);
    assert!(
        store
            .try_lease("scheduler", "b:2", 10, later)
            .await
            .unwrap(),
        "lapsed, taken over"
    );
    assert_eq!(
        store.lease_holder("scheduler").await.unwrap().unwrap().0,
        "b:2"
    );

    // Budget slots: one every 100 ms, whoever asks. The slots themselves (the database's
    // clock) are compared: each call's wait counts from its own statement's now, so two
    // waits are not comparable when the statements ran at different moments.
    let slots: Vec<(i64, i64)> =
        futures::future::join_all((0..5).map(|_| store.budget_slot("telegram", 100)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    let mut sorted: Vec<i64> = slots.iter().map(|(slot, _)| *slot).collect();
    sorted.sort();
    for pair in sorted.windows(2) {
        assert!(pair[1] - pair[0] >= 100, "slots are spaced: {slots:?}");
    }
    assert!(
        slots.iter().all(|(_, wait)| (0..=1_000).contains(wait)),
        "{slots:?}"
    );

    assert!(store.first_handling("telegram", "42", now).await.unwrap());
    assert!(!store.first_handling("telegram", "42", now).await.unwrap());
    assert!(store.first_handling("discord", "42", now).await.unwrap());
    assert_eq!(
        store
            .prune_handled_updates(now + Duration::seconds(1))
            .await
            .unwrap(),
        2
    );

    assert_eq!(store.count_hit("ip:1", 3600, now).await.unwrap(), 1);
    assert_eq!(store.count_hit("ip:1", 3600, now).await.unwrap(), 2);
    assert_eq!(store.count_hit("ip:2", 3600, now).await.unwrap(), 1);
    assert_eq!(
        store
            .count_hit("ip:1", 3600, now + Duration::hours(1))
            .await
            .unwrap(),
        1,
        "a new window starts over"
    );

    store
        .heartbeat("a:1", "scheduler,deliver", now, now)
        .await
        .unwrap();
    store
        .heartbeat("b:2", "deliver", now, now - Duration::minutes(5))
        .await
        .unwrap();
    let live = store
        .live_instances(now - Duration::seconds(30))
        .await
        .unwrap();
    assert_eq!(
        live.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        ["a:1"]
    );
}

/// Several instances claiming at once on Postgres never take one row twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_on_postgres_take_each_row_once() {
    let Some(schema) = pg::schema().await else {
        return;
    };
    let store = Store::open_postgres(&schema.url).await.unwrap();
    let now = Utc::now();
    let mut plan = Vec::new();
    for i in 0..400 {
        let id = add(&store, &format!("webhook:https://h{i}.example/hook")).await;
        plan.push(PlannedDelivery {
            id: format!("d{id}"),
            subscriber_id: id,
            channel: Channel::Webhook,
            destination: format!("h{i}.example:443"),
            due: None,
            edition: Edition::Daily,
        });
    }
    store
        .plan_deliveries(kdigest::demo::demo_date(), &plan, now)
        .await
        .unwrap();
    let claimers = (0..6).map(|w| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let token = format!("w{w}-{}", mine.len());
                let got = store
                    .claim_due(
                        Channel::Webhook,
                        Utc::now(),
                        7,
                        &token,
                        Utc::now() + Duration::seconds(60),
                    )
                    .await
                    .unwrap();
                if got.is_empty() {
                    return mine;
                }
                for c in got {
                    assert_eq!(
                        store.mark_sent(&c, 1, Utc::now()).await.unwrap(),
                        Settled::Done
                    );
                    mine.push(c.id);
                }
            }
        })
    });
    let mut seen = HashSet::new();
    let mut total = 0;
    for claimer in claimers {
        for id in claimer.await.unwrap() {
            total += 1;
            assert!(seen.insert(id.clone()), "{id} claimed twice");
        }
    }
    assert_eq!(total, 400);
}

/// `store copy`: SQLite into an empty Postgres schema, every table and count; a second
/// copy into the now non-empty target is refused; new subscribers get fresh ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_copies_into_postgres_and_a_full_target_is_refused() {
    let Some(schema) = pg::schema().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let from = Store::open(&dir.path().join("k.sqlite")).await.unwrap();
    let base = kdigest::demo::serve_feeds().await.unwrap();
    let config = kdigest::demo::demo_config(&base, None).unwrap();
    let date = kdigest::demo::demo_date();
    let digest = kdigest::pipeline::generate(&config, &from, date, &|_| {})
        .await
        .unwrap();
    let a = add(&from, "telegram:7").await;
    let b = add(&from, "email:r@example.org").await;
    // What a reader follows is copied with them.
    let mut reader = from.subscriber(a).await.unwrap().unwrap();
    reader.filter.follows = vec!["triton".into()];
    from.update_subscriber(&reader, Utc::now()).await.unwrap();
    let plan: Vec<PlannedDelivery> = [(a, Channel::Telegram), (b, Channel::Email)]
        .into_iter()
        .map(|(id, channel)| PlannedDelivery {
            id: format!("{date}-{id}"),
            subscriber_id: id,
            channel,
            destination: format!("dest{id}"),
            due: None,
            edition: Edition::Daily,
        })
        .collect();
    from.plan_deliveries(date, &plan, Utc::now()).await.unwrap();
    from.pause_destination(
        Channel::Telegram,
        "dest1",
        Utc::now() + Duration::hours(1),
        "flood",
    )
    .await
    .unwrap();
    let to = Store::open_postgres(&schema.url).await.unwrap();
    let report = kdigest::store::copy_store(&from, &to, false).await.unwrap();
    for (table, source, target) in &report.tables {
        assert_eq!(source, target, "{table}");
    }
    assert!(
        report
            .tables
            .iter()
            .any(|(t, n, _)| *t == "items" && *n > 0)
    );
    let copied = to.load_digest(date).await.unwrap().unwrap();
    assert_eq!(
        serde_json::to_value(&copied).unwrap(),
        serde_json::to_value(&digest).unwrap()
    );
    assert_eq!(to.delivery_counts(date).await.unwrap().pending, 2);
    // Postgres keeps microseconds, SQLite's text nanoseconds: equal to the microsecond.
    let micros = |store_rows: Vec<kdigest::subscriber::Subscriber>| {
        store_rows
            .into_iter()
            .map(|mut s| {
                s.created_at = s.created_at.trunc_subsecs(6);
                s.updated_at = s.updated_at.trunc_subsecs(6);
                s
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        micros(to.subscribers().await.unwrap()),
        micros(from.subscribers().await.unwrap())
    );
    assert_eq!(
        to.subscriber(a).await.unwrap().unwrap().filter.follows,
        ["triton"]
    );
    let error = kdigest::store::copy_store(&from, &to, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("not empty") && error.contains("--into-non-empty"),
        "{error}"
    );
    let fresh = add(&to, "telegram:8").await;
    assert!(fresh > b, "the identity continues after the copied ids");
}

on_both_engines!(the_archive_finds_english_and_chinese_terms_layers_and_appearances);

/// The archive behind /search, /layer and /e: substring terms in any language (three
/// characters or more through the index, shorter ones too), titles first, wildcards taken
/// literally, an event's every appearance, and a digest stored again replacing its rows.
async fn the_archive_finds_english_and_chinese_terms_layers_and_appearances(store: Store) {
    let base = kdigest::demo::serve_feeds().await.unwrap();
    let config = kdigest::demo::demo_config(&base, None).unwrap();
    let date = kdigest::demo::demo_date();
    let mut digest = kdigest::pipeline::generate(&config, &store, date, &|_| {})
        .await
        .unwrap();
    let all: Vec<_> = digest.events().cloned().collect();
    let search = |q: &str| {
        let store = store.clone();
        let terms = kdigest::archive::terms(q);
        async move { store.search_events(&terms, 0, 50).await.unwrap() }
    };
    let ids = |found: &[kdigest::archive::ArchivedEvent]| -> Vec<String> {
        found.iter().map(|a| a.event.id.clone()).collect()
    };
    // Every event is found by its own title, first.
    for e in &all {
        let found = search(&e.title).await;
        assert_eq!(found[0].event.id, e.id, "{}", e.title);
        assert_eq!(found[0].date, date);
    }
    // A word in the middle of a title, in other case.
    let first = &all[0];
    let word = first
        .title
        .split_whitespace()
        .find(|w| w.chars().count() >= 4 && w.chars().all(char::is_alphanumeric))
        .unwrap()
        .to_uppercase();
    assert!(ids(&search(&word).await).contains(&first.id), "{word}");
    assert!(search("zzqxnotaword").await.is_empty());
    assert!(search("100%_").await.is_empty());
    assert!(search("").await.is_empty());

    // Chinese words in a translation: a longer term through the trigram index, a
    // two-character one (too short for it) too, and both together. ("编译器" and "后端"
    // alone are not this event's: a paper's Chinese lead says 提出编译器 TileFuse, and
    // Triton's says 更新涉及…NVIDIA 后端.)
    let key = digest.key_changes[0].id.clone();
    digest.key_changes[0].translations.insert(
        "zh-CN".into(),
        kdigest::model::EventWords {
            summary: Some("新的编译器后端把矩阵乘法提速两倍。".into()),
            ..Default::default()
        },
    );
    store.save_digest(&digest, Utc::now()).await.unwrap();
    assert_eq!(ids(&search("矩阵乘法").await), std::slice::from_ref(&key));
    assert_eq!(ids(&search("提速").await), std::slice::from_ref(&key));
    assert_eq!(
        ids(&search("乘法 编译器后端").await),
        std::slice::from_ref(&key)
    );
    assert!(search("编译器 zzqx").await.is_empty());

    // The same event in the next day's digest: two appearances, newest first; a layer page
    // lists it on both days.
    let mut next = digest.clone();
    next.date = date.succ_opt().unwrap();
    next.key_changes.truncate(1);
    next.papers.clear();
    next.other_updates.clear();
    next.watchlist.clear();
    store.save_digest(&next, Utc::now()).await.unwrap();
    let seen = store.event_appearances(&key).await.unwrap();
    let dates: Vec<_> = seen.iter().map(|a| a.date).collect();
    assert_eq!(dates, [next.date, date]);
    let layer = digest.key_changes[0].layers[0].clone();
    let listed = store.layer_events(&layer, 0, 100).await.unwrap();
    assert_eq!(listed[0].date, next.date);
    assert!(listed.iter().all(|a| a.event.layers.contains(&layer)));
    let expected = all.iter().filter(|e| e.layers.contains(&layer)).count() + 1;
    assert_eq!(listed.len(), expected);
    assert_eq!(
        store.layer_events(&layer, 1, 1).await.unwrap()[0],
        listed[1]
    );
    assert!(
        store
            .layer_events("no_such_layer", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Both digests are indexed: nothing to do when the store opens again.
    assert_eq!(store.reindex_archive().await.unwrap(), 0);
}
