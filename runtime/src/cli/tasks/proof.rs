//! `kanban authorize-existing-pr ID PR-URL --reason TEXT`: the operator's single-use grant that
//! lets the dispatcher start a task once more although a comment names its open pull request
//! (the `active_pr` guard). The pull request is checked read-only on GitHub with the operator's
//! own `gh` login before anything is recorded; a refusal records nothing.

use crate::acceptance::{self, Gh, PrRef};
use crate::board::Refusal;
use crate::board::acceptance::PrAuthorization;
use crate::cli::session::{authorize, done, now, open, print_out, refused};
use crate::cli::{CmdResult, Globals};

/// `kanban authorize-existing-pr ID PR-URL --reason TEXT [--branch NAME] [--operator NAME]`.
pub(in crate::cli) fn authorize_existing_pr(
    id: &str,
    pr: &PrRef,
    reason: &str,
    branch: Option<&str>,
    operator: Option<String>,
    globals: &Globals,
) -> CmdResult {
    authorize(id)?;
    let not_authorizable = |why: String| {
        refused(Refusal::NotAuthorizable {
            task_id: id.to_owned(),
            why,
        })
    };
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(not_authorizable("a reason is required".to_owned()));
    }
    if let Some(branch) = branch {
        crate::workspace::validate_branch(branch)?;
    }
    let operator = operator
        .map(|o| o.trim().to_owned())
        .filter(|o| !o.is_empty())
        .unwrap_or_else(|| "operator".to_owned());
    let o = open(globals)?;
    let url = pr.url();
    let task = o
        .board
        .check_pr_authorization(id, &url, branch)?
        .map_err(refused)?;
    let branch = branch.map(str::to_owned).or(task.branch_name);
    // Network after the read, outside any transaction; gh's own words are never kept.
    let answer = acceptance::lookup_pr(&Gh::ambient(), pr)
        .map_err(|e| not_authorizable(format!("could not verify the PR on GitHub: {e}")))?;
    let head =
        acceptance::check_pr(&answer, &pr.repo, branch.as_deref()).map_err(not_authorizable)?;
    let grant = PrAuthorization {
        operator,
        task_id: id.to_owned(),
        pr_url: url,
        repo: pr.repo.clone(),
        branch: head,
        reason: reason.to_owned(),
    };
    let a = done(o.board.authorize_existing_pr(&grant, now())?)?;
    print_out(globals.json, &a, || {
        format!(
            "authorized {} for {} (branch {}): its next run may amend that pull request",
            a.pr_url, a.task_id, a.branch
        )
    })
}
