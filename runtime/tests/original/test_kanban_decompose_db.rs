//! `tests/hermes_cli/test_kanban_decompose_db.py`: `decompose_triage_task`, the atomic fan-out of
//! a triage task, through `kanban decompose ID --children FILE`. The original's `None` (missing
//! root, root not in triage, no children) is a refusal or an error here, with nothing changed.

use serde_json::{Value, json};

use super::support::Home;

/// `decompose ROOT --children <file> extra…` with `children` written to a file.
fn decompose(home: &Home, root: &str, children: &Value, extra: &[&str]) -> kanban_tests::Run {
    let file = home.k.home().join("children.json");
    std::fs::write(&file, children.to_string()).unwrap();
    let mut args = vec![
        "--json",
        "decompose",
        root,
        "--children",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    home.run(&args)
}

/// The child ids of a successful decomposition.
fn child_ids(run: &kanban_tests::Run) -> Vec<String> {
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    v["child_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

fn task_count(home: &Home) -> i64 {
    home.count("SELECT COUNT(*) FROM tasks")
}

#[test]
fn decompose_creates_children_and_promotes_root() {
    let home = Home::new();
    let tid = home.create("ship a feature", &["--triage"]);
    assert_eq!(home.status(&tid), "triage");
    let children = json!([
        {"title": "research", "body": "look at prior art", "assignee": "researcher", "parents": []},
        {"title": "build it", "body": "write code", "assignee": "engineer", "parents": [0]}
    ]);
    let ids = child_ids(&decompose(
        &home,
        &tid,
        &children,
        &["--root-assignee", "orchestrator"],
    ));
    assert_eq!(ids.len(), 2);
    let root = home.task(&tid);
    assert_eq!(root["status"], "todo");
    assert_eq!(root["assignee"], "orchestrator");
    let (c0, c1) = (home.task(&ids[0]), home.task(&ids[1]));
    assert_eq!(
        (c0["status"].as_str(), c0["assignee"].as_str()),
        (Some("ready"), Some("researcher"))
    );
    assert_eq!(
        (c1["status"].as_str(), c1["assignee"].as_str()),
        (Some("todo"), Some("engineer"))
    );
}

#[test]
fn decompose_returns_none_when_task_missing() {
    let home = Home::new();
    let before = task_count(&home);
    let run = decompose(
        &home,
        "t_00000000",
        &json!([{"title": "x"}]),
        &["--root-assignee", "orch"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("no task `t_00000000`"),
        "{}",
        run.stderr
    );
    assert_eq!(task_count(&home), before);
}

#[test]
fn decompose_returns_none_when_task_not_in_triage() {
    let home = Home::new();
    let tid = home.create("already a real task", &[]);
    let run = decompose(
        &home,
        &tid,
        &json!([{"title": "x"}]),
        &["--root-assignee", "orch"],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("this needs it in triage"),
        "{}",
        run.stderr
    );
    assert_eq!(task_count(&home), 1);
}

#[test]
fn decompose_empty_children_returns_none() {
    let home = Home::new();
    let tid = home.create("rough idea", &["--triage"]);
    let run = decompose(&home, &tid, &json!([]), &["--root-assignee", "orch"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("the list of children is empty"),
        "{}",
        run.stderr
    );
    assert_eq!(home.status(&tid), "triage");
}

#[test]
fn decompose_rejects_self_parent() {
    let home = Home::new();
    let tid = home.create("rough idea", &["--triage"]);
    let run = decompose(&home, &tid, &json!([{"title": "x", "parents": [0]}]), &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("child 0 names itself as its parent"),
        "{}",
        run.stderr
    );
}

#[test]
fn decompose_rejects_out_of_range_parent() {
    let home = Home::new();
    let tid = home.create("rough idea", &["--triage"]);
    let run = decompose(&home, &tid, &json!([{"title": "x", "parents": [5]}]), &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("child 0 names parent 5"),
        "{}",
        run.stderr
    );
}

#[test]
fn decompose_rejects_cyclic_parents() {
    let home = Home::new();
    let tid = home.create("rough idea", &["--triage"]);
    let children = json!([{"title": "A", "parents": [1]}, {"title": "B", "parents": [0]}]);
    let run = decompose(&home, &tid, &children, &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("form a cycle"), "{}", run.stderr);
    assert_eq!(task_count(&home), 1);
}

#[test]
fn decompose_records_audit_comment_and_event() {
    let home = Home::new();
    let tid = home.create("rough idea", &["--triage"]);
    let children = json!([{"title": "task A", "assignee": "researcher"}]);
    child_ids(&decompose(
        &home,
        &tid,
        &children,
        &["--root-assignee", "orch"],
    ));
    let comments = home.json(&["show", &tid])["comments"].clone();
    assert!(
        comments
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["body"].as_str().unwrap_or("").contains("Decomposed into")),
        "{comments}"
    );
    assert!(home.kinds(&tid).contains(&"decomposed".to_owned()));
}

#[test]
fn decompose_children_inherit_dir_workspace() {
    let home = Home::new();
    let proj = home.k.home().join("myproject");
    let tid = home.create(
        "codegen root",
        &[
            "--assignee",
            "worker",
            "--workspace",
            &format!("dir:{}", proj.display()),
            "--triage",
        ],
    );
    let children = json!([{"title": "part A"}, {"title": "part B", "parents": [0]}]);
    let ids = child_ids(&decompose(
        &home,
        &tid,
        &children,
        &["--root-assignee", "orchestrator"],
    ));
    assert_eq!(ids.len(), 2);
    for id in &ids {
        let t = home.task(id);
        assert_eq!(t["workspace_kind"], "dir");
        assert_eq!(t["workspace_path"], proj.to_str().unwrap());
    }
}

#[test]
fn decompose_children_stay_scratch_when_root_scratch() {
    let home = Home::new();
    let tid = home.create(
        "scratch root",
        &["--assignee", "worker", "--workspace", "scratch", "--triage"],
    );
    let ids = child_ids(&decompose(&home, &tid, &json!([{"title": "s1"}]), &[]));
    let t = home.task(&ids[0]);
    assert_eq!(t["workspace_kind"], "scratch");
    assert!(t["workspace_path"].is_null(), "{t}");
}

#[test]
fn decompose_per_child_workspace_override() {
    let home = Home::new();
    let proj = home.k.home().join("myproject");
    let other = home.k.home().join("other-repo");
    let tid = home.create(
        "root",
        &[
            "--assignee",
            "worker",
            "--workspace",
            &format!("dir:{}", proj.display()),
            "--triage",
        ],
    );
    let children = json!([
        {"title": "override", "workspace_kind": "dir", "workspace_path": other.to_str().unwrap()},
        {"title": "inherit"}
    ]);
    let ids = child_ids(&decompose(
        &home,
        &tid,
        &children,
        &["--root-assignee", "orchestrator"],
    ));
    assert_eq!(
        home.task(&ids[0])["workspace_path"],
        other.to_str().unwrap()
    );
    assert_eq!(home.task(&ids[1])["workspace_path"], proj.to_str().unwrap());
}
