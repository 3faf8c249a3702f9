//! Task graphs end to end (README "Task graphs"): `decompose` (one transaction: the children,
//! their sibling links, the root linked under every child and moved to todo; every bad input
//! refused with nothing changed), `specify`, `schedule` (woken by the dispatcher's tick),
//! `promote --force/--dry-run`, `reassign --reclaim`, `unblock --reason` and the duration forms,
//! through the real `kanban` binary on real SQLite board files; the decomposition once more on
//! PostgreSQL.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kanban_runtime::board::{Board, NewTask, OpenOptions, Status};
use kanban_tests::{Kanban, Run};
use serde_json::{Value, json};

fn kanban() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    k.ok(&["init"]);
    k
}

fn task(k: &Kanban, id: &str) -> Value {
    k.json(&["show", id])["task"].clone()
}

fn events(k: &Kanban, id: &str) -> Vec<Value> {
    k.json(&["events", id]).as_array().unwrap().clone()
}

fn kinds(k: &Kanban, id: &str) -> Vec<String> {
    events(k, id)
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// Writes `children` to a file in the home and runs `decompose ROOT --children FILE extra…`.
fn decompose(k: &Kanban, root: &str, children: &Value, extra: &[&str]) -> Run {
    let file = k.home().join("children.json");
    std::fs::write(&file, children.to_string()).unwrap();
    let mut args = vec![
        "--json",
        "decompose",
        root,
        "--children",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    k.run(&args)
}

fn links(k: &Kanban) -> BTreeSet<(String, String)> {
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    let mut stmt = conn
        .prepare("SELECT parent_id, child_id FROM task_links")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// Every row of the board, as text: what "nothing changed" compares.
fn snapshot(k: &Kanban) -> Vec<String> {
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    let mut rows = Vec::new();
    for (table, order) in [
        ("tasks", "id"),
        ("task_links", "parent_id, child_id"),
        ("task_events", "id"),
        ("task_comments", "id"),
        ("task_runs", "id"),
    ] {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))
            .unwrap();
        let n = stmt.column_count();
        let mut q = stmt.query([]).unwrap();
        while let Some(row) = q.next().unwrap() {
            let cells: Vec<String> = (0..n)
                .map(|i| format!("{:?}", row.get_ref(i).unwrap()))
                .collect();
            rows.push(format!("{table}: {}", cells.join(" | ")));
        }
    }
    rows
}

fn ids(v: &Value) -> Vec<String> {
    v["child_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

/// The five-child graph the tests share: 0 design; 1 api and 2 ui after design; 3 tests after
/// api and ui; 4 docs on its own.
fn five_children() -> Value {
    json!([
        {"title": "design", "assignee": "architect"},
        {"title": "api", "body": "the endpoints", "parents": [0]},
        {"title": "ui", "parents": [0]},
        {"title": "tests", "parents": [1, 2]},
        {"title": "docs", "assignee": "writer", "parents": []}
    ])
}

#[test]
fn a_five_child_graph_becomes_exactly_the_listed_links_and_the_root_wakes_after_the_last_child() {
    let k = kanban();
    let root = k.create("ship the feature", &["--triage", "--assignee", "planner"]);
    let run = decompose(
        &k,
        &root,
        &five_children(),
        &["--root-assignee", "orchestrator"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    let c = ids(&out);
    assert_eq!(c.len(), 5);

    let mut expected: BTreeSet<(String, String)> = [(0, 1), (0, 2), (1, 3), (2, 3)]
        .iter()
        .map(|&(p, ch)| (c[p].clone(), c[ch].clone()))
        .collect();
    expected.extend(c.iter().map(|child| (child.clone(), root.clone())));
    assert_eq!(
        links(&k),
        expected,
        "exactly the sibling links and the root under every child"
    );

    let statuses: Vec<String> = c.iter().map(|id| k.status(id)).collect();
    assert_eq!(statuses, ["ready", "todo", "todo", "todo", "ready"]);
    let r = task(&k, &root);
    assert_eq!(
        (r["status"].as_str(), r["assignee"].as_str()),
        (Some("todo"), Some("orchestrator"))
    );
    assert_eq!(task(&k, &c[1])["body"], "the endpoints");
    assert_eq!(task(&k, &c[0])["assignee"], "architect");
    let decomposed = events(&k, &root)
        .into_iter()
        .find(|e| e["kind"] == "decomposed")
        .unwrap();
    assert_eq!(
        decomposed["payload"],
        json!({"child_ids": c, "root_assignee": "orchestrator"})
    );
    let created = &events(&k, &c[3])[0];
    assert_eq!(created["payload"]["from_decompose_of"], root.as_str());
    let comments = k.json(&["show", &root])["comments"].clone();
    assert!(
        comments[0]["body"]
            .as_str()
            .unwrap()
            .starts_with("Decomposed into "),
        "{comments}"
    );

    // The root wakes only when the last child is done, whatever the order.
    for (i, id) in [0, 4, 1, 2, 3].iter().map(|&i| (i, &c[i])) {
        assert_eq!(
            k.status(&root),
            "todo",
            "root woke before child {i} was done"
        );
        if k.status(id) == "todo" {
            panic!("child {i} still waits on a sibling: {}", k.status(id));
        }
        k.ok(&["complete", id, "--summary", "done"]);
    }
    assert_eq!(k.status(&root), "ready");
    k.assert_fsck_clean();
}

#[test]
fn the_dispatcher_runs_the_children_in_graph_order_then_the_woken_root() {
    let k = kanban();
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\ninterval_seconds = 0.2\ndefault_profile = \"done\"\n\n\
         [profiles.done]\nagent = \"builtin:complete\"\n\n\
         [profiles.architect]\nagent = \"builtin:complete\"\n\n\
         [profiles.writer]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    let root = k.create("root", &["--triage"]);
    let run = decompose(&k, &root, &five_children(), &["--root-assignee", "done"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let c = ids(&serde_json::from_str(&run.stdout).unwrap());
    let d = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(d.code, 0, "{}\n{}", d.stdout, d.stderr);
    for id in c.iter().chain([&root]) {
        assert_eq!(k.status(id), "done", "{id}\n{}", d.stdout);
    }
    // Event ids are commit order: the root became ready after the last child completed, and
    // `tests` only after `api` and `ui`.
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    let event_id = |task: &str, kind: &str| -> i64 {
        conn.query_row(
            "SELECT MIN(id) FROM task_events WHERE task_id = ?1 AND kind = ?2",
            [task, kind],
            |r| r.get(0),
        )
        .unwrap()
    };
    let last_child = c.iter().map(|id| event_id(id, "completed")).max().unwrap();
    assert!(event_id(&root, "promoted") > last_child);
    assert!(event_id(&c[3], "promoted") > event_id(&c[1], "completed"));
    assert!(event_id(&c[3], "promoted") > event_id(&c[2], "completed"));
    k.assert_fsck_clean();
}

#[test]
fn each_bad_decomposition_is_refused_with_a_clear_message_and_changes_nothing() {
    let k = kanban();
    let root = k.create("root", &["--triage"]);
    let todo = k.create("not in triage", &[]); // ready: no parent
    let wt = k.home().join("wt");
    let wt = wt.to_str().unwrap();
    let cases: Vec<(&str, &str, Value, i32, &str)> = vec![
        (
            "cycle",
            &root,
            json!([{"title": "a", "parents": [2]}, {"title": "b", "parents": [0]}, {"title": "c", "parents": [1]}]),
            1,
            "form a cycle (children 0, 1, 2",
        ),
        (
            "index out of range",
            &root,
            json!([{"title": "a"}, {"title": "b", "parents": [5]}]),
            1,
            "child 1 names parent 5, but the children are numbered 0 to 1",
        ),
        (
            "missing title",
            &root,
            json!([{"title": "a"}, {"body": "no title"}]),
            1,
            "child 1 has no `title`",
        ),
        (
            "blank title",
            &root,
            json!([{"title": "  "}]),
            1,
            "child 0 has no title",
        ),
        (
            "shared worktree",
            &root,
            json!([{"title": "a", "workspace": format!("worktree:{wt}")}, {"title": "b", "workspace": format!("worktree:{wt}")}]),
            1,
            "children 0 and 1 share the worktree",
        ),
        (
            "unknown key",
            &root,
            json!([{"title": "a", "parent": [0]}]),
            1,
            "unknown key `parent`",
        ),
        (
            "empty list",
            &root,
            json!([]),
            1,
            "the list of children is empty",
        ),
        (
            "not a list",
            &root,
            json!({"title": "a"}),
            1,
            "must be a JSON list",
        ),
        (
            "root not in triage",
            &todo,
            json!([{"title": "a"}]),
            3,
            "is ready; this needs it in triage",
        ),
    ];
    for (what, target, children, code, says) in cases {
        let before = snapshot(&k);
        let run = decompose(&k, target, &children, &[]);
        assert_eq!(run.code, code, "{what}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{what}: {}", run.stderr);
        assert_eq!(snapshot(&k), before, "{what} changed the board");
    }
    // Not JSON at all.
    let before = snapshot(&k);
    std::fs::write(k.home().join("bad.json"), "[{title: a}").unwrap();
    let bad = k.home().join("bad.json");
    let run = k.run(&["decompose", &root, "--children", bad.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("not valid JSON"), "{}", run.stderr);
    assert_eq!(snapshot(&k), before);

    // A second decomposition of the same root, even once it is back in triage.
    assert_eq!(decompose(&k, &root, &json!([{"title": "a"}]), &[]).code, 0);
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    conn.execute("UPDATE tasks SET status = 'triage' WHERE id = ?1", [&root])
        .unwrap();
    let before = snapshot(&k);
    let run = decompose(&k, &root, &json!([{"title": "b"}]), &[]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("was already decomposed"),
        "{}",
        run.stderr
    );
    assert_eq!(snapshot(&k), before);
}

/// A decomposition killed (SIGKILL) at moments spread over its run, many times: each time the
/// board holds all of the graph or none of it, and `fsck` is clean. Which moments land inside
/// the transaction depends on the machine; the invariant is checked whatever they hit.
#[test]
fn a_decomposition_killed_at_any_moment_leaves_all_of_the_graph_or_none() {
    let k = kanban();
    let n = 1500;
    let children: Vec<Value> = (0..n)
        .map(|i| {
            if i == 0 {
                json!({"title": "c0"})
            } else {
                json!({"title": format!("c{i}"), "parents": [i - 1]})
            }
        })
        .collect();
    let file = k.home().join("children.json");
    std::fs::write(&file, Value::Array(children).to_string()).unwrap();
    let count = |sql: &str| -> i64 {
        let conn = rusqlite::Connection::open(k.default_db()).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    };
    // How long the work before the transaction takes here (a refused decomposition: the process,
    // the JSON, the graph check, the board opened, the root read), and a whole one: the kills
    // are spread from the first to a little past the second, so they land in the transaction.
    let ready = k.create("not in triage", &[]);
    let path = file.to_str().unwrap();
    let started = Instant::now();
    let refused = k.run(&["decompose", &ready, "--children", path]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    let before_tx = started.elapsed();
    let calibration = k.create("calibration", &["--triage"]);
    let started = Instant::now();
    k.ok(&["decompose", &calibration, "--children", path]);
    let took = started.elapsed();
    let span = (took + took / 5).saturating_sub(before_tx);
    let (mut whole, mut none) = (0, 0);
    for round in 0..12u32 {
        let root = k.create(&format!("root {round}"), &["--triage"]);
        let tasks_before = count("SELECT COUNT(*) FROM tasks");
        let mut child = k
            .cmd()
            .args(["decompose", &root, "--children", file.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(before_tx + span * round / 11);
        let _ = child.kill();
        child.wait().unwrap();
        let added = count("SELECT COUNT(*) FROM tasks") - tasks_before;
        let root_links = count(&format!(
            "SELECT COUNT(*) FROM task_links WHERE child_id = '{root}'"
        ));
        let status = k.status(&root);
        if added == 0 {
            assert_eq!(
                (root_links, status.as_str()),
                (0, "triage"),
                "round {round}"
            );
            none += 1;
        } else {
            assert_eq!(
                (added, root_links, status.as_str()),
                (n, n, "todo"),
                "round {round}: a partial graph"
            );
            whole += 1;
        }
        k.assert_fsck_clean();
    }
    eprintln!(
        "{whole} rounds left the whole graph, {none} none of it (before the transaction: \
         {before_tx:?}, a whole run: {took:?})"
    );
}

/// The kill -9 case argued: everything is written by one write transaction, so a process killed
/// in it leaves what SQLite's journal rolls back, which is everything. What a test can make
/// happen deterministically is a failure after four children are already inserted: the fifth,
/// last in graph order, names a branch git refuses, which only the board's in-transaction check
/// of each child's workspace catches.
#[test]
fn a_child_that_fails_late_rolls_back_every_child_written_before_it() {
    let k = kanban();
    let root = k.create("root", &["--triage"]);
    let before = snapshot(&k);
    let children = json!([
        {"title": "last", "parents": [1, 2, 3, 4], "workspace": "worktree", "branch": "bad..branch"},
        {"title": "a"}, {"title": "b"}, {"title": "c", "parents": [1]}, {"title": "d"}
    ]);
    let run = decompose(&k, &root, &children, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("bad..branch"), "{}", run.stderr);
    assert_eq!(snapshot(&k), before, "a partial graph was left");
    assert_eq!(k.status(&root), "triage");
    k.assert_fsck_clean();
}

#[test]
fn no_promote_leaves_every_child_in_todo_and_children_inherit_the_roots_workspace() {
    let k = kanban();
    let dir = k.home().join("shared-dir");
    let ws = format!("dir:{}", dir.display());
    let root = k.create("root", &["--triage", "--workspace", &ws]);
    let run = decompose(
        &k,
        &root,
        &json!([{"title": "a"}, {"title": "b", "workspace": "scratch"}]),
        &["--no-promote"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let c = ids(&serde_json::from_str(&run.stdout).unwrap());
    for id in &c {
        assert_eq!(k.status(id), "todo");
        assert!(!kinds(&k, id).contains(&"promoted".to_owned()));
    }
    let a = task(&k, &c[0]);
    assert_eq!(
        (a["workspace_kind"].as_str(), a["workspace_path"].as_str()),
        (Some("dir"), dir.to_str())
    );
    assert_eq!(task(&k, &c[1])["workspace_kind"], "scratch");
    // The root keeps its assignee when none is given; the operator promotes a child by hand.
    k.ok(&["promote", &c[0]]);
    assert_eq!(k.status(&c[0]), "ready");
}

#[test]
fn decompose_reads_the_children_from_standard_input() {
    let k = kanban();
    let root = k.create("root", &["--triage"]);
    let mut child = k
        .cmd()
        .args(["--json", "decompose", &root, "--children", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"[{"title": "from stdin"}]"#)
        .unwrap();
    let run: Run = child.wait_with_output().unwrap().into();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let c = ids(&serde_json::from_str(&run.stdout).unwrap());
    assert_eq!(task(&k, &c[0])["title"], "from stdin");
}

#[test]
fn specify_moves_triage_on_with_a_specified_event_and_refuses_any_other_status() {
    let k = kanban();
    let t = k.create("rough idea", &["--triage"]);
    let s = k.json(&[
        "specify",
        &t,
        "--title",
        "clear idea",
        "--body",
        "steps",
        "--assignee",
        "dev",
    ]);
    assert_eq!(s["changed_fields"], json!(["title", "body", "assignee"]));
    assert_eq!(s["status"], "ready");
    let v = task(&k, &t);
    assert_eq!(
        (
            v["title"].as_str(),
            v["body"].as_str(),
            v["assignee"].as_str()
        ),
        (Some("clear idea"), Some("steps"), Some("dev"))
    );
    let e = events(&k, &t);
    let spec = e.iter().find(|e| e["kind"] == "specified").unwrap();
    assert_eq!(
        spec["payload"]["changed_fields"],
        json!(["title", "body", "assignee"])
    );

    // With an unfinished parent it stops in todo.
    let parent = k.create("parent", &[]);
    let waiting = k.create("waits", &["--triage", "--parent", &parent]);
    assert_eq!(k.json(&["specify", &waiting])["status"], "todo");

    let before = snapshot(&k);
    let again = k.run(&["specify", &t, "--title", "x"]);
    assert_eq!(again.code, 3);
    assert!(
        again.stderr.contains("is ready; this needs it in triage"),
        "{}",
        again.stderr
    );
    let t2 = k.create("another", &["--triage"]);
    let before2 = snapshot(&k);
    let blank = k.run(&["specify", &t2, "--title", "  "]);
    assert_eq!(blank.code, 1);
    assert!(
        blank.stderr.contains("title must not be blank"),
        "{}",
        blank.stderr
    );
    assert_eq!(snapshot(&k), before2);
    drop(before);
}

#[test]
fn schedule_in_2s_is_woken_by_a_dispatcher_tick_once_due_and_not_before() {
    let k = kanban();
    let t = k.create("later", &[]);
    let s = k.json(&["schedule", &t, "--in", "2s", "--reason", "after the deploy"]);
    let at = s["at"].as_i64().unwrap();
    assert_eq!(k.status(&t), "scheduled");
    let ev = events(&k, &t).pop().unwrap();
    assert_eq!(ev["kind"], "scheduled");
    assert_eq!(
        ev["payload"],
        json!({"reason": "after the deploy", "at": at})
    );
    let shown = k.ok(&["show", &t]);
    assert!(
        shown.contains("scheduled until ")
            && shown.contains("(the dispatcher wakes it): after the deploy"),
        "{shown}"
    );
    // A tick before the time leaves it parked (unless this machine took two seconds to get here).
    let early = k.ok(&["dispatch", "--once", "--max-spawn", "0"]);
    if now() < at {
        assert_eq!(k.status(&t), "scheduled", "{early}");
    }
    // The real two seconds: ticks until it wakes, with a deadline.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = k.ok(&["dispatch", "--once", "--max-spawn", "0"]);
        if k.status(&t) == "ready" {
            assert!(out.contains(&format!("woke       {t}")), "{out}");
            assert!(now() >= at);
            break;
        }
        assert!(Instant::now() < deadline, "never woke: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let last = events(&k, &t).pop().unwrap();
    assert_eq!(last["payload"]["reason"], "schedule_due");
    k.assert_fsck_clean();
}

/// The daemon waits for the next due time, not for its interval: with a 60 s interval, a task
/// scheduled 2 s ahead is woken within seconds.
#[test]
fn the_daemon_wakes_a_scheduled_task_at_its_time_not_an_interval_later() {
    let k = kanban();
    let t = k.create("soon", &[]);
    let mut daemon = k
        .cmd()
        .args(["dispatch", "--interval", "60", "--max-spawn", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let s = k.json(&["schedule", &t, "--in", "2s"]);
    let at = s["at"].as_i64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while k.status(&t) != "ready" {
        if Instant::now() > deadline {
            daemon.kill().unwrap();
            daemon.wait().unwrap();
            panic!("the daemon did not wake the task within 20 s (interval 60 s)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let woke = events(&k, &t).pop().unwrap();
    assert_eq!(woke["payload"]["reason"], "schedule_due");
    assert!(woke["created_at"].as_i64().unwrap_or(at) >= at, "{woke}");
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The same wake on an injected clock (the library's `now`), with a parent: a due task whose
/// parent is unfinished wakes to todo; one without a time waits for `unblock`.
#[test]
fn a_scheduled_task_wakes_exactly_at_its_time_on_an_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let board = Board::open_path(&dir.path().join("b.db"), &OpenOptions::create()).unwrap();
    let t0 = 1_800_000_000;
    let new = |title: &str, parents: Vec<String>| NewTask {
        title: title.to_owned(),
        parents,
        ..NewTask::default()
    };
    let parent = board.create_task(&new("parent", vec![]), t0).unwrap().id;
    let free = board.create_task(&new("free", vec![]), t0).unwrap().id;
    let gated = board
        .create_task(&new("gated", vec![parent.clone()]), t0)
        .unwrap()
        .id;
    let untimed = board.create_task(&new("untimed", vec![]), t0).unwrap().id;
    board
        .schedule(&free, Some(t0 + 900), None, t0)
        .unwrap()
        .into_result()
        .unwrap();
    board
        .schedule(&gated, Some(t0 + 60), None, t0)
        .unwrap()
        .into_result()
        .unwrap();
    board
        .schedule(&untimed, None, Some("until someone says"), t0)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(board.next_due().unwrap(), Some(t0 + 60));
    assert!(board.wake_due(t0 + 59).unwrap().is_empty());
    assert_eq!(board.wake_due(t0 + 60).unwrap(), vec![gated.clone()]);
    assert_eq!(board.get_task(&gated).unwrap().status, Status::Todo);
    assert!(board.wake_due(t0 + 899).unwrap().is_empty());
    assert_eq!(board.wake_due(t0 + 900).unwrap(), vec![free.clone()]);
    assert_eq!(board.get_task(&free).unwrap().status, Status::Ready);
    assert!(board.wake_due(t0 + 1_000_000).unwrap().is_empty());
    assert_eq!(board.get_task(&untimed).unwrap().status, Status::Scheduled);
    board
        .unblock(&untimed, t0 + 5)
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(board.get_task(&untimed).unwrap().status, Status::Ready);
    assert!(board.fsck().unwrap().is_empty());
}

#[test]
fn schedule_refusals_a_bad_time_a_bad_duration_a_done_task() {
    let k = kanban();
    let t = k.create("t", &[]);
    let before = snapshot(&k);
    for (args, says) in [
        (
            vec!["schedule", &t, "--at", "next tuesday"],
            "not a valid ISO-8601 date and time",
        ),
        (
            vec!["schedule", &t, "--at", "2026-13-01T00:00:00Z"],
            "not a valid ISO-8601",
        ),
        (
            vec!["schedule", &t, "--in", "5w"],
            "unknown duration unit `w`",
        ),
        (vec!["schedule", &t], "--at <TIME>"),
        (
            vec!["schedule", &t, "--in", "1m", "--at", "2030-01-01T00:00:00Z"],
            "cannot be used with",
        ),
    ] {
        let run = k.run(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
    let zero = k.run(&["schedule", &t, "--in", "0"]);
    assert_eq!(zero.code, 1);
    assert!(zero.stderr.contains("positive"), "{}", zero.stderr);
    assert_eq!(snapshot(&k), before);
    k.ok(&["complete", &t, "--summary", "s"]);
    let done = k.run(&["schedule", &t, "--at", "2030-01-01T00:00:00Z"]);
    assert_eq!(done.code, 3);
    assert!(done.stderr.contains("is done"), "{}", done.stderr);
    // --at with an offset, and a local time.
    let u = k.create("u", &[]);
    let s = k.json(&["schedule", &u, "--at", "2030-01-01T00:00:00+01:00"]);
    assert_eq!(s["at"], 1_893_452_400);
    assert_eq!(
        k.json(&["schedule", &u, "--at", "2030-01-01 00:00"])["from"],
        "scheduled"
    );
}

#[test]
fn promote_is_refused_while_a_parent_is_open_unless_forced_and_a_dry_run_changes_nothing() {
    let k = kanban();
    let p = k.create("parent", &[]);
    let c = k.create("child", &["--parent", &p]);
    let before = snapshot(&k);
    let refused = k.run(&["promote", &c]);
    assert_eq!(refused.code, 3);
    assert!(
        refused
            .stderr
            .contains(&format!("waits on unfinished parent(s): {p}")),
        "{}",
        refused.stderr
    );
    let dry = k.run(&["promote", &c, "--dry-run"]);
    assert_eq!(dry.code, 3, "a dry run says the same refusal");
    let dry_forced = k.ok(&["promote", &c, "--dry-run", "--force"]);
    assert!(
        dry_forced.contains("would be ready (was todo; nothing changed)"),
        "{dry_forced}"
    );
    assert_eq!(
        snapshot(&k),
        before,
        "refusals and dry runs changed the board"
    );

    let m = k.json(&[
        "promote",
        &c,
        "--force",
        "--reason",
        "parent is a formality",
    ]);
    assert_eq!(
        (m["from"].as_str(), m["to"].as_str()),
        (Some("todo"), Some("ready"))
    );
    let ev = events(&k, &c).pop().unwrap();
    assert_eq!(ev["kind"], "promoted_manual");
    assert_eq!(ev["payload"]["open_parents"], json!([p]));
    assert_eq!(ev["payload"]["reason"], "parent is a formality");
    let ready_dry = k.run(&["promote", &c, "--dry-run", "--force"]);
    assert_eq!(ready_dry.code, 3);
    assert!(
        ready_dry.stderr.contains("is ready"),
        "{}",
        ready_dry.stderr
    );
    // The forced promotion holds: fsck accepts it and the claim honours it.
    k.assert_fsck_clean();
    k.ok(&["claim", &c]);
    assert_eq!(k.status(&c), "running");
}

#[test]
fn reassign_reclaim_releases_the_claim_and_assigns_in_one_step() {
    let k = kanban();
    let t = k.create("t", &["--assignee", "broken-model"]);
    k.ok(&["claim", &t]);
    let before = snapshot(&k);
    let refused = k.run(&["reassign", &t, "other"]);
    assert_eq!(refused.code, 3);
    assert!(
        refused.stderr.contains("pass --reclaim"),
        "{}",
        refused.stderr
    );
    assert_eq!(snapshot(&k), before);

    let r = k.json(&["reassign", &t, "other", "--reclaim"]);
    assert_eq!(
        (r["from"].as_str(), r["to"].as_str()),
        (Some("broken-model"), Some("other"))
    );
    assert_eq!(r["reclaimed"]["retry_status"], "ready");
    let v = task(&k, &t);
    assert_eq!(
        (v["status"].as_str(), v["assignee"].as_str()),
        (Some("ready"), Some("other"))
    );
    assert!(v["claim_lock"].is_null());
    let k2 = kinds(&k, &t);
    assert_eq!(&k2[k2.len() - 2..], ["reclaimed", "assigned"]);
    let runs = k.json(&["show", &t])["runs"].clone();
    assert_eq!(runs[0]["outcome"], "reclaimed", "{runs}");
    // An unclaimed task is simply assigned, with or without --reclaim.
    assert!(k.json(&["reassign", &t, "third", "--reclaim"])["reclaimed"].is_null());
    k.assert_fsck_clean();
}

#[test]
fn unblock_reason_is_left_as_a_comment() {
    let k = kanban();
    let a = k.create("a", &["--blocked"]);
    let b = k.create("b", &["--blocked"]);
    k.ok(&["unblock", &a, &b, "--reason", "credentials rotated"]);
    for id in [&a, &b] {
        assert_eq!(k.status(id), "ready");
        let comments = k.json(&["show", id])["comments"].clone();
        assert_eq!(
            comments[0]["body"], "Unblocked: credentials rotated",
            "{comments}"
        );
        assert_eq!(comments[0]["author"], "operator");
    }
    let c = k.create("c", &["--blocked"]);
    let blank = k.run(&["unblock", &c, "--reason", " "]);
    assert_eq!(blank.code, 1);
    assert!(
        blank.stderr.contains("an unblock reason must not be blank"),
        "{}",
        blank.stderr
    );
    assert_eq!(k.status(&c), "blocked");
}

#[test]
fn durations_take_the_originals_forms_wherever_a_duration_is_taken() {
    let k = kanban();
    for (text, secs) in [
        ("90s", 90),
        ("30m", 1_800),
        ("2h", 7_200),
        ("1d", 86_400),
        ("45", 45),
    ] {
        let t = k.create("t", &["--max-runtime", text]);
        assert_eq!(task(&k, &t)["max_runtime_seconds"], secs, "{text}");
    }
    let bad = k.run(&["create", "t", "--max-runtime", "5w"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr
            .contains("unknown duration unit `w` (use s, m, h or d)"),
        "{}",
        bad.stderr
    );
    let t = k.create("claimed", &[]);
    let before = now();
    let claim = k.json(&["claim", &t, "--ttl", "30m"]);
    let expires = claim["claim_expires"].as_i64().unwrap();
    assert!(
        (before + 1_800..=now() + 1_800).contains(&expires),
        "{claim}"
    );
    let hb = k.json(&["heartbeat", &t, "--ttl", "2h"]);
    assert!(
        hb["claim_expires"].as_i64().unwrap() >= before + 7_200,
        "{hb}"
    );
}

#[test]
fn decompose_on_postgres_is_one_transaction_too() {
    use kanban_pgwire::cluster::TestCluster;
    let cluster =
        TestCluster::shared().expect("a PostgreSQL test server (see the README's Testing section)");
    let k = kanban();
    let db = cluster.fresh_database("task_graph").unwrap();
    k.ok(&["boards", "create", "pg", "--url", &cluster.url(&db)]);
    let on = |args: &[&str]| {
        let mut all = vec!["--board", "pg"];
        all.extend_from_slice(args);
        all.iter().map(|s| s.to_string()).collect::<Vec<String>>()
    };
    let run = |args: &[&str]| {
        let all = on(args);
        k.run(&all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let root = {
        let r = run(&["--json", "create", "root", "--triage"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str::<Value>(&r.stdout).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let file = k.home().join("children.json");
    let count = |client: &mut kanban_pgwire::Client| -> String {
        let rows = client
            .query("SELECT (SELECT count(*) FROM tasks)::text || '/' || (SELECT count(*) FROM task_links)::text || '/' || (SELECT count(*) FROM task_events)::text", &[])
            .unwrap();
        format!("{:?}", rows)
    };
    let mut client = cluster.connect(&db).unwrap();
    // A late failure rolls back on PostgreSQL as well.
    let before = count(&mut client);
    std::fs::write(
        &file,
        json!([{"title": "last", "parents": [1], "workspace": "worktree", "branch": "bad..branch"}, {"title": "a"}]).to_string(),
    )
    .unwrap();
    let bad = run(&["decompose", &root, "--children", file.to_str().unwrap()]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert_eq!(count(&mut client), before);

    std::fs::write(&file, five_children().to_string()).unwrap();
    let ok = run(&[
        "--json",
        "decompose",
        &root,
        "--children",
        file.to_str().unwrap(),
        "--root-assignee",
        "orch",
    ]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let c = ids(&serde_json::from_str(&ok.stdout).unwrap());
    assert_eq!(c.len(), 5);
    let again = run(&["decompose", &root, "--children", file.to_str().unwrap()]);
    assert_eq!(again.code, 3, "{}", again.stderr);
    for i in [0, 4, 1, 2, 3] {
        let r = run(&["complete", &c[i], "--summary", "s"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let show = run(&["--json", "show", &root]);
    let v: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(v["task"]["status"], "ready");
    assert_eq!(v["task"]["assignee"], "orch");

    // A schedule whose time has passed is woken by the next tick; one in a day is not.
    let due = run(&["schedule", &root, "--at", "2020-01-01T00:00:00Z"]);
    assert_eq!(due.code, 0, "{}", due.stderr);
    let done = run(&["schedule", &c[0], "--in", "1d"]);
    assert_eq!(
        done.code, 3,
        "a done task is not scheduled: {}",
        done.stderr
    );
    let fresh = run(&["--json", "create", "later"]);
    let fresh = serde_json::from_str::<Value>(&fresh.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(run(&["schedule", &fresh, "--in", "1d"]).code, 0);
    let tick = run(&["dispatch", "--once", "--max-spawn", "0"]);
    assert_eq!(tick.code, 0, "{}", tick.stderr);
    assert!(
        tick.stdout.contains(&format!("woke       {root}")),
        "{}",
        tick.stdout
    );
    let show = run(&["--json", "show", &root]);
    let v: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(v["task"]["status"], "ready");
    let show = run(&["--json", "show", &fresh]);
    let v: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(v["task"]["status"], "scheduled");
}
