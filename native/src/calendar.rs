//! Instants as microseconds from the Unix epoch, from a proleptic Gregorian date and time.

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Days from 1970-01-01 to a date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i32, month: u8, day: u8) -> i64 {
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Microseconds from the Unix epoch to `year-month-day hour:minute:second.microsecond` at
/// `offset_micros` east of UTC.
pub fn unix_micros(
    year: i32,
    month: u8,
    day: u8,
    [hour, minute, second]: [u8; 3],
    microsecond: u32,
    offset_micros: i64,
) -> i64 {
    let seconds = i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
    days_from_civil(year, month, day) * MICROS_PER_DAY
        + seconds * 1_000_000
        + i64::from(microsecond)
        - offset_micros
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_days_across_eras() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 1, 1), 10_957);
        assert_eq!(days_from_civil(1, 1, 1), -719_162);
        assert_eq!(days_from_civil(9999, 12, 31), 2_932_896);
        assert_eq!(
            days_from_civil(2024, 2, 29) + 1,
            days_from_civil(2024, 3, 1)
        );
    }
}
