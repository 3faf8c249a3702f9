//! The dispatchers' recorded ticks (README "Web view", docs/web.md "Health"): a running
//! dispatcher loop records its ticks on the board and that it stopped; `kanban create` warns on
//! stderr when none runs (exit code unchanged) and is quiet while one does; the health page
//! shows the last tick; a PostgreSQL board records them the same way.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod web_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use kanban_tests::Kanban;
use web_support::{Serve, get, wait_for};

const WARNING: &str = "no dispatcher is running for board";

fn kanban() -> Kanban {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\ninterval_seconds = 0.05\n",
    )
    .unwrap();
    k.ok(&["init"]);
    k
}

#[test]
fn create_warns_while_no_dispatcher_runs_and_is_quiet_while_one_does() {
    let k = kanban();
    let serve = Serve::start(&k, &[]);
    let first = k.run(&["create", "nobody picks this up"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stderr.contains(WARNING), "{}", first.stderr);
    assert!(
        first.stderr.contains("none ever recorded a tick"),
        "{}",
        first.stderr
    );
    assert!(first.stdout.trim().starts_with("t_"), "{}", first.stdout);
    assert!(
        get(serve.addr, "/health", "")
            .body
            .contains("last tick: not recorded")
    );
    let board = get(serve.addr, "/", "").body;
    assert!(
        board.contains("no dispatcher running (none ever ticked)"),
        "{board}"
    );

    let mut daemon = k
        .cmd()
        .args(["dispatch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        "the dispatcher's first recorded tick",
        Duration::from_secs(60),
        || {
            let run = k.run(&["create", "picked up"]);
            assert_eq!(run.code, 0, "{run:?}");
            (!run.stderr.contains(WARNING)).then_some(())
        },
    );
    let health = get(serve.addr, "/health", "");
    assert!(
        !health.body.contains("last tick: not recorded"),
        "{}",
        health.body
    );
    assert!(health.body.contains("s ago"), "{}", health.body);
    let board = get(serve.addr, "/", "").body;
    assert!(board.contains("dispatcher running, last tick"), "{board}");

    // Stopped cleanly (SIGTERM), it says so: the warning is back, naming the last tick.
    let status = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exited = wait_for("the dispatcher to stop", Duration::from_secs(60), || {
        daemon.try_wait().unwrap()
    });
    assert!(exited.success(), "{exited:?}");
    let after = k.run(&["create", "waits again"]);
    assert_eq!(after.code, 0, "{after:?}");
    assert!(after.stderr.contains(WARNING), "{}", after.stderr);
    assert!(
        after.stderr.contains("the last tick was"),
        "{}",
        after.stderr
    );
}

#[test]
fn a_postgresql_board_records_its_dispatchers_ticks_too() {
    let cluster = kanban_pgwire::cluster::TestCluster::shared().unwrap();
    let url = cluster.url(&cluster.fresh_database("ticks").unwrap());
    let k = kanban();
    k.ok(&["boards", "create", "pgb", "--url", &url]);
    let warned = k.run(&["--board", "pgb", "create", "on postgres"]);
    assert_eq!(warned.code, 0, "{warned:?}");
    assert!(warned.stderr.contains(WARNING), "{}", warned.stderr);
    let run = k.run(&["--board", "pgb", "dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");
    let serve = Serve::start(&k, &["--board", "pgb"]);
    let metrics = get(serve.addr, "/metrics", "").body;
    assert!(
        metrics.contains("kanban_dispatcher_last_tick_age_seconds{board=\"pgb\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kanban_dispatchers_running{board=\"pgb\"} 0"),
        "{metrics}"
    );
}
