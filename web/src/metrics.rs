//! `/metrics`: the served boards' numbers in the Prometheus text exposition format (version
//! 0.0.4). The series, their names and labels are documented in the README ("Metrics") and
//! stable; every label value is escaped as the format requires.

use std::fmt::Write;

use crate::view::{BoardMetricsView, HistogramView, MetricsView};

/// The `Content-Type` of the format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The whole exposition: each family's `# HELP` and `# TYPE` once, then its samples per board.
pub fn render(view: &MetricsView) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "kanban_tasks",
        "gauge",
        "Tasks on the board, per status.",
        view,
        |out, b| labelled(out, "kanban_tasks", &b.slug, "status", &b.tasks_by_status),
    );
    family(
        &mut out,
        "kanban_runs_total",
        "counter",
        "Closed runs (attempts), per outcome.",
        view,
        |out, b| {
            labelled(
                out,
                "kanban_runs_total",
                &b.slug,
                "outcome",
                &b.runs_by_outcome,
            )
        },
    );
    family(
        &mut out,
        "kanban_workers_running",
        "gauge",
        "Running tasks with a registered worker, per profile.",
        view,
        |out, b| {
            labelled(
                out,
                "kanban_workers_running",
                &b.slug,
                "profile",
                &b.workers_by_profile,
            );
        },
    );
    family(
        &mut out,
        "kanban_oldest_ready_age_seconds",
        "gauge",
        "Age of the oldest ready task (0 when nothing is ready).",
        view,
        |out, b| {
            let age = b.oldest_ready_age_seconds.unwrap_or(0);
            let _ = writeln!(
                out,
                "kanban_oldest_ready_age_seconds{{board=\"{}\"}} {age}",
                label(&b.slug)
            );
        },
    );
    family(
        &mut out,
        "kanban_dispatcher_last_tick_age_seconds",
        "gauge",
        "Seconds since a dispatcher of the board last recorded a tick (absent: never).",
        view,
        |out, b| {
            if let Some(age) = b.last_tick_age_seconds {
                let _ = writeln!(
                    out,
                    "kanban_dispatcher_last_tick_age_seconds{{board=\"{}\"}} {age}",
                    label(&b.slug)
                );
            }
        },
    );
    family(
        &mut out,
        "kanban_dispatchers_running",
        "gauge",
        "Dispatchers whose recorded tick is recent enough that they run.",
        view,
        |out, b| {
            let _ = writeln!(
                out,
                "kanban_dispatchers_running{{board=\"{}\"}} {}",
                label(&b.slug),
                b.dispatchers_running
            );
        },
    );
    family(
        &mut out,
        "kanban_diagnostics",
        "gauge",
        "Active diagnostics (kanban diagnostics), per rule and severity.",
        view,
        |out, b| {
            for (rule, severity, n) in &b.diagnostics {
                let _ = writeln!(
                    out,
                    "kanban_diagnostics{{board=\"{}\",rule=\"{}\",severity=\"{}\"}} {n}",
                    label(&b.slug),
                    label(rule),
                    label(severity)
                );
            }
        },
    );
    let _ = writeln!(
        out,
        "# HELP kanban_owner_turns Owner-mode turns (kanban owner status), per profile and state."
    );
    let _ = writeln!(out, "# TYPE kanban_owner_turns gauge");
    for (profile, state, n) in &view.owner_turns {
        let _ = writeln!(
            out,
            "kanban_owner_turns{{profile=\"{}\",state=\"{}\"}} {n}",
            label(profile),
            label(state)
        );
    }
    family(
        &mut out,
        "kanban_run_duration_seconds",
        "histogram",
        "Closed runs, from claim to end.",
        view,
        |out, b| histogram(out, "kanban_run_duration_seconds", &b.slug, &b.run_duration),
    );
    family(
        &mut out,
        "kanban_claim_to_spawn_seconds",
        "histogram",
        "Spawned runs, from claim to the worker's start.",
        view,
        |out, b| {
            histogram(
                out,
                "kanban_claim_to_spawn_seconds",
                &b.slug,
                &b.claim_to_spawn,
            )
        },
    );
    out
}

fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    view: &MetricsView,
    samples: impl Fn(&mut String, &BoardMetricsView),
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for board in &view.boards {
        samples(out, board);
    }
}

fn labelled(out: &mut String, name: &str, board: &str, key: &str, values: &[(String, i64)]) {
    for (value, n) in values {
        let _ = writeln!(
            out,
            "{name}{{board=\"{}\",{key}=\"{}\"}} {n}",
            label(board),
            label(value)
        );
    }
}

fn histogram(out: &mut String, name: &str, board: &str, h: &HistogramView) {
    let board = label(board);
    for (bound, n) in &h.buckets {
        let _ = writeln!(out, "{name}_bucket{{board=\"{board}\",le=\"{bound}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "{name}_bucket{{board=\"{board}\",le=\"+Inf\"}} {}",
        h.count
    );
    let _ = writeln!(out, "{name}_sum{{board=\"{board}\"}} {}", h.sum);
    let _ = writeln!(out, "{name}_count{{board=\"{board}\"}} {}", h.count);
}

/// A label value as the format wants it: backslash, double quote and line feed escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_families_declared_once() {
        let board = BoardMetricsView {
            slug: "a\"b\\c\nd".to_owned(),
            tasks_by_status: vec![("ready".to_owned(), 2)],
            ..BoardMetricsView::default()
        };
        let text = render(&MetricsView {
            boards: vec![
                board.clone(),
                BoardMetricsView {
                    slug: "two".to_owned(),
                    ..board
                },
            ],
            owner_turns: vec![("ops".to_owned(), "completed".to_owned(), 3)],
        });
        assert!(text.contains("kanban_owner_turns{profile=\"ops\",state=\"completed\"} 3"));
        assert!(
            !text.contains("kanban_dispatcher_last_tick_age_seconds{"),
            "never recorded"
        );
        assert!(
            text.contains("kanban_tasks{board=\"a\\\"b\\\\c\\nd\",status=\"ready\"} 2"),
            "{text}"
        );
        assert_eq!(text.matches("# TYPE kanban_tasks gauge").count(), 1);
        assert_eq!(
            text.matches("kanban_run_duration_seconds_bucket{board=\"two\",le=\"+Inf\"} 0")
                .count(),
            1
        );
    }
}
