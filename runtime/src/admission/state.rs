//! The owner's own `state.db` (README "Owner admission"): sessions with their frozen creation
//! receipt, `session_admissions`, the epoch. It is opened by the board's own layer
//! ([`Board::open_store`]): same pragmas, same busy handling, same one write-transaction helper.
//! The markers the owner writes on a board are `crate::board::admission`. Nothing here reads the
//! clock or a process.

use crate::board::store::Board;
use crate::board::{BoardError, Result, StorageError};
use crate::db::{self, Db, OptionalExtension, params};

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
-- A run's turn, asked by the dispatcher of every running card at every tick and by `show`: by
-- its run, not by a scan of every turn the owner ever admitted.
CREATE INDEX IF NOT EXISTS idx_session_admissions_run ON session_admissions (task_id, run_id, seq);
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
                    const SESSION: &str = "INSERT INTO sessions \
                        (session_id, principal_id, request_id, receipt_json, created_at) \
                        VALUES (?1, ?2, ?3, ?4, ?5)";
                    tx.prepare_cached(SESSION)?.execute(params![
                        new.session_id,
                        new.principal_id,
                        new.request_id,
                        new.receipt_json,
                        now
                    ])?;
                }
            }
            let existing: Option<(String, AdmissionRow)> = tx
                .prepare_cached(&format!(
                    "SELECT payload_json, {ROW} FROM session_admissions \
                     WHERE principal_id = ?1 AND target_session_id = ?2 AND request_id = ?3"
                ))?
                .query_row(
                    params![new.principal_id, new.session_id, new.request_id],
                    |r| Ok((r.get(0)?, row_at(r, 1)?)),
                )
                .optional()?;
            if let Some((payload, found)) = existing {
                return Ok(if payload == new.payload_json {
                    Admitted::Replay(found)
                } else {
                    Admitted::Conflict
                });
            }
            const TURN: &str = "INSERT INTO session_admissions (admission_id, principal_id, \
                target_session_id, request_id, payload_json, task_id, run_id, status, owner_epoch, \
                updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'queued', ?8, ?9)";
            tx.prepare_cached(TURN)?.execute(params![
                new.admission_id,
                new.principal_id,
                new.session_id,
                new.request_id,
                new.payload_json,
                new.task_id,
                new.run_id,
                epoch,
                now
            ])?;
            let created = get_in(tx, new.admission_id)?
                .ok_or(BoardError::Storage(StorageError::Sql(db::Error::no_rows())))?;
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

    /// `queued` (marker confirmed) → `started` in `epoch`, before any worker exists; with
    /// `confirm` (the owner has just seen its marker on the board) the same commit confirms the
    /// marker. False when the row is not in that state (someone else started it, or it settled).
    pub fn mark_started(
        &self,
        admission_id: &str,
        epoch: i64,
        now: i64,
        confirm: bool,
    ) -> Result<bool> {
        self.db.write(|tx| {
            const START: &str = "UPDATE session_admissions SET status = 'started', \
                owner_epoch = ?2, updated_at = ?3, marker_confirmed = 1 \
                WHERE admission_id = ?1 AND status = 'queued' AND (marker_confirmed = 1 OR ?4)";
            let started =
                tx.prepare_cached(START)?
                    .execute(params![admission_id, epoch, now, confirm])?;
            Ok(started == 1)
        })
    }

    /// Notes the managed worker's pid on a started turn.
    pub fn note_worker(&self, admission_id: &str, pid: i64) -> Result<()> {
        self.db.write(|tx| {
            const NOTE: &str =
                "UPDATE session_admissions SET worker_pid = ?2 WHERE admission_id = ?1";
            tx.prepare_cached(NOTE)?
                .execute(params![admission_id, pid])?;
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
            const SETTLE: &str = "UPDATE session_admissions SET status = ?3, exit_code = ?4, \
                last_output = ?5, updated_at = ?6 \
                WHERE admission_id = ?1 AND status = 'started' AND owner_epoch = ?2";
            let settled = tx.prepare_cached(SETTLE)?.execute(params![
                admission_id,
                epoch,
                status,
                exit_code,
                last_output,
                now
            ])?;
            Ok(settled == 1)
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

    /// How many turns are in each state (`queued`, `started`, `completed`, …), by state.
    pub fn turns_by_state(&self) -> Result<Vec<(String, i64)>> {
        let mut stmt = self.db.conn().prepare(
            "SELECT status, COUNT(*) FROM session_admissions GROUP BY status ORDER BY status",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<db::Result<_>>()?)
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
        assert!(!db.mark_started("a1", epoch, 11, false).unwrap());
        db.confirm_marker("a1", 11).unwrap();
        assert!(db.mark_started("a1", epoch, 11, false).unwrap());
        assert!(
            !db.mark_started("a1", epoch, 11, false).unwrap(),
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
        assert!(!db.mark_started("a1", epoch2, 21, false).unwrap());
        let row = db
            .resolve("t", "interrupted", 130, true, 22)
            .unwrap()
            .unwrap();
        assert_eq!((row.status.as_str(), row.requeue), ("interrupted", true));
        assert_eq!(row.exit_code, Some(130));
        assert_eq!(db.resolve("t", "failed", 1, false, 23).unwrap(), None);
    }

    #[test]
    fn a_turn_whose_marker_was_just_appended_is_confirmed_and_started_in_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(&dir.path().join("state.db")).unwrap();
        let (epoch, _) = db.begin_epoch(10, &PAUSE).unwrap();
        db.admit(&new("{}", "{}", "a1"), epoch, 10).unwrap();
        assert!(db.mark_started("a1", epoch, 11, true).unwrap());
        let row = db.get("a1").unwrap().unwrap();
        assert_eq!(
            (row.status.as_str(), row.marker_confirmed),
            ("started", true)
        );
        assert_eq!(row.authority_epoch, epoch);
        // Started once only, confirming or not.
        assert!(!db.mark_started("a1", epoch, 12, true).unwrap());
        assert!(!db.mark_started("a1", epoch, 12, false).unwrap());
    }

    #[test]
    fn a_turn_lost_with_its_owner_settles_as_the_next_owner_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let db = StateDb::open(&path).unwrap();
        let (epoch, _) = db.begin_epoch(10, &PAUSE).unwrap();
        db.admit(&new("{}", "{}", "a1"), epoch, 10).unwrap();
        db.confirm_marker("a1", 11).unwrap();
        assert!(db.mark_started("a1", epoch, 11, false).unwrap());
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
