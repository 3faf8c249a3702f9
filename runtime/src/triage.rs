//! Triage by an agent (`kanban decompose ID --with PROFILE`, `kanban specify ID --with PROFILE`):
//! the prompt that shows a profile's agent the card and the profiles it may route work to, one
//! turn of that agent outside any task's identity (as a cron job runs: it may read the board, it
//! acts as no worker), and the JSON found in its answer. Applying the answer is the board's
//! `decompose` / `specify`, which check it whole; an answer that is not what was asked for
//! changes nothing.

use std::panic::AssertUnwindSafe;
use std::path::Path;

use crate::agent::{self, Request, TurnExit};
use crate::board::Task;
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
