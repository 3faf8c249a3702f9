//! A board's name: the slug rule every place that names a board checks (`kanban.toml`, the home's
//! layout, a `kanban.run` request). Pure text; no file, no environment.

/// A slug that breaks the rule, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid board slug {slug:?}: {reason}; a slug is 1-64 characters of a-z, 0-9, `_` and `-`, starting with a letter or digit (e.g. `default`, `team-2`)"
)]
pub struct InvalidSlug {
    pub slug: String,
    pub reason: &'static str,
}

/// Checks `slug` against `^[a-z0-9][a-z0-9_-]{0,63}$`.
pub fn validate(slug: &str) -> Result<(), InvalidSlug> {
    let bad = |reason| {
        Err(InvalidSlug {
            slug: slug.to_owned(),
            reason,
        })
    };
    let bytes = slug.as_bytes();
    let Some(first) = bytes.first() else {
        return bad("it is empty");
    };
    if bytes.len() > 64 {
        return bad("it is longer than 64 characters");
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return bad("it must start with a lower-case letter or a digit");
    }
    if slug.contains('/') || slug.contains('\\') || slug.contains("..") {
        return bad("it must not contain path separators or `..`");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
    {
        return bad("it may only contain lower-case letters, digits, `_` and `-`");
    }
    Ok(())
}
