//! Human output of `kanban show`: times as local ISO with a relative age ("3 s ago", "in 14 m"),
//! and why a task waits: the reason it is blocked, and how its last run crashed (the exit class,
//! the code, the last lines the worker wrote).

use crate::board::{Run, Status, StoredEvent, Task};
use crate::cli::escape::line;

/// Worker output lines quoted for a crashed run.
const TAIL_LINES: usize = 5;

/// `epoch` as local ISO time and its distance from `now`: `2026-11-30T18:52:40+01:00 (3 s ago)`.
pub fn when(epoch: i64, now: i64) -> String {
    format!(
        "{} ({})",
        local_iso(epoch, &jiff::tz::TimeZone::system()),
        relative(epoch - now)
    )
}

/// `epoch` as ISO time in `zone` with its offset (`2026-11-30T18:52:40+01:00`); an epoch out of
/// range as its number.
fn local_iso(epoch: i64, zone: &jiff::tz::TimeZone) -> String {
    jiff::Timestamp::from_second(epoch)
        .map(|t| {
            t.to_zoned(zone.clone())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        })
        .unwrap_or_else(|_| epoch.to_string())
}

/// Whether a payload key holds a time (epoch seconds): `*_at`, and the lease's `expires`,
/// `claim_expires`, `claim_expires_was`, `claim_expires_now` and the reclaim's `now`.
fn is_time_key(key: &str) -> bool {
    key.ends_with("_at")
        || matches!(
            key,
            "expires"
                | "claim_expires"
                | "claim_expires_was"
                | "claim_expires_now"
                | "now"
                | "until"
        )
}

/// An event payload for human eyes: every top-level time (see [`is_time_key`]) that is a whole
/// number becomes [`when`]'s text; everything else is kept as stored (`--json` prints the
/// stored payload unchanged).
pub fn readable_payload(payload: &serde_json::Value, now: i64) -> serde_json::Value {
    let serde_json::Value::Object(fields) = payload else {
        return payload.clone();
    };
    let fields = fields
        .iter()
        .map(|(k, v)| match v.as_i64() {
            Some(epoch) if is_time_key(k) => {
                (k.clone(), serde_json::Value::String(when(epoch, now)))
            }
            _ => (k.clone(), v.clone()),
        })
        .collect();
    serde_json::Value::Object(fields)
}

/// `delta` seconds from now: `in 14 m`, `3 s ago`, `now`.
fn relative(delta: i64) -> String {
    let secs = delta.unsigned_abs();
    let amount = match secs {
        0 => return "now".to_owned(),
        1..=59 => format!("{secs} s"),
        60..=3599 => format!("{} m", secs / 60),
        3600..=86_399 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    };
    if delta > 0 {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// Why the task waits, as human lines (empty when there is nothing to explain): the last block
/// of a blocked task, and the crash of its last run.
pub fn why(task: &Task, runs: &[Run], events: &[StoredEvent]) -> Vec<String> {
    let mut lines = Vec::new();
    if task.status == Status::Blocked
        && let Some(e) = events
            .iter()
            .filter(|e| e.kind == "blocked" || e.kind == "gave_up")
            .max_by_key(|e| e.id)
    {
        let p = e.payload.clone().unwrap_or_default();
        if e.kind == "gave_up" {
            lines.push(format!(
                "blocked: gave up after {} failed attempt(s) (limit {})",
                p["failures"], p["effective_limit"]
            ));
        } else {
            let reason = p["reason"].as_str().unwrap_or("no reason given");
            match p["kind"].as_str() {
                Some(kind) => lines.push(format!("blocked ({kind}): {reason}")),
                None => lines.push(format!("blocked: {reason}")),
            }
        }
    }
    if task.status == Status::Scheduled
        && let Some(e) = events
            .iter()
            .filter(|e| e.kind == "scheduled")
            .max_by_key(|e| e.id)
    {
        let p = e.payload.clone().unwrap_or_default();
        let reason = p["reason"]
            .as_str()
            .map_or(String::new(), |r| format!(": {r}"));
        match p["at"].as_i64() {
            Some(at) => lines.push(format!(
                "scheduled until {} (the dispatcher wakes it){reason}",
                local_iso(at, &jiff::tz::TimeZone::system())
            )),
            None => lines.push(format!("scheduled until `kanban unblock`{reason}")),
        }
    }
    if let Some(run) = runs.iter().max_by_key(|r| r.id)
        && run.outcome.as_deref() == Some("crashed")
    {
        let meta = run.metadata.clone().unwrap_or_default();
        let class = meta["exit_kind"].as_str().unwrap_or("crashed");
        let code = meta["exit_code"]
            .as_i64()
            .map_or(String::new(), |c| format!(", exit {c}"));
        lines.push(format!("last run {} crashed: {class}{code}", run.id));
        let output = meta["worker_output"]
            .as_str()
            .or(run.error.as_deref())
            .unwrap_or("");
        // The log tail may begin with an earlier run's part: keep this run's (after its
        // `[kanban-run]` marker) and the agent's own lines.
        let all: Vec<&str> = output.lines().collect();
        let start = all
            .iter()
            .rposition(|l| l.starts_with("[kanban-run]"))
            .map_or(0, |i| i + 1);
        let tail: Vec<&str> = all[start..]
            .iter()
            .copied()
            .filter(|l| !l.starts_with("kanban worker: "))
            .filter(|l| !l.trim().is_empty() && !l.starts_with("[kanban-"))
            .collect();
        for l in &tail[tail.len().saturating_sub(TAIL_LINES)..] {
            lines.push(format!("  | {l}"));
        }
    }
    lines
}

/// One event as `kanban events` prints it: when, kind, run, readable payload (control characters
/// escaped).
pub(super) fn event_line(e: &StoredEvent, now: i64) -> String {
    let payload = e
        .payload
        .as_ref()
        .map(|p| format!(" {}", readable_payload(p, now)))
        .unwrap_or_default();
    let run = e.run_id.map(|r| format!(" run={r}")).unwrap_or_default();
    // JSON escapes C0 controls but not DEL or the C1 range; escape the whole line.
    let at = when(e.created_at, now);
    line(&format!("{at} {}{run}{payload}", e.kind)).into_owned()
}

/// A diagnostic as `diagnostics` and `show` print it: severity, kind and title, then the
/// suggested command (or the first).
pub(super) fn diagnostic_lines(d: &crate::board::diagnostics::Diagnostic) -> Vec<String> {
    let mut out = vec![
        line(&format!(
            "  [{}] {}: {}",
            d.severity.as_str(),
            d.kind,
            d.title
        ))
        .into_owned(),
    ];
    if let Some(a) = d.actions.iter().find(|a| a.suggested).or(d.actions.first()) {
        out.push(line(&format!("    try: {}", a.command)).into_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_times_read_as_local_iso_with_their_age_and_the_rest_is_kept() {
        let p = serde_json::json!({
            "expires": 1_000_900, "lock": "h:1", "run_id": 7, "claimed_at": 1_000_000,
            "worker_pid": 42, "started_at": "boot|5", "claim_expires_now": null,
        });
        let r = readable_payload(&p, 1_000_000);
        assert_eq!(r["expires"], serde_json::json!(when(1_000_900, 1_000_000)));
        assert!(r["expires"].as_str().unwrap().ends_with("(in 15 m)"));
        assert!(r["claimed_at"].as_str().unwrap().ends_with("(now)"));
        for kept in [
            "lock",
            "run_id",
            "worker_pid",
            "started_at",
            "claim_expires_now",
        ] {
            assert_eq!(r[kept], p[kept], "{kept}");
        }
        assert_eq!(
            readable_payload(&serde_json::json!([1]), 0),
            serde_json::json!([1])
        );
    }

    #[test]
    fn a_time_reads_as_iso_with_its_zone_offset() {
        let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
        assert_eq!(
            local_iso(1_764_525_160, &berlin),
            "2025-11-30T18:52:40+01:00"
        );
        assert_eq!(
            local_iso(1_764_525_160, &jiff::tz::TimeZone::UTC),
            "2025-11-30T17:52:40+00:00"
        );
        assert_eq!(local_iso(i64::MAX, &berlin), i64::MAX.to_string());
    }

    #[test]
    fn relative_ages_read_naturally() {
        assert_eq!(relative(0), "now");
        assert_eq!(relative(-3), "3 s ago");
        assert_eq!(relative(14 * 60 + 5), "in 14 m");
        assert_eq!(relative(-7200), "2 h ago");
        assert_eq!(relative(3 * 86_400), "in 3 d");
        assert!(when(0, 3).ends_with(" (3 s ago)"), "{}", when(0, 3));
    }
}
