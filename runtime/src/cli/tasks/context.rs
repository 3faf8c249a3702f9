//! `kanban context [ID]`: prints the prompt the next worker of a task would get, built by the
//! worker's own prompt builder ([`crate::worker::prompt_input`] and
//! [`crate::worker::prompt::build`]) from the board as it is now: nothing is duplicated, so what
//! this prints is what a worker spawned now reads on its stdin (its skills first).

use crate::cli::session::{now, open_read, root, task_arg};
use crate::cli::{CmdResult, Exit, Globals};
use crate::gates;
use crate::worker;

/// `kanban context [ID]`.
pub(in crate::cli) fn context(id: Option<&str>, globals: &Globals) -> CmdResult {
    let id = match task_arg(id.map(str::to_owned), "context") {
        Ok(id) => id,
        Err(exit) => return Ok(exit),
    };
    let o = open_read(globals)?;
    let task = o.board.get_task(&id)?;
    // The workspace the next worker gets: the recorded one, else where a scratch workspace is
    // made (a worktree without a path is made at its first run).
    let workspace = match &task.workspace_path {
        Some(path) => Some(std::path::PathBuf::from(path)),
        None if task.workspace_kind == "scratch" || task.workspace_kind.is_empty() => Some(
            crate::home::workspace_dir(&root(globals)?, &o.loc.slug, &task.id),
        ),
        None => None,
    };
    let shown = workspace.as_ref().map_or_else(
        || "(made at its first run)".to_owned(),
        |w| w.display().to_string(),
    );
    let guidance = gates::guidance_for(&task.id, workspace.as_deref());
    // A running task's open run is the current worker's, not a prior attempt.
    let input = worker::prompt_input(&o.board, &id, task.current_run_id, shown, guidance)?;
    // The skills the worker puts before the prompt (an implementer's run: the review lane's
    // `sdlc-review` is not shown).
    let root = root(globals)?;
    let config = crate::config::Config::load(&root)?;
    let profile = task
        .assignee
        .clone()
        .unwrap_or_else(|| config.dispatch.default_profile.clone());
    let steering =
        crate::home::steering::task_steering(&task, &config.skills_dir(&profile, &root), false);
    print!(
        "{}{}",
        steering.prompt_preamble(),
        worker::prompt::build(&input, now())
    );
    Ok(Exit::OK)
}
