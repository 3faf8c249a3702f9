//! The workspace side of `complete` and `archive` (the cleanup that follows them) and `kanban gc`:
//! call [`crate::cleanup`], print what was kept and why.

use crate::cleanup::{self, Retention, Scope, Step};
use crate::cli::escape::line;
use crate::cli::session::{Opened, fence, now, open, print_out, root};
use crate::cli::{CmdResult, Globals};

/// Runs the cleanup that follows task `id`'s finish on the opened board, unless this is the
/// task's own worker context. Best effort: the
/// transition is committed, so a failure here is a warning on stderr, never the command's exit.
/// A kept or deferred workspace is said on stderr (stdout keeps the command's own output).
pub(in crate::cli) fn after_finish(o: &Opened, globals: &Globals, id: &str) {
    // The worker's agent finishing its own task: the worker cleans up once the agent is gone
    // (worker/mod.rs), never under it.
    if crate::gates::default_task_id(None).as_deref() == Some(id) {
        return;
    }
    let root = match root(globals) {
        Ok(root) => root,
        Err(e) => {
            eprintln!("kanban: workspace cleanup of {id} skipped: {e:#}");
            return;
        }
    };
    let scope = Scope {
        board: &o.board,
        root: &root,
        slug: &o.loc.slug,
        now: now(),
        dry_run: false,
    };
    match cleanup::after_finish(&scope, id) {
        Ok(steps) => {
            for step in steps
                .iter()
                .filter(|s| s.action != "removed" && s.action != "missing")
            {
                eprintln!("kanban: {}", describe(step, false));
            }
        }
        Err(e) => eprintln!("kanban: workspace cleanup of {id} failed: {e:#}"),
    }
}

/// `worktree @ PATH (branch B) from BASE`, or before its first run where it will be made.
pub(in crate::cli) fn describe_workspace(task: &crate::board::Task) -> String {
    let mut text = task.workspace_kind.clone();
    match &task.workspace_path {
        Some(path) => text.push_str(&format!(" @ {}", line(path))),
        None if task.workspace_kind == "worktree" => text.push_str(
            " (made at its first run: <repo>/.worktrees/<id> of the board's default workdir)",
        ),
        None => text.push_str(" (made at its first run)"),
    }
    if let Some(branch) = &task.branch_name {
        text.push_str(&format!(" (branch {})", line(branch)));
    }
    if let Some(base) = &task.workspace_base {
        text.push_str(&format!(" from {}", line(base)));
    }
    text
}

/// One line for a step: what happened to whose workspace, and why.
fn describe(step: &Step, dry_run: bool) -> String {
    let verb = match (step.action, dry_run) {
        ("removed", true) => "would remove",
        ("removed", false) => "removed",
        ("preserved", _) => "kept",
        ("kept", _) => "kept",
        ("deferred", _) => "kept for now",
        (other, _) => other,
    };
    let mut text = format!(
        "{verb} the workspace of {} at {}",
        step.task_id,
        line(&step.path.display().to_string())
    );
    match (step.action, step.reason.as_deref()) {
        ("preserved", Some("dirty")) => text.push_str(" (uncommitted changes)"),
        ("preserved", Some("unpushed")) => {
            text.push_str(" (commits on no remote-tracking branch: push them, then `kanban gc`)")
        }
        ("deferred", _) => text.push_str(" (an unfinished child task may still read it)"),
        ("kept", Some("dir")) => text.push_str(" (a dir: workspace is never removed)"),
        (_, Some(reason)) => text.push_str(&format!(" ({reason})")),
        _ => {}
    }
    if let Some(branch) = &step.branch_deleted {
        text.push_str(&format!(", and its branch {branch}"));
    }
    if let Some(bytes) = step.discarded_bytes {
        text.push_str(&format!(" with {bytes} bytes of undeclared files"));
    }
    text
}

/// `kanban gc [--dry-run]`.
pub(in crate::cli) fn gc(dry_run: bool, globals: &Globals) -> CmdResult {
    if !dry_run {
        fence()?;
    }
    let root = root(globals)?;
    let o = open(globals)?;
    let config = crate::config::Config::load(&root)?;
    let day = 24 * 3600;
    let retention = Retention {
        event_seconds: i64::from(config.gc.event_retention_days) * day,
        log_seconds: i64::from(config.gc.log_retention_days) * day,
    };
    let scope = Scope {
        board: &o.board,
        root: &root,
        slug: &o.loc.slug,
        now: now(),
        dry_run,
    };
    let report = cleanup::gc(&scope, retention)?;
    print_out(globals.json, &report, || {
        let mut lines: Vec<String> = report
            .workspaces
            .iter()
            .filter(|s| s.action != "missing")
            .map(|s| describe(s, dry_run))
            .collect();
        let (events, logs) = if dry_run {
            ("would prune", "would remove")
        } else {
            ("pruned", "removed")
        };
        lines.push(format!(
            "{events} {} event(s) older than {} days of finished tasks",
            report.events_pruned, config.gc.event_retention_days
        ));
        for log in &report.logs_removed {
            lines.push(format!(
                "{logs} worker log {}",
                line(&log.display().to_string())
            ));
        }
        lines.join("\n")
    })
}
