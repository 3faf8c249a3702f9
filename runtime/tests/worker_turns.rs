//! End to end: the worker's turn loop with scripted shell agents (`agent = "command"` profiles)
//! and the real `kanban` binary — goal mode, its budget and judge, a run taken over between
//! turns, in-place recovery of a retryable turn, and the streamed log read by `kanban logs`.
//!
//! No assertion is timed: every wait polls for a condition under a generous deadline, and the
//! agents that must stay alive wait for a file the test creates.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Test helpers: a failed setup step fails the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

mod dispatch_support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use dispatch_support::{Home, config, pid_alive, wait_output};
use kanban_runtime::board::{Status, StoredEvent};

const WAIT: Duration = Duration::from_secs(60);

/// Every agent counts its turns in `$CTL/turns` and keeps each prompt in `$CTL/prompt.<n>`.
const PRELUDE: &str = r#"
n=$(cat "$CTL/turns" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$CTL/turns"
cat > "$CTL/prompt.$n"
echo "agent turn $n"
"#;

/// Waits (bounded) for `$CTL/go`.
const WAIT_GO: &str = r#"
i=0; while [ ! -e "$CTL/go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
"#;

struct Turns {
    home: Home,
    ctl: PathBuf,
}

/// A home whose `kanban.toml` has the test's `[dispatch]` lines and one `command` profile per
/// `(name, script, extra profile lines)`; `{CTL}` in the extra lines is the control folder.
fn setup(dispatch: &str, agents: &[(&str, &str, &str)]) -> Turns {
    let home = Home::new(&config(dispatch));
    let ctl = home.root.join("ctl");
    std::fs::create_dir_all(&ctl).unwrap();
    let dir = home.root.join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = std::fs::read_to_string(home.root.join("kanban.toml")).unwrap();
    for (name, script, extra) in agents {
        let path = dir.join(format!("{name}.sh"));
        std::fs::write(&path, format!("{PRELUDE}\n{script}\n")).unwrap();
        text.push_str(&format!(
            "\n[profiles.{name}]\nagent = \"command\"\ncommand = [\"sh\", {path:?}]\n\
             env = {{ CTL = {ctl:?}, KANBAN = {bin:?} }}\n{extra}\n",
            extra = extra.replace("{CTL}", &ctl.display().to_string()),
            path = path.display().to_string(),
            ctl = ctl.display().to_string(),
            bin = env!("CARGO_BIN_EXE_kanban"),
        ));
    }
    std::fs::write(home.root.join("kanban.toml"), text).unwrap();
    Turns { home, ctl }
}

impl Turns {
    fn ok(&self, args: &[&str]) -> String {
        let out = self.home.kanban(args).output().unwrap();
        assert!(
            out.status.success(),
            "kanban {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn create(&self, profile: &str, extra: &[&str]) -> String {
        let mut args = vec!["create", "reach the goal", "--assignee", profile];
        args.extend_from_slice(extra);
        self.ok(&args)
    }

    fn until_idle(&self) {
        let out = self.home.dispatch_until_idle(&[], WAIT);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// One tick: the worker it spawns goes on alone (no dispatcher reaps or reclaims it).
    fn once(&self) {
        let out = self.home.kanban(&["dispatch", "--once"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn turns_run(&self) -> u32 {
        std::fs::read_to_string(self.ctl.join("turns"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    fn turn_events(&self, id: &str) -> Vec<StoredEvent> {
        self.home
            .events(id)
            .into_iter()
            .filter(|e| e.kind == "turn")
            .collect()
    }

    fn kinds_of_turns(&self, id: &str) -> Vec<String> {
        self.turn_events(id)
            .iter()
            .map(|e| {
                e.payload.as_ref().unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    fn wait_event(&self, id: &str, kind: &str) -> StoredEvent {
        self.home.wait_for(kind, WAIT, |b| {
            b.events(id, None).unwrap().iter().any(|e| e.kind == kind)
        });
        self.home
            .events(id)
            .into_iter()
            .find(|e| e.kind == kind)
            .unwrap()
    }

    fn wait_file(&self, name: &str) {
        let path = self.ctl.join(name);
        self.home.wait_for(name, WAIT, |_| path.exists());
    }

    fn go(&self) {
        std::fs::write(self.ctl.join("go"), "").unwrap();
    }

    /// The worker pid of the task's only run.
    fn worker_pid(&self, id: &str) -> i64 {
        self.home.wait_for("a worker pid", WAIT, |b| {
            b.runs(id)
                .unwrap()
                .first()
                .is_some_and(|r| r.worker_pid.is_some())
        });
        self.home.board().runs(id).unwrap()[0].worker_pid.unwrap()
    }

    fn wait_dead(&self, pid: i64) {
        self.home
            .wait_for("the worker to exit", WAIT, |_| !pid_alive(pid));
    }
}

fn last_block_reason(t: &Turns, id: &str) -> String {
    t.home
        .events(id)
        .into_iter()
        .rev()
        .find(|e| e.kind == "blocked")
        .and_then(|e| e.payload)
        .map(|p| p["reason"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

const THREE_TURNS: &str =
    r#"if [ $n -ge 3 ]; then "$KANBAN" complete --summary "done in $n turns"; fi"#;

#[test]
fn a_goal_agent_needing_three_turns_completes_in_one_run_with_three_turn_events() {
    let t = setup("", &[("three", THREE_TURNS, "")]);
    let id = t.create("three", &["--goal"]);
    t.until_idle();
    assert_eq!(t.home.board().get_task(&id).unwrap().status, Status::Done);
    let runs = t.home.board().runs(&id).unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let turns = t.turn_events(&id);
    assert_eq!(
        t.kinds_of_turns(&id),
        ["first", "continuation", "continuation"]
    );
    for (i, e) in turns.iter().enumerate() {
        let p = e.payload.as_ref().unwrap();
        assert_eq!(e.run_id, Some(runs[0].id));
        assert_eq!(p["turn"], i + 1);
        assert_eq!(p["exit"], "ok");
        assert_eq!(p["exit_code"], 0);
        assert!(p["seconds"].as_i64().unwrap() >= 0);
    }
    // The continuation prompt says: same task, go on, end with complete or block.
    let second = std::fs::read_to_string(t.ctl.join("prompt.2")).unwrap();
    assert!(second.contains("Same task") && second.contains("kanban complete"));
    // `kanban show` lists the turns.
    let show = t.ok(&["show", &id]);
    assert!(
        show.contains(&format!("turn 3 of run {}: continuation, ok", runs[0].id)),
        "{show}"
    );
    let json: serde_json::Value = serde_json::from_str(&t.ok(&["--json", "show", &id])).unwrap();
    assert_eq!(json["turns"].as_array().unwrap().len(), 3);
    // Each turn is delimited in the task log.
    let log =
        std::fs::read_to_string(t.home.root.join("kanban/logs").join(format!("{id}.log"))).unwrap();
    for n in 1..=3 {
        assert!(
            log.contains(&format!("[kanban-turn] turn={n} kind=")),
            "{log}"
        );
        assert!(
            log.contains(&format!("[kanban-turn-end] turn={n} exit=ok")),
            "{log}"
        );
    }
}

#[test]
fn outside_goal_mode_the_agent_stops_after_its_first_turn_and_two_nudges() {
    let four = r#"if [ $n -ge 4 ]; then "$KANBAN" complete --summary "done"; fi"#;
    let t = setup("", &[("four", four, "")]);
    let id = t.create("four", &[]);
    t.once();
    let result = t.wait_event(&id, "worker_result");
    assert_eq!(result.payload.unwrap()["exit_code"], 0);
    assert_eq!(t.turns_run(), 3);
    assert_eq!(
        t.kinds_of_turns(&id),
        ["first", "continuation", "continuation"]
    );
    assert_ne!(t.home.board().get_task(&id).unwrap().status, Status::Done);
}

#[test]
fn a_goal_past_its_turn_budget_is_blocked_with_blocked_budget_after_exactly_that_many_turns() {
    let t = setup("", &[("never", "", "")]);
    let id = t.create("never", &["--goal", "--max-turns", "2"]);
    assert!(
        t.ok(&["show", &id])
            .contains("goal mode, at most 2 turns per run")
    );
    t.until_idle();
    let task = t.home.board().get_task(&id).unwrap();
    assert_eq!(task.status, Status::Blocked);
    assert_eq!(task.current_run_id, None);
    assert_eq!(last_block_reason(&t, &id), "blocked_budget");
    assert_eq!(t.turns_run(), 2);
    assert_eq!(t.turn_events(&id).len(), 2);
    let runs = t.home.board().runs(&id).unwrap();
    assert_eq!(runs.len(), 1);
    assert!(runs[0].ended_at.is_some(), "{runs:?}");
    assert_eq!(runs[0].outcome.as_deref(), Some("blocked"));
}

#[test]
fn a_goal_run_reclaimed_between_turns_runs_no_further_turn_and_writes_nothing_after() {
    let waiter = format!("touch \"$CTL/started.$n\"\n{WAIT_GO}");
    let t = setup("", &[("waiter", &waiter, "")]);
    let id = t.create("waiter", &["--goal"]);
    t.once();
    t.wait_file("started.1");
    let pid = t.worker_pid(&id);
    t.ok(&["reclaim", &id, "--reason", "operator takes it back"]);
    let reclaimed = t.home.events(&id).last().unwrap().clone();
    assert_eq!(reclaimed.kind, "reclaimed");
    t.go();
    t.wait_dead(pid);
    assert_eq!(t.turns_run(), 1);
    let after: Vec<_> = t
        .home
        .events(&id)
        .into_iter()
        .filter(|e| e.id > reclaimed.id)
        .collect();
    assert!(after.is_empty(), "{after:?}");
    assert_eq!(t.home.board().get_task(&id).unwrap().status, Status::Ready);
}

const FLAKY: &str = r#"if [ $n -le 2 ]; then echo "transient" >&2; exit 76; fi
"$KANBAN" complete --summary "done after retries""#;

#[test]
fn a_turn_failing_retryably_twice_is_retried_in_place_and_the_run_completes() {
    let t = setup(
        "turn_recovery_backoff_seconds = [0.1]",
        &[("flaky", FLAKY, "")],
    );
    let id = t.create("flaky", &[]);
    t.until_idle();
    assert_eq!(t.home.board().get_task(&id).unwrap().status, Status::Done);
    assert_eq!(t.home.board().runs(&id).unwrap().len(), 1);
    assert_eq!(t.kinds_of_turns(&id), ["first", "recovery", "recovery"]);
    let exits: Vec<_> = t
        .turn_events(&id)
        .iter()
        .map(|e| e.payload.as_ref().unwrap()["exit"].clone())
        .collect();
    assert_eq!(exits, ["retryable", "retryable", "ok"]);
    let retry = std::fs::read_to_string(t.ctl.join("prompt.2")).unwrap();
    assert!(retry.contains("do not start over"), "{retry}");
}

#[test]
fn retryable_failures_past_the_recovery_budget_exit_1_and_count_a_failure() {
    let t = setup(
        "turn_recovery = 1\nturn_recovery_backoff_seconds = [0.1]\nfailure_limit = 1",
        &[("broken", "exit 76", "")],
    );
    let id = t.create("broken", &[]);
    t.until_idle();
    assert_eq!(t.turns_run(), 2);
    assert_eq!(t.kinds_of_turns(&id), ["first", "recovery"]);
    let result = t.wait_event(&id, "worker_result");
    assert_eq!(result.payload.unwrap()["exit_code"], 1);
    let runs = t.home.board().runs(&id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome.as_deref(), Some("crashed"), "{runs:?}");
    let kinds = t.home.kinds(&id);
    assert!(kinds.iter().any(|k| k == "gave_up"), "{kinds:?}");
    assert_eq!(
        t.home.board().get_task(&id).unwrap().status,
        Status::Blocked
    );
}

#[test]
fn a_rate_limited_turn_is_never_retried_in_place() {
    let t = setup(
        "turn_recovery_backoff_seconds = [0.1]",
        &[("limited", "exit 75", "")],
    );
    let id = t.create("limited", &["--goal"]);
    t.once();
    let result = t.wait_event(&id, "worker_result");
    assert_eq!(result.payload.unwrap()["exit_code"], 75);
    assert_eq!(t.turns_run(), 1);
    let turns = t.turn_events(&id);
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].payload.as_ref().unwrap()["exit"], "rate_limited");
}

#[test]
fn a_claim_reclaimed_during_the_backoff_gets_no_further_turn() {
    let t = setup(
        "turn_recovery_backoff_seconds = [600]",
        &[("retrying", "exit 76", "")],
    );
    let id = t.create("retrying", &[]);
    t.once();
    let first = t.wait_event(&id, "turn");
    assert_eq!(first.payload.unwrap()["exit"], "retryable");
    let pid = t.worker_pid(&id);
    t.ok(&["reclaim", &id]);
    let reclaimed = t.home.events(&id).last().unwrap().id;
    t.wait_dead(pid);
    assert_eq!(t.turns_run(), 1);
    assert!(t.home.events(&id).iter().all(|e| e.id <= reclaimed));
}

#[test]
fn kanban_logs_follow_shows_a_line_while_the_agent_still_runs() {
    let talker = format!("echo hello-stream\n{WAIT_GO}\n\"$KANBAN\" complete --summary said");
    let t = setup("", &[("talker", &talker, "")]);
    let id = t.create("talker", &[]);
    t.once();
    let mut follow = t
        .home
        .kanban(&["logs", &id, "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let hit = line.contains("hello-stream");
        seen.push(line);
        if hit {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("hello-stream")),
        "{seen:?}"
    );
    // The agent is still waiting for `go`: its run is open.
    assert!(!t.ctl.join("go").exists());
    assert_eq!(
        t.home.board().get_task(&id).unwrap().status,
        Status::Running
    );
    t.go();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let out = wait_output(follow, WAIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        rest.iter()
            .any(|l| l.starts_with("[kanban-worker-exit] rc=0")),
        "{rest:?}"
    );
    // Without --follow, --run N prints the same part; an unknown run is an error.
    let run = t.home.board().runs(&id).unwrap()[0].id.to_string();
    let printed = t.ok(&["logs", &id, "--run", &run]);
    assert!(printed.contains("hello-stream") && printed.contains("[kanban-turn-end] turn=1"));
    let bad = t
        .home
        .kanban(&["logs", &id, "--run", "999"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no run 999"));
}

#[test]
fn a_judge_saying_done_with_the_task_open_gets_one_finalize_turn() {
    let finisher = r#"if grep -q "goal looks reached" "$CTL/prompt.$n"; then "$KANBAN" complete --summary fin; fi"#;
    let judge = "judge = [\"sh\", \"-c\", \"cat > {CTL}/judge.in; echo done\"]";
    let t = setup("", &[("fin", finisher, judge)]);
    let id = t.create("fin", &["--goal"]);
    t.until_idle();
    assert_eq!(t.home.board().get_task(&id).unwrap().status, Status::Done);
    assert_eq!(t.kinds_of_turns(&id), ["first", "finalize"]);
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.ctl.join("judge.in")).unwrap()).unwrap();
    assert_eq!(input["goal"], "reach the goal");
    assert_eq!(input["last_response"], "agent turn 1");
}

#[test]
fn a_judge_saying_done_twice_blocks_with_blocked_budget() {
    let t = setup(
        "",
        &[("deaf", "", "judge = [\"sh\", \"-c\", \"echo done\"]")],
    );
    let id = t.create("deaf", &["--goal"]);
    t.until_idle();
    assert_eq!(
        t.home.board().get_task(&id).unwrap().status,
        Status::Blocked
    );
    assert_eq!(last_block_reason(&t, &id), "blocked_budget");
    assert_eq!(t.kinds_of_turns(&id), ["first", "finalize"]);
}

#[test]
fn a_judge_saying_blocked_blocks_the_task_with_its_reason() {
    // The judge runs without the worker's identity: it could not act on the task.
    let judge = "judge = [\"sh\", \"-c\", \"if [ -z \\\"$HERMES_KANBAN_TASK$HERMES_KANBAN_RUN_ID\\\" ] && \
                 [ -n \\\"${HERMES_DELEGATED_CHILD_CONTEXT+set}\\\" ]; then echo 'blocked: needs a human decision'; \
                 else echo 'blocked: the judge saw the worker identity'; fi\"]";
    let t = setup("", &[("stuck", "", judge)]);
    let id = t.create("stuck", &["--goal"]);
    t.until_idle();
    assert_eq!(
        t.home.board().get_task(&id).unwrap().status,
        Status::Blocked
    );
    assert_eq!(last_block_reason(&t, &id), "needs a human decision");
    assert_eq!(t.turns_run(), 1);
}

#[test]
fn bad_goal_flags_are_refused_and_create_nothing() {
    let t = setup("", &[]);
    for args in [
        vec!["create", "x", "--max-turns", "3"],
        vec!["create", "x", "--goal", "--max-turns", "0"],
        vec!["create", "x", "--goal", "--max-turns", "many"],
    ] {
        let out = t.home.kanban(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert!(t.ok(&["list"]).is_empty());
}

#[test]
fn outside_goal_mode_the_three_turn_agent_finishes_on_its_second_nudge_as_before() {
    let t = setup("", &[("three", THREE_TURNS, "")]);
    let id = t.create("three", &[]);
    t.until_idle();
    assert_eq!(t.home.board().get_task(&id).unwrap().status, Status::Done);
    assert_eq!(
        t.kinds_of_turns(&id),
        ["first", "continuation", "continuation"]
    );
    let nudge = std::fs::read_to_string(t.ctl.join("prompt.2")).unwrap();
    assert!(
        nudge.contains("Your turn ended but the task is still open"),
        "{nudge}"
    );
}

#[test]
fn a_profile_can_make_goal_mode_the_default_and_a_failing_judge_means_continue() {
    let profile = "goal = true\ngoal_max_turns = 2\njudge = [\"sh\", \"-c\", \"exit 3\"]";
    let t = setup("", &[("goals", "", profile)]);
    let id = t.create("goals", &[]);
    t.until_idle();
    assert_eq!(
        t.home.board().get_task(&id).unwrap().status,
        Status::Blocked
    );
    assert_eq!(last_block_reason(&t, &id), "blocked_budget");
    assert_eq!(t.kinds_of_turns(&id), ["first", "continuation"]);
}

#[test]
fn kanban_logs_refuses_what_it_cannot_print_with_a_clear_error() {
    let t = setup("", &[("three", THREE_TURNS, "")]);
    let id = t.create("three", &[]);
    for (args, want) in [
        (vec!["logs", "t_00000000"], "t_00000000"),
        (vec!["logs", id.as_str()], "has not run yet"),
        (
            vec!["--json", "logs", id.as_str(), "--follow"],
            "drop --follow or --json",
        ),
        (vec!["logs", id.as_str(), "--run", "x"], "invalid value"),
    ] {
        let out = t.home.kanban(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // After a run, --json gives the run's part at once.
    t.until_idle();
    let v: serde_json::Value = serde_json::from_str(&t.ok(&["--json", "logs", &id])).unwrap();
    assert_eq!(v["found"], true);
    assert!(v["text"].as_str().unwrap().contains("agent turn 3"), "{v}");
}

#[test]
fn a_builtin_shell_goal_gets_its_turns_and_its_budget_blocks() {
    // `builtin:shell` completes a classic task on exit 0; in goal mode exit 0 only settles the
    // turn (issue 24: the built-in completed the goal after its first turn).
    let t = setup("", &[]);
    let body = format!(
        "n=$(cat turns 2>/dev/null || echo 0); n=$((n+1)); echo $n > turns; \
         if [ $n -ge 3 ]; then {:?} complete --summary \"done in $n turns\"; fi",
        env!("CARGO_BIN_EXE_kanban")
    );
    let three = t.ok(&[
        "create",
        "three turns",
        "--assignee",
        "sh",
        "--goal",
        "--body",
        &body,
    ]);
    let capped = t.ok(&[
        "create",
        "never done",
        "--assignee",
        "sh",
        "--goal",
        "--max-turns",
        "2",
        "--body",
        "echo not yet",
    ]);
    t.until_idle();
    let board = t.home.board();
    assert_eq!(board.get_task(&three).unwrap().status, Status::Done);
    assert_eq!(t.turn_events(&three).len(), 3);
    assert_eq!(board.runs(&three).unwrap().len(), 1);
    assert_eq!(board.get_task(&capped).unwrap().status, Status::Blocked);
    assert_eq!(last_block_reason(&t, &capped), "blocked_budget");
    assert_eq!(t.turn_events(&capped).len(), 2);
}
