//! A mutation fuzzer for kdigest's parsers and renders, on stable Rust.
//!
//! `cargo fuzz` needs a nightly compiler and this project builds with stable 1.95 only, so
//! the engine is our own: a seeded generator mutates a corpus (the repository's real feeds,
//! configs and commands) with byte edits, dictionary tokens of the input's grammar, spliced
//! and repeated ranges (deep nesting, long runs); an input that ends in a new outcome (the
//! target's `shape`: error kind, item count, ...) joins the corpus. It is guided by
//! outcomes, not by coverage. Every run is timed and caught: a panic or a run slower than
//! [`SLOW`] is a finding, kept in `target/fuzz/<target>/`.
//!
//! Used by `benches/fuzz/main.rs` (`cargo bench --bench fuzz -- <target> <seconds>`) and by
//! the test suite's short runs (tests/it/fuzz.rs).

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use kdigest::classify::Classifier;
use kdigest::cli::output::Output;
use kdigest::config::{Config, SourceConfig, SourceLocation};
use kdigest::digest::{self, Assembly};
use kdigest::model::{Filter, SourceKind, Window};
use kdigest::render::Renderer;

/// A run slower than this is a finding (issue 30: "no input slower than 1 s").
pub const SLOW: Duration = Duration::from_secs(1);

/// Inputs grow no larger than this (the fetcher's own body cap is larger, but the parsers'
/// behaviour on size is covered by the size-bound tests).
const MAX_LEN: usize = 256 * 1024;

/// The corpus keeps at most this many inputs (oldest outcome first out).
const MAX_CORPUS: usize = 512;

/// One thing to fuzz: its seeds, the tokens of its grammar, and a run that returns the
/// outcome's shape (a small number; inputs with a new shape join the corpus).
pub struct Target {
    pub name: &'static str,
    pub seeds: Vec<Vec<u8>>,
    pub dictionary: Vec<&'static str>,
    pub run: Run,
}

/// A target's run: the input in, the outcome's shape out.
pub type Run = Box<dyn Fn(&[u8]) -> u64>;

pub const TARGETS: &[&str] = &["feed", "render", "config", "command", "llm-reply"];

/// The target called `name`, its seeds read from the repository.
pub fn target(name: &str) -> Option<Target> {
    Some(match name {
        "feed" => feed(),
        "render" => render(),
        "config" => config(),
        "command" => command(),
        "llm-reply" => llm_reply(),
        _ => return None,
    })
}

/// A small deterministic generator (xorshift64*), so a run is reproduced by its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// What a campaign found.
#[derive(Debug, Default)]
pub struct Report {
    pub runs: u64,
    pub elapsed: Duration,
    /// Panics: the input and the panic message.
    pub crashes: Vec<(Vec<u8>, String)>,
    /// Runs slower than [`SLOW`].
    pub slow: Vec<(Vec<u8>, Duration)>,
    pub slowest: Duration,
    pub slowest_len: usize,
    pub corpus: usize,
    pub shapes: usize,
}

/// How long a campaign goes on.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    Runs(u64),
    Time(Duration),
}

/// Runs `target` on its seeds, then on mutations until `budget` is spent.
pub fn fuzz(target: &Target, seed: u64, budget: Budget) -> Report {
    let mut rng = Rng::new(seed);
    let mut report = Report::default();
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let mut shapes = std::collections::HashSet::new();
    let started = Instant::now();
    quiet_panics_while_fuzzing();
    let mut pending: std::collections::VecDeque<Vec<u8>> = target.seeds.iter().cloned().collect();
    let watchdog = Watchdog::start(target.name);
    loop {
        let done = match budget {
            Budget::Runs(n) => report.runs >= n,
            Budget::Time(t) => started.elapsed() >= t,
        };
        if done {
            break;
        }
        let input = pending.pop_front().unwrap_or_else(|| {
            let base = corpus[rng.below(corpus.len())].clone();
            mutate(base, &corpus, &target.dictionary, &mut rng)
        });
        let t = Instant::now();
        watchdog.watch(&input);
        FUZZING.set(true);
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
        FUZZING.set(false);
        watchdog.clear();
        let took = t.elapsed();
        report.runs += 1;
        if took > report.slowest {
            report.slowest = took;
            report.slowest_len = input.len();
        }
        if took > SLOW {
            report.slow.push((input.clone(), took));
        }
        match outcome {
            Ok(shape) => {
                if shapes.insert(shape) || corpus.is_empty() {
                    if corpus.len() == MAX_CORPUS {
                        corpus.remove(0);
                    }
                    corpus.push(input);
                }
            }
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic without a message".into());
                report.crashes.push((input, message));
            }
        }
    }
    report.elapsed = started.elapsed();
    report.corpus = corpus.len();
    report.shapes = shapes.len();
    report
}

thread_local! {
    /// Set around each run: its panics are findings, reported by the campaign, not printed.
    static FUZZING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs, once, a panic hook that is silent on a fuzzing thread and the previous hook
/// everywhere else (tests run beside the fuzzer in the same process).
fn quiet_panics_while_fuzzing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !FUZZING.get() {
                previous(info)
            }
        }));
    });
}

/// A run that does not end is not caught by `catch_unwind`: a thread watches each run and,
/// past [`HANG`], keeps the input and aborts the process with its path.
struct Watchdog {
    current: std::sync::Arc<std::sync::Mutex<Option<Running>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// When the watched run started, and its input.
type Running = (Instant, Vec<u8>);

/// A run this long is taken for a hang.
const HANG: Duration = Duration::from_secs(60);

impl Watchdog {
    fn start(name: &'static str) -> Watchdog {
        let current = std::sync::Arc::new(std::sync::Mutex::new(None::<Running>));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (watched, stopped) = (current.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                let hung = match &*watched.lock().unwrap_or_else(|e| e.into_inner()) {
                    Some((since, input)) if since.elapsed() > HANG => Some(input.clone()),
                    _ => None,
                };
                if let Some(input) = hung {
                    let path = save(name, "hang", &input);
                    eprintln!("fuzz {name}: a run went on for over {HANG:?}; its input: {path:?}");
                    std::process::abort();
                }
            }
        });
        Watchdog { current, stop }
    }

    fn watch(&self, input: &[u8]) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), input.to_vec()));
    }

    fn clear(&self) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One to four stacked edits of `input`.
fn mutate(mut input: Vec<u8>, corpus: &[Vec<u8>], dictionary: &[&str], rng: &mut Rng) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        let at = rng.below(len + 1);
        match rng.below(8) {
            0 if len > 0 => input[at.min(len - 1)] ^= 1 << rng.below(8),
            1 if len > 0 => {
                const SPECIAL: &[u8] = b"\0\xff<>&;\"'\n\r\t /\\]]#%{}[]*_`~|@!-=.0:\xc3\xe4\xf0";
                input[at.min(len - 1)] = SPECIAL[rng.below(SPECIAL.len())];
            }
            2 | 3 => {
                let token = dictionary[rng.below(dictionary.len())].as_bytes();
                input.splice(at..at, token.iter().copied());
            }
            4 if len > 0 => {
                let end = (at + 1 + rng.below(64.min(len - at.min(len - 1)))).min(len);
                input.drain(at.min(len - 1)..end);
            }
            5 if len > 0 => {
                // A range copied elsewhere: nesting and repetition.
                let from = rng.below(len);
                let to = (from + 1 + rng.below(256)).min(len);
                let piece = input[from..to].to_vec();
                input.splice(at..at, piece);
            }
            6 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let from = rng.below(other.len());
                    let to = (from + 1 + rng.below(512)).min(other.len());
                    input.splice(at..at, other[from..to].iter().copied());
                }
            }
            7 => {
                // A token repeated up to thousands of times: deep nesting, long runs.
                let token = dictionary[rng.below(dictionary.len())].as_bytes();
                let most = if rng.below(8) == 0 { 4096 } else { 32 };
                let times = 1 + rng.below(most);
                let run: Vec<u8> = token
                    .iter()
                    .copied()
                    .cycle()
                    .take(token.len() * times)
                    .collect();
                input.splice(at..at, run);
            }
            _ => input.truncate(at),
        }
    }
    input.truncate(MAX_LEN);
    input
}

/// Keeps a finding in `target/fuzz/<target>/<kind>-<hash>` and returns its path.
pub fn save(target: &str, kind: &str, input: &[u8]) -> std::io::Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    input.hash(&mut h);
    let dir = repo().join("target/fuzz").join(target);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{kind}-{:016x}", h.finish()));
    std::fs::write(&path, input)?;
    Ok(path)
}

fn repo() -> PathBuf {
    crate::feeds::repo_root()
}

/// The files directly in `dir` (relative to the repository) no larger than [`MAX_LEN`].
fn files(dir: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .filter(|b| b.len() <= MAX_LEN)
        .collect()
}

fn shape_of(parts: &[u64]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325, |h, p| {
        (h ^ p).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The fetch time the parsers are given (fixed: a run is reproduced by its input).
fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap()
}

fn source(kind: SourceKind) -> SourceConfig {
    SourceConfig {
        name: "fuzz".into(),
        location: SourceLocation::File(PathBuf::from("fuzz.xml")),
        kind,
        weight: 0.8,
        max_items: None,
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

const FEED_TOKENS: &[&str] = &[
    "<item>",
    "</item>",
    "<entry>",
    "</entry>",
    "<title>",
    "</title>",
    "<link>",
    "</link>",
    "<description>",
    "</description>",
    "<content type=\"html\">",
    "</content>",
    "<guid>",
    "</guid>",
    "<pubDate>",
    "</pubDate>",
    "<updated>",
    "</updated>",
    "<![CDATA[",
    "]]>",
    "&lt;",
    "&gt;",
    "&amp;",
    "&#x0;",
    "&#65;",
    "&#xD800;",
    "&nbsp;",
    "&unknown;",
    "<sup>",
    "</sup>",
    "<sub>",
    "</sub>",
    "<p>",
    "</p>",
    "<br/>",
    "<li>",
    "<ul>",
    "<pre><code>",
    "</code></pre>",
    "<a href=\"http://127.0.0.1/\">",
    "<a href=\"javascript:x\">",
    "</a>",
    "<script>",
    "</script>",
    "<style>",
    "<!--",
    "-->",
    "<?xml version=\"1.0\" encoding=\"windows-1251\"?>",
    "<!DOCTYPE x [<!ENTITY a \"aaaa\">]>",
    "&a;",
    "xml:base=\"../\"",
    " href=\"",
    "\"",
    "Tue, 31 Dec 9999 23:59:59 +0000",
    "1970-01-01T00:00:00Z",
    "2026-02-30T25:61:00Z",
    "{\"version\":\"https://jsonfeed.org/version/1.1\",\"items\":[",
    "{\"id\":\"1\",\"content_html\":\"",
    "\"}",
    "]}",
    "arXiv:2511.00001v2",
    "Announce Type: new",
    "Triton",
    "CUDA",
    "kernel",
    "2<sup>26</sup>",
    "核函数",
    "\u{202e}",
    "\u{feff}",
    "\r\n",
    "\0",
];

/// Feed parsing (RSS 0.9-2.0, RDF, Atom, JSON Feed, encodings, dates) and HTML to text.
fn feed() -> Target {
    let mut seeds = files("tests/fixtures/reference/feeds");
    seeds.extend(files("examples/feeds"));
    Target {
        name: "feed",
        seeds,
        dictionary: FEED_TOKENS.to_vec(),
        run: Box::new(move |bytes| {
            let mut shape = Vec::new();
            for kind in [
                SourceKind::Arxiv,
                SourceKind::GithubReleases,
                SourceKind::Feed,
            ] {
                match kdigest::parse::parse_feed(bytes, &source(kind), now()) {
                    Ok(items) => {
                        shape.push(items.len().min(16) as u64);
                        for item in &items {
                            std::hint::black_box((&item.title, &item.url));
                        }
                    }
                    Err(e) => shape.push(100 + e.to_string().len().min(40) as u64 / 8),
                }
            }
            let (text, links) = kdigest::text::html_to_text(&String::from_utf8_lossy(bytes));
            shape.push((text.len().min(4096) / 256) as u64);
            shape.push(links.len().min(8) as u64);
            shape_of(&shape)
        }),
    }
}

/// Feed bytes through every pure stage (cluster, classify, score, extractive summaries in
/// each reader language, assembly, a reader's filter) into every render: the document
/// formats, each channel's payloads, the web page and the newsletter, in English and Chinese.
fn render() -> Target {
    let mut seeds = files("examples/feeds");
    seeds.extend(files("tests/fixtures/reference/feeds").into_iter().take(12));
    let feeds = repo().join("examples/feeds");
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", &format!("file://{}", feeds.display()));
    let config = Config::parse(&text).expect("the demo configuration parses");
    let renderers: Vec<Renderer> = ["en", "zh-CN"]
        .into_iter()
        .map(|l| Renderer::new(l, None).expect("the bundled templates load"))
        .collect();
    Target {
        name: "render",
        seeds,
        dictionary: FEED_TOKENS.to_vec(),
        run: Box::new(move |bytes| {
            let Ok(items) = kdigest::parse::parse_feed(bytes, &source(SourceKind::Feed), now())
            else {
                return 0;
            };
            let Some(start) = items.iter().map(|i| i.published).min() else {
                return 1;
            };
            let end =
                items.iter().map(|i| i.published).max().unwrap() + chrono::Duration::seconds(1);
            let window = Window {
                start: start.fixed_offset(),
                end: end.fixed_offset(),
            };
            let counts = digest::count_by_source(&items, &config, &[]);
            let classifier = Classifier::new(&config.layers, &config.relevance);
            let all = digest::candidates(items, &window, &config, &classifier);
            let n_events = all.len();
            let eligible = digest::eligible(all, &config);
            let mut shape = vec![n_events.min(16) as u64, eligible.len().min(16) as u64];
            for renderer in &renderers {
                let locale = renderer.locale();
                let mut texts = kdigest::summarize::extractive_all(
                    &eligible,
                    locale,
                    config.summarize.summary_chars,
                );
                texts.other_languages = kdigest::summarize::other_languages(&eligible, &config)
                    .expect("the bundled locales load");
                let d = digest::assemble(
                    &eligible,
                    &texts,
                    Assembly {
                        date: end.date_naive(),
                        window: window.clone(),
                        config: &config,
                        locale,
                        source_counts: counts.clone(),
                        failed_sources: vec![],
                    },
                );
                let reader = Filter {
                    layers: ["kernel_codegen".to_string()].into(),
                    min_score: Default::default(),
                    boost: None,
                    follows: Vec::new(),
                };
                for d in [d.clone(), digest::filter(&d, &reader, locale)] {
                    for format in Output::all() {
                        let out = format.render(renderer, &d).expect("every format renders");
                        shape.push(out.len() as u64);
                    }
                    renderer.page(&d, "1").expect("the page renders");
                    renderer
                        .email(
                            &d,
                            "https://x.test/u",
                            "https://x.test/p",
                            Some("https://x.test/v"),
                        )
                        .expect("the newsletter renders");
                }
            }
            shape_of(&shape)
        }),
    }
}

const CONFIG_TOKENS: &[&str] = &[
    "[[sources]]\n",
    "name = \"x\"\n",
    "url = \"",
    "file = \"",
    "kind = \"arxiv\"\n",
    "kind = \"nope\"\n",
    "weight = ",
    "1e400",
    "-1",
    "nan",
    "inf",
    "0",
    "18446744073709551616",
    "\"\"",
    "[schedule]\n",
    "cron = \"",
    "0 0 7 * * *",
    "* * * * * * *",
    "timezone = \"Asia/Shanghai\"\n",
    "timezone = \"Mars/Olympus\"\n",
    "[storage]\n",
    "path = \"",
    "url = \"postgres://",
    "[telegram]\n",
    "[discord]\n",
    "[email]\n",
    "[daemon]\n",
    "listen = \"",
    "[delivery]\n",
    "[fetch]\n",
    "[summarize]\n",
    "mode = \"llm\"\n",
    "base_url = \"",
    "[[layers]]\n",
    "phrases = [",
    "]\n",
    "{",
    "}",
    "= [",
    "[[",
    "]]",
    "\"\"\"",
    "'''",
    "\\u0000",
    "\\uD800",
    "#",
    "\n",
    "max_connections = ",
    "threshold = ",
    "languages = [\"en\", \"zh-CN\"]\n",
    "token_env = \"",
    "allow_private_networks = true\n",
    "a.b.c.d.e = 1\n",
];

/// The configuration loader: TOML, unknown keys, ranges, cron, time zones, sources.
fn config() -> Target {
    let mut seeds = vec![std::fs::read(repo().join("config.toml")).unwrap()];
    seeds.push(kdigest::demo::DEMO_CONFIG.as_bytes().to_vec());
    if let Ok(dir) = std::fs::read_dir(repo().join("examples")) {
        let mut paths: Vec<PathBuf> = dir
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        seeds.extend(paths.iter().map(|p| std::fs::read(p).unwrap()));
    }
    Target {
        name: "config",
        seeds,
        dictionary: CONFIG_TOKENS.to_vec(),
        run: Box::new(|bytes| {
            let text = String::from_utf8_lossy(bytes);
            match Config::parse(&text) {
                Ok(c) => shape_of(&[1, c.sources.len().min(64) as u64]),
                Err(e) => {
                    let message = e.to_string();
                    assert!(!message.trim().is_empty(), "an empty configuration error");
                    shape_of(&[
                        2,
                        message
                            .split_whitespace()
                            .take(4)
                            .map(str::len)
                            .sum::<usize>() as u64,
                    ])
                }
            }
        }),
    }
}

const COMMAND_TOKENS: &[&str] = &[
    "/",
    "@kdigest_bot",
    "@other_bot",
    " ",
    ",",
    "today",
    "yesterday",
    "2026-12-04",
    "2026-02-30",
    "9999-99-99",
    "-1",
    "101",
    "55.5",
    "1e9",
    "99999999999999999999",
    "all",
    "kernel_codegen",
    "runtime,frontend",
    "en",
    "zh-CN",
    "zh",
    "07:30",
    "25:61",
    "Asia/Shanghai",
    "daily",
    "weekly",
    "both",
    "on",
    "off",
    "\u{3000}",
    "\u{200b}",
    "／",
    "#3",
    "e12",
    "\n",
    "\t",
    "\0",
    "ＫＥＲＮＥＬ",
];

/// The chat-bot command parser (Telegram text, Discord options turned into the same text).
fn command() -> Target {
    let seeds = [
        "/start",
        "/help",
        "/subscribe kernel_codegen,runtime 60",
        "/layers all",
        "/threshold 70",
        "/lang zh-CN",
        "/digest today",
        "/digest 2026-12-01",
        "/why 3",
        "/time 07:30 Asia/Shanghai",
        "/cadence weekly",
        "/boost on",
        "/follow \"Flash Attention\"",
        "/unfollow triton",
        "/settings@kdigest_bot",
        "/unsubscribe",
        "hello",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let layers = kdigest::config::DEFAULT_LAYERS;
    Target {
        name: "command",
        seeds,
        // The grammar's tokens and every command name the bot knows.
        dictionary: COMMAND_TOKENS
            .iter()
            .copied()
            .chain(kdigest::bot::MENU.iter().map(|(name, _)| *name))
            .chain(["start"])
            .collect(),
        run: Box::new(move |bytes| {
            let text = String::from_utf8_lossy(bytes);
            match kdigest::bot::parse(&text, Some("kdigest_bot"), layers) {
                Ok(None) => 1,
                Ok(Some(c)) => shape_of(&[2, format!("{c:?}").len() as u64]),
                Err(bad) => {
                    assert!(!bad.problem.is_empty());
                    shape_of(&[3, bad.problem.len() as u64, bad.usage.is_some() as u64])
                }
            }
        }),
    }
}

const REPLY_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "1e309",
    "-0",
    "\\u0000",
    "\\ud800",
    "\"summary\"",
    "\"why_it_matters\"",
    "\"brief\"",
    "\"watch\"",
    "\"extra\"",
    "```json\n",
    "```",
    "https://evil.example/x",
    "www.example.org",
    "evil.example",
    "[link](https://x.test)",
    "http://",
    "CUTLASS",
    "Triton",
    "NVIDIA",
    "Acme Corp",
    "HyperFuse",
    "1.6x",
    "2.4 倍",
    "40%",
    "3.1x",
    "核函数",
    "编译",
    "Привет",
    "。",
    "\\n",
    "\n",
];

/// The LLM reply check (`summarize::prompt::validate`): a reply's shape, lengths, links, names,
/// numbers and script, for every event of the sample day in English and Chinese.
fn llm_reply() -> Target {
    let feeds = repo().join("examples/feeds");
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", &format!("file://{}", feeds.display()));
    let config = Config::parse(&text).expect("the demo configuration parses");
    let mut items = Vec::new();
    for (name, kind) in [
        ("cutlass-releases.atom", SourceKind::GithubReleases),
        ("triton-releases.atom", SourceKind::GithubReleases),
        ("nvidia-blog.xml", SourceKind::Blog),
    ] {
        let bytes = std::fs::read(feeds.join(name)).unwrap();
        items.extend(kdigest::parse::parse_feed(&bytes, &source(kind), now()).unwrap());
    }
    let window = Window {
        start: items
            .iter()
            .map(|i| i.published)
            .min()
            .unwrap()
            .fixed_offset(),
        end: (items.iter().map(|i| i.published).max().unwrap() + chrono::Duration::seconds(1))
            .fixed_offset(),
    };
    let classifier = Classifier::new(&config.layers, &config.relevance);
    let candidates = digest::candidates(items, &window, &config, &classifier);
    let policies: Vec<kdigest::summarize::prompt::Policy> = ["en", "zh-CN"]
        .into_iter()
        .map(|l| kdigest::summarize::prompt::Policy {
            language: l.into(),
            allowed: kdigest::summarize::guard::Allowed::new(
                l,
                &kdigest::locale::Locale::builtin(l),
            ),
        })
        .collect();
    let seeds = [
        r#"{"summary": "CUTLASS 5.0 makes CuTe DSL the primary Python interface; FP4 GEMM up to 1.6x over cuBLAS.", "why_it_matters": "Kernel authors write less boilerplate.", "brief": "CUTLASS 5.0 released", "watch": "Watch CuTe DSL adoption."}"#,
        r#"{"summary": "CUTLASS 5.0 让 CuTe DSL 成为主要 Python 接口，FP4 GEMM 比 cuBLAS 快 1.6 倍。", "why_it_matters": "内核作者少写样板代码。", "brief": "CUTLASS 5.0 发布", "watch": "关注 CuTe DSL 的采用。"}"#,
        r#"```json
{"summary": "Triton 3.6 lowers compile time by 40%.", "why_it_matters": "Faster builds.", "brief": "Triton 3.6", "watch": "Watch the modulo scheduler."}
```"#,
        r#"{"error": {"message": "rate limited"}}"#,
        r#"{"summary": ["a", "b"], "why_it_matters": 3, "brief": null, "watch": {}}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    Target {
        name: "llm-reply",
        seeds,
        dictionary: REPLY_TOKENS.to_vec(),
        run: Box::new(move |bytes| {
            let reply = String::from_utf8_lossy(bytes);
            let mut shape = Vec::new();
            for policy in &policies {
                for candidate in &candidates {
                    match kdigest::summarize::prompt::validate(&reply, candidate, 400, policy) {
                        Ok(text) => shape.push(text.summary.len().min(64) as u64),
                        Err(e) => shape.push(1000 + e.to_string().len().min(200) as u64 / 10),
                    }
                }
            }
            shape_of(&shape)
        }),
    }
}

/// Runs `target` once on the file at `path` (to reproduce a finding).
pub fn replay(target: &Target, path: &Path) -> std::io::Result<Duration> {
    let input = std::fs::read(path)?;
    let t = Instant::now();
    (target.run)(&input);
    Ok(t.elapsed())
}
