//! Dates for people: a time in milliseconds since 1970 as a UTC date and hour, without a
//! time-zone database (the journal's days and hours are UTC).

/// The UTC civil date `(year, month, day)` of a day count since 1970-01-01.
pub fn date_of_day(days: i64) -> (i64, u32, u32) {
    // Days since 0000-03-01, counted in 400-year eras of 146,097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day count since 1970-01-01 of the UTC civil date `(year, month, day)`: the inverse of
/// [`date_of_day`].
pub fn day_of_date(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let m = i64::from(month);
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// `2026-12-01T16:00:00Z` for a time in milliseconds since 1970.
pub fn iso(ms: u64) -> String {
    let secs = ms / 1000;
    let (y, m, d) = date_of_day((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `2026-12-01` for a time in milliseconds since 1970.
pub fn date(ms: u64) -> String {
    let (y, m, d) = date_of_day((ms / 86_400_000) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(iso(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(iso(1_796_083_200_000 + 3_723_000), "2026-12-01T01:02:03Z");
        assert_eq!(date(4_107_542_399_000), "2100-02-28");
        assert_eq!(date(4_107_542_400_000), "2100-03-01");
        assert_eq!(date_of_day(-1), (1969, 12, 31));
    }

    #[test]
    fn day_of_date_undoes_date_of_day() {
        for day in (-800_000..800_000).step_by(7) {
            let (y, m, d) = date_of_day(day);
            assert_eq!(day_of_date(y, m, d), day);
        }
    }

    #[test]
    fn every_day_follows_the_one_before() {
        let mut prev = date_of_day(-800_000);
        for day in -799_999..800_000 {
            let next = date_of_day(day);
            let (py, pm, pd) = prev;
            let follows = next == (py, pm, pd + 1)
                || (next == (py, pm + 1, 1) && pd >= 28)
                || (next == (py + 1, 1, 1) && pm == 12 && pd == 31);
            assert!(follows, "{prev:?} then {next:?}");
            prev = next;
        }
    }
}
