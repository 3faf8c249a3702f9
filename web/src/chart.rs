//! Server-rendered SVG charts (no script, no chart library): stacked bars per hour for the
//! health page, and a task's runs as a timeline. Colors come from classes in `app.css` (the
//! Content-Security-Policy forbids inline style); every text from a board is escaped; each bar
//! carries a `<title>` (the browser's tooltip) with its numbers.

use std::fmt::Write as _;

use crate::html::escape;
use crate::view::{ActivityView, RunView};

const WIDTH: i64 = 720;
const HEIGHT: i64 = 120;
/// Room above the bars for the scale's label, and below for the time labels.
const TOP: i64 = 14;
const BOTTOM: i64 = 16;

/// One stacked series: its CSS class (`c-completed`, …), its name, one value per hour.
pub struct Series<'a> {
    pub class: &'a str,
    pub name: &'a str,
    pub values: &'a [i64],
}

/// `HH:00` (UTC) of epoch second `at`.
fn hour_of(at: i64) -> String {
    format!("{:02}:00", at.rem_euclid(86_400) / 3600)
}

/// Bars per hour, each stacking `series` bottom up, scaled to the tallest; `caption` is the
/// chart's accessible name. The hours start at `start` (epoch seconds).
pub fn stacked_bars(caption: &str, start: i64, series: &[Series<'_>]) -> String {
    let hours = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    let totals: Vec<i64> = (0..hours)
        .map(|h| {
            series
                .iter()
                .map(|s| s.values.get(h).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    let peak = totals.iter().copied().max().unwrap_or(0).max(1);
    let plot = HEIGHT - TOP - BOTTOM;
    let mut out = String::new();
    let _ = write!(
        out,
        "<figure class=\"chart\"><svg class=\"bars\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" aria-label=\"{caption}\" data-hours=\"{hours}\" data-peak=\"{peak}\">",
        caption = escape(caption),
    );
    let _ = write!(
        out,
        "<text class=\"scale\" x=\"0\" y=\"10\">{peak}</text>\
         <line class=\"axis\" x1=\"0\" y1=\"{base}\" x2=\"{WIDTH}\" y2=\"{base}\"/>",
        base = HEIGHT - BOTTOM
    );
    if hours > 0 {
        let slot = WIDTH as f64 / hours as f64;
        let bar = (slot * 0.8).max(1.0);
        for (h, total) in totals.iter().enumerate() {
            let x = h as f64 * slot;
            let mut y = (HEIGHT - BOTTOM) as f64;
            let at = start + h as i64 * 3600;
            let tip: Vec<String> = series
                .iter()
                .map(|s| format!("{} {}", s.values.get(h).copied().unwrap_or(0), s.name))
                .collect();
            let _ = write!(
                out,
                "<g class=\"hour\" data-total=\"{}\"><title>{} UTC: {}</title>",
                total,
                hour_of(at),
                escape(&tip.join(", "))
            );
            for s in series {
                let v = s.values.get(h).copied().unwrap_or(0);
                if v == 0 {
                    continue;
                }
                let height = v as f64 * plot as f64 / peak as f64;
                y -= height;
                let _ = write!(
                    out,
                    "<rect class=\"{}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{height:.1}\"/>",
                    escape(s.class)
                );
            }
            out.push_str("</g>");
        }
        let _ = write!(
            out,
            "<text class=\"time\" x=\"0\" y=\"{h}\">{first} UTC</text>\
             <text class=\"time end\" x=\"{WIDTH}\" y=\"{h}\">now</text>",
            h = HEIGHT - 3,
            first = hour_of(start),
        );
    }
    out.push_str("</svg><figcaption>");
    out.push_str(&escape(caption));
    for s in series {
        let _ = write!(
            out,
            " <span class=\"key {}\">{}</span>",
            escape(s.class),
            escape(s.name)
        );
    }
    out.push_str("</figcaption></figure>");
    out
}

/// The two charts of one period: runs ended per outcome, and tasks by status at each hour's end.
pub fn activity(period: &str, a: &ActivityView) -> String {
    let mut out = stacked_bars(
        &format!("runs ended per hour, last {period}"),
        a.start,
        &[
            Series {
                class: "c-completed",
                name: "completed",
                values: &a.completed,
            },
            Series {
                class: "c-failed",
                name: "failed",
                values: &a.failed,
            },
            Series {
                class: "c-rate-limited",
                name: "rate limited",
                values: &a.rate_limited,
            },
        ],
    );
    out.push_str(&stacked_bars(
        &format!("tasks by status, last {period}"),
        a.start,
        &[
            Series {
                class: "c-done",
                name: "done",
                values: &a.done,
            },
            Series {
                class: "c-running",
                name: "running",
                values: &a.running,
            },
            Series {
                class: "c-waiting",
                name: "waiting",
                values: &a.waiting,
            },
        ],
    ));
    out
}

/// A task's runs as a timeline: one row per run from its start to its end (or `now`), on a
/// scale from the first start to the last end; the bar's class is the run's outcome.
pub fn run_timeline(runs: &[RunView], now: i64) -> String {
    if runs.is_empty() {
        return String::new();
    }
    const ROW: i64 = 18;
    const LABEL: i64 = 60;
    let first = runs.iter().map(|r| r.started_at).min().unwrap_or(now);
    let last = runs
        .iter()
        .map(|r| r.ended_at.unwrap_or(now))
        .max()
        .unwrap_or(now)
        .max(first + 1);
    let span = (last - first) as f64;
    let height = ROW * runs.len() as i64 + 4;
    let plot = (WIDTH - LABEL) as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        "<figure class=\"chart\"><svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" \
         role=\"img\" aria-label=\"runs timeline\">"
    );
    for (i, r) in runs.iter().enumerate() {
        let y = i as i64 * ROW + 2;
        let end = r.ended_at.unwrap_or(now);
        let x = LABEL as f64 + (r.started_at - first) as f64 * plot / span;
        let w = ((end - r.started_at) as f64 * plot / span).max(2.0);
        let outcome = r.outcome.clone().unwrap_or_else(|| {
            if r.ended_at.is_none() {
                "open".into()
            } else {
                r.status.clone()
            }
        });
        let _ = write!(
            out,
            "<g class=\"run\" data-run=\"{id}\"><title>run {id}: {outcome}, {secs} s{profile}</title>\
             <text class=\"label\" x=\"0\" y=\"{ty}\">run {id}</text>\
             <rect class=\"o-{class}\" x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bh}\"/></g>",
            id = r.id,
            outcome = escape(&outcome),
            secs = (end - r.started_at).max(0),
            profile = r
                .profile
                .as_deref()
                .map(|p| format!(", profile {}", escape(p)))
                .unwrap_or_default(),
            ty = y + 12,
            class = escape(&outcome.replace(|c: char| !c.is_ascii_alphanumeric(), "-")),
            bh = ROW - 4,
        );
    }
    out.push_str(
        "</svg><figcaption>runs, from the first start to the last end</figcaption></figure>",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_stack_scale_to_the_peak_and_escape_their_text() {
        let svg = stacked_bars(
            "a <b> chart",
            0,
            &[
                Series {
                    class: "c-completed",
                    name: "completed",
                    values: &[1, 0, 4],
                },
                Series {
                    class: "c-failed",
                    name: "failed",
                    values: &[1, 0, 0],
                },
            ],
        );
        assert!(svg.contains("data-hours=\"3\" data-peak=\"4\""), "{svg}");
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains("a &lt;b&gt; chart"));
        assert!(svg.contains("<title>02:00 UTC: 4 completed, 0 failed</title>"));
        // The tallest bar fills the plot.
        let plot = (HEIGHT - TOP - BOTTOM) as f64;
        assert!(svg.contains(&format!("height=\"{plot:.1}\"")), "{svg}");
    }

    #[test]
    fn the_timeline_has_a_row_per_run_and_an_open_run_reaches_now() {
        let runs = vec![
            RunView {
                id: 1,
                outcome: Some("crashed".into()),
                status: "crashed".into(),
                started_at: 100,
                ended_at: Some(150),
                ..RunView::default()
            },
            RunView {
                id: 2,
                status: "running".into(),
                started_at: 160,
                ended_at: None,
                profile: Some("<p>".into()),
                ..RunView::default()
            },
        ];
        let svg = run_timeline(&runs, 200);
        assert_eq!(svg.matches("<g class=\"run\"").count(), 2);
        assert!(svg.contains("class=\"o-crashed\""));
        assert!(
            svg.contains("run 2: open, 40 s, profile &lt;p&gt;"),
            "{svg}"
        );
        assert_eq!(run_timeline(&[], 0), "");
    }
}
