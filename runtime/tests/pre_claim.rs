//! The board's `pre_claim` policy end to end (README "A policy that gates every claim"): a real
//! dispatcher asks the operator's command (a real script) before each claim and promotion; an
//! allow lets the task run, and a denial, a timeout, a crash, a garbage answer and a policy that
//! is not valid each park it in `todo` with `dependency_wait {source: pre_claim, reason}`, while
//! a task on another board keeps being claimed. `kanban promote` asks too, `dispatch --dry-run`
//! and `show` say when the policy is not valid, `boards set-policy` refuses a bad one. Once more
//! on a PostgreSQL board.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use kanban_tests::Kanban;
use serde_json::Value;

fn home(extra: &str) -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    std::fs::write(
        k.home().join("kanban.toml"),
        format!(
            "[dispatch]\ninterval_seconds = 0.05\n\n[profiles.done]\nagent = \"builtin:complete\"\n{extra}"
        ),
    )
    .unwrap();
    k.ok(&["init"]);
    k
}

/// An executable policy script in `dir` running `body` (after saving its input to
/// `packets.jsonl` beside it).
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let packets = dir.join("packets.jsonl");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncat >> '{}'\necho >> '{}'\n{body}\n",
            packets.display(),
            packets.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn packets(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("packets.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn set_policy(k: &Kanban, board: &str, timeout: &str, command: &Path) {
    k.ok(&[
        "boards",
        "set-policy",
        board,
        "--timeout",
        timeout,
        "--pre-claim-command",
        command.to_str().unwrap(),
    ]);
}

/// The task's `dependency_wait` events written by the policy.
fn policy_waits(k: &Kanban, id: &str) -> Vec<Value> {
    k.json(&["events", id])
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "dependency_wait" && e["payload"]["source"] == "pre_claim")
        .cloned()
        .collect()
}

fn until_idle(k: &Kanban) -> String {
    let run = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");
    run.stdout
}

#[test]
fn an_allowed_claim_runs_and_the_command_sees_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let k = home("");
    let allow = script(
        dir.path(),
        "allow",
        r#"echo '{"allow": true, "reason": "fine"}'"#,
    );
    set_policy(&k, "default", "5", &allow);
    let id = k.create("allowed", &["--assignee", "done"]);
    until_idle(&k);
    assert_eq!(k.status(&id), "done");
    let seen = packets(dir.path());
    let claim = seen
        .iter()
        .find(|p| p["phase"] == "claim")
        .unwrap_or_else(|| panic!("no claim packet: {seen:?}"));
    assert_eq!(claim["board"], "default");
    assert_eq!(claim["source_status"], "ready");
    assert_eq!(claim["task"]["id"], id.as_str());
    assert_eq!(claim["task"]["assignee"], "done");
    assert!(policy_waits(&k, &id).is_empty());
    k.assert_fsck_clean();
}

#[test]
fn each_kind_of_denial_parks_the_task_while_another_board_keeps_claiming() {
    let cases = [
        (
            "deny",
            r#"echo '{"allow": false, "reason": "frozen"}'"#,
            "frozen",
        ),
        ("timeout", "sleep 30", "pre_claim_timeout"),
        ("crash", "exit 3", "pre_claim_command_failed"),
        (
            "garbage",
            "echo 'certainly, go ahead'",
            "pre_claim_invalid_response",
        ),
        (
            "extra-key",
            r#"echo '{"allow": true, "reason": "ok", "also": 1}'"#,
            "pre_claim_invalid_response",
        ),
    ];
    for (name, body, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let k = home("");
        k.ok(&["boards", "create", "other"]);
        let policy = script(dir.path(), name, body);
        set_policy(&k, "default", "1", &policy);
        let id = k.create("gated", &["--assignee", "done"]);
        let out = until_idle(&k);
        assert_eq!(k.status(&id), "todo", "{name}: {out}");
        let waits = policy_waits(&k, &id);
        assert_eq!(
            waits.len(),
            1,
            "{name}: one wait, not one per tick: {waits:?}"
        );
        assert_eq!(waits[0]["payload"]["reason"], reason, "{name}");
        assert_eq!(waits[0]["payload"]["source_status"], "ready", "{name}");
        assert!(out.contains(&format!("denied     {id}")), "{name}: {out}");
        // The task was never claimed.
        assert!(
            k.json(&["show", &id])["runs"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        // A second dispatcher pass asks again (as a promotion) and still writes nothing new.
        until_idle(&k);
        assert_eq!(policy_waits(&k, &id).len(), 1, "{name}");
        assert!(
            packets(dir.path()).iter().any(|p| p["phase"] == "promote"),
            "{name}"
        );
        // The other board has no policy: its task is claimed and done.
        let other = k
            .ok(&["--board", "other", "create", "free", "--assignee", "done"])
            .trim()
            .to_owned();
        let run = k.run(&["--board", "other", "dispatch", "--until-idle"]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(
            k.json(&["--board", "other", "show", &other])["task"]["status"],
            "done",
            "{name}"
        );
        k.assert_fsck_clean();
    }
}

#[test]
fn a_denied_task_runs_once_the_policy_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let k = home("");
    let deny = script(
        dir.path(),
        "deny",
        r#"echo '{"allow": false, "reason": "wait"}'"#,
    );
    set_policy(&k, "default", "5", &deny);
    let id = k.create("later", &["--assignee", "done"]);
    until_idle(&k);
    assert_eq!(k.status(&id), "todo");
    // An operator's promotion is asked too, and refused with nothing changed.
    let before = k.json(&["events", &id]);
    let run = k.run(&["promote", &id]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("pre_claim policy denies"), "{run:?}");
    assert_eq!(k.json(&["events", &id]), before);
    assert_eq!(k.status(&id), "todo");
    let allow = script(
        dir.path(),
        "allow",
        r#"echo '{"allow": true, "reason": "go"}'"#,
    );
    set_policy(&k, "default", "5", &allow);
    until_idle(&k);
    assert_eq!(k.status(&id), "done");
    let seen = packets(dir.path());
    assert!(
        seen.iter()
            .any(|p| p["phase"] == "promote" && p["source_status"] == "todo")
    );
    k.assert_fsck_clean();
}

#[test]
fn a_policy_that_is_not_valid_denies_everything_and_says_so() {
    let k = home("");
    let id = k.create("gated", &["--assignee", "done"]);
    let meta = k.home().join("kanban/boards/default/board.json");
    std::fs::create_dir_all(meta.parent().unwrap()).unwrap();
    std::fs::write(
        &meta,
        r#"{"pre_claim": {"command": ["relative/check"], "timeout_seconds": 5}}"#,
    )
    .unwrap();
    let dry = k.run(&["dispatch", "--dry-run"]);
    assert!(
        dry.stdout.contains("pre_claim policy is not valid"),
        "{dry:?}"
    );
    assert!(dry.stdout.contains("absolute"), "{dry:?}");
    assert_eq!(k.status(&id), "ready", "a dry run changes nothing");
    let shown = k.ok(&["show", &id]);
    assert!(shown.contains("pre_claim:"), "{shown}");
    assert!(k.json(&["show", &id])["pre_claim_invalid"].is_string());
    until_idle(&k);
    assert_eq!(k.status(&id), "todo");
    let waits = policy_waits(&k, &id);
    assert_eq!(
        waits[0]["payload"]["reason"],
        "pre_claim_invalid_configuration"
    );
    // A file that is not JSON at all is not "no policy" either.
    std::fs::write(&meta, "{oops").unwrap();
    let second = k.create("second", &["--assignee", "done"]);
    until_idle(&k);
    assert_eq!(k.status(&second), "todo");
    // Clearing the policy lets both run.
    std::fs::write(&meta, "{}").unwrap();
    until_idle(&k);
    assert_eq!(k.status(&id), "done");
    assert_eq!(k.status(&second), "done");
}

#[test]
fn set_policy_refuses_a_bad_policy_and_changes_nothing() {
    let k = home("");
    let meta = k.home().join("kanban/boards/default/board.json");
    let bad: [&[&str]; 5] = [
        &["--pre-claim-command", "relative"],
        &["--timeout", "0.5", "--pre-claim-command", "/bin/true"],
        &["--timeout", "61", "--pre-claim-command", "/bin/true"],
        &["--pre-claim-command", "/bin/true", ""],
        &[],
    ];
    for extra in bad {
        let mut args = vec!["boards", "set-policy", "default"];
        args.extend_from_slice(extra);
        let run = k.run(&args);
        assert_ne!(run.code, 0, "{extra:?}: {run:?}");
        assert!(!run.stderr.trim().is_empty(), "{extra:?}");
        assert!(!meta.exists(), "{extra:?} wrote the settings");
    }
    let run = k.run(&[
        "boards",
        "set-policy",
        "nosuch",
        "--pre-claim-command",
        "/bin/true",
    ]);
    assert_ne!(run.code, 0, "{run:?}");
    k.ok(&[
        "boards",
        "set-policy",
        "default",
        "--pre-claim-command",
        "/bin/true",
        "-x",
    ]);
    let set: Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    assert_eq!(
        set["pre_claim"]["command"],
        serde_json::json!(["/bin/true", "-x"])
    );
    assert_eq!(set["pre_claim"]["timeout_seconds"], 10.0);
    k.ok(&["boards", "set-policy", "default", "--clear"]);
    let cleared: Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    assert!(cleared.get("pre_claim").is_none());
}

#[test]
fn the_policy_gates_claims_on_a_postgres_board() {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().expect("a PostgreSQL test server");
    let url = cluster.url(&cluster.fresh_database("pre_claim").expect("a database"));
    let dir = tempfile::tempdir().unwrap();
    let k = home(&format!("\n[boards.default]\nurl = \"{url}\"\n"));
    let deny = script(
        dir.path(),
        "deny",
        r#"echo '{"allow": false, "reason": "pg says no"}'"#,
    );
    set_policy(&k, "default", "5", &deny);
    let id = k.create("gated", &["--assignee", "done"]);
    until_idle(&k);
    assert_eq!(k.status(&id), "todo");
    assert_eq!(policy_waits(&k, &id)[0]["payload"]["reason"], "pg says no");
    let allow = script(
        dir.path(),
        "allow",
        r#"echo '{"allow": true, "reason": ""}'"#,
    );
    set_policy(&k, "default", "5", &allow);
    until_idle(&k);
    assert_eq!(k.status(&id), "done");
}
