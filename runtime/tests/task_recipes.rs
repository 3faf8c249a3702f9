//! Recipes and swarms end to end (README "Recipes and swarms"): a recipe with variables
//! instantiated twice with different values, `recipe export` round-tripping a graph, `swarm`
//! building workers → verifier → synthesizer, one transaction each (a late failure leaves
//! nothing), every bad input refused with a clear message and nothing created; a recipe on a
//! PostgreSQL board too.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use std::path::{Path, PathBuf};

use kanban_pgwire::cluster::TestCluster;
use kanban_tests::Kanban;
use serde_json::Value;

const FEATURE: &str = r#"
name = "feature"
description = "spec, build, review"

[vars.feature]
description = "what to build"

[vars.owner]
default = "coder"

[[task]]
key = "spec"
title = "Spec {{feature}}"
assignee = "planner"

[[task]]
key = "build"
title = "Build {{ feature }}"
body = "Implement {{feature}} per the spec."
assignee = "{{owner}}"
parents = ["spec"]

[[task]]
key = "review"
title = "Review {{feature}}"
assignee = "reviewer"
parents = ["build", "spec"]
priority = 2
"#;

fn kanban() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    k.ok(&["init"]);
    k
}

fn write(k: &Kanban, name: &str, text: &str) -> PathBuf {
    let path = k.home().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn task_count(k: &Kanban) -> usize {
    k.json(&["list", "--all"]).as_array().unwrap().len()
}

fn parents(k: &Kanban, id: &str) -> Vec<String> {
    let mut ps: Vec<String> = k.json(&["show", id])["parents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();
    ps.sort();
    ps
}

fn run_recipe(k: &Kanban, file: &Path, sets: &[&str]) -> Value {
    let mut args = vec!["recipe", "run", file.to_str().unwrap()];
    for set in sets {
        args.extend(["--set", set]);
    }
    k.json(&args)
}

#[test]
fn a_recipe_with_variables_makes_the_same_graph_twice_with_different_values() {
    let k = kanban();
    let file = write(&k, "feature.toml", FEATURE);
    let valid = k.json(&["recipe", "validate", file.to_str().unwrap()]);
    assert_eq!(valid["ok"], true);
    assert_eq!(valid["tasks"], 3);

    let shown = k.json(&[
        "recipe",
        "show",
        file.to_str().unwrap(),
        "--set",
        "feature=login",
    ]);
    assert_eq!(shown[2]["title"], "Review login");
    assert_eq!(shown[2]["parents"], serde_json::json!(["build", "spec"]));
    assert_eq!(task_count(&k), 0, "show creates nothing");

    for (feature, owner) in [("login", None), ("export", Some("owner=builder"))] {
        let set = format!("feature={feature}");
        let mut sets = vec![set.as_str()];
        sets.extend(owner);
        let ids = run_recipe(&k, &file, &sets);
        let id = |key: &str| ids[key].as_str().unwrap().to_owned();
        let spec = k.json(&["show", &id("spec")])["task"].clone();
        assert_eq!(spec["title"], format!("Spec {feature}"));
        assert_eq!(spec["status"], "ready");
        let build = k.json(&["show", &id("build")])["task"].clone();
        assert_eq!(build["title"], format!("Build {feature}"));
        assert_eq!(build["body"], format!("Implement {feature} per the spec."));
        assert_eq!(
            build["assignee"],
            if owner.is_some() { "builder" } else { "coder" }
        );
        assert_eq!(build["status"], "todo");
        let review = k.json(&["show", &id("review")])["task"].clone();
        assert_eq!(review["priority"], 2);
        assert_eq!(parents(&k, &id("build")), vec![id("spec")]);
        let mut both = vec![id("build"), id("spec")];
        both.sort();
        assert_eq!(parents(&k, &id("review")), both);
    }
    assert_eq!(task_count(&k), 6);
    k.assert_fsck_clean();
}

/// The tasks of an exported recipe, without its name and description.
fn exported_tasks(k: &Kanban, id: &str) -> toml::Value {
    let text = k.ok(&["recipe", "export", id]);
    let value: toml::Value = toml::from_str(&text).unwrap();
    value["task"].clone()
}

#[test]
fn recipe_export_round_trips_a_graph() {
    let k = kanban();
    let file = write(&k, "feature.toml", FEATURE);
    let first = run_recipe(&k, &file, &["feature=login"]);
    let exported = exported_tasks(&k, first["build"].as_str().unwrap());
    let out = k.home().join("exported.toml");
    k.ok(&[
        "recipe",
        "export",
        first["spec"].as_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let again = run_recipe(&k, &out, &[]);
    let second = exported_tasks(&k, again["task-1"].as_str().unwrap());
    assert_eq!(exported, second);
    assert_eq!(exported.as_array().unwrap().len(), 3);
    assert_eq!(exported[2]["title"].as_str(), Some("Review login"));
    // An existing --out file is never overwritten.
    let run = k.run(&[
        "recipe",
        "export",
        first["spec"].as_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot write"), "{}", run.stderr);
    // A decomposed graph exports with its root (linked under every child).
    let root = k.create("triage me", &["--triage"]);
    let children = write(
        &k,
        "children.json",
        r#"[{"title": "a"}, {"title": "b", "parents": [0]}]"#,
    );
    k.ok(&["decompose", &root, "--children", children.to_str().unwrap()]);
    let tasks = exported_tasks(&k, &root);
    let titles: Vec<&str> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["a", "b", "triage me"]);
}

#[test]
fn swarm_builds_workers_then_a_verifier_then_a_synthesizer() {
    let k = kanban();
    let made = k.json(&[
        "swarm",
        "Compare three caches",
        "--worker",
        "coder",
        "--workers",
        "3",
        "--verifier",
        "reviewer",
        "--synthesizer",
        "writer",
    ]);
    let workers: Vec<String> = made["worker_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(workers.len(), 3);
    for (i, w) in workers.iter().enumerate() {
        let t = k.json(&["show", w])["task"].clone();
        assert_eq!(t["status"], "ready");
        assert_eq!(t["assignee"], "coder");
        assert_eq!(
            t["title"],
            format!("Compare three caches (worker {} of 3)", i + 1)
        );
        assert!(
            t["body"]
                .as_str()
                .unwrap()
                .contains("Goal: Compare three caches")
        );
    }
    let verifier = made["verifier_id"].as_str().unwrap();
    let synthesizer = made["synthesizer_id"].as_str().unwrap();
    let mut sorted = workers.clone();
    sorted.sort();
    assert_eq!(parents(&k, verifier), sorted);
    assert_eq!(parents(&k, synthesizer), vec![verifier.to_owned()]);
    assert_eq!(k.status(verifier), "todo");
    assert_eq!(k.json(&["show", synthesizer])["task"]["assignee"], "writer");

    // The original's form: one card per --worker PROFILE:TITLE.
    let named = k.json(&[
        "swarm",
        "Survey",
        "--worker",
        "a:Read the papers",
        "--worker",
        "b:Run the benchmark",
        "--verifier",
        "v",
        "--synthesizer",
        "s",
    ]);
    let second = named["worker_ids"][1].as_str().unwrap();
    assert_eq!(
        k.json(&["show", second])["task"]["title"],
        "Run the benchmark"
    );
    assert_eq!(k.json(&["show", second])["task"]["assignee"], "b");

    let before = task_count(&k);
    for bad in [
        vec![
            "swarm",
            "g",
            "--worker",
            "a",
            "--verifier",
            "v",
            "--synthesizer",
            "s",
        ],
        vec![
            "swarm",
            "g",
            "--worker",
            "a:t",
            "--workers",
            "2",
            "--verifier",
            "v",
            "--synthesizer",
            "s",
        ],
        vec![
            "swarm",
            "g",
            "--worker",
            "a",
            "--workers",
            "0",
            "--verifier",
            "v",
            "--synthesizer",
            "s",
        ],
        vec![
            "swarm",
            " ",
            "--worker",
            "a:t",
            "--verifier",
            "v",
            "--synthesizer",
            "s",
        ],
    ] {
        let run = k.run(&bad);
        assert_eq!(run.code, 1, "{bad:?}: {run:?}");
        assert!(!run.stderr.is_empty());
    }
    let run = k.run(&["swarm", "g", "--worker", "a:t", "--verifier", "v"]);
    assert_eq!(run.code, 2, "a missing --synthesizer is a usage error");
    assert_eq!(task_count(&k), before, "a refused swarm creates nothing");
}

#[test]
fn every_bad_recipe_is_refused_with_its_reason_and_creates_nothing() {
    let k = kanban();
    let task = |extra: &str| format!("name = \"r\"\n[[task]]\nkey = \"a\"\ntitle = \"A\"\n{extra}");
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        (
            "name = \"r\"\n[[task]]\nkey = \"a\"\ntitle = \"A\"\ncolour = \"red\"\n".into(),
            vec![],
            "unknown field",
        ),
        ("this is not toml".into(), vec![], "not a recipe"),
        ("name = \"r\"\n".into(), vec![], "no [[task]]"),
        (
            task("") + "[[task]]\nkey = \"a\"\ntitle = \"B\"\n",
            vec![],
            "two tasks have the key `a`",
        ),
        (task("parents = [\"zzz\"]\n"), vec![], "names parent `zzz`"),
        (
            task("parents = [\"b\"]\n")
                + "[[task]]\nkey = \"b\"\ntitle = \"B\"\nparents = [\"a\"]\n",
            vec![],
            "cycle",
        ),
        (task("body = \"{{nope}}\"\n"), vec![], "does not declare"),
        (task("body = \"{{unclosed\"\n"), vec![], "unclosed"),
        (
            "name = \"r\"\n[vars.x]\n".to_owned() + &task("body = \"{{x}}\"\n")[10..],
            vec![],
            "has no default",
        ),
        (task(""), vec!["nope=1"], "declares no such variable"),
        (task(""), vec!["nope"], "expected NAME=VALUE"),
        (
            task("workspace = \"dir:relative/path\"\n"),
            vec![],
            "workspace",
        ),
        (task("branch = \"b\"\n"), vec![], "no worktree workspace"),
    ];
    for (i, (text, sets, reason)) in cases.iter().enumerate() {
        let file = write(&k, &format!("bad{i}.toml"), text);
        let mut args = vec!["recipe", "run", file.to_str().unwrap()];
        for set in sets {
            args.extend(["--set", set]);
        }
        let run = k.run(&args);
        assert_eq!(run.code, 1, "case {i} ({reason}): {run:?}");
        assert!(
            run.stderr.contains(reason),
            "case {i}: want `{reason}` in {}",
            run.stderr
        );
        if sets.is_empty() {
            let validate = k.run(&["recipe", "validate", file.to_str().unwrap()]);
            let refused_at_check = !matches!(i, 8 | 11 | 12);
            assert_eq!(
                validate.code != 0,
                refused_at_check,
                "case {i}: {validate:?}"
            );
        }
    }
    let missing = k.run(&["recipe", "run", "/nonexistent/recipe.toml"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("cannot read the recipe"),
        "{}",
        missing.stderr
    );

    // A task the board refuses late (its branch) rolls back the tasks created before it.
    let late = write(
        &k,
        "late.toml",
        "name = \"late\"\n[[task]]\nkey = \"a\"\ntitle = \"A\"\n[[task]]\nkey = \"b\"\ntitle = \"B\"\n\
         parents = [\"a\"]\n[[task]]\nkey = \"c\"\ntitle = \"C\"\nparents = [\"b\"]\n\
         workspace = \"worktree\"\nbranch = \"bad..branch\"\n",
    );
    let run = k.run(&["recipe", "run", late.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(task_count(&k), 0, "nothing was created: {}", run.stderr);
    k.assert_fsck_clean();
}

#[test]
fn a_recipe_runs_on_a_postgresql_board() {
    let cluster =
        TestCluster::shared().expect("a PostgreSQL test server (see the README's Testing section)");
    let url = cluster.url(
        &cluster
            .fresh_database("recipes")
            .expect("create a database"),
    );
    let k = kanban();
    k.ok(&["boards", "create", "team", "--url", &url]);
    let file = write(&k, "feature.toml", FEATURE);
    let ids = k.json(&[
        "--board",
        "team",
        "recipe",
        "run",
        file.to_str().unwrap(),
        "--set",
        "feature=pg",
    ]);
    let review = ids["review"].as_str().unwrap();
    assert_eq!(
        k.json(&["--board", "team", "show", review])["parents"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let text = k.ok(&["--board", "team", "recipe", "export", review]);
    assert!(text.contains("title = \"Build pg\""), "{text}");
    let late = write(
        &k,
        "late.toml",
        "name = \"late\"\n[[task]]\nkey = \"a\"\ntitle = \"A\"\n[[task]]\nkey = \"c\"\ntitle = \"C\"\n\
         parents = [\"a\"]\nworkspace = \"worktree\"\nbranch = \"bad..branch\"\n",
    );
    assert_eq!(
        k.run(&["--board", "team", "recipe", "run", late.to_str().unwrap()])
            .code,
        1
    );
    assert_eq!(
        k.json(&["--board", "team", "list", "--all"])
            .as_array()
            .unwrap()
            .len(),
        3
    );
}
