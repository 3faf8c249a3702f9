//! Diagnostics: one finding at one place, printed `path:line:col: rule: message — how to fix`.
//!
//! Owns the shape of every line `cargo xtask` prints about the sources. It never decides whether a
//! finding fails the run; the caller does that from [`Severity`].

use std::fmt;

/// Whether a finding fails `cargo xtask check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Fails the run.
    Error,
    /// Printed, does not fail the run.
    Warning,
}

/// One finding. `path` is relative to the workspace root with `/` separators; `line` and `col`
/// are 1-based (columns count characters, as editors do).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    pub path: String,
    pub line: usize,
    pub col: usize,
    pub severity: Severity,
    pub rule: &'static str,
    pub message: String,
    pub fix: String,
}

impl Diagnostic {
    /// An error of `rule` at the start of `span` in `path`.
    pub fn error(
        path: &str,
        span: proc_macro2::Span,
        rule: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        let start = span.start();
        Diagnostic {
            path: path.to_owned(),
            line: start.line,
            col: start.column + 1,
            severity: Severity::Error,
            rule,
            message: message.into(),
            fix: fix.into(),
        }
    }

    /// The same finding, demoted to a warning.
    pub fn warning(mut self) -> Self {
        self.severity = Severity::Warning;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.path, self.line, self.col)?;
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        write!(f, "{}: {} — {}", self.rule, self.message, self.fix)
    }
}
