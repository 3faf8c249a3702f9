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
