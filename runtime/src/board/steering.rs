//! Per-task steering (issue 28 item 2): the model, provider and reasoning effort a task pins for
//! its agent, and the skills loaded into its prompt, stored in the original's columns
//! (`model_override`, `provider_override`, `reasoning_effort`, `skills`). The checks are the
//! original's: a provider needs a model; a reasoning level is one of [`REASONING_LEVELS`] or
//! `none`; skill names are stripped and deduplicated, and a name holding a comma or naming a
//! toolset is refused. `set_model` is one compare-and-swap with an `edited` event; it takes
//! effect at the task's next dispatch.

use crate::db::{Tx, params};

use super::error::{BoardError, Result};
use super::events::{Event, append_event};
use super::model::Status;
use super::outcome::{Outcome, Refusal};
use super::rows::{cas, load_task};
use super::store::Board;

/// The reasoning levels the original accepts (its `VALID_REASONING_EFFORTS`), besides `none`
/// (thinking off).
pub const REASONING_LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "xhigh"];

/// Names of the original's toolsets: they configure a profile, never a task, and an agent that
/// confuses the two usually passes several, so every one found is named at once.
pub const TOOLSET_NAMES: [&str; 22] = [
    "web",
    "search",
    "browser",
    "terminal",
    "file",
    "code_execution",
    "vision",
    "image_gen",
    "tts",
    "skills",
    "memory",
    "session_search",
    "todo",
    "clarify",
    "delegation",
    "cronjob",
    "messaging",
    "homeassistant",
    "moa",
    "rl",
    "kanban",
    "safe",
];

/// A model override as given: `None` for both clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelOverride {
    pub model: Option<String>,
    pub provider: Option<String>,
    /// `None`: inherit the profile's own effort.
    pub reasoning: Option<String>,
}

impl ModelOverride {
    /// Stripped and checked: blanks become `None`, a provider without a model and an unknown
    /// reasoning level are refused.
    pub fn checked(&self) -> Result<ModelOverride> {
        let clean = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let model = clean(&self.model);
        let provider = clean(&self.provider);
        if provider.is_some() && model.is_none() {
            return Err(BoardError::ProviderWithoutModel);
        }
        Ok(ModelOverride {
            model,
            provider,
            reasoning: normalize_reasoning_effort(self.reasoning.as_deref())?,
        })
    }
}

/// The original's `normalize_reasoning_effort`: case-insensitive, blank is `None` (inherit),
/// `none` or one of [`REASONING_LEVELS`], anything else refused (a typo must not quietly hand
/// the task back to the profile's default).
pub fn normalize_reasoning_effort(value: Option<&str>) -> Result<Option<String>> {
    let v = value.unwrap_or("").trim().to_lowercase();
    if v.is_empty() {
        return Ok(None);
    }
    if v == "none" || REASONING_LEVELS.contains(&v.as_str()) {
        return Ok(Some(v));
    }
    Err(BoardError::InvalidReasoning {
        value: value.unwrap_or("").to_owned(),
    })
}

/// The original's `_normalize_task_skills`: stripped, blanks dropped, duplicates collapsed in
/// order; a comma in a name is refused (it would land in one argv slot) and toolset names are
/// refused all at once. `None` stays `None` (no skills asked for is not an empty list).
pub fn normalize_skills(skills: Option<&[String]>) -> Result<Option<Vec<String>>> {
    let Some(skills) = skills else {
        return Ok(None);
    };
    let mut cleaned: Vec<String> = Vec::new();
    let mut toolsets = Vec::new();
    for raw in skills {
        let name = raw.trim();
        if name.is_empty() {
            continue;
        }
        if name.contains(',') {
            return Err(BoardError::SkillWithComma {
                name: name.to_owned(),
            });
        }
        if TOOLSET_NAMES.contains(&name.to_lowercase().as_str()) {
            toolsets.push(format!("{name:?}").replace('"', "'"));
            continue;
        }
        if name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return Err(BoardError::SkillNotAName {
                name: name.to_owned(),
            });
        }
        if !cleaned.iter().any(|c| c == name) {
            cleaned.push(name.to_owned());
        }
    }
    if !toolsets.is_empty() {
        let (verb, noun) = if toolsets.len() == 1 {
            ("is a", "toolset name")
        } else {
            ("are", "toolset names")
        };
        return Err(BoardError::SkillIsToolset {
            names: format!("{} {verb} {noun}", toolsets.join(", ")),
        });
    }
    Ok(Some(cleaned))
}

/// What `set_model` changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelSet {
    pub task_id: String,
    pub model_override: Option<String>,
    pub provider_override: Option<String>,
    pub reasoning_effort: Option<String>,
}

fn set_model_in(
    tx: &Tx<'_>,
    id: &str,
    over: &ModelOverride,
    now: i64,
) -> Result<Outcome<ModelSet>> {
    let task = load_task(tx, id)?;
    if matches!(task.status, Status::Archived) {
        return Ok(Outcome::Refused(Refusal::WrongStatus {
            task_id: id.to_owned(),
            status: task.status,
            expected: "not archived",
        }));
    }
    let applied = cas(
        tx,
        "UPDATE tasks SET model_override = ?2, provider_override = ?3, reasoning_effort = ?4 \
         WHERE id = ?1 AND status = ?5",
        params![
            id,
            over.model,
            over.provider,
            over.reasoning,
            task.status.as_str()
        ],
    )?;
    if !applied {
        return Ok(Outcome::Refused(Refusal::Raced {
            task_id: id.to_owned(),
        }));
    }
    append_event(
        tx,
        id,
        None,
        &Event::Edited {
            fields: vec![
                "model_override".to_owned(),
                "provider_override".to_owned(),
                "reasoning_effort".to_owned(),
            ],
            result_len: None,
            summary: None,
        },
        now,
    )?;
    Ok(Outcome::Done(ModelSet {
        task_id: id.to_owned(),
        model_override: over.model.clone(),
        provider_override: over.provider.clone(),
        reasoning_effort: over.reasoning.clone(),
    }))
}

impl Board {
    /// Whether run `run_id` of task `id` is a reviewer's run (claimed from `review`).
    pub fn is_review_run(&self, id: &str, run_id: i64) -> Result<bool> {
        Ok(super::rows::retry_status_for_run(self.conn(), id, Some(run_id))? == Status::Review)
    }

    /// Pins (or, with no model, clears) the model, provider and reasoning effort of task `id`
    /// (the original's `set_model_override` and `set_reasoning_effort`); checked as
    /// [`ModelOverride::checked`]. A running task keeps its agent; the next dispatch uses it.
    pub fn set_model(&self, id: &str, over: &ModelOverride, now: i64) -> Result<Outcome<ModelSet>> {
        let over = over.checked()?;
        self.write(|tx| set_model_in(tx, id, &over, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn skills_are_stripped_deduplicated_and_checked() {
        let got = normalize_skills(Some(&names(&["  a  ", "a", "", "b"]))).unwrap();
        assert_eq!(got, Some(names(&["a", "b"])));
        assert_eq!(normalize_skills(None).unwrap(), None);
        let err = normalize_skills(Some(&names(&["a,b"]))).unwrap_err();
        assert!(err.to_string().contains("cannot contain a comma"), "{err}");
        let err = normalize_skills(Some(&names(&["web", "browser", "x"]))).unwrap_err();
        assert!(
            err.to_string()
                .contains("'web', 'browser' are toolset names"),
            "{err}"
        );
        assert!(normalize_skills(Some(&names(&["../x"]))).is_err());
    }

    #[test]
    fn reasoning_levels_are_the_original_s() {
        assert_eq!(
            normalize_reasoning_effort(Some(" HIGH "))
                .unwrap()
                .as_deref(),
            Some("high")
        );
        assert_eq!(
            normalize_reasoning_effort(Some("none")).unwrap().as_deref(),
            Some("none")
        );
        assert_eq!(normalize_reasoning_effort(Some("")).unwrap(), None);
        assert!(normalize_reasoning_effort(Some("extreme")).is_err());
    }

    #[test]
    fn a_provider_needs_a_model() {
        let over = ModelOverride {
            provider: Some("p".into()),
            ..ModelOverride::default()
        };
        assert!(matches!(
            over.checked(),
            Err(BoardError::ProviderWithoutModel)
        ));
    }
}
