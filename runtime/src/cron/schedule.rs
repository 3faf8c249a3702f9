//! The schedule grammar: what a job's `--schedule` may say, and when it fires next.
//!
//! Accepted forms, tried in this order:
//!
//! * `every <duration>` and a bare `<duration>` (`every 30m`, `every 2h`, `45m`, `every day`):
//!   recurring at a fixed interval. Units: `m`/`min`/`minute(s)`, `h`/`hr`/`hour(s)`,
//!   `d`/`day(s)`; a bare unit means one (`every hour`). The interval keeps its phase: after a
//!   missed stretch the next run is the first point of the lattice that lies after now (missed
//!   points collapse into one run, they are never burst-fired).
//! * `in <duration>`: a one-shot at now + duration (computed on the absolute time line, so a DST
//!   change cannot shift it).
//! * An ISO-8601 timestamp (`2026-12-01T09:00:00Z`, `2026-12-01T09:00:00+01:00`, or a naive
//!   `2026-12-01T09:00`/`2026-12-01 09:00`/`2026-12-01`, read in the configured zone): a one-shot.
//!   A naive time that falls in a DST gap is rejected; one in a DST fold means its first instant.
//! * A five-field cron expression (`0 9 * * 1-5`, names such as `MON`/`JAN` and the `@daily`
//!   family are accepted), optionally prefixed with `TZ=<IANA zone>`; otherwise it runs in the
//!   configured zone (`[cron] timezone`, default UTC). Evaluation is delegated to `croner`, which
//!   walks the zone's wall clock and is DST correct: a time skipped by a spring-forward runs once
//!   at the first instant after the gap (as Vixie cron does), a time repeated by a fall-back runs
//!   once (its first instant).
//!
//! The parsed [`Schedule`] is stored with the job (as JSON), so a job keeps the zone and the
//! one-shot instant it was created with. This module only computes; it never reads the clock
//! (every function takes `now`).

use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};

/// A one-shot may be created up to this many seconds in the past (a clock skew allowance); it
/// then runs at the next tick.
pub const ONE_SHOT_PAST_GRACE_SECONDS: i64 = 120;

/// The accepted forms, quoted in every parse error.
pub const ACCEPTED_FORMS: &str = "accepted forms: a 5-field cron expression such as `0 9 * * 1-5` \
(optionally prefixed `TZ=Europe/Berlin `), `every 30m` / `every 2h` / `every 1d` or a bare `30m` \
(recurring), `in 10m` or an ISO-8601 time such as `2026-12-01T09:00:00Z` (one-shot)";

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
    /// A five-field cron expression evaluated in an IANA zone.
    Cron { expr: String, tz: String },
    /// Every `seconds` (a whole number of minutes).
    Interval { seconds: i64 },
    /// Once, at epoch second `at`.
    Once { at: i64 },
}

impl Schedule {
    /// Parses `input`; `now` anchors `in …` and `default_tz` reads cron expressions and naive
    /// timestamps that name no zone.
    pub fn parse(input: &str, now: i64, default_tz: Tz) -> Result<Self, ScheduleError> {
        let err = |reason: &str| ScheduleError {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let text = input.trim();
        if text.is_empty() {
            return Err(err("it is empty"));
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
            let at = parse_timestamp(text, default_tz).map_err(|r| err(&r))?;
            if at < now - ONE_SHOT_PAST_GRACE_SECONDS {
                return Err(err("that time is in the past"));
            }
            return Ok(Schedule::Once { at });
        }
        let (tz, expr) = split_zone_prefix(text, default_tz).map_err(|r| err(&r))?;
        let fields = expr.split_whitespace().count();
        if fields != 5 && !expr.starts_with('@') {
            return Err(err(&format!(
                "not a recognised form (a cron expression needs exactly 5 fields, this has {fields})"
            )));
        }
        let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        parse_cron(&expr).map_err(|r| err(&r))?;
        Ok(Schedule::Cron {
            expr,
            tz: tz.name().to_owned(),
        })
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
    /// collapse); `None` for a one-shot, or when a cron expression never matches again.
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
                let cron = parse_cron(expr).ok()?;
                let zone = Tz::from_str(tz).ok()?;
                let from = occurrence.max(now);
                let start = zone.timestamp_opt(from, 0).single()?;
                let next = cron.find_next_occurrence(&start, false).ok()?;
                Some(next.timestamp())
            }
        }
    }

    /// A short human description (`every 30m`, `cron 0 9 * * * (Europe/Berlin)`, `once at …`).
    pub fn describe(&self) -> String {
        match self {
            Schedule::Interval { seconds } => format!("every {}", format_duration(*seconds)),
            Schedule::Once { at } => match Utc.timestamp_opt(*at, 0).single() {
                Some(t) => format!("once at {}", t.format("%Y-%m-%dT%H:%M:%SZ")),
                None => format!("once at epoch {at}"),
            },
            Schedule::Cron { expr, tz } => format!("cron `{expr}` ({tz})"),
        }
    }
}

/// The zone named by `[cron] timezone`, UTC when unset.
pub fn zone(name: Option<&str>) -> Result<Tz, ScheduleError> {
    match name {
        None => Ok(Tz::UTC),
        Some(n) => Tz::from_str(n).map_err(|_| ScheduleError {
            input: n.to_owned(),
            reason: "unknown IANA time zone in `[cron] timezone` (use e.g. `Europe/Berlin`)"
                .to_owned(),
        }),
    }
}

fn parse_cron(expr: &str) -> Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| format!("bad cron expression: {e}"))
}

fn split_zone_prefix(text: &str, default_tz: Tz) -> Result<(Tz, &str), String> {
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
    let tz = Tz::from_str(name).map_err(|_| format!("unknown IANA time zone `{name}`"))?;
    Ok((tz, expr.trim()))
}

fn looks_like_duration(text: &str) -> bool {
    let t = text.trim();
    t.chars().next().is_some_and(|c| c.is_ascii_digit())
        && t.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ')
        && !t.contains(char::is_whitespace)
        && t.chars().any(|c| c.is_ascii_alphabetic())
}

/// `30m`, `2 h`, `hour`, `1day` → seconds (at least one minute).
fn parse_duration(text: &str) -> Result<i64, String> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    let unit = text[digits.len()..].trim();
    let count: i64 = if digits.is_empty() {
        1
    } else {
        digits
            .parse()
            .map_err(|_| format!("`{digits}` is not a usable number"))?
    };
    let per = match unit {
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600,
        "d" | "day" | "days" => 86_400,
        "" => return Err("a duration needs a unit (m, h or d)".to_owned()),
        "s" | "sec" | "secs" | "second" | "seconds" => {
            return Err("the smallest unit is the minute (m)".to_owned());
        }
        other => return Err(format!("unknown duration unit `{other}` (use m, h or d)")),
    };
    if count <= 0 {
        return Err("a duration must be positive".to_owned());
    }
    count
        .checked_mul(per)
        .filter(|s| *s <= 366 * 86_400)
        .ok_or_else(|| "a duration may be at most 366 days".to_owned())
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

fn parse_timestamp(text: &str, tz: Tz) -> Result<i64, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp());
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%:z",
        "%Y-%m-%dT%H:%M%:z",
        "%Y-%m-%d %H:%M:%S%:z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(text, fmt) {
            return Ok(t.timestamp());
        }
    }
    let naive = [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|fmt| NaiveDateTime::parse_from_str(text, fmt).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })
    .ok_or_else(|| "not a valid ISO-8601 date and time".to_owned())?;
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => Ok(t.timestamp()),
        LocalResult::Ambiguous(first, _) => Ok(first.timestamp()),
        LocalResult::None => Err(format!(
            "{naive} does not exist in {} (skipped by a daylight-saving change)",
            tz.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_780_000_000; // 2026-05-28T20:26:40Z

    fn ts(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text).unwrap().timestamp()
    }

    #[test]
    fn accepted_forms_parse_to_the_expected_schedule() {
        let utc = Tz::UTC;
        let cases: &[(&str, Schedule)] = &[
            ("every 30m", Schedule::Interval { seconds: 1_800 }),
            ("every 2h", Schedule::Interval { seconds: 7_200 }),
            ("EVERY 1d", Schedule::Interval { seconds: 86_400 }),
            ("every hour", Schedule::Interval { seconds: 3_600 }),
            ("every 15 minutes", Schedule::Interval { seconds: 900 }),
            ("30m", Schedule::Interval { seconds: 1_800 }),
            ("2h", Schedule::Interval { seconds: 7_200 }),
            ("in 10m", Schedule::Once { at: NOW + 600 }),
            ("in 1h", Schedule::Once { at: NOW + 3_600 }),
            (
                "2026-12-01T09:00:00Z",
                Schedule::Once {
                    at: ts("2026-12-01T09:00:00Z"),
                },
            ),
            (
                "2026-12-01T09:00:00+01:00",
                Schedule::Once {
                    at: ts("2026-12-01T08:00:00Z"),
                },
            ),
            (
                "2026-12-01T09:00",
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
            (
                "0 9 * * 1-5",
                Schedule::Cron {
                    expr: "0 9 * * 1-5".into(),
                    tz: "UTC".into(),
                },
            ),
            (
                "  */5   *  * * *  ",
                Schedule::Cron {
                    expr: "*/5 * * * *".into(),
                    tz: "UTC".into(),
                },
            ),
            (
                "TZ=Europe/Berlin 30 2 * * *",
                Schedule::Cron {
                    expr: "30 2 * * *".into(),
                    tz: "Europe/Berlin".into(),
                },
            ),
            (
                "@daily",
                Schedule::Cron {
                    expr: "@daily".into(),
                    tz: "UTC".into(),
                },
            ),
        ];
        for (input, want) in cases {
            let got = Schedule::parse(input, NOW, utc);
            assert_eq!(got.as_ref(), Ok(want), "input {input:?}");
        }
    }

    #[test]
    fn naive_timestamps_and_cron_use_the_configured_zone() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        assert_eq!(
            Schedule::parse("2026-12-01T09:00", NOW, berlin),
            Ok(Schedule::Once {
                at: ts("2026-12-01T08:00:00Z")
            })
        );
        assert_eq!(
            Schedule::parse("0 9 * * *", NOW, berlin),
            Ok(Schedule::Cron {
                expr: "0 9 * * *".into(),
                tz: "Europe/Berlin".into()
            })
        );
    }

    #[test]
    fn invalid_inputs_name_the_accepted_forms() {
        let cases = [
            "",
            "tomorrow",
            "every",
            "every 0m",
            "every 10s",
            "every 3 fortnights",
            "in",
            "in 5x",
            "30",
            "0 9 * *",
            "0 9 * * * *",
            "61 * * * *",
            "0 9 * * 8-9",
            "TZ=Mars/Olympus 0 9 * * *",
            "2026-13-01T00:00:00Z",
            "2020-01-01T00:00:00Z",
            "every 400d",
        ];
        for input in cases {
            let err = Schedule::parse(input, NOW, Tz::UTC).expect_err(input);
            let msg = err.to_string();
            assert!(msg.contains("accepted forms"), "{input:?}: {msg}");
            assert!(msg.contains("every 30m") && msg.contains("in 10m"), "{msg}");
        }
    }

    #[test]
    fn naive_time_in_a_dst_gap_is_rejected() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        // 2026-03-29 02:30 does not exist in Berlin (clocks jump 02:00 → 03:00).
        let err = Schedule::parse("2026-03-29T02:30", NOW - 10_000_000, berlin).unwrap_err();
        assert!(err.reason.contains("does not exist"), "{err}");
    }

    #[test]
    fn cron_across_spring_forward_in_berlin() {
        let berlin = Schedule::Cron {
            expr: "30 2 * * *".into(),
            tz: "Europe/Berlin".into(),
        };
        // 2026-03-28 02:30 CET = 01:30Z; the 29th has no 02:30; the 30th is CEST (00:30Z).
        let before = ts("2026-03-28T00:00:00Z");
        let first = berlin.next_after(before, before).unwrap();
        assert_eq!(first, ts("2026-03-28T01:30:00Z"));
        // On the 29th 02:30 does not exist: it runs at the first instant after the gap
        // (03:00 CEST = 01:00Z), as Vixie cron does, and exactly once.
        let second = berlin.next_after(first, first).unwrap();
        assert_eq!(second, ts("2026-03-29T01:00:00Z"));
        let third = berlin.next_after(second, second).unwrap();
        assert_eq!(
            third,
            ts("2026-03-30T00:30:00Z"),
            "then 02:30 CEST on the 30th"
        );
        // An hourly job keeps running through the gap, one hour apart in real time.
        let hourly = Schedule::Cron {
            expr: "0 * * * *".into(),
            tz: "Europe/Berlin".into(),
        };
        let a = hourly.next_after(ts("2026-03-29T00:30:00Z"), ts("2026-03-29T00:30:00Z"));
        assert_eq!(a, Some(ts("2026-03-29T01:00:00Z"))); // 03:00 CEST
    }

    #[test]
    fn cron_across_fall_back_in_new_york_runs_once() {
        // 2026-11-01: 01:30 happens twice in New York (EDT then EST).
        let ny = Schedule::Cron {
            expr: "30 1 * * *".into(),
            tz: "America/New_York".into(),
        };
        let start = ts("2026-11-01T04:00:00Z"); // 00:00 EDT
        let first = ny.next_after(start, start).unwrap();
        assert_eq!(first, ts("2026-11-01T05:30:00Z"), "01:30 EDT");
        let second = ny.next_after(first, first).unwrap();
        assert_eq!(
            second,
            ts("2026-11-02T06:30:00Z"),
            "next day 01:30 EST, not the repeat"
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

    /// A tiny deterministic generator (xorshift) so the property test needs no extra crate.
    struct Seeds(u64);
    impl Seeds {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[(self.next() % from.len() as u64) as usize]
        }
    }

    #[test]
    fn successive_next_runs_strictly_increase() {
        let minutes = ["*", "0", "*/7", "5,35", "59", "10-20/5"];
        let hours = ["*", "2", "1-3", "*/5", "23", "0,12"];
        let doms = ["*", "1", "15", "L", "29", "*/10"];
        let months = ["*", "3", "10,11", "*/2", "2"];
        let dows = ["*", "0", "1-5", "SUN", "6", "5#L"];
        let zones = [
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Australia/Lord_Howe",
            "Asia/Kolkata",
        ];
        let mut rng = Seeds(0x9E37_79B9_7F4A_7C15);
        for seed in 0..300 {
            let expr = format!(
                "{} {} {} {} {}",
                rng.pick(&minutes),
                rng.pick(&hours),
                rng.pick(&doms),
                rng.pick(&months),
                rng.pick(&dows)
            );
            let tz = rng.pick(&zones);
            let text = format!("TZ={tz} {expr}");
            let schedule =
                Schedule::parse(&text, NOW, Tz::UTC).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            // Start somewhere in 2026-2027, including the DST change days.
            let mut t = 1_767_225_600 + (rng.next() % 63_072_000) as i64;
            for step in 0..40 {
                let Some(next) = schedule.next_after(t, t) else {
                    break;
                };
                assert!(next > t, "seed {seed} `{text}` step {step}: {next} <= {t}");
                t = next;
            }
            let interval = Schedule::Interval {
                seconds: 60 * (1 + (rng.next() % 1_440) as i64),
            };
            let mut occ = 1_767_225_600 + (rng.next() % 100_000) as i64;
            for _ in 0..40 {
                let now = occ + (rng.next() % 10_000) as i64 - 5_000;
                let next = interval.next_after(occ, now).unwrap();
                assert!(
                    next > occ && next > now,
                    "seed {seed}: interval went backwards"
                );
                occ = next;
            }
        }
    }
}
