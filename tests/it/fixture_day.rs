//! The realistic fixture day in examples/feeds, through the real HTTP fetch path and SQLite.

use std::collections::BTreeSet;

use kdigest::classify::Classifier;
use kdigest::digest::{self, candidates, window_for};
use kdigest::locale::Locale;
use kdigest::model::{Digest, FailureKind, Filter, ItemKind, Score};
use kdigest::pipeline;

use kdigest_testkit::TestApp;
use kdigest_testkit::app::open_store;
use kdigest_testkit::config::fixture_config;
use kdigest_testkit::feeds::spawn_feed_server;

fn titles(events: &[kdigest::model::DigestEvent]) -> Vec<&str> {
    events.iter().map(|e| e.title.as_str()).collect()
}

#[tokio::test]
async fn sections_ranking_and_window_match_an_experts_reading() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    assert_eq!(d.window.start.to_rfc3339(), "2026-10-27T08:00:00+08:00");
    assert_eq!(d.window.end.to_rfc3339(), "2026-10-28T08:00:00+08:00");
    assert_eq!(d.generation_mode, "extractive");
    // A major release leads; the day's two feature releases follow (they score within a
    // point of each other, so their order is not asserted); releases outrank papers.
    assert_eq!(d.key_changes[0].title, "CUTLASS 5.0.0");
    let mut rest = titles(&d.key_changes[1..]);
    rest.sort();
    // A release is headed by its name and version ("PyTorch 2.10.0 Release" in the feed).
    assert_eq!(rest, vec!["PyTorch 2.10.0", "Triton v3.6.0"]);
    assert!(d.key_changes.iter().all(|e| e.kind == ItemKind::Release));
    let papers = titles(&d.papers);
    assert_eq!(papers.len(), 4, "{papers:?}");
    assert!(papers[0].starts_with("TileFuse"), "{papers:?}");
    assert!(d.papers.iter().all(|e| e.kind == ItemKind::Paper));
    // Scores descend within each section and respect the minimum.
    for section in [&d.key_changes, &d.papers, &d.other_updates] {
        assert!(section.windows(2).all(|w| w[0].score >= w[1].score));
        assert!(section.iter().all(|e| e.score >= Score::from_f64(60.0)));
    }
    let all: Vec<&str> = d.events().map(|e| e.title.as_str()).collect();
    for absent in [
        "Coastal Flood",
        "Multi-Organ Segmentation",
        "Robotics",
        "Stream-K",
        "rc1",
        "3.5.1",
        "Bank Conflicts",
    ] {
        assert!(
            all.iter().all(|t| !t.contains(absent)),
            "{absent} should not be in {all:?}"
        );
    }
    assert_eq!(d.watchlist.len(), 5);
    assert!(d.title.contains("CUTLASS 5.0.0"));
}

#[tokio::test]
async fn paper_and_blog_post_about_it_become_one_event_with_both_sources() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    let tilefuse = d
        .events()
        .find(|e| e.title.starts_with("TileFuse"))
        .unwrap();
    let names: Vec<&str> = tilefuse.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["arXiv", "NVIDIA"]);
    assert!(tilefuse.sources[0].url.contains("arxiv.org/abs/2610.18231"));
    let corroboration = tilefuse
        .score_breakdown
        .iter()
        .find(|c| c.name == "corroboration")
        .unwrap();
    assert_eq!(corroboration.value, 0.7);
    // The blog post does not also appear on its own.
    assert!(
        d.events()
            .all(|e| !e.title.starts_with("Generating Hand-Tuned"))
    );
}

#[tokio::test]
async fn counts_failures_and_layers_are_reported() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    let counts: Vec<(&str, usize)> = d
        .source_counts
        .iter()
        .map(|c| (c.source.as_str(), c.items))
        .collect();
    assert_eq!(
        counts,
        vec![
            ("triton-lang/triton", 1),
            ("pytorch/pytorch", 2),
            ("NVIDIA/cutlass", 2),
            ("arXiv", 6),
            ("NVIDIA", 3)
        ]
    );
    assert_eq!(d.failed_sources.len(), 1);
    assert_eq!(d.failed_sources[0].source, "Example Compiler Weekly");
    assert!(
        d.failed_sources[0].error.starts_with("Not a valid feed"),
        "{:?}",
        d.failed_sources
    );
    // A reader is told why in the reader's language; the parser's English stays in the
    // error, for the operator.
    assert_eq!(d.failed_sources[0].kind, FailureKind::NotAFeed);
    for (lang, said) in [
        (
            "zh-CN",
            "抓取失败：Example Compiler Weekly（返回的内容不是有效的 RSS、Atom 或 JSON 订阅源）",
        ),
        (
            "en",
            "Failed sources: Example Compiler Weekly (what it returned is not a valid RSS, Atom or JSON feed)",
        ),
    ] {
        let md = kdigest::render::Renderer::new(lang, None)
            .unwrap()
            .render(&d.clone().in_language(lang), kdigest::render::Format::Md)
            .unwrap()
            .concat();
        assert!(md.contains(said), "{md}");
        assert!(!md.contains("Parser error"), "{md}");
    }
    let layers_of = |prefix: &str| {
        d.events()
            .find(|e| e.title.starts_with(prefix))
            .unwrap()
            .layers
            .clone()
    };
    assert!(layers_of("Tessera").contains(&"runtime".to_string()));
    assert!(layers_of("ShapeTrace").contains(&"frontend".to_string()));
    assert!(layers_of("KernelArena").contains(&"benchmark".to_string()));
    assert!(layers_of("CUTLASS 5.0.0").contains(&"kernel_codegen".to_string()));
}

#[tokio::test]
async fn calibration_patch_below_minor_and_application_papers_below_minimum() {
    let app = TestApp::start().await;
    app.digest().await;
    let config = &app.config;
    let store = &app.store;
    let window = window_for(kdigest::demo::demo_date(), config);
    let names: Vec<String> = config.sources.iter().map(|s| s.name.clone()).collect();
    let items = store.items_in_window(&names, &window).await.unwrap();
    let all = candidates(
        items,
        &window,
        config,
        &Classifier::new(&config.layers, &config.relevance),
    );
    let score = |needle: &str| {
        all.iter()
            .find(|c| c.event.primary().title.contains(needle))
            .unwrap_or_else(|| panic!("{needle}"))
            .assessment
            .score
    };
    assert!(score("PyTorch 2.9.1") < score("PyTorch 2.10.0"));
    assert!(score("CUTLASS 4.4.2") < score("CUTLASS 5.0.0"));
    assert!(
        score("Triton v3.6.0") > score("KernelArena"),
        "a minor Triton release outranks a routine paper"
    );
    for irrelevant in ["Coastal Flood", "Multi-Organ Segmentation", "Robotics"] {
        assert!(
            score(irrelevant) < config.digest.min_score,
            "{irrelevant}: {}",
            score(irrelevant)
        );
    }
}

#[tokio::test]
async fn filtering_keeps_matching_events_and_rebuilds_the_sections() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    let config = &app.config;
    let locale = Locale::builtin(&config.digest.language);
    let f = Filter {
        layers: BTreeSet::from(["runtime".to_string()]),
        min_score: Score::from_f64(70.0),
        boost: None,
        follows: Vec::new(),
    };
    let filtered = digest::filter(&d, &f, &locale);
    assert!(!filtered.is_empty());
    for e in filtered.events() {
        assert!(
            e.layers.contains(&"runtime".to_string()) && e.score >= Score::from_f64(70.0),
            "{}",
            e.title
        );
    }
    let kept: BTreeSet<&str> = filtered.events().map(|e| e.id.as_str()).collect();
    assert!(
        filtered
            .watchlist
            .iter()
            .all(|w| kept.contains(w.event_id.as_str()))
    );
    let lead = kdigest::release_notes::release_name(&filtered.key_changes[0].title);
    assert!(
        filtered.title.contains(lead.as_ref()),
        "{} / {lead}",
        filtered.title
    );
    let nothing = Filter {
        layers: BTreeSet::new(),
        min_score: Score::MAX,
        boost: None,
        follows: Vec::new(),
    };
    assert!(digest::filter(&d, &nothing, &locale).is_empty());
    // A followed project passes the threshold and the layers, marked; only it passes.
    let following = Filter {
        layers: BTreeSet::from(["frontend".to_string()]),
        follows: vec!["nothing-like-it".into(), "tessera".into()],
        ..nothing.clone()
    };
    let followed = digest::filter(&d, &following, &locale);
    let kept: Vec<(&str, Option<&str>)> = followed
        .events()
        .map(|e| (e.title.as_str(), e.followed.as_deref()))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].0.starts_with("Tessera"), "{kept:?}");
    assert_eq!(kept[0].1, Some("tessera"));
    assert!(
        d.events().all(|e| e.followed.is_none()),
        "the stored digest marks nothing"
    );

    // Delivery renders once per edition that differs: phrases no event is about change
    // nothing, so readers following different quiet projects share one render.
    let cache = kdigest::deliver::RenderCache::new(None);
    let quiet = |phrase: &str| Filter {
        follows: vec![phrase.to_string()],
        ..nothing.clone()
    };
    let webhook = kdigest::subscriber::Channel::Webhook;
    let a = cache
        .messages(&d, &quiet("project-a"), "en", webhook)
        .unwrap();
    let b = cache
        .messages(&d, &quiet("project-b"), "en", webhook)
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert_eq!(cache.len(), 1);
    let news = cache
        .messages(&d, &quiet("tessera"), "en", webhook)
        .unwrap();
    assert_eq!(cache.len(), 2);
    assert!(
        news[0].contains("\"followed\": \"tessera\""),
        "{:.300}",
        news[0]
    );
    assert!(!a[0].contains("Tessera"));

    // The day re-run: an earlier version of it had no Tessera. Once delivery forgets the
    // date, the new version is indexed afresh and the follower gets the story.
    let cache = kdigest::deliver::RenderCache::new(None);
    let mut earlier = d.clone();
    for section in [
        &mut earlier.key_changes,
        &mut earlier.papers,
        &mut earlier.other_updates,
    ] {
        section.retain(|e| !e.title.starts_with("Tessera"));
    }
    let before = cache
        .messages(&earlier, &quiet("tessera"), "en", webhook)
        .unwrap();
    assert!(!before[0].contains("Tessera"));
    cache.forget(d.date);
    let after = cache
        .messages(&d, &quiet("tessera"), "en", webhook)
        .unwrap();
    assert!(
        after[0].contains("\"followed\": \"tessera\""),
        "the re-run's story reaches its follower: {:.300}",
        after[0]
    );
}

#[tokio::test]
async fn conditional_get_sends_validators_and_a_304_keeps_the_items() {
    let server = spawn_feed_server().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fixture_config(&format!("{}/etag", server.base), dir.path(), "");
    let store = open_store(&config).await;
    let date = kdigest::demo::demo_date();
    let first = pipeline::generate(&config, &store, date, &|_| {})
        .await
        .unwrap();
    let second = pipeline::generate(&config, &store, date, &|_| {})
        .await
        .unwrap();
    use std::sync::atomic::Ordering;
    assert_eq!(server.hits.etag.load(Ordering::SeqCst), 12);
    assert_eq!(
        server.hits.etag_304.load(Ordering::SeqCst),
        5,
        "every working source answered 304 the second time"
    );
    assert_eq!(first.events().count(), second.events().count());
    assert_eq!(
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&second).unwrap()
    );
}

/// True when `text` has a CJK ideograph: what an English reader must not get from kdigest's
/// own words.
fn has_han(text: &str) -> bool {
    text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

#[tokio::test]
async fn every_reader_gets_kdigests_words_in_their_own_language() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    let config = &app.config;
    assert_eq!(config.digest.language, "zh-CN");
    // The fixture day has events whose "why it matters" kdigest writes itself (no impact
    // sentence in the source) and a watch list it always writes.
    assert!(d.events().any(|e| has_han(&e.why_it_matters)), "{d:#?}");
    assert!(d.watchlist.iter().all(|w| has_han(&w.text)));

    let en = d.clone().in_language("en");
    assert_eq!(en.language, "en");
    for e in en.events() {
        assert!(
            !has_han(&e.why_it_matters),
            "{}: {}",
            e.title,
            e.why_it_matters
        );
        assert!(!has_han(&e.summary), "{}", e.summary);
    }
    for w in &en.watchlist {
        assert!(!has_han(&w.text), "{}", w.text);
    }
    // Source text is the same for both readers; the Chinese reader gets it as a marked
    // quote after a lead in Chinese, the English reader as it is.
    for (zh, en) in d.events().zip(en.events()) {
        assert_eq!(zh.title, en.title);
        let (lead, quote) = zh.summary.split_once('「').expect("quoted");
        assert!(has_han(lead), "{}", zh.summary);
        let quote = quote.strip_suffix('」').expect("the quote closes");
        assert!(
            en.summary.starts_with(quote.trim_end_matches('…')),
            "{} / {}",
            zh.summary,
            en.summary
        );
    }
    // And the whole English render (headings, labels, notes) has no Chinese.
    let renderer = kdigest::render::Renderer::new("en", None).unwrap();
    let filtered = digest::filter(&en, &Filter::default(), renderer.locale());
    let md = renderer
        .render(&filtered, kdigest::render::Format::Md)
        .unwrap()
        .concat();
    let han: Vec<&str> = md.lines().filter(|l| has_han(l)).collect();
    assert!(han.is_empty(), "Chinese in the English render: {han:#?}");
}

#[tokio::test]
async fn events_are_numbered_once_per_digest_and_filtering_keeps_the_numbers() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    let config = &app.config;
    let numbers: Vec<usize> = d.events().map(|e| e.n).collect();
    assert_eq!(numbers, (1..=numbers.len()).collect::<Vec<_>>());
    assert!(!d.papers.is_empty() && !d.key_changes.is_empty());
    let first_paper = &d.papers[0];
    assert_eq!(first_paper.n, d.key_changes.len() + 1);
    assert_eq!(d.event_number(first_paper.n).unwrap().id, first_paper.id);

    // The markdown render numbers the first paper after the key changes, not "1.".
    let renderer = kdigest::render::Renderer::new(&config.digest.language, None).unwrap();
    let md = renderer
        .render(&d, kdigest::render::Format::Md)
        .unwrap()
        .concat();
    assert!(
        md.contains(&format!("### {}. ", first_paper.n)),
        "first paper not numbered {} in:\n{md}",
        first_paper.n
    );
    assert!(md.starts_with(&format!("# {} · ", d.date)), "{md}");

    // A subscriber who sees only papers sees them under their digest-wide numbers.
    let locale = Locale::builtin(&config.digest.language);
    let only_papers: BTreeSet<u64> = d.papers.iter().map(|e| e.n as u64).collect();
    let filtered = digest::filter(
        &Digest {
            key_changes: vec![],
            other_updates: vec![],
            ..d.clone()
        },
        &Filter::default(),
        &locale,
    );
    let kept: BTreeSet<u64> = filtered.events().map(|e| e.n as u64).collect();
    assert_eq!(kept, only_papers);
}

#[tokio::test]
async fn breaking_and_behaviour_changes_lead_why_it_matters_and_name_the_watch_item() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    let event = |prefix: &str| titled(&d, prefix);
    // CUTLASS 5.0's notes have a "Breaking changes" section; PyTorch's "Backwards
    // Incompatible Changes"; Triton's "Breaking changes" after its bug fixes. A change in
    // one plain shape is said in Chinese (gloss::change, CUTLASS's two requirements and
    // the compilers that meet them included); a longer one is quoted.
    for (title, quoted) in [
        ("Triton v3.6.0", "不再支持 Python 3.9。"),
        (
            "PyTorch 2.10.0",
            "不再支持 Python 3.9；最低版本要求改为 Python 3.10。",
        ),
    ] {
        let e = event(title);
        // Marked as breaking (the lead-in varies so no three events share it); the
        // changed default each also has follows, marked as a behaviour change.
        assert!(
            ["⚠ 不兼容变化：", "升级前需要处理："]
                .iter()
                .any(|mark| e.why_it_matters.starts_with(&format!("{mark}{quoted}")))
                && e.why_it_matters.contains("。行为变化：「"),
            "{title}: {}",
            e.why_it_matters
        );
        // The watch item names the changed default: it fails silently, unlike a removal.
        let watch = d.watchlist.iter().find(|w| w.event_id == e.id).unwrap();
        assert!(
            watch.text.contains("：行为变化「"),
            "{title}: {}",
            watch.text
        );
    }
    // CUTLASS 5.0's one plain-line change ("… and the minimum toolchain is CUDA 13.0 with a
    // C++20 host compiler") says its first breaking change again: its second breaking
    // change is shown instead, and the watch item names the requirement.
    let cutlass = event("CUTLASS 5.0.0");
    assert!(
        cutlass.why_it_matters.starts_with(
            "⚠ 不兼容变化：需要 CUDA Toolkit 13.0 或更新版本，以及 C++20（GCC 11+、Clang 17+、MSVC 19.38+）；「CUTLASS 2.x device-level kernels"
        ) && !cutlass.why_it_matters.contains("行为变化")
            && cutlass.why_it_matters.matches("13.0").count() == 1,
        "{}",
        cutlass.why_it_matters
    );
    let watch = d
        .watchlist
        .iter()
        .find(|w| w.event_id == cutlass.id)
        .unwrap();
    assert!(
        watch.text.contains("需要 CUDA Toolkit 13.0"),
        "{}",
        watch.text
    );
    // A patch release without such a section keeps the plain line, and no line ever has an
    // empty layer list in it. Its summary already quotes the first two fixes, so the line
    // quotes the next one: no sentence is quoted twice in one event.
    let patch = event("CUTLASS 4.4.2");
    assert!(
        patch
            .why_it_matters
            .starts_with("修复：「Fixed a build failure with GCC 14"),
        "{}",
        patch.why_it_matters
    );
    assert!(
        patch
            .summary
            .contains("CuTe DSL: fixed a JIT cache collision")
    );
    assert!(!patch.summary.contains("Fixed a build failure with GCC 14"));
    // A patch that fixes wrong results says so, marked, and its watch item says to upgrade.
    let fix = event("PyTorch 2.9.1");
    assert!(
        fix.why_it_matters
            .starts_with("⚠ 修复错误结果，建议升级：「Fix incorrect results from index_put_"),
        "{}",
        fix.why_it_matters
    );
    // No two events share a watch sentence once their titles are set aside.
    let reasons: Vec<String> = d
        .watchlist
        .iter()
        .map(|w| {
            w.text
                .split_once('：')
                .map_or(w.text.clone(), |(_, r)| r.to_string())
        })
        .collect();
    let distinct: BTreeSet<&String> = reasons.iter().collect();
    assert_eq!(distinct.len(), reasons.len(), "{reasons:?}");
    for e in d.events() {
        let why = &e.why_it_matters;
        assert!(!why.contains("涉及 ，"), "{why}");
        // Source words are quoted, and every quote closes.
        assert_eq!(
            why.matches('「').count(),
            why.matches('」').count(),
            "{why}"
        );
    }
    let paper = d.papers.first().unwrap();
    assert!(
        paper.why_it_matters.starts_with(
            "论文报告（对比 FlashAttention-3、cuDNN、CuTe）：算力达到 1,530 TFLOPS。原文：「"
        ),
        "{}",
        paper.why_it_matters
    );
    // The English reader gets the English marker around the same quotes.
    let en = d.clone().in_language("en");
    let cutlass = en.events().find(|e| e.title == "CUTLASS 5.0.0").unwrap();
    assert!(
        cutlass
            .why_it_matters
            .starts_with("⚠ Breaking changes: “Requires CUDA Toolkit 13.0"),
        "{}",
        cutlass.why_it_matters
    );
}

#[tokio::test]
async fn the_headline_and_overview_are_written_in_the_readers_language() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    assert_eq!(
        d.title,
        "CUTLASS 5.0.0 与 Triton v3.6.0 发布；另有 3 个版本更新、4 篇论文和 1 篇技术文章"
    );
    // One Chinese clause per event (at most four), naming it and its main figure with
    // what the figure measures; no English is quoted (the source's sentences stay in each
    // event's body).
    assert_eq!(
        d.overview,
        "CUTLASS 5.0.0 主版本发布，含 6 项需处理的变化，编译速度达到此前的 2.4 倍；\
         Triton v3.6.0 次版本发布，含 5 项需处理的变化，编译时间降低 40%；\
         PyTorch 2.10.0 次版本发布，含 5 项需处理的变化，HuggingFace 测试集上的几何平均速度达到此前的 1.18 倍；\
         论文 TileFuse 报告算力达到 1,530 TFLOPS。"
    );
    assert!(d.overview.ends_with("。"), "{}", d.overview);
    assert!(!d.overview.contains("Release 发布"), "{}", d.overview);

    let en = d.clone().in_language("en");
    let locale = Locale::builtin("en");
    let en = digest::filter(&en, &Filter::default(), &locale);
    assert_eq!(
        en.title,
        "CUTLASS 5.0.0 and Triton v3.6.0 released; plus 3 more releases, 4 papers and 1 post"
    );
    assert!(
        en.overview
            .starts_with("CUTLASS 5.0.0 is out with 6 changes to act on; its notes report compile speed 2.4x higher. "),
        "{}",
        en.overview
    );
    assert!(!has_han(&en.overview), "{}", en.overview);

    // A reader who sees only papers gets a headline about papers.
    let papers = digest::filter(
        &Digest {
            key_changes: vec![],
            other_updates: vec![],
            ..d.clone()
        },
        &Filter::default(),
        &Locale::builtin("zh-CN"),
    );
    assert!(
        papers
            .title
            .starts_with("论文 TileFuse 报告算力达到 1,530 TFLOPS；"),
        "{}",
        papers.title
    );
    assert!(papers.title.ends_with("另有 3 篇论文"), "{}", papers.title);
}

#[tokio::test]
async fn a_chinese_why_says_the_main_result_in_chinese_before_quoting_it() {
    let app = TestApp::start().await;
    let d = app.digest().await;
    let why = |prefix: &str| titled(&d, prefix).why_it_matters.clone();
    // The figure the overview names, with what it measures, then the source's words.
    let tilefuse = why("TileFuse");
    assert!(
        tilefuse.contains("：算力达到 1,530 TFLOPS。原文：「On B200"),
        "{tilefuse}"
    );
    // No gloss where every figure would mislead: 71.4% is a foil ("correct kernels for
    // 71.4% of tasks, but only 23.8% … are both correct and at least as fast"), 23.8%
    // measures two things, and "6.1% beat the reference by more than 10%" is no 10%
    // speed-up. The sentence is quoted whole, and the watch item quotes it too.
    let arena = why("KernelArena");
    assert!(
        arena.starts_with("论文报告：「The strongest agent produces correct kernels for 71.4%"),
        "{arena}"
    );
    assert!(
        !arena.contains("通过率") && !arena.contains("速度提升 10%"),
        "{arena}"
    );
    let watch = d
        .watchlist
        .iter()
        .find(|w| w.text.starts_with("KernelArena"))
        .expect("KernelArena is watched");
    assert!(
        watch.text.contains("「The strongest agent produces"),
        "{}",
        watch.text
    );
}

/// The event of `d` whose title starts with `prefix`.
fn titled<'a>(d: &'a kdigest::model::Digest, prefix: &str) -> &'a kdigest::model::DigestEvent {
    d.events()
        .find(|e| e.title.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} event"))
}
