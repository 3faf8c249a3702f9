//! The owner's wire: JSON-RPC 2.0, one JSON object per line, over the owner's Unix socket.
//!
//! Methods: `session.authenticate {ticket, operator?}` (first, on every connection),
//! `kanban.run {board, task_id, run_id, claim_lock[, db]}`, `kanban.receipt {session_id}`,
//! `owner.status {}`, `owner.resolve {task_id, as, requeue}`. An error is
//! `{"code": 4001 | 5001 | -32601 | -32700, "message": <error code>, "data": {"reason": <why>}}`
//! where `<error code>` is one of [`Code`] (the original's names) and `reason` says which check
//! refused (see the table in docs/owner-admission.md).

use serde_json::{Map, Value, json};

/// The error codes of the protocol (the original's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    PermissionDenied,
    ProfileMismatch,
    InvalidParams,
    InvalidKanbanClaim,
    StaleKanbanClaim,
    AdmissionConflict,
    NotFound,
    RuntimeDraining,
    StorageUnavailable,
}

impl Code {
    pub const ALL: [Code; 9] = [
        Code::PermissionDenied,
        Code::ProfileMismatch,
        Code::InvalidParams,
        Code::InvalidKanbanClaim,
        Code::StaleKanbanClaim,
        Code::AdmissionConflict,
        Code::NotFound,
        Code::RuntimeDraining,
        Code::StorageUnavailable,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Code::PermissionDenied => "permission_denied",
            Code::ProfileMismatch => "profile_mismatch",
            Code::InvalidParams => "invalid_params",
            Code::InvalidKanbanClaim => "invalid_kanban_claim",
            Code::StaleKanbanClaim => "stale_kanban_claim",
            Code::AdmissionConflict => "admission_conflict",
            Code::NotFound => "not_found",
            Code::RuntimeDraining => "runtime_draining",
            Code::StorageUnavailable => "storage_unavailable",
        }
    }

    /// The numeric JSON-RPC code: 5001 for storage, 4001 for every refusal.
    pub const fn number(self) -> i64 {
        match self {
            Code::StorageUnavailable => 5001,
            _ => 4001,
        }
    }
}

/// A refusal: its code and the specific reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} ({reason})", code.as_str())]
pub(crate) struct RpcError {
    pub code: Code,
    pub reason: String,
}

impl RpcError {
    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        RpcError {
            code,
            reason: reason.into(),
        }
    }

    /// The JSON-RPC `error` object.
    pub fn to_json(&self) -> Value {
        json!({
            "code": self.code.number(),
            "message": self.code.as_str(),
            "data": {"reason": self.reason},
        })
    }
}

/// A storage failure (either database) is `storage_unavailable`, never an escaped error.
impl From<crate::board::BoardError> for RpcError {
    fn from(err: crate::board::BoardError) -> Self {
        RpcError::new(Code::StorageUnavailable, crate::error_chain(&err))
    }
}

/// A success response line.
pub fn response(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error response line.
pub(crate) fn error_response(id: &Value, err: &RpcError) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": err.to_json()}).to_string()
}

/// A line that is not JSON-RPC (-32700 parse error / -32600 invalid request).
pub(crate) fn protocol_error(id: &Value, number: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": number, "message": message,
        "data": {"reason": message}}})
    .to_string()
}

/// A request line.
pub fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// The typed parameters of `kanban.run`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct KanbanRun {
    pub board: String,
    pub task_id: String,
    pub run_id: i64,
    pub claim_lock: String,
    pub db: Option<String>,
}

/// The longest request id accepted.
pub(crate) const MAX_REQUEST_ID: usize = 256;

const REQUIRED: [&str; 4] = ["board", "task_id", "run_id", "claim_lock"];

/// Validates `kanban.run`'s params: exactly `{board, task_id, run_id, claim_lock}` plus an
/// optional `db`; the strings non-empty strings (`db` too: a wrong type is `invalid_params`, never
/// an escaped error), `run_id` a positive integer (not a bool, not a float).
pub(crate) fn parse_kanban_run(params: &Value) -> Result<KanbanRun, RpcError> {
    let bad = |reason: String| RpcError::new(Code::InvalidParams, reason);
    let Some(object) = params.as_object() else {
        return Err(bad("params_not_object".into()));
    };
    for key in REQUIRED {
        if !object.contains_key(key) {
            return Err(bad(format!("missing_key:{key}")));
        }
    }
    if let Some(extra) = object
        .keys()
        .find(|k| !REQUIRED.contains(&k.as_str()) && k.as_str() != "db")
    {
        return Err(bad(format!("unknown_key:{extra}")));
    }
    let text = |key: &str, object: &Map<String, Value>| -> Result<String, RpcError> {
        match object.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(Value::String(_)) => Err(bad(format!("empty:{key}"))),
            _ => Err(bad(format!("not_a_string:{key}"))),
        }
    };
    let run_id = match object.get("run_id") {
        Some(Value::Number(n)) if n.is_i64() => n.as_i64().unwrap_or(0),
        _ => return Err(bad("not_an_integer:run_id".into())),
    };
    if run_id <= 0 {
        return Err(bad("not_positive:run_id".into()));
    }
    let run = KanbanRun {
        board: text("board", object)?,
        task_id: text("task_id", object)?,
        run_id,
        claim_lock: text("claim_lock", object)?,
        db: match object.get("db") {
            None => None,
            Some(_) => Some(text("db", object)?),
        },
    };
    if request_id(&run.board, &run.task_id, run.run_id).len() > MAX_REQUEST_ID {
        return Err(bad("request_id_too_long".into()));
    }
    Ok(run)
}

/// The longest a `kanban.receipt` may wait for its turn to settle (`wait_ms`): well inside the
/// socket's per-line deadline, so a waiting submitter is never cut off for being idle.
pub const MAX_RECEIPT_WAIT_MS: u64 = 5_000;

/// `kanban.receipt`'s optional `wait_ms`: how long the owner may hold the answer while the turn
/// is `queued` or `started` (0, the default: answer at once, as the original does). An integer
/// from 0 to [`MAX_RECEIPT_WAIT_MS`].
pub(crate) fn parse_wait_ms(params: &Value) -> Result<std::time::Duration, RpcError> {
    let bad = |reason: &str| RpcError::new(Code::InvalidParams, reason);
    match params.get("wait_ms") {
        None => Ok(std::time::Duration::ZERO),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(ms) if ms <= MAX_RECEIPT_WAIT_MS => Ok(std::time::Duration::from_millis(ms)),
            Some(_) => Err(bad("too_large:wait_ms")),
            None => Err(bad("not_an_integer:wait_ms")),
        },
        Some(_) => Err(bad("not_an_integer:wait_ms")),
    }
}

/// The attempt's durable request id: `kanban:["<board>","<task>",<run>]`.
pub fn request_id(board: &str, task_id: &str, run_id: i64) -> String {
    format!("kanban:{}", json!([board, task_id, run_id]))
}

/// The session id, derived from (profile, principal, request id): `local-<32 hex>`. Two FNV-1a
/// 64-bit hashes with different offsets over the canonical JSON triple: deterministic and stable
/// across versions; it is a key, not a security boundary (peers are authenticated separately).
pub fn session_id(profile: &str, principal: &str, request_id: &str) -> String {
    let text = json!([profile, principal, request_id]).to_string();
    let fnv = |offset: u64| {
        text.bytes().fold(offset, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "local-{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

/// The one payload a kanban turn carries (so a replay always has the same payload).
pub(crate) fn turn_payload(task_id: &str) -> String {
    json!({"intent": "queue", "payload": {"text": format!("work kanban task {task_id}")}})
        .to_string()
}

/// The capabilities a peer holds after authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Capabilities {
    pub create: bool,
    pub submit: bool,
    pub read: bool,
    pub operator: bool,
}

impl Capabilities {
    /// What an authenticated peer gets: create, submit, read; operator only when asked for.
    pub fn granted(operator: bool) -> Self {
        Capabilities {
            create: true,
            submit: true,
            read: true,
            operator,
        }
    }

    /// The names, for the `session.authenticate` result.
    pub fn names(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.create {
            out.push("session:create");
        }
        if self.submit {
            out.push("session:submit");
        }
        if self.read {
            out.push("session:read");
        }
        if self.operator {
            out.push("session:operator");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Value {
        json!({"board": "default", "task_id": "t_1", "run_id": 3, "claim_lock": "h:1"})
    }

    fn reason(v: Value) -> String {
        let e = parse_kanban_run(&v).unwrap_err();
        assert_eq!(e.code, Code::InvalidParams, "{e}");
        e.reason
    }

    #[test]
    fn the_closed_typed_parameter_set() {
        assert_eq!(parse_kanban_run(&good()).unwrap().run_id, 3);
        let mut with_db = good();
        with_db["db"] = json!("/x/kanban.db");
        assert_eq!(
            parse_kanban_run(&with_db).unwrap().db.as_deref(),
            Some("/x/kanban.db")
        );
        assert_eq!(reason(json!([1])), "params_not_object");
        for key in REQUIRED {
            let mut v = good();
            v.as_object_mut().unwrap().remove(key);
            assert_eq!(reason(v), format!("missing_key:{key}"));
        }
        let mut v = good();
        v["extra"] = json!(1);
        assert_eq!(reason(v), "unknown_key:extra");
        for key in ["board", "task_id", "claim_lock", "db"] {
            for wrong in [json!(1), json!(null), json!(true), json!(["x"])] {
                let mut v = good();
                v[key] = wrong;
                assert_eq!(reason(v), format!("not_a_string:{key}"));
            }
            let mut v = good();
            v[key] = json!("");
            assert_eq!(reason(v), format!("empty:{key}"));
        }
        for wrong in [json!("3"), json!(true), json!(3.5), json!(null)] {
            let mut v = good();
            v["run_id"] = wrong;
            assert_eq!(reason(v), "not_an_integer:run_id");
        }
        let mut v = good();
        v["run_id"] = json!(0);
        assert_eq!(reason(v), "not_positive:run_id");
        let mut v = good();
        v["task_id"] = json!("x".repeat(300));
        assert_eq!(reason(v), "request_id_too_long");
    }

    #[test]
    fn ids_are_deterministic_and_distinct() {
        let r = request_id("owned", "t_ab12", 42);
        assert_eq!(r, r#"kanban:["owned","t_ab12",42]"#);
        let a = session_id("p", "uid:1", &r);
        assert_eq!(a, session_id("p", "uid:1", &r));
        assert_eq!(a.len(), "local-".len() + 32);
        assert_ne!(a, session_id("p", "uid:2", &r));
        assert_ne!(a, session_id("q", "uid:1", &r));
        assert_ne!(
            a,
            session_id("p", "uid:1", &request_id("owned", "t_ab12", 43))
        );
    }

    #[test]
    fn errors_carry_code_and_reason() {
        let e = RpcError::new(Code::StaleKanbanClaim, "run_superseded").to_json();
        assert_eq!(e["message"], "stale_kanban_claim");
        assert_eq!(e["code"], 4001);
        assert_eq!(e["data"]["reason"], "run_superseded");
        assert_eq!(
            RpcError::new(Code::StorageUnavailable, "x").to_json()["code"],
            5001
        );
        let names: Vec<_> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), 9);
    }
}
