//! /proc/PID/task/TID/children: the IDs of a thread's children.

use crate::ParseError;

/// The child IDs listed in a `children` file (space-separated, as this PID
/// namespace sees them).
pub fn parse_children(text: &str) -> Result<Vec<i32>, ParseError> {
    text.split_ascii_whitespace()
        .map(|t| {
            t.parse().map_err(|_| {
                ParseError::new("/proc/PID/task/TID/children", format!("bad ID '{t}'"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_the_space_separated_ids() {
        assert_eq!(parse_children("3 4 17 \n"), Ok(vec![3, 4, 17]));
        assert_eq!(parse_children(""), Ok(vec![]));
    }

    #[test]
    fn a_child_that_is_not_an_id_is_an_error() {
        assert!(parse_children("3 x").is_err());
    }
}
