//! Cron expressions: the fields, parsed into sets, and the search for the next wall-clock time
//! that matches them. This module knows nothing of time zones; `zone.rs` turns wall-clock times
//! into instants under the daylight-saving rule of the module docs.
//!
//! Grammar (five fields `minute hour day-of-month month day-of-week`, six with the seconds
//! last, or seven with a year (1970-2099) after them, as the original's expression library
//! reads them):
//!
//! * each field is a comma list of items: `*`, a value, a range `a-b`, a step `*/n`, `a-b/n` or
//!   `a/n` (from `a` to the field's maximum); `?` means `*` in the two day fields;
//! * months may be named `JAN`…`DEC`, weekdays `SUN`…`SAT` (any case); weekday `7` is Sunday;
//! * the day of month may be `L` (the month's last day); a weekday item may be `5L` (the month's
//!   last Friday), `5#2` (its second Friday) or `5#L` (its last Friday);
//! * when both day fields are restricted (neither starts with `*` or `?`) a day matches if either
//!   does, as in Vixie cron; otherwise both must match;
//! * `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`.

use jiff::civil::{Date, DateTime, Time};

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u64,
    /// Bits 1..=12.
    months: u64,
    days: DayRule,
    /// A 7th field: the allowed years, indexed by `year - FIRST_YEAR`; `None` = every year.
    years: Option<Vec<bool>>,
    /// The hour field starts with `*`: an elapsed-time schedule (see the module docs of
    /// `schedule`); otherwise a wall-clock schedule.
    pub(crate) elapsed: bool,
    /// Six (or seven) fields were given.
    pub(crate) has_seconds: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct DayRule {
    /// Bits 1..=31.
    dom: u64,
    dom_last: bool,
    dom_any: bool,
    /// Bits 0..=6, Sunday = 0.
    dow: u64,
    /// Per weekday: bit k-1 for "k-th of the month" (k = 1..=5), bit 5 for "last of the month".
    dow_nth: [u8; 7],
    dow_any: bool,
}

const NTH_LAST: u8 = 1 << 5;

/// The years a 7th field may name (the original's expression library's range).
const FIRST_YEAR: u32 = 1970;
const LAST_YEAR: u32 = 2099;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
            Field::Year => "year",
        }
    }
    /// Inclusive bounds of a written value.
    fn bounds(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 7),
            Field::Year => (FIRST_YEAR, LAST_YEAR),
        }
    }
    fn names(self) -> &'static [&'static str] {
        match self {
            Field::Month => &[
                "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
            ],
            Field::DayOfWeek => &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
            _ => &[],
        }
    }
    /// The value of name index 0.
    fn first_name_value(self) -> u32 {
        if self == Field::Month { 1 } else { 0 }
    }
}

/// One field's parsed items.
#[derive(Default)]
struct FieldSet {
    mask: u64,
    last: bool,
    nth: [u8; 7],
    any: bool,
}

impl CronExpr {
    /// Parses a whitespace-normalised expression (five or six fields, or an `@` macro).
    pub(crate) fn parse(expr: &str) -> Result<CronExpr, String> {
        let expanded = match expr.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            m if m.starts_with('@') => {
                return Err(format!(
                    "unknown macro `{expr}` (use @yearly, @monthly, @weekly, @daily or @hourly)"
                ));
            }
            _ => expr,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (second, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 | 7 => (fields[5], &fields[..5]),
            n => {
                return Err(format!(
                    "a cron expression has 5 fields (6 with the seconds last, 7 with a year \
                     after them), this has {n}"
                ));
            }
        };
        // A year field of plain `*` leaves the years open (beyond the field's last year, too).
        let years = match fields.get(6) {
            Some(&"*") => None,
            Some(text) => Some(parse_years(text)?),
            None => None,
        };
        let seconds = parse_field(second, Field::Second)?;
        if fields.len() >= 6 && seconds.mask == full(0, 59) {
            return Err(format!(
                "the seconds field (the 6th) `{second}` fires every second, on every tick, \
                 like a zero interval; name the seconds, e.g. `0` (six fields read \
                 `minute hour day month weekday second`)"
            ));
        }
        let minutes = parse_field(rest[0], Field::Minute)?;
        let hours = parse_field(rest[1], Field::Hour)?;
        let dom = parse_field(rest[2], Field::DayOfMonth)?;
        let months = parse_field(rest[3], Field::Month)?;
        let dow = parse_field(rest[4], Field::DayOfWeek)?;
        Ok(CronExpr {
            seconds: seconds.mask,
            minutes: minutes.mask,
            hours: hours.mask,
            months: months.mask,
            days: DayRule {
                dom: dom.mask,
                dom_last: dom.last,
                dom_any: dom.any,
                dow: dow.mask,
                dow_nth: dow.nth,
                dow_any: dow.any,
            },
            elapsed: rest[1].starts_with('*'),
            has_seconds: fields.len() >= 6,
            years,
        })
    }

    /// True when the wall-clock time `t` matches every field.
    #[cfg(test)]
    pub(crate) fn matches(&self, t: DateTime) -> bool {
        bit(self.seconds, t.second() as u32)
            && bit(self.minutes, t.minute() as u32)
            && bit(self.hours, t.hour() as u32)
            && bit(self.months, t.month() as u32)
            && self.day_matches(t.date())
            && self.year_allowed(t.year())
    }

    fn year_allowed(&self, year: i16) -> bool {
        let Some(years) = &self.years else {
            return true;
        };
        u32::try_from(year)
            .ok()
            .and_then(|y| y.checked_sub(FIRST_YEAR))
            .and_then(|i| years.get(i as usize))
            .is_some_and(|allowed| *allowed)
    }

    /// 1 January of the first allowed year after `year`; `None` when there is none.
    fn next_year_start(&self, year: i16) -> Option<Date> {
        let next = (i32::from(year) + 1..=LAST_YEAR as i32)
            .map(|y| y as i16)
            .find(|y| self.year_allowed(*y))?;
        Date::new(next, 1, 1).ok()
    }

    fn day_matches(&self, d: Date) -> bool {
        let rule = &self.days;
        let day = d.day() as u32;
        let dom_ok = bit(rule.dom, day) || (rule.dom_last && d.day() == d.days_in_month());
        let weekday = d.weekday().to_sunday_zero_offset() as usize;
        let nth = rule.dow_nth[weekday];
        let nth_ok = nth != 0
            && ((nth & (1 << ((day - 1) / 7))) != 0
                || (nth & NTH_LAST != 0 && day + 7 > d.days_in_month() as u32));
        let dow_ok = bit(rule.dow, weekday as u32) || nth_ok;
        if rule.dom_any || rule.dow_any {
            dom_ok && dow_ok
        } else {
            dom_ok || dow_ok
        }
    }

    /// The first matching wall-clock time `c` with `lo <= c`, `c < hi` (when given) and
    /// `c.date() <= last_day`.
    pub(crate) fn first_in(
        &self,
        lo: DateTime,
        hi: Option<DateTime>,
        last_day: Date,
    ) -> Option<DateTime> {
        let mut date = lo.date();
        let mut from = lo.time();
        loop {
            if date > last_day || hi.is_some_and(|h| date > h.date()) {
                return None;
            }
            if !self.year_allowed(date.year()) {
                date = self.next_year_start(date.year())?;
                from = Time::midnight();
                continue;
            }
            if !bit(self.months, date.month() as u32) {
                date = date.last_of_month().tomorrow().ok()?;
                from = Time::midnight();
                continue;
            }
            if self.day_matches(date)
                && let Some(t) = self.first_time(from)
            {
                let c = date.to_datetime(t);
                return hi.is_none_or(|h| c < h).then_some(c);
            }
            date = date.tomorrow().ok()?;
            from = Time::midnight();
        }
    }

    /// The first time of day at or after `from` whose hour, minute and second match.
    fn first_time(&self, from: Time) -> Option<Time> {
        let (fh, fm, fs) = (
            from.hour() as u32,
            from.minute() as u32,
            from.second() as u32,
        );
        let mut h = next_bit(self.hours, fh)?;
        loop {
            let m_from = if h == fh { fm } else { 0 };
            let mut m = next_bit(self.minutes, m_from);
            while let Some(minute) = m {
                let s_from = if h == fh && minute == fm { fs } else { 0 };
                if let Some(s) = next_bit(self.seconds, s_from) {
                    return Time::new(h as i8, minute as i8, s as i8, 0).ok();
                }
                m = next_bit(self.minutes, minute + 1);
            }
            h = next_bit(self.hours, h + 1)?;
        }
    }
}

fn bit(mask: u64, i: u32) -> bool {
    i < 64 && mask & (1 << i) != 0
}

/// The lowest set bit at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask & (u64::MAX << from);
    (rest != 0).then(|| rest.trailing_zeros())
}

fn full(lo: u32, hi: u32) -> u64 {
    (lo..=hi).fold(0, |m, i| m | (1 << i))
}

fn parse_field(text: &str, field: Field) -> Result<FieldSet, String> {
    let mut mask = 0u64;
    let mut set = parse_items(text, field, &mut |v| mask |= 1 << v)?;
    set.mask = mask;
    Ok(set)
}

/// The years a year field allows, as a table indexed by `year - FIRST_YEAR`.
fn parse_years(text: &str) -> Result<Vec<bool>, String> {
    let (min, max) = Field::Year.bounds();
    let mut years = vec![false; (max - min + 1) as usize];
    parse_items(text, Field::Year, &mut |y| years[(y - min) as usize] = true)?;
    Ok(years)
}

/// Parses the items of one field, calling `mark` with each value it allows (weekday 7 as 0).
fn parse_items(text: &str, field: Field, mark: &mut dyn FnMut(u32)) -> Result<FieldSet, String> {
    let bad = |why: String| format!("bad {} field `{text}`: {why}", field.name());
    let (min, max) = field.bounds();
    let mut set = FieldSet {
        any: text.starts_with('*')
            || (text == "?" && matches!(field, Field::DayOfMonth | Field::DayOfWeek)),
        ..FieldSet::default()
    };
    for item in text.split(',') {
        let lower = item.to_ascii_lowercase();
        if item.is_empty() {
            return Err(bad("an empty list item".to_owned()));
        }
        if field == Field::DayOfMonth && lower == "l" {
            set.last = true;
            continue;
        }
        if field == Field::DayOfMonth && lower.contains('w') {
            return Err(bad("`W` (nearest weekday) is not supported".to_owned()));
        }
        if field == Field::DayOfWeek {
            if let Some((day, nth)) = lower.split_once('#') {
                let wd = value(day, field).map_err(bad)? % 7;
                let bit = match nth {
                    "l" => NTH_LAST,
                    n => match n.parse::<u8>() {
                        Ok(k @ 1..=5) => 1 << (k - 1),
                        _ => return Err(bad(format!("`#{n}` must be #1 to #5 or #L"))),
                    },
                };
                set.nth[wd as usize] |= bit;
                continue;
            }
            if lower.len() > 1
                && let Some(day) = lower.strip_suffix('l')
            {
                let wd = value(day, field).map_err(bad)? % 7;
                set.nth[wd as usize] |= NTH_LAST;
                continue;
            }
        }
        let (range, step) = match lower.split_once('/') {
            None => (lower.as_str(), None),
            Some((r, s)) => match s.parse::<u32>() {
                Ok(n) if n >= 1 => (r, Some(n)),
                _ => {
                    return Err(bad(format!(
                        "step `/{s}` must be a whole number of at least 1"
                    )));
                }
            },
        };
        // `*` and an open `a/n` end at Saturday: 7 is only another name for Sunday.
        let open_max = if field == Field::DayOfWeek { 6 } else { max };
        let (lo, hi) = if range == "*"
            || (range == "?" && matches!(field, Field::DayOfMonth | Field::DayOfWeek))
        {
            (min, open_max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(a, field).map_err(bad)?, value(b, field).map_err(bad)?);
            if a > b {
                return Err(bad(format!("the range `{range}` goes backwards")));
            }
            (a, b)
        } else {
            let a = value(range, field).map_err(bad)?;
            (a, if step.is_some() { open_max } else { a })
        };
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            let v_norm = if field == Field::DayOfWeek { v % 7 } else { v };
            mark(v_norm);
            v += step;
        }
    }
    Ok(set)
}

/// A single value of `field`: a number within its bounds or a name.
fn value(text: &str, field: Field) -> Result<u32, String> {
    let (min, max) = field.bounds();
    if let Some(i) = field.names().iter().position(|n| *n == text) {
        return Ok(i as u32 + field.first_name_value());
    }
    match text.parse::<u32>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        Ok(v) => Err(format!("{v} is outside {min}-{max}")),
        Err(_) => Err(format!("`{text}` is not a number or a name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn dt(y: i16, mo: i8, d: i8, h: i8, mi: i8) -> DateTime {
        date(y, mo, d).at(h, mi, 0, 0)
    }

    #[test]
    fn fields_parse_into_the_expected_sets() {
        let e = CronExpr::parse("*/15 9-17/4 * JAN,jul 1-5").unwrap();
        assert_eq!(e.minutes, full(0, 0) | 1 << 15 | 1 << 30 | 1 << 45);
        assert_eq!(e.hours, 1 << 9 | 1 << 13 | 1 << 17);
        assert_eq!(e.months, 1 << 1 | 1 << 7);
        assert_eq!(e.days.dow, full(1, 5));
        assert!(!e.elapsed, "the hour field decides");
        assert!(CronExpr::parse("0 * * * *").unwrap().elapsed);
        assert!(CronExpr::parse("@hourly").unwrap().elapsed);
        assert!(CronExpr::parse("0 */2 * * *").unwrap().elapsed);
        assert!(!CronExpr::parse("*/5 2 * * *").unwrap().elapsed);
        let sunday = CronExpr::parse("0 0 * * 5-7").unwrap();
        assert_eq!(sunday.days.dow, 1 << 0 | 1 << 5 | 1 << 6);
        assert_eq!(
            CronExpr::parse("0 0 * * 1/3").unwrap().days.dow,
            1 << 1 | 1 << 4
        );
        let from = CronExpr::parse("10/20 * * * *").unwrap();
        assert_eq!(from.minutes, 1 << 10 | 1 << 30 | 1 << 50);
        let six = CronExpr::parse("0 9 * * * 30").unwrap();
        assert!(six.has_seconds);
        assert_eq!(six.seconds, 1 << 30);
    }

    #[test]
    fn bad_fields_are_refused_with_the_reason() {
        for (expr, needle) in [
            ("61 * * * *", "outside 0-59"),
            ("0 24 * * *", "outside 0-23"),
            ("0 0 0 * *", "outside 1-31"),
            ("0 0 * 13 *", "outside 1-12"),
            ("0 9 * * 8-9", "outside 0-7"),
            ("5-1 * * * *", "goes backwards"),
            ("*/0 * * * *", "at least 1"),
            ("0 0 15W * *", "`W`"),
            ("0 0 * * 1#6", "#1 to #5"),
            ("0,,5 * * * *", "empty list item"),
            ("0 0 * * funday", "not a number or a name"),
            ("0 9 * * * *", "fires every second"),
            ("0 9 * * * */1", "fires every second"),
            ("0 0 1 1 * 0 2100", "outside 1970-2099"),
            ("0 0 1 1 * 0 2031-2030", "goes backwards"),
            ("0 0 1 1 * 0 2030 x", "has 8"),
            ("0 9 * *", "has 4"),
            ("@reboot", "unknown macro"),
        ] {
            let err = CronExpr::parse(expr).expect_err(expr);
            assert!(err.contains(needle), "{expr}: {err}");
        }
    }

    #[test]
    fn day_fields_follow_the_vixie_or_rule() {
        // Both restricted: the 13th OR a Friday.
        let either = CronExpr::parse("0 0 13 * 5").unwrap();
        assert!(either.matches(dt(2027, 1, 13, 0, 0))); // a Wednesday
        assert!(either.matches(dt(2027, 1, 1, 0, 0))); // a Friday
        assert!(!either.matches(dt(2027, 1, 2, 0, 0)));
        // A day of month starting with `*` (even stepped) makes the two fields AND-ed.
        let both = CronExpr::parse("0 0 */2 * 5").unwrap();
        assert!(both.matches(dt(2027, 1, 1, 0, 0))); // day 1, Friday
        assert!(!both.matches(dt(2027, 1, 8, 0, 0))); // day 8, Friday
        assert!(!both.matches(dt(2027, 1, 3, 0, 0))); // day 3, Sunday
    }

    #[test]
    fn last_and_nth_day_items() {
        let last = CronExpr::parse("0 0 L * *").unwrap();
        assert!(last.matches(dt(2028, 2, 29, 0, 0)));
        assert!(!last.matches(dt(2028, 2, 28, 0, 0)));
        assert!(last.matches(dt(2027, 2, 28, 0, 0)));
        let last_sunday = CronExpr::parse("0 0 * 3 0L").unwrap();
        assert!(last_sunday.matches(dt(2027, 3, 28, 0, 0)));
        assert!(!last_sunday.matches(dt(2027, 3, 21, 0, 0)));
        let last_friday = CronExpr::parse("0 0 * * FRI#L").unwrap();
        assert!(last_friday.matches(dt(2027, 1, 29, 0, 0)));
        let second_monday = CronExpr::parse("0 0 * * 1#2").unwrap();
        assert!(second_monday.matches(dt(2027, 1, 11, 0, 0)));
        assert!(!second_monday.matches(dt(2027, 1, 4, 0, 0)));
    }

    #[test]
    fn a_year_field_restricts_the_years() {
        let far = date(2427, 1, 1);
        let once = CronExpr::parse("0 9 1 1 * 0 2030").unwrap();
        assert!(once.has_seconds);
        assert_eq!(
            once.first_in(dt(2027, 6, 1, 0, 0), None, far),
            Some(dt(2030, 1, 1, 9, 0))
        );
        assert_eq!(once.first_in(dt(2030, 1, 1, 9, 1), None, far), None);
        let every_fifth = CronExpr::parse("0 9 1 1 * 0 2030-2099/5").unwrap();
        assert_eq!(
            every_fifth.first_in(dt(2030, 1, 1, 9, 1), None, far),
            Some(dt(2035, 1, 1, 9, 0))
        );
        assert!(!every_fifth.matches(dt(2031, 1, 1, 9, 0)));
        assert!(every_fifth.matches(dt(2040, 1, 1, 9, 0)));
        // A plain `*` leaves the years open, past the field's last year as well.
        let open = CronExpr::parse("0 9 1 1 * 0 *").unwrap();
        assert_eq!(
            open.first_in(dt(2099, 1, 1, 9, 1), None, far),
            Some(dt(2100, 1, 1, 9, 0))
        );
    }

    #[test]
    fn first_in_finds_the_next_match_within_bounds() {
        let e = CronExpr::parse("30 2,14 * * *").unwrap();
        let far = date(2100, 1, 1);
        assert_eq!(
            e.first_in(dt(2027, 3, 28, 2, 30), None, far),
            Some(dt(2027, 3, 28, 2, 30))
        );
        assert_eq!(
            e.first_in(dt(2027, 3, 28, 2, 31), None, far),
            Some(dt(2027, 3, 28, 14, 30))
        );
        assert_eq!(
            e.first_in(dt(2027, 3, 28, 2, 31), Some(dt(2027, 3, 28, 14, 30)), far),
            None,
            "the upper bound is exclusive"
        );
        let feb30 = CronExpr::parse("0 0 30 2 *").unwrap();
        assert_eq!(
            feb30.first_in(dt(2027, 1, 1, 0, 0), None, date(2427, 1, 2)),
            None
        );
        let secs = CronExpr::parse("0 9 * * * 15,45").unwrap();
        assert_eq!(
            secs.first_in(date(2027, 1, 1).at(9, 0, 16, 0), None, far),
            Some(date(2027, 1, 1).at(9, 0, 45, 0))
        );
    }
}
