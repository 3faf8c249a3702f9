//! Typed outcomes of transitions. A transition either applied (`Outcome::Done(..)` with what it
//! did) or was refused (`Outcome::Refused(Refusal)`): the compare-and-swap matched no row, the
//! caller's run is stale, another live claim holds the task, a parent is unfinished. A refusal
//! changed nothing. The CLI maps refusals to exit code 3.

use std::fmt;

use serde::Serialize;

use super::model::{BlockKind, Status};

/// Why a transition did not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Refusal {
    /// The task was decomposed before (a root is decomposed once).
    AlreadyDecomposed { task_id: String },
    /// The task is not in a status this transition starts from.
    WrongStatus {
        task_id: String,
        status: Status,
        expected: &'static str,
    },
    /// The caller's run is no longer the task's current run (a stale worker).
    StaleRun {
        task_id: String,
        expected: i64,
        current: Option<i64>,
    },
    /// The caller does not hold the task's claim.
    NotClaimHolder {
        task_id: String,
        expected: String,
        current: Option<String>,
    },
    /// A hard delete of a task that runs (its worker would be orphaned).
    DeleteRunning {
        task_id: String,
        claim_lock: Option<String>,
    },
    /// A hard delete of a task whose own workspace (scratch or worktree) is still on disk.
    WorkspacePresent { task_id: String, path: String },
    /// Another claim that has not expired holds the task.
    LiveClaim {
        task_id: String,
        claim_lock: String,
        claim_expires: i64,
    },
    /// A parent is neither done nor archived.
    ParentsNotDone {
        task_id: String,
        parents: Vec<String>,
    },
    /// The two tasks are not linked.
    NotLinked { parent: String, child: String },
    /// Another process changed the task between our read and our compare-and-swap.
    Raced { task_id: String },
    /// The claim is not abandoned: it was not a dispatcher's, or its worker heartbeats.
    NotAbandoned { task_id: String, why: &'static str },
    /// A completion with no summary, result or metadata (the original's `EmptyCompletionError`).
    EmptyCompletion { task_id: String },
    /// A completion claimed created cards that do not exist or are not this task's (the
    /// original's `HallucinatedCardsError`); a `completion_blocked_hallucination` event says so.
    HallucinatedCards {
        task_id: String,
        phantom: Vec<String>,
    },
    /// The task's contract is `evidence-required` and the completion gave no receipt.
    EvidenceRequired { task_id: String },
    /// The task's contract names a repository or a pull request and the completion carries no
    /// GitHub acceptance collected for it.
    AcceptanceRequired { task_id: String, contract: String },
    /// The task's run, status or contract changed while its acceptance was collected.
    AcceptanceStale { task_id: String },
    /// The GitHub acceptance was not a success; its receipt is the `pr_acceptance` event and
    /// its recovery text the task's `last_failure_error`.
    NotAccepted {
        task_id: String,
        classification: crate::acceptance::Classification,
        detail: String,
    },
    /// An existing pull request cannot be authorized for the task.
    NotAuthorizable { task_id: String, why: String },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::WrongStatus {
                task_id,
                status,
                expected,
            } => write!(f, "task `{task_id}` is {status}; this needs it {expected}"),
            Refusal::StaleRun {
                task_id,
                expected,
                current,
            } => match current {
                Some(c) => write!(
                    f,
                    "run {expected} of task `{task_id}` is no longer current (the current run is {c}); this worker's claim was taken over"
                ),
                None => write!(
                    f,
                    "run {expected} of task `{task_id}` is no longer current (no run is open); this worker's claim was released"
                ),
            },
            Refusal::NotClaimHolder {
                task_id,
                expected,
                current,
            } => write!(
                f,
                "task `{task_id}` is claimed by {}, not by {expected}",
                current.as_deref().unwrap_or("nobody")
            ),
            Refusal::LiveClaim {
                task_id,
                claim_lock,
                claim_expires,
            } => write!(
                f,
                "task `{task_id}` is held by the live claim {claim_lock} (expires at {claim_expires}); pass the run id it owns, wait for it, or use --force"
            ),
            Refusal::ParentsNotDone { task_id, parents } => write!(
                f,
                "task `{task_id}` waits on unfinished parent(s): {}",
                parents.join(", ")
            ),
            Refusal::NotLinked { parent, child } => {
                write!(f, "`{child}` does not depend on `{parent}`")
            }
            Refusal::AlreadyDecomposed { task_id } => write!(
                f,
                "task `{task_id}` was already decomposed; a root is decomposed once (create more \
                 tasks and link the root under them instead)"
            ),
            Refusal::Raced { task_id } => write!(
                f,
                "task `{task_id}` changed concurrently; nothing was done, look at it again"
            ),
            Refusal::NotAbandoned { task_id, why } => {
                write!(f, "the claim of task `{task_id}` is not abandoned: {why}")
            }
            Refusal::EmptyCompletion { task_id } => write!(
                f,
                "completion blocked: `{task_id}` has no result or summary evidence; pass \
                 --summary, --result or --metadata saying what was done (an empty completion is \
                 not evidence)"
            ),
            Refusal::HallucinatedCards { task_id, phantom } => write!(
                f,
                "completion of `{task_id}` blocked: claimed created_cards that do not exist or \
                 were not created by this worker: {}",
                phantom.join(", ")
            ),
            Refusal::EvidenceRequired { task_id } => write!(
                f,
                "completion of `{task_id}` refused: its contract is evidence-required and no \
                 evidence receipt (KIND=DETAIL, at least one) was given; nothing changed"
            ),
            Refusal::AcceptanceRequired { task_id, contract } => write!(
                f,
                "completion of `{task_id}` refused: its completion contract {contract:?} needs \
                 a GitHub acceptance of the pull request, collected for this completion; \
                 nothing changed"
            ),
            Refusal::AcceptanceStale { task_id } => write!(
                f,
                "task `{task_id}` changed (run, status or contract) while its PR acceptance was \
                 collected; nothing was done, look at it again"
            ),
            Refusal::NotAccepted {
                task_id,
                classification,
                detail,
            } => write!(
                f,
                "completion of `{task_id}` refused: PR acceptance {classification}: {detail} \
                 The task stays open; the receipt is its pr_acceptance event."
            ),
            Refusal::DeleteRunning {
                task_id,
                claim_lock,
            } => write!(
                f,
                "task `{task_id}` is running{}; deleting it would orphan its worker: reclaim it \
                 first (`kanban reclaim {task_id}`); nothing was deleted",
                claim_lock
                    .as_deref()
                    .map(|l| format!(" under the claim {l}"))
                    .unwrap_or_default()
            ),
            Refusal::WorkspacePresent { task_id, path } => write!(
                f,
                "task `{task_id}`'s workspace {path} is still there (kept: it may hold work); \
                 recover or remove it, then delete the task again; the task was not deleted"
            ),
            Refusal::NotAuthorizable { task_id, why } => write!(
                f,
                "cannot authorize an existing PR for task `{task_id}`: {why}; nothing was \
                 recorded"
            ),
        }
    }
}

/// The result of a transition that may be refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Outcome<T> {
    Done(T),
    Refused(Refusal),
}

impl<T> Outcome<T> {
    /// `Ok` when applied, `Err(refusal)` otherwise.
    pub fn into_result(self) -> Result<T, Refusal> {
        match self {
            Outcome::Done(v) => Ok(v),
            Outcome::Refused(r) => Err(r),
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self, Outcome::Done(_))
    }
}

/// `create_task` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Created {
    pub id: String,
    pub status: Status,
    /// True when the idempotency key matched a task that already existed (nothing was created).
    pub existing: bool,
}

/// A won claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claimed {
    pub task_id: String,
    pub run_id: i64,
    pub claim_lock: String,
    pub claim_expires: i64,
}

/// `claim` result: `Lost` when another claimer won, the task is not ready, or a parent reopened
/// (then the task was demoted to `todo` in the same transaction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ClaimOutcome {
    Claimed(Claimed),
    Lost(Refusal),
}

/// A heartbeat that extended the claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Heartbeated {
    pub task_id: String,
    pub run_id: Option<i64>,
    pub claim_expires: i64,
}

/// A completed task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Completed {
    pub task_id: String,
    /// The run that was closed, if one was open.
    pub run_id: Option<i64>,
    /// Children that became ready because every parent is now finished.
    pub promoted: Vec<String>,
}

/// A blocked task and where it landed (`blocked`, `todo` for a dependency, `triage` on a loop).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedTask {
    pub task_id: String,
    pub status: Status,
    pub kind: Option<BlockKind>,
    pub recurrences: i64,
    pub run_id: Option<i64>,
}

/// A status change with where it came from (unblock, promote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moved {
    pub task_id: String,
    pub from: Status,
    pub to: Status,
}

/// An archived task; `worker_pid`/`claim_lock` name a worker that may still run (the caller,
/// e.g. the dispatcher, terminates it: the board never signals processes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchivedTask {
    pub task_id: String,
    pub prev_status: Status,
    pub worker_pid: Option<i64>,
    pub claim_lock: Option<String>,
    pub run_id: Option<i64>,
    pub promoted: Vec<String>,
}

/// An operator reclaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReclaimedTask {
    pub task_id: String,
    pub prev_lock: Option<String>,
    pub worker_pid: Option<i64>,
    pub run_id: Option<i64>,
    pub retry_status: Status,
}

/// A (re)assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssignedTask {
    pub task_id: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// A reassignment (`reassign`): the assignment, and the reclaim that came first when the task
/// was claimed and a reclaim was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reassigned {
    pub task_id: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub reclaimed: Option<ReclaimedTask>,
}

/// A decomposition (`decompose`): the children in the order given, where each landed, and the
/// root (now `todo`, waiting on every child) with its assignee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decomposed {
    pub task_id: String,
    pub child_ids: Vec<String>,
    /// Each child's status afterwards, in the order of `child_ids`.
    pub child_statuses: Vec<Status>,
    pub root_status: Status,
    pub root_assignee: Option<String>,
}

/// A triage task specified by hand: the fields that changed and where it landed (`ready`, or
/// `todo` while a parent is unfinished).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Specified {
    pub task_id: String,
    pub changed_fields: Vec<String>,
    pub status: Status,
}

/// A task parked in `scheduled`: when the dispatcher wakes it (`None`: only `unblock` does).
/// `worker_pid`/`claim_lock` name a worker of a running task that may still run (not signalled).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduledTask {
    pub task_id: String,
    pub from: Status,
    pub at: Option<i64>,
    pub run_id: Option<i64>,
    pub worker_pid: Option<i64>,
    pub claim_lock: Option<String>,
}

/// A link or unlink, with the child's status afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkChange {
    pub parent: String,
    pub child: String,
    /// False when linking an existing edge (nothing changed).
    pub changed: bool,
    pub child_status: Status,
}

/// A descendant sent back to `todo` by an ancestor's reopen. `worker_pid`/`claim_lock` name a
/// worker that may still run for it (the dispatcher terminates workers whose run closed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Invalidated {
    pub task_id: String,
    pub prior_status: Status,
    pub worker_pid: Option<i64>,
    pub claim_lock: Option<String>,
    /// The run that was closed (a running descendant).
    pub run_id: Option<i64>,
}

/// A reopened task: where it landed and which descendants no longer stand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reopened {
    pub task_id: String,
    /// `ready`, or `todo` while a parent is unfinished.
    pub status: Status,
    pub invalidated: Vec<Invalidated>,
}

/// A task handed to review (`review request`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewRequested {
    pub task_id: String,
    /// The run that was closed (or recorded, when nobody had claimed the task).
    pub run_id: Option<i64>,
    /// The profile that did the work.
    pub implementer: Option<String>,
    /// The profile the review lane will run (the task's assignee now).
    pub reviewer: Option<String>,
}

/// A task sent back from review to its implementer (`review changes`, `review reopen`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackFromReview {
    pub task_id: String,
    /// `ready`, or `todo` while a parent is unfinished.
    pub status: Status,
    /// The assignee now (the implementer named when review was requested).
    pub assignee: Option<String>,
    /// The reviewer's run that was closed (`review changes`).
    pub run_id: Option<i64>,
}
