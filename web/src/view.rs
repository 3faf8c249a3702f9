//! The data the pages show: plain values the [`crate::Source`] fills from a board. Times are
//! epoch seconds; `now` is the source's clock at the time of the read.

/// A task as a board card (and the head of its page) shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CardView {
    pub id: String,
    pub title: String,
    pub body: Option<String>,
    pub assignee: Option<String>,
    pub status: String,
    pub priority: i64,
    pub created_at: i64,
    /// Runs the task has had.
    pub attempts: i64,
    /// Last heartbeat of a running task.
    pub last_heartbeat_at: Option<i64>,
    /// Start of the current run of a running task.
    pub started_at: Option<i64>,
    /// A running task whose heartbeat is older than the board's stale limit.
    pub stale: bool,
    pub block_reason: Option<String>,
    /// Its active diagnostics (`kanban diagnostics`), worst first.
    pub diagnostics: Vec<DiagnosticView>,
}

/// One active diagnostic of a task (`board::diagnostics`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiagnosticView {
    /// The rule: `repeated_failures`, `stranded_in_ready`, …
    pub kind: String,
    /// `warning`, `error` or `critical`.
    pub severity: String,
    pub title: String,
    pub detail: String,
    /// The suggested commands, the recommended one first.
    pub commands: Vec<String>,
}

/// The board page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BoardView {
    pub slug: String,
    pub now: i64,
    /// The columns, in order (one per status).
    pub statuses: Vec<String>,
    pub cards: Vec<CardView>,
    /// How many cards each status has, when `cards` holds only the first of each column
    /// ([`crate::Source::board_page`]); `None` when `cards` is the whole board.
    pub column_totals: Option<std::collections::BTreeMap<String, usize>>,
    /// The dispatcher at a glance: `Some(true)` while one runs, `None` when the board records
    /// no ticks (a board of the original).
    pub dispatcher_running: Option<bool>,
    pub last_tick_at: Option<i64>,
    pub oldest_ready_age_seconds: Option<i64>,
}

/// A link to another task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskLink {
    pub id: String,
    pub title: String,
    pub status: String,
}

/// One run of a task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunView {
    pub id: i64,
    pub profile: Option<String>,
    pub status: String,
    pub outcome: Option<String>,
    /// How the worker exited (`exit 0`, `exit 75 (rate limited)`, …) when known.
    pub exit_class: Option<String>,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub summary: Option<String>,
    pub error: Option<String>,
}

/// One comment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommentView {
    pub author: String,
    pub body: String,
    pub created_at: i64,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventView {
    pub id: i64,
    pub run_id: Option<i64>,
    pub kind: String,
    /// The payload as JSON text.
    pub payload: Option<String>,
    pub created_at: i64,
}

/// The task page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskView {
    pub slug: String,
    pub now: i64,
    pub card: CardView,
    pub result: Option<String>,
    pub parents: Vec<TaskLink>,
    pub children: Vec<TaskLink>,
    pub runs: Vec<RunView>,
    pub comments: Vec<CommentView>,
    pub events: Vec<EventView>,
    /// The end of the task's log (the newest bytes), when there is a log.
    pub log_tail: Option<String>,
    /// A run of the task is open: the log tail follows live.
    pub run_open: bool,
    /// Where its agent works: `worktree @ /repo/.worktrees/t_… (branch wt/t_…)`, and why a
    /// finished task's workspace was kept, when it was.
    pub workspace: String,
    pub workspace_kept: Option<String>,
}

/// One cron job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobView {
    pub id: String,
    pub name: String,
    pub schedule: String,
    pub profile: String,
    pub state: String,
    pub next_run_at: Option<i64>,
    pub last_run_at: Option<i64>,
    pub last_status: Option<String>,
    pub last_error: Option<String>,
}

/// The cron page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CronView {
    pub now: i64,
    pub jobs: Vec<JobView>,
}

/// A live worker.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkerView {
    pub task_id: String,
    pub pid: Option<i64>,
    pub host: Option<String>,
    pub last_heartbeat_at: Option<i64>,
    pub stale: bool,
}

/// A board's activity per hour (the health page's charts): runs ended per outcome in each hour,
/// and tasks waiting, running and done at the end of each.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ActivityView {
    /// The start of the first hour (epoch seconds).
    pub start: i64,
    pub completed: Vec<i64>,
    pub failed: Vec<i64>,
    pub rate_limited: Vec<i64>,
    pub waiting: Vec<i64>,
    pub running: Vec<i64>,
    pub done: Vec<i64>,
}

/// One board on the health page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BoardHealth {
    pub slug: String,
    pub workers: Vec<WorkerView>,
    /// The dispatcher's last tick, when the board records it.
    pub last_tick_at: Option<i64>,
    /// A dispatcher's recorded tick is fresh: one runs.
    pub dispatcher_running: bool,
    pub oldest_ready_age_seconds: Option<i64>,
    /// Running workers per profile.
    pub workers_by_profile: Vec<(String, i64)>,
    /// The last 24 hours and the last 7 days, per hour.
    pub day: ActivityView,
    pub week: ActivityView,
    /// Workers running / `max_spawn`.
    pub running: i64,
    pub max_spawn: i64,
    pub given_up: Vec<TaskLink>,
}

/// The health page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthView {
    pub now: i64,
    pub boards: Vec<BoardHealth>,
}

/// A histogram as `/metrics` exports it: cumulative counts per upper bound (seconds), the count
/// (the `+Inf` bucket) and the sum.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistogramView {
    pub buckets: Vec<(i64, i64)>,
    pub count: i64,
    pub sum: i64,
}

/// One board's numbers on `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BoardMetricsView {
    pub slug: String,
    pub tasks_by_status: Vec<(String, i64)>,
    pub runs_by_outcome: Vec<(String, i64)>,
    pub workers_by_profile: Vec<(String, i64)>,
    pub run_duration: HistogramView,
    pub claim_to_spawn: HistogramView,
    pub oldest_ready_age_seconds: Option<i64>,
    /// Seconds since the newest tick any dispatcher recorded (`None`: never recorded).
    pub last_tick_age_seconds: Option<i64>,
    /// Dispatchers whose recorded tick is fresh (running).
    pub dispatchers_running: i64,
    /// Active diagnostics per (rule, severity).
    pub diagnostics: Vec<(String, String, i64)>,
}

/// `/metrics`: every served board, and the home's owner turns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetricsView {
    pub boards: Vec<BoardMetricsView>,
    /// Owner-mode turns per (profile, state) from each owner's `state.db`.
    pub owner_turns: Vec<(String, String, i64)>,
}
