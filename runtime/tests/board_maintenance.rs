//! Board maintenance end to end (issue 30 item 7), on SQLite and on PostgreSQL boards
//! (`kanban_pgwire::cluster::TestCluster`): `boards list` with task counts and archived boards,
//! `boards rename`.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

use kanban_pgwire::cluster::TestCluster;
use kanban_tests::Kanban;

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

fn fresh_url(what: &str) -> String {
    let cluster = TestCluster::shared().expect("a PostgreSQL test server");
    let name = cluster.fresh_database(what).expect("create a database");
    cluster.url(&name)
}

/// The two stores a board `slug` can be created in: `boards create SLUG [--url URL]`.
fn create_board(k: &Kanban, slug: &str, postgres: bool) {
    if postgres {
        let url = fresh_url(slug);
        k.ok(&["boards", "create", slug, "--url", &url]);
    } else {
        k.ok(&["boards", "create", slug]);
    }
}

/// The `boards list --json` entry of `slug` (the live one, not an archived folder).
fn listed(k: &Kanban, slug: &str) -> serde_json::Value {
    let all = k.json(&["boards", "list"]);
    all.as_array()
        .unwrap()
        .iter()
        .find(|e| e["slug"] == slug && e["archived_path"].is_null())
        .unwrap_or_else(|| panic!("{slug} not in {all}"))
        .clone()
}

fn counts_and_names(postgres: bool) {
    let k = kanban();
    create_board(&k, "ops-team", postgres);
    let b = ["--board", "ops-team"];
    let on = |args: &[&str]| [&b[..], args].concat();
    let a = k.create("a", &b);
    k.create("b", &b);
    let c = k.create("c", &b);
    k.ok(&on(&["complete", &a, "--summary", "s", "--force"]));
    k.ok(&on(&["archive", &c]));
    let e = listed(&k, "ops-team");
    assert_eq!(e["name"], "Ops Team", "{e}");
    assert_eq!(e["counts"]["total"], 3, "{e}");
    assert_eq!(e["counts"]["open"], 1, "{e}");
    assert_eq!(e["counts"]["by_status"]["ready"], 1, "{e}");
    assert_eq!(e["counts"]["by_status"]["done"], 1, "{e}");
    assert_eq!(e["counts"]["by_status"]["archived"], 1, "{e}");
    assert_eq!(e["archived"], false, "{e}");
    assert_eq!(e["store"], if postgres { "postgres" } else { "sqlite" });
    let text = k.ok(&["boards", "list"]);
    assert!(
        text.lines()
            .any(|l| l.contains("ops-team \"Ops Team\" 3 tasks, 1 open")),
        "{text}"
    );

    k.ok(&["boards", "rename", "ops-team", "  Operations (EU)  "]);
    let e = listed(&k, "ops-team");
    assert_eq!(e["name"], "Operations (EU)", "{e}");
    // The slug is unchanged: the board is still reached by it.
    assert_eq!(k.json(&on(&["list"])).as_array().unwrap().len(), 2);
    assert!(k.ok(&["boards", "list"]).contains("ops-team \"Operations (EU)\""));
}

#[test]
fn boards_list_counts_tasks_and_rename_sets_the_display_name_on_sqlite() {
    counts_and_names(false);
}

#[test]
fn boards_list_counts_tasks_and_rename_sets_the_display_name_on_postgres() {
    counts_and_names(true);
}

#[test]
fn bad_renames_are_refused_and_change_nothing() {
    let k = kanban();
    k.ok(&["boards", "create", "ops"]);
    k.ok(&["boards", "rename", "ops", "Ops"]);
    let meta = k.home().join("kanban/boards/ops/board.json");
    let before = std::fs::read(&meta).unwrap();
    for (args, needle) in [
        (vec!["boards", "rename", "ops", "  "], "cannot be empty"),
        (vec!["boards", "rename", "ops", "a\nb"], "control characters"),
        (vec!["boards", "rename", "ops", &"x".repeat(101)], "at most 100"),
        (vec!["boards", "rename", "nope", "X"], "nope"),
        (vec!["boards", "rename", "../x", "X"], "slug"),
    ] {
        let run = k.run(&args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        assert_eq!(std::fs::read(&meta).unwrap(), before, "{args:?}");
    }
    assert!(!k.home().join("kanban/boards/nope").exists());
}

#[test]
fn boards_marked_or_moved_aside_by_the_original_are_listed_as_archived() {
    let k = kanban();
    k.ok(&["boards", "create", "old"]);
    k.ok(&["boards", "create", "gone"]);
    k.create("t", &["--board", "gone"]);
    let boards = k.home().join("kanban/boards");
    // The original's dashboard marks a board archived in its board.json …
    std::fs::write(boards.join("old/board.json"), "{\"archived\": true}").unwrap();
    // … and its `boards rm` moves the folder to `_archived/<slug>-<epoch>`.
    std::fs::create_dir_all(boards.join("_archived")).unwrap();
    std::fs::rename(boards.join("gone"), boards.join("_archived/gone-1700000000")).unwrap();
    let e = listed(&k, "old");
    assert_eq!(e["archived"], true, "{e}");
    let all = k.json(&["boards", "list"]);
    let gone = all
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["slug"] == "gone")
        .unwrap_or_else(|| panic!("{all}"));
    assert_eq!(gone["archived"], true, "{gone}");
    assert_eq!(gone["archived_at"], 1_700_000_000, "{gone}");
    assert_eq!(gone["counts"]["total"], 1, "{gone}");
    assert!(gone["archived_path"].as_str().unwrap().ends_with("gone-1700000000"));
    let text = k.ok(&["boards", "list"]);
    assert!(text.contains("old \"Old\" 0 tasks, 0 open (archived)"), "{text}");
    assert!(text.contains("gone \"Gone\" 1 tasks, 1 open (archived at "), "{text}");
}
