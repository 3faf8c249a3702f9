//! The worker's prompt: a bounded markdown document built from the task, its body, the handoffs
//! of its parents (their newest completed run's summary and metadata), its prior attempts, the
//! recent work of its assignee and its comment thread. Every part has a size cap so a huge body
//! or a long history can never blow up an agent's context; what is cut says how much was cut.
//!
//! Pure formatting: the caller loads the views from the board; this module never reads the board,
//! the environment or the clock (`now` is passed in for relative ages).

use std::fmt::Write as _;

/// Caps (reference Appendix C).
pub(crate) const MAX_BODY: usize = 8 * 1024;
pub(crate) const MAX_FIELD: usize = 4 * 1024;
pub(crate) const MAX_COMMENT: usize = 2 * 1024;
pub(crate) const MAX_ATTEMPTS: usize = 10;
pub(crate) const MAX_COMMENTS: usize = 30;
pub(crate) const MAX_PARENTS: usize = 20;
/// Completed runs of the assignee on other tasks shown as its recent work (the original's 5).
pub(crate) const MAX_RECENT_WORK: usize = 5;

/// The task being worked.
#[derive(Debug, Clone, Default)]
pub struct TaskView {
    pub id: String,
    pub title: String,
    pub body: Option<String>,
    pub assignee: Option<String>,
    pub tenant: Option<String>,
    /// `scratch`, `dir` or `worktree`.
    pub workspace_kind: String,
    pub workspace: String,
    pub branch: Option<String>,
    pub max_runtime_seconds: Option<i64>,
}

/// A finished parent and what it handed over.
#[derive(Debug, Clone, Default)]
pub struct ParentView {
    pub id: String,
    pub title: String,
    /// Its newest completed run's summary, else the task's result.
    pub result: Option<String>,
    /// Its newest completed run's metadata.
    pub metadata: Option<serde_json::Value>,
    /// When that run ended, else the task's `completed_at`.
    pub completed_at: Option<i64>,
}

/// A closed earlier run of this task.
#[derive(Debug, Clone, Default)]
pub struct AttemptView {
    pub outcome: String,
    pub profile: Option<String>,
    pub started_at: i64,
    pub summary: Option<String>,
    pub error: Option<String>,
    pub metadata: Option<serde_json::Value>,
}

/// A completed run of the assignee on another task.
#[derive(Debug, Clone, Default)]
pub struct RecentWorkView {
    pub task_id: String,
    pub title: String,
    pub summary: Option<String>,
    pub ended_at: i64,
}

/// One comment on the task.
#[derive(Debug, Clone, Default)]
pub struct CommentView {
    /// The comment's id (what a running agent has been given is tracked by it).
    pub id: i64,
    pub author: String,
    pub body: String,
    pub created_at: i64,
}

/// Everything the prompt is built from.
#[derive(Debug, Clone, Default)]
pub struct PromptInput {
    pub task: TaskView,
    /// Done parents, any order (newest completion is shown first).
    pub parents: Vec<ParentView>,
    /// Closed runs, oldest first.
    pub attempts: Vec<AttemptView>,
    /// The assignee's newest completed runs on other tasks, newest first.
    pub recent_work: Vec<RecentWorkView>,
    /// Comments, oldest first.
    pub comments: Vec<CommentView>,
    /// The `## Attachments` lines (`board::attachments::prompt_lines`; empty: no section).
    pub attachments: Vec<String>,
    /// The worker-protocol guidance (`gates::worker_guidance`; empty outside an owned worker).
    pub guidance: String,
}

/// The nudge given when a turn ends without `complete` or `block` (at most twice).
pub(crate) const STOP_NUDGE: &str = "\
Your turn ended but the task is still open. You must finish it now: run `kanban complete \
--summary \"<what you did>\"` if the work is done, or `kanban block --reason \"<why>\"` if it \
cannot be done. Do not start over.";

/// Opens a goal continuation turn (goal mode: the task is still open after a settled turn).
pub(crate) const CONTINUATION_NUDGE: &str = "\
Same task, next turn: continue from where you stopped; do not start over. When the goal is \
reached run `kanban complete --summary \"<what you did>\"`; if it cannot be reached run \
`kanban block --reason \"<why>\"`.";

/// Opens the one finalize turn a goal gets when its judge says "done" but the task is still open.
pub(crate) const FINALIZE_NUDGE: &str = "\
Same task: the goal looks reached, but the task is still open. Finish it now: check the result \
and run `kanban complete --summary \"<what you did>\"`, or `kanban block --reason \"<why>\"` if \
something is missing. Do not start over.";

/// Opens the retry of a turn that failed retryably (in-place recovery).
pub(crate) const RECOVERY_NUDGE: &str = "\
Same task: your previous turn failed with a transient error and is being retried. Continue from \
where you stopped; do not start over. End with `kanban complete --summary \"<what you did>\"` or \
`kanban block --reason \"<why>\"`.";

/// Frames comments added while the run was active, as the original frames an operator's notes
/// delivered mid-run: one line per comment, its author and its body (each cut to
/// [`MAX_COMMENT`]).
pub(crate) fn delivered_comments(comments: &[(String, String)]) -> String {
    let mut text = format!(
        "New note{} on your kanban task from the operator (delivered mid-run):",
        if comments.len() > 1 { "s" } else { "" }
    );
    for (author, body) in comments {
        let author = if author.trim().is_empty() {
            "operator"
        } else {
            author.trim()
        };
        let _ = write!(text, "\n- {author}: {}", truncate(body.trim(), MAX_COMMENT));
    }
    text
}

/// Cuts `text` to `max` bytes on a char boundary, saying how much was omitted.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [truncated, {} chars omitted]",
        &text[..end],
        text[end..].chars().count()
    )
}

/// "just now", "5m ago", "3h ago", "2d ago".
pub fn age(now: i64, then: i64) -> String {
    let secs = now - then;
    if secs < 60 {
        "just now".to_owned()
    } else if secs < 3600 {
        format!("{}m ago", secs / 60)
    } else if secs < 86_400 {
        format!("{}h ago", secs / 3600)
    } else {
        format!("{}d ago", secs / 86_400)
    }
}

/// `then` as an absolute UTC time with its age: `2026-12-02 03:30 UTC, 5m ago` (an agent reads a
/// bare date as current; the age tells it how old the fact is).
pub fn stamp(now: i64, then: i64) -> String {
    let date = jiff::Timestamp::from_second(then)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|_| then.to_string());
    format!("{date}, {}", age(now, then))
}

/// The `_metadata_:` line of a handoff (capped), or `None` for no or empty metadata.
fn metadata_line(metadata: Option<&serde_json::Value>) -> Option<String> {
    let metadata = metadata?;
    let empty = match metadata {
        serde_json::Value::Null => true,
        serde_json::Value::Object(map) => map.is_empty(),
        _ => false,
    };
    if empty {
        return None;
    }
    Some(format!(
        "_metadata_: `{}`",
        truncate(&metadata.to_string(), MAX_FIELD)
    ))
}

/// What the parents section says before the handoffs.
const PARENTS_CAVEAT: &str = "\
_Each handoff below was recorded when its parent finished (its age is beside it). It is a \
snapshot of that moment, not the current state: when one matters to your work and is not \
recent, check it against its source before you rely on it._";

/// Builds the worker prompt.
pub fn build(input: &PromptInput, now: i64) -> String {
    let t = &input.task;
    let mut out = String::new();
    // `write!` into a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(
        out,
        "# Kanban task {}: {}",
        t.id,
        truncate(&t.title, MAX_FIELD)
    );
    if let Some(a) = &t.assignee {
        let _ = writeln!(out, "Assignee: {a}");
    }
    if let Some(tenant) = &t.tenant {
        let _ = writeln!(out, "Tenant: {tenant}");
    }
    let kind = if t.workspace_kind.is_empty() {
        "scratch"
    } else {
        t.workspace_kind.as_str()
    };
    match &t.branch {
        Some(b) if kind == "worktree" => {
            let _ = writeln!(out, "Workspace: {kind} @ {} (branch {b})", t.workspace);
        }
        branch => {
            let _ = writeln!(out, "Workspace: {kind} @ {}", t.workspace);
            if let Some(b) = branch {
                let _ = writeln!(out, "Branch: {b}");
            }
        }
    }
    if let Some(limit) = t.max_runtime_seconds {
        let _ = writeln!(out, "Max runtime: {limit}s");
    }
    if let Some(body) = t.body.as_deref().filter(|b| !b.trim().is_empty()) {
        let _ = write!(out, "\n## Body\n{}\n", truncate(body, MAX_BODY));
    }
    if !input.attachments.is_empty() {
        let _ = write!(out, "\n{}\n", input.attachments.join("\n"));
    }

    let mut parents: Vec<&ParentView> = input.parents.iter().collect();
    parents.sort_by_key(|p| std::cmp::Reverse(p.completed_at.unwrap_or(0)));
    if !parents.is_empty() {
        out.push_str("\n## Parent task results\n");
        let _ = writeln!(out, "{PARENTS_CAVEAT}");
        for p in parents.iter().take(MAX_PARENTS) {
            let when = p
                .completed_at
                .map(|c| format!(" (completed {})", age(now, c)))
                .unwrap_or_default();
            let _ = writeln!(out, "### {}: {}{when}", p.id, truncate(&p.title, 200));
            let result = p
                .result
                .as_deref()
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or("(no result recorded)");
            let _ = writeln!(out, "{}", truncate(result, MAX_FIELD));
            if let Some(line) = metadata_line(p.metadata.as_ref()) {
                let _ = writeln!(out, "{line}");
            }
        }
        if parents.len() > MAX_PARENTS {
            let _ = writeln!(
                out,
                "({} more parents omitted)",
                parents.len() - MAX_PARENTS
            );
        }
    }

    if !input.attempts.is_empty() {
        out.push_str("\n## Prior attempts on this task\n");
        let total = input.attempts.len();
        let skip = total.saturating_sub(MAX_ATTEMPTS);
        if skip > 0 {
            let _ = writeln!(out, "({skip} older attempts omitted)");
        }
        for (i, a) in input.attempts.iter().enumerate().skip(skip) {
            let profile = a.profile.as_deref().unwrap_or("?");
            let _ = writeln!(
                out,
                "### Attempt {} — {} ({profile}, {})",
                i + 1,
                a.outcome,
                stamp(now, a.started_at)
            );
            if let Some(s) = a.summary.as_deref().filter(|s| !s.is_empty()) {
                let _ = writeln!(out, "{}", truncate(s, MAX_FIELD));
            }
            if let Some(e) = a.error.as_deref().filter(|e| !e.is_empty()) {
                let _ = writeln!(out, "_error_: {}", truncate(e, MAX_FIELD));
            }
            if let Some(line) = metadata_line(a.metadata.as_ref()) {
                let _ = writeln!(out, "{line}");
            }
        }
    }

    if let (Some(assignee), false) = (&t.assignee, input.recent_work.is_empty()) {
        let _ = writeln!(out, "\n## Recent work by @{assignee}");
        for w in input.recent_work.iter().take(MAX_RECENT_WORK) {
            let first = w
                .summary
                .as_deref()
                .and_then(|s| s.trim().lines().next())
                .filter(|s| !s.is_empty())
                .map(|s| s.chars().take(200).collect::<String>())
                .unwrap_or_else(|| "(no summary)".to_owned());
            let _ = writeln!(
                out,
                "- {} — {} ({}): {first}",
                w.task_id,
                truncate(&w.title, 200),
                stamp(now, w.ended_at)
            );
        }
    }

    if !input.comments.is_empty() {
        out.push_str("\n## Comment thread\n");
        let skip = input.comments.len().saturating_sub(MAX_COMMENTS);
        if skip > 0 {
            let _ = writeln!(out, "({skip} older comments omitted)");
        }
        for c in input.comments.iter().skip(skip) {
            let _ = writeln!(
                out,
                "- comment from `{}` ({}): {}",
                c.author,
                age(now, c.created_at),
                truncate(&c.body, MAX_COMMENT)
            );
        }
    }

    if !input.guidance.is_empty() {
        let _ = write!(out, "\n## How to finish\n{}\n", input.guidance);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> PromptInput {
        PromptInput {
            task: TaskView {
                id: "t_0000abcd".into(),
                title: "Write the report".into(),
                body: Some("Use the data.".into()),
                assignee: Some("coder".into()),
                workspace: "/tmp/ws".into(),
                ..TaskView::default()
            },
            guidance: "run kanban complete".into(),
            ..PromptInput::default()
        }
    }

    #[test]
    fn prompt_has_the_task_body_and_guidance() {
        let p = build(&input(), 1000);
        assert!(
            p.starts_with("# Kanban task t_0000abcd: Write the report\n"),
            "{p}"
        );
        assert!(p.contains("## Body\nUse the data."));
        assert!(p.contains("kanban complete"));
        assert!(!p.contains("## Prior attempts"));
    }

    #[test]
    fn huge_body_is_truncated_with_a_note() {
        let mut i = input();
        i.task.body = Some("é".repeat(10_000));
        let p = build(&i, 0);
        assert!(p.len() < MAX_BODY + 2048, "{}", p.len());
        assert!(p.contains("[truncated, "));
    }

    #[test]
    fn only_the_newest_attempts_and_comments_are_kept() {
        let mut i = input();
        for n in 0..25 {
            i.attempts.push(AttemptView {
                outcome: "crashed".into(),
                started_at: n,
                error: Some(format!("err {n}")),
                ..AttemptView::default()
            });
        }
        for n in 0..40 {
            i.comments.push(CommentView {
                id: n,
                author: "op".into(),
                body: format!("note {n}"),
                created_at: n,
            });
        }
        let p = build(&i, 100_000);
        assert!(p.contains("(15 older attempts omitted)"));
        assert!(p.contains("### Attempt 25 — crashed"));
        assert!(!p.contains("### Attempt 15 "));
        assert!(p.contains("(10 older comments omitted)"));
        assert!(p.contains("note 39") && !p.contains("note 9\n"));
    }

    #[test]
    fn parents_results_are_shown_newest_first() {
        let mut i = input();
        i.parents = vec![
            ParentView {
                id: "t_1".into(),
                title: "old".into(),
                result: Some("r1".into()),
                metadata: Some(serde_json::json!({"pr": 7})),
                completed_at: Some(10),
            },
            ParentView {
                id: "t_2".into(),
                title: "new".into(),
                result: None,
                metadata: None,
                completed_at: Some(20),
            },
        ];
        let p = build(&i, 4000);
        let new = p.find("t_2: new").unwrap();
        let old = p.find("t_1: old").unwrap();
        assert!(new < old);
        assert!(p.contains("(no result recorded)"));
        assert!(p.contains("completed 1h ago"));
        assert!(p.contains("not the current state"), "{p}");
        assert!(p.contains("r1\n_metadata_: `{\"pr\":7}`\n"), "{p}");
    }

    #[test]
    fn attempts_carry_metadata_and_absolute_dates_and_recent_work_is_listed() {
        let mut i = input();
        i.attempts.push(AttemptView {
            outcome: "review_requested".into(),
            profile: Some("coder".into()),
            started_at: 1_796_000_000,
            summary: Some("first pass".into()),
            metadata: Some(serde_json::json!({"coverage": 0.8})),
            ..AttemptView::default()
        });
        i.recent_work.push(RecentWorkView {
            task_id: "t_00001111".into(),
            title: "earlier".into(),
            summary: Some("did the thing\nmore".into()),
            ended_at: 1_796_000_000,
        });
        let p = build(&i, 1_796_000_000 + 7200);
        assert!(
            p.contains("### Attempt 1 — review_requested (coder, 2026-11-30 00:53 UTC, 2h ago)"),
            "{p}"
        );
        assert!(p.contains("_metadata_: `{\"coverage\":0.8}`"), "{p}");
        assert!(
            p.contains("## Recent work by @coder\n- t_00001111 — earlier ("),
            "{p}"
        );
        assert!(p.contains("2h ago): did the thing\n"), "{p}");
        i.task.assignee = None;
        assert!(!build(&i, 0).contains("Recent work"));
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age(100, 90), "just now");
        assert_eq!(age(100, 200), "just now");
        assert_eq!(age(7200, 0), "2h ago");
        assert_eq!(age(300, 0), "5m ago");
        assert_eq!(age(200_000, 0), "2d ago");
    }
}
