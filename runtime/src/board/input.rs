//! What the task transitions take: the requests (`NewTask`, `ClaimSpec`, `Fence`, `Completion`),
//! their checks and the normalisations and event notes the generic transitions and the PostgreSQL
//! fast paths share. No SQL.

use super::error::{BoardError, Result};
use super::events::Event;
use super::limits::MAX_SECONDS;

/// What `kanban create` asks for.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub title: String,
    pub body: Option<String>,
    pub assignee: Option<String>,
    pub parents: Vec<String>,
    pub priority: i64,
    pub idempotency_key: Option<String>,
    pub max_runtime_seconds: Option<i64>,
    /// Start in `triage` instead of flowing.
    pub triage: bool,
    /// Start in `blocked` (sticky until unblocked).
    pub blocked: bool,
    /// Who created it: a task id when a worker creates it, else a name.
    pub created_by: Option<String>,
    /// Soft namespace; inherited from the first parent that has one when `None`.
    pub tenant: Option<String>,
    pub max_retries: Option<i64>,
    /// Skills loaded into the worker's prompt (normalised as [`super::steering::normalize_skills`]).
    pub skills: Option<Vec<String>>,
    /// The model, provider and reasoning effort pinned for the task's agent.
    pub model: super::steering::ModelOverride,
    /// The workspace: kind, path, branch and base ([`WorkspaceSpec`]); the default is scratch.
    pub workspace: WorkspaceSpec,
    pub goal_mode: bool,
    pub goal_max_turns: Option<i64>,
    /// Start in `todo` even when no parent is unfinished (a decomposition's children, which
    /// the same transaction promotes afterwards unless asked not to).
    pub hold_in_todo: bool,
    /// The root task whose decomposition creates this one (its `created` event says so).
    pub from_decompose_of: Option<String>,
    /// The completion contract ([`crate::acceptance::Contract`]); `None` is `local-only`.
    pub completion_contract: Option<crate::acceptance::Contract>,
}

/// Where a task's agent works, as given at creation (or by an edit before the first run):
/// `kind` with an optional absolute `path`, and for a worktree the branch (`wt/<id>` when
/// `None`) and the ref a new branch starts from (`HEAD` when `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceSpec {
    /// `None` is scratch.
    pub kind: Option<crate::workspace::Kind>,
    pub path: Option<std::path::PathBuf>,
    pub branch: Option<String>,
    pub base: Option<String>,
}

impl WorkspaceSpec {
    /// The column value of the kind.
    /// The original's `--branch` rule: a branch names a worktree's branch, so it is refused on
    /// any other kind.
    pub fn check_branch_needs_worktree(&self) -> std::result::Result<(), super::error::BoardError> {
        let kind = self.kind();
        if self.branch.is_some() && kind != crate::workspace::Kind::Worktree {
            return Err(super::error::BoardError::NotAWorktree {
                what: "a branch",
                kind,
            });
        }
        Ok(())
    }

    /// The path as stored in `workspace_path` (the original stores text).
    pub fn path_text(&self) -> Option<String> {
        self.path.as_ref().map(|p| p.to_string_lossy().into_owned())
    }

    pub fn kind(&self) -> crate::workspace::Kind {
        self.kind.unwrap_or(crate::workspace::Kind::Scratch)
    }

    /// Refuses what no workspace can be made of, touching nothing: a relative path, a path on a
    /// scratch workspace, a base on a workspace that is not a worktree, a branch name or base git
    /// would refuse. A branch on another kind is accepted here, as the original's library
    /// accepts it (its boards may hold one; the worker gets it as `HERMES_KANBAN_BRANCH`);
    /// [`WorkspaceSpec::check_branch_needs_worktree`] is the command line's stricter rule.
    pub fn check(&self) -> std::result::Result<(), super::error::BoardError> {
        use crate::workspace::{Kind, SpecError};
        let kind = self.kind();
        if let Some(path) = &self.path {
            if kind == Kind::Scratch {
                return Err(SpecError::ScratchWithPath.into());
            }
            if !path.is_absolute() {
                return Err(SpecError::RelativePath { path: path.clone() }.into());
            }
        } else if kind == Kind::Dir {
            return Err(SpecError::DirWithoutPath.into());
        }
        if kind != Kind::Worktree && self.base.is_some() {
            return Err(super::error::BoardError::NotAWorktree {
                what: "a base",
                kind,
            });
        }
        if let Some(branch) = &self.branch {
            crate::workspace::validate_branch(branch)?;
        }
        if let Some(base) = &self.base {
            crate::workspace::validate_base(base)?;
        }
        Ok(())
    }
}

/// A claim request: the lock string (`"<hostname>:<pid>"` of the claimer) and the lease length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSpec {
    pub lock: String,
    pub ttl_seconds: i64,
    /// Who makes the claim: only a dispatcher's claim may be released as abandoned when its
    /// worker never starts (an external claimer's worker is not the dispatcher's to watch).
    pub origin: ClaimOrigin,
}

/// Who made a claim, recorded in its `claimed` event (`dispatcher: true`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClaimOrigin {
    /// A dispatcher claimed the task to spawn its own worker for it: if that worker never
    /// registers and the dispatcher is gone, the claim is released (`claim_abandoned`).
    Dispatcher,
    /// `kanban claim` or a library caller: a worker the dispatcher knows nothing of. Released
    /// only by the rules of every claim (TTL expiry with no live worker, a stale heartbeat, an
    /// operator's reclaim). The default, because wrongly releasing a live claim runs the task
    /// twice.
    #[default]
    External,
}

/// What a caller proves it holds; `None` fields are not checked (an operator).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fence {
    pub claim_lock: Option<String>,
    pub run_id: Option<i64>,
}

/// `"<hostname>:<pid>"` of this process.
pub(crate) fn default_claim_lock() -> String {
    let uname = rustix::system::uname();
    let host = uname.nodename().to_string_lossy();
    let host = if host.is_empty() { "unknown" } else { &host };
    format!("{host}:{}", std::process::id())
}

/// Checks a TTL or runtime given in seconds (`what` names it in the error).
pub(crate) fn check_seconds(what: &str, value: i64) -> Result<i64> {
    if (1..=MAX_SECONDS).contains(&value) {
        Ok(value)
    } else {
        Err(BoardError::InvalidSeconds {
            what: what.to_owned(),
            value: value.to_string(),
        })
    }
}

pub(super) fn normalize_assignee(assignee: Option<&str>) -> Option<String> {
    assignee
        .map(|a| a.trim().to_lowercase())
        .filter(|a| !a.is_empty())
}

/// The first line of `text`, at most 400 characters.
pub(crate) fn summary_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(400)
        .collect()
}

/// The error a claim writes on a run of its task it finds still open (which only a damaged
/// board has: every transition that ends an attempt closes its run).
pub(crate) const RECLAIM_ON_CLAIM_NOTE: &str = "invariant recovery on re-claim";

/// What an acceptance was collected for: the task's current run, status and contract then.
/// The completion re-checks it under its write transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub run_id: Option<i64>,
    pub status: super::model::Status,
    pub contract: Option<String>,
}

impl Snapshot {
    pub(crate) fn of_task(task: &super::model::Task) -> Snapshot {
        Snapshot {
            run_id: task.current_run_id,
            status: task.status,
            contract: task.completion_contract.clone(),
        }
    }
}

/// A collected acceptance, bound to the snapshot it was prepared for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub snapshot: Snapshot,
    pub receipt: crate::acceptance::Receipt,
}

/// What `complete` is told.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    /// The run the caller owns; the task's current run must be this one.
    pub expected_run_id: Option<i64>,
    pub summary: Option<String>,
    pub result: Option<String>,
    /// The structured handoff stored on the closing run (`task_runs.metadata`, a JSON object);
    /// the next worker's prompt shows it. An empty object is none.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// The cards the worker says it created (`--created-cards`): each must exist and be this
    /// task's (created by it or its assignee, or linked as its child), else the completion is
    /// refused after a `completion_blocked_hallucination` event.
    pub created_cards: Vec<String>,
    /// Refuse a completion that hands nothing over (no summary, result or metadata), as the
    /// original's `EmptyCompletionError`; a review approval (a task in `review`) is exempt. The
    /// command line and the built-in agents set it unless `allow_empty_completion` says
    /// otherwise; a library caller decides.
    pub require_evidence: bool,
    /// Complete even while another live claim holds the task (operator).
    pub force: bool,
    /// The receipts of an `evidence-required` task (at least one), recorded on the `completed`
    /// event.
    pub evidence: Vec<crate::acceptance::Evidence>,
    /// The GitHub acceptance of a task whose contract names a repository or a pull request,
    /// collected before the completion's transaction ([`Board::prepare_acceptance`]); without
    /// one such a task is refused.
    ///
    /// [`Board::prepare_acceptance`]: super::store::Board::prepare_acceptance
    pub acceptance: Option<Accepted>,
}

impl Completion {
    /// The metadata to store: `None` when absent or an empty object (the original stores a
    /// falsy metadata as `NULL`).
    pub(crate) fn stored_metadata(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.metadata.as_ref().filter(|m| !m.is_empty())
    }

    /// Whether the completion hands nothing over: no summary, no result and no metadata (each
    /// blank counts as none).
    pub(crate) fn is_empty(&self) -> bool {
        let blank = |s: &Option<String>| s.as_deref().is_none_or(|s| s.trim().is_empty());
        blank(&self.summary) && blank(&self.result) && self.stored_metadata().is_none()
    }

    /// Whether only the generic transition can record this completion of task `task_id`
    /// (metadata, claimed cards, task-like ids in its prose to check, or the evidence check):
    /// the fast completions (`engine::postgres::fast`, `engine::sqlite::fast`) record none of
    /// those. The task's own id in its prose needs no check: its row exists, so the generic
    /// path would flag nothing for it.
    pub(crate) fn needs_generic_path(&self, task_id: &str) -> bool {
        self.stored_metadata().is_some()
            || !self.created_cards.is_empty()
            || !self.evidence.is_empty()
            || self.acceptance.is_some()
            || (self.require_evidence && self.is_empty())
            || [&self.summary, &self.result]
                .into_iter()
                .flatten()
                .any(|text| task_ids_in(text).iter().any(|id| id != task_id))
    }
}

/// The task-like ids (`t_` and at least eight lowercase hex digits, on word boundaries) in
/// `text`, each once, in order of appearance: the original's prose scan.
pub(crate) fn task_ids_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found: Vec<String> = Vec::new();
    let mut i = 0;
    while i + 2 <= bytes.len() {
        let starts =
            bytes[i] == b't' && bytes.get(i + 1) == Some(&b'_') && (i == 0 || !word(bytes[i - 1]));
        if starts {
            let hex_end = bytes[i + 2..]
                .iter()
                .position(|b| !matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                .map_or(bytes.len(), |n| i + 2 + n);
            let boundary = hex_end == bytes.len() || !word(bytes[hex_end]);
            if hex_end - (i + 2) >= 8 && boundary {
                let id = &text[i..hex_end];
                if !found.iter().any(|f| f == id) {
                    found.push(id.to_owned());
                }
                i = hex_end;
                continue;
            }
        }
        i += 1;
    }
    found
}

/// The error a completion writes on a run of its task still open besides its current one.
pub(crate) const COMPLETE_LEAKED_NOTE: &str = "invariant recovery on completion";

/// What a completion records as its run's summary: the summary given (trimmed, when not
/// empty), else the result.
pub(crate) fn completion_summary(completion: &Completion) -> Option<&str> {
    completion
        .summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .or(completion.result.as_deref())
}

/// The `heartbeat` event of a heartbeat with `note` (trimmed; a blank note is none): the generic
/// heartbeat and PostgreSQL's one statement write the same payload.
pub(crate) fn heartbeat_event(note: Option<&str>) -> Event {
    Event::Heartbeat {
        note: note
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_like_ids_are_found_on_word_boundaries_once() {
        assert_eq!(
            task_ids_in("made t_0123abcd and t_0123abcdef01, again t_0123abcd."),
            vec!["t_0123abcd".to_owned(), "t_0123abcdef01".to_owned()]
        );
        // Too short, upper case, inside a word, followed by a word character: none.
        assert!(task_ids_in("t_0123abc t_0123ABCD xt_0123abcd t_0123abcdz").is_empty());
    }

    #[test]
    fn a_completion_is_empty_without_summary_result_or_metadata() {
        let mut c = Completion {
            summary: Some("  ".into()),
            metadata: Some(serde_json::Map::new()),
            ..Completion::default()
        };
        assert!(c.is_empty());
        c.result = Some("42".into());
        assert!(!c.is_empty());
    }
}
