//! The board CLI end to end: the contract shapes, exit codes, worker identity on lifecycle
//! commands, and bad input (each a clear message and nothing changed).

use kanban_tests::Kanban;
use serde_json::Value;

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

/// Every file under the home, with its bytes (to prove "nothing changed").
fn snapshot(k: &Kanban) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if !p.to_string_lossy().ends_with("-shm") {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    let mut out = Vec::new();
    walk(k.home(), &mut out);
    out.sort();
    out
}

fn events(k: &Kanban, id: &str) -> usize {
    k.json(&["events", id]).as_array().map_or(0, Vec::len)
}

#[test]
fn create_list_show_claim_complete_flow() {
    let k = kanban();
    let init = k.json(&["init"]);
    assert_eq!(init["board"], "default");
    let plain = k.ok(&["create", "plain"]);
    assert!(plain.starts_with("t_") && plain.len() == 10, "{plain}");
    let parent = k.create(
        "parent",
        &["--assignee", "Coder", "--priority", "5", "--body", "b"],
    );
    let child = k.create("child", &["--parent", &parent, "--max-runtime", "60"]);
    assert_eq!(k.status(&child), "todo");

    let list = k.json(&["list"]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["id"], parent.as_str(), "highest priority first");
    for key in [
        "id",
        "title",
        "status",
        "assignee",
        "priority",
        "current_run_id",
    ] {
        assert!(list[0].get(key).is_some(), "list entry lacks {key}");
    }
    assert_eq!(list[0]["assignee"], "coder");

    let claim = k.json(&["claim", &parent, "--ttl", "120", "--claimer", "host:42"]);
    let keys: Vec<&String> = claim.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["claim_expires", "claim_lock", "run_id", "task_id"]);
    assert_eq!(claim["task_id"], parent.as_str());
    assert_eq!(claim["claim_lock"], "host:42");
    let again = k.run(&["claim", &parent]);
    assert_eq!(again.code, 3, "lost claim exits 3: {}", again.stderr);

    let live = k.run(&["complete", &parent, "--summary", "done"]);
    assert_eq!(live.code, 3, "live claim refuses: {}", live.stderr);
    assert!(live.stderr.contains("live claim"), "{}", live.stderr);
    let done = k.json(&[
        "complete",
        &parent,
        "--summary",
        "ok",
        "--result",
        "42",
        "--force",
    ]);
    assert_eq!(done["promoted"], serde_json::json!([child]));
    assert_eq!(k.status(&child), "ready");

    let show = k.json(&["show", &parent]);
    for key in ["task", "parents", "children", "runs", "events", "comments"] {
        assert!(show.get(key).is_some(), "show lacks {key}");
    }
    assert_eq!(show["task"]["result"], "42");
    assert_eq!(show["children"][0]["id"], child.as_str());
    assert_eq!(show["runs"][0]["outcome"], "completed");
    let kinds: Vec<&str> = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["created", "claimed", "completed"]);
    k.assert_fsck_clean();
}

#[test]
fn the_remaining_commands_work_and_refuse_with_exit_3() {
    let k = kanban();
    let a = k.create("a", &[]);
    let b = k.create("b", &[]);
    k.json(&["link", &a, &b]);
    assert_eq!(k.status(&b), "todo");
    k.json(&["unlink", &a, &b]);
    assert_eq!(k.status(&b), "ready");
    assert_eq!(k.run(&["unlink", &a, &b]).code, 3);

    k.json(&["assign", &a, "ops"]);
    k.json(&["comment", &a, "--body", "hello", "--author", "alice"]);
    assert_eq!(k.json(&["show", &a])["comments"][0]["author"], "alice");

    k.json(&["claim", &a]);
    k.json(&["heartbeat", &a, "--note", "busy"]);
    k.json(&[
        "block",
        &a,
        "--reason",
        "need creds",
        "--kind",
        "needs_input",
    ]);
    assert_eq!(k.status(&a), "blocked");
    assert_eq!(k.run(&["block", &a, "--reason", "x"]).code, 3);
    k.json(&["unblock", &a]);
    assert_eq!(k.status(&a), "ready");
    k.json(&["claim", &a]);
    k.json(&["reclaim", &a, "--reason", "stuck"]);
    assert_eq!(k.status(&a), "ready");
    assert_eq!(k.run(&["reclaim", &a]).code, 3);

    let t = k.create("triaged", &["--triage"]);
    k.json(&["promote", &t]);
    assert_eq!(k.status(&t), "ready");
    k.json(&["archive", &t]);
    assert_eq!(k.status(&t), "archived");
    assert_eq!(k.run(&["archive", &t]).code, 3);
    let bad_kind = k.run(&["block", &b, "--reason", "x", "--kind", "nope"]);
    assert_eq!(bad_kind.code, 2, "a usage error");
    assert!(
        bad_kind
            .stderr
            .contains("invalid value 'nope' for '--kind <KIND>'")
            && bad_kind.stderr.contains("needs_input"),
        "{}",
        bad_kind.stderr
    );
    let all = k.json(&["list", "--all"]);
    assert_eq!(all.as_array().unwrap().len(), 3);
    let blocked = k.create("blocked", &["--blocked"]);
    assert_eq!(k.status(&blocked), "blocked");
    let same = k.create("dup", &["--idempotency-key", "k"]);
    assert_eq!(k.create("dup again", &["--idempotency-key", "k"]), same);
    k.assert_fsck_clean();
}

#[test]
fn lifecycle_commands_default_to_the_workers_task_and_refuse_others() {
    let k = kanban();
    let mine = k.create("mine", &[]);
    let other = k.create("other", &[]);
    let claim = k.json(&["claim", &mine, "--claimer", "host:7"]);
    let run_id = claim["run_id"].as_i64().unwrap().to_string();
    let db = k.default_db();
    let worker = |args: &[&str], run: &str| {
        let out = k
            .cmd()
            .args(args)
            .env("HERMES_KANBAN_TASK", &mine)
            .env("HERMES_KANBAN_RUN_ID", run)
            .env("HERMES_KANBAN_CLAIM_LOCK", "host:7")
            .env("HERMES_KANBAN_DB", &db)
            .output()
            .unwrap();
        kanban_tests::Run::from(out)
    };
    let shown = worker(&["--json", "show"], &run_id);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains(&mine));

    for args in [
        vec!["complete", other.as_str(), "--summary", "done"],
        vec!["block", other.as_str(), "--reason", "x"],
        vec!["heartbeat", other.as_str()],
        vec!["comment", other.as_str(), "--body", "x"],
    ] {
        let r = worker(&args, &run_id);
        assert_eq!(r.code, 3, "{args:?} on another task: {}", r.stderr);
        assert!(r.stderr.contains("may not mutate"), "{}", r.stderr);
    }
    assert_eq!(events(&k, &other), 1, "nothing written to the other task");

    let hb = worker(&["heartbeat", "--note", "alive"], &run_id);
    assert_eq!(hb.code, 0, "{}", hb.stderr);
    let comment = worker(
        &[
            "comment",
            &mine,
            "--body",
            "from the worker",
            "--author",
            "root",
        ],
        &run_id,
    );
    assert_eq!(comment.code, 0, "{}", comment.stderr);
    assert_ne!(k.json(&["show", &mine])["comments"][0]["author"], "root");

    let stale = worker(&["complete", "--summary", "late"], "999");
    assert_eq!(
        stale.code, 3,
        "a stale run cannot complete: {}",
        stale.stderr
    );
    assert_eq!(k.status(&mine), "running");
    let ok = worker(&["complete", "--summary", "done"], &run_id);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(k.status(&mine), "done");

    let no_id = k.run(&["complete"]);
    assert_eq!(
        no_id.code, 2,
        "no task id outside a worker is usage: {}",
        no_id.stderr
    );
}

#[test]
fn a_delegated_child_cannot_mutate_the_board() {
    let k = kanban();
    let id = k.create("t", &[]);
    let fenced = |args: &[&str]| {
        let out = k
            .cmd()
            .args(args)
            .env("HERMES_DELEGATED_CHILD_CONTEXT", "1")
            .output()
            .unwrap();
        kanban_tests::Run::from(out)
    };
    for args in [
        vec!["create", "x"],
        vec!["claim", id.as_str()],
        vec!["comment", id.as_str(), "--body", "x"],
        vec!["archive", id.as_str()],
    ] {
        let r = fenced(&args);
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("delegated child"), "{}", r.stderr);
    }
    assert_eq!(fenced(&["list"]).code, 0, "reading is allowed");
    assert_eq!(k.json(&["list"]).as_array().unwrap().len(), 1);
    assert_eq!(events(&k, &id), 1);
}

#[test]
fn bad_slugs_are_refused_with_a_clear_message_and_create_nothing() {
    let k = kanban();
    for slug in ["../x", "A", "", "a/b"] {
        for args in [
            vec!["--board", slug, "list"],
            vec!["--board", slug, "create", "t"],
            vec!["boards", "create", slug],
            vec!["boards", "switch", slug],
        ] {
            let r = k.run(&args);
            assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
            assert!(
                r.stderr.contains("invalid board slug"),
                "{args:?}: {}",
                r.stderr
            );
        }
    }
    assert!(
        snapshot(&k).is_empty(),
        "nothing was created: {:?}",
        snapshot(&k)
    );
}

#[test]
fn boards_create_switch_and_list() {
    let k = kanban();
    k.ok(&["init"]);
    let made = k.json(&["boards", "create", "ops"]);
    assert_eq!(made["slug"], "ops");
    assert!(k.home().join("kanban/boards/ops/kanban.db").is_file());
    assert_eq!(k.run(&["boards", "create", "ops"]).code, 1);
    let missing = k.run(&["--board", "nope", "list"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("kanban boards create nope"),
        "{}",
        missing.stderr
    );
    k.json(&["boards", "switch", "ops"]);
    let id = k.create("on ops", &[]);
    assert_eq!(
        k.json(&["--board", "default", "list"])
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        k.json(&["--board", "ops", "show", &id])["task"]["title"],
        "on ops"
    );
    let boards = k.json(&["boards", "list"]);
    let current: Vec<&Value> = boards
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["current"] == true)
        .collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["slug"], "ops");
}

#[test]
fn unknown_task_id_is_an_error_that_changes_nothing() {
    let k = kanban();
    let id = k.create("t", &[]);
    let before = snapshot(&k);
    for args in [
        vec!["show", "t_00000000"],
        vec!["claim", "t_00000000"],
        vec!["complete", "t_00000000", "--summary", "done"],
        vec!["comment", "t_00000000", "--body", "x"],
        vec!["link", id.as_str(), "t_00000000"],
        vec!["create", "c", "--parent", "t_00000000"],
    ] {
        let r = k.run(&args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("t_00000000"), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("kanban list"),
            "says what to do: {}",
            r.stderr
        );
    }
    assert_eq!(snapshot(&k), before);
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_left_byte_identical() {
    let k = kanban();
    let db = k.default_db();
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&db, &bytes).unwrap();
    for args in [
        vec!["list"],
        vec!["create", "t"],
        vec!["init"],
        vec!["fsck"],
    ] {
        let r = k.run(&args);
        assert_eq!(r.code, 1, "{args:?}");
        assert!(r.stderr.contains("not a SQLite database"), "{}", r.stderr);
    }
    assert_eq!(std::fs::read(&db).unwrap(), bytes);
    let names: Vec<_> = std::fs::read_dir(k.home())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "no -wal/-shm created: {names:?}");
}

#[test]
fn blank_title_cycle_and_negative_ttl_are_refused() {
    let k = kanban();
    let a = k.create("a", &[]);
    let b = k.create("b", &["--parent", &a]);
    let before = snapshot(&k);
    let blank = k.run(&["create", "   "]);
    assert_eq!(blank.code, 1);
    assert!(
        blank.stderr.contains("title must not be blank"),
        "{}",
        blank.stderr
    );
    let cycle = k.run(&["link", &b, &a]);
    assert_eq!(cycle.code, 1);
    assert!(cycle.stderr.contains("cycle"), "{}", cycle.stderr);
    let self_link = k.run(&["link", &a, &a]);
    assert_eq!(self_link.code, 1);
    assert!(self_link.stderr.contains("itself"), "{}", self_link.stderr);
    let neg = k.run(&["claim", &a, "--ttl", "-5"]);
    assert_eq!(neg.code, 1);
    assert!(
        neg.stderr
            .contains("--ttl must be a whole number of seconds from 1 to 31536000"),
        "{}",
        neg.stderr
    );
    let env_ttl = k
        .cmd()
        .args(["claim", &a])
        .env("HERMES_KANBAN_CLAIM_TTL_SECONDS", "-1")
        .output()
        .unwrap();
    assert_eq!(env_ttl.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&env_ttl.stderr).contains("HERMES_KANBAN_CLAIM_TTL_SECONDS"));
    let runtime = k.run(&["create", "x", "--max-runtime", "0"]);
    assert_eq!(runtime.code, 1);
    assert_eq!(snapshot(&k), before, "nothing changed");
    assert_eq!(k.status(&a), "ready");
}

#[test]
fn fsck_exits_1_naming_each_violation() {
    let k = kanban();
    let a = k.create("a", &[]);
    let b = k.create("b", &["--parent", &a]);
    k.assert_fsck_clean();
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    conn.execute("UPDATE tasks SET status = 'ready' WHERE id = ?1", [&b])
        .unwrap();
    conn.execute("UPDATE tasks SET status = 'running' WHERE id = ?1", [&a])
        .unwrap();
    drop(conn);
    let r = k.run(&["fsck"]);
    assert_eq!(r.code, 1);
    for needle in [
        "ready_with_unfinished_parent",
        "running_without_claim",
        "running_without_open_run",
        &a,
        &b,
    ] {
        assert!(
            r.stderr.contains(needle),
            "{needle} missing from {}",
            r.stderr
        );
    }
    let json = k.run(&["--json", "fsck"]);
    assert_eq!(json.code, 1);
    let v: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["violations"].as_array().unwrap().len(), 3);
}

#[test]
fn board_resolution_follows_flag_db_env_board_env_current_default() {
    let k = kanban();
    k.ok(&["init"]);
    k.ok(&["boards", "create", "ops"]);
    k.ok(&["boards", "create", "dev"]);
    let on_default = k.create("on default", &[]);
    let on_ops = k.create("on ops", &["--board", "ops"]);
    let on_dev = k.create("on dev", &["--board", "dev"]);
    let titles = |args: &[&str], env: &[(&str, &str)]| -> Result<Vec<String>, String> {
        let mut cmd = k.cmd();
        cmd.args(["--json", "list"]).args(args);
        for (key, value) in env {
            cmd.env(key, value);
        }
        let out = kanban_tests::Run::from(cmd.output().unwrap());
        if out.code != 0 {
            return Err(out.stderr);
        }
        let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
        Ok(v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect())
    };
    let ops_db = k.home().join("kanban/boards/ops/kanban.db");
    let ops_db = ops_db.to_str().unwrap();
    assert_eq!(titles(&[], &[]).unwrap(), vec![on_default.clone()]);
    k.ok(&["boards", "switch", "dev"]);
    assert_eq!(
        titles(&[], &[]).unwrap(),
        vec![on_dev.clone()],
        "current file"
    );
    assert_eq!(
        titles(&[], &[("HERMES_KANBAN_BOARD", "default")]).unwrap(),
        vec![on_default.clone()],
        "HERMES_KANBAN_BOARD beats the current file"
    );
    assert_eq!(
        titles(
            &[],
            &[("HERMES_KANBAN_BOARD", "dev"), ("HERMES_KANBAN_DB", ops_db)]
        )
        .unwrap(),
        vec![on_ops.clone()],
        "HERMES_KANBAN_DB pins the file"
    );
    assert_eq!(
        titles(&["--board", "default"], &[("HERMES_KANBAN_DB", ops_db)]).unwrap(),
        vec![on_default],
        "--board beats everything"
    );
    let err = titles(&[], &[("HERMES_KANBAN_BOARD", "../x")]).unwrap_err();
    assert!(err.contains("invalid board slug"), "{err}");
    std::fs::write(k.home().join("kanban/current"), "../../etc\n").unwrap();
    assert_eq!(
        titles(&[], &[]).unwrap().len(),
        1,
        "a bad current file falls back to default"
    );
}

#[test]
fn list_pages_with_limit_and_offset_and_refuses_a_bad_count() {
    let k = kanban_tests::Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    k.ok(&["init"]);
    let ids: Vec<String> = (0..5)
        .map(|i| k.create(&format!("task {i}"), &[]))
        .collect();
    let page = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["list"];
        args.extend_from_slice(extra);
        k.json(&args)
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(page(&[]), ids);
    assert_eq!(page(&["--limit", "2"]), ids[..2]);
    assert_eq!(page(&["--limit", "2", "--offset", "2"]), ids[2..4]);
    assert_eq!(page(&["--offset", "4"]), ids[4..]);
    assert!(page(&["--offset", "9"]).is_empty());
    for (bad, flag) in [("--limit=-1", "--limit"), ("--offset=x", "--offset")] {
        let run = k.run(&["list", bad]);
        assert_eq!(run.code, 2, "{bad}: {run:?}");
        assert!(run.stderr.contains(flag), "{bad}: {run:?}");
    }
}
