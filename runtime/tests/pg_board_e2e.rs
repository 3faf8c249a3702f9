//! End to end on a PostgreSQL board: the real `kanban` binary, real worker processes and a real
//! (throwaway) PostgreSQL server, the board selected by `[boards.default] url` in `kanban.toml`.
//! The CLI round trip (create, list, show, dispatch until idle, fsck), two competing
//! dispatchers, the claim race of 8 processes over 200 ready tasks, and lock-free heartbeats
//! racing board-locked completions and reclaims.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary and real processes
#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test

mod dispatch_support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dispatch_support::{Home, config};
use kanban_pgwire::cluster::TestCluster;
use kanban_runtime::board::{NewTask, Status, TaskFilter};
use kanban_tests::{shuffled, start_claimer};

/// A fresh database on the test binary's throwaway cluster; its URL.
fn fresh_url(what: &str) -> String {
    let cluster = TestCluster::shared().expect("a PostgreSQL test server");
    let name = cluster.fresh_database(what).expect("create a database");
    cluster.url(&name)
}

/// A home whose default board lives in a fresh PostgreSQL database.
fn pg_home(what: &str, dispatch: &str) -> Home {
    let url = fresh_url(what);
    Home::new(&format!(
        "{}\n[boards.default]\nurl = \"{url}\"\n",
        config(dispatch)
    ))
}

fn stdout_of(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(home: &Home, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = home.kanban(&all).output().unwrap();
    serde_json::from_str(&stdout_of(&out)).expect("json output")
}

#[test]
fn the_cli_creates_lists_shows_and_dispatches_until_idle_on_a_postgres_board() {
    let home = pg_home("cli", "max_spawn = 4");
    let parent = stdout_of(
        &home
            .kanban(&["create", "first", "--assignee", "done"])
            .output()
            .unwrap(),
    )
    .trim()
    .to_owned();
    let child = stdout_of(
        &home
            .kanban(&[
                "create",
                "second",
                "--assignee",
                "done",
                "--parent",
                &parent,
            ])
            .output()
            .unwrap(),
    )
    .trim()
    .to_owned();
    let list = json(&home, &["list"]);
    let statuses: BTreeMap<String, String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(statuses[&parent], "ready");
    assert_eq!(statuses[&child], "todo");
    let shown = json(&home, &["show", &child]);
    assert_eq!(shown["task"]["title"], "second", "{shown}");

    let out = home.dispatch_until_idle(&[], Duration::from_secs(120));
    let stdout = stdout_of(&out);
    assert_eq!(stdout.matches("spawned ").count(), 2, "{stdout}");
    for id in [&parent, &child] {
        let shown = json(&home, &["show", id]);
        assert_eq!(shown["task"]["status"], "done", "{id}: {shown}");
        assert_eq!(shown["runs"].as_array().unwrap().len(), 1, "{id}");
    }
    // The child ran after its parent completed: event ids are a total order of commits.
    let events = |id: &str| home.events(id);
    let completed = events(&parent)
        .into_iter()
        .find(|e| e.kind == "completed")
        .unwrap()
        .id;
    let claimed = events(&child)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .unwrap()
        .id;
    assert!(claimed > completed);
    let fsck = home.kanban(&["fsck"]).output().unwrap();
    stdout_of(&fsck);
    // Nothing about the board is a SQLite file.
    assert!(!home.root.join("kanban/kanban.db").exists());
}

#[test]
fn two_dispatchers_on_a_postgres_board_never_run_two_workers_for_one_task() {
    for round in 0..2 {
        let home = pg_home("two", "max_spawn = 6");
        let ids: Vec<String> = (0..24)
            .map(|i| home.create(Home::task(&format!("r{round} t{i}"), "done", None, vec![])))
            .collect();
        let spawn = || {
            home.kanban(&["dispatch", "--until-idle"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let out_a = dispatch_support::wait_output(a, Duration::from_secs(120));
        let out_b = dispatch_support::wait_output(b, Duration::from_secs(120));
        stdout_of(&out_a);
        stdout_of(&out_b);
        let board = home.board();
        let mut spawned: HashMap<String, usize> = HashMap::new();
        for id in &ids {
            assert_eq!(
                board.get_task(id).unwrap().status,
                Status::Done,
                "{id}: {:?} {}",
                home.events(id),
                String::from_utf8_lossy(&out_a.stderr)
            );
            assert_eq!(board.runs(id).unwrap().len(), 1, "round {round}: {id}");
            let n = home.kinds(id).iter().filter(|k| *k == "spawned").count();
            *spawned.entry(id.clone()).or_default() += n;
        }
        assert!(spawned.values().all(|n| *n == 1), "{spawned:?}");
        assert_eq!(board.fsck().unwrap(), []);
        assert_eq!(
            board.list_tasks(&TaskFilter::default()).unwrap().len(),
            ids.len()
        );
    }
}

const CLAIMERS: usize = 8;
const TASKS: usize = 200;

#[test]
fn eight_processes_claim_each_of_200_tasks_on_a_postgres_board_exactly_once() {
    let home = pg_home("race", "");
    let tasks: Vec<NewTask> = (0..TASKS)
        .map(|i| NewTask {
            title: format!("task {i}"),
            ..NewTask::default()
        })
        .collect();
    let ids: Vec<String> = home
        .board()
        .create_tasks(&tasks, 1_700_000_000)
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    let children: Vec<Child> = (0..CLAIMERS)
        .map(|n| {
            start_claimer(
                Path::new(env!("CARGO_BIN_EXE_kanban")),
                &home.root,
                n,
                &shuffled(&ids, n as u64 + 1),
            )
        })
        .collect();
    let mut winners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (n, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("claimer");
        assert!(out.status.success(), "claimer {n} failed");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), TASKS, "claimer {n} ran every claim");
        for line in lines {
            let (id, code) = line.split_once(' ').expect("id code");
            let err = || {
                std::fs::read_to_string(home.root.join(format!("err-w{n}-{id}")))
                    .unwrap_or_default()
            };
            match code {
                "0" => winners.entry(id.to_owned()).or_default().push(n),
                // Lost: the task was already running, or another claimer held its row (a
                // PostgreSQL claim never waits for it: `FOR UPDATE SKIP LOCKED`).
                "3" => {
                    let err = err();
                    assert!(
                        err.contains("is running") || err.contains("changed concurrently"),
                        "loser {n} on {id}: {err}"
                    );
                }
                other => panic!("claimer {n} on {id} exited {other}: {}", err()),
            }
        }
    }
    assert_eq!(winners.len(), TASKS, "every task claimed");
    let board = home.board();
    for task in board.list_tasks(&TaskFilter::default()).unwrap() {
        let won = &winners[&task.id];
        assert_eq!(won.len(), 1, "{} claimed by {won:?}", task.id);
        assert_eq!(task.status, Status::Running);
        assert_eq!(
            task.claim_lock.as_deref(),
            Some(format!("w{}", won[0]).as_str())
        );
        assert_eq!(board.runs(&task.id).unwrap().len(), 1, "one run per task");
    }
    assert_eq!(board.fsck().unwrap(), []);
}

#[test]
fn a_dispatcher_whose_postgres_connection_was_ended_reconnects_and_goes_on() {
    let home = pg_home("reconnect", "max_spawn = 2");
    let url = std::fs::read_to_string(home.root.join("kanban.toml"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("url = \"")
                .map(|u| u.trim_end_matches('"').to_owned())
        })
        .unwrap();
    let db = url.rsplit('/').next().unwrap().to_owned();
    let first = stdout_of(
        &home
            .kanban(&["create", "before", "--assignee", "done"])
            .output()
            .unwrap(),
    )
    .trim()
    .to_owned();
    let dispatcher = home
        .kanban(&["dispatch", "--interval", "0.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_of = |id: &str| json(&home, &["show", id])["task"]["status"].clone();
    let wait_done = |id: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while status_of(id) != "done" {
            assert!(std::time::Instant::now() < deadline, "{id} not done");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_done(&first);
    // The server ends every other connection to the board's database (as a restart would).
    let cluster = TestCluster::shared().unwrap();
    let mut admin = cluster.connect("postgres").unwrap();
    let ended = admin
        .query(
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' \
                 AND pid <> pg_backend_pid()"
            ),
            &[],
        )
        .unwrap();
    assert!(!ended.is_empty(), "the dispatcher had no connection to end");
    let second = stdout_of(
        &home
            .kanban(&["create", "after", "--assignee", "done"])
            .output()
            .unwrap(),
    )
    .trim()
    .to_owned();
    wait_done(&second);
    dispatch_support::kill("-TERM", i64::from(dispatcher.id()));
    let out = dispatcher.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // The lost connection was seen (a failed tick) and the dispatcher came back by itself.
    assert!(err.contains("tick failing"), "{err}");
    assert!(err.contains("recovered"), "{err}");
}

#[test]
fn the_host_wide_cap_counts_this_hosts_running_tasks_on_a_postgres_board() {
    // A SQLite default board and a PostgreSQL board `team` in one home; at most 3 running
    // tasks on this host across both.
    let url = fresh_url("hostcap");
    let home = Home::new(&config("max_spawn = 8\nmax_in_progress = 3"));
    stdout_of(
        &home
            .kanban(&["boards", "create", "team", "--url", &url])
            .output()
            .unwrap(),
    );
    let team_task = |title: &str| {
        stdout_of(
            &home
                .kanban(&["--board", "team", "create", title])
                .output()
                .unwrap(),
        )
        .trim()
        .to_owned()
    };
    let (a, b, c) = (team_task("a"), team_task("b"), team_task("c"));
    // Two claims of this host (the default claim lock names it), one of another host.
    for id in [&a, &b] {
        stdout_of(
            &home
                .kanban(&["--board", "team", "claim", id])
                .output()
                .unwrap(),
        );
    }
    stdout_of(
        &home
            .kanban(&["--board", "team", "claim", &c, "--claimer", "elsewhere:7"])
            .output()
            .unwrap(),
    );
    for i in 0..5 {
        stdout_of(
            &home
                .kanban(&["create", &format!("local {i}"), "--assignee", "done"])
                .output()
                .unwrap(),
        );
    }
    let report = json(&home, &["dispatch", "--dry-run"]);
    assert_eq!(report["budget"], 1, "{report}");
    assert_eq!(report["spawned"].as_array().unwrap().len(), 1, "{report}");
    // The PostgreSQL board's own dispatcher counts its two and nothing of the other host.
    let report = json(&home, &["--board", "team", "dispatch", "--dry-run"]);
    assert_eq!(report["budget"], 1, "{report}");
}

#[test]
fn eight_processes_creating_on_a_fresh_postgres_database_share_one_schema() {
    for round in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let url = fresh_url(&format!("fresh{round}"));
        std::fs::write(
            dir.path().join("kanban.toml"),
            format!("[boards.default]\nurl = \"{url}\"\n"),
        )
        .unwrap();
        let children: Vec<Child> = (0..CLAIMERS)
            .map(|n| {
                Command::new(env!("CARGO_BIN_EXE_kanban"))
                    .arg("--home")
                    .arg(dir.path())
                    .args(["create", &format!("task {n}")])
                    .env_remove("HERMES_KANBAN_DB")
                    .env_remove("HERMES_KANBAN_BOARD")
                    .env_remove("HERMES_KANBAN_HOME")
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
                "round {round}: a concurrent first create failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut client = TestCluster::shared()
            .unwrap()
            .connect(url.rsplit('/').next().unwrap())
            .unwrap();
        let n = client
            .query_one("SELECT COUNT(*) FROM tasks", &[])
            .unwrap()
            .get(0)
            .and_then(kanban_pgwire::Value::as_i64);
        assert_eq!(n, Some(CLAIMERS as i64), "round {round}");
        let version = client
            .query_one("SELECT version FROM kanban_schema_version", &[])
            .unwrap()
            .get(0)
            .and_then(kanban_pgwire::Value::as_i64);
        assert_eq!(
            version,
            Some(kanban_runtime::board::engine::postgres::schema::LATEST),
            "round {round}"
        );
    }
}

/// A shell loop over stdin lines `ID VERB` that runs `kanban --home H VERB ID [ARGS…]` per
/// line (`heartbeat`, `complete` with `--force`, `reclaim`) and prints `ID VERB EXIT`.
fn start_runner(home: &Home, lines: &[String]) -> Child {
    let script = "while read id verb; do \
        case \"$verb\" in \
          complete) \"$KANBAN\" --home \"$KHOME\" complete \"$id\" --force --summary raced >/dev/null 2>\"$KHOME/err-$verb-$id-$$\" ;; \
          *) \"$KANBAN\" --home \"$KHOME\" \"$verb\" \"$id\" >/dev/null 2>\"$KHOME/err-$verb-$id-$$\" ;; \
        esac; echo \"$id $verb $? $$\"; done";
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KANBAN", env!("CARGO_BIN_EXE_kanban"))
        .env("KHOME", &home.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start sh");
    let mut stdin = child.stdin.take().expect("stdin");
    use std::io::Write as _;
    stdin.write_all(lines.join("\n").as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    drop(stdin);
    child
}

/// Heartbeats take no board lock on PostgreSQL (docs/postgres.md, "Heartbeats"): two processes
/// heartbeat every running task while a third completes or reclaims each (board-locked
/// transitions), three rounds. Afterwards every transition that had to succeed did, every
/// heartbeat succeeded or was refused because its task had ended, no heartbeat was recorded
/// after its task's run ended, every run is closed and `fsck` is clean.
#[test]
fn lock_free_heartbeats_race_completions_and_reclaims_on_a_postgres_board() {
    const ROUND: usize = 30;
    let home = pg_home("heartbeat_race", "");
    let board = home.board();
    for round in 0..3_u64 {
        let tasks: Vec<NewTask> = (0..ROUND)
            .map(|i| NewTask {
                title: format!("round {round} task {i}"),
                ..NewTask::default()
            })
            .collect();
        let ids: Vec<String> = board
            .create_tasks(&tasks, 1_700_000_000)
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        let spec = kanban_runtime::board::ClaimSpec {
            lock: "race:1".to_owned(),
            ttl_seconds: 900,
            origin: kanban_runtime::board::ClaimOrigin::External,
        };
        for id in &ids {
            assert!(matches!(
                board.claim(id, &spec, 1_700_000_000).unwrap(),
                kanban_runtime::board::ClaimOutcome::Claimed(_)
            ));
        }
        // Even positions of the finisher's order are completed, odd ones reclaimed.
        let finish_order = shuffled(&ids, 100 + round);
        let verb_of: HashMap<&str, &str> = finish_order
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), if i % 2 == 0 { "complete" } else { "reclaim" }))
            .collect();
        let beats = |seed: u64| -> Vec<String> {
            let mut lines = Vec::new();
            for pass in 0..2 {
                lines.extend(
                    shuffled(&ids, seed * 10 + pass)
                        .into_iter()
                        .map(|id| format!("{id} heartbeat")),
                );
            }
            lines
        };
        let finisher: Vec<String> = finish_order
            .iter()
            .map(|id| format!("{id} {}", verb_of[id.as_str()]))
            .collect();
        let children = [
            start_runner(&home, &beats(round * 2 + 1)),
            start_runner(&home, &beats(round * 2 + 2)),
            start_runner(&home, &finisher),
        ];
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success());
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let parts: Vec<&str> = line.split(' ').collect();
                let [id, verb, code, pid] = parts[..] else {
                    panic!("bad line {line}");
                };
                let err = std::fs::read_to_string(home.root.join(format!("err-{verb}-{id}-{pid}")))
                    .unwrap_or_default();
                match (verb, code) {
                    (_, "0") => {}
                    // Refused only because the task had already left `running`.
                    ("heartbeat", "3") => assert!(err.contains("is "), "{id}: {err}"),
                    _ => panic!("round {round}: {verb} {id} exited {code}: {err}"),
                }
            }
        }
        for id in &ids {
            let task = board.get_task(id).unwrap();
            let (status, ended) = match verb_of[id.as_str()] {
                "complete" => (Status::Done, "completed"),
                _ => (Status::Ready, "reclaimed"),
            };
            assert_eq!(task.status, status, "{id}");
            assert_eq!(task.current_run_id, None, "{id}");
            assert_eq!(task.claim_lock, None, "{id}");
            let runs = board.runs(id).unwrap();
            assert_eq!(runs.len(), 1, "{id}");
            assert!(runs[0].ended_at.is_some(), "{id}: run left open");
            let events = board.events(id, None).unwrap();
            let end = events
                .iter()
                .position(|e| e.kind == ended)
                .unwrap_or_else(|| panic!("{id}: no {ended} event"));
            assert!(
                events[end..].iter().all(|e| e.kind != "heartbeat"),
                "{id}: a heartbeat recorded after the run ended: {:?}",
                events.iter().map(|e| &e.kind).collect::<Vec<_>>()
            );
        }
        assert_eq!(board.fsck().unwrap(), [], "round {round}");
    }
}
