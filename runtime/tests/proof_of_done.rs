//! Proof of done (README "Proof of done"), end to end with the real binary on a real SQLite board:
//! completion contracts set at `create`, `complete --evidence` for `evidence-required`, the
//! exact-head GitHub acceptance of a pull-request contract, and `authorize-existing-pr`.
//!
//! `gh` is a shell script the test writes and puts first on the `PATH` it hands the `kanban`
//! child (never this process's environment): it replays recorded GitHub API answers, one file
//! per endpoint (graphql, rules/branches, check-runs, statuses, pulls/N), or fails as a file
//! `fail` says (its exit code, then what it writes on stderr), and logs each call with the
//! `GH_CONFIG_DIR` and `GH_TOKEN` it saw.

// Test code drives the real binary; a failed setup step fails the test at once.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kanban_tests::{Kanban, Run};
use serde_json::{Value, json};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const OTHER_SHA: &str = "89abcdef0123456789abcdef0123456789abcdef";
const PR: &str = "https://github.com/acme/app/pull/7";
/// Written on gh's stderr by the failing scripts: it must never reach the board.
const SECRET: &str = "gho_SECRETTOKEN4242";

const GH: &str = r#"#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
fx="$here/fixtures"
printf '%s\t%s\t%s\n' "${GH_CONFIG_DIR-<unset>}" "${GH_TOKEN-<unset>}" "$*" >> "$here/calls.log"
if [ -f "$fx/fail" ]; then
  code=$(head -n 1 "$fx/fail")
  tail -n +2 "$fx/fail" >&2
  exit "$code"
fi
endpoint=$2
case "${endpoint%%\?*}" in
  graphql) name=graphql ;;
  */rules/branches/*) name=rules ;;
  */check-runs) name=check-runs ;;
  */statuses) name=statuses ;;
  */pulls/*) name=pulls ;;
  *) name=unknown ;;
esac
if [ ! -f "$fx/$name.json" ]; then
  echo "gh: Not Found (HTTP 404)" >&2
  exit 1
fi
cat "$fx/$name.json"
"#;

/// A home with profile `alice` (a worker that fails, so the guard can be seen again) and the
/// scripted `gh` in `<tmp>/bin`.
struct Home {
    k: Kanban,
    gh: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
        std::fs::write(
            k.home().join("kanban.toml"),
            "[dispatch]\ncrash_grace_seconds = 0\nfailure_limit = 5\n\n\
             [profiles.alice]\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"exit 1\"]\n",
        )
        .unwrap();
        k.ok(&["init"]);
        let gh = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(gh.path().join("bin")).unwrap();
        std::fs::create_dir_all(gh.path().join("fixtures")).unwrap();
        let script = gh.path().join("bin/gh");
        std::fs::write(&script, GH).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = Home { k, gh };
        home.github(&Answers::green());
        home
    }

    /// `kanban <args>` with the scripted gh first on PATH and an ambient GH_TOKEN that a
    /// profile's gh must not see.
    fn run(&self, args: &[&str]) -> Run {
        let path = format!(
            "{}:{}",
            self.gh.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.k
            .cmd()
            .env("PATH", path)
            .env("GH_TOKEN", "ambient-token")
            .args(args)
            .output()
            .unwrap()
            .into()
    }

    fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert_eq!(run.code, 0, "kanban {args:?}: {}{}", run.stdout, run.stderr);
        run.stdout
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).unwrap()
    }

    fn create(&self, extra: &[&str]) -> String {
        let mut args = vec!["create", "ship it"];
        args.extend_from_slice(extra);
        self.json(&args)["id"].as_str().unwrap().to_owned()
    }

    fn task(&self, id: &str) -> Value {
        self.json(&["show", id])["task"].clone()
    }

    fn events(&self, id: &str, kind: &str) -> Vec<Value> {
        self.json(&["events", id])
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == kind)
            .cloned()
            .collect()
    }

    /// Replaces the recorded GitHub answers.
    fn github(&self, answers: &Answers) {
        let fx = self.gh.path().join("fixtures");
        for (name, body) in [
            ("graphql", &answers.graphql),
            ("rules", &answers.rules),
            ("check-runs", &answers.check_runs),
            ("statuses", &answers.statuses),
            ("pulls", &answers.pulls),
        ] {
            std::fs::write(fx.join(format!("{name}.json")), body).unwrap();
        }
        let _ = std::fs::remove_file(fx.join("fail"));
    }

    /// Makes every gh call exit `code` writing `stderr`.
    fn gh_fails(&self, code: i32, stderr: &str) {
        std::fs::write(
            self.gh.path().join("fixtures/fail"),
            format!("{code}\n{stderr}\n"),
        )
        .unwrap();
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(self.gh.path().join("calls.log")).unwrap_or_default()
    }

    /// Every byte of the board (the database and its WAL).
    fn board_bytes(&self) -> Vec<u8> {
        let db = self.k.default_db();
        let mut bytes = std::fs::read(&db).unwrap();
        let wal = PathBuf::from(format!("{}-wal", db.display()));
        bytes.extend(std::fs::read(wal).unwrap_or_default());
        bytes
    }

    fn home(&self) -> &Path {
        self.k.home()
    }
}

/// One recorded GitHub API answer per endpoint.
struct Answers {
    graphql: String,
    rules: String,
    check_runs: String,
    statuses: String,
    pulls: String,
}

impl Answers {
    /// Pull request 7 of acme/app at [`SHA`]: branch protection requires `ci/build` of app
    /// 15368 and a ruleset requires `lint`; both succeeded on exactly that head.
    fn green() -> Answers {
        Answers {
            graphql: json!({"data": {"repository": {"pullRequest": {
                "headRefOid": SHA, "baseRefName": "main", "state": "OPEN",
                "baseRef": {"branchProtectionRule": {"requiredStatusChecks": [
                    {"context": "ci/build", "app": {"databaseId": 15368}}]}}}}}})
            .to_string(),
            rules: json!([[
                {"type": "deletion"},
                {"type": "required_status_checks", "parameters": {"required_status_checks": [
                    {"context": "lint"}]}}]])
            .to_string(),
            check_runs: Self::run("completed", Some("success"), SHA),
            statuses: json!([[{"id": 5, "context": "lint", "state": "success",
                "target_url": "https://ci.example/lint/5"}]])
            .to_string(),
            pulls: Self::pull("open", SHA),
        }
    }

    fn run(status: &str, conclusion: Option<&str>, sha: &str) -> String {
        json!([{"total_count": 1, "check_runs": [{"id": 11, "name": "ci/build",
            "app": {"id": 15368}, "head_sha": sha, "status": status, "conclusion": conclusion,
            "html_url": "https://github.com/acme/app/runs/11"}]}])
        .to_string()
    }

    fn pull(state: &str, sha: &str) -> String {
        json!({"state": state, "merged": false,
            "head": {"sha": sha, "ref": "feature", "repo": {"full_name": "acme/app"}},
            "base": {"ref": "main", "repo": {"full_name": "acme/app"}}})
        .to_string()
    }
}

fn assert_refused(run: &Run, code: i32, says: &str) {
    assert_eq!(run.code, code, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(says), "{says:?} not in {}", run.stderr);
}

// ---- contracts at create ----

#[test]
fn a_bad_completion_contract_is_refused_at_create_and_creates_nothing() {
    let h = Home::new();
    for bad in [
        "bogus",
        "acme",
        "https://github.com/acme/app/pull/0",
        "https://github.com/acme/app/issues/7",
        "http://github.com/acme/app/pull/7",
    ] {
        let run = h.run(&["create", "t", "--completion-contract", bad]);
        assert_refused(&run, 2, "invalid completion contract");
        assert!(run.stderr.contains("evidence-required"), "{}", run.stderr);
    }
    assert_eq!(h.json(&["list"]), json!([]));
}

#[test]
fn the_contract_shows_in_show_and_list_and_defaults_to_local_only() {
    let h = Home::new();
    let plain = h.create(&[]);
    let pr = h.create(&["--completion-contract", PR]);
    assert_eq!(h.task(&plain)["completion_contract"], "local-only");
    assert_eq!(h.task(&pr)["completion_contract"], PR);
    let list = h.json(&["list"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|t| t["completion_contract"] == PR),
        "{list}"
    );
    assert!(
        h.ok(&["show", &pr])
            .contains(&format!("completion contract {PR}"))
    );
}

// ---- evidence-required ----

#[test]
fn evidence_required_refuses_a_completion_without_evidence_and_changes_nothing() {
    let h = Home::new();
    let id = h.create(&["--completion-contract", "evidence-required"]);
    let before = h.json(&["events", &id]);
    let run = h.run(&["complete", &id, "--summary", "done, trust me"]);
    assert_refused(&run, 3, "evidence-required");
    assert_eq!(h.task(&id)["status"], "ready");
    assert_eq!(h.json(&["events", &id]), before, "nothing recorded");
}

#[test]
fn malformed_evidence_is_refused_before_anything_changes() {
    let h = Home::new();
    let id = h.create(&["--completion-contract", "evidence-required"]);
    for bad in ["no-equals-sign", "=detail only", "kind only=", "  =  "] {
        let run = h.run(&["complete", &id, "--summary", "s", "--evidence", bad]);
        assert_refused(&run, 2, "KIND=DETAIL");
    }
    assert_eq!(h.task(&id)["status"], "ready");
}

#[test]
fn evidence_required_accepts_a_receipt_and_records_it_normalised() {
    let h = Home::new();
    let id = h.create(&["--completion-contract", "evidence-required"]);
    h.ok(&[
        "complete",
        &id,
        "--summary",
        "tests pass",
        "--evidence",
        " test = cargo test: 41 passed ",
        "log=target/test.log",
    ]);
    assert_eq!(h.task(&id)["status"], "done");
    let completed = h.events(&id, "completed");
    assert_eq!(
        completed[0]["payload"]["evidence"],
        json!([{"kind": "test", "detail": "cargo test: 41 passed"},
               {"kind": "log", "detail": "target/test.log"}])
    );
}

// ---- exact-head PR acceptance ----

/// A task with the PR contract, assigned to `alice`.
fn pr_task(h: &Home) -> String {
    h.create(&["--assignee", "alice", "--completion-contract", PR])
}

fn complete_pr(h: &Home, id: &str) -> Run {
    h.run(&[
        "complete",
        id,
        "--summary",
        "opened the PR",
        "--metadata",
        &json!({"published_pr": PR}).to_string(),
    ])
}

/// Asserts the completion of `id` was refused with `classification`, the task kept open with the
/// recovery text, and a `pr_acceptance` receipt saying so; returns the receipt.
fn assert_kept_open(h: &Home, id: &str, run: &Run, classification: &str) -> Value {
    assert_refused(run, 3, &format!("PR acceptance {classification}"));
    let task = h.task(id);
    assert_eq!(task["status"], "ready");
    let error = task["last_failure_error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("PR acceptance {classification}:")) && error.contains("retry"),
        "{error}"
    );
    let receipts = h.events(id, "pr_acceptance");
    let receipt = receipts.last().unwrap()["payload"].clone();
    assert_eq!(receipt["classification"], classification, "{receipt}");
    assert_eq!(receipt["ok"], false);
    assert!(h.events(id, "completed").is_empty());
    receipt
}

#[test]
fn a_green_exact_head_completes_with_protection_and_ruleset_checks() {
    let h = Home::new();
    let id = pr_task(&h);
    h.ok(&[
        "complete",
        &id,
        "--summary",
        "opened the PR",
        "--metadata",
        &json!({"published_pr": PR}).to_string(),
    ]);
    assert_eq!(h.task(&id)["status"], "done");
    let receipt = h.events(&id, "pr_acceptance")[0]["payload"].clone();
    assert_eq!(receipt["classification"], "success");
    assert_eq!(receipt["ok"], true);
    assert_eq!(receipt["head_sha"], SHA);
    assert_eq!(
        receipt["required"],
        json!([{"context": "ci/build", "app_id": 15368}, {"context": "lint", "app_id": null}])
    );
    let names: Vec<&str> = receipt["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ci/build", "lint"]);
}

#[test]
fn gh_runs_with_the_assignee_profiles_own_config_dir_and_no_ambient_token() {
    let h = Home::new();
    let id = pr_task(&h);
    h.ok(&[
        "complete",
        &id,
        "--summary",
        "s",
        "--metadata",
        &json!({"published_pr": PR}).to_string(),
    ]);
    let calls = h.calls();
    let dir = h.home().join("profiles/alice/gh");
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(
        lines.len(),
        5,
        "graphql, rules, check-runs, statuses, pulls: {calls}"
    );
    for line in lines {
        let mut fields = line.split('\t');
        assert_eq!(fields.next(), Some(dir.to_str().unwrap()), "{line}");
        assert_eq!(fields.next(), Some("<unset>"), "GH_TOKEN removed: {line}");
        assert!(
            fields.next().unwrap().contains("--hostname github.com"),
            "{line}"
        );
    }
}

#[test]
fn a_configured_gh_config_dir_is_the_one_gh_sees() {
    let h = Home::new();
    let toml = h.home().join("kanban.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace(
            "[profiles.alice]\n",
            "[profiles.alice]\ngh_config_dir = \"/srv/gh/alice\"\n",
        ),
    )
    .unwrap();
    let id = pr_task(&h);
    let _ = complete_pr(&h, &id);
    assert!(
        h.calls().lines().all(|l| l.starts_with("/srv/gh/alice\t")),
        "{}",
        h.calls()
    );
}

#[test]
fn a_pending_check_keeps_the_task_open() {
    let h = Home::new();
    h.github(&Answers {
        check_runs: Answers::run("in_progress", None, SHA),
        ..Answers::green()
    });
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    let receipt = assert_kept_open(&h, &id, &run, "pending");
    assert_eq!(receipt["head_sha"], SHA);
}

#[test]
fn a_failed_check_keeps_the_task_open() {
    let h = Home::new();
    h.github(&Answers {
        check_runs: Answers::run("completed", Some("failure"), SHA),
        ..Answers::green()
    });
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    assert_kept_open(&h, &id, &run, "failure");
    // Fixed and green: the retry completes it, and the recovery text is cleared.
    h.github(&Answers::green());
    assert_eq!(complete_pr(&h, &id).code, 0);
    let task = h.task(&id);
    assert_eq!(task["status"], "done");
    assert_eq!(task["last_failure_error"], Value::Null);
}

#[test]
fn a_head_that_moves_between_the_reads_is_stale() {
    let h = Home::new();
    h.github(&Answers {
        pulls: Answers::pull("open", OTHER_SHA),
        ..Answers::green()
    });
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    assert_kept_open(&h, &id, &run, "stale");
}

#[test]
fn a_success_on_an_older_head_is_stale() {
    let h = Home::new();
    h.github(&Answers {
        check_runs: Answers::run("completed", Some("success"), OTHER_SHA),
        ..Answers::green()
    });
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    assert_kept_open(&h, &id, &run, "stale");
}

#[test]
fn garbage_from_github_is_infra() {
    let h = Home::new();
    h.github(&Answers {
        graphql: "<html>502 Bad Gateway</html>".to_owned(),
        ..Answers::green()
    });
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    assert_kept_open(&h, &id, &run, "infra");
}

#[test]
fn gh_without_a_login_is_auth_and_its_stderr_is_never_stored() {
    let h = Home::new();
    h.gh_fails(
        4,
        &format!("To get started with GitHub CLI, please run: gh auth login {SECRET}"),
    );
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    let receipt = assert_kept_open(&h, &id, &run, "auth");
    let detail = receipt["detail"].as_str().unwrap();
    assert!(detail.contains("gh has no login for graphql"), "{detail}");
    assert!(detail.contains("\"alice\""), "{detail}");
    assert!(!run.stderr.contains(SECRET), "{}", run.stderr);
    let bytes = h.board_bytes();
    assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
    // One read, no retry: an auth failure is not transient.
    assert_eq!(h.calls().lines().count(), 1, "{}", h.calls());
}

#[test]
fn a_missing_gh_is_auth() {
    let h = Home::new();
    let id = pr_task(&h);
    let empty = tempfile::tempdir().unwrap();
    let run: Run =
        h.k.cmd()
            .env("PATH", empty.path())
            .args([
                "complete",
                &id,
                "--summary",
                "s",
                "--metadata",
                &json!({"published_pr": PR}).to_string(),
            ])
            .output()
            .unwrap()
            .into();
    let receipt = assert_kept_open(&h, &id, &run, "auth");
    assert!(
        receipt["detail"]
            .as_str()
            .unwrap()
            .contains("gh is not installed"),
        "{receipt}"
    );
}

#[test]
fn an_http_403_is_auth_and_its_stderr_is_never_stored() {
    let h = Home::new();
    h.gh_fails(
        1,
        &format!("gh: Resource not accessible by integration (HTTP 403) {SECRET}"),
    );
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    let receipt = assert_kept_open(&h, &id, &run, "auth");
    assert!(
        receipt["detail"]
            .as_str()
            .unwrap()
            .contains("HTTP 403 on graphql")
    );
    let bytes = h.board_bytes();
    assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
}

#[test]
fn no_required_check_is_missing() {
    let h = Home::new();
    h.github(&Answers {
        graphql: json!({"data": {"repository": {"pullRequest": {
            "headRefOid": SHA, "baseRefName": "main", "state": "OPEN",
            "baseRef": {"branchProtectionRule": null}}}}})
        .to_string(),
        rules: "[[]]".to_owned(),
        ..Answers::green()
    });
    let id = pr_task(&h);
    let run = complete_pr(&h, &id);
    assert_kept_open(&h, &id, &run, "missing");
}

#[test]
fn a_repo_contract_binds_once_to_the_published_pull_request() {
    let h = Home::new();
    h.github(&Answers {
        check_runs: Answers::run("in_progress", None, SHA),
        ..Answers::green()
    });
    let id = h.create(&["--assignee", "alice", "--completion-contract", "acme/app"]);
    // No published PR: nothing to accept, and nothing bound.
    let run = h.run(&["complete", &id, "--summary", "s"]);
    assert_kept_open(&h, &id, &run, "missing");
    assert_eq!(h.task(&id)["completion_contract"], "acme/app");
    // Pull request 7 is published: the contract binds to it (its check is still pending).
    let run = complete_pr(&h, &id);
    assert_kept_open(&h, &id, &run, "pending");
    assert_eq!(h.task(&id)["completion_contract"], PR);
    // A green sibling cannot replace it.
    h.github(&Answers::green());
    let sibling = json!({"published_pr": "https://github.com/acme/app/pull/8"}).to_string();
    let run = h.run(&["complete", &id, "--summary", "s", "--metadata", &sibling]);
    let receipt = assert_kept_open(&h, &id, &run, "missing");
    assert!(receipt["detail"].as_str().unwrap().contains("published_pr"));
    assert_eq!(h.task(&id)["completion_contract"], PR);
    // The bound one, green: done.
    assert_eq!(complete_pr(&h, &id).code, 0);
    assert_eq!(h.task(&id)["status"], "done");
}

// ---- authorize-existing-pr ----

fn dispatch_once(h: &Home) -> Value {
    let out = h.ok(&["--json", "dispatch", "--once"]);
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

fn guarded(report: &Value) -> Vec<String> {
    report["respawn_guarded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["guard"].as_str().unwrap().to_owned())
        .collect()
}

/// A ready task of `alice` whose comment names pull request 7.
fn task_with_pr(h: &Home) -> String {
    let id = h.create(&["--assignee", "alice"]);
    h.ok(&["comment", &id, "--body", &format!("opened {PR}")]);
    id
}

#[test]
fn an_authorization_lifts_the_active_pr_guard_for_one_run() {
    let h = Home::new();
    let id = task_with_pr(&h);
    assert_eq!(guarded(&dispatch_once(&h)), ["active_pr"]);
    let grant = h.json(&[
        "authorize-existing-pr",
        &id,
        PR,
        "--reason",
        "amend after review",
    ]);
    assert_eq!(grant["branch"], "feature");
    assert_eq!(grant["run_id_floor"], 0);
    let granted = h.events(&id, "existing_pr_authorized");
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0]["payload"]["reason"], "amend after review");
    assert!(
        h.calls().contains("api repos/acme/app/pulls/7"),
        "{}",
        h.calls()
    );
    // The next tick spawns it once and spends the grant on that run.
    let report = dispatch_once(&h);
    assert_eq!(report["spawned"][0]["task_id"], id.as_str(), "{report}");
    let run_id = report["spawned"][0]["run_id"].as_i64().unwrap();
    let consumed = h.events(&id, "existing_pr_authorization_consumed");
    assert_eq!(consumed.len(), 1);
    assert_eq!(consumed[0]["run_id"], run_id);
    // The worker fails; once the task is ready again the guard holds it as before.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task = h.task(&id);
        if task["status"] == "ready" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never finished: {task}"
        );
        std::thread::sleep(Duration::from_millis(50));
        h.ok(&["dispatch", "--once"]);
    }
    let report = dispatch_once(&h);
    assert_eq!(guarded(&report), ["active_pr"], "{report}");
    assert!(report["spawned"].as_array().unwrap().is_empty());
}

#[test]
fn authorizing_a_pull_request_the_task_never_named_is_refused() {
    let h = Home::new();
    let id = task_with_pr(&h);
    let run = h.run(&[
        "authorize-existing-pr",
        &id,
        "https://github.com/acme/app/pull/8",
        "--reason",
        "r",
    ]);
    assert_refused(&run, 3, "never referenced");
    assert!(h.events(&id, "existing_pr_authorized").is_empty());
    assert_eq!(h.calls(), "", "GitHub is not asked");
}

#[test]
fn authorizing_a_closed_pull_request_is_refused() {
    let h = Home::new();
    h.github(&Answers {
        pulls: Answers::pull("closed", SHA),
        ..Answers::green()
    });
    let id = task_with_pr(&h);
    let run = h.run(&["authorize-existing-pr", &id, PR, "--reason", "r"]);
    assert_refused(&run, 3, "must be open");
    assert!(h.events(&id, "existing_pr_authorized").is_empty());
}

#[test]
fn authorizing_with_bad_input_is_refused_and_records_nothing() {
    let h = Home::new();
    let id = task_with_pr(&h);
    for bad in [
        "github.com/acme/app/pull/7",
        "https://github.com/acme/app/pull/7/files",
        "https://github.com/acme/app/pull/x",
    ] {
        let run = h.run(&["authorize-existing-pr", &id, bad, "--reason", "r"]);
        assert_refused(&run, 2, "malformed PR URL");
    }
    let run = h.run(&["authorize-existing-pr", &id, PR, "--reason", "  "]);
    assert_refused(&run, 3, "a reason is required");
    let run = h.run(&[
        "authorize-existing-pr",
        &id,
        PR,
        "--reason",
        "r",
        "--branch",
        "other",
    ]);
    assert_refused(&run, 3, "head branch");
    h.gh_fails(4, SECRET);
    let run = h.run(&["authorize-existing-pr", &id, PR, "--reason", "r"]);
    assert_refused(&run, 3, "could not verify the PR on GitHub");
    assert!(!run.stderr.contains(SECRET));
    assert!(h.events(&id, "existing_pr_authorized").is_empty());
}
