//! The crate's error type. No message ever contains the connection password, and none embeds its
//! `#[source]` (the caller prints the chain).

use std::fmt;

/// Every failure of the client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection settings are unusable (a bad URL, an unsupported `sslmode`, an unreadable
    /// password file). Nothing was sent anywhere.
    #[error("invalid PostgreSQL connection settings: {0}")]
    Config(String),
    /// The socket failed: cannot connect, the server went away, a read or write timed out.
    /// The client is closed afterwards (`Client::is_closed`).
    #[error("{context}")]
    Io {
        /// What the client was doing, e.g. "cannot connect to /tmp/pg/.s.PGSQL.5432".
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The server said something this client cannot follow; the client is closed afterwards.
    #[error("PostgreSQL protocol error: {0}")]
    Protocol(String),
    /// Authentication could not be carried out on the client's side (no password for a method
    /// that needs one, an unsupported method, a server that failed to prove it knows the
    /// password). A wrong password is refused by the server: that is a [`Error::Db`] with
    /// SQLSTATE `28P01`.
    #[error("PostgreSQL authentication failed: {0}")]
    Auth(String),
    /// The server reported an error (an `ErrorResponse`).
    #[error("{0}")]
    Db(Box<DbError>),
    /// `query_one`/`query_opt` got a number of rows it does not allow.
    #[error("the query returned {got} rows where {expected} was expected")]
    RowCount {
        /// What the call allows ("exactly one row", "at most one row").
        expected: &'static str,
        /// How many rows came.
        got: usize,
    },
    /// The connection was closed earlier (an I/O or protocol error, or a FATAL server error).
    #[error("the PostgreSQL connection is closed (an earlier error ended it); reconnect")]
    Closed,
}

impl Error {
    /// The server's error, if this is one.
    pub fn as_db(&self) -> Option<&DbError> {
        match self {
            Error::Db(e) => Some(e),
            _ => None,
        }
    }

    /// The SQLSTATE of a server error (`None` for client-side failures).
    pub fn code(&self) -> Option<&str> {
        self.as_db().map(|e| e.code.as_str())
    }

    /// `23505`: a unique or primary-key constraint refused the row.
    pub fn is_unique_violation(&self) -> bool {
        self.code() == Some("23505")
    }

    /// `40001` (serialization failure) or `40P01` (deadlock detected): the transaction may be
    /// retried from the start.
    pub fn is_serialization_failure(&self) -> bool {
        matches!(self.code(), Some("40001" | "40P01"))
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// An `ErrorResponse` from the server, field by field (see PostgreSQL's "Error and Notice
/// Message Fields").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DbError {
    /// `ERROR`, `FATAL` or `PANIC` (never localized).
    pub severity: String,
    /// The SQLSTATE, e.g. `23505`.
    pub code: String,
    /// The primary message.
    pub message: String,
    /// An optional second message with more detail.
    pub detail: Option<String>,
    /// An optional suggestion what to do.
    pub hint: Option<String>,
    /// 1-based character position in the statement the error refers to.
    pub position: Option<u32>,
    /// The call stack context (PL/pgSQL, SQL functions).
    pub where_: Option<String>,
    /// The schema of the object concerned.
    pub schema: Option<String>,
    /// The table concerned.
    pub table: Option<String>,
    /// The column concerned.
    pub column: Option<String>,
    /// The constraint concerned (e.g. the unique index of a unique violation).
    pub constraint: Option<String>,
}

impl DbError {
    /// Parses the fields of an `ErrorResponse`/`NoticeResponse` body.
    pub(crate) fn parse(body: &[u8]) -> DbError {
        let mut e = DbError::default();
        let mut localized_severity = None;
        for field in body.split(|&b| b == 0) {
            let Some((&kind, value)) = field.split_first() else {
                continue;
            };
            let value = String::from_utf8_lossy(value).into_owned();
            match kind {
                b'S' => localized_severity = Some(value),
                b'V' => e.severity = value,
                b'C' => e.code = value,
                b'M' => e.message = value,
                b'D' => e.detail = Some(value),
                b'H' => e.hint = Some(value),
                b'P' => e.position = value.parse().ok(),
                b'W' => e.where_ = Some(value),
                b's' => e.schema = Some(value),
                b't' => e.table = Some(value),
                b'c' => e.column = Some(value),
                b'n' => e.constraint = Some(value),
                _ => {}
            }
        }
        if e.severity.is_empty() {
            e.severity = localized_severity.unwrap_or_else(|| "ERROR".into());
        }
        e
    }

    /// True for `FATAL`/`PANIC`: the server ends the session.
    pub fn is_fatal(&self) -> bool {
        matches!(self.severity.as_str(), "FATAL" | "PANIC")
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PostgreSQL {} {}: {}",
            self.severity, self.code, self.message
        )?;
        if let Some(detail) = &self.detail {
            write!(f, " ({detail})")?;
        }
        Ok(())
    }
}

impl std::error::Error for DbError {}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
