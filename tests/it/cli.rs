//! The binary: exit codes, messages that name the problem, and the JSON interface.

use std::path::Path;
use std::process::Output;

use kdigest_testkit::config::write_file_config;
use kdigest_testkit::feeds::repo_root;

fn kdigest(config: &Path, args: &[&str]) -> Output {
    crate::kdigest(config, args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap()
}

/// A config whose sources are the bundled example files, read from disk.
fn file_config(dir: &Path) -> std::path::PathBuf {
    write_file_config(dir, "db/kdigest.sqlite", "")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn shipped_config_toml_is_valid() {
    let out = kdigest(&repo_root().join("config.toml"), &["check-config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("Configuration is valid"));
}

#[test]
fn bad_config_exits_2_and_names_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[digest]\ntimezon = \"UTC\"\nmin_score = 101\n[[sources]]\nname = \"x\"\nurl = \"htp:/nope\"\nkind = \"blog\"\nweight = -0.5\n[fetch]\ntimeout_secs = 0\n[[sources]]\nname = \"y\"\nurl = \"https://example.org/feed\"\nkind = \"blog\"\n[digest2]\n",
    )
    .unwrap();
    let out = kdigest(&path, &["check-config"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    for needle in [
        "digest.timezon: unknown key; did you mean `timezone`?",
        "digest.min_score: 101 is out of range",
        "sources[0].url: \"htp:/nope\" uses scheme htp",
        "sources[0].weight: -0.5 is out of range",
        "fetch.timeout_secs: 0 is out of range",
        "digest2: unknown key; did you mean `digest`?",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    let tz = dir.path().join("tz.toml");
    std::fs::write(&tz, "[digest]\ntimezone = \"Asia/Beijing\"\n").unwrap();
    let out = kdigest(&tz, &["check-config"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"Asia/Beijing\" is not an IANA time zone"));
}

#[test]
fn digest_json_explain_and_out_dir_work_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let out = kdigest(
        &config,
        &["digest", "--date", "2026-10-28", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["date"], "2026-10-28");
    assert_eq!(v["key_changes"].as_array().unwrap().len(), 3);
    assert_eq!(v["failed_sources"][0]["source"], "Example Compiler Weekly");
    assert!(
        dir.path().join("db/kdigest.sqlite").exists(),
        "storage path is relative to the config file"
    );

    // Stored now: the same digest is returned without --force.
    let again = kdigest(
        &config,
        &["digest", "--date", "2026-10-28", "--format", "json"],
    );
    assert_eq!(stdout(&out), stdout(&again));

    let explain = kdigest(&config, &["explain", "1", "--date", "2026-10-28"]);
    assert!(explain.status.success(), "{}", stderr(&explain));
    let text = stdout(&explain);
    assert!(text.starts_with("#1 CUTLASS 5.0.0"), "{text}");
    for component in [
        "source",
        "relevance",
        "impact",
        "corroboration",
        "freshness",
    ] {
        assert!(text.contains(component), "{text}");
    }
    let low = kdigest(
        &config,
        &["explain", "Coastal Flood", "--date", "2026-10-28"],
    );
    assert!(low.status.success(), "{}", stderr(&low));
    assert!(
        stdout(&low).contains("Below digest.min_score"),
        "{}",
        stdout(&low)
    );

    let out_dir = dir.path().join("renders");
    let all = kdigest(
        &config,
        &[
            "digest",
            "--date",
            "2026-10-28",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(all.status.success(), "{}", stderr(&all));
    for file in [
        "digest.md",
        "digest.html",
        "digest.json",
        "email.txt",
        "email.html",
    ] {
        assert!(out_dir.join(file).exists(), "{file}");
    }
    assert!(std::fs::read_dir(&out_dir).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("telegram")
    }));
}

#[test]
fn bad_arguments_exit_2_with_the_right_form() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let out = kdigest(&config, &["digest", "--date", "28/10/2026"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--date 28/10/2026: expected YYYY-MM-DD, today, yesterday or latest")
    );
    let out = kdigest(&config, &["digest", "--format", "pdf"]);
    assert_eq!(out.status.code(), Some(2));
    let out = kdigest(
        &config,
        &["explain", "no such event", "--date", "2026-10-28"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // A number outside the digest names the argument and the range, whatever its form.
    let stored = kdigest(&config, &["digest", "--date", "2026-10-28"]);
    assert!(stored.status.success(), "{}", stderr(&stored));
    for number in ["99999", "-1", "2^70", "0"] {
        let out = kdigest(&config, &["explain", number, "--date", "2026-10-28"]);
        assert_eq!(out.status.code(), Some(2), "{number}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("EVENT {number} is not an event number"))
                && err.contains("numbers its events 1 to "),
            "{number}: {err}"
        );
    }
}

#[test]
fn a_short_signing_key_is_refused_naming_the_fix_not_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let out = crate::kdigest(&config, &["run", "--once", "--date", "2026-10-28"])
        .env("KDIGEST_SECRET", "hunter2-short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("KDIGEST_SECRET is too short (13 characters)")
            && err.contains("openssl rand -hex 32"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "the key never appears: {err}");
}

#[test]
fn latest_is_the_latest_ended_window_not_an_old_stored_digest() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let old = kdigest(
        &config,
        &["digest", "--date", "2026-10-28", "--format", "json"],
    );
    assert!(old.status.success(), "{}", stderr(&old));

    let parsed = kdigest::config::Config::load(&config).unwrap();
    let expected = kdigest::digest::latest_complete_date(chrono::Utc::now(), &parsed);
    let latest = kdigest(&config, &["digest", "--date", "latest", "--format", "md"]);
    assert!(latest.status.success(), "{}", stderr(&latest));
    let first_line = stdout(&latest)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        first_line.starts_with(&format!("# {expected} · ")),
        "first line {first_line:?}, expected the date {expected}"
    );

    let list = kdigest(&config, &["digests", "list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let listed = stdout(&list);
    let dates: Vec<&str> = listed
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        dates,
        [expected.to_string().as_str(), "2026-10-28"],
        "{listed}"
    );
}

#[test]
fn status_and_digests_list_do_not_create_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let status = kdigest(&config, &["status"]);
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(
        stdout(&status).contains("Last digest: none yet"),
        "{}",
        stdout(&status)
    );
    let list = kdigest(&config, &["digests", "list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(
        !dir.path().join("db").exists(),
        "status created the storage directory"
    );
}

#[test]
fn a_storage_path_that_cannot_be_a_database_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    // Under a regular file: its "directory" cannot be created.
    std::fs::write(dir.path().join("plain"), "not a directory").unwrap();
    let config = write_file_config(dir.path(), "plain/kdigest.sqlite", "");
    let out = kdigest(&config, &["digest", "--date", "2026-10-28"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("storage.path") && err.contains("plain/kdigest.sqlite"),
        "{err}"
    );
}

#[test]
fn check_config_names_the_mode_as_written_in_the_file() {
    let out = kdigest(&repo_root().join("config.toml"), &["check-config"]);
    assert!(
        stdout(&out).contains("summarize mode extractive"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_config_type_error_gives_file_line_column_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[fetch]\n# comment\nconcurrency = \"32\"\n").unwrap();
    let out = kdigest(&path, &["check-config"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let at = format!(
        "{}:3:15: fetch.concurrency: invalid type: string \"32\", expected a whole number, 0 or more",
        path.display()
    );
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("3 | concurrency = \"32\""), "{err}");
}

#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    // The bundled broken feed makes a warning; stderr is a pipe here.
    let out = crate::kdigest(&config, &["digest", "--date", "2026-10-28"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("WARN"), "expected a warning: {err}");
    assert!(
        !err.contains('\u{1b}'),
        "ANSI escape in piped logs: {err:?}"
    );
}

#[test]
fn on_a_terminal_warnings_print_above_the_progress_bar_not_onto_it() {
    // `script` (util-linux) gives the binary a pseudo-terminal, so the bar is drawn.
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(std::env::var("CI").is_err(), "CI needs util-linux's script");
        eprintln!("skipped: no `script` command to make a terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let command = format!(
        "{} --config {} digest --date 2026-10-28 --format json",
        env!("CARGO_BIN_EXE_kdigest"),
        config.display()
    );
    let typescript = dir.path().join("typescript");
    let out = std::process::Command::new("script")
        .args(["-qec", &command])
        .arg(&typescript)
        .env("RUST_LOG", "warn")
        .env("TERM", "xterm-256color")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let screen = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert!(
        screen.contains("fetched"),
        "no progress bar drawn: {screen:?}"
    );
    let warn = screen.find("WARN").expect("the broken feed warns");
    // What the terminal line holds when the warning starts: the text since the last line
    // start or line clear. The bar must have been cleared first.
    let line_start = screen[..warn].rfind(['\n', '\r']).map_or(0, |i| i + 1);
    let line = &screen[line_start..warn];
    assert!(
        !line.contains("fetched"),
        "warning written onto the bar line: {line:?}"
    );
}

/// The demo configuration with every source unreachable (files that do not exist).
fn unreachable_config(dir: &Path) -> std::path::PathBuf {
    let text = kdigest::demo::DEMO_CONFIG.replace("{base}", "file:///nonexistent/kdigest-feeds");
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!("{text}\n[storage]\npath = \"db/kdigest.sqlite\"\n"),
    )
    .unwrap();
    path
}

#[test]
fn a_day_when_every_source_failed_exits_1_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = unreachable_config(dir.path());
    let out = kdigest(&config, &["digest", "--date", "2026-10-28"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).is_empty(),
        "no quiet-day digest printed: {}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert!(err.contains("Every source failed (6 of 6)"), "{err}");
    assert!(err.contains("no digest was stored or delivered"), "{err}");
    assert!(
        err.contains("triton-lang/triton:"),
        "each source is named: {err}"
    );

    // run --once: nothing stored, nothing planned or delivered, exit 1.
    let add = kdigest(
        &config,
        &["subscribers", "add", "webhook:http://127.0.0.1:9/hook"],
    );
    assert!(add.status.success(), "{}", stderr(&add));
    let once = kdigest(&config, &["run", "--once", "--date", "2026-10-28"]);
    assert_eq!(once.status.code(), Some(1), "{}", stderr(&once));
    assert!(
        stderr(&once).contains("Every source failed"),
        "{}",
        stderr(&once)
    );
    let list = kdigest(&config, &["digests", "list"]);
    assert!(
        stdout(&list).contains("No digests stored yet"),
        "{}",
        stdout(&list)
    );
    let status = kdigest(&config, &["status"]);
    assert!(
        stdout(&status).contains("Last digest: none yet"),
        "{}",
        stdout(&status)
    );
}

#[test]
fn a_quiet_day_is_still_a_digest_when_the_sources_answered() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    // The sample feeds answer, but nothing in them falls in this window.
    let out = kdigest(
        &config,
        &["digest", "--date", "2026-06-01", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["date"], "2026-06-01");
    assert_eq!(v["key_changes"].as_array().unwrap().len(), 0);
}

#[test]
fn an_off_topic_post_never_reaches_the_digest_whatever_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("blog.xml");
    std::fs::write(
        &feed,
        r#"<?xml version="1.0"?><rss version="2.0"><channel><title>Vendor blog</title>
<item><title>Vision 3.0 for warehouse robots is now available</title><link>https://example.org/robots</link><pubDate>Tue, 27 Oct 2026 12:00:00 GMT</pubDate><description>We announce the release of Vision 3.0, our platform for warehouse robots, with 40% faster picking.</description></item>
<item><title>Faster FP8 GEMM kernels with Triton on Blackwell</title><link>https://example.org/fp8</link><pubDate>Tue, 27 Oct 2026 13:00:00 GMT</pubDate><description>The new kernel uses TMA and warp specialization and is 1.4x faster than cuBLAS.</description></item>
</channel></rss>"#,
    )
    .unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[digest]\nmin_score = 0\n[[sources]]\nname = \"Vendor blog\"\nurl = \"file://{}\"\nkind = \"blog\"\nweight = 1.0\n[storage]\npath = \"db.sqlite\"\n",
            feed.display()
        ),
    )
    .unwrap();
    let out = kdigest(
        &config,
        &["digest", "--date", "2026-10-28", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let titles: Vec<&str> = ["key_changes", "papers", "other_updates"]
        .iter()
        .flat_map(|s| v[s].as_array().unwrap())
        .map(|e| e["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Faster FP8 GEMM kernels with Triton on Blackwell"]);
    let explain = kdigest(&config, &["explain", "warehouse", "--date", "2026-10-28"]);
    assert!(
        stdout(&explain).contains("off-topic"),
        "{}",
        stdout(&explain)
    );
}

#[tokio::test]
async fn status_says_a_dead_lease_holder_is_not_running() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let store = kdigest::store::Store::open(&dir.path().join("db/kdigest.sqlite"))
        .await
        .unwrap();
    // A process of this host that has exited holds a lease that has not lapsed (kill -9).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let holder = format!("{}:{pid}", kdigest::instance::host_name());
    assert!(
        store
            .try_lease(
                kdigest::daemon::lease::LEASE,
                &holder,
                3_600,
                chrono::Utc::now()
            )
            .await
            .unwrap()
    );
    store.close().await;
    let out = kdigest(&config, &["status"]);
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "Daemon: not running (its last holder {holder} died"
        )),
        "{text}"
    );
}

/// Robot subscribers from the command line: options, one robot one subscriber, tokens
/// hidden in listings, clear refusals; and each robot's payloads from `digest --format`.
#[test]
fn robot_subscribers_and_their_payloads_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let token = "c0ffee-robot-token";
    let feishu = format!("feishu:https://open.feishu.cn/open-apis/bot/v2/hook/{token}");
    let out = kdigest(
        &config,
        &[
            "subscribers",
            "add",
            &feishu,
            "--secret-env",
            "KDIGEST_FEISHU_SECRET",
            "--keyword",
            "GPU",
            "--layers",
            "runtime",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains(token), "{}", stdout(&out));
    let again = kdigest(
        &config,
        &["subscribers", "add", &format!("{feishu}/?from=copy#x")],
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already subscribed"),
        "{}",
        stderr(&again)
    );
    let list = stdout(&kdigest(&config, &["subscribers", "list"]));
    assert!(
        list.contains("signed with $KDIGEST_FEISHU_SECRET keyword \"GPU\"")
            && !list.contains(token),
        "{list}"
    );
    let set = kdigest(
        &config,
        &["subscribers", "set", &feishu, "--keyword", "CUDA"],
    );
    assert!(
        stdout(&set).contains("keyword \"CUDA\""),
        "{}",
        stderr(&set)
    );
    for (args, says) in [
        (
            vec![
                "subscribers",
                "add",
                "wecom:https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k",
                "--secret-env",
                "X_SECRET",
            ],
            "no signing secret",
        ),
        (
            vec![
                "subscribers",
                "add",
                "slack:http://hooks.slack.com/services/T/B/x",
            ],
            "https",
        ),
        (
            vec![
                "subscribers",
                "add",
                "dingtalk:https://oapi.dingtalk.com/robot/send?access_token=t",
                "--secret-env",
                "my secret",
            ],
            "name of an environment variable",
        ),
        (
            vec![
                "subscribers",
                "add",
                "dingtalk:https://oapi.dingtalk.com/robot/send",
            ],
            "access_token=<token>",
        ),
    ] {
        let out = kdigest(&config, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    for format in ["feishu", "dingtalk", "wecom", "slack"] {
        let out = kdigest(
            &config,
            &["digest", "--date", "2026-10-28", "--format", format],
        );
        assert!(out.status.success(), "{format}: {}", stderr(&out));
        let text = stdout(&out);
        let payloads: Vec<serde_json::Value> = text
            .split('\n')
            .filter(|l| !l.starts_with("──── message"))
            .collect::<Vec<_>>()
            .join("\n")
            .split("\n}\n")
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                serde_json::from_str(&format!("{p}\n}}"))
                    .unwrap_or_else(|e| panic!("{format}: {e}: {p}"))
            })
            .collect();
        assert!(!payloads.is_empty(), "{format}");
        let all = text.to_string();
        assert!(
            all.contains("CUTLASS 5.0.0"),
            "{format}: the day's first event"
        );
    }
    // `demo --format` prints the same kind of payloads, with no configuration at all.
    let demo = std::process::Command::new(env!("CARGO_BIN_EXE_kdigest"))
        .args(["demo", "--format", "wecom"])
        .current_dir(dir.path())
        .env_remove("KDIGEST_CONFIG")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(demo.status.success(), "{}", stderr(&demo));
    assert!(
        stdout(&demo).contains("\"msgtype\": \"markdown\""),
        "{}",
        stdout(&demo)
    );
}

/// A reader's own hour from the command line: shown in listings, changed and cleared by
/// `set`, bad values named.
#[test]
fn subscribers_take_a_local_delivery_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let add = kdigest(
        &config,
        &[
            "subscribers",
            "add",
            "email:berlin@example.org",
            "--at",
            "09:30",
            "--tz",
            "Europe/Berlin",
        ],
    );
    assert!(add.status.success(), "{}", stderr(&add));
    assert!(
        stdout(&add).contains("delivered at 09:30 Europe/Berlin"),
        "{}",
        stdout(&add)
    );
    let list = stdout(&kdigest(&config, &["subscribers", "list"]));
    assert!(list.contains("at 09:30 Europe/Berlin"), "{list}");
    let set = kdigest(
        &config,
        &[
            "subscribers",
            "set",
            "email:berlin@example.org",
            "--tz",
            "America/Los_Angeles",
        ],
    );
    assert!(
        stdout(&set).contains("at 09:30 America/Los_Angeles"),
        "{}",
        stderr(&set)
    );
    let off = kdigest(
        &config,
        &[
            "subscribers",
            "set",
            "email:berlin@example.org",
            "--at",
            "off",
        ],
    );
    assert!(!stdout(&off).contains(" at "), "{}", stdout(&off));
    for (args, says) in [
        (vec!["--at", "9.30"], "HH:MM"),
        (vec!["--at", "09:30", "--tz", "Berlin"], "IANA"),
        (vec!["--tz", "Asia/Shanghai"], "--tz needs --at"),
    ] {
        let mut all = vec!["subscribers", "add", "email:x@example.org"];
        all.extend(args.iter());
        let out = kdigest(&config, &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// `kdigest digest --lang/--layers/--min-score` renders what such a reader receives, and
/// `kdigest preview --subscriber` what one subscriber's next delivery is: the same path as
/// delivery (language first, then the filter, then the channel's render).
#[test]
fn every_readers_view_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let config = file_config(dir.path());
    let all = kdigest(
        &config,
        &["digest", "--date", "2026-10-28", "--format", "json"],
    );
    assert!(all.status.success(), "{}", stderr(&all));
    let all: serde_json::Value = serde_json::from_str(&stdout(&all)).unwrap();
    let events = |v: &serde_json::Value| -> Vec<String> {
        ["key_changes", "papers", "other_updates"]
            .iter()
            .flat_map(|k| v[k].as_array().cloned().unwrap_or_default())
            .map(|e| e["title"].as_str().unwrap().to_string())
            .collect()
    };
    let view = kdigest(
        &config,
        &[
            "digest",
            "--date",
            "2026-10-28",
            "--format",
            "json",
            "--lang",
            "zh-CN",
            "--layers",
            "runtime",
            "--min-score",
            "75",
        ],
    );
    assert!(view.status.success(), "{}", stderr(&view));
    let view: serde_json::Value = serde_json::from_str(&stdout(&view)).unwrap();
    assert_eq!(view["language"], "zh-CN");
    let kept = events(&view);
    assert!(
        !kept.is_empty() && kept.len() < events(&all).len(),
        "{kept:?}"
    );
    for e in ["key_changes", "papers", "other_updates"]
        .iter()
        .flat_map(|k| view[k].as_array().cloned().unwrap_or_default())
    {
        let layers: Vec<&str> = e["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert!(layers.contains(&"runtime"), "{layers:?}");
        assert!(e["score"].as_f64().unwrap() >= 75.0, "{e}");
    }
    assert!(
        view["overview"]
            .as_str()
            .unwrap()
            .chars()
            .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
    );

    for (args, says) in [
        (&["--layers", "kernels"][..], "\"kernels\" is not a layer"),
        (&["--min-score", "120"][..], "--min-score 120"),
        (&["--lang", "fr"][..], "--lang fr"),
    ] {
        let mut full = vec!["digest", "--date", "2026-10-28"];
        full.extend_from_slice(args);
        let out = kdigest(&config, &full);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }

    // One subscriber's next delivery, in its channel's format.
    let add = kdigest(
        &config,
        &[
            "subscribers",
            "add",
            "telegram:4242",
            "--lang",
            "zh-CN",
            "--layers",
            "kernel_codegen",
            "--min-score",
            "80",
        ],
    );
    assert!(add.status.success(), "{}", stderr(&add));
    let preview = kdigest(
        &config,
        &[
            "preview",
            "--subscriber",
            "telegram:4242",
            "--date",
            "2026-10-28",
        ],
    );
    assert!(preview.status.success(), "{}", stderr(&preview));
    let text = stdout(&preview);
    assert!(
        text.contains("daily of 2026-10-28 to telegram:4242: message 1/"),
        "{text}"
    );
    assert!(text.contains("<b>"), "Telegram's HTML: {text:.400}");
    assert!(text.contains("为什么重要"), "{text:.400}");
    assert!(
        text.contains("CUTLASS 5.0.0") && !text.contains("Tessera"),
        "kernel_codegen ≥ 80 only"
    );

    // Following a project: its story passes the threshold and layers, marked ★, in the
    // CLI's view and in the subscriber's delivery; the list shows what is followed.
    let followed = kdigest(
        &config,
        &[
            "digest",
            "--date",
            "2026-10-28",
            "--format",
            "json",
            "--min-score",
            "100",
            "--follow",
            "tessera",
        ],
    );
    assert!(followed.status.success(), "{}", stderr(&followed));
    let followed: serde_json::Value = serde_json::from_str(&stdout(&followed)).unwrap();
    let titles = events(&followed);
    assert_eq!(titles.len(), 1, "{titles:?}");
    assert!(titles[0].starts_with("Tessera"), "{titles:?}");
    let kept = ["key_changes", "papers", "other_updates"]
        .iter()
        .find_map(|k| followed[k].as_array().and_then(|a| a.first().cloned()))
        .unwrap();
    assert_eq!(kept["followed"], "tessera");
    let set = kdigest(
        &config,
        &[
            "subscribers",
            "set",
            "telegram:4242",
            "--follow",
            "Tessera",
            "--follow",
            "\"Flash Attention\"",
        ],
    );
    assert!(set.status.success(), "{}", stderr(&set));
    assert!(
        stdout(&set).contains("follows \"Tessera\", \"Flash Attention\""),
        "{}",
        stdout(&set)
    );
    let preview = kdigest(
        &config,
        &[
            "preview",
            "--subscriber",
            "telegram:4242",
            "--date",
            "2026-10-28",
        ],
    );
    let text = stdout(&preview);
    assert!(
        text.contains("★ Tessera") && text.contains("CUTLASS 5.0.0"),
        "{text:.600}"
    );
    let unfollow = kdigest(
        &config,
        &[
            "subscribers",
            "set",
            "telegram:4242",
            "--unfollow",
            "triton",
        ],
    );
    assert_eq!(unfollow.status.code(), Some(2));
    assert!(
        stderr(&unfollow)
            .contains("\"triton\" is not followed; followed: Tessera, Flash Attention"),
        "{}",
        stderr(&unfollow)
    );
    let list = kdigest(&config, &["subscribers", "list"]);
    assert!(
        stdout(&list).contains("follows \"Tessera\""),
        "{}",
        stdout(&list)
    );

    let missing = kdigest(
        &config,
        &["preview", "--subscriber", "99", "--date", "2026-10-28"],
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("subscribers list"),
        "{}",
        stderr(&missing)
    );
}
