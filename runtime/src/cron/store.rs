//! The cron job store: one SQLite file per home, `<root>/cron/jobs.db`, holding the jobs and the
//! fire ledger. Every SQL statement of cron lives here.
//!
//! Two independent layers stop an occurrence from running twice, both decided inside one
//! `BEGIN IMMEDIATE` transaction:
//!
//! * **Advance before run.** [`Store::claim_fire`] for a scheduled fire is a compare-and-swap on
//!   the observed `next_run_at`: it moves `next_run_at` to the following occurrence (or clears it
//!   for a one-shot and for an exhausted `--repeat`) and counts `repeat.completed` *before* the
//!   job runs, so a crash mid-run can never make it run again.
//! * **The fire ledger.** Each claim inserts a `fires` row; `UNIQUE(job_id, occurrence)` makes a
//!   second run of one scheduled occurrence impossible even if the first layer were bypassed.
//!
//! A claim is a lease (`fire_owner`, `fire_expires`) that the runner heartbeats. While it is live
//! no other scheduler fires the job (no overlap of one job with itself). Completion
//! ([`Store::complete_fire`]) is fenced on the owner: a runner whose lease expired and was taken
//! over records nothing. Expired leases are closed by [`Store::reap_expired_claims`] as failures.
//!
//! This module never runs a job and never reads the clock: every transition takes `now`.

use crate::board::StorageError;
use crate::db::{self, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use super::schedule::Schedule;
use super::{CronError, RunOutcome};
use crate::board::{Board, BoardError};
use crate::db::Tx;

/// File name of the store inside `<root>/cron/`.
pub(crate) const STORE_FILE: &str = "jobs.db";

const SCHEMA_VERSION: i64 = 1;

/// Fire-ledger rows kept per job (older ones are pruned when a fire completes; `next_run_at`
/// only moves forward, so a pruned occurrence can never be claimed again anyway).
pub(crate) const FIRE_HISTORY: usize = 1_000;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    prompt TEXT NOT NULL,
    schedule TEXT NOT NULL,
    schedule_spec TEXT NOT NULL,
    profile TEXT NOT NULL,
    workdir TEXT,
    enabled INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    next_run_at INTEGER,
    last_run_at INTEGER,
    last_status TEXT,
    last_error TEXT,
    repeat_times INTEGER,
    repeat_completed INTEGER NOT NULL DEFAULT 0,
    failure_streak INTEGER NOT NULL DEFAULT 0,
    paused_at INTEGER,
    paused_reason TEXT,
    fire_id INTEGER,
    fire_owner TEXT,
    fire_occurrence INTEGER,
    fire_claimed_at INTEGER,
    fire_heartbeat_at INTEGER,
    fire_expires INTEGER
);
CREATE TABLE IF NOT EXISTS fires (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    occurrence INTEGER,
    owner TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    status TEXT NOT NULL,
    error TEXT,
    output_path TEXT,
    UNIQUE (job_id, occurrence)
);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (enabled, state, next_run_at);
";

const JOB_COLUMNS: &str = "id, name, prompt, schedule, schedule_spec, profile, workdir, enabled, \
    state, created_at, next_run_at, last_run_at, last_status, last_error, repeat_times, \
    repeat_completed, failure_streak, paused_at, paused_reason, fire_id, fire_owner, \
    fire_occurrence, fire_claimed_at, fire_heartbeat_at, fire_expires";

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for `next_run_at`.
    Scheduled,
    /// Paused by an operator; `next_run_at` is cleared.
    Paused,
    /// A one-shot that ran, or a job whose `--repeat` is used up.
    Completed,
    /// A recurring schedule that has no future occurrence.
    Error,
}

impl JobState {
    fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Paused => "paused",
            JobState::Completed => "completed",
            JobState::Error => "error",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "scheduled" => JobState::Scheduled,
            "paused" => JobState::Paused,
            "completed" => JobState::Completed,
            "error" => JobState::Error,
            _ => return None,
        })
    }
}

/// How many times a job runs: `times = None` means forever; `completed` counts fires started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeat {
    pub times: Option<u32>,
    pub completed: u32,
}

impl Repeat {
    fn exhausted_after(self, more: u32) -> bool {
        self.times
            .is_some_and(|t| self.completed.saturating_add(more) >= t)
    }
}

/// The live fire claim of a job (a lease its runner heartbeats).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FireClaim {
    /// Ledger row of this fire.
    pub fire_id: i64,
    /// `<host>:<pid>:<nonce>` of the scheduler (or manual run) that holds it.
    pub owner: String,
    /// The scheduled occurrence being run; `None` for a manual run.
    pub occurrence: Option<i64>,
    pub claimed_at: i64,
    pub heartbeat_at: i64,
    pub expires_at: i64,
}

/// One cron job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// 12 hex characters; immutable.
    pub id: String,
    pub name: String,
    pub prompt: String,
    /// The schedule as the user wrote it.
    pub schedule: String,
    /// The parsed schedule.
    pub schedule_spec: Schedule,
    /// Profile in `kanban.toml` whose agent runs the job.
    pub profile: String,
    /// Working directory for the agent's child processes.
    pub workdir: Option<PathBuf>,
    pub enabled: bool,
    pub state: JobState,
    pub created_at: i64,
    pub next_run_at: Option<i64>,
    pub last_run_at: Option<i64>,
    /// `ok` or `error` once the job has run.
    pub last_status: Option<String>,
    pub last_error: Option<String>,
    pub repeat: Repeat,
    /// Consecutive failed runs (reset by a success).
    pub failure_streak: u32,
    pub paused_at: Option<i64>,
    pub paused_reason: Option<String>,
    pub fire_claim: Option<FireClaim>,
}

/// What `kanban cron add` stores.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub name: Option<String>,
    pub prompt: String,
    pub schedule: String,
    pub schedule_spec: Schedule,
    pub profile: String,
    pub workdir: Option<PathBuf>,
    /// `None` = forever for recurring schedules, once for a one-shot.
    pub repeat: Option<u32>,
}

/// One row of the fire ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fire {
    pub id: i64,
    pub job_id: String,
    /// The scheduled occurrence; `None` for a manual run.
    pub occurrence: Option<i64>,
    pub owner: String,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// `running`, `ok`, `error`, `lost` (the runner stopped heartbeating) or `discarded` (the
    /// runner finished after its claim was taken over).
    pub status: String,
    pub error: Option<String>,
    pub output_path: Option<String>,
}

/// Which fire a claim is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireKind {
    /// The scheduled occurrence the caller observed in `next_run_at`.
    Scheduled { occurrence: i64 },
    /// `kanban cron run`: runs now, leaves the schedule and the repeat count alone.
    Manual,
}

/// A claim that was granted: run `job`, heartbeat and complete with `owner` and `fire_id`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub job: Job,
    pub fire_id: i64,
    pub owner: String,
}

/// Outcome of [`Store::claim_fire`].
#[derive(Debug, Clone)]
pub enum ClaimOutcome {
    Claimed(Box<Claimed>),
    /// Another runner holds a live claim on the job.
    Busy {
        owner: String,
    },
    /// The occurrence is not (or no longer) due: another scheduler fired it, or the job was
    /// paused, retired or rescheduled.
    NotDue,
    /// The job no longer exists.
    Gone,
}

/// Outcome of [`Store::heartbeat_fire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    Extended,
    /// The claim is no longer ours: stop, the result will be discarded.
    Lost,
}

/// Outcome of [`Store::complete_fire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompleteOutcome {
    Recorded,
    /// The claim was taken over or the job removed; the stale result was discarded.
    Lost,
}

/// The per-home cron store. Its database is opened through the board's store layer
/// ([`Board::open_store`](crate::board::Board)): the same refusal of a vulnerable SQLite and of a
/// file that is not SQLite, the same pragmas, and the same `BEGIN IMMEDIATE` writes with one busy
/// budget.
pub struct Store {
    db: Board,
    root: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.db.path())
            .finish()
    }
}

/// `<root>/cron`.
pub(crate) fn cron_dir(root: &Path) -> PathBuf {
    root.join("cron")
}

impl Store {
    /// Opens (creating if needed) `<root>/cron/jobs.db`.
    pub fn open(root: &Path) -> Result<Self, CronError> {
        let dir = cron_dir(root);
        create_private_dir(&dir)?;
        let path = dir.join(STORE_FILE);
        let db = Board::open_store(&path, SCHEMA).map_err(|e| store_error(&path, e))?;
        let mut store = Store {
            db,
            root: root.to_owned(),
        };
        store.migrate()?;
        Ok(store)
    }

    /// The kanban root this store belongs to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    fn db(&self, source: db::Error) -> CronError {
        CronError::Db {
            path: self.path().to_owned(),
            source,
        }
    }

    fn migrate(&mut self) -> Result<(), CronError> {
        let current = self.db.conn().schema_version().map_err(|e| self.db(e))?;
        if current >= SCHEMA_VERSION {
            return Ok(());
        }
        self.write(|tx| {
            let version = tx.schema_version()?;
            if version < 1 {
                tx.execute_batch(SCHEMA)?;
            }
            if version < SCHEMA_VERSION {
                tx.set_schema_version(SCHEMA_VERSION)?;
            }
            Ok(())
        })
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` … `COMMIT` transaction through [`Board::write`] (busy
    /// `BEGIN` / `COMMIT` retried within one budget; statements are never replayed; an error
    /// rolls back).
    fn write<T>(
        &mut self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, db::Error>,
    ) -> Result<T, CronError> {
        self.db
            .write(|tx| f(tx).map_err(BoardError::from))
            .map_err(|e| store_error(self.db.path(), e))
    }

    /// Stores a new job and returns it; `now` schedules its first run.
    pub fn add(&mut self, new: NewJob, now: i64) -> Result<Job, CronError> {
        let id = random_hex(6)?;
        let times = match (new.repeat, new.schedule_spec.is_recurring()) {
            (Some(0), _) => return Err(CronError::InvalidRepeat),
            (Some(n), _) => Some(n),
            (None, false) => Some(1),
            (None, true) => None,
        };
        let next_run_at = new.schedule_spec.first_run(now);
        if next_run_at.is_none() {
            return Err(CronError::NeverRuns {
                schedule: new.schedule.clone(),
            });
        }
        let name = new
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| default_name(&new.prompt));
        let spec = serde_json::to_string(&new.schedule_spec).map_err(|e| CronError::Corrupt {
            id: id.clone(),
            message: e.to_string(),
        })?;
        let workdir = new
            .workdir
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned());
        self.write(|tx| {
            tx.execute(
                "INSERT INTO jobs (id, name, prompt, schedule, schedule_spec, profile, workdir, \
                 enabled, state, created_at, next_run_at, repeat_times, repeat_completed, \
                 failure_streak) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, 'scheduled', ?8, ?9, ?10, 0, 0)",
                params![
                    id,
                    name,
                    new.prompt,
                    new.schedule,
                    spec,
                    new.profile,
                    workdir,
                    now,
                    next_run_at,
                    times
                ],
            )?;
            Ok(())
        })?;
        self.get(&id)?.ok_or(CronError::NotFound { reference: id })
    }

    /// The job with this exact id.
    pub fn get(&self, id: &str) -> Result<Option<Job>, CronError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1");
        let row = self
            .db
            .conn()
            .query_row(&sql, [id], read_job)
            .optional()
            .map_err(|e| self.db(e))?;
        row.transpose()
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Result<Vec<Job>, CronError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs ORDER BY created_at, id");
        let mut stmt = self.db.conn().prepare(&sql).map_err(|e| self.db(e))?;
        let rows = stmt
            .query_map([], read_job)
            .map_err(|e| self.db(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.db(e))?;
        rows.into_iter().collect()
    }

    /// A job by id, or else by case-insensitive name (an ambiguous name is an error).
    pub fn resolve(&self, reference: &str) -> Result<Job, CronError> {
        if let Some(job) = self.get(reference)? {
            return Ok(job);
        }
        let mut matches: Vec<Job> = self
            .list()?
            .into_iter()
            .filter(|j| j.name.eq_ignore_ascii_case(reference))
            .collect();
        match matches.len() {
            0 => Err(CronError::NotFound {
                reference: reference.to_owned(),
            }),
            1 => Ok(matches.remove(0)),
            _ => Err(CronError::Ambiguous {
                reference: reference.to_owned(),
                ids: matches
                    .iter()
                    .map(|j| j.id.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Jobs whose next run is due at `now` and that no live claim holds.
    pub fn due(&self, now: i64) -> Result<Vec<Job>, CronError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE enabled = 1 AND state = 'scheduled' \
             AND next_run_at IS NOT NULL AND next_run_at <= ?1 \
             AND (fire_owner IS NULL OR fire_expires <= ?1) ORDER BY next_run_at, id"
        );
        let mut stmt = self.db.conn().prepare(&sql).map_err(|e| self.db(e))?;
        let rows = stmt
            .query_map([now], read_job)
            .map_err(|e| self.db(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.db(e))?;
        rows.into_iter().collect()
    }

    /// Pauses a job: it keeps its record but no longer fires.
    pub fn pause(&mut self, id: &str, reason: Option<&str>, now: i64) -> Result<Job, CronError> {
        let job = self.existing(id)?;
        if matches!(job.state, JobState::Completed) {
            return Err(CronError::Retired { id: job.id });
        }
        self.write(|tx| {
            tx.execute(
                "UPDATE jobs SET enabled = 0, state = 'paused', next_run_at = NULL, \
                 paused_at = ?2, paused_reason = ?3 WHERE id = ?1",
                params![id, now, reason.unwrap_or("paused by operator")],
            )?;
            Ok(())
        })?;
        self.existing(id)
    }

    /// Resumes a paused (or errored) job from `now`.
    pub fn resume(&mut self, id: &str, now: i64) -> Result<Job, CronError> {
        let job = self.existing(id)?;
        if matches!(job.state, JobState::Completed) || job.repeat.exhausted_after(0) {
            return Err(CronError::Retired { id: job.id });
        }
        let next = match job.schedule_spec {
            Schedule::Once { at } if at < now - super::schedule::ONE_SHOT_PAST_GRACE_SECONDS => {
                return Err(CronError::OneShotPassed { id: job.id });
            }
            ref spec => spec.first_run(now),
        };
        let Some(next) = next else {
            return Err(CronError::NeverRuns {
                schedule: job.schedule,
            });
        };
        self.write(|tx| {
            tx.execute(
                "UPDATE jobs SET enabled = 1, state = 'scheduled', next_run_at = ?2, \
                 paused_at = NULL, paused_reason = NULL WHERE id = ?1",
                params![id, next],
            )?;
            Ok(())
        })?;
        self.existing(id)
    }

    /// Deletes a job and its ledger; true when it existed.
    pub fn remove(&mut self, id: &str) -> Result<bool, CronError> {
        self.write(|tx| Ok(tx.execute("DELETE FROM jobs WHERE id = ?1", [id])? == 1))
    }

    fn existing(&self, id: &str) -> Result<Job, CronError> {
        self.get(id)?.ok_or_else(|| CronError::NotFound {
            reference: id.to_owned(),
        })
    }

    /// Claims one fire of job `id` for `owner` with a lease of `ttl` seconds.
    ///
    /// A scheduled fire succeeds only while `next_run_at` still equals the observed occurrence and
    /// is due, the job is enabled and scheduled, and no live claim exists; it advances
    /// `next_run_at` and counts the repeat in the same transaction. A manual fire needs only the
    /// absence of a live claim. An expired claim found on the way is closed as lost.
    pub fn claim_fire(
        &mut self,
        id: &str,
        kind: FireKind,
        owner: &str,
        now: i64,
        ttl: i64,
    ) -> Result<ClaimOutcome, CronError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1");
        enum Step {
            Done(ClaimOutcome),
            Corrupt(CronError),
            Claimed(i64),
        }
        let step = self.write(|tx| {
            let job = match tx.query_row(&sql, [id], read_job).optional()? {
                None => return Ok(Step::Done(ClaimOutcome::Gone)),
                Some(Err(e)) => return Ok(Step::Corrupt(e)),
                Some(Ok(job)) => job,
            };
            if let Some(claim) = &job.fire_claim {
                if claim.expires_at > now {
                    return Ok(Step::Done(ClaimOutcome::Busy {
                        owner: claim.owner.clone(),
                    }));
                }
                close_expired(tx, &job, claim, now)?;
            }
            let (occurrence, next, completed) = match kind {
                FireKind::Manual => (None, job.next_run_at, job.repeat.completed),
                FireKind::Scheduled { occurrence } => {
                    let due = job.enabled
                        && job.state == JobState::Scheduled
                        && job.next_run_at == Some(occurrence)
                        && occurrence <= now;
                    if !due {
                        return Ok(Step::Done(ClaimOutcome::NotDue));
                    }
                    let next = if job.repeat.exhausted_after(1) {
                        None
                    } else {
                        job.schedule_spec.next_after(occurrence, now)
                    };
                    (
                        Some(occurrence),
                        next,
                        job.repeat.completed.saturating_add(1),
                    )
                }
            };
            // No row back: the occurrence already has its ledger row.
            let Some(fire_id) = tx
                .insert_returning_id(
                    "INSERT INTO fires (job_id, occurrence, owner, started_at, status) \
                     VALUES (?1, ?2, ?3, ?4, 'running') ON CONFLICT (job_id, occurrence) DO NOTHING \
                     RETURNING id",
                    params![id, occurrence, owner, now],
                )
                .optional()?
            else {
                return Ok(Step::Done(ClaimOutcome::NotDue));
            };
            let changed = tx.execute(
                "UPDATE jobs SET next_run_at = ?2, repeat_completed = ?3, fire_id = ?4, \
                 fire_owner = ?5, fire_occurrence = ?6, fire_claimed_at = ?7, \
                 fire_heartbeat_at = ?7, fire_expires = ?8 \
                 WHERE id = ?1 AND (fire_owner IS NULL OR fire_expires <= ?7)",
                params![
                    id,
                    next,
                    completed,
                    fire_id,
                    owner,
                    occurrence,
                    now,
                    now + ttl
                ],
            )?;
            if changed != 1 {
                return Err(db::Error::changed_rows(changed));
            }
            Ok(Step::Claimed(fire_id))
        })?;
        let fire_id = match step {
            Step::Done(o) => return Ok(o),
            Step::Corrupt(e) => return Err(e),
            Step::Claimed(fire_id) => fire_id,
        };
        match self.get(id)? {
            Some(job) => Ok(ClaimOutcome::Claimed(Box::new(Claimed {
                job,
                fire_id,
                owner: owner.to_owned(),
            }))),
            None => Ok(ClaimOutcome::Gone),
        }
    }

    /// Extends `owner`'s claim on job `id` to `now + ttl`.
    pub fn heartbeat_fire(
        &mut self,
        id: &str,
        owner: &str,
        now: i64,
        ttl: i64,
    ) -> Result<HeartbeatOutcome, CronError> {
        let changed = self.write(|tx| {
            tx.execute(
                "UPDATE jobs SET fire_heartbeat_at = ?3, fire_expires = ?4 \
                 WHERE id = ?1 AND fire_owner = ?2",
                params![id, owner, now, now + ttl],
            )
        })?;
        Ok(if changed == 1 {
            HeartbeatOutcome::Extended
        } else {
            HeartbeatOutcome::Lost
        })
    }

    /// Records the end of `owner`'s fire `fire_id` (fenced on the owner): last status, error and
    /// failure streak, releases the claim, and retires a job that has no further run.
    pub fn complete_fire(
        &mut self,
        id: &str,
        owner: &str,
        fire_id: i64,
        outcome: &RunOutcome,
        output_path: Option<&Path>,
        now: i64,
    ) -> Result<CompleteOutcome, CronError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1");
        let output = output_path.map(|p| p.to_string_lossy().into_owned());
        let status = if outcome.success { "ok" } else { "error" };
        let error = if outcome.success {
            None
        } else {
            Some(
                outcome
                    .error
                    .clone()
                    .unwrap_or_else(|| "the job failed".to_owned()),
            )
        };
        self.write(|tx| {
            let job = match tx.query_row(&sql, [id], read_job).optional()? {
                Some(Ok(job)) => job,
                _ => return Ok(CompleteOutcome::Lost),
            };
            let ours = job
                .fire_claim
                .as_ref()
                .is_some_and(|c| c.owner == owner && c.fire_id == fire_id);
            if !ours {
                tx.execute(
                    "UPDATE fires SET ended_at = ?2, status = 'discarded', error = ?3 \
                     WHERE id = ?1 AND status = 'running'",
                    params![fire_id, now, "the fire claim was lost before completion"],
                )?;
                return Ok(CompleteOutcome::Lost);
            }
            let streak = if outcome.success {
                0
            } else {
                job.failure_streak.saturating_add(1)
            };
            let (state, enabled, last_error) = retirement(&job, error.clone());
            let changed = tx.execute(
                "UPDATE jobs SET last_run_at = ?3, last_status = ?4, last_error = ?5, \
                 failure_streak = ?6, state = ?7, enabled = ?8, fire_id = NULL, \
                 fire_owner = NULL, fire_occurrence = NULL, fire_claimed_at = NULL, \
                 fire_heartbeat_at = NULL, fire_expires = NULL \
                 WHERE id = ?1 AND fire_owner = ?2",
                params![
                    id,
                    owner,
                    now,
                    status,
                    last_error,
                    streak,
                    state.as_str(),
                    enabled
                ],
            )?;
            if changed != 1 {
                return Ok(CompleteOutcome::Lost);
            }
            tx.execute(
                "UPDATE fires SET ended_at = ?2, status = ?3, error = ?4, output_path = ?5 \
                 WHERE id = ?1",
                params![fire_id, now, status, error, output],
            )?;
            prune_fires_in(tx, id, FIRE_HISTORY)?;
            Ok(CompleteOutcome::Recorded)
        })
    }

    /// Closes every claim whose lease expired without completion (its runner died or hung) as a
    /// failed run. Returns the ids of the jobs concerned.
    pub fn reap_expired_claims(&mut self, now: i64) -> Result<Vec<String>, CronError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE fire_owner IS NOT NULL AND fire_expires <= ?1"
        );
        self.write(|tx| {
            let jobs = {
                let mut stmt = tx.prepare(&sql)?;
                stmt.query_map([now], read_job)?
                    .collect::<Result<Vec<_>, _>>()?
            };
            let mut reaped = Vec::new();
            for job in jobs.into_iter().flatten() {
                if let Some(claim) = job.fire_claim.clone() {
                    close_expired(tx, &job, &claim, now)?;
                    reaped.push(job.id);
                }
            }
            Ok(reaped)
        })
    }

    /// Keeps only the newest `keep` ledger rows of a job (done with [`FIRE_HISTORY`] on every
    /// completion).
    pub fn prune_fires(&mut self, job_id: &str, keep: usize) -> Result<(), CronError> {
        self.write(|tx| prune_fires_in(tx, job_id, keep))
    }

    /// The fire ledger of a job, oldest first.
    pub fn fires(&self, job_id: &str) -> Result<Vec<Fire>, CronError> {
        let mut stmt = self
            .db
            .conn()
            .prepare(
                "SELECT id, job_id, occurrence, owner, started_at, ended_at, status, error, \
                 output_path FROM fires WHERE job_id = ?1 ORDER BY id",
            )
            .map_err(|e| self.db(e))?;
        stmt.query_map([job_id], |r| {
            Ok(Fire {
                id: r.get(0)?,
                job_id: r.get(1)?,
                occurrence: r.get(2)?,
                owner: r.get(3)?,
                started_at: r.get(4)?,
                ended_at: r.get(5)?,
                status: r.get(6)?,
                error: r.get(7)?,
                output_path: r.get(8)?,
            })
        })
        .map_err(|e| self.db(e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| self.db(e))
    }
}

/// A store-layer error of the cron store at `path`: a bare SQL error names the store file, any
/// other (busy, read-only, not a SQLite file, …) already says which file and what to do.
fn store_error(path: &Path, err: BoardError) -> CronError {
    match err {
        BoardError::Storage(StorageError::Sql(source)) => CronError::Db {
            path: path.to_owned(),
            source,
        },
        other => CronError::Store(other),
    }
}

/// Deletes all but the newest `keep` ledger rows of a job.
fn prune_fires_in(tx: &Tx<'_>, job_id: &str, keep: usize) -> Result<(), db::Error> {
    tx.execute(
        "DELETE FROM fires WHERE job_id = ?1 AND id <= \
         (SELECT id FROM fires WHERE job_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
        params![job_id, keep as i64],
    )?;
    Ok(())
}

/// The state a job moves to once a fire ends: retired when nothing more will run.
fn retirement(job: &Job, error: Option<String>) -> (JobState, bool, Option<String>) {
    if job.state != JobState::Scheduled || job.next_run_at.is_some() {
        return (job.state, job.enabled, error);
    }
    if !job.schedule_spec.is_recurring() || job.repeat.exhausted_after(0) {
        (JobState::Completed, false, error)
    } else {
        let hint = format!(
            "the schedule `{}` has no future occurrence; edit or remove the job",
            job.schedule
        );
        (JobState::Error, job.enabled, Some(error.unwrap_or(hint)))
    }
}

/// Closes an expired claim: the ledger row becomes `lost`, the job records a failure and is
/// retired if nothing more will run.
fn close_expired(tx: &Tx<'_>, job: &Job, claim: &FireClaim, now: i64) -> Result<(), db::Error> {
    let message = format!(
        "the runner {} stopped heartbeating its fire claim (it crashed or hung); the run's \
         result is unknown",
        claim.owner
    );
    tx.execute(
        "UPDATE fires SET ended_at = ?2, status = 'lost', error = ?3 \
         WHERE id = ?1 AND status = 'running'",
        params![claim.fire_id, now, message],
    )?;
    let (state, enabled, last_error) = retirement(job, Some(message));
    tx.execute(
        "UPDATE jobs SET last_run_at = ?3, last_status = 'error', last_error = ?4, \
         failure_streak = failure_streak + 1, state = ?5, enabled = ?6, fire_id = NULL, \
         fire_owner = NULL, fire_occurrence = NULL, fire_claimed_at = NULL, \
         fire_heartbeat_at = NULL, fire_expires = NULL WHERE id = ?1 AND fire_owner = ?2",
        params![
            job.id,
            claim.owner,
            now,
            last_error,
            state.as_str(),
            enabled
        ],
    )?;
    Ok(())
}

fn read_job(r: &Row<'_>) -> Result<Result<Job, CronError>, db::Error> {
    let id: String = r.get("id")?;
    let spec: String = r.get("schedule_spec")?;
    let state: String = r.get("state")?;
    let schedule_spec = match serde_json::from_str::<Schedule>(&spec) {
        Ok(s) => s,
        Err(e) => {
            return Ok(Err(CronError::Corrupt {
                id,
                message: format!("unreadable schedule_spec: {e}"),
            }));
        }
    };
    let Some(state) = JobState::parse(&state) else {
        return Ok(Err(CronError::Corrupt {
            id,
            message: format!("unknown state `{state}`"),
        }));
    };
    let fire_owner: Option<String> = r.get("fire_owner")?;
    let fire_claim = match fire_owner {
        Some(owner) => Some(FireClaim {
            fire_id: r.get::<_, Option<i64>>("fire_id")?.unwrap_or_default(),
            owner,
            occurrence: r.get("fire_occurrence")?,
            claimed_at: r
                .get::<_, Option<i64>>("fire_claimed_at")?
                .unwrap_or_default(),
            heartbeat_at: r
                .get::<_, Option<i64>>("fire_heartbeat_at")?
                .unwrap_or_default(),
            expires_at: r.get::<_, Option<i64>>("fire_expires")?.unwrap_or_default(),
        }),
        None => None,
    };
    let workdir: Option<String> = r.get("workdir")?;
    Ok(Ok(Job {
        id,
        name: r.get("name")?,
        prompt: r.get("prompt")?,
        schedule: r.get("schedule")?,
        schedule_spec,
        profile: r.get("profile")?,
        workdir: workdir.map(PathBuf::from),
        enabled: r.get("enabled")?,
        state,
        created_at: r.get("created_at")?,
        next_run_at: r.get("next_run_at")?,
        last_run_at: r.get("last_run_at")?,
        last_status: r.get("last_status")?,
        last_error: r.get("last_error")?,
        repeat: Repeat {
            times: r.get("repeat_times")?,
            completed: r.get("repeat_completed")?,
        },
        failure_streak: r.get("failure_streak")?,
        paused_at: r.get("paused_at")?,
        paused_reason: r.get("paused_reason")?,
        fire_claim,
    }))
}

fn default_name(prompt: &str) -> String {
    let name: String = prompt.trim().chars().take(50).collect();
    if name.is_empty() {
        "cron job".to_owned()
    } else {
        name
    }
}

/// `n` random bytes as lowercase hex, from the kernel's generator.
pub(crate) fn random_hex(n: usize) -> Result<String, CronError> {
    crate::proc::random::hex(n).map_err(|source| CronError::Random { source })
}

/// Creates `dir` (and parents) with mode 0700 for the directories it creates.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), CronError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| CronError::Io {
            path: dir.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        (dir, store)
    }

    #[test]
    fn the_store_opens_with_the_board_layers_pragmas_and_refusals() {
        let (_d, s) = store();
        let c = s.db.conn();
        let pragma = |name: &str| -> String {
            c.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, db::Value>(0))
                .map(|v| match v {
                    db::Value::Integer(n) => n.to_string(),
                    db::Value::Text(t) => t,
                    other => format!("{other:?}"),
                })
                .unwrap()
        };
        assert_eq!(pragma("journal_mode"), "wal");
        assert_eq!(pragma("synchronous"), "2", "FULL");
        assert_eq!(pragma("foreign_keys"), "1");
        assert_eq!(pragma("user_version"), SCHEMA_VERSION.to_string());

        // A jobs.db that is not SQLite is refused by the shared check and left as it was.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(cron_dir(dir.path())).unwrap();
        let path = cron_dir(dir.path()).join(STORE_FILE);
        std::fs::write(&path, b"my notes, not a database\n").unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                CronError::Store(BoardError::Storage(StorageError::NotSqlite { .. }))
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"my notes, not a database\n");
        assert!(!cron_dir(dir.path()).join("jobs.db-wal").exists());

        // Anything that is not a regular file is refused before SQLite sees it.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                CronError::Store(BoardError::Storage(StorageError::NotRegularFile { .. }))
            ),
            "{err}"
        );
    }

    fn new_job(schedule: Schedule, repeat: Option<u32>) -> NewJob {
        NewJob {
            name: Some("j".into()),
            prompt: "p".into(),
            schedule: schedule.describe(),
            schedule_spec: schedule,
            profile: "bot".into(),
            workdir: None,
            repeat,
        }
    }

    fn ok() -> RunOutcome {
        RunOutcome {
            success: true,
            output: String::new(),
            final_response: "done".into(),
            error: None,
        }
    }

    fn claimed(o: ClaimOutcome) -> Claimed {
        match o {
            ClaimOutcome::Claimed(c) => *c,
            other => panic!("expected a claim, got {other:?}"),
        }
    }

    #[test]
    fn a_recurring_fire_advances_before_it_runs_and_cannot_be_claimed_twice() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Interval { seconds: 60 }, None), 1_000)
            .unwrap();
        assert_eq!(job.id.len(), 12);
        assert_eq!(job.next_run_at, Some(1_060));
        assert!(s.due(1_059).unwrap().is_empty());
        let occ = FireKind::Scheduled { occurrence: 1_060 };
        let c = claimed(s.claim_fire(&job.id, occ, "a", 1_070, 300).unwrap());
        assert_eq!(c.job.next_run_at, Some(1_120), "advanced before running");
        assert_eq!(c.job.repeat.completed, 1);
        assert!(matches!(
            s.claim_fire(&job.id, occ, "b", 1_070, 300).unwrap(),
            ClaimOutcome::Busy { .. }
        ));
        assert!(
            s.due(1_300).unwrap().is_empty(),
            "a live claim hides the job"
        );
        let done = s
            .complete_fire(&job.id, "a", c.fire_id, &ok(), None, 1_080)
            .unwrap();
        assert_eq!(done, CompleteOutcome::Recorded);
        assert!(matches!(
            s.claim_fire(&job.id, occ, "b", 1_090, 300).unwrap(),
            ClaimOutcome::NotDue
        ));
        let j = s.get(&job.id).unwrap().unwrap();
        assert_eq!(j.last_status.as_deref(), Some("ok"));
        assert_eq!(j.fire_claim, None);
    }

    #[test]
    fn completion_is_fenced_on_the_claim_owner() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Interval { seconds: 60 }, None), 0)
            .unwrap();
        let c = claimed(
            s.claim_fire(&job.id, FireKind::Scheduled { occurrence: 60 }, "a", 60, 10)
                .unwrap(),
        );
        // a's lease expires; b takes the next occurrence over.
        let c2 = claimed(
            s.claim_fire(
                &job.id,
                FireKind::Scheduled { occurrence: 120 },
                "b",
                130,
                10,
            )
            .unwrap(),
        );
        assert_eq!(
            s.heartbeat_fire(&job.id, "a", 131, 10).unwrap(),
            HeartbeatOutcome::Lost
        );
        let late = s
            .complete_fire(&job.id, "a", c.fire_id, &ok(), None, 132)
            .unwrap();
        assert_eq!(
            late,
            CompleteOutcome::Lost,
            "a stale completion is discarded"
        );
        assert_eq!(
            s.heartbeat_fire(&job.id, "b", 133, 10).unwrap(),
            HeartbeatOutcome::Extended
        );
        let fires = s.fires(&job.id).unwrap();
        assert_eq!(fires[0].status, "lost");
        assert_eq!(fires[1].status, "running");
        let j = s.get(&job.id).unwrap().unwrap();
        assert_eq!(j.failure_streak, 1);
        assert_eq!(j.fire_claim.as_ref().map(|c| c.fire_id), Some(c2.fire_id));
    }

    #[test]
    fn a_one_shot_is_counted_before_it_runs_and_retires_after() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Once { at: 500 }, None), 100)
            .unwrap();
        assert_eq!(
            job.repeat,
            Repeat {
                times: Some(1),
                completed: 0
            }
        );
        let c = claimed(
            s.claim_fire(
                &job.id,
                FireKind::Scheduled { occurrence: 500 },
                "a",
                500,
                60,
            )
            .unwrap(),
        );
        assert_eq!(c.job.repeat.completed, 1);
        assert_eq!(c.job.next_run_at, None);
        let fail = RunOutcome {
            success: false,
            error: Some("boom".into()),
            ..ok()
        };
        s.complete_fire(&job.id, "a", c.fire_id, &fail, None, 510)
            .unwrap();
        let j = s.get(&job.id).unwrap().unwrap();
        assert_eq!(j.state, JobState::Completed);
        assert!(!j.enabled);
        assert_eq!(j.last_error.as_deref(), Some("boom"));
        assert_eq!(j.failure_streak, 1);
        assert!(s.due(10_000).unwrap().is_empty());
    }

    #[test]
    fn a_crashed_one_shot_is_not_run_again() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Once { at: 500 }, None), 100)
            .unwrap();
        claimed(
            s.claim_fire(
                &job.id,
                FireKind::Scheduled { occurrence: 500 },
                "a",
                500,
                60,
            )
            .unwrap(),
        );
        assert_eq!(s.reap_expired_claims(600).unwrap(), vec![job.id.clone()]);
        let j = s.get(&job.id).unwrap().unwrap();
        assert_eq!(j.state, JobState::Completed);
        assert_eq!(j.last_status.as_deref(), Some("error"));
        assert!(s.due(10_000).unwrap().is_empty());
    }

    #[test]
    fn repeat_limits_recurring_runs() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Interval { seconds: 60 }, Some(2)), 0)
            .unwrap();
        for (i, now) in [60, 120].into_iter().enumerate() {
            let c = claimed(
                s.claim_fire(
                    &job.id,
                    FireKind::Scheduled { occurrence: now },
                    "a",
                    now,
                    30,
                )
                .unwrap(),
            );
            assert_eq!(c.job.repeat.completed, i as u32 + 1);
            s.complete_fire(&job.id, "a", c.fire_id, &ok(), None, now + 1)
                .unwrap();
        }
        let j = s.get(&job.id).unwrap().unwrap();
        assert_eq!(j.state, JobState::Completed);
        assert_eq!(j.next_run_at, None);
    }

    #[test]
    fn manual_fire_leaves_the_schedule_alone() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Interval { seconds: 60 }, None), 0)
            .unwrap();
        let c = claimed(
            s.claim_fire(&job.id, FireKind::Manual, "m", 10, 30)
                .unwrap(),
        );
        assert_eq!(c.job.next_run_at, Some(60));
        assert_eq!(c.job.repeat.completed, 0);
        let c2 = claimed(
            s.claim_fire(&job.id, FireKind::Manual, "m", 100, 30)
                .unwrap_or_else(|e| panic!("{e}")),
        );
        assert_ne!(c.fire_id, c2.fire_id);
    }

    #[test]
    fn the_ledger_keeps_the_newest_fires() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Interval { seconds: 60 }, None), 0)
            .unwrap();
        for now in [60, 120, 180] {
            let kind = FireKind::Scheduled { occurrence: now };
            let c = claimed(s.claim_fire(&job.id, kind, "a", now, 30).unwrap());
            s.complete_fire(&job.id, "a", c.fire_id, &ok(), None, now)
                .unwrap();
        }
        s.prune_fires(&job.id, 2).unwrap();
        let kept: Vec<_> = s
            .fires(&job.id)
            .unwrap()
            .iter()
            .map(|f| f.occurrence)
            .collect();
        assert_eq!(kept, vec![Some(120), Some(180)]);
        s.prune_fires(&job.id, 5).unwrap();
        assert_eq!(s.fires(&job.id).unwrap().len(), 2);
    }

    #[test]
    fn pause_resume_remove_and_resolve_by_name() {
        let (_d, mut s) = store();
        let job = s
            .add(new_job(Schedule::Interval { seconds: 60 }, None), 0)
            .unwrap();
        assert_eq!(s.resolve("J").unwrap().id, job.id);
        let p = s.pause(&job.id, None, 5).unwrap();
        assert_eq!(
            (p.state, p.enabled, p.next_run_at),
            (JobState::Paused, false, None)
        );
        assert!(s.due(1_000).unwrap().is_empty());
        let r = s.resume(&job.id, 1_000).unwrap();
        assert_eq!((r.state, r.next_run_at), (JobState::Scheduled, Some(1_060)));
        s.add(new_job(Schedule::Interval { seconds: 60 }, None), 0)
            .unwrap();
        assert!(matches!(s.resolve("j"), Err(CronError::Ambiguous { .. })));
        assert!(s.remove(&job.id).unwrap());
        assert!(matches!(
            s.resolve(&job.id),
            Err(CronError::NotFound { .. })
        ));
    }
}
