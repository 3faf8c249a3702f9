//! End to end: every documented way to select a board (the default, `boards create SLUG`,
//! `boards create SLUG --url`, `[boards.<slug>] url` in `kanban.toml`, `$HERMES_KANBAN_DB` as a
//! path and as a URL, `boards switch`) × the commands that write files for a board (the
//! dispatcher's lock, a worker's log and its workspace), on SQLite and PostgreSQL. A board
//! named only by a URL has no folder in the home until something needs one: each of these
//! makes what it needs on first use (issue 24: the dispatch lock's folder was never made). The
//! matrix runs in direct mode and in owner mode (the owner's managed worker writes the log and
//! the workspace).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary
#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

mod dispatch_support;

use std::process::Command;
use std::time::Duration;

use dispatch_support::{Home, config, wait_output};
use kanban_pgwire::cluster::TestCluster;

fn fresh_url(what: &str) -> String {
    let cluster = TestCluster::shared().expect("a PostgreSQL test server");
    let name = cluster.fresh_database(what).expect("create a database");
    cluster.url(&name)
}

/// How a board is chosen: the arguments before the subcommand and the environment.
struct Selection {
    name: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
}

impl Selection {
    fn kanban(&self, home: &Home, args: &[&str]) -> Command {
        let mut all: Vec<&str> = self.args.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        let mut cmd = home.kanban(&all);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    fn ok(&self, home: &Home, args: &[&str]) -> String {
        let out = self.kanban(home, args).output().unwrap();
        assert!(
            out.status.success(),
            "{}: kanban {args:?}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

fn run_one_task(home: &Home, sel: &Selection) {
    let id = sel.ok(
        home,
        &[
            "create",
            "writes in its workspace",
            "--assignee",
            "sh",
            "--body",
            "pwd; echo made > made.txt",
        ],
    );
    let out = wait_output(
        sel.kanban(home, &["dispatch", "--until-idle"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{}: dispatch: {}",
        sel.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: serde_json::Value =
        serde_json::from_str(&sel.ok(home, &["show", &id, "--json"])).unwrap();
    assert_eq!(shown["task"]["status"], "done", "{}: {shown}", sel.name);
    // The worker's log names its workspace (its `pwd`), where its file is.
    let log = sel.ok(home, &["logs", &id]);
    let workspace = log
        .lines()
        .find(|l| l.contains("workspaces"))
        .unwrap_or_else(|| panic!("{}: no workspace in the log: {log}", sel.name));
    // That place is the one recorded on the task, and being a finished scratch workspace, it is
    // gone (`workspace_removed`).
    assert_eq!(
        shown["task"]["workspace_path"].as_str(),
        Some(workspace.trim()),
        "{}: {shown}",
        sel.name
    );
    assert!(
        !std::path::Path::new(workspace.trim()).exists(),
        "{}: {workspace}",
        sel.name
    );
    let events = sel.ok(home, &["events", &id]);
    assert!(
        events.contains("workspace_removed"),
        "{}: {events}",
        sel.name
    );
}

#[test]
fn every_way_to_select_a_board_dispatches_logs_and_makes_workspaces_on_both_stores() {
    every_way_to_select_a_board("", "direct");
}

#[test]
fn in_owner_mode_every_way_to_select_a_board_dispatches_logs_and_makes_workspaces() {
    every_way_to_select_a_board("mode = \"owner\"", "owner");
}

/// The matrix under `[dispatch]` lines `dispatch` (each database named after `what`).
fn every_way_to_select_a_board(dispatch: &str, what: &str) {
    let home = Home::new(&format!(
        "{}\n[boards.pgtoml]\nurl = \"{}\"\n",
        config(dispatch),
        fresh_url(&format!("sel_toml_{what}"))
    ));
    let elsewhere = tempfile::tempdir().unwrap();
    let db_path = elsewhere.path().join("other.db");
    let plain = |name| Selection {
        name,
        args: vec![],
        env: vec![],
    };
    let board = |name, slug: &str| Selection {
        name,
        args: vec!["--board".into(), slug.into()],
        env: vec![],
    };
    plain("setup").ok(&home, &["boards", "create", "work"]);
    let pg_url = fresh_url(&format!("sel_create_{what}"));
    plain("setup").ok(&home, &["boards", "create", "pgcreated", "--url", &pg_url]);
    let selections = [
        plain("the default board"),
        board("boards create SLUG", "work"),
        board("boards create SLUG --url", "pgcreated"),
        board("[boards.<slug>] url in kanban.toml", "pgtoml"),
        Selection {
            name: "HERMES_KANBAN_DB as a path",
            args: vec![],
            env: vec![("HERMES_KANBAN_DB", db_path.display().to_string())],
        },
        Selection {
            name: "HERMES_KANBAN_DB as a URL",
            args: vec![],
            // A board named by a URL in the variable is never created there: the one
            // `boards create --url` made.
            env: vec![("HERMES_KANBAN_DB", pg_url.clone())],
        },
    ];
    for sel in &selections {
        if sel.name == "HERMES_KANBAN_DB as a path" {
            // A file board is made on purpose, never by a typo in a variable.
            sel.ok(&home, &["init"]);
        }
        run_one_task(&home, sel);
    }
    // `boards switch` last: it changes what "no flag" means for the rest of the home.
    plain("setup").ok(&home, &["boards", "switch", "pgtoml"]);
    run_one_task(&home, &plain("boards switch to a kanban.toml URL board"));
    // Owners the submitters started outlive the dispatcher by design: stop them.
    let _ = plain("teardown")
        .kanban(&home, &["owner", "stop", "--profile", "sh"])
        .output();
}
