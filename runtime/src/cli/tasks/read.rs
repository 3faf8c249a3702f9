//! `kanban list|show|events|fsck`: the read commands. They open the board read-only when this
//! user may not write it ([`open_read`]) and change nothing.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use serde::Serialize;

use crate::board::{self, Comment, Run, Status, StoredEvent, Task, TaskFilter, TaskRef};
use crate::cli::escape::{block, line};
use crate::cli::explain;
use crate::cli::session::{Opened, now, open_read, root, task_arg};
use crate::cli::{CmdResult, Exit, Globals, print_json};

/// `list --status`: the statuses, which the shells complete.
fn status_parser() -> impl TypedValueParser<Value = Status> {
    PossibleValuesParser::new(Status::ALL.map(Status::as_str))
        .try_map(|name| name.parse::<Status>())
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only this status (repeatable).
    #[arg(long = "status", value_name = "STATUS", value_parser = status_parser())]
    pub statuses: Vec<Status>,
    #[arg(long)]
    pub assignee: Option<String>,
    /// Include archived tasks.
    #[arg(long)]
    pub all: bool,
    /// At most N tasks (a page of a big board; with --offset, the next pages).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Skip the first N tasks of the order (priority, then age).
    #[arg(long, value_name = "N")]
    pub offset: Option<usize>,
}

/// `kanban list`.
pub(in crate::cli) fn list(args: ListArgs, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let tasks = o.board.list_tasks(&TaskFilter {
        statuses: args.statuses,
        assignee: args.assignee,
        include_archived: args.all,
        limit: args.limit,
        offset: args.offset,
    })?;
    if globals.json {
        print_json(&tasks)?;
    } else {
        for t in &tasks {
            println!("{}", task_line(t));
        }
    }
    Ok(Exit::OK)
}

/// `kanban events ID [--limit N]`.
pub(in crate::cli) fn events(id: &str, limit: Option<usize>, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    o.board.get_task(id)?;
    let events = o.board.events(id, limit)?;
    if globals.json {
        print_json(&events)?;
    } else {
        for e in &events {
            println!("{}", event_line(e));
        }
    }
    Ok(Exit::OK)
}

/// `kanban fsck`: exit 1 naming each violation.
pub(in crate::cli) fn fsck(globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    let violations = o.board.fsck_at(now())?;
    if globals.json {
        #[derive(Serialize)]
        struct Report<'a> {
            ok: bool,
            board: &'a str,
            violations: &'a [board::Violation],
        }
        print_json(&Report {
            ok: violations.is_empty(),
            board: &o.loc.slug,
            violations: &violations,
        })?;
    } else if violations.is_empty() {
        println!("board {} is consistent", o.loc.slug);
    }
    for v in &violations {
        eprintln!("kanban fsck: {v}");
    }
    Ok(if violations.is_empty() {
        Exit::OK
    } else {
        Exit(1)
    })
}

fn task_line(t: &Task) -> String {
    format!(
        "{}  {:<9} p{:<3} {:<12} {}",
        t.id,
        t.status.as_str(),
        t.priority,
        line(t.assignee.as_deref().unwrap_or("-")),
        line(&t.title)
    )
}

fn event_line(e: &StoredEvent) -> String {
    explain::event_line(e, now())
}

/// `turn <n> of run <r>: <kind>, <exit class> (exit <code>), <seconds> s`.
fn turn_line(e: &StoredEvent) -> String {
    let p = e.payload.clone().unwrap_or_default();
    let run = e.run_id.map_or("-".to_owned(), |r| r.to_string());
    line(&format!(
        "turn {} of run {run}: {}, {} (exit {}), {} s",
        p["turn"],
        p["kind"].as_str().unwrap_or("?"),
        p["exit"].as_str().unwrap_or("?"),
        p["exit_code"],
        p["seconds"]
    ))
    .into_owned()
}

/// What `kanban show` prints of a task.
struct Shown {
    task: Task,
    parents: Vec<TaskRef>,
    children: Vec<TaskRef>,
    runs: Vec<Run>,
    comments: Vec<Comment>,
    recent: Vec<StoredEvent>,
    /// Every agent turn of every run (the worker's `turn` events), oldest first.
    turns: Vec<StoredEvent>,
}

impl Shown {
    fn read(o: &Opened, id: &str, events: usize) -> anyhow::Result<Shown> {
        let task = o.board.get_task(id)?;
        let parents = o.board.parents(id)?;
        let children = o.board.children(id)?;
        let runs = o.board.runs(id)?;
        let comments = o.board.comments(id)?;
        let recent = o.board.events(id, Some(events))?;
        let mut turns: Vec<_> = o
            .board
            .events(id, None)?
            .into_iter()
            .filter(|e| e.kind == "turn")
            .collect();
        turns.sort_by_key(|e| e.id);
        Ok(Shown {
            task,
            parents,
            children,
            runs,
            comments,
            recent,
            turns,
        })
    }
}

/// `kanban show [ID] [--events N]` (default: this worker's task).
pub(in crate::cli) fn show(id: Option<String>, events: usize, globals: &Globals) -> CmdResult {
    let id = match task_arg(id, "show") {
        Ok(id) => id,
        Err(exit) => return Ok(exit),
    };
    let o = open_read(globals)?;
    let s = Shown::read(&o, &id, events)?;
    // A board whose pre_claim policy is not valid denies every claim: said beside the task.
    let policy_invalid = crate::dispatch::policy::Gate::load(&root(globals)?, &o.loc.slug)
        .and_then(|g| g.invalid().map(str::to_owned));
    if globals.json {
        let mut shown = serde_json::json!({
            "task": s.task,
            "parents": s.parents,
            "children": s.children,
            "runs": s.runs,
            "turns": s.turns,
            "comments": s.comments,
            "events": s.recent,
        });
        if let Some(why) = &policy_invalid {
            shown["pre_claim_invalid"] = serde_json::Value::String(why.clone());
        }
        print_json(&shown)?;
        return Ok(Exit::OK);
    }
    if let Some(why) = &policy_invalid {
        println!(
            "pre_claim:  the board's policy is not valid ({}): every claim and promotion is denied",
            line(why)
        );
    }
    let at = now();
    print_state(&o, &id, &s, at)?;
    print_history(&s, at);
    print_handoffs(&o, &s.task, at)?;
    let thresholds = crate::board::diagnostics::Thresholds::default();
    let diagnostics = o.board.task_diagnostics(&id, at, &thresholds)?;
    if !diagnostics.is_empty() {
        println!("diagnostics:");
        for d in &diagnostics {
            for l in explain::diagnostic_lines(d) {
                println!("{l}");
            }
        }
    }
    Ok(Exit::OK)
}

/// What the next worker is handed (as its prompt shows it, [`crate::worker::prompt_input`]): each
/// finished parent's handoff with its age, and the assignee's recent work on other tasks.
fn print_handoffs(o: &Opened, task: &Task, at: i64) -> anyhow::Result<()> {
    let input = crate::worker::prompt_input(
        &o.board,
        &task.id,
        task.current_run_id,
        String::new(),
        String::new(),
    )?;
    for p in &input.parents {
        let when = p
            .completed_at
            .map(|c| format!(" (completed {})", explain::when(c, at)))
            .unwrap_or_default();
        println!(
            "handoff from {}{when}: {}",
            p.id,
            line(p.result.as_deref().unwrap_or("(no result recorded)"))
        );
        if let Some(metadata) = p.metadata.as_ref().filter(|m| !is_empty_json(m)) {
            println!("  metadata {}", line(&metadata.to_string()));
        }
    }
    if let Some(assignee) = &task.assignee {
        for w in &input.recent_work {
            println!(
                "recent work by @{} on {} ({}): {}",
                line(assignee),
                w.task_id,
                explain::when(w.ended_at, at),
                line(
                    w.summary
                        .as_deref()
                        .and_then(|s| s.lines().next())
                        .unwrap_or("(no summary)")
                )
            );
        }
    }
    Ok(())
}

/// A run's agent session (its metadata's `agent` object) as one line: the preset, the CLI's
/// session id, the tokens and the cost.
fn agent_line(agent: &serde_json::Value) -> String {
    let text = |k: &str| {
        agent
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_owned()
    };
    let n = |k: &str| {
        agent
            .pointer(&format!("/usage/{k}"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    let mut out = format!(
        "agent {} session {}: {} input, {} output, {} cached tokens",
        text("agent"),
        text("session_id"),
        n("input_tokens"),
        n("output_tokens"),
        n("cache_read_tokens")
    );
    if let Some(cost) = agent.pointer("/usage/cost_usd").and_then(|v| v.as_f64()) {
        out.push_str(&format!(", ${cost:.4}"));
    }
    out
}

/// `null` or `{}`: metadata that says nothing.
fn is_empty_json(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// The task's skills and pinned model, provider and reasoning effort, when it has any.
fn print_steering(task: &Task) {
    let skills = crate::home::steering::requested_skills(task);
    if !skills.is_empty() {
        println!("skills: {}", line(&skills.join(", ")));
    }
    if task.model_override.is_some() || task.reasoning_effort.is_some() {
        println!(
            "model {}  provider {}  reasoning {}",
            line(task.model_override.as_deref().unwrap_or("-")),
            line(task.provider_override.as_deref().unwrap_or("-")),
            line(task.reasoning_effort.as_deref().unwrap_or("-"))
        );
    }
}

/// The task's title, status, why it is where it is, its claim, owner turn, body and result.
fn print_state(o: &Opened, id: &str, s: &Shown, at: i64) -> anyhow::Result<()> {
    let task = &s.task;
    println!("{}: {}", task.id, line(&task.title));
    println!(
        "status {}  priority {}  assignee {}",
        task.status,
        task.priority,
        line(task.assignee.as_deref().unwrap_or("-"))
    );
    println!(
        "completion contract {}",
        line(
            task.completion_contract
                .as_deref()
                .filter(|c| !c.is_empty())
                .unwrap_or(crate::acceptance::LOCAL_ONLY)
        )
    );
    print_steering(task);
    if task.goal_mode {
        match task.goal_max_turns {
            Some(n) => println!("goal mode, at most {n} turns per run"),
            None => println!("goal mode, the profile's turn budget (default 20)"),
        }
    }
    let all_events = o.board.events(id, None)?;
    for why in explain::why(task, &s.runs, &all_events) {
        println!("{}", line(&why));
    }
    print_workspace(o, task)?;
    if let (Some(lock), Some(exp)) = (&task.claim_lock, task.claim_expires) {
        println!(
            "claimed by {} until {} (run {})",
            line(lock),
            explain::when(exp, at),
            task.current_run_id
                .map_or("-".to_owned(), |r| r.to_string())
        );
    }
    // Owner mode: the turn the owner admitted for the open run, and a pause an operator ends.
    if let Some(run) = task.current_run_id
        && let Some(turn) = o.board.owner_turn(id, run)?
    {
        let status = turn.status.as_deref().unwrap_or("admitted");
        if status == "unknown" {
            println!(
                "paused: the owner turn of run {run} is unknown (it may have had effects); \
                 `kanban owner resolve {id} --as interrupted|failed|completed` decides"
            );
        } else {
            println!("owner turn of run {run}: {}", line(status));
        }
    }
    if let Some(body) = &task.body {
        println!("\n  {}\n", block(body));
    }
    if let Some(result) = &task.result {
        println!("result: {}", line(result));
    }
    Ok(())
}

/// `workspace worktree @ PATH (branch B)`, and when a finished task's workspace was kept, why.
fn print_workspace(o: &Opened, task: &crate::board::Task) -> anyhow::Result<()> {
    let text = format!(
        "workspace {}",
        crate::cli::tasks::workspace::describe_workspace(task)
    );
    println!("{text}");
    if let Some(note) = o.board.last_workspace_note(&task.id)?
        && let Ok(crate::board::events::Event::WorkspacePreserved { reason, detail, .. }) =
            note.decode()
    {
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!(": {}", line(&detail))
        };
        println!(
            "workspace kept ({reason}{detail}); `kanban gc` removes it once it is clean and pushed"
        );
    }
    Ok(())
}

/// The task's parents, children, runs, turns, comments and recent events.
fn print_history(s: &Shown, at: i64) {
    for p in &s.parents {
        println!(
            "parent  {} {:<9} {}",
            p.id,
            p.status.as_str(),
            line(&p.title)
        );
    }
    for c in &s.children {
        println!(
            "child   {} {:<9} {}",
            c.id,
            c.status.as_str(),
            line(&c.title)
        );
    }
    for r in &s.runs {
        println!(
            "run {} {} {}{}",
            r.id,
            r.status,
            line(r.outcome.as_deref().unwrap_or("open")),
            r.summary
                .as_deref()
                .map(|s| format!(": {}", line(s)))
                .unwrap_or_default()
        );
        if let Some(metadata) = r.metadata.as_ref().filter(|m| !is_empty_json(m)) {
            println!("  metadata {}", line(&metadata.to_string()));
        }
        if let Some(agent) = r.metadata.as_ref().and_then(|m| m.get("agent")) {
            println!("  {}", agent_line(agent));
        }
    }
    for t in &s.turns {
        println!("{}", turn_line(t));
    }
    for c in &s.comments {
        println!(
            "comment by {} at {}: {}",
            line(&c.author),
            explain::when(c.created_at, at),
            line(&c.body)
        );
    }
    for e in &s.recent {
        println!("event {}", event_line(e));
    }
}
