//! Operator conveniences on existing tasks: resolving a unique id prefix to the full id
//! ([`Board::resolve_task_id`]) and editing a task's text and knobs ([`edit_in`]).
//!
//! Decisions: a prefix is matched against every task of the board (archived ones too), with or
//! without the `t_` of the id, and must give at least [`ID_PREFIX_MIN`] characters after `t_`; an
//! exact id always wins. An edit changes only what it names, is refused for an archived task, and
//! records one `edited` event naming the changed fields (a field set to the value it already has
//! is not named; an edit that changes nothing writes nothing). A workspace is replaced whole
//! (kind, path, branch, base) and only while the task has never run: once a run started, its work
//! is in that workspace.

use crate::db::params;
use serde::Serialize;

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::model::Status;
use super::outcome::{Outcome, Refusal};
use super::rows::load_task;
use super::store::Board;
use crate::db::Tx;

/// Characters of the random part (after `t_`) a prefix must give.
pub const ID_PREFIX_MIN: usize = 4;

/// What `kanban edit` changes; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edit {
    pub title: Option<String>,
    pub body: Option<String>,
    pub priority: Option<i64>,
    pub max_retries: Option<i64>,
    /// A new workspace (kind, path, branch, base), replacing the old one whole; refused once the
    /// task has run (its work is in the old one).
    pub workspace: Option<super::input::WorkspaceSpec>,
    /// Clear the task's skills (the original's `edit --clear-skills`); refused while it runs.
    pub clear_skills: bool,
}

impl Edit {
    fn is_empty(&self) -> bool {
        self.title.is_none()
            && self.body.is_none()
            && self.priority.is_none()
            && self.max_retries.is_none()
            && self.workspace.is_none()
            && !self.clear_skills
    }
}

/// The result of an edit: the fields that changed (empty when every value was already so).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Edited {
    pub task_id: String,
    pub fields: Vec<String>,
}

/// Edits task `id` (see the module docs).
pub(crate) fn edit_in(tx: &Tx<'_>, id: &str, edit: &Edit, now: i64) -> Result<Outcome<Edited>> {
    if edit.is_empty() {
        return Err(BoardError::NothingToEdit);
    }
    let title = edit.title.as_deref().map(str::trim);
    if title.is_some_and(str::is_empty) {
        return Err(BoardError::BlankTitle);
    }
    if let Some(n) = edit.max_retries
        && !(1..=1000).contains(&n)
    {
        return Err(BoardError::InvalidMaxRetries { value: n });
    }
    if let Some(workspace) = &edit.workspace {
        workspace.check()?;
    }
    let task = load_task(tx, id)?;
    if task.status == Status::Archived {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "any status but archived",
        }));
    }
    if edit.clear_skills && task.status == Status::Running {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "not running to clear its skills",
        }));
    }
    if edit.workspace.is_some() {
        let runs: i64 = tx
            .prepare_cached("SELECT COUNT(*) FROM task_runs WHERE task_id = ?1")?
            .query_row([id], |r| r.get(0))?;
        if runs > 0 {
            return Err(BoardError::WorkspaceFixed {
                id: id.to_owned(),
                runs,
            });
        }
    }
    let old_workspace = (
        task.workspace_kind.clone(),
        task.workspace_path.clone(),
        task.branch_name.clone(),
        task.workspace_base.clone(),
    );
    let new_workspace = edit.workspace.as_ref().map_or(old_workspace.clone(), |w| {
        (
            w.kind().as_str().to_owned(),
            w.path_text(),
            w.branch.clone(),
            w.base.clone(),
        )
    });
    let new_title = title.map_or(task.title.clone(), str::to_owned);
    let new_body = edit.body.clone().or(task.body.clone());
    let new_priority = edit.priority.unwrap_or(task.priority);
    let new_retries = edit.max_retries.or(task.max_retries);
    let mut fields = Vec::new();
    if new_title != task.title {
        fields.push("title".to_owned());
    }
    if new_body != task.body {
        fields.push("body".to_owned());
    }
    if new_priority != task.priority {
        fields.push("priority".to_owned());
    }
    if new_retries != task.max_retries {
        fields.push("max_retries".to_owned());
    }
    let clear_skills = edit.clear_skills && task.skills.is_some();
    if clear_skills {
        fields.push("skills".to_owned());
    }
    for (name, changed) in [
        ("workspace_kind", new_workspace.0 != old_workspace.0),
        ("workspace_path", new_workspace.1 != old_workspace.1),
        ("branch_name", new_workspace.2 != old_workspace.2),
        ("workspace_base", new_workspace.3 != old_workspace.3),
    ] {
        if changed {
            fields.push(name.to_owned());
        }
    }
    if fields.is_empty() {
        return Ok(Outcome::Done(Edited {
            task_id: id.to_owned(),
            fields,
        }));
    }
    let changed = tx.execute(
        "UPDATE tasks SET title = ?2, body = ?3, priority = ?4, max_retries = ?5, \
         workspace_kind = ?7, workspace_path = ?8, branch_name = ?9, workspace_base = ?10, \
         skills = CASE WHEN ?11 <> 0 THEN NULL ELSE skills END \
         WHERE id = ?1 AND status = ?6",
        params![
            id,
            new_title,
            new_body,
            new_priority,
            new_retries,
            task.status.as_str(),
            new_workspace.0,
            new_workspace.1,
            new_workspace.2,
            new_workspace.3,
            i64::from(clear_skills)
        ],
    )?;
    if changed != 1 {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    append_event(
        tx,
        id,
        None,
        &Event::Edited {
            fields: fields.clone(),
            result_len: None,
            summary: None,
        },
        now,
    )?;
    Ok(Outcome::Done(Edited {
        task_id: id.to_owned(),
        fields,
    }))
}

impl Board {
    /// See [`edit_in`].
    pub fn edit(&self, id: &str, edit: &Edit, now: i64) -> Result<Outcome<Edited>> {
        self.write(|tx| edit_in(tx, id, edit, now))
    }

    /// The full id of the one task whose id is `given` or starts with it (see the module docs):
    /// `TaskNotFound` when none, `AmbiguousId` listing the matches when several,
    /// `IdPrefixTooShort` for a prefix shorter than [`ID_PREFIX_MIN`].
    pub fn resolve_task_id(&self, given: &str) -> Result<String> {
        let conn = self.conn();
        let exact: i64 = conn.query_row(
            "SELECT count(*) FROM tasks WHERE id = ?1",
            params![given],
            |r| r.get(0),
        )?;
        if exact == 1 {
            return Ok(given.to_owned());
        }
        let rest = given.strip_prefix("t_").unwrap_or(given);
        if rest.is_empty() || !rest.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(BoardError::TaskNotFound {
                id: given.to_owned(),
            });
        }
        if rest.len() < ID_PREFIX_MIN {
            return Err(BoardError::IdPrefixTooShort {
                prefix: given.to_owned(),
                min: ID_PREFIX_MIN,
            });
        }
        let full = format!("t_{rest}");
        let mut stmt = conn.prepare(
            "SELECT id FROM tasks WHERE substr(id, 1, length(?1)) = ?1 ORDER BY id LIMIT 21",
        )?;
        let matches = stmt
            .query_map(params![full], |r| r.get::<_, String>(0))?
            .collect::<crate::db::Result<Vec<_>>>()?;
        match matches.len() {
            0 => Err(BoardError::TaskNotFound {
                id: given.to_owned(),
            }),
            1 => Ok(matches.into_iter().next().unwrap_or_default()),
            _ => Err(BoardError::AmbiguousId {
                prefix: given.to_owned(),
                matches,
            }),
        }
    }
}
