//! `kanban decompose|specify|schedule|reassign`: a triage task fanned out into a graph of
//! children or fleshed out by hand, a task parked until a time, a task handed to another
//! profile. The library does the work (`board::graph`, `board::schedule`, `board::operator`);
//! this file reads the children's JSON and prints.

use std::io::Read;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::board::{Decomposition, NewChild, Outcome, Refusal, Specification, WorkspaceSpec};
use crate::cli::escape::line;
use crate::cli::session::{
    authorize, done, now, open, open_read, parse_seconds, parse_time, print_out, read_body, root,
};
use crate::cli::{CmdResult, Exit, Globals, Refused};
use crate::config::Config;
use crate::gates;
use crate::triage;

/// `kanban decompose ID --children FILE|-`.
#[derive(Debug, clap::Args)]
pub struct DecomposeArgs {
    /// The triage task to fan out (the root: it waits on every child).
    #[arg(required_unless_present = "all")]
    pub id: Option<String>,
    /// A JSON list of children (`-`: standard input): each {"title", "body", "assignee",
    /// "parents": [indices into the list], "workspace": "scratch|dir:PATH|worktree|worktree:PATH"
    /// (or the original's "workspace_kind" and "workspace_path"), "branch", "base"}; only the
    /// title is required.
    #[arg(
        long,
        value_name = "FILE|-",
        required_unless_present = "with",
        conflicts_with = "with"
    )]
    pub children: Option<String>,
    /// Let this profile's agent write the children (one turn, outside any task's identity; an
    /// answer that is not a valid graph changes nothing).
    #[arg(long, value_name = "PROFILE")]
    pub with: Option<String>,
    /// Every triage task of the board, one after the other (with --with; no ID).
    #[arg(long, requires = "with", conflicts_with = "id")]
    pub all: bool,
    /// Hand the root to this profile (the orchestrator that wakes when every child is done).
    #[arg(long, value_name = "PROFILE")]
    pub root_assignee: Option<String>,
    /// Leave every child in todo (default: children that wait on no sibling become ready).
    #[arg(long)]
    pub no_promote: bool,
}

/// `kanban specify ID`.
#[derive(Debug, clap::Args)]
pub struct SpecifyArgs {
    /// The triage task.
    pub id: String,
    #[arg(long)]
    pub title: Option<String>,
    /// The body; `-` reads it from standard input.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Read the body from this file.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    #[arg(long, value_name = "PROFILE")]
    pub assignee: Option<String>,
    /// Leave a comment by this author naming what changed (none without it).
    #[arg(long, value_name = "NAME")]
    pub author: Option<String>,
    /// Let this profile's agent write the title, body and assignee (one turn, outside any
    /// task's identity).
    #[arg(long, value_name = "PROFILE", conflicts_with_all = ["title", "body", "body_file", "assignee"])]
    pub with: Option<String>,
}

/// `kanban schedule ID --at TIME | --in DURATION`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["at", "in_"])))]
pub struct ScheduleArgs {
    pub id: String,
    /// When the dispatcher wakes it: 2026-12-02T08:00:00Z, or 2026-12-02 09:00 (local time).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub at: Option<i64>,
    /// How long from now: 90s, 30m, 2h, 1d (or seconds).
    #[arg(long = "in", value_name = "DURATION", value_parser = parse_seconds)]
    pub in_: Option<i64>,
    #[arg(long)]
    pub reason: Option<String>,
}

/// The children's JSON: from the file, or standard input for `-`.
fn read_children_text(source: &str) -> anyhow::Result<String> {
    if source == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| {
            anyhow::Error::new(e).context("cannot read the children from standard input")
        })?;
        return Ok(text);
    }
    std::fs::read_to_string(source).map_err(|e| {
        anyhow::Error::new(e).context(format!("cannot read the children file {source}"))
    })
}

/// A string field of child `i` (absent or null: `None`).
fn text_field(i: usize, o: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("child {i}: `{key}` must be a string")),
    }
}

/// Child `i` of the list: its fields, its parents, its workspace (read as `create` reads it).
fn child(i: usize, value: &Value) -> Result<NewChild, String> {
    const KEYS: [&str; 9] = [
        "title",
        "body",
        "assignee",
        "parents",
        "workspace",
        "branch",
        "base",
        "workspace_kind",
        "workspace_path",
    ];
    let Value::Object(o) = value else {
        return Err(format!("child {i} is not a JSON object"));
    };
    if let Some(key) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "child {i}: unknown key `{key}` (known: {})",
            KEYS.join(", ")
        ));
    }
    let title = text_field(i, o, "title")?
        .ok_or_else(|| format!("child {i} has no `title`; every child needs one"))?;
    let parents = match o.get("parents") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ps)) => ps
            .iter()
            .map(|p| p.as_u64().and_then(|p| usize::try_from(p).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                format!("child {i}: `parents` must be indices into the list (0, 1, …)")
            })?,
        Some(_) => return Err(format!("child {i}: `parents` must be a list of indices")),
    };
    Ok(NewChild {
        title,
        body: text_field(i, o, "body")?,
        assignee: text_field(i, o, "assignee")?,
        parents,
        workspace: workspace(i, o)?,
    })
}

/// The workspace keys of child `i` as `create --workspace/--branch/--base` reads them; the
/// branch and base are checked by the board, inside the decomposition's transaction.
fn workspace(i: usize, o: &Map<String, Value>) -> Result<Option<WorkspaceSpec>, String> {
    // The original's keys: `workspace_kind` with an optional `workspace_path`.
    let original = match (
        text_field(i, o, "workspace_kind")?,
        text_field(i, o, "workspace_path")?,
    ) {
        (Some(kind), Some(path)) => Some(format!("{kind}:{path}")),
        (Some(kind), None) => Some(kind),
        (None, Some(_)) => {
            return Err(format!(
                "child {i}: `workspace_path` needs a `workspace_kind`"
            ));
        }
        (None, None) => None,
    };
    let kind = match (text_field(i, o, "workspace")?, original) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "child {i}: give `workspace` or `workspace_kind`/`workspace_path`, not both"
            ));
        }
        (one, other) => one.or(other),
    };
    let branch = text_field(i, o, "branch")?;
    let base = text_field(i, o, "base")?;
    if kind.is_none() && branch.is_none() && base.is_none() {
        return Ok(None);
    }
    let (kind, path) = match kind {
        Some(value) => {
            let (kind, path) =
                crate::workspace::parse_flag(&value).map_err(|e| format!("child {i}: {e}"))?;
            (Some(kind), path)
        }
        None => (None, None),
    };
    let spec = WorkspaceSpec {
        kind,
        path,
        branch,
        base,
    };
    spec.check_branch_needs_worktree()
        .map_err(|e| format!("child {i}: {e}"))?;
    if let Some(path) = &spec.path {
        crate::workspace::check_path(spec.kind(), path).map_err(|e| format!("child {i}: {e}"))?;
    }
    Ok(Some(spec))
}

/// The children's JSON list, read whole before the board is touched.
pub(in crate::cli) fn parse_children(text: &str) -> anyhow::Result<Vec<NewChild>> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!("the children are not valid JSON ({e}); nothing was changed")
    })?;
    let Value::Array(items) = value else {
        anyhow::bail!("the children must be a JSON list of objects; nothing was changed");
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| child(i, v))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{e}; nothing was changed"))
}

/// `kanban decompose ID --children FILE|- | --with PROFILE`, `kanban decompose --all --with
/// PROFILE`.
pub(in crate::cli) fn decompose(args: DecomposeArgs, globals: &Globals) -> CmdResult {
    match (&args.id, &args.with) {
        (None, Some(profile)) => decompose_all(&args, profile, globals),
        (Some(id), Some(profile)) => {
            authorize(id)?;
            let children = children_from_agent(id, profile, globals)?;
            decompose_one(id, &children, &args, globals)
        }
        (Some(id), None) => {
            authorize(id)?;
            let source = args.children.as_deref().unwrap_or("-");
            let children = parse_children(&read_children_text(source)?)?;
            decompose_one(id, &children, &args, globals)
        }
        (None, None) => anyhow::bail!("decompose needs a task id, or --all --with PROFILE"),
    }
}

fn decompose_one(
    id: &str,
    children: &[NewChild],
    args: &DecomposeArgs,
    globals: &Globals,
) -> CmdResult {
    let o = open(globals)?;
    let author = gates::default_task_id(None);
    let how = Decomposition {
        root_assignee: args.root_assignee.as_deref(),
        promote: !args.no_promote,
        author: Some(author.as_deref().unwrap_or("operator")),
    };
    let d = done(o.board.decompose(id, children, &how, now())?)?;
    print_out(globals.json, &d, || {
        let mut out = format!(
            "decomposed {} into {} children; it waits on them ({}, assignee {})",
            d.task_id,
            d.child_ids.len(),
            d.root_status,
            line(d.root_assignee.as_deref().unwrap_or("nobody"))
        );
        for (id, status) in d.child_ids.iter().zip(&d.child_statuses) {
            out.push_str(&format!("\n  {id} {status}"));
        }
        out
    })
}

/// The triage task `id`, checked before an agent is asked about it.
fn triage_task(id: &str, globals: &Globals) -> anyhow::Result<crate::board::Task> {
    let task = open_read(globals)?.board.get_task(id)?;
    if task.status != crate::board::Status::Triage {
        return Err(Refused(format!(
            "task `{id}` is {}; only a triage task is decomposed or specified by an agent",
            task.status
        ))
        .into());
    }
    Ok(task)
}

/// Asks `profile`'s agent for the children of the triage task `id`.
fn children_from_agent(
    id: &str,
    profile: &str,
    globals: &Globals,
) -> anyhow::Result<Vec<NewChild>> {
    let task = triage_task(id, globals)?;
    let root = root(globals)?;
    let config = Config::load(&root)?;
    let answer = triage::ask(
        &root,
        &config,
        profile,
        &triage::decomposition_prompt(&task, &config),
    )?;
    let list = match triage::json_in(&answer, '{') {
        Some(Value::Object(mut o)) if o.contains_key("children") => o.remove("children"),
        _ => triage::json_in(&answer, '['),
    };
    let Some(list) = list else {
        return Err(triage::TriageError::NoJson {
            profile: profile.to_owned(),
            wanted: "list of children",
        }
        .into());
    };
    parse_children(&list.to_string())
        .map_err(|e| e.context(format!("the answer of profile `{profile}`'s agent")))
}

/// `decompose --all --with PROFILE`: each triage task in turn; a task that fails is reported
/// and the sweep goes on (exit 1 when any failed).
fn decompose_all(args: &DecomposeArgs, profile: &str, globals: &Globals) -> CmdResult {
    let filter = crate::board::TaskFilter {
        statuses: vec![crate::board::Status::Triage],
        ..crate::board::TaskFilter::default()
    };
    let ids: Vec<String> = open_read(globals)?
        .board
        .list_tasks(&filter)?
        .into_iter()
        .map(|t| t.id)
        .collect();
    let mut failed = 0;
    for id in &ids {
        let outcome = authorize(id)
            .and_then(|()| children_from_agent(id, profile, globals))
            .and_then(|children| decompose_one(id, &children, args, globals));
        if let Err(e) = outcome {
            failed += 1;
            eprintln!("kanban: {id}: {}", crate::error_chain(e.as_ref()));
        }
    }
    if !globals.json {
        println!(
            "decompose --all: {} triage task(s), {failed} failed",
            ids.len()
        );
    }
    Ok(if failed == 0 { Exit::OK } else { Exit(1) })
}

/// `kanban specify ID [--title T] [--body B] [--assignee P] | --with PROFILE`.
pub(in crate::cli) fn specify(args: SpecifyArgs, globals: &Globals) -> CmdResult {
    authorize(&args.id)?;
    let spec = match &args.with {
        Some(profile) => specification_from_agent(&args.id, profile, args.author.clone(), globals)?,
        None => Specification {
            title: args.title,
            body: read_body(args.body, args.body_file.as_deref())?,
            assignee: args.assignee,
            author: args.author,
        },
    };
    let o = open(globals)?;
    let s = done(o.board.specify(&args.id, &spec, now())?)?;
    print_out(globals.json, &s, || {
        let changed = if s.changed_fields.is_empty() {
            "nothing changed".to_owned()
        } else {
            format!("changed {}", s.changed_fields.join(", "))
        };
        format!("specified {} ({changed}); now {}", s.task_id, s.status)
    })
}

/// Asks `profile`'s agent for the title, body and assignee of the triage task `id`.
fn specification_from_agent(
    id: &str,
    profile: &str,
    author: Option<String>,
    globals: &Globals,
) -> anyhow::Result<Specification> {
    let task = triage_task(id, globals)?;
    let root = root(globals)?;
    let config = Config::load(&root)?;
    let answer = triage::ask(
        &root,
        &config,
        profile,
        &triage::specification_prompt(&task, &config),
    )?;
    let Some(Value::Object(o)) = triage::json_in(&answer, '{') else {
        return Err(triage::TriageError::NoJson {
            profile: profile.to_owned(),
            wanted: "object {title, body, assignee}",
        }
        .into());
    };
    let field = |key: &str| -> anyhow::Result<Option<String>> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(other) => anyhow::bail!(
                "the answer of profile `{profile}`'s agent: `{key}` must be a non-empty string, not {other}; nothing was changed"
            ),
        }
    };
    let spec = Specification {
        title: field("title")?,
        body: field("body")?,
        assignee: field("assignee")?,
        author,
    };
    if spec.title.is_none() && spec.body.is_none() {
        anyhow::bail!(
            "the answer of profile `{profile}`'s agent has neither a title nor a body; nothing was changed"
        );
    }
    Ok(spec)
}

/// `kanban schedule ID (--at TIME | --in DURATION) [--reason R]`.
pub(in crate::cli) fn schedule(args: ScheduleArgs, globals: &Globals) -> CmdResult {
    authorize(&args.id)?;
    let now = now();
    let at = match (args.at, args.in_) {
        (Some(at), _) => at,
        (None, Some(secs)) if secs > 0 => now + secs,
        (None, _) => anyhow::bail!("--in must be a positive duration (90s, 30m, 2h, 1d)"),
    };
    let o = open(globals)?;
    let s = done(
        o.board
            .schedule(&args.id, Some(at), args.reason.as_deref(), now)?,
    )?;
    print_out(globals.json, &s, || {
        let when = jiff::Timestamp::from_second(at)
            .map(|t| t.to_string())
            .unwrap_or_else(|_| at.to_string());
        let mut out = format!("scheduled {} until {when} (was {})", s.task_id, s.from);
        if let Some(pid) = s.worker_pid {
            out.push_str(&format!("; its worker pid {pid} may still be running"));
        }
        out
    })
}

/// `kanban reassign ID PROFILE [--reclaim [--reason R]]`: `reclaim` is the reclaim's reason
/// (empty: none given) when a reclaim was asked for.
pub(in crate::cli) fn reassign(
    id: &str,
    profile: &str,
    reclaim: Option<&str>,
    globals: &Globals,
) -> CmdResult {
    authorize(id)?;
    let o = open(globals)?;
    let r = match o.board.reassign(
        id,
        profile,
        reclaim.is_some(),
        reclaim.filter(|r| !r.is_empty()),
        now(),
    )? {
        Outcome::Refused(r @ Refusal::WrongStatus { .. }) if reclaim.is_none() => {
            return Err(Refused(format!(
                "{r}; pass --reclaim to take it back from its worker first"
            ))
            .into());
        }
        outcome => done(outcome)?,
    };
    print_out(globals.json, &r, || {
        let mut out = format!(
            "{} reassigned from {} to {}",
            r.task_id,
            line(r.from.as_deref().unwrap_or("nobody")),
            line(r.to.as_deref().unwrap_or("nobody"))
        );
        if let Some(rc) = &r.reclaimed {
            out.push_str(&format!("; reclaimed first, now {}", rc.retry_status));
            if let Some(pid) = rc.worker_pid {
                out.push_str(&format!(" (its worker pid {pid} may still be running)"));
            }
        }
        out
    })
}
