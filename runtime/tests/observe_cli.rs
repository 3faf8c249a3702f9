//! The operator's terminal views end to end (README "Watching a board"): `stats`, `assignees`,
//! `runs` with its filters, `watch` with its filters and `events --follow`, on a real SQLite board
//! (and `stats`/`runs` on PostgreSQL); each bad input a clear message.

#![allow(clippy::unwrap_used)] // test helpers: a failed setup is a failed test
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test code drives the real binary

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use kanban_pgwire::cluster::TestCluster;
use kanban_tests::Kanban;
use serde_json::{Value, json};

fn kanban() -> Kanban {
    Kanban::new(env!("CARGO_BIN_EXE_kanban"))
}

/// Moves every timestamp of task `id` (and of its runs) `seconds` into the past.
fn age(k: &Kanban, id: &str, seconds: i64) {
    let conn = rusqlite::Connection::open(k.default_db()).unwrap();
    conn.execute(
        "UPDATE tasks SET created_at = created_at - ?2 WHERE id = ?1",
        rusqlite::params![id, seconds],
    )
    .unwrap();
    conn.execute(
        "UPDATE task_runs SET started_at = started_at - ?2, \
         ended_at = ended_at - ?2 WHERE task_id = ?1",
        rusqlite::params![id, seconds],
    )
    .unwrap();
}

/// A board with: `a` (coder) completed by a run of `coder`, `b` (bot) ready, `c` unassigned and
/// ready, `d` (coder) blocked.
fn board(k: &Kanban) -> [String; 4] {
    k.ok(&["init"]);
    let a = k.create("a", &["--assignee", "coder"]);
    let b = k.create("b", &["--assignee", "bot"]);
    let c = k.create("c", &[]);
    let d = k.create("d", &["--assignee", "coder"]);
    k.ok(&["claim", &a]);
    k.ok(&["complete", &a, "--summary", "did a", "--force"]);
    k.ok(&["block", &d, "--reason", "waiting"]);
    [a, b, c, d]
}

#[test]
fn stats_counts_by_status_and_assignee_and_ages_the_oldest_ready_task() {
    let k = kanban();
    let [_, b, _, _] = board(&k);
    age(&k, &b, 500);
    let stats = k.json(&["stats"]);
    assert_eq!(
        stats["by_status"],
        json!({"done": 1, "ready": 2, "blocked": 1})
    );
    assert_eq!(
        stats["by_assignee"],
        json!({"coder": {"done": 1, "blocked": 1}, "bot": {"ready": 1}})
    );
    let age = stats["oldest_ready_age_seconds"].as_i64().unwrap();
    assert!((500..600).contains(&age), "{stats}");
    assert!(stats["now"].as_i64().unwrap() > 1_700_000_000);

    let text = k.ok(&["stats"]);
    assert!(
        text.contains("by status: blocked=1 done=1 ready=2"),
        "{text}"
    );
    assert!(text.contains("@coder: blocked=1 done=1"), "{text}");
    assert!(text.contains("oldest ready: 5"), "{text}");

    // Nothing ready: no age, said as such.
    let empty = kanban();
    empty.ok(&["init"]);
    let stats = empty.json(&["stats"]);
    assert_eq!(stats["oldest_ready_age_seconds"], Value::Null);
    assert!(empty.ok(&["stats"]).contains("oldest ready: none"));
}

#[test]
fn assignees_lists_the_homes_profiles_and_every_assignee_with_counts() {
    let k = kanban();
    board(&k);
    std::fs::write(
        k.home().join("kanban.toml"),
        "[profiles.coder]\nagent = \"builtin:complete\"\n\n[profiles.idle]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    let list = k.json(&["assignees"]);
    assert_eq!(
        list,
        json!([
            {"name": "bot", "on_disk": false, "counts": {"ready": 1}},
            {"name": "coder", "on_disk": true, "counts": {"blocked": 1, "done": 1}},
            {"name": "idle", "on_disk": true, "counts": {}},
        ])
    );
    let text = k.ok(&["assignees"]);
    assert!(text.contains("bot (no profile): ready=1"), "{text}");
    assert!(text.contains("idle: (no tasks)"), "{text}");

    // A kanban.toml that does not parse is an error naming it, not an empty list.
    std::fs::write(k.home().join("kanban.toml"), "[profiles.coder\n").unwrap();
    let run = k.run(&["assignees"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("kanban.toml"), "{}", run.stderr);
}

#[test]
fn runs_filters_by_outcome_profile_and_start_and_refuses_a_bad_since() {
    let k = kanban();
    let [a, b, _, d] = board(&k);
    age(&k, &a, 7200);
    k.ok(&["claim", &b]);
    let all = k.json(&["runs"]);
    let ids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["task_id"].as_str().unwrap())
        .collect();
    // `block` of the ready `d` closed a run of its own, between the two.
    assert_eq!(ids, [b.as_str(), d.as_str(), a.as_str()], "newest first");

    let completed = k.json(&["runs", "--outcome", "completed"]);
    assert_eq!(completed.as_array().unwrap().len(), 1);
    assert_eq!(completed[0]["task_id"], a.as_str());
    assert_eq!(completed[0]["summary"], "did a");

    let open = k.json(&["runs", "--outcome", "running"]);
    assert_eq!(open.as_array().unwrap().len(), 1);
    assert_eq!(open[0]["task_id"], b.as_str());

    assert_eq!(
        k.json(&["runs", "--profile", "bot"])[0]["task_id"],
        b.as_str()
    );
    assert_eq!(k.json(&["runs", "--profile", "nobody"]), json!([]));
    // The completed run started two hours ago: the other two are within the last hour.
    let recent = k.json(&["runs", "--since", "1h"]);
    assert_eq!(recent.as_array().unwrap().len(), 2);
    assert!(
        recent
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["task_id"] != a.as_str())
    );
    assert_eq!(
        k.json(&["runs", "--since", "3h"]).as_array().unwrap().len(),
        3
    );
    assert_eq!(
        k.json(&["runs", "--since", "0"]).as_array().unwrap().len(),
        3
    );
    assert_eq!(
        k.json(&["runs", "--limit", "1"]).as_array().unwrap().len(),
        1
    );

    let text = k.ok(&["runs", "--outcome", "completed"]);
    assert!(text.starts_with("run 1 "), "{text}");
    assert!(text.contains("@coder completed"), "{text}");
    assert!(text.ends_with("did a"), "{text}");
    assert_eq!(k.ok(&["runs", "--profile", "nobody"]), "no runs");

    for bad in ["1x", "fish", "-5", "-5m", "99999999999999999d"] {
        let run = k.run(&["runs", &format!("--since={bad}")]);
        assert_eq!(run.code, 2, "--since {bad}: {run:?}");
        assert!(run.stderr.contains("--since"), "{}", run.stderr);
    }
}

/// A live `kanban` view with its standard output in a file the test reads.
struct Live {
    child: Child,
    out: std::path::PathBuf,
}

impl Live {
    fn start(k: &Kanban, args: &[&str], name: &str) -> Live {
        let out = k.home().join(name);
        let child = k
            .cmd()
            .args(args)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Live { child, out }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits (up to 30 s) until the output holds a line containing `needle`; `poke` runs
    /// between looks (to make the view print something once it is up).
    fn wait_for(&mut self, needle: &str, mut poke: impl FnMut()) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = self.text();
            if text.lines().any(|l| l.contains(needle)) {
                return text;
            }
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the view ended early: {text}"
            );
            assert!(Instant::now() < deadline, "no `{needle}` in: {text}");
            poke();
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn watch_prints_new_events_of_the_board_as_they_happen_filtered_by_assignee_and_kind() {
    let k = kanban();
    let [_, b, _, d] = board(&k);
    let mut live = Live::start(
        &k,
        &[
            "watch",
            "--assignee",
            "coder",
            "--kinds",
            "commented,unblocked",
        ],
        "watch.out",
    );
    // Up once a comment on a coder task comes through (events before it started are not shown).
    live.wait_for("commented", || {
        k.ok(&["comment", &d, "--body", "ping"]);
    });
    k.ok(&["comment", &b, "--body", "not coder's"]);
    k.ok(&["unblock", &d]);
    let text = live.wait_for("unblocked", || {});
    assert!(!text.contains(&b), "{text}");
    assert!(!text.contains(" created "), "{text}");
    assert!(text.lines().all(|l| l.starts_with(&d)), "{text}");
    drop(live);

    // --json: one event object per line; without filters every new event.
    let mut live = Live::start(&k, &["--json", "watch"], "watch.json");
    // Poked until it shows: a comment made before the view read its starting point is not new
    // to it (a loaded machine starts the view slowly).
    live.wait_for("commented", || {
        k.ok(&["comment", &b, "--body", "ping"]);
    });
    k.ok(&["archive", &b]);
    let text = live.wait_for("archived", || {});
    let kinds: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["task_id"] == b.as_str())
        .map(|e| e["kind"].clone())
        .collect();
    assert!(
        kinds.ends_with(&[json!("commented"), json!("archived")]),
        "{kinds:?}"
    );
}

#[test]
fn events_follow_prints_the_history_then_each_new_event_and_ends_when_its_reader_goes() {
    let k = kanban();
    let [_, b, _, _] = board(&k);
    let mut live = Live::start(&k, &["events", &b, "--follow"], "follow.out");
    live.wait_for(" created ", || {});
    k.ok(&["comment", &b, "--body", "later"]);
    let text = live.wait_for(" commented ", || {});
    let kinds: Vec<&str> = text
        .lines()
        // `<time> (<age>) <kind> …`: the age may hold spaces (`1 s ago`).
        .map(|l| {
            l.split_once(") ")
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(kinds, ["created", "commented"], "{text}");
    drop(live);

    // A reader that goes away ends the view, exit 0, at its next event.
    let mut child = k
        .cmd()
        .args(["events", &b, "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("created"), "{first}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        k.ok(&["comment", &b, "--body", "anyone there?"]);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still following a closed pipe");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status.code(), Some(0));

    // An unknown task is an error at once.
    let run = k.run(&["events", "t_doesnotexist", "--follow"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("t_doesnotexist"), "{}", run.stderr);
}

#[test]
fn stats_and_runs_read_a_postgresql_board_alike() {
    let cluster =
        TestCluster::shared().expect("a PostgreSQL test server (see the README's Testing section)");
    let url = cluster.url(
        &cluster
            .fresh_database("observe")
            .expect("create a database"),
    );
    let k = kanban();
    k.ok(&["boards", "create", "team", "--url", &url]);
    let a = k.create("a", &["--board", "team", "--assignee", "coder"]);
    k.create("b", &["--board", "team"]);
    k.ok(&["--board", "team", "claim", &a]);
    k.ok(&[
        "--board",
        "team",
        "complete",
        &a,
        "--summary",
        "s",
        "--force",
    ]);

    let stats = k.json(&["--board", "team", "stats"]);
    assert_eq!(stats["by_status"], json!({"done": 1, "ready": 1}));
    assert_eq!(stats["by_assignee"], json!({"coder": {"done": 1}}));
    let runs = k.json(&[
        "--board",
        "team",
        "runs",
        "--outcome",
        "completed",
        "--profile",
        "coder",
        "--since",
        "1h",
    ]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["task_id"], a.as_str());
    let open = k.json(&["--board", "team", "runs", "--outcome", "running"]);
    assert_eq!(open, json!([]));
}
