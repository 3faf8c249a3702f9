//! Triage by an agent (`kanban decompose ID --with PROFILE`, `kanban specify ID --with PROFILE`):
//! the prompt that shows a profile's agent the card and the profiles it may route work to, one
//! turn of that agent outside any task's identity (as a cron job runs: it may read the board, it
//! acts as no worker), and the JSON found in its answer. Applying the answer is the board's
//! `decompose` / `specify`, which check it whole; an answer that is not what was asked for
//! changes nothing.

use std::panic::AssertUnwindSafe;
use std::path::Path;

use serde_json::{Map, Value};

use crate::agent::{self, Request, TurnExit};
use crate::board::{NewChild, Task, WorkspaceSpec};
use crate::config::Config;
use crate::identity;

/// Why the agent gave no usable answer (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum TriageError {
    #[error("profile `{profile}`: {message}")]
    Agent { profile: String, message: String },
    #[error("the agent of profile `{profile}` answered no JSON {wanted}; nothing was changed")]
    NoJson {
        profile: String,
        wanted: &'static str,
    },
    #[error("the answer of profile `{profile}`'s agent: {message}; nothing was changed")]
    BadAnswer { profile: String, message: String },
}

/// The profiles a triage agent may route to: each name with what it is for.
pub fn profile_lines(config: &Config) -> String {
    if config.profiles.is_empty() {
        return "- (no profiles are defined: leave `assignee` out)\n".to_owned();
    }
    config
        .profiles
        .iter()
        .map(|(name, p)| {
            let what = p.description.as_deref().unwrap_or("no description");
            format!("- `{name}` ({}): {what}\n", p.agent)
        })
        .collect()
}

fn card(task: &Task) -> String {
    format!(
        "Task {}: {}\n\n{}\n",
        task.id,
        task.title,
        task.body.as_deref().unwrap_or("(no body)")
    )
}

/// The prompt of `decompose --with`: split the card into 2 to 6 children routed to profiles.
pub fn decomposition_prompt(task: &Task, config: &Config) -> String {
    format!(
        "You are triaging a kanban card into a small graph of child tasks that agents will \
         work on in parallel where they can.\n\n# The card\n\n{}\n# The profiles\n\n{}\n\
         # What to answer\n\nSplit the card into 2 to 6 child tasks. Answer with JSON only, no \
         prose: {{\"children\": [{{\"title\": \"…\", \"body\": \"…\", \"assignee\": \"PROFILE\", \
         \"parents\": [0]}}]}}. `parents` lists the indices (in this list, from 0) of the \
         children a child must wait for; leave it out for a child that can start at once. Pick \
         each assignee from the profiles above by what it is for. Each body says what done \
         means for that child.\n",
        card(task),
        profile_lines(config)
    )
}

/// The prompt of `specify --with`: flesh the card out into a task an agent can do.
pub fn specification_prompt(task: &Task, config: &Config) -> String {
    format!(
        "You are specifying a rough kanban card so that an agent can do it without asking.\n\n\
         # The card\n\n{}\n# The profiles\n\n{}\n# What to answer\n\nAnswer with JSON only, no \
         prose: {{\"title\": \"…\", \"body\": \"…\", \"assignee\": \"PROFILE\"}}: a precise \
         title, a body that states the goal, the constraints and what done means, and the \
         profile best suited to it (leave `assignee` out if none is).\n",
        card(task),
        profile_lines(config)
    )
}

/// A string field of child `i` (absent or null: `None`).
fn text_field(i: usize, o: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("child {i}: `{key}` must be a string")),
    }
}

/// Child `i` of the list: its fields, its parents, its workspace (read as `create` reads it).
fn child(i: usize, value: &Value) -> Result<NewChild, String> {
    const KEYS: [&str; 9] = [
        "title",
        "body",
        "assignee",
        "parents",
        "workspace",
        "branch",
        "base",
        "workspace_kind",
        "workspace_path",
    ];
    let Value::Object(o) = value else {
        return Err(format!("child {i} is not a JSON object"));
    };
    if let Some(key) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "child {i}: unknown key `{key}` (known: {})",
            KEYS.join(", ")
        ));
    }
    let title = text_field(i, o, "title")?
        .ok_or_else(|| format!("child {i} has no `title`; every child needs one"))?;
    let parents = match o.get("parents") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ps)) => ps
            .iter()
            .map(|p| p.as_u64().and_then(|p| usize::try_from(p).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                format!("child {i}: `parents` must be indices into the list (0, 1, …)")
            })?,
        Some(_) => return Err(format!("child {i}: `parents` must be a list of indices")),
    };
    Ok(NewChild {
        title,
        body: text_field(i, o, "body")?,
        assignee: text_field(i, o, "assignee")?,
        parents,
        workspace: workspace(i, o)?,
    })
}

/// The workspace keys of child `i` as `create --workspace/--branch/--base` reads them; the
/// branch and base are checked by the board, inside the decomposition's transaction.
fn workspace(i: usize, o: &Map<String, Value>) -> Result<Option<WorkspaceSpec>, String> {
    // The original's keys: `workspace_kind` with an optional `workspace_path`.
    let original = match (
        text_field(i, o, "workspace_kind")?,
        text_field(i, o, "workspace_path")?,
    ) {
        (Some(kind), Some(path)) => Some(format!("{kind}:{path}")),
        (Some(kind), None) => Some(kind),
        (None, Some(_)) => {
            return Err(format!(
                "child {i}: `workspace_path` needs a `workspace_kind`"
            ));
        }
        (None, None) => None,
    };
    let kind = match (text_field(i, o, "workspace")?, original) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "child {i}: give `workspace` or `workspace_kind`/`workspace_path`, not both"
            ));
        }
        (one, other) => one.or(other),
    };
    let branch = text_field(i, o, "branch")?;
    let base = text_field(i, o, "base")?;
    if kind.is_none() && branch.is_none() && base.is_none() {
        return Ok(None);
    }
    let (kind, path) = match kind {
        Some(value) => {
            let (kind, path) =
                crate::workspace::parse_flag(&value).map_err(|e| format!("child {i}: {e}"))?;
            (Some(kind), path)
        }
        None => (None, None),
    };
    let spec = WorkspaceSpec {
        kind,
        path,
        branch,
        base,
    };
    spec.check_branch_needs_worktree()
        .map_err(|e| format!("child {i}: {e}"))?;
    if let Some(path) = &spec.path {
        crate::workspace::check_path(spec.kind(), path).map_err(|e| format!("child {i}: {e}"))?;
    }
    Ok(Some(spec))
}

/// A decomposition's children from their JSON list (`decompose --children`, an agent's
/// answer): each child's fields, parents and workspace checked, the whole list read before the
/// board is touched. The error names the child and the key.
pub fn parse_children(text: &str) -> Result<Vec<NewChild>, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("the children are not valid JSON ({e})"))?;
    let Value::Array(items) = value else {
        return Err("the children must be a JSON list of objects".to_owned());
    };
    items.iter().enumerate().map(|(i, v)| child(i, v)).collect()
}

/// The children in an agent's answer to [`decomposition_prompt`]: a `{"children": [...]}`
/// object or a bare list, anywhere in the answer ([`json_in`]).
pub fn children_from_answer(answer: &str, profile: &str) -> Result<Vec<NewChild>, TriageError> {
    let list = match json_in(answer, '{') {
        Some(Value::Object(mut o)) if o.contains_key("children") => o.remove("children"),
        _ => json_in(answer, '['),
    };
    let Some(list) = list else {
        return Err(TriageError::NoJson {
            profile: profile.to_owned(),
            wanted: "list of children",
        });
    };
    parse_children(&list.to_string()).map_err(|message| TriageError::BadAnswer {
        profile: profile.to_owned(),
        message,
    })
}

/// Runs one turn of `profile`'s agent on `prompt` outside any task's identity and returns its
/// final response; a failed or refused turn is an error naming the profile.
pub fn ask(
    root: &Path,
    config: &Config,
    profile: &str,
    prompt: &str,
) -> Result<String, TriageError> {
    let fail = |message: String| TriageError::Agent {
        profile: profile.to_owned(),
        message,
    };
    let settings = config
        .profile(profile, root)
        .map_err(|e| fail(crate::error_chain(&e)))?;
    let scope = identity::non_dispatcher_owned_context();
    let turn = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut agent = agent::build(settings)?;
        agent.run(&Request {
            prompt,
            script: prompt,
            workdir: None,
            goal: false,
        })
    }));
    drop(scope);
    let reply = match turn {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return Err(fail(crate::error_chain(&e))),
        Err(_) => return Err(fail("the agent panicked".to_owned())),
    };
    match reply.exit {
        TurnExit::Success => Ok(reply.final_response),
        other => Err(fail(format!(
            "the agent's turn failed ({other:?}): {}",
            agent::tail(reply.output.trim(), 400)
        ))),
    }
}

/// The JSON value in an agent's answer: the whole answer, a fenced ```json block, or the text
/// from the first `opener` to the last matching closer (`[`…`]` or `{`…`}`).
pub fn json_in(answer: &str, opener: char) -> Option<serde_json::Value> {
    let closer = if opener == '[' { ']' } else { '}' };
    let trimmed = answer.trim();
    let fenced = trimmed
        .split("```")
        .skip(1)
        .step_by(2)
        .map(|block| block.trim_start_matches("json").trim());
    let spanned = trimmed
        .find(opener)
        .zip(trimmed.rfind(closer))
        .filter(|(a, b)| a < b)
        .map(|(a, b)| &trimmed[a..=b]);
    std::iter::once(trimmed)
        .chain(fenced)
        .chain(spanned)
        .find_map(|text| serde_json::from_str(text).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_bare_fenced_or_inside_prose() {
        assert_eq!(json_in("[1, 2]", '['), Some(serde_json::json!([1, 2])));
        assert_eq!(
            json_in("Here:\n```json\n{\"a\": 1}\n```\nDone.", '{'),
            Some(serde_json::json!({"a": 1}))
        );
        assert_eq!(
            json_in("sure! {\"children\": []} hope it helps", '{'),
            Some(serde_json::json!({"children": []}))
        );
        assert_eq!(json_in("no json here", '{'), None);
        assert_eq!(json_in("{broken", '{'), None);
    }
}
