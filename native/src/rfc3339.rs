//! RFC 3339 timestamps, the profile `router/timestamps.py` accepts:
//! `DDDD-DD-DDTDD:DD:DD[.D{1,9}](Z|+DD:DD|-DD:DD)`, `T` and `Z` in either case.
//!
//! Only instants whose year is 2..=9998 and whose fields are all in range are parsed here;
//! anything else is `None` and the Python path decides (and words the error).

use crate::calendar;

/// A timestamp's fields as written, and its offset from UTC in minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    pub year: i32,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub microsecond: u32,
    pub offset_minutes: i32,
}

fn digits(text: &[u8]) -> Option<u32> {
    let mut value = 0u32;
    for &byte in text {
        if !byte.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u32::from(byte - b'0');
    }
    Some(value)
}

fn is_leap(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

pub fn parse(text: &[u8]) -> Option<Timestamp> {
    if text.len() < 20 || text.len() > 40 {
        return None;
    }
    let punctuation = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if punctuation.iter().any(|&(at, byte)| text[at] != byte) || !matches!(text[10], b'T' | b't') {
        return None;
    }
    let year = digits(&text[0..4])? as i32;
    let month = digits(&text[5..7])? as u8;
    let day = digits(&text[8..10])? as u8;
    let hour = digits(&text[11..13])? as u8;
    let minute = digits(&text[14..16])? as u8;
    let second = digits(&text[17..19])? as u8;
    let mut rest = &text[19..];
    let mut microsecond = 0u32;
    if rest.first() == Some(&b'.') {
        let count = rest[1..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        if !(1..=9).contains(&count) {
            return None;
        }
        // Python keeps the first six digits and drops the rest (no rounding).
        let kept = &rest[1..1 + count.min(6)];
        microsecond = digits(kept)? * 10u32.pow(6 - kept.len() as u32);
        rest = &rest[1 + count..];
    }
    let offset_minutes = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = digits(&[*h1, *h2])? as i32;
            let minutes = digits(&[*m1, *m2])? as i32;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let total = hours * 60 + minutes;
            if *sign == b'-' {
                -total
            } else {
                total
            }
        }
        _ => return None,
    };
    let fields_in_range = (2..=9998).contains(&year)
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour <= 23
        && minute <= 59
        && second <= 59;
    fields_in_range.then_some(Timestamp {
        year,
        month,
        day,
        hour,
        minute,
        second,
        microsecond,
        offset_minutes,
    })
}

impl Timestamp {
    /// Microseconds from the Unix epoch to this instant.
    pub fn unix_micros(&self) -> i64 {
        calendar::unix_micros(
            self.year,
            self.month,
            self.day,
            [self.hour, self.minute, self.second],
            self.microsecond,
            i64::from(self.offset_minutes) * 60_000_000,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_profile() {
        let ts = parse(b"2026-11-23T19:00:00.5+01:00").unwrap();
        assert_eq!(
            (ts.hour, ts.microsecond, ts.offset_minutes),
            (19, 500_000, 60)
        );
        assert_eq!(
            parse(b"2026-11-23t18:00:00.123456789z")
                .unwrap()
                .microsecond,
            123_456
        );
        assert_eq!(
            parse(b"2026-11-23T18:00:00-00:30").unwrap().offset_minutes,
            -30
        );
    }

    #[test]
    fn leaves_the_rest_to_python() {
        for text in [
            "2026-11-23 18:00:00Z",
            "2026-11-23T18:00:00",
            "2026-11-23T18:00:00.Z",
            "2026-11-23T18:00:00.1234567890Z",
            "2026-02-29T18:00:00Z",
            "2026-11-23T24:00:00Z",
            "2026-11-23T18:00:60Z",
            "2026-11-23T18:00:00+24:00",
            "0001-01-01T00:00:00Z",
            "9999-12-31T00:00:00Z",
            "2026-11-23T18:00:00+0100",
        ] {
            assert_eq!(parse(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn counts_microseconds_from_the_unix_epoch() {
        assert_eq!(parse(b"1970-01-01T00:00:00Z").unwrap().unix_micros(), 0);
        assert_eq!(
            parse(b"1970-01-01T01:00:00+01:00").unwrap().unix_micros(),
            0
        );
        assert_eq!(
            parse(b"2000-03-01T00:00:00.000001Z").unwrap().unix_micros(),
            951_868_800_000_001
        );
        assert_eq!(
            parse(b"1969-12-31T23:59:59Z").unwrap().unix_micros(),
            -1_000_000
        );
    }
}
