//! `kanban repair`: the narrow repair of the selected SQLite board file
//! ([`crate::board::engine::sqlite::repair`]: a quarantine backup first, then `REINDEX` when only
//! indexes are damaged; a healthy board is left alone). Exit 0 when healthy or repaired, 1 when
//! the damage is beyond an index (the backup is kept), 3 for a refusal: a dispatcher ticking the
//! board, or a PostgreSQL board, whose storage is the server's to check and repair.

use serde::Serialize;

use crate::board::engine::sqlite::repair::{RepairReport, RepairStatus, repair_file};
use crate::cli::session::{fence, print_out, root};
use crate::cli::{CmdResult, Exit, Globals, Refused};
use crate::home::lock::{TickLock, lock_path};

fn describe(r: &RepairReport) -> String {
    let path = r.db_path.display();
    let backup = r
        .backup
        .as_deref()
        .map(|b| format!("; the file as found is kept at {}", b.display()))
        .unwrap_or_default();
    match r.status {
        RepairStatus::Healthy => {
            format!("{path} is healthy (integrity_check: ok); nothing was changed")
        }
        RepairStatus::Repaired => format!(
            "repaired {path}: rebuilt {} (integrity_check: ok){backup}",
            r.reindexed.join(", ")
        ),
        RepairStatus::Corrupt => format!(
            "{path} is damaged beyond its indexes, which `kanban repair` cannot mend: {}{}{backup}",
            r.messages
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
            if r.post_repair_messages.is_empty() {
                String::new()
            } else {
                format!(" (after REINDEX: {})", r.post_repair_messages.join("; "))
            }
        ),
    }
}

/// `kanban repair`.
pub(in crate::cli) fn repair(globals: &Globals) -> CmdResult {
    fence()?;
    let root = root(globals)?;
    let loc = crate::home::resolve(&root, globals.board.as_deref())?;
    if let Some(target) = loc.postgres() {
        return Err(Refused(format!(
            "board `{}` lives in PostgreSQL ({}): its storage is the server's to check and \
             repair (`amcheck`, then `REINDEX SCHEMA` as the database owner); `kanban repair` \
             repairs SQLite board files only; nothing was changed",
            loc.slug,
            target.redacted()
        ))
        .into());
    }
    let Some(_lock) = TickLock::try_acquire(&loc.db_path)? else {
        return Err(Refused(format!(
            "a dispatcher is ticking board `{}` (it holds {}); stop it, then repair; nothing was changed",
            loc.slug,
            lock_path(&loc.db_path).display()
        ))
        .into());
    };
    let report = repair_file(&loc.db_path)?;
    #[derive(Serialize)]
    struct Out<'a> {
        slug: &'a str,
        #[serde(flatten)]
        report: &'a RepairReport,
    }
    let out = Out {
        slug: &loc.slug,
        report: &report,
    };
    if report.status == RepairStatus::Corrupt {
        if globals.json {
            crate::cli::print_json(&out)?;
        } else {
            eprintln!("kanban: {}", describe(&report));
        }
        return Ok(Exit(1));
    }
    print_out(globals.json, &out, || describe(&report))
}
