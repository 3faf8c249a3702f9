//! What one agent hands the next (README "Handoff"), end to end with the real binary and real
//! workers: a parent completed with `--summary`, `--metadata` and `--created-cards` by its worker
//! shows both in its child's prompt, in `kanban context CHILD` (exactly the prompt the child's
//! worker then gets) and in `show`; an empty completion and a completion claiming cards that are
//! not the task's are refused (exit 3) and change nothing but their audit event.

// Test code drives the real binary and real processes; a failed setup step fails the test at
// once, with the panic message.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use kanban_tests::Kanban;
use serde_json::Value;

/// The parent's agent creates a follow-up card as its task's worker, then completes with a
/// summary naming it, metadata and the card as created; the child's agent keeps the prompt it was given in the home.
const PROFILES: &str = r#"
[profiles.parent]
agent = "command"
command = ["sh", "-c", '''
card=$(kanban create "follow-up card" --blocked) &&
kanban complete --summary "schema v2 merged; follow-up $card" --metadata '{"pr": 42, "files": ["a.rs"]}' --created-cards "$card"
''']

[profiles.capture]
agent = "command"
command = ["sh", "-c", "cat > \"$HERMES_HOME/prompt-$HERMES_KANBAN_TASK.txt\" && kanban complete --summary captured"]

[profiles.lenient]
agent = "builtin:complete"
allow_empty_completion = true
"#;

fn home(dispatch: &str) -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    let env = format!(
        "env = {{ HERMES_HOME = {:?} }}\n",
        k.home().display().to_string()
    );
    // Each command profile finds the home through HERMES_HOME (as the original tests' homes).
    let profiles = PROFILES
        .replace(
            "[profiles.capture]\n",
            &format!("[profiles.capture]\n{env}"),
        )
        .replace("[profiles.parent]\n", &format!("[profiles.parent]\n{env}"));
    std::fs::write(
        k.home().join("kanban.toml"),
        format!(
            "[dispatch]\ncrash_grace_seconds = 0\ninterval_seconds = 0.05\n{dispatch}\n{profiles}"
        ),
    )
    .unwrap();
    k.ok(&["init"]);
    k
}

/// `kanban dispatch --until-idle`, failing after a minute.
fn until_idle(k: &Kanban) {
    let mut child = k
        .cmd()
        .args(["dispatch", "--until-idle"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("dispatch --until-idle did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dispatch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn show(k: &Kanban, id: &str) -> Value {
    k.json(&["show", id, "--events", "1000"])
}

fn events(k: &Kanban, id: &str) -> Vec<Value> {
    k.json(&["events", id]).as_array().unwrap().clone()
}

fn events_of(k: &Kanban, id: &str, kind: &str) -> Vec<Value> {
    events(k, id)
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

#[test]
fn a_parents_summary_and_metadata_reach_its_childs_prompt_context_and_show() {
    let k = home("");
    let parent = k.create("migrate the schema", &["--assignee", "parent"]);
    // Blocked, so the child waits for `kanban context` to be read before its worker runs.
    let child = k.create(
        "use the new schema",
        &["--assignee", "capture", "--parent", &parent, "--blocked"],
    );
    until_idle(&k);
    assert_eq!(k.status(&parent), "done");

    // The handoff is on the parent's closing run, and the created card was verified.
    let runs = show(&k, &parent)["runs"].as_array().unwrap().clone();
    let closing = runs.last().unwrap();
    assert_eq!(closing["outcome"], "completed");
    assert!(
        closing["summary"]
            .as_str()
            .unwrap()
            .starts_with("schema v2 merged")
    );
    assert_eq!(
        closing["metadata"],
        serde_json::json!({"pr": 42, "files": ["a.rs"]})
    );
    let completed = &events_of(&k, &parent, "completed")[0];
    let card = completed["payload"]["verified_cards"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(show(&k, &card)["task"]["created_by"], parent.as_str());
    // The prose names only real tasks: no advisory event.
    assert!(events_of(&k, &parent, "suspected_hallucinated_references").is_empty());

    // `show` of the parent prints its run's metadata; `show` of the child the parent's handoff.
    let shown_parent = k.ok(&["show", &parent]);
    assert!(
        shown_parent.contains(r#"metadata {"files":["a.rs"],"pr":42}"#)
            || shown_parent.contains(r#"metadata {"pr":42,"files":["a.rs"]}"#),
        "{shown_parent}"
    );
    let shown_child = k.ok(&["show", &child]);
    assert!(
        shown_child.contains(&format!("handoff from {parent}"))
            && shown_child.contains("schema v2 merged"),
        "{shown_child}"
    );
    assert!(shown_child.contains("\"pr\":42"), "{shown_child}");

    // `kanban context CHILD` before its worker runs …
    let context = k.run(&["context", &child]);
    assert_eq!(context.code, 0, "{}", context.stderr);
    let context = context.stdout;
    assert!(context.contains("## Parent task results"), "{context}");
    assert!(context.contains("not the current state"), "{context}");
    assert!(context.contains("schema v2 merged"), "{context}");
    assert!(
        context.contains(r#"_metadata_: `"#) && context.contains("\"pr\":42"),
        "{context}"
    );
    assert!(context.contains("(completed just now)"), "{context}");

    // … is exactly the prompt the worker then gets.
    k.ok(&["unblock", &child]);
    until_idle(&k);
    assert_eq!(k.status(&child), "done");
    // (The scratch workspace is gone with the completion: the agent kept its prompt in the home.)
    let prompt = std::fs::read_to_string(k.home().join(format!("prompt-{child}.txt"))).unwrap();
    assert_eq!(prompt, context);

    // The next task of `capture` sees its recent work, with an absolute date.
    let next = k.create("another", &["--assignee", "capture"]);
    let context = k.ok(&["context", &next]);
    assert!(context.contains("## Recent work by @capture"), "{context}");
    assert!(
        context.contains(&format!("- {child} — use the new schema ("))
            && context.contains(" UTC, "),
        "{context}"
    );
    assert!(context.contains("): captured"), "{context}");
}

#[test]
fn prior_attempts_show_their_metadata_and_absolute_dates() {
    let k = home("");
    let id = k.create("retry me", &["--assignee", "capture"]);
    k.ok(&[
        "review",
        "request",
        &id,
        "--summary",
        "first pass",
        "--metadata",
        r#"{"coverage": 0.8}"#,
    ]);
    k.ok(&["review", "reopen", &id]);
    let context = k.ok(&["context", &id]);
    assert!(
        context.contains("## Prior attempts on this task"),
        "{context}"
    );
    assert!(context.contains("first pass"), "{context}");
    assert!(
        context.contains(r#"_metadata_: `{"coverage":0.8}`"#),
        "{context}"
    );
    assert!(context.contains(" UTC, just now)"), "{context}");
}

#[test]
fn an_empty_completion_is_refused_with_exit_3_and_changes_nothing() {
    let k = home("");
    let id = k.create("quiet", &[]);
    let before = (show(&k, &id)["task"].clone(), events(&k, &id));
    for args in [
        vec!["complete", id.as_str()],
        vec![
            "complete",
            id.as_str(),
            "--summary",
            "  ",
            "--metadata",
            "{}",
        ],
    ] {
        let run = k.run(&args);
        assert_eq!(run.code, 3, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("has no result or summary evidence"),
            "{}",
            run.stderr
        );
    }
    assert_eq!((show(&k, &id)["task"].clone(), events(&k, &id)), before);
    // Metadata alone is a handoff.
    k.ok(&["complete", &id, "--metadata", r#"{"checked": true}"#]);
    assert_eq!(k.status(&id), "done");
}

#[test]
fn the_profile_or_the_board_may_accept_empty_completions() {
    let k = home("");
    let lenient = k.create("lenient", &["--assignee", "lenient"]);
    k.ok(&["complete", &lenient]);
    assert_eq!(k.status(&lenient), "done");

    let k = home("allow_empty_completion = true");
    let any = k.create("any", &[]);
    k.ok(&["complete", &any]);
    assert_eq!(k.status(&any), "done");
}

#[test]
fn phantom_created_cards_refuse_the_completion_after_an_audit_event() {
    let k = home("");
    let id = k.create("fan out", &["--assignee", "capture"]);
    let stranger = k.create("someone else's", &[]);
    let before = show(&k, &id)["task"].clone();
    let run = k.run(&[
        "complete",
        &id,
        "--summary",
        "made two cards",
        "--created-cards",
        &format!("t_deadbeef00,{stranger}"),
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("t_deadbeef00") && run.stderr.contains(&stranger),
        "{}",
        run.stderr
    );
    assert_eq!(show(&k, &id)["task"], before);
    assert!(events_of(&k, &id, "completed").is_empty());
    let blocked = events_of(&k, &id, "completion_blocked_hallucination");
    assert_eq!(blocked.len(), 1);
    assert_eq!(
        blocked[0]["payload"],
        serde_json::json!({
            "phantom_cards": ["t_deadbeef00", stranger],
            "verified_cards": [],
            "summary_preview": "made two cards",
        })
    );

    // A card linked as the task's child is the task's (the original's third rule).
    let linked = k.create("linked", &["--parent", &id]);
    k.ok(&[
        "complete",
        &id,
        "--summary",
        &format!("made {linked}; see also t_0123456789ab"),
        "--created-cards",
        &linked,
    ]);
    let completed = &events_of(&k, &id, "completed")[0];
    assert_eq!(
        completed["payload"]["verified_cards"],
        serde_json::json!([linked])
    );
    // The prose names a task that does not exist: an advisory event, the completion stands.
    let advisory = events_of(&k, &id, "suspected_hallucinated_references");
    assert_eq!(
        advisory[0]["payload"],
        serde_json::json!({"phantom_refs": ["t_0123456789ab"], "source": "completion_summary"})
    );
    assert_eq!(k.status(&id), "done");
}

#[test]
fn metadata_that_is_not_a_json_object_is_a_usage_error() {
    let k = home("");
    let id = k.create("x", &[]);
    for bad in ["[1, 2]", "{not json", "\"text\""] {
        let run = k.run(&["complete", &id, "--summary", "s", "--metadata", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(run.stderr.contains("--metadata"), "{}", run.stderr);
    }
    assert_eq!(k.status(&id), "ready");
}

#[test]
fn a_done_tasks_result_summary_and_metadata_are_edited_with_an_audit_event() {
    let k = home("");
    let id = k.create("x", &[]);
    k.ok(&["complete", &id, "--summary", "first"]);
    k.ok(&[
        "edit",
        &id,
        "--result",
        "final answer",
        "--summary",
        "corrected",
        "--metadata",
        r#"{"v": 2}"#,
    ]);
    let s = show(&k, &id);
    assert_eq!(s["task"]["result"], "final answer");
    let run = s["runs"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(run["summary"], "corrected");
    assert_eq!(run["metadata"], serde_json::json!({"v": 2}));
    let edited = events_of(&k, &id, "edited");
    assert_eq!(
        edited.last().unwrap()["payload"],
        serde_json::json!({
            "fields": ["result", "summary", "metadata"],
            "result_len": 12,
            "summary": "corrected",
        })
    );
    // Not on a task that is not done; --summary needs --result.
    let open = k.create("open", &[]);
    assert_eq!(k.run(&["edit", &open, "--result", "r"]).code, 3);
    assert_eq!(k.run(&["edit", &id, "--summary", "s"]).code, 2);
}

#[test]
fn review_request_force_hands_over_a_live_claim() {
    let k = home("");
    let id = k.create("x", &["--assignee", "capture"]);
    k.json(&["claim", &id, "--claimer", "elsewhere:1"]);
    let refused = k.run(&["review", "request", &id, "--summary", "ready for eyes"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(refused.stderr.contains("live claim"), "{}", refused.stderr);
    assert_eq!(k.status(&id), "running");
    k.ok(&[
        "review",
        "request",
        &id,
        "--summary",
        "ready for eyes",
        "--force",
    ]);
    assert_eq!(k.status(&id), "review");
    let run = show(&k, &id)["runs"].as_array().unwrap()[0].clone();
    assert_eq!(run["outcome"], "review_requested");
}

#[test]
fn review_handoffs_are_redacted() {
    let k = home("");
    let id = k.create("x", &["--assignee", "capture"]);
    k.ok(&[
        "review",
        "request",
        &id,
        "--summary",
        "used token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "--metadata",
        r#"{"auth": "Authorization: Bearer sk-secretsecretsecret123"}"#,
    ]);
    let s = show(&k, &id);
    let text = s.to_string();
    assert!(
        !text.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "{text}"
    );
    assert!(!text.contains("sk-secretsecretsecret123"), "{text}");
    let run = s["runs"].as_array().unwrap().last().unwrap().clone();
    assert!(run["summary"].as_str().unwrap().starts_with("used token "));
    assert!(run["metadata"]["auth"].as_str().is_some());
}
