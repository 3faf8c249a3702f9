//! `tests/hermes_cli/test_kanban_cli.py`: the command surface (create, list, show, block, assign,
//! link, reclaim, help and usage errors, board selection), through the `kanban` binary. The
//! original drives its `/kanban` chat command (`run_slash`); kanban is a command line, so these
//! tests run `kanban …` and read its exit code, stdout and stderr (differences table, "The
//! command line, not a chat command").

use std::process::Stdio;
use std::time::Duration;

use super::support::{Home, wait};

/// `kanban` with no arguments: the subcommands, on stderr, as a usage error.
fn bare(home: &Home) -> kanban_tests::Run {
    home.run(&[])
}

#[test]
fn run_slash_no_args_shows_usage() {
    let home = Home::new();
    let run = bare(&home);
    // Differences table, "The command line, not a chat command": a usage error, exit 2.
    assert_eq!(run.code, 2, "{run:?}");
    let out = run.stderr.to_lowercase();
    assert!(out.contains("kanban"), "{out}");
    assert!(out.contains("create"), "{out}");
}

#[test]
fn run_slash_create_and_list() {
    let home = Home::new();
    // Differences table, "The command line, not a chat command": `create` prints the new id.
    let id = home.ok(&["create", "ship feature", "--assignee", "alice"]);
    assert!(id.starts_with("t_"), "{id}");
    let list = home.ok(&["list"]);
    assert!(list.contains("ship feature"), "{list}");
    assert!(list.contains("alice"), "{list}");
    assert!(list.contains(&id), "{list}");
}

#[test]
fn run_slash_create_with_parent_and_cascade() {
    let home = Home::new();
    let parent = home.ok(&["create", "parent", "--assignee", "alice"]);
    // Differences table, "The command line, not a chat command": the child's status is in
    // `create --json`'s answer.
    let child = home.json(&["create", "child", "--assignee", "bob", "--parent", &parent]);
    assert_eq!(child["status"], "todo", "{child}");
    home.ok(&["complete", &parent, "--summary", "done"]);
    let ready = home.ok(&["list", "--status", "ready"]);
    assert!(ready.contains("child"), "{ready}");
}

#[test]
fn run_slash_show_includes_comments() {
    let home = Home::new();
    let id = home.create("x", &[]);
    // Differences table, "The command line, not a chat command": the text is `--body`.
    home.ok(&["comment", &id, "--body", "source is paywalled"]);
    let show = home.ok(&["show", &id]);
    assert!(show.contains("source is paywalled"), "{show}");
}

#[test]
fn run_slash_block_unblock_cycle() {
    let home = Home::new();
    let id = home.create("x", &["--assignee", "alice"]);
    home.ok(&["claim", &id]);
    // Differences table, "The command line, not a chat command": the reason is `--reason`, and
    // the reply names the status reached.
    let blocked = home.ok(&["block", &id, "--reason", "need decision"]);
    assert!(blocked.contains("blocked"), "{blocked}");
    assert_eq!(home.status(&id), "blocked");
    let unblocked = home.ok(&["unblock", &id]);
    assert!(
        unblocked.contains(&id) && unblocked.contains("ready"),
        "{unblocked}"
    );
    assert_eq!(home.status(&id), "ready");
}

#[test]
fn run_slash_json_output() {
    let home = Home::new();
    // Differences table, "The command line, not a chat command": `create --json` answers
    // `{id, status, existing}`; the task itself is `show --json`'s.
    let created = home.json(&["create", "jsontask", "--assignee", "alice"]);
    assert_eq!(created["status"], "ready", "{created}");
    assert_eq!(created["existing"], false, "{created}");
    let task = home.task(created["id"].as_str().unwrap());
    assert_eq!(task["title"], "jsontask", "{task}");
    assert_eq!(task["assignee"], "alice", "{task}");
    assert_eq!(task["status"], "ready", "{task}");
}

#[test]
fn run_slash_dispatch_dry_run_counts() {
    let home = Home::new();
    let a = home.create("a", &["--assignee", "done"]);
    let b = home.create("b", &["--assignee", "done"]);
    // Differences table, "The command line, not a chat command": a line per task it would spawn.
    let out = home.ok(&["dispatch", "--dry-run"]);
    for id in [&a, &b] {
        assert!(out.contains(&format!("would spawn {id}")), "{out}");
    }
    let report = home.json(&["dispatch", "--dry-run"]);
    assert_eq!(report["dry_run"], true, "{report}");
    assert_eq!(report["spawned"].as_array().unwrap().len(), 2, "{report}");
    // A dry run changes nothing.
    assert_eq!(home.status(&a), "ready");
    assert_eq!(home.status(&b), "ready");
}

#[test]
fn run_slash_usage_error_returns_message() {
    let home = Home::new();
    let run = home.run(&["create"]);
    assert_eq!(run.code, 2, "{run:?}");
    let err = run.stderr.to_lowercase();
    assert!(err.contains("usage") && err.contains("error"), "{err}");
}

#[test]
fn run_slash_assign_reassigns() {
    let home = Home::new();
    let id = home.create("x", &["--assignee", "alice"]);
    // Differences table, "The command line, not a chat command": kanban's wording.
    let out = home.ok(&["assign", &id, "bob"]);
    assert!(out.contains("assigned to bob"), "{out}");
    let show = home.ok(&["show", &id]);
    assert!(show.contains("bob"), "{show}");
}

#[test]
fn run_slash_reassign_with_reclaim_flag() {
    let home = Home::new();
    let tid = home.create("x", &["--assignee", "orig"]);
    let at = super::support::now();
    home.sql(&format!(
        "UPDATE tasks SET status = 'running', claim_lock = 'h:deadbeef', claim_expires = {exp},
           worker_pid = 4242 WHERE id = '{tid}';
         INSERT INTO task_runs (task_id, status, claim_lock, claim_expires, worker_pid, started_at)
           VALUES ('{tid}', 'running', 'h:deadbeef', {exp}, 4242, {at});
         UPDATE tasks SET current_run_id = last_insert_rowid() WHERE id = '{tid}';",
        exp = at + 3600
    ));
    // Differences table, "The command line, not a chat command": kanban's wording.
    let out = home.ok(&[
        "reassign",
        &tid,
        "newbie",
        "--reclaim",
        "--reason",
        "switch",
    ]);
    assert!(out.contains("reassigned from orig to newbie"), "{out}");
    let show = home.ok(&["show", &tid]);
    assert!(show.contains("newbie"), "{show}");
    assert_eq!(home.event(&tid, "reclaimed")["payload"]["reason"], "switch");
}

#[test]
fn run_slash_link_unlink() {
    let home = Home::new();
    let a = home.create("a", &[]);
    let b = home.create("b", &[]);
    // Differences table, "The command line, not a chat command": kanban's wording.
    let linked = home.ok(&["link", &a, &b]);
    assert!(linked.contains(&format!("{b} depends on {a}")), "{linked}");
    let show = home.ok(&["show", &b]);
    assert!(show.contains("todo"), "{show}");
    assert_eq!(home.status(&b), "todo");
    let unlinked = home.ok(&["unlink", &a, &b]);
    assert!(unlinked.contains("no longer depends"), "{unlinked}");
    assert_eq!(home.status(&b), "ready");
}

#[test]
fn kanban_in_autocomplete_table() {
    // The original's slash-command autocomplete table; kanban's is the shell completion script.
    let home = Home::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = home.ok(&["completions", shell]);
        for sub in ["create", "dispatch"] {
            assert!(script.contains(sub), "{shell} completions lack {sub}");
        }
    }
}

#[test]
fn run_slash_reclaim_running_task() {
    let home = Home::new();
    let id = home.ok(&["create", "stuck worker task", "--assignee", "broken-model"]);
    home.stage_running(&id, "5e1f0c2a", 4242);
    assert_eq!(home.status(&id), "running");
    // Differences table, "The command line, not a chat command": kanban's wording.
    let out = home.ok(&["reclaim", &id, "--reason", "test"]);
    assert!(out.contains("reclaimed"), "{out}");
    let show = home.ok(&["show", &id]);
    assert!(show.to_lowercase().contains("ready"), "{show}");
    assert_eq!(home.status(&id), "ready");
    assert_eq!(home.outcomes(&id), ["reclaimed"]);
}

#[test]
fn run_slash_bare_returns_curated_help() {
    let home = Home::new();
    let run = bare(&home);
    // Differences table, "The command line, not a chat command": the short list of
    // subcommands is the usage error of bare `kanban` (exit 2, stderr).
    assert_eq!(run.code, 2, "{run:?}");
    let out = run.stderr;
    assert!(out.contains("kanban"), "{out}");
    assert!(out.contains("list") && out.contains("show"), "{out}");
    assert!(out.len() < 2000, "{} characters: {out}", out.len());
    assert!(!out.to_lowercase().contains("usage error"), "{out}");
}

#[test]
fn run_slash_help_aliases_match_bare() {
    let home = Home::new();
    // Differences table, "The command line, not a chat command": `help`, `--help` and `-h`
    // print one help (exit 0); `?` is an unknown subcommand.
    let help = home.ok(&["help"]);
    assert!(help.contains("dispatch"), "{help}");
    for alias in ["--help", "-h"] {
        assert_eq!(home.ok(&[alias]), help, "{alias}");
    }
    let run = home.run(&["?"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("'?'"), "{}", run.stderr);
}

#[test]
fn run_slash_subcommand_help_returns_help_text() {
    let home = Home::new();
    // Differences table, "The command line, not a chat command": `kanban show` and `[ID]`.
    let out = home.ok(&["show", "-h"]);
    assert!(out.contains("kanban show"), "{out}");
    assert!(out.contains("[ID]"), "{out}");
    assert!(out.contains("Task id"), "{out}");
}

#[test]
fn run_slash_unknown_action_friendly_error() {
    let home = Home::new();
    // Differences table, "The command line, not a chat command": clap's usage error.
    let run = home.run(&["frobnicate"]);
    assert_eq!(run.code, 2, "{run:?}");
    let err = run.stderr;
    assert!(err.contains("kanban"), "{err}");
    assert!(err.contains("frobnicate"), "{err}");
    assert!(!err.contains("kanban kanban"), "{err}");
    assert!(!err.contains("(usage error: "), "{err}");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn run_slash_missing_required_arg_friendly_error() {
    let home = Home::new();
    // Differences table, "The command line, not a chat command": outside a worker a bare
    // `kanban show` is a usage error asking for the task id.
    let run = home.run(&["show"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("kanban show"), "{}", run.stderr);
    assert!(run.stderr.contains("task id"), "{}", run.stderr);
}

#[test]
fn run_slash_board_override_restores_prior_env() {
    // The original checks that `--board` does not leak into the process environment; kanban's
    // `--board` is one command's, so the next command without it sees `$HERMES_KANBAN_BOARD`.
    let home = Home::new();
    home.ok(&["boards", "create", "alpha"]);
    home.ok(&["boards", "create", "beta"]);
    home.ok(&["--board", "alpha", "create", "alpha-task"]);
    home.ok(&["--board", "beta", "create", "beta-task"]);
    let env = [("HERMES_KANBAN_BOARD", "beta")];
    let alpha = home.run_env(&env, &["--board", "alpha", "list"]);
    assert_eq!(alpha.code, 0, "{alpha:?}");
    assert!(alpha.stdout.contains("alpha-task"), "{alpha:?}");
    assert!(!alpha.stdout.contains("beta-task"), "{alpha:?}");
    let beta = home.run_env(&env, &["list"]);
    assert_eq!(beta.code, 0, "{beta:?}");
    assert!(beta.stdout.contains("beta-task"), "{beta:?}");
    assert!(!beta.stdout.contains("alpha-task"), "{beta:?}");
}

#[test]
fn kanban_show_json_includes_runtime_limit() {
    let home = Home::new();
    let bounded = home.create("bounded task", &["--max-runtime", "2700"]);
    let uncapped = home.create("uncapped task", &[]);
    assert_eq!(home.task(&bounded)["max_runtime_seconds"], 2700);
    assert!(home.task(&uncapped)["max_runtime_seconds"].is_null());
}

#[test]
fn kanban_show_text_renders_graph_with_open_connection() {
    let home = Home::new();
    let parent = home.create("parent task", &[]);
    let child = home.create("child task", &[]);
    home.ok(&["link", &parent, &child]);
    let out = home.ok(&["show", &child]);
    assert!(out.contains("child task"), "{out}");
    assert!(out.contains(&parent), "{out}");
    assert!(
        !out.contains("Cannot operate on a closed database"),
        "{out}"
    );
}

#[test]
fn kanban_edit_updates_documented_task_fields() {
    let home = Home::new();
    let id = home.create("old title", &["--body", "old body", "--priority", "2"]);
    home.ok(&[
        "edit",
        &id,
        "--title",
        "new title",
        "--body",
        "new body",
        "--priority",
        "70",
    ]);
    let task = home.task(&id);
    assert_eq!(task["title"], "new title", "{task}");
    assert_eq!(task["body"], "new body", "{task}");
    assert_eq!(task["priority"], 70, "{task}");
    // Differences table, "An edit is one event": `edited` naming the fields, no
    // `reprioritized`.
    let edited = home.event(&id, "edited")["payload"].clone();
    assert_eq!(
        edited["fields"],
        serde_json::json!(["title", "body", "priority"]),
        "{edited}"
    );
    assert!(!home.kinds(&id).iter().any(|k| k == "reprioritized"));
}

#[test]
fn worker_link_preserves_foreign_child_rules() {
    let home = Home::new();
    let worker = home.create("worker", &[]);
    let run_id = home.json(&["claim", &worker, "--claimer", "worker"])["run_id"]
        .as_i64()
        .unwrap()
        .to_string();
    let parent = home.create("unfinished parent", &[]);
    let ready_child = home.create("foreign ready child", &[]);
    let running_child = home.create("foreign running child", &[]);
    home.json(&["claim", &running_child, "--claimer", "other"]);
    let env = [
        ("HERMES_KANBAN_TASK", worker.as_str()),
        ("HERMES_KANBAN_RUN_ID", run_id.as_str()),
    ];
    // Differences table, "A worker links nothing but its own task": a worker may not give a
    // foreign card a parent (exit 3, naming its own task), running or not; and its own running
    // card gains no parent either ("A running child gains no parent").
    let ready = home.run_env(&env, &["link", &parent, &ready_child]);
    assert_eq!(ready.code, 3, "{ready:?}");
    assert!(ready.stderr.contains(&worker), "{}", ready.stderr);
    let running = home.run_env(&env, &["link", &parent, &running_child]);
    assert_eq!(running.code, 3, "{running:?}");
    let own = home.run_env(&env, &["link", &parent, &worker]);
    assert_eq!(own.code, 3, "{own:?}");
    assert!(own.stderr.contains("running"), "{}", own.stderr);
    for id in [&ready_child, &running_child, &worker] {
        let parents = home.json(&["show", id])["parents"].clone();
        assert_eq!(parents, serde_json::json!([]), "{id}: {parents}");
    }
    // The same link from an operator's shell is allowed.
    home.ok(&["link", &parent, &ready_child]);
    assert_eq!(home.status(&ready_child), "todo");
}

#[test]
fn board_override_is_isolated_per_concurrent_call() {
    let home = Home::new();
    home.ok(&["boards", "create", "alpha"]);
    home.ok(&["boards", "create", "beta"]);
    let start = |board: &str, title: &str| {
        home.k
            .cmd()
            .args(["--board", board, "create", title])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start("alpha", "alpha-task"), start("beta", "beta-task"));
    for (board, child) in [("alpha", a), ("beta", b)] {
        let out = wait(child, Duration::from_secs(30));
        assert!(out.status.success(), "{board}: {out:?}");
    }
    let titles = |board: &str| -> Vec<String> {
        home.json(&["--board", board, "list"])
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(titles("alpha"), ["alpha-task"]);
    assert_eq!(titles("beta"), ["beta-task"]);
}

#[test]
fn run_slash_context_output_format() {
    let home = Home::new();
    let tid = home.create(
        "tech spec",
        &["--assignee", "alice", "--body", "write an RFC"],
    );
    home.ok(&[
        "comment",
        &tid,
        "--body",
        "remember to include performance section",
    ]);
    let ctx = home.ok(&["context", &tid]);
    assert!(ctx.contains("tech spec"), "{ctx}");
    assert!(ctx.contains("write an RFC"), "{ctx}");
    assert!(ctx.contains("performance section"), "{ctx}");
}
