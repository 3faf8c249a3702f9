//! Wall-clock times to instants: the daylight-saving rule of the `schedule` module docs.
//!
//! The time line is cut at the zone's transitions into segments of constant UTC offset; inside a
//! segment wall-clock time and instants map one to one, so the next run is the first matching
//! wall-clock time of the first segment that has one. The rule then only has to say what happens
//! at the cuts:
//!
//! * a forward transition (a gap): an elapsed-time schedule runs nothing for the skipped times; a
//!   wall-clock schedule runs once at the transition instant if any skipped time matches;
//! * a backward transition (a fold): an elapsed-time schedule runs the repeated times again; a
//!   wall-clock schedule skips them in the later segment (they ran in the earlier one).
//!
//! The zone's rules come from `jiff`'s bundled tz database, whose POSIX footer rules extend each
//! zone's daylight-saving rule past its last listed transition, so years after 2099 are right.

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::{Offset, TimeZone};

use super::expr::CronExpr;

/// A search looks at most this many days ahead (the Gregorian calendar repeats every 400 years,
/// 146 097 days, so a day pattern that matches nowhere in that span matches never).
pub(crate) const SEARCH_DAYS: i64 = 146_097 + 1;

/// The first run of `expr` in `tz` strictly after epoch second `after`; `None` when there is
/// none within [`SEARCH_DAYS`] (or the year 9999).
pub(crate) fn next_run(expr: &CronExpr, tz: &TimeZone, after: i64) -> Option<i64> {
    let mut start = after.checked_add(1)?;
    let first = Timestamp::from_second(start).ok()?;
    let last_day = last_search_day(tz.to_offset(first).to_datetime(first).date());
    // The transition at or before `start` that began the current segment, and the offset before it.
    let mut begun = tz
        .preceding(Timestamp::from_second(start.checked_add(1)?).ok()?)
        .next()
        .map(|tr| tr.timestamp().as_second())
        .and_then(|at| Some((at, offset_at(tz, at.checked_sub(1)?)?)));
    loop {
        let ts = Timestamp::from_second(start).ok()?;
        let offset = tz.to_offset(ts);
        let end = tz.following(ts).next().map(|tr| tr.timestamp().as_second());
        let mut lo = civil(start, offset)?;
        if !expr.elapsed
            && let Some((at, before)) = begun
        {
            let (first_copy_end, segment_start) = (civil(at, before)?, civil(at, offset)?);
            if at == start && before < offset {
                // The gap's skipped wall-clock times run once, at the transition.
                if expr
                    .first_in(first_copy_end, Some(segment_start), last_day)
                    .is_some()
                {
                    return Some(at);
                }
            } else if before > offset && first_copy_end > lo {
                // Times repeated by the fold already ran in the earlier segment.
                lo = first_copy_end;
            }
        }
        let hi = match end {
            Some(at) => Some(civil(at, offset)?),
            None => None,
        };
        if let Some(c) = expr.first_in(lo, hi, last_day) {
            return offset.to_timestamp(c).ok().map(Timestamp::as_second);
        }
        let at = end?;
        if hi.is_some_and(|h| h.date() > last_day) {
            return None;
        }
        begun = Some((at, offset));
        start = at;
    }
}

fn last_search_day(from: Date) -> Date {
    from.checked_add(jiff::Span::new().days(SEARCH_DAYS))
        .unwrap_or(Date::MAX)
}

fn offset_at(tz: &TimeZone, second: i64) -> Option<Offset> {
    Timestamp::from_second(second).ok().map(|t| tz.to_offset(t))
}

fn civil(second: i64, offset: Offset) -> Option<DateTime> {
    Timestamp::from_second(second)
        .ok()
        .map(|t| offset.to_datetime(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_second()
    }

    fn next(expr: &str, zone: &str, after: &str) -> Option<i64> {
        let tz = TimeZone::get(zone).unwrap();
        next_run(&CronExpr::parse(expr).unwrap(), &tz, ts(after))
    }

    #[test]
    fn a_search_starting_on_the_transition_instant_sees_its_gap() {
        // Berlin 2027-03-28 01:00Z: 02:00 CET → 03:00 CEST.
        let gap_end = ts("2027-03-28T01:00:00Z");
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2027-03-28T00:59:59Z"),
            Some(gap_end)
        );
        // From the gap's run itself the next is the following day, not 03:00 again.
        assert_eq!(
            next("30 2,3 * * *", "Europe/Berlin", "2027-03-28T01:00:00Z"),
            Some(ts("2027-03-28T01:30:00Z")),
            "03:30 CEST is a separate time"
        );
        assert_eq!(
            next("0 2,3 * * *", "Europe/Berlin", "2027-03-28T01:00:00Z"),
            Some(ts("2027-03-29T00:00:00Z"))
        );
    }

    #[test]
    fn a_search_starting_inside_the_second_copy_skips_the_repeat() {
        // Berlin 2027-10-31: 02:00-02:59 is CEST (00:xxZ) then CET (01:xxZ).
        assert_eq!(
            next("45 2 * * *", "Europe/Berlin", "2027-10-31T01:10:00Z"),
            Some(ts("2027-11-01T01:45:00Z")),
            "02:45 already ran at 00:45Z"
        );
        assert_eq!(
            next("45 * * * *", "Europe/Berlin", "2027-10-31T01:10:00Z"),
            Some(ts("2027-10-31T01:45:00Z")),
            "an elapsed-time schedule runs the second copy"
        );
    }

    #[test]
    fn a_zone_without_transitions_ahead_is_searched_to_the_limit() {
        assert_eq!(
            next("0 0 29 2 *", "UTC", "2097-01-01T00:00:00Z"),
            Some(ts("2104-02-29T00:00:00Z"))
        );
        assert_eq!(next("0 0 31 4 *", "UTC", "2027-01-01T00:00:00Z"), None);
        assert_eq!(
            next("0 0 31 4 *", "Europe/Berlin", "2027-01-01T00:00:00Z"),
            None
        );
    }
}
