//! `kanban-bench`: the benchmark suite behind `cargo xtask bench` (ARCHITECTURE.md §10 and the
//! README's Benchmarks section).
//!
//! Honesty rules the suite follows:
//!
//! * every row is the median (p50) and p90 of at least 20 samples, or says in its `samples` column
//!   that it is one long measurement;
//! * every baseline is measured in the same run, interleaved with what it is compared against
//!   (round by round), and a ratio is the median of the per-round ratios;
//! * figures of other systems are never quoted: only what this run measured is reported;
//! * a measurement that fails (a process that died, an unreadable `/proc` file, a sample that
//!   never came) is an error with a message, never a panic and never a 0 % or 0 MB figure;
//! * the board is driven through its API; raw SQL appears only in the bare-SQLite baselines.
//!
//! Rows: board operations (create / claim / heartbeat / complete, one write transaction each,
//! and the dispatcher's batched claim, a hundred in one transaction) against a bare rusqlite
//! `BEGIN IMMEDIATE; UPDATE one row; COMMIT` loop with the same pragmas, both with cached
//! statements and without; `recompute_ready` and dispatch ticks on 10 000- and
//! 100 000-task boards, each next to one bare commit; a 100-claim tick with a no-op spawner and
//! one with real worker processes (`kanban dispatch --once`); process start, end-to-end tasks/s,
//! `kanban create` → `worker_registered` latency with seeded random arrival times, dispatcher idle
//! CPU (20 windows of 500 ms), peak RSS, and the web view (`kanban_tests::web_bench`).
//!
//! Prints a markdown table and writes it to `--out PATH` and the same rows as JSON to
//! `--json PATH` when given.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail, ensure};
use kanban_runtime::board::{
    self, Board, ClaimOutcome, ClaimSpec, Fence, NewTask, OpenOptions, Status,
};
use kanban_runtime::clock::SystemClock;
use kanban_runtime::config::{Config, ProfileConfig};
use kanban_runtime::db::target::BoardLocation;
use kanban_runtime::dispatch::{self, NoSpawn, Settings};
use kanban_tests::lean::{Lean, LeanPg, LeanSqlite};

/// A progress line on stderr. A closed stderr (its reader went away, as in
/// `cargo xtask bench 2>&1 | head`) is ignored: `eprintln!` panics there, and the panic's own
/// message cannot be printed either, so the bench died with exit code 101 and no word.
macro_rules! progress {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Samples per row (the issue asks for at least 20).
const SAMPLES: usize = 20;
/// Board operations per sample (one batch).
const BATCH: usize = 100;
/// One sample of the idle dispatcher's CPU.
const IDLE_WINDOW: Duration = Duration::from_millis(500);
/// Seed of the random arrival times (fixed: two runs draw the same gaps).
const SEED: u64 = 0x6b61_6e62_616e;

/// One table row, also written as JSON.
struct Row {
    measure: String,
    /// `n = 20`, or what the one long measurement was.
    samples: String,
    value: String,
    baseline: String,
    ratio: String,
    json: serde_json::Value,
}

/// Median and p90 (nearest rank) of a set of samples.
#[derive(Debug, Clone, Copy)]
struct Stats {
    n: usize,
    p50: f64,
    p90: f64,
}

fn stats(what: &str, mut v: Vec<f64>) -> anyhow::Result<Stats> {
    ensure!(!v.is_empty(), "{what}: no sample was taken");
    ensure!(
        v.iter().all(|x| x.is_finite()),
        "{what}: a sample is not a finite number"
    );
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Ok(Stats {
        n: v.len(),
        p50: rank(0.5),
        p90: rank(0.9),
    })
}

fn stats_json(s: Stats, unit: &str) -> serde_json::Value {
    serde_json::json!({ "n": s.n, "p50": s.p50, "p90": s.p90, "unit": unit })
}

/// splitmix64: a small seeded generator for the arrival gaps (no dependency needed).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)` milliseconds.
    fn gap(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(lo_ms + self.next_u64() % (hi_ms - lo_ms))
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Microseconds per operation of a batch of `n` that took `d`.
fn us_per_op(n: usize, d: Duration) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

/// Operations a board transition and its lean twin take turns with, in [`board_ops`].
const CHUNK: usize = 10;

/// Runs [`BATCH`] operations of `lean` and of `board`, in alternating chunks of [`CHUNK`]
/// (each closure gets the chunk's index range and returns the µs it took), the side that goes
/// first alternating too; µs per operation of each, `(lean, board)`.
fn paired_chunks(
    mut lean: impl FnMut(std::ops::Range<usize>) -> anyhow::Result<f64>,
    mut board: impl FnMut(std::ops::Range<usize>) -> anyhow::Result<f64>,
) -> anyhow::Result<(f64, f64)> {
    let (mut lean_us, mut board_us) = (0.0, 0.0);
    for (i, start) in (0..BATCH).step_by(CHUNK).enumerate() {
        let range = start..(start + CHUNK).min(BATCH);
        if i % 2 == 0 {
            lean_us += lean(range.clone())?;
            board_us += board(range)?;
        } else {
            board_us += board(range.clone())?;
            lean_us += lean(range)?;
        }
    }
    Ok((lean_us / BATCH as f64, board_us / BATCH as f64))
}

/// A bare SQLite table with a fresh board's pragmas (WAL, `synchronous=FULL`, 2 KiB pages,
/// SQLite's default autocheckpoint): the physical limit of one commit.
struct Bare {
    conn: rusqlite::Connection,
}

impl Bare {
    fn open(dir: &Path) -> anyhow::Result<Bare> {
        let conn = rusqlite::Connection::open(dir.join("bare.db"))?;
        conn.execute_batch(
            "PRAGMA page_size=2048; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
             PRAGMA foreign_keys=ON; PRAGMA busy_timeout=120000;
             CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL);",
        )?;
        for i in 0..BATCH {
            conn.execute("INSERT INTO t(id, v) VALUES (?1, 0)", [i as i64])?;
        }
        Ok(Bare { conn })
    }

    /// `n` commits of one row each, statements prepared afresh each time (µs per commit).
    fn uncached(&self, n: usize) -> anyhow::Result<f64> {
        let start = Instant::now();
        for i in 0..n {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            self.conn
                .execute("UPDATE t SET v = v + 1 WHERE id = ?1", [(i % BATCH) as i64])?;
            self.conn.execute_batch("COMMIT")?;
        }
        Ok(us_per_op(n, start.elapsed()))
    }

    /// `n` commits of one row each with cached statements (µs per commit).
    fn cached(&self, n: usize) -> anyhow::Result<f64> {
        let start = Instant::now();
        for i in 0..n {
            self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            self.conn
                .prepare_cached("UPDATE t SET v = v + 1 WHERE id = ?1")?
                .execute([(i % BATCH) as i64])?;
            self.conn.prepare_cached("COMMIT")?.execute([])?;
        }
        Ok(us_per_op(n, start.elapsed()))
    }
}

/// Per-round samples (µs per operation) of the board operations and their baselines.
#[derive(Default)]
struct OpSamples {
    bare: Vec<f64>,
    bare_cached: Vec<f64>,
    create: Vec<f64>,
    claim: Vec<f64>,
    claim_batched: Vec<f64>,
    heartbeat: Vec<f64>,
    complete: Vec<f64>,
    /// The leanest hand-written transactions writing the same rows (`kanban_tests::lean`).
    lean_create: Vec<f64>,
    lean_claim: Vec<f64>,
    lean_heartbeat: Vec<f64>,
    lean_complete: Vec<f64>,
}

/// [`SAMPLES`] rounds; each runs both bare loops and then a batch of each board operation, so
/// every figure has a baseline taken seconds apart, under the same load.
fn board_ops(dir: &Path, bare: &Bare) -> anyhow::Result<OpSamples> {
    let board = Board::open_path(&dir.join("ops.db"), &OpenOptions::create())?;
    // The lean transactions' own board file: the same schema and indexes.
    drop(Board::open_path(
        &dir.join("lean.db"),
        &OpenOptions::create(),
    )?);
    let mut lean = LeanSqlite::open(&dir.join("lean.db"))?;
    ops_rounds(&board, &mut lean, |s| {
        s.bare.push(bare.uncached(BATCH)?);
        s.bare_cached.push(bare.cached(BATCH)?);
        Ok(())
    })
}

/// `n` tasks created one transaction each (titles `{prefix} i`); their ids.
fn board_creates(board: &Board, n: usize, prefix: &str, t: i64) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let created = board.create_task(
            &NewTask {
                title: format!("{prefix} {i}"),
                ..NewTask::default()
            },
            t,
        )?;
        ids.push(created.id);
    }
    Ok(ids)
}

/// Each task claimed one transaction each; the run ids.
fn board_claims(
    board: &Board,
    ids: &[String],
    spec: &ClaimSpec,
    t: i64,
) -> anyhow::Result<Vec<i64>> {
    let mut runs = Vec::with_capacity(ids.len());
    for id in ids {
        match board.claim(id, spec, t)? {
            ClaimOutcome::Claimed(c) => runs.push(c.run_id),
            ClaimOutcome::Lost(r) => bail!("bench claim of {id} lost: {r}"),
        }
    }
    Ok(runs)
}

/// A heartbeat of each claimed task (claim `lock`), one transaction each.
fn board_heartbeats(
    board: &Board,
    ids: &[String],
    runs: &[i64],
    lock: &str,
    t: i64,
) -> anyhow::Result<()> {
    for (id, run) in ids.iter().zip(runs) {
        let fence = Fence {
            claim_lock: Some(lock.to_owned()),
            run_id: Some(*run),
        };
        board
            .heartbeat(id, &fence, None, 900, t)?
            .into_result()
            .map_err(|r| anyhow::anyhow!("bench heartbeat of {id} refused: {r}"))?;
    }
    Ok(())
}

/// Each claimed task completed with a summary, one transaction each.
fn board_completions(board: &Board, ids: &[String], runs: &[i64], t: i64) -> anyhow::Result<()> {
    for (id, run) in ids.iter().zip(runs) {
        let completion = board::Completion {
            expected_run_id: Some(*run),
            summary: Some("done".to_owned()),
            ..Default::default()
        };
        board
            .complete(id, &completion, t)?
            .into_result()
            .map_err(|r| anyhow::anyhow!("bench completion of {id} refused: {r}"))?;
    }
    Ok(())
}

/// The rounds of [`board_ops`] on `board`, each after `bare` took its baseline samples.
fn ops_rounds(
    board: &Board,
    lean: &mut dyn Lean,
    mut bare: impl FnMut(&mut OpSamples) -> anyhow::Result<()>,
) -> anyhow::Result<OpSamples> {
    let t = now();
    let spec = ClaimSpec {
        lock: "bench:1".to_owned(),
        ttl_seconds: 900,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    let mut s = OpSamples::default();
    for round in 0..SAMPLES {
        bare(&mut s)?;

        // Each transition against its lean twin in alternating chunks of [`CHUNK`] (which side
        // goes first alternates too), so both see the same disk and the same load: a round's
        // ratio compares operations milliseconds apart, not batches seconds apart.
        let lean_ids: Vec<String> = (0..BATCH).map(|i| format!("t_l{round:02}{i:05}")).collect();
        let mut ids = Vec::with_capacity(BATCH);
        let (lean_us, board_us) = paired_chunks(
            |r| Ok(lean.create(&lean_ids[r.clone()], t)? * r.len() as f64),
            |r| {
                let start = Instant::now();
                ids.extend(board_creates(
                    board,
                    r.len(),
                    &format!("task {round}.{}", r.start),
                    t,
                )?);
                Ok(start.elapsed().as_secs_f64() * 1e6)
            },
        )?;
        s.lean_create.push(lean_us);
        s.create.push(board_us);

        // A second batch for the batched claim (created untimed).
        let mut batch_ids = Vec::with_capacity(BATCH);
        for i in 0..BATCH {
            let created = board.create_task(
                &NewTask {
                    title: format!("batched task {round}.{i}"),
                    ..NewTask::default()
                },
                t,
            )?;
            batch_ids.push((created.id, Status::Ready));
        }

        let mut lean_runs = Vec::with_capacity(BATCH);
        let mut runs = Vec::with_capacity(BATCH);
        let (lean_us, board_us) = paired_chunks(
            |r| {
                let (us, chunk) = lean.claim(&lean_ids[r.clone()], t)?;
                lean_runs.extend(chunk);
                Ok(us * r.len() as f64)
            },
            |r| {
                let start = Instant::now();
                runs.extend(board_claims(board, &ids[r], &spec, t)?);
                Ok(start.elapsed().as_secs_f64() * 1e6)
            },
        )?;
        s.lean_claim.push(lean_us);
        s.claim.push(board_us);

        // The dispatcher's path: a tick's whole batch in one transaction.
        let start = Instant::now();
        let outcomes = board.claim_batch(&batch_ids, &spec, t)?;
        s.claim_batched.push(us_per_op(BATCH, start.elapsed()));
        let mut batch_runs = Vec::with_capacity(BATCH);
        for ((id, _), outcome) in batch_ids.iter().zip(outcomes) {
            match outcome? {
                ClaimOutcome::Claimed(c) => batch_runs.push(c.run_id),
                ClaimOutcome::Lost(r) => bail!("bench batched claim of {id} lost: {r}"),
            }
        }

        let (lean_us, board_us) = paired_chunks(
            |r| {
                Ok(
                    lean.heartbeat(&lean_ids[r.clone()], &lean_runs[r.clone()], t + 1)?
                        * r.len() as f64,
                )
            },
            |r| {
                let start = Instant::now();
                board_heartbeats(board, &ids[r.clone()], &runs[r], &spec.lock, t + 1)?;
                Ok(start.elapsed().as_secs_f64() * 1e6)
            },
        )?;
        s.lean_heartbeat.push(lean_us);
        s.heartbeat.push(board_us);

        let (lean_us, board_us) = paired_chunks(
            |r| {
                Ok(
                    lean.complete(&lean_ids[r.clone()], &lean_runs[r.clone()], t + 2)?
                        * r.len() as f64,
                )
            },
            |r| {
                let start = Instant::now();
                board_completions(board, &ids[r.clone()], &runs[r], t + 2)?;
                Ok(start.elapsed().as_secs_f64() * 1e6)
            },
        )?;
        s.lean_complete.push(lean_us);
        s.complete.push(board_us);
        // Untimed: the batch-claimed tasks are completed too, so every round ends on a board of
        // done tasks only.
        for ((id, _), run) in batch_ids.iter().zip(&batch_runs) {
            let completion = board::Completion {
                expected_run_id: Some(*run),
                ..Default::default()
            };
            board
                .complete(id, &completion, t + 2)?
                .into_result()
                .map_err(|r| anyhow::anyhow!("bench completion of {id} refused: {r}"))?;
        }
    }
    Ok(s)
}

/// The PostgreSQL rows' server: started by the bench with durable commits (fsync,
/// `synchronous_commit`, full-page writes at their defaults), on a Unix socket.
fn pg_cluster() -> anyhow::Result<kanban_pgwire::cluster::TestCluster> {
    kanban_pgwire::cluster::TestCluster::builder()
        .fsync(true)
        .start()
        .context("start the PostgreSQL bench server")
}

/// A bare PostgreSQL table on the same server: `BEGIN; UPDATE one row; COMMIT`, one connection,
/// the statement prepared once (the wire client's cache), as the board's statements are.
struct PgBare {
    client: kanban_pgwire::Client,
}

impl PgBare {
    fn open(cluster: &kanban_pgwire::cluster::TestCluster) -> anyhow::Result<PgBare> {
        cluster.create_database("bench_bare")?;
        let mut client = cluster.connect("bench_bare")?;
        client.batch(
            "CREATE TABLE t (id bigint PRIMARY KEY, v bigint NOT NULL); \
             INSERT INTO t SELECT g, 0 FROM generate_series(0, 99) g",
        )?;
        Ok(PgBare { client })
    }

    /// `n` commits of one row each (µs per commit).
    fn commits(&mut self, n: usize) -> anyhow::Result<f64> {
        let start = Instant::now();
        for i in 0..n {
            self.client.batch("BEGIN")?;
            self.client.execute(
                "UPDATE t SET v = v + 1 WHERE id = $1",
                &[kanban_pgwire::Value::Int((i % BATCH) as i64)],
            )?;
            self.client.batch("COMMIT")?;
        }
        Ok(us_per_op(n, start.elapsed()))
    }
}

/// The board operations on a PostgreSQL board, round by round after the bare PostgreSQL loop
/// (its samples in `bare` and `bare_cached` alike).
fn pg_board_ops(cluster: &kanban_pgwire::cluster::TestCluster) -> anyhow::Result<OpSamples> {
    let mut bare = PgBare::open(cluster)?;
    cluster.create_database("bench_ops")?;
    let board = Board::open_path(Path::new(&cluster.url("bench_ops")), &OpenOptions::create())?;
    pg_history(&board)?;
    cluster.connect("bench_ops")?.batch("ANALYZE")?;
    // The lean transactions' own board database: the same schema and the same history.
    cluster.create_database("bench_lean")?;
    {
        let lean_board = Board::open_path(
            Path::new(&cluster.url("bench_lean")),
            &OpenOptions::create(),
        )?;
        pg_history(&lean_board)?;
    }
    let mut lean_client = cluster.connect("bench_lean")?;
    lean_client.batch("ANALYZE")?;
    let mut lean = LeanPg::new(lean_client);
    ops_rounds(&board, &mut lean, |s| {
        let us = bare.commits(BATCH)?;
        s.bare.push(us);
        s.bare_cached.push(us);
        Ok(())
    })
}

/// Connections writing at once in [`pg_concurrent`] (a fleet's workers heartbeating).
const CONCURRENT: usize = 4;

/// Samples of [`pg_concurrent`]: total µs per commit of the bare loop and per heartbeat.
#[derive(Default)]
struct ConcurrentSamples {
    bare: Vec<f64>,
    heartbeat: Vec<f64>,
}

/// [`CONCURRENT`] connections writing at once, round by round: the bare `UPDATE` loop on that
/// many connections (each its own rows of the bare table, so no row waits for another), then
/// that many workers heartbeating (each its own board connection and its own running tasks).
/// A sample is the group's wall time over all its commits. Bench threads, not the product's:
/// each owns its connection.
fn pg_concurrent(
    cluster: &kanban_pgwire::cluster::TestCluster,
) -> anyhow::Result<ConcurrentSamples> {
    cluster.create_database("bench_concurrent")?;
    let url = cluster.url("bench_concurrent");
    let setup = Board::open_path(Path::new(&url), &OpenOptions::create())?;
    let t = now();
    let spec = ClaimSpec {
        lock: "bench:1".to_owned(),
        ttl_seconds: 86_400,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    let new: Vec<NewTask> = (0..CONCURRENT * BATCH)
        .map(|i| NewTask {
            title: format!("leased {i}"),
            ..NewTask::default()
        })
        .collect();
    let picks: Vec<(String, Status)> = setup
        .create_tasks(&new, t)?
        .into_iter()
        .map(|c| (c.id, Status::Ready))
        .collect();
    let mut leases = Vec::with_capacity(picks.len());
    for outcome in setup.claim_batch(&picks, &spec, t)? {
        match outcome? {
            ClaimOutcome::Claimed(c) => leases.push((
                c.task_id,
                Fence {
                    claim_lock: Some(spec.lock.clone()),
                    run_id: Some(c.run_id),
                },
            )),
            ClaimOutcome::Lost(r) => bail!("concurrent bench claim lost: {r}"),
        }
    }
    cluster.connect("bench_concurrent")?.batch("ANALYZE")?;
    let mut bares = (0..CONCURRENT)
        .map(|_| cluster.connect("bench_bare"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut boards = (0..CONCURRENT)
        .map(|_| Board::open_path(Path::new(&url), &OpenOptions::default()))
        .collect::<Result<Vec<_>, _>>()?;
    let rows_each = BATCH / CONCURRENT;
    let mut s = ConcurrentSamples::default();
    for round in 0..SAMPLES {
        let took = at_once(
            bares.iter_mut().enumerate().collect(),
            |(k, client)| -> anyhow::Result<()> {
                for i in 0..BATCH {
                    client.batch("BEGIN")?;
                    client.execute(
                        "UPDATE t SET v = v + 1 WHERE id = $1",
                        &[kanban_pgwire::Value::Int(
                            (k * rows_each + i % rows_each) as i64,
                        )],
                    )?;
                    client.batch("COMMIT")?;
                }
                Ok(())
            },
        )?;
        s.bare.push(us_per_op(CONCURRENT * BATCH, took));

        let beat_at = t + 1 + round as i64;
        let took = at_once(
            boards.iter_mut().zip(leases.chunks(BATCH)).collect(),
            |(board, mine)| -> anyhow::Result<()> {
                for (id, fence) in mine {
                    board
                        .heartbeat(id, fence, None, 86_400, beat_at)?
                        .into_result()
                        .map_err(|r| anyhow::anyhow!("bench heartbeat of {id} refused: {r}"))?;
                }
                Ok(())
            },
        )?;
        s.heartbeat.push(us_per_op(CONCURRENT * BATCH, took));
    }
    Ok(s)
}

/// Runs `each` on every item at once, one bench thread per item, and returns the group's wall
/// time (until the last one is done); the first error, or panic, is the group's.
fn at_once<T: Send>(
    items: Vec<T>,
    each: impl Fn(T) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let each = &each;
        let group: Vec<_> = items
            .into_iter()
            .map(|item| scope.spawn(move || each(item)))
            .collect();
        let mut first = Ok(());
        for handle in group {
            let result = handle
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a bench thread panicked")));
            if first.is_ok() {
                first = result;
            }
        }
        first
    })?;
    Ok(start.elapsed())
}

/// The history a PostgreSQL board in use has before the measured rounds (then `ANALYZE`d, as
/// pgbench vacuums its tables before a run): [`PG_HISTORY`] tasks, most done, some running,
/// some ready, so the server plans the board's statements for a board of that size rather than
/// for the empty tables of a fresh database (a plan made then is kept by the connection).
fn pg_history(board: &Board) -> anyhow::Result<()> {
    let t = now() - 3600;
    let spec = ClaimSpec {
        lock: "history:1".to_owned(),
        ttl_seconds: 86_400,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    let completion = board::Completion {
        summary: Some("done".to_owned()),
        ..Default::default()
    };
    for chunk in 0..PG_HISTORY / BATCH {
        let new: Vec<NewTask> = (0..BATCH)
            .map(|i| NewTask {
                title: format!("history {chunk}.{i}"),
                ..NewTask::default()
            })
            .collect();
        let created = board.create_tasks(&new, t)?;
        // Per chunk of 100: 90 done, 5 running, 5 left ready.
        let picks: Vec<(String, Status)> = created[..95]
            .iter()
            .map(|c| (c.id.clone(), Status::Ready))
            .collect();
        for outcome in board.claim_batch(&picks, &spec, t)? {
            ensure!(
                matches!(outcome?, ClaimOutcome::Claimed(_)),
                "history claim lost"
            );
        }
        let done: Vec<String> = created[..90].iter().map(|c| c.id.clone()).collect();
        board.complete_many(&done, &completion, t + 1)?;
    }
    Ok(())
}

/// How many tasks [`pg_history`] writes.
const PG_HISTORY: usize = 5_000;

/// Tasks of each PostgreSQL end-to-end run.
const PG_E2E_TASKS: usize = 200;

/// The kernel's clock ticks per second of `/proc/PID/stat`'s times (`USER_HZ`, 100 on Linux).
const USER_HZ: u64 = 100;

/// CPU time (ns) of the children process `pid` (`self` for this one) has waited for, and theirs
/// (`/proc/PID/stat` fields `cutime` + `cstime`, 10 ms steps).
fn reaped_children_cpu_ns(pid: &str) -> anyhow::Result<u64> {
    stat_times_ns(pid, "cutime", 2)
}

/// CPU time (ns) of a process and of the children it reaped (`utime` .. `cstime`).
fn own_and_reaped_cpu_ns(pid: i64) -> anyhow::Result<u64> {
    stat_times_ns(&pid.to_string(), "utime", 4)
}

/// The sum of `count` consecutive time fields of `/proc/PID/stat` from `first` (`utime`,
/// `stime`, `cutime` or `cstime`), in ns.
fn stat_times_ns(pid: &str, first: &str, count: usize) -> anyhow::Result<u64> {
    const TIMES: [&str; 4] = ["utime", "stime", "cutime", "cstime"];
    let at = TIMES
        .iter()
        .position(|t| *t == first)
        .with_context(|| format!("{first} is not a time field of /proc/PID/stat"))?;
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // After the `)` closing the command name: field 3 (state) onwards; utime is field 14.
    let fields: Vec<u64> = stat
        .rfind(')')
        .map(|end| &stat[end + 2..])
        .context("no `)` in /proc/PID/stat")?
        .split_whitespace()
        .skip(11 + at)
        .take(count)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{path}: {first} and after are not numbers"))?;
    ensure!(
        fields.len() == count,
        "{path}: fewer fields than {first} and after"
    );
    Ok(fields.iter().sum::<u64>() * (1_000_000_000 / USER_HZ))
}

/// Busy CPU time (ns) of the whole machine, every core (`/proc/stat`: all but idle and iowait).
fn machine_busy_ns() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    let line = text.lines().next().context("/proc/stat is empty")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("/proc/stat's cpu line is not numbers")?;
    ensure!(ticks.len() >= 5, "/proc/stat's cpu line is short: {line}");
    let busy: u64 = ticks.iter().sum::<u64>() - ticks[3] - ticks[4];
    Ok(busy * (1_000_000_000 / USER_HZ))
}

/// What the server counted for database `db`: (transactions committed and rolled back,
/// sessions). Read after a pause, so the ended backends' counts are flushed.
fn pg_db_counts(
    cluster: &kanban_pgwire::cluster::TestCluster,
    db: &str,
) -> anyhow::Result<(i64, i64)> {
    let mut client = cluster.connect(db)?;
    let row = client.query_one(
        "SELECT (xact_commit + xact_rollback)::bigint, sessions::bigint FROM pg_stat_database \
         WHERE datname = current_database()",
        &[],
    )?;
    let int = |i: usize| {
        row.get(i)
            .and_then(kanban_pgwire::Value::as_i64)
            .context("pg_stat_database gave no number")
    };
    Ok((int(0)?, int(1)?))
}

/// The PostgreSQL end-to-end figures of one run.
struct PgE2e {
    tasks_per_s: f64,
    /// The server's CPU (postmaster and all it started, ended backends included), % of a core.
    server: f64,
    /// The dispatchers' and their workers' CPU, % of a core.
    clients: f64,
    /// The whole machine's busy CPU, % of a core (200 % is both cores).
    machine: f64,
    /// Server sessions (connections) and transactions per task.
    sessions_per_task: f64,
    transactions_per_task: f64,
}

/// CPU time (ns) of the PostgreSQL server of `cluster`: the postmaster and every process it
/// started (its backends, its background workers).
fn pg_server_cpu_ns(cluster: &kanban_pgwire::cluster::TestCluster) -> anyhow::Result<u64> {
    let pidfile = cluster.dir().join("data").join("postmaster.pid");
    let text = std::fs::read_to_string(&pidfile)
        .with_context(|| format!("cannot read {}", pidfile.display()))?;
    let postmaster: u32 = text
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("{} names no pid", pidfile.display()))?;
    // The backends that served a worker's connection and ended meanwhile are in the postmaster's
    // reaped children's time (it waits for each).
    let mut total = cpu_ns(postmaster)? + reaped_children_cpu_ns(&postmaster.to_string())?;
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rfind(')')
            .and_then(|at| stat[at + 2..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(postmaster) {
            // A backend that ended in between is simply not counted.
            total += cpu_ns(pid).unwrap_or(0);
        }
    }
    Ok(total)
}

/// [`PG_E2E_TASKS`] tasks on builtin:complete, `dispatchers` × `dispatch --until-idle`
/// (max_spawn 4 each, each in its own home, as separate hosts would be) on one PostgreSQL board:
/// tasks/s (one long measurement), the CPU of the server, of the dispatchers with their workers
/// and of the machine over the run, and the server's sessions and transactions per task.
fn pg_end_to_end(
    bin: &Path,
    dir: &Path,
    cluster: &kanban_pgwire::cluster::TestCluster,
    dispatchers: usize,
) -> anyhow::Result<PgE2e> {
    let db = format!("bench_e2e_{dispatchers}");
    cluster.create_database(&db)?;
    let homes: Vec<PathBuf> = (0..dispatchers)
        .map(|i| dir.join(format!("pg-e2e-{dispatchers}-{i}")))
        .collect();
    for home in &homes {
        write_home(home, 4, "")?;
        let text = std::fs::read_to_string(home.join("kanban.toml"))?;
        std::fs::write(
            home.join("kanban.toml"),
            format!("{text}\n[boards.default]\nurl = \"{}\"\n", cluster.url(&db)),
        )?;
    }
    let board = Board::open(
        &kanban_runtime::home::resolve(&homes[0], Some("default"))?,
        &OpenOptions::create(),
    )?;
    board.create_tasks(
        &(0..PG_E2E_TASKS)
            .map(|i| NewTask {
                title: format!("pg e2e {i}"),
                ..NewTask::default()
            })
            .collect::<Vec<_>>(),
        now(),
    )?;
    // Settle the set-up's counts, then read the starting points.
    std::thread::sleep(Duration::from_millis(1500));
    let (xacts0, sessions0) = pg_db_counts(cluster, &db)?;
    let cpu0 = pg_server_cpu_ns(cluster)?;
    let clients0 = reaped_children_cpu_ns("self")?;
    let machine0 = machine_busy_ns()?;
    let begin = Instant::now();
    let children = homes
        .iter()
        .map(|home| {
            kanban(bin, home)
                .args(["dispatch", "--until-idle"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut outputs = Vec::new();
    for child in children {
        outputs.push(child.wait_with_output()?);
    }
    let elapsed = begin.elapsed();
    let cpu1 = pg_server_cpu_ns(cluster)?;
    let clients1 = reaped_children_cpu_ns("self")?;
    let machine1 = machine_busy_ns()?;
    for out in &outputs {
        ensure!(
            out.status.success(),
            "dispatch --until-idle on the PostgreSQL board failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let tasks = board.list_tasks(&Default::default())?;
    let done = tasks.iter().filter(|t| t.status == Status::Done).count();
    if done != PG_E2E_TASKS {
        let mut by_status = std::collections::BTreeMap::new();
        for t in &tasks {
            *by_status.entry(t.status.as_str()).or_insert(0) += 1;
        }
        let said: Vec<String> = outputs
            .iter()
            .map(|o| {
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
                let lines: Vec<&str> = text.lines().collect();
                lines[lines.len().saturating_sub(8)..].join(" | ")
            })
            .collect();
        bail!(
            "only {done} of {PG_E2E_TASKS} tasks done on PostgreSQL with {dispatchers} \
             dispatcher(s): {by_status:?}; the dispatchers said: {said:?}"
        );
    }
    let share = |ns: u64| ns as f64 / 1e9 / elapsed.as_secs_f64() * 100.0;
    let server = share(cpu1.saturating_sub(cpu0));
    let clients = share(clients1.saturating_sub(clients0));
    let machine = share(machine1.saturating_sub(machine0));
    ensure!(
        server > 0.0 && clients > 0.0 && machine > 0.0,
        "no CPU time measured (server {server} %, clients {clients} %, machine {machine} %): not a measurement"
    );
    drop(board);
    std::thread::sleep(Duration::from_millis(1500));
    let (xacts1, sessions1) = pg_db_counts(cluster, &db)?;
    let per_task = |a: i64, b: i64| (b - a) as f64 / PG_E2E_TASKS as f64;
    Ok(PgE2e {
        tasks_per_s: PG_E2E_TASKS as f64 / elapsed.as_secs_f64(),
        server,
        clients,
        machine,
        // The reading connection of the second count is not the run's.
        sessions_per_task: per_task(sessions0, sessions1 - 1),
        transactions_per_task: per_task(xacts0, xacts1),
    })
}

fn vm_hwm_kib(pid: &str) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("{path} has no readable VmHWM line"))?;
    ensure!(kib > 0, "{path} reports a peak RSS of 0 kB");
    Ok(kib)
}

fn bench_config(max_spawn: u32) -> Config {
    let mut config = Config::default();
    config.dispatch.max_spawn = max_spawn;
    // Not the host cap derived from memory (2 to 8 workers): the bench's spawns are no-ops.
    config.dispatch.max_in_progress = Some(65_536);
    config.profiles.insert(
        "default".to_owned(),
        ProfileConfig {
            agent: "builtin:complete".to_owned(),
            command: Vec::new(),
            env: Default::default(),
            ..Default::default()
        },
    );
    config
}

/// A board of `total` tasks: `ready` ready, `running` running (claimed by a no-op spawn), 300
/// waiting on running parents, the rest done (completed through the board's API). Returns the
/// board, its location and the no-op spawner that "runs" the running ones.
fn big_board(
    dir: &Path,
    name: &str,
    total: usize,
    ready: usize,
    running: usize,
) -> anyhow::Result<(Board, BoardLocation, NoSpawn)> {
    let waiting = 300;
    let db = dir.join(name).join("kanban.db");
    // Set-up only (not measured): built with `synchronous=NORMAL` so 100 000 completions do not
    // wait for 100 000 fsyncs, then reopened with the board's default durability.
    let setup = Board::open_path(
        &db,
        &OpenOptions {
            durability: board::Durability::Normal,
            ..OpenOptions::create()
        },
    )?;
    let t = now();
    let live: Vec<String> = setup
        .create_tasks(
            &(0..(ready + running))
                .map(|i| NewTask {
                    title: format!("live {i}"),
                    priority: 1,
                    ..NewTask::default()
                })
                .collect::<Vec<_>>(),
            t,
        )?
        .into_iter()
        .map(|c| c.id)
        .collect();
    setup.create_tasks(
        &(0..waiting)
            .map(|i| NewTask {
                title: format!("waiting {i}"),
                parents: vec![live[i % running.max(1)].clone()],
                ..NewTask::default()
            })
            .collect::<Vec<_>>(),
        t,
    )?;
    // History: done tasks that never had a run.
    let old: Vec<String> = setup
        .create_tasks(
            &(0..total.saturating_sub(ready + running + waiting))
                .map(|i| NewTask {
                    title: format!("old {i}"),
                    ..NewTask::default()
                })
                .collect::<Vec<_>>(),
            t,
        )?
        .into_iter()
        .map(|c| c.id)
        .collect();
    for outcome in setup.complete_many(&old, &board::Completion::default(), t)? {
        ensure!(
            matches!(outcome, board::Outcome::Done(_)),
            "a history task was not completed: {outcome:?}"
        );
    }
    drop(setup);
    let board = Board::open_path(&db, &OpenOptions::default())?;
    let location = BoardLocation {
        slug: "default".to_owned(),
        db_path: db,
        pinned: false,
        store: kanban_runtime::db::target::Store::Sqlite,
    };
    // One tick with budget `running` claims the running ones through the no-op spawner.
    let mut workers = NoSpawn::default();
    let settings = Settings::new(
        dir.join(name),
        location.clone(),
        &bench_config(running as u32),
    )?;
    let mut b = board;
    let report = dispatch::tick(&mut b, &settings, &SystemClock, &mut workers)?;
    ensure!(
        report.spawned.len() == running,
        "{name}: the setup tick claimed {} tasks, not {running}",
        report.spawned.len()
    );
    Ok((b, location, workers))
}

/// One cached bare commit (ms): the baseline sample taken next to each tick sample.
fn bare_commit_ms(bare: &Bare) -> anyhow::Result<f64> {
    Ok(bare.cached(1)? / 1000.0)
}

/// Samples (ms) of a tick figure and of the bare commits interleaved with it.
struct Paired {
    value: Vec<f64>,
    baseline: Vec<f64>,
}

impl Paired {
    fn new() -> Paired {
        Paired {
            value: Vec::new(),
            baseline: Vec::new(),
        }
    }
}

struct TickFigures {
    recompute: Paired,
    idle_tick: Paired,
    claim_tick: Paired,
    big_idle_tick: Paired,
}

fn timed<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(f64, T)> {
    let start = Instant::now();
    let out = f()?;
    Ok((ms(start.elapsed()), out))
}

fn tick_bench(dir: &Path, bare: &Bare) -> anyhow::Result<TickFigures> {
    let (mut b, location, mut workers) = big_board(dir, "ticks", 10_000, 200, 100)?;
    let idle = Settings::new(dir.join("ticks"), location.clone(), &bench_config(100))?;
    let mut recompute = Paired::new();
    let mut idle_tick = Paired::new();
    for _ in 0..SAMPLES {
        recompute.baseline.push(bare_commit_ms(bare)?);
        let (d, _) = timed(|| Ok(b.recompute_ready(now())?))?;
        recompute.value.push(d);
        idle_tick.baseline.push(bare_commit_ms(bare)?);
        let (d, report) = timed(|| Ok(dispatch::tick(&mut b, &idle, &SystemClock, &mut workers)?))?;
        idle_tick.value.push(d);
        ensure!(report.spawned.is_empty(), "the idle tick spawned");
    }
    // 100 running, max_spawn 200: each tick claims 100 of the ready tasks; between samples the
    // claimed ones are completed and 100 new ready tasks created (the board grows by 100 done
    // tasks per sample).
    let claim = Settings::new(dir.join("ticks"), location, &bench_config(200))?;
    let mut claim_tick = Paired::new();
    for round in 0..SAMPLES {
        claim_tick.baseline.push(bare_commit_ms(bare)?);
        let (d, report) =
            timed(|| Ok(dispatch::tick(&mut b, &claim, &SystemClock, &mut workers)?))?;
        claim_tick.value.push(d);
        ensure!(
            report.spawned.len() == 100,
            "the claim tick of round {round} claimed {} tasks, not 100",
            report.spawned.len()
        );
        let t = now();
        for w in &report.spawned {
            let completion = board::Completion {
                expected_run_id: Some(w.run_id),
                ..Default::default()
            };
            b.complete(&w.task_id, &completion, t)?
                .into_result()
                .map_err(|r| anyhow::anyhow!("completing {} refused: {r}", w.task_id))?;
        }
        for i in 0..100 {
            b.create_task(
                &NewTask {
                    title: format!("refill {round}.{i}"),
                    priority: 1,
                    ..NewTask::default()
                },
                t,
            )?;
        }
    }

    let (mut big, location, mut workers) = big_board(dir, "big", 100_000, 200, 100)?;
    let idle = Settings::new(dir.join("big"), location, &bench_config(100))?;
    let mut big_idle_tick = Paired::new();
    for _ in 0..SAMPLES {
        big_idle_tick.baseline.push(bare_commit_ms(bare)?);
        let (d, _) = timed(|| Ok(dispatch::tick(&mut big, &idle, &SystemClock, &mut workers)?))?;
        big_idle_tick.value.push(d);
    }
    Ok(TickFigures {
        recompute,
        idle_tick,
        claim_tick,
        big_idle_tick,
    })
}

/// The release `kanban` binary next to this one.
fn kanban_bin() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe.with_file_name("kanban");
    anyhow::ensure!(
        bin.exists(),
        "{} is missing: build it first (cargo xtask bench does)",
        bin.display()
    );
    Ok(bin)
}

fn kanban(bin: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--home").arg(home).stdin(Stdio::null());
    cmd
}

/// A home whose dispatcher spawns up to `max_spawn` workers. The host cap is set out of the way:
/// derived from memory it would be 2 to 8 workers, and the homes of one run share this host
/// (each as if it were a host of its own).
fn write_home(home: &Path, max_spawn: u32, extra_profiles: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(home)?;
    std::fs::write(
        home.join("kanban.toml"),
        format!(
            "[dispatch]\nmax_spawn = {max_spawn}\nmax_in_progress = 65536\n\n[profiles.default]\nagent = \"builtin:complete\"\n{extra_profiles}"
        ),
    )?;
    Ok(())
}

/// Nanoseconds `pid` has spent on a CPU (`/proc/PID/schedstat`, first field: exact, unlike the
/// 10 ms clock ticks of `/proc/PID/stat`); an error when the process is gone or unreadable.
fn cpu_ns(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/schedstat");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {path} (did the process exit?)"))?;
    text.split_whitespace()
        .next()
        .and_then(|f| f.parse::<u64>().ok())
        .with_context(|| format!("{path}: the first field is not a number: {text:?}"))
}

struct KillOnDrop(Child);

impl KillOnDrop {
    /// An error when the child already exited (with what it printed on stderr, if captured).
    fn ensure_running(&mut self, what: &str) -> anyhow::Result<()> {
        if let Some(status) = self.0.try_wait()? {
            let mut stderr = String::new();
            if let Some(mut err) = self.0.stderr.take() {
                use std::io::Read;
                let _ = err.read_to_string(&mut stderr);
            }
            bail!("{what} exited early ({status}): {}", stderr.trim());
        }
        Ok(())
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct ProcessFigures {
    start: Vec<f64>,
    e2e: E2ePairs,
    registered: Vec<f64>,
    registered_start_baseline: Vec<f64>,
    /// % of one core, one sample per [`IDLE_WINDOW`].
    idle_cpu: Vec<f64>,
    real_claim_tick: Paired,
    worker_rss_kib: u64,
    dispatcher_rss_kib: u64,
}

fn registered(board: &Board, id: &str) -> anyhow::Result<bool> {
    Ok(board
        .events(id, None)?
        .iter()
        .any(|e| e.kind == "worker_registered"))
}

fn wait_for(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    while !done()? {
        ensure!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// One `kanban identity --json` (a command that opens nothing), in ms.
fn process_start_ms(bin: &Path, home: &Path) -> anyhow::Result<f64> {
    let start = Instant::now();
    let out = kanban(bin, home).args(["identity", "--json"]).output()?;
    let d = ms(start.elapsed());
    ensure!(
        out.status.success(),
        "kanban identity failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(d)
}

/// `kanban dispatch --once` on `home` (ms, wall clock including the process start).
fn dispatch_once_ms(bin: &Path, home: &Path) -> anyhow::Result<f64> {
    command_ms(bin, home, &["dispatch", "--once"])
}

fn all_done(board: &Board) -> anyhow::Result<bool> {
    Ok(board
        .list_tasks(&Default::default())?
        .iter()
        .all(|t| t.status == Status::Done))
}

/// 200 tasks on builtin:complete, max_spawn 8, `dispatch --until-idle`: tasks/s (one long
/// measurement). In owner mode the owner the first submitter starts is stopped afterwards.
/// 200 tasks on builtin:complete, max_spawn 8, `dispatch --until-idle` (in owner mode when
/// `owner`): tasks/s, and the CPU ms per task of the dispatcher, every process it reaped and, in
/// owner mode, the owner with its managed workers.
fn end_to_end_cpu(bin: &Path, home: &Path, owner: bool) -> anyhow::Result<(f64, f64)> {
    write_home(home, 8, "")?;
    if owner {
        let text = std::fs::read_to_string(home.join("kanban.toml"))?;
        std::fs::write(
            home.join("kanban.toml"),
            text.replacen("[dispatch]\n", "[dispatch]\nmode = \"owner\"\n", 1),
        )?;
    }
    let board = Board::open(
        &kanban_runtime::home::resolve(home, Some("default"))?,
        &OpenOptions::create(),
    )?;
    board.create_tasks(
        &(0..200)
            .map(|i| NewTask {
                title: format!("e2e {i}"),
                ..NewTask::default()
            })
            .collect::<Vec<_>>(),
        now(),
    )?;
    let reaped0 = reaped_children_cpu_ns("self")?;
    let begin = Instant::now();
    let out = kanban(bin, home)
        .args(["dispatch", "--until-idle"])
        .stdout(Stdio::null())
        .output()?;
    let elapsed = begin.elapsed();
    let mut cpu = reaped_children_cpu_ns("self")? - reaped0;
    if owner {
        let pid = kanban_runtime::admission::client::stop_owner(home, "default")
            .context("the owner did not answer after the run")?;
        cpu += own_and_reaped_cpu_ns(pid)?;
    }
    ensure!(
        out.status.success(),
        "dispatch --until-idle{} failed: {}",
        if owner { " (owner mode)" } else { "" },
        String::from_utf8_lossy(&out.stderr)
    );
    let done = board
        .list_tasks(&Default::default())?
        .iter()
        .filter(|t| t.status == Status::Done)
        .count();
    ensure!(done == 200, "only {done} of 200 tasks done");
    Ok((200.0 / elapsed.as_secs_f64(), cpu as f64 / 1e6 / 200.0))
}

/// Pairs of end-to-end runs, direct and owner mode.
const E2E_PAIRS: usize = 5;

/// Per pair: tasks/s of each mode, owner/direct, CPU ms per task of each mode.
#[derive(Default)]
struct E2ePairs {
    direct: Vec<f64>,
    owner: Vec<f64>,
    ratio: Vec<f64>,
    direct_cpu_ms: Vec<f64>,
    owner_cpu_ms: Vec<f64>,
}

/// The median of `v` with its range: `p50 (min-max)`.
fn median_range(what: &str, v: &[f64], digits: usize) -> anyhow::Result<(f64, String)> {
    let s = stats(what, v.to_vec())?;
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok((
        s.p50,
        format!("{:.digits$} ({lo:.digits$}–{hi:.digits$})", s.p50),
    ))
}

fn process_bench(dir: &Path) -> anyhow::Result<ProcessFigures> {
    let bin = kanban_bin()?;

    let start = (0..SAMPLES)
        .map(|_| process_start_ms(&bin, &dir.join("start")))
        .collect::<anyhow::Result<Vec<_>>>()?;

    // End to end: 200 tasks on builtin:complete, max_spawn 8, dispatch --until-idle; then the
    // same in owner mode (a submitter per run, admitted and run by the profile's owner).
    // [`E2E_PAIRS`] pairs, the mode that goes first alternating: one run of each is a moment
    // of this VM's disk and scheduler (single runs ranged 0.51-0.71x owner/direct).
    let mut e2e = E2ePairs::default();
    for i in 0..E2E_PAIRS {
        let direct_first = i % 2 == 0;
        let mut pair = [(0.0, 0.0); 2];
        for owner in if direct_first {
            [false, true]
        } else {
            [true, false]
        } {
            let home = dir.join(format!("e2e-{i}{}", if owner { "-owner" } else { "" }));
            pair[usize::from(owner)] = end_to_end_cpu(&bin, &home, owner)?;
        }
        e2e.direct.push(pair[0].0);
        e2e.owner.push(pair[1].0);
        e2e.ratio.push(pair[1].0 / pair[0].0);
        e2e.direct_cpu_ms.push(pair[0].1);
        e2e.owner_cpu_ms.push(pair[1].1);
    }

    // A 100-claim tick with real worker processes: `kanban dispatch --once` with 100 ready
    // tasks and max_spawn 100, against the same command on the idle board (interleaved).
    let home = dir.join("realtick");
    write_home(&home, 100, "")?;
    let board = Board::open(
        &kanban_runtime::home::resolve(&home, Some("default"))?,
        &OpenOptions::create(),
    )?;
    let mut real_claim_tick = Paired::new();
    for round in 0..SAMPLES {
        real_claim_tick
            .baseline
            .push(dispatch_once_ms(&bin, &home)?);
        board.create_tasks(
            &(0..100)
                .map(|i| NewTask {
                    title: format!("real {round}.{i}"),
                    ..NewTask::default()
                })
                .collect::<Vec<_>>(),
            now(),
        )?;
        real_claim_tick.value.push(dispatch_once_ms(&bin, &home)?);
        // The workers complete their tasks by themselves; the next round starts on a quiet board.
        wait_for(
            &format!("the 100 workers of round {round}"),
            Duration::from_secs(120),
            || all_done(&board),
        )?;
    }

    // Latency and idle CPU with the daemon idle (long interval: only the change poll wakes it).
    let home = dir.join("latency");
    write_home(&home, 8, "\n[profiles.slow]\nagent = \"builtin:shell\"\n")?;
    let board = Board::open(
        &kanban_runtime::home::resolve(&home, Some("default"))?,
        &OpenOptions::create(),
    )?;
    let mut daemon = KillOnDrop(
        kanban(&bin, &home)
            .args(["dispatch", "--interval", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?,
    );
    let pid = daemon.0.id();
    std::thread::sleep(Duration::from_millis(500));
    daemon.ensure_running("the idle dispatcher")?;
    let mut idle_cpu = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let cpu0 = cpu_ns(pid)?;
        let begin = Instant::now();
        std::thread::sleep(IDLE_WINDOW);
        let used = cpu_ns(pid)?.saturating_sub(cpu0) as f64;
        idle_cpu.push(used / begin.elapsed().as_nanos() as f64 * 100.0);
    }
    daemon.ensure_running("the idle dispatcher")?;

    // Arrivals at seeded random times, so that creates do not line up with the daemon's poll.
    let mut rng = Rng(SEED);
    let mut registered_ms = Vec::new();
    let mut registered_start_baseline = Vec::new();
    for i in 0..SAMPLES {
        registered_start_baseline.push(process_start_ms(&bin, &dir.join("start"))?);
        std::thread::sleep(rng.gap(100, 300));
        let begin = Instant::now();
        let id = board
            .create_task(
                &NewTask {
                    title: format!("probe {i}"),
                    ..NewTask::default()
                },
                now(),
            )?
            .id;
        wait_for(
            &format!("task {id} registered"),
            Duration::from_secs(30),
            || registered(&board, &id),
        )?;
        registered_ms.push(ms(begin.elapsed()));
        wait_for(&format!("task {id} done"), Duration::from_secs(30), || {
            Ok(board.get_task(&id)?.status == Status::Done)
        })?;
    }
    daemon.ensure_running("the idle dispatcher")?;

    // Worker peak RSS: a shell task that lives long enough to be observed.
    let id = board
        .create_task(
            &NewTask {
                title: "rss".to_owned(),
                assignee: Some("slow".to_owned()),
                body: Some("sleep 0.5".to_owned()),
                ..NewTask::default()
            },
            now(),
        )?
        .id;
    let begin = Instant::now();
    let mut worker_rss_kib = None;
    loop {
        let task = board.get_task(&id)?;
        if task.status == Status::Done {
            break;
        }
        if let Some(pid) = task.worker_pid {
            // The worker may exit between the read and the probe: only a read that worked counts.
            if let Ok(k) = vm_hwm_kib(&pid.to_string()) {
                worker_rss_kib = Some(worker_rss_kib.unwrap_or(0).max(k));
            }
        }
        ensure!(
            begin.elapsed() < Duration::from_secs(30),
            "the rss task never finished"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let worker_rss_kib =
        worker_rss_kib.context("the worker's peak RSS was never read (it ended too soon)")?;
    drop(daemon);

    // Dispatcher peak RSS on the 100 000-task board.
    let big = dir.join("big");
    std::fs::write(big.join("kanban.toml"), "[dispatch]\nmax_spawn = 4\n")?;
    let mut daemon = KillOnDrop(
        kanban(&bin, &big)
            .args(["dispatch", "--interval", "0.05"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?,
    );
    std::thread::sleep(Duration::from_secs(2));
    daemon.ensure_running("the dispatcher on the 100 000-task board")?;
    let dispatcher_rss_kib = vm_hwm_kib(&daemon.0.id().to_string())?;
    drop(daemon);

    Ok(ProcessFigures {
        start,
        e2e,
        registered: registered_ms,
        registered_start_baseline,
        idle_cpu,
        real_claim_tick,
        worker_rss_kib,
        dispatcher_rss_kib,
    })
}

/// `p50 X, p90 Y` with `digits` decimals.
fn p50_p90(s: Stats, digits: usize) -> String {
    format!("p50 {:.digits$}, p90 {:.digits$}", s.p50, s.p90)
}

/// Per-sample ratios `value[i] / baseline[i]` (both lists were taken in the same rounds).
fn ratios(what: &str, value: &[f64], baseline: &[f64]) -> anyhow::Result<Stats> {
    ensure!(
        value.len() == baseline.len(),
        "{what}: {} samples against {} baselines",
        value.len(),
        baseline.len()
    );
    ensure!(
        baseline.iter().all(|b| *b > 0.0),
        "{what}: a baseline sample is zero"
    );
    stats(
        what,
        value.iter().zip(baseline).map(|(v, b)| v / b).collect(),
    )
}

/// A row whose value and baseline are paired time samples (ms).
fn paired_row(
    measure: &str,
    p: &Paired,
    baseline_name: &str,
    digits: usize,
) -> anyhow::Result<Row> {
    let v = stats(measure, p.value.clone())?;
    let b = stats(measure, p.baseline.clone())?;
    let r = ratios(measure, &p.value, &p.baseline)?;
    Ok(Row {
        measure: measure.to_owned(),
        samples: format!("n = {}, interleaved", v.n),
        value: p50_p90(v, digits),
        baseline: format!("{} ({baseline_name})", p50_p90(b, digits)),
        ratio: format!("{:.2}× (p50 of per-sample ratios)", r.p50),
        json: serde_json::json!({
            "measure": measure,
            "value": stats_json(v, "ms"),
            "baseline": { "name": baseline_name, "stats": stats_json(b, "ms") },
            "ratio": stats_json(r, "×"),
        }),
    })
}

/// Tasks on the big board of `--big`, and how many of them are ready.
const BIG_TASKS: usize = 1_000_000;
const BIG_READY: usize = 10_000;

/// Wall time (ms) of `kanban ARGS` on `home`, which must succeed.
fn command_ms(bin: &Path, home: &Path, args: &[&str]) -> anyhow::Result<f64> {
    let start = Instant::now();
    let out = kanban(bin, home)
        .args(args)
        .stdout(Stdio::null())
        .output()?;
    let d = ms(start.elapsed());
    ensure!(
        out.status.success(),
        "kanban {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(d)
}

/// Size of a SQLite board on disk: the file and its WAL (MB).
fn board_mb(db: &Path) -> anyhow::Result<f64> {
    let mut bytes = std::fs::metadata(db)
        .with_context(|| format!("cannot read {}", db.display()))?
        .len();
    if let Ok(wal) = std::fs::metadata(db.with_extension("db-wal")) {
        bytes += wal.len();
    }
    ensure!(bytes > 0, "{} is empty", db.display());
    Ok(bytes as f64 / 1e6)
}

/// A row of one measurement (no samples to pair).
fn single_row(measure: &str, value: String, baseline: String, ratio: String, v: f64) -> Row {
    Row {
        measure: measure.to_owned(),
        samples: "one measurement".to_owned(),
        value,
        baseline,
        ratio,
        json: serde_json::json!({ "measure": measure, "value": v }),
    }
}

/// `--big`: a board of [`BIG_TASKS`] tasks ([`BIG_READY`] ready, 100 running, the rest done),
/// and what an operator does on it: ticks, `list` pages, `show`, `fsck` (against a board a tenth
/// the size, for linearity), the web board page, peak RSS of a dispatcher and of the web server,
/// the database's size.
fn big_suite(dir: &Path, bare: &Bare, big_tasks: usize) -> anyhow::Result<Vec<Row>> {
    let big_ready = BIG_READY * big_tasks / BIG_TASKS;
    let mut rows = Vec::new();
    let bin = kanban_bin()?;
    progress!("bench --big: building a {big_tasks}-task board ({big_ready} ready)…");
    let started = Instant::now();
    let (mut b, location, mut workers) = big_board(dir, "million", big_tasks, big_ready, 100)?;
    let build_s = started.elapsed().as_secs_f64();
    let home = dir.join("million");
    write_home(&home, 100, "")?;
    let size = board_mb(&location.db_path)?;
    rows.push(single_row(
        &format!(
            "--big: board of {big_tasks} tasks ({big_ready} ready, 100 running): database size (MB)"
        ),
        format!("{size:.0}"),
        format!("built in {build_s:.0} s (set-up, batched, `synchronous=NORMAL`)"),
        format!("{:.0} bytes per task", size * 1e6 / big_tasks as f64),
        size,
    ));

    progress!("bench --big: ticks…");
    let idle = Settings::new(home.clone(), location.clone(), &bench_config(100))?;
    let mut idle_tick = Paired::new();
    for _ in 0..SAMPLES {
        idle_tick.baseline.push(bare_commit_ms(bare)?);
        let (d, report) = timed(|| Ok(dispatch::tick(&mut b, &idle, &SystemClock, &mut workers)?))?;
        ensure!(report.spawned.is_empty(), "the idle tick spawned");
        idle_tick.value.push(d);
    }
    rows.push(paired_row(
        &format!("--big: idle tick, {big_tasks}-task board (ms)"),
        &idle_tick,
        "one bare commit, cached",
        2,
    )?);
    let claim = Settings::new(home.clone(), location.clone(), &bench_config(200))?;
    let mut claim_tick = Paired::new();
    for round in 0..SAMPLES {
        claim_tick.baseline.push(bare_commit_ms(bare)?);
        let (d, report) =
            timed(|| Ok(dispatch::tick(&mut b, &claim, &SystemClock, &mut workers)?))?;
        ensure!(
            report.spawned.len() == 100,
            "the big claim tick of round {round} claimed {} tasks, not 100",
            report.spawned.len()
        );
        claim_tick.value.push(d);
        let t = now();
        for w in &report.spawned {
            let completion = board::Completion {
                expected_run_id: Some(w.run_id),
                ..Default::default()
            };
            b.complete(&w.task_id, &completion, t)?
                .into_result()
                .map_err(|r| anyhow::anyhow!("completing {} refused: {r}", w.task_id))?;
        }
        // As many new ready tasks as were claimed: the ready count stays the same.
        b.create_tasks(
            &(0..100)
                .map(|i| NewTask {
                    title: format!("refill {round}.{i}"),
                    priority: 1,
                    ..NewTask::default()
                })
                .collect::<Vec<_>>(),
            t,
        )?;
    }
    rows.push(paired_row(
        &format!("--big: 100-claim tick, no-op spawn, {big_tasks}-task board (ms)"),
        &claim_tick,
        "one bare commit, cached",
        2,
    )?);

    progress!("bench --big: list, show, fsck…");
    let some_id = b
        .list_tasks(&board::TaskFilter {
            limit: Some(1),
            ..board::TaskFilter::default()
        })?
        .pop()
        .context("the big board lists no task")?
        .id;
    let middle = (big_tasks / 2).to_string();
    for (what, args) in [
        (
            "`list --limit 50` (first page)",
            vec!["list", "--limit", "50"],
        ),
        (
            "`list --limit 50 --offset N/2` (a page in the middle)",
            vec!["list", "--limit", "50", "--offset", &middle],
        ),
        (
            "`list --status ready --limit 50`",
            vec!["list", "--status", "ready", "--limit", "50"],
        ),
        ("`show ID`", vec!["show", some_id.as_str()]),
    ] {
        let mut p = Paired::new();
        for _ in 0..SAMPLES {
            p.baseline.push(process_start_ms(&bin, &home)?);
            p.value.push(command_ms(&bin, &home, &args)?);
        }
        rows.push(paired_row(
            &format!("--big: {what}, {big_tasks}-task board (ms, process included)"),
            &p,
            "`kanban identity --json`, the process start",
            1,
        )?);
    }
    // fsck against a board a tenth the size: linear means ≈ 10× the time.
    let (small, small_loc, _) = big_board(dir, "tenth", big_tasks / 10, big_ready / 10, 100)?;
    drop(small);
    write_home(&dir.join("tenth"), 100, "")?;
    let mut fsck = Paired::new();
    for _ in 0..3 {
        fsck.baseline
            .push(command_ms(&bin, &dir.join("tenth"), &["fsck"])?);
        fsck.value.push(command_ms(&bin, &home, &["fsck"])?);
    }
    let _ = small_loc;
    rows.push(paired_row(
        &format!("--big: `fsck`, {big_tasks}-task board (ms)"),
        &fsck,
        &format!("`fsck` of a {}-task board: linear is 10×", big_tasks / 10),
        0,
    )?);

    progress!("bench --big: the web board page and peak RSS…");
    drop(b);
    let (server, addr) = kanban_tests::web_bench::serve(&bin, &home)?;
    let _ = kanban_tests::web_bench::timed(addr, "/")?;
    let mut page = Paired::new();
    let mut bytes = 0;
    for _ in 0..SAMPLES {
        let (d, n) = kanban_tests::web_bench::timed(addr, "/")?;
        page.value.push(d);
        bytes = n;
        page.baseline
            .push(kanban_tests::web_bench::timed(addr, "/assets/app.css")?.0);
    }
    let web_rss = vm_hwm_kib(&server.pid().to_string())?;
    drop(server);
    rows.push(paired_row(
        &format!("--big: web board page, {big_tasks}-task board (ms; {bytes} bytes)"),
        &page,
        "a static asset of the same server",
        1,
    )?);
    let mut daemon = KillOnDrop(
        kanban(&bin, &home)
            .args(["dispatch", "--interval", "0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    std::thread::sleep(Duration::from_secs(3));
    let pid = daemon.0.id().to_string();
    let dispatcher_rss = vm_hwm_kib(&pid)?;
    ensure!(
        daemon.0.try_wait()?.is_none(),
        "the dispatcher on the big board exited"
    );
    drop(daemon);
    rows.push(single_row(
        &format!("--big: peak RSS of the dispatcher (3 s of ticks) and of `kanban serve` (after {SAMPLES} pages), {big_tasks}-task board (MB)"),
        format!("dispatcher {:.1}, web {:.1}", dispatcher_rss as f64 / 1024.0, web_rss as f64 / 1024.0),
        "—".to_owned(),
        "—".to_owned(),
        dispatcher_rss as f64 / 1024.0,
    ));
    Ok(rows)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            // Not `eprintln!` (see `progress!`): a failed measurement ends with its message and
            // exit code 1, never with a panic.
            let _ = writeln!(std::io::stderr(), "kanban-bench: error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| -> Option<PathBuf> {
        args.windows(2)
            .find(|w| w[0] == name)
            .map(|w| PathBuf::from(&w[1]))
    };
    let out = flag("--out");
    let json_out = flag("--json");
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();

    // `--pg-e2e N`: only the PostgreSQL end-to-end run with N dispatchers (a quick look).
    if let Some(n) = args.windows(2).find(|w| w[0] == "--pg-e2e") {
        let dispatchers: usize = n[1].parse().context("--pg-e2e needs a number")?;
        let cluster = pg_cluster()?;
        let e = pg_end_to_end(&kanban_bin()?, dir.path(), &cluster, dispatchers)?;
        println!(
            "{dispatchers} dispatcher(s): {:.0} tasks/s; CPU % of a core: server {:.0}, \
             dispatchers and workers {:.0}, machine {:.0} (of 200); per task: {:.2} sessions, \
             {:.1} transactions",
            e.tasks_per_s,
            e.server,
            e.clients,
            e.machine,
            e.sessions_per_task,
            e.transactions_per_task
        );
        return Ok(());
    }
    // `--e2e-only N`: N alternating pairs of the end-to-end run, direct and owner mode (item 2).
    if let Some(n) = args.windows(2).find(|w| w[0] == "--e2e-only") {
        let pairs: usize = n[1].parse().context("--e2e-only needs a number")?;
        let bin = kanban_bin()?;
        let mut ratios = Vec::new();
        for i in 0..pairs {
            let (direct, direct_cpu) =
                end_to_end_cpu(&bin, &dir.path().join(format!("e2e-{i}")), false)?;
            let (owner, owner_cpu) =
                end_to_end_cpu(&bin, &dir.path().join(format!("e2e-owner-{i}")), true)?;
            println!(
                "pair {i}: direct {direct:.0} tasks/s ({direct_cpu:.1} ms CPU/task), owner \
                 {owner:.0} ({owner_cpu:.1} ms) ({:.2}x)",
                owner / direct
            );
            ratios.push(owner / direct);
        }
        ratios.sort_by(f64::total_cmp);
        println!("median owner/direct {:.2}", ratios[ratios.len() / 2]);
        return Ok(());
    }
    let bare = Bare::open(dir.path())?;
    // `--web-only`: only the web view's rows.
    if args.iter().any(|a| a == "--web-only") {
        rows.extend(web_rows(dir.path())?);
        return print_table(&rows, out, json_out);
    }
    // `--big`: only the million-task board's rows (issue 32 item 4).
    if args.iter().any(|a| a == "--big") {
        // `--big-tasks N`: a smaller board, to try the suite out quickly.
        let tasks = args
            .windows(2)
            .find(|w| w[0] == "--big-tasks")
            .map(|w| w[1].parse::<usize>())
            .transpose()
            .context("--big-tasks needs a number")?
            .unwrap_or(BIG_TASKS);
        ensure!(tasks >= 20_000, "--big-tasks must be at least 20000");
        rows.extend(big_suite(dir.path(), &bare, tasks)?);
        if args.iter().any(|a| a == "--keep") {
            // `--keep`: leave the boards for a look at their query plans.
            progress!("bench --big: boards kept in {}", dir.keep().display());
        }
        return print_table(&rows, out, json_out);
    }
    progress!(
        "bench: board create/claim/heartbeat/complete, {SAMPLES} rounds of {BATCH}, each after a bare loop…"
    );
    let ops = board_ops(dir.path(), &bare)?;
    // `--ops-only`: stop after the board-operation rows (a quick loop while tuning transitions).
    let ops_only = args.iter().any(|a| a == "--ops-only");
    let bare_stats = stats("bare loop", ops.bare.clone())?;
    let cached_stats = stats("bare loop, cached statements", ops.bare_cached.clone())?;
    let rate = |us: f64| 1e6 / us;
    // p90 of a rate is its slow side: the rate at the p90 time per operation.
    let rate_text = |s: Stats| format!("p50 {:.0}, p90 {:.0}", rate(s.p50), rate(s.p90));
    rows.push(Row {
        measure: format!(
            "bare `UPDATE one row` commits / s ({BATCH} per sample), cached statements"
        ),
        samples: format!("n = {}", cached_stats.n),
        value: rate_text(cached_stats),
        baseline: format!("{} (uncached statements)", rate_text(bare_stats)),
        ratio: format!(
            "{:.2}× (p50 of per-round ratios)",
            ratios("bare cached", &ops.bare, &ops.bare_cached)?.p50
        ),
        json: serde_json::json!({
            "measure": "bare commits, cached statements",
            "value": stats_json(cached_stats, "µs per commit"),
            "baseline": { "name": "bare commits, uncached statements",
                          "stats": stats_json(bare_stats, "µs per commit") },
        }),
    });
    for (name, how, samples) in [
        ("create", "one transaction each", &ops.create),
        (
            "claim, batched (`Board::claim_batch`, as the dispatcher claims)",
            "all in one transaction",
            &ops.claim_batched,
        ),
        (
            "claim, single (`Board::claim`)",
            "one transaction each",
            &ops.claim,
        ),
        ("heartbeat", "one transaction each", &ops.heartbeat),
        ("complete", "one transaction each", &ops.complete),
    ] {
        let v = stats(name, samples.clone())?;
        // Rate ratio = bare time per commit / op time per op.
        let r = ratios(name, &ops.bare_cached, samples)?;
        let r_uncached = ratios(name, &ops.bare, samples)?;
        rows.push(Row {
            measure: format!("{name} / s ({BATCH} per sample, {how})"),
            samples: format!("n = {}, interleaved", v.n),
            value: rate_text(v),
            baseline: format!(
                "{:.0} cached / {:.0} uncached (bare loop p50, same rounds)",
                rate(cached_stats.p50),
                rate(bare_stats.p50)
            ),
            ratio: format!(
                "{:.2}× cached, {:.2}× uncached (p50 of per-round ratios)",
                r.p50, r_uncached.p50
            ),
            json: serde_json::json!({
                "measure": format!("{name} per second"),
                "value": stats_json(v, "µs per operation"),
                "baseline": { "name": "bare loop, cached statements",
                              "stats": stats_json(cached_stats, "µs per commit") },
                "ratio_vs_cached": stats_json(r, "× the bare rate"),
                "ratio_vs_uncached": stats_json(r_uncached, "× the bare rate"),
            }),
        });
    }

    lean_rows(&mut rows, &ops, "")?;
    progress!("bench: write-ahead log per transition (board, lean transaction, the original)…");
    let original = flag("--original").context(
        "kanban-bench needs --original DIR, the original's installed package (`cargo xtask bench` installs it)",
    )?;
    rows.extend(sqlite_wal_rows(dir.path(), Path::new(&original))?);

    if ops_only {
        return print_table(&rows, out, json_out);
    }
    progress!(
        "bench: PostgreSQL board create/claim/heartbeat/complete (a server started here, fsync on), two dispatchers end to end…"
    );
    pg_rows(&mut rows, dir.path())?;
    if args.iter().any(|a| a == "--pg-only") {
        return print_table(&rows, out, json_out);
    }
    progress!("bench: recompute_ready and ticks on 10 000- and 100 000-task boards…");
    let ticks = tick_bench(dir.path(), &bare)?;
    let commit = "one bare commit, cached";
    rows.push(paired_row(
        "recompute_ready, 10 000-task board (ms)",
        &ticks.recompute,
        commit,
        2,
    )?);
    rows.push(paired_row(
        "idle tick, 10 000-task board (ms)",
        &ticks.idle_tick,
        commit,
        2,
    )?);
    rows.push(paired_row(
        "100-claim tick, no-op spawn, 10 000-task board (ms)",
        &ticks.claim_tick,
        commit,
        2,
    )?);
    rows.push(paired_row(
        "idle tick, 100 000-task board (ms)",
        &ticks.big_idle_tick,
        commit,
        2,
    )?);

    progress!(
        "bench: processes (start, 200 tasks end to end, 100 real workers per tick, latency, idle CPU, RSS)…"
    );
    let p = process_bench(dir.path())?;
    rows.push(paired_row(
        "100-claim tick, real workers: `kanban dispatch --once` with 100 ready, max_spawn 100 (ms)",
        &p.real_claim_tick,
        "`dispatch --once` on the idle board",
        1,
    )?);
    let start = stats("process start", p.start.clone())?;
    rows.push(Row {
        measure: "`kanban` process start (`identity --json`, ms)".to_owned(),
        samples: format!("n = {}", start.n),
        value: p50_p90(start, 1),
        baseline: "—".to_owned(),
        ratio: "—".to_owned(),
        json: serde_json::json!({
            "measure": "process start", "value": stats_json(start, "ms"),
        }),
    });
    let (direct, direct_text) = median_range("end to end, direct", &p.e2e.direct, 0)?;
    rows.push(Row {
        measure: "end to end tasks/s (200 × builtin:complete, max_spawn 8)".to_owned(),
        samples: format!(
            "median (range) of {E2E_PAIRS} runs of 200 tasks, `dispatch --until-idle`"
        ),
        value: direct_text,
        baseline: format!("{:.0} bare commits/s (cached, p50)", rate(cached_stats.p50)),
        ratio: format!("{:.3}× bare commits", direct / rate(cached_stats.p50)),
        json: serde_json::json!({
            "measure": "end to end tasks per second", "samples": E2E_PAIRS,
            "value": direct, "runs": p.e2e.direct,
        }),
    });
    let (owner, owner_text) = median_range("end to end, owner mode", &p.e2e.owner, 0)?;
    let (ratio, ratio_text) = median_range("owner / direct", &p.e2e.ratio, 2)?;
    let (direct_cpu, _) = median_range("CPU per task, direct", &p.e2e.direct_cpu_ms, 1)?;
    let (owner_cpu, _) = median_range("CPU per task, owner mode", &p.e2e.owner_cpu_ms, 1)?;
    rows.push(Row {
        measure: "end to end tasks/s in owner mode (same 200 tasks through `kanban submit` and the owner)"
            .to_owned(),
        samples: format!(
            "median (range) of {E2E_PAIRS} runs, each paired with a direct one (who goes first alternates)"
        ),
        value: owner_text,
        baseline: format!(
            "{direct:.0} tasks/s direct mode, same pairs; CPU per task {direct_cpu:.1} ms direct, \
             {owner_cpu:.1} ms owner"
        ),
        ratio: format!("{ratio_text}× direct mode (median of the pairs' ratios)"),
        json: serde_json::json!({
            "measure": "end to end tasks per second, owner mode", "samples": E2E_PAIRS,
            "value": owner, "direct_mode": direct, "ratio": ratio, "ratios": p.e2e.ratio,
            "cpu_ms_per_task": {"direct": p.e2e.direct_cpu_ms, "owner": p.e2e.owner_cpu_ms},
        }),
    });
    let reg = stats("create → registered", p.registered.clone())?;
    let reg_base = stats("process start", p.registered_start_baseline.clone())?;
    rows.push(Row {
        measure:
            "create → worker running (`worker_registered`), daemon idle, seeded random arrivals 100–300 ms apart (ms)"
                .to_owned(),
        samples: format!("n = {}, interleaved", reg.n),
        value: p50_p90(reg, 1),
        baseline: format!("{} (process start)", p50_p90(reg_base, 1)),
        ratio: format!(
            "{:.1}× a process start (p50 of per-sample ratios)",
            ratios(
                "create → registered",
                &p.registered,
                &p.registered_start_baseline
            )?
            .p50
        ),
        json: serde_json::json!({
            "measure": "create to worker_registered", "seed": SEED,
            "value": stats_json(reg, "ms"),
            "baseline": { "name": "process start", "stats": stats_json(reg_base, "ms") },
        }),
    });
    let cpu = stats("dispatcher idle CPU", p.idle_cpu.clone())?;
    rows.push(Row {
        measure: format!(
            "dispatcher idle CPU (`--interval 60`, % of one core per {} ms window)",
            IDLE_WINDOW.as_millis()
        ),
        samples: format!("n = {} (`/proc/PID/schedstat`, ns)", cpu.n),
        value: format!("p50 {:.3} %, p90 {:.3} %", cpu.p50, cpu.p90),
        baseline: "target < 1 %".to_owned(),
        ratio: "—".to_owned(),
        json: serde_json::json!({
            "measure": "dispatcher idle CPU", "window_ms": IDLE_WINDOW.as_millis() as u64,
            "value": stats_json(cpu, "% of one core"),
        }),
    });
    let self_rss = vm_hwm_kib("self")?;
    rows.push(Row {
        measure: "peak RSS: worker / dispatcher on the 100 000-task board".to_owned(),
        samples: "one measurement each (VmHWM)".to_owned(),
        value: format!(
            "{:.1} MB / {:.1} MB",
            p.worker_rss_kib as f64 / 1024.0,
            p.dispatcher_rss_kib as f64 / 1024.0
        ),
        baseline: format!("{:.1} MB (this bench process)", self_rss as f64 / 1024.0),
        ratio: "—".to_owned(),
        json: serde_json::json!({
            "measure": "peak RSS", "samples": 1,
            "worker_kib": p.worker_rss_kib, "dispatcher_kib": p.dispatcher_rss_kib,
            "bench_kib": self_rss,
        }),
    });

    rows.extend(web_rows(dir.path())?);
    print_table(&rows, out, json_out)
}

/// The web view's rows: the board page of a 10 000-task board against a static asset, and the
/// server's CPU with 50 idle live connections.
fn web_rows(dir: &Path) -> anyhow::Result<Vec<Row>> {
    progress!("bench: kanban serve (10 000-task board page, 50 idle live connections)…");
    let web = kanban_tests::web_bench::measure(&kanban_bin()?, dir)?;
    let mut rows = Vec::new();
    rows.push(Row {
        measure: format!(
            "`kanban serve` board page, 10 000-task board ({} KiB, ms)",
            web.board_page_bytes / 1024
        ),
        samples: "n = 20, interleaved".to_owned(),
        value: format!(
            "p50 {:.1}, p90 {:.1}",
            web.board_page_ms, web.board_page_p90_ms
        ),
        baseline: format!(
            "p50 {:.2}, p90 {:.2} (a static asset, same server)",
            web.asset_ms, web.asset_p90_ms
        ),
        ratio: format!("{:.1}× the asset (p50s)", web.board_page_ms / web.asset_ms),
        json: serde_json::json!({
            "measure": "kanban serve board page", "bytes": web.board_page_bytes,
            "value": { "n": 20, "p50": web.board_page_ms, "p90": web.board_page_p90_ms, "unit": "ms" },
            "baseline": { "name": "static asset", "stats":
                { "n": 20, "p50": web.asset_ms, "p90": web.asset_p90_ms, "unit": "ms" } },
        }),
    });
    rows.push(Row {
        measure: "`kanban serve` CPU with 50 idle live connections".to_owned(),
        samples: "one 5 s measurement".to_owned(),
        // Zero clock ticks in the window: below the resolution, not 0 %.
        value: if web.idle_streams_cpu_percent > 0.0 {
            format!("{:.2} %", web.idle_streams_cpu_percent)
        } else {
            "< 0.20 %".to_owned()
        },
        baseline: "resolution 0.20 % (one 10 ms tick in 5 s)".to_owned(),
        ratio: "—".to_owned(),
        json: serde_json::json!({
            "measure": "kanban serve idle streams CPU", "samples": 1,
            "percent": web.idle_streams_cpu_percent,
        }),
    });

    Ok(rows)
}

/// A PostgreSQL row of operations per second (`samples`, µs per operation) against the
/// `baseline` loop's samples of the same rounds (`bare`, µs per commit).
/// One row per transition: the board's rate against the lean hand-written transaction that
/// writes the same rows, round by round (`prefix` names the store).
fn lean_rows(rows: &mut Vec<Row>, ops: &OpSamples, prefix: &str) -> anyhow::Result<()> {
    for (name, board, lean) in [
        ("create", &ops.create, &ops.lean_create),
        ("claim, single", &ops.claim, &ops.lean_claim),
        ("heartbeat", &ops.heartbeat, &ops.lean_heartbeat),
        ("complete", &ops.complete, &ops.lean_complete),
    ] {
        rows.push(pg_rate_row(
            format!(
                "{prefix}{name} / s against the lean transaction writing the same rows ({BATCH} per sample, one transaction each)"
            ),
            format!("{prefix}{name} per second against its lean transaction"),
            board,
            lean,
            &format!("the lean transaction writing the same rows ({name})"),
        )?);
    }
    Ok(())
}

/// Runs a body and returns the write-ahead-log volume it wrote.
type WalMeasure<'a> = dyn FnMut(&mut dyn FnMut() -> anyhow::Result<()>) -> anyhow::Result<i64> + 'a;

/// Tasks per write-ahead-log measurement.
const WAL_BATCH: usize = 50;

/// The board's four transitions on `n` fresh tasks, each phase run inside `measure` (which
/// returns its WAL volume); per-task volumes in the order create, claim, heartbeat, complete.
fn board_wal(board: &Board, n: usize, measure: &mut WalMeasure<'_>) -> anyhow::Result<[f64; 4]> {
    let t = now();
    let spec = ClaimSpec {
        lock: "bench:wal".to_owned(),
        ttl_seconds: 900,
        origin: kanban_runtime::board::ClaimOrigin::External,
    };
    let mut ids = Vec::new();
    let create = measure(&mut || {
        ids = board_creates(board, n, "wal", t)?;
        Ok(())
    })?;
    let mut runs = Vec::new();
    let claim = measure(&mut || {
        runs = board_claims(board, &ids, &spec, t)?;
        Ok(())
    })?;
    let heartbeat = measure(&mut || board_heartbeats(board, &ids, &runs, &spec.lock, t + 1))?;
    let complete = measure(&mut || board_completions(board, &ids, &runs, t + 2))?;
    Ok([create, claim, heartbeat, complete].map(|v| v as f64 / n as f64))
}

/// The lean transactions' WAL volume per task, as [`board_wal`].
fn lean_wal(
    lean: &mut dyn Lean,
    prefix: &str,
    n: usize,
    measure: &mut WalMeasure<'_>,
) -> anyhow::Result<[f64; 4]> {
    let t = now();
    let ids: Vec<String> = (0..n).map(|i| format!("t_{prefix}{i:05}")).collect();
    let lean = std::cell::RefCell::new(lean);
    let create = measure(&mut || lean.borrow_mut().create(&ids, t).map(drop))?;
    let mut runs = Vec::new();
    let claim = measure(&mut || {
        runs = lean.borrow_mut().claim(&ids, t)?.1;
        Ok(())
    })?;
    let heartbeat = measure(&mut || lean.borrow_mut().heartbeat(&ids, &runs, t + 1).map(drop))?;
    let complete = measure(&mut || lean.borrow_mut().complete(&ids, &runs, t + 2).map(drop))?;
    Ok([create, claim, heartbeat, complete].map(|v| v as f64 / n as f64))
}

/// Rows of WAL volume per transition: the board's against the lean transaction's.
fn wal_rows(store: &str, unit: &str, board: [f64; 4], lean: [f64; 4]) -> Vec<Row> {
    ["create", "claim", "heartbeat", "complete"]
        .into_iter()
        .zip(board.into_iter().zip(lean))
        .map(|(name, (b, l))| Row {
            measure: format!("{store}: {unit} per {name} (one transaction each)"),
            samples: format!("one measurement ({WAL_BATCH} tasks)"),
            value: format!("{b:.1}"),
            baseline: format!("{l:.1} (the lean transaction writing the same rows)"),
            ratio: format!("{:.2}× the lean volume", b / l),
            json: serde_json::json!({
                "measure": format!("{store} {unit} per {name}"),
                "value": b,
                "baseline": { "name": "the lean transaction writing the same rows", "value": l },
            }),
        })
        .collect()
}

/// SQLite WAL frames per transition, on fresh board files (a frame is one page written).
fn sqlite_wal_rows(dir: &Path, original: &Path) -> anyhow::Result<Vec<Row>> {
    let board_path = dir.join("wal-board.db");
    let lean_path = dir.join("wal-lean.db");
    let board = Board::open_path(&board_path, &OpenOptions::create())?;
    drop(Board::open_path(&lean_path, &OpenOptions::create())?);
    let mut measure_board = |body: &mut dyn FnMut() -> anyhow::Result<()>| {
        kanban_tests::lean::sqlite_wal_frames(&board_path, body)
    };
    let b = board_wal(&board, WAL_BATCH, &mut measure_board)?;
    let mut lean = LeanSqlite::open(&lean_path)?;
    let mut measure_lean = |body: &mut dyn FnMut() -> anyhow::Result<()>| {
        kanban_tests::lean::sqlite_wal_frames(&lean_path, body)
    };
    let l = lean_wal(&mut lean, "w", WAL_BATCH, &mut measure_lean)?;
    let mut rows = wal_rows("SQLite", "WAL frames", b, l);
    let page_size: i64 =
        rusqlite::Connection::open(&board_path)?.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    rows.extend(original_wal_rows(dir, original, b, page_size)?);
    Ok(rows)
}

/// The header SQLite writes before each page in the WAL.
const WAL_FRAME_HEADER: i64 = 24;

/// The original's WAL bytes per transition beside the board's (`b`, frames of `page_size`
/// bytes): `tests/bench/original_wal.py` drives the original's own `kanban_db` functions from
/// its package in `original` on a fresh board file. Bytes, not frames: the original's pages are
/// 4 KiB, a kanban board's 2 KiB.
fn original_wal_rows(
    dir: &Path,
    original: &Path,
    b: [f64; 4],
    page_size: i64,
) -> anyhow::Result<Vec<Row>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/original_wal.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(original)
        .arg(dir.join("wal-original.db"))
        .arg(WAL_BATCH.to_string())
        .output()
        .context("cannot run python3 (the original's WAL rows need it)")?;
    ensure!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("{}: output is not JSON", script.display()))?;
    let their_page = report["page_size"]
        .as_i64()
        .context("the original's report has no page_size")?;
    ["create", "claim", "heartbeat", "complete"]
        .into_iter()
        .zip(b)
        .map(|(name, ours)| {
            let theirs = report["frames"][name]
                .as_f64()
                .with_context(|| format!("the original's report has no frames for {name}"))?;
            ensure!(theirs > 0.0, "the original's {name} wrote no WAL frame");
            let ours_bytes = ours * (page_size + WAL_FRAME_HEADER) as f64;
            let their_bytes = theirs * (their_page + WAL_FRAME_HEADER) as f64;
            Ok(Row {
                measure: format!("SQLite: WAL bytes per {name}, against the original (one transaction each)"),
                samples: format!("one measurement ({WAL_BATCH} tasks each)"),
                value: format!("{ours_bytes:.0} ({ours:.1} frames of {page_size} bytes)"),
                baseline: format!(
                    "{their_bytes:.0} (the original's `kanban_db`: {theirs:.1} frames of {their_page} bytes)"
                ),
                ratio: format!("{:.2}× the original's volume", ours_bytes / their_bytes),
                json: serde_json::json!({
                    "measure": format!("SQLite WAL bytes per {name}, against the original"),
                    "value": ours_bytes,
                    "baseline": { "name": "the original's kanban_db", "value": their_bytes,
                                  "frames": theirs, "page_size": their_page },
                }),
            })
        })
        .collect()
}

/// PostgreSQL WAL bytes per transition (nothing else writes to the server meanwhile).
fn pg_wal_rows(cluster: &kanban_pgwire::cluster::TestCluster) -> anyhow::Result<Vec<Row>> {
    cluster.create_database("bench_wal")?;
    cluster.create_database("bench_wal_lean")?;
    let board = Board::open_path(Path::new(&cluster.url("bench_wal")), &OpenOptions::create())?;
    drop(Board::open_path(
        Path::new(&cluster.url("bench_wal_lean")),
        &OpenOptions::create(),
    )?);
    let mut reader = cluster.connect("bench_wal")?;
    let mut measure = |body: &mut dyn FnMut() -> anyhow::Result<()>| {
        kanban_tests::lean::pg_wal_bytes(&mut reader, body)
    };
    let b = board_wal(&board, WAL_BATCH, &mut measure)?;
    let mut lean = LeanPg::new(cluster.connect("bench_wal_lean")?);
    let l = lean_wal(&mut lean, "w", WAL_BATCH, &mut measure)?;
    Ok(wal_rows("PostgreSQL", "WAL bytes", b, l))
}

fn pg_rate_row(
    measure: String,
    json_measure: String,
    samples: &[f64],
    bare: &[f64],
    baseline: &str,
) -> anyhow::Result<Row> {
    let rate = |us: f64| 1e6 / us;
    let v = stats(&measure, samples.to_vec())?;
    let b = stats(baseline, bare.to_vec())?;
    let r = ratios(&measure, bare, samples)?;
    Ok(Row {
        samples: format!("n = {}, interleaved", v.n),
        value: format!("p50 {:.0}, p90 {:.0}", rate(v.p50), rate(v.p90)),
        baseline: format!("{:.0} ({baseline} p50, same rounds)", rate(b.p50)),
        ratio: format!("{:.2}× (p50 of per-round ratios)", r.p50),
        json: serde_json::json!({
            "measure": json_measure,
            "value": stats_json(v, "µs per operation"),
            "baseline": { "name": baseline, "stats": stats_json(b, "µs per commit") },
            "ratio": stats_json(r, "× the bare rate"),
        }),
        measure,
    })
}

/// The PostgreSQL rows: each board operation against the bare `UPDATE` loop on the same server
/// (interleaved round by round), and end-to-end tasks/s with two dispatchers.
fn pg_rows(rows: &mut Vec<Row>, dir: &Path) -> anyhow::Result<()> {
    let cluster = pg_cluster()?;
    let ops = pg_board_ops(&cluster)?;
    let bare = stats("PostgreSQL bare loop", ops.bare.clone())?;
    let rate = |us: f64| 1e6 / us;
    let rate_text = |s: Stats| format!("p50 {:.0}, p90 {:.0}", rate(s.p50), rate(s.p90));
    rows.push(Row {
        measure: format!("PostgreSQL: bare `UPDATE one row` commits / s ({BATCH} per sample)"),
        samples: format!("n = {}", bare.n),
        value: rate_text(bare),
        baseline: "—".to_owned(),
        ratio: "—".to_owned(),
        json: serde_json::json!({
            "measure": "PostgreSQL bare commits", "value": stats_json(bare, "µs per commit"),
        }),
    });
    for (name, how, samples) in [
        ("create", "one transaction each", &ops.create),
        (
            "claim, batched (`Board::claim_batch`)",
            "all in one transaction",
            &ops.claim_batched,
        ),
        (
            "claim, single (`Board::claim`)",
            "one transaction each",
            &ops.claim,
        ),
        ("heartbeat", "one transaction each", &ops.heartbeat),
        ("complete", "one transaction each", &ops.complete),
    ] {
        rows.push(pg_rate_row(
            format!("PostgreSQL: {name} / s ({BATCH} per sample, {how})"),
            format!("PostgreSQL {name} per second"),
            samples,
            &ops.bare,
            "bare PostgreSQL loop",
        )?);
    }
    lean_rows(rows, &ops, "PostgreSQL: ")?;
    rows.extend(pg_wal_rows(&cluster)?);
    let concurrent = pg_concurrent(&cluster)?;
    rows.push(pg_rate_row(
        format!(
            "PostgreSQL: heartbeats / s, {CONCURRENT} workers at once ({BATCH} each per sample, one transaction each)"
        ),
        format!("PostgreSQL heartbeats per second, {CONCURRENT} connections at once"),
        &concurrent.heartbeat,
        &concurrent.bare,
        &format!("bare loop on {CONCURRENT} connections at once"),
    )?);
    let bin = kanban_bin()?;
    let mut one = None;
    for dispatchers in [1, 2, 4] {
        progress!("bench: PostgreSQL end to end, {dispatchers} dispatcher(s)…");
        let e = pg_end_to_end(&bin, dir, &cluster, dispatchers)?;
        let rate_e2e = e.tasks_per_s;
        let base = *one.get_or_insert(rate_e2e);
        let name = if dispatchers == 1 {
            "1 dispatcher".to_owned()
        } else {
            format!("{dispatchers} dispatchers")
        };
        rows.push(Row {
            measure: format!(
                "PostgreSQL: end to end tasks/s, {name} ({PG_E2E_TASKS} × builtin:complete, max_spawn 4 each, each its own home); CPU in % of one core (the machine has 200); server sessions and transactions per task"
            ),
            samples: format!("one measurement ({PG_E2E_TASKS} tasks)"),
            value: format!(
                "{rate_e2e:.0} tasks/s; server {:.0} %, dispatchers + workers {:.0} %, machine {:.0} %; {:.2} sessions, {:.1} transactions per task",
                e.server, e.clients, e.machine, e.sessions_per_task, e.transactions_per_task
            ),
            baseline: format!(
                "{base:.0} tasks/s with 1 dispatcher; {:.0} bare PostgreSQL commits/s (p50)",
                rate(bare.p50)
            ),
            ratio: format!("{:.2}× one dispatcher", rate_e2e / base),
            json: serde_json::json!({
                "measure": format!("PostgreSQL end to end tasks per second, {name}"),
                "dispatchers": dispatchers, "samples": 1, "value": rate_e2e,
                "server_cpu_percent": e.server,
                "clients_cpu_percent": e.clients,
                "machine_cpu_percent": e.machine,
                "sessions_per_task": e.sessions_per_task,
                "transactions_per_task": e.transactions_per_task,
                "baseline": { "name": "1 dispatcher", "value": base },
            }),
        });
    }
    Ok(())
}

/// Prints the table, and writes it to `out` and the rows as JSON to `json_out` when given.
fn print_table(
    rows: &[Row],
    out: Option<PathBuf>,
    json_out: Option<PathBuf>,
) -> anyhow::Result<()> {
    let mut table = String::from(
        "| measure | samples | value | baseline (same run) | ratio |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.measure, r.samples, r.value, r.baseline, r.ratio
        ));
    }
    if let Some(out) = out {
        std::fs::write(&out, &table).with_context(|| format!("cannot write {}", out.display()))?;
    }
    if let Some(path) = json_out {
        let json = serde_json::json!({
            "samples_per_row": SAMPLES,
            "rows": rows.iter().map(|r| r.json.clone()).collect::<Vec<_>>(),
        });
        std::fs::write(&path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    // Written last and without `print!`: a closed stdout is an error, never a panic, and the
    // files above are already written.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(table.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot print the table to stdout")?;
    Ok(())
}
