//! Proof of done on the board (issue 27 item 5; the original's `kanban_pr_acceptance_store.py`
//! and `kanban_pr_authorization.py`): the completion-contract gate of `complete`, the
//! preparation of a GitHub acceptance (its snapshot, and the one-time binding of an
//! `OWNER/REPO` contract to the pull request the worker published), and the operator's
//! single-use `existing_pr_authorized` grant that lifts the `active_pr` respawn guard.
//!
//! No network here: the caller collects the acceptance (or looks the pull request up) between
//! [`Board::prepare_acceptance`] and the completion's transaction, which re-checks the snapshot.

use crate::acceptance::{Contract, Evidence, PrRef, pull_request_urls};
use crate::db::{Db, OptionalExtension, Tx, params};

use super::error::Result;
use super::events::{Event, append_event};
pub use super::input::{Accepted, Snapshot};

use super::input::Completion;
use super::model::{Status, Task};
use super::outcome::{Outcome, Refusal};
use super::rows::{cas, load_task};
use super::store::Board;

/// What must be read from GitHub for a completion (see [`Board::prepare_acceptance`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptanceRequest {
    pub snapshot: Snapshot,
    /// The contract to accept (already bound to the published pull request when it was a
    /// repository).
    pub contract: Contract,
    /// `metadata.published_pr` of the completion, when it is text.
    pub published_pr: Option<String>,
    /// Whose GitHub login reads it: the task's assignee (`None`: unassigned).
    pub assignee: Option<String>,
}

/// The outcome of [`Board::prepare_acceptance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preparation {
    /// The task's contract needs no GitHub acceptance.
    NotNeeded,
    /// Collect this, then complete with the [`Accepted`] it gives.
    Collect(AcceptanceRequest),
    /// The completion cannot go on (not a status a completion starts from, a stale run, a
    /// binding that lost a race).
    Refused(Refusal),
}

/// The contract gate of a completion, inside its transaction: `Some(refusal)` when the task's
/// contract is not satisfied (after recording a `pr_acceptance` event and the recovery text in
/// `last_failure_error` for a failed acceptance; committed with the refusal).
pub(super) fn gate_contract_in(
    tx: &Tx<'_>,
    task: &Task,
    completion: &Completion,
    now: i64,
) -> Result<Option<Refusal>> {
    let id = task.id.clone();
    let contract = match Contract::from_column(task.completion_contract.as_deref()) {
        Ok(Contract::LocalOnly) => return Ok(None),
        Ok(Contract::EvidenceRequired) => {
            return Ok(completion
                .evidence
                .is_empty()
                .then_some(Refusal::EvidenceRequired { task_id: id }));
        }
        Ok(contract) => contract.as_column(),
        // A value this version cannot read is satisfied by nothing.
        Err(e) => e.0,
    };
    let Some(accepted) = &completion.acceptance else {
        return Ok(Some(Refusal::AcceptanceRequired {
            task_id: id,
            contract,
        }));
    };
    if accepted.snapshot != Snapshot::of_task(task) {
        return Ok(Some(Refusal::AcceptanceStale { task_id: id }));
    }
    let receipt = &accepted.receipt;
    append_event(
        tx,
        &id,
        accepted.snapshot.run_id,
        &Event::PrAcceptance(receipt.clone()),
        now,
    )?;
    if receipt.ok {
        return Ok(None);
    }
    cas(
        tx,
        "UPDATE tasks SET last_failure_error = ?2 WHERE id = ?1",
        params![id, receipt.failure_text()],
    )?;
    Ok(Some(Refusal::NotAccepted {
        task_id: id,
        classification: receipt.classification,
        detail: receipt
            .detail
            .clone()
            .unwrap_or_else(|| receipt.recovery.clone()),
    }))
}

/// The evidence a `completed` event records.
pub(super) fn recorded_evidence(completion: &Completion) -> Option<Vec<Evidence>> {
    (!completion.evidence.is_empty()).then(|| completion.evidence.clone())
}

/// An operator's authorization of an existing pull request (the payload of
/// `existing_pr_authorized` without what the board adds: the time and the run floor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrAuthorization {
    pub operator: String,
    pub task_id: String,
    pub pr_url: String,
    pub repo: String,
    /// The pull request's head branch.
    pub branch: String,
    pub reason: String,
}

/// A recorded grant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Authorized {
    pub task_id: String,
    pub pr_url: String,
    pub repo: String,
    pub branch: String,
    /// The grant lasts until a run with a higher id is claimed.
    pub run_id_floor: i64,
}

/// Whether `pr_url` may be authorized for task `id` (the original's `_check_task`): the task
/// exists and is not finished, its branch (when it has one) is `branch` (when known), and its
/// body or one of its comments names exactly that pull request. `Err(why)` otherwise.
fn check_task(
    db: &Db,
    id: &str,
    pr_url: &str,
    branch: Option<&str>,
) -> Result<std::result::Result<Task, String>> {
    let task = load_task(db, id)?;
    if matches!(task.status, Status::Done | Status::Archived) {
        return Ok(Err(format!("the task is {}", task.status)));
    }
    if let (Some(own), Some(branch)) = (task.branch_name.as_deref(), branch)
        && own != branch
    {
        return Ok(Err(format!(
            "the task's branch {own:?} is not the PR's branch {branch:?}"
        )));
    }
    let mut texts = vec![task.body.clone().unwrap_or_default()];
    let mut stmt = db.prepare_cached("SELECT body FROM task_comments WHERE task_id = ?1")?;
    for body in stmt.query_map(params![id], |r| r.get::<_, Option<String>>(0))? {
        texts.push(body?.unwrap_or_default());
    }
    if !texts
        .iter()
        .any(|t| pull_request_urls(t).iter().any(|u| u == pr_url))
    {
        return Ok(Err(format!(
            "the task never referenced {pr_url}, so it is not the task's existing PR"
        )));
    }
    Ok(Ok(task))
}

impl Board {
    /// Prepares the GitHub acceptance of completing task `id` (the original's
    /// `prepare_acceptance`): `NotNeeded` unless its contract names a repository or a pull
    /// request; refused unless it is running, ready, blocked or in review with
    /// `expected_run_id` (when given) its current run. A repository contract and a
    /// `published_pr` of that repository bind the contract to that pull request, once, in its
    /// own transaction: a later completion cannot swap in another (green) pull request.
    pub fn prepare_acceptance(
        &self,
        id: &str,
        expected_run_id: Option<i64>,
        published_pr: Option<&str>,
    ) -> Result<Preparation> {
        let task = self.get_task(id)?;
        let mut snapshot = Snapshot::of_task(&task);
        let contract = match Contract::from_column(task.completion_contract.as_deref()) {
            Ok(c) if c.needs_acceptance() => c,
            Ok(_) => return Ok(Preparation::NotNeeded),
            Err(e) => {
                return Ok(Preparation::Refused(Refusal::AcceptanceRequired {
                    task_id: id.to_owned(),
                    contract: e.0,
                }));
            }
        };
        let startable = matches!(
            task.status,
            Status::Running | Status::Ready | Status::Blocked | Status::Review
        );
        if !startable {
            return Ok(Preparation::Refused(Refusal::WrongStatus {
                task_id: id.to_owned(),
                status: task.status,
                expected: "running, ready, blocked or review",
            }));
        }
        if let Some(run_id) = expected_run_id
            && task.current_run_id != Some(run_id)
        {
            return Ok(Preparation::Refused(Refusal::StaleRun {
                task_id: id.to_owned(),
                expected: run_id,
                current: task.current_run_id,
            }));
        }
        let mut contract = contract;
        let published = published_pr.and_then(PrRef::parse);
        if let (Contract::Repo(repo), Some(pr)) = (&contract, &published)
            && &pr.repo == repo
        {
            let url = pr.url();
            let bound = self.write(|tx| {
                if Snapshot::of_task(&load_task(tx, id)?) != snapshot {
                    return Ok(false);
                }
                cas(
                    tx,
                    "UPDATE tasks SET completion_contract = ?2 WHERE id = ?1",
                    params![id, url],
                )
            })?;
            if !bound {
                return Ok(Preparation::Refused(Refusal::AcceptanceStale {
                    task_id: id.to_owned(),
                }));
            }
            snapshot.contract = Some(url);
            contract = Contract::Pr(pr.clone());
        }
        Ok(Preparation::Collect(AcceptanceRequest {
            snapshot,
            contract,
            published_pr: published_pr.map(str::to_owned),
            assignee: task.assignee,
        }))
    }

    /// Whether `pr_url` may be authorized for task `id` (read before GitHub is asked):
    /// `Ok(task)` or the refusal.
    pub fn check_pr_authorization(
        &self,
        id: &str,
        pr_url: &str,
        branch: Option<&str>,
    ) -> Result<std::result::Result<Task, Refusal>> {
        Ok(
            check_task(self.conn(), id, pr_url, branch)?.map_err(|why| Refusal::NotAuthorizable {
                task_id: id.to_owned(),
                why,
            }),
        )
    }

    /// Records an operator's authorization of an existing, open pull request (checked on GitHub
    /// by the caller): the task is checked again under the write transaction, and the grant
    /// (`existing_pr_authorized`) records the task's highest run id as its floor, so the next
    /// claimed run spends it.
    pub fn authorize_existing_pr(
        &self,
        grant: &PrAuthorization,
        now: i64,
    ) -> Result<Outcome<Authorized>> {
        let id = grant.task_id.as_str();
        self.write(|tx| {
            if let Err(why) = check_task(tx, id, &grant.pr_url, Some(&grant.branch))? {
                return Ok(Outcome::Refused(Refusal::NotAuthorizable {
                    task_id: id.to_owned(),
                    why,
                }));
            }
            let floor: i64 = tx.query_row(
                "SELECT COALESCE(MAX(id), 0) FROM task_runs WHERE task_id = ?1",
                params![id],
                |r| r.get(0),
            )?;
            append_event(
                tx,
                id,
                None,
                &Event::ExistingPrAuthorized {
                    operator: grant.operator.clone(),
                    task_id: id.to_owned(),
                    pr_url: grant.pr_url.clone(),
                    repo: grant.repo.clone(),
                    branch: grant.branch.clone(),
                    reason: grant.reason.clone(),
                    authorized_at: now,
                    run_id_floor: floor,
                    pr_state: "open".to_owned(),
                },
                now,
            )?;
            Ok(Outcome::Done(Authorized {
                task_id: id.to_owned(),
                pr_url: grant.pr_url.clone(),
                repo: grant.repo.clone(),
                branch: grant.branch.clone(),
                run_id_floor: floor,
            }))
        })
    }

    /// Records `existing_pr_authorization_consumed` on `run_id` when it is the first run above
    /// the newest grant's floor and the grant was not spent yet (the original's
    /// `record_consumed`); true when it did.
    pub fn record_pr_authorization_consumed(
        &self,
        id: &str,
        run_id: i64,
        now: i64,
    ) -> Result<bool> {
        self.write(|tx| {
            let Some((event_id, grant)) = newest_grant(tx, id)? else {
                return Ok(false);
            };
            let first: Option<i64> = tx.query_row(
                "SELECT MIN(id) FROM task_runs WHERE task_id = ?1 AND id > ?2",
                params![id, grant.1],
                |r| r.get(0),
            )?;
            let spent: Option<i64> = tx
                .query_row(
                    "SELECT 1 FROM task_events WHERE task_id = ?1 \
                     AND kind = 'existing_pr_authorization_consumed' AND id > ?2 LIMIT 1",
                    params![id, event_id],
                    |r| r.get(0),
                )
                .optional()?;
            if first != Some(run_id) || spent.is_some() {
                return Ok(false);
            }
            append_event(
                tx,
                id,
                Some(run_id),
                &Event::ExistingPrAuthorizationConsumed {
                    pr_url: Some(grant.0),
                    operator: grant.2,
                },
                now,
            )?;
            Ok(true)
        })
    }

    /// The pull request of task `id`'s unspent grant: its newest `existing_pr_authorized` while
    /// no run above its floor exists (the original's `active_authorization`).
    pub(crate) fn active_pr_authorization(&self, id: &str) -> Result<Option<String>> {
        let db = self.conn();
        let Some((_, (pr_url, floor, _))) = newest_grant(db, id)? else {
            return Ok(None);
        };
        let later: Option<i64> = db
            .query_row(
                "SELECT 1 FROM task_runs WHERE task_id = ?1 AND id > ?2 LIMIT 1",
                params![id, floor],
                |r| r.get(0),
            )
            .optional()?;
        Ok(later.is_none().then_some(pr_url))
    }
}

/// The newest `existing_pr_authorized` event of task `id` naming it: its event id and the
/// grant's pull request, run floor and operator. A payload without them is no grant.
/// A grant as [`newest_grant`] reads it: its pull request, run floor and operator.
type Grant = (String, i64, Option<String>);

fn newest_grant(db: &Db, id: &str) -> Result<Option<(i64, Grant)>> {
    let row: Option<(i64, Option<String>)> = db
        .query_row(
            "SELECT id, payload FROM task_events WHERE task_id = ?1 \
             AND kind = 'existing_pr_authorized' ORDER BY id DESC LIMIT 1",
            params![id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((event_id, Some(payload))) = row else {
        return Ok(None);
    };
    let value: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
    let text = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let floor = value
        .get("run_id_floor")
        .and_then(serde_json::Value::as_i64);
    Ok(match (text("task_id"), text("pr_url"), floor) {
        (Some(task), Some(url), Some(floor)) if task == id => {
            Some((event_id, (url, floor, text("operator"))))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::{Classification, RECOVERY, Receipt};
    use crate::board::testing::{T0, claim, sqlite_board, status};
    use crate::board::{NewTask, Outcome};

    const PR: &str = "https://github.com/acme/app/pull/7";

    fn contracted(b: &Board, contract: &str) -> String {
        let new = NewTask {
            title: "t".to_owned(),
            completion_contract: Some(Contract::parse(Some(contract)).unwrap()),
            ..NewTask::default()
        };
        b.create_task(&new, T0).unwrap().id
    }

    fn green(pr: &str) -> Receipt {
        Receipt {
            ok: true,
            classification: Classification::Success,
            head_sha: Some("a".repeat(40)),
            pr_url: Some(pr.to_owned()),
            checks: Vec::new(),
            required: None,
            detail: None,
            recovery: RECOVERY.to_owned(),
        }
    }

    fn request(b: &Board, id: &str, run: Option<i64>) -> AcceptanceRequest {
        match b.prepare_acceptance(id, run, Some(PR)).unwrap() {
            Preparation::Collect(request) => request,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_receipt_for_another_run_is_stale_under_the_write_transaction() {
        let (_dir, b) = sqlite_board();
        let id = contracted(&b, PR);
        let request = request(&b, &id, None);
        assert_eq!(request.snapshot.run_id, None);
        // The task is claimed between the read of GitHub and the completion.
        let run = claim(&b, &id).run_id;
        let completion = Completion {
            expected_run_id: Some(run),
            summary: Some("s".into()),
            acceptance: Some(Accepted {
                snapshot: request.snapshot,
                receipt: green(PR),
            }),
            ..Completion::default()
        };
        let outcome = b.complete(&id, &completion, T0 + 1).unwrap();
        assert!(
            matches!(outcome, Outcome::Refused(Refusal::AcceptanceStale { .. })),
            "{outcome:?}"
        );
        assert_eq!(status(&b, &id), Status::Running);
        let kinds: Vec<String> = b
            .events(&id, None)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert!(!kinds.iter().any(|k| k == "pr_acceptance"), "{kinds:?}");
    }

    #[test]
    fn a_pr_contract_without_a_collected_acceptance_is_refused() {
        let (_dir, b) = sqlite_board();
        let id = contracted(&b, "acme/app");
        let completion = Completion {
            summary: Some("s".into()),
            ..Completion::default()
        };
        let outcome = b.complete(&id, &completion, T0 + 1).unwrap();
        assert!(
            matches!(
                outcome,
                Outcome::Refused(Refusal::AcceptanceRequired { .. })
            ),
            "{outcome:?}"
        );
        assert_eq!(status(&b, &id), Status::Ready);
    }

    #[test]
    fn a_matching_green_receipt_completes_and_is_recorded_on_the_run() {
        let (_dir, b) = sqlite_board();
        let id = contracted(&b, "acme/app");
        let run = claim(&b, &id).run_id;
        let request = request(&b, &id, Some(run));
        assert_eq!(request.snapshot.contract.as_deref(), Some(PR), "bound");
        let completion = Completion {
            expected_run_id: Some(run),
            summary: Some("s".into()),
            acceptance: Some(Accepted {
                snapshot: request.snapshot,
                receipt: green(PR),
            }),
            ..Completion::default()
        };
        assert!(b.complete(&id, &completion, T0 + 1).unwrap().is_done());
        let receipt = b
            .events(&id, None)
            .unwrap()
            .into_iter()
            .find(|e| e.kind == "pr_acceptance")
            .unwrap();
        assert_eq!(receipt.run_id, Some(run));
        assert_eq!(
            b.get_task(&id).unwrap().completion_contract.as_deref(),
            Some(PR)
        );
    }
}
