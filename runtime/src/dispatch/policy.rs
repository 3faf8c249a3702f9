//! The board's `pre_claim` policy at work (the original's `kanban_db_policy.py`): before the
//! dispatcher claims a task, and before it (or `kanban promote`) promotes one, the operator's
//! command named in the board's settings (`home::policy`) is asked. It runs outside any board
//! transaction, under the board's dispatch lock (the tick's), with no worker identity
//! ([`identity::command`]) in its own process group, and receives on its standard input
//!
//! ```json
//! {"board": "default", "phase": "claim" | "promote", "source_status": "ready",
//!  "task": {"id": "t_…", "status": "ready", "assignee": "coder", "project_id": null,
//!           "idempotency_key": null, "tenant": null}}
//! ```
//!
//! It answers `{"allow": true|false, "reason": "…"}` (exactly these keys, at most 4 096 bytes,
//! a reason of at most 512). Anything else is a denial with the original's reason codes: a
//! non-zero exit `pre_claim_command_failed`, a malformed answer `pre_claim_invalid_response`,
//! no answer within `timeout_seconds` `pre_claim_timeout` (the command's process group is
//! killed), a command that cannot start `pre_claim_command_error`, and a policy that is not
//! valid `pre_claim_invalid_configuration` — for every task, without running anything. The
//! answer is acted on by a fenced write (`board::policy`): only while the task is as judged.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::board::policy::PolicySnapshot;
use crate::board::{Board, BoardError};
use crate::db::target::BoardLocation;
use crate::home::lock::{LockError, TickLock};
use crate::home::policy::{BoardPolicy, PreClaim};
use crate::identity;

/// How long an operator's promotion waits for a dispatcher's tick to let go of the board.
const LOCK_WAIT: Duration = Duration::from_secs(10);
const LOCK_POLL: Duration = Duration::from_millis(20);

/// The largest answer read as one.
const MAX_ANSWER_BYTES: usize = 4096;
/// The longest reason accepted, in bytes.
const MAX_REASON_BYTES: usize = 512;

/// Which gate asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Claim,
    Promote,
}

/// The policy's answer for one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub allow: bool,
    pub reason: String,
}

impl Decision {
    fn deny(reason: &str) -> Decision {
        Decision {
            allow: false,
            reason: reason.to_owned(),
        }
    }
}

/// A board's policy, read once per tick (or per CLI command).
#[derive(Debug, Clone)]
pub struct Gate {
    board: String,
    policy: BoardPolicy,
}

impl Gate {
    /// Board `slug`'s gate, `None` when its settings name no `pre_claim` policy.
    pub fn load(root: &Path, slug: &str) -> Option<Gate> {
        let policy = crate::home::policy::read(root, slug);
        policy.gates().then(|| Gate {
            board: slug.to_owned(),
            policy,
        })
    }

    /// Why the policy denies everything, when it is not valid.
    pub fn invalid(&self) -> Option<&str> {
        match &self.policy {
            BoardPolicy::Invalid(why) => Some(why),
            _ => None,
        }
    }

    /// The command, when the policy is valid.
    pub fn command(&self) -> Option<&[String]> {
        match &self.policy {
            BoardPolicy::Valid(p) => Some(&p.command),
            _ => None,
        }
    }

    /// Asks the policy about `task` (see the module doc). Never fails: every problem is a denial.
    pub fn judge(&self, task: &PolicySnapshot, phase: Phase) -> Decision {
        match &self.policy {
            BoardPolicy::None => Decision {
                allow: true,
                reason: String::new(),
            },
            BoardPolicy::Invalid(_) => Decision::deny("pre_claim_invalid_configuration"),
            BoardPolicy::Valid(policy) => ask(policy, &self.packet(task, phase)),
        }
    }

    fn packet(&self, task: &PolicySnapshot, phase: Phase) -> Vec<u8> {
        let packet = serde_json::json!({
            "board": self.board,
            "phase": phase,
            "source_status": task.status,
            "task": {
                "id": task.id,
                "status": task.status,
                "assignee": task.assignee,
                // The original's column; kanban has no projects.
                "project_id": serde_json::Value::Null,
                "idempotency_key": task.idempotency_key,
                "tenant": task.tenant,
            },
        });
        packet.to_string().into_bytes()
    }
}

/// Why an operator's promotion could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(
        "board `{0}` has a pre_claim policy and a dispatcher held its tick lock for {LOCK_WAIT:?}; \
         try again"
    )]
    Busy(String),
    #[error(transparent)]
    Board(#[from] BoardError),
}

/// A judged operator promotion: the answer, the task as judged, and the tick lock held until
/// the caller has acted on it.
pub struct Judged {
    pub decision: Decision,
    pub before: PolicySnapshot,
    _lock: TickLock,
}

/// An operator's promotion of `id` (`kanban promote`) on a board with a `pre_claim` policy:
/// asked under the board's tick lock (waited for), as the dispatcher asks. `None`: the board
/// has no policy, or no such task (the promotion itself says so).
pub fn judge_promotion(
    root: &Path,
    loc: &BoardLocation,
    board: &Board,
    id: &str,
) -> Result<Option<Judged>, GateError> {
    let Some(gate) = Gate::load(root, &loc.slug) else {
        return Ok(None);
    };
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let lock = loop {
        if let Some(lock) = TickLock::try_acquire(&loc.db_path)? {
            break lock;
        }
        if std::time::Instant::now() >= deadline {
            return Err(GateError::Busy(loc.slug.clone()));
        }
        std::thread::sleep(LOCK_POLL);
    };
    let Some(before) = board.policy_snapshot(id)? else {
        return Ok(None);
    };
    Ok(Some(Judged {
        decision: gate.judge(&before, Phase::Promote),
        before,
        _lock: lock,
    }))
}

fn ask(policy: &PreClaim, packet: &[u8]) -> Decision {
    let mut cmd = identity::command(&policy.command[0]);
    cmd.args(&policy.command[1..]).process_group(0);
    let timeout = Duration::from_secs_f64(policy.timeout_seconds);
    let output = match cmd.output_within(packet, timeout) {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            return Decision::deny("pre_claim_timeout");
        }
        Err(_) => return Decision::deny("pre_claim_command_error"),
    };
    if !output.status.success() {
        return Decision::deny("pre_claim_command_failed");
    }
    answer(&output.stdout).unwrap_or_else(|| Decision::deny("pre_claim_invalid_response"))
}

/// The answer, when it is exactly `{"allow": bool, "reason": string}` within the bounds.
fn answer(stdout: &[u8]) -> Option<Decision> {
    if stdout.len() > MAX_ANSWER_BYTES {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(stdout).ok()?;
    let object = value.as_object()?;
    if object.len() != 2 {
        return None;
    }
    let allow = object.get("allow")?.as_bool()?;
    let reason = object.get("reason")?.as_str()?;
    (reason.len() <= MAX_REASON_BYTES).then(|| Decision {
        allow,
        reason: reason.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_exact_bounded_answer_is_one() {
        assert_eq!(
            answer(br#"{"allow": true, "reason": "ok"}"#),
            Some(Decision {
                allow: true,
                reason: "ok".into()
            })
        );
        assert_eq!(
            answer(b" {\"reason\": \"no\", \"allow\": false}\n").map(|d| d.allow),
            Some(false)
        );
        let long = format!(r#"{{"allow": true, "reason": "{}"}}"#, "x".repeat(513));
        let huge = format!(r#"{{"allow": true, "reason": "ok"}}{}"#, " ".repeat(4096));
        for bad in [
            &b""[..],
            b"yes",
            b"[true]",
            br#"{"allow": "true", "reason": "ok"}"#,
            br#"{"allow": 1, "reason": "ok"}"#,
            br#"{"allow": true}"#,
            br#"{"allow": true, "reason": 3}"#,
            br#"{"allow": true, "reason": "ok", "more": 1}"#,
            long.as_bytes(),
            huge.as_bytes(),
        ] {
            assert_eq!(answer(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
