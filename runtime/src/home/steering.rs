//! A task's steering resolved for its run (issue 28 item 2): the model, provider and reasoning
//! effort the task pins, and its skills resolved to files of the profile's skills folder
//! (`<root>/skills/NAME.md` unless the profile names another `skills_dir`). A review run also
//! loads [`REVIEW_SKILL`] when that file exists (the original's review lane force-loads it).
//!
//! [`task_steering`] is the one function an agent integration calls to learn what a task asks
//! for; a `command` profile receives it through the `{model}`, `{provider}` and `{reasoning}`
//! placeholders of its argv ([`TaskSteering::expand_argv`]), and every agent through the skills
//! prepended to its prompt ([`TaskSteering::prompt_preamble`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::board::Task;

/// The skill a review run loads when the skills folder has it.
pub const REVIEW_SKILL: &str = "sdlc-review";

/// The reason a task is blocked with when none of its requested skills exists.
pub const SKILLS_UNAVAILABLE: &str = "kanban_skills_unavailable";

/// One skill found on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    pub name: String,
    pub path: PathBuf,
}

/// What a task asks of its agent for one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TaskSteering {
    pub model: Option<String>,
    pub provider: Option<String>,
    pub reasoning: Option<String>,
    /// The skills the task asked for, in order.
    pub requested: Vec<String>,
    /// The skills found, in order (the review skill, when loaded, first).
    pub skills: Vec<Skill>,
    /// The requested skills not found in the folder.
    pub missing: Vec<String>,
    /// Where the skills were looked for.
    pub skills_dir: PathBuf,
}

/// The skills a task's `skills` column asks for (a JSON array of names; anything else is none).
pub fn requested_skills(task: &Task) -> Vec<String> {
    task.skills
        .as_ref()
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The steering of `task` for a run whose skills live in `skills_dir`; `review` for a reviewer's
/// run (which loads [`REVIEW_SKILL`] when present).
pub fn task_steering(task: &Task, skills_dir: &Path, review: bool) -> TaskSteering {
    let requested = requested_skills(task);
    let file = |name: &str| skills_dir.join(format!("{name}.md"));
    let mut skills = Vec::new();
    if review && file(REVIEW_SKILL).is_file() && !requested.iter().any(|r| r == REVIEW_SKILL) {
        skills.push(Skill {
            name: REVIEW_SKILL.to_owned(),
            path: file(REVIEW_SKILL),
        });
    }
    let mut missing = Vec::new();
    for name in &requested {
        let path = file(name);
        if path.is_file() {
            skills.push(Skill {
                name: name.clone(),
                path,
            });
        } else {
            missing.push(name.clone());
        }
    }
    TaskSteering {
        model: task.model_override.clone(),
        provider: task.provider_override.clone(),
        reasoning: task.reasoning_effort.clone(),
        requested,
        skills,
        missing,
        skills_dir: skills_dir.to_owned(),
    }
}

impl TaskSteering {
    /// The task asked for skills and not one of them exists: it must not run without them.
    pub fn all_skills_missing(&self) -> bool {
        !self.requested.is_empty() && self.missing.len() == self.requested.len()
    }

    /// The value of placeholder `name` (`model`, `provider`, `reasoning`), if set.
    pub fn placeholder(&self, name: &str) -> Option<&str> {
        match name {
            "model" => self.model.as_deref(),
            "provider" => self.provider.as_deref(),
            "reasoning" => self.reasoning.as_deref(),
            _ => None,
        }
    }

    /// `argv` with `{model}`, `{provider}` and `{reasoning}` filled in; an argument holding a
    /// placeholder whose value is unset is left out (write `--model={model}` to drop the flag
    /// with it). The program (`argv[0]`) is never dropped.
    pub fn expand_argv(&self, argv: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(argv.len());
        'args: for (i, arg) in argv.iter().enumerate() {
            let mut value = arg.clone();
            for name in ["model", "provider", "reasoning"] {
                let key = format!("{{{name}}}");
                if value.contains(&key) {
                    match self.placeholder(name) {
                        Some(v) => value = value.replace(&key, v),
                        None if i > 0 => continue 'args,
                        None => value = value.replace(&key, ""),
                    }
                }
            }
            out.push(value);
        }
        out
    }

    /// The text put before the worker's prompt: each skill found (its file, under a heading
    /// naming it), and a note naming the requested skills that were not found. Empty when the
    /// task has no skills.
    pub fn prompt_preamble(&self) -> String {
        let mut text = String::new();
        for skill in &self.skills {
            let body = std::fs::read_to_string(&skill.path).unwrap_or_default();
            text.push_str(&format!(
                "## Skill: {}\n\n{}\n\n",
                skill.name,
                body.trim_end()
            ));
        }
        if !self.missing.is_empty() {
            text.push_str(&format!(
                "Note: requested skills not available (not in {}): {}\n\n",
                self.skills_dir.display(),
                self.missing.join(", ")
            ));
        }
        if !text.is_empty() {
            text.push_str("---\n\n");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steering(model: Option<&str>) -> TaskSteering {
        TaskSteering {
            model: model.map(str::to_owned),
            reasoning: Some("high".into()),
            ..TaskSteering::default()
        }
    }

    #[test]
    fn unset_placeholders_drop_their_argument() {
        let argv: Vec<String> = [
            "agent",
            "--model={model}",
            "--provider={provider}",
            "-r",
            "{reasoning}",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            steering(Some("m1")).expand_argv(&argv),
            ["agent", "--model=m1", "-r", "high"]
        );
        assert_eq!(steering(None).expand_argv(&argv), ["agent", "-r", "high"]);
    }
}
