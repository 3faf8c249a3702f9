//! Test support: run a test body in a child process of the test binary with a worker environment.
//!
//! The test process's own environment is never mutated. [`in_child`] re-executes the current test
//! binary with `--exact <test> --nocapture` and [`CHILD_FLAG`] set; in that child the same test
//! calls `in_child` again, which now runs the body. The parent checks that the child ran exactly
//! that one test and that it passed.

use std::collections::BTreeMap;

use super::{BEHAVIOR_ONLY_ENV_KEYS, DELEGATED_CHILD_MARKER, KANBAN_ENV_KEYS};

/// Set on the re-executed child; its presence means "run the body".
pub const CHILD_FLAG: &str = "KANBAN_IDENTITY_TEST_CHILD";

/// The worker environment of the seed test's `worker_env` fixture.
pub const WORKER_ENV: &[(&str, &str)] = &[
    ("HERMES_KANBAN_TASK", "t_worker_real_task"),
    ("HERMES_KANBAN_WORKSPACE", "/tmp/ws"),
    ("HERMES_KANBAN_RUN_ID", "42"),
    ("HERMES_KANBAN_CLAIM_LOCK", "lock-abc"),
    ("HERMES_KANBAN_BOARD", "team-alpha"),
];

/// Runs `body` in a child process of this test binary whose environment is the inherited one
/// without any identity key or marker, plus `env`. `test` is the test's path without the crate
/// name (`identity::tests::thread_isolation`).
#[allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives a child process directly
pub fn in_child(test: &str, env: &[(&str, &str)], body: impl FnOnce()) {
    if std::env::var_os(CHILD_FLAG).is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_FLAG, "1");
    for key in KANBAN_ENV_KEYS
        .iter()
        .chain(BEHAVIOR_ONLY_ENV_KEYS)
        .chain(&[DELEGATED_CHILD_MARKER, "HERMES_KANBAN_STOP_NUDGE"])
    {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("re-executing the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child run of {test} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// Every `HERMES_KANBAN_*` variable of this process, for "the environment is untouched" checks.
#[allow(clippy::disallowed_methods)] // identity's test support reads the environment
pub fn kanban_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .filter(|(k, _)| k.starts_with("HERMES_KANBAN_"))
        .collect()
}

/// The test path (without the crate name) of `name` in the module `module` (`module_path!()`).
pub fn test_path(module: &str, name: &str) -> String {
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{module}::{name}")
}
