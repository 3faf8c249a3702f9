//! `kanban review request|changes|reopen`: the review lane's transitions (parse, call
//! [`crate::board`], print). `request` and `changes` are lifecycle commands: inside a worker they
//! default to its task and pass its run id, so a superseded worker cannot hand over its
//! successor's run; `reopen` is an operator's.

use super::session::{authorize, done, lifecycle, now, open, print_out};
use super::{CmdResult, Globals};

#[derive(Debug, clap::Subcommand)]
pub enum ReviewCommand {
    /// Hand a running or ready task to review (→ review; the review lane dispatches its
    /// reviewer). The run ends with outcome review_requested.
    Request {
        /// Task id (default: this worker's task).
        id: Option<String>,
        /// Profile that reviews (becomes the assignee; default: the current assignee).
        #[arg(long, value_name = "PROFILE")]
        reviewer: Option<String>,
        #[arg(long)]
        summary: Option<String>,
        /// The structured handoff, a JSON object (stored on the closing run; secrets redacted,
        /// as in the summary).
        #[arg(long, value_name = "JSON", value_parser = super::session::parse_metadata)]
        metadata: Option<super::session::JsonObject>,
        /// Hand over even while another live claim holds the task (operator).
        #[arg(long)]
        force: bool,
    },
    /// As the reviewer (a run claimed from review): send the task back to its implementer
    /// (→ ready, or todo while a parent is unfinished; failures kept).
    Changes {
        /// Task id (default: this worker's task).
        id: Option<String>,
        #[arg(long)]
        reason: String,
    },
    /// Take an unclaimed review task back to its implementer (operator).
    Reopen { id: String },
}

pub fn run(command: ReviewCommand, globals: &Globals) -> CmdResult {
    match command {
        ReviewCommand::Request {
            id,
            reviewer,
            summary,
            metadata,
            force,
        } => request(
            id.as_deref(),
            reviewer.as_deref(),
            (summary.as_deref(), metadata.as_ref()),
            force,
            globals,
        ),
        ReviewCommand::Changes { id, reason } => changes(id.as_deref(), &reason, globals),
        ReviewCommand::Reopen { id } => reopen(&id, globals),
    }
}

/// `kanban review request [ID]`.
fn request(
    id: Option<&str>,
    reviewer: Option<&str>,
    (summary, metadata): (Option<&str>, Option<&super::session::JsonObject>),
    force: bool,
    globals: &Globals,
) -> CmdResult {
    let target = match lifecycle(id)? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let o = open(globals)?;
    let r = done(o.board.request_review_with(
        &target.task_id,
        target.expected_run_id,
        reviewer,
        summary,
        metadata,
        force,
        now(),
    )?)?;
    print_out(globals.json, &r, || {
        format!(
            "{} is in review (reviewer {})",
            r.task_id,
            r.reviewer.as_deref().unwrap_or("-")
        )
    })
}

/// `kanban review changes [ID] --reason TEXT`.
fn changes(id: Option<&str>, reason: &str, globals: &Globals) -> CmdResult {
    let target = match lifecycle(id)? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let o = open(globals)?;
    let b =
        done(
            o.board
                .request_changes(&target.task_id, target.expected_run_id, reason, now())?,
        )?;
    print_out(globals.json, &b, || {
        format!(
            "changes requested on {}; now {} for {}",
            b.task_id,
            b.status,
            b.assignee.as_deref().unwrap_or("-")
        )
    })
}

/// `kanban review reopen ID`.
fn reopen(id: &str, globals: &Globals) -> CmdResult {
    authorize(id)?;
    let o = open(globals)?;
    let b = done(o.board.review_reopen(id, now())?)?;
    print_out(globals.json, &b, || {
        format!(
            "{} left review; now {} for {}",
            b.task_id,
            b.status,
            b.assignee.as_deref().unwrap_or("-")
        )
    })
}
