//! Times as the store keeps them (milliseconds since the Unix epoch) and as the operator reads
//! them: RFC 3339 in UTC, to the millisecond.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch, by the system clock (the stores' unit).
pub(crate) fn now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
        // A clock set before 1970: count back.
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// `ms` (milliseconds since the Unix epoch) as RFC 3339 in UTC: `2026-11-30T21:55:00.000Z`.
pub(crate) fn rfc3339(ms: i64) -> String {
    let days = ms.div_euclid(MS_PER_DAY);
    let in_day = ms.rem_euclid(MS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (second, milli) = (in_day / 1000 % 60, in_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

const MS_PER_DAY: i64 = 86_400_000;

/// The proleptic Gregorian date `days` after 1970-01-01: (year, month 1..=12, day 1..=31).
///
/// Howard Hinnant's `civil_from_days`: days are counted in 400-year eras of 146 097 days from
/// 0000-03-01, so that the leap day ends each year of the era.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1, "1970-01-01T00:00:00.001Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            // 2000-02-29, a leap day of a century divisible by 400.
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (951_868_799_999, "2000-02-29T23:59:59.999Z"),
            (951_868_800_000, "2000-03-01T00:00:00.000Z"),
            // 2100 is not a leap year: February 28 is followed by March 1.
            (4_107_456_000_000, "2100-02-28T00:00:00.000Z"),
            (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
            (1_796_075_700_123, "2026-11-30T21:55:00.123Z"),
            (1_735_689_599_000, "2024-12-31T23:59:59.000Z"),
        ];
        for (ms, text) in cases {
            assert_eq!(rfc3339(ms), text, "{ms}");
        }
    }

    /// Every day from 1900 to 2200 follows the one before it.
    #[test]
    fn consecutive_days_follow_the_calendar() {
        let mut previous = civil_from_days(-25_567);
        assert_eq!(previous, (1900, 1, 1));
        for days in -25_566..84_000 {
            let (year, month, day) = civil_from_days(days);
            let (py, pm, pd) = previous;
            let next_in_month = (year, month, day) == (py, pm, pd + 1);
            let next_month = (year, month, day) == (py, pm + 1, 1);
            let next_year = (year, month, day) == (py + 1, 1, 1) && (pm, pd) == (12, 31);
            assert!(
                next_in_month || next_month || next_year,
                "{previous:?} → {year}-{month}-{day}"
            );
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
            let last = [
                31,
                if leap { 29 } else { 28 },
                31,
                30,
                31,
                30,
                31,
                31,
                30,
                31,
                30,
                31,
            ];
            assert!(day <= last[usize::try_from(month - 1).unwrap()]);
            previous = (year, month, day);
        }
    }

    #[test]
    fn the_extremes_do_not_panic() {
        assert!(rfc3339(i64::MAX).ends_with('Z'));
        assert!(rfc3339(i64::MIN).ends_with('Z'));
    }
}
