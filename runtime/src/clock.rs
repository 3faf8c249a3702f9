//! Injected time. Every transition takes `now` (integer epoch seconds) from a [`Clock`], so a test
//! expires a 900 s lease by moving a [`ManualClock`] instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of the current time in integer epoch seconds.
pub trait Clock: Send + Sync {
    fn now(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn new(start: i64) -> Self {
        Self(Arc::new(AtomicI64::new(start)))
    }
    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::SeqCst);
    }
    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The unit words of a duration and their length in seconds (the original's `90s`, `30m`, `2h`,
/// `1d`, and the words cron's schedules accept).
pub const DURATION_UNITS: [(&[&str], i64); 4] = [
    (&["s", "sec", "secs", "second", "seconds"], 1),
    (&["m", "min", "mins", "minute", "minutes"], 60),
    (&["h", "hr", "hrs", "hour", "hours"], 3_600),
    (&["d", "day", "days"], 86_400),
];

/// The longest duration accepted: 366 days.
pub const MAX_DURATION_SECONDS: i64 = 366 * 86_400;

/// `90s`, `30m`, `2 h`, `1.5h`, `hour`, `1day` → seconds: a count (1 when left out) and a unit
/// of [`DURATION_UNITS`], positive and at most [`MAX_DURATION_SECONDS`]. With `allow_seconds`
/// false, the second units and fractions are refused (cron's schedules step by whole minutes);
/// with it, a fraction is rounded to the nearest second. The message says what is wrong and
/// what is accepted.
pub fn parse_duration(text: &str, allow_seconds: bool) -> Result<i64, String> {
    let text = text.trim();
    let number = |c: &char| c.is_ascii_digit() || (allow_seconds && *c == '.');
    let digits: String = text.chars().take_while(number).collect();
    let unit = text[digits.len()..].trim();
    let count: f64 = if digits.is_empty() {
        1.0
    } else if digits.contains('.') {
        digits
            .parse()
            .map_err(|_| format!("`{digits}` is not a usable number"))?
    } else {
        digits
            .parse::<i64>()
            .map_err(|_| format!("`{digits}` is not a usable number"))? as f64
    };
    let units = if allow_seconds {
        "s, m, h or d"
    } else {
        "m, h or d"
    };
    let per = match unit {
        "" => return Err(format!("a duration needs a unit ({units})")),
        "s" | "sec" | "secs" | "second" | "seconds" if !allow_seconds => {
            return Err("the smallest unit is the minute (m)".to_owned());
        }
        other => DURATION_UNITS
            .iter()
            .find(|(names, _)| names.contains(&other))
            .map(|(_, per)| *per)
            .ok_or_else(|| format!("unknown duration unit `{other}` (use {units})"))?,
    };
    let seconds = (count * per as f64).round();
    if seconds < 1.0 {
        return Err(
            "a duration must be positive (a zero interval would fire on every tick)".to_owned(),
        );
    }
    if seconds > MAX_DURATION_SECONDS as f64 {
        return Err("a duration may be at most 366 days".to_owned());
    }
    Ok(seconds as i64)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn the_originals_duration_forms_are_read() {
        for (text, secs) in [("90s", 90), ("30m", 1_800), ("2h", 7_200), ("1d", 86_400)] {
            assert_eq!(parse_duration(text, true), Ok(secs), "{text}");
        }
        assert_eq!(parse_duration("2 hours", true), Ok(7_200));
        assert_eq!(parse_duration("hour", true), Ok(3_600));
        assert_eq!(parse_duration("1.5h", true), Ok(5_400));
        assert!(
            parse_duration("1.5h", false).is_err(),
            "cron counts whole minutes"
        );
    }

    #[test]
    fn bad_durations_say_what_is_accepted() {
        assert!(
            parse_duration("90", true)
                .unwrap_err()
                .contains("s, m, h or d")
        );
        assert!(
            parse_duration("5w", true)
                .unwrap_err()
                .contains("unknown duration unit")
        );
        assert!(parse_duration("0s", true).unwrap_err().contains("positive"));
        assert!(
            parse_duration("400d", true)
                .unwrap_err()
                .contains("366 days")
        );
        assert!(parse_duration("90s", false).unwrap_err().contains("minute"));
    }
}
