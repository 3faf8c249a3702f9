//! A board's `pre_claim` policy, kept where the original keeps it: the `pre_claim` key of the
//! board's settings file (`board.json`, [`super::meta`]), `{"command": [absolute argv…],
//! "timeout_seconds": 1..=60}`. The dispatcher runs it before every claim and promotion
//! (`dispatch::policy`).
//!
//! Reading fails closed: a settings file that cannot be read or parsed, or a `pre_claim` value
//! that is not a valid policy, is [`BoardPolicy::Invalid`] — every claim is denied and the
//! reason is shown — never "no policy". Only a file without the key (or no file) is
//! [`BoardPolicy::None`].

use std::path::Path;

use serde_json::Value;

use super::meta::{meta_path, read_object, write_object};
use super::{HomeError, Result, validate_slug};

/// The settings key.
pub const PRE_CLAIM_KEY: &str = "pre_claim";
/// The bounds of `timeout_seconds`, as the original's.
pub const TIMEOUT_RANGE: std::ops::RangeInclusive<f64> = 1.0..=60.0;

/// A valid `pre_claim` policy: the operator's command and how long it may take.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PreClaim {
    /// Fixed argv; the first is an absolute path. Run without a shell.
    pub command: Vec<String>,
    pub timeout_seconds: f64,
}

/// What a board's settings say about `pre_claim`.
#[derive(Debug, Clone, PartialEq)]
pub enum BoardPolicy {
    /// No `pre_claim` key: claims are not gated.
    None,
    Valid(PreClaim),
    /// The file or the key is malformed: every claim and promotion is denied, for this reason.
    Invalid(String),
}

impl BoardPolicy {
    /// Whether claims on the board are gated (a valid or an invalid policy).
    pub fn gates(&self) -> bool {
        !matches!(self, BoardPolicy::None)
    }
}

/// Checks a `pre_claim` value the original's way: exactly `command` and `timeout_seconds`; the
/// command a non-empty list of non-empty strings without NUL whose first is an absolute path;
/// the timeout a finite number from 1 to 60.
pub fn validate(value: &Value) -> std::result::Result<PreClaim, String> {
    let Some(object) = value.as_object() else {
        return Err("pre_claim is not an object".to_owned());
    };
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    if keys != ["command", "timeout_seconds"] {
        return Err(format!(
            "pre_claim needs exactly `command` and `timeout_seconds` (it has: {})",
            keys.join(", ")
        ));
    }
    let command: Option<Vec<String>> = object["command"].as_array().and_then(|args| {
        args.iter()
            .map(|a| {
                a.as_str()
                    .filter(|s| !s.is_empty() && !s.contains('\0'))
                    .map(str::to_owned)
            })
            .collect()
    });
    let command = match command {
        Some(c) if !c.is_empty() && Path::new(&c[0]).is_absolute() => c,
        _ => {
            return Err(
                "pre_claim command must be a fixed argv (a list of non-empty strings) whose \
                 first is an absolute path"
                    .to_owned(),
            );
        }
    };
    let timeout_seconds = match &object["timeout_seconds"] {
        Value::Number(n) => n.as_f64().filter(|t| t.is_finite()),
        _ => None,
    };
    match timeout_seconds {
        Some(t) if TIMEOUT_RANGE.contains(&t) => Ok(PreClaim {
            command,
            timeout_seconds: t,
        }),
        _ => Err("pre_claim timeout_seconds must be a number from 1 to 60".to_owned()),
    }
}

/// Board `slug`'s policy (see the module doc: fails closed).
pub fn read(root: &Path, slug: &str) -> BoardPolicy {
    if let Err(e) = validate_slug(slug) {
        return BoardPolicy::Invalid(e.to_string());
    }
    let map = match read_object(&meta_path(root, slug)) {
        Ok(map) => map,
        Err(e) => return BoardPolicy::Invalid(e.to_string()),
    };
    match map.get(PRE_CLAIM_KEY) {
        None => BoardPolicy::None,
        Some(value) => match validate(value) {
            Ok(policy) => BoardPolicy::Valid(policy),
            Err(why) => BoardPolicy::Invalid(why),
        },
    }
}

/// Sets (`Some`, after [`validate`]) or removes (`None`) board `slug`'s `pre_claim` policy;
/// every other key of the file is kept. A malformed settings file is an error, left as it is.
pub fn set(root: &Path, slug: &str, policy: Option<&PreClaim>) -> Result<()> {
    validate_slug(slug)?;
    let path = meta_path(root, slug);
    let mut map = read_object(&path)?;
    match policy {
        Some(p) => {
            let value = serde_json::json!({
                "command": p.command,
                "timeout_seconds": p.timeout_seconds,
            });
            validate(&value).map_err(|message| HomeError::BoardMeta {
                path: path.clone(),
                message,
            })?;
            map.insert(PRE_CLAIM_KEY.to_owned(), value);
        }
        None => {
            map.remove(PRE_CLAIM_KEY);
        }
    }
    write_object(&path, map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_exact_object_with_an_absolute_command_and_a_bounded_timeout_is_valid() {
        let ok = validate(&json!({"command": ["/bin/true", "-x"], "timeout_seconds": 5}));
        assert_eq!(
            ok,
            Ok(PreClaim {
                command: vec!["/bin/true".into(), "-x".into()],
                timeout_seconds: 5.0
            })
        );
        for bad in [
            json!("x"),
            json!({"command": ["/bin/true"]}),
            json!({"command": ["/bin/true"], "timeout_seconds": 5, "extra": 1}),
            json!({"command": [], "timeout_seconds": 5}),
            json!({"command": ["true"], "timeout_seconds": 5}),
            json!({"command": ["/bin/true", ""], "timeout_seconds": 5}),
            json!({"command": ["/bin/true", 3], "timeout_seconds": 5}),
            json!({"command": "/bin/true", "timeout_seconds": 5}),
            json!({"command": ["/bin/true"], "timeout_seconds": 0.5}),
            json!({"command": ["/bin/true"], "timeout_seconds": 61}),
            json!({"command": ["/bin/true"], "timeout_seconds": "5"}),
        ] {
            assert!(validate(&bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn a_malformed_file_gates_every_claim_and_no_key_is_no_policy() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read(root.path(), "default"), BoardPolicy::None);
        let path = meta_path(root.path(), "default");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{not json").unwrap();
        assert!(matches!(
            read(root.path(), "default"),
            BoardPolicy::Invalid(_)
        ));
        std::fs::write(
            &path,
            r#"{"pre_claim": {"command": ["rel"], "timeout_seconds": 2}}"#,
        )
        .unwrap();
        assert!(
            matches!(read(root.path(), "default"), BoardPolicy::Invalid(w) if w.contains("absolute"))
        );
        std::fs::write(&path, r#"{"name": "kept"}"#).unwrap();
        let policy = PreClaim {
            command: vec!["/bin/true".into()],
            timeout_seconds: 3.0,
        };
        set(root.path(), "default", Some(&policy)).unwrap();
        assert_eq!(read(root.path(), "default"), BoardPolicy::Valid(policy));
        set(root.path(), "default", None).unwrap();
        assert_eq!(read(root.path(), "default"), BoardPolicy::None);
        assert!(std::fs::read_to_string(&path).unwrap().contains("kept"));
    }
}
