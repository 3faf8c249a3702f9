//! `tests/hermes_cli/test_kanban_db.py`: the board layer (adoption of older boards, claims and
//! their release, the rate-limit requeue, dependency promotion, corruption and locking), through
//! the `kanban` binary.

use std::time::Duration;

use rusqlite::Connection;

use super::support::{DEAD_PID, Home, alive, now};
use kanban_tests::git;

/// A board in the original's oldest shape: `tasks` without the additive columns, `task_events`
/// without `run_id`, one ready task `legacy`.
fn legacy_board(home: &Home, tasks_columns: &str) {
    let db = home.k.default_db();
    let _ = std::fs::remove_file(&db);
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE tasks ({tasks_columns});
         CREATE TABLE task_events (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL,
             kind TEXT NOT NULL, payload TEXT, created_at INTEGER NOT NULL);
         INSERT INTO tasks (id, title, status, created_at) VALUES ('legacy', 'old board task', 'ready', 1);"
    ))
    .unwrap();
}

const PRE_TENANT_TASKS: &str = "id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT, assignee TEXT,
    status TEXT NOT NULL, priority INTEGER NOT NULL DEFAULT 0, created_by TEXT,
    created_at INTEGER NOT NULL, started_at INTEGER, completed_at INTEGER,
    workspace_kind TEXT NOT NULL DEFAULT 'scratch', workspace_path TEXT, claim_lock TEXT,
    claim_expires INTEGER";

fn columns(home: &Home, table: &str) -> Vec<String> {
    let conn = Connection::open(home.k.default_db()).unwrap();
    let mut stmt = conn
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap()
}

fn indexes(home: &Home) -> Vec<String> {
    let conn = Connection::open(home.k.default_db()).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index'")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap()
}

#[test]
fn connect_migrates_legacy_db_before_optional_column_indexes() {
    let home = Home::new();
    legacy_board(&home, PRE_TENANT_TASKS);
    let list = home.json(&["list"]);
    assert_eq!(list[0]["id"], "legacy", "{list}");
    let tasks = columns(&home, "tasks");
    for col in ["tenant", "idempotency_key"] {
        assert!(tasks.iter().any(|c| c == col), "{col} not added: {tasks:?}");
    }
    let events = columns(&home, "task_events");
    assert!(events.iter().any(|c| c == "run_id"), "{events:?}");
    // Differences table, "Adopting an older board": only what kanban reads is added — no
    // `session_id`, and of the indexes on additive columns those kanban's queries use.
    assert!(!tasks.iter().any(|c| c == "session_id"), "{tasks:?}");
    let idx = indexes(&home);
    for name in ["idx_tasks_tenant", "idx_tasks_idempotency"] {
        assert!(idx.iter().any(|i| i == name), "{name} missing: {idx:?}");
    }
    home.k.assert_fsck_clean();
}

#[test]
fn stale_claim_reclaim_event_records_diagnostic_payload() {
    let home = Home::new();
    let t = home.create("x", &["--assignee", "a"]);
    home.claim_as(&t, "worker");
    home.set_worker_pid(&t, DEAD_PID);
    let old_expires = now() - 3600;
    let hb_at = now() - 1800;
    home.sql(&format!(
        "UPDATE tasks SET claim_expires = {old_expires}, last_heartbeat_at = {hb_at} WHERE id = '{t}'"
    ));
    home.tick();
    let payload = home.event(&t, "reclaimed")["payload"].clone();
    assert_eq!(payload["claim_expires"], old_expires, "{payload}");
    assert_eq!(payload["last_heartbeat_at"], hb_at, "{payload}");
    assert_eq!(payload["worker_pid"], DEAD_PID, "{payload}");
    assert_eq!(payload["host_local"], true, "{payload}");
}

#[test]
fn rate_limit_exit_requeues_without_counting_failure() {
    let home = Home::new();
    let tid = home.create("rl", &["--assignee", "a"]);
    // Far more quota walls than the failure limit (2): none may count.
    for i in 0..6 {
        home.claim_as(&tid, &format!("w{i}"));
        home.set_worker_pid(&tid, DEAD_PID);
        home.sql(&format!(
            "UPDATE tasks SET consecutive_failures = 0 WHERE id = '{tid}'"
        ));
        home.record_exit(&tid, 75);
        let report = home.tick_report();
        assert!(
            report["exited"].to_string().contains(&tid),
            "hit {i}: {report}"
        );
        let task = home.task(&tid);
        assert_eq!(task["status"], "ready", "hit {i}: {task}");
        assert_eq!(task["consecutive_failures"], 0, "hit {i}: {task}");
    }
    let task = home.task(&tid);
    assert!(
        task["last_failure_error"]
            .as_str()
            .unwrap_or("")
            .contains("rate-limited"),
        "{task}"
    );
    let outcomes = home.outcomes(&tid);
    assert!(outcomes.iter().any(|o| o == "rate_limited"), "{outcomes:?}");
    assert!(!outcomes.iter().any(|o| o == "crashed"), "{outcomes:?}");
}

/// A run of `tid` that ended rate-limited `ago` seconds ago, the task back in `ready`.
fn rate_limited_run_ended(home: &Home, tid: &str, ago: i64) {
    let run = home.claim_as(tid, "w");
    let ended = now() - ago;
    home.sql(&format!(
        "UPDATE task_runs SET outcome = 'rate_limited', status = 'rate_limited', ended_at = {ended}
          WHERE id = {run};
         UPDATE tasks SET status = 'ready', current_run_id = NULL, claim_lock = NULL,
          claim_expires = NULL, worker_pid = NULL,
          last_failure_error = 'pid 1 exited rate-limited (quota wall) — requeued' WHERE id = '{tid}';"
    ));
}

#[test]
fn respawn_guard_defers_rate_limited_within_cooldown() {
    let home = Home::with("rate_limit_cooldown_seconds = 300");
    let inside = home.create("rl-guard", &["--assignee", "done"]);
    rate_limited_run_ended(&home, &inside, 100);
    let report = home.json(&["dispatch", "--dry-run"]);
    let guarded = report["respawn_guarded"].to_string();
    assert!(
        guarded.contains(&inside) && guarded.contains("rate_limit_cooldown"),
        "{report}"
    );
    assert!(report["spawned"].as_array().unwrap().is_empty(), "{report}");

    // Past the cooldown the probe is allowed, not trapped by the quota-wall wording.
    let past = Home::with("rate_limit_cooldown_seconds = 300");
    let after = past.create("rl-guard", &["--assignee", "done"]);
    rate_limited_run_ended(&past, &after, 400);
    let report = past.json(&["dispatch", "--dry-run"]);
    assert!(report["spawned"].to_string().contains(&after), "{report}");
}

#[test]
fn recompute_ready_honours_dispatcher_failure_limit() {
    // Differences table, "A blocked task stays blocked": kanban's promotion moves only `todo`
    // tasks, whatever the failure limit; a blocked task leaves only by `unblock` or `promote`.
    let home = Home::with("failure_limit = 4");
    let t = home.create("lenient", &["--assignee", "a"]);
    home.sql(&format!(
        "UPDATE tasks SET status = 'blocked', consecutive_failures = 2 WHERE id = '{t}'"
    ));
    home.tick();
    assert_eq!(home.status(&t), "blocked");
    home.ok(&["unblock", &t]);
    let task = home.task(&t);
    assert_eq!(task["status"], "ready");
}

#[test]
fn unlink_tasks_triggers_recompute_ready() {
    let home = Home::new();
    let a = home.create("parent-done", &[]);
    home.ok(&["complete", &a, "--summary", "done"]);
    let c = home.create("parent-running", &[]);
    home.json(&["claim", &c, "--claimer", "worker:1"]);
    let b = home.create("child", &["--parent", &a, "--parent", &c]);
    assert_eq!(home.status(&b), "todo");
    home.ok(&["unlink", &c, &b]);
    assert_eq!(home.status(&b), "ready");
}

#[test]
fn add_column_if_missing_is_idempotent_on_race() {
    // The race the original's guard is for: two processes migrate one older board at once.
    let home = Home::new();
    legacy_board(&home, PRE_TENANT_TASKS);
    let children: Vec<_> = (0..4)
        .map(|_| {
            home.k
                .cmd()
                .args(["--json", "list"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = super::support::wait(child, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("legacy"));
    }
    home.k.assert_fsck_clean();
}

#[test]
fn migrate_add_optional_columns_tolerates_concurrent_migration() {
    let home = Home::new();
    legacy_board(&home, PRE_TENANT_TASKS);
    home.ok(&["list"]);
    let before = columns(&home, "tasks");
    // An already-adopted board opens again without a change.
    home.ok(&["list"]);
    assert_eq!(columns(&home, "tasks"), before);
}

#[test]
fn resolve_hermes_argv_falls_back_to_module_form_when_no_path_shim() {
    // The dispatcher starts its workers without relying on `kanban` being on PATH.
    let home = Home::new();
    let t = home.create("x", &["--assignee", "done"]);
    let out = home
        .k
        .cmd()
        .env("PATH", "/usr/bin:/bin")
        .args(["dispatch", "--until-idle"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(home.status(&t), "done");
}

#[test]
fn resolve_hermes_argv_module_actually_runs() {
    let home = Home::new();
    let out = home.ok(&["--version"]);
    assert!(out.starts_with("kanban "), "{out}");
}

#[test]
fn dispatch_max_in_progress_blocks_review_when_at_limit() {
    let home = Home::with("max_in_progress = 1");
    let running = home.create("running", &["--assignee", "done"]);
    home.claim_as(&running, "worker");
    let review = home.create("review", &["--assignee", "done"]);
    home.sql(&format!(
        "UPDATE tasks SET status = 'review' WHERE id = '{review}'"
    ));
    let report = home.tick_report();
    assert!(report["spawned"].as_array().unwrap().is_empty(), "{report}");
    assert_eq!(home.status(&review), "review");
}

/// A file with a valid SQLite header and garbage pages (the original's `_write_corrupt_db`).
fn write_corrupt_db(path: &std::path::Path) -> Vec<u8> {
    let mut blob = b"SQLite format 3\x00\x10\x00\x02\x02\x00\x40\x20\x20".to_vec();
    blob.extend_from_slice(b"\x00\x00\x00\x0c\x00\x00\x23\x46\x00\x00\x00\x00");
    blob.resize(100, 0);
    for _ in 0..64 {
        blob.extend_from_slice(b"definitely not a valid sqlite page \x00\x01\x02\x03");
    }
    std::fs::write(path, &blob).unwrap();
    blob
}

fn files(dir: &std::path::Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

#[test]
fn repeated_corrupt_open_reuses_single_backup() {
    // Differences table, "A corrupt board": kanban refuses it and writes nothing (no backup
    // copies at all), so repeated opens cannot fill the disk.
    let home = Home::new();
    let db = home.k.default_db();
    let _ = std::fs::remove_file(db.with_extension("db-wal"));
    let _ = std::fs::remove_file(db.with_extension("db-shm"));
    let original = write_corrupt_db(&db);
    let before = files(home.k.home());
    for _ in 0..10 {
        let run = home.run(&["list"]);
        assert_eq!(run.code, 1, "{run:?}");
        assert!(!run.stderr.is_empty());
    }
    assert_eq!(std::fs::read(&db).unwrap(), original);
    assert_eq!(files(home.k.home()), before);
}

#[test]
fn locked_healthy_db_does_not_classify_as_corrupt() {
    let home = Home::new();
    let holder = Connection::open(home.k.default_db()).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let run = home
        .k
        .cmd()
        .env("HERMES_KANBAN_BUSY_TIMEOUT_MS", "100")
        .args(["create", "blocked by a lock"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.to_lowercase().contains("corrupt"), "{stderr}");
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert!(
        !files(home.k.home()).iter().any(|f| f.contains("corrupt")),
        "{:?}",
        files(home.k.home())
    );
    let t = home.create("still here", &[]);
    let list = home.json(&["list"]);
    assert_eq!(list[0]["id"], t.as_str());
}

#[test]
fn write_txn_check_reads_correct_header_fields() {
    // A truncated board is never reported healthy.
    let home = Home::new();
    for i in 0..40 {
        home.create(&format!("filler {i} {}", "x".repeat(200)), &[]);
    }
    let db = home.k.default_db();
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let data = std::fs::read(&db).unwrap();
    let page_size = usize::from(u16::from_be_bytes([data[16], data[17]]));
    let pages = u32::from_be_bytes([data[28], data[29], data[30], data[31]]) as usize;
    assert!(pages >= 2, "board too small to truncate");
    std::fs::write(&db, &data[..(pages - 1) * page_size]).unwrap();
    let fsck = home.run(&["fsck"]);
    assert_ne!(fsck.code, 0, "a truncated board passed fsck: {fsck:?}");
}

#[test]
fn archive_running_task_terminates_worker() {
    // Differences table, "Archive and reclaim do not signal": `kanban archive` records the
    // worker's pid; the dispatcher that started it stops it.
    let home = Home::with("max_spawn = 1");
    let t = home.create("x", &["--assignee", "sh", "--body", "sleep 600"]);
    let _daemon = home.daemon();
    home.wait_for("the worker to register", Duration::from_secs(30), |h| {
        h.kinds(&t).iter().any(|k| k == "worker_registered")
    });
    let pid = home.task(&t)["worker_pid"].as_i64().unwrap();
    let archived = home.json(&["archive", &t]);
    assert_eq!(home.status(&t), "archived", "{archived}");
    home.wait_for("the worker to be stopped", Duration::from_secs(30), |_| {
        !alive(pid)
    });
    assert_eq!(home.outcomes(&t), ["reclaimed"]);
}

#[test]
fn archive_non_running_task_does_not_attempt_termination() {
    let home = Home::new();
    let t = home.create("x", &["--assignee", "a"]);
    home.ok(&["archive", &t]);
    assert_eq!(home.status(&t), "archived");
    let payload = home.event(&t, "archived")["payload"].clone();
    assert!(payload.get("termination_attempted").is_none(), "{payload}");
    assert!(home.runs(&t).is_empty());
}

#[test]
fn profile_worker_resolves_to_shared_root() {
    // Differences table, "Profiles have no home of their own": a worker finds its board
    // through HERMES_KANBAN_DB, whatever HERMES_HOME it runs under.
    let home = Home::new();
    let t = home.create("cross-profile", &[]);
    let profile_home = home.k.home().join("profiles").join("nehemiahkanban");
    std::fs::create_dir_all(&profile_home).unwrap();
    let out = std::process::Command::new(home.k.bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HERMES_HOME", &profile_home)
        .env("HERMES_KANBAN_DB", home.k.default_db())
        .args(["--json", "show", &t])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("cross-profile"));
}

#[test]
fn dispatcher_and_worker_share_a_real_database() {
    let home = Home::new();
    let t = home.create("cross-profile", &[]);
    let out = std::process::Command::new(home.k.bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HERMES_HOME", home.k.home())
        .args(["--json", "show", &t])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["task"]["title"], "cross-profile");
}

#[test]
fn dispatcher_spawn_injects_kanban_paths_without_stale_session() {
    let home = Home::new();
    let t = home.create(
        "x",
        &[
            "--assignee",
            "sh",
            "--body",
            "env > \"$HERMES_KANBAN_WORKSPACES_ROOT/../env.txt\"",
        ],
    );
    let out = home
        .k
        .cmd()
        .env("HERMES_SESSION_CHAT_ID", "stale-routing-value")
        .env("HERMES_SESSION_SOURCE", "stale-routing-value")
        .args(["dispatch", "--until-idle"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(home.status(&t), "done");
    // Written beside the workspaces folder: the scratch workspace itself is removed once done.
    let env = std::fs::read_to_string(home.k.home().join("kanban/env.txt")).unwrap();
    let var = |key: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
    };
    assert_eq!(
        var("HERMES_KANBAN_DB").as_deref(),
        Some(home.k.default_db().to_str().unwrap())
    );
    assert_eq!(
        var("HERMES_KANBAN_WORKSPACES_ROOT").as_deref(),
        Some(
            home.k
                .home()
                .join("kanban")
                .join("workspaces")
                .to_str()
                .unwrap()
        )
    );
    assert_eq!(var("HERMES_KANBAN_TASK").as_deref(), Some(t.as_str()));
    assert_eq!(var("HERMES_SESSION_SOURCE").as_deref(), Some("kanban"));
    assert_eq!(var("HERMES_SESSION_CHAT_ID"), None, "{env}");
}

// ---------------------------------------------------------------------------
// Workspaces (issue 26)
// ---------------------------------------------------------------------------

/// The original's `_init_git_repo`: a repository with one commit.
fn init_git_repo(repo: &std::path::Path) {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q"]);
    git(repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
}

#[test]
fn worktree_workspace_explicit_target_materializes_linked_worktree() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    init_git_repo(&repo);
    let target = repo.join(".worktrees").join("custom-task");
    let t = home.create(
        "ship",
        &[
            "--assignee",
            "sh",
            "--body",
            "true",
            "--workspace",
            &format!("worktree:{}", target.display()),
            "--branch",
            "wt/custom-task",
        ],
    );
    assert_eq!(home.until_idle().code, 0);
    assert_eq!(home.task(&t)["workspace_path"], target.to_str().unwrap());
    assert!(target.exists());
    let common = |dir: &std::path::Path| {
        git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
    };
    assert_eq!(common(&target), common(&repo));
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(
        listed.contains(&format!("worktree {}", target.display())),
        "{listed}"
    );
    assert!(
        listed.contains("branch refs/heads/wt/custom-task"),
        "{listed}"
    );
}

#[test]
fn dir_child_completion_unblocks_deferred_scratch_parent() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let child_dir = tmp.path().join("persistent-child");
    std::fs::create_dir(&child_dir).unwrap();
    let parent = home.create(
        "scratch parent",
        &["--assignee", "sh", "--body", "echo handoff > out"],
    );
    let child = home.create(
        "dir child",
        &[
            "--workspace",
            &format!("dir:{}", child_dir.display()),
            "--parent",
            &parent,
            "--blocked",
        ],
    );
    assert_eq!(home.until_idle().code, 0);
    let parent_ws = home.workspace(&parent);
    assert_eq!(home.status(&parent), "done");
    assert!(parent_ws.exists(), "deferred while the dir child is open");
    home.ok(&["complete", &child, "--result", "built"]);
    assert!(
        !parent_ws.exists(),
        "a dir child's completion sweeps its scratch parent"
    );
    assert!(child_dir.exists(), "a dir workspace is never deleted");
}

#[test]
fn is_managed_scratch_path_rejects_kanban_metadata_subtrees() {
    // A scratch task whose `workspace_path` was mis-set to the kanban folder, its logs, a board's
    // folder or the workspaces folder itself: completing it removes none of them.
    let home = Home::new();
    let kanban = home.k.home().join("kanban");
    let board_root = kanban.join("boards").join("my-board");
    let places = [
        kanban.clone(),
        kanban.join("logs"),
        board_root.clone(),
        board_root.join("logs"),
        kanban.join("workspaces"),
    ];
    for place in &places {
        std::fs::create_dir_all(place).unwrap();
        std::fs::write(place.join("keep"), "x").unwrap();
        let t = home.create("misplaced", &[]);
        home.sql(&format!(
            "UPDATE tasks SET workspace_path = '{}' WHERE id = '{t}'",
            place.display()
        ));
        home.ok(&["complete", &t, "--result", "done"]);
        assert!(
            place.join("keep").exists(),
            "{} was removed",
            place.display()
        );
    }
    // The only thing the guard allows: a task's own folder under the workspaces folder.
    let t = home.create("managed", &[]);
    let own = kanban.join("workspaces").join(&t);
    std::fs::create_dir_all(&own).unwrap();
    home.sql(&format!(
        "UPDATE tasks SET workspace_path = '{}' WHERE id = '{t}'",
        own.display()
    ));
    home.ok(&["complete", &t, "--result", "done"]);
    assert!(!own.exists());
}

#[test]
fn resolve_workspace_rejects_relative_dir_path() {
    let home = Home::new();
    let run = home.run(&["create", "x", "--workspace", "dir:relative/path"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("relative"), "{}", run.stderr);
    // A row written with a relative path (by another writer) is refused at spawn, not run in the
    // dispatcher's working directory.
    let t = home.create("y", &["--assignee", "sh", "--body", "true"]);
    home.sql(&format!(
        "UPDATE tasks SET workspace_kind = 'dir', workspace_path = 'relative/path' WHERE id = '{t}'"
    ));
    assert_eq!(home.until_idle().code, 0);
    assert_eq!(home.status(&t), "blocked");
    assert!(
        home.task(&t)["last_failure_error"]
            .as_str()
            .unwrap()
            .contains("relative/path"),
        "{}",
        home.task(&t)
    );
}

#[test]
fn resolve_workspace_accepts_absolute_dir_path() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("ws");
    let t = home.create(
        "x",
        &[
            "--assignee",
            "sh",
            "--body",
            "pwd > where",
            "--workspace",
            &format!("dir:{}", target.display()),
        ],
    );
    assert_eq!(home.until_idle().code, 0);
    assert!(target.is_dir(), "created when missing");
    assert_eq!(home.task(&t)["workspace_path"], target.to_str().unwrap());
    assert!(target.join("where").exists());
}

#[test]
fn resolve_workspace_rejects_relative_worktree_path() {
    let home = Home::new();
    let run = home.run(&["create", "x", "--workspace", "worktree:rel/wt"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("relative"), "{}", run.stderr);
    assert_eq!(home.json(&["list"]), serde_json::json!([]));
}

#[test]
fn parse_workspace_flag_valid() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let abs = tmp.path().join("p");
    for (flag, kind, path) in [
        ("scratch".to_owned(), "scratch", None),
        ("worktree".to_owned(), "worktree", None),
        (
            format!("worktree:{}", abs.display()),
            "worktree",
            Some(abs.clone()),
        ),
        (format!("dir:{}", abs.display()), "dir", Some(abs.clone())),
    ] {
        let t = home.create("x", &["--workspace", &flag]);
        let task = home.task(&t);
        assert_eq!(task["workspace_kind"], kind, "{flag}");
        assert_eq!(
            task["workspace_path"]
                .as_str()
                .map(std::path::PathBuf::from),
            path,
            "{flag}"
        );
    }
}

#[test]
fn parse_workspace_flag_expands_user() {
    // Differs (docs/interchangeability.md, "`~` in a workspace path"): refused, naming it, not
    // expanded.
    let home = Home::new();
    let run = home.run(&["create", "x", "--workspace", "dir:~/projects/x"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("`~` is not expanded"), "{}", run.stderr);
}

#[test]
fn parse_workspace_flag_rejects() {
    let home = Home::new();
    for flag in ["bogus", "dir", "dir:", "cloud:/x"] {
        let run = home.run(&["create", "x", "--workspace", flag]);
        assert_eq!(run.code, 1, "{flag}: {}", run.stderr);
    }
    assert_eq!(home.json(&["list"]), serde_json::json!([]));
}

// ---------------------------------------------------------------------------
// Retention: kanban gc (issue 26)
// ---------------------------------------------------------------------------

#[test]
fn gc_events_keeps_active_task_history() {
    let home = Home::new();
    let done = home.create("finished", &[]);
    home.ok(&["complete", &done, "--result", "r"]);
    let active = home.create("still open", &[]);
    let old = now() - 40 * 24 * 3600;
    home.sql(&format!("UPDATE task_events SET created_at = {old}"));
    let out = home.ok(&["gc"]);
    assert!(out.contains("pruned"), "{out}");
    assert!(home.kinds(&done).is_empty(), "{:?}", home.kinds(&done));
    assert_eq!(
        home.kinds(&active),
        ["created"],
        "an open task keeps its history"
    );
}

#[test]
fn gc_worker_logs_deletes_old_files() {
    let home = Home::new();
    let t = home.create("ran", &["--assignee", "sh", "--body", "echo hi"]);
    assert_eq!(home.until_idle().code, 0);
    let log = home.k.home().join("kanban/logs").join(format!("{t}.log"));
    assert!(log.is_file());
    let fresh = home.ok(&["gc"]);
    assert!(log.is_file(), "a fresh log is kept: {fresh}");
    let old = std::time::SystemTime::now() - Duration::from_secs(40 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&log)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let out = home.ok(&["gc"]);
    assert!(out.contains("removed worker log"), "{out}");
    assert!(!log.exists());
}

#[test]
fn cli_gc_reports_counts() {
    let home = Home::new();
    let t = home.create("finished", &[]);
    home.ok(&["complete", &t, "--result", "r"]);
    home.sql(&format!(
        "UPDATE task_events SET created_at = {}",
        now() - 40 * 24 * 3600
    ));
    let dry = home.json(&["gc", "--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["events_pruned"], 2, "{dry}");
    assert_eq!(home.kinds(&t).len(), 2, "a dry run changes nothing");
    let report = home.json(&["gc"]);
    assert_eq!(report["events_pruned"], 2, "{report}");
    assert_eq!(report["dry_run"], false);
}

// Stats + age: `board_stats` is `kanban stats --json`. `test_task_age_helper` tests a Python
// helper of the dashboard with no command of its own (the age a card shows is `kanban serve`'s).

#[test]
fn board_stats() {
    let home = Home::new();
    let a = home.create("a", &["--assignee", "x"]);
    home.create("b", &["--assignee", "y"]);
    home.ok(&["complete", &a, "--result", "done"]);
    let stats = home.json(&["stats"]);
    assert_eq!(stats["by_status"]["ready"], 1);
    assert_eq!(stats["by_status"]["done"], 1);
    assert_eq!(stats["by_assignee"]["x"]["done"], 1);
    assert_eq!(stats["by_assignee"]["y"]["ready"], 1);
    assert!(!stats["oldest_ready_age_seconds"].is_null(), "{stats}");
}

#[test]
fn schedule_task_parks_time_delay_without_dispatching() {
    let home = Home::new();
    let t = home.create("delayed recheck", &["--assignee", "ops"]);
    // The original's `schedule_task` takes no time; kanban's verb always names one (a week).
    home.ok(&["schedule", &t, "--in", "7d", "--reason", "run next week"]);
    assert_eq!(home.status(&t), "scheduled");
    let claim = home.run(&["claim", &t]);
    assert_eq!(claim.code, 3, "{}", claim.stderr);
    let payload = home.event(&t, "scheduled")["payload"].clone();
    // Differences table, "scheduled": kanban adds the due time `at` next to the reason.
    assert_eq!(payload["reason"], "run next week", "{payload}");
    assert!(
        payload["at"].as_i64().unwrap() >= now() + 7 * 86_400 - 5,
        "{payload}"
    );
}

#[test]
fn unblock_scheduled_rechecks_parent_gate() {
    let home = Home::new();
    let parent = home.create("parent", &[]);
    let child = home.create("child", &["--parent", &parent]);
    assert_eq!(home.status(&child), "todo");
    home.ok(&[
        "schedule",
        &child,
        "--in",
        "1d",
        "--reason",
        "wait until tomorrow",
    ]);
    home.ok(&["unblock", &child]);
    assert_eq!(home.status(&child), "todo");

    home.ok(&["complete", &parent, "--summary", "done"]);
    home.ok(&["schedule", &child, "--in", "1d", "--reason", "second timer"]);
    home.ok(&["unblock", &child]);
    assert_eq!(home.status(&child), "ready");
}

// Scratch artifacts. The original's worker declares them in `metadata.artifacts` (library
// call); kanban's declares them with `complete --artifact PATH` (differences table). Each body
// runs in the task's scratch workspace under the `sh` profile; the worker's `kanban` is given
// the home (a worker's agent finds the home only through the environment: README "Not built
// yet", and this harness's environment is cleared).

fn attachment_list(home: &Home, id: &str) -> Vec<serde_json::Value> {
    home.json(&["attachments", id]).as_array().unwrap().clone()
}

#[test]
fn complete_task_persists_scratch_artifacts_before_cleanup() {
    let home = Home::new();
    let kanban = format!(
        "{}' --home '{}",
        env!("CARGO_BIN_EXE_kanban"),
        home.k.home().display()
    );
    let body = format!(
        "printf png-bytes > chart.png && '{kanban}' complete --result ok --artifact chart.png"
    );
    let t = home.create("render chart", &["--assignee", "sh", "--body", &body]);
    assert_eq!(home.until_idle().code, 0);
    assert_eq!(home.status(&t), "done");
    let ws = home.workspace(&t);
    assert!(!ws.exists(), "scratch workspace should still be cleaned up");
    let list = attachment_list(&home, &t);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["filename"], "chart.png");
    let persisted = std::path::PathBuf::from(list[0]["stored_path"].as_str().unwrap());
    assert_eq!(std::fs::read(&persisted).unwrap(), b"png-bytes");
    assert_ne!(persisted, ws.join("chart.png"));
    assert_eq!(persisted.parent().unwrap().file_name().unwrap(), t.as_str());
}

#[test]
fn complete_task_rejects_missing_declared_scratch_artifact() {
    let home = Home::new();
    let kanban = format!(
        "{}' --home '{}",
        env!("CARGO_BIN_EXE_kanban"),
        home.k.home().display()
    );
    // The refused completion leaves the task running: the body then blocks it, so the test can
    // see that the workspace was kept for a retry.
    let body = format!(
        "! '{kanban}' complete --result 'report complete' --artifact report.md && \
         '{kanban}' block --reason 'no report'"
    );
    let t = home.create("missing report", &["--assignee", "sh", "--body", &body]);
    assert_eq!(home.until_idle().code, 0);
    assert_eq!(home.status(&t), "blocked");
    // Blocked by the body after the refusal, not by crashes.
    assert_eq!(home.event(&t, "blocked")["payload"]["reason"], "no report");
    assert!(!home.kinds(&t).iter().any(|k| k == "completed"));
    assert!(attachment_list(&home, &t).is_empty());
    assert!(
        home.workspace(&t).exists(),
        "a failed completion keeps the scratch workspace"
    );
}

#[test]
fn complete_task_preserves_legacy_artifact_path_from_summary() {
    let home = Home::new();
    let kanban = format!(
        "{}' --home '{}",
        env!("CARGO_BIN_EXE_kanban"),
        home.k.home().display()
    );
    let body = format!(
        "printf 'legacy deliverable' > report.md && \
         '{kanban}' complete --summary \"Task complete — delivered $PWD/report.md\""
    );
    let t = home.create("legacy report", &["--assignee", "sh", "--body", &body]);
    assert_eq!(home.until_idle().code, 0);
    assert_eq!(home.status(&t), "done");
    assert!(!home.workspace(&t).exists());
    let list = attachment_list(&home, &t);
    assert_eq!(list.len(), 1, "{list:?}");
    let persisted = std::path::PathBuf::from(list[0]["stored_path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(persisted).unwrap(),
        "legacy deliverable"
    );
}

#[test]
fn complete_task_persists_duplicate_scratch_artifact_names() {
    let home = Home::new();
    let kanban = format!(
        "{}' --home '{}",
        env!("CARGO_BIN_EXE_kanban"),
        home.k.home().display()
    );
    let body = format!(
        "mkdir a b && printf first > a/report.txt && printf second > b/report.txt && \
         '{kanban}' complete --result ok --artifact a/report.txt --artifact b/report.txt"
    );
    let t = home.create("render reports", &["--assignee", "sh", "--body", &body]);
    assert_eq!(home.until_idle().code, 0);
    assert_eq!(home.status(&t), "done");
    assert!(!home.workspace(&t).exists());
    let list = attachment_list(&home, &t);
    let names: Vec<&str> = list
        .iter()
        .map(|a| a["filename"].as_str().unwrap())
        .collect();
    // Differences table: a second `report.txt` is stored as `report (1).txt` (kanban's
    // attachment naming), not `report_1.txt`.
    assert_eq!(names, ["report.txt", "report (1).txt"], "{list:?}");
    let contents: Vec<String> = list
        .iter()
        .map(|a| std::fs::read_to_string(a["stored_path"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(contents, ["first", "second"]);
}

/// The rows of every table that names task `id`.
fn rows_naming(home: &Home, id: &str) -> i64 {
    [
        "SELECT COUNT(*) FROM tasks WHERE id = '{id}'",
        "SELECT COUNT(*) FROM task_links WHERE child_id = '{id}' OR parent_id = '{id}'",
        "SELECT COUNT(*) FROM task_comments WHERE task_id = '{id}'",
        "SELECT COUNT(*) FROM task_events WHERE task_id = '{id}'",
        "SELECT COUNT(*) FROM task_runs WHERE task_id = '{id}'",
        "SELECT COUNT(*) FROM task_attachments WHERE task_id = '{id}'",
    ]
    .iter()
    .map(|sql| home.count(&sql.replace("{id}", id)))
    .sum()
}

#[test]
fn delete_archived_task_removes_related_rows() {
    // `kanban archive --rm` is the original's archive then `delete_archived_task`; the original's
    // notify subscriptions are not built (kanban has no chat gateway).
    let home = Home::new();
    let parent = home.create("parent", &[]);
    let tid = home.create("child", &["--parent", &parent, "--assignee", "worker"]);
    home.ok(&["comment", &tid, "--body", "cleanup me"]);
    home.ok(&["complete", &parent, "--summary", "p", "--force"]);
    home.ok(&["claim", &tid]);
    home.ok(&["complete", &tid, "--result", "done", "--force"]);
    home.ok(&["archive", &tid]);
    assert!(rows_naming(&home, &tid) > 0);
    home.ok(&["archive", "--rm", &tid]);
    assert_eq!(home.run(&["show", &tid]).code, 1);
    assert_eq!(rows_naming(&home, &tid), 0);
    assert_eq!(home.status(&parent), "done");
}

#[test]
fn delete_task_removes_task_and_cascades() {
    let home = Home::new();
    let t = home.create("to-delete", &["--assignee", "alice"]);
    home.ok(&["comment", &t, "--body", "comment"]);
    home.ok(&["comment", &t, "--body", "another"]);
    let deleted = home.json(&["delete", &t]);
    assert_eq!(deleted["comments"], 2, "{deleted}");
    assert_eq!(home.run(&["show", &t]).code, 1);
    assert_eq!(rows_naming(&home, &t), 0);
}

#[test]
fn delete_task_returns_false_for_missing_task() {
    // The original returns False; kanban's command says so and exits 1.
    let home = Home::new();
    let run = home.run(&["delete", "t_00000000"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("t_00000000"), "{}", run.stderr);
}

#[test]
fn delete_task_cascades_links() {
    let home = Home::new();
    let p = home.create("parent", &[]);
    let c = home.create("child", &["--parent", &p]);
    assert_eq!(home.status(&c), "todo");
    home.ok(&["delete", &p]);
    assert_eq!(home.run(&["show", &p]).code, 1);
    // The child lost its only unfinished parent: it is ready, with no parent left.
    assert_eq!(home.status(&c), "ready");
    assert_eq!(home.json(&["show", &c])["parents"], serde_json::json!([]));
}
