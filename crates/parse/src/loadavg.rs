//! /proc/loadavg: load averages and the kernel's task counts.

use crate::ParseError;

/// The number of tasks the kernel holds, in every PID namespace: the `total`
/// of the fourth field (`running/total`), threads and unreaped zombies
/// included.
pub fn parse_total_tasks(text: &str) -> Result<u64, ParseError> {
    const FILE: &str = "/proc/loadavg";
    let field = text.split_whitespace().nth(3).ok_or_else(|| {
        ParseError::new(FILE, format!("fewer than 4 fields in '{}'", text.trim()))
    })?;
    let (_, total) = field.split_once('/').ok_or_else(|| {
        ParseError::new(FILE, format!("fourth field '{field}' is not running/total"))
    })?;
    total
        .parse()
        .map_err(|_| ParseError::new(FILE, format!("bad task total '{total}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_total_is_the_number_after_the_slash_of_the_fourth_field() {
        assert_eq!(parse_total_tasks("253.86 187.47 76.61 1/80 367\n"), Ok(80));
    }

    #[test]
    fn a_loadavg_without_running_over_total_is_an_error() {
        assert!(parse_total_tasks("0.00 0.01 0.05\n").is_err());
        assert!(parse_total_tasks("0.00 0.01 0.05 80 367\n").is_err());
        assert!(parse_total_tasks("0.00 0.01 0.05 1/x 367\n").is_err());
    }
}
