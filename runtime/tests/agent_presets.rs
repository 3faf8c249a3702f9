//! End to end: the agent presets (`agent = "claude-code" | "codex" | "gemini" | "opencode" |
//! "aider" | "hermes"`) through the real
//! dispatcher and worker. Each CLI is replaced by a shell script written into a temporary folder
//! that comes first on the `PATH` given to `kanban dispatch` (and so to its workers and their
//! agents); the script records its argv, environment and stdin, and replays output recorded in
//! the CLI's documented streaming format: Claude Code's `-p --output-format stream-json
//! --verbose`, Codex's `exec --json`, the plain text of `hermes chat -q`. What each turn replays
//! is the line of `$CTL/plan` with the turn's number (the last line repeats).
//!
//! No assertion is timed: every wait polls for a condition under a generous deadline.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Test helpers: a failed setup step fails the test at once, with the panic message.
#![allow(clippy::unwrap_used)]

mod dispatch_support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use dispatch_support::{Home, config, wait_output};
use kanban_runtime::board::Status;

const WAIT: Duration = Duration::from_secs(90);

/// What every fake does first: count the turn, keep argv, environment and stdin, pick the mode.
const PRELUDE: &str = r#"#!/bin/sh
n=$(cat "$CTL/turns" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$CTL/turns"
for a in "$@"; do printf '%s\0' "$a"; done > "$CTL/argv.$n"
env > "$CTL/env.$n"
cat > "$CTL/prompt.$n"
j() { printf '%s\n' "$1"; }
mode=$(sed -n "${n}p" "$CTL/plan")
[ -n "$mode" ] || mode=$(tail -n 1 "$CTL/plan")
# `wait`: a long turn that holds (after its first lines) until the test creates `$CTL/go`.
held=0; [ "$mode" = wait ] && { held=1; mode=continue; }
hold() {
  [ $held = 1 ] || return 0
  i=0; while [ ! -e "$CTL/go" ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
}
"#;

/// Claude Code, `claude -p --output-format stream-json --verbose` (recorded shapes).
const CLAUDE: &str = r#"
sid=sess-claude-1
j '{"type":"system","subtype":"init","cwd":"/w","session_id":"'$sid'","tools":["Bash","Edit"],"model":"claude-sonnet-4-5","permissionMode":"bypassPermissions"}'
hold
case $mode in
ok|continue)
  j '{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Working on the task now."}]},"session_id":"'$sid'"}'
  j '{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},"session_id":"'$sid'"}'
  j '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"README.md","is_error":false}]},"session_id":"'$sid'"}'
  if [ $mode = ok ]; then "$KANBAN" complete --summary "done by claude" >/dev/null; fi
  j '{"type":"result","subtype":"success","is_error":false,"duration_ms":1800,"num_turns":3,"result":"Turn '$n' finished.","session_id":"'$sid'","total_cost_usd":0.0125,"usage":{"input_tokens":1000,"cache_read_input_tokens":200,"output_tokens":50}}'
  ;;
ratelimit)
  j '{"type":"result","subtype":"success","is_error":true,"duration_ms":300,"num_turns":1,"result":"Claude AI usage limit reached|1767225600","session_id":"'$sid'","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}'
  exit 1 ;;
auth)
  j '{"type":"assistant","message":{"content":[{"type":"text","text":"OAuth token has expired. Please obtain a new token or refresh your existing token."}]},"session_id":"'$sid'"}'
  j '{"type":"result","subtype":"success","is_error":true,"duration_ms":200,"num_turns":1,"result":"OAuth token has expired. Please obtain a new token or refresh your existing token. · Please run /login","session_id":"'$sid'","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}'
  exit 1 ;;
transient)
  j '{"type":"result","subtype":"success","is_error":true,"duration_ms":900,"num_turns":1,"result":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}","session_id":"'$sid'","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":0}}'
  exit 1 ;;
malformed)
  echo 'Welcome to Claude Code (not JSON)'
  j '{"type":"assistant","message":{"content":[{"type":"te'
  exit 0 ;;
esac
"#;

/// Codex, `codex exec --json` (recorded shapes).
const CODEX: &str = r#"
tid=0199a213-81c0-7800-8aa1-bbab2a035a53
j '{"type":"thread.started","thread_id":"'$tid'"}'
j '{"type":"turn.started"}'
hold
case $mode in
ok|continue)
  j '{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Looking at the repository**"}}'
  j '{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}'
  j '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"README.md\n","exit_code":0,"status":"completed"}}'
  if [ $mode = ok ]; then "$KANBAN" complete --summary "done by codex" >/dev/null; fi
  j '{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Codex turn '$n' finished."}}'
  j '{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}'
  ;;
ratelimit)
  j '{"type":"error","message":"You'"'"'ve hit your usage limit. Upgrade to Pro or try again in 2 days."}'
  j '{"type":"turn.failed","error":{"message":"You'"'"'ve hit your usage limit. Upgrade to Pro or try again in 2 days."}}'
  exit 1 ;;
auth)
  j '{"type":"error","message":"unexpected status 401 Unauthorized: Your authentication token has expired. Please sign in again."}'
  j '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}'
  exit 1 ;;
transient)
  j '{"type":"error","message":"stream disconnected before completion: error sending request for url (https://api.openai.com/v1/responses)"}'
  j '{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}'
  exit 1 ;;
malformed)
  j '{"type":"item.completed","item":{'
  exit 0 ;;
esac
"#;

/// Gemini CLI, `gemini --output-format stream-json` (documented event shapes).
const GEMINI: &str = r#"
j '{"type":"init","timestamp":"2026-12-02T06:00:00.000Z","session_id":"gem-1","model":"gemini-2.5-pro"}'
case $mode in
ok|continue)
  j '{"type":"message","timestamp":"2026-12-02T06:00:01.000Z","role":"user","content":"(prompt)"}'
  j '{"type":"tool_use","timestamp":"2026-12-02T06:00:02.000Z","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"ls"}}'
  j '{"type":"tool_result","timestamp":"2026-12-02T06:00:03.000Z","tool_id":"t1","status":"success","output":"README.md"}'
  if [ $mode = ok ]; then "$KANBAN" complete --summary "done by gemini" >/dev/null; fi
  j '{"type":"message","timestamp":"2026-12-02T06:00:04.000Z","role":"assistant","content":"Gemini turn ","delta":true}'
  j '{"type":"message","timestamp":"2026-12-02T06:00:04.100Z","role":"assistant","content":"'$n' finished.","delta":true}'
  j '{"type":"result","timestamp":"2026-12-02T06:00:05.000Z","status":"success","stats":{"total_tokens":700,"input_tokens":600,"output_tokens":100,"duration_ms":4000,"tool_calls":1}}'
  ;;
ratelimit)
  j '{"type":"error","timestamp":"2026-12-02T06:00:01.000Z","severity":"error","message":"[API Error: You have exhausted your capacity on this model. Your quota will reset after 2s.]"}'
  exit 1 ;;
auth)
  j '{"type":"error","timestamp":"2026-12-02T06:00:01.000Z","severity":"error","message":"[API Error: API key not valid. Please pass a valid API key.]"}'
  exit 1 ;;
transient)
  j '{"type":"error","timestamp":"2026-12-02T06:00:01.000Z","severity":"error","message":"[API Error: 503 The model is overloaded. Please try again later.]"}'
  exit 1 ;;
malformed)
  j '{"type":"message","role":"assistant","content":"cut sh'
  exit 0 ;;
esac
"#;

/// OpenCode, `opencode run --format json` (its documented event shapes: `{type, timestamp,
/// sessionID, part}`; the last step's text is the answer, `step_finish` carries tokens and cost).
const OPENCODE: &str = r#"
sid=ses_4f1a2b3c4d5eAbCdEf
e() { j '{"type":"'$1'","timestamp":1767225600000,"sessionID":"'$sid'",'"$2"'}'; }
e step_start '"part":{"id":"prt_1","sessionID":"'$sid'","messageID":"msg_1","type":"step-start","snapshot":"4b825dc6"}'
hold
case $mode in
ok|continue)
  e tool_use '"part":{"id":"prt_2","type":"tool","callID":"call_1","tool":"bash","state":{"status":"completed","input":{"command":"ls"},"output":"README.md\n","title":"ls"}}'
  e step_finish '"part":{"id":"prt_3","type":"step-finish","reason":"tool-calls","cost":0.001,"tokens":{"input":900,"output":20,"reasoning":0,"cache":{"read":100,"write":0}}}'
  e step_start '"part":{"id":"prt_4","type":"step-start"}'
  if [ $mode = ok ]; then "$KANBAN" complete --summary "done by opencode" >/dev/null; fi
  e text '"part":{"id":"prt_5","type":"text","text":"OpenCode turn '$n' finished.","time":{"start":1,"end":2}}'
  e step_finish '"part":{"id":"prt_6","type":"step-finish","reason":"stop","cost":0.002,"tokens":{"input":1000,"output":30,"reasoning":10,"cache":{"read":200,"write":0}}}'
  ;;
ratelimit)
  e error '"error":{"name":"APIError","data":{"message":"Rate limit reached for requests","statusCode":429,"isRetryable":true}}'
  exit 1 ;;
auth)
  e error '"error":{"name":"ProviderAuthError","data":{"providerID":"anthropic","message":"invalid x-api-key"}}'
  exit 1 ;;
transient)
  e error '"error":{"name":"APIError","data":{"message":"Overloaded","statusCode":529,"isRetryable":true}}'
  exit 1 ;;
malformed)
  e text '"part":{"type":"text","text":"cut sho'
  echo '{"type":"text","part":{'
  exit 0 ;;
esac
"#;

/// The original's own agent, `hermes -p <profile> chat -q <prompt>`, and aider: plain text, their
/// failures said on stderr with a non-zero exit.
const HERMES: &str = r#"
echo "hermes: working"
case $mode in
ratelimit) echo "litellm.RateLimitError: 429 Too Many Requests: rate limit reached" >&2; exit 1 ;;
auth) echo "litellm.AuthenticationError: invalid api key" >&2; exit 1 ;;
transient) echo "litellm.ServiceUnavailableError: 503 Service Unavailable" >&2; exit 1 ;;
esac
if [ $mode = ok ]; then "$KANBAN" complete --summary "done by hermes" >/dev/null; fi
echo "hermes: done"
"#;

struct Presets {
    home: Home,
    ctl: PathBuf,
    bin: PathBuf,
}

/// A home with one profile per `(name, agent)` and the fakes `claude`, `codex` and `hermes` in
/// `bin/`; `plan` is what each turn replays.
fn setup(dispatch: &str, profiles: &[(&str, &str)], plan: &[&str]) -> Presets {
    setup_in(Home::new(&config(dispatch)), profiles, plan)
}

/// [`setup`] with the default board in a fresh database of the test's PostgreSQL server.
fn setup_on_postgres(profiles: &[(&str, &str)], plan: &[&str]) -> Presets {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().expect("a PostgreSQL test server");
    let name = cluster
        .fresh_database("agent_presets")
        .expect("create a database");
    let url = cluster.url(&name);
    let home = Home::new(&format!(
        "{}\n[boards.default]\nurl = \"{url}\"\n",
        config("")
    ));
    setup_in(home, profiles, plan)
}

fn setup_in(home: Home, profiles: &[(&str, &str)], plan: &[&str]) -> Presets {
    let ctl = home.root.join("ctl");
    let bin = home.root.join("bin");
    std::fs::create_dir_all(&ctl).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    for (name, body) in [
        ("claude", CLAUDE),
        ("codex", CODEX),
        ("gemini", GEMINI),
        ("opencode", OPENCODE),
        ("hermes", HERMES),
        ("aider", HERMES),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, format!("{PRELUDE}{body}")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(ctl.join("plan"), plan.join("\n") + "\n").unwrap();
    let mut text = std::fs::read_to_string(home.root.join("kanban.toml")).unwrap();
    for (name, agent) in profiles {
        text.push_str(&format!(
            "\n[profiles.{name}]\nagent = \"{agent}\"\nenv = {{ CTL = {ctl:?}, KANBAN = {kanban:?} }}\n",
            ctl = ctl.display().to_string(),
            kanban = env!("CARGO_BIN_EXE_kanban"),
        ));
    }
    std::fs::write(home.root.join("kanban.toml"), text).unwrap();
    Presets { home, ctl, bin }
}

impl Presets {
    /// `kanban …` with the fakes first on the `PATH` its children inherit.
    fn kanban(&self, args: &[&str]) -> Command {
        let mut cmd = self.home.kanban(args);
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", self.bin.display()));
        cmd
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.kanban(args).output().unwrap();
        assert!(
            out.status.success(),
            "kanban {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn until_idle(&self) {
        let child = self
            .kanban(&["dispatch", "--until-idle"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_output(child, WAIT);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.ctl.join(name)).unwrap_or_default()
    }

    fn argv(&self, n: u32) -> Vec<String> {
        self.file(&format!("argv.{n}"))
            .split_terminator('\0')
            .map(str::to_owned)
            .collect()
    }

    fn turns_run(&self) -> u32 {
        self.file("turns").trim().parse().unwrap_or(0)
    }

    fn log(&self, id: &str) -> String {
        std::fs::read_to_string(self.home.root.join(format!("kanban/logs/{id}.log")))
            .unwrap_or_default()
    }

    fn turn_kinds(&self, id: &str) -> Vec<String> {
        self.home
            .events(id)
            .into_iter()
            .filter(|e| e.kind == "turn")
            .map(|e| e.payload.unwrap()["kind"].as_str().unwrap().to_owned())
            .collect()
    }

    fn status(&self, id: &str) -> Status {
        self.home.board().get_task(id).unwrap().status
    }
}

/// Sets the task's model and reasoning effort columns as they are stored (the CLI flags that
/// write them belong to another change).
fn steer(p: &Presets, id: &str, model: &str, reasoning: &str) {
    let board = p.home.board();
    kanban_runtime::test_support::sql(&board)
        .execute_batch(&format!(
            "UPDATE tasks SET model_override = '{model}', reasoning_effort = '{reasoning}' \
             WHERE id = '{id}'"
        ))
        .unwrap();
}

fn agent_of_run(p: &Presets, id: &str, run: usize) -> serde_json::Value {
    let runs = p.home.board().runs(id).unwrap();
    runs[run].metadata.as_ref().unwrap()["agent"].clone()
}

#[test]
fn a_claude_code_goal_resumes_its_session_on_the_second_turn_and_books_usage() {
    let p = setup("", &[("cc", "claude-code")], &["continue", "ok"]);
    let id = p.ok(&[
        "create",
        "reach the goal",
        "--assignee",
        "cc",
        "--goal",
        "--max-runtime",
        "600",
    ]);
    steer(&p, &id, "claude-opus-4-1", "high");
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.home.board().runs(&id).unwrap().len(), 1);
    assert_eq!(p.turn_kinds(&id), ["first", "continuation"]);
    let first = p.argv(1);
    assert_eq!(
        first[..5],
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions"
        ]
    );
    assert!(
        first
            .windows(2)
            .any(|w| w == ["--model", "claude-opus-4-1"]),
        "{first:?}"
    );
    assert!(!first.contains(&"--resume".to_owned()), "{first:?}");
    let second = p.argv(2);
    assert!(
        second
            .windows(2)
            .any(|w| w == ["--resume", "sess-claude-1"]),
        "{second:?}"
    );
    // The resumed conversation holds the task: the follow-up is the nudge alone.
    let prompt = p.file("prompt.2");
    assert!(prompt.starts_with("Same task, next turn"), "{prompt}");
    assert!(!prompt.contains(&id), "{prompt}");
    assert!(p.file("prompt.1").contains(&id));
    // The CLI's command time limit leaves the original's 30 s for the handoff.
    assert!(p.file("env.1").contains("BASH_MAX_TIMEOUT_MS=570000"));
    // Readable lines in the task log, usage and session on the run.
    let log = p.log(&id);
    for line in [
        "[claude-code] session sess-claude-1 (model claude-sonnet-4-5)",
        "[claude-code] assistant: Working on the task now.",
        "[claude-code] tool Bash: {\"command\":\"ls\"}",
        "[claude-code] tool result: README.md",
        "[claude-code] result: Turn 2 finished.",
        "[claude-code] resuming session sess-claude-1",
    ] {
        assert!(log.contains(line), "{line} not in\n{log}");
    }
    assert!(!log.contains("\"type\":\"assistant\""), "{log}");
    let agent = agent_of_run(&p, &id, 0);
    assert_eq!(agent["agent"], "claude-code");
    assert_eq!(agent["session_id"], "sess-claude-1");
    assert_eq!(agent["turns"], 2);
    assert_eq!(agent["usage"]["input_tokens"], 2000);
    assert_eq!(agent["usage"]["output_tokens"], 100);
    assert_eq!(agent["usage"]["cache_read_tokens"], 400);
    assert!((agent["usage"]["cost_usd"].as_f64().unwrap() - 0.025).abs() < 1e-9);
    // The completion's own metadata is kept beside it; `show` prints it, `show --json` has it.
    let shown = p.ok(&["show", &id]);
    assert!(
        shown.contains("agent claude-code session sess-claude-1: 2000 input, 100 output, 400 cached tokens, $0.0250"),
        "{shown}"
    );
    let json: serde_json::Value = serde_json::from_str(&p.ok(&["--json", "show", &id])).unwrap();
    assert_eq!(
        json["runs"][0]["metadata"]["agent"]["session_id"],
        "sess-claude-1"
    );
}

#[test]
fn a_claude_code_rate_limit_requeues_without_counting() {
    let p = setup("", &[("cc", "claude-code")], &["ratelimit", "ok"]);
    let id = p.ok(&["create", "t", "--assignee", "cc"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let runs = p.home.board().runs(&id).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].outcome.as_deref(), Some("rate_limited"), "{runs:?}");
    let kinds = p.home.kinds(&id);
    assert!(!kinds.iter().any(|k| k == "gave_up"), "{kinds:?}");
    // A new run is a new conversation: the second claim starts cold.
    assert!(!p.argv(2).contains(&"--resume".to_owned()));
    assert!(
        p.log(&id)
            .contains("[claude-code] error: Claude AI usage limit reached")
    );
}

#[test]
fn an_expired_claude_code_login_blocks_the_task_for_good() {
    let p = setup("", &[("cc", "claude-code")], &["auth"]);
    let id = p.ok(&["create", "t", "--assignee", "cc"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Blocked);
    assert_eq!(p.turns_run(), 1);
    let result = p
        .home
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "worker_result")
        .unwrap();
    assert_eq!(result.payload.unwrap()["exit_code"], 78);
    assert!(p.home.kinds(&id).iter().any(|k| k == "gave_up"));
}

#[test]
fn a_transient_claude_code_error_and_malformed_output_are_retried_in_place() {
    let p = setup(
        "turn_recovery_backoff_seconds = [0.1]",
        &[("cc", "claude-code")],
        &["transient", "malformed", "ok"],
    );
    let id = p.ok(&["create", "t", "--assignee", "cc"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.home.board().runs(&id).unwrap().len(), 1);
    assert_eq!(p.turn_kinds(&id), ["first", "recovery", "recovery"]);
    // The session the failed turn announced is resumed by the retry.
    assert!(
        p.argv(2)
            .windows(2)
            .any(|w| w == ["--resume", "sess-claude-1"])
    );
    let log = p.log(&id);
    assert!(
        log.contains("[claude-code] unparsed: Welcome to Claude Code (not JSON)"),
        "{log}"
    );
    assert!(log.contains("[claude-code] error: API Error: 529"), "{log}");
}

#[test]
fn a_codex_goal_resumes_its_thread_and_books_usage() {
    let p = setup("", &[("cx", "codex")], &["continue", "ok"]);
    let id = p.ok(&["create", "reach the goal", "--assignee", "cx", "--goal"]);
    steer(&p, &id, "gpt-5-codex", "high");
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.turn_kinds(&id), ["first", "continuation"]);
    let first = p.argv(1);
    assert_eq!(first[..2], ["exec", "--json"]);
    assert_eq!(first.last().map(String::as_str), Some("-"));
    assert!(
        first.windows(2).any(|w| w == ["--model", "gpt-5-codex"]),
        "{first:?}"
    );
    assert!(
        first
            .windows(2)
            .any(|w| w == ["-c", "model_reasoning_effort=high"]),
        "{first:?}"
    );
    let second = p.argv(2);
    let tail: Vec<&str> = second[second.len() - 3..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        ["resume", "0199a213-81c0-7800-8aa1-bbab2a035a53", "-"]
    );
    let log = p.log(&id);
    for line in [
        "[codex] session 0199a213-81c0-7800-8aa1-bbab2a035a53",
        "[codex] thinking: **Looking at the repository**",
        "[codex] command: bash -lc ls",
        "[codex] command exited 0: bash -lc ls → README.md",
        "[codex] assistant: Codex turn 2 finished.",
        "[codex] usage: 24763 input, 122 output, 24448 cached tokens",
    ] {
        assert!(log.contains(line), "{line} not in\n{log}");
    }
    let agent = agent_of_run(&p, &id, 0);
    assert_eq!(agent["session_id"], "0199a213-81c0-7800-8aa1-bbab2a035a53");
    assert_eq!(agent["usage"]["output_tokens"], 244);
    assert!(agent["usage"].get("cost_usd").is_none());
}

#[test]
fn codex_failures_map_to_requeue_block_and_retry() {
    // A rate limit requeues without counting, then the next run finishes.
    let p = setup("", &[("cx", "codex")], &["ratelimit", "ok"]);
    let id = p.ok(&["create", "t", "--assignee", "cx"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let runs = p.home.board().runs(&id).unwrap();
    assert_eq!(runs[0].outcome.as_deref(), Some("rate_limited"), "{runs:?}");

    // An expired login blocks.
    let p = setup("", &[("cx", "codex")], &["auth"]);
    let id = p.ok(&["create", "t", "--assignee", "cx"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Blocked);
    assert_eq!(p.turns_run(), 1);

    // A dropped stream and malformed output are retried in place.
    let p = setup(
        "turn_recovery_backoff_seconds = [0.1]",
        &[("cx", "codex")],
        &["transient", "malformed", "ok"],
    );
    let id = p.ok(&["create", "t", "--assignee", "cx"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.turn_kinds(&id), ["first", "recovery", "recovery"]);
}

#[test]
fn a_gemini_goal_streams_books_usage_and_resumes_its_session() {
    let p = setup("", &[("gm", "gemini")], &["continue", "ok"]);
    let id = p.ok(&["create", "reach the goal", "--assignee", "gm", "--goal"]);
    steer(&p, &id, "gemini-2.5-flash", "high");
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let first = p.argv(1);
    assert_eq!(
        first[..4],
        ["--output-format", "stream-json", "--yolo", "--model"]
    );
    assert_eq!(first[first.len() - 2], "--prompt");
    assert!(first.last().unwrap().contains(&id));
    assert!(!first.iter().any(|a| a == "--resume"), "{first:?}");
    // The follow-up resumes the session by its id and carries only the nudge.
    let second = p.argv(2);
    assert!(
        second.windows(2).any(|w| w == ["--resume", "gem-1"]),
        "{second:?}"
    );
    assert!(second.last().unwrap().starts_with("Same task, next turn"));
    assert!(!second.last().unwrap().contains(&id), "{second:?}");
    let log = p.log(&id);
    for line in [
        "[gemini] session gem-1 (model gemini-2.5-pro)",
        "[gemini] tool run_shell_command: {\"command\":\"ls\"}",
        "[gemini] tool result (success): README.md",
        "[gemini] usage: 600 input, 100 output, 0 cached tokens",
    ] {
        assert!(log.contains(line), "{line} not in\n{log}");
    }
    let agent = agent_of_run(&p, &id, 0);
    assert_eq!(agent["usage"]["input_tokens"], 1200);
    // The streamed deltas make up the final response.
    let result = p
        .home
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "worker_result")
        .unwrap();
    assert_eq!(
        result.payload.unwrap()["last_output"],
        "Gemini turn 2 finished."
    );
}

#[test]
fn a_gemini_quota_error_requeues_without_counting() {
    let p = setup("", &[("gm", "gemini")], &["ratelimit", "ok"]);
    let id = p.ok(&["create", "t", "--assignee", "gm"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let runs = p.home.board().runs(&id).unwrap();
    assert_eq!(runs[0].outcome.as_deref(), Some("rate_limited"), "{runs:?}");
}

#[test]
fn an_opencode_goal_resumes_its_session_and_books_usage_and_cost() {
    let p = setup("", &[("oc", "opencode")], &["continue", "ok"]);
    let id = p.ok(&["create", "reach the goal", "--assignee", "oc", "--goal"]);
    steer(&p, &id, "anthropic/claude-sonnet-4-5", "high");
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.turn_kinds(&id), ["first", "continuation"]);
    let first = p.argv(1);
    assert_eq!(
        first[..5],
        [
            "run",
            "--format",
            "json",
            "--model",
            "anthropic/claude-sonnet-4-5"
        ]
    );
    assert!(first.last().unwrap().contains(&id), "{first:?}");
    assert!(!first.iter().any(|a| a == "--session"), "{first:?}");
    // The follow-up resumes the session and carries only the nudge.
    let second = p.argv(2);
    assert!(
        second
            .windows(2)
            .any(|w| w == ["--session", "ses_4f1a2b3c4d5eAbCdEf"]),
        "{second:?}"
    );
    assert!(!second.last().unwrap().contains(&id), "{second:?}");
    let log = p.log(&id);
    for line in [
        "[opencode] session ses_4f1a2b3c4d5eAbCdEf",
        "[opencode] tool bash: {\"command\":\"ls\"} → README.md",
        "[opencode] assistant: OpenCode turn 2 finished.",
        "[opencode] usage: 1900 input, 60 output, 300 cached tokens, $0.0030",
    ] {
        assert!(log.contains(line), "{line} not in\n{log}");
    }
    let agent = agent_of_run(&p, &id, 0);
    assert_eq!(agent["session_id"], "ses_4f1a2b3c4d5eAbCdEf");
    assert_eq!(agent["usage"]["input_tokens"], 3800);
    assert!(agent["usage"]["cost_usd"].as_f64().unwrap() > 0.005);
    let result = p
        .home
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "worker_result")
        .unwrap();
    assert_eq!(
        result.payload.unwrap()["last_output"],
        "OpenCode turn 2 finished."
    );
}

#[test]
fn opencode_failures_map_to_requeue_block_and_retry() {
    let p = setup("", &[("oc", "opencode")], &["ratelimit", "ok"]);
    let id = p.ok(&["create", "t", "--assignee", "oc"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let runs = p.home.board().runs(&id).unwrap();
    assert_eq!(runs[0].outcome.as_deref(), Some("rate_limited"), "{runs:?}");

    let p = setup("", &[("oc", "opencode")], &["auth"]);
    let id = p.ok(&["create", "t", "--assignee", "oc"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Blocked);
    assert_eq!(p.turns_run(), 1);

    let p = setup(
        "turn_recovery_backoff_seconds = [0.1]",
        &[("oc", "opencode")],
        &["transient", "malformed", "ok"],
    );
    let id = p.ok(&["create", "t", "--assignee", "oc"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.turn_kinds(&id), ["first", "recovery", "recovery"]);
}

#[test]
fn gemini_failures_map_to_block_and_retry() {
    let p = setup("", &[("gm", "gemini")], &["auth"]);
    let id = p.ok(&["create", "t", "--assignee", "gm"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Blocked);
    assert_eq!(p.turns_run(), 1);

    let p = setup(
        "turn_recovery_backoff_seconds = [0.1]",
        &[("gm", "gemini")],
        &["transient", "malformed", "ok"],
    );
    let id = p.ok(&["create", "t", "--assignee", "gm"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.turn_kinds(&id), ["first", "recovery", "recovery"]);
}

#[test]
fn aider_failures_said_on_stderr_map_to_requeue_block_and_retry() {
    let p = setup("", &[("ai", "aider")], &["ratelimit", "ok"]);
    let id = p.ok(&["create", "t", "--assignee", "ai"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let runs = p.home.board().runs(&id).unwrap();
    assert_eq!(runs[0].outcome.as_deref(), Some("rate_limited"), "{runs:?}");

    let p = setup("", &[("ai", "aider")], &["auth"]);
    let id = p.ok(&["create", "t", "--assignee", "ai"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Blocked);
    assert_eq!(p.turns_run(), 1);

    let p = setup(
        "turn_recovery_backoff_seconds = [0.1]",
        &[("ai", "aider")],
        &["transient", "ok"],
    );
    let id = p.ok(&["create", "t", "--assignee", "ai"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.turn_kinds(&id), ["first", "recovery"]);
}

#[test]
fn aider_gets_the_prompt_as_its_message_and_the_tasks_model() {
    let p = setup("", &[("ai", "aider")], &["ok"]);
    let id = p.ok(&["create", "t", "--assignee", "ai"]);
    steer(&p, &id, "sonnet", "high");
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let argv = p.argv(1);
    assert_eq!(
        argv[..7],
        [
            "--yes-always",
            "--no-pretty",
            "--no-check-update",
            "--model",
            "sonnet",
            "--reasoning-effort",
            "high"
        ]
    );
    assert_eq!(argv[7], "--message");
    assert!(argv[8].contains(&id));
}

#[test]
fn hermes_runs_chat_q_with_its_profile_and_the_terminal_timeout() {
    let p = setup("", &[("herm", "hermes")], &["ok"]);
    let id = p.ok(&["create", "t", "--assignee", "herm", "--max-runtime", "120"]);
    p.until_idle();
    assert_eq!(p.status(&id), Status::Done);
    let argv = p.argv(1);
    assert_eq!(argv[..4], ["-p", "herm", "chat", "-q"]);
    assert!(argv[4].contains(&id), "{argv:?}");
    assert!(p.file("env.1").contains("TERMINAL_TIMEOUT=90"));
    assert!(p.log(&id).contains("hermes: working"));
}

#[test]
fn a_comment_posted_during_a_long_goal_turn_reaches_the_next_turn_exactly_once() {
    comment_steering(&setup(
        "",
        &[("cc", "claude-code")],
        &["wait", "continue", "ok"],
    ));
}

#[test]
fn on_a_postgres_board_comments_steer_the_agent_and_usage_lands_on_the_run() {
    let p = setup_on_postgres(&[("cc", "claude-code")], &["wait", "continue", "ok"]);
    let id = comment_steering(&p);
    let agent = agent_of_run(&p, &id, 0);
    assert_eq!(agent["session_id"], "sess-claude-1");
    assert_eq!(agent["turns"], 3);
    assert_eq!(agent["usage"]["input_tokens"], 3000);
}

/// A goal task whose first turn holds until a comment was posted: the comment reaches the
/// second turn's prompt once, the third's not at all. Returns the task id.
fn comment_steering(p: &Presets) -> String {
    let id = p.ok(&["create", "reach the goal", "--assignee", "cc", "--goal"]);
    p.ok(&["comment", &id, "--body", "an early note"]);
    let child = p
        .kanban(&["dispatch", "--until-idle"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = p.ctl.join("prompt.1");
    p.home
        .wait_for("the first turn", WAIT, |_| started.exists());
    // The turn is still running; what it printed so far is already readable in the log.
    p.home.wait_for("a streamed line", WAIT, |_| {
        p.log(&id).contains("[claude-code] session sess-claude-1")
    });
    assert_eq!(p.status(&id), Status::Running);
    p.ok(&["comment", &id, "--body", "use the staging database"]);
    std::fs::write(p.ctl.join("go"), "").unwrap();
    let out = wait_output(child, WAIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(p.status(&id), Status::Done);
    assert_eq!(p.turns_run(), 3);
    let (one, two, three) = (p.file("prompt.1"), p.file("prompt.2"), p.file("prompt.3"));
    assert!(one.contains("an early note") && !one.contains("staging"));
    assert_eq!(two.matches("use the staging database").count(), 1, "{two}");
    assert!(
        two.contains("New note on your kanban task from the operator (delivered mid-run):\n- operator: use the staging database"),
        "{two}"
    );
    assert!(!two.contains("an early note"), "{two}");
    assert!(!three.contains("staging"), "{three}");
    let delivered: Vec<_> = p
        .home
        .events(&id)
        .into_iter()
        .filter(|e| e.kind == "comment_delivered")
        .collect();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].payload.as_ref().unwrap()["turn"], 2);
    id
}
