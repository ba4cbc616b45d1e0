//! Lists of task IDs, one per line or space-separated: a cgroup's `tasks`
//! and `cgroup.procs`, and /proc/PID/task/TID/children.

use crate::ParseError;

/// The IDs listed in `file` (as this PID namespace sees them). `file` names
/// the kind of file in the error.
pub fn parse_ids(file: &str, text: &str) -> Result<Vec<i32>, ParseError> {
    text.split_ascii_whitespace()
        .map(|t| {
            t.parse()
                .map_err(|_| ParseError::new(file, format!("bad ID '{t}'")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_one_per_line_or_space_separated() {
        assert_eq!(
            parse_ids("/proc/PID/task/TID/children", "3 4 17 \n"),
            Ok(vec![3, 4, 17])
        );
        assert_eq!(parse_ids("tasks", "1\n52\n900\n"), Ok(vec![1, 52, 900]));
        assert_eq!(parse_ids("cgroup.procs", ""), Ok(vec![]));
    }

    #[test]
    fn an_entry_that_is_not_an_id_is_an_error() {
        assert!(parse_ids("/proc/PID/task/TID/children", "3 x").is_err());
        assert!(parse_ids("tasks", "1\n-\n").is_err());
    }
}
