//! The respawn guard: before a task is claimed, the first matching reason not to start it again
//! yet, in the original's order (see docs/dispatch.md, "A tick"):
//!
//! 1. `infrastructure_cooldown` — its newest run failed to spawn for a reason of the host (no
//!    executable, no log file), less than the cooldown ago;
//! 2. `rate_limit_cooldown` — its newest run exited rate-limited (75) less than the cooldown ago
//!    (once the cooldown is over, or with a cooldown of 0, no later guard applies: a quota wall is
//!    retried forever, spaced);
//! 3. `blocker_auth` — its last failure reads like a quota, billing or authorization problem
//!    (word-bounded, case-insensitive) and its newest run did not crash: respawning cannot help
//!    until someone fixes the credentials (reassigning the task, which clears the error, does);
//! 4. (the review lane stops here)
//! 5. `recent_success` — it completed within the hour and nothing requeued it since;
//! 6. `active_pr` — a comment of the last 24 h names a GitHub pull request and no hand-off
//!    (reassignment by an operator, `changes_requested`, `review_reopened`) followed it, unless
//!    an operator's unspent `existing_pr_authorized` grant names every such pull request
//!    (`kanban authorize-existing-pr`; the next claimed run spends it).
//!
//! Pure decisions over [`GuardFacts`]; the board supplies the facts.

use crate::board::{GuardFacts, Status};

/// Seconds a completion keeps a task from being respawned unless requeued.
pub(crate) const RECENT_SUCCESS_SECONDS: i64 = 3600;
/// How far back a pull-request comment holds a task back.
pub(crate) const PR_WINDOW_SECONDS: i64 = 86_400;

/// Why a spawn was suppressed; the string is the `respawn_guarded` event's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Guard {
    InfrastructureCooldown,
    RateLimitCooldown,
    BlockerAuth,
    RecentSuccess,
    ActivePr,
}

impl Guard {
    pub const fn reason(self) -> &'static str {
        match self {
            Guard::InfrastructureCooldown => "infrastructure_cooldown",
            Guard::RateLimitCooldown => "rate_limit_cooldown",
            Guard::BlockerAuth => "blocker_auth",
            Guard::RecentSuccess => "recent_success",
            Guard::ActivePr => "active_pr",
        }
    }

    /// A cooldown ends by itself; the others need the situation to change.
    pub const fn expires_soon(self) -> bool {
        matches!(
            self,
            Guard::InfrastructureCooldown | Guard::RateLimitCooldown
        )
    }
}

/// The first guard that holds task facts `f` back in `lane` at `now`, if any.
pub(crate) fn respawn_guard(
    f: &GuardFacts,
    last_failure_error: Option<&str>,
    lane: Status,
    now: i64,
    cooldown: i64,
) -> Option<Guard> {
    if let Some(run) = &f.latest_run {
        let outcome = run.outcome.as_deref();
        if outcome == Some("spawn_failed") && run.infrastructure && now - run.ended_at < cooldown {
            return Some(Guard::InfrastructureCooldown);
        }
        if outcome == Some("rate_limited") {
            return (cooldown > 0 && now - run.ended_at < cooldown)
                .then_some(Guard::RateLimitCooldown);
        }
    }
    let crashed = f
        .latest_run
        .as_ref()
        .is_some_and(|r| r.outcome.as_deref() == Some("crashed"));
    if !crashed && last_failure_error.is_some_and(reads_like_quota_or_auth) {
        return Some(Guard::BlockerAuth);
    }
    if lane == Status::Review {
        return None;
    }
    if f.unrequeued_success_at
        .is_some_and(|at| now - at < RECENT_SUCCESS_SECONDS)
    {
        return Some(Guard::RecentSuccess);
    }
    let recent: Vec<&str> = f
        .pr_comments
        .iter()
        .filter(|(at, body)| now - at < PR_WINDOW_SECONDS && names_pull_request(body))
        .map(|(_, body)| body.as_str())
        .collect();
    if !recent.is_empty() && !authorization_covers(f.authorized_pr.as_deref(), &recent) {
        return Some(Guard::ActivePr);
    }
    None
}

/// Whether an operator's unspent grant for `authorized` lifts the `active_pr` guard: every pull
/// request the recent comments name is that one (the original's `permits_active_pr_bypass`).
pub(crate) fn authorization_covers(authorized: Option<&str>, comments: &[&str]) -> bool {
    let Some(authorized) = authorized else {
        return false;
    };
    comments.iter().all(|body| {
        let urls = crate::acceptance::pull_request_urls(body);
        !urls.is_empty() && urls.iter().all(|u| u == authorized)
    })
}

/// Whether an error text reads like a quota, rate-limit, billing or authorization problem: one
/// of the original's terms as whole words, case-insensitive.
pub(crate) fn reads_like_quota_or_auth(text: &str) -> bool {
    const WORDS: &[&str] = &[
        "quota",
        "ratelimit",
        "429",
        "403",
        "auth",
        "authz",
        "unauthorized",
        "forbidden",
        "billing",
        "subscription",
    ];
    const STEMS: &[(&str, &[&str])] = &[
        ("authenticat", &["e", "es", "ed", "ing", "ion"]),
        ("authoriz", &["e", "es", "ed", "ing", "ation"]),
        ("authoris", &["e", "es", "ed", "ing", "ation"]),
    ];
    const PHRASES: &[&[&str]] = &[
        &["rate", "limit"],
        &["access", "denied"],
        &["permission", "denied"],
        &["invalid", "api", "key"],
    ];
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let word_hit = words.iter().any(|w| {
        WORDS.contains(w)
            || STEMS.iter().any(|(stem, ends)| {
                w.strip_prefix(stem)
                    .is_some_and(|rest| ends.contains(&rest))
            })
    });
    word_hit
        || PHRASES
            .iter()
            .any(|p| words.windows(p.len()).any(|w| w == *p))
}

/// Whether `text` contains a GitHub pull-request URL: `http(s)://github.com/<owner>/<repo>/pull/<n>`.
pub(crate) fn names_pull_request(text: &str) -> bool {
    text.match_indices("github.com/").any(|(at, _)| {
        let before = &text[..at];
        let scheme = before.ends_with("https://") || before.ends_with("http://");
        let mut parts = text[at + "github.com/".len()..].split('/');
        let named = |p: Option<&str>| p.is_some_and(|s| !s.is_empty());
        scheme
            && named(parts.next())
            && named(parts.next())
            && parts.next() == Some("pull")
            && parts
                .next()
                .is_some_and(|n| n.chars().next().is_some_and(|c| c.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::LatestRun;

    fn run(outcome: &str, ended_at: i64, infrastructure: bool) -> Option<LatestRun> {
        Some(LatestRun {
            outcome: Some(outcome.to_owned()),
            ended_at,
            infrastructure,
        })
    }

    #[test]
    fn quota_and_auth_words_match_whole_words_only() {
        for yes in [
            "HTTP 429 Too Many Requests",
            "Quota exceeded for project",
            "rate limit reached",
            "rate-limit",
            "Rate_Limit",
            "401 Unauthorized",
            "authentication failed",
            "not authorised",
            "Permission denied (publickey)",
            "invalid API key",
            "billing hard limit",
        ] {
            assert!(reads_like_quota_or_auth(yes), "{yes}");
        }
        for no in [
            "author of the patch",
            "pid 4292 exited with code 1",
            "rate-limited (rc=75)",
            "segfault in parser",
            "authorship",
        ] {
            assert!(!reads_like_quota_or_auth(no), "{no}");
        }
    }

    #[test]
    fn pull_request_urls_need_scheme_owner_repo_and_a_number() {
        assert!(names_pull_request(
            "opened https://github.com/acme/widgets/pull/42 for review"
        ));
        assert!(names_pull_request("http://github.com/a/b/pull/7/files"));
        assert!(!names_pull_request(
            "https://github.com/acme/widgets/issues/42"
        ));
        assert!(!names_pull_request("github.com/acme/widgets/pull/42"));
        assert!(!names_pull_request(
            "https://github.com/acme/widgets/pull/new"
        ));
    }

    #[test]
    fn an_authorization_covers_only_comments_naming_exactly_its_pull_request() {
        let pr = "https://github.com/a/b/pull/1";
        assert!(authorization_covers(
            Some(pr),
            &["see https://github.com/a/b/pull/1"]
        ));
        assert!(!authorization_covers(
            None,
            &["see https://github.com/a/b/pull/1"]
        ));
        assert!(!authorization_covers(
            Some(pr),
            &["https://github.com/a/b/pull/1 and https://github.com/a/b/pull/2"]
        ));
        assert!(!authorization_covers(
            Some(pr),
            &[
                "https://github.com/a/b/pull/1",
                "https://github.com/a/b/pull/2"
            ]
        ));
    }

    #[test]
    fn guards_apply_in_the_original_order() {
        let now = 10_000;
        let mut f = GuardFacts {
            latest_run: run("rate_limited", now - 10, false),
            unrequeued_success_at: Some(now - 5),
            pr_comments: vec![(now - 5, "https://github.com/a/b/pull/1".into())],
            authorized_pr: None,
        };
        let g = |f: &GuardFacts, err: Option<&str>, lane| respawn_guard(f, err, lane, now, 300);
        assert_eq!(
            g(&f, Some("quota"), Status::Ready),
            Some(Guard::RateLimitCooldown)
        );
        // A rate-limited run whose cooldown is over skips every later guard.
        f.latest_run = run("rate_limited", now - 301, false);
        assert_eq!(g(&f, Some("quota"), Status::Ready), None);
        f.latest_run = run("spawn_failed", now - 10, true);
        assert_eq!(
            g(&f, None, Status::Ready),
            Some(Guard::InfrastructureCooldown)
        );
        f.latest_run = run("crashed", now - 10, false);
        assert_eq!(
            g(&f, Some("HTTP 403"), Status::Ready),
            Some(Guard::RecentSuccess)
        );
        f.latest_run = run("completed", now - 5, false);
        assert_eq!(
            g(&f, Some("HTTP 403"), Status::Ready),
            Some(Guard::BlockerAuth)
        );
        assert_eq!(g(&f, None, Status::Ready), Some(Guard::RecentSuccess));
        assert_eq!(
            g(&f, None, Status::Review),
            None,
            "the review lane stops early"
        );
        f.unrequeued_success_at = Some(now - RECENT_SUCCESS_SECONDS);
        assert_eq!(g(&f, None, Status::Ready), Some(Guard::ActivePr));
        f.pr_comments[0].0 = now - PR_WINDOW_SECONDS;
        assert_eq!(g(&f, None, Status::Ready), None);
    }
}
