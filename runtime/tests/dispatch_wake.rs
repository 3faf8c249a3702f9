//! Waking on the change: a commit by another process (`kanban create`) wakes a waiting
//! dispatcher through the board's file watch, not through its fallback poll. The poll interval
//! and the deadline are two minutes, and the wait must report *how* it learnt of the change
//! (`Wake::Notified`, not `Wake::Polled`): a broken watch fails the test instead of passing it
//! late. No timing is asserted.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary and real processes

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use kanban_runtime::board::{Board, NewTask, OpenOptions, Status, Wake};
use kanban_runtime::dispatch::NoSpawn;
use kanban_runtime::dispatch::daemon::{Woke, wait_for_work};
use kanban_tests::Kanban;

/// Longer than any test should take: reaching it means the watch did not wake the wait.
const LONG: Duration = Duration::from_secs(120);

fn setup() -> (Kanban, Board) {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    let board = Board::open_path(&k.default_db(), &OpenOptions::create()).expect("open the board");
    (k, board)
}

fn ready_titles(board: &Board) -> Vec<String> {
    board
        .list_tasks(&Default::default())
        .expect("list")
        .into_iter()
        .filter(|t| t.status == Status::Ready)
        .map(|t| t.title)
        .collect()
}

#[test]
fn a_create_from_another_process_wakes_the_watch_without_the_poll() {
    let (k, board) = setup();
    let mut watch = board.watch_changes();
    assert!(watch.is_notifying(), "no file watch could be set up");
    // Started, not awaited: the create lands while the watch waits (or just before it).
    let mut child = k
        .cmd()
        .args(["create", "from another process"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn kanban create");
    let wake = watch.wait(&board, LONG, LONG).expect("wait");
    assert!(child.wait().expect("wait for kanban create").success());
    assert_eq!(wake, Wake::Notified);
    assert_eq!(ready_titles(&board), ["from another process"]);
    // The change was reported once: nothing new now.
    assert_eq!(
        watch.wait(&board, Duration::ZERO, LONG).expect("wait"),
        Wake::TimedOut
    );
}

#[test]
fn the_watch_ignores_commits_of_its_own_connection() {
    let (_k, board) = setup();
    let mut watch = board.watch_changes();
    board
        .create_task(
            &NewTask {
                title: "ours".to_owned(),
                ..NewTask::default()
            },
            1_700_000_000,
        )
        .expect("create");
    // The file event of our own commit is drained, and `data_version` did not move.
    assert_eq!(
        watch.wait(&board, Duration::ZERO, LONG).expect("wait"),
        Wake::TimedOut
    );
}

#[test]
fn a_waiting_dispatcher_wakes_on_a_create_from_another_process() {
    let (k, board) = setup();
    let mut watch = board.watch_changes();
    watch.mark_seen(&board).expect("mark");
    let mut child = k
        .cmd()
        .args(["create", "wake the dispatcher"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn kanban create");
    let stop = AtomicBool::new(false);
    let woke = wait_for_work(
        &board,
        &mut watch,
        &mut NoSpawn::default(),
        Instant::now() + LONG,
        &stop,
        LONG,
    );
    assert!(child.wait().expect("wait for kanban create").success());
    assert_eq!(woke, Woke::Board(Wake::Notified));
    assert_eq!(ready_titles(&board), ["wake the dispatcher"]);
}

#[test]
fn a_set_stop_flag_ends_the_dispatcher_wait() {
    let (_k, board) = setup();
    let mut watch = board.watch_changes();
    let stop = AtomicBool::new(true);
    let woke = wait_for_work(
        &board,
        &mut watch,
        &mut NoSpawn::default(),
        Instant::now() + LONG,
        &stop,
        LONG,
    );
    assert_eq!(woke, Woke::Stopped);
}
