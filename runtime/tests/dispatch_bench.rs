//! Measurements, not checks (ignored by default; they print, and only fail when the work itself
//! fails). Run on a release build:
//!
//! ```sh
//! cargo test --release -p kanban-runtime --test dispatch_bench -- --ignored --nocapture --test-threads 1
//! ```

mod dispatch_support;

use std::time::{Duration, Instant};

use dispatch_support::{Home, config};
use kanban_runtime::board::Status;

#[test]
#[ignore = "measurement; run with --ignored on a release build"]
fn measure_end_to_end_tasks_per_second() {
    let home = Home::new(&config("max_spawn = 8"));
    let ids: Vec<String> = (0..200)
        .map(|i| home.create(Home::task(&format!("task {i}"), "done", None, vec![])))
        .collect();
    let start = Instant::now();
    let out = home.dispatch_until_idle(&[], Duration::from_secs(300));
    let elapsed = start.elapsed();
    assert!(out.status.success());
    let board = home.board();
    assert!(
        ids.iter()
            .all(|id| board.get_task(id).unwrap().status == Status::Done)
    );
    assert_eq!(board.fsck().unwrap(), []);
    println!(
        "200 tasks, builtin:complete, max_spawn 8: {:.2} s, {:.0} tasks/s",
        elapsed.as_secs_f64(),
        200.0 / elapsed.as_secs_f64()
    );
}

#[test]
#[ignore = "measurement; run with --ignored on a release build"]
fn measure_new_ready_task_to_worker_registered_with_an_idle_daemon() {
    let home = Home::new(&config("max_spawn = 8"));
    // A long interval: only the wake-on-change path can pick the task up quickly.
    let _daemon = home.daemon_with_interval("60");
    // Let the daemon reach its idle wait first.
    std::thread::sleep(Duration::from_millis(500));
    let board = home.board();
    let mut delays = Vec::new();
    for i in 0..20 {
        let start = Instant::now();
        let id = home.create(Home::task(&format!("probe {i}"), "done", None, vec![]));
        loop {
            if board
                .events(&id, None)
                .unwrap()
                .iter()
                .any(|e| e.kind == "worker_registered")
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "never registered"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        delays.push(start.elapsed());
        home.wait_for("the probe to finish", Duration::from_secs(30), |b| {
            b.get_task(&id).unwrap().status == Status::Done
        });
        // Idle again before the next probe.
        std::thread::sleep(Duration::from_millis(300));
    }
    delays.sort();
    println!(
        "create -> worker_registered, idle daemon: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        delays[delays.len() / 2].as_secs_f64() * 1000.0,
        delays[delays.len() * 9 / 10].as_secs_f64() * 1000.0,
        delays[delays.len() - 1].as_secs_f64() * 1000.0
    );
}
