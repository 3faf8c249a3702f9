//! End to end: the real `kanban` binary under a plain environment, a worker environment, and a
//! worker environment carrying the delegated-child marker; and a child process built inside a
//! non-owned scope. Worker environments are only ever set on child processes (`Command::env`);
//! tests that need one for library code re-execute this test binary.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives processes directly

use std::path::Path;
use std::process::{Command, Output};

use kanban_runtime::identity::{
    self, BEHAVIOR_ONLY_ENV_KEYS, DELEGATED_CHILD_MARKER, KANBAN_ENV_KEYS,
};
use serde_json::Value;

const KANBAN: &str = env!("CARGO_BIN_EXE_kanban");
const CHILD_FLAG: &str = "KANBAN_IDENTITY_E2E_CHILD";

const WORKER_ENV: &[(&str, &str)] = &[
    ("HERMES_KANBAN_TASK", "t_worker_real_task"),
    ("HERMES_KANBAN_WORKSPACE", "/tmp/ws"),
    ("HERMES_KANBAN_RUN_ID", "42"),
    ("HERMES_KANBAN_CLAIM_LOCK", "lock-abc"),
];

/// A command whose environment has no identity key, no marker and no kanban location key
/// inherited from whoever runs the tests, plus `env`.
fn clean(program: &str, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    for key in KANBAN_ENV_KEYS
        .iter()
        .chain(BEHAVIOR_ONLY_ENV_KEYS)
        .chain(&[DELEGATED_CHILD_MARKER, "HERMES_KANBAN_HOME", "HERMES_HOME"])
    {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().copied());
    cmd
}

fn kanban(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    clean(KANBAN, env)
        .arg("--home")
        .arg(home)
        .args(args)
        .output()
        .expect("running kanban")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "kanban failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Runs `body` in a re-executed child of this test binary with `env`.
fn in_child(test: &str, env: &[(&str, &str)], body: impl FnOnce()) {
    if std::env::var_os(CHILD_FLAG).is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let exe = exe.to_str().expect("a UTF-8 test binary path");
    let out = clean(exe, env)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_FLAG, "1")
        .output()
        .expect("re-executing the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child run of {test} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn identity_json_in_a_plain_process() {
    let home = tempfile::tempdir().unwrap();
    let report = json_of(&kanban(home.path(), &[], &["identity", "--json"]));
    assert_eq!(
        report["owned"], true,
        "a plain process is its own principal"
    );
    assert_eq!(report["task"], Value::Null);
    assert_eq!(report["run_id"], Value::Null);
    assert_eq!(report["delegated_child"], false);
    assert_eq!(report["gates"]["kanban_mode_enabled"], false);
    assert_eq!(report["gates"]["default_task_id"], Value::Null);
    assert_eq!(report["gates"]["board_mutation_allowed"], true);
}

#[test]
fn identity_json_in_a_worker() {
    let home = tempfile::tempdir().unwrap();
    let report = json_of(&kanban(home.path(), WORKER_ENV, &["identity", "--json"]));
    assert_eq!(report["owned"], true);
    assert_eq!(report["task"], "t_worker_real_task");
    assert_eq!(report["run_id"], 42);
    assert_eq!(report["delegated_child"], false);
    let gates = &report["gates"];
    assert_eq!(gates["kanban_mode_enabled"], true);
    assert_eq!(gates["default_task_id"], "t_worker_real_task");
    assert_eq!(gates["detect_environment_kanban"], true);
    assert_eq!(gates["is_dispatcher_owned_worker"], true);
    assert_eq!(gates["owned_run_id"], 42);
    assert_eq!(gates["auto_heartbeat"], true);
}

#[test]
fn identity_json_in_a_worker_with_the_delegated_child_marker() {
    let home = tempfile::tempdir().unwrap();
    let env: Vec<_> = WORKER_ENV
        .iter()
        .copied()
        .chain([(DELEGATED_CHILD_MARKER, "1")])
        .collect();
    let report = json_of(&kanban(home.path(), &env, &["identity", "--json"]));
    assert_eq!(report["owned"], false);
    assert_eq!(report["task"], Value::Null);
    assert_eq!(report["run_id"], Value::Null);
    assert_eq!(report["delegated_child"], true);
    let gates = &report["gates"];
    assert_eq!(gates["kanban_mode_enabled"], false);
    assert_eq!(gates["default_task_id"], Value::Null);
    assert_eq!(gates["auto_heartbeat"], false);
    assert_eq!(gates["board_mutation_allowed"], false);
}

#[test]
fn identity_human_output_names_the_task() {
    let home = tempfile::tempdir().unwrap();
    let out = kanban(home.path(), WORKER_ENV, &["identity"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("t_worker_real_task"), "{text}");
    assert!(text.contains("kanban_mode_enabled"), "{text}");
}

/// A child started inside a non-owned scope of a worker carries no identity key and carries the
/// marker, so the `kanban` it runs is neither owned nor allowed to mutate the board; outside the
/// scope the worker's own child still is the worker.
#[test]
fn child_command_built_in_a_non_owned_scope_is_scrubbed_and_marked() {
    in_child(
        "child_command_built_in_a_non_owned_scope_is_scrubbed_and_marked",
        WORKER_ENV,
        || {
            let home = tempfile::tempdir().unwrap();
            let run = |cmd: &mut identity::ChildCommand| {
                json_of(
                    &cmd.arg("--home")
                        .arg(home.path())
                        .args(["identity", "--json"])
                        .output()
                        .unwrap(),
                )
            };
            let own_child = run(&mut identity::command(KANBAN));
            assert_eq!(own_child["task"], "t_worker_real_task");

            let _scope = identity::non_dispatcher_owned_context();
            let env_out = identity::command("env").output().unwrap();
            let printed = String::from_utf8_lossy(&env_out.stdout);
            for key in KANBAN_ENV_KEYS.iter().chain(BEHAVIOR_ONLY_ENV_KEYS) {
                assert!(
                    !printed.contains(&format!("{key}=")),
                    "{key} leaked:\n{printed}"
                );
            }
            assert!(
                printed
                    .lines()
                    .any(|l| l == format!("{DELEGATED_CHILD_MARKER}=1"))
            );

            let scrubbed = run(&mut identity::command(KANBAN));
            assert_eq!(scrubbed["owned"], false);
            assert_eq!(scrubbed["task"], Value::Null);
            assert_eq!(scrubbed["delegated_child"], true);
            assert_eq!(scrubbed["gates"]["board_mutation_allowed"], false);
        },
    );
}

/// A board with two ready tasks, the first claimed as `lock-1`: (home, owned task, its run id,
/// the other task).
struct Claimed {
    home: tempfile::TempDir,
    task: String,
    run_id: String,
    other: String,
}

fn claimed_board() -> Claimed {
    let home = tempfile::tempdir().expect("a temporary home");
    let create = |title: &str| {
        json_of(&kanban(home.path(), &[], &["--json", "create", title]))["id"]
            .as_str()
            .expect("create prints the new id")
            .to_owned()
    };
    let task = create("the worker's task");
    let other = create("somebody else's task");
    let claim = json_of(&kanban(
        home.path(),
        &[],
        &["--json", "claim", &task, "--claimer", "lock-1"],
    ));
    let run_id = claim["run_id"]
        .as_i64()
        .expect("claim prints the run id")
        .to_string();
    Claimed {
        home,
        task,
        run_id,
        other,
    }
}

impl Claimed {
    fn worker_env<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        [
            ("HERMES_KANBAN_TASK", self.task.as_str()),
            ("HERMES_KANBAN_RUN_ID", self.run_id.as_str()),
            ("HERMES_KANBAN_CLAIM_LOCK", "lock-1"),
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect()
    }

    fn status(&self, id: &str) -> String {
        let shown = json_of(&kanban(self.home.path(), &[], &["--json", "show", id]));
        let status = shown["status"]
            .as_str()
            .or_else(|| shown["task"]["status"].as_str())
            .unwrap_or_else(|| panic!("no status in {shown}"));
        status.to_owned()
    }

    /// Every file under the home, with its bytes.
    fn snapshot(&self) -> Vec<(std::path::PathBuf, Vec<u8>)> {
        fn walk(dir: &Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir)
                .expect("reading the home")
                .map(|e| e.expect("a directory entry").path())
                .collect();
            entries.sort();
            for path in entries {
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    let bytes = std::fs::read(&path).expect("reading a board file");
                    out.push((path, bytes));
                }
            }
        }
        let mut out = Vec::new();
        walk(self.home.path(), &mut out);
        out
    }
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

#[test]
fn worker_complete_without_an_id_completes_the_owned_task() {
    let b = claimed_board();
    let out = kanban(
        b.home.path(),
        &b.worker_env(&[]),
        &["complete", "--summary", "done by the worker"],
    );
    assert_eq!(
        code(&out),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(b.status(&b.task), "done");
    assert_eq!(b.status(&b.other), "ready");
}

#[test]
fn delegated_child_marker_refuses_every_lifecycle_call_and_leaves_the_board_unchanged() {
    let b = claimed_board();
    let before = b.snapshot();
    let env = b.worker_env(&[(DELEGATED_CHILD_MARKER, "1")]);
    let attempts: [&[&str]; 6] = [
        &["complete", "--summary", "hijacked"],
        &["complete", &b.task, "--summary", "hijacked"],
        &["block", "--reason", "hijacked"],
        &["heartbeat"],
        &["comment", &b.task, "--body", "hijacked"],
        &["complete", &b.other, "--summary", "hijacked"],
    ];
    for args in attempts {
        let out = kanban(b.home.path(), &env, args);
        assert_eq!(
            code(&out),
            Some(3),
            "kanban {args:?} with the marker: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        b.snapshot() == before,
        "the board files changed under a fenced process"
    );
    assert_eq!(b.status(&b.task), "running");
}

#[test]
fn worker_may_not_complete_another_task_nor_a_superseded_run() {
    let b = claimed_board();
    let out = kanban(
        b.home.path(),
        &b.worker_env(&[]),
        &["complete", &b.other, "--summary", "not mine"],
    );
    assert_eq!(
        code(&out),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(b.status(&b.other), "ready");

    let stale = b.worker_env(&[("HERMES_KANBAN_RUN_ID", "999")]);
    let out = kanban(b.home.path(), &stale, &["complete", "--summary", "stale"]);
    assert_eq!(
        code(&out),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(b.status(&b.task), "running");
}

/// The cron-in-a-worker scenario: a `kanban complete` started from a non-owned scope of the
/// worker (a cron job's tool) can neither default to nor close the worker's task.
#[test]
fn complete_started_from_a_non_owned_scope_of_the_worker_is_refused() {
    let b = claimed_board();
    let env = b.worker_env(&[("KANBAN_E2E_HOME", b.home.path().to_str().unwrap())]);
    in_child(
        "complete_started_from_a_non_owned_scope_of_the_worker_is_refused",
        &env,
        || {
            let home = std::env::var("KANBAN_E2E_HOME").unwrap();
            let _scope = identity::non_dispatcher_owned_context();
            for args in [
                vec!["complete", "--summary", "from a cron job"],
                vec!["heartbeat"],
            ] {
                let out = identity::command(KANBAN)
                    .arg("--home")
                    .arg(&home)
                    .args(&args)
                    .output()
                    .unwrap();
                assert_eq!(
                    code(&out),
                    Some(3),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        },
    );
    assert_eq!(b.status(&b.task), "running");
}
