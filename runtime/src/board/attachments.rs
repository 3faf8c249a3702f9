//! Files attached to a task (the original's `task_attachments` and its attachment functions):
//! the blob on disk in the task's attachments folder, one row per file carrying its absolute
//! `stored_path`, an `attached` / `attachment_removed` event per change. The folder is the
//! caller's (the home decides where a board's attachments live, `crate::home::attachments_dir`);
//! this module only ever writes inside it.
//!
//! What is the original's: the 25 MiB cap per file ([`KANBAN_ATTACHMENT_MAX_BYTES`], refused
//! before anything is stored), the safe stored name ([`safe_attachment_name`]), the
//! collision-free name (`foo.pdf`, `foo (1).pdf`, …), a blob whose row cannot be written removed
//! again, the lines of the worker's prompt ([`prompt_lines`]), and the completion's artifacts
//! ([`Artifacts`]): deliverables inside a scratch workspace are copied out before its cleanup
//! can remove them, and summary prose that names such a file by its absolute path adds it.

use std::io::{Read, Write as _};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::db::{OptionalExtension, params};

use super::error::BoardError;
use super::events::{Event, append_event};
use super::model::Task;
use super::rows::{insert_returning_id, load_task};
use super::store::Board;

/// The largest file an attachment may be (the original's one cap for every surface).
pub const KANBAN_ATTACHMENT_MAX_BYTES: u64 = 25 * 1024 * 1024;

/// The longest stored name, in characters (the original's).
const MAX_NAME_CHARS: usize = 200;

/// Who [`Artifacts::record`] names as the uploader (the original's `uploaded_by`).
pub const COMPLETION_UPLOADER: &str = "kanban_complete";

/// The `SELECT` list [`Attachment::from_row`] decodes.
pub(crate) const ATTACHMENT_COLUMNS: &str =
    "id, task_id, filename, stored_path, content_type, size, uploaded_by, created_at";

/// One row of `task_attachments`. Its JSON is the original's `attachments --json` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attachment {
    pub id: i64,
    #[serde(skip)]
    pub task_id: String,
    pub filename: String,
    pub content_type: Option<String>,
    pub size: i64,
    pub uploaded_by: Option<String>,
    /// Absolute path of the file.
    pub stored_path: String,
    pub created_at: i64,
}

impl Attachment {
    fn from_row(r: &crate::db::Row<'_>) -> crate::db::Result<Attachment> {
        Ok(Attachment {
            id: r.get(0)?,
            task_id: r.get(1)?,
            filename: r.get(2)?,
            stored_path: r.get(3)?,
            content_type: r.get(4)?,
            size: r.get::<_, Option<i64>>(5)?.unwrap_or(0),
            uploaded_by: r.get(6)?,
            created_at: r.get(7)?,
        })
    }
}

/// Why an attachment was not stored, listed or removed.
#[derive(Debug, thiserror::Error)]
pub enum AttachmentError {
    #[error(
        "{name} is {size} bytes, over the attachment limit of {} MiB ({KANBAN_ATTACHMENT_MAX_BYTES} bytes); nothing was stored",
        KANBAN_ATTACHMENT_MAX_BYTES / (1024 * 1024)
    )]
    TooLarge { name: String, size: u64 },
    #[error(
        "invalid attachment filename {raw:?}: nothing is left once folders, control characters and leading dots are removed"
    )]
    InvalidName { raw: String },
    #[error("task id {id:?} cannot name an attachments folder")]
    InvalidTaskId { id: String },
    #[error("task {task_id} has no attachment named {name:?}")]
    NotFound { task_id: String, name: String },
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot store the attachment at {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("artifact {} is not a regular file; nothing was stored", path.display())]
    NotAFile { path: PathBuf },
    #[error(
        "artifact {} is relative and task {task_id} has no workspace to resolve it in; give an absolute path",
        path.display()
    )]
    NoWorkspace { task_id: String, path: PathBuf },
    #[error(
        "artifact {} is outside the workspace {} of task {task_id}; give its absolute path",
        path.display(), workspace.display()
    )]
    OutsideWorkspace {
        task_id: String,
        path: PathBuf,
        workspace: PathBuf,
    },
    #[error(transparent)]
    Board(#[from] BoardError),
}

pub type Result<T> = std::result::Result<T, AttachmentError>;

impl From<crate::db::Error> for AttachmentError {
    fn from(e: crate::db::Error) -> Self {
        AttachmentError::Board(e.into())
    }
}

/// A client's file name made safe to store (the original's `_safe_attachment_name`): the last
/// component after either separator, without control characters and leading dots (no dotfile,
/// no `..`), at most 200 characters; refused when nothing usable is left.
pub fn safe_attachment_name(raw: &str) -> Result<String> {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or_default().trim();
    let printable: String = last.chars().filter(|c| !c.is_control()).collect();
    let name = printable.trim().trim_start_matches('.').trim();
    if name.is_empty() {
        return Err(AttachmentError::InvalidName {
            raw: raw.to_owned(),
        });
    }
    Ok(name.chars().take(MAX_NAME_CHARS).collect())
}

/// `id` as one plain path component (an attachments folder is named after its task).
pub fn check_task_id(id: &str) -> Result<()> {
    let mut components = Path::new(id).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(c)), None) if c == id && !id.contains('\\') => Ok(()),
        _ => Err(AttachmentError::InvalidTaskId { id: id.to_owned() }),
    }
}

/// The content type a file name suggests (the common entries of Python's `mimetypes`, which the
/// original asks), `None` when the extension is unknown.
pub fn guess_content_type(name: &str) -> Option<&'static str> {
    let ext = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "xml" => "application/xml",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "js" => "text/javascript",
        "py" => "text/x-python",
        "rs" => "text/x-rust",
        "sh" => "application/x-sh",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "mp3" => "audio/mpeg",
        "mp4" => "video/mp4",
        "wav" => "audio/x-wav",
        _ => return None,
    })
}

/// Reads at most the cap from `path`: a larger file is refused without being read whole.
pub fn read_capped(path: &Path, name: &str) -> Result<Vec<u8>> {
    let read_err = |source| AttachmentError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(AttachmentError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let too_large = |size| AttachmentError::TooLarge {
        name: name.to_owned(),
        size,
    };
    if meta.len() > KANBAN_ATTACHMENT_MAX_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut data = Vec::new();
    file.take(KANBAN_ATTACHMENT_MAX_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(read_err)?;
    // The file grew while it was read.
    if data.len() as u64 > KANBAN_ATTACHMENT_MAX_BYTES {
        return Err(too_large(data.len() as u64));
    }
    Ok(data)
}

/// Creates a new file for `safe_name` in `dir` that no other file has: `foo.pdf`, then
/// `foo (1).pdf`, … (the original's `_collision_free_path`, split at the first dot). The name is
/// taken atomically (`O_EXCL`), so two writers never share one.
fn create_collision_free(dir: &Path, safe_name: &str) -> Result<(PathBuf, std::fs::File)> {
    std::fs::create_dir_all(dir).map_err(|source| AttachmentError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let (stem, ext) = match safe_name.split_once('.') {
        Some((stem, ext)) => (stem, Some(ext)),
        None => (safe_name, None),
    };
    let mut candidate = safe_name.to_owned();
    for n in 1u32.. {
        let path = dir.join(&candidate);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                candidate = match ext {
                    Some(ext) => format!("{stem} ({n}).{ext}"),
                    None => format!("{stem} ({n})"),
                };
            }
            Err(source) => return Err(AttachmentError::Write { path, source }),
        }
    }
    unreachable!("u32 names run out before a folder does")
}

/// Writes `data` to a new collision-free file for `safe_name` in `dir`; returns its absolute path.
fn write_blob(dir: &Path, safe_name: &str, data: &[u8]) -> Result<PathBuf> {
    let (path, mut file) = create_collision_free(dir, safe_name)?;
    let written = file.write_all(data).and_then(|()| file.sync_all());
    if let Err(source) = written {
        let _ = std::fs::remove_file(&path);
        return Err(AttachmentError::Write { path, source });
    }
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// What one new row records.
struct NewRow<'a> {
    filename: &'a str,
    stored_path: &'a str,
    content_type: Option<&'a str>,
    size: i64,
    uploaded_by: Option<&'a str>,
}

/// Inserts the row and its `attached` event (the original's payload) in the caller's transaction.
fn insert_in(
    tx: &crate::db::Tx<'_>,
    task_id: &str,
    row: &NewRow<'_>,
    now: i64,
) -> std::result::Result<Attachment, BoardError> {
    load_task(tx, task_id)?;
    let id = insert_returning_id(
        tx,
        "INSERT INTO task_attachments \
         (task_id, filename, stored_path, content_type, size, uploaded_by, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
        params![
            task_id,
            row.filename,
            row.stored_path,
            row.content_type,
            row.size,
            row.uploaded_by,
            now
        ],
    )?;
    append_event(
        tx,
        task_id,
        None,
        &Event::Attached {
            filename: row.filename.to_owned(),
            size: row.size,
            by: row.uploaded_by.map(str::to_owned),
        },
        now,
    )?;
    Ok(Attachment {
        id,
        task_id: task_id.to_owned(),
        filename: row.filename.to_owned(),
        content_type: row.content_type.map(str::to_owned),
        size: row.size,
        uploaded_by: row.uploaded_by.map(str::to_owned),
        stored_path: row.stored_path.to_owned(),
        created_at: now,
    })
}

/// True when `path` is a file directly inside `dir` (both resolved): the only files a removal
/// deletes, so a row naming a file elsewhere never deletes it.
fn is_inside(path: &Path, dir: &Path) -> bool {
    let (Ok(path), Ok(dir)) = (std::fs::canonicalize(path), std::fs::canonicalize(dir)) else {
        return false;
    };
    path.parent() == Some(dir.as_path())
}

impl Board {
    /// Stores `data` as an attachment of task `task_id` in `dir` (the original's
    /// `store_attachment_bytes`): over [`KANBAN_ATTACHMENT_MAX_BYTES`] is refused with nothing
    /// stored; the name is made safe and free in `dir`; then the row and its `attached` event are
    /// written in one transaction, and a blob whose row could not be written is removed again.
    #[allow(clippy::too_many_arguments)]
    pub fn store_attachment(
        &self,
        task_id: &str,
        dir: &Path,
        filename: &str,
        data: &[u8],
        content_type: Option<&str>,
        uploaded_by: Option<&str>,
        now: i64,
    ) -> Result<Attachment> {
        let size = data.len() as u64;
        if size > KANBAN_ATTACHMENT_MAX_BYTES {
            return Err(AttachmentError::TooLarge {
                name: filename.to_owned(),
                size,
            });
        }
        let safe = safe_attachment_name(filename)?;
        check_task_id(task_id)?;
        // An unknown task is refused before a file is written.
        self.get_task(task_id)?;
        let path = write_blob(dir, &safe, data)?;
        let stored_path = path.display().to_string();
        let stored_name = path
            .file_name()
            .map_or_else(|| safe.clone(), |n| n.to_string_lossy().into_owned());
        let row = NewRow {
            filename: &stored_name,
            stored_path: &stored_path,
            content_type,
            size: size as i64,
            uploaded_by,
        };
        match self.write(|tx| insert_in(tx, task_id, &row, now)) {
            Ok(a) => Ok(a),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e.into())
            }
        }
    }

    /// The attachments of task `task_id`, oldest first (the original's `list_attachments`).
    pub fn attachments(&self, task_id: &str) -> super::error::Result<Vec<Attachment>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {ATTACHMENT_COLUMNS} FROM task_attachments WHERE task_id = ?1 \
             ORDER BY created_at, id"
        ))?;
        let rows = stmt
            .query_map([task_id], Attachment::from_row)?
            .collect::<crate::db::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Removes task `task_id`'s attachment `name` (its stored file name; failing that, its id):
    /// the row and an `attachment_removed` event in one transaction, then its file, when that
    /// file is in `dir` (the original's `delete_attachment`, which unlinks wherever the row
    /// points).
    pub fn remove_attachment(
        &self,
        task_id: &str,
        dir: &Path,
        name: &str,
        now: i64,
    ) -> Result<Attachment> {
        let removed = self.write(|tx| {
            load_task(tx, task_id)?;
            let by_name = tx
                .prepare_cached(&format!(
                    "SELECT {ATTACHMENT_COLUMNS} FROM task_attachments \
                     WHERE task_id = ?1 AND filename = ?2 ORDER BY id LIMIT 1"
                ))?
                .query_row(params![task_id, name], Attachment::from_row)
                .optional()?;
            let found = match (by_name, name.parse::<i64>()) {
                (Some(a), _) => Some(a),
                (None, Ok(id)) => tx
                    .prepare_cached(&format!(
                        "SELECT {ATTACHMENT_COLUMNS} FROM task_attachments \
                         WHERE task_id = ?1 AND id = ?2"
                    ))?
                    .query_row(params![task_id, id], Attachment::from_row)
                    .optional()?,
                (None, Err(_)) => None,
            };
            let Some(att) = found else {
                return Ok(None);
            };
            tx.execute(
                "DELETE FROM task_attachments WHERE id = ?1",
                params![att.id],
            )?;
            append_event(
                tx,
                task_id,
                None,
                &Event::AttachmentRemoved {
                    filename: att.filename.clone(),
                },
                now,
            )?;
            Ok::<_, BoardError>(Some(att))
        })?;
        let att = removed.ok_or_else(|| AttachmentError::NotFound {
            task_id: task_id.to_owned(),
            name: name.to_owned(),
        })?;
        let path = Path::new(&att.stored_path);
        if is_inside(path, dir) {
            let _ = std::fs::remove_file(path);
        }
        Ok(att)
    }

    /// Removes every attachment of task `task_id` with the task (for the code that removes
    /// tasks, e.g. `kanban gc`): its rows, then its folder `dir` and what is in it. No event is
    /// written (the task goes too). Returns how many rows went.
    pub fn remove_task_attachments(&self, task_id: &str, dir: &Path) -> Result<usize> {
        check_task_id(task_id)?;
        let n = self.write(|tx| {
            Ok::<_, BoardError>(tx.execute(
                "DELETE FROM task_attachments WHERE task_id = ?1",
                params![task_id],
            )?)
        })?;
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(AttachmentError::Write {
                    path: dir.to_path_buf(),
                    source,
                });
            }
        }
        Ok(n)
    }
}

/// The `## Attachments` section of a worker's prompt (the original's `_ctx_attachments`): one
/// line per file with its absolute path; empty without attachments.
pub fn prompt_lines(attachments: &[Attachment]) -> Vec<String> {
    if attachments.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![
        "## Attachments".to_owned(),
        "Files attached to this task. Read them with the file/terminal tools at the absolute \
         paths below:"
            .to_owned(),
    ];
    for a in attachments {
        let kb = if a.size > 0 {
            (a.size + 1023) / 1024
        } else {
            0
        };
        let size = if kb > 0 {
            format!(", {kb} KB")
        } else {
            String::new()
        };
        let ctype = a
            .content_type
            .as_deref()
            .map(|c| format!(", {c}"))
            .unwrap_or_default();
        lines.push(format!(
            "- `{}`{ctype}{size} → `{}`",
            a.filename, a.stored_path
        ));
    }
    lines
}

/// One deliverable of a completion, checked and (from a scratch workspace) copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub filename: String,
    /// Where the file is now: the copy in the attachments folder, or the file itself.
    pub stored_path: PathBuf,
    pub size: u64,
    /// True when [`Artifacts::stage`] made the copy (and [`Artifacts::discard`] removes it).
    pub copied: bool,
}

/// A completion's deliverables (`complete --artifact PATH…`, and the scratch workspace's files
/// the summary names by absolute path): staged before the completion, recorded as attachments
/// after it, discarded when it did not happen.
#[derive(Debug, Default)]
pub struct Artifacts {
    pub staged: Vec<Artifact>,
}

/// The scratch workspace's file paths `text` names (the original's
/// `_merge_completion_prose_artifacts`): the workspace's absolute path followed by a separator
/// and non-blank characters up to whitespace, a quote or an angle bracket, without trailing
/// punctuation; only existing regular files count.
pub fn prose_artifacts(workspace: &Path, text: &str) -> Vec<PathBuf> {
    let prefix = workspace.display().to_string();
    let mut found: Vec<PathBuf> = Vec::new();
    if prefix.is_empty() {
        return found;
    }
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        let tail = &rest[at + prefix.len()..];
        let end = tail
            .find(|c: char| c.is_whitespace() || "`\"'<>".contains(c))
            .unwrap_or(tail.len());
        let word = &tail[..end];
        if word.len() > 1 && (word.starts_with('/') || word.starts_with('\\')) {
            let word = word.trim_end_matches(|c| ".,;:!?)]}".contains(c));
            let candidate = PathBuf::from(format!("{prefix}{word}"));
            if candidate.is_file() && !found.contains(&candidate) {
                found.push(candidate);
            }
        }
        rest = &tail[end..];
    }
    found
}

impl Artifacts {
    /// Checks and stages `paths` for task `task` (the original's
    /// `_persist_scratch_completion_artifacts`), before its completion: a relative path is the
    /// task's `workspace`'s; a file inside a scratch workspace must be a regular file within the
    /// cap and is copied into `dir` (the cleanup after the completion removes the workspace); any
    /// other path must be absolute and a regular file, and is recorded where it is. Any refusal
    /// removes the copies already made and stores nothing.
    pub fn stage(
        task: &Task,
        workspace: Option<&Path>,
        dir: &Path,
        paths: &[PathBuf],
    ) -> Result<Artifacts> {
        let mut staged = Artifacts::default();
        match staged.stage_all(task, workspace, dir, paths) {
            Ok(()) => Ok(staged),
            Err(e) => {
                staged.discard();
                Err(e)
            }
        }
    }

    fn stage_all(
        &mut self,
        task: &Task,
        workspace: Option<&Path>,
        dir: &Path,
        paths: &[PathBuf],
    ) -> Result<()> {
        check_task_id(&task.id)?;
        let scratch = task.workspace_kind == "scratch";
        let root = workspace.and_then(|w| std::fs::canonicalize(w).ok());
        for path in paths {
            let given = if path.is_absolute() {
                path.clone()
            } else {
                match workspace {
                    Some(w) => w.join(path),
                    None => {
                        return Err(AttachmentError::NoWorkspace {
                            task_id: task.id.clone(),
                            path: path.clone(),
                        });
                    }
                }
            };
            let resolved =
                std::fs::canonicalize(&given).map_err(|source| AttachmentError::Read {
                    path: given.clone(),
                    source,
                })?;
            let inside = root.as_ref().is_some_and(|r| resolved.starts_with(r));
            if !inside && !path.is_absolute() {
                // A relative path that leaves the workspace (`../x`, a symlink out of it).
                return Err(AttachmentError::OutsideWorkspace {
                    task_id: task.id.clone(),
                    path: path.clone(),
                    workspace: workspace.map(Path::to_path_buf).unwrap_or_default(),
                });
            }
            let meta = std::fs::metadata(&resolved).map_err(|source| AttachmentError::Read {
                path: resolved.clone(),
                source,
            })?;
            if !meta.is_file() {
                return Err(AttachmentError::NotAFile { path: given });
            }
            let name = resolved
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "artifact".to_owned());
            if self.staged.iter().any(|a| a.stored_path == resolved) {
                continue;
            }
            if scratch && inside {
                let data = read_capped(&resolved, &given.display().to_string())?;
                let safe = safe_attachment_name(&name)?;
                let copy = write_blob(dir, &safe, &data)?;
                self.staged.push(Artifact {
                    filename: copy
                        .file_name()
                        .map_or(safe, |n| n.to_string_lossy().into_owned()),
                    stored_path: copy,
                    size: data.len() as u64,
                    copied: true,
                });
            } else {
                self.staged.push(Artifact {
                    filename: name,
                    stored_path: resolved,
                    size: meta.len(),
                    copied: false,
                });
            }
        }
        Ok(())
    }

    /// Removes the copies [`Artifacts::stage`] made (the completion did not happen), and `dir`
    /// when that leaves it empty.
    pub fn discard(&self) {
        for a in self.staged.iter().filter(|a| a.copied) {
            let _ = std::fs::remove_file(&a.stored_path);
            if let Some(dir) = a.stored_path.parent() {
                // Only succeeds on an empty folder.
                let _ = std::fs::remove_dir(dir);
            }
        }
    }

    /// Records every staged artifact as an attachment of `task_id` (uploaded by
    /// [`COMPLETION_UPLOADER`], no content type, as the original's) in one transaction.
    pub fn record(&self, board: &Board, task_id: &str, now: i64) -> Result<Vec<Attachment>> {
        if self.staged.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, String, i64)> = self
            .staged
            .iter()
            .map(|a| {
                (
                    a.filename.clone(),
                    a.stored_path.display().to_string(),
                    a.size as i64,
                )
            })
            .collect();
        Ok(board.write(|tx| {
            let mut out = Vec::new();
            for (filename, stored_path, size) in &rows {
                let row = NewRow {
                    filename,
                    stored_path,
                    content_type: None,
                    size: *size,
                    uploaded_by: Some(COMPLETION_UPLOADER),
                };
                out.push(insert_in(tx, task_id, &row, now)?);
            }
            Ok::<_, BoardError>(out)
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_safe_as_the_original_does() {
        assert_eq!(safe_attachment_name("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(safe_attachment_name("a\\b\\c.txt").unwrap(), "c.txt");
        assert_eq!(safe_attachment_name("..hidden").unwrap(), "hidden");
        assert_eq!(
            safe_attachment_name("re\u{7}port\n.md").unwrap(),
            "report.md"
        );
        assert!(safe_attachment_name("../..").is_err());
        assert!(safe_attachment_name("dir/").is_err());
        assert_eq!(safe_attachment_name(&"x".repeat(300)).unwrap().len(), 200);
    }

    #[test]
    fn task_ids_must_be_one_component() {
        assert!(check_task_id("t_0123abcd").is_ok());
        for bad in ["", ".", "..", "a/b", "/t", "a\\b"] {
            assert!(check_task_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn colliding_names_get_a_number_before_the_first_dot() {
        let dir = tempfile::tempdir().unwrap();
        let a = write_blob(dir.path(), "r.tar.gz", b"1").unwrap();
        let b = write_blob(dir.path(), "r.tar.gz", b"2").unwrap();
        let c = write_blob(dir.path(), "r.tar.gz", b"3").unwrap();
        let names: Vec<_> = [a, b, c]
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["r.tar.gz", "r (1).tar.gz", "r (2).tar.gz"]);
    }

    #[test]
    fn prose_names_files_of_the_workspace_only() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(ws.join("out.md"), "x").unwrap();
        let text = format!(
            "wrote {0}/out.md, and {0}/missing.md; see `{0}/out.md`. Also /elsewhere/x.",
            ws.display()
        );
        assert_eq!(prose_artifacts(&ws, &text), vec![ws.join("out.md")]);
    }

    #[test]
    fn prompt_lines_give_size_type_and_absolute_path() {
        let a = Attachment {
            id: 1,
            task_id: "t_1".into(),
            filename: "spec.pdf".into(),
            content_type: Some("application/pdf".into()),
            size: 1025,
            uploaded_by: None,
            stored_path: "/r/kanban/attachments/t_1/spec.pdf".into(),
            created_at: 0,
        };
        let lines = prompt_lines(&[a]);
        assert_eq!(lines[0], "## Attachments");
        assert_eq!(
            lines[2],
            "- `spec.pdf`, application/pdf, 2 KB → `/r/kanban/attachments/t_1/spec.pdf`"
        );
        assert!(prompt_lines(&[]).is_empty());
    }
}
