//! Creating tasks: `create_task_in` (parents, idempotency key, tenant inheritance, the starting
//! status) and the retry of a drawn id that PostgreSQL's primary key refused.

use crate::board::StorageError;
use crate::db::{OptionalExtension, Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::input::{NewTask, check_seconds, normalize_assignee};
use super::model::Status;
use super::outcome::Created;
use super::rows::exec_unchecked;
use super::store::{Board, random_hex};

/// True for the failure of a create whose drawn task id another task has: the tasks' primary
/// key refused it (PostgreSQL names the constraint `tasks_pkey`, SQLite the column `tasks.id`).
pub(crate) fn is_taken_task_id(err: &BoardError) -> bool {
    matches!(err, BoardError::Storage(StorageError::Sql(e)) | BoardError::Storage(StorageError::Sqlite { source: e, .. })
        if e.kind() == crate::db::ErrorKind::UniqueViolation
            && matches!(e.constraint(), Some("tasks_pkey" | "tasks.id")))
}

/// The new task's row (the columns a create sets; the rest keep their defaults).
const INSERT_TASK: &str = "INSERT INTO tasks (id, title, body, assignee, status, priority, \
     created_by, created_at, tenant, idempotency_key, max_runtime_seconds, max_retries, skills, \
     branch_name, goal_mode, goal_max_turns, workspace_kind, workspace_path, workspace_base, \
     completion_contract, model_override, provider_override, reasoning_effort) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
     ?19, ?20, ?21, ?22, ?23)";

/// How many ids a create draws at most before it gives up (a taken one is drawn again).
const TASK_ID_DRAWS: usize = 8;

/// A random task id for a new task, drawn without looking first (a statement per create): the
/// insert's primary key refuses a taken id, nothing is written, and the create draws again —
/// on SQLite in `create_task_in`, on PostgreSQL in `Board::create_task` (see
/// [`is_taken_task_id`]).
fn draw_task_id() -> Result<String> {
    Ok(random_hex(8).map(|hex| format!("t_{hex}"))?)
}

/// Creates a task (see [`Board::create_task`]).
pub(crate) fn create_task_in(tx: &Tx<'_>, new: &NewTask, now: i64) -> Result<Created> {
    let title = new.title.trim();
    if title.is_empty() {
        return Err(BoardError::BlankTitle);
    }
    if new.triage && new.blocked {
        return Err(BoardError::ConflictingInitialStatus);
    }
    if let Some(secs) = new.max_runtime_seconds {
        check_seconds("--max-runtime", secs)?;
    }
    new.workspace.check()?;
    let key = new
        .idempotency_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty());
    if let Some(key) = key {
        let existing: Option<(String, String)> = tx
            .prepare_cached(
                "SELECT id, status FROM tasks WHERE idempotency_key = ?1 AND status != 'archived' \
                 ORDER BY created_at DESC, rowid DESC LIMIT 1",
            )?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((id, status)) = existing {
            return Ok(Created {
                id,
                status: status.parse()?,
                existing: true,
            });
        }
    }
    let mut parents: Vec<String> = Vec::new();
    for p in &new.parents {
        let p = p.trim();
        if !parents.iter().any(|q| q == p) {
            parents.push(p.to_owned());
        }
    }
    let mut open_parent = None;
    let mut tenant = new.tenant.clone().filter(|t| !t.is_empty());
    for p in &parents {
        let parent: Option<(String, Option<String>)> = tx
            .prepare_cached("SELECT status, tenant FROM tasks WHERE id = ?1")?
            .query_row([p], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((status, parent_tenant)) = parent else {
            return Err(BoardError::ParentNotFound { id: p.clone() });
        };
        if open_parent.is_none() && !status.parse::<Status>()?.is_finished() {
            open_parent = Some(p.clone());
        }
        if tenant.is_none() {
            tenant = parent_tenant.filter(|t| !t.is_empty());
        }
    }
    let status = if new.blocked {
        Status::Blocked
    } else if new.triage {
        Status::Triage
    } else if open_parent.is_some() || new.hold_in_todo {
        Status::Todo
    } else {
        Status::Ready
    };
    let assignee = normalize_assignee(new.assignee.as_deref());
    let skill_names = super::steering::normalize_skills(new.skills.as_deref())?;
    let model = new.model.checked()?;
    let skills = match &skill_names {
        Some(s) => Some(serde_json::to_string(s)?),
        None => None,
    };
    let contract = new
        .completion_contract
        .as_ref()
        .unwrap_or(&crate::acceptance::Contract::LocalOnly)
        .as_column();
    // SQLite: a drawn id that is taken is drawn again here (the failed insert wrote nothing and
    // the transaction goes on), so a batch of many creates is not retried whole. PostgreSQL: a
    // failed statement aborts the transaction; `Board::create_task` retries it.
    let mut draws = 1;
    let id = loop {
        let id = draw_task_id()?;
        match exec_unchecked(
            tx,
            INSERT_TASK,
            params![
                id,
                title,
                new.body,
                assignee,
                status.as_str(),
                new.priority,
                new.created_by,
                now,
                tenant,
                key,
                new.max_runtime_seconds,
                new.max_retries,
                skills,
                new.workspace.branch,
                new.goal_mode as i64,
                new.goal_max_turns,
                new.workspace.kind().as_str(),
                new.workspace.path_text(),
                new.workspace.base,
                contract,
                model.model,
                model.provider,
                model.reasoning
            ],
        ) {
            Err(e) if tx.is_sqlite() && draws < TASK_ID_DRAWS && is_taken_task_id(&e) => draws += 1,
            Err(e) => return Err(e),
            Ok(()) => break id,
        }
    };
    for p in &parents {
        exec_unchecked(
            tx,
            "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![p, id],
        )?;
    }
    let creator_task_id = new.created_by.clone().filter(|c| c.starts_with("t_"));
    append_event(
        tx,
        &id,
        None,
        &Event::Created {
            assignee,
            status,
            parents: parents.clone(),
            creator_task_id,
            tenant,
            workspace_kind: Some(new.workspace.kind().as_str().to_owned()),
            workspace_path: new.workspace.path_text(),
            branch_name: new.workspace.branch.clone(),
            project_id: None,
            skills: skill_names.clone(),
            goal_mode: new.goal_mode.then_some(true),
            model_override: model.model.clone(),
            provider_override: model.provider.clone(),
            idempotency_key: key.map(str::to_owned),
            workspace_base: new.workspace.base.clone(),
            from_decompose_of: new.from_decompose_of.clone(),
            completion_contract: Some(contract.clone())
                .filter(|c| c != crate::acceptance::LOCAL_ONLY),
        },
        now,
    )?;
    // An unfinished parent is said by the `created` event (`status: todo`, `parents`); the
    // original writes no `dependency_wait` here either.
    if status == Status::Blocked {
        append_event(
            tx,
            &id,
            None,
            &Event::Blocked {
                reason: Some("initial_status".to_owned()),
                kind: None,
                recurrences: None,
                source_status: None,
                status: Some(Status::Blocked),
                actor: new.created_by.clone(),
                requested_kind: None,
                rekind_reason: None,
            },
            now,
        )?;
    }
    Ok(Created {
        id,
        status,
        existing: false,
    })
}

impl Board {
    /// Creates a task: `blocked` / `triage` when asked, else `todo` while a parent is unfinished,
    /// else `ready`. An idempotency key that matches a non-archived task returns that task
    /// (`existing: true`) and creates nothing.
    pub fn create_task(&self, new: &NewTask, now: i64) -> Result<Created> {
        self.retry_taken_id(|| self.write(|tx| create_task_in(tx, new, now)))
    }

    /// Runs `create` again (with a fresh random id) while it fails only because the id it drew
    /// is taken: a create does not look first (see `draw_task_id`), the insert's primary key
    /// refuses the duplicate and nothing is written. Eight draws at most.
    pub(crate) fn retry_taken_id<T>(&self, mut create: impl FnMut() -> Result<T>) -> Result<T> {
        let mut draws = 1;
        loop {
            match create() {
                Err(e) if draws < TASK_ID_DRAWS && is_taken_task_id(&e) => draws += 1,
                other => return other,
            }
        }
    }

    /// Creates each of `tasks` in turn, as [`Board::create_task`] does, inside **one** transaction
    /// (one commit for the lot): all are created or, on the first error, none.
    pub fn create_tasks(&self, tasks: &[NewTask], now: i64) -> Result<Vec<Created>> {
        self.retry_taken_id(|| {
            self.write(|tx| {
                tasks
                    .iter()
                    .map(|new| create_task_in(tx, new, now))
                    .collect()
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::testing::{create, sqlite_board};

    /// The SQLite half of the taken-id retry (PostgreSQL's is in `tests/pg_engine.rs`): a
    /// duplicate task id is what the primary key refuses, and no other unique key's refusal is
    /// taken for one.
    #[test]
    fn a_duplicate_task_id_is_recognised_on_sqlite_and_nothing_else_is() {
        let (_dir, b) = sqlite_board();
        let id = create(&b, "first");
        let other = create(&b, "second");
        let insert = |sql: &str, p: &[&str]| {
            b.write(|tx| exec_unchecked(tx, sql, crate::db::params![p[0], p[1]]))
                .unwrap_err()
        };
        let taken = insert(
            "INSERT INTO tasks (id, title, status, created_at) VALUES (?1, ?2, 'ready', 1)",
            &[&id, "again"],
        );
        assert!(is_taken_task_id(&taken), "{taken:?}");
        b.write(|tx| {
            exec_unchecked(
                tx,
                "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)",
                crate::db::params![id, other],
            )
        })
        .unwrap();
        let link = insert(
            "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)",
            &[&id, &other],
        );
        assert!(!is_taken_task_id(&link), "{link:?}");
        assert_eq!(
            b.get_task(&id).unwrap().title,
            "first",
            "nothing was written"
        );
    }
}
