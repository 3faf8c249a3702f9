//! What of a finished task's workspace may go, and `kanban gc` (README "Working on a repository").
//!
//! [`after_finish`] runs after `complete` and `archive` commit (best effort: a failure is
//! reported, never undoes the transition); [`gc`] runs the same decisions over every finished
//! task of a board, then prunes old events and worker logs. The decisions:
//!
//! * scratch: removed only strictly inside one of the board's managed workspaces roots, checked
//!   as resolved and as spelled, and only when the folder is named after the task (a row naming
//!   another folder is never followed there); leftovers of 1 KiB or more are listed first in a
//!   `workspace_discarded_content` event;
//! * worktree: removed only when clean and every commit is on a remote-tracking ref, then its
//!   `wt/*` branch is deleted; otherwise kept with a `workspace_preserved {reason}` event
//!   (written once per reason, not at every `gc`);
//! * `dir:`: never removed;
//! * deferred while a child task that may read the workspace is unfinished; the child's own
//!   finish runs its parents' deferred cleanup (the original's `_try_cleanup_parent_workspaces`).
//!
//! The filesystem and git work is [`crate::workspace::cleanup`]; this module decides which tasks,
//! and records what happened.
//!
//! [`purge`] is `kanban delete` and `kanban archive --rm`: the hard delete
//! ([`crate::board::purge`]) of a task that does not run, after (for `--rm`) archiving it and
//! cleaning up its workspace as above; refused, as the original refuses, while a task-owned
//! workspace (scratch or worktree) is still on disk — the task stays (archived) for recovery.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::board::events::{DiscardedFile, Event};
use crate::board::model::Status;
use crate::board::outcome::{Outcome, Refusal};
use crate::board::purge::{Deleted, remove_attachment_files};
use crate::board::{Board, BoardError, FinishedWorkspace};
use crate::workspace::{Cleanup, Kind};

/// What became of one finished task's workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub task_id: String,
    pub path: PathBuf,
    /// `removed`, `preserved`, `kept`, `deferred` or `missing`.
    pub action: &'static str,
    /// Why it was kept, preserved or deferred (`dirty`, `unpushed`, `dir`, `open_children`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_deleted: Option<String>,
    /// Bytes of undeclared leftovers removed (or to be removed) with a scratch workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discarded_bytes: Option<u64>,
}

/// Where a board's workspaces are, and whether to change anything.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub board: &'a Board,
    pub root: &'a Path,
    pub slug: &'a str,
    pub now: i64,
    pub dry_run: bool,
}

/// Cleans up task `id` after it finished, then any parent whose cleanup waited for it. A task
/// that is not finished is left alone.
pub fn after_finish(scope: &Scope<'_>, id: &str) -> Result<Vec<Step>, BoardError> {
    let mut steps = Vec::new();
    let task = scope.board.get_task(id)?;
    if !task.status.is_finished() {
        return Ok(steps);
    }
    if let Some(finished) = finished_workspace(scope, &task) {
        steps.extend(one(scope, &finished)?);
    }
    for parent in scope.board.parents(id)? {
        if !parent.status.is_finished() {
            continue;
        }
        let parent = scope.board.get_task(&parent.id)?;
        if let Some(finished) = finished_workspace(scope, &parent) {
            steps.extend(one(scope, &finished)?.filter(|s| s.action != "deferred"));
        }
    }
    Ok(steps)
}

/// What [`purge`] did to one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Purged {
    #[serde(flatten)]
    pub deleted: Deleted,
    /// The task was archived by this command before it was deleted (`archive --rm`).
    pub archived: bool,
    /// What became of its workspace when it was archived.
    pub workspace: Vec<Step>,
    /// The attachment files removed.
    pub files_removed: Vec<String>,
}

/// Hard-deletes task `id` (see the module docs); with `archive_first`, archives it and cleans
/// up its workspace first.
pub fn purge(
    scope: &Scope<'_>,
    id: &str,
    archive_first: bool,
) -> Result<Outcome<Purged>, BoardError> {
    let task = scope.board.get_task(id)?;
    if task.status == Status::Running || task.current_run_id.is_some() {
        return Ok(Outcome::Refused(Refusal::DeleteRunning {
            task_id: id.to_owned(),
            claim_lock: task.claim_lock,
        }));
    }
    let mut workspace = Vec::new();
    let mut archived = false;
    if archive_first {
        if task.status != Status::Archived {
            if let Outcome::Refused(r) = scope.board.archive(id, scope.now)? {
                return Ok(Outcome::Refused(r));
            }
            archived = true;
        }
        workspace = after_finish(scope, id)?;
    }
    let task = scope.board.get_task(id)?;
    let owned = Kind::from_column(&task.workspace_kind)
        .is_some_and(|k| matches!(k, Kind::Scratch | Kind::Worktree));
    if let Some(left) =
        finished_workspace(scope, &task).filter(|w| owned && Path::new(&w.path).exists())
    {
        return Ok(Outcome::Refused(Refusal::WorkspacePresent {
            task_id: id.to_owned(),
            path: left.path,
        }));
    }
    let deleted = match scope.board.delete_task(id, scope.now)? {
        Outcome::Done(d) => d,
        Outcome::Refused(r) => return Ok(Outcome::Refused(r)),
    };
    let dir = crate::home::attachments_dir(scope.root, scope.slug, id);
    let files_removed = remove_attachment_files(&deleted.attachments, &dir);
    Ok(Outcome::Done(Purged {
        deleted,
        archived,
        workspace,
        files_removed,
    }))
}

/// The workspace a finished task names: its `workspace_path`, or for a scratch task that ran
/// before paths were recorded, its folder in the board's workspaces root when one is there.
fn finished_workspace(scope: &Scope<'_>, task: &crate::board::Task) -> Option<FinishedWorkspace> {
    let path = match &task.workspace_path {
        Some(path) if !path.is_empty() => path.clone(),
        _ if task.workspace_kind == Kind::Scratch.as_str() => {
            let dir = crate::home::find_workspace(scope.root, scope.slug, &task.id);
            if !dir.exists() {
                return None;
            }
            dir.to_string_lossy().into_owned()
        }
        _ => return None,
    };
    Some(FinishedWorkspace {
        task_id: task.id.clone(),
        status: task.status,
        kind: task.workspace_kind.clone(),
        path,
        branch: task.branch_name.clone(),
    })
}

/// Decides, does (unless a dry run) and records the cleanup of one finished workspace.
fn one(scope: &Scope<'_>, finished: &FinishedWorkspace) -> Result<Option<Step>, BoardError> {
    let path = PathBuf::from(&finished.path);
    let step = |action, reason: Option<&str>| Step {
        task_id: finished.task_id.clone(),
        path: path.clone(),
        action,
        reason: reason.map(str::to_owned),
        branch_deleted: None,
        discarded_bytes: None,
    };
    let Some(kind) = Kind::from_column(&finished.kind) else {
        return Ok(Some(step("kept", Some("unknown_kind"))));
    };
    if kind == Kind::Dir {
        return Ok(Some(step("kept", Some("dir"))));
    }
    let open: Vec<String> = scope
        .board
        .children(&finished.task_id)?
        .into_iter()
        .filter(|c| !c.status.is_finished())
        .map(|c| c.id)
        .collect();
    if !open.is_empty() {
        return Ok(Some(step("deferred", Some("open_children"))));
    }
    if kind == Kind::Scratch && path.file_name() != Some(std::ffi::OsStr::new(&finished.task_id)) {
        let kept = step("kept", Some("outside_managed_root"));
        note_preserved(
            scope,
            finished,
            "outside_managed_root",
            "the folder is not named after the task",
        )?;
        return Ok(Some(kept));
    }
    let mut roots = crate::home::managed_workspace_roots(scope.root, scope.slug);
    roots.extend(crate::gates::worker_workspaces_root());
    let report = crate::workspace::cleanup(
        kind,
        &path,
        finished.branch.as_deref(),
        &roots,
        scope.dry_run,
    );
    let discarded_bytes = report.discarded.as_ref().map(|d| d.total_bytes);
    Ok(Some(match report.outcome {
        Cleanup::Removed {
            branch_deleted,
            branch_kept,
            ..
        } => {
            if !scope.dry_run {
                let mut events = Vec::new();
                if let Some(d) = &report.discarded {
                    events.push(Event::WorkspaceDiscardedContent {
                        path: d.path.to_string_lossy().into_owned(),
                        total_bytes: d.total_bytes,
                        file_count: d.file_count,
                        sample: d
                            .sample
                            .iter()
                            .map(|(file, bytes)| DiscardedFile {
                                file: file.clone(),
                                bytes: *bytes,
                            })
                            .collect(),
                    });
                }
                events.push(Event::WorkspaceRemoved {
                    path: finished.path.clone(),
                    branch_deleted: branch_deleted.clone(),
                });
                scope
                    .board
                    .note_workspace(&finished.task_id, &events, scope.now)?;
            }
            Step {
                branch_deleted,
                discarded_bytes,
                reason: branch_kept,
                ..step("removed", None)
            }
        }
        Cleanup::Preserved { reason, detail, .. } => {
            note_preserved(scope, finished, reason, &detail)?;
            step("preserved", Some(reason))
        }
        Cleanup::Kept { reason, .. } => {
            if reason == "outside_managed_root" {
                note_preserved(scope, finished, reason, "")?;
            }
            step("kept", Some(reason))
        }
        Cleanup::Missing => step("missing", None),
    }))
}

/// A `workspace_preserved` event, unless the task's newest cleanup note already says so.
fn note_preserved(
    scope: &Scope<'_>,
    finished: &FinishedWorkspace,
    reason: &str,
    detail: &str,
) -> Result<(), BoardError> {
    if scope.dry_run {
        return Ok(());
    }
    if let Some(last) = scope.board.last_workspace_note(&finished.task_id)?
        && let Ok(Event::WorkspacePreserved {
            path, reason: said, ..
        }) = last.decode()
        && path == finished.path
        && said == reason
    {
        return Ok(());
    }
    let event = Event::WorkspacePreserved {
        path: finished.path.clone(),
        reason: reason.to_owned(),
        branch_name: finished.branch.clone(),
        detail: detail.to_owned(),
    };
    scope
        .board
        .note_workspace(&finished.task_id, &[event], scope.now)
}

/// How old an event or a worker log of a finished task must be for `kanban gc` to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub event_seconds: i64,
    pub log_seconds: i64,
}

/// What `kanban gc` did (or, dry, would do).
#[derive(Debug, Clone, Default, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub workspaces: Vec<Step>,
    pub events_pruned: u64,
    pub logs_removed: Vec<PathBuf>,
}

/// `kanban gc`: every finished task's workspace ([`one`]'s rules), events older than the
/// retention of finished tasks, and worker logs (and their rotated `.1`) of finished tasks not
/// written to for the log retention.
pub fn gc(scope: &Scope<'_>, retention: Retention) -> Result<GcReport, BoardError> {
    let mut report = GcReport {
        dry_run: scope.dry_run,
        ..GcReport::default()
    };
    let mut seen = std::collections::HashSet::new();
    for finished in scope.board.finished_workspaces()? {
        seen.insert(finished.task_id.clone());
        if let Some(step) = one(scope, &finished)? {
            report.workspaces.push(step);
        }
    }
    let finished_tasks = scope.board.list_tasks(&crate::board::query::TaskFilter {
        statuses: vec![crate::board::Status::Done, crate::board::Status::Archived],
        include_archived: true,
        ..Default::default()
    })?;
    for task in &finished_tasks {
        if seen.contains(&task.id) {
            continue;
        }
        if let Some(finished) = finished_workspace(scope, task)
            && let Some(step) = one(scope, &finished)?
        {
            report.workspaces.push(step);
        }
    }
    report.events_pruned = scope
        .board
        .prune_events(scope.now - retention.event_seconds, scope.dry_run)?;
    let cutoff = std::time::SystemTime::UNIX_EPOCH
        + std::time::Duration::from_secs(
            u64::try_from(scope.now - retention.log_seconds).unwrap_or(0),
        );
    for task in &finished_tasks {
        let logs = crate::home::log_paths(scope.root, scope.slug, &task.id);
        let rotated = logs.iter().map(|log| {
            let mut rotated = log.clone().into_os_string();
            rotated.push(".1");
            PathBuf::from(rotated)
        });
        let files: Vec<PathBuf> = logs.iter().cloned().chain(rotated).collect();
        for file in files {
            let old = std::fs::symlink_metadata(&file)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m < cutoff);
            if old && (scope.dry_run || std::fs::remove_file(&file).is_ok()) {
                report.logs_removed.push(file);
            }
        }
    }
    Ok(report)
}
