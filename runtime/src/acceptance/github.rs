//! The GitHub side of proof of done: `gh api` run as the profile that must read the repository,
//! the exact-head acceptance ([`collect`], the original's `collect_acceptance` and `_classify`)
//! and the read-only pull-request lookup of an authorization ([`lookup_pr`], [`check_pr`]).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{CheckReceipt, Classification, Contract, PrRef, Receipt, RequiredCheck};
use crate::identity;

/// The variables through which `gh` could find a login other than the profile's own folder.
const TOKEN_KEYS: &[&str] = &[
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
];

/// How `gh` is run: with a profile's own configuration folder (`GH_CONFIG_DIR`, the token
/// variables removed, so a folder without a login fails "not logged in" instead of falling back
/// to `~/.config/gh`), or with the caller's own login (an operator's command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gh {
    config_dir: Option<PathBuf>,
    /// Whose login this is, for the receipt's text.
    login: String,
    /// The program (`gh` on `PATH`; a script in unit tests).
    program: PathBuf,
    /// How long one `gh api` call may take (the original's 30 s); then it is killed: `infra`.
    timeout: Duration,
}

/// How long one `gh api` call may take.
const GH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a `gh api` read gave no answer. Neither variant carries what `gh` wrote on its standard
/// error: only the HTTP status and the endpoint, or the phase that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GhError {
    /// `gh` is missing, has no login (its exit 4), or GitHub refused it (HTTP 401/403/404, or
    /// GraphQL found no repository): an identity problem to fix, never retried as transient.
    #[error("GitHub refused the read ({0})")]
    Auth(String),
    /// No usable answer (a failed run, output that is not the JSON expected, an incomplete page).
    #[error("GitHub's answer was unavailable or incomplete ({0})")]
    Infra(&'static str),
}

impl Gh {
    /// `gh` as profile `name`, with its configuration folder `config_dir`.
    pub fn profile(name: &str, config_dir: PathBuf) -> Gh {
        Gh {
            config_dir: Some(config_dir),
            login: format!("assignee profile {name:?}'s gh login"),
            program: PathBuf::from("gh"),
            timeout: GH_TIMEOUT,
        }
    }

    /// `gh` with the login of the process that runs it (an operator's command).
    pub fn ambient() -> Gh {
        Gh {
            config_dir: None,
            login: "the operator's gh login".to_owned(),
            program: PathBuf::from("gh"),
            timeout: GH_TIMEOUT,
        }
    }

    /// `gh api ENDPOINT --hostname github.com [-f query=…] [--paginate --slurp]`, its JSON.
    fn api(&self, endpoint: &str, query: Option<&str>, paginate: bool) -> Result<Value, GhError> {
        let path = endpoint.split('?').next().unwrap_or(endpoint);
        let mut cmd = identity::command(&self.program);
        cmd.args(["api", endpoint, "--hostname", "github.com"]);
        if let Some(query) = query {
            cmd.arg("-f").arg(format!("query={query}"));
        }
        if paginate {
            cmd.args(["--paginate", "--slurp"]);
        }
        if let Some(dir) = &self.config_dir {
            cmd.env("GH_CONFIG_DIR", dir);
            for key in TOKEN_KEYS {
                cmd.env_remove(key);
            }
        }
        let output = cmd
            .output_within(&[], self.timeout)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    GhError::Auth(format!("gh is not installed, reading {path}"))
                }
                std::io::ErrorKind::TimedOut => GhError::Infra("gh api timed out"),
                _ => GhError::Infra("gh could not be run"),
            })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if let Some(code) = refused_status(&stderr) {
                return Err(GhError::Auth(format!("HTTP {code} on {path}")));
            }
            if output.status.code() == Some(4) {
                return Err(GhError::Auth(format!("gh has no login for {path}")));
            }
            return Err(GhError::Infra("gh api failed"));
        }
        let value: Value = serde_json::from_slice(&output.stdout)
            .map_err(|_| GhError::Infra("gh api printed no JSON"))?;
        if value
            .get("errors")
            .is_some_and(|e| !e.is_null() && e.as_array().is_none_or(|a| !a.is_empty()))
        {
            return Err(GhError::Infra(
                "GitHub returned incomplete GraphQL evidence",
            ));
        }
        Ok(value)
    }
}

/// `401`, `403` or `404` when `stderr` says `HTTP 40x` for one of them.
fn refused_status(stderr: &str) -> Option<&'static str> {
    ["401", "403", "404"]
        .into_iter()
        .find(|code| stderr.contains(&format!("HTTP {code}")))
}

fn unreadable() -> GhError {
    GhError::Infra("GitHub's answer lacks a field the acceptance reads")
}

fn field<'a>(value: &'a Value, key: &str) -> Result<&'a Value, GhError> {
    value.get(key).ok_or_else(unreadable)
}

fn field_str<'a>(value: &'a Value, key: &str) -> Result<&'a str, GhError> {
    field(value, key)?.as_str().ok_or_else(unreadable)
}

fn array(value: &Value) -> Result<&Vec<Value>, GhError> {
    value.as_array().ok_or_else(unreadable)
}

/// A branch name as one path segment of a URL.
fn path_segment(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The exact-head acceptance of `contract` (a repository or a pull request; any other contract
/// gets a `missing` receipt), with `published_pr` the URL the worker published
/// (`metadata.published_pr`), read through `gh`. Never fails: every problem is a classification.
pub fn collect(contract: &Contract, published_pr: Option<&str>, gh: &Gh) -> Receipt {
    let mut receipt = Receipt::missing(published_pr);
    let (declared, repo) = match contract {
        Contract::Pr(pr) => (Some(pr.url()), pr.repo.clone()),
        Contract::Repo(repo) => (None, repo.clone()),
        _ => return receipt,
    };
    let url = declared.clone().or(published_pr.map(str::to_owned));
    let pr = url.as_deref().and_then(PrRef::parse);
    let matches = match (&pr, &declared) {
        (Some(pr), None) => pr.repo == repo,
        (Some(_), Some(declared)) => published_pr.is_none_or(|p| p == declared),
        (None, _) => false,
    };
    let Some(pr) = pr.filter(|_| matches) else {
        receipt.detail = Some(
            "Supply metadata.published_pr matching the persisted completion contract.".to_owned(),
        );
        return receipt;
    };
    receipt.pr_url = Some(pr.url());
    match read_evidence(gh, &pr, &mut receipt) {
        Ok(()) => {}
        Err(GhError::Auth(why)) => {
            receipt.classification = Classification::Auth;
            receipt.detail = Some(format!(
                "GitHub refused the acceptance read ({why}) as {}; fix that profile's GitHub \
                 credentials or access to the repository (gh auth login with its GH_CONFIG_DIR), \
                 then retry completion.",
                gh.login
            ));
        }
        Err(GhError::Infra(_)) => {
            receipt.classification = Classification::Infra;
            receipt.detail = Some(
                "GitHub acceptance evidence unavailable or incomplete; check that gh can reach the \
                 GitHub API, then retry."
                    .to_owned(),
            );
        }
    }
    receipt.ok = receipt.classification == Classification::Success;
    receipt
}

/// Reads the head, the required checks and their results into `receipt` and classifies it.
fn read_evidence(gh: &Gh, pr: &PrRef, receipt: &mut Receipt) -> Result<(), GhError> {
    let (owner, name) = pr.repo.split_once('/').ok_or_else(unreadable)?;
    let quote = |s: &str| Value::String(s.to_owned()).to_string();
    let query = format!(
        "{{repository(owner:{},name:{}){{pullRequest(number:{}){{headRefOid baseRefName state \
         baseRef{{branchProtectionRule{{requiredStatusChecks{{context app{{databaseId}}}}}}}}}}}}}}",
        quote(owner),
        quote(name),
        pr.number
    );
    let answer = gh.api("graphql", Some(&query), false)?;
    let repository = field(field(&answer, "data")?, "repository")?;
    if repository.is_null() {
        // A private repository this login cannot read resolves to null, not to an error.
        return Err(GhError::Auth(format!("HTTP 404 on graphql {}", pr.repo)));
    }
    let head = field(repository, "pullRequest")?;
    let sha = field_str(head, "headRefOid")?.to_owned();
    let branch = field_str(head, "baseRefName")?.to_owned();
    receipt.head_sha = Some(sha.clone());
    let full_sha = sha.len() == 40 && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !full_sha || !matches!(field_str(head, "state")?, "OPEN" | "MERGED") {
        return Err(GhError::Infra(
            "the PR is closed or its head is unavailable",
        ));
    }
    let required = required_checks(gh, pr, head, &branch)?;
    receipt.required = Some(required.iter().cloned().collect());
    if required.is_empty() {
        receipt.detail = Some(
            "No repository-required checks are configured; use a local-only contract for \
             tasks without CI."
                .to_owned(),
        );
        return Ok(());
    }
    let pages = gh.api(
        &format!(
            "repos/{}/commits/{sha}/check-runs?per_page=100&filter=latest",
            pr.repo
        ),
        None,
        true,
    )?;
    let pages = array(&pages)?;
    let mut runs = Vec::new();
    for page in pages {
        runs.extend(array(field(page, "check_runs")?)?.iter());
    }
    let ids: BTreeSet<i64> = runs.iter().filter_map(|r| r.get("id")?.as_i64()).collect();
    let total = field(pages.first().ok_or_else(unreadable)?, "total_count")?.as_u64();
    if total != Some(ids.len() as u64) || ids.len() != runs.len() {
        return Err(GhError::Infra("incomplete check-run pagination"));
    }
    let status_pages = gh.api(
        &format!("repos/{}/commits/{sha}/statuses?per_page=100", pr.repo),
        None,
        true,
    )?;
    let mut statuses = Vec::new();
    for page in array(&status_pages)? {
        statuses.extend(array(page)?.iter());
    }
    let mut outcomes = Vec::new();
    for check in &required {
        judge(check, &runs, &statuses, &sha, receipt, &mut outcomes)?;
    }
    // Re-read after every page: a success on an older head is never transferable.
    let current = gh.api(
        &format!("repos/{}/pulls/{}", pr.repo, pr.number),
        None,
        false,
    )?;
    let closed_unmerged = field_str(&current, "state")? == "closed"
        && !current
            .get("merged")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    if field_str(field(&current, "head")?, "sha")? != sha
        || field_str(field(&current, "base")?, "ref")? != branch
        || closed_unmerged
    {
        receipt.classification = Classification::Stale;
        receipt.detail = Some("PR head/base changed while collecting evidence; retry.".to_owned());
        return Ok(());
    }
    receipt.classification = outcomes
        .iter()
        .copied()
        .find(|c| *c != Classification::Success)
        .unwrap_or(if outcomes.is_empty() {
            Classification::Missing
        } else {
            Classification::Success
        });
    Ok(())
}

/// The checks branch protection (from the GraphQL answer `head`) and the rulesets of `branch`
/// require, each once.
fn required_checks(
    gh: &Gh,
    pr: &PrRef,
    head: &Value,
    branch: &str,
) -> Result<BTreeSet<RequiredCheck>, GhError> {
    let mut required = BTreeSet::new();
    let protection = head
        .get("baseRef")
        .and_then(|b| b.get("branchProtectionRule"))
        .filter(|p| !p.is_null());
    if let Some(rules) = protection.and_then(|p| p.get("requiredStatusChecks")) {
        for rule in array(rules)? {
            required.insert(RequiredCheck {
                context: field_str(rule, "context")?.to_owned(),
                app_id: rule
                    .get("app")
                    .and_then(|a| a.get("databaseId"))
                    .and_then(Value::as_i64),
            });
        }
    }
    let pages = gh.api(
        &format!(
            "repos/{}/rules/branches/{}?per_page=100",
            pr.repo,
            path_segment(branch)
        ),
        None,
        true,
    )?;
    for page in array(&pages)? {
        for rule in array(page)? {
            if field_str(rule, "type")? != "required_status_checks" {
                continue;
            }
            let checks = field(field(rule, "parameters")?, "required_status_checks")?;
            for check in array(checks)? {
                required.insert(RequiredCheck {
                    context: field_str(check, "context")?.to_owned(),
                    app_id: check.get("integration_id").and_then(Value::as_i64),
                });
            }
        }
    }
    Ok(required)
}

/// The outcomes of one required check: every check run of its name (of its app when pinned) and,
/// when no app is pinned, the newest commit status of its context; `missing` when none.
fn judge(
    check: &RequiredCheck,
    runs: &[&Value],
    statuses: &[&Value],
    sha: &str,
    receipt: &mut Receipt,
    outcomes: &mut Vec<Classification>,
) -> Result<(), GhError> {
    let unpinned = matches!(check.app_id, None | Some(-1));
    let mut selected: Vec<(&Value, bool)> = Vec::new();
    for run in runs {
        let app = run
            .get("app")
            .and_then(|a| a.get("id"))
            .and_then(Value::as_i64);
        if field_str(run, "name")? == check.context && (unpinned || app == check.app_id) {
            selected.push((run, true));
        }
    }
    if unpinned {
        // A legacy status can satisfy an unpinned context, never a check pinned to an app.
        let mut newest: Option<&Value> = None;
        for status in statuses {
            if field_str(status, "context")? == check.context {
                let id = field(status, "id")?.as_i64();
                if newest.is_none_or(|n| n.get("id").and_then(Value::as_i64) < id) {
                    newest = Some(status);
                }
            }
        }
        selected.extend(newest.map(|s| (s, false)));
    }
    if selected.is_empty() {
        outcomes.push(Classification::Missing);
        receipt.checks.push(CheckReceipt {
            name: check.context.clone(),
            id: None,
            url: None,
            head_sha: Some(sha.to_owned()),
            classification: Classification::Missing,
            conclusion: None,
        });
    }
    for (found, is_run) in selected {
        let conclusion = if is_run {
            found.get("conclusion").and_then(Value::as_str)
        } else {
            Some(field_str(found, "state")?)
        };
        // A commit status is read for exactly this head, so its head is the head.
        let head = if is_run {
            found.get("head_sha").and_then(Value::as_str)
        } else {
            Some(sha)
        };
        let classification = classify(found, head, sha, conclusion, is_run);
        outcomes.push(classification);
        receipt.checks.push(CheckReceipt {
            name: check.context.clone(),
            id: found.get("id").and_then(Value::as_i64),
            url: found
                .get("html_url")
                .or_else(|| found.get("target_url"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            head_sha: head.map(str::to_owned),
            classification,
            conclusion: conclusion.map(str::to_owned),
        });
    }
    Ok(())
}

/// One check's classification (the original's `_classify`): another head is `stale`, a run not
/// completed is `pending`, then by its conclusion or state; anything unknown is `infra`.
fn classify(
    check: &Value,
    head: Option<&str>,
    sha: &str,
    outcome: Option<&str>,
    is_run: bool,
) -> Classification {
    if head != Some(sha) {
        return Classification::Stale;
    }
    if is_run && check.get("status").and_then(Value::as_str) != Some("completed") {
        return Classification::Pending;
    }
    match outcome {
        Some("success") => Classification::Success,
        Some("failure") => Classification::Failure,
        Some("pending") => Classification::Pending,
        _ => Classification::Infra,
    }
}

/// The read-only lookup of an authorization: `gh api repos/R/pulls/N`.
pub fn lookup_pr(gh: &Gh, pr: &PrRef) -> Result<Value, GhError> {
    gh.api(
        &format!("repos/{}/pulls/{}", pr.repo, pr.number),
        None,
        false,
    )
}

/// Checks GitHub's answer `pr` about a pull request of `repo` that an operator authorizes: open
/// and not merged, base and head in `repo`, its head branch `branch` when one is given. Returns
/// its head branch, or why it cannot be authorized.
pub fn check_pr(pr: &Value, repo: &str, branch: Option<&str>) -> Result<String, String> {
    let state = pr.get("state").and_then(Value::as_str);
    let merged = pr.get("merged").and_then(Value::as_bool).unwrap_or(false);
    if state != Some("open") || merged {
        return Err(format!(
            "the PR must be open; GitHub reports state={}, merged={merged}",
            state.unwrap_or("none")
        ));
    }
    let full_name = |side: &str| {
        pr.get(side)
            .and_then(|s| s.get("repo"))
            .and_then(|r| r.get("full_name"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (base_repo, head_repo) = (full_name("base"), full_name("head"));
    if !base_repo.eq_ignore_ascii_case(repo) {
        return Err(format!(
            "the PR's base repository {base_repo:?} is not {repo:?}"
        ));
    }
    if !head_repo.eq_ignore_ascii_case(repo) {
        return Err(format!(
            "the PR's head comes from {head_repo:?}, not {repo:?}"
        ));
    }
    let head_ref = pr
        .get("head")
        .and_then(|h| h.get("ref"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(branch) = branch
        && head_ref != branch
    {
        return Err(format!(
            "the PR's head branch {head_ref:?} is not {branch:?}"
        ));
    }
    if head_ref.is_empty() {
        return Err("GitHub reports no head branch for the PR".to_owned());
    }
    Ok(head_ref.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classification_follows_the_original() {
        let run = |status: &str| json!({"status": status});
        let sha = "a".repeat(40);
        let c = |check: &Value, head: &str, outcome: Option<&str>, is_run| {
            classify(check, Some(head), &sha, outcome, is_run)
        };
        assert_eq!(
            c(&run("completed"), &sha, Some("success"), true),
            Classification::Success
        );
        assert_eq!(
            c(&run("in_progress"), &sha, None, true),
            Classification::Pending
        );
        assert_eq!(
            c(&run("completed"), "b", Some("success"), true),
            Classification::Stale
        );
        assert_eq!(
            c(&run("completed"), &sha, Some("failure"), true),
            Classification::Failure
        );
        assert_eq!(
            c(&run("completed"), &sha, Some("cancelled"), true),
            Classification::Infra
        );
        assert_eq!(
            c(&json!({}), &sha, Some("error"), false),
            Classification::Infra
        );
        assert_eq!(
            c(&json!({}), &sha, Some("pending"), false),
            Classification::Pending
        );
    }

    #[test]
    fn refused_statuses_are_found_in_stderr() {
        assert_eq!(refused_status("gh: Not Found (HTTP 404)"), Some("404"));
        assert_eq!(refused_status("HTTP 500"), None);
    }

    /// A `gh` that runs the shell `script`, given at most `timeout`.
    fn scripted(dir: &std::path::Path, script: &str, timeout: Duration) -> Gh {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("gh");
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Gh {
            program: path,
            timeout,
            ..Gh::ambient()
        }
    }

    #[test]
    fn a_hung_gh_is_killed_at_its_timeout_as_infra() {
        let dir = tempfile::tempdir().unwrap();
        // `exec`: the killed process is the one that hangs, and nothing outlives the test.
        let gh = scripted(dir.path(), "exec sleep 30", Duration::from_millis(200));
        assert_eq!(
            gh.api("repos/a/b/pulls/1", None, false),
            Err(GhError::Infra("gh api timed out"))
        );
    }

    #[test]
    fn a_long_answer_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("{{\"x\": \"{}\"}}", "y".repeat(300_000));
        std::fs::write(dir.path().join("answer.json"), long).unwrap();
        let script = format!("cat '{}'", dir.path().join("answer.json").display());
        let gh = scripted(dir.path(), &script, GH_TIMEOUT);
        let value = gh.api("repos/a/b/pulls/1", None, false).unwrap();
        assert_eq!(value["x"].as_str().map(str::len), Some(300_000));
    }

    #[test]
    fn branch_names_are_one_segment() {
        assert_eq!(path_segment("release/1.0 x"), "release%2F1.0%20x");
    }
}
