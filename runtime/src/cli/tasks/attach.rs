//! `kanban attach ID FILE…`, `kanban attachments ID [--json]`, `kanban attach-rm ID NAME`: the
//! files of a task, kept in the board's attachments folder beside the board
//! ([`crate::home::attachments_dir`]) and listed in the next worker's prompt. The work is
//! [`crate::board::attachments`]; this parses nothing and prints.

use std::path::PathBuf;

use crate::board::attachments::{self, Attachment, guess_content_type, read_capped};
use crate::cli::escape::line;
use crate::cli::session::{authorize, now, open, open_read, print_out, root};
use crate::cli::{CmdResult, Exit, Globals, print_json};
use crate::gates;
use crate::home;

/// The kanban root whose attachments folder board `slug` uses: `--home`, else inside a worker
/// the root its workspaces root names (a worker's commands get no `--home`), else the usual root.
pub(in crate::cli) fn attachments_home(globals: &Globals, slug: &str) -> anyhow::Result<PathBuf> {
    if globals.home.is_none()
        && let Some(found) =
            gates::worker_workspaces_root().and_then(|w| home::root_of_workspaces_root(&w, slug))
    {
        return Ok(found);
    }
    root(globals)
}

/// `kanban attach ID FILE… [--name NAME] [--content-type TYPE] [--author NAME]`: every file is
/// checked (a regular file within the cap) before the first is stored, so a refusal stores none.
pub(in crate::cli) fn attach(
    id: &str,
    files: &[PathBuf],
    name: Option<&str>,
    content_type: Option<&str>,
    author: Option<String>,
    globals: &Globals,
) -> CmdResult {
    authorize(id)?;
    if name.is_some() && files.len() > 1 {
        eprintln!("kanban attach: --name names one file; attach the files one at a time");
        return Ok(Exit(2));
    }
    let mut loaded = Vec::new();
    for file in files {
        let stored = name.map(str::to_owned).unwrap_or_else(|| {
            file.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        // The safe name is checked first: a name that is refused reads no file.
        attachments::safe_attachment_name(&stored)?;
        let data = read_capped(file, &file.display().to_string())?;
        loaded.push((stored, data));
    }
    let o = open(globals)?;
    let dir = home::attachments_dir(&attachments_home(globals, &o.loc.slug)?, &o.loc.slug, id);
    // A worker attaches as itself (its profile, or its task), as it comments.
    let uploaded_by = match gates::default_task_id(None) {
        Some(task) => Some(
            o.board
                .get_task(&task)
                .ok()
                .and_then(|t| t.assignee)
                .unwrap_or(task),
        ),
        None => author,
    };
    let mut stored = Vec::new();
    for (filename, data) in &loaded {
        let ctype = content_type.or_else(|| guess_content_type(filename));
        stored.push(o.board.store_attachment(
            id,
            &dir,
            filename,
            data,
            ctype,
            uploaded_by.as_deref(),
            now(),
        )?);
    }
    print_out(globals.json, &stored, || {
        stored
            .iter()
            .map(|a| {
                format!(
                    "attached {} to {id} (attachment {}, {} bytes)",
                    a.filename, a.id, a.size
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// `kanban attachments ID`: the task's files, oldest first; `--json`: an array of the original's
/// attachment objects.
pub(in crate::cli) fn list(id: &str, globals: &Globals) -> CmdResult {
    let o = open_read(globals)?;
    // An unknown task is an error, not an empty list.
    o.board.get_task(id)?;
    let list = o.board.attachments(id)?;
    if globals.json {
        print_json(&list)?;
        return Ok(Exit::OK);
    }
    if list.is_empty() {
        println!("no attachments on {}", line(id));
        return Ok(Exit::OK);
    }
    println!("attachments on {}:", line(id));
    for a in &list {
        println!("{}", describe(a));
        println!("        {}", line(&a.stored_path));
    }
    Ok(Exit::OK)
}

fn describe(a: &Attachment) -> String {
    line(&format!(
        "  [{}] {}  ({} bytes, {}, by {})",
        a.id,
        a.filename,
        a.size,
        a.content_type.as_deref().unwrap_or("-"),
        a.uploaded_by.as_deref().unwrap_or("-")
    ))
    .into_owned()
}

/// `kanban attach-rm ID NAME`: removes the attachment stored as NAME (or with id NAME).
pub(in crate::cli) fn remove(id: &str, name: &str, globals: &Globals) -> CmdResult {
    authorize(id)?;
    let o = open(globals)?;
    let dir = home::attachments_dir(&attachments_home(globals, &o.loc.slug)?, &o.loc.slug, id);
    let removed = o.board.remove_attachment(id, &dir, name, now())?;
    print_out(globals.json, &removed, || {
        format!(
            "removed attachment {} ({}) from {id}",
            removed.id, removed.filename
        )
    })
}
