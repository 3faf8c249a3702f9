//! `kanban-bench`: the benchmark suite behind `cargo xtask bench` (ARCHITECTURE.md §10).
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

use std::process::{Child, Command, Stdio};

use kanban_runtime::board::{
    self, Board, BoardLocation, ClaimOutcome, ClaimSpec, Fence, NewTask, OpenOptions, Status,
};
use kanban_runtime::clock::SystemClock;
use kanban_runtime::config::{Config, ProfileConfig};
use kanban_runtime::dispatch::{self, NoSpawn, Settings};

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

/// The physical limit: one row updated per `BEGIN IMMEDIATE … COMMIT`, with a fresh board's
/// pragmas (WAL, `synchronous=FULL`, 2 KiB pages, SQLite's default autocheckpoint).
fn bare_update_loop(dir: &Path, n: usize) -> anyhow::Result<f64> {
    let conn = rusqlite::Connection::open(dir.join("bare.db"))?;
    conn.execute_batch(
        "PRAGMA page_size=2048; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;
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

fn vm_hwm_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn bench_config(max_spawn: u32) -> Config {
    let mut config = Config::default();
    config.dispatch.max_spawn = max_spawn;
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
/// waiting on running parents, the rest done. Returns the board, its settings' inputs and the
/// no-op spawner that "runs" the running ones.
fn big_board(
    dir: &Path,
    name: &str,
    total: usize,
    ready: usize,
    running: usize,
) -> anyhow::Result<(Board, BoardLocation, NoSpawn)> {
    let waiting = 300;
    let db = dir.join(name).join("kanban.db");
    let board = Board::open_path(&db, &OpenOptions::create())?;
    let t = now();
    let mut live = Vec::new();
    board.write(|tx| -> anyhow::Result<()> {
        for i in 0..(ready + running) {
            let c = board::tasks::create_task_in(
                tx,
                &NewTask {
                    title: format!("live {i}"),
                    priority: 1,
                    ..NewTask::default()
                },
                t,
            )?;
            live.push(c.id);
        }
        for i in 0..waiting {
            let parent = live[i % running.max(1)].clone();
            board::tasks::create_task_in(
                tx,
                &NewTask {
                    title: format!("waiting {i}"),
                    parents: vec![parent],
                    ..NewTask::default()
                },
                t,
            )?;
        }
        for i in 0..total.saturating_sub(ready + running + waiting) {
            board::tasks::create_task_in(
                tx,
                &NewTask {
                    title: format!("old {i}"),
                    ..NewTask::default()
                },
                t,
            )?;
        }
        Ok(())
    })?;
    // The old tasks are history: mark them done directly (they never had a run).
    board.conn().execute(
        "UPDATE tasks SET status = 'done', completed_at = ?1 WHERE title LIKE 'old %'",
        [t],
    )?;
    let location = BoardLocation {
        slug: "default".to_owned(),
        db_path: db,
        pinned: false,
    };
    // One tick with budget `running` claims the running ones through the no-op spawner.
    let mut workers = NoSpawn::default();
    let settings = Settings::new(
        dir.join(name),
        location.clone(),
        &bench_config(running as u32),
    )?;
    let mut b = board;
    dispatch::tick(&mut b, &settings, &SystemClock, &mut workers)?;
    Ok((b, location, workers))
}

struct TickFigures {
    recompute_ms: f64,
    idle_tick_ms: f64,
    claim_tick_ms: f64,
    big_idle_tick_ms: f64,
}

fn tick_bench(dir: &Path) -> anyhow::Result<TickFigures> {
    let (mut b, location, mut workers) = big_board(dir, "ticks", 10_000, 200, 100)?;
    let idle = Settings::new(dir.join("ticks"), location.clone(), &bench_config(100))?;
    let recompute_ms = median(
        (0..20)
            .map(|_| {
                let start = Instant::now();
                let promoted = b.recompute_ready(now());
                let d = ms(start.elapsed());
                promoted.map(|_| d)
            })
            .collect::<Result<Vec<_>, _>>()?,
    );
    let mut idle_ticks = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let report = dispatch::tick(&mut b, &idle, &SystemClock, &mut workers)?;
        idle_ticks.push(ms(start.elapsed()));
        anyhow::ensure!(report.spawned.is_empty(), "the idle tick spawned");
    }
    let claim = Settings::new(dir.join("ticks"), location, &bench_config(200))?;
    let start = Instant::now();
    let report = dispatch::tick(&mut b, &claim, &SystemClock, &mut workers)?;
    let claim_tick_ms = ms(start.elapsed());
    anyhow::ensure!(
        report.spawned.len() == 100,
        "the claim tick spawned {}",
        report.spawned.len()
    );

    let (mut big, location, mut workers) = big_board(dir, "big", 100_000, 200, 100)?;
    let idle = Settings::new(dir.join("big"), location, &bench_config(100))?;
    let mut big_ticks = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        dispatch::tick(&mut big, &idle, &SystemClock, &mut workers)?;
        big_ticks.push(ms(start.elapsed()));
    }
    Ok(TickFigures {
        recompute_ms,
        idle_tick_ms: median(idle_ticks),
        claim_tick_ms,
        big_idle_tick_ms: median(big_ticks),
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

fn write_home(home: &Path, max_spawn: u32, extra_profiles: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(home)?;
    std::fs::write(
        home.join("kanban.toml"),
        format!(
            "[dispatch]\nmax_spawn = {max_spawn}\n\n[profiles.default]\nagent = \"builtin:complete\"\n{extra_profiles}"
        ),
    )?;
    Ok(())
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct ProcessFigures {
    tasks_per_sec: f64,
    owner_tasks_per_sec: f64,
    registered_p50_ms: f64,
    registered_p90_ms: f64,
    idle_cpu_percent: f64,
    start_ms: f64,
    worker_rss_kib: u64,
    dispatcher_rss_kib: u64,
}

fn registered(board: &Board, id: &str) -> anyhow::Result<bool> {
    Ok(board
        .events(id, None)?
        .iter()
        .any(|e| e.kind == "worker_registered"))
}

/// 200 tasks on builtin:complete, max_spawn 8, `dispatch --until-idle`: tasks/s. In owner mode
/// the owner the first submitter starts is stopped afterwards.
fn end_to_end(bin: &Path, home: &Path, owner: bool) -> anyhow::Result<f64> {
    write_home(home, 8, "")?;
    if owner {
        let text = std::fs::read_to_string(home.join("kanban.toml"))?;
        std::fs::write(
            home.join("kanban.toml"),
            text.replacen("[dispatch]\n", "[dispatch]\nmode = \"owner\"\n", 1),
        )?;
    }
    let board = Board::open(
        &board::paths::resolve(home, Some("default"))?,
        &OpenOptions::create(),
    )?;
    board.write(|tx| -> anyhow::Result<()> {
        for i in 0..200 {
            board::tasks::create_task_in(
                tx,
                &NewTask {
                    title: format!("e2e {i}"),
                    ..NewTask::default()
                },
                now(),
            )?;
        }
        Ok(())
    })?;
    let start = Instant::now();
    let out = kanban(bin, home)
        .args(["dispatch", "--until-idle"])
        .stdout(Stdio::null())
        .output()?;
    let elapsed = start.elapsed();
    if owner {
        let _ = kanban_runtime::admission::client::stop_owner(home, "default");
    }
    anyhow::ensure!(
        out.status.success(),
        "dispatch --until-idle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = board
        .list_tasks(&Default::default())?
        .iter()
        .filter(|t| t.status == Status::Done)
        .count();
    anyhow::ensure!(done == 200, "only {done} of 200 tasks done");
    Ok(per_sec(200, elapsed))
}

fn process_bench(dir: &Path) -> anyhow::Result<ProcessFigures> {
    let bin = kanban_bin()?;

    // Process start: a command that opens nothing.
    let mut starts = Vec::new();
    for _ in 0..30 {
        let start = Instant::now();
        let out = kanban(&bin, &dir.join("start"))
            .args(["identity", "--json"])
            .output()?;
        anyhow::ensure!(out.status.success(), "kanban identity failed");
        starts.push(ms(start.elapsed()));
    }

    // End to end: 200 tasks on builtin:complete, max_spawn 8, dispatch --until-idle; then the
    // same in owner mode (a submitter per run, admitted and run by the profile's owner).
    let tasks_per_sec = end_to_end(&bin, &dir.join("e2e"), false)?;
    let owner_tasks_per_sec = end_to_end(&bin, &dir.join("e2e-owner"), true)?;

    // Latency and idle CPU with the daemon idle (long interval: only wake-on-change is fast).
    let home = dir.join("latency");
    write_home(&home, 8, "\n[profiles.slow]\nagent = \"builtin:shell\"\n")?;
    let board = Board::open(
        &board::paths::resolve(&home, Some("default"))?,
        &OpenOptions::create(),
    )?;
    let daemon = KillOnDrop(
        kanban(&bin, &home)
            .args(["dispatch", "--interval", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let pid = daemon.0.id();
    std::thread::sleep(Duration::from_millis(500));
    let cpu0 = cpu_ticks(pid).unwrap_or(0);
    let idle_window = Duration::from_secs(5);
    std::thread::sleep(idle_window);
    let cpu1 = cpu_ticks(pid).unwrap_or(0);
    let clk_tck = 100.0; // USER_HZ on Linux
    let idle_cpu_percent =
        (cpu1.saturating_sub(cpu0)) as f64 / clk_tck / idle_window.as_secs_f64() * 100.0;

    let mut delays = Vec::new();
    for i in 0..20 {
        let start = Instant::now();
        let id = board
            .create_task(
                &NewTask {
                    title: format!("probe {i}"),
                    ..NewTask::default()
                },
                now(),
            )?
            .id;
        while !registered(&board, &id)? {
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(30),
                "task {id} never registered"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        delays.push(ms(start.elapsed()));
        while board.get_task(&id)?.status != Status::Done {
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(30),
                "task {id} never finished"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    delays.sort_by(|a, b| a.total_cmp(b));

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
    let start = Instant::now();
    let mut worker_rss_kib = 0;
    loop {
        let task = board.get_task(&id)?;
        if task.status == Status::Done {
            break;
        }
        if let Some(k) = task.worker_pid.and_then(|pid| vm_hwm_kib(&pid.to_string())) {
            worker_rss_kib = worker_rss_kib.max(k);
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(30),
            "rss task never finished"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(daemon);

    // Dispatcher peak RSS on the 100 000-task board.
    let big = dir.join("big");
    std::fs::create_dir_all(&big)?;
    std::fs::write(big.join("kanban.toml"), "[dispatch]\nmax_spawn = 4\n")?;
    let daemon = KillOnDrop(
        kanban(&bin, &big)
            .args(["dispatch", "--interval", "0.05"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    std::thread::sleep(Duration::from_secs(2));
    let dispatcher_rss_kib = vm_hwm_kib(&daemon.0.id().to_string()).unwrap_or(0);
    drop(daemon);

    Ok(ProcessFigures {
        tasks_per_sec,
        owner_tasks_per_sec,
        registered_p50_ms: delays[delays.len() / 2],
        registered_p90_ms: delays[delays.len() * 9 / 10],
        idle_cpu_percent,
        start_ms: median(starts),
        worker_rss_kib,
        dispatcher_rss_kib,
    })
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

    eprintln!("bench: recompute_ready and ticks on 10 000- and 100 000-task boards…");
    let ticks = tick_bench(dir.path())?;
    let bare_ms = 1000.0 / bare;
    for (measure, v, target) in [
        (
            "recompute_ready, 10 000-task board (ms)",
            ticks.recompute_ms,
            "—",
        ),
        (
            "idle tick, 10 000-task board (ms)",
            ticks.idle_tick_ms,
            "< 0.5 ms (original ≈ 2.3 ms)",
        ),
        (
            "100-claim tick, no-op spawn, 10 000-task board (ms)",
            ticks.claim_tick_ms,
            "< 20 ms (original ≈ 130 ms)",
        ),
        (
            "idle tick, 100 000-task board (ms)",
            ticks.big_idle_tick_ms,
            "< 10 ms",
        ),
    ] {
        rows.push(Row {
            measure: measure.to_owned(),
            value: format!("{v:.2}"),
            baseline: format!("{bare_ms:.2} ms (one bare commit)"),
            ratio: format!("{:.2}× a commit; target {target}", v / bare_ms),
        });
    }

    eprintln!("bench: processes (start, 200 tasks end to end, latency, idle CPU, RSS)…");
    let p = process_bench(dir.path())?;
    let self_rss = vm_hwm_kib("self").unwrap_or(0);
    rows.push(Row {
        measure: "`kanban` process start (`identity --json`, ms, median of 30)".to_owned(),
        value: format!("{:.1}", p.start_ms),
        baseline: "original ≈ 120 ms to import its board module".to_owned(),
        ratio: format!("{:.3}× the original", p.start_ms / 120.0),
    });
    rows.push(Row {
        measure: "end to end tasks/s (200 × builtin:complete, max_spawn 8)".to_owned(),
        value: format!("{:.0}", p.tasks_per_sec),
        baseline: format!("{bare:.0} bare commits/s"),
        ratio: format!(
            "{:.2}× bare commits; target ≥ 200/s",
            p.tasks_per_sec / bare
        ),
    });
    rows.push(Row {
        measure: "end to end tasks/s in owner mode (same 200 tasks through `kanban submit` and the owner)"
            .to_owned(),
        value: format!("{:.0}", p.owner_tasks_per_sec),
        baseline: format!("{:.0} tasks/s direct mode, same run", p.tasks_per_sec),
        ratio: format!("{:.2}× direct mode", p.owner_tasks_per_sec / p.tasks_per_sec),
    });
    rows.push(Row {
        measure: "create → worker_registered, daemon idle (ms)".to_owned(),
        value: format!(
            "p50 {:.1}, p90 {:.1}",
            p.registered_p50_ms, p.registered_p90_ms
        ),
        baseline: format!("{:.1} ms process start", p.start_ms),
        ratio: format!(
            "p50 {:.1}× a process start; target p50 < 100 ms",
            p.registered_p50_ms / p.start_ms
        ),
    });
    rows.push(Row {
        measure: "dispatcher idle CPU (5 s, --interval 60)".to_owned(),
        value: format!("{:.2} %", p.idle_cpu_percent),
        baseline: "one core".to_owned(),
        ratio: "target < 1 %".to_owned(),
    });
    rows.push(Row {
        measure: "peak RSS: worker / dispatcher on the 100 000-task board".to_owned(),
        value: format!(
            "{:.1} MB / {:.1} MB",
            p.worker_rss_kib as f64 / 1024.0,
            p.dispatcher_rss_kib as f64 / 1024.0
        ),
        baseline: format!("{:.1} MB (this bench process)", self_rss as f64 / 1024.0),
        ratio: "targets < 10 MB / < 40 MB (original ≈ 30 MB)".to_owned(),
    });

    eprintln!("bench: kanban serve (10 000-task board page, 50 idle live connections)…");
    let web = kanban_tests::web_bench::measure(&kanban_bin()?, dir.path())?;
    rows.push(Row {
        measure: format!(
            "`kanban serve` board page, 10 000-task board (ms, median of 20; {} KiB)",
            web.board_page_bytes / 1024
        ),
        value: format!("{:.1}", web.board_page_ms),
        baseline: format!("{:.2} ms (a static asset, same server)", web.asset_ms),
        ratio: format!(
            "{:.1}× the asset; target < 100 ms",
            web.board_page_ms / web.asset_ms
        ),
    });
    rows.push(Row {
        measure: "`kanban serve` CPU with 50 idle live connections (5 s)".to_owned(),
        value: format!("{:.2} %", web.idle_streams_cpu_percent),
        baseline: "one core".to_owned(),
        ratio: "target < 1 %".to_owned(),
    });

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
