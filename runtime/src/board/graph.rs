//! Task graphs out of triage: `decompose` (a root fanned out into children with their sibling
//! links, in one transaction) and `specify` (a triage task fleshed out by hand and moved on).
//!
//! A decomposition is checked whole before anything is written ([`check_children`]: titles,
//! parent indices, Kahn's cycle check, no worktree path shared), then written in the caller's one
//! write transaction; any later failure (a child's workspace refused, a lost compare-and-swap
//! on the root) rolls the whole of it back, so a board never holds half a graph.

use crate::db::{OptionalExtension, Tx, params};

use super::create::create_task_in;
use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::input::{NewTask, WorkspaceSpec, normalize_assignee};
use super::model::{Status, Task};
use super::operator::comment_in;
use super::outcome::{Decomposed, Outcome, Refusal, Specified};
use super::rows::{cas, exec, load_task, promote_if_ready_in};
use super::store::Board;
use crate::workspace::Kind;

/// One child of a decomposition, as given: `parents` are indices into the same list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewChild {
    pub title: String,
    pub body: Option<String>,
    pub assignee: Option<String>,
    pub parents: Vec<usize>,
    /// `None`: the root's kind (and its path, for a `dir:` root; a worktree path is never
    /// inherited, so siblings never share a checkout).
    pub workspace: Option<WorkspaceSpec>,
}

/// What `decompose` is asked for besides the children.
#[derive(Debug, Clone, Copy, Default)]
pub struct Decomposition<'a> {
    /// The profile the root is handed to (the orchestrator that wakes when every child is done);
    /// `None` keeps its assignee.
    pub root_assignee: Option<&'a str>,
    /// Promote the children that wait on no sibling to `ready` (else all stay in `todo`).
    pub promote: bool,
    /// Who decomposes: the children's `created_by` and the author of the root's comment.
    pub author: Option<&'a str>,
}

fn invalid(problem: String) -> BoardError {
    BoardError::InvalidDecomposition { problem }
}

/// The shape of a decomposition, checked without a board: at least one child, every title
/// given, every parent index in range and not the child itself, no cycle among siblings
/// (Kahn's algorithm: a cycle would leave every child on it in `todo` forever) and no two
/// children naming the same worktree path. Returns the children in an order where each comes
/// after its parents.
pub fn check_children(children: &[NewChild]) -> Result<Vec<usize>> {
    if children.is_empty() {
        return Err(invalid("the list of children is empty".to_owned()));
    }
    let n = children.len();
    let mut worktrees: Vec<(&std::path::Path, usize)> = Vec::new();
    for (i, child) in children.iter().enumerate() {
        if child.title.trim().is_empty() {
            return Err(invalid(format!("child {i} has no title")));
        }
        for &p in &child.parents {
            if p >= n {
                return Err(invalid(format!(
                    "child {i} names parent {p}, but the children are numbered 0 to {}",
                    n - 1
                )));
            }
            if p == i {
                return Err(invalid(format!("child {i} names itself as its parent")));
            }
        }
        if let Some(ws) = &child.workspace
            && ws.kind() == Kind::Worktree
            && let Some(path) = &ws.path
        {
            if let Some((_, j)) = worktrees.iter().find(|(q, _)| *q == path.as_path()) {
                return Err(invalid(format!(
                    "children {j} and {i} share the worktree {}; siblings run at once, so each \
                     needs its own (leave the path out for a fresh <repo>/.worktrees/<id> each)",
                    path.display()
                )));
            }
            worktrees.push((path, i));
        }
    }
    let mut waiting: Vec<usize> = children
        .iter()
        .map(|c| {
            let mut ps = c.parents.clone();
            ps.sort_unstable();
            ps.dedup();
            ps.len()
        })
        .collect();
    let mut order: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut next = 0;
    while next < order.len() {
        let done = order[next];
        next += 1;
        for (i, child) in children.iter().enumerate() {
            if child.parents.contains(&done) {
                waiting[i] -= 1;
                if waiting[i] == 0 {
                    order.push(i);
                }
            }
        }
    }
    if order.len() != n {
        let stuck: Vec<String> = (0..n)
            .filter(|i| !order.contains(i))
            .map(|i| i.to_string())
            .collect();
        return Err(invalid(format!(
            "the children's parents form a cycle (children {} wait on each other)",
            stuck.join(", ")
        )));
    }
    Ok(order)
}

/// The workspace of a child: its own, else the root's kind, with the root's path only for a
/// `dir:` root (a worktree path is never inherited).
fn child_workspace(root: &Task, child: &NewChild) -> WorkspaceSpec {
    if let Some(ws) = &child.workspace {
        return ws.clone();
    }
    let kind = Kind::from_column(&root.workspace_kind);
    let path = match kind {
        Some(Kind::Dir) => root.workspace_path.as_ref().map(std::path::PathBuf::from),
        _ => None,
    };
    WorkspaceSpec {
        kind,
        path,
        branch: None,
        base: None,
    }
}

/// Decomposes the triage task `root_id` (the original's `decompose_triage_task`): creates the
/// children in `todo` (tenant inherited from the root, `created` with `from_decompose_of`), links
/// the siblings as their `parents` say, links the root under every child (it wakes when the last
/// one is done), moves the root `triage` → `todo` (handing it to `root_assignee`), comments and
/// appends `decomposed` on the root, and (with `promote`) promotes the children that wait on
/// no sibling. Refused when the root is not in triage or was decomposed before.
pub(crate) fn decompose_in(
    tx: &Tx<'_>,
    root_id: &str,
    children: &[NewChild],
    how: &Decomposition<'_>,
    now: i64,
) -> Result<Outcome<Decomposed>> {
    let order = check_children(children)?;
    if how.root_assignee.is_some_and(|a| a.trim().is_empty()) {
        return Err(BoardError::BlankAssignee);
    }
    let root = load_task(tx, root_id)?;
    let decomposed_before = tx
        .prepare_cached(
            "SELECT 1 FROM task_events WHERE task_id = ?1 AND kind = 'decomposed' LIMIT 1",
        )?
        .query_row([root_id], |_| Ok(()))
        .optional()?
        .is_some();
    if decomposed_before {
        return Ok(Outcome::Refused(Refusal::AlreadyDecomposed {
            task_id: root_id.to_owned(),
        }));
    }
    if root.status != Status::Triage {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: root_id.to_owned(),
            status: root.status,
            expected: "in triage",
        }));
    }
    let author = how.author.map(str::trim).filter(|a| !a.is_empty());
    let mut ids: Vec<Option<String>> = vec![None; children.len()];
    for &i in &order {
        let child = &children[i];
        let parents = child
            .parents
            .iter()
            .filter_map(|&p| ids[p].clone())
            .collect();
        let new = NewTask {
            title: child.title.clone(),
            body: child.body.clone(),
            assignee: child.assignee.clone(),
            parents,
            created_by: Some(author.unwrap_or("decomposer").to_owned()),
            tenant: root.tenant.clone(),
            workspace: child_workspace(&root, child),
            hold_in_todo: true,
            from_decompose_of: Some(root_id.to_owned()),
            ..NewTask::default()
        };
        ids[i] = Some(create_task_in(tx, &new, now)?.id);
    }
    let child_ids: Vec<String> = ids.into_iter().flatten().collect();
    for child in &child_ids {
        exec(
            tx,
            "INSERT INTO task_links (parent_id, child_id) VALUES (?1, ?2)",
            params![child, root_id],
        )?;
        append_event(
            tx,
            root_id,
            None,
            &Event::Linked {
                parent: child.clone(),
                child: root_id.to_owned(),
            },
            now,
        )?;
    }
    let root_assignee = how.root_assignee.and_then(|a| normalize_assignee(Some(a)));
    let assignee = root_assignee.clone().or(root.assignee.clone());
    if !cas(
        tx,
        "UPDATE tasks SET status = 'todo', assignee = ?2 WHERE id = ?1 AND status = 'triage'",
        params![root_id, assignee],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: root_id.to_owned(),
        }));
    }
    comment_in(
        tx,
        root_id,
        author.unwrap_or("decomposer"),
        &format!(
            "Decomposed into {}. Root will wake when all children complete.",
            child_ids.join(", ")
        ),
        now,
    )?;
    append_event(
        tx,
        root_id,
        None,
        &Event::Decomposed {
            child_ids: child_ids.clone(),
            root_assignee: root_assignee.clone(),
        },
        now,
    )?;
    let mut child_statuses = Vec::with_capacity(child_ids.len());
    for id in &child_ids {
        let promoted = how.promote && promote_if_ready_in(tx, id, now)?;
        child_statuses.push(if promoted {
            Status::Ready
        } else {
            Status::Todo
        });
    }
    Ok(Outcome::Done(Decomposed {
        task_id: root_id.to_owned(),
        child_ids,
        child_statuses,
        root_status: Status::Todo,
        root_assignee: assignee,
    }))
}

/// The fields `specify` may change.
#[derive(Debug, Clone, Default)]
pub struct Specification {
    pub title: Option<String>,
    pub body: Option<String>,
    pub assignee: Option<String>,
    /// Who specifies: with one, a comment by them names the fields that changed (none when
    /// nothing changed), as the original's audit comment.
    pub author: Option<String>,
}

/// Specifies a triage task by hand (the original's `specify_triage_task`): the title, body and
/// assignee given replace the task's, it moves `triage` → `todo` with a `specified` event naming
/// the fields that changed, and (as the original's promotion right after) on to `ready` when no
/// parent is unfinished. Refused when the task is not in triage; a blank title is an error.
pub(crate) fn specify_in(
    tx: &Tx<'_>,
    id: &str,
    spec: &Specification,
    now: i64,
) -> Result<Outcome<Specified>> {
    if spec.title.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(BoardError::BlankTitle);
    }
    if spec
        .assignee
        .as_deref()
        .is_some_and(|a| a.trim().is_empty())
    {
        return Err(BoardError::BlankAssignee);
    }
    let task = load_task(tx, id)?;
    if task.status != Status::Triage {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "in triage",
        }));
    }
    let title = spec
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| *t != task.title);
    let body = spec
        .body
        .as_deref()
        .filter(|b| *b != task.body.as_deref().unwrap_or(""));
    let assignee =
        normalize_assignee(spec.assignee.as_deref()).filter(|a| task.assignee.as_ref() != Some(a));
    let mut changed_fields = Vec::new();
    if title.is_some() {
        changed_fields.push("title".to_owned());
    }
    if body.is_some() {
        changed_fields.push("body".to_owned());
    }
    if assignee.is_some() {
        changed_fields.push("assignee".to_owned());
    }
    if !cas(
        tx,
        "UPDATE tasks SET status = 'todo', title = COALESCE(?2, title), body = COALESCE(?3, body), \
         assignee = COALESCE(?4, assignee) WHERE id = ?1 AND status = 'triage'",
        params![id, title, body, assignee],
    )? {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    let author = spec
        .author
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty());
    if let Some(author) = author.filter(|_| !changed_fields.is_empty()) {
        comment_in(
            tx,
            id,
            author,
            &format!(
                "Specified — updated {} and promoted to todo.",
                changed_fields.join(", ")
            ),
            now,
        )?;
    }
    append_event(
        tx,
        id,
        None,
        &Event::Specified {
            changed_fields: changed_fields.clone(),
        },
        now,
    )?;
    let status = if promote_if_ready_in(tx, id, now)? {
        Status::Ready
    } else {
        Status::Todo
    };
    Ok(Outcome::Done(Specified {
        task_id: id.to_owned(),
        changed_fields,
        status,
    }))
}

/// One task of a graph created at once ([`Board::create_graph`]: a recipe, a swarm): `parents`
/// are indices into the same list, the rest is what `create` takes.
#[derive(Debug, Clone, Default)]
pub struct GraphTask {
    pub new: NewTask,
    pub parents: Vec<usize>,
}

/// Creates every task of `tasks` with its links in one write transaction, parents first
/// ([`check_children`]'s order and checks), and returns their ids in the order given. A task
/// whose parents are all new waits in `todo`; one with none is `ready` (as `create` decides).
pub(crate) fn create_graph_in(tx: &Tx<'_>, tasks: &[GraphTask], now: i64) -> Result<Vec<String>> {
    let shape: Vec<NewChild> = tasks
        .iter()
        .map(|t| NewChild {
            title: t.new.title.clone(),
            parents: t.parents.clone(),
            workspace: Some(t.new.workspace.clone()).filter(|w| w.kind.is_some()),
            ..NewChild::default()
        })
        .collect();
    let order = check_children(&shape)?;
    let mut ids: Vec<Option<String>> = vec![None; tasks.len()];
    for i in order {
        let mut new = tasks[i].new.clone();
        new.parents
            .extend(tasks[i].parents.iter().filter_map(|&p| ids[p].clone()));
        ids[i] = Some(create_task_in(tx, &new, now)?.id);
    }
    Ok(ids.into_iter().flatten().collect())
}

impl Board {
    /// See [`create_graph_in`]: all of it, or nothing.
    pub fn create_graph(&self, tasks: &[GraphTask], now: i64) -> Result<Vec<String>> {
        self.retry_taken_id(|| self.write(|tx| create_graph_in(tx, tasks, now)))
    }

    /// See [`decompose_in`]: all of it in one write transaction, or nothing.
    pub fn decompose(
        &self,
        root_id: &str,
        children: &[NewChild],
        how: &Decomposition<'_>,
        now: i64,
    ) -> Result<Outcome<Decomposed>> {
        self.retry_taken_id(|| self.write(|tx| decompose_in(tx, root_id, children, how, now)))
    }

    /// See [`specify_in`].
    pub fn specify(&self, id: &str, spec: &Specification, now: i64) -> Result<Outcome<Specified>> {
        self.write(|tx| specify_in(tx, id, spec, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(title: &str, parents: &[usize]) -> NewChild {
        NewChild {
            title: title.to_owned(),
            parents: parents.to_vec(),
            ..NewChild::default()
        }
    }

    #[test]
    fn children_come_after_their_parents_whatever_the_order_given() {
        let order =
            check_children(&[child("c", &[1, 2]), child("a", &[]), child("b", &[1])]).unwrap();
        let pos = |i| order.iter().position(|&x| x == i).unwrap();
        assert!(pos(1) < pos(2) && pos(2) < pos(0), "{order:?}");
    }

    #[test]
    fn a_cycle_an_index_out_of_range_a_self_parent_and_a_blank_title_are_refused() {
        let cases = [
            (vec![child("a", &[1]), child("b", &[0])], "cycle"),
            (vec![child("a", &[2]), child("b", &[])], "numbered 0 to 1"),
            (vec![child("a", &[0])], "itself"),
            (vec![child(" ", &[])], "no title"),
            (vec![], "empty"),
        ];
        for (children, says) in cases {
            let err = check_children(&children).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn two_children_naming_one_worktree_are_refused() {
        let ws = WorkspaceSpec {
            kind: Some(Kind::Worktree),
            path: Some("/repo/wt".into()),
            ..WorkspaceSpec::default()
        };
        let mut a = child("a", &[]);
        a.workspace = Some(ws.clone());
        let mut b = child("b", &[]);
        b.workspace = Some(ws);
        let err = check_children(&[a, b]).unwrap_err().to_string();
        assert!(err.contains("share the worktree /repo/wt"), "{err}");
    }
}
