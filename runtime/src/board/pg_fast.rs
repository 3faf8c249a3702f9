//! The hot transitions of a PostgreSQL board in one statement each: a claim, a heartbeat and a
//! completion in their common, successful case, as a single data-modifying `WITH` statement
//! sent with the transaction's `BEGIN` and, for a transition of its own, with its `COMMIT`: one
//! round trip to the server instead of one per statement of the generic code (`tasks.rs`,
//! which runs unchanged on SQLite, where a statement costs no round trip).
//!
//! **The generic code stays the definition.** Each statement here writes exactly the rows and
//! the event the generic transition writes when it succeeds — the same columns, the same
//! values, the same payload bytes (the event is encoded by the same [`Event`] code; a value
//! only the server knows, a new run's id, is spliced into the encoded text) — and does nothing
//! at all in every other case: a task in another state, a fence that does not hold, a parent
//! not done, a row another transaction holds, children to promote. It then returns no row, and
//! the caller runs the generic transition, which finds that case and gives its outcome (a
//! refusal, a lost claim, a demotion, the promotions) exactly as on SQLite. The differential
//! and conformance tests run every transition on both stores and compare what they wrote.
//!
//! **Locking** is the generic code's: a claim locks its task's row with `FOR UPDATE SKIP
//! LOCKED` and takes no board lock; a heartbeat and a completion run under the board's write
//! lock (taken with the statement, see the SQL layer) and lock the task's row (`FOR UPDATE`).
//!
//! SQLite has no fast path: every function here returns `None` there without a statement.

use std::sync::OnceLock;

use super::error::{BoardError, Result};
use super::events::Event;
use super::model::Status;
use super::outcome::Claimed;
use super::sql::{self, POSTGRES_CHANGED_MARK as CHANGED};
use super::store::Tx;
use super::tasks::ClaimSpec;

/// A placeholder run id, encoded into an event's payload and then cut out (see
/// [`split_payload`]); no real run has it.
const RUN_ID_SLOT: i64 = i64::MIN;

/// The text of `event`, encoded with [`RUN_ID_SLOT`] as its run id, split around that id: the
/// server joins the two halves with the new run's id, giving the bytes [`Event::encode`] gives
/// once that id is known.
fn split_payload(event: &Event) -> Result<(String, String)> {
    let (_, payload) = event.encode()?;
    let payload = payload.unwrap_or_default();
    let slot = format!("\"run_id\":{RUN_ID_SLOT}");
    let mut halves = payload.split(&slot);
    match (halves.next(), halves.next(), halves.next()) {
        (Some(head), Some(tail), None) => Ok((format!("{head}\"run_id\":"), tail.to_owned())),
        _ => Err(BoardError::CorruptRow {
            table: "task_events",
            message: format!("the {} payload has no single run id to fill in", event.kind()),
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
    let (head, tail) = split_payload(&Event::Claimed {
        lock: spec.lock.clone(),
        expires,
        run_id: RUN_ID_SLOT,
        source_status: (source == Status::Review).then_some(Status::Review),
    })?;
    let rows = tx.pg_query_changing(
        claim_sql(),
        sql::params![
            id,
            source.as_str(),
            spec.lock,
            expires,
            now,
            super::tasks::RECLAIM_ON_CLAIM_NOTE,
            head,
            tail
        ],
        commit,
        |r| r.get::<_, i64>(0),
    )?;
    Ok(rows.and_then(|ids| ids.first().copied()).map(|run_id| Claimed {
        task_id: id.to_owned(),
        run_id,
        claim_lock: spec.lock.clone(),
        claim_expires: expires,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            };
            let (head, tail) = split_payload(&event(RUN_ID_SLOT)).unwrap();
            let joined = format!("{head}{}{tail}", 42);
            assert_eq!(Some(joined), event(42).encode().unwrap().1);
        }
    }

    #[test]
    fn an_event_without_a_run_id_cannot_be_split() {
        let err = split_payload(&Event::Heartbeat {
            note: Some("n".into()),
        })
        .unwrap_err();
        assert!(err.to_string().contains("no single run id"), "{err}");
    }
}
