//! The module graph (issue 31): which top-level modules of `src/` import which, read from
//! the `crate::` paths of the non-test code. The pure stages must not reach the outbound
//! channels, the store or the servers through a cycle; this test holds the cycles that are
//! left to what they were when it was written, so none grows back and none is added while
//! the rest of the knot is cut.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::helpers::repo_root;

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

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = repo_root().join("src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = module_of(&src, file);
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

/// Every module `from` reaches through its imports.
fn reach(edges: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(m) = stack.pop() {
        for next in edges.get(&m).into_iter().flatten() {
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    seen
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

/// The pure core (the stages, the model, the core settings, the renderer) reaches no edge:
/// no channel, store, server, network fetch or the application's configuration. This is the
/// set a core crate is made of (issue 31).
#[test]
fn the_pure_core_reaches_no_edge() {
    let edges = edges();
    let edge_modules = [
        "channels",
        "config",
        "store",
        "web",
        "daemon",
        "deliver",
        "bot",
        "fetch",
        "pipeline",
        "cli",
        "netguard",
        "sources",
        "summarize",
        "demo",
    ];
    for pure in [
        "settings",
        "model",
        "text",
        "locale",
        "release_notes",
        "classify",
        "learned",
        "score",
        "cluster",
        "digest",
        "parse",
        "schedule",
        "crontab",
        "tokens",
        "weekly",
        "followup",
        "feedback",
        "render",
        "archive",
        "redact",
    ] {
        let reached = reach(&edges, pure);
        let wrong: Vec<&str> = edge_modules
            .iter()
            .copied()
            .filter(|e| reached.contains(*e))
            .collect();
        assert!(wrong.is_empty(), "{pure} reaches {wrong:?}: {reached:?}");
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
