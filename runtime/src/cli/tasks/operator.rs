//! `kanban edit|unblock|archive|reopen|reclaim|assign|link|unlink|promote`: an operator's changes
//! to tasks. The commands taking several ids run each on its own ([`each`]); `link` and `unlink`
//! change the child, so the child is the task whose ownership is checked.

use std::path::PathBuf;

use crate::board::{Edit, Promotion};
use crate::cli::escape::line;
use crate::cli::session::{authorize, done, each, now, open, print_out, read_body, root};
use crate::cli::{CmdResult, Globals};

/// `kanban edit ID`: the fields to change (at least one).
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// Task id (or a unique prefix of it).
    pub id: String,
    #[arg(long)]
    pub title: Option<String>,
    /// The new body; `-` reads it from standard input.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the new body from this file.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    #[arg(long, allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// Consecutive failures before the task is blocked (1-1000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub max_retries: Option<i64>,
    /// A new workspace, only while the task has never run (the flags of `kanban create`).
    #[command(flatten)]
    pub workspace: crate::cli::tasks::create::WorkspaceArgs,
    /// A done task's result (its newest completed run's summary becomes `--summary`, else this).
    #[arg(long)]
    pub result: Option<String>,
    /// Remove the task's skills (not while it runs).
    #[arg(long, conflicts_with_all = ["result", "summary", "metadata"])]
    pub clear_skills: bool,
    /// With `--result`: the handoff summary of the done task's newest completed run.
    #[arg(long, requires = "result")]
    pub summary: Option<String>,
    /// With `--result`: that run's metadata, a JSON object.
    #[arg(long, requires = "result", value_name = "JSON", value_parser = crate::cli::session::parse_metadata)]
    pub metadata: Option<crate::cli::session::JsonObject>,
}

/// `kanban edit ID …`.
pub(in crate::cli) fn edit(args: EditArgs, globals: &Globals) -> CmdResult {
    authorize(&args.id)?;
    let body = read_body(args.body, args.body_file.as_deref())?;
    let o = open(globals)?;
    let current = o.board.get_task(&o.board.resolve_task_id(&args.id)?)?;
    if let Some(result) = &args.result {
        // A done task's result: its own transition and `edited` event (the original's
        // `edit_completed_task_result`); any other field given is edited after it.
        let e = done(o.board.edit_completed(
            &args.id,
            result,
            args.summary.as_deref(),
            args.metadata.as_ref(),
            now(),
        )?)?;
        let more = args.title.is_some()
            || body.is_some()
            || args.priority.is_some()
            || args.max_retries.is_some();
        if !more {
            return print_out(globals.json, &e, || {
                format!("edited {}: {}", e.task_id, e.fields.join(", "))
            });
        }
    }
    let change = Edit {
        title: args.title,
        body,
        priority: args.priority,
        max_retries: args.max_retries,
        workspace: args.workspace.spec(Some(&current))?,
        clear_skills: args.clear_skills,
    };
    let e = done(o.board.edit(&args.id, &change, now())?)?;
    print_out(globals.json, &e, || {
        if e.fields.is_empty() {
            format!("{}: nothing changed", e.task_id)
        } else {
            format!("edited {}: {}", e.task_id, e.fields.join(", "))
        }
    })
}

/// `kanban unblock ID… [--reason R]` (the reason is left as a comment on each task).
pub(in crate::cli) fn unblock(
    ids: &[String],
    reason: Option<&str>,
    globals: &Globals,
) -> CmdResult {
    each(ids, globals, |id| {
        authorize(id)?;
        let o = open(globals)?;
        let m = done(o.board.unblock_with_reason(id, reason, now())?)?;
        print_out(globals.json, &m, || {
            format!("{} is now {}", m.task_id, m.to)
        })
    })
}

/// "; its worker pid P (on HOST) may still be running" for a worker the transition did not signal,
/// else nothing.
fn may_still_run(worker_pid: Option<i64>, claim_lock: Option<&str>) -> String {
    worker_pid
        .map(|pid| {
            format!(
                "; its worker pid {pid}{} may still be running",
                on_host(claim_lock)
            )
        })
        .unwrap_or_default()
}

/// `kanban archive ID…`.
pub(in crate::cli) fn archive(ids: &[String], globals: &Globals) -> CmdResult {
    each(ids, globals, |id| {
        authorize(id)?;
        let o = open(globals)?;
        let a = done(o.board.archive(id, now())?)?;
        crate::cli::tasks::workspace::after_finish(&o, globals, &a.task_id);
        print_out(globals.json, &a, || {
            let mut line = format!("archived {} (was {})", a.task_id, a.prev_status);
            line.push_str(&may_still_run(a.worker_pid, a.claim_lock.as_deref()));
            line
        })
    })
}

/// `kanban reopen ID`: lists every task the reopening sent back to todo.
pub(in crate::cli) fn reopen(id: &str, reason: Option<&str>, globals: &Globals) -> CmdResult {
    authorize(id)?;
    let o = open(globals)?;
    let r = done(o.board.reopen(id, reason, now())?)?;
    print_out(globals.json, &r, || {
        let mut line = format!("reopened {}; now {}", r.task_id, r.status);
        for i in &r.invalidated {
            line.push_str(&format!(
                "\n  {} was {}, now todo{}",
                i.task_id,
                i.prior_status,
                i.worker_pid
                    .map(|p| format!(
                        " (its worker pid {p}{} is terminated by its host's dispatcher)",
                        on_host(i.claim_lock.as_deref())
                    ))
                    .unwrap_or_default()
            ));
        }
        line
    })
}

/// `kanban reclaim ID…`.
pub(in crate::cli) fn reclaim(
    ids: &[String],
    reason: Option<&str>,
    globals: &Globals,
) -> CmdResult {
    each(ids, globals, |id| {
        authorize(id)?;
        let o = open(globals)?;
        let r = done(o.board.reclaim(id, reason, now())?)?;
        print_out(globals.json, &r, || {
            let mut line = format!("reclaimed {}; now {}", r.task_id, r.retry_status);
            line.push_str(&may_still_run(r.worker_pid, r.prev_lock.as_deref()));
            line
        })
    })
}

/// `kanban assign ID PROFILE|--none`.
pub(in crate::cli) fn assign(id: &str, assignee: Option<&str>, globals: &Globals) -> CmdResult {
    authorize(id)?;
    let o = open(globals)?;
    let a = done(o.board.assign(id, assignee, now())?)?;
    print_out(globals.json, &a, || {
        format!(
            "{} assigned to {}",
            a.task_id,
            line(a.to.as_deref().unwrap_or("nobody"))
        )
    })
}

/// `kanban link PARENT CHILD`.
pub(in crate::cli) fn link(parent: &str, child: &str, globals: &Globals) -> CmdResult {
    authorize(child)?;
    let o = open(globals)?;
    let l = done(o.board.link(parent, child, now())?)?;
    print_out(globals.json, &l, || {
        format!("{} depends on {} ({})", l.child, l.parent, l.child_status)
    })
}

/// `kanban unlink PARENT CHILD`.
pub(in crate::cli) fn unlink(parent: &str, child: &str, globals: &Globals) -> CmdResult {
    authorize(child)?;
    let o = open(globals)?;
    let l = done(o.board.unlink(parent, child, now())?)?;
    print_out(globals.json, &l, || {
        format!(
            "{} no longer depends on {} ({})",
            l.child, l.parent, l.child_status
        )
    })
}

/// How `kanban promote` runs: over unfinished parents (`--force`), or only said (`--dry-run`).
#[derive(Debug, Clone, Copy)]
pub(in crate::cli) struct PromoteMode {
    pub(in crate::cli) force: bool,
    pub(in crate::cli) dry_run: bool,
}

/// `kanban promote ID… [--reason R] [--force] [--dry-run]`.
pub(in crate::cli) fn promote(
    ids: &[String],
    reason: Option<&str>,
    mode: PromoteMode,
    globals: &Globals,
) -> CmdResult {
    // The same id twice is promoted once (the original's `promote` de-duplicates its ids).
    let mut unique: Vec<String> = Vec::with_capacity(ids.len());
    for id in ids {
        if !unique.contains(id) {
            unique.push(id.clone());
        }
    }
    each(&unique, globals, |id| {
        authorize(id)?;
        let o = open(globals)?;
        // A board's pre_claim policy is asked first (under the tick lock, held until the
        // promotion is written); a denial refuses it and changes nothing.
        let judged = if mode.dry_run {
            None
        } else {
            crate::dispatch::policy::judge_promotion(&root(globals)?, &o.loc, &o.board, id)?
        };
        if let Some(j) = &judged
            && !j.decision.allow
        {
            anyhow::bail!(
                "{id}: the board's pre_claim policy denies its promotion ({}); nothing changed",
                j.decision.reason
            );
        }
        let outcome = if mode.dry_run {
            o.board.promote_dry_run(id, mode.force)?
        } else {
            let promotion = Promotion {
                actor: Some("operator"),
                reason,
                force: mode.force,
            };
            o.board.promote_with(id, &promotion, now())?
        };
        let m = done(outcome)?;
        print_out(globals.json, &m, || {
            if mode.dry_run {
                format!(
                    "{} would be {} (was {}; nothing changed)",
                    m.task_id, m.to, m.from
                )
            } else {
                format!("{} is now {}", m.task_id, m.to)
            }
        })
    })
}

/// ` on <host>` for a claim lock `"<host>:<pid>"`: a worker pid means something only on the host
/// that claimed it (empty when the lock is missing or has no host part).
fn on_host(lock: Option<&str>) -> String {
    lock.and_then(|l| l.rsplit_once(':'))
        .map(|(host, _)| host)
        .filter(|h| !h.is_empty())
        .map(|h| format!(" on {}", line(h)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::on_host;

    #[test]
    fn a_worker_pid_is_named_with_the_host_of_its_claim() {
        assert_eq!(on_host(Some("host-b:123")), " on host-b");
        assert_eq!(on_host(Some("a.example:org:9")), " on a.example:org");
        assert_eq!(on_host(Some(":9")), "");
        assert_eq!(on_host(Some("no-pid")), "");
        assert_eq!(on_host(None), "");
    }
}
