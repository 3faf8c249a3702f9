//! The schedule grammar: what a job's `--schedule` may say, and when it fires next.
//!
//! Accepted forms, tried in this order:
//!
//! * A day-and-time phrase (`every monday 9am`, `weekdays at 9am`, `monday, wednesday at
//!   9:30pm`, `every day at noon`): a cron expression `M H * * DOW` in the configured zone, or
//!   in the zone of a `TZ=<IANA zone>` prefix (see `phrase.rs` for the words).
//! * `every <duration>` and a bare `<duration>` (`every 30m`, `every 2 hours`, `45m`, `2 h`,
//!   `30 minutes`, `hour`, `day`): recurring at a fixed interval. Units: `m`/`min`/`minute(s)`,
//!   `h`/`hr`/`hour(s)`, `d`/`day(s)`; a bare unit means one. The interval keeps its phase: after
//!   a missed stretch the next run is the first point of the lattice that lies after now (missed
//!   points collapse into one run, they are never burst-fired). A zero interval is refused.
//! * `in <duration>`: a one-shot at now + duration (on the absolute time line, so a DST change
//!   cannot shift it).
//! * An ISO-8601 time (`2026-12-01T09:00:00Z`, `2026-12-01T09:00Z`, `…+01:00`, or a naive
//!   `2026-12-01T09:00`/`2026-12-01 09:00`/`2026-12-01`, read in the configured zone): a
//!   one-shot. Second 60 is refused (no leap seconds); a fraction of a second rounds *up*, so a
//!   one-shot never fires early. A naive time in a DST gap is refused; one in a fold means its
//!   first instant.
//! * A cron expression of five fields, six with the seconds last, or seven with a year after
//!   them (`0 9 * * 1-5`, `0 9 * * * 30`, `0 9 1 1 * 0 2030`; grammar in `expr.rs`),
//!   optionally prefixed `TZ=<IANA zone>`; otherwise in
//!   the configured zone (`[cron] timezone`, default UTC). Refused: a seconds field that fires
//!   every second, an expression that never matches (`0 0 30 2 *`), and one whose first run is
//!   more than [`FIRST_RUN_HORIZON_YEARS`] years away.
//!
//! # Daylight saving
//!
//! A cron expression names wall-clock times in its zone. Its **hour field** decides which of two
//! rules applies when the zone's clocks change:
//!
//! * **Wall-clock schedule** — the hour field does not start with `*` (a fixed hour, a list, a
//!   range, `a-b/n`, `a/n`; `30 2 * * *`, `0 2,14 * * *`, `5 2-3 * * *`, `*/15 2 * * *`,
//!   `@daily`, every phrase). Every matching wall-clock time runs exactly once: a time the clock
//!   shows once runs then; a time the clock shows twice (a fall-back fold) runs at its first
//!   instant only; the times a spring-forward skips run once, together, at the transition instant
//!   (the first instant after the gap, e.g. 03:00 in Berlin), which counts as that run even when
//!   the time then shown (03:00) also matches.
//! * **Elapsed-time schedule** — the hour field starts with `*` (`*`, `*/n`; `* * * * *`,
//!   `*/15 * * * *`, `0 * * * *`, `0 */2 * * *`, `@hourly`). It runs at every instant whose
//!   wall-clock time matches: in a fold both copies of a matching time run, a time inside a gap
//!   does not exist and does not run. So `*/15 * * * *` stays 15 real minutes apart through
//!   both changes.
//!
//! Vixie cron draws the same line but also counts a `*` minute field as elapsed (`*/15 2 * * *`
//! is a wall-clock schedule here). The zone rules come from `jiff`'s bundled tz database, whose
//! per-zone rule extends daylight saving past the last listed year (2100 and later are right).
//!
//! The parsed [`Schedule`] is stored with the job (as JSON), so a job keeps the zone and the
//! one-shot instant it was created with. This module only computes; it never reads the clock
//! (every function takes `now`).

mod expr;
mod phrase;
mod zone;

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use serde::{Deserialize, Serialize};

use expr::CronExpr;

/// A one-shot may be created up to this many seconds in the past (a clock skew allowance); it
/// then runs at the next tick.
pub(crate) const ONE_SHOT_PAST_GRACE_SECONDS: i64 = 120;

/// A cron expression whose first run lies further ahead than this is refused when created.
pub(crate) const FIRST_RUN_HORIZON_YEARS: i64 = 10;

/// The accepted forms, quoted in every parse error.
pub(crate) const ACCEPTED_FORMS: &str = "accepted forms: a cron expression such as `0 9 * * 1-5` \
(optionally prefixed `TZ=Europe/Berlin `; a 6th field is the seconds, a 7th the year), a \
phrase such as \
`every monday 9am` or `weekdays at 9:30pm`, `every 30m` / `every 2 hours` / a bare `30m` or \
`hour` (recurring), `in 10m` or an ISO-8601 time such as `2026-12-01T09:00Z` (one-shot)";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid schedule `{input}`: {reason}; {ACCEPTED_FORMS}")]
pub struct ScheduleError {
    pub input: String,
    pub reason: String,
}

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Schedule {
    /// A cron expression (five fields, six with the seconds last, seven with a year after them)
    /// evaluated in an IANA zone.
    Cron { expr: String, tz: String },
    /// Every `seconds` (a whole number of minutes).
    Interval { seconds: i64 },
    /// Once, at epoch second `at`.
    Once { at: i64 },
}

impl Schedule {
    /// Parses `input`; `now` anchors `in …` and the cron horizon check, and `default_tz` reads
    /// cron expressions, phrases and naive timestamps that name no zone.
    pub fn parse(input: &str, now: i64, default_tz: TimeZone) -> Result<Self, ScheduleError> {
        let err = |reason: &str| ScheduleError {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let text = input.trim();
        if text.is_empty() {
            return Err(err("it is empty"));
        }
        if let Some(phrase) = phrase::parse(text) {
            let expr = phrase.map_err(|r| err(&r))?;
            return cron_schedule(expr, &default_tz, now).map_err(|r| err(&r));
        }
        let lower = text.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("every ") {
            let seconds = parse_duration(rest.trim()).map_err(|r| err(&r))?;
            return Ok(Schedule::Interval { seconds });
        }
        if let Some(rest) = lower.strip_prefix("in ") {
            let seconds = parse_duration(rest.trim()).map_err(|r| err(&r))?;
            return Ok(Schedule::Once { at: now + seconds });
        }
        if looks_like_duration(&lower) {
            let seconds = parse_duration(&lower).map_err(|r| err(&r))?;
            return Ok(Schedule::Interval { seconds });
        }
        if looks_like_timestamp(text) {
            let at = parse_timestamp(text, &default_tz).map_err(|r| err(&r))?;
            if at < now - ONE_SHOT_PAST_GRACE_SECONDS {
                return Err(err("that time is in the past"));
            }
            return Ok(Schedule::Once { at });
        }
        let (tz, expr) = split_zone_prefix(text, default_tz).map_err(|r| err(&r))?;
        if let Some(phrase) = phrase::parse(expr) {
            let expr = phrase.map_err(|r| err(&r))?;
            return cron_schedule(expr, &tz, now).map_err(|r| err(&r));
        }
        let fields = expr.split_whitespace().count();
        if !(5..=7).contains(&fields) && !expr.starts_with('@') {
            return Err(err(&format!(
                "not a recognised form (a cron expression needs 5 fields, 6 with the seconds \
                 last, 7 with a year after them; this has {fields})"
            )));
        }
        let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        cron_schedule(expr, &tz, now).map_err(|r| err(&r))
    }

    /// True for schedules that fire more than once.
    pub fn is_recurring(&self) -> bool {
        !matches!(self, Schedule::Once { .. })
    }

    /// When a newly created (or resumed) job first fires: the first occurrence strictly after
    /// `now` for recurring schedules (an interval's first run is one interval from now), the
    /// instant itself for a one-shot.
    pub fn first_run(&self, now: i64) -> Option<i64> {
        match self {
            Schedule::Once { at } => Some(*at),
            Schedule::Interval { seconds } => Some(now + seconds),
            Schedule::Cron { .. } => self.next_after(now, now),
        }
    }

    /// The occurrence after `occurrence` that lies strictly after `now` (missed occurrences
    /// collapse); `None` for a one-shot, or when a cron expression never matches again (or its
    /// stored zone is unknown to this build).
    pub fn next_after(&self, occurrence: i64, now: i64) -> Option<i64> {
        match self {
            Schedule::Once { .. } => None,
            Schedule::Interval { seconds } => {
                let step = (*seconds).max(1);
                let steps = if now < occurrence {
                    1
                } else {
                    (now - occurrence) / step + 1
                };
                Some(occurrence + steps * step)
            }
            Schedule::Cron { expr, tz } => {
                let cron = CronExpr::parse(expr).ok()?;
                let zone = TimeZone::get(tz).ok()?;
                zone::next_run(&cron, &zone, occurrence.max(now))
            }
        }
    }

    /// A short human description (`every 30m`, `cron 0 9 * * * (Europe/Berlin)`, `once at …`).
    pub fn describe(&self) -> String {
        match self {
            Schedule::Interval { seconds } => format!("every {}", format_duration(*seconds)),
            Schedule::Once { at } => match Timestamp::from_second(*at) {
                Ok(t) => format!("once at {}", t.strftime("%Y-%m-%dT%H:%M:%SZ")),
                Err(_) => format!("once at epoch {at}"),
            },
            Schedule::Cron { expr, tz } => format!("cron `{expr}` ({tz})"),
        }
    }
}

/// The zone named by `[cron] timezone`, UTC when unset.
pub fn zone(name: Option<&str>) -> Result<TimeZone, ScheduleError> {
    match name {
        None => Ok(TimeZone::UTC),
        Some(n) => lookup_zone(n).map_err(|_| ScheduleError {
            input: n.to_owned(),
            reason: "unknown IANA time zone in `[cron] timezone` (use e.g. `Europe/Berlin`)"
                .to_owned(),
        }),
    }
}

fn lookup_zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name).map_err(|_| format!("unknown IANA time zone `{name}`"))
}

/// The name stored with a job (the database's spelling of it).
fn zone_name(tz: &TimeZone) -> String {
    tz.iana_name().unwrap_or("UTC").to_owned()
}

/// Validates `expr` in `tz` and checks that it runs, soon enough, after `now`.
fn cron_schedule(expr: String, tz: &TimeZone, now: i64) -> Result<Schedule, String> {
    let cron = CronExpr::parse(&expr).map_err(|e| format!("bad cron expression: {e}"))?;
    let Some(first) = zone::next_run(&cron, tz, now) else {
        return Err(
            "the cron expression never matches a date from now on (e.g. 30 February, or only \
             past years)"
                .to_owned(),
        );
    };
    let horizon = now.saturating_add(FIRST_RUN_HORIZON_YEARS * 366 * 86_400);
    if first > horizon {
        let when = Timestamp::from_second(first)
            .map(|t| {
                t.to_zoned(tz.clone())
                    .strftime("%Y-%m-%d %H:%M %Z")
                    .to_string()
            })
            .unwrap_or_else(|_| first.to_string());
        return Err(format!(
            "its first run would be {when}, more than {FIRST_RUN_HORIZON_YEARS} years away \
             (almost certainly a mistake)"
        ));
    }
    Ok(Schedule::Cron {
        expr,
        tz: zone_name(tz),
    })
}

fn split_zone_prefix(text: &str, default_tz: TimeZone) -> Result<(TimeZone, &str), String> {
    let upper = text
        .get(..8)
        .map(str::to_ascii_uppercase)
        .unwrap_or_default();
    let rest = if upper.starts_with("CRON_TZ=") {
        &text[8..]
    } else if upper.starts_with("TZ=") {
        &text[3..]
    } else {
        return Ok((default_tz, text));
    };
    let (name, expr) = rest
        .split_once(char::is_whitespace)
        .ok_or_else(|| "`TZ=<zone>` must be followed by a cron expression".to_owned())?;
    Ok((lookup_zone(name)?, expr.trim()))
}

const UNITS: [(&[&str], i64); 3] = [
    (&["m", "min", "mins", "minute", "minutes"], 60),
    (&["h", "hr", "hrs", "hour", "hours"], 3_600),
    (&["d", "day", "days"], 86_400),
];

/// `30m`, `2 h`, `30 minutes`, or a bare unit word such as `hour`.
fn looks_like_duration(text: &str) -> bool {
    let t = text.trim();
    let starts_with_digit = t.chars().next().is_some_and(|c| c.is_ascii_digit());
    let shape = t.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
        && t.split_whitespace().count() <= 2
        && t.chars().any(|c| c.is_ascii_alphabetic());
    shape && (starts_with_digit || UNITS.iter().any(|(names, _)| names.contains(&t)))
}

/// `30m`, `2 h`, `hour`, `1day` → seconds (at least one minute): [`crate::clock::parse_duration`]
/// without its second units.
fn parse_duration(text: &str) -> Result<i64, String> {
    crate::clock::parse_duration(text, false)
}

fn format_duration(seconds: i64) -> String {
    if seconds % 86_400 == 0 {
        format!("{}d", seconds / 86_400)
    } else if seconds % 3_600 == 0 {
        format!("{}h", seconds / 3_600)
    } else {
        format!("{}m", seconds / 60)
    }
}

fn looks_like_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

/// An ISO-8601 time → epoch second, rounded up to a whole second (a naive time is read in `tz`).
pub(crate) fn parse_timestamp(text: &str, tz: &TimeZone) -> Result<i64, String> {
    let invalid = || "not a valid ISO-8601 date and time".to_owned();
    // `YYYY-MM-DD[T ]HH:MM:SS…`: jiff reads second 60 as 59; a schedule refuses it instead.
    let b = text.as_bytes();
    if b.len() >= 19 && matches!(b[10], b'T' | b't' | b' ') && b[16] == b':' && &b[17..19] == b"60"
    {
        return Err("second 60 is not a time kanban can schedule (no leap seconds)".to_owned());
    }
    let has_offset = {
        let time = text.get(10..).unwrap_or("");
        time.ends_with(['Z', 'z']) || time.contains(['+', '-'])
    };
    if has_offset {
        let t: Timestamp = text.parse().map_err(|_| invalid())?;
        return Ok(ceil_second(t));
    }
    let naive: DateTime = text.parse().map_err(|_| invalid())?;
    let resolved = match tz.to_ambiguous_timestamp(naive).offset() {
        AmbiguousOffset::Unambiguous { offset } | AmbiguousOffset::Fold { before: offset, .. } => {
            offset.to_timestamp(naive).map_err(|_| invalid())?
        }
        AmbiguousOffset::Gap { .. } => {
            return Err(format!(
                "{naive} does not exist in {} (skipped by a daylight-saving change)",
                zone_name(tz)
            ));
        }
    };
    Ok(ceil_second(resolved))
}

/// The epoch second at or after `t` (a one-shot never fires before its time).
fn ceil_second(t: Timestamp) -> i64 {
    let nanos = t.as_nanosecond();
    let whole = nanos.div_euclid(1_000_000_000);
    let up = i128::from(nanos.rem_euclid(1_000_000_000) != 0);
    (whole + up) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_780_000_000; // 2026-05-28T20:26:40Z

    fn ts(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_second()
    }

    fn tz(name: &str) -> TimeZone {
        TimeZone::get(name).unwrap()
    }

    fn cron(expr: &str, tz: &str) -> Schedule {
        Schedule::Cron {
            expr: expr.into(),
            tz: tz.into(),
        }
    }

    #[test]
    fn accepted_forms_parse_to_the_expected_schedule() {
        let cases: &[(&str, Schedule)] = &[
            ("every 30m", Schedule::Interval { seconds: 1_800 }),
            ("every 2h", Schedule::Interval { seconds: 7_200 }),
            ("EVERY 1d", Schedule::Interval { seconds: 86_400 }),
            ("every hour", Schedule::Interval { seconds: 3_600 }),
            ("every 15 minutes", Schedule::Interval { seconds: 900 }),
            ("every 2 hours", Schedule::Interval { seconds: 7_200 }),
            ("every day", Schedule::Interval { seconds: 86_400 }),
            ("30m", Schedule::Interval { seconds: 1_800 }),
            ("2h", Schedule::Interval { seconds: 7_200 }),
            ("2 h", Schedule::Interval { seconds: 7_200 }),
            ("30 minutes", Schedule::Interval { seconds: 1_800 }),
            ("hour", Schedule::Interval { seconds: 3_600 }),
            ("day", Schedule::Interval { seconds: 86_400 }),
            ("Days", Schedule::Interval { seconds: 86_400 }),
            ("in 10m", Schedule::Once { at: NOW + 600 }),
            ("in 1h", Schedule::Once { at: NOW + 3_600 }),
            ("in 2 hours", Schedule::Once { at: NOW + 7_200 }),
            (
                "2026-12-01T09:00:00Z",
                Schedule::Once {
                    at: ts("2026-12-01T09:00:00Z"),
                },
            ),
            (
                "2027-06-15T09:00Z",
                Schedule::Once {
                    at: ts("2027-06-15T09:00:00Z"),
                },
            ),
            (
                "2026-12-01T09:00:00+01:00",
                Schedule::Once {
                    at: ts("2026-12-01T08:00:00Z"),
                },
            ),
            (
                "2026-12-01 09:00:00-05:00",
                Schedule::Once {
                    at: ts("2026-12-01T14:00:00Z"),
                },
            ),
            (
                "2026-12-01T09:00",
                Schedule::Once {
                    at: ts("2026-12-01T09:00:00Z"),
                },
            ),
            (
                "2026-12-01 09:00",
                Schedule::Once {
                    at: ts("2026-12-01T09:00:00Z"),
                },
            ),
            (
                "2026-12-01",
                Schedule::Once {
                    at: ts("2026-12-01T00:00:00Z"),
                },
            ),
            ("0 9 * * 1-5", cron("0 9 * * 1-5", "UTC")),
            ("  */5   *  * * *  ", cron("*/5 * * * *", "UTC")),
            ("0 9 * * * 30", cron("0 9 * * * 30", "UTC")),
            (
                "0 9 1 1 * 0 2027-2030",
                cron("0 9 1 1 * 0 2027-2030", "UTC"),
            ),
            (
                "TZ=Europe/Berlin 30 2 * * *",
                cron("30 2 * * *", "Europe/Berlin"),
            ),
            ("@daily", cron("@daily", "UTC")),
            ("every monday 9am", cron("0 9 * * 1", "UTC")),
            ("weekdays at 9am", cron("0 9 * * 1-5", "UTC")),
            ("monday, wednesday at 9:30pm", cron("30 21 * * 1,3", "UTC")),
            ("every day at noon", cron("0 12 * * *", "UTC")),
            (
                "TZ=Asia/Kathmandu weekdays at 9am",
                cron("0 9 * * 1-5", "Asia/Kathmandu"),
            ),
        ];
        for (input, want) in cases {
            let got = Schedule::parse(input, NOW, TimeZone::UTC);
            assert_eq!(got.as_ref(), Ok(want), "input {input:?}");
        }
    }

    #[test]
    fn naive_timestamps_phrases_and_cron_use_the_configured_zone() {
        let berlin = tz("Europe/Berlin");
        assert_eq!(
            Schedule::parse("2026-12-01T09:00", NOW, berlin.clone()),
            Ok(Schedule::Once {
                at: ts("2026-12-01T08:00:00Z")
            })
        );
        assert_eq!(
            Schedule::parse("0 9 * * *", NOW, berlin.clone()),
            Ok(cron("0 9 * * *", "Europe/Berlin"))
        );
        assert_eq!(
            Schedule::parse("weekdays at 9am", NOW, berlin),
            Ok(cron("0 9 * * 1-5", "Europe/Berlin"))
        );
    }

    #[test]
    fn zone_names_are_stored_as_the_database_spells_them() {
        assert_eq!(
            Schedule::parse("tz=europe/berlin 0 9 * * *", NOW, TimeZone::UTC),
            Ok(cron("0 9 * * *", "Europe/Berlin"))
        );
        assert_eq!(
            Schedule::parse("CRON_TZ=America/New_York 0 9 * * *", NOW, TimeZone::UTC),
            Ok(cron("0 9 * * *", "America/New_York"))
        );
        assert_eq!(
            zone(Some("Asia/Kathmandu")).unwrap().iana_name(),
            Some("Asia/Kathmandu")
        );
        assert!(zone(Some("Mars/Olympus")).is_err());
    }

    #[test]
    fn iso_edges_leap_seconds_and_fractions() {
        let utc = TimeZone::UTC;
        for input in [
            "2027-06-15T09:00:60Z",
            "2027-06-15T09:00:60",
            "2027-06-15 09:00:60+01:00",
        ] {
            let err = Schedule::parse(input, NOW, utc.clone()).expect_err(input);
            assert!(err.reason.contains("second 60"), "{input}: {err}");
        }
        // A fraction never makes a one-shot early: it rounds up to the next whole second.
        for (input, want) in [
            ("2027-06-15T09:00:00.001Z", "2027-06-15T09:00:01Z"),
            ("2027-06-15T09:00:00.999999999Z", "2027-06-15T09:00:01Z"),
            ("2027-06-15T09:00:59.5Z", "2027-06-15T09:01:00Z"),
            ("2027-06-15T09:00:00.000Z", "2027-06-15T09:00:00Z"),
            ("2027-06-15T09:00:00.25", "2027-06-15T09:00:01Z"),
        ] {
            assert_eq!(
                Schedule::parse(input, NOW, utc.clone()),
                Ok(Schedule::Once { at: ts(want) }),
                "{input}"
            );
        }
    }

    #[test]
    fn invalid_inputs_name_the_accepted_forms() {
        let cases = [
            "",
            "tomorrow",
            "every",
            "every 0m",
            "0m",
            "in 0h",
            "every 10s",
            "every 3 fortnights",
            "in",
            "in 5x",
            "30",
            "0 9 * *",
            "0 9 * * * *",
            "0 9 * * * */1",
            "0 0 1 1 * 0 2100",
            "0 0 1 1 * 0 2020",
            "61 * * * *",
            "0 9 * * 8-9",
            "0 0 30 2 *",
            "TZ=Mars/Olympus 0 9 * * *",
            "2026-13-01T00:00:00Z",
            "2020-01-01T00:00:00Z",
            "2027-06-15T09:00:60Z",
            "every 400d",
            "every monday",
            "weekdays at 25:00",
        ];
        for input in cases {
            let err = Schedule::parse(input, NOW, TimeZone::UTC).expect_err(input);
            let msg = err.to_string();
            assert!(msg.contains("accepted forms"), "{input:?}: {msg}");
            assert!(msg.contains("every 30m") && msg.contains("in 10m"), "{msg}");
        }
    }

    #[test]
    fn never_matching_and_far_first_runs_are_refused() {
        let err = Schedule::parse("0 0 31 4 *", NOW, TimeZone::UTC).unwrap_err();
        assert!(err.reason.contains("never matches"), "{err}");
        // The fifth Monday of February: only in a leap year whose February starts on a Monday;
        // AND-ed because the day of month is `*`. After 2044 the next is 2072.
        let from_2045 = ts("2045-01-01T00:00:00Z");
        let err = Schedule::parse("0 0 * 2 1#5", from_2045, TimeZone::UTC).unwrap_err();
        assert!(err.reason.contains("more than 10 years away"), "{err}");
        assert!(err.reason.contains("2072-02-29"), "{err}");
        // 29 February is at most 8 years away (across 2100) and is accepted.
        let from_2096 = ts("2096-03-01T00:00:00Z");
        let feb29 = Schedule::parse("0 0 29 2 *", from_2096, TimeZone::UTC).unwrap();
        assert_eq!(feb29.first_run(from_2096), Some(ts("2104-02-29T00:00:00Z")));
        // The example: the last Sunday of March at 02:00/02:30 in Berlin is the
        // spring-forward day, so both times are in the gap and run once at its end, every year.
        let now = ts("2027-01-01T00:00:00Z");
        let gap = Schedule::parse("TZ=Europe/Berlin 0,30 2 * 3 0L", now, TimeZone::UTC).unwrap();
        let first = gap.first_run(now).unwrap();
        assert_eq!(first, ts("2027-03-28T01:00:00Z"));
        assert_eq!(
            gap.next_after(first, first),
            Some(ts("2028-03-26T01:00:00Z"))
        );
    }

    #[test]
    fn naive_time_in_a_dst_gap_is_rejected_and_in_a_fold_is_its_first_instant() {
        let berlin = tz("Europe/Berlin");
        // 2026-03-29 02:30 does not exist in Berlin (clocks jump 02:00 → 03:00).
        let err =
            Schedule::parse("2026-03-29T02:30", NOW - 10_000_000, berlin.clone()).unwrap_err();
        assert!(err.reason.contains("does not exist"), "{err}");
        // 2026-10-25 02:30 happens twice; the first is CEST (00:30Z).
        assert_eq!(
            Schedule::parse("2026-10-25T02:30", NOW, berlin),
            Ok(Schedule::Once {
                at: ts("2026-10-25T00:30:00Z")
            })
        );
    }

    #[test]
    fn interval_keeps_its_phase_and_collapses_missed_runs() {
        let every = Schedule::Interval { seconds: 600 };
        assert_eq!(every.next_after(1_000, 1_000), Some(1_600));
        assert_eq!(every.next_after(1_000, 1_599), Some(1_600));
        assert_eq!(every.next_after(1_000, 1_600), Some(2_200));
        assert_eq!(every.next_after(1_000, 9_999), Some(10_000));
        assert_eq!(every.next_after(1_000, 10_000), Some(10_600));
        assert_eq!(Schedule::Once { at: 5 }.next_after(5, 5), None);
    }

    #[test]
    fn a_stored_job_with_an_unknown_zone_has_no_next_run() {
        assert_eq!(cron("0 9 * * *", "Mars/Olympus").next_after(NOW, NOW), None);
        assert_eq!(cron("not cron", "UTC").next_after(NOW, NOW), None);
    }

    #[test]
    fn describe_names_each_kind() {
        assert_eq!(Schedule::Interval { seconds: 7_200 }.describe(), "every 2h");
        assert_eq!(
            Schedule::Once {
                at: ts("2027-06-15T09:00:00Z")
            }
            .describe(),
            "once at 2027-06-15T09:00:00Z"
        );
        assert_eq!(
            cron("0 9 * * *", "Europe/Berlin").describe(),
            "cron `0 9 * * *` (Europe/Berlin)"
        );
    }
}
