//! A board written by the original Python system (`tests/fixtures/original-board/`, see its
//! README), driven through the real `kanban` binary: every task shows, the list and `fsck` work,
//! the dispatcher runs its ready tasks to completion, and afterwards the board is still the
//! original's — same journal mode, same indexes, same columns plus only the ones kanban reads.

// Test code: a failed setup step should fail the test at once, with the panic message.
#![allow(clippy::unwrap_used)]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code runs git on its own repositories

use std::collections::BTreeMap;
use std::path::Path;

use kanban_tests::{Kanban, git};
use rusqlite::Connection;
use serde_json::Value;

const FIXTURE: &[u8] = include_bytes!("fixtures/original-board/kanban.db");

/// The columns adoption adds to the fixture: the only ones the runtime reads that it lacks.
const ADDED: &[(&str, &str)] = &[
    ("task_runs", "worker_started_at"),
    ("tasks", "worker_started_at"),
    ("tasks", "workspace_base"),
];

/// A temporary home whose default board is a copy of the fixture.
fn home_with_fixture() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    std::fs::write(k.default_db(), FIXTURE).unwrap();
    k
}

/// One `PRAGMA table_info` row: name, declared type, not null, default, primary-key position.
type Column = (String, String, i64, Option<String>, i64);

/// What must not change: the journal mode, every index (name, table, SQL) and every table's
/// columns (`PRAGMA table_info` rows).
#[derive(Debug, Clone, PartialEq)]
struct Schema {
    journal_mode: String,
    application_id: i64,
    indexes: Vec<(String, String, Option<String>)>,
    columns: BTreeMap<String, Vec<Column>>,
}

fn schema(db: &Path) -> Schema {
    let conn = Connection::open(db).unwrap();
    let journal_mode = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    let application_id = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    let indexes = conn
        .prepare("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let mut columns = BTreeMap::new();
    for table in tables {
        let cols = conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
            })
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap();
        columns.insert(table, cols);
    }
    Schema {
        journal_mode,
        application_id,
        indexes,
        columns,
    }
}

/// `after` is `before` with exactly the [`ADDED`] columns appended, and nothing else changed.
fn assert_still_the_originals(before: &Schema, after: &Schema) {
    assert_eq!(after.journal_mode, "delete");
    assert_eq!(after.journal_mode, before.journal_mode);
    assert_eq!(after.application_id, 0, "kanban did not create this board");
    assert_eq!(after.indexes, before.indexes, "the original's indexes");
    assert_eq!(
        after.columns.keys().collect::<Vec<_>>(),
        before.columns.keys().collect::<Vec<_>>(),
        "the same tables"
    );
    let mut added = Vec::new();
    for (table, cols) in &after.columns {
        let old = &before.columns[table];
        assert_eq!(
            &cols[..old.len()],
            &old[..],
            "{table}: the original's columns"
        );
        for extra in &cols[old.len()..] {
            added.push((table.as_str(), extra.0.as_str()));
        }
    }
    added.sort();
    assert_eq!(added, ADDED);
}

fn ids(k: &Kanban) -> Vec<String> {
    let list = k.json(&["list", "--all"]);
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_task_of_the_originals_board_shows_lists_and_checks_and_the_board_stays_its_own() {
    let k = home_with_fixture();
    let pristine = schema(&k.default_db());
    assert_eq!(pristine.journal_mode, "delete");

    let ids = ids(&k);
    assert_eq!(ids.len(), 19, "{ids:?}");
    for id in &ids {
        let shown = k.json(&["show", id]);
        assert_eq!(shown["task"]["id"].as_str(), Some(id.as_str()));
    }
    let parent = k.json(&["show", "t_10aa94eb"]);
    assert_eq!(parent["task"]["status"], "ready");
    assert_eq!(parent["task"]["priority"], 5);
    assert_eq!(parent["task"]["tenant"], "acme");
    assert_eq!(parent["task"]["max_retries"], 3);
    assert_eq!(parent["task"]["skills"], serde_json::json!(["sk1"]));
    assert_eq!(parent["comments"][0]["author"], "alice");
    assert_eq!(parent["children"].as_array().unwrap().len(), 2);
    let done = k.json(&["show", "t_b57adf39"]);
    assert_eq!(done["task"]["status"], "done");
    assert_eq!(done["runs"][0]["outcome"], "completed");
    assert_eq!(done["runs"][0]["summary"], "py-summary");
    let blocked = k.json(&["show", "t_5bff225d"]);
    assert_eq!(blocked["task"]["block_kind"], "needs_input");
    let running = k.json(&["show", "t_af02f11c"]);
    assert_eq!(running["task"]["claim_lock"], "vm:2067");
    assert!(running["runs"][0]["ended_at"].is_null());

    let listed = k.ok(&["list"]);
    assert!(listed.contains("t_10aa94eb"), "{listed}");
    // The one finding is the board's own: a claim whose dispatcher never spawned a worker.
    let fsck = k.run(&["--json", "fsck"]);
    let report: Value = serde_json::from_str(&fsck.stdout).unwrap();
    let rules: Vec<(&str, &str)> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["rule"].as_str().unwrap(), v["task_id"].as_str().unwrap()))
        .collect();
    assert_eq!(rules, [("claim_never_started", "t_af02f11c")], "{report}");

    assert_still_the_originals(&pristine, &schema(&k.default_db()));
    assert!(!k.home().join("kanban.db-wal").exists());
}

#[test]
fn dispatching_the_originals_board_runs_each_ready_task_once_and_keeps_its_journal() {
    let k = home_with_fixture();
    let pristine = schema(&k.default_db());
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\ncrash_grace_seconds = 0\nkill_wait_seconds = 1.0\ninterval_seconds = 0.5\n\n\
         [profiles.worker1]\nagent = \"builtin:complete\"\n\n\
         [profiles.worker2]\nagent = \"builtin:complete\"\n\n\
         [profiles.default]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    // `t_10aa94eb` asks for the skill `sk1`: a task whose skills are all missing is blocked
    // `kanban_skills_unavailable` (issue 28), so the home has it as a file.
    std::fs::create_dir_all(k.home().join("skills")).unwrap();
    std::fs::write(k.home().join("skills").join("sk1.md"), "# sk1\n").unwrap();
    let out = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    // The claim of `to-claim` (no worker, its claimer long gone) is released, then the task
    // runs again: two runs.
    let mut expected_runs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    expected_runs.insert("t_af02f11c", vec!["released", "completed"]);
    expected_runs.insert("t_b57adf39", vec!["completed"]);
    expected_runs.insert("t_5bff225d", vec!["blocked"]);
    expected_runs.insert("t_3680fb5b", vec![]);
    for id in ids(&k) {
        let shown = k.json(&["show", &id]);
        let outcomes: Vec<String> = shown["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| match r["outcome"].as_str().unwrap_or_default() {
                // The TTL reclaim (the original's word) or the release of a claim whose
                // dispatcher died before spawning (kanban's `abandoned`).
                "reclaimed" | "abandoned" => "released".to_owned(),
                other => other.to_owned(),
            })
            .collect();
        let want = expected_runs
            .get(id.as_str())
            .cloned()
            .unwrap_or_else(|| vec!["completed"]);
        assert_eq!(outcomes, want, "{id}");
        let status = shown["task"]["status"].as_str().unwrap().to_owned();
        let want_status = match id.as_str() {
            "t_5bff225d" => "blocked",
            "t_3680fb5b" => "triage",
            _ => "done",
        };
        assert_eq!(status, want_status, "{id}");
        // The default board's workspaces and logs where the original keeps them.
        let dispatched = want_status == "done" && id != "t_b57adf39";
        if dispatched {
            assert!(
                k.home().join(format!("kanban/logs/{id}.log")).is_file(),
                "{id}: log"
            );
            // Recorded where the original keeps it, in its column, and removed once done.
            let scratch = k.home().join(format!("kanban/workspaces/{id}"));
            assert_eq!(
                shown["task"]["workspace_path"].as_str(),
                Some(scratch.to_str().unwrap()),
                "{id}: workspace"
            );
            assert!(
                !scratch.exists(),
                "{id}: a finished scratch workspace is removed"
            );
        }
    }
    assert!(!k.home().join("kanban/logs/default").exists());
    assert!(!k.home().join("kanban/workspaces/default").exists());
    k.assert_fsck_clean();
    assert_still_the_originals(&pristine, &schema(&k.default_db()));
    assert!(!k.home().join("kanban.db-wal").exists());
}

/// Every command, one after the other, on a board in `DELETE` mode: after each, still `DELETE`.
#[test]
fn a_board_in_delete_mode_stays_in_delete_after_every_command() {
    let k = home_with_fixture();
    let db = k.default_db();
    let mode = |after: &str| {
        let conn = Connection::open(&db).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete", "after `kanban {after}`");
        assert!(!k.home().join("kanban.db-wal").exists(), "after {after}");
    };
    let claimed = |v: Value| v["run_id"].as_i64().unwrap();
    let steps: Vec<Vec<&str>> = vec![
        vec!["init"],
        vec!["list"],
        vec!["show", "t_10aa94eb"],
        vec!["events", "t_10aa94eb"],
        vec!["reclaim", "t_af02f11c"],
        vec!["fsck"],
        vec!["boards", "list"],
        vec!["create", "new", "--parent", "t_10aa94eb"],
        vec!["heartbeat", "t_ab122e34"],
        vec!["complete", "t_ab122e34", "--summary", "ok", "--force"],
        vec![
            "block",
            "t_a074486d",
            "--reason",
            "r",
            "--kind",
            "needs_input",
        ],
        vec!["unblock", "t_a074486d"],
        vec!["reclaim", "t_c9e364cd", "--reason", "operator"],
        vec!["assign", "t_c9e364cd", "worker2"],
        vec!["comment", "t_c9e364cd", "--body", "hello"],
        vec!["link", "t_c9e364cd", "t_3680fb5b"],
        vec!["unlink", "t_c9e364cd", "t_3680fb5b"],
        vec!["promote", "t_3680fb5b"],
        vec!["archive", "t_5bff225d"],
        vec!["dispatch", "--dry-run"],
        vec!["dispatch", "--once"],
        vec!["identity"],
    ];
    mode("nothing");
    for step in steps {
        // Claims precede the commands that need a running task.
        match step[..] {
            ["heartbeat", id] | ["reclaim", id, _, _] => {
                assert!(claimed(k.json(&["claim", id, "--claimer", "h:1"])) > 0);
                mode("claim");
            }
            _ => {}
        }
        k.ok(&step);
        mode(&step.join(" "));
    }
    // A board kanban creates runs WAL, next to the original's in DELETE.
    k.ok(&["boards", "create", "other"]);
    mode("boards create other");
    let other = Connection::open(k.home().join("kanban/boards/other/kanban.db")).unwrap();
    let other_mode: String = other
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(other_mode, "wal");
}

/// Runs the original booked as protocol violations (outcome `crashed`, the marker in the
/// metadata) count in kanban's streak; rate-limited runs are skipped, anything else ends it.
#[test]
fn the_originals_protocol_violation_rows_count_in_the_streak() {
    let k = home_with_fixture();
    // Adopt first (kanban adds task_runs.worker_started_at), then write as the original writes.
    k.ok(&["list"]);
    let conn = Connection::open(k.default_db()).unwrap();
    conn.execute_batch(
        "INSERT INTO task_runs (task_id, profile, status, started_at, ended_at, outcome, metadata) VALUES \
           ('t_ab122e34', 'default', 'crashed', 1, 2, 'crashed', '{\"pid\": 7, \"exit_code\": 1}'), \
           ('t_ab122e34', 'default', 'crashed', 3, 4, 'crashed', '{\"pid\": 8, \"exit_code\": 0, \"protocol_violation\": true}'), \
           ('t_ab122e34', 'default', 'rate_limited', 5, 6, 'rate_limited', '{\"pid\": 9, \"exit_code\": 75}'), \
           ('t_ab122e34', 'default', 'crashed', 7, 8, 'crashed', '{\"pid\": 10, \"exit_code\": 0, \"protocol_violation\": true}');",
    )
    .unwrap();
    drop(conn);
    let location = kanban_runtime::home::resolve(k.home(), Some("default")).unwrap();
    let board = kanban_runtime::board::Board::open(
        &location,
        &kanban_runtime::board::OpenOptions::default(),
    )
    .unwrap();
    assert_eq!(board.protocol_violation_streak("t_ab122e34").unwrap(), 2);
    assert_eq!(board.protocol_violation_streak("t_a074486d").unwrap(), 0);
}

/// A new board may not be named like a task id: its workspaces directory would be the default
/// board's workspace of that task (`kanban/workspaces/<id>`, the original's place).
#[test]
fn a_board_named_like_a_task_id_is_refused_and_nothing_is_created() {
    let k = home_with_fixture();
    let run = k.run(&["boards", "create", "t_10aa94eb"]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("shaped like a task id"),
        "{}",
        run.stderr
    );
    assert!(!k.home().join("kanban/boards/t_10aa94eb").exists());
}

#[test]
fn the_originals_worktree_and_dir_tasks_run_where_it_runs_them_and_read_back_in_its_values() {
    let k = home_with_fixture();
    let pristine = schema(&k.default_db());
    let repos = tempfile::tempdir().unwrap();
    let repo = repos.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let dir = repos.path().join("plain dir");
    // The original's own board settings file (board_metadata_path) and task rows as its
    // create_task writes them: a worktree task with no path, one on a named branch, a dir task.
    let meta = k.home().join("kanban/boards/default/board.json");
    std::fs::create_dir_all(meta.parent().unwrap()).unwrap();
    std::fs::write(
        &meta,
        serde_json::json!({"name": "Default", "default_workdir": repo, "created_at": 1})
            .to_string(),
    )
    .unwrap();
    let conn = Connection::open(k.default_db()).unwrap();
    for (id, kind, path, branch) in [
        ("t_aaaa0001", "worktree", None, None),
        ("t_aaaa0002", "worktree", None, Some("feature/named")),
        ("t_aaaa0003", "dir", Some(dir.to_str().unwrap()), None),
    ] {
        conn.execute(
            "INSERT INTO tasks (id, title, body, assignee, status, priority, created_at, \
             workspace_kind, workspace_path, branch_name) \
             VALUES (?1, ?1, 'touch made-here', 'sh', 'ready', 9, 1, ?2, ?3, ?4)",
            rusqlite::params![id, kind, path, branch],
        )
        .unwrap();
    }
    drop(conn);
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\ncrash_grace_seconds = 0\nkill_wait_seconds = 1.0\ninterval_seconds = 0.5\n\n\
         [profiles.sh]\nagent = \"builtin:shell\"\n\n[profiles.worker1]\nagent = \"builtin:complete\"\n\n\
         [profiles.worker2]\nagent = \"builtin:complete\"\n\n[profiles.default]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    let out = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // The original's places and values: <repo>/.worktrees/<id> on wt/<id> (or the named
    // branch), the dir itself; its columns hold them.
    let conn = Connection::open(k.default_db()).unwrap();
    let row = |id: &str| -> (String, String, Option<String>, Option<String>) {
        conn.query_row(
            "SELECT status, workspace_kind, workspace_path, branch_name FROM tasks WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap()
    };
    let canon = repo.canonicalize().unwrap();
    for (id, branch) in [
        ("t_aaaa0001", "wt/t_aaaa0001"),
        ("t_aaaa0002", "feature/named"),
    ] {
        let worktree = canon.join(".worktrees").join(id);
        assert_eq!(
            row(id),
            (
                "done".to_owned(),
                "worktree".to_owned(),
                Some(worktree.to_str().unwrap().to_owned()),
                Some(branch.to_owned())
            )
        );
        // Kept: the agent's file is untracked work.
        assert!(worktree.join("made-here").exists(), "{id}");
        assert_eq!(
            git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
            branch
        );
    }
    assert_eq!(
        row("t_aaaa0003"),
        (
            "done".to_owned(),
            "dir".to_owned(),
            Some(dir.to_str().unwrap().to_owned()),
            None
        )
    );
    assert!(dir.join("made-here").exists(), "the dir is never removed");
    drop(conn);
    assert_still_the_originals(&pristine, &schema(&k.default_db()));
}
