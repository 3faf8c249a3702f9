//! The SQL of owner admission (README "Owner admission"): the read-only claim proof, the
//! `owner_admitted` / `worker_bound` / `worker_result` markers on the board, and the owner's own
//! `state.db` (sessions with their frozen creation receipt, `session_admissions`, the epoch).
//!
//! `state.db` is opened by the board's own layer ([`Board::open_store`]): same pragmas, same busy
//! handling, same one write-transaction helper. Nothing here reads the clock or a process.

use crate::db::{self, Db, OptionalExtension, params};

use crate::board::events::{Event, append_event};
use crate::board::store::{Board, Tx};
use crate::board::{BoardError, Result};

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
        let payload: Option<Option<String>> = self
            .conn()
            .prepare_cached(
                "SELECT payload FROM task_events WHERE task_id = ?1 AND run_id = ?2 \
                 AND kind = 'owner_admitted' ORDER BY id DESC LIMIT 1",
            )?
            .query_row(params![task, run], |r| r.get(0))
            .optional()?;
        let Some(Some(payload)) = payload else {
            return Ok(None);
        };
        let v: serde_json::Value = serde_json::from_str(&payload)?;
        let db = v.get("db").and_then(|d| d.as_str()).unwrap_or_default();
        let status = Db::open_sqlite_read_only(std::path::Path::new(db))
            .and_then(|c| {
                c.query_row(
                    "SELECT status FROM session_admissions WHERE task_id = ?1 AND run_id = ?2 \
                     ORDER BY seq DESC LIMIT 1",
                    params![task, run],
                    |r| r.get::<_, String>(0),
                )
            })
            .ok();
        Ok(Some(OwnerTurn {
            status,
            owner_pid: v.get("pid").and_then(serde_json::Value::as_i64),
            owner_birth: v.get("birth").and_then(|b| b.as_str()).map(str::to_owned),
        }))
    }

    /// The pid of the latest `worker_bound` of a run, if any (read-only).
    pub fn bound_worker(&self, task: &str, run: i64) -> Result<Option<i64>> {
        let payload: Option<Option<String>> = self
            .conn()
            .prepare_cached(
                "SELECT payload FROM task_events WHERE task_id = ?1 AND run_id = ?2 \
                 AND kind = 'worker_bound' ORDER BY id DESC LIMIT 1",
            )?
            .query_row(params![task, run], |r| r.get(0))
            .optional()?;
        Ok(payload
            .flatten()
            .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
            .and_then(|v| v.get("pid").and_then(serde_json::Value::as_i64)))
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

/// The schema of the owner's `state.db`.
pub(crate) const STATE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runtime_epoch (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    epoch INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    principal_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    receipt_json TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS session_admissions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    admission_id TEXT NOT NULL UNIQUE,
    principal_id TEXT NOT NULL,
    target_session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE RESTRICT,
    request_id TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    task_id TEXT NOT NULL,
    run_id INTEGER NOT NULL,
    marker_confirmed INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN
        ('queued', 'started', 'completed', 'failed', 'unknown', 'interrupted')),
    exit_code INTEGER,
    last_output TEXT,
    owner_epoch INTEGER NOT NULL,
    worker_pid INTEGER,
    requeue INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL,
    UNIQUE (principal_id, target_session_id, request_id)
);
";

/// One admission row (one turn of one session).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AdmissionRow {
    pub sequence: i64,
    pub admission_id: String,
    pub principal_id: String,
    pub session_id: String,
    pub request_id: String,
    pub task_id: String,
    pub run_id: i64,
    pub marker_confirmed: bool,
    pub status: String,
    pub exit_code: Option<i32>,
    pub last_output: Option<String>,
    pub authority_epoch: i64,
    pub worker_pid: Option<i64>,
    pub requeue: bool,
    pub updated_at: i64,
}

const ROW: &str = "seq, admission_id, principal_id, target_session_id, request_id, task_id, run_id, \
    marker_confirmed, status, exit_code, last_output, owner_epoch, worker_pid, requeue, updated_at";

fn row(r: &db::Row<'_>) -> db::Result<AdmissionRow> {
    row_at(r, 0)
}

/// A new admission: the session with its frozen receipt and the turn's payload.
#[derive(Debug, Clone)]
pub struct NewAdmission<'a> {
    pub principal_id: &'a str,
    pub session_id: &'a str,
    pub request_id: &'a str,
    /// The frozen creation receipt (canonical JSON).
    pub receipt_json: &'a str,
    /// The turn's payload (canonical JSON).
    pub payload_json: &'a str,
    pub task_id: &'a str,
    pub run_id: i64,
    pub admission_id: &'a str,
}

/// How [`StateDb::admit`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// Inserted now.
    Created(AdmissionRow),
    /// The same request with the same payload and receipt was admitted before.
    Replay(AdmissionRow),
    /// Same request id, different payload or receipt.
    Conflict,
}

/// What a turn lost with its owner becomes at the next owner's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostTurn {
    pub status: &'static str,
    pub exit_code: Option<i32>,
    pub output: Option<&'static str>,
}

/// The owner's `state.db`.
#[derive(Debug)]
pub struct StateDb {
    db: Board,
}

impl StateDb {
    /// Opens (creating) `state.db` at `path`.
    pub fn open(path: &std::path::Path) -> Result<StateDb> {
        Ok(StateDb {
            db: Board::open_store(path, STATE_SCHEMA)?,
        })
    }

    /// The file.
    pub fn path(&self) -> &std::path::Path {
        self.db.path()
    }

    /// Starts a new owner epoch: the epoch is incremented, and every `started` turn of an older
    /// epoch — lost with the owner that ran it, never replayed — becomes `settle_as.status` with its
    /// exit code and output (`interrupted` 130, or `unknown` for the operator). Answers (epoch,
    /// the turns so settled, as they were).
    pub fn begin_epoch(&self, now: i64, settle_as: &LostTurn) -> Result<(i64, Vec<AdmissionRow>)> {
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO runtime_epoch (singleton, epoch) VALUES (1, 1) \
                 ON CONFLICT(singleton) DO UPDATE SET epoch = epoch + 1",
                [],
            )?;
            let epoch: i64 =
                tx.query_row("SELECT epoch FROM runtime_epoch WHERE singleton = 1", [], |r| {
                    r.get(0)
                })?;
            let lost: Vec<AdmissionRow> = tx
                .prepare(&format!(
                    "SELECT {ROW} FROM session_admissions WHERE status = 'started' AND owner_epoch < ?1"
                ))?
                .query_map(params![epoch], row)?
                .collect::<db::Result<_>>()?;
            tx.execute(
                "UPDATE session_admissions SET status = ?3, exit_code = ?4, last_output = ?5, \
                 updated_at = ?2 WHERE status = 'started' AND owner_epoch < ?1",
                params![epoch, now, settle_as.status, settle_as.exit_code, settle_as.output],
            )?;
            Ok((epoch, lost))
        })
    }

    /// The receipt frozen for `session_id`, if the session exists.
    pub fn receipt(&self, session_id: &str) -> Result<Option<String>> {
        Ok(self
            .db
            .conn()
            .prepare_cached("SELECT receipt_json FROM sessions WHERE session_id = ?1")?
            .query_row(params![session_id], |r| r.get(0))
            .optional()?)
    }

    /// In one transaction: the session with its frozen receipt (kept if it exists and is equal)
    /// and the queued turn under (principal, session, request id). A replay with the same payload
    /// returns the original row; a different payload or receipt is a conflict.
    pub fn admit(&self, new: &NewAdmission<'_>, epoch: i64, now: i64) -> Result<Admitted> {
        self.db.write(|tx| {
            let saved: Option<String> = tx
                .prepare_cached("SELECT receipt_json FROM sessions WHERE session_id = ?1")?
                .query_row(params![new.session_id], |r| r.get(0))
                .optional()?;
            match saved {
                Some(saved) if saved != new.receipt_json => return Ok(Admitted::Conflict),
                Some(_) => {}
                None => {
                    tx.execute(
                        "INSERT INTO sessions (session_id, principal_id, request_id, receipt_json, created_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![new.session_id, new.principal_id, new.request_id, new.receipt_json, now],
                    )?;
                }
            }
            let existing: Option<(String, AdmissionRow)> = tx
                .prepare_cached(&format!(
                    "SELECT payload_json, {ROW} FROM session_admissions \
                     WHERE principal_id = ?1 AND target_session_id = ?2 AND request_id = ?3"
                ))?
                .query_row(params![new.principal_id, new.session_id, new.request_id], |r| {
                    Ok((r.get(0)?, row_at(r, 1)?))
                })
                .optional()?;
            if let Some((payload, found)) = existing {
                return Ok(if payload == new.payload_json {
                    Admitted::Replay(found)
                } else {
                    Admitted::Conflict
                });
            }
            tx.execute(
                "INSERT INTO session_admissions (admission_id, principal_id, target_session_id, \
                 request_id, payload_json, task_id, run_id, status, owner_epoch, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9)",
                params![
                    new.admission_id,
                    new.principal_id,
                    new.session_id,
                    new.request_id,
                    new.payload_json,
                    new.task_id,
                    new.run_id,
                    epoch,
                    now
                ],
            )?;
            let created = get_in(tx, new.admission_id)?
                .ok_or(BoardError::Sql(db::Error::no_rows()))?;
            Ok(Admitted::Created(created))
        })
    }

    /// Records that the board carries this admission's `owner_admitted` marker.
    pub fn confirm_marker(&self, admission_id: &str, now: i64) -> Result<()> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE session_admissions SET marker_confirmed = 1, updated_at = ?2 WHERE admission_id = ?1",
                params![admission_id, now],
            )?;
            Ok(())
        })
    }

    /// `queued` (marker confirmed) → `started` in `epoch`, before any worker exists. False when
    /// the row is not in that state (someone else started it, or it settled).
    pub fn mark_started(&self, admission_id: &str, epoch: i64, now: i64) -> Result<bool> {
        self.db.write(|tx| {
            Ok(tx.execute(
                "UPDATE session_admissions SET status = 'started', owner_epoch = ?2, updated_at = ?3 \
                 WHERE admission_id = ?1 AND status = 'queued' AND marker_confirmed = 1",
                params![admission_id, epoch, now],
            )? == 1)
        })
    }

    /// Notes the managed worker's pid on a started turn.
    pub fn note_worker(&self, admission_id: &str, pid: i64) -> Result<()> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE session_admissions SET worker_pid = ?2 WHERE admission_id = ?1",
                params![admission_id, pid],
            )?;
            Ok(())
        })
    }

    /// `started` (in `epoch`) → `status` with the turn's exit code and output.
    pub fn settle(
        &self,
        admission_id: &str,
        epoch: i64,
        status: &str,
        exit_code: Option<i32>,
        last_output: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        self.db.write(|tx| {
            Ok(tx.execute(
                "UPDATE session_admissions SET status = ?3, exit_code = ?4, last_output = ?5, updated_at = ?6 \
                 WHERE admission_id = ?1 AND status = 'started' AND owner_epoch = ?2",
                params![admission_id, epoch, status, exit_code, last_output, now],
            )? == 1)
        })
    }

    /// A `queued` turn whose run can no longer be admitted (stale claim, foreign marker) ends
    /// `failed` with `reason` as its output; it never ran.
    pub fn refuse_queued(&self, admission_id: &str, reason: &str, now: i64) -> Result<()> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE session_admissions SET status = 'failed', exit_code = 1, last_output = ?2, updated_at = ?3 \
                 WHERE admission_id = ?1 AND status = 'queued'",
                params![admission_id, reason, now],
            )?;
            Ok(())
        })
    }

    /// An operator's decision on an `unknown` (or still `queued`) turn of `task_id`: it becomes
    /// `status` with `exit_code` (what the submitter exits with); `requeue` records that the card
    /// was released for a fresh run.
    pub fn resolve(
        &self,
        task_id: &str,
        status: &str,
        exit_code: i32,
        requeue: bool,
        now: i64,
    ) -> Result<Option<AdmissionRow>> {
        self.db.write(|tx| {
            let found: Option<String> = tx
                .prepare_cached(
                    "SELECT admission_id FROM session_admissions WHERE task_id = ?1 \
                     AND status IN ('unknown', 'queued') ORDER BY seq DESC LIMIT 1",
                )?
                .query_row(params![task_id], |r| r.get(0))
                .optional()?;
            let Some(id) = found else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE session_admissions SET status = ?2, requeue = ?3, updated_at = ?4, \
                 exit_code = ?5 WHERE admission_id = ?1",
                params![id, status, i64::from(requeue), now, exit_code],
            )?;
            get_in(tx, &id)
        })
    }

    /// One admission by id.
    pub fn get(&self, admission_id: &str) -> Result<Option<AdmissionRow>> {
        get_in(self.db.conn(), admission_id)
    }

    /// The latest admission of a session.
    pub fn by_session(&self, session_id: &str) -> Result<Option<AdmissionRow>> {
        Ok(self
            .db
            .conn()
            .prepare_cached(&format!(
                "SELECT {ROW} FROM session_admissions WHERE target_session_id = ?1 ORDER BY seq DESC LIMIT 1"
            ))?
            .query_row(params![session_id], row)
            .optional()?)
    }

    /// The latest admission of a run.
    pub fn by_run(&self, task_id: &str, run_id: i64) -> Result<Option<AdmissionRow>> {
        Ok(self
            .db
            .conn()
            .prepare_cached(&format!(
                "SELECT {ROW} FROM session_admissions WHERE task_id = ?1 AND run_id = ?2 ORDER BY seq DESC LIMIT 1"
            ))?
            .query_row(params![task_id, run_id], row)
            .optional()?)
    }

    /// Every admission, oldest first.
    pub fn list(&self) -> Result<Vec<AdmissionRow>> {
        let mut stmt = self.db.conn().prepare(&format!(
            "SELECT {ROW} FROM session_admissions ORDER BY seq"
        ))?;
        let rows = stmt.query_map([], row)?;
        Ok(rows.collect::<db::Result<_>>()?)
    }
}

fn row_at(r: &db::Row<'_>, offset: usize) -> db::Result<AdmissionRow> {
    Ok(AdmissionRow {
        sequence: r.get(offset)?,
        admission_id: r.get(offset + 1)?,
        principal_id: r.get(offset + 2)?,
        session_id: r.get(offset + 3)?,
        request_id: r.get(offset + 4)?,
        task_id: r.get(offset + 5)?,
        run_id: r.get(offset + 6)?,
        marker_confirmed: r.get::<_, i64>(offset + 7)? != 0,
        status: r.get(offset + 8)?,
        exit_code: r.get(offset + 9)?,
        last_output: r.get(offset + 10)?,
        authority_epoch: r.get(offset + 11)?,
        worker_pid: r.get(offset + 12)?,
        requeue: r.get::<_, i64>(offset + 13)? != 0,
        updated_at: r.get(offset + 14)?,
    })
}

fn get_in(conn: &Db, admission_id: &str) -> Result<Option<AdmissionRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {ROW} FROM session_admissions WHERE admission_id = ?1"
        ))?
        .query_row(params![admission_id], row)
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAUSE: LostTurn = LostTurn {
        status: "unknown",
        exit_code: None,
        output: None,
    };

    fn new<'a>(payload: &'a str, receipt: &'a str, id: &'a str) -> NewAdmission<'a> {
        NewAdmission {
            principal_id: "uid:1",
            session_id: "local-s",
            request_id: "kanban:[\"b\",\"t\",1]",
            receipt_json: receipt,
            payload_json: payload,
            task_id: "t",
            run_id: 1,
            admission_id: id,
        }
    }

    #[test]
    fn a_replay_returns_the_original_row_and_a_changed_payload_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(&dir.path().join("state.db")).unwrap();
        let (epoch, lost) = db.begin_epoch(10, &PAUSE).unwrap();
        assert_eq!((epoch, lost.len()), (1, 0));
        let first = match db.admit(&new("{\"p\":1}", "{}", "a1"), epoch, 10).unwrap() {
            Admitted::Created(row) => row,
            other => panic!("{other:?}"),
        };
        assert_eq!(first.status, "queued");
        match db.admit(&new("{\"p\":1}", "{}", "a2"), epoch, 11).unwrap() {
            Admitted::Replay(row) => assert_eq!(row.admission_id, "a1"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            db.admit(&new("{\"p\":2}", "{}", "a3"), epoch, 12).unwrap(),
            Admitted::Conflict
        );
        assert_eq!(
            db.admit(&new("{\"p\":1}", "{\"other\":1}", "a4"), epoch, 12)
                .unwrap(),
            Admitted::Conflict
        );
        assert_eq!(db.list().unwrap().len(), 1);
    }

    #[test]
    fn started_work_of_an_older_epoch_becomes_unknown_and_only_an_operator_settles_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(&dir.path().join("state.db")).unwrap();
        let (epoch, _) = db.begin_epoch(10, &PAUSE).unwrap();
        db.admit(&new("{}", "{}", "a1"), epoch, 10).unwrap();
        // Not confirmed: it cannot start.
        assert!(!db.mark_started("a1", epoch, 11).unwrap());
        db.confirm_marker("a1", 11).unwrap();
        assert!(db.mark_started("a1", epoch, 11).unwrap());
        assert!(
            !db.mark_started("a1", epoch, 11).unwrap(),
            "started once only"
        );
        drop(db);
        let db = StateDb::open(&dir.path().join("state.db")).unwrap();
        let (epoch2, lost) = db.begin_epoch(20, &PAUSE).unwrap();
        assert_eq!(epoch2, 2);
        assert_eq!(lost.len(), 1);
        assert_eq!(db.get("a1").unwrap().unwrap().status, "unknown");
        // The old epoch cannot settle it, nor can it start again.
        assert!(
            !db.settle("a1", epoch, "completed", Some(0), None, 21)
                .unwrap()
        );
        assert!(!db.mark_started("a1", epoch2, 21).unwrap());
        let row = db
            .resolve("t", "interrupted", 130, true, 22)
            .unwrap()
            .unwrap();
        assert_eq!((row.status.as_str(), row.requeue), ("interrupted", true));
        assert_eq!(row.exit_code, Some(130));
        assert_eq!(db.resolve("t", "failed", 1, false, 23).unwrap(), None);
    }

    #[test]
    fn a_turn_lost_with_its_owner_settles_as_the_next_owner_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let db = StateDb::open(&path).unwrap();
        let (epoch, _) = db.begin_epoch(10, &PAUSE).unwrap();
        db.admit(&new("{}", "{}", "a1"), epoch, 10).unwrap();
        db.confirm_marker("a1", 11).unwrap();
        assert!(db.mark_started("a1", epoch, 11).unwrap());
        drop(db);
        let db = StateDb::open(&path).unwrap();
        let requeue = LostTurn {
            status: "interrupted",
            exit_code: Some(130),
            output: Some("lost with its owner"),
        };
        let (_, lost) = db.begin_epoch(20, &requeue).unwrap();
        assert_eq!(lost.len(), 1);
        let row = db.get("a1").unwrap().unwrap();
        assert_eq!(
            (
                row.status.as_str(),
                row.exit_code,
                row.last_output.as_deref()
            ),
            ("interrupted", Some(130), Some("lost with its owner"))
        );
        // Settled: a later start leaves it alone.
        assert!(db.begin_epoch(30, &PAUSE).unwrap().1.is_empty());
    }

    #[test]
    fn a_resolved_turn_carries_the_exit_code_of_its_decision() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(&dir.path().join("state.db")).unwrap();
        let (epoch, _) = db.begin_epoch(10, &PAUSE).unwrap();
        db.admit(&new("{}", "{}", "a1"), epoch, 10).unwrap();
        let row = db.resolve("t", "completed", 0, false, 11).unwrap().unwrap();
        assert_eq!((row.status.as_str(), row.exit_code), ("completed", Some(0)));
        assert_eq!(db.get("a1").unwrap().unwrap().exit_code, Some(0));
    }
}
