//! Which store a board lives in: a SQLite file (every board, unless told otherwise) or a
//! PostgreSQL database named by a `postgres://` / `postgresql://` URL.
//!
//! **Where the URL lives** (the README's "A board on PostgreSQL", in this order):
//! 1. `[boards.<slug>] url = "postgres://…"` in `<root>/kanban.toml`. The file is the user's, so a
//!    password written in that URL is used (prefer `~/.pgpass`: `kanban.toml` is often shared);
//! 2. `<root>/kanban/boards/<slug>/postgres.url` ([`URL_FILE`]), written by `kanban boards create
//!    SLUG --url URL` and `kanban boards migrate SLUG --to URL`: one URL **without** a password
//!    (both commands refuse a URL that carries one: a command line is visible to every user of
//!    the host in `ps`, and a file kanban writes should hold no secret);
//! 3. else the board is a SQLite file at its usual place.
//!
//! When both name a URL for one board and they differ (ignoring a password), resolution fails
//! naming both places: a board never silently splits in two.
//!
//! **A worker's board.** The dispatcher hands a worker of a PostgreSQL board the slug in
//! `HERMES_KANBAN_BOARD` and the URL *without its password* in `HERMES_KANBAN_DB` (the key that
//! pins a SQLite board's file pins a PostgreSQL board's database; [`BoardLocation::env_db`]).
//! `HERMES_KANBAN_DB` holding a password is refused. The worker gets the password the way every
//! other process does ([`PgTarget::connect_config`]).
//!
//! **The password** comes from libpq's sources, in libpq's order: the URL (from `kanban.toml`;
//! for a URL pinned by `HERMES_KANBAN_DB`, the `kanban.toml` entry of the same board and database),
//! `PGPASSWORD`, the file `PGPASSFILE` or else `~/.pgpass` — read through
//! [`crate::identity::settings`] and handed to [`kanban_pgwire::Config::resolve_password`]. A
//! [`PgTarget`] prints (`Display`, `Debug`) only the redacted URL, and every error of this module
//! quotes URLs through [`scrub_url`], so no password reaches a message, a log line, an event or
//! `--json` output.
//!
//! [`BoardLocation::env_db`]: super::BoardLocation::env_db

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kanban_pgwire::Config as PgConfig;

use crate::identity::settings;

/// File name, in a board's folder `<root>/kanban/boards/<slug>/`, of the PostgreSQL URL that
/// `kanban boards create --url` and `kanban boards migrate` record.
pub const URL_FILE: &str = "postgres.url";

/// How long a connection to a PostgreSQL board may take (the TCP connect, then each read of the
/// start-up and authentication exchange) when its URL sets no `connect_timeout`: a server that
/// does not answer fails the command (or the dispatcher's tick, which opens the home's other
/// PostgreSQL boards for the host-wide cap) after this long instead of stalling it. A URL's own
/// `connect_timeout=SECONDS` wins (`0` waits as long as the operating system lets it).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// True when `location` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// Where a board's PostgreSQL URL was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlSource {
    /// `[boards.<slug>] url` in this `kanban.toml`.
    Config(PathBuf),
    /// The board folder's [`URL_FILE`].
    File(PathBuf),
    /// `HERMES_KANBAN_DB` (a worker's pinned board).
    Pinned,
    /// A command-line option (`--url`, `--to`).
    Argument(&'static str),
}

impl fmt::Display for UrlSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlSource::Config(path) => write!(f, "{}", path.display()),
            UrlSource::File(path) => write!(f, "{}", path.display()),
            UrlSource::Pinned => f.write_str("HERMES_KANBAN_DB"),
            UrlSource::Argument(option) => f.write_str(option),
        }
    }
}

/// A PostgreSQL board's database: its connection settings (the URL as found, a password from
/// `kanban.toml` included) and where they came from. `Display` and `Debug` show only the
/// redacted URL.
#[derive(Clone, PartialEq, Eq)]
pub struct PgTarget {
    config: PgConfig,
    source: UrlSource,
    /// The URL sets `connect_timeout` itself (else [`DEFAULT_CONNECT_TIMEOUT`] applies).
    timeout_given: bool,
}

impl fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTarget")
            .field("url", &self.config.redacted())
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.config.redacted())
    }
}

impl PgTarget {
    /// Parses `url` (from `source`); the error quotes it without its password.
    pub fn parse(url: &str, source: UrlSource) -> Result<PgTarget, LocationError> {
        if !is_postgres_url(url) {
            return Err(LocationError::NotPostgresUrl {
                url: scrub_url(url),
                source_: source,
            });
        }
        let config = PgConfig::parse(url).map_err(|e| LocationError::BadUrl {
            url: scrub_url(url),
            source_: source.clone(),
            source: e,
        })?;
        let timeout_given = url
            .split_once('?')
            .is_some_and(|(_, query)| query.split('&').any(|p| p.starts_with("connect_timeout=")));
        Ok(PgTarget {
            config,
            source,
            timeout_given,
        })
    }

    /// The URL without its password: what logs, events, `--json` output and a worker's
    /// `HERMES_KANBAN_DB` carry.
    pub fn redacted(&self) -> String {
        self.config.redacted()
    }

    /// Where the URL was found.
    pub fn source(&self) -> &UrlSource {
        &self.source
    }

    /// True when the URL as found carries a password (only `kanban.toml` may).
    pub fn has_password(&self) -> bool {
        self.config.has_password()
    }

    /// The settings as found, without a password from the environment.
    pub fn config(&self) -> &PgConfig {
        &self.config
    }

    /// The settings to connect with: the password filled in from libpq's sources (the URL,
    /// `PGPASSWORD`, `PGPASSFILE` or `~/.pgpass`), read through [`settings`], and
    /// [`DEFAULT_CONNECT_TIMEOUT`] unless the URL sets `connect_timeout`. The store opens its
    /// connections with this.
    pub fn connect_config(&self) -> Result<PgConfig, kanban_pgwire::Error> {
        let mut config = self.config.clone();
        if !self.timeout_given {
            config.set_connect_timeout(Some(DEFAULT_CONNECT_TIMEOUT));
        }
        let home = settings::user_home();
        config.resolve_password(
            settings::pg_password().as_deref(),
            settings::pg_passfile().as_deref(),
            home.as_deref(),
        )?;
        Ok(config)
    }

    /// True when both name the same database (ignoring passwords).
    pub fn redacted_eq(&self, other: &PgTarget) -> bool {
        self.config.redacted() == other.config.redacted()
    }
}

/// Which store holds a board.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per board location, made once per command; boxing would only add an indirection"
)]
pub enum Store {
    /// The SQLite file at `BoardLocation::db_path`.
    Sqlite,
    /// A PostgreSQL database.
    Postgres(PgTarget),
}

impl Store {
    /// `sqlite` or `postgres` (the `store` field of `kanban boards --json`).
    pub fn kind(&self) -> &'static str {
        match self {
            Store::Sqlite => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }
}

/// The board folder's [`URL_FILE`] (the default board's too: `<root>/kanban/boards/default/`).
pub fn url_file(root: &Path, slug: &str) -> PathBuf {
    super::paths::boards_dir(root).join(slug).join(URL_FILE)
}

/// The URL recorded in the board folder, if there is one.
pub fn read_url_file(root: &Path, slug: &str) -> Result<Option<PgTarget>, LocationError> {
    let path = url_file(root, slug);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(LocationError::ReadUrlFile { path, source }),
    };
    let url = text.trim();
    let target = PgTarget::parse(url, UrlSource::File(path.clone()))?;
    if target.has_password() {
        return Err(LocationError::PasswordInFile { path });
    }
    Ok(Some(target))
}

/// Records `target` (its redacted URL: never a password) in the board folder, atomically (a
/// temporary file renamed into place), creating the folder if needed.
pub fn write_url_file(
    root: &Path,
    slug: &str,
    target: &PgTarget,
) -> Result<PathBuf, LocationError> {
    let path = url_file(root, slug);
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| LocationError::WriteUrlFile {
            action,
            path,
            source,
        }
    };
    let dir = path.parent().unwrap_or(root);
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let temp = dir.join(format!(".{URL_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&temp, format!("{}\n", target.redacted())).map_err(io("write", &temp))?;
    std::fs::rename(&temp, &path).map_err(|source| {
        let _ = std::fs::remove_file(&temp);
        LocationError::WriteUrlFile {
            action: "rename into place",
            path: path.clone(),
            source,
        }
    })?;
    Ok(path)
}

/// `text` with the password of every URL in it replaced by `***`: the user-info password
/// (`scheme://user:PASSWORD@host`) and a `password=` parameter. For messages that quote what a
/// user wrote.
pub fn scrub_url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        out.push_str(&rest[..at + 3]);
        rest = &rest[at + 3..];
        // The authority ends at the first `/`, `?`, `#` or whitespace; its user info at the last
        // `@` inside it.
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == '"')
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        if let Some(at) = authority.rfind('@') {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&authority[at..]);
        } else {
            out.push_str(authority);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    scrub_password_params(&out)
}

/// `password=VALUE` (in a query string or a libpq key/value string) with the value masked.
fn scrub_password_params(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("password=") {
        let boundary_ok = at == 0
            || matches!(
                rest.as_bytes()[at - 1],
                b'?' | b'&' | b' ' | b'\t' | b'"' | b'\''
            );
        out.push_str(&rest[..at + "password=".len()]);
        rest = &rest[at + "password=".len()..];
        if boundary_ok {
            let end = rest
                .find(|c: char| c == '&' || c == '"' || c == '\'' || c.is_whitespace())
                .unwrap_or(rest.len());
            if end > 0 {
                out.push_str("***");
            }
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// Failures finding or recording a board's store. Every URL quoted is scrubbed of its password.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    #[error(
        "{url} (in {source_}) is not a PostgreSQL URL; a PostgreSQL board's location starts with postgres:// or postgresql:// (a SQLite board needs none)"
    )]
    NotPostgresUrl { url: String, source_: UrlSource },

    #[error("invalid PostgreSQL URL {url} (in {source_})")]
    BadUrl {
        url: String,
        source_: UrlSource,
        source: kanban_pgwire::Error,
    },

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
}

impl From<LocationError> for super::BoardError {
    fn from(e: LocationError) -> Self {
        super::BoardError::Location(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_scrubbed_from_any_text() {
        for (text, secret) in [
            ("postgres://u:Hunter2@h:5432/db", "Hunter2"),
            ("x postgresql://u:p%40ss@h/db?sslmode=disable y", "p%40ss"),
            ("postgres://u@h/db?password=Zq9&sslmode=prefer", "Zq9"),
            ("url = \"postgres://u:S3cr3t@[::1]:5/d\"", "S3cr3t"),
            ("host=h password=Kw7 user=u", "Kw7"),
            ("postgres://u:a@b@h/db", "a@b"),
        ] {
            let scrubbed = scrub_url(text);
            assert!(!scrubbed.contains(secret), "{text} -> {scrubbed}");
            assert!(scrubbed.contains("***"), "{text} -> {scrubbed}");
        }
        assert_eq!(scrub_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(scrub_url("no url here"), "no url here");
    }

    #[test]
    fn a_target_prints_only_its_redacted_url() {
        let t = PgTarget::parse(
            "postgresql://kb:Pw-Xy-77@db.example:6543/board",
            UrlSource::Pinned,
        )
        .unwrap();
        assert!(t.has_password());
        for shown in [t.to_string(), format!("{t:?}"), t.redacted()] {
            assert!(!shown.contains("Pw-Xy-77"), "{shown}");
            assert!(shown.contains("db.example:6543/board"), "{shown}");
        }
        let bare = PgTarget::parse("postgres://kb@db.example:6543/board", UrlSource::Pinned);
        assert!(bare.unwrap().redacted_eq(&t));
        let other = PgTarget::parse("postgres://kb@db.example:6543/other", UrlSource::Pinned);
        assert!(!other.unwrap().redacted_eq(&t));
    }

    #[test]
    fn bad_urls_are_refused_without_their_password() {
        for url in [
            "postgres://u:Tr0ub4dor@h:notaport/db",
            "mysql://u:Tr0ub4dor@h/db",
            "postgres://u:Tr0ub4dor@h/db?sslmode=maybe",
        ] {
            let err = PgTarget::parse(url, UrlSource::Pinned).unwrap_err();
            let chain = crate::error_chain(&err);
            assert!(!chain.contains("Tr0ub4dor"), "{chain}");
        }
    }

    #[test]
    fn a_connection_waits_ten_seconds_unless_the_url_says_otherwise() {
        let timeout = |url: &str| {
            PgTarget::parse(url, UrlSource::Pinned)
                .unwrap()
                .connect_config()
                .unwrap()
                .connect_timeout()
        };
        assert_eq!(timeout("postgres://u@h/db"), Some(DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(
            timeout("postgres://u@h/db?sslmode=disable&connect_timeout=3"),
            Some(Duration::from_secs(3))
        );
        assert_eq!(timeout("postgres://u@h/db?connect_timeout=0"), None);
    }

    #[test]
    fn the_url_file_never_holds_a_password() {
        let dir = tempfile::tempdir().unwrap();
        let t = PgTarget::parse("postgres://u:Sekr1t@h/db", UrlSource::Pinned).unwrap();
        let path = write_url_file(dir.path(), "ops", &t).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "postgres://u@h:5432/db\n");
        let back = read_url_file(dir.path(), "ops").unwrap().unwrap();
        assert!(back.redacted_eq(&t));
        std::fs::write(&path, "postgres://u:Sekr1t@h/db\n").unwrap();
        let err = read_url_file(dir.path(), "ops").unwrap_err();
        assert!(matches!(err, LocationError::PasswordInFile { .. }));
        assert!(!crate::error_chain(&err).contains("Sekr1t"));
        assert_eq!(read_url_file(dir.path(), "none").unwrap(), None);
    }
}
