//! `[boards.<slug>]`: where a board lives when it is not a SQLite file: `url`, a `postgres://` /
//! `postgresql://` URL (see `crate::db::target` for the order of the sources and the password
//! rules), and the TLS keys `sslmode`, `sslrootcert`, `sslcert`, `sslkey` and `channel_binding`
//! (libpq's values, as the URL parameters; [`PgTarget::parse_configured`] lays them over it).
//! Checked with the rest of the file; board resolution reads only this table ([`load`]), so a
//! command that never reads the whole file still finds a PostgreSQL board.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};

use super::{CONFIG_FILE, ConfigError, Problem};
use crate::db::target::{
    ChannelBinding, PgTarget, SslMode, TargetError, TlsSettings, UrlSource, scrub_url,
};

/// `[boards.<slug>]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BoardConfig {
    /// The board's PostgreSQL URL.
    pub url: BoardUrl,
    /// libpq's `sslmode`, as the URL parameter (which must then agree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sslmode: Option<String>,
    /// A PEM file of trusted authorities (or `system`); relative to the file's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sslrootcert: Option<PathBuf>,
    /// A client certificate (PEM), with `sslkey`; relative to the file's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sslcert: Option<PathBuf>,
    /// The client certificate's key (PEM), with `sslcert`; relative to the file's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sslkey: Option<PathBuf>,
    /// libpq's `channel_binding`, as the URL parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_binding: Option<String>,
}

/// A URL as written in `kanban.toml`: it may hold a password, so `Debug` and `Serialize` give it
/// scrubbed.
#[derive(Clone, Default, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct BoardUrl(pub String);

impl fmt::Debug for BoardUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", scrub_url(&self.0))
    }
}

impl Serialize for BoardUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&scrub_url(&self.0))
    }
}

/// Checks every `[boards.<slug>]`: a valid slug and a PostgreSQL URL that parses.
pub(super) fn check(boards: &BTreeMap<String, BoardConfig>, path: &Path) -> Result<(), Problem> {
    targets(boards, path).map(|_| ())
}

/// The checked targets of `boards`, by slug; `path` is the file they came from.
fn targets(
    boards: &BTreeMap<String, BoardConfig>,
    path: &Path,
) -> Result<BTreeMap<String, PgTarget>, Problem> {
    let mut out = BTreeMap::new();
    for (slug, board) in boards {
        if let Err(e) = crate::board::slug::validate(slug) {
            return Err(Problem {
                key: format!("[boards.{slug:?}]"),
                value: format!("{slug:?}"),
                expected: e.to_string(),
            });
        }
        let tls = tls_settings(slug, board)?;
        if let Err(e) = PgTarget::parse(&board.url.0, UrlSource::Config(path.to_path_buf())) {
            return Err(Problem {
                key: format!("[boards.{slug}] url"),
                value: format!("{:?}", scrub_url(&board.url.0)),
                expected: format!(
                    "expected a postgres:// or postgresql:// URL such as \"postgres://kanban@db.example:5432/board\" ({})",
                    crate::error_chain(&e).replace('\n', "; ")
                ),
            });
        }
        let target =
            PgTarget::parse_configured(&board.url.0, path, &tls).map_err(|e| match e {
                TargetError::TlsConflict {
                    key,
                    file,
                    in_url,
                    url,
                    ..
                } => Problem {
                    key: format!("[boards.{slug}] {key}"),
                    value: format!("{file:?}"),
                    expected: format!(
                        "it disagrees with {key}={in_url} in the url {url}: give {key} in one place only"
                    ),
                },
                other => Problem {
                    key: format!("[boards.{slug}]"),
                    value: format!("{:?}", scrub_url(&board.url.0)),
                    expected: crate::error_chain(&other).replace('\n', "; "),
                },
            })?;
        out.insert(slug.clone(), target);
    }
    Ok(out)
}

/// The TLS keys of `[boards.<slug>]`, each value checked: an unknown one names the key and the
/// values it takes.
fn tls_settings(slug: &str, board: &BoardConfig) -> Result<TlsSettings, Problem> {
    fn value<T: std::str::FromStr>(
        slug: &str,
        key: &str,
        given: Option<&String>,
        allowed: &[&str],
    ) -> Result<Option<T>, Problem> {
        given
            .map(|v| {
                v.parse().map_err(|_| Problem {
                    key: format!("[boards.{slug}] {key}"),
                    value: format!("{v:?}"),
                    expected: format!("expected one of {}", allowed.join(", ")),
                })
            })
            .transpose()
    }
    let path = |key: &str, given: &Option<PathBuf>| match given {
        Some(p) if p.as_os_str().is_empty() => Err(Problem {
            key: format!("[boards.{slug}] {key}"),
            value: "\"\"".to_owned(),
            expected: "expected the path of a PEM file".to_owned(),
        }),
        other => Ok(other.clone()),
    };
    Ok(TlsSettings {
        ssl_mode: value(slug, "sslmode", board.sslmode.as_ref(), &SslMode::VALUES)?,
        channel_binding: value(
            slug,
            "channel_binding",
            board.channel_binding.as_ref(),
            &ChannelBinding::VALUES,
        )?,
        root_cert: path("sslrootcert", &board.sslrootcert)?,
        client_cert: path("sslcert", &board.sslcert)?,
        client_key: path("sslkey", &board.sslkey)?,
    })
}

/// The `[boards]` table of `<root>/kanban.toml`, checked: board slug → its PostgreSQL database.
/// A missing file or table is empty; a file that does not parse or a bad entry is an error
/// naming the file (and the key), never a silent SQLite board.
pub fn load(root: &Path) -> Result<BTreeMap<String, PgTarget>, ConfigError> {
    let path = root.join(CONFIG_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => return Err(ConfigError::Read { path, source }),
    };
    #[derive(Deserialize)]
    struct OnlyBoards {
        #[serde(default)]
        boards: BTreeMap<String, BoardConfig>,
    }
    // Other tables are not this reader's to judge (the commands that read them check them).
    let parsed: OnlyBoards = toml::from_str(&text).map_err(|e| parse_error(&path, &e))?;
    targets(&parsed.boards, &path).map_err(|problem| ConfigError::Invalid { path, problem })
}

/// A TOML syntax error of `path`, its quoted source line scrubbed of any password.
pub(super) fn parse_error(path: &Path, e: &toml::de::Error) -> ConfigError {
    ConfigError::Parse {
        path: PathBuf::from(path),
        message: scrub_url(e.to_string().trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_board_url_is_checked_at_load_and_never_quoted_with_its_password() {
        let ok = Config::parse(
            "[boards.team]\nurl = \"postgres://kb:Zebra-991@db:5432/team\"\n",
            Path::new("k.toml"),
        )
        .unwrap();
        assert_eq!(
            ok.boards["team"].url.0,
            "postgres://kb:Zebra-991@db:5432/team"
        );
        assert!(!format!("{ok:?}").contains("Zebra-991"));
        assert!(!serde_json::to_string(&ok).unwrap().contains("Zebra-991"));
        for (text, needles) in [
            (
                "[boards.team]\nurl = \"mysql://kb:Zebra-991@db/team\"\n",
                &["k.toml", "[boards.team] url", "postgres://"][..],
            ),
            (
                "[boards.team]\nurl = \"postgres://kb:Zebra-991@db:99999/team\"\n",
                &["k.toml", "[boards.team] url", "port"][..],
            ),
            (
                "[boards.Team]\nurl = \"postgres://kb:Zebra-991@db/team\"\n",
                &["k.toml", "[boards.\"Team\"]", "invalid board slug"][..],
            ),
            (
                "[boards.team]\nurl = \"postgres://kb:Zebra-991@db/team\"\nurl2 = 1\n",
                &["k.toml", "url2"][..],
            ),
            ("[boards.team]\n", &["k.toml", "url"][..]),
            (
                "[boards.team]\nurl = postgres://kb:Zebra-991@db/team\n",
                &["k.toml"][..],
            ),
        ] {
            let err = Config::parse(text, Path::new("k.toml")).unwrap_err();
            let msg = crate::error_chain(&err);
            assert!(!msg.contains("Zebra-991"), "{text}: {msg}");
            for needle in needles {
                assert!(msg.contains(needle), "{text}: {needle} in {msg}");
            }
        }
    }

    #[test]
    fn load_reads_only_the_boards_table() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_empty());
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[dispatch]\nmax_spawn = 0\n[boards.ops]\nurl = \"postgresql://kb@db/ops\"\n",
        )
        .unwrap();
        let boards = load(dir.path()).unwrap();
        assert_eq!(boards["ops"].redacted(), "postgres://kb@db:5432/ops");
        std::fs::write(dir.path().join(CONFIG_FILE), "[boards.ops]\nurl = \"x\"\n").unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("[boards.ops] url"), "{err}");
    }
}
