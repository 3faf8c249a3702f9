//! Proof of done (issue 27 item 5; the original's `kanban_pr_acceptance.py`,
//! `kanban_completion_evidence.py` and `kanban_pr_authorization.py`): a task's completion
//! contract, the evidence receipts a completion hands over, the exact-head acceptance of a
//! GitHub pull request read through `gh`, and the read-only pull-request lookup behind
//! `authorize-existing-pr`.
//!
//! * [`Contract`] — `local-only` (the default), `evidence-required`, `OWNER/REPO` or an exact
//!   pull-request URL; the value of `tasks.completion_contract`.
//! * [`Evidence`] — one `KIND=DETAIL` receipt, kind and detail trimmed and non-empty.
//! * [`collect`] — the acceptance [`Receipt`] of a pull request: its current head (GraphQL), the
//!   checks branch protection and rulesets require, the check runs and commit statuses on
//!   exactly that head, a re-read of the head at the end; classified `success`, `pending`,
//!   `failure`, `stale`, `infra`, `auth` or `missing`.
//! * [`lookup_pr`] / [`check_pr`] — the one GitHub read of an authorization and its checks.
//!
//! A leaf like `workspace`: it imports only `identity` (for [`crate::identity::command`]), never
//! touches a board, reads no configuration or environment (the caller hands it the `gh`
//! configuration folder, [`Gh`]), and never stores or returns what `gh` wrote on its standard
//! error — only the HTTP status and the endpoint it was refused at.

mod github;

use serde::{Deserialize, Serialize};

pub use github::{Gh, GhError, check_pr, collect, lookup_pr};

/// A task's completion contract: what must be true before it may be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contract {
    /// Nothing beyond the completion itself (the default).
    LocalOnly,
    /// At least one [`Evidence`] receipt.
    EvidenceRequired,
    /// A pull request of this repository (`OWNER/REPO`), bound once to the one the worker
    /// publishes (`metadata.published_pr`), accepted at its exact head.
    Repo(String),
    /// This pull request, accepted at its exact head.
    Pr(PrRef),
}

/// The stored value of [`Contract::LocalOnly`].
pub const LOCAL_ONLY: &str = "local-only";
/// The stored value of [`Contract::EvidenceRequired`].
pub const EVIDENCE_REQUIRED: &str = "evidence-required";

/// A pull request: `OWNER/REPO` and its number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrRef {
    pub repo: String,
    pub number: u64,
}

impl PrRef {
    /// Its canonical URL, `https://github.com/OWNER/REPO/pull/N`.
    pub fn url(&self) -> String {
        format!("https://github.com/{}/pull/{}", self.repo, self.number)
    }

    /// Parses an exact pull-request URL whose owner consists of the characters `owner_char`
    /// accepts (the acceptance contract's are wider than the authorization's).
    fn parse_with(url: &str, owner_char: fn(char) -> bool) -> Option<PrRef> {
        let rest = url.strip_prefix("https://github.com/")?;
        let mut parts = rest.split('/');
        let (owner, name, pull, number) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || pull != "pull" {
            return None;
        }
        let number_ok = number.starts_with(|c: char| ('1'..='9').contains(&c))
            && number.chars().all(|c| c.is_ascii_digit());
        let valid = !owner.is_empty()
            && owner.chars().all(owner_char)
            && !name.is_empty()
            && name.chars().all(name_char)
            && number_ok;
        if !valid {
            return None;
        }
        Some(PrRef {
            repo: format!("{owner}/{name}"),
            number: number.parse().ok()?,
        })
    }

    /// An exact pull-request URL as a completion contract names it (the original's `_PR`).
    pub fn parse(url: &str) -> Option<PrRef> {
        Self::parse_with(url, name_char)
    }

    /// An exact pull-request URL as an authorization names it (the original's `_PR_URL`: an
    /// owner of letters, digits and `-`).
    pub fn parse_authorizable(url: &str) -> Option<PrRef> {
        Self::parse_with(url, |c| c.is_ascii_alphanumeric() || c == '-')
    }
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// Whether `value` is `OWNER/REPO` (the original's `_REPO`).
pub fn is_repo(value: &str) -> bool {
    value.split_once('/').is_some_and(|(owner, name)| {
        !owner.is_empty()
            && !name.is_empty()
            && owner.chars().all(name_char)
            && name.chars().all(name_char)
    })
}

/// A completion contract that is none of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid completion contract {0:?}: it must be local-only, evidence-required, OWNER/REPO, \
     or an exact GitHub pull-request URL (https://github.com/OWNER/REPO/pull/N)"
)]
pub struct ContractError(pub String);

impl Contract {
    /// The original's `validate_contract`: `None` is `local-only`.
    pub fn parse(value: Option<&str>) -> Result<Contract, ContractError> {
        match value {
            None | Some(LOCAL_ONLY) => Ok(Contract::LocalOnly),
            Some(EVIDENCE_REQUIRED) => Ok(Contract::EvidenceRequired),
            Some(v) if is_repo(v) => Ok(Contract::Repo(v.to_owned())),
            Some(v) => PrRef::parse(v)
                .map(Contract::Pr)
                .ok_or_else(|| ContractError(v.to_owned())),
        }
    }

    /// The contract of a stored column value: empty or `NULL` is `local-only`; a value this
    /// version cannot read is kept as an unreadable PR contract, which no completion satisfies.
    pub fn from_column(value: Option<&str>) -> Result<Contract, ContractError> {
        Contract::parse(value.filter(|v| !v.is_empty()))
    }

    /// The stored column value.
    pub fn as_column(&self) -> String {
        match self {
            Contract::LocalOnly => LOCAL_ONLY.to_owned(),
            Contract::EvidenceRequired => EVIDENCE_REQUIRED.to_owned(),
            Contract::Repo(repo) => repo.clone(),
            Contract::Pr(pr) => pr.url(),
        }
    }

    /// Whether completing needs a GitHub acceptance.
    pub fn needs_acceptance(&self) -> bool {
        matches!(self, Contract::Repo(_) | Contract::Pr(_))
    }
}

/// One completion receipt (the original's `CompletionEvidence`): what kind of proof, and the
/// proof itself, both trimmed and non-empty. It records a claim; it does not verify it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub kind: String,
    pub detail: String,
}

/// A receipt that is not `KIND=DETAIL` with a non-empty kind and detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid evidence {0:?}: a receipt is KIND=DETAIL with a non-empty kind and detail \
     (for example test=cargo test: 41 passed)"
)]
pub struct EvidenceError(pub String);

impl Evidence {
    /// Parses `KIND=DETAIL` (split at the first `=`), trimming both (the original's
    /// `normalize_completion_evidence` of one item).
    pub fn parse(text: &str) -> Result<Evidence, EvidenceError> {
        let (kind, detail) = text
            .split_once('=')
            .ok_or_else(|| EvidenceError(text.to_owned()))?;
        let (kind, detail) = (kind.trim(), detail.trim());
        if kind.is_empty() || detail.is_empty() {
            return Err(EvidenceError(text.to_owned()));
        }
        Ok(Evidence {
            kind: kind.to_owned(),
            detail: detail.to_owned(),
        })
    }
}

/// How an acceptance came out; only `success` lets the task be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    Success,
    Pending,
    Failure,
    /// The head moved while the evidence was read, or a check ran on another commit.
    Stale,
    /// GitHub's answer was unavailable or incomplete (retry).
    Infra,
    /// `gh` is missing, has no login for this profile, or was refused (401/403/404): fix the
    /// profile's GitHub access; never retried as transient.
    Auth,
    /// A required check has no run, no check is required, or no pull request was published.
    Missing,
}

impl Classification {
    pub fn as_str(self) -> &'static str {
        match self {
            Classification::Success => "success",
            Classification::Pending => "pending",
            Classification::Failure => "failure",
            Classification::Stale => "stale",
            Classification::Infra => "infra",
            Classification::Auth => "auth",
            Classification::Missing => "missing",
        }
    }
}

impl std::fmt::Display for Classification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One required check as the receipt records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReceipt {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub head_sha: Option<String>,
    pub classification: Classification,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
}

/// A check the repository requires: its context and, when pinned, the app that must report it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequiredCheck {
    pub context: String,
    pub app_id: Option<i64>,
}

/// What an acceptance found: the payload of the `pr_acceptance` event (the original's keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub ok: bool,
    pub classification: Classification,
    pub head_sha: Option<String>,
    pub pr_url: Option<String>,
    pub checks: Vec<CheckReceipt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<RequiredCheck>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub recovery: String,
}

/// What a refused acceptance tells the worker to do next (stored with the receipt).
pub const RECOVERY: &str = "Fix required failures, rerun infrastructure checks or wait, then retry \
     completion. Block the task if a person's input is needed; receipts remain on the task's \
     event log.";

impl Receipt {
    /// An acceptance that has found nothing yet.
    pub(crate) fn missing(pr_url: Option<&str>) -> Receipt {
        Receipt {
            ok: false,
            classification: Classification::Missing,
            head_sha: None,
            pr_url: pr_url.map(str::to_owned),
            checks: Vec::new(),
            required: None,
            detail: None,
            recovery: RECOVERY.to_owned(),
        }
    }

    /// The text a refused acceptance leaves in `last_failure_error`.
    pub fn failure_text(&self) -> String {
        format!(
            "PR acceptance {}: {} {}",
            self.classification,
            self.detail.as_deref().unwrap_or(""),
            self.recovery
        )
    }
}

/// Every GitHub pull-request URL in `text` (`http(s)://github.com/OWNER/REPO/pull/N`, the
/// scheme and host in any case), in order of appearance: what the `active_pr` guard and an
/// authorization compare.
pub fn pull_request_urls(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices("github.com/") {
        let start = if lower[..at].ends_with("https://") {
            at - "https://".len()
        } else if lower[..at].ends_with("http://") {
            at - "http://".len()
        } else {
            continue;
        };
        let rest = &text[at + "github.com/".len()..];
        let segment = |s: &str| {
            s.find(|c: char| c == '/' || c.is_whitespace())
                .unwrap_or(s.len())
        };
        let owner_len = segment(rest);
        if owner_len == 0 || !rest[owner_len..].starts_with('/') {
            continue;
        }
        let after_owner = &rest[owner_len + 1..];
        let name_len = segment(after_owner);
        if name_len == 0 || !after_owner[name_len..].starts_with("/pull/") {
            continue;
        }
        let digits = &after_owner[name_len + "/pull/".len()..];
        let n = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        if n == 0 {
            continue;
        }
        let end = at + "github.com/".len() + owner_len + 1 + name_len + "/pull/".len() + n;
        found.push(text[start..end].to_owned());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_values_are_the_originals() {
        assert_eq!(Contract::parse(None), Ok(Contract::LocalOnly));
        assert_eq!(Contract::parse(Some("local-only")), Ok(Contract::LocalOnly));
        assert_eq!(
            Contract::parse(Some("evidence-required")),
            Ok(Contract::EvidenceRequired)
        );
        assert_eq!(
            Contract::parse(Some("acme/app")),
            Ok(Contract::Repo("acme/app".into()))
        );
        let pr = Contract::parse(Some("https://github.com/acme/app/pull/12")).unwrap();
        assert_eq!(pr.as_column(), "https://github.com/acme/app/pull/12");
        for bad in [
            "",
            "acme",
            "acme/app/x",
            "https://github.com/acme/app/pull/0",
            "https://github.com/acme/app/pull/12/files",
            "http://github.com/acme/app/pull/12",
            "https://github.com/acme/app/issues/12",
            "evidence",
        ] {
            assert!(Contract::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn evidence_is_trimmed_and_never_empty() {
        assert_eq!(
            Evidence::parse(" test = cargo test: ok=41 "),
            Ok(Evidence {
                kind: "test".into(),
                detail: "cargo test: ok=41".into()
            })
        );
        for bad in ["test", "=x", "x=", " = ", ""] {
            assert!(Evidence::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pull_request_urls_are_found_in_prose() {
        assert_eq!(
            pull_request_urls(
                "see HTTPS://github.com/a/b/pull/7, and http://github.com/c/d/pull/88x"
            ),
            vec![
                "HTTPS://github.com/a/b/pull/7",
                "http://github.com/c/d/pull/88"
            ]
        );
        assert!(pull_request_urls("github.com/a/b/pull/7 https://github.com/a/pull/7").is_empty());
    }

    #[test]
    fn authorizable_urls_have_plain_owners() {
        assert!(PrRef::parse_authorizable("https://github.com/a-b/c.d/pull/3").is_some());
        assert!(PrRef::parse_authorizable("https://github.com/a.b/c/pull/3").is_none());
    }
}
