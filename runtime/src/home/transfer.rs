//! `kanban boards export SLUG FILE.tar.gz [--with-logs]` and `kanban boards import FILE [--as
//! SLUG] [--url URL]`: a board, of either store, as one portable archive, and an archive turned
//! into a new board of either store. The database half is the engines'
//! (`crate::board::engine::transfer`); this module owns the archive and the board's files.
//!
//! The archive is a gzip-compressed tar of regular files only:
//! * `manifest.json` — [`Manifest`]: the format name [`FORMAT`] and its version [`VERSION`], the
//!   board's slug and display name, the store it came from, the schema version, the rows per
//!   table, and every other file of the archive with its size;
//! * `board.sqlite` — the whole board (tasks, runs, events, comments, links, attachment rows) as
//!   a SQLite database of this build's schema, whatever store it came from;
//! * `attachments/<task id>/<file>` — each attachment's file;
//! * `logs/<task id>.log` — the worker logs, only with `--with-logs`.
//!
//! Import reads the whole archive into a staging folder under `<root>/kanban/` first and checks
//! it before anything becomes visible: every entry a regular file at one of the places above
//! (an absolute path, `..`, a link or any other entry is refused as path traversal), listed in
//! the manifest with its size, the gzip stream whole to its checksum (a truncated archive is
//! refused), a known format version, the snapshot's `integrity_check`. Then the slug must be
//! new, the attachments are pointed at their new folder, the files are moved in and the board
//! appears last (a SQLite file linked into place only while nothing is there; a PostgreSQL
//! database copied into only while empty, as `boards migrate` does). Any refusal or failure
//! leaves the home as it was.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{HomeError, meta, validate_new_slug};
use crate::board::engine::transfer::{self as engine, TransferError};
use crate::board::{Board, OpenOptions};
use crate::db::target::{BoardLocation, PgTarget, Store};
use crate::home as paths;

/// The `format` of a board archive's manifest.
pub const FORMAT: &str = "kanban-board-export";
/// The manifest version this build writes and the only one it reads.
pub const VERSION: u64 = 1;
/// The snapshot's name in the archive.
const SNAPSHOT: &str = "board.sqlite";
const MANIFEST: &str = "manifest.json";
/// The largest manifest accepted.
const MAX_MANIFEST_BYTES: u64 = 64 * 1024 * 1024;
/// The largest log accepted.
const MAX_LOG_BYTES: u64 = 1024 * 1024 * 1024;

/// One file of the archive besides the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedFile {
    pub path: String,
    pub size: u64,
    /// The attachment row the file belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment_id: Option<i64>,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    pub version: u64,
    pub slug: String,
    /// The display name the board had (null when unset).
    pub name: Option<String>,
    /// `sqlite` or `postgres`: where the board lived.
    pub store: String,
    pub schema_version: i64,
    pub exported_at: i64,
    pub kanban_version: String,
    pub with_logs: bool,
    pub rows: BTreeMap<String, u64>,
    pub files: Vec<ArchivedFile>,
}

/// What [`export`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub slug: String,
    pub file: PathBuf,
    pub rows: BTreeMap<String, u64>,
    pub attachments: usize,
    /// Attachment rows whose file was not on disk (the row is exported, the file is not).
    pub missing_attachments: Vec<String>,
    pub logs: usize,
    pub bytes: u64,
}

/// What [`import`] made.
#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    pub slug: String,
    /// `sqlite` or `postgres`.
    pub store: &'static str,
    /// The board's SQLite file or its PostgreSQL URL (without a password).
    pub location: String,
    pub from_slug: String,
    pub rows: BTreeMap<String, u64>,
    pub attachments: usize,
    pub logs: usize,
}

/// Why an archive was not written or not imported (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Home(#[from] HomeError),

    #[error(transparent)]
    Transfer(#[from] TransferError),

    #[error("{} already exists; choose another file name or remove it (nothing was written)", path.display())]
    OutputExists { path: PathBuf },

    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} is not a readable board archive (corrupt or truncated gzip/tar data); nothing was imported", file.display())]
    Corrupt {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} holds the entry `{entry}`, which is not a file of a board archive ({why}); refused as unsafe, nothing was imported", file.display())]
    UnsafeEntry {
        file: PathBuf,
        entry: String,
        why: &'static str,
    },

    #[error("{} is not a valid board archive: {reason}; nothing was imported", file.display())]
    BadArchive { file: PathBuf, reason: String },

    #[error("{} is a board archive of format `{format}` version {version}; this build reads `{FORMAT}` version {VERSION} only (upgrade kanban); nothing was imported", file.display())]
    UnknownVersion {
        file: PathBuf,
        format: String,
        version: String,
    },

    #[error(
        "an archive cannot be imported as the default board; import it under a new slug (--as SLUG)"
    )]
    DefaultTarget,

    #[error("{} already exists (board `{slug}`'s files, or left by an earlier board of that slug); import under another slug (--as) or move it away; nothing was imported", path.display())]
    Leftover { slug: String, path: PathBuf },
}

impl ArchiveError {
    /// True for a refusal of the target's state (exit 3): a PostgreSQL database that is not
    /// empty. Everything else is an error (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(self, ArchiveError::Transfer(TransferError::Migrate(e)) if e.is_refusal())
    }
}

fn io<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> ArchiveError + 'a {
    move |source| ArchiveError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// A folder removed with everything in it when dropped.
struct Staging(PathBuf);

impl Staging {
    fn new(parent: &Path, prefix: &str) -> Result<Staging, ArchiveError> {
        let hex = crate::proc::random::hex_digits(12).map_err(io("name a folder in", parent))?;
        let dir = parent.join(format!(".{prefix}-{hex}"));
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// True when `part` may be one component of a path inside the archive or the home.
fn safe_component(part: &str) -> bool {
    !part.is_empty()
        && part != "."
        && part != ".."
        && part.len() <= 255
        && !part.contains(['/', '\\', '\0'])
}

/// Writes board `slug` (at `location`) of the home at `root` to the new file `file`.
pub fn export(
    root: &Path,
    location: &BoardLocation,
    file: &Path,
    with_logs: bool,
    now: i64,
) -> Result<Exported, ArchiveError> {
    let slug = location.slug.as_str();
    if std::fs::symlink_metadata(file).is_ok() {
        return Err(ArchiveError::OutputExists {
            path: file.to_path_buf(),
        });
    }
    let parent = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = Staging::new(parent, "kanban-export")?;
    let snapshot = staging.0.join(SNAPSHOT);
    let rows: BTreeMap<String, u64> = engine::snapshot(location, &snapshot)?.into_iter().collect();
    let mut files = vec![(
        snapshot.clone(),
        ArchivedFile {
            path: SNAPSHOT.to_owned(),
            size: size_of(&snapshot)?,
            attachment_id: None,
        },
    )];
    let mut missing = Vec::new();
    for row in engine::attachment_rows(&snapshot)? {
        let source = PathBuf::from(&row.stored_path);
        let name = source.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !source.is_file() || !safe_component(name) || !safe_component(&row.task_id) {
            missing.push(row.stored_path.clone());
            continue;
        }
        files.push((
            source.clone(),
            ArchivedFile {
                path: format!("attachments/{}/{name}", row.task_id),
                size: size_of(&source)?,
                attachment_id: Some(row.id),
            },
        ));
    }
    let attachments = files.len() - 1;
    if with_logs {
        for task in engine::task_ids(&snapshot)? {
            let log = paths::find_log(root, slug, &task);
            if log.is_file() && safe_component(&task) {
                files.push((
                    log.clone(),
                    ArchivedFile {
                        path: format!("logs/{task}.log"),
                        size: size_of(&log)?,
                        attachment_id: None,
                    },
                ));
            }
        }
    }
    let logs = files.len() - 1 - attachments;
    let manifest = Manifest {
        format: FORMAT.to_owned(),
        version: VERSION,
        slug: slug.to_owned(),
        name: meta::read(root, slug)?.name,
        store: location.store.kind().to_owned(),
        schema_version: crate::board::engine::sqlite::schema::LATEST,
        exported_at: now,
        kanban_version: env!("CARGO_PKG_VERSION").to_owned(),
        with_logs,
        rows: rows.clone(),
        files: files.iter().map(|(_, f)| f.clone()).collect(),
    };
    let partial = staging.0.join("archive.tar.gz");
    write_archive(&partial, &manifest, &files, now)?;
    // The archive appears whole or not at all, and never over a file made meanwhile.
    std::fs::hard_link(&partial, file).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            ArchiveError::OutputExists {
                path: file.to_path_buf(),
            }
        } else {
            io("write", file)(e)
        }
    })?;
    Ok(Exported {
        slug: slug.to_owned(),
        file: file.to_path_buf(),
        rows,
        attachments,
        missing_attachments: missing,
        logs,
        bytes: size_of(file)?,
    })
}

fn size_of(path: &Path) -> Result<u64, ArchiveError> {
    Ok(std::fs::metadata(path).map_err(io("read", path))?.len())
}

fn write_archive(
    out: &Path,
    manifest: &Manifest,
    files: &[(PathBuf, ArchivedFile)],
    now: i64,
) -> Result<(), ArchiveError> {
    let file = std::fs::File::create(out).map_err(io("create", out))?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let header = |size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_mtime(u64::try_from(now).unwrap_or(0));
        h.set_entry_type(tar::EntryType::Regular);
        h
    };
    let text = serde_json::to_vec_pretty(manifest).map_err(|e| io("encode", out)(e.into()))?;
    tar.append_data(&mut header(text.len() as u64), MANIFEST, text.as_slice())
        .map_err(io("write", out))?;
    for (source, entry) in files {
        let reader = std::fs::File::open(source).map_err(io("read", source))?;
        // The size read now: a file that grew since (a log) is archived as it was then.
        tar.append_data(
            &mut header(entry.size),
            &entry.path,
            reader.take(entry.size),
        )
        .map_err(io("write", out))?;
    }
    let gz = tar.into_inner().map_err(io("write", out))?;
    let file = gz.finish().map_err(io("write", out))?;
    file.sync_all().map_err(io("write", out))
}

/// Where an entry of the archive goes under the staging folder, or why it may not.
fn entry_place(entry: &str) -> Result<PathBuf, &'static str> {
    if entry.starts_with('/') {
        return Err("an absolute path");
    }
    let parts: Vec<&str> = entry.split('/').collect();
    if parts.contains(&"..") {
        return Err("a path with `..`");
    }
    if !parts.iter().all(|p| safe_component(p)) {
        return Err("an empty or unsafe path component");
    }
    match parts.as_slice() {
        [MANIFEST] | [SNAPSHOT] => Ok(PathBuf::from(entry)),
        ["attachments", task, name] => Ok(Path::new("attachments").join(task).join(name)),
        ["logs", log] if log.ends_with(".log") && log.len() > 4 => Ok(Path::new("logs").join(log)),
        _ => Err("not a place a board archive has"),
    }
}

/// The cap of an entry's size.
fn cap_of(entry: &str) -> u64 {
    if entry == MANIFEST {
        MAX_MANIFEST_BYTES
    } else if entry.starts_with("attachments/") {
        crate::board::attachments::KANBAN_ATTACHMENT_MAX_BYTES
    } else if entry.starts_with("logs/") {
        MAX_LOG_BYTES
    } else {
        u64::MAX
    }
}

/// Reads every entry of `file` into `dir`; returns the entries with their sizes.
fn unpack(file: &Path, dir: &Path) -> Result<BTreeMap<String, u64>, ArchiveError> {
    let corrupt = |source| ArchiveError::Corrupt {
        file: file.to_path_buf(),
        source,
    };
    let unsafe_entry = |entry: String, why| ArchiveError::UnsafeEntry {
        file: file.to_path_buf(),
        entry,
        why,
    };
    let input = std::fs::File::open(file).map_err(io("read", file))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(input));
    let mut seen = BTreeMap::new();
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(unsafe_entry(name, "not a regular file"));
        }
        let place = entry_place(&name).map_err(|why| unsafe_entry(name.clone(), why))?;
        if seen.contains_key(&name) {
            return Err(unsafe_entry(name, "a second entry of the same name"));
        }
        let size = entry.size();
        if size > cap_of(&name) {
            return Err(ArchiveError::BadArchive {
                file: file.to_path_buf(),
                reason: format!("the entry `{name}` is larger than allowed ({size} bytes)"),
            });
        }
        let dest = dir.join(&place);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io("create", parent))?;
        }
        let mut out = std::fs::File::create_new(&dest).map_err(io("create", &dest))?;
        let copied = std::io::copy(&mut (&mut entry).take(size), &mut out).map_err(corrupt)?;
        if copied != size {
            return Err(corrupt(std::io::ErrorKind::UnexpectedEof.into()));
        }
        seen.insert(name, size);
    }
    // The gzip trailer (its checksum and length) is read to the end: a cut archive is refused
    // even when the cut falls after the last tar block.
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink()).map_err(corrupt)?;
    Ok(seen)
}

/// Reads and checks the manifest against the entries.
fn read_manifest(
    file: &Path,
    dir: &Path,
    entries: &BTreeMap<String, u64>,
) -> Result<Manifest, ArchiveError> {
    let bad = |reason: String| ArchiveError::BadArchive {
        file: file.to_path_buf(),
        reason,
    };
    if !entries.contains_key(MANIFEST) {
        return Err(bad("it has no manifest.json".to_owned()));
    }
    let text = std::fs::read(dir.join(MANIFEST)).map_err(io("read", file))?;
    let value: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| bad(format!("manifest.json is not JSON ({e})")))?;
    let format = value.get("format").and_then(|v| v.as_str()).unwrap_or("");
    let version = value
        .get("version")
        .map(ToString::to_string)
        .unwrap_or_default();
    if format != FORMAT || value.get("version").and_then(serde_json::Value::as_u64) != Some(VERSION)
    {
        return Err(ArchiveError::UnknownVersion {
            file: file.to_path_buf(),
            format: format.to_owned(),
            version,
        });
    }
    let manifest: Manifest = serde_json::from_value(value).map_err(|e| {
        bad(format!(
            "manifest.json does not describe a board archive ({e})"
        ))
    })?;
    let listed: BTreeMap<String, u64> = manifest
        .files
        .iter()
        .map(|f| (f.path.clone(), f.size))
        .chain([(MANIFEST.to_owned(), entries[MANIFEST])])
        .collect();
    if listed.len() != manifest.files.len() + 1 || &listed != entries {
        return Err(bad(
            "its files do not match the manifest's list (an entry missing, extra or of another size)"
                .to_owned(),
        ));
    }
    if !entries.contains_key(SNAPSHOT) {
        return Err(bad("it has no board.sqlite".to_owned()));
    }
    paths::validate_slug(&manifest.slug)?;
    if let Some(name) = &manifest.name {
        meta::check_name(name).map_err(|e| bad(format!("its board name: {e}")))?;
    }
    Ok(manifest)
}

/// Where an import puts the board.
pub enum ImportTarget {
    /// Where the home would put a new board of that slug (a SQLite file, or the PostgreSQL
    /// database kanban.toml names for it).
    Home,
    /// This PostgreSQL database (recorded in the board folder, as `boards create --url`).
    Url(Box<PgTarget>),
}

/// Imports the archive `file` as a new board of the home at `root` (see the module docs).
pub fn import(
    root: &Path,
    file: &Path,
    as_slug: Option<&str>,
    target: ImportTarget,
) -> Result<Imported, ArchiveError> {
    // Unreadable input is refused before anything is made in the home.
    std::fs::File::open(file).map_err(io("read", file))?;
    let kanban_dir = root.join("kanban");
    std::fs::create_dir_all(&kanban_dir).map_err(io("create", &kanban_dir))?;
    let staging = Staging::new(&kanban_dir, "import")?;
    let entries = unpack(file, &staging.0)?;
    let manifest = read_manifest(file, &staging.0, &entries)?;
    let slug = as_slug.unwrap_or(&manifest.slug).to_owned();
    validate_new_slug(&slug)?;
    if slug == paths::DEFAULT_BOARD {
        return Err(ArchiveError::DefaultTarget);
    }
    let location = paths::locate(root, &slug)?;
    let pg = match (&target, &location.store) {
        (ImportTarget::Url(_), _) | (ImportTarget::Home, Store::Sqlite) if location.exists() => {
            return Err(HomeError::BoardExists {
                slug,
                path: location.db_path,
            }
            .into());
        }
        (ImportTarget::Url(t), _) => Some((**t).clone()),
        (ImportTarget::Home, Store::Postgres(t)) => Some(t.clone()),
        (ImportTarget::Home, Store::Sqlite) => None,
    };
    let snapshot = staging.0.join(SNAPSHOT);
    engine::check_snapshot(&snapshot)?;
    let moved = retarget(root, &slug, file, &manifest, &snapshot)?;
    let placed = place_files(root, &slug, &staging.0, &manifest)?;
    let made = match &pg {
        Some(t) => engine::snapshot_to_postgres(&snapshot, t).map(|rows| (rows, t.redacted())),
        None => place_sqlite(&snapshot, &location)
            .map(|()| (Vec::new(), location.db_path.display().to_string())),
    };
    let (rows, where_) = match made {
        Ok(made) => made,
        Err(e) => {
            placed.undo();
            return Err(e.into());
        }
    };
    if let ImportTarget::Url(t) = &target
        && let Err(e) = paths::write_url_file(root, &slug, t)
    {
        placed.undo();
        return Err(e.into());
    }
    if let Some(name) = &manifest.name {
        meta::set_name(root, &slug, name)?;
    }
    let rows = if rows.is_empty() {
        manifest.rows.clone()
    } else {
        rows.into_iter().collect()
    };
    Ok(Imported {
        slug,
        store: if pg.is_some() { "postgres" } else { "sqlite" },
        location: where_,
        from_slug: manifest.slug,
        rows,
        attachments: moved,
        logs: placed.logs.len(),
    })
}

/// Points every attachment row of the snapshot at the new board's folder; returns how many
/// files the archive carries.
fn retarget(
    root: &Path,
    slug: &str,
    file: &Path,
    manifest: &Manifest,
    snapshot: &Path,
) -> Result<usize, ArchiveError> {
    let rows = engine::attachment_rows(snapshot)?;
    let mut carried = 0;
    for f in manifest
        .files
        .iter()
        .filter(|f| f.path.starts_with("attachments/"))
    {
        let task = f.path.split('/').nth(1).unwrap_or("");
        if !rows
            .iter()
            .any(|r| Some(r.id) == f.attachment_id && r.task_id == task)
        {
            return Err(ArchiveError::BadArchive {
                file: file.to_path_buf(),
                reason: format!("{} belongs to no attachment of its task", f.path),
            });
        }
        carried += 1;
    }
    let mut moved = Vec::new();
    for row in &rows {
        let name = Path::new(&row.stored_path)
            .file_name()
            .and_then(|n| n.to_str());
        if let Some(name) = name.filter(|n| safe_component(n) && safe_component(&row.task_id)) {
            let new = paths::attachments_dir(root, slug, &row.task_id).join(name);
            moved.push((row.id, new.to_string_lossy().into_owned()));
        }
    }
    engine::set_stored_paths(snapshot, &moved)?;
    Ok(carried)
}

/// The files an import moved into the home, taken back out when the board cannot be made.
struct Placed {
    attachments: Option<PathBuf>,
    logs: Vec<PathBuf>,
}

impl Placed {
    fn undo(self) {
        if let Some(dir) = self.attachments {
            let _ = std::fs::remove_dir_all(dir);
        }
        for log in self.logs {
            let _ = std::fs::remove_file(log);
        }
    }
}

/// Moves the staged attachments and logs to the new board's places (none may exist yet).
fn place_files(
    root: &Path,
    slug: &str,
    staged: &Path,
    manifest: &Manifest,
) -> Result<Placed, ArchiveError> {
    let attachments_root = paths::attachments_root(root, slug);
    if std::fs::symlink_metadata(&attachments_root).is_ok() {
        return Err(ArchiveError::Leftover {
            slug: slug.to_owned(),
            path: attachments_root,
        });
    }
    let logs: Vec<(PathBuf, PathBuf)> = manifest
        .files
        .iter()
        .filter_map(|f| f.path.strip_prefix("logs/"))
        .map(|log| {
            let task = log.trim_end_matches(".log");
            (
                staged.join("logs").join(log),
                paths::log_path(root, slug, task),
            )
        })
        .collect();
    if let Some((_, taken)) = logs.iter().find(|(_, to)| to.exists()) {
        return Err(ArchiveError::Leftover {
            slug: slug.to_owned(),
            path: taken.clone(),
        });
    }
    let mut placed = Placed {
        attachments: None,
        logs: Vec::new(),
    };
    let staged_attachments = staged.join("attachments");
    if staged_attachments.is_dir() {
        let parent = attachments_root.parent().unwrap_or(root);
        std::fs::create_dir_all(parent).map_err(io("create", parent))?;
        std::fs::rename(&staged_attachments, &attachments_root)
            .map_err(io("move the attachments to", &attachments_root))?;
        placed.attachments = Some(attachments_root);
    }
    for (from, to) in logs {
        let result = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::rename(&from, &to));
        if let Err(e) = result {
            placed.undo();
            return Err(io("move a log to", &to)(e));
        }
        placed.logs.push(to);
    }
    Ok(placed)
}

/// Links the checked snapshot into place as the SQLite board at `location` (only while nothing
/// is there) and opens it once.
fn place_sqlite(snapshot: &Path, location: &BoardLocation) -> Result<(), TransferError> {
    let db = &location.db_path;
    if let Some(parent) = db.parent() {
        std::fs::create_dir_all(parent).map_err(|source| {
            TransferError::Board(crate::board::BoardError::Storage(
                crate::board::StorageError::Io {
                    action: "create the folder of",
                    path: db.clone(),
                    source,
                },
            ))
        })?;
    }
    std::fs::hard_link(snapshot, db).map_err(|source| {
        TransferError::Board(crate::board::BoardError::Storage(
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                crate::board::StorageError::FileExists { path: db.clone() }
            } else {
                crate::board::StorageError::Io {
                    action: "create",
                    path: db.clone(),
                    source,
                }
            },
        ))
    })?;
    if let Err(e) = Board::open(location, &OpenOptions::default()) {
        let _ = std::fs::remove_file(db);
        return Err(e.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_archive_layout_is_accepted() {
        assert!(entry_place("manifest.json").is_ok());
        assert!(entry_place("board.sqlite").is_ok());
        assert!(entry_place("attachments/t_1/spec.md").is_ok());
        assert!(entry_place("logs/t_1.log").is_ok());
        for bad in [
            "/etc/passwd",
            "../x",
            "attachments/../../x",
            "attachments/t_1/../../x",
            "attachments//x",
            "attachments/t_1/a/b",
            "logs/t_1.txt",
            "logs/.log",
            "other",
            "attachments/./x",
        ] {
            assert!(entry_place(bad).is_err(), "{bad}");
        }
    }
}
