//! Checks of the worker turn-loop keys: `[dispatch] turn_recovery_backoff_seconds` and the goal
//! keys of a profile (`goal_max_turns`, `judge`). `[dispatch] turn_recovery` is not refused: the
//! worker clamps it to [`TURN_RECOVERY_MAX`].

use super::{Config, Problem, check_float, check_int};

/// The largest `[dispatch] turn_recovery` that takes effect.
pub(crate) const TURN_RECOVERY_MAX: u32 = 10;
/// `[profiles.X] goal_max_turns` and `kanban create --max-turns`.
pub(crate) const GOAL_MAX_TURNS: (u32, u32) = (1, 1000);
/// One entry of `[dispatch] turn_recovery_backoff_seconds`.
pub(crate) const BACKOFF_SECONDS: (f64, f64) = (0.0, 3600.0);

pub(super) fn check(config: &Config) -> Result<(), Problem> {
    let backoff = &config.dispatch.turn_recovery_backoff_seconds;
    if backoff.is_empty() {
        return Err(Problem {
            key: "[dispatch] turn_recovery_backoff_seconds".to_owned(),
            value: "[]".to_owned(),
            expected: "expected at least one number of seconds (the last one repeats)".to_owned(),
        });
    }
    for value in backoff {
        check_float(
            "[dispatch] turn_recovery_backoff_seconds",
            *value,
            BACKOFF_SECONDS,
        )?;
    }
    for (name, profile) in &config.profiles {
        if let Some(turns) = profile.goal_max_turns {
            check_int(
                &format!("[profiles.{name}] goal_max_turns"),
                turns,
                GOAL_MAX_TURNS,
                "of turns ",
            )?;
        }
        if !profile.judge.is_empty() && profile.judge[0].trim().is_empty() {
            return Err(Problem {
                key: format!("[profiles.{name}] judge"),
                value: format!("{:?}", profile.judge),
                expected: "expected the judge's argv, its program first (or no judge key)"
                    .to_owned(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;

    fn err(text: &str) -> String {
        Config::parse(text, Path::new("k.toml"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn turn_keys_parse_with_their_defaults() {
        let c = Config::parse(
            "[profiles.g]\nagent = \"command\"\ncommand = [\"a\"]\ngoal = true\njudge = [\"j\", \"-x\"]\n",
            Path::new("k.toml"),
        )
        .unwrap();
        assert_eq!(c.dispatch.turn_recovery, 3);
        assert_eq!(c.dispatch.turn_recovery_backoff_seconds, [15.0, 45.0, 90.0]);
        assert!(c.profiles["g"].goal);
        assert_eq!(c.profiles["g"].judge, ["j", "-x"]);
        assert_eq!(c.profiles["g"].goal_max_turns, None);
    }

    #[test]
    fn bad_turn_keys_are_refused_naming_the_key() {
        let e = err("[dispatch]\nturn_recovery_backoff_seconds = []\n");
        assert!(e.contains("turn_recovery_backoff_seconds"), "{e}");
        let e = err("[dispatch]\nturn_recovery_backoff_seconds = [1.0, -2.0]\n");
        assert!(e.contains("turn_recovery_backoff_seconds = -2"), "{e}");
        let e = err("[profiles.g]\nagent = \"builtin:complete\"\ngoal_max_turns = 0\n");
        assert!(e.contains("[profiles.g] goal_max_turns"), "{e}");
        let e = err("[profiles.g]\nagent = \"builtin:complete\"\njudge = [\"\"]\n");
        assert!(e.contains("[profiles.g] judge"), "{e}");
        let e = err("[dispatch]\nturn_recovery = -1\n");
        assert!(e.contains("turn_recovery"), "{e}");
    }
}
