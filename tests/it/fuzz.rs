//! Short runs of the fuzz targets in the suite (the long campaign is
//! `cargo bench --bench fuzz -- all 600`, figures in docs/PERFORMANCE.md).

use kdigest_testkit::fuzz as kit;

/// Each target on its seeds (the repository's real feeds, configs and commands) and a few
/// hundred mutations of them: no panic. Speed is the bench's business, not asserted here.
#[test]
fn every_fuzz_target_survives_its_seeds_and_their_mutations() {
    for name in kit::TARGETS {
        let target = kit::target(name).unwrap();
        let mutations = if *name == "render" { 150 } else { 1500 };
        let r = kit::fuzz(
            &target,
            0x5eed,
            kit::Budget::Runs(target.seeds.len() as u64 + mutations),
        );
        assert!(
            target.seeds.len() >= 3,
            "{name}: {} seeds",
            target.seeds.len()
        );
        assert_eq!(r.runs, target.seeds.len() as u64 + mutations);
        let crashes: Vec<String> = r
            .crashes
            .iter()
            .map(|(input, message)| {
                let path = kit::save(name, "crash", input).map(|p| p.display().to_string());
                format!("{message} (input kept at {path:?})")
            })
            .collect();
        assert!(crashes.is_empty(), "{name}: {crashes:#?}");
        assert!(r.shapes > 1, "{name}: every input ended the same way");
    }
}

/// The engine itself: a target with a planted bug (a panic on a token the seeds lack) is
/// caught, reported with its message, and the run goes on.
#[test]
fn the_fuzzer_finds_a_planted_panic_and_goes_on() {
    let target = kit::Target {
        name: "planted",
        seeds: vec![b"<feed>ok</feed>".to_vec()],
        dictionary: vec!["<![CDATA[", "]]>", "&amp;"],
        run: Box::new(|bytes| {
            let text = String::from_utf8_lossy(bytes);
            if text.contains("<![CDATA[]]>") {
                panic!("planted: empty CDATA");
            }
            text.len() as u64
        }),
    };
    let r = kit::fuzz(&target, 3, kit::Budget::Runs(20_000));
    assert_eq!(r.runs, 20_000);
    assert!(!r.crashes.is_empty(), "the planted panic was not found");
    assert!(r.crashes.iter().all(|(input, message)| {
        message == "planted: empty CDATA" && String::from_utf8_lossy(input).contains("<![CDATA[]]>")
    }));
}
