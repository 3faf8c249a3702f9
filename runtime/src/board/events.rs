//! Typed task events: one serde enum whose variant names are the `task_events.kind` values and
//! whose fields are the JSON payload (reference/hermes-dispatch.md Appendix A).
//!
//! Events are only ever written by [`append_event`] on an open write transaction ([`Tx`]), so an
//! event is committed exactly when the transition it describes is. A payload with no fields is
//! stored as SQL `NULL`, as the original does. Reading keeps the raw kind and payload
//! ([`StoredEvent`]) so events written by another implementation still list; [`StoredEvent::decode`]
//! gives the typed view.
//!
//! Payloads are the original's where the original records the same fact, so each side reads the
//! other's events: a worker-termination report ([`Termination`]) is merged into the payload's top
//! level (`reclaimed`, `stale`, `reclaim_deferred`, `terminal_worker_reaped`), as the original
//! merges it; where kanban records more, it adds fields and never renames or nests the original's.

use serde::{Deserialize, Serialize};

use super::error::Result;
use super::model::{BlockKind, Status};
use crate::db;
use crate::db::Tx;

/// What the dispatcher did to a worker process before releasing its claim. Its fields sit at the
/// top level of the payload that carries it (`#[serde(flatten)]`), as in the original.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Termination {
    pub prev_pid: Option<i64>,
    pub host_local: bool,
    pub termination_attempted: bool,
    pub terminated: bool,
    pub sigkill: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_refused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_recycled: Option<bool>,
}

/// One file of a `workspace_discarded_content` sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscardedFile {
    pub file: String,
    pub bytes: u64,
}

/// Every event kind with its payload: the variant name in snake case is the stored kind, the
/// fields the payload. (The serde tag is `$kind` because some payloads have a `kind` field.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "$kind", rename_all = "snake_case")]
pub enum Event {
    /// The original's keys, `null` when unset; `idempotency_key` is kanban's addition.
    Created {
        assignee: Option<String>,
        status: Status,
        parents: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        creator_task_id: Option<String>,
        #[serde(default)]
        tenant: Option<String>,
        #[serde(default)]
        workspace_kind: Option<String>,
        #[serde(default)]
        workspace_path: Option<String>,
        #[serde(default)]
        branch_name: Option<String>,
        #[serde(default)]
        project_id: Option<String>,
        #[serde(default)]
        skills: Option<Vec<String>>,
        /// `true`, or `null` for a classic task (the original writes no `false`).
        #[serde(default)]
        goal_mode: Option<bool>,
        #[serde(default)]
        model_override: Option<String>,
        #[serde(default)]
        provider_override: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
        /// kanban's addition: the ref a new worktree branch starts from (`--base`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace_base: Option<String>,
        /// The root task whose decomposition created this one (the original's key).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_decompose_of: Option<String>,
        /// The completion contract when it is not `local-only`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        completion_contract: Option<String>,
    },
    /// todo → ready (payload `NULL`), or into `review` (`{status: "review"}`).
    Promoted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<Status>,
    },
    /// An operator's `kanban promote`.
    PromotedManual {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        from: Status,
        /// Promoted over unfinished parents (`promote --force`): they are listed here.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        open_parents: Vec<String>,
    },
    /// A triage task fanned out into children (the original's payload): the root waits on every
    /// child; `root_assignee` is the profile it was handed to (`null`: unchanged).
    Decomposed {
        child_ids: Vec<String>,
        root_assignee: Option<String>,
    },
    /// A triage task specified by hand and moved to `todo` (the original's payload: the fields
    /// that changed, no payload when none did).
    Specified {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changed_fields: Vec<String>,
    },
    /// Parked in `scheduled`: `reason` is the original's key; `at` (kanban's addition) is the
    /// epoch second the dispatcher wakes it, `null` for a task that waits for `unblock`.
    Scheduled {
        #[serde(default)]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<i64>,
        /// Who did it by hand when it was not the CLI: `web` (the web board). Absent from the
        /// CLI's and the dispatcher's events, as in the original.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
    },
    /// A claim found an unfinished parent and demoted the task to `todo`.
    ClaimRejected {
        reason: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parents: Vec<String>,
    },
    Claimed {
        lock: String,
        expires: i64,
        run_id: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source_status: Option<Status>,
        /// A dispatcher's claim for a worker of its own (absent on external claims, as in
        /// the original's events).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dispatcher: bool,
    },
    ClaimExtended {
        reason: String,
        worker_pid: Option<i64>,
        claim_lock: String,
        claim_expires_was: Option<i64>,
        claim_expires_now: i64,
        last_heartbeat_at: Option<i64>,
    },
    Heartbeat {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    Spawned {
        pid: i64,
        /// The process fingerprint `"<boot id>|<start time>"`, or `unverified`.
        started_at: Option<String>,
    },
    WorkerRegistered {
        pid: i64,
        started_at: Option<String>,
    },
    Completed {
        result_len: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// The claimed created cards that were verified (`--created-cards`), as the original.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verified_cards: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forced: Option<bool>,
        /// The completion's evidence receipts (`evidence-required` contracts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence: Option<Vec<crate::acceptance::Evidence>>,
    },
    /// The GitHub acceptance of a completion of a task with a repository or pull-request
    /// contract: the receipt (the original's payload), on the run it was collected for.
    PrAcceptance(crate::acceptance::Receipt),
    /// An operator's single-use grant to dispatch the task again although a comment names its
    /// open pull request (the original's payload); it lasts until a run above `run_id_floor`.
    ExistingPrAuthorized {
        operator: String,
        task_id: String,
        pr_url: String,
        repo: String,
        branch: String,
        reason: String,
        authorized_at: i64,
        run_id_floor: i64,
        pr_state: String,
    },
    /// The claim that spent the newest `existing_pr_authorized` grant, on its run.
    ExistingPrAuthorizationConsumed {
        pr_url: Option<String>,
        operator: Option<String>,
    },
    /// A completion refused because it claimed created cards that do not exist or are not this
    /// task's (the original's payload); the task is unchanged.
    CompletionBlockedHallucination {
        phantom_cards: Vec<String>,
        verified_cards: Vec<String>,
        summary_preview: Option<String>,
    },
    /// Advisory: task-like ids in a completion's summary or result that name no task.
    SuspectedHallucinatedReferences {
        phantom_refs: Vec<String>,
        source: String,
    },
    Blocked {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<BlockKind>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recurrences: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source_status: Option<Status>,
        /// `initial_status` blocks: the status the task was created in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<Status>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested_kind: Option<BlockKind>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rekind_reason: Option<String>,
    },
    DependencyWait {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<BlockKind>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source_status: Option<Status>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
        /// What made the task wait when it is not a parent: `pre_claim` (the board's policy
        /// denied it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    BlockLoopDetected {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<BlockKind>,
        recurrences: i64,
        source_status: Option<Status>,
        limit: i64,
    },
    Unblocked {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<Status>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_status: Option<Status>,
        /// Who did it by hand when it was not the CLI: `web` (the web board). Absent from the
        /// CLI's and the dispatcher's events, as in the original.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
    },
    Reclaimed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        manual: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prev_lock: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stale_lock: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_pid: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claim_expires: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_heartbeat_at: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        now: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heartbeat_stale: Option<bool>,
        retry_status: Status,
        /// Who did it by hand when it was not the CLI: `web` (the web board). Absent from the
        /// CLI's and the dispatcher's events, as in the original.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
        /// Also carries `host_local` (one key, as in the original).
        #[serde(flatten)]
        termination: Option<Termination>,
    },
    ReclaimDeferred {
        reason: String,
        claim_lock: String,
        claim_expires_now: i64,
        #[serde(flatten)]
        termination: Option<Termination>,
    },
    Crashed {
        pid: Option<i64>,
        claimer: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        terminal_provider: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_output: Option<String>,
        retry_status: Status,
    },
    ProtocolViolation {
        pid: Option<i64>,
        claimer: Option<String>,
        exit_code: Option<i32>,
        protocol_violation: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_output: Option<String>,
        retry_status: Status,
    },
    RateLimited {
        pid: Option<i64>,
        claimer: Option<String>,
        exit_code: Option<i32>,
        retry_status: Status,
    },
    TimedOut {
        pid: Option<i64>,
        elapsed_seconds: i64,
        limit_seconds: i64,
        sigkill: bool,
        retry_status: Status,
    },
    Stale {
        elapsed_seconds: i64,
        last_heartbeat_at: Option<i64>,
        heartbeat_age_seconds: Option<i64>,
        timeout_seconds: i64,
        pid: Option<i64>,
        retry_status: Status,
        #[serde(flatten)]
        termination: Option<Termination>,
    },
    /// A running task without a claim went back to `ready`.
    Reconciled {
        reason: String,
        claim_lock: Option<String>,
        claim_expires: Option<i64>,
        worker_pid: Option<i64>,
        now: i64,
    },
    SpawnFailed {
        error: String,
        failures: i64,
        retry_status: Status,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        infrastructure: Option<bool>,
    },
    GaveUp {
        failures: i64,
        effective_limit: i64,
        limit_source: String,
        error: Option<String>,
        trigger_outcome: String,
        retry_status: Option<Status>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sticky: Option<bool>,
        /// Set when the crash breaker judged the failure systemic: this many workers died in
        /// one tick with the same error fingerprint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        systemic_workers: Option<usize>,
        /// The normalised error fingerprint the systemic workers shared.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_fingerprint: Option<String>,
    },
    /// A claim whose worker never started (no pid after the grace, the claiming dispatcher gone)
    /// went back to `ready`, not counted as a failure.
    ClaimAbandoned {
        reason: String,
        claim_lock: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claimer_pid: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claimed_at: Option<i64>,
        grace_seconds: i64,
    },
    /// The dispatcher stopped a worker whose run is no longer current (an operator's reclaim or
    /// archive closed it while the process was still running).
    WorkerSuperseded {
        pid: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        current_run_id: Option<i64>,
        termination: Termination,
    },
    RespawnGuarded {
        reason: String,
    },
    SkippedNonspawnable {
        assignee: Option<String>,
    },
    Archived {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prev_status: Option<Status>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_pid: Option<i64>,
        /// Who did it by hand when it was not the CLI: `web` (the web board). Absent from the
        /// CLI's and the dispatcher's events, as in the original.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
    },
    /// An operator's `kanban edit`: the names of the fields it changed (the original's key).
    Edited {
        fields: Vec<String>,
        /// A done task's result edited (`edit --result`): its length and the new summary line,
        /// as the original's `edit_completed_task_result`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result_len: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    Assigned {
        assignee: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    Commented {
        author: String,
        len: usize,
    },
    /// A file attached to the task (`by`: who uploaded it; `null` when unknown).
    Attached {
        filename: String,
        size: i64,
        by: Option<String>,
    },
    AttachmentRemoved {
        filename: String,
    },
    Linked {
        parent: String,
        child: String,
    },
    Unlinked {
        parent: String,
        child: String,
    },
    /// A status change without a dedicated kind (the original's `status` event), e.g. a task
    /// reopened by an operator, or a descendant sent back to `todo` by an ancestor's reopen.
    Status {
        status: Status,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous_status: Option<Status>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_status: Option<Status>,
        /// Who reopened it when it was not the CLI (`web`); absent otherwise, as in the original.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
    },
    /// A descendant of a reopened task went back to `todo` (its result no longer stands).
    DescendantInvalidated {
        ancestor: String,
        prior_status: Status,
        new_status: Status,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_status: Option<Status>,
    },
    /// An implementer handed the task to review (`kanban review request`).
    ReviewRequested {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        implementer: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reviewer: Option<String>,
    },
    /// A reviewer sent the task back to its implementer (`kanban review changes`).
    ChangesRequested {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        implementer: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reviewer: Option<String>,
        status: Status,
    },
    /// An operator took a task out of review back to its implementer (`kanban review reopen`).
    ReviewReopened {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<Status>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        implementer: Option<String>,
    },
    /// A worker still alive well after its run closed was terminated by the dispatcher.
    TerminalWorkerReaped {
        pid: i64,
        worker_started_at: Option<String>,
        #[serde(flatten)]
        termination: Option<Termination>,
    },
    /// One agent turn of a worker's turn loop (appended only while the run is the worker's).
    Turn {
        /// 1 for the first turn of the run, then 2, 3, …
        turn: u32,
        kind: super::model::TurnKind,
        /// `ok`, `retryable`, `failed`, `rate_limited`, `terminal` or `interrupted`.
        exit: String,
        exit_code: i32,
        /// How long the turn took, in whole seconds.
        seconds: i64,
    },
    /// Comments added while the run was active, handed to its agent at a turn boundary (each
    /// comment once per run). `comment_ids` in the order they were given.
    CommentDelivered {
        turn: u32,
        comment_ids: Vec<i64>,
    },
    /// An owner admitted this run (owner mode): written once per run, in the board transaction
    /// that re-proves the claim. `db` is the owner's `state.db`; `pid`/`birth` name the owner.
    OwnerAdmitted {
        db: String,
        session_id: String,
        request_id: String,
        pid: i64,
        birth: Option<String>,
    },
    /// The owner's managed worker bound itself to this run (the claim re-proved in the same
    /// transaction). The run's `worker_pid` stays the submitter's.
    WorkerBound {
        pid: i64,
        claim_lock: String,
        started_at: Option<String>,
        /// The submitter the worker watches, as the owner saw it at admission.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        submitter_pid: Option<i64>,
    },
    /// The dispatcher materialised the task's workspace for a run (kanban's addition; the
    /// original only writes the columns): written when the path or branch changes.
    WorkspaceResolved {
        workspace_kind: String,
        workspace_path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch_name: Option<String>,
    },
    /// A finished task's worktree was kept: it holds work that exists nowhere else (`reason`
    /// `dirty` or `unpushed`), or removing it was not provably safe.
    WorkspacePreserved {
        path: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch_name: Option<String>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// A scratch workspace still held files when it was removed (the original's payload).
    WorkspaceDiscardedContent {
        path: String,
        total_bytes: u64,
        file_count: usize,
        sample: Vec<DiscardedFile>,
    },
    /// A finished task's workspace was removed (kanban's addition), with the `wt/*` branch
    /// deleted with a worktree.
    WorkspaceRemoved {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch_deleted: Option<String>,
    },
    /// What a worker process reported when it finished.
    WorkerResult {
        pid: i64,
        claim_lock: Option<String>,
        exit_code: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_output: Option<String>,
    },
}

impl Event {
    /// Splits the event into its stored kind and payload (`None` for an empty payload).
    pub fn encode(&self) -> Result<(String, Option<String>)> {
        if let Some(payload) = self.created_payload()? {
            return Ok(("created".to_owned(), Some(payload)));
        }
        self.encode_through_value()
    }

    /// [`Event::encode`] for every kind: the event as a JSON object (whose keys a
    /// `serde_json::Map` keeps sorted) less its tag, written compactly.
    fn encode_through_value(&self) -> Result<(String, Option<String>)> {
        let mut value = serde_json::to_value(self)?;
        let kind = value
            .as_object_mut()
            .and_then(|o| o.remove(TAG))
            .and_then(|k| k.as_str().map(str::to_owned))
            .unwrap_or_default();
        let payload = match value {
            serde_json::Value::Object(ref o) if o.is_empty() => None,
            other => Some(serde_json::to_string(&other)?),
        };
        Ok((kind, payload))
    }

    /// The payload of a `created` event (`None` for any other kind), written straight as text:
    /// the bytes [`Event::encode_through_value`] gives — keys sorted, `null` for an unset value
    /// but where the variant skips one — without building a `serde_json::Value` first, which was
    /// most of a create's own CPU after its statements (a create is the hottest insert of a
    /// board being filled). The test `created_is_written_as_the_generic_encoding_writes_it`
    /// holds the two to the same bytes.
    fn created_payload(&self) -> Result<Option<String>> {
        let Event::Created {
            assignee,
            status,
            parents,
            creator_task_id,
            tenant,
            workspace_kind,
            workspace_path,
            branch_name,
            project_id,
            skills,
            goal_mode,
            model_override,
            provider_override,
            idempotency_key,
            workspace_base,
            from_decompose_of,
            completion_contract,
        } = self
        else {
            return Ok(None);
        };
        // Every key, in sorted order; `None` marks a key the variant skips when unset.
        let fields: [(&str, Option<&dyn erased::Json>); 17] = [
            ("assignee", Some(assignee)),
            ("branch_name", Some(branch_name)),
            ("completion_contract", skipped(completion_contract)),
            ("creator_task_id", skipped(creator_task_id)),
            ("from_decompose_of", skipped(from_decompose_of)),
            ("goal_mode", Some(goal_mode)),
            ("idempotency_key", skipped(idempotency_key)),
            ("model_override", Some(model_override)),
            ("parents", Some(parents)),
            ("project_id", Some(project_id)),
            ("provider_override", Some(provider_override)),
            ("skills", Some(skills)),
            ("status", Some(status)),
            ("tenant", Some(tenant)),
            ("workspace_base", skipped(workspace_base)),
            ("workspace_kind", Some(workspace_kind)),
            ("workspace_path", Some(workspace_path)),
        ];
        let mut out = Vec::with_capacity(256);
        out.push(b'{');
        let mut first = true;
        for (key, value) in fields {
            let Some(value) = value else { continue };
            if !first {
                out.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut out, key)?;
            out.push(b':');
            value.write(&mut out)?;
        }
        out.push(b'}');
        // serde_json writes UTF-8; a failure here would be its bug, reported as its error.
        let text =
            String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)?;
        Ok(Some(text))
    }

    /// The stored kind, e.g. `claimed`.
    pub fn kind(&self) -> String {
        self.encode().map(|(k, _)| k).unwrap_or_default()
    }
}

/// A field of [`Event::created_payload`] that the variant skips when unset: `None` then.
fn skipped<T: Serialize>(value: &Option<T>) -> Option<&dyn erased::Json> {
    value.as_ref().map(|_| value as &dyn erased::Json)
}

/// Values of different types written as JSON through one list ([`Event::created_payload`]).
mod erased {
    use serde::Serialize;

    pub(super) trait Json {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    }

    impl<T: Serialize> Json for T {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}

/// The serde tag of [`Event`] (never stored).
const TAG: &str = "$kind";

/// One stored event row, kind and payload as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub id: i64,
    pub task_id: String,
    pub run_id: Option<i64>,
    pub kind: String,
    pub payload: Option<serde_json::Value>,
    pub created_at: i64,
}

impl StoredEvent {
    /// The typed event, or an error for a kind or payload this version does not know.
    pub fn decode(&self) -> Result<Event> {
        let mut object = match &self.payload {
            Some(serde_json::Value::Object(o)) => o.clone(),
            _ => serde_json::Map::new(),
        };
        object.insert(TAG.to_owned(), serde_json::Value::String(self.kind.clone()));
        Ok(serde_json::from_value(serde_json::Value::Object(object))?)
    }

    pub(crate) fn from_row(row: &db::Row<'_>) -> db::Result<StoredEvent> {
        let payload: Option<String> = row.get(4)?;
        Ok(StoredEvent {
            id: row.get(0)?,
            task_id: row.get(1)?,
            run_id: row.get(2)?,
            kind: row.get(3)?,
            payload: payload.and_then(|p| serde_json::from_str(&p).ok()),
            created_at: row.get(5)?,
        })
    }
}

/// The `SELECT` list that [`StoredEvent::from_row`] decodes.
pub(crate) const EVENT_COLUMNS: &str = "id, task_id, run_id, kind, payload, created_at";

/// Appends `event` for `task_id` inside the caller's write transaction. No transition reads
/// the new event's id, so the insert is [`db::Db::execute_unchecked`]: on PostgreSQL it travels
/// with the transition's next statement or its commit, and its failure fails the transaction.
pub(crate) fn append_event(
    tx: &Tx<'_>,
    task_id: &str,
    run_id: Option<i64>,
    event: &Event,
    now: i64,
) -> Result<()> {
    let (kind, payload) = event.encode()?;
    Ok(tx.execute_unchecked(
        "INSERT INTO task_events (task_id, run_id, kind, payload, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        db::params![task_id, run_id, kind, payload, now],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_payload_is_null_and_round_trips() {
        let e = Event::Heartbeat { note: None };
        assert_eq!(e.encode().unwrap(), ("heartbeat".to_owned(), None));
        let stored = StoredEvent {
            id: 1,
            task_id: "t_00000000".into(),
            run_id: None,
            kind: "heartbeat".into(),
            payload: None,
            created_at: 0,
        };
        assert_eq!(stored.decode().unwrap(), e);
    }

    #[test]
    fn claimed_payload_has_the_reference_fields() {
        let e = Event::Claimed {
            lock: "h:1".into(),
            expires: 900,
            run_id: 7,
            source_status: None,
            dispatcher: false,
        };
        let (kind, payload) = e.encode().unwrap();
        assert_eq!(kind, "claimed");
        let v: serde_json::Value = serde_json::from_str(&payload.unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"lock": "h:1", "expires": 900, "run_id": 7})
        );
    }

    /// The original merges the termination report into the payload's top level.
    #[test]
    fn termination_fields_are_top_level_and_round_trip() {
        let e = Event::Reclaimed {
            manual: None,
            reason: None,
            prev_lock: None,
            stale_lock: Some("h:1".into()),
            worker_pid: Some(42),
            claim_expires: Some(100),
            last_heartbeat_at: None,
            now: Some(200),
            heartbeat_stale: Some(false),
            retry_status: Status::Ready,
            actor: None,
            termination: Some(Termination {
                prev_pid: Some(42),
                host_local: true,
                termination_attempted: true,
                terminated: true,
                sigkill: false,
                signal_refused: None,
                pid_recycled: None,
            }),
        };
        let (kind, payload) = e.encode().unwrap();
        assert_eq!(kind, "reclaimed");
        let v: serde_json::Value = serde_json::from_str(&payload.unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "stale_lock": "h:1", "worker_pid": 42, "claim_expires": 100, "now": 200,
                "heartbeat_stale": false, "retry_status": "ready", "prev_pid": 42,
                "host_local": true, "termination_attempted": true, "terminated": true,
                "sigkill": false
            })
        );
        let stored = StoredEvent {
            id: 1,
            task_id: "t_00000000".into(),
            run_id: None,
            kind,
            payload: Some(v),
            created_at: 0,
        };
        assert_eq!(stored.decode().unwrap(), e);
    }

    /// A payload written by the original (`last_heartbeat_at: null`, no termination) decodes.
    #[test]
    fn the_originals_payloads_decode() {
        let stale = StoredEvent {
            id: 1,
            task_id: "t_00000000".into(),
            run_id: Some(3),
            kind: "reclaimed".into(),
            payload: Some(serde_json::json!({
                "manual": true, "reason": "operator", "prev_lock": "vm:1", "retry_status": "ready",
                "prev_pid": null, "host_local": false, "termination_attempted": false,
                "terminated": false, "sigkill": false
            })),
            created_at: 0,
        };
        match stale.decode().unwrap() {
            Event::Reclaimed {
                manual: Some(true),
                termination: Some(t),
                ..
            } => assert!(!t.host_local && !t.terminated),
            other => panic!("{other:?}"),
        }
        let created = StoredEvent {
            id: 2,
            task_id: "t_00000000".into(),
            run_id: None,
            kind: "created".into(),
            payload: Some(serde_json::json!({
                "assignee": "worker1", "status": "ready", "parents": [], "tenant": "acme",
                "workspace_kind": "scratch", "workspace_path": null, "branch_name": null,
                "project_id": null, "skills": ["sk1"], "goal_mode": null,
                "model_override": null, "provider_override": null
            })),
            created_at: 0,
        };
        assert!(matches!(
            created.decode().unwrap(),
            Event::Created { skills: Some(ref s), .. } if s == &["sk1".to_owned()]
        ));
    }

    /// The `created` payload written straight (`Event::created_payload`) is the generic
    /// encoding's bytes, with every field set or unset and with text that needs escaping.
    #[test]
    fn created_is_written_as_the_generic_encoding_writes_it() {
        let text = |n: u32, on: bool| on.then(|| format!("v{n} \"q\" \\ ü\u{1}"));
        for mask in 0u32..(1 << 14) {
            // Fourteen optional fields and the parents/skills lists: every on/off combination.
            let on = |bit: u32| mask & (1 << bit) != 0;
            let event = Event::Created {
                assignee: text(0, on(0)),
                status: if on(1) { Status::Todo } else { Status::Ready },
                parents: if on(2) {
                    vec!["t_0000000a".to_owned(), "t_b".to_owned()]
                } else {
                    Vec::new()
                },
                creator_task_id: text(3, on(3)),
                tenant: text(4, on(4)),
                workspace_kind: text(5, on(5)),
                workspace_path: text(6, on(6)),
                branch_name: text(7, on(7)),
                project_id: text(8, on(8) && on(0)),
                skills: on(9).then(|| vec!["sk\"1".to_owned()]),
                goal_mode: on(10).then_some(on(1)),
                model_override: text(11, on(11)),
                provider_override: text(11, on(11) && on(3)),
                idempotency_key: text(12, on(12)),
                workspace_base: text(13, on(13)),
                from_decompose_of: text(14, on(12) && on(2)),
                completion_contract: text(15, on(13) && on(0)),
            };
            assert_eq!(
                event.encode().unwrap(),
                event.encode_through_value().unwrap(),
                "mask {mask:#b}"
            );
        }
    }

    #[test]
    fn unknown_kind_does_not_decode() {
        let stored = StoredEvent {
            id: 1,
            task_id: "t_00000000".into(),
            run_id: None,
            kind: "from_the_future".into(),
            payload: None,
            created_at: 0,
        };
        assert!(stored.decode().is_err());
    }
}
