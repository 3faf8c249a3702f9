//! Owner admission's part of a board (README "Owner admission"): the read-only claim proof and the
//! `owner_admitted` / `worker_bound` / `worker_result` markers on the board's events. The owner's
//! own `state.db` is `crate::admission::state`. Nothing here reads the clock or a process.

use crate::db::{Db, OptionalExtension, params};

use super::Result;
use super::events::{Event, append_event};
use super::owner_states::Marker;
use super::store::Board;
use crate::db::Tx;

/// What the board says about a run a `kanban.run` names, read without writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimView {
    pub task_status: String,
    pub current_run_id: Option<i64>,
    pub claim_lock: Option<String>,
    pub assignee: Option<String>,
    /// The run row: (task_id, status, claim_lock), if it exists.
    pub run: Option<(String, String, Option<String>)>,
    /// The latest `owner_admitted` of this run: (session_id, request_id).
    pub marker: Option<(String, String)>,
}

impl ClaimView {
    /// True when the task is running this exact run under this exact lock, on both rows.
    pub fn is_current(&self, task_id: &str, run_id: i64, lock: &str) -> bool {
        self.task_status == "running"
            && self.current_run_id == Some(run_id)
            && self.claim_lock.as_deref() == Some(lock)
            && self.run.as_ref().is_some_and(|(t, status, run_lock)| {
                t == task_id && status == "running" && run_lock.as_deref() == Some(lock)
            })
    }
}

/// A run's turn as its owner records it (see [`Board::owner_turn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerTurn {
    pub status: Option<String>,
    pub owner_pid: Option<i64>,
    pub owner_birth: Option<String>,
}

/// How [`Board::record_bound_worker_result`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundResult {
    /// Appended: the writer is the run's bound worker.
    Recorded,
    /// Not appended: the run's latest `worker_bound` names another worker (or none).
    NotBound { bound_pid: Option<i64> },
}

/// Characters of `last_output` a `worker_result` keeps (as [`Board::record_worker_result`]).
const RESULT_OUTPUT_CHARS: usize = 2000;

/// How the marker transaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerOutcome {
    /// Appended now, the claim re-proved in the same transaction.
    Appended,
    /// This run already carries a marker naming this session (a retry).
    Existing,
    /// A marker for this run names another session.
    Foreign,
    /// No marker and the claim is no longer current.
    Stale,
}

/// The payload of the latest `kind` event of `task`'s run `run`, parsed.
fn latest_event_payload(
    conn: &Db,
    task: &str,
    run: i64,
    kind: &str,
) -> Result<Option<serde_json::Value>> {
    let payload: Option<Option<String>> = conn
        .prepare_cached(
            "SELECT payload FROM task_events WHERE task_id = ?1 AND run_id = ?2 \
             AND kind = ?3 ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![task, run, kind], |r| r.get(0))
        .optional()?;
    let Some(Some(payload)) = payload else {
        return Ok(None);
    };
    Ok(Some(serde_json::from_str(&payload)?))
}

fn latest_marker(conn: &Db, task: &str, run: i64) -> Result<Option<(String, String)>> {
    let Some(v) = latest_event_payload(conn, task, run, "owner_admitted")? else {
        return Ok(None);
    };
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
    Ok(Some((field("session_id"), field("request_id"))))
}

fn claim_view(conn: &Db, task: &str, run: i64) -> Result<Option<ClaimView>> {
    let row = conn
        .prepare_cached(
            "SELECT status, current_run_id, claim_lock, assignee FROM tasks WHERE id = ?1",
        )?
        .query_row(params![task], |r| {
            Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((task_status, current_run_id, claim_lock, assignee)) = row else {
        return Ok(None);
    };
    let run_row = conn
        .prepare_cached("SELECT task_id, status, claim_lock FROM task_runs WHERE id = ?1")?
        .query_row(params![run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    Ok(Some(ClaimView {
        task_status,
        current_run_id,
        claim_lock,
        assignee,
        run: run_row,
        marker: latest_marker(conn, task, run)?,
    }))
}

/// The latest `worker_bound` of a run: (pid, claim_lock).
fn latest_bound(conn: &Db, task: &str, run: i64) -> Result<Option<(i64, String)>> {
    let Some(v) = latest_event_payload(conn, task, run, "worker_bound")? else {
        return Ok(None);
    };
    let pid = v.get("pid").and_then(serde_json::Value::as_i64);
    let lock = v.get("claim_lock").and_then(|l| l.as_str());
    Ok(pid.zip(lock.map(str::to_owned)))
}

/// The latest `worker_result` of a run, accepted only for the exact claim lock and, once a
/// managed worker bound to the run, only from that worker: `(exit_code, last_output)`.
fn worker_result(
    conn: &Db,
    task: &str,
    run: i64,
    lock: &str,
) -> Result<Option<(i32, Option<String>)>> {
    let Some(v) = latest_event_payload(conn, task, run, "worker_result")? else {
        return Ok(None);
    };
    if v.get("claim_lock").and_then(|l| l.as_str()) != Some(lock) {
        return Ok(None);
    }
    if let Some((bound, _)) = latest_bound(conn, task, run)?
        && v.get("pid").and_then(serde_json::Value::as_i64) != Some(bound)
    {
        return Ok(None);
    }
    let code = v
        .get("exit_code")
        .and_then(serde_json::Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
        .unwrap_or(1);
    let out = v
        .get("last_output")
        .and_then(|o| o.as_str())
        .map(str::to_owned);
    Ok(Some((code, out)))
}

impl Board {
    /// The claim facts of `task` / `run` (`None`: no such task). Read-only.
    pub fn claim_view(&self, task: &str, run: i64) -> Result<Option<ClaimView>> {
        claim_view(self.conn(), task, run)
    }

    /// In one write transaction: accept an existing marker only if it names `session_id`,
    /// else re-prove the claim (task running this run under this lock) and append `marker`.
    pub fn append_owner_marker(
        &self,
        task: &str,
        run: i64,
        lock: &str,
        marker: &Event,
        session_id: &str,
        now: i64,
    ) -> Result<MarkerOutcome> {
        self.write(|tx| {
            if let Some((sid, _)) = latest_marker(tx, task, run)? {
                return Ok(if sid == session_id {
                    MarkerOutcome::Existing
                } else {
                    MarkerOutcome::Foreign
                });
            }
            if !claim_is_current_in(tx, task, run, lock)? {
                return Ok(MarkerOutcome::Stale);
            }
            append_event(tx, task, Some(run), marker, now)?;
            Ok(MarkerOutcome::Appended)
        })
    }

    /// The managed worker's bind: in one write transaction re-prove the claim and append
    /// `worker_bound`; answers the TTL the dispatcher claimed the run with (from its `claimed`
    /// event), or `None` when the claim is no longer current (nothing written).
    pub fn bind_managed_worker(
        &self,
        task: &str,
        run: i64,
        lock: &str,
        bound: &Event,
        now: i64,
    ) -> Result<Option<Option<i64>>> {
        self.write(|tx| {
            if !claim_is_current_in(tx, task, run, lock)? {
                return Ok(None);
            }
            append_event(tx, task, Some(run), bound, now)?;
            let claimed: Option<(Option<String>, i64)> = tx
                .prepare_cached(
                    "SELECT payload, created_at FROM task_events WHERE task_id = ?1 \
                     AND run_id = ?2 AND kind = 'claimed' ORDER BY id DESC LIMIT 1",
                )?
                .query_row(params![task, run], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let ttl = claimed.and_then(|(payload, at)| {
                let v: serde_json::Value = serde_json::from_str(payload.as_deref()?).ok()?;
                let expires = v.get("expires")?.as_i64()?;
                Some((expires - at).max(1))
            });
            Ok(Some(ttl))
        })
    }

    /// The owner's view of a run admitted in owner mode (read-only): `None` when the run carries
    /// no `owner_admitted` marker; else the owner named by the marker and its turn's status in
    /// the owner's `state.db` (`None`: no row, or the file cannot be read).
    pub fn owner_turn(&self, task: &str, run: i64) -> Result<Option<OwnerTurn>> {
        self.owner_turn_in(task, run)
    }

    /// [`Board::owner_turn`] of several runs (task, run): the dispatcher asks this of every
    /// running card at every tick in owner mode (each owner's `state.db` stays open between
    /// ticks, its statement prepared once; a run's marker, once read, is kept while it runs).
    pub fn owner_turns(&self, runs: &[(&str, i64)]) -> Result<Vec<Option<OwnerTurn>>> {
        self.owner_states.borrow_mut().keep_only(runs);
        runs.iter()
            .map(|(task, run)| self.owner_turn_in(task, *run))
            .collect()
    }

    fn owner_turn_in(&self, task: &str, run: i64) -> Result<Option<OwnerTurn>> {
        let known = self.owner_states.borrow().marker(task, run).cloned();
        let marker = match known {
            Some(marker) => marker,
            None => {
                let Some(v) = latest_event_payload(self.conn(), task, run, "owner_admitted")?
                else {
                    return Ok(None);
                };
                let marker = Marker {
                    db: v["db"].as_str().unwrap_or_default().to_owned(),
                    pid: v["pid"].as_i64(),
                    birth: v["birth"].as_str().map(str::to_owned),
                };
                self.owner_states
                    .borrow_mut()
                    .keep_marker(task, run, marker.clone());
                marker
            }
        };
        let mut states = self.owner_states.borrow_mut();
        let status = states.get(&marker.db).and_then(|c| {
            c.prepare_cached(
                "SELECT status FROM session_admissions WHERE task_id = ?1 AND run_id = ?2 \
                 ORDER BY seq DESC LIMIT 1",
            )
            .ok()?
            .query_row(params![task, run], |r| r.get::<_, String>(0))
            .ok()
        });
        Ok(Some(OwnerTurn {
            status,
            owner_pid: marker.pid,
            owner_birth: marker.birth,
        }))
    }

    /// The pid of the latest `worker_bound` of a run, if any (read-only).
    pub fn bound_worker(&self, task: &str, run: i64) -> Result<Option<i64>> {
        let bound = latest_event_payload(self.conn(), task, run, "worker_bound")?;
        Ok(bound.and_then(|v| v.get("pid").and_then(serde_json::Value::as_i64)))
    }

    /// A managed worker's `worker_result`, appended only when the writer is the run's bound
    /// worker (the latest `worker_bound` names its pid and its claim lock); otherwise nothing is
    /// written and the answer says who is bound.
    pub fn record_bound_worker_result(
        &self,
        result: &crate::board::WorkerResult<'_>,
        now: i64,
    ) -> Result<BoundResult> {
        let Some(run) = result.run_id else {
            return Ok(BoundResult::NotBound { bound_pid: None });
        };
        self.write(|tx| {
            let bound = latest_bound(tx, result.task_id, run)?;
            let writer = result.claim_lock.map(|l| (result.pid, l));
            if bound.as_ref().map(|(p, l)| (*p, l.as_str())) != writer {
                return Ok(BoundResult::NotBound {
                    bound_pid: bound.map(|(p, _)| p),
                });
            }
            let event = Event::WorkerResult {
                pid: result.pid,
                claim_lock: result.claim_lock.map(str::to_owned),
                exit_code: result.exit_code,
                last_output: result
                    .last_output
                    .map(|o| o.chars().take(RESULT_OUTPUT_CHARS).collect()),
            };
            append_event(tx, result.task_id, Some(run), &event, now)?;
            Ok(BoundResult::Recorded)
        })
    }

    /// Whether a managed worker still holds a live claim on its run (the proof its in-place
    /// recovery re-takes): the run is open and current under `lock` on the task **and** the run
    /// row, neither the task's nor the run's claim has expired at `now`, and the run's latest
    /// `worker_bound` names `pid` with `lock`. Read-only.
    pub fn bound_claim_is_live(
        &self,
        task: &str,
        run: i64,
        lock: &str,
        pid: i64,
        now: i64,
    ) -> Result<bool> {
        let conn = self.conn();
        if !claim_view(conn, task, run)?.is_some_and(|v| v.is_current(task, run, lock)) {
            return Ok(false);
        }
        let expiries: Option<(Option<i64>, Option<i64>)> = conn
            .prepare_cached(
                "SELECT t.claim_expires, r.claim_expires FROM tasks t JOIN task_runs r \
                 ON r.task_id = t.id WHERE t.id = ?1 AND r.id = ?2",
            )?
            .query_row(params![task, run], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((task_expires, run_expires)) = expiries else {
            return Ok(false);
        };
        // The task's lease must be set and live; the run's, when recorded, too.
        if task_expires.is_none_or(|e| e < now) || run_expires.is_some_and(|e| e < now) {
            return Ok(false);
        }
        Ok(latest_bound(conn, task, run)?.is_some_and(|(p, l)| p == pid && l == lock))
    }

    /// The run's `worker_result` for exactly `lock` (from its bound worker, once one bound),
    /// else `None` (read-only).
    pub fn worker_result_for(
        &self,
        task: &str,
        run: i64,
        lock: &str,
    ) -> Result<Option<(i32, Option<String>)>> {
        worker_result(self.conn(), task, run, lock)
    }
}

fn claim_is_current_in(tx: &Tx<'_>, task: &str, run: i64, lock: &str) -> Result<bool> {
    Ok(claim_view(tx, task, run)?.is_some_and(|v| v.is_current(task, run, lock)))
}
