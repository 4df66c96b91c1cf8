//! `cargo bench --bench fuzz -- [TARGET|all] [SECONDS] [--seed N] [--replay FILE]`
//!
//! Fuzzes kdigest's feed parsing and HTML to text (`feed`), every render (`render`), the
//! configuration loader (`config`), the bot command parser (`command`) and the LLM reply
//! check (`llm-reply`); see the test kit's fuzz.rs
//! (crates/testkit/src/fuzz.rs) for the engine. Without arguments (as `cargo bench` runs it) each target gets 20 s; the
//! campaign of issue 30 is `cargo bench --bench fuzz -- all 600`. Findings (panics, runs
//! slower than 1 s) are kept in target/fuzz/<target>/ and make the exit status 1.

use kdigest_testkit::fuzz as kit;

use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut names = Vec::new();
    let mut seconds = 20u64;
    let mut seed = 1u64;
    let mut replay = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seed" => seed = number(args.next(), "--seed"),
            "--replay" => {
                replay = Some(
                    args.next()
                        .unwrap_or_else(|| usage("--replay needs a file")),
                )
            }
            "all" => names.extend(kit::TARGETS.iter().map(|t| t.to_string())),
            a if a.parse::<u64>().is_ok() => seconds = number(Some(arg), "SECONDS"),
            a if kit::TARGETS.contains(&a) => names.push(arg),
            a => usage(&format!("unknown target or option {a:?}")),
        }
    }
    if names.is_empty() {
        names.extend(kit::TARGETS.iter().map(|t| t.to_string()));
    }
    let mut findings = 0;
    for name in &names {
        let target = kit::target(name).expect("a listed target");
        if let Some(file) = &replay {
            match kit::replay(&target, std::path::Path::new(file)) {
                Ok(took) => println!(
                    "fuzz {name}: {file} ran in {:.1} ms without a panic",
                    took.as_secs_f64() * 1e3
                ),
                Err(e) => usage(&format!("cannot read {file}: {e}")),
            }
            continue;
        }
        let r = kit::fuzz(
            &target,
            seed,
            kit::Budget::Time(Duration::from_secs(seconds)),
        );
        println!(
            "fuzz {name}: {} runs in {:.0} s ({:.0}/s), seed {seed}, {} seeds, corpus {}, {} outcome shapes; \
             crashes {} (target 0), runs over 1 s {} (target 0), slowest {:.1} ms ({} bytes)",
            r.runs,
            r.elapsed.as_secs_f64(),
            r.runs as f64 / r.elapsed.as_secs_f64(),
            target.seeds.len(),
            r.corpus,
            r.shapes,
            r.crashes.len(),
            r.slow.len(),
            r.slowest.as_secs_f64() * 1e3,
            r.slowest_len,
        );
        for (input, message) in &r.crashes {
            findings += 1;
            println!(
                "  panic: {message}\n    input: {}",
                saved(name, "crash", input)
            );
        }
        for (input, took) in &r.slow {
            findings += 1;
            println!(
                "  slow: {took:?}\n    input: {}",
                saved(name, "slow", input)
            );
        }
    }
    if findings > 0 {
        std::process::exit(1);
    }
}

fn saved(name: &str, kind: &str, input: &[u8]) -> String {
    match kit::save(name, kind, input) {
        Ok(path) => path.display().to_string(),
        Err(e) => format!("(not saved: {e})"),
    }
}

fn number(arg: Option<String>, what: &str) -> u64 {
    arg.and_then(|a| a.parse().ok())
        .unwrap_or_else(|| usage(&format!("{what} needs a whole number")))
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "fuzz: {problem}\nusage: cargo bench --bench fuzz -- [{}|all] [SECONDS] [--seed N] [--replay FILE]",
        kit::TARGETS.join("|")
    );
    std::process::exit(2)
}
