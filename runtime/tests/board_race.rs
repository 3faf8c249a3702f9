//! The claim race: 8 OS processes each run `kanban claim` over the same 200 ready tasks, every one
//! in its own order. Every task must be claimed exactly once (exit 0 once, exit 3 seven times),
//! the winner recorded on the task must be the process that saw exit 0, and `kanban fsck` must be
//! clean afterwards. Repeated on fresh boards.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary and real processes

use std::process::{Child, Stdio};

use kanban_runtime::board::{Board, NewTask, OpenOptions};
use kanban_tests::{Kanban, shuffled, start_claimer};

const CLAIMERS: usize = 8;
const TASKS: usize = 200;
const ROUNDS: usize = 3;

/// Creates `TASKS` ready tasks in one transaction through the library (setup only).
fn seed_board(k: &Kanban) -> Vec<String> {
    let board = Board::open_path(&k.default_db(), &OpenOptions::create()).expect("open the board");
    let tasks: Vec<NewTask> = (0..TASKS)
        .map(|i| NewTask {
            title: format!("task {i}"),
            ..NewTask::default()
        })
        .collect();
    board
        .create_tasks(&tasks, 1_700_000_000)
        .map(|made| made.into_iter().map(|c| c.id).collect())
        .expect("seed the board")
}

#[test]
fn eight_processes_claim_each_of_200_tasks_exactly_once() {
    for round in 0..ROUNDS {
        let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
        let ids = seed_board(&k);
        let children: Vec<Child> = (0..CLAIMERS)
            .map(|n| {
                let order = shuffled(&ids, (round * CLAIMERS + n + 1) as u64);
                start_claimer(k.bin(), k.home(), n, &order)
            })
            .collect();
        let mut winners: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
        for (n, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().expect("claimer");
            assert!(out.status.success(), "claimer {n} failed");
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), TASKS, "claimer {n} ran every claim");
            for line in lines {
                let (id, code) = line.split_once(' ').expect("id code");
                match code {
                    "0" => winners.entry(id.to_owned()).or_default().push(n),
                    "3" => {
                        let err = std::fs::read_to_string(k.home().join(format!("err-w{n}-{id}")))
                            .unwrap_or_default();
                        assert!(err.contains("running"), "loser {n} on {id}: {err}");
                    }
                    other => {
                        let err = std::fs::read_to_string(k.home().join(format!("err-w{n}-{id}")))
                            .unwrap_or_default();
                        panic!("claimer {n} on {id} exited {other}: {err}");
                    }
                }
            }
        }
        assert_eq!(winners.len(), TASKS, "round {round}: every task claimed");
        let list = k.json(&["list"]);
        for task in list.as_array().expect("array") {
            let id = task["id"].as_str().unwrap();
            let won = &winners[id];
            assert_eq!(won.len(), 1, "round {round}: {id} claimed by {won:?}");
            assert_eq!(task["status"], "running");
            assert_eq!(task["claim_lock"], format!("w{}", won[0]));
            assert!(task["current_run_id"].is_i64());
        }
        let show = k.json(&["show", &ids[0]]);
        assert_eq!(
            show["runs"].as_array().unwrap().len(),
            1,
            "one run per task"
        );
        k.assert_fsck_clean();
    }
}

#[test]
fn eight_processes_creating_on_a_fresh_home_share_one_schema() {
    for _ in 0..3 {
        let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
        let children: Vec<Child> = (0..CLAIMERS)
            .map(|n| {
                k.cmd()
                    .args(["create", &format!("task {n}")])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("start kanban")
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().expect("kanban create");
            assert!(
                out.status.success(),
                "concurrent first create failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(k.json(&["list"]).as_array().map(Vec::len), Some(CLAIMERS));
        k.assert_fsck_clean();
    }
}
