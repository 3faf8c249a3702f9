//! Which store a board lives in: a SQLite file (every board, unless told otherwise) or a
//! PostgreSQL database named by a `postgres://` / `postgresql://` URL.
//!
//! **Where the URL lives** (the README's "A board on PostgreSQL", in this order):
//! 1. `[boards.<slug>] url = "postgres://…"` in `<root>/kanban.toml`. The file is the user's, so a
//!    password written in that URL is used (prefer `~/.pgpass`: `kanban.toml` is often shared).
//!    The table's TLS keys are laid over the URL ([`PgTarget::parse_configured`]);
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

/// libpq's `channel_binding` and `sslmode` values, for the TLS keys of `kanban.toml`.
pub use kanban_pgwire::{ChannelBinding, SslMode};
use kanban_pgwire::{Config as PgConfig, Host};

use crate::identity::settings;

/// File name, in a board's folder `<root>/kanban/boards/<slug>/`, of the PostgreSQL URL that
/// `kanban boards create --url` and `kanban boards migrate` record.
pub(crate) const URL_FILE: &str = "postgres.url";

/// How long a connection to a PostgreSQL board may take (the TCP connect, then each read of the
/// start-up and authentication exchange) when its URL sets no `connect_timeout`: a server that
/// does not answer fails the command (or the dispatcher's tick, which opens the home's other
/// PostgreSQL boards for the host-wide cap) after this long instead of stalling it. A URL's own
/// `connect_timeout=SECONDS` wins (`0` waits as long as the operating system lets it).
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// True when `location` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub(crate) fn is_postgres_url(location: &str) -> bool {
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
    pub fn parse(url: &str, source: UrlSource) -> Result<PgTarget, TargetError> {
        if !is_postgres_url(url) {
            return Err(TargetError::NotPostgresUrl {
                url: scrub_url(url),
                source_: source,
            });
        }
        let config = PgConfig::parse(url).map_err(|e| TargetError::BadUrl {
            url: scrub_url(url),
            source_: source.clone(),
            source: e,
        })?;
        let timeout_given = url_gives(url, "connect_timeout");
        Ok(PgTarget {
            config,
            source,
            timeout_given,
        })
    }

    /// Parses the `url` of a `[boards.<slug>]` table of the file `path` and lays the table's
    /// TLS keys over it. A relative certificate path, in the table or in the URL, names a file
    /// in the folder of `path` (not of the current directory: a dispatcher and its workers run
    /// elsewhere); `sslrootcert = "system"` stays the built-in roots. A key the URL also sets
    /// must agree with it, else the error names both. The result's redacted URL carries the
    /// merged settings (so a worker's `HERMES_KANBAN_DB` does too).
    pub fn parse_configured(
        url: &str,
        path: &Path,
        tls: &TlsSettings,
    ) -> Result<PgTarget, TargetError> {
        let mut target = PgTarget::parse(url, UrlSource::Config(path.to_path_buf()))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        let resolve = |p: &Path| {
            if p.is_relative() && p != Path::new(SYSTEM_ROOTS) {
                dir.join(p)
            } else {
                p.to_path_buf()
            }
        };
        let config = &mut target.config;
        let root_cert = config.ssl_root_cert().map(resolve);
        config.set_ssl_root_cert(root_cert);
        let client = config
            .ssl_client_cert()
            .map(|(cert, key)| (resolve(cert), resolve(key)));
        config.set_ssl_client_cert(client);

        let given = kanban_pgwire::url_parameter_names(url).map_err(|e| TargetError::BadUrl {
            url: scrub_url(url),
            source_: target.source.clone(),
            source: e,
        })?;
        let conflict = |key: &'static str, file: String, in_url: String| {
            if given.iter().any(|g| g == key) && file != in_url {
                Err(TargetError::TlsConflict {
                    key,
                    file,
                    in_url,
                    url: scrub_url(url),
                    path: path.to_path_buf(),
                })
            } else {
                Ok(())
            }
        };
        let config = &mut target.config;
        if let Some(mode) = tls.ssl_mode {
            conflict("sslmode", mode.to_string(), config.ssl_mode().to_string())?;
            config.set_ssl_mode(mode);
        }
        if let Some(binding) = tls.channel_binding {
            conflict(
                "channel_binding",
                binding.to_string(),
                config.channel_binding().to_string(),
            )?;
            config.set_channel_binding(binding);
        }
        let shown = |p: Option<&Path>| p.map(|p| p.display().to_string()).unwrap_or_default();
        if let Some(root) = &tls.root_cert {
            let root = resolve(root);
            conflict(
                "sslrootcert",
                root.display().to_string(),
                shown(config.ssl_root_cert()),
            )?;
            config.set_ssl_root_cert(Some(root));
        }
        let (url_cert, url_key) = config.ssl_client_cert().unzip();
        let cert = tls.client_cert.as_deref().map(resolve);
        let key = tls.client_key.as_deref().map(resolve);
        if let Some(cert) = &cert {
            conflict("sslcert", cert.display().to_string(), shown(url_cert))?;
        }
        if let Some(key) = &key {
            conflict("sslkey", key.display().to_string(), shown(url_key))?;
        }
        let cert = cert.or_else(|| url_cert.map(Path::to_path_buf));
        let key = key.or_else(|| url_key.map(Path::to_path_buf));
        match (cert, key) {
            (Some(cert), Some(key)) => {
                config.set_ssl_client_cert(Some((cert, key)));
            }
            (None, None) => {}
            _ => {
                return Err(TargetError::TlsIncomplete {
                    path: path.to_path_buf(),
                });
            }
        }
        if config.channel_binding() == ChannelBinding::Require
            && config.ssl_mode() == SslMode::Disable
        {
            return Err(TargetError::TlsContradiction {
                path: path.to_path_buf(),
            });
        }
        Ok(target)
    }

    /// What `kanban boards list` shows as the board's TLS: its `sslmode` over TCP, `none` for a
    /// Unix socket (never encrypted, whatever `sslmode` says).
    pub fn tls_mode(&self) -> String {
        match self.config.host() {
            Host::Tcp(_) => self.config.ssl_mode().to_string(),
            Host::Unix(_) => "none".to_owned(),
        }
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
        let root = config
            .ssl_root_cert()
            .filter(|p| *p != Path::new(SYSTEM_ROOTS));
        let (cert, key) = config.ssl_client_cert().unzip();
        for (key, file) in [("sslrootcert", root), ("sslcert", cert), ("sslkey", key)] {
            if let Some(file) = file
                && !file.is_file()
            {
                return Err(kanban_pgwire::Error::Config(format!(
                    "the {key} file {} (in {}) does not exist or is not a file",
                    file.display(),
                    self.source
                )));
            }
        }
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

/// `sslrootcert=system`: the built-in roots, not a file.
const SYSTEM_ROOTS: &str = "system";

/// True when the query string of `url` sets `key` (a malformed one sets nothing: parsing the URL
/// refuses it).
fn url_gives(url: &str, key: &str) -> bool {
    kanban_pgwire::url_parameter_names(url).is_ok_and(|names| names.iter().any(|n| n == key))
}

/// The TLS keys of a `[boards.<slug>]` table, checked (libpq's values): what
/// [`PgTarget::parse_configured`] lays over the URL's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    pub ssl_mode: Option<SslMode>,
    pub root_cert: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub channel_binding: Option<ChannelBinding>,
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

/// A resolved board: its slug, its store, and its (SQLite) database file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardLocation {
    pub slug: String,
    /// The SQLite file (for a PostgreSQL board: where it would be; see the module docs).
    pub db_path: PathBuf,
    /// True when `HERMES_KANBAN_DB` pinned the file or database (a worker's board).
    pub pinned: bool,
    /// Which store holds the board: `Board::open` opens this.
    pub store: Store,
}

impl BoardLocation {
    /// The board's PostgreSQL database, when it lives in one.
    pub fn postgres(&self) -> Option<&PgTarget> {
        match &self.store {
            Store::Postgres(target) => Some(target),
            Store::Sqlite => None,
        }
    }

    /// What a worker's `HERMES_KANBAN_DB` holds: the SQLite file, or the PostgreSQL URL without
    /// its password.
    pub fn env_db(&self) -> std::ffi::OsString {
        match &self.store {
            Store::Sqlite => self.db_path.clone().into_os_string(),
            Store::Postgres(target) => target.redacted().into(),
        }
    }

    /// Where the board is, for people: the SQLite file, or the redacted URL.
    pub fn describe(&self) -> String {
        match &self.store {
            Store::Sqlite => self.db_path.display().to_string(),
            Store::Postgres(target) => target.redacted(),
        }
    }

    /// True when the board exists: its SQLite file is a file, or it has a PostgreSQL URL.
    pub fn exists(&self) -> bool {
        match &self.store {
            Store::Sqlite => self.db_path.is_file(),
            Store::Postgres(_) => true,
        }
    }
}

/// `text` with the password of every URL in it replaced by `***`: the user-info password
/// (`scheme://user:PASSWORD@host`) and a `password=` parameter. For messages that quote what a
/// user wrote.
pub(crate) fn scrub_url(text: &str) -> String {
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

/// A PostgreSQL URL that cannot name a board. Every URL quoted is scrubbed of its password.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(
        "{url} (in {source_}) is not a PostgreSQL URL; a PostgreSQL board's location starts with postgres:// or postgresql:// (a SQLite board needs none)"
    )]
    NotPostgresUrl { url: String, source_: UrlSource },

    #[error(
        "{key} = \"{file}\" in {} disagrees with {key}={in_url} in its URL {url}: give {key} in one place only",
        path.display()
    )]
    TlsConflict {
        key: &'static str,
        file: String,
        in_url: String,
        url: String,
        path: PathBuf,
    },

    #[error(
        "sslcert and sslkey go together (in {}, in the table or its URL): give both, the client certificate and its key, or neither",
        path.display()
    )]
    TlsIncomplete { path: PathBuf },

    #[error(
        "channel_binding = \"require\" needs TLS, which sslmode = \"disable\" turns off (in {})",
        path.display()
    )]
    TlsContradiction { path: PathBuf },

    #[error("invalid PostgreSQL URL {url} (in {source_})")]
    BadUrl {
        url: String,
        source_: UrlSource,
        source: kanban_pgwire::Error,
    },
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
    fn configured_tls_keys_resolve_paths_next_to_the_file_and_must_agree_with_the_url() {
        let file = Path::new("/etc/kanban/kanban.toml");
        let tls = TlsSettings {
            ssl_mode: Some(SslMode::VerifyFull),
            root_cert: Some("certs/ca.pem".into()),
            client_cert: Some("/abs/client.pem".into()),
            client_key: Some("client.key".into()),
            channel_binding: Some(ChannelBinding::Require),
        };
        let t = PgTarget::parse_configured("postgres://u@h/db", file, &tls).unwrap();
        let c = t.config();
        assert_eq!(c.ssl_mode(), SslMode::VerifyFull);
        assert_eq!(c.channel_binding(), ChannelBinding::Require);
        assert_eq!(
            c.ssl_root_cert(),
            Some(Path::new("/etc/kanban/certs/ca.pem"))
        );
        assert_eq!(
            c.ssl_client_cert(),
            Some((
                Path::new("/abs/client.pem"),
                Path::new("/etc/kanban/client.key")
            ))
        );
        assert_eq!(t.tls_mode(), "verify-full");
        // The URL's relative paths name files there too; `system` stays the built-in roots.
        let t = PgTarget::parse_configured(
            "postgres://u@h/db?sslrootcert=system&sslcert=c.pem&sslkey=c.key",
            file,
            &TlsSettings::default(),
        )
        .unwrap();
        assert_eq!(t.config().ssl_root_cert(), Some(Path::new("system")));
        assert_eq!(
            t.config().ssl_client_cert(),
            Some((
                Path::new("/etc/kanban/c.pem"),
                Path::new("/etc/kanban/c.key")
            ))
        );
        // The same file spelt relatively in the URL and absolutely in the table agrees.
        let same = TlsSettings {
            root_cert: Some("/etc/kanban/ca.pem".into()),
            ssl_mode: Some(SslMode::Prefer),
            ..TlsSettings::default()
        };
        assert!(
            PgTarget::parse_configured(
                "postgres://u@h/db?sslrootcert=ca.pem&sslmode=prefer",
                file,
                &same
            )
            .is_ok()
        );
        // `prefer` written in the URL is a choice, not the default: `require` disagrees.
        let require = TlsSettings {
            ssl_mode: Some(SslMode::Require),
            ..TlsSettings::default()
        };
        let err = PgTarget::parse_configured("postgres://u@h/db?sslmode=prefer", file, &require)
            .unwrap_err();
        assert!(
            matches!(err, TargetError::TlsConflict { key: "sslmode", .. }),
            "{err}"
        );
        assert!(PgTarget::parse_configured("postgres://u@h/db", file, &require).is_ok());
        let socket =
            PgTarget::parse_configured("postgres://u@%2Frun%2Fpg/db", file, &require).unwrap();
        assert_eq!(socket.tls_mode(), "none");
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
}
