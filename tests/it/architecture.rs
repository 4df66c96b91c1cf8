//! The module graph (issue 31): which top-level modules of `src/` and `crates/core/src/`
//! import which, read from the `crate::` paths of the non-test code. No module is in an
//! import cycle, and the core crate (the pure stages) depends on no I/O crate and bans
//! file, network and clock calls.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kdigest_testkit::feeds::repo_root;

/// Top-level module of a file under src/: `deliver/engine.rs` -> `deliver`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The code of a file without its test module and without comment lines.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The import edges between the top-level modules of the application (src/) and of the
/// core crate (crates/core/src/, whose modules the application re-exports under the same
/// names), read from `crate::` paths.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    for src in [repo_root().join("src"), repo_root().join("crates/core/src")] {
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push((src.clone(), path));
                }
            }
        }
    }
    let modules: BTreeSet<String> = files.iter().map(|(src, f)| module_of(src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (src, file) in &files {
        let from = module_of(src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name != from && modules.contains(&name) {
                edges.entry(from.clone()).or_default().insert(name);
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// No import cycle anywhere. The last one (channels, config, fetch, netguard, parse,
/// tokens) was cut on 2026-12-06 by the core settings (`settings`), which name no channel,
/// and the registry's `ChannelsConfig`, which the application's configuration holds.
#[test]
fn no_import_cycle() {
    let edges = edges();
    // The reader works: it sees the edges everyone knows are there.
    assert!(edges["daemon"].contains("deliver"), "{edges:?}");
    assert!(edges["pipeline"].contains("fetch"), "{edges:?}");
    let found = cycles(&edges);
    let described: Vec<String> = found
        .iter()
        .map(|cycle| {
            let edges_in: Vec<String> = cycle
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .intersection(cycle)
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            format!("{cycle:?}, its edges: {edges_in:?}")
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", described.join("\n"));
}

/// Every package `name` depends on, directly or not, as Cargo.lock resolves them (what
/// `cargo tree -p <name>` shows, across all features).
fn dependency_tree(name: &str) -> BTreeSet<String> {
    let lock: toml::Value =
        toml::from_str(&std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap()).unwrap();
    let packages = lock["package"].as_array().unwrap();
    let deps_of = |name: &str| -> Vec<String> {
        let package = packages
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("{name} is not in Cargo.lock"));
        package
            .get("dependencies")
            .and_then(|d| d.as_array())
            .map(|d| {
                d.iter()
                    // "name" or "name version" when two versions are locked.
                    .map(|d| d.as_str().unwrap().split(' ').next().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut seen = BTreeSet::new();
    let mut stack = vec![name.to_string()];
    while let Some(name) = stack.pop() {
        for dep in deps_of(&name) {
            if seen.insert(dep.clone()) {
                stack.push(dep);
            }
        }
    }
    seen
}

/// The core crate's dependencies hold no I/O crate; it cannot import the application or the
/// channels (the compiler sees to that), and its clippy.toml bans file, network and clock
/// calls.
#[test]
fn the_core_crate_depends_on_no_io_crate_and_bans_io_calls() {
    let seen = dependency_tree("kdigest-core");
    // The walk works: the core's own dependencies are there.
    assert!(
        seen.contains("minijinja") && seen.contains("chrono"),
        "{seen:?}"
    );
    for io in [
        "tokio",
        "mio",
        "socket2",
        "reqwest",
        "hyper",
        "hyper-util",
        "axum",
        "tower",
        "sqlx",
        "teloxide",
        "serenity",
        "lettre",
        "rustls",
        "kdigest-channels",
    ] {
        assert!(!seen.contains(io), "kdigest-core depends on {io}: {seen:?}");
    }
    let clippy = std::fs::read_to_string(repo_root().join("crates/core/clippy.toml")).unwrap();
    for banned in [
        "std::fs::read_to_string",
        "std::fs::File::open",
        "std::net::TcpStream::connect",
        "std::time::SystemTime::now",
        "chrono::Utc::now",
    ] {
        assert!(
            clippy.contains(&format!("\"{banned}\"")),
            "crates/core/clippy.toml does not ban {banned}"
        );
    }
}

/// The channels crate is outbound only: the core's types and HTTP, no store, no server.
#[test]
fn the_channels_crate_has_no_store_and_no_server() {
    let seen = dependency_tree("kdigest-channels");
    assert!(
        seen.contains("kdigest-core") && seen.contains("reqwest"),
        "{seen:?}"
    );
    for inbound in ["sqlx", "axum", "kdigest"] {
        assert!(
            !seen.contains(inbound),
            "kdigest-channels depends on {inbound}: {seen:?}"
        );
    }
}

#[test]
fn the_cycle_finder_finds_a_planted_cycle() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
        edges.entry(a.into()).or_default().insert(b.into());
    }
    let found = cycles(&edges);
    assert_eq!(
        found,
        vec![["a", "b", "c"].iter().map(|s| s.to_string()).collect()]
    );
}
