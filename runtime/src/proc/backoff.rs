//! How a long-running daemon retries a failed round: a capped exponential delay ([`backoff`]) and
//! a failure [`Streak`] that says when a failure is news. Shared by the dispatcher's loop and the
//! cron scheduler's; it lives here, below both, so neither daemon imports the other. It only
//! counts and computes: it never sleeps, prints or touches a board.

use std::time::Duration;

/// The first retry delay after a failed tick.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest delay between two attempts of a failing daemon.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The delay after `failed` failed ticks in a row: [`FIRST_BACKOFF`] doubling, capped at
/// [`MAX_BACKOFF`].
pub fn backoff(failed: u32) -> Duration {
    let doublings = failed.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1u32 << doublings)
        .min(MAX_BACKOFF)
}

/// Tracks a streak of failures and decides what is worth saying (the dispatcher's `Health`, the
/// cron scheduler's `DaemonEvent`).
#[derive(Debug, Default)]
pub(crate) struct Streak {
    failed: u32,
    last_message: Option<String>,
}

impl Streak {
    /// A tick failed: the new streak length and whether this failure should be reported (the
    /// first of a streak, or a different error than the last one reported).
    pub fn failed(&mut self, message: String) -> (u32, bool) {
        self.failed = self.failed.saturating_add(1);
        let new = self.last_message.as_deref() != Some(message.as_str());
        self.last_message = Some(message);
        (self.failed, new)
    }

    /// A tick succeeded: `Some(n)` when it ends a streak of `n` failures.
    pub fn succeeded(&mut self) -> Option<u32> {
        self.last_message = None;
        let n = std::mem::take(&mut self.failed);
        (n > 0).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_a_quarter_second_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_secs(1));
        assert_eq!(backoff(8), Duration::from_secs(30));
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
        assert_eq!(backoff(0), FIRST_BACKOFF);
    }

    #[test]
    fn a_streak_is_reported_once_per_change() {
        let mut s = Streak::default();
        assert_eq!(s.succeeded(), None);
        assert_eq!(s.failed("disk full".into()), (1, true));
        assert_eq!(s.failed("disk full".into()), (2, false));
        assert_eq!(s.failed("disk full".into()), (3, false));
        // A different error is news.
        assert_eq!(s.failed("locked".into()), (4, true));
        assert_eq!(s.succeeded(), Some(4));
        assert_eq!(s.succeeded(), None);
        assert_eq!(s.failed("disk full".into()), (1, true));
    }
}
