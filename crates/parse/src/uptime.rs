//! /proc/uptime: the time since boot, in hundredths of a second.

use crate::ParseError;

/// The first field of /proc/uptime (CLOCK_BOOTTIME, suspend included) in
/// hundredths of a second, read exactly from its `seconds.hundredths` text:
/// the unit of a task's start time in its stat where USER_HZ is 100.
pub fn parse_centiseconds(text: &str) -> Result<u64, ParseError> {
    const FILE: &str = "/proc/uptime";
    let field = text
        .split_whitespace()
        .next()
        .ok_or_else(|| ParseError::new(FILE, "empty"))?;
    let bad = || ParseError::new(FILE, format!("'{field}' is not seconds.hundredths"));
    let (secs, hundredths) = field.split_once('.').ok_or_else(bad)?;
    if hundredths.len() != 2 || !hundredths.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: u64 = secs.parse().map_err(|_| bad())?;
    let hundredths: u64 = hundredths.parse().map_err(|_| bad())?;
    secs.checked_mul(100)
        .and_then(|c| c.checked_add(hundredths))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_is_read_exactly_in_hundredths_of_a_second() {
        assert_eq!(parse_centiseconds("83412.07 160040.11\n"), Ok(8_341_207));
        assert_eq!(parse_centiseconds("0.99 0.00\n"), Ok(99));
    }

    #[test]
    fn an_uptime_not_in_seconds_and_hundredths_is_an_error() {
        assert!(parse_centiseconds("").is_err());
        assert!(parse_centiseconds("83412 1.00").is_err());
        assert!(parse_centiseconds("83412.7 1.00").is_err());
        assert!(parse_centiseconds("-1.00 1.00").is_err());
        assert!(parse_centiseconds("1.0x 1.00").is_err());
    }
}
