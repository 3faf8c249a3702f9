//! The operator's everyday commands end to end (README "Everyday commands"): a body from a file
//! or standard input, `edit`, several ids in one command, id prefixes, `boards rm`, and the cron
//! job's own folder; each bad input a clear message with nothing changed.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary (stdin piped), bash and groff

use std::io::Write;
use std::process::Stdio;

use kanban_tests::{Kanban, Run};
use serde_json::Value;

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

/// `kanban <args>` with `input` on its standard input.
fn with_stdin(k: &Kanban, args: &[&str], input: &str) -> Run {
    let mut child = k
        .cmd()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap().into()
}

fn task(k: &Kanban, id: &str) -> Value {
    k.json(&["show", id])["task"].clone()
}

fn task_count(k: &Kanban) -> usize {
    k.json(&["list", "--all"]).as_array().unwrap().len()
}

fn kinds(k: &Kanban, id: &str) -> Vec<String> {
    k.json(&["events", id])
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// Renames task `from` to `to` in the database (both tasks and their events), to make two ids
/// that share a prefix.
fn rename(k: &Kanban, from: &str, to: &str) {
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    conn.execute("UPDATE tasks SET id = ?2 WHERE id = ?1", [from, to])
        .unwrap();
    conn.execute(
        "UPDATE task_events SET task_id = ?2 WHERE task_id = ?1",
        [from, to],
    )
    .unwrap();
}

#[test]
fn create_reads_the_body_from_a_file_or_stdin_and_never_stores_a_dash() {
    let k = kanban();
    k.ok(&["init"]);
    let file = k.home().join("body.md");
    std::fs::write(&file, "line one\nline two\n").unwrap();
    let from_file = k.create("f", &["--body-file", file.to_str().unwrap()]);
    assert_eq!(task(&k, &from_file)["body"], "line one\nline two\n");

    let piped = with_stdin(
        &k,
        &["--json", "create", "s", "--body", "-"],
        "from stdin\n",
    );
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    let id: Value = serde_json::from_str(piped.stdout.trim()).unwrap();
    assert_eq!(task(&k, id["id"].as_str().unwrap())["body"], "from stdin\n");

    let plain = k.create("p", &["--body", "text", "--max-retries", "7"]);
    assert_eq!(task(&k, &plain)["body"], "text");
    assert_eq!(task(&k, &plain)["max_retries"], 7);

    let before = task_count(&k);
    let empty = with_stdin(&k, &["create", "e", "--body", "-"], "  \n");
    assert_eq!(empty.code, 1);
    assert!(
        empty.stderr.contains("standard input was empty"),
        "{}",
        empty.stderr
    );
    let missing = k.run(&["create", "m", "--body-file", "/nonexistent/body.md"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("cannot read the body file /nonexistent/body.md"),
        "{}",
        missing.stderr
    );
    let both = k.run(&["create", "b", "--body", "x", "--body-file", "/tmp"]);
    assert_eq!(both.code, 2, "{}", both.stderr);
    let retries = k.run(&["create", "r", "--max-retries", "0"]);
    assert_eq!(retries.code, 2, "{}", retries.stderr);
    assert_eq!(task_count(&k), before, "no bad create made a task");
}

#[test]
fn edit_changes_the_named_fields_and_records_an_event() {
    let k = kanban();
    let id = k.create("old title", &["--body", "old body", "--priority", "1"]);
    let e = k.json(&[
        "edit",
        &id,
        "--title",
        "new title",
        "--priority",
        "4",
        "--max-retries",
        "9",
    ]);
    assert_eq!(e["task_id"], id.as_str());
    assert_eq!(
        e["fields"],
        serde_json::json!(["title", "priority", "max_retries"])
    );
    let t = task(&k, &id);
    assert_eq!(t["title"], "new title");
    assert_eq!(t["body"], "old body", "an edit leaves unnamed fields alone");
    assert_eq!(t["priority"], 4);
    assert_eq!(t["max_retries"], 9);
    let events = k.json(&["events", &id]);
    let last = events.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "edited");
    assert_eq!(
        last["payload"]["fields"],
        serde_json::json!(["title", "priority", "max_retries"])
    );

    let piped = with_stdin(&k, &["edit", &id, "--body", "-"], "new body");
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert_eq!(piped.stdout.trim(), format!("edited {id}: body"));
    assert_eq!(task(&k, &id)["body"], "new body");

    let same = k.ok(&["edit", &id, "--priority", "4"]);
    assert_eq!(same, format!("{id}: nothing changed"));

    // Bad input: a clear error, nothing written.
    let n = kinds(&k, &id).len();
    for (args, code, says) in [
        (
            vec!["edit", "t_0badbad0", "--title", "x"],
            1,
            "no task `t_0badbad0`",
        ),
        (vec!["edit", id.as_str()], 1, "nothing to edit"),
        (
            vec!["edit", id.as_str(), "--title", "  "],
            1,
            "must not be blank",
        ),
        (
            vec!["edit", id.as_str(), "--body-file", "/nonexistent/b"],
            1,
            "cannot read the body file",
        ),
        (vec!["edit", id.as_str(), "--max-retries", "0"], 2, "0"),
    ] {
        let r = k.run(&args);
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
    assert_eq!(kinds(&k, &id).len(), n, "no bad edit wrote an event");

    k.ok(&["archive", &id]);
    let archived = k.run(&["edit", &id, "--title", "x"]);
    assert_eq!(archived.code, 3, "{}", archived.stderr);
}

#[test]
fn edit_inside_a_worker_is_refused_for_another_task() {
    let k = kanban();
    let mine = k.create("mine", &[]);
    let other = k.create("other", &[]);
    let claim = k.json(&["claim", &mine, "--claimer", "host:7"]);
    let run_id = claim["run_id"].as_i64().unwrap().to_string();
    let worker = |args: &[&str]| -> Run {
        k.cmd()
            .args(args)
            .env("HERMES_KANBAN_TASK", &mine)
            .env("HERMES_KANBAN_RUN_ID", &run_id)
            .env("HERMES_KANBAN_CLAIM_LOCK", "host:7")
            .env("HERMES_KANBAN_DB", k.default_db())
            .output()
            .unwrap()
            .into()
    };
    let refused = worker(&["edit", &other, "--title", "hijacked"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("may not mutate"),
        "{}",
        refused.stderr
    );
    assert_eq!(task(&k, &other)["title"], "other");
    let own = worker(&["edit", &mine, "--title", "mine, renamed"]);
    assert_eq!(own.code, 0, "{}", own.stderr);
    assert_eq!(task(&k, &mine)["title"], "mine, renamed");
}

#[test]
fn several_ids_each_get_their_own_transition_and_line() {
    let k = kanban();
    let a = k.create("a", &["--blocked"]);
    let b = k.create("b", &["--blocked"]);
    let both = k.ok(&["unblock", &a, &b]);
    assert_eq!(both, format!("{a} is now ready\n{b} is now ready"));

    let c = k.create("c", &["--triage"]);
    let d = k.create("d", &["--triage"]);
    k.ok(&["promote", &c, &d]);
    assert_eq!(k.status(&c), "ready");
    assert_eq!(k.status(&d), "ready");

    k.ok(&["claim", &a]);
    k.ok(&["claim", &b]);
    let reclaimed = k.run(&["--json", "reclaim", &a, &b]);
    assert_eq!(reclaimed.code, 0, "{}", reclaimed.stderr);
    assert_eq!(reclaimed.stdout.lines().count(), 2, "one JSON line per id");
    assert_eq!(k.status(&a), "ready");

    // One unknown id: the others are still archived, the bad one is named, exit 1.
    let r = k.run(&["archive", &a, "t_0badbad0", &b]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("t_0badbad0: no task `t_0badbad0`"),
        "{}",
        r.stderr
    );
    assert_eq!(k.status(&a), "archived");
    assert_eq!(k.status(&b), "archived");
    // A refusal among failures: the worst code wins (3 over 1).
    let r = k.run(&["promote", &c, "t_0badbad0"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let r = k.run(&["unblock"]);
    assert_eq!(r.code, 2, "at least one id: {}", r.stderr);
}

#[test]
fn a_unique_prefix_stands_for_the_id() {
    let k = kanban();
    let id = k.create("one", &[]);
    let other = k.create("two", &[]);
    rename(&k, &id, "t_abcd1111");
    rename(&k, &other, "t_abcd2222");
    let third = k.create("three", &[]);

    assert_eq!(task(&k, "abcd1")["title"], "one");
    assert_eq!(task(&k, "t_abcd2")["title"], "two");
    assert_eq!(task(&k, &third[..6])["title"], "three");
    k.ok(&["edit", "abcd2", "--priority", "3"]);
    assert_eq!(task(&k, "t_abcd2222")["priority"], 3);
    k.ok(&["archive", "abcd1", "abcd2"]);
    assert_eq!(k.status("t_abcd1111"), "archived");
    let child = k.create("child", &["--parent", &third[..7]]);
    assert_eq!(
        k.json(&["show", &child])["parents"][0]["id"],
        third.as_str()
    );

    let before = kinds(&k, "t_abcd1111").len();
    let ambiguous = k.run(&["reopen", "abcd"]);
    assert_eq!(ambiguous.code, 1, "{}", ambiguous.stderr);
    assert!(
        ambiguous
            .stderr
            .contains("`abcd` is ambiguous; it matches: t_abcd1111, t_abcd2222"),
        "{}",
        ambiguous.stderr
    );
    let short = k.run(&["show", "abc"]);
    assert_eq!(short.code, 1);
    assert!(short.stderr.contains("too short"), "{}", short.stderr);
    let none = k.run(&["show", "ffff9"]);
    assert_eq!(none.code, 1);
    assert!(none.stderr.contains("no task `ffff9`"), "{}", none.stderr);
    assert_eq!(kinds(&k, "t_abcd1111").len(), before, "nothing written");
}

#[test]
fn boards_rm_removes_an_idle_board_and_refuses_a_busy_one() {
    let k = kanban();
    k.ok(&["init"]);
    k.ok(&["boards", "create", "side"]);
    k.ok(&["boards", "switch", "side"]);
    let folder = k.home().join("kanban").join("boards").join("side");
    let id = k.create("busy", &[]);
    k.ok(&["claim", &id]);

    let busy = k.run(&["boards", "rm", "side"]);
    assert_eq!(busy.code, 3, "{}", busy.stderr);
    assert!(
        busy.stderr.contains("still has running workers") && busy.stderr.contains(&id),
        "{}",
        busy.stderr
    );
    assert!(folder.join("kanban.db").is_file(), "nothing was removed");

    let default = k.run(&["boards", "rm", "default"]);
    assert_eq!(default.code, 3, "{}", default.stderr);
    let unknown = k.run(&["boards", "rm", "nope"]);
    assert_eq!(unknown.code, 1, "{}", unknown.stderr);
    let bad = k.run(&["boards", "rm", "../x"]);
    assert_eq!(bad.code, 1, "{}", bad.stderr);

    k.ok(&["complete", &id, "--force", "--summary", "done"]);
    // The board's attachments go with it; the default board's stay.
    let file = k.home().join("spec.md");
    std::fs::write(&file, "# spec\n").unwrap();
    k.ok(&["attach", &id, file.to_str().unwrap()]);
    let attachments = k.home().join("kanban").join("attachments").join("side");
    assert!(attachments.join(&id).join("spec.md").is_file());
    k.ok(&["--board", "default", "init"]);
    let kept = k.create("kept", &["--board", "default"]);
    k.ok(&[
        "--board",
        "default",
        "attach",
        &kept,
        file.to_str().unwrap(),
    ]);
    let removed = k.ok(&["boards", "rm", "side"]);
    assert!(removed.starts_with("removed board side"), "{removed}");
    assert!(removed.contains("and its attachments"), "{removed}");
    assert!(!attachments.exists());
    let default_attachment = k.home().join("kanban").join("attachments").join(&kept);
    assert!(default_attachment.join("spec.md").is_file());
    assert!(
        removed.contains("the current board is now default"),
        "{removed}"
    );
    assert!(!folder.exists());
    let boards = k.json(&["boards", "list"]);
    assert_eq!(boards.as_array().unwrap().len(), 1);
    assert_eq!(boards[0]["slug"], "default");
    assert_eq!(boards[0]["current"], true);
}

#[test]
fn a_cron_job_without_workdir_runs_in_its_own_folder() {
    let k = kanban();
    std::fs::write(
        k.home().join("kanban.toml"),
        "[profiles.shell]\nagent = \"builtin:shell\"\n",
    )
    .unwrap();
    let added = k.json(&[
        "cron",
        "add",
        "--schedule",
        "0 9 * * 1-5",
        "--prompt",
        "pwd",
        "--profile",
        "shell",
    ]);
    let job = added["id"].as_str().unwrap().to_owned();
    let elsewhere = tempfile::tempdir().unwrap();
    let out: Run = k
        .cmd()
        .args(["cron", "run", &job, "--json"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let outcome: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let expected = k.home().join("cron").join("work").join(&job);
    assert!(expected.is_dir());
    let shown = k.ok(&["cron", "show", &job]);
    assert!(
        shown.contains(&format!(
            "workdir:        {} (its own folder)",
            expected.display()
        )),
        "{shown}"
    );
    assert_eq!(
        outcome["final_response"].as_str().unwrap().trim(),
        expected.canonicalize().unwrap().to_str().unwrap()
    );
}

#[test]
fn show_says_why_a_task_is_blocked_and_how_its_last_run_crashed() {
    let k = kanban();
    std::fs::write(
        k.home().join("kanban.toml"),
        "[profiles.default]\nagent = \"command\"\n\
         command = [\"sh\", \"-c\", \"cat >/dev/null; echo the disk is on fire; exit 3\"]\n",
    )
    .unwrap();
    let crashy = k.create("crashy", &[]);
    let out = k.run(&["dispatch", "--until-idle", "--interval", "0.05"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown = k.ok(&["show", &crashy]);
    let lines: Vec<&str> = shown.lines().collect();
    // lines[2] is the completion contract (issue 27).
    assert_eq!(
        lines[3], "blocked: gave up after 2 failed attempt(s) (limit 2)",
        "{shown}"
    );
    assert_eq!(
        lines[4], "last run 2 crashed: nonzero_exit, exit 1",
        "{shown}"
    );
    assert_eq!(lines[5], "  | the disk is on fire", "{shown}");
    // Then where it worked (issue 26), then the runs: only the last run's lines above.
    assert!(lines[6].starts_with("workspace scratch @ "), "{shown}");
    assert!(
        lines[7].starts_with("run 1 "),
        "only the last run's lines: {shown}"
    );

    let waiting = k.create("waiting", &[]);
    k.ok(&["claim", &waiting]);
    k.ok(&[
        "block",
        &waiting,
        "--reason",
        "need a key",
        "--kind",
        "needs_input",
    ]);
    k.ok(&["comment", &waiting, "--body", "hi"]);
    let shown = k.ok(&["show", &waiting]);
    assert!(
        shown.contains("\nblocked (needs_input): need a key\n"),
        "{shown}"
    );
    let comment = shown.lines().find(|l| l.starts_with("comment by")).unwrap();
    assert!(
        comment.ends_with(" ago): hi") || comment.ends_with(" (now): hi"),
        "a relative time, no epoch: {comment}"
    );
    let ready = k.create("ready", &[]);
    let claimed = k.ok(&["claim", &ready, "--ttl", "900"]);
    assert!(
        claimed.ends_with(" (in 15 m)") || claimed.ends_with(" (in 14 m)"),
        "{claimed}"
    );
    let shown = k.ok(&["show", &ready]);
    assert!(
        shown.contains(" (in 14 m) (run ") || shown.contains(" (in 15 m) (run "),
        "{shown}"
    );
    let beat = k.ok(&["heartbeat", &ready, "--ttl", "120"]);
    assert!(
        beat.ends_with(" (in 2 m)") || beat.ends_with(" (in 1 m)"),
        "{beat}"
    );
    let events = k.ok(&["events", &ready]);
    assert!(
        events
            .lines()
            .all(|l| l.contains(" ago) ") || l.contains(" (now) ")),
        "event times are local and relative: {events}"
    );
}

#[test]
fn dispatch_once_json_always_reports_and_a_stop_says_what_runs() {
    let k = kanban();
    k.ok(&["init"]);
    let report = k.json(&["dispatch", "--once"]);
    assert_eq!(report["spawned"], serde_json::json!([]), "{report}");
    let idle = k.run(&["dispatch", "--until-idle", "--interval", "0.05"]);
    assert_eq!(idle.code, 0, "{}", idle.stderr);
    assert!(
        idle.stderr
            .trim_end()
            .ends_with("kanban dispatch: stopped; no worker left running"),
        "{}",
        idle.stderr
    );
}

#[test]
fn until_idle_on_a_terminal_shows_progress_in_place() {
    let k = kanban();
    std::fs::write(
        k.home().join("kanban.toml"),
        "[profiles.default]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    k.create("one", &[]);
    k.create("two", &[]);
    // `script` gives the command a pseudo-terminal as its stdout.
    let command = format!(
        "'{}' --home '{}' dispatch --until-idle --interval 0.05",
        env!("CARGO_BIN_EXE_kanban"),
        k.home().display()
    );
    let Ok(out) = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
    else {
        eprintln!("`script` is not installed: the terminal progress line is not checked");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("\r\x1b[K"), "redrawn in place: {text:?}");
    assert!(
        text.contains("ready 0 · running 0 · done 2 · blocked 0"),
        "{text:?}"
    );
    // Without a terminal there is no progress line.
    let k2 = kanban();
    k2.create("three", &[]);
    let plain = k2.run(&["dispatch", "--until-idle", "--interval", "0.05"]);
    assert!(!plain.stdout.contains("ready "), "{}", plain.stdout);
}
