//! Row types of the board (tasks, runs, comments, links) and the closed vocabularies stored in
//! them (statuses, block kinds). Decoding a row never panics: an unknown status is reported as
//! [`BoardError::CorruptRow`] so `kanban fsck` can name it.

use std::fmt;
use std::str::FromStr;

use crate::db::{self, Row};
use serde::{Deserialize, Serialize};

use super::error::BoardError;

/// The nine task statuses (ARCHITECTURE.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Triage,
    Todo,
    Scheduled,
    Ready,
    Running,
    Blocked,
    Review,
    Done,
    Archived,
}

impl Status {
    pub const ALL: [Status; 9] = [
        Status::Triage,
        Status::Todo,
        Status::Scheduled,
        Status::Ready,
        Status::Running,
        Status::Blocked,
        Status::Review,
        Status::Done,
        Status::Archived,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Triage => "triage",
            Status::Todo => "todo",
            Status::Scheduled => "scheduled",
            Status::Ready => "ready",
            Status::Running => "running",
            Status::Blocked => "blocked",
            Status::Review => "review",
            Status::Done => "done",
            Status::Archived => "archived",
        }
    }

    /// Done or archived: a parent in one of these no longer holds its children back.
    pub const fn is_finished(self) -> bool {
        matches!(self, Status::Done | Status::Archived)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = BoardError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| BoardError::InvalidStatus {
                status: s.to_owned(),
            })
    }
}

/// Why a task is blocked (`kanban block --kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// Waiting on another task: the task goes back to `todo`, not `blocked`.
    Dependency,
    NeedsInput,
    Capability,
    Transient,
}

impl BlockKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            BlockKind::Dependency => "dependency",
            BlockKind::NeedsInput => "needs_input",
            BlockKind::Capability => "capability",
            BlockKind::Transient => "transient",
        }
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BlockKind {
    type Err = BoardError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dependency" => Ok(BlockKind::Dependency),
            "needs_input" | "needs-input" => Ok(BlockKind::NeedsInput),
            "capability" => Ok(BlockKind::Capability),
            "transient" => Ok(BlockKind::Transient),
            other => Err(BoardError::InvalidBlockKind {
                kind: other.to_owned(),
            }),
        }
    }
}

/// One row of `tasks` (every column of ARCHITECTURE.md §2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub title: String,
    pub body: Option<String>,
    pub assignee: Option<String>,
    pub status: Status,
    pub priority: i64,
    pub created_by: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub workspace_kind: String,
    pub workspace_path: Option<String>,
    pub branch_name: Option<String>,
    pub claim_lock: Option<String>,
    pub claim_expires: Option<i64>,
    pub tenant: Option<String>,
    pub result: Option<String>,
    pub idempotency_key: Option<String>,
    pub consecutive_failures: i64,
    pub worker_pid: Option<i64>,
    pub worker_started_at: Option<String>,
    pub last_failure_error: Option<String>,
    pub max_runtime_seconds: Option<i64>,
    pub last_heartbeat_at: Option<i64>,
    pub current_run_id: Option<i64>,
    /// JSON array of skill names; `None` = the profile's defaults.
    pub skills: Option<serde_json::Value>,
    pub model_override: Option<String>,
    pub provider_override: Option<String>,
    pub reasoning_effort: Option<String>,
    pub max_retries: Option<i64>,
    pub goal_mode: bool,
    pub goal_max_turns: Option<i64>,
    pub block_kind: Option<BlockKind>,
    pub block_recurrences: i64,
    /// kanban's addition: the ref a new worktree branch starts from (`--base`); `None` = `HEAD`.
    pub workspace_base: Option<String>,
    /// What must be true before the task may be done (`local-only`, `evidence-required`,
    /// `OWNER/REPO` or a pull-request URL; see [`crate::acceptance::Contract`]); `None` on a
    /// task of a board that predates the column is `local-only`.
    pub completion_contract: Option<String>,
}

/// The `SELECT` list that [`Task::from_row`] decodes, in order.
pub(crate) const TASK_COLUMNS: &str = "id, title, body, assignee, status, priority, created_by, created_at, \
     started_at, completed_at, workspace_kind, workspace_path, branch_name, claim_lock, claim_expires, \
     tenant, result, idempotency_key, consecutive_failures, worker_pid, worker_started_at, \
     last_failure_error, max_runtime_seconds, last_heartbeat_at, current_run_id, skills, \
     model_override, provider_override, reasoning_effort, max_retries, goal_mode, goal_max_turns, \
     block_kind, block_recurrences, workspace_base, completion_contract";

/// Reads a column that may hold text or an integer as text (`worker_started_at` has both).
fn text_or_int(row: &Row<'_>, idx: usize) -> db::Result<Option<String>> {
    use db::ValueRef;
    Ok(match row.get_ref(idx)? {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    })
}

/// Empty strings in optional text columns read as `None` (the original stores both).
pub(super) fn opt_text(row: &Row<'_>, idx: usize) -> db::Result<Option<String>> {
    Ok(text_or_int(row, idx)?.filter(|s| !s.is_empty()))
}

/// A task's `status` column read by a narrow `SELECT` (a transition's own few columns).
pub(super) fn task_status(id: &str, text: &str) -> Result<Status, BoardError> {
    text.parse::<Status>().map_err(|_| BoardError::CorruptRow {
        table: "tasks",
        message: format!("task `{id}` has unknown status {text:?}"),
    })
}

pub(super) fn corrupt(table: &'static str, message: String) -> db::Error {
    db::Error::invalid_value(0, Box::new(BoardError::CorruptRow { table, message }))
}

impl Task {
    /// Decodes a row selected with [`TASK_COLUMNS`].
    pub(crate) fn from_row(row: &Row<'_>) -> db::Result<Task> {
        let id: String = row.get(0)?;
        let status_text: String = row.get(4)?;
        let status = status_text.parse::<Status>().map_err(|_| {
            corrupt(
                "tasks",
                format!("task `{id}` has unknown status {status_text:?}"),
            )
        })?;
        let skills = opt_text(row, 25)?.and_then(|s| serde_json::from_str(&s).ok());
        let block_kind = opt_text(row, 32)?.and_then(|s| s.parse::<BlockKind>().ok());
        Ok(Task {
            id,
            title: row.get(1)?,
            body: row.get(2)?,
            assignee: opt_text(row, 3)?,
            status,
            priority: row.get::<_, Option<i64>>(5)?.unwrap_or(0),
            created_by: opt_text(row, 6)?,
            created_at: row.get(7)?,
            started_at: row.get(8)?,
            completed_at: row.get(9)?,
            workspace_kind: opt_text(row, 10)?.unwrap_or_else(|| "scratch".to_owned()),
            workspace_path: opt_text(row, 11)?,
            branch_name: opt_text(row, 12)?,
            claim_lock: opt_text(row, 13)?,
            claim_expires: row.get(14)?,
            tenant: opt_text(row, 15)?,
            result: row.get(16)?,
            idempotency_key: opt_text(row, 17)?,
            consecutive_failures: row.get::<_, Option<i64>>(18)?.unwrap_or(0),
            worker_pid: row.get(19)?,
            worker_started_at: text_or_int(row, 20)?,
            last_failure_error: row.get(21)?,
            max_runtime_seconds: row.get(22)?,
            last_heartbeat_at: row.get(23)?,
            current_run_id: row.get(24)?,
            skills,
            model_override: opt_text(row, 26)?,
            provider_override: opt_text(row, 27)?,
            reasoning_effort: opt_text(row, 28)?,
            max_retries: row.get(29)?,
            goal_mode: row.get::<_, Option<i64>>(30)?.unwrap_or(0) != 0,
            goal_max_turns: row.get(31)?,
            block_kind,
            block_recurrences: row.get::<_, Option<i64>>(33)?.unwrap_or(0),
            workspace_base: opt_text(row, 34)?,
            completion_contract: opt_text(row, 35)?,
        })
    }
}

/// One row of `task_runs`: one attempt at a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub id: i64,
    pub task_id: String,
    pub profile: Option<String>,
    pub status: String,
    pub claim_lock: Option<String>,
    pub claim_expires: Option<i64>,
    pub worker_pid: Option<i64>,
    pub worker_started_at: Option<String>,
    pub max_runtime_seconds: Option<i64>,
    pub last_heartbeat_at: Option<i64>,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// `None` while the run is open.
    pub outcome: Option<String>,
    pub summary: Option<String>,
    pub metadata: Option<serde_json::Value>,
    pub error: Option<String>,
}

/// The `SELECT` list that [`Run::from_row`] decodes, in order.
pub(crate) const RUN_COLUMNS: &str = "id, task_id, profile, status, claim_lock, claim_expires, worker_pid, \
     worker_started_at, max_runtime_seconds, last_heartbeat_at, started_at, ended_at, outcome, \
     summary, metadata, error";

impl Run {
    pub(crate) fn from_row(row: &Row<'_>) -> db::Result<Run> {
        Ok(Run {
            id: row.get(0)?,
            task_id: row.get(1)?,
            profile: opt_text(row, 2)?,
            status: row.get(3)?,
            claim_lock: opt_text(row, 4)?,
            claim_expires: row.get(5)?,
            worker_pid: row.get(6)?,
            worker_started_at: text_or_int(row, 7)?,
            max_runtime_seconds: row.get(8)?,
            last_heartbeat_at: row.get(9)?,
            started_at: row.get(10)?,
            ended_at: row.get(11)?,
            outcome: opt_text(row, 12)?,
            summary: row.get(13)?,
            metadata: opt_text(row, 14)?.and_then(|s| serde_json::from_str(&s).ok()),
            error: row.get(15)?,
        })
    }

    /// True while the attempt has not ended.
    pub fn is_open(&self) -> bool {
        self.ended_at.is_none()
    }
}

/// One row of `task_comments`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comment {
    pub id: i64,
    pub task_id: String,
    pub author: String,
    pub body: String,
    pub created_at: i64,
}

/// A task reduced to what a parent/child listing shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRef {
    pub id: String,
    pub title: String,
    pub status: Status,
}
/// Why a turn ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// The run's first turn (the full prompt).
    First,
    /// A further turn of the same task: a goal continuation or a stop nudge.
    Continuation,
    /// A retry in place of a turn that failed retryably.
    Recovery,
    /// The goal judge said "done" while the task is not: one turn to finish it properly.
    Finalize,
}

impl TurnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::First => "first",
            TurnKind::Continuation => "continuation",
            TurnKind::Recovery => "recovery",
            TurnKind::Finalize => "finalize",
        }
    }
}
