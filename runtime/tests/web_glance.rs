//! The web view at a glance (issue 30 items 2 and 4): the health page's per-hour SVG charts of a
//! board a real dispatcher ran, the dispatcher's state, the oldest ready task and the running
//! workers; a task page's runs timeline; diagnostics badges on the board's cards and the task
//! page's diagnostics with their suggested commands — only on the task a rule fires for.

// Test code drives the real binary and real processes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod web_support;

use kanban_tests::Kanban;
use web_support::{Serve, get};

/// The `<figure>` of the chart whose caption starts with `caption`.
fn figure<'a>(page: &'a str, caption: &str) -> &'a str {
    page.split("<figure")
        .find(|f| f.contains(&format!("aria-label=\"{caption}")))
        .unwrap_or_else(|| panic!("no chart {caption}: {page}"))
}

/// The sum of the bars' totals of a chart.
fn total(figure: &str) -> i64 {
    figure
        .split("data-total=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse::<i64>().unwrap())
        .sum()
}

#[test]
fn the_health_page_charts_a_dispatch_run_and_cards_carry_their_diagnostics() {
    let k = Kanban::new(env!("CARGO_BIN_EXE_kanban"));
    std::fs::write(
        k.home().join("kanban.toml"),
        "[dispatch]\ninterval_seconds = 0.05\n\n[profiles.done]\nagent = \"builtin:complete\"\n",
    )
    .unwrap();
    k.ok(&["init"]);
    let done: Vec<String> = (0..2)
        .map(|i| k.create(&format!("task {i}"), &["--assignee", "done"]))
        .collect();
    // A card a rule fires for (hallucinated_cards), parked so the dispatcher leaves it alone.
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
    let run = k.run(&["dispatch", "--until-idle"]);
    assert_eq!(run.code, 0, "{run:?}");
    let waiting = k.create("still waiting", &["--assignee", "nobody"]);
    let serve = Serve::start(&k, &[]);

    let health = get(serve.addr, "/health", "").body;
    for period in ["24 h", "7 d"] {
        let runs = figure(&health, &format!("runs ended per hour, last {period}"));
        assert!(runs.contains("<svg class=\"bars\""), "{runs}");
        assert!(runs.contains("class=\"c-completed\""), "{runs}");
        // The two completions (the phantom's run closed as blocked: not charted).
        assert_eq!(total(runs), 2, "{runs}");
        let statuses = figure(&health, &format!("tasks by status, last {period}"));
        assert!(statuses.contains("class=\"c-done\""), "{statuses}");
    }
    let hours = |caption: &str| {
        figure(&health, caption)
            .split("data-hours=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(hours("runs ended per hour, last 24 h"), "24");
    assert_eq!(hours("runs ended per hour, last 7 d"), "168");
    assert!(health.contains("dispatcher not-running"), "{health}");
    assert!(health.contains("class=\"oldest-ready\""), "{health}");
    assert!(!health.contains("oldest ready task: <span class=\"oldest-ready\">none ready"));

    // The board page: the dispatcher at a glance, and a badge on the phantom's card only.
    let board = get(serve.addr, "/", "").body;
    assert!(
        board.contains("no dispatcher running (last tick"),
        "{board}"
    );
    assert!(!board.contains("oldest-ready\">none ready"), "{board}");
    let card = |id: &str| {
        board
            .split("<article")
            .find(|a| a.contains(&format!("data-task=\"{id}\"")))
            .unwrap_or_else(|| panic!("no card {id}"))
            .split("</article>")
            .next()
            .unwrap()
            .to_owned()
    };
    assert!(
        card(&phantom).contains("data-kind=\"hallucinated_cards\""),
        "{}",
        card(&phantom)
    );
    for id in done.iter().chain([&waiting]) {
        assert!(!card(id).contains("class=\"badge"), "{id}: {}", card(id));
    }

    // Its task page names the rule and the suggested command.
    let page = get(serve.addr, &format!("/task/{phantom}"), "").body;
    assert!(page.contains("<section class=\"diagnostics\">"), "{page}");
    assert!(page.contains("data-kind=\"hallucinated_cards\""));
    assert!(page.contains("<code>kanban "), "{page}");
    // A done task: no diagnostics, its run on the timeline.
    let page = get(serve.addr, &format!("/task/{}", done[0]), "").body;
    assert!(!page.contains("<section class=\"diagnostics\">"));
    assert!(page.contains("<svg class=\"timeline\""), "{page}");
    assert!(page.contains("class=\"o-completed\""), "{page}");
}
