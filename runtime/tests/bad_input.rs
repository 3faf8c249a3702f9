//! The bad-input corpus, end to end on the real binary: numbers at and past every range, malformed
//! `kanban.toml` files, control characters in stored text, invalid UTF-8 arguments, special files
//! at the board path, relative homes, a locked board, and mutations a worker may not make. Each
//! bad input must fail with its documented exit code and a message naming the problem (once), and
//! must leave the home byte-for-byte unchanged.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary
#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kanban_tests::{Kanban, Run};

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

/// Every file under `dir` with its bytes (SQLite's `-shm` index excluded: a reader may map it).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.is_dir() {
                out.insert(p.clone(), b"<dir>".to_vec());
                walk(&p, out);
            } else if meta.is_file() && !p.to_string_lossy().ends_with("-shm") {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            } else if !meta.is_file() {
                out.insert(
                    p.clone(),
                    format!("<special {:?}>", meta.file_type()).into_bytes(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// A message says each thing once: no part of the `what: why: cause` chain repeats or contains a
/// later part (which is what a `{source}` embedded in a message does).
fn assert_said_once(stderr: &str) {
    assert!(!stderr.contains("panicked"), "{stderr}");
    for line in stderr.lines() {
        let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
        for (i, a) in parts.iter().enumerate() {
            for b in &parts[i + 1..] {
                if b.len() >= 12 {
                    assert!(!a.contains(b), "`{b}` repeated in: {line}");
                }
            }
        }
    }
}

/// Runs `cmd`, asserts the exit code, that stderr names every `needles`, that it says it once,
/// and that nothing under `home` changed.
fn refused(home: &Path, mut cmd: Command, code: i32, needles: &[&str]) -> Run {
    let before = snapshot(home);
    let run = Run::from(cmd.output().unwrap());
    let after = snapshot(home);
    let what = format!("{cmd:?}\nstdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert_eq!(run.code, code, "{what}");
    for needle in needles {
        assert!(run.stderr.contains(needle), "`{needle}` missing: {what}");
    }
    assert_said_once(&run.stderr);
    assert_eq!(before, after, "the home changed: {what}");
    run
}

fn args(k: &Kanban, args: &[&str]) -> Command {
    let mut cmd = k.cmd();
    cmd.args(args);
    cmd
}

/// `kanban` in `cwd` with a cleared environment and no `--home`.
fn bare(k: &Kanban, cwd: &Path) -> Command {
    let mut cmd = Command::new(k.bin());
    cmd.env_clear().current_dir(cwd);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd
}

#[test]
fn numbers_at_and_past_every_range() {
    let k = kanban();
    let id = k.create("target", &[]);
    let home = k.home().to_path_buf();
    for (argv, code, needles) in [
        (
            vec!["claim", &id, "--ttl", "0"],
            1,
            vec!["--ttl", "1 to 31536000"],
        ),
        (
            vec!["claim", &id, "--ttl", "31536001"],
            1,
            vec!["--ttl", "31536000"],
        ),
        (
            vec!["claim", &id, "--ttl", "9223372036854775807"],
            1,
            vec!["--ttl"],
        ),
        (
            vec!["claim", &id, "--ttl", "-9223372036854775808"],
            1,
            vec!["--ttl"],
        ),
        (
            vec!["claim", &id, "--ttl", "99999999999999999999"],
            2,
            vec!["--ttl"],
        ),
        (vec!["claim", &id, "--ttl", "1e3"], 2, vec!["--ttl"]),
        (
            vec!["heartbeat", &id, "--ttl", "9223372036854775807"],
            1,
            vec!["--ttl"],
        ),
        (
            vec!["create", "x", "--max-runtime", "0"],
            1,
            vec!["--max-runtime"],
        ),
        (
            vec!["create", "x", "--max-runtime", "31536001"],
            1,
            vec!["--max-runtime"],
        ),
        (
            vec!["create", "x", "--max-runtime", "9223372036854775807"],
            1,
            vec!["--max-runtime"],
        ),
        (
            vec!["dispatch", "--once", "--interval", "1e20"],
            1,
            vec!["--interval", "86400"],
        ),
        (
            vec!["dispatch", "--once", "--interval", "0"],
            1,
            vec!["--interval", "0.01"],
        ),
        (
            vec!["dispatch", "--once", "--interval", "-1"],
            1,
            vec!["--interval"],
        ),
        (
            vec!["dispatch", "--once", "--interval", "NaN"],
            1,
            vec!["--interval"],
        ),
        (
            vec!["dispatch", "--once", "--interval", "inf"],
            1,
            vec!["--interval"],
        ),
        (
            vec!["dispatch", "--once", "--max-spawn", "-1"],
            1,
            vec!["--max-spawn", "0 to 1024"],
        ),
        (
            vec!["dispatch", "--until-idle", "--max-spawn", "0"],
            1,
            vec!["--until-idle", "max_spawn 0"],
        ),
        (
            vec!["dispatch", "--once", "--max-spawn", "1025"],
            1,
            vec!["--max-spawn"],
        ),
        (
            vec!["dispatch", "--once", "--max-spawn", "99999999999"],
            1,
            vec!["--max-spawn"],
        ),
        (
            vec!["cron", "daemon", "--interval", "1e308"],
            1,
            vec!["--interval", "86400"],
        ),
        (
            vec!["cron", "daemon", "--interval", "0.05"],
            1,
            vec!["--interval", "0.1"],
        ),
        (
            vec!["cron", "daemon", "--interval", "nan"],
            1,
            vec!["--interval"],
        ),
        (
            vec!["show", &id, "--events", "99999999999999999999999"],
            2,
            vec!["--events"],
        ),
        (
            vec!["cron", "tick", "--now", "9223372036854775807"],
            2,
            vec!["--now"],
        ),
        (
            vec!["cron", "tick", "--now", "253402300800"],
            2,
            vec!["--now"],
        ),
    ] {
        refused(&home, args(&k, &argv), code, &needles);
    }
    for (key, value, argv) in [
        (
            "HERMES_KANBAN_CLAIM_TTL_SECONDS",
            "9223372036854775807",
            vec!["claim", id.as_str()],
        ),
        (
            "HERMES_KANBAN_CLAIM_TTL_SECONDS",
            "0",
            vec!["claim", id.as_str()],
        ),
        (
            "HERMES_KANBAN_CLAIM_TTL_SECONDS",
            "9223372036854775807",
            vec!["dispatch", "--dry-run"],
        ),
        (
            "HERMES_KANBAN_CRASH_GRACE_SECONDS",
            "-1",
            vec!["dispatch", "--dry-run"],
        ),
        (
            "HERMES_KANBAN_RATE_LIMIT_COOLDOWN_SECONDS",
            "1e9",
            vec!["dispatch", "--dry-run"],
        ),
        ("HERMES_KANBAN_BUSY_TIMEOUT_MS", "0", vec!["list"]),
        ("HERMES_KANBAN_BUSY_TIMEOUT_MS", "86400001", vec!["list"]),
        ("HERMES_KANBAN_BUSY_TIMEOUT_MS", "1.5", vec!["create", "x"]),
    ] {
        let mut cmd = args(&k, &argv);
        cmd.env(key, value);
        let run = refused(&home, cmd, 1, &[key]);
        if key.ends_with("_MS") {
            assert!(run.stderr.contains("milliseconds"), "{}", run.stderr);
        }
    }
    // At the edge: accepted, and the expiry is now + TTL, never wrapped.
    let claim = k.json(&["claim", &id, "--ttl", "31536000"]);
    let expires = claim["claim_expires"].as_i64().unwrap();
    assert!(expires > 31_536_000 && expires < 1 << 40, "{claim}");
    let hb = k.json(&["heartbeat", &id, "--ttl", "31536000"]);
    let extended = hb["claim_expires"].as_i64().unwrap();
    assert!((expires..expires + 600).contains(&extended), "{hb}");
    k.assert_fsck_clean();
}

/// Malformed `kanban.toml` files: (what, text, words the error must contain besides the path).
const BAD_CONFIGS: &[(&str, &str, &[&str])] = &[
    (
        "max_spawn too big",
        "[dispatch]\nmax_spawn = 1025\n",
        &["max_spawn", "1024"],
    ),
    (
        "max_spawn negative",
        "[dispatch]\nmax_spawn = -1\n",
        &["max_spawn"],
    ),
    (
        "max_spawn past u32",
        "[dispatch]\nmax_spawn = 99999999999\n",
        &["max_spawn"],
    ),
    (
        "max_spawn a string",
        "[dispatch]\nmax_spawn = \"4\"\n",
        &["max_spawn"],
    ),
    (
        "max_in_progress zero",
        "[dispatch]\nmax_in_progress = 0\n",
        &["max_in_progress"],
    ),
    (
        "failure_limit zero",
        "[dispatch]\nfailure_limit = 0\n",
        &["failure_limit", "1 to 1000"],
    ),
    (
        "ttl zero",
        "[dispatch]\nclaim_ttl_seconds = 0\n",
        &["claim_ttl_seconds"],
    ),
    (
        "ttl i64::MAX",
        "[dispatch]\nclaim_ttl_seconds = 9223372036854775807\n",
        &["claim_ttl_seconds", "31536000"],
    ),
    (
        "ttl a year and a second",
        "[dispatch]\nclaim_ttl_seconds = 31536001\n",
        &["claim_ttl_seconds"],
    ),
    (
        "ttl a float",
        "[dispatch]\nclaim_ttl_seconds = 1.5\n",
        &["claim_ttl_seconds"],
    ),
    (
        "crash grace negative",
        "[dispatch]\ncrash_grace_seconds = -1\n",
        &["crash_grace_seconds"],
    ),
    (
        "cooldown negative",
        "[dispatch]\nrate_limit_cooldown_seconds = -5\n",
        &["rate_limit_cooldown_seconds"],
    ),
    (
        "stale timeout too big",
        "[dispatch]\nstale_timeout_seconds = 40000000\n",
        &["stale_timeout_seconds"],
    ),
    (
        "heartbeat staleness zero",
        "[dispatch]\nheartbeat_max_stale_seconds = 0\n",
        &["heartbeat_max_stale_seconds"],
    ),
    (
        "kill wait 1e20",
        "[dispatch]\nkill_wait_seconds = 1e20\n",
        &["kill_wait_seconds", "3600"],
    ),
    (
        "kill wait negative",
        "[dispatch]\nkill_wait_seconds = -1.0\n",
        &["kill_wait_seconds"],
    ),
    (
        "kill wait nan",
        "[dispatch]\nkill_wait_seconds = nan\n",
        &["kill_wait_seconds"],
    ),
    (
        "interval 1e20",
        "[dispatch]\ninterval_seconds = 1e20\n",
        &["interval_seconds", "86400"],
    ),
    (
        "interval zero",
        "[dispatch]\ninterval_seconds = 0.0\n",
        &["interval_seconds"],
    ),
    (
        "interval inf",
        "[dispatch]\ninterval_seconds = inf\n",
        &["interval_seconds"],
    ),
    (
        "blank default profile",
        "[dispatch]\ndefault_profile = \" \"\n",
        &["default_profile"],
    ),
    (
        "bogus mode",
        "[dispatch]\nmode = \"bogus\"\n",
        &["mode", "\"direct\""],
    ),
    ("unknown key", "[dispatch]\nmax_spwan = 3\n", &["max_spwan"]),
    ("unknown table", "[dispach]\nmax_spawn = 3\n", &["dispach"]),
    (
        "duplicate key",
        "[dispatch]\nmax_spawn = 1\nmax_spawn = 2\n",
        &["max_spawn"],
    ),
    ("not TOML", "this is not toml\n", &["kanban.toml"]),
    (
        "misspelt agent",
        "[profiles.a]\nagent = \"builtin:compelte\"\n",
        &["[profiles.a] agent", "\"builtin:complete\"", "\"command\""],
    ),
    ("agent a number", "[profiles.a]\nagent = 5\n", &["agent"]),
    ("no agent", "[profiles.a]\ncommand = [\"x\"]\n", &["agent"]),
    (
        "empty command",
        "[profiles.a]\nagent = \"command\"\ncommand = []\n",
        &["[profiles.a] command"],
    ),
    (
        "missing command",
        "[profiles.a]\nagent = \"command\"\n",
        &["[profiles.a] command"],
    ),
    (
        "blank program",
        "[profiles.a]\nagent = \"command\"\ncommand = [\"\", \"x\"]\n",
        &["[profiles.a] command"],
    ),
    (
        "command on a builtin",
        "[profiles.a]\nagent = \"builtin:shell\"\ncommand = [\"x\"]\n",
        &["[profiles.a] command", "agent = \"command\""],
    ),
    (
        "identity key in env",
        "[profiles.a]\nagent = \"builtin:shell\"\nenv = { HERMES_KANBAN_TASK = \"t\" }\n",
        &["[profiles.a] env", "HERMES_KANBAN_"],
    ),
    (
        "env key with =",
        "[profiles.a]\nagent = \"builtin:shell\"\nenv = { \"A=B\" = \"t\" }\n",
        &["[profiles.a] env"],
    ),
    (
        "profiles differing in case",
        "[profiles.A]\nagent = \"builtin:shell\"\n[profiles.a]\nagent = \"builtin:shell\"\n",
        &["without case"],
    ),
    (
        "profile name with a space",
        "[profiles.\"a b\"]\nagent = \"builtin:shell\"\n",
        &["profile name"],
    ),
    (
        "unknown profile key",
        "[profiles.a]\nagent = \"builtin:shell\"\nmodel = \"x\"\n",
        &["model"],
    ),
    (
        "cron parallel zero",
        "[cron]\nmax_parallel = 0\n",
        &["max_parallel"],
    ),
    (
        "cron interval 1e308",
        "[cron]\ninterval_seconds = 1e308\n",
        &["[cron] interval_seconds"],
    ),
    (
        "cron ttl zero",
        "[cron]\nclaim_ttl_seconds = 0\n",
        &["[cron] claim_ttl_seconds"],
    ),
    (
        "cron zone",
        "[cron]\ntimezone = \"Mars/Olympus\"\n",
        &["timezone", "IANA"],
    ),
    (
        "turn backoff 1e20",
        "[dispatch]\nturn_recovery_backoff_seconds = [1e20]\n",
        &["turn_recovery_backoff_seconds", "3600"],
    ),
    (
        "turn backoff empty",
        "[dispatch]\nturn_recovery_backoff_seconds = []\n",
        &["turn_recovery_backoff_seconds"],
    ),
    (
        "goal turns zero",
        "[profiles.a]\nagent = \"builtin:shell\"\ngoal_max_turns = 0\n",
        &["[profiles.a] goal_max_turns", "1000"],
    ),
    // One past the top of every range.
    (
        "max_in_progress past",
        "[dispatch]\nmax_in_progress = 65537\n",
        &["max_in_progress", "65536"],
    ),
    (
        "failure_limit past",
        "[dispatch]\nfailure_limit = 1001\n",
        &["failure_limit", "1000"],
    ),
    (
        "crash grace past",
        "[dispatch]\ncrash_grace_seconds = 31536001\n",
        &["crash_grace_seconds"],
    ),
    (
        "cooldown past",
        "[dispatch]\nrate_limit_cooldown_seconds = 31536001\n",
        &["rate_limit_cooldown_seconds"],
    ),
    (
        "staleness past",
        "[dispatch]\nheartbeat_max_stale_seconds = 31536001\n",
        &["heartbeat_max_stale_seconds"],
    ),
    (
        "kill wait past",
        "[dispatch]\nkill_wait_seconds = 3600.5\n",
        &["kill_wait_seconds"],
    ),
    (
        "interval past",
        "[dispatch]\ninterval_seconds = 86400.5\n",
        &["interval_seconds"],
    ),
    (
        "interval under",
        "[dispatch]\ninterval_seconds = 0.009\n",
        &["interval_seconds", "0.01"],
    ),
    (
        "cron parallel past",
        "[cron]\nmax_parallel = 257\n",
        &["max_parallel", "256"],
    ),
    (
        "cron ttl past",
        "[cron]\nclaim_ttl_seconds = 31536001\n",
        &["[cron] claim_ttl_seconds"],
    ),
    (
        "cron interval under",
        "[cron]\ninterval_seconds = 0.05\n",
        &["[cron] interval_seconds", "0.1"],
    ),
];

#[test]
fn every_malformed_config_is_refused_by_every_command_that_reads_it() {
    let k = kanban();
    let id = k.create("never blocked for a config error", &[]);
    let home = k.home().to_path_buf();
    let config = home.join("kanban.toml");
    assert!(BAD_CONFIGS.len() >= 30);
    for (what, text, needles) in BAD_CONFIGS {
        std::fs::write(&config, text).unwrap();
        let mut all = vec![config.to_str().unwrap()];
        all.extend_from_slice(needles);
        for argv in [
            vec!["dispatch", "--dry-run"],
            vec!["dispatch", "--once"],
            vec!["claim", id.as_str()],
            vec!["cron", "tick"],
        ] {
            let run = refused(&home, args(&k, &argv), 1, &all);
            assert_eq!(
                run.stderr.matches(config.to_str().unwrap()).count(),
                1,
                "{what}: the file is named once\n{}",
                run.stderr
            );
        }
    }
    // Every key at the edges of its range is accepted.
    for edge in [
        "[dispatch]\nmax_spawn = 1\nmax_in_progress = 1\nfailure_limit = 1\nclaim_ttl_seconds = 1\n\
         crash_grace_seconds = 0\nrate_limit_cooldown_seconds = 0\nstale_timeout_seconds = 0\n\
         heartbeat_max_stale_seconds = 1\nkill_wait_seconds = 0.0\ninterval_seconds = 0.01\n\
         [cron]\nmax_parallel = 1\nclaim_ttl_seconds = 1\ninterval_seconds = 0.1\n",
        "[dispatch]\nmax_spawn = 1024\nmax_in_progress = 65536\nfailure_limit = 1000\n\
         claim_ttl_seconds = 31536000\ncrash_grace_seconds = 31536000\n\
         rate_limit_cooldown_seconds = 31536000\nstale_timeout_seconds = 31536000\n\
         heartbeat_max_stale_seconds = 31536000\nkill_wait_seconds = 3600.0\n\
         interval_seconds = 86400.0\n[cron]\nmax_parallel = 256\nclaim_ttl_seconds = 31536000\n\
         interval_seconds = 86400.0\ntimezone = \"Europe/Berlin\"\n",
    ] {
        std::fs::write(&config, edge).unwrap();
        let run = k.run(&["dispatch", "--dry-run"]);
        assert_eq!(run.code, 0, "{edge}\n{}", run.stderr);
    }
    std::fs::write(&config, b"[dispatch]\nmode = \"direct\xff\"\n").unwrap();
    refused(
        &home,
        args(&k, &["dispatch", "--once"]),
        1,
        &["kanban.toml", "UTF-8"],
    );
    std::fs::remove_file(&config).unwrap();
    assert_eq!(
        k.status(&id),
        "ready",
        "no config error ever touched the task"
    );
}

#[test]
fn control_characters_are_escaped_in_human_output_and_exact_in_json() {
    let k = kanban();
    std::fs::write(
        k.home().join("kanban.toml"),
        "[profiles.default]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    let title = "evil\u{1b}[31mred\u{7}\r\nforged line\u{9b}2J\u{202e}";
    let body = "line one\nstatus done\u{1b}[2J";
    let id = k.create(title, &["--body", body, "--assignee", "a\u{1b}b"]);
    k.ok(&["assign", &id, "--none"]);
    k.ok(&["comment", &id, "--body", "c\r\u{1b}]0;pwned\u{7}"]);
    let raw = |s: &str| s.chars().any(|c| c.is_control() && c != '\n');
    let list = k.ok(&["list"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(!raw(&list), "{list:?}");
    assert!(
        list.contains("evil\\x1b[31mred\\x07\\r\\nforged line\\u{9b}2J\\u{202e}"),
        "{list}"
    );
    let show = k.ok(&["show", &id]);
    assert!(!raw(&show), "{show:?}");
    assert!(show.contains("\n  status done\\x1b[2J"), "{show}");
    assert!(show.contains("c\\r\\x1b]0;pwned\\x07"), "{show}");
    assert!(
        !show.lines().any(|l| l.starts_with("status done")),
        "{show}"
    );
    let events = k.ok(&["events", &id]);
    assert!(!raw(&events), "{events:?}");
    let dry = k.ok(&["dispatch", "--dry-run"]);
    assert!(dry.contains("would spawn"), "{dry}");
    assert!(!raw(&dry), "{dry:?}");
    assert!(dry.contains("evil\\x1b[31mred"), "{dry}");
    // Errors quote what they were given: escaped too.
    let err = k.run(&["show", "t_\u{1b}[2J\u{7}"]);
    assert_eq!(err.code, 1, "{}", err.stderr);
    assert!(!raw(&err.stderr), "{:?}", err.stderr);
    assert!(err.stderr.contains("t_\\x1b[2J\\x07"), "{}", err.stderr);
    // Cron jobs too.
    std::fs::write(
        k.home().join("kanban.toml"),
        "[profiles.default]\nagent = \"builtin:shell\"\n",
    )
    .unwrap();
    k.ok(&[
        "cron",
        "add",
        "--name",
        "job\u{1b}]0;x\u{7}",
        "--schedule",
        "every 30m",
        "--prompt",
        "echo\rhi",
        "--profile",
        "default",
    ]);
    let cron = k.ok(&["cron", "list"]);
    assert!(
        !raw(&cron) && cron.contains("job\\x1b]0;x\\x07"),
        "{cron:?}"
    );
    let json = k.json(&["list"]);
    assert_eq!(json[0]["title"], title);
    assert_eq!(k.json(&["show", &id])["task"]["body"], body);
}

#[test]
fn invalid_utf8_arguments_are_usage_errors_that_change_nothing() {
    let k = kanban();
    let id = k.create("x", &[]);
    let home = k.home().to_path_buf();
    let bad = OsStr::from_bytes(b"bad\xff");
    for argv in [
        vec![OsStr::new("create"), bad],
        vec![OsStr::new("--board"), bad, OsStr::new("list")],
        vec![
            OsStr::new("comment"),
            OsStr::new(&id),
            OsStr::new("--body"),
            bad,
        ],
        vec![OsStr::new("show"), bad],
        vec![
            OsStr::new("claim"),
            OsStr::new(&id),
            OsStr::new("--claimer"),
            bad,
        ],
    ] {
        let mut cmd = k.cmd();
        cmd.args(&argv);
        refused(&home, cmd, 2, &["UTF-8"]);
    }
}

#[test]
fn special_files_at_the_board_path_are_refused_for_reads_and_writes() {
    let k = kanban();
    let home = k.home().to_path_buf();
    let journal_before = Path::new("/dev/null-journal").exists();
    for device in ["/dev/null", "/dev/zero"] {
        for argv in [
            vec!["list"],
            vec!["create", "x"],
            vec!["fsck"],
            vec!["show", "t_00000000"],
        ] {
            let mut cmd = args(&k, &argv);
            cmd.env("HERMES_KANBAN_DB", device);
            refused(
                &home,
                cmd,
                1,
                &[device, "character device", "not a board database file"],
            );
        }
    }
    assert_eq!(Path::new("/dev/null-journal").exists(), journal_before);
    assert!(!Path::new("/dev/zero-wal").exists());

    let db = k.default_db();
    let fifo = |p: &Path| {
        rustix::fs::mkfifoat(rustix::fs::CWD, p, rustix::fs::Mode::RWXU).unwrap();
    };
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "character device",
            Box::new(|p| std::os::unix::fs::symlink("/dev/null", p).unwrap()),
        ),
        (
            "character device",
            Box::new(|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
        ),
        ("FIFO", Box::new(fifo)),
        ("directory", Box::new(|p| std::fs::create_dir(p).unwrap())),
        (
            "symlink to nothing",
            Box::new(|p| std::os::unix::fs::symlink("/nonexistent/kanban.db", p).unwrap()),
        ),
    ];
    for (kind, make) in &cases {
        make(&db);
        for argv in [
            vec!["list"],
            vec!["create", "x"],
            vec!["init"],
            vec!["dispatch", "--once"],
        ] {
            refused(&home, args(&k, &argv), 1, &[kind, db.to_str().unwrap()]);
        }
        if db.is_dir() {
            std::fs::remove_dir(&db).unwrap();
        } else {
            std::fs::remove_file(&db).unwrap();
        }
    }
    let _listener = std::os::unix::net::UnixListener::bind(&db).unwrap();
    refused(&home, args(&k, &["list"]), 1, &["socket"]);
    std::fs::remove_file(&db).unwrap();

    // Another board's file, too.
    let other = home.join("kanban/boards/ops/kanban.db");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &other).unwrap();
    refused(
        &home,
        args(&k, &["--board", "ops", "list"]),
        1,
        &["character device"],
    );
    refused(
        &home,
        args(&k, &["boards", "create", "ops"]),
        1,
        &["already exists"],
    );
}

#[test]
fn a_relative_home_is_made_absolute_for_the_workers() {
    let k = kanban();
    let cwd = k.home().to_path_buf();
    let profile = "[profiles.default]\nagent = \"builtin:complete\"\n";
    for (home_flag, env_home) in [(Some("rel"), None), (None, Some("home2"))] {
        let name = home_flag.or(env_home).unwrap();
        std::fs::create_dir_all(cwd.join(name)).unwrap();
        std::fs::write(cwd.join(name).join("kanban.toml"), profile).unwrap();
        let run = |argv: &[&str]| {
            let mut cmd = bare(&k, &cwd);
            if let Some(h) = home_flag {
                cmd.args(["--home", h]);
            }
            if let Some(h) = env_home {
                cmd.env("HERMES_KANBAN_HOME", h);
            }
            let run = Run::from(cmd.args(argv).output().unwrap());
            assert_eq!(run.code, 0, "{argv:?} with {name}: {}", run.stderr);
            run.stdout
        };
        let created: serde_json::Value =
            serde_json::from_str(&run(&["--json", "create", "work"])).unwrap();
        let id = created["id"].as_str().unwrap().to_owned();
        run(&["dispatch", "--until-idle", "--interval", "0.05"]);
        let shown: serde_json::Value =
            serde_json::from_str(&run(&["--json", "show", &id])).unwrap();
        assert_eq!(shown["task"]["status"], "done", "{name}: {shown}");
        let boards = run(&["--json", "boards", "list"]);
        let expected = cwd.join(name).join("kanban.db");
        assert!(boards.contains(expected.to_str().unwrap()), "{boards}");
    }
    // A relative pinned file that does not exist: named absolute, nothing created, no advice to
    // create a board called like a path.
    let mut cmd = bare(&k, &cwd);
    cmd.env("HOME", &cwd)
        .env("HERMES_KANBAN_DB", "missing/kanban.db")
        .arg("list");
    let absolute = cwd.join("missing/kanban.db");
    let run = refused(&cwd, cmd, 1, &[absolute.to_str().unwrap()]);
    assert!(
        !run.stderr.contains("boards create missing"),
        "{}",
        run.stderr
    );
    assert!(!cwd.join("missing").exists());
}

#[test]
fn the_demo_runs_on_a_relative_home() {
    let k = kanban();
    let cwd = k.home().to_path_buf();
    let run = Run::from(
        bare(&k, &cwd)
            .args(["--home", "demo-home", "demo"])
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("fsck: clean"), "{}", run.stdout);
    assert!(cwd.join("demo-home/kanban.db").is_file());
}

#[test]
fn a_write_against_a_locked_board_fails_after_the_busy_timeout_naming_it_in_ms() {
    let k = kanban();
    let id = k.create("x", &[]);
    let db = k.default_db();
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut cmd = args(&k, &["comment", &id, "--body", "hello"]);
    cmd.env("HERMES_KANBAN_BUSY_TIMEOUT_MS", "200");
    let run = Run::from(cmd.output().unwrap());
    assert_eq!(run.code, 1, "{}", run.stderr);
    for needle in ["locked", "200 ms", "milliseconds", db.to_str().unwrap()] {
        assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
    }
    assert_said_once(&run.stderr);
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert!(
        k.json(&["show", &id])["comments"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    k.ok(&["comment", &id, "--body", "hello"]);
}

#[test]
fn a_failed_boards_create_leaves_nothing_and_can_be_retried() {
    let k = kanban();
    let home = k.home().to_path_buf();
    // The board's folder cannot be created: a file is in the way.
    std::fs::create_dir_all(home.join("kanban")).unwrap();
    std::fs::write(home.join("kanban/boards"), b"in the way").unwrap();
    refused(
        &home,
        args(&k, &["boards", "create", "ops"]),
        1,
        &["ops", "retried"],
    );
    std::fs::remove_file(home.join("kanban/boards")).unwrap();
    k.ok(&["boards", "create", "ops"]);
    k.ok(&["--board", "ops", "create", "works"]);
    refused(
        &home,
        args(&k, &["boards", "create", "ops"]),
        1,
        &["already exists"],
    );
    let names: Vec<_> = std::fs::read_dir(home.join("kanban/boards/ops"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("creating")), "{names:?}");
}

#[test]
fn a_worker_cannot_link_or_unlink_another_task() {
    let k = kanban();
    let mine = k.create("mine", &[]);
    let a = k.create("a", &[]);
    let b = k.create("b", &[]);
    k.ok(&["link", &a, &b]);
    let claim = k.json(&["claim", &mine, "--claimer", "host:7"]);
    let run_id = claim["run_id"].as_i64().unwrap().to_string();
    let home = k.home().to_path_buf();
    let worker = |argv: &[&str]| {
        let mut cmd = args(&k, argv);
        cmd.env("HERMES_KANBAN_TASK", &mine)
            .env("HERMES_KANBAN_RUN_ID", &run_id)
            .env("HERMES_KANBAN_CLAIM_LOCK", "host:7")
            .env("HERMES_KANBAN_DB", k.default_db());
        cmd
    };
    for argv in [
        vec!["link", mine.as_str(), a.as_str()],
        vec!["unlink", a.as_str(), b.as_str()],
        vec!["link", b.as_str(), a.as_str()],
    ] {
        refused(&home, worker(&argv), 3, &["may not mutate", &mine]);
    }
    assert_eq!(k.status(&a), "ready");
    assert_eq!(k.status(&b), "todo");
}

/// `kanban --home HOME <argv>` as a user that cannot write what root made: this user when it is
/// not root, else `nobody` through `setpriv`; `None` when root has no `setpriv`.
fn unprivileged(k: &Kanban, home: &Path, argv: &[&str]) -> Option<Command> {
    let mut cmd = if rustix::process::geteuid().is_root() {
        let setpriv = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("setpriv"))
                .find(|p| p.is_file())
        })?;
        let mut cmd = Command::new(setpriv);
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(k.bin());
        cmd
    } else {
        Command::new(k.bin())
    };
    cmd.env_clear().arg("--home").arg(home).args(argv);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    Some(cmd)
}

#[test]
fn a_read_only_home_still_reads_and_every_write_names_the_file() {
    use std::os::unix::fs::PermissionsExt;
    let k = kanban();
    let id = k.create("readable", &["--body", "still here"]);
    let home = k.home().to_path_buf();
    let db = k.default_db();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Never skipped: as root the unprivileged user comes from setpriv, which .ci/shells
    // installs (`cargo xtask ci` runs it before the tests).
    let probe = unprivileged(&k, &home, &["list"]).expect(
        "running as root without setpriv, no unprivileged user to test with: install setpriv \
         (util-linux), as .ci/shells does",
    );
    drop(probe);
    let before = snapshot(&home);
    for argv in [
        vec!["list"],
        vec!["show", id.as_str()],
        vec!["events", id.as_str()],
        vec!["fsck"],
    ] {
        let run = Run::from(unprivileged(&k, &home, &argv).unwrap().output().unwrap());
        assert_eq!(run.code, 0, "{argv:?}: {}", run.stderr);
        if argv[0] != "fsck" && argv[0] != "events" {
            assert!(run.stdout.contains("readable"), "{argv:?}: {}", run.stdout);
        }
    }
    for argv in [
        vec!["create", "x"],
        vec!["comment", id.as_str(), "--body", "x"],
        vec!["archive", id.as_str()],
    ] {
        let cmd = unprivileged(&k, &home, &argv).unwrap();
        refused(
            &home,
            cmd,
            1,
            &[db.to_str().unwrap(), "read-only", "writable"],
        );
    }
    // A home whose board folder cannot be created says which folder and what to do.
    let cmd = unprivileged(
        &k,
        &home,
        &["--board", "default", "boards", "create", "ops"],
    )
    .unwrap();
    refused(&home, cmd, 1, &["kanban/boards/ops", "writable"]);
    assert_eq!(before, snapshot(&home));
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(k.json(&["show", &id])["task"]["status"], "ready");
}

#[test]
fn a_missing_agent_program_stops_the_dispatcher_before_any_claim() {
    let k = kanban();
    std::fs::write(
        k.home().join("kanban.toml"),
        "[profiles.default]\nagent = \"command\"\ncommand = [\"no-such-agent-9f2\", \"--print\"]\n",
    )
    .unwrap();
    let id = k.create("would have been blocked", &[]);
    let home = k.home().to_path_buf();
    for argv in [vec!["dispatch", "--dry-run"], vec!["dispatch", "--once"]] {
        let mut cmd = args(&k, &argv);
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        refused(
            &home,
            cmd,
            1,
            &[
                "kanban.toml",
                "[profiles.default] command",
                "no-such-agent-9f2",
            ],
        );
    }
    assert_eq!(k.status(&id), "ready");
}

/// Library messages name what is wrong, never a flag of the command line; the CLI says on a line
/// of its own which flags choose otherwise.
#[test]
fn a_library_error_names_no_flag_and_the_cli_adds_the_flags_that_help() {
    let k = kanban();
    let home = k.home().to_path_buf();
    let not_a_board = home.join("notes.txt");
    std::fs::write(&not_a_board, "not sqlite at all, just some text\n").unwrap();
    let mut cmd = args(&k, &["list"]);
    cmd.env("HERMES_KANBAN_DB", &not_a_board);
    let run = refused(&home, cmd, 1, &["is not a SQLite database"]);
    let (message, hint): (Vec<&str>, Vec<&str>) = run
        .stderr
        .lines()
        .partition(|l| l.contains("is not a SQLite database"));
    assert!(!message.concat().contains("--"), "{}", run.stderr);
    assert!(
        hint.iter()
            .any(|l| l.contains("--board SLUG and --home DIR choose another board")),
        "{}",
        run.stderr
    );

    let id = k.create("a task", &[]);
    let edit = refused(&home, args(&k, &["edit", &id]), 1, &["nothing to edit"]);
    let (message, hint): (Vec<&str>, Vec<&str>) = edit
        .stderr
        .lines()
        .partition(|l| l.contains("nothing to edit"));
    assert!(!message.concat().contains("--"), "{}", edit.stderr);
    assert!(
        hint.iter().any(|l| l.contains("--title")),
        "{}",
        edit.stderr
    );
}
