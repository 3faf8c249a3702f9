//! Recipes: portable task-graph templates (`kanban recipe validate|show|run|export`, and the
//! built-in `swarm`). A recipe is a TOML file of tasks (title, body, assignee, priority,
//! workspace, branch, skills) whose `parents` name other tasks of the recipe by `key`, with
//! `{{variables}}` declared under `[vars]` and given with `--set name=value` (or their default).
//!
//! This module owns the format: parsing (unknown keys refused), checking (keys, parents,
//! variables, the graph's shape through [`crate::board::check_children`]), rendering into
//! [`GraphTask`]s for [`Board::create_graph`] (one transaction), and exporting an existing graph
//! back into a recipe. It never writes a board itself.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::board::{Board, BoardError, GraphTask, NewChild, NewTask, Task, WorkspaceSpec};
use crate::workspace::{self, Kind};

/// The most tasks `export` follows from its starting task.
pub const EXPORT_LIMIT: usize = 1000;

/// A recipe file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, Var>,
    #[serde(rename = "task", default)]
    pub tasks: Vec<RecipeTask>,
}

/// A variable: `{{name}}` in a task's text; required unless it has a default.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Var {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// One task of a recipe.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeTask {
    /// The name other tasks of the recipe use in their `parents`.
    pub key: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i64,
    /// As `create --workspace` takes it: `scratch`, `dir:PATH`, `worktree`, `worktree:PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Why a recipe was refused (nothing was created).
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("not a recipe: {0}")]
    Parse(String),
    #[error("invalid recipe: {0}")]
    Invalid(String),
    #[error(transparent)]
    Board(#[from] BoardError),
}

fn invalid(problem: impl Into<String>) -> RecipeError {
    RecipeError::Invalid(problem.into())
}

impl Recipe {
    /// Parses and checks a recipe's text.
    pub fn parse(text: &str) -> Result<Recipe, RecipeError> {
        let recipe: Recipe = toml::from_str(text).map_err(|e| RecipeError::Parse(e.to_string()))?;
        recipe.check()?;
        Ok(recipe)
    }

    /// The recipe as TOML.
    pub fn to_toml(&self) -> Result<String, RecipeError> {
        toml::to_string(self).map_err(|e| RecipeError::Parse(e.to_string()))
    }

    /// The checks that need no values: a name, at least one task, unique non-blank keys,
    /// parents that name other tasks, variables that are declared and well named, and a graph
    /// with no cycle.
    pub fn check(&self) -> Result<(), RecipeError> {
        if self.name.trim().is_empty() {
            return Err(invalid("the recipe has no name"));
        }
        if self.tasks.is_empty() {
            return Err(invalid("the recipe has no [[task]]"));
        }
        for name in self.vars.keys() {
            if !is_var_name(name) {
                return Err(invalid(format!(
                    "`{name}` is not a variable name (letters, digits, `_` and `-`, not first)"
                )));
            }
        }
        let index = self.index()?;
        for task in &self.tasks {
            for text in task.texts() {
                for used in placeholders(text)? {
                    if !self.vars.contains_key(&used) {
                        return Err(invalid(format!(
                            "task `{}` uses {{{{{used}}}}}, which [vars] does not declare",
                            task.key
                        )));
                    }
                }
            }
            for parent in &task.parents {
                if !index.contains_key(parent.as_str()) {
                    return Err(invalid(format!(
                        "task `{}` names parent `{parent}`, which is no task of the recipe",
                        task.key
                    )));
                }
            }
        }
        let shape: Vec<NewChild> = self
            .tasks
            .iter()
            .map(|t| NewChild {
                title: t.key.clone(),
                parents: t.parents.iter().map(|p| index[p.as_str()]).collect(),
                ..NewChild::default()
            })
            .collect();
        crate::board::check_children(&shape).map_err(|e| match e {
            BoardError::InvalidDecomposition { problem } => invalid(problem.replace(
                "children",
                "tasks (numbered in the order the recipe lists them)",
            )),
            other => RecipeError::Board(other),
        })?;
        Ok(())
    }

    /// Each task's position by key; a blank or repeated key is refused.
    fn index(&self) -> Result<HashMap<&str, usize>, RecipeError> {
        let mut index = HashMap::new();
        for (i, task) in self.tasks.iter().enumerate() {
            if task.key.trim().is_empty() {
                return Err(invalid(format!("task {i} has no key")));
            }
            if index.insert(task.key.as_str(), i).is_some() {
                return Err(invalid(format!("two tasks have the key `{}`", task.key)));
            }
        }
        Ok(index)
    }

    /// The values of the variables: `sets` over the defaults; a `--set` of an undeclared
    /// variable or a variable left without a value is refused.
    pub fn values(
        &self,
        sets: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, RecipeError> {
        if let Some(unknown) = sets.keys().find(|k| !self.vars.contains_key(*k)) {
            return Err(invalid(format!(
                "--set {unknown}: the recipe declares no such variable (it has: {})",
                self.var_list()
            )));
        }
        let mut values = BTreeMap::new();
        for (name, var) in &self.vars {
            match sets.get(name).or(var.default.as_ref()) {
                Some(value) => {
                    values.insert(name.clone(), value.clone());
                }
                None => {
                    return Err(invalid(format!(
                        "variable `{name}` has no default; give it with --set {name}=VALUE"
                    )));
                }
            }
        }
        Ok(values)
    }

    fn var_list(&self) -> String {
        if self.vars.is_empty() {
            "none".to_owned()
        } else {
            self.vars.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }

    /// The tasks with their variables replaced, ready for [`Board::create_graph`], each with its
    /// key; `author` is their `created_by`.
    pub fn render(
        &self,
        sets: &BTreeMap<String, String>,
        author: Option<&str>,
    ) -> Result<Vec<(String, GraphTask)>, RecipeError> {
        self.check()?;
        let values = self.values(sets)?;
        let index = self.index()?;
        let fill = |text: &str| substitute(text, &values);
        let mut out = Vec::with_capacity(self.tasks.len());
        for task in &self.tasks {
            let workspace = match &task.workspace {
                None => WorkspaceSpec::default(),
                Some(value) => {
                    let (kind, path) = workspace::parse_flag(&fill(value))
                        .map_err(|e| invalid(format!("task `{}`: workspace: {e}", task.key)))?;
                    WorkspaceSpec {
                        kind: Some(kind),
                        path,
                        branch: task.branch.as_deref().map(fill),
                        base: None,
                    }
                }
            };
            if task.workspace.is_none() && task.branch.is_some() {
                return Err(invalid(format!(
                    "task `{}` names a branch but no worktree workspace",
                    task.key
                )));
            }
            let title = fill(&task.title);
            if title.trim().is_empty() {
                return Err(invalid(format!("task `{}` has an empty title", task.key)));
            }
            let new = NewTask {
                title,
                body: task.body.as_deref().map(fill),
                assignee: task
                    .assignee
                    .as_deref()
                    .map(fill)
                    .filter(|a| !a.trim().is_empty()),
                priority: task.priority,
                created_by: author.map(str::to_owned),
                skills: Some(task.skills.clone()).filter(|s| !s.is_empty()),
                workspace,
                ..NewTask::default()
            };
            let parents = task.parents.iter().map(|p| index[p.as_str()]).collect();
            out.push((task.key.clone(), GraphTask { new, parents }));
        }
        Ok(out)
    }
}

impl RecipeTask {
    fn texts(&self) -> impl Iterator<Item = &str> {
        [
            Some(self.title.as_str()),
            self.body.as_deref(),
            self.assignee.as_deref(),
            self.workspace.as_deref(),
            self.branch.as_deref(),
        ]
        .into_iter()
        .flatten()
    }
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The variable names `text` uses as `{{name}}`; an unclosed `{{` or a bad name is refused.
fn placeholders(text: &str) -> Result<BTreeSet<String>, RecipeError> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(invalid(format!("an unclosed `{{{{` in `{text}`")));
        };
        let name = after[..end].trim();
        if !is_var_name(name) {
            return Err(invalid(format!(
                "`{{{{{name}}}}}` in `{text}` is no variable name"
            )));
        }
        names.insert(name.to_owned());
        rest = &after[end + 2..];
    }
    Ok(names)
}

/// `text` with each `{{name}}` replaced by its value (checked beforehand by [`Recipe::check`]).
fn substitute(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let name = after[..end].trim();
                out.push_str(values.get(name).map_or("", String::as_str));
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// `name=value` pairs of `--set`.
pub fn parse_sets(sets: &[String]) -> Result<BTreeMap<String, String>, RecipeError> {
    let mut out = BTreeMap::new();
    for set in sets {
        let Some((name, value)) = set.split_once('=') else {
            return Err(invalid(format!("--set `{set}`: expected NAME=VALUE")));
        };
        if out
            .insert(name.trim().to_owned(), value.to_owned())
            .is_some()
        {
            return Err(invalid(format!("--set {name} is given twice")));
        }
    }
    Ok(out)
}

/// The graph `id` belongs to (every task linked to it, through parents and children, up to
/// [`EXPORT_LIMIT`]) as a recipe named `name`: titles, bodies, assignees, priorities,
/// workspaces (a worktree without its path, which belongs to the task that ran in it; a branch
/// only when it is not the task's own `wt/<id>`), skills and links. Keys are `task-1`, … in an
/// order where parents come first.
pub fn export(board: &Board, id: &str, name: &str) -> Result<Recipe, RecipeError> {
    let mut seen: Vec<Task> = Vec::new();
    let mut queue = VecDeque::from([board.get_task(id)?.id]);
    let mut known = BTreeSet::new();
    while let Some(next) = queue.pop_front() {
        if !known.insert(next.clone()) {
            continue;
        }
        if known.len() > EXPORT_LIMIT {
            return Err(invalid(format!(
                "the graph of {id} holds more than {EXPORT_LIMIT} tasks"
            )));
        }
        for linked in board
            .parents(&next)?
            .into_iter()
            .chain(board.children(&next)?)
        {
            queue.push_back(linked.id);
        }
        seen.push(board.get_task(&next)?);
    }
    // A canonical order (tasks created in one transaction share their time; ids are random), so
    // exporting the same graph twice, or a graph made from an export, gives the same recipe.
    seen.sort_by(|a, b| (a.created_at, &a.title, &a.id).cmp(&(b.created_at, &b.title, &b.id)));
    let position: HashMap<String, usize> = seen
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.clone(), i))
        .collect();
    let mut parents: Vec<Vec<usize>> = Vec::with_capacity(seen.len());
    for task in &seen {
        let mut ps: Vec<usize> = board
            .parents(&task.id)?
            .iter()
            .filter_map(|p| position.get(&p.id).copied())
            .collect();
        ps.sort_unstable();
        parents.push(ps);
    }
    let shape: Vec<NewChild> = parents
        .iter()
        .map(|ps| NewChild {
            title: "t".to_owned(),
            parents: ps.clone(),
            ..NewChild::default()
        })
        .collect();
    let order = crate::board::check_children(&shape)?;
    let key_of: HashMap<usize, String> = order
        .iter()
        .enumerate()
        .map(|(n, &i)| (i, format!("task-{}", n + 1)))
        .collect();
    let tasks = order
        .iter()
        .map(|&i| {
            export_task(
                &seen[i],
                &key_of[&i],
                parents[i].iter().map(|p| key_of[p].clone()).collect(),
            )
        })
        .collect();
    Ok(Recipe {
        name: name.to_owned(),
        description: Some(format!("exported from the graph of {id}")),
        vars: BTreeMap::new(),
        tasks,
    })
}

fn export_task(task: &Task, key: &str, parents: Vec<String>) -> RecipeTask {
    let workspace = match Kind::from_column(&task.workspace_kind) {
        Some(Kind::Dir) => task
            .workspace_path
            .as_ref()
            .map(|p| format!("dir:{}", PathBuf::from(p).display())),
        Some(Kind::Worktree) => Some("worktree".to_owned()),
        _ => None,
    };
    let own_branch = format!("wt/{}", task.id);
    let branch = task
        .branch_name
        .clone()
        .filter(|b| *b != own_branch && workspace.as_deref() == Some("worktree"));
    let skills = task
        .skills
        .as_ref()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    RecipeTask {
        key: key.to_owned(),
        title: task.title.clone(),
        body: task.body.clone(),
        assignee: task.assignee.clone(),
        parents,
        priority: task.priority,
        workspace,
        branch,
        skills,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_and_replaced_and_bad_ones_refused() {
        let values = BTreeMap::from([("feature".to_owned(), "login".to_owned())]);
        assert_eq!(
            substitute("Spec {{feature}} / {{ feature }}", &values),
            "Spec login / login"
        );
        assert_eq!(
            placeholders("a {{x}} b {{ y-1 }}").unwrap(),
            BTreeSet::from(["x".to_owned(), "y-1".to_owned()])
        );
        assert!(placeholders("a {{x").is_err());
        assert!(placeholders("a {{1x}}").is_err());
        assert!(placeholders("a {{}}").is_err());
    }

    #[test]
    fn sets_need_an_equals_sign_and_one_value_each() {
        assert_eq!(parse_sets(&["a=b=c".to_owned()]).unwrap()["a"], "b=c");
        assert!(parse_sets(&["a".to_owned()]).is_err());
        assert!(parse_sets(&["a=1".to_owned(), "a=2".to_owned()]).is_err());
    }
}
