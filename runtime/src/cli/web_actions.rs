//! The web board's writes (`kanban serve` without `--read-only`): each [`kanban_web::Action`] is
//! carried out with the same library call as its CLI command, on a board opened for writing per
//! action, and recorded with the actor [`WEB_ACTOR`] in its event (a comment's author, an
//! attachment's uploader, a creation's `created_by`, a promotion's, block's, reclaim's, archive's,
//! unblock's or schedule's `actor`, an assignment's `source`, a decomposition's author). The
//! checks in front (token, Host, Origin, CSRF, body size) are `kanban-web`'s; a refusal here is a
//! typed [`ActionError`] and, like every transition's refusal, changes nothing.

use std::path::Path;

use kanban_web::{Action, ActionDone, ActionError};

use crate::board::{
    Board, BoardError, Decomposition, NewTask, OpenOptions, Outcome, Promotion, StorageError,
};
use crate::db::target::BoardLocation;
use crate::home as paths;

/// Who the web board's writes are recorded as.
pub const WEB_ACTOR: &str = "web";

/// A board error as the web answers it: an unknown task is 404, the store's failures are 500,
/// anything else is the input's fault (400).
fn web_refusal(err: &BoardError) -> ActionError {
    let text = crate::error_chain(err);
    match err {
        BoardError::TaskNotFound { .. } => ActionError::NotFound(text),
        BoardError::Storage(_) => ActionError::Failed(text),
        _ => ActionError::Invalid(text),
    }
}

/// A transition's outcome: done, or the board's refusal (409).
fn web_outcome<T>(outcome: Result<Outcome<T>, BoardError>) -> Result<T, ActionError> {
    match outcome.map_err(|e| web_refusal(&e))? {
        Outcome::Done(value) => Ok(value),
        Outcome::Refused(r) => Err(ActionError::Refused(r.to_string())),
    }
}

/// Carries out `action` on the board at `location` of home `root`, at time `now`.
pub fn apply_web_action(
    root: &Path,
    location: &BoardLocation,
    action: &Action,
    now: i64,
) -> Result<ActionDone, ActionError> {
    let board = Board::open(location, &OpenOptions::default()).map_err(|e| match e {
        BoardError::Storage(StorageError::ReadOnly { .. }) => ActionError::Failed(format!(
            "board {} cannot be written by this server: {e}",
            location.slug
        )),
        other => web_refusal(&other),
    })?;
    let id = match action.task_id() {
        Some(given) => board.resolve_task_id(given).map_err(|e| web_refusal(&e))?,
        None => String::new(),
    };
    let message = match action {
        Action::Create {
            title,
            body,
            assignee,
            priority,
            triage,
        } => return create_from_form(&board, title, body, assignee, *priority, *triage, now),
        Action::Attach { filename, data, .. } => {
            attach_upload(root, location, &board, &id, filename, data, now)?
        }
        Action::Decompose {
            children,
            root_assignee,
            promote,
            ..
        } => decompose_from_form(
            &board,
            &id,
            children,
            root_assignee.as_deref(),
            *promote,
            now,
        )?,
        other => web_transition(&board, &id, other, now)?,
    };
    Ok(ActionDone {
        task_id: id,
        message,
    })
}

/// `kanban create`, created by the web.
fn create_from_form(
    board: &Board,
    title: &str,
    body: &Option<String>,
    assignee: &Option<String>,
    priority: i64,
    triage: bool,
    now: i64,
) -> Result<ActionDone, ActionError> {
    let new = NewTask {
        title: title.to_owned(),
        body: body.clone(),
        assignee: assignee.clone(),
        priority,
        triage,
        created_by: Some(WEB_ACTOR.to_owned()),
        ..NewTask::default()
    };
    let created = board.create_task(&new, now).map_err(|e| web_refusal(&e))?;
    Ok(ActionDone {
        message: format!("created {}", created.id),
        task_id: created.id,
    })
}

/// The one-task transitions: promote, unblock, block, archive, reopen, schedule, reassign,
/// reclaim, comment.
fn web_transition(
    board: &Board,
    id: &str,
    action: &Action,
    now: i64,
) -> Result<String, ActionError> {
    Ok(match action {
        Action::Promote { .. } => {
            let promotion = Promotion {
                actor: Some(WEB_ACTOR),
                reason: None,
                force: false,
            };
            let m = web_outcome(board.promote_with(id, &promotion, now))?;
            format!("{} is now {}", m.task_id, m.to)
        }
        Action::Unblock { reason, .. } => {
            let m = web_outcome(board.unblock_by(id, reason.as_deref(), WEB_ACTOR, now))?;
            format!("{} is now {}", m.task_id, m.to)
        }
        Action::Block { reason, .. } => {
            let b = web_outcome(board.block_by(id, reason, WEB_ACTOR, now))?;
            format!("{} is now {}", b.task_id, b.status)
        }
        Action::Archive { .. } => {
            let a = web_outcome(board.archive_by(id, WEB_ACTOR, now))?;
            format!("archived {} (was {})", a.task_id, a.prev_status)
        }
        Action::Reopen { reason, .. } => {
            let r = web_outcome(board.reopen_by(id, reason.as_deref(), WEB_ACTOR, now))?;
            format!("reopened {}; now {}", r.task_id, r.status)
        }
        Action::Schedule { when, reason, .. } => {
            let at = schedule_time(when, now)?;
            let s =
                web_outcome(board.schedule_by(id, Some(at), reason.as_deref(), WEB_ACTOR, now))?;
            format!("scheduled {} (was {})", s.task_id, s.from)
        }
        Action::Reassign {
            profile, reclaim, ..
        } => {
            let r = web_outcome(board.reassign_by(id, profile, *reclaim, WEB_ACTOR, now))?;
            format!(
                "{} reassigned to {}",
                r.task_id,
                r.to.as_deref().unwrap_or("nobody")
            )
        }
        Action::Reclaim { reason, .. } => {
            let r = web_outcome(board.reclaim_by(id, reason.as_deref(), WEB_ACTOR, now))?;
            format!("reclaimed {}; now {}", r.task_id, r.retry_status)
        }
        Action::Comment { body, .. } => {
            board
                .comment(id, WEB_ACTOR, body, now)
                .map_err(|e| web_refusal(&e))?;
            format!("commented on {id}")
        }
        Action::Create { .. } | Action::Attach { .. } | Action::Decompose { .. } => {
            return Err(ActionError::Invalid(format!(
                "{} is not a one-task transition",
                action.verb()
            )));
        }
    })
}

/// The time of a schedule form's `when`: a duration from now (`30m`, `2h`, seconds) or a time,
/// read with `kanban schedule`'s parsers.
fn schedule_time(when: &str, now: i64) -> Result<i64, ActionError> {
    if let Ok(seconds) = crate::cli::session::parse_seconds(when) {
        if seconds <= 0 {
            return Err(ActionError::Invalid(
                "the delay must be a positive duration (90s, 30m, 2h, 1d)".to_owned(),
            ));
        }
        return Ok(now + seconds);
    }
    crate::cli::session::parse_time(when).map_err(|e| {
        ActionError::Invalid(format!(
            "{when:?} is neither a duration (90s, 30m, 2h, 1d) nor a time: {e}"
        ))
    })
}

/// `kanban attach ID FILE`, uploaded by the web.
fn attach_upload(
    root: &Path,
    location: &BoardLocation,
    board: &Board,
    id: &str,
    filename: &str,
    data: &[u8],
    now: i64,
) -> Result<String, ActionError> {
    let dir = paths::attachments_dir(root, &location.slug, id);
    let content_type = crate::board::attachments::guess_content_type(filename);
    let stored = board
        .store_attachment(id, &dir, filename, data, content_type, Some(WEB_ACTOR), now)
        .map_err(|e| ActionError::Invalid(e.to_string()))?;
    Ok(format!(
        "attached {} ({} bytes) to {id}",
        stored.filename, stored.size
    ))
}

/// `kanban decompose ID --children JSON`, by the web.
fn decompose_from_form(
    board: &Board,
    id: &str,
    children: &str,
    root_assignee: Option<&str>,
    promote: bool,
    now: i64,
) -> Result<String, ActionError> {
    let children = crate::triage::parse_children(children)
        .map_err(|e| ActionError::Invalid(format!("{e}; nothing was changed")))?;
    let how = Decomposition {
        root_assignee,
        promote,
        author: Some(WEB_ACTOR),
    };
    let d = web_outcome(board.decompose(id, &children, &how, now))?;
    Ok(format!(
        "decomposed {} into {} children",
        d.task_id,
        d.child_ids.len()
    ))
}
