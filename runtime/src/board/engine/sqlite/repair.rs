//! `kanban repair` on a SQLite board file (the original's `repair_db`): a narrow, lossless
//! repair, never a rebuild of data.
//!
//! 1. `PRAGMA integrity_check` on the file. A healthy board is left alone: nothing is copied or
//!    written ([`RepairStatus::Healthy`]).
//! 2. Otherwise the file and its `-wal` / `-shm` side files are first copied to a quarantine
//!    backup beside it, `<file>.corrupt.<first 16 hex digits of its SHA-256>.bak` (the same bytes
//!    reuse one backup; at most [`BACKUP_RETENTION`] are kept, the oldest pruned, never the new one).
//! 3. When every message is index-scoped (`wrong # of entries in index I`, `row N missing from
//!    index I`: the tables are intact and an index can be rebuilt from them), each named index is
//!    rebuilt with `REINDEX` (all of them when a name does not resolve), then the check runs again:
//!    [`RepairStatus::Repaired`] when it passes.
//! 4. Anything else (damaged table pages, a malformed file, a check still failing) is
//!    [`RepairStatus::Corrupt`]: the file is as it was (or as the `REINDEX` left it) and the backup
//!    is kept for recovery.
//!
//! The caller holds the board's dispatch lock, so no dispatcher ticks the board meanwhile.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use sha2::Digest;

/// The most quarantine backups kept beside a board file (the original's).
pub const BACKUP_RETENTION: usize = 10;

/// What [`repair_file`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairStatus {
    /// `integrity_check` passed; nothing was done.
    Healthy,
    /// Index-only damage, rebuilt; the check passes now.
    Repaired,
    /// Damage `REINDEX` cannot mend; the backup is kept.
    Corrupt,
}

/// The report of [`repair_file`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    pub status: RepairStatus,
    pub db_path: PathBuf,
    /// What `integrity_check` said first (`["ok"]` when healthy).
    pub messages: Vec<String>,
    /// What it said after the `REINDEX` (empty when none ran).
    pub post_repair_messages: Vec<String>,
    /// The quarantine copy made before anything was changed.
    pub backup: Option<PathBuf>,
    /// The indexes rebuilt.
    pub reindexed: Vec<String>,
}

/// Why [`repair_file`] could not run.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error("there is no board file at {path}; nothing to repair")]
    Missing { path: PathBuf },

    #[error("cannot check {path} (busy or locked: not damage); try again")]
    Busy {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },

    #[error("cannot make the quarantine backup of {path}; nothing was changed")]
    Backup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// `integrity_check`'s messages, or why the file could not be checked at all (`Err(Ok(msg))`
/// for damage, `Err(Err(e))` for a busy file).
fn integrity(path: &Path) -> Result<Vec<String>, Result<String, rusqlite::Error>> {
    let run = || -> rusqlite::Result<Vec<String>> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    };
    match run() {
        Ok(messages) => Ok(messages),
        Err(e) if is_busy(&e) => Err(Err(e)),
        Err(e) => Err(Ok(format!("SQLite cannot read the file: {e}"))),
    }
}

fn healthy(messages: &[String]) -> bool {
    matches!(messages, [only] if only.trim().eq_ignore_ascii_case("ok"))
}

/// The indexes the messages name when every message is index-scoped; `None` otherwise.
fn repairable_indexes(messages: &[String]) -> Option<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for message in messages.iter().map(|m| m.trim()).filter(|m| !m.is_empty()) {
        let name = if let Some(rest) = message.strip_prefix("wrong # of entries in index ") {
            rest
        } else if let Some((head, rest)) = message.split_once(" missing from index ") {
            let number = head.strip_prefix("row ")?;
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            rest
        } else {
            return None;
        };
        let name = name.trim();
        if name.is_empty() {
            return None;
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    (!names.is_empty()).then_some(names)
}

/// Repairs the board file at `path` if it can (see the module docs).
pub fn repair_file(path: &Path) -> Result<RepairReport, RepairError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if !path.is_file() || size == 0 {
        return Err(RepairError::Missing {
            path: path.to_path_buf(),
        });
    }
    let busy = |source| RepairError::Busy {
        path: path.to_path_buf(),
        source,
    };
    let messages = match integrity(path) {
        Ok(messages) => messages,
        Err(Err(e)) => return Err(busy(e)),
        Err(Ok(unreadable)) => vec![unreadable],
    };
    let mut report = RepairReport {
        status: RepairStatus::Healthy,
        db_path: path.to_path_buf(),
        messages,
        post_repair_messages: Vec::new(),
        backup: None,
        reindexed: Vec::new(),
    };
    if healthy(&report.messages) {
        return Ok(report);
    }
    // Quarantine first: the bytes as found are kept whatever happens next.
    report.backup = Some(quarantine(path).map_err(|source| RepairError::Backup {
        path: path.to_path_buf(),
        source,
    })?);
    report.status = RepairStatus::Corrupt;
    let Some(indexes) = repairable_indexes(&report.messages) else {
        return Ok(report);
    };
    let reindexed = (|| -> rusqlite::Result<()> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        let each = indexes.iter().try_for_each(|name| {
            conn.execute_batch(&format!("REINDEX \"{}\"", name.replace('"', "\"\"")))
        });
        if each.is_err() {
            // A name that does not resolve (an automatic index): rebuild every index.
            conn.execute_batch("REINDEX")?;
        }
        Ok(())
    })();
    if let Err(e) = reindexed {
        report.post_repair_messages = vec![format!("REINDEX failed: {e}")];
        return Ok(report);
    }
    report.reindexed = indexes;
    report.post_repair_messages = match integrity(path) {
        Ok(messages) => messages,
        Err(Err(e)) => return Err(busy(e)),
        Err(Ok(unreadable)) => vec![unreadable],
    };
    if healthy(&report.post_repair_messages) {
        report.status = RepairStatus::Repaired;
    }
    Ok(report)
}

/// Copies `path` (and its side files) to its content-addressed quarantine backup; returns it.
fn quarantine(path: &Path) -> std::io::Result<PathBuf> {
    let mut hasher = sha2::Sha256::new();
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut file, &mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let parent = path.parent().unwrap_or(Path::new("."));
    let backup = parent.join(format!("{name}.corrupt.{hex}.bak"));
    if !backup.exists() {
        // Written beside it and renamed: a backup is whole or absent.
        let temp = parent.join(format!(".{name}.corrupt.{hex}.partial"));
        std::fs::copy(path, &temp)?;
        std::fs::rename(&temp, &backup)?;
        prune(parent, &name, &backup);
    }
    for suffix in ["-wal", "-shm"] {
        let side = parent.join(format!("{name}{suffix}"));
        let side_backup = parent.join(format!("{name}.corrupt.{hex}.bak{suffix}"));
        if side.is_file() && !side_backup.exists() {
            std::fs::copy(&side, &side_backup)?;
        }
    }
    Ok(backup)
}

/// Keeps the [`BACKUP_RETENTION`] newest backups of `name` (never `keep`); best effort.
fn prune(parent: &Path, name: &str, keep: &Path) {
    let prefix = format!("{name}.corrupt.");
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let mut old: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != keep)
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".bak"))
        })
        .map(|p| {
            (
                std::fs::metadata(&p)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH),
                p,
            )
        })
        .collect();
    old.sort_by_key(|b| std::cmp::Reverse(b.0));
    for (_, stale) in old.into_iter().skip(BACKUP_RETENTION - 1) {
        for suffix in ["", "-wal", "-shm"] {
            let mut victim = stale.as_os_str().to_owned();
            victim.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(victim));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_index_scoped_damage_is_repairable() {
        let m = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            repairable_indexes(&m(&[
                "row 3 missing from index idx_a",
                "wrong # of entries in index idx_a",
                "row 4 missing from index idx_b",
            ])),
            Some(vec!["idx_a".to_owned(), "idx_b".to_owned()])
        );
        assert_eq!(repairable_indexes(&m(&["ok"])), None);
        assert_eq!(repairable_indexes(&m(&[])), None);
        assert_eq!(
            repairable_indexes(&m(&[
                "row 3 missing from index idx_a",
                "Page 7 is never used"
            ])),
            None
        );
        assert_eq!(
            repairable_indexes(&m(&["row x missing from index idx_a"])),
            None
        );
        assert!(healthy(&m(&["ok"])));
        assert!(!healthy(&m(&["ok", "ok"])));
    }

    #[test]
    fn backups_are_content_addressed_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kanban.db");
        std::fs::write(&db, "one").unwrap();
        let first = quarantine(&db).unwrap();
        assert_eq!(quarantine(&db).unwrap(), first);
        for i in 0..12 {
            std::fs::write(&db, format!("v{i}")).unwrap();
            quarantine(&db).unwrap();
        }
        let kept = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".bak"))
            .count();
        assert_eq!(kept, BACKUP_RETENTION);
    }
}
