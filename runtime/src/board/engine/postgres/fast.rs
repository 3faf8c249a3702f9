//! The hot transitions of a PostgreSQL board in one statement each: a claim, a heartbeat and a
//! completion in their common, successful case, as a single data-modifying `WITH` statement
//! sent with the transaction's `BEGIN` and, for a transition of its own, with its `COMMIT`: one
//! round trip to the server instead of one per statement of the generic code (`claim.rs`,
//! `heartbeat.rs`, `complete.rs`, which run unchanged on SQLite, where a statement costs no
//! round trip).
//!
//! docs/postgres.md ("The one-statement fast paths") has the details.

use std::sync::OnceLock;

use crate::board::error::{BoardError, Result};
use crate::board::events::Event;
use crate::board::input::{
    COMPLETE_LEAKED_NOTE, ClaimOrigin, ClaimSpec, Completion, Fence, RECLAIM_ON_CLAIM_NOTE,
    completion_summary, heartbeat_event, summary_line,
};
use crate::board::model::Status;
use crate::board::outcome::{Claimed, Completed, Heartbeated};
use crate::db::Tx;
use crate::db::{self, POSTGRES_CHANGED_MARK as CHANGED};

/// A placeholder run id, encoded into an event's payload and then cut out (see
/// [`split_payload`]); no real run has it.
const RUN_ID_SLOT: i64 = i64::MIN;

/// A placeholder length, as [`RUN_ID_SLOT`]; no text is that long.
const LEN_SLOT: usize = usize::MAX;

/// The text of `event`, encoded with a placeholder (`slot`, as JSON) as the value of its field
/// `field`, split around that value: the server joins the two halves with the real value,
/// giving the bytes [`Event::encode`] gives once that value is known.
fn split_payload(event: &Event, field: &str, slot: &str) -> Result<(String, String)> {
    let (_, payload) = event.encode()?;
    let payload = payload.unwrap_or_default();
    let key = format!("\"{field}\":");
    let marked = format!("{key}{slot}");
    let mut halves = payload.split(&marked);
    match (halves.next(), halves.next(), halves.next()) {
        (Some(head), Some(tail), None) => Ok((format!("{head}{key}"), tail.to_owned())),
        _ => Err(BoardError::CorruptRow {
            table: "task_events",
            message: format!(
                "the {} payload has no single {field} to fill in",
                event.kind()
            ),
        }),
    }
}

/// The claim of the generic `claim_from_in` in one statement (see the module docs).
fn claim_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "WITH task AS ( \
               SELECT id, assignee, max_runtime_seconds FROM tasks \
               WHERE id = $1 AND status = $2 AND claim_lock IS NULL \
                 AND NOT EXISTS (SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id \
                                 WHERE l.child_id = $1 AND p.status NOT IN ('done', 'archived')) \
               FOR UPDATE SKIP LOCKED), \
             leaked AS ( \
               UPDATE task_runs SET status = 'reclaimed', outcome = 'reclaimed', error = $6, \
                 ended_at = $5 \
               WHERE task_id IN (SELECT id FROM task) AND ended_at IS NULL), \
             run AS ( \
               INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, \
                 max_runtime_seconds, last_heartbeat_at, started_at) \
               SELECT id, assignee, 'running', $3, $4, max_runtime_seconds, $5, $5 FROM task \
               RETURNING id, task_id), \
             claimed AS ( \
               UPDATE tasks SET status = 'running', claim_lock = $3, claim_expires = $4, \
                 started_at = COALESCE(tasks.started_at, $5), last_heartbeat_at = $5, \
                 worker_pid = NULL, worker_started_at = NULL, current_run_id = run.id \
               FROM run WHERE tasks.id = run.task_id \
               RETURNING run.id), \
             event AS ( \
               INSERT INTO task_events (task_id, run_id, kind, payload, created_at) \
               SELECT $1, id, 'claimed', $7 || id || $8, $5 FROM claimed) \
             SELECT id, {CHANGED} FROM claimed"
        )
    })
}

/// Claims `id` from the `source` lane (`ready` or `review`) in one statement when nothing
/// stands in the way; with `commit`, the open transaction is committed in the same round trip
/// (a claim of its own). `None` when the statement claimed nothing (the caller then runs the
/// generic claim, which says why) and always on SQLite.
pub(crate) fn claim(
    tx: &Tx<'_>,
    id: &str,
    source: Status,
    spec: &ClaimSpec,
    now: i64,
    commit: bool,
) -> Result<Option<Claimed>> {
    if tx.is_sqlite() {
        return Ok(None);
    }
    let expires = now + spec.ttl_seconds;
    let (head, tail) = split_payload(
        &Event::Claimed {
            lock: spec.lock.clone(),
            expires,
            run_id: RUN_ID_SLOT,
            source_status: (source == Status::Review).then_some(Status::Review),
            dispatcher: spec.origin == ClaimOrigin::Dispatcher,
        },
        "run_id",
        &RUN_ID_SLOT.to_string(),
    )?;
    let rows = tx.pg_query_changing(
        claim_sql(),
        db::params![
            id,
            source.as_str(),
            spec.lock,
            expires,
            now,
            RECLAIM_ON_CLAIM_NOTE,
            head,
            tail
        ],
        commit,
        |r| r.get::<_, i64>(0),
    )?;
    Ok(rows
        .and_then(|ids| ids.first().copied())
        .map(|run_id| Claimed {
            task_id: id.to_owned(),
            run_id,
            claim_lock: spec.lock.clone(),
            claim_expires: expires,
        }))
}

/// The heartbeat of the generic `heartbeat_in` in one statement (see the module docs).
fn heartbeat_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "WITH beat AS ( \
               UPDATE tasks SET claim_expires = $2, last_heartbeat_at = $3 \
               WHERE id = $1 AND status = 'running' \
                 AND ($4::bigint IS NULL OR current_run_id = $4::bigint) \
                 AND ($5::text IS NULL OR claim_lock = $5::text) \
               RETURNING current_run_id), \
             run AS ( \
               UPDATE task_runs SET claim_expires = $2, last_heartbeat_at = $3 \
               WHERE id IN (SELECT current_run_id FROM beat) AND ended_at IS NULL), \
             event AS ( \
               INSERT INTO task_events (task_id, run_id, kind, payload, created_at) \
               SELECT $1, current_run_id, 'heartbeat', $6::text, $3 FROM beat) \
             SELECT current_run_id, {CHANGED} FROM beat"
        )
    })
}

/// The heartbeat of `id` under `fence` in one statement, committed in the same round trip
/// with `commit`; `None` when it did nothing (a refusal: the caller runs the generic
/// heartbeat, which says which) and always on SQLite.
pub(crate) fn heartbeat(
    tx: &Tx<'_>,
    id: &str,
    fence: &Fence,
    note: Option<&str>,
    ttl_seconds: i64,
    now: i64,
    commit: bool,
) -> Result<Option<Heartbeated>> {
    if tx.is_sqlite() {
        return Ok(None);
    }
    let expires = now + ttl_seconds;
    let (_, payload) = heartbeat_event(note).encode()?;
    let rows = tx.pg_query_changing(
        heartbeat_sql(),
        db::params![id, expires, now, fence.run_id, fence.claim_lock, payload],
        commit,
        |r| r.get::<_, Option<i64>>(0),
    )?;
    Ok(rows
        .and_then(|runs| runs.first().copied())
        .map(|run_id| Heartbeated {
            task_id: id.to_owned(),
            run_id,
            claim_expires: expires,
        }))
}

/// The completion of the generic `complete_in` in one statement, for a running task whose
/// current run is the caller's (`$4`, the worker's own run) and still open, with no parent
/// unfinished and no child waiting in `todo` (see the module docs). The task's row is not read
/// before it is updated: the caller names its run, and every other write of a running task
/// holds the board's write lock, as this one does.
fn complete_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "WITH done AS ( \
               UPDATE tasks SET status = 'done', result = COALESCE($2, tasks.result), \
                 completed_at = $3, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, \
                 worker_started_at = NULL, current_run_id = NULL, block_kind = NULL, \
                 block_recurrences = 0, consecutive_failures = 0, last_failure_error = NULL \
               WHERE id = $1 AND status = 'running' AND current_run_id = $4 \
                 AND (completion_contract IS NULL OR completion_contract IN ('', 'local-only')) \
                 AND NOT EXISTS (SELECT 1 FROM task_links l JOIN tasks p ON p.id = l.parent_id \
                                 WHERE l.child_id = $1 AND p.status NOT IN ('done', 'archived')) \
                 AND NOT EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id \
                                 WHERE l.parent_id = $1 AND c.status = 'todo') \
                 AND EXISTS (SELECT 1 FROM task_runs r WHERE r.id = $4 AND r.ended_at IS NULL) \
               RETURNING COALESCE($5::bigint, octet_length(tasks.result), 0) AS result_len), \
             closed AS ( \
               UPDATE task_runs SET status = 'done', outcome = 'completed', \
                 summary = COALESCE($6, summary), ended_at = $3 \
               WHERE id = $4 AND ended_at IS NULL AND EXISTS (SELECT 1 FROM done)), \
             leaked AS ( \
               UPDATE task_runs SET status = 'reclaimed', outcome = 'reclaimed', error = $7, \
                 ended_at = $3 \
               WHERE task_id = $1 AND ended_at IS NULL AND id <> $4 \
                 AND EXISTS (SELECT 1 FROM done)), \
             event AS ( \
               INSERT INTO task_events (task_id, run_id, kind, payload, created_at) \
               SELECT $1, $4, 'completed', $8::text || result_len || $9::text, $3 FROM done) \
             SELECT result_len, {CHANGED} FROM done"
        )
    })
}

/// The completion of `id` in one statement, committed in the same round trip with `commit`;
/// `None` when it did nothing (the caller runs the generic completion, which refuses, promotes
/// children or records an attempt as the case needs) and always on SQLite.
pub(crate) fn complete(
    tx: &Tx<'_>,
    id: &str,
    completion: &Completion,
    now: i64,
    commit: bool,
) -> Result<Option<Completed>> {
    // The fast statement completes the caller's own run; an operator's completion without
    // one (forced or not) takes the generic path.
    let Some(run_id) = completion.expected_run_id else {
        return Ok(None);
    };
    if completion.needs_generic_path(id) {
        return Ok(None);
    }
    if tx.is_sqlite() {
        return Ok(None);
    }
    let run_summary = completion_summary(completion);
    let (head, tail) = split_payload(
        &Event::Completed {
            result_len: LEN_SLOT,
            summary: run_summary.map(summary_line),
            verified_cards: None,
            forced: completion.force.then_some(true),
            evidence: None,
        },
        "result_len",
        &LEN_SLOT.to_string(),
    )?;
    let result_len = completion
        .result
        .as_deref()
        .map(|r| i64::try_from(r.len()).unwrap_or(i64::MAX));
    let rows = tx.pg_query_changing(
        complete_sql(),
        db::params![
            id,
            completion.result,
            now,
            run_id,
            result_len,
            run_summary,
            COMPLETE_LEAKED_NOTE,
            head,
            tail
        ],
        commit,
        |r| r.get::<_, i64>(0),
    )?;
    Ok(rows.filter(|done| !done.is_empty()).map(|_| Completed {
        task_id: id.to_owned(),
        run_id: Some(run_id),
        promoted: Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::StorageError;
    use crate::board::testing::{create, spec, sqlite_board, status};

    #[test]
    fn sqlite_has_no_fast_path() {
        let (_dir, b) = sqlite_board();
        let id = create(&b, "t");
        b.write_row_locked(|tx| {
            assert_eq!(
                claim(tx, &id, Status::Ready, &spec("h:1"), 100, true)?,
                None
            );
            Ok(())
        })
        .unwrap();
        assert_eq!(status(&b, &id), Status::Ready, "nothing was claimed");
    }

    /// The retry half of `a_create_whose_drawn_id_is_taken_draws_again` (`tests/pg_engine.rs`,
    /// which needs the server for the taken id itself); the retry does not depend on the engine.
    #[test]
    fn a_taken_id_is_drawn_again_eight_times_at_most() {
        let (_dir, b) = sqlite_board();
        // `create_task` draws again while the id is taken, eight draws at most, and passes any
        // other failure through at once.
        let mut draws = 0;
        let r: Result<()> = b.retry_taken_id(|| {
            draws += 1;
            Err(taken_error())
        });
        assert!(r.is_err());
        assert_eq!(draws, 8);
        let mut draws = 0;
        let r: Result<()> = b.retry_taken_id(|| {
            draws += 1;
            if draws < 3 {
                Err(taken_error())
            } else {
                Ok(())
            }
        });
        assert!(r.is_ok());
        assert_eq!(draws, 3);
        let mut draws = 0;
        let r: Result<()> = b.retry_taken_id(|| {
            draws += 1;
            Err(BoardError::BlankTitle)
        });
        assert!(matches!(r, Err(BoardError::BlankTitle)));
        assert_eq!(draws, 1);
    }

    /// The error of a create whose id was taken, as the server reports it.
    fn taken_error() -> BoardError {
        BoardError::Storage(StorageError::Sql(db::Error::Queued(
            kanban_pgwire::Error::Db(Box::new(kanban_pgwire::DbError {
                code: "23505".into(),
                constraint: Some("tasks_pkey".into()),
                ..kanban_pgwire::DbError::default()
            })),
        )))
    }

    #[test]
    fn a_payload_splits_around_its_run_id_and_joins_back_to_the_encoded_bytes() {
        for (lock, source_status) in [
            ("host:1", None),
            ("we\"ird \\ \"run_id\":1 lock", Some(Status::Review)),
        ] {
            let event = |run_id| Event::Claimed {
                lock: lock.to_owned(),
                expires: 900,
                run_id,
                source_status,
                dispatcher: true,
            };
            let (head, tail) =
                split_payload(&event(RUN_ID_SLOT), "run_id", &RUN_ID_SLOT.to_string()).unwrap();
            let joined = format!("{head}{}{tail}", 42);
            assert_eq!(Some(joined), event(42).encode().unwrap().1);
        }
    }

    #[test]
    fn an_event_without_a_run_id_cannot_be_split() {
        let err = split_payload(
            &Event::Heartbeat {
                note: Some("n".into()),
            },
            "run_id",
            &RUN_ID_SLOT.to_string(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("no single run_id"), "{err}");
    }
}
