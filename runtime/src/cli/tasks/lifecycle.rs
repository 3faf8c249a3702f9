//! `kanban claim|heartbeat|complete|block|comment`: the agent-facing lifecycle commands. Inside a
//! worker they default to its task and pass its owned run id, so a superseded worker cannot close
//! its successor's run (see [`crate::cli::session::lifecycle`]).

use std::path::PathBuf;

use serde::Serialize;

use crate::acceptance::{self, Evidence, Gh};
use crate::board::acceptance::{Accepted, Preparation};
use crate::board::attachments::{self, Artifacts};

use crate::board::{self, BlockKind, ClaimOutcome, ClaimSpec, Completion, Fence};
use crate::cli::escape::line;
use crate::cli::session::{
    JsonObject, Opened, authorize, done, lifecycle, now, open, print_out, refused, root,
};
use crate::cli::{CmdResult, Exit, Globals, print_json};
use crate::config::Config;
use crate::gates;

/// `kanban claim ID`: claims the task from the lane its status puts it in (a review task for its
/// reviewer, [`board::lane`]).
pub(in crate::cli) fn claim(
    id: &str,
    ttl: Option<i64>,
    claimer: Option<String>,
    globals: &Globals,
) -> CmdResult {
    authorize(id)?;
    // The configuration and the TTL are checked before the board is opened.
    let config = Config::load(&root(globals)?)?;
    let ttl_seconds = match ttl {
        Some(ttl) => board::check_seconds("--ttl", ttl)?,
        None => crate::dispatch::settings::claim_ttl_seconds(&config)?,
    };
    let o = open(globals)?;
    let lock = claimer
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(board::default_claim_lock);
    let spec = ClaimSpec {
        lock,
        ttl_seconds,
        origin: board::ClaimOrigin::External,
    };
    match o.board.claim_in_its_lane(id, &spec, now())? {
        ClaimOutcome::Claimed(c) => {
            if globals.json {
                print_json(&c)?;
            } else {
                println!(
                    "claimed {} run {} as {} until {}",
                    line(&c.task_id),
                    c.run_id,
                    line(&c.claim_lock),
                    crate::cli::explain::when(c.claim_expires, now())
                );
            }
            Ok(Exit::OK)
        }
        ClaimOutcome::Lost(r) => Err(refused(r)),
    }
}

/// `kanban heartbeat [ID]`.
pub(in crate::cli) fn heartbeat(
    id: Option<&str>,
    note: Option<&str>,
    ttl: Option<i64>,
    globals: &Globals,
) -> CmdResult {
    let target = match lifecycle(id)? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let config = Config::load(&root(globals)?)?;
    let ttl_seconds = match ttl {
        Some(ttl) => board::check_seconds("--ttl", ttl)?,
        None => crate::dispatch::settings::claim_ttl_seconds(&config)?,
    };
    let o = open(globals)?;
    let fence = Fence {
        claim_lock: target.claim_lock,
        run_id: target.expected_run_id,
    };
    let hb = done(
        o.board
            .heartbeat(&target.task_id, &fence, note, ttl_seconds, now())?,
    )?;
    print_out(globals.json, &hb, || {
        format!(
            "heartbeat {}: claim until {}",
            hb.task_id,
            crate::cli::explain::when(hb.claim_expires, now())
        )
    })
}

/// What `kanban complete` hands over: its summary, metadata, result and claimed cards.
#[derive(Debug, Default)]
pub(in crate::cli) struct Handoff {
    pub summary: Option<String>,
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    pub result: Option<String>,
    pub created_cards: Vec<String>,
    pub evidence: Vec<Evidence>,
}

/// `kanban complete [ID]`: an empty completion is refused unless `allow_empty_completion` (the
/// task's profile's, else `[dispatch]`'s) accepts it.
pub(in crate::cli) fn complete(
    id: Option<&str>,
    handoff: Handoff,
    force: bool,
    artifacts: &[std::path::PathBuf],
    globals: &Globals,
) -> CmdResult {
    let target = match lifecycle(id)? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let config = Config::load(&root(globals)?)?;
    let o = open(globals)?;
    let acceptance = accept(
        &o,
        &config,
        globals,
        &target.task_id,
        target.expected_run_id,
        handoff.metadata.as_ref(),
    )?;
    let staged = stage_artifacts(
        &o,
        globals,
        &target.task_id,
        artifacts,
        [&handoff.summary, &handoff.result],
    )?;
    let assignee = o.board.get_task(&target.task_id)?.assignee;
    let completion = Completion {
        expected_run_id: target.expected_run_id,
        summary: handoff.summary,
        result: handoff.result,
        metadata: handoff.metadata,
        created_cards: handoff.created_cards,
        require_evidence: config.completion_requires_evidence(assignee.as_deref()),
        force,
        evidence: handoff.evidence,
        acceptance,
    };
    let completed = o
        .board
        .complete(&target.task_id, &completion, now())
        .map_err(anyhow::Error::from)
        .and_then(done);
    let c = match completed {
        Ok(c) => c,
        Err(e) => {
            staged.discard();
            return Err(e);
        }
    };
    staged.record(&o.board, &c.task_id, now())?;
    crate::cli::tasks::workspace::after_finish(&o, globals, &c.task_id);
    print_out(globals.json, &c, || {
        let mut line = format!("completed {}", c.task_id);
        if !c.promoted.is_empty() {
            line.push_str(&format!("; now ready: {}", c.promoted.join(", ")));
        }
        line
    })
}

/// The GitHub acceptance of completing `id` when its contract names a repository or a pull
/// request, collected before the completion's transaction with the `gh` login of the task's
/// profile (its assignee, else `[dispatch] default_profile`): its `gh_config_dir`, never the
/// caller's own login.
fn accept(
    o: &Opened,
    config: &Config,
    globals: &Globals,
    id: &str,
    run_id: Option<i64>,
    metadata: Option<&JsonObject>,
) -> anyhow::Result<Option<Accepted>> {
    let published = metadata
        .and_then(|m| m.get("published_pr"))
        .and_then(|v| v.as_str());
    let request = match o.board.prepare_acceptance(id, run_id, published)? {
        Preparation::NotNeeded => return Ok(None),
        Preparation::Refused(r) => return Err(refused(r)),
        Preparation::Collect(request) => request,
    };
    let profile = request
        .assignee
        .clone()
        .unwrap_or_else(|| config.dispatch.default_profile.clone());
    let gh = Gh::profile(&profile, config.gh_config_dir(&profile, &root(globals)?));
    let receipt = acceptance::collect(&request.contract, request.published_pr.as_deref(), &gh);
    Ok(Some(Accepted {
        snapshot: request.snapshot,
        receipt,
    }))
}

/// The completion's deliverables, staged before it (see [`Artifacts::stage`]): `--artifact`
/// paths, and the files of a scratch workspace that the summary or result names by absolute path.
fn stage_artifacts(
    o: &Opened,
    globals: &Globals,
    id: &str,
    paths: &[PathBuf],
    texts: [&Option<String>; 2],
) -> anyhow::Result<Artifacts> {
    let task = o.board.get_task(id)?;
    // Inside a worker (no `--home`) the root its workspaces root names, as `attach` does.
    let root = match crate::gates::worker_workspaces_root() {
        Some(w) if globals.home.is_none() => crate::home::root_of_workspaces_root(&w, &o.loc.slug)
            .map_or_else(|| root(globals), Ok)?,
        _ => root(globals)?,
    };
    let workspace = match task.workspace_path.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None if task.workspace_kind == "scratch" => {
            Some(crate::home::find_workspace(&root, &o.loc.slug, id))
        }
        None => None,
    };
    let mut paths = paths.to_vec();
    if let Some(ws) = workspace
        .as_deref()
        .filter(|_| task.workspace_kind == "scratch")
    {
        for text in texts.into_iter().flatten() {
            paths.extend(attachments::prose_artifacts(ws, text));
        }
    }
    if paths.is_empty() {
        return Ok(Artifacts::default());
    }
    let dir = crate::home::attachments_dir(&root, &o.loc.slug, id);
    Ok(Artifacts::stage(&task, workspace.as_deref(), &dir, &paths)?)
}

/// `kanban block [ID] --reason TEXT [--kind KIND]`.
pub(in crate::cli) fn block(
    id: Option<&str>,
    reason: &str,
    kind: Option<BlockKind>,
    globals: &Globals,
) -> CmdResult {
    let target = match lifecycle(id)? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let o = open(globals)?;
    let b = done(
        o.board
            .block(&target.task_id, kind, reason, target.expected_run_id, now())?,
    )?;
    print_out(globals.json, &b, || {
        let mut line = format!("{} is now {}", b.task_id, b.status);
        match b.kind {
            // The board changed the kind (a dependency block with no open parent
            // waits on a person): say so, as the original does.
            Some(recorded) if kind.is_some_and(|asked| asked != recorded) => {
                let asked = kind.map(|k| k.to_string()).unwrap_or_default();
                line.push_str(&format!(" (recorded as {recorded}, not {asked})"));
            }
            Some(recorded) => line.push_str(&format!(" ({recorded})")),
            None => {}
        }
        line
    })
}

/// `kanban comment ID --body TEXT`: a worker comments as itself (its profile, or its task), never
/// under a name it chose.
pub(in crate::cli) fn comment(
    id: &str,
    body: &str,
    author: Option<String>,
    globals: &Globals,
) -> CmdResult {
    let id = match lifecycle(Some(id))? {
        Ok(target) => target.task_id,
        Err(exit) => return Ok(exit),
    };
    let o = open(globals)?;
    let author = match gates::default_task_id(None) {
        Some(task) => o
            .board
            .get_task(&task)
            .ok()
            .and_then(|t| t.assignee)
            .unwrap_or(task),
        None => author.unwrap_or_else(|| "operator".to_owned()),
    };
    let comment_id = o.board.comment(&id, &author, body, now())?;
    #[derive(Serialize)]
    struct Commented<'a> {
        id: i64,
        task_id: &'a str,
        author: &'a str,
    }
    let c = Commented {
        id: comment_id,
        task_id: &id,
        author: &author,
    };
    print_out(globals.json, &c, || format!("comment {comment_id} on {id}"))
}
