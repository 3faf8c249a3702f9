//! Triage by an agent end to end (README "Task graphs"): `decompose --with PROFILE`,
//! `decompose --all --with PROFILE` and `specify --with PROFILE` run a scripted agent profile
//! (a `command` agent that saves its prompt and prints a prepared answer) and apply a valid
//! answer; an invalid graph, an answer with no JSON and a failing agent change nothing.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use kanban_tests::Kanban;
use serde_json::Value;

/// A home whose `planner` profile answers with the file `answer.txt` (and saves its prompt in
/// `prompt.txt`), and two profiles to route work to.
fn home() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    let dir = k.home().display().to_string();
    let config = format!(
        "[profiles.planner]\nagent = \"command\"\ndescription = \"plans work\"\n\
         command = [\"sh\", \"-c\", \"cat > '{dir}/prompt.txt'; cat '{dir}/answer.txt'\"]\n\n\
         [profiles.coder]\nagent = \"builtin:complete\"\ndescription = \"writes Rust code\"\n\n\
         [profiles.reviewer]\nagent = \"builtin:complete\"\ndescription = \"reviews changes\"\n\n\
         [profiles.broken]\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"echo no luck >&2; exit 1\"]\n"
    );
    std::fs::write(k.home().join("kanban.toml"), config).unwrap();
    k.ok(&["init"]);
    k
}

fn answer(k: &Kanban, text: &str) {
    std::fs::write(k.home().join("answer.txt"), text).unwrap();
}

fn prompt(k: &Kanban) -> String {
    std::fs::read_to_string(k.home().join("prompt.txt")).unwrap_or_default()
}

fn count(k: &Kanban) -> usize {
    k.json(&["list", "--all"]).as_array().unwrap().len()
}

#[test]
fn an_agents_graph_is_applied_and_a_bad_answer_changes_nothing() {
    let k = home();
    let root = k.create(
        "Add CSV export",
        &["--triage", "--body", "Users want their data as CSV."],
    );
    answer(
        &k,
        "Here is the plan:\n```json\n{\"children\": [\
         {\"title\": \"Write the exporter\", \"body\": \"done when tested\", \"assignee\": \"coder\"},\
         {\"title\": \"Review the exporter\", \"assignee\": \"reviewer\", \"parents\": [0]}]}\n```\n",
    );
    let d = k.json(&["decompose", &root, "--with", "planner"]);
    let children: Vec<String> = d["child_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(children.len(), 2, "{d}");
    let first = k.json(&["show", &children[0]]);
    assert_eq!(first["task"]["assignee"], "coder");
    assert_eq!(first["task"]["status"], "ready");
    let second = k.json(&["show", &children[1]]);
    assert_eq!(second["task"]["status"], "todo");
    assert_eq!(second["parents"][0]["id"], children[0].as_str());
    assert_eq!(k.status(&root), "todo");
    // The agent saw the card and what each profile is for.
    let p = prompt(&k);
    assert!(
        p.contains("Add CSV export") && p.contains("Users want their data as CSV."),
        "{p}"
    );
    assert!(
        p.contains("`coder` (builtin:complete): writes Rust code"),
        "{p}"
    );

    let before = count(&k);
    for (bad, reason) in [
        (
            "{\"children\": [{\"title\": \"a\", \"parents\": [1]}, {\"title\": \"b\", \"parents\": [0]}]}",
            "cycle",
        ),
        ("{\"children\": [{\"body\": \"no title\"}]}", "title"),
        ("I could not decide.", "answered no JSON"),
        ("", "answered no JSON"),
    ] {
        let other = k.create("Another triage card", &["--triage"]);
        answer(&k, bad);
        let run = k.run(&["decompose", &other, "--with", "planner"]);
        assert_eq!(run.code, 1, "{bad}: {run:?}");
        assert!(
            run.stderr.contains(reason),
            "{bad}: want `{reason}` in {}",
            run.stderr
        );
        assert_eq!(k.status(&other), "triage", "nothing changed");
        k.ok(&["archive", &other]);
    }
    assert_eq!(
        count(&k),
        before + 4,
        "only the four cards themselves were created"
    );

    // A failing agent is an error naming its profile; a task out of triage is refused before
    // any agent runs.
    let other = k.create("Third", &["--triage"]);
    let run = k.run(&["decompose", &other, "--with", "broken"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("profile `broken`"), "{}", run.stderr);
    std::fs::remove_file(k.home().join("prompt.txt")).unwrap();
    let run = k.run(&["decompose", &root, "--with", "planner"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        prompt(&k).is_empty(),
        "no agent ran for a task out of triage"
    );
    let run = k.run(&["decompose", &other, "--with", "nobody"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("unknown profile `nobody`"),
        "{}",
        run.stderr
    );
    assert_eq!(
        k.run(&["decompose", &other]).code,
        2,
        "neither --children nor --with"
    );
    k.assert_fsck_clean();
}

#[test]
fn decompose_all_sweeps_every_triage_card_and_reports_the_ones_that_failed() {
    let k = home();
    let a = k.create("first idea", &["--triage"]);
    let b = k.create("second idea", &["--triage"]);
    answer(&k, "[{\"title\": \"only child\", \"assignee\": \"coder\"}]");
    let run = k.run(&["decompose", "--all", "--with", "planner"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("2 triage task(s), 0 failed"),
        "{}",
        run.stdout
    );
    assert_eq!(k.status(&a), "todo");
    assert_eq!(k.status(&b), "todo");

    let c = k.create("third idea", &["--triage"]);
    answer(&k, "nothing useful");
    let run = k.run(&["decompose", "--all", "--with", "planner"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains(&c), "{}", run.stderr);
    assert_eq!(k.status(&c), "triage");
    assert_eq!(k.run(&["decompose", "--all"]).code, 2, "--all needs --with");
}

#[test]
fn specify_with_an_agent_fills_the_card_in_and_moves_it_on() {
    let k = home();
    let id = k.create("csv thing", &["--triage"]);
    answer(
        &k,
        "{\"title\": \"Export tasks as CSV\", \"body\": \"Add `kanban export --csv`; done when tested.\", \"assignee\": \"coder\"}",
    );
    let s = k.json(&["specify", &id, "--with", "planner"]);
    assert_eq!(s["task_id"], id.as_str());
    let task = k.json(&["show", &id])["task"].clone();
    assert_eq!(task["title"], "Export tasks as CSV");
    assert_eq!(task["assignee"], "coder");
    assert_eq!(task["status"], "ready");
    let events = k.json(&["events", &id]);
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e: &Value| e["kind"] == "specified")
    );

    let other = k.create("vague", &["--triage"]);
    for bad in ["{\"assignee\": \"coder\"}", "{\"title\": 7}", "no json"] {
        answer(&k, bad);
        let run = k.run(&["specify", &other, "--with", "planner"]);
        assert_eq!(run.code, 1, "{bad}: {run:?}");
        assert_eq!(k.status(&other), "triage");
        assert_eq!(k.json(&["show", &other])["task"]["title"], "vague");
    }
    let run = k.run(&["specify", &other, "--with", "planner", "--title", "x"]);
    assert_eq!(run.code, 2, "--with and --title conflict");
}

/// [`home`] with `[dispatch] auto_decompose = "planner"` (one card per pass).
fn auto_home() -> Kanban {
    let k = home();
    let path = k.home().join("kanban.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        format!(
            "[dispatch]\ninterval_seconds = 0.05\nauto_decompose = \"planner\"\n\
             auto_decompose_per_tick = 1\n\n{config}"
        ),
    )
    .unwrap();
    k
}

#[test]
fn the_dispatcher_decomposes_triage_cards_with_the_auto_decompose_profile() {
    let k = auto_home();
    let first = k.create("Add CSV export", &["--triage"]);
    let second = k.create("Add JSON export", &["--triage"]);
    answer(
        &k,
        r#"{"children": [{"title": "Write it", "assignee": "coder"},
            {"title": "Review it", "assignee": "reviewer", "parents": [0]}]}"#,
    );
    let run = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");
    for root in [&first, &second] {
        assert!(
            run.stdout
                .contains(&format!("decomposed {root} into 2 children")),
            "{run:?}"
        );
        let kinds: Vec<String> = k
            .json(&["events", root])
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect();
        assert!(kinds.contains(&"decomposed".to_owned()), "{kinds:?}");
        // Its children ran (builtin agents) and it woke once they were done.
        assert_ne!(k.status(root), "triage");
    }
    // 2 roots + 2 × 2 children, and the children are done.
    assert_eq!(count(&k), 6);
    let done = k
        .json(&["list", "--all"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "done")
        .count();
    assert_eq!(done, 4);
    k.assert_fsck_clean();
}

#[test]
fn a_failed_auto_decomposition_leaves_the_card_in_triage_and_is_reported_once() {
    let k = auto_home();
    let card = k.create("Vague wish", &["--triage"]);
    answer(&k, "I would rather not plan this.");
    let run = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout
            .matches(&format!("decompose failed {card}"))
            .count(),
        1,
        "{run:?}"
    );
    assert!(run.stdout.contains("no JSON"), "{run:?}");
    assert_eq!(k.status(&card), "triage");
    assert_eq!(count(&k), 1);
}

#[test]
fn auto_decompose_must_name_a_defined_profile() {
    let k = home();
    let path = k.home().join("kanban.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    for (bad, says) in [
        ("auto_decompose = \"nobody\"", "auto_decompose"),
        (
            "auto_decompose = \"planner\"\nauto_decompose_per_tick = 0",
            "auto_decompose_per_tick",
        ),
    ] {
        std::fs::write(&path, format!("[dispatch]\n{bad}\n\n{config}")).unwrap();
        let card = k.create("Vague wish", &["--triage"]);
        let run = k.run(&["dispatch", "--until-idle"]);
        assert_ne!(run.code, 0, "{bad}: {run:?}");
        assert!(run.stderr.contains(says), "{bad}: {run:?}");
        assert_eq!(k.status(&card), "triage");
    }
}
