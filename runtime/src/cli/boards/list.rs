//! `kanban boards list`: every board of the home with its store, display name, task counts
//! (by status, total and open) and whether it is archived, then the board folders the original
//! archived (`crate::home::overview`). A board whose counts cannot be read (a PostgreSQL server
//! that does not answer, a damaged file) is still listed, with the reason instead of counts.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cli::escape::line;
use crate::cli::{CmdResult, Exit, Globals, print_json};
use crate::home as paths;
use crate::home::overview::{self, TaskCounts};

#[derive(Serialize)]
struct Entry {
    slug: String,
    /// The display name (`boards rename`; derived from the slug when unset).
    name: String,
    /// `sqlite` or `postgres`.
    store: &'static str,
    /// The SQLite file (null for a PostgreSQL board).
    db_path: Option<PathBuf>,
    /// The PostgreSQL URL without its password (null for a SQLite board).
    url: Option<String>,
    /// The PostgreSQL board's `sslmode` (`none` over a Unix socket; null for SQLite).
    tls: Option<String>,
    exists: bool,
    current: bool,
    /// The repository worktree tasks are worktrees of (null when unset).
    default_workdir: Option<PathBuf>,
    /// Marked archived (`board.json`), or a folder the original's `boards rm` archived.
    archived: bool,
    /// The archived folder (null for a live board).
    archived_path: Option<PathBuf>,
    /// When the folder was archived (Unix seconds; null for a live board).
    archived_at: Option<i64>,
    /// Null when the board does not exist yet or its counts could not be read.
    counts: Option<TaskCounts>,
    /// Why the counts could not be read.
    counts_error: Option<String>,
}

fn counted<E: std::error::Error + 'static>(
    result: Result<Option<TaskCounts>, E>,
) -> (Option<TaskCounts>, Option<String>) {
    match result {
        Ok(counts) => (counts, None),
        Err(e) => (None, Some(crate::error_chain(&e))),
    }
}

fn entries(root: &Path, current: &str) -> anyhow::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for b in paths::list_boards(root)? {
        let meta = paths::meta::read(root, &b.slug)?;
        let exists = b.exists();
        let (counts, counts_error) = counted(exists.then(|| overview::counts(&b)).transpose());
        out.push(Entry {
            name: meta
                .name
                .unwrap_or_else(|| paths::meta::default_name(&b.slug)),
            default_workdir: meta.default_workdir,
            archived: meta.archived,
            archived_path: None,
            archived_at: None,
            exists,
            current: b.slug == current,
            store: b.store.kind(),
            url: b.postgres().map(crate::db::target::PgTarget::redacted),
            tls: b.postgres().map(crate::db::target::PgTarget::tls_mode),
            db_path: b.postgres().is_none().then(|| b.db_path.clone()),
            slug: b.slug,
            counts,
            counts_error,
        });
    }
    for folder in overview::archived_folders(root)? {
        let (counts, counts_error) = counted(folder.counts());
        out.push(Entry {
            name: paths::meta::default_name(&folder.slug),
            store: "sqlite",
            db_path: Some(folder.db_path()),
            url: None,
            tls: None,
            exists: folder.db_path().is_file(),
            current: false,
            default_workdir: None,
            archived: true,
            archived_at: folder.archived_at,
            archived_path: Some(folder.folder),
            slug: folder.slug,
            counts,
            counts_error,
        });
    }
    Ok(out)
}

fn human(e: &Entry) -> String {
    let counts = match (&e.counts, &e.counts_error) {
        (Some(c), _) => format!(" {} tasks, {} open", c.total, c.open),
        (None, Some(err)) => format!(" (counts unavailable: {err})"),
        (None, None) => String::new(),
    };
    let archived = match &e.archived_path {
        Some(path) => format!(" (archived at {})", path.display()),
        None if e.archived => " (archived)".to_owned(),
        None => String::new(),
    };
    // Today's columns first (current, slug, store, not created, workdir), then what was added.
    format!(
        "{} {}{}{}{} \"{}\"{counts}{archived}",
        if e.current { "*" } else { " " },
        e.slug,
        e.url
            .as_deref()
            .zip(e.tls.as_deref())
            .map(|(u, tls)| format!(" (postgres {u} tls={tls})"))
            .unwrap_or_default(),
        if e.exists || e.archived_path.is_some() {
            ""
        } else {
            " (not created yet)"
        },
        e.default_workdir
            .as_deref()
            .map(|d| format!(" workdir={}", line(&d.display().to_string())))
            .unwrap_or_default(),
        line(&e.name),
    )
}

/// `kanban boards list`.
pub(super) fn list(root: &Path, globals: &Globals) -> CmdResult {
    let current = paths::resolve(root, globals.board.as_deref())
        .map(|l| l.slug)
        .unwrap_or_else(|_| crate::home::DEFAULT_BOARD.to_owned());
    let entries = entries(root, &current)?;
    if globals.json {
        print_json(&entries)?;
    } else {
        for e in &entries {
            println!("{}", human(e));
        }
    }
    Ok(Exit::OK)
}
