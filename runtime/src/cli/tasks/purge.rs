//! `kanban delete ID…` and `kanban archive --rm ID…`: hard deletion of tasks with their runs,
//! events, comments, links and attachments ([`crate::cleanup::purge`]). Each id on its own;
//! a refusal (a running task, a workspace still on disk) is exit 3 and changes nothing of that
//! task (with `--rm`, the archive and its cleanup stay done, as the original's).

use crate::cleanup::{self, Purged, Scope};
use crate::cli::session::{authorize, done, each, now, open, print_out, root};
use crate::cli::{CmdResult, Globals};

fn purge_each(ids: &[String], archive_first: bool, globals: &Globals) -> CmdResult {
    each(ids, globals, |id| {
        authorize(id)?;
        let o = open(globals)?;
        let root = root(globals)?;
        let scope = Scope {
            board: &o.board,
            root: &root,
            slug: &o.loc.slug,
            now: now(),
            dry_run: false,
        };
        let p = done(cleanup::purge(&scope, id, archive_first)?)?;
        print_out(globals.json, &p, || describe(&p))
    })
}

fn describe(p: &Purged) -> String {
    let d = &p.deleted;
    let mut text = format!(
        "{} {} (was {}): {} runs, {} events, {} comments, {} links, {} attachment files removed",
        if p.archived {
            "archived and deleted"
        } else {
            "deleted"
        },
        d.task_id,
        d.prev_status,
        d.runs,
        d.events,
        d.comments,
        d.links,
        p.files_removed.len()
    );
    if !d.promoted.is_empty() {
        text.push_str(&format!("; promoted {}", d.promoted.join(", ")));
    }
    text
}

/// `kanban delete ID…`.
pub(in crate::cli) fn delete(ids: &[String], globals: &Globals) -> CmdResult {
    purge_each(ids, false, globals)
}

/// `kanban archive --rm ID…`.
pub(in crate::cli) fn archive_rm(ids: &[String], globals: &Globals) -> CmdResult {
    purge_each(ids, true, globals)
}
