//! What can go wrong finding the kanban root or a board in it, or recording where a board lives.
//! Every URL quoted is scrubbed of its password. Messages name files and commands, never a flag
//! of the command line (the CLI adds those where it prints).

use std::path::PathBuf;

use crate::db::target::TargetError;

/// A failure of the home's layout: the root, a slug, the `current` file, a board's URL file.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error(transparent)]
    InvalidSlug(#[from] crate::board::slug::InvalidSlug),

    #[error(
        "board `{slug}` does not exist (no {path}); create it with `kanban boards create {slug}`"
    )]
    BoardNotFound { slug: String, path: PathBuf },

    #[error(
        "board `{slug}` already exists at {path}; nothing was changed (`kanban --board {slug} list` shows it)"
    )]
    BoardExists { slug: String, path: PathBuf },

    #[error("cannot find the kanban root: set HERMES_KANBAN_HOME, HERMES_HOME or HOME")]
    NoRoot,

    #[error("cannot {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    Target(#[from] TargetError),

    #[error(
        "{path} holds a password; kanban records PostgreSQL URLs without one. Remove it from the file and put it in ~/.pgpass (or PGPASSWORD)"
    )]
    PasswordInFile { path: PathBuf },

    #[error(
        "the URL given carries a password, which would be visible to every user of this host (`ps`) and recorded in a file; give it without the password and put the password in ~/.pgpass (`host:port:database:user:password`, mode 0600), PGPASSFILE or PGPASSWORD, or in the board's `[boards.<slug>] url` of kanban.toml"
    )]
    PasswordOnCommandLine,

    #[error(
        "HERMES_KANBAN_DB carries a PostgreSQL password; kanban never hands a password in its variables. Give the URL without it and the password through ~/.pgpass, PGPASSFILE or PGPASSWORD"
    )]
    PasswordInEnvironment,

    #[error(
        "board `{slug}` has two different PostgreSQL URLs: {config_url} in {config_path} and {file_url} in {file_path}; remove one of them"
    )]
    Conflict {
        slug: String,
        config_url: String,
        config_path: PathBuf,
        file_url: String,
        file_path: PathBuf,
    },

    #[error("cannot read {path}")]
    ReadUrlFile {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot {action} {path}")]
    WriteUrlFile {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },

    #[error(transparent)]
    Config(#[from] Box<crate::config::ConfigError>),

    #[error("{path} is not a JSON object of board settings ({message}); fix or remove the file")]
    BoardMeta { path: PathBuf, message: String },

    #[error(
        "board `{slug}`'s default workdir {} is not usable: {source}",
        dir.display()
    )]
    DefaultWorkdir {
        slug: String,
        dir: PathBuf,
        #[source]
        source: crate::workspace::ResolveError,
    },

    #[error("cannot rename board `{slug}`; nothing was changed")]
    BadName {
        slug: String,
        #[source]
        source: BadName,
    },

    /// A board of the home that could not be opened or read.
    #[error(transparent)]
    Board(#[from] crate::board::BoardError),
}

/// The longest display name a board may have, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// Why `meta::set_name` refused a display name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadName {
    #[error("a board's display name cannot be empty")]
    Empty,
    #[error("a board's display name is at most {MAX_NAME_CHARS} characters (this one has {0})")]
    TooLong(usize),
    #[error("a board's display name is one line of printable text (no control characters)")]
    Control,
}

/// Result alias of the home.
pub type Result<T, E = HomeError> = std::result::Result<T, E>;
