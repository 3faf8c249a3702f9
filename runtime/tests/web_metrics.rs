//! `GET /metrics` of `kanban serve` (README "Metrics"): parsed by a Prometheus text-format
//! parser, every documented family present with its type, the numbers those of the board, and
//! the counters and histograms monotonic across a real dispatch run.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod web_support;

use std::collections::BTreeMap;

use kanban_tests::Kanban;
use prometheus_parse::{Sample, Scrape, Value};
use web_support::{Serve, get};

/// Every family `/metrics` documents, with its type.
const FAMILIES: [(&str, &str); 10] = [
    ("kanban_tasks", "gauge"),
    ("kanban_dispatcher_last_tick_age_seconds", "gauge"),
    ("kanban_dispatchers_running", "gauge"),
    ("kanban_diagnostics", "gauge"),
    ("kanban_owner_turns", "gauge"),
    ("kanban_runs_total", "counter"),
    ("kanban_workers_running", "gauge"),
    ("kanban_oldest_ready_age_seconds", "gauge"),
    ("kanban_run_duration_seconds", "histogram"),
    ("kanban_claim_to_spawn_seconds", "histogram"),
];

fn scrape(serve: &Serve) -> (String, Scrape) {
    let r = get(serve.addr, "/metrics", "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("Content-Type").as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let lines = r.body.lines().map(|l| Ok(l.to_owned()));
    let parsed = Scrape::parse(lines).unwrap_or_else(|e| panic!("not parsable ({e}):\n{}", r.body));
    (r.body, parsed)
}

/// A sample's number, whatever its kind (a histogram: its count).
fn number(s: &Sample) -> f64 {
    match &s.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
        Value::Summary(_) => panic!("no summaries are exported: {s:?}"),
    }
}

/// Each sample as `name{label=value,…}` → its number (histograms also by bucket).
fn values(scrape: &Scrape) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in &scrape.samples {
        let mut labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        let key = format!("{}{{{}}}", s.metric, labels.join(","));
        if let Value::Histogram(buckets) = &s.value {
            for b in buckets {
                out.insert(format!("{key}le={}", b.less_than), b.count);
            }
        }
        out.insert(key, number(s));
    }
    out
}

#[test]
fn metrics_are_parsable_documented_and_monotonic_across_a_dispatch_run() {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\ninterval_seconds = 0.05\n\n[profiles.done]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    k.ok(&["init"]);
    for i in 0..3 {
        k.create(&format!("task {i}"), &["--assignee", "done"]);
    }
    k.create("waits", &["--triage"]);
    // A diagnostic (hallucinated_cards): a completion refused for a card that does not exist.
    // (Blocked afterwards, so that the dispatcher leaves it alone.)
    let phantom = k.create("claims a phantom card", &[]);
    let refused = k.run(&[
        "complete",
        &phantom,
        "--summary",
        "x",
        "--created-cards",
        "t_deadbeef00",
    ]);
    assert_eq!(refused.code, 3, "{refused:?}");
    k.ok(&["block", &phantom, "--reason", "checking"]);
    // An owner's state.db with two completed turns and one started.
    let state = k.home().join("owner").join("ops").join("state.db");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    kanban_runtime::admission::state::StateDb::open(&state).unwrap();
    let conn = rusqlite::Connection::open(&state).unwrap();
    conn.execute(
        "INSERT INTO sessions (session_id, principal_id, request_id, receipt_json, created_at) \
         VALUES ('s', 'p', 'r', '{}', 0)",
        [],
    )
    .unwrap();
    for (i, status) in ["completed", "completed", "started"].iter().enumerate() {
        conn.execute(
            "INSERT INTO session_admissions (admission_id, principal_id, target_session_id, \
             request_id, payload_json, task_id, run_id, status, owner_epoch, updated_at) \
             VALUES (?1, 'p', 's', ?1, '{}', 't_1', 1, ?2, 1, 0)",
            rusqlite::params![format!("a{i}"), status],
        )
        .unwrap();
    }
    drop(conn);
    let serve = Serve::start(&k, &[]);

    let (text, before) = scrape(&serve);
    for (name, kind) in FAMILIES {
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "no {name} {kind}:\n{text}"
        );
        assert!(before.docs.contains_key(name), "no HELP for {name}");
    }
    let v = values(&before);
    assert_eq!(v["kanban_tasks{board=default,status=ready}"], 3.0, "{v:?}");
    assert_eq!(v["kanban_tasks{board=default,status=triage}"], 1.0);
    assert!(v["kanban_oldest_ready_age_seconds{board=default}"] >= 0.0);
    // The refused completion and the block closed the phantom card's one run.
    let closed_before = v["kanban_run_duration_seconds_count{board=default}"];
    assert!(closed_before <= 1.0, "{closed_before}");
    // No dispatcher ever ticked: no age, none running.
    assert!(
        !text.contains("kanban_dispatcher_last_tick_age_seconds{"),
        "{text}"
    );
    assert_eq!(v["kanban_dispatchers_running{board=default}"], 0.0);
    let diagnostic = v
        .iter()
        .find(|(key, _)| {
            key.starts_with("kanban_diagnostics{board=default,rule=hallucinated_cards,")
        })
        .unwrap_or_else(|| panic!("no hallucinated_cards diagnostic: {text}"));
    assert_eq!(*diagnostic.1, 1.0);
    assert_eq!(v["kanban_owner_turns{profile=ops,state=completed}"], 2.0);
    assert_eq!(v["kanban_owner_turns{profile=ops,state=started}"], 1.0);

    let run = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");

    let (text, after) = scrape(&serve);
    let w = values(&after);
    assert_eq!(w["kanban_tasks{board=default,status=done}"], 3.0, "{text}");
    assert_eq!(w["kanban_runs_total{board=default,outcome=completed}"], 3.0);
    assert_eq!(
        w["kanban_run_duration_seconds_count{board=default}"],
        closed_before + 3.0
    );
    assert_eq!(w["kanban_claim_to_spawn_seconds_count{board=default}"], 3.0);
    // The dispatcher recorded its ticks, and that it stopped.
    let age = w["kanban_dispatcher_last_tick_age_seconds{board=default}"];
    assert!((0.0..600.0).contains(&age), "{age}");
    assert_eq!(w["kanban_dispatchers_running{board=default}"], 0.0);
    // Nothing ready is left: the age is 0, and no worker runs.
    assert_eq!(w["kanban_oldest_ready_age_seconds{board=default}"], 0.0);
    assert!(!text.contains("kanban_workers_running{"), "{text}");
    // Counters and histogram buckets never go down; buckets grow with their bound.
    for (key, old) in &v {
        let counter = key.starts_with("kanban_runs_total")
            || key.starts_with("kanban_run_duration_seconds")
            || key.starts_with("kanban_claim_to_spawn_seconds");
        if counter {
            assert!(
                w.get(key).is_some_and(|new| new >= old),
                "{key}: {old} → {:?}",
                w.get(key)
            );
        }
    }
    for s in &after.samples {
        if let Value::Histogram(buckets) = &s.value {
            assert!(
                buckets.windows(2).all(|p| p[0].count <= p[1].count),
                "{s:?}"
            );
            assert!(buckets.last().unwrap().less_than.is_infinite(), "{s:?}");
        }
    }
}

#[test]
fn metrics_follow_the_token_rule_of_every_read() {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    k.ok(&["init"]);
    let serve = Serve::start(&k, &["--token", "s3cret"]);
    let r = get(serve.addr, "/metrics", "");
    assert_eq!(r.status, 401);
    assert!(!r.body.contains("kanban_tasks"));
    let r = get(serve.addr, "/metrics", "Authorization: Bearer s3cret\r\n");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("# TYPE kanban_tasks gauge"));
}
