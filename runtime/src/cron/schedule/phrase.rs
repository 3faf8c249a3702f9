//! Day-and-time phrases (`every monday 9am`, `weekdays at 9am`, `monday, wednesday at 9:30pm`,
//! `every day at noon`), read as the original reads them and turned into a cron expression
//! `M H * * DOW` evaluated in the configured zone.
//!
//! A phrase is: an optional `every`, one or more day words (day names, full or three letters,
//! singular or plural; `day`/`daily`/`everyday`; `weekday(s)` = Monday to Friday; `weekend(s)` =
//! Saturday and Sunday) separated by spaces, commas or `and`, an optional `at`, and a time:
//! `9am`, `9:30pm`, `9 am`, `14:00`, a bare 24-hour `14`, `noon`/`midday` or `midnight`.

/// `Some(Ok(expr))` for a phrase, `Some(Err(reason))` for text that starts like one (a day word
/// and more) but is not, `None` for anything else (including `day` or `every day` alone, which
/// are intervals).
pub(crate) fn parse(text: &str) -> Option<Result<String, String>> {
    let lower = text.to_ascii_lowercase().replace(',', " ");
    let mut words = lower.split_whitespace().peekable();
    if words.peek() == Some(&"every") {
        words.next();
    }
    let mut days = 0u8;
    let mut day_words = 0;
    while let Some(word) = words.peek() {
        if *word == "and" && day_words > 0 {
            words.next();
            continue;
        }
        let Some(set) = day_set(word) else { break };
        days |= set;
        day_words += 1;
        words.next();
    }
    if day_words == 0 {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    let rest = match rest.split_first() {
        Some((&"at", tail)) => tail,
        _ => &rest[..],
    };
    if rest.is_empty() {
        // `day`, `every day`, `daily` alone are the one-day interval; a named day needs a time.
        return (days != ALL_DAYS).then(|| {
            Err(
                "a day phrase needs a time, e.g. `every monday 9am` or `weekdays at 14:00`"
                    .to_owned(),
            )
        });
    }
    let time = rest.concat();
    let Some((hour, minute)) = parse_time(&time) else {
        return Some(Err(format!(
            "`{}` is not a time (use e.g. `9am`, `9:30pm`, `14:00`, `noon` or `midnight`)",
            rest.join(" ")
        )));
    };
    let dow = if days == ALL_DAYS {
        "*".to_owned()
    } else {
        day_list(days)
    };
    Some(Ok(format!("{minute} {hour} * * {dow}")))
}

const ALL_DAYS: u8 = 0b111_1111;

/// The day-of-week field for a set of weekdays: runs of three or more become ranges (`1-5`).
fn day_list(days: u8) -> String {
    let mut parts = Vec::new();
    let mut d = 0;
    while d < 7 {
        if days & (1 << d) == 0 {
            d += 1;
            continue;
        }
        let start = d;
        while d + 1 < 7 && days & (1 << (d + 1)) != 0 {
            d += 1;
        }
        match d - start {
            0 => parts.push(start.to_string()),
            1 => parts.push(format!("{start},{d}")),
            _ => parts.push(format!("{start}-{d}")),
        }
        d += 1;
    }
    parts.join(",")
}

/// The weekdays (bit 0 = Sunday) a day word names.
fn day_set(word: &str) -> Option<u8> {
    const NAMES: [&[&str]; 7] = [
        &["sun", "sunday", "sundays"],
        &["mon", "monday", "mondays"],
        &["tue", "tues", "tuesday", "tuesdays"],
        &["wed", "wednesday", "wednesdays"],
        &["thu", "thur", "thurs", "thursday", "thursdays"],
        &["fri", "friday", "fridays"],
        &["sat", "saturday", "saturdays"],
    ];
    match word {
        "day" | "days" | "daily" | "everyday" => return Some(ALL_DAYS),
        "weekday" | "weekdays" => return Some(0b011_1110),
        "weekend" | "weekends" => return Some(0b100_0001),
        _ => {}
    }
    NAMES
        .iter()
        .position(|forms| forms.contains(&word))
        .map(|d| 1 << d)
}

/// `9am`, `9:30pm`, `14:00`, `14`, `noon`, `midnight` → (hour, minute).
fn parse_time(text: &str) -> Option<(u32, u32)> {
    match text {
        "noon" | "midday" => return Some((12, 0)),
        "midnight" => return Some((0, 0)),
        _ => {}
    }
    let (clock, meridiem) = if let Some(c) = text.strip_suffix("am") {
        (c, Some(false))
    } else if let Some(c) = text.strip_suffix("pm") {
        (c, Some(true))
    } else {
        (text, None)
    };
    let (h, m) = match clock.split_once(':') {
        Some((h, m)) if m.len() == 2 => (h, m),
        Some(_) => return None,
        None => (clock, "00"),
    };
    if h.is_empty() || h.len() > 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (hour, minute): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    if minute > 59 {
        return None;
    }
    let hour = match meridiem {
        None if hour <= 23 => hour,
        Some(pm) if (1..=12).contains(&hour) => hour % 12 + if pm { 12 } else { 0 },
        _ => return None,
    };
    Some((hour, minute))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_become_cron_expressions() {
        for (input, want) in [
            ("every monday 9am", "0 9 * * 1"),
            ("weekdays at 9am", "0 9 * * 1-5"),
            ("mon tue wed fri sun at 7", "0 7 * * 0-3,5"),
            ("monday, wednesday at 9:30pm", "30 21 * * 1,3"),
            ("every day at noon", "0 12 * * *"),
            ("daily at midnight", "0 0 * * *"),
            ("Every Friday at 14:00", "0 14 * * 5"),
            ("weekends 8", "0 8 * * 0,6"),
            ("tue and thu at 12am", "0 0 * * 2,4"),
            ("sundays at 12pm", "0 12 * * 0"),
            ("every mon 9 am", "0 9 * * 1"),
            ("everyday 23:59", "59 23 * * *"),
        ] {
            assert_eq!(parse(input), Some(Ok(want.to_owned())), "{input}");
        }
    }

    #[test]
    fn non_phrases_fall_through_and_broken_phrases_say_why() {
        for input in [
            "day",
            "every day",
            "daily",
            "hour",
            "30m",
            "0 9 * * 1",
            "in 5m",
        ] {
            assert_eq!(parse(input), None, "{input}");
        }
        for (input, needle) in [
            ("every monday", "needs a time"),
            ("monday at 25:00", "not a time"),
            ("weekdays at 13pm", "not a time"),
            ("friday at 9:5", "not a time"),
            ("every monday at teatime", "not a time"),
        ] {
            let err = parse(input).expect(input).expect_err(input);
            assert!(err.contains(needle), "{input}: {err}");
        }
    }
}
