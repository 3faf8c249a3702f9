//! Diagnostics: what is wrong with a task that an operator can fix, each with a severity and the
//! commands that recover it (the original's `kanban_diagnostics.py`, its seven rules and their
//! thresholds). Rules read a task, its events and its runs; they never write, and each clears by
//! itself once the task moves on (a clean completion after a refused one, a comment on a stale
//! block, a claim of a stranded task).

use serde::Serialize;

use super::error::Result;
use super::events::StoredEvent;
use super::model::{Run, Status, Task};
use super::query::TaskFilter;
use super::store::Board;

/// How urgent a diagnostic is; ordered (`Warning < Error < Critical`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }
}

impl std::str::FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Severity, String> {
        match s {
            "warning" => Ok(Severity::Warning),
            "error" => Ok(Severity::Error),
            "critical" => Ok(Severity::Critical),
            other => Err(format!(
                "unknown severity `{other}` (warning, error or critical)"
            )),
        }
    }
}

/// A recovery step: a command to run (the first suggested one is the recommended start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Action {
    pub kind: &'static str,
    pub label: String,
    pub command: String,
    pub suggested: bool,
}

/// One active distress signal on a task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    /// `hallucinated_cards`, `prose_phantom_refs`, `repeated_failures`, `repeated_crashes`,
    /// `stuck_in_blocked`, `ghost_running` or `stranded_in_ready`.
    pub kind: &'static str,
    pub severity: Severity,
    pub title: String,
    pub detail: String,
    pub actions: Vec<Action>,
    pub first_seen_at: i64,
    pub last_seen_at: i64,
    pub count: i64,
    pub data: serde_json::Value,
}

/// A task with its active diagnostics, worst first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskDiagnostics {
    pub task_id: String,
    pub task_title: String,
    pub task_status: Status,
    pub task_assignee: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// The rules' thresholds (the original's defaults).
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    pub failures: i64,
    pub crashes: i64,
    pub blocked_stale_seconds: i64,
    pub stranded_seconds: i64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            failures: 3,
            crashes: 2,
            blocked_stale_seconds: 24 * 3600,
            stranded_seconds: 30 * 60,
        }
    }
}

fn action(kind: &'static str, label: &str, command: String, suggested: bool) -> Action {
    Action {
        kind,
        label: label.to_owned(),
        command,
        suggested,
    }
}

/// Reclaim (when running) and reassign: the two recoveries every diagnostic may offer.
fn recovery(task: &Task) -> Vec<Action> {
    let running = task.status == Status::Running;
    let mut out = Vec::new();
    if running {
        out.push(action(
            "reclaim",
            "Reclaim the task",
            format!("kanban reclaim {}", task.id),
            false,
        ));
    }
    let reclaim = if running { " --reclaim" } else { "" };
    out.push(action(
        "reassign",
        "Reassign to another profile",
        format!("kanban reassign {} PROFILE{reclaim}", task.id),
        false,
    ));
    out
}

/// Events of `kind` that no `completed` or `edited` event follows.
fn active<'a>(events: &'a [StoredEvent], kind: &str) -> Vec<&'a StoredEvent> {
    let mut hits = Vec::new();
    for e in events {
        match e.kind.as_str() {
            "completed" | "edited" => hits.clear(),
            k if k == kind => hits.push(e),
            _ => {}
        }
    }
    hits
}

/// The distinct strings of `key` in the payloads of `events`, in order.
fn listed(events: &[&StoredEvent], key: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let values = e
            .payload
            .as_ref()
            .and_then(|p| p.get(key))
            .and_then(|v| v.as_array());
        for v in values.into_iter().flatten().filter_map(|v| v.as_str()) {
            if !out.iter().any(|o| o == v) {
                out.push(v.to_owned());
            }
        }
    }
    out
}

fn hallucinated_cards(task: &Task, events: &[StoredEvent]) -> Option<Diagnostic> {
    let hits = active(events, "completion_blocked_hallucination");
    let (first, last) = (hits.first()?, hits.last()?);
    let mut actions = vec![action(
        "comment",
        "Add a comment explaining what to do",
        format!("kanban comment {} --body \"…\"", task.id),
        false,
    )];
    actions.extend(recovery(task));
    Some(Diagnostic {
        kind: "hallucinated_cards",
        severity: Severity::Error,
        title: "Worker claimed cards that don't exist".to_owned(),
        detail: "The completing worker declared created cards that either did not exist or were \
                 not its own. The completion was refused and the task stayed where it was; the \
                 worker probably made ids up instead of using what `kanban create` printed."
            .to_owned(),
        actions,
        first_seen_at: first.created_at,
        last_seen_at: last.created_at,
        count: hits.len() as i64,
        data: serde_json::json!({ "phantom_ids": listed(&hits, "phantom_cards") }),
    })
}

fn prose_phantom_refs(task: &Task, events: &[StoredEvent]) -> Option<Diagnostic> {
    let hits = active(events, "suspected_hallucinated_references");
    let (first, last) = (hits.first()?, hits.last()?);
    Some(Diagnostic {
        kind: "prose_phantom_refs",
        severity: Severity::Warning,
        title: "Completion summary references unknown task ids".to_owned(),
        detail: "The completion summary names task ids this board does not have. The completion \
                 succeeded, but whoever reads the summary may look for cards that never existed."
            .to_owned(),
        actions: recovery(task),
        first_seen_at: first.created_at,
        last_seen_at: last.created_at,
        count: hits.len() as i64,
        data: serde_json::json!({ "phantom_refs": listed(&hits, "phantom_refs") }),
    })
}

/// The first line of `error`, at most 160 characters, and the whole of it cut at 500.
fn snippet(error: Option<&str>) -> (String, String) {
    let text = error.unwrap_or("").trim();
    let whole: String = text.chars().take(500).collect();
    let whole = if text.chars().count() > 500 {
        whole + "…"
    } else {
        whole
    };
    let first: String = whole
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(160)
        .collect();
    (first, whole)
}

fn repeated_failures(task: &Task, runs: &[Run], now: i64, t: &Thresholds) -> Option<Diagnostic> {
    let failures = task.consecutive_failures;
    if failures < t.failures {
        return None;
    }
    let recent = runs
        .iter()
        .rev()
        .filter_map(|r| r.outcome.as_deref())
        .find(|o| matches!(*o, "spawn_failed" | "timed_out" | "crashed"));
    let mut actions = Vec::new();
    match recent {
        Some("spawn_failed") => actions.push(action(
            "cli_hint",
            "Check the profile's agent and what the dispatcher would run",
            "kanban dispatch --dry-run".to_owned(),
            true,
        )),
        Some(_) => actions.push(action(
            "cli_hint",
            "Check the worker log",
            format!("kanban logs {}", task.id),
            true,
        )),
        None => {}
    }
    actions.extend(recovery(task));
    let label = match recent {
        Some("spawn_failed") => "spawn",
        Some("timed_out") => "timeout",
        Some("crashed") => "crash",
        _ => "failure",
    };
    let (first_line, whole) = snippet(task.last_failure_error.as_deref());
    let (title, detail) = if whole.is_empty() {
        (
            format!("Agent {label} x{failures} (no error recorded)"),
            format!(
                "This task failed {failures} times in a row (most recent: {label}) and no error text was captured; check the worker log."
            ),
        )
    } else {
        (
            format!("Agent {label} x{failures}: {first_line}"),
            format!(
                "This task failed {failures} times in a row (most recent: {label}). The last error:\n\n{whole}\n\nThe dispatcher retries until the failure limit blocks the task; fix the cause, then reclaim or unblock it."
            ),
        )
    };
    Some(Diagnostic {
        kind: "repeated_failures",
        severity: if failures >= t.failures * 2 {
            Severity::Critical
        } else {
            Severity::Error
        },
        title,
        detail,
        actions,
        first_seen_at: now,
        last_seen_at: now,
        count: failures,
        data: serde_json::json!({
            "consecutive_failures": failures,
            "most_recent_outcome": recent,
            "last_error": task.last_failure_error,
        }),
    })
}

fn repeated_crashes(task: &Task, runs: &[Run], now: i64, t: &Thresholds) -> Option<Diagnostic> {
    if task.consecutive_failures >= t.failures {
        return None; // `repeated_failures` says it.
    }
    let mut consecutive = 0;
    let mut last_error: Option<&str> = None;
    for r in runs.iter().rev() {
        match r.outcome.as_deref() {
            Some("crashed") => {
                consecutive += 1;
                last_error = last_error.or(r.error.as_deref());
            }
            Some("completed" | "reclaimed") => break,
            _ => {}
        }
    }
    if consecutive < t.crashes {
        return None;
    }
    let mut actions = vec![action(
        "cli_hint",
        "Check the worker log",
        format!("kanban logs {}", task.id),
        true,
    )];
    actions.extend(recovery(task));
    let (first_line, whole) = snippet(last_error);
    let (title, detail) = if whole.is_empty() {
        (
            format!("Agent crashed {consecutive}x (no error recorded)"),
            format!(
                "The last {consecutive} runs crashed and no error text was captured; check the worker log."
            ),
        )
    } else {
        (
            format!("Agent crashed {consecutive}x: {first_line}"),
            format!("The last {consecutive} runs crashed. The last error:\n\n{whole}"),
        )
    };
    Some(Diagnostic {
        kind: "repeated_crashes",
        severity: if consecutive >= t.crashes * 2 {
            Severity::Critical
        } else {
            Severity::Error
        },
        title,
        detail,
        actions,
        first_seen_at: now,
        last_seen_at: now,
        count: consecutive,
        data: serde_json::json!({ "consecutive_crashes": consecutive, "last_error": last_error }),
    })
}

fn stuck_in_blocked(
    task: &Task,
    events: &[StoredEvent],
    now: i64,
    t: &Thresholds,
) -> Option<Diagnostic> {
    if task.status != Status::Blocked {
        return None;
    }
    let blocked_at = events
        .iter()
        .filter(|e| e.kind == "blocked")
        .map(|e| e.created_at)
        .max()?;
    let age = now - blocked_at;
    if age < t.blocked_stale_seconds {
        return None;
    }
    if events
        .iter()
        .any(|e| matches!(e.kind.as_str(), "commented" | "unblocked") && e.created_at > blocked_at)
    {
        return None;
    }
    let hours = age / 3600;
    Some(Diagnostic {
        kind: "stuck_in_blocked",
        severity: Severity::Warning,
        title: format!("Task has been blocked for {hours}h"),
        detail: format!(
            "This task was blocked {hours}h ago and has had no comment or unblock since. A blocked task waits for a person: read its reason, then answer with a comment or unblock it."
        ),
        actions: vec![
            action(
                "comment",
                "Answer with a comment",
                format!("kanban comment {} --body \"…\"", task.id),
                true,
            ),
            action(
                "unblock",
                "Unblock the task",
                format!("kanban unblock {} --reason \"…\"", task.id),
                false,
            ),
        ],
        first_seen_at: blocked_at,
        last_seen_at: blocked_at,
        count: 1,
        data: serde_json::json!({ "blocked_at": blocked_at, "age_hours": (age as f64 / 360.0).round() / 10.0 }),
    })
}

fn ghost_running(task: &Task, runs: &[Run], now: i64) -> Option<Diagnostic> {
    if task.status != Status::Running {
        return None;
    }
    let mut missing = Vec::new();
    if task.claim_lock.as_deref().is_none_or(str::is_empty) {
        missing.push("claim_lock");
    }
    if task.claim_expires.is_none() {
        missing.push("claim_expires");
    }
    if task.worker_pid.is_none() {
        missing.push("worker_pid");
    }
    if task.current_run_id.is_none() {
        missing.push("current_run_id");
    }
    let run_state = task
        .current_run_id
        .and_then(|id| match runs.iter().find(|r| r.id == id) {
            None => Some("missing"),
            Some(r) if r.status != "running" || r.outcome.is_some() => Some("terminal"),
            Some(_) => None,
        });
    if missing.is_empty() && run_state.is_none() {
        return None;
    }
    let reason = match run_state {
        _ if !missing.is_empty() => format!("missing {}", missing.join(", ")),
        Some(state) => format!("current_run_id points to a {state} run"),
        None => String::new(),
    };
    Some(Diagnostic {
        kind: "ghost_running",
        severity: Severity::Critical,
        title: format!("Ghost running state: {reason}"),
        detail: "This task is marked running without a coherent claim and run. It may stay \
                 running forever, since a claim's expiry is what returns a task; reclaim it so the \
                 dispatcher starts a fresh run."
            .to_owned(),
        actions: vec![
            action(
                "reclaim",
                "Reclaim the ghost running task",
                format!("kanban reclaim {}", task.id),
                true,
            ),
            action(
                "cli_hint",
                "Inspect the task",
                format!("kanban show {}", task.id),
                false,
            ),
        ],
        first_seen_at: now,
        last_seen_at: now,
        count: 1,
        data: serde_json::json!({
            "missing_fields": missing,
            "claim_lock": task.claim_lock,
            "claim_expires": task.claim_expires,
            "worker_pid": task.worker_pid,
            "current_run_id": task.current_run_id,
            "last_heartbeat_at": task.last_heartbeat_at,
            "run_state": run_state,
        }),
    })
}

fn stranded_in_ready(
    task: &Task,
    events: &[StoredEvent],
    now: i64,
    t: &Thresholds,
) -> Option<Diagnostic> {
    if task.status != Status::Ready || task.claim_lock.is_some() {
        return None;
    }
    let assignee = task
        .assignee
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())?;
    let ready_since = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind.as_str(),
                "created" | "promoted" | "reclaimed" | "unblocked"
            )
        })
        .map(|e| e.created_at)
        .max()
        .unwrap_or(task.created_at);
    let age = now - ready_since;
    if age < t.stranded_seconds {
        return None;
    }
    let age_text = if age >= 3600 {
        format!("{:.1}h", age as f64 / 3600.0)
    } else {
        format!("{}m", age / 60)
    };
    let severity = if age >= t.stranded_seconds * 6 {
        Severity::Critical
    } else if age >= t.stranded_seconds * 2 {
        Severity::Error
    } else {
        Severity::Warning
    };
    Some(Diagnostic {
        kind: "stranded_in_ready",
        severity,
        title: format!("Ready for {age_text} with no worker"),
        detail: format!(
            "This task has been ready for {age_text} and nothing claimed it. Usually the assignee `{assignee}` is misspelled, its profile is gone, or no dispatcher runs for this board."
        ),
        actions: vec![
            action(
                "reassign",
                "Reassign to another profile",
                format!("kanban reassign {} PROFILE", task.id),
                false,
            ),
            action(
                "cli_hint",
                "Check what the dispatcher would do",
                "kanban dispatch --dry-run".to_owned(),
                false,
            ),
        ],
        first_seen_at: ready_since,
        last_seen_at: ready_since,
        count: 1,
        data: serde_json::json!({
            "ready_since": ready_since,
            "age_seconds": age,
            "assignee": assignee,
            "threshold_seconds": t.stranded_seconds,
        }),
    })
}

/// Every rule over one task, worst first (then the most recent).
pub fn compute(
    task: &Task,
    events: &[StoredEvent],
    runs: &[Run],
    now: i64,
    t: &Thresholds,
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = [
        hallucinated_cards(task, events),
        prose_phantom_refs(task, events),
        repeated_failures(task, runs, now, t),
        repeated_crashes(task, runs, now, t),
        stuck_in_blocked(task, events, now, t),
        ghost_running(task, runs, now),
        stranded_in_ready(task, events, now, t),
    ]
    .into_iter()
    .flatten()
    .collect();
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.last_seen_at.cmp(&a.last_seen_at))
    });
    out
}

impl Board {
    /// The diagnostics of one task.
    pub fn task_diagnostics(&self, id: &str, now: i64, t: &Thresholds) -> Result<Vec<Diagnostic>> {
        let task = self.get_task(id)?;
        Ok(compute(
            &task,
            &self.events(id, None)?,
            &self.runs(id)?,
            now,
            t,
        ))
    }

    /// The diagnostics of each of `tasks` (the web board's badges), read with two statements
    /// for all of them (their events and their runs); tasks without any are left out.
    pub fn diagnostics_of(
        &self,
        tasks: &[&Task],
        now: i64,
        t: &Thresholds,
    ) -> Result<std::collections::HashMap<String, Vec<Diagnostic>>> {
        use std::collections::HashMap;
        let mut out = HashMap::new();
        if tasks.is_empty() {
            return Ok(out);
        }
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        let list = (1..=ids.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut events: HashMap<String, Vec<StoredEvent>> = HashMap::new();
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {} FROM task_events WHERE task_id IN ({list}) ORDER BY id",
            super::events::EVENT_COLUMNS
        ))?;
        for e in stmt.query_map(
            crate::db::params_from_iter(ids.iter()),
            StoredEvent::from_row,
        )? {
            let e = e?;
            events.entry(e.task_id.clone()).or_default().push(e);
        }
        let mut runs: HashMap<String, Vec<Run>> = HashMap::new();
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {} FROM task_runs WHERE task_id IN ({list}) ORDER BY id",
            super::model::RUN_COLUMNS
        ))?;
        for r in stmt.query_map(crate::db::params_from_iter(ids.iter()), Run::from_row)? {
            let r = r?;
            runs.entry(r.task_id.clone()).or_default().push(r);
        }
        for task in tasks {
            let found = compute(
                task,
                events.get(&task.id).map_or(&[][..], Vec::as_slice),
                runs.get(&task.id).map_or(&[][..], Vec::as_slice),
                now,
                t,
            );
            if !found.is_empty() {
                out.insert(task.id.clone(), found);
            }
        }
        Ok(out)
    }

    /// Every task (archived ones aside) with at least one diagnostic at `min` or worse, the
    /// tasks with the worst first.
    pub fn board_diagnostics(
        &self,
        min: Severity,
        now: i64,
        t: &Thresholds,
    ) -> Result<Vec<TaskDiagnostics>> {
        let tasks = self.list_tasks(&TaskFilter::default())?;
        let mut out = Vec::new();
        for task in tasks {
            let mut found = compute(
                &task,
                &self.events(&task.id, None)?,
                &self.runs(&task.id)?,
                now,
                t,
            );
            found.retain(|d| d.severity >= min);
            if !found.is_empty() {
                out.push(TaskDiagnostics {
                    task_id: task.id,
                    task_title: task.title,
                    task_status: task.status,
                    task_assignee: task.assignee,
                    diagnostics: found,
                });
            }
        }
        out.sort_by(|a, b| b.diagnostics[0].severity.cmp(&a.diagnostics[0].severity));
        Ok(out)
    }
}
