//! The leanest hand-written transactions that write what the board's transitions write — the
//! honest limit of each transition (issue 32 item 3), measured by `kanban-bench` beside the bare
//! one-row loop.
//!
//! Each transition here writes exactly the rows the board's writes (and so the same indexes, on
//! a board made by `Board::open_path`, whose schema it shares), with cached statements, in one
//! transaction, and nothing else: no read before the write, no fence, no JSON encoding beyond a
//! payload of the same size:
//!
//! * create: the task row (`INSERT INTO tasks`) and its `created` event;
//! * claim: the run row, the task row's claim (`UPDATE tasks … WHERE status = 'ready'`), the
//!   `claimed` event;
//! * heartbeat: the task row's and the run row's lease, the `heartbeat` event;
//! * complete: the task row (`done`), the run row (closed), the `completed` event.
//!
//! The same four on SQLite ([`LeanSqlite`]) and PostgreSQL ([`LeanPg`]). Write-ahead log volume is
//! read here too: SQLite frames (a passive checkpoint's `log` count after a truncating one) and
//! PostgreSQL bytes (`pg_current_wal_insert_lsn` before and after).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};

/// The `created` payload's shape and size (as the board writes it for a plain task).
const CREATED: &str = r#"{"assignee":null,"status":"ready","parents":[],"tenant":null,"workspace_kind":"scratch","workspace_path":null}"#;
/// The `completed` payload (a summary, as the bench's completions carry).
const COMPLETED: &str = r#"{"result":null,"summary":"done"}"#;

fn claimed(lock: &str, expires: i64, run: i64) -> String {
    format!(r#"{{"lock":"{lock}","expires":{expires},"run_id":{run},"dispatcher":false}}"#)
}

/// The four transitions, each one transaction (µs per operation over a batch).
pub trait Lean {
    fn create(&mut self, ids: &[String], now: i64) -> anyhow::Result<f64>;
    /// Claims each task; returns µs per claim and the run ids.
    fn claim(&mut self, ids: &[String], now: i64) -> anyhow::Result<(f64, Vec<i64>)>;
    fn heartbeat(&mut self, ids: &[String], runs: &[i64], now: i64) -> anyhow::Result<f64>;
    fn complete(&mut self, ids: &[String], runs: &[i64], now: i64) -> anyhow::Result<f64>;
}

fn per_op(n: usize, start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64
}

/// [`Lean`] on a SQLite board file with the board's pragmas (WAL, `synchronous=FULL`).
pub struct LeanSqlite {
    conn: rusqlite::Connection,
}

const LOCK: &str = "bench:lean";
const TTL: i64 = 900;

impl LeanSqlite {
    /// Opens `path`, a board file `Board::open_path` made (so its schema and indexes).
    pub fn open(path: &Path) -> anyhow::Result<LeanSqlite> {
        let conn =
            rusqlite::Connection::open(path).with_context(|| format!("open {}", path.display()))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; \
             PRAGMA busy_timeout=120000;",
        )?;
        Ok(LeanSqlite { conn })
    }

    fn tx(
        &self,
        body: impl FnOnce(&rusqlite::Connection) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        match body(&self.conn) {
            Ok(()) => {
                self.conn.prepare_cached("COMMIT")?.execute([])?;
                Ok(())
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn event(
        c: &rusqlite::Connection,
        id: &str,
        run: Option<i64>,
        kind: &str,
        payload: Option<&str>,
        now: i64,
    ) -> anyhow::Result<()> {
        c.prepare_cached(
            "INSERT INTO task_events (task_id, run_id, kind, payload, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(rusqlite::params![id, run, kind, payload, now])?;
        Ok(())
    }
}

impl Lean for LeanSqlite {
    fn create(&mut self, ids: &[String], now: i64) -> anyhow::Result<f64> {
        let start = Instant::now();
        for id in ids {
            self.tx(|c| {
                c.prepare_cached(
                    "INSERT INTO tasks (id, title, status, priority, created_at, workspace_kind) \
                     VALUES (?1, ?2, 'ready', 0, ?3, 'scratch')",
                )?
                .execute(rusqlite::params![id, format!("lean {id}"), now])?;
                Self::event(c, id, None, "created", Some(CREATED), now)
            })?;
        }
        Ok(per_op(ids.len(), start))
    }

    fn claim(&mut self, ids: &[String], now: i64) -> anyhow::Result<(f64, Vec<i64>)> {
        let mut runs = Vec::with_capacity(ids.len());
        let start = Instant::now();
        for id in ids {
            self.tx(|c| {
                let run: i64 = c
                    .prepare_cached(
                        "INSERT INTO task_runs (task_id, profile, status, claim_lock, \
                         claim_expires, max_runtime_seconds, last_heartbeat_at, started_at) \
                         VALUES (?1, NULL, 'running', ?2, ?3, NULL, ?4, ?4) RETURNING id",
                    )?
                    .query_row(rusqlite::params![id, LOCK, now + TTL, now], |r| r.get(0))?;
                let n = c
                    .prepare_cached(
                        "UPDATE tasks SET status = 'running', claim_lock = ?2, claim_expires = ?3, \
                         started_at = ?4, last_heartbeat_at = ?4, current_run_id = ?5 \
                         WHERE id = ?1 AND status = 'ready' AND claim_lock IS NULL",
                    )?
                    .execute(rusqlite::params![id, LOCK, now + TTL, now, run])?;
                if n != 1 {
                    bail!("lean claim of {id} found no ready task");
                }
                Self::event(
                    c,
                    id,
                    Some(run),
                    "claimed",
                    Some(&claimed(LOCK, now + TTL, run)),
                    now,
                )?;
                runs.push(run);
                Ok(())
            })?;
        }
        Ok((per_op(ids.len(), start), runs))
    }

    fn heartbeat(&mut self, ids: &[String], runs: &[i64], now: i64) -> anyhow::Result<f64> {
        let start = Instant::now();
        for (id, run) in ids.iter().zip(runs) {
            self.tx(|c| {
                c.prepare_cached(
                    "UPDATE tasks SET claim_expires = ?2, last_heartbeat_at = ?3 WHERE id = ?1",
                )?
                .execute(rusqlite::params![id, now + TTL, now])?;
                c.prepare_cached(
                    "UPDATE task_runs SET claim_expires = ?2, last_heartbeat_at = ?3 WHERE id = ?1",
                )?
                .execute(rusqlite::params![run, now + TTL, now])?;
                Self::event(c, id, Some(*run), "heartbeat", None, now)
            })?;
        }
        Ok(per_op(ids.len(), start))
    }

    fn complete(&mut self, ids: &[String], runs: &[i64], now: i64) -> anyhow::Result<f64> {
        let start = Instant::now();
        for (id, run) in ids.iter().zip(runs) {
            self.tx(|c| {
                c.prepare_cached(
                    "UPDATE tasks SET status = 'done', completed_at = ?2, claim_lock = NULL, \
                     claim_expires = NULL, current_run_id = NULL WHERE id = ?1",
                )?
                .execute(rusqlite::params![id, now])?;
                c.prepare_cached(
                    "UPDATE task_runs SET status = 'done', outcome = 'completed', \
                     summary = 'done', ended_at = ?2 WHERE id = ?1",
                )?
                .execute(rusqlite::params![run, now])?;
                Self::event(c, id, Some(*run), "completed", Some(COMPLETED), now)
            })?;
        }
        Ok(per_op(ids.len(), start))
    }
}

/// WAL frames written to the SQLite board file at `path` by `body` (its own connection: a
/// truncating checkpoint first, then a passive one reports the frames since).
pub fn sqlite_wal_frames(
    path: &Path,
    body: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<i64> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch("PRAGMA busy_timeout=120000;")?;
    let (busy, _, _): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    if busy != 0 {
        bail!("the WAL of {} could not be reset (busy)", path.display());
    }
    body()?;
    let (busy, log, _): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    if busy != 0 || log < 0 {
        bail!(
            "the WAL of {} could not be read (busy {busy}, log {log})",
            path.display()
        );
    }
    Ok(log)
}

/// [`Lean`] on a PostgreSQL board database (its schema made by `Board::open_path`).
pub struct LeanPg {
    client: kanban_pgwire::Client,
}

impl LeanPg {
    pub fn new(client: kanban_pgwire::Client) -> LeanPg {
        LeanPg { client }
    }

    fn tx(
        &mut self,
        body: impl FnOnce(&mut kanban_pgwire::Client) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.client.batch("BEGIN")?;
        match body(&mut self.client) {
            Ok(()) => {
                self.client.batch("COMMIT")?;
                Ok(())
            }
            Err(e) => {
                let _ = self.client.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn event(
        c: &mut kanban_pgwire::Client,
        id: &str,
        run: Option<i64>,
        kind: &str,
        payload: Option<&str>,
        now: i64,
    ) -> anyhow::Result<()> {
        use kanban_pgwire::Value as V;
        c.execute(
            "INSERT INTO task_events (task_id, run_id, kind, payload, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
            &[
                V::Text(id.to_owned()),
                run.map_or(V::Null, V::Int),
                V::Text(kind.to_owned()),
                payload.map_or(V::Null, |p| V::Text(p.to_owned())),
                V::Int(now),
            ],
        )?;
        Ok(())
    }
}

impl Lean for LeanPg {
    fn create(&mut self, ids: &[String], now: i64) -> anyhow::Result<f64> {
        use kanban_pgwire::Value as V;
        let start = Instant::now();
        for id in ids {
            self.tx(|c| {
                c.execute(
                    "INSERT INTO tasks (id, title, status, priority, created_at, workspace_kind) \
                     VALUES ($1, $2, 'ready', 0, $3, 'scratch')",
                    &[
                        V::Text(id.clone()),
                        V::Text(format!("lean {id}")),
                        V::Int(now),
                    ],
                )?;
                Self::event(c, id, None, "created", Some(CREATED), now)
            })?;
        }
        Ok(per_op(ids.len(), start))
    }

    fn claim(&mut self, ids: &[String], now: i64) -> anyhow::Result<(f64, Vec<i64>)> {
        use kanban_pgwire::Value as V;
        let mut runs = Vec::with_capacity(ids.len());
        let start = Instant::now();
        for id in ids {
            self.tx(|c| {
                let row = c.query_one(
                    "INSERT INTO task_runs (task_id, profile, status, claim_lock, claim_expires, \
                     max_runtime_seconds, last_heartbeat_at, started_at) \
                     VALUES ($1, NULL, 'running', $2, $3, NULL, $4, $4) RETURNING id",
                    &[
                        V::Text(id.clone()),
                        V::Text(LOCK.to_owned()),
                        V::Int(now + TTL),
                        V::Int(now),
                    ],
                )?;
                let Some(run) = row.get(0).and_then(V::as_i64) else {
                    bail!("lean claim of {id}: no run id");
                };
                let n = c.execute(
                    "UPDATE tasks SET status = 'running', claim_lock = $2, claim_expires = $3, \
                     started_at = $4, last_heartbeat_at = $4, current_run_id = $5 \
                     WHERE id = $1 AND status = 'ready' AND claim_lock IS NULL",
                    &[
                        V::Text(id.clone()),
                        V::Text(LOCK.to_owned()),
                        V::Int(now + TTL),
                        V::Int(now),
                        V::Int(run),
                    ],
                )?;
                if n != 1 {
                    bail!("lean claim of {id} found no ready task");
                }
                Self::event(
                    c,
                    id,
                    Some(run),
                    "claimed",
                    Some(&claimed(LOCK, now + TTL, run)),
                    now,
                )?;
                runs.push(run);
                Ok(())
            })?;
        }
        Ok((per_op(ids.len(), start), runs))
    }

    fn heartbeat(&mut self, ids: &[String], runs: &[i64], now: i64) -> anyhow::Result<f64> {
        use kanban_pgwire::Value as V;
        let start = Instant::now();
        for (id, run) in ids.iter().zip(runs) {
            self.tx(|c| {
                c.execute(
                    "UPDATE tasks SET claim_expires = $2, last_heartbeat_at = $3 WHERE id = $1",
                    &[V::Text(id.clone()), V::Int(now + TTL), V::Int(now)],
                )?;
                c.execute(
                    "UPDATE task_runs SET claim_expires = $2, last_heartbeat_at = $3 WHERE id = $1",
                    &[V::Int(*run), V::Int(now + TTL), V::Int(now)],
                )?;
                Self::event(c, id, Some(*run), "heartbeat", None, now)
            })?;
        }
        Ok(per_op(ids.len(), start))
    }

    fn complete(&mut self, ids: &[String], runs: &[i64], now: i64) -> anyhow::Result<f64> {
        use kanban_pgwire::Value as V;
        let start = Instant::now();
        for (id, run) in ids.iter().zip(runs) {
            self.tx(|c| {
                c.execute(
                    "UPDATE tasks SET status = 'done', completed_at = $2, claim_lock = NULL, \
                     claim_expires = NULL, current_run_id = NULL WHERE id = $1",
                    &[V::Text(id.clone()), V::Int(now)],
                )?;
                c.execute(
                    "UPDATE task_runs SET status = 'done', outcome = 'completed', \
                     summary = 'done', ended_at = $2 WHERE id = $1",
                    &[V::Int(*run), V::Int(now)],
                )?;
                Self::event(c, id, Some(*run), "completed", Some(COMPLETED), now)
            })?;
        }
        Ok(per_op(ids.len(), start))
    }
}

/// WAL bytes the PostgreSQL server wrote while `body` ran (read on `client`, its own
/// connection; other sessions' writes count too, so nothing else may write meanwhile).
pub fn pg_wal_bytes(
    client: &mut kanban_pgwire::Client,
    body: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<i64> {
    let lsn = |c: &mut kanban_pgwire::Client| -> anyhow::Result<String> {
        let row = c.query_one("SELECT pg_current_wal_insert_lsn()::text", &[])?;
        row.get(0)
            .and_then(kanban_pgwire::Value::as_str)
            .map(str::to_owned)
            .context("no WAL position")
    };
    let before = lsn(client)?;
    body()?;
    let row = client.query_one(
        "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint",
        &[kanban_pgwire::Value::Text(before)],
    )?;
    let bytes = row
        .get(0)
        .and_then(kanban_pgwire::Value::as_i64)
        .context("no WAL difference")?;
    if bytes <= 0 {
        bail!("the server reports {bytes} WAL bytes for a write: not a measurement");
    }
    Ok(bytes)
}
