//! A SQLite board's completion in its common, successful case in four statements instead of the
//! generic transition's eight: the PostgreSQL one-statement completion
//! (`engine::postgres::fast`) split into the statements SQLite can run, since SQLite has no
//! data-modifying `WITH`. The task's row is changed by one `UPDATE` whose conditions are the
//! generic transition's checks (its run is the caller's and open, no parent unfinished, no
//! child waiting in `todo`, the local-only contract); when it changes nothing the generic
//! transition runs in the same transaction and says why, or handles what this path does not.
//!
//! Nothing is read before the write: the task's whole row, the parent gate and the children
//! to promote are the generic path's three reads, and a completion is a worker's last write.
//! docs/board.md ("The SQLite completion's fast path") has the details.

use crate::board::error::Result;
use crate::board::events::{Event, append_event};
use crate::board::input::{COMPLETE_LEAKED_NOTE, Completion, completion_summary, summary_line};
use crate::board::outcome::Completed;
use crate::db::{Tx, params};

/// The task's row `done`, on the conditions the generic `complete_in` checks first.
pub(crate) const DONE: &str = "UPDATE tasks SET status = 'done', result = COALESCE(?2, result), \
     completed_at = ?3, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, \
     worker_started_at = NULL, current_run_id = NULL, block_kind = NULL, \
     block_recurrences = 0, consecutive_failures = 0, last_failure_error = NULL \
     WHERE id = ?1 AND status = 'running' AND current_run_id = ?4 \
       AND (completion_contract IS NULL OR completion_contract IN ('', 'local-only')) \
       AND NOT EXISTS (SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id \
                       WHERE l.child_id = ?1 AND p.status NOT IN ('done', 'archived')) \
       AND NOT EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id \
                       WHERE l.parent_id = ?1 AND c.status = 'todo') \
       AND EXISTS (SELECT 1 FROM task_runs r WHERE r.id = ?4 AND r.ended_at IS NULL)";

/// The caller's run closed as the generic `close_run_in` closes it for a completion.
const CLOSED: &str = "UPDATE task_runs SET status = 'done', outcome = 'completed', \
     summary = COALESCE(?2, summary), ended_at = ?3 WHERE id = ?1 AND ended_at IS NULL";

/// Any other run of the task left open, closed as the generic `close_leaked_runs` does.
const LEAKED: &str = "UPDATE task_runs SET status = 'reclaimed', outcome = 'reclaimed', \
     error = ?2, ended_at = ?3 WHERE task_id = ?1 AND ended_at IS NULL AND id <> ?4";

/// Completes `id` for the caller's own run when nothing stands in the way (see the module
/// docs); `None` when the task's row was not changed (the caller then runs the generic
/// completion in the same transaction) and always on PostgreSQL, whose fast path is one
/// statement.
pub(crate) fn complete(
    tx: &Tx<'_>,
    id: &str,
    completion: &Completion,
    now: i64,
) -> Result<Option<Completed>> {
    if !tx.is_sqlite() || completion.needs_generic_path(id) {
        return Ok(None);
    }
    let Some(run_id) = completion.expected_run_id else {
        return Ok(None);
    };
    if tx
        .prepare_cached(DONE)?
        .execute(params![id, completion.result, now, run_id])?
        == 0
    {
        return Ok(None);
    }
    // The length of the stored result, as the `completed` event says it: the completion's, or
    // the one the task already had (read only then).
    let result_len = match &completion.result {
        Some(result) => result.len(),
        None => tx
            .prepare_cached(
                "SELECT COALESCE(length(CAST(result AS BLOB)), 0) FROM tasks WHERE id = ?1",
            )?
            .query_row([id], |r| r.get::<_, i64>(0))
            .map(|len| usize::try_from(len).unwrap_or_default())?,
    };
    let run_summary = completion_summary(completion);
    tx.prepare_cached(CLOSED)?
        .execute(params![run_id, run_summary, now])?;
    tx.prepare_cached(LEAKED)?
        .execute(params![id, COMPLETE_LEAKED_NOTE, now, run_id])?;
    append_event(
        tx,
        id,
        Some(run_id),
        &Event::Completed {
            result_len,
            summary: run_summary.map(summary_line),
            verified_cards: None,
            forced: completion.force.then_some(true),
            evidence: None,
        },
        now,
    )?;
    Ok(Some(Completed {
        task_id: id.to_owned(),
        run_id: Some(run_id),
        promoted: Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::Board;
    use crate::board::model::Status;
    use crate::board::testing::{child_of, claim, create, sqlite_board, status};

    fn own_run(run_id: i64) -> Completion {
        Completion {
            expected_run_id: Some(run_id),
            summary: Some("done".to_owned()),
            ..Completion::default()
        }
    }

    fn fast(b: &Board, id: &str, completion: &Completion) -> Option<Completed> {
        b.write(|tx| complete(tx, id, completion, 200)).unwrap()
    }

    #[test]
    fn a_claimed_task_is_completed_by_the_fast_path() {
        let (_dir, b) = sqlite_board();
        let id = create(&b, "t");
        let run = claim(&b, &id).run_id;
        // Its own id in the summary needs no check (its row exists).
        let mut own = own_run(run);
        own.summary = Some(format!("{id}: done"));
        let done = fast(&b, &id, &own).expect("the fast path completes it");
        assert_eq!(done.run_id, Some(run));
        assert_eq!(status(&b, &id), Status::Done);
    }

    #[test]
    fn what_the_fast_path_leaves_to_the_generic_one_is_left_unwritten() {
        let (_dir, b) = sqlite_board();
        // Another run than the task's.
        let id = create(&b, "t");
        let run = claim(&b, &id).run_id;
        assert!(fast(&b, &id, &own_run(run + 100)).is_none());
        // A child waiting in `todo` (the generic path promotes it).
        let parent = create(&b, "parent");
        let child = child_of(&b, "child", &[&parent]);
        let parent_run = claim(&b, &parent).run_id;
        assert!(fast(&b, &parent, &own_run(parent_run)).is_none());
        // Task-like ids in the prose (the generic path checks them).
        let mut mentions = own_run(run);
        mentions.summary = Some(format!("see {child}"));
        assert!(fast(&b, &id, &mentions).is_none());
        // None of them was written.
        assert_eq!(status(&b, &id), Status::Running);
        assert_eq!(status(&b, &parent), Status::Running);
        assert_eq!(status(&b, &child), Status::Todo);
    }
}
