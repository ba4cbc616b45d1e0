//! A pure parser of `/proc/PID/stat` (and `/proc/PID/task/TID/stat`) that
//! takes whatever the kernel shows: a `comm` with spaces, parentheses and
//! bytes that are not UTF-8. Never panics; a malformed line is an error.
//!
//! Why not procfs-core: its `Stat` parser panics on some malformed lines and
//! wants text, and a thread's name is set by the thread itself.

/// The fields of a stat line that shielding needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// Process or thread ID (field 1).
    pub pid: i32,
    /// Command name (field 2), invalid UTF-8 shown as U+FFFD.
    pub comm: String,
    /// State letter (field 3).
    pub state: char,
    /// Parent process ID (field 4).
    pub ppid: i32,
    /// Kernel flags, PF_* (field 9).
    pub flags: u32,
    /// Start time in clock ticks since boot (field 22).
    pub starttime: u64,
}

/// Why a stat line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed stat line: {0}")]
pub struct StatError(pub String);

/// Parses one stat line. `comm` runs from the first `(` to the LAST `)`, so a
/// name holding `) ` cannot shift the fields after it.
pub fn parse_stat(bytes: &[u8]) -> Result<ProcStat, StatError> {
    let open = bytes
        .iter()
        .position(|&b| b == b'(')
        .ok_or_else(|| StatError("no '(' before the command name".into()))?;
    let close = bytes
        .iter()
        .rposition(|&b| b == b')')
        .filter(|&c| c > open)
        .ok_or_else(|| StatError("no ')' after the command name".into()))?;
    let pid = std::str::from_utf8(&bytes[..open])
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .ok_or_else(|| StatError("the PID is not a number".into()))?;
    let comm = String::from_utf8_lossy(&bytes[open + 1..close]).into_owned();
    let rest = std::str::from_utf8(&bytes[close + 1..])
        .map_err(|_| StatError("bytes after the command name are not text".into()))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state).
    let field = |n: usize| {
        fields.get(n - 3).copied().ok_or_else(|| {
            StatError(format!(
                "only {} fields, field {n} missing",
                fields.len() + 2
            ))
        })
    };
    let number = |n: usize| -> Result<u64, StatError> {
        field(n)?
            .parse::<u64>()
            .map_err(|_| StatError(format!("field {n} is not a number")))
    };
    let state = field(3)?
        .chars()
        .next()
        .ok_or_else(|| StatError("empty state".into()))?;
    let ppid = field(4)?
        .parse::<i32>()
        .map_err(|_| StatError("field 4 (ppid) is not a number".into()))?;
    let flags = u32::try_from(number(9)?)
        .map_err(|_| StatError("field 9 (flags) is out of range".into()))?;
    Ok(ProcStat {
        pid,
        comm,
        state,
        ppid,
        flags,
        starttime: number(22)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(comm: &[u8]) -> Vec<u8> {
        let mut v = b"4242 (".to_vec();
        v.extend_from_slice(comm);
        v.extend_from_slice(b") S 17 4242 17 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 1 0 987654 1000 50 18446744073709551615\n");
        v
    }

    #[test]
    fn a_plain_line_gives_pid_ppid_flags_and_starttime() {
        let s = parse_stat(&line(b"sleep")).unwrap();
        assert_eq!(
            s,
            ProcStat {
                pid: 4242,
                comm: "sleep".into(),
                state: 'S',
                ppid: 17,
                flags: 4194560,
                starttime: 987654,
            }
        );
    }

    #[test]
    fn a_name_cut_mid_character_is_kept_lossily() {
        // "worker-xéééé" cut at 15 bytes by prctl(PR_SET_NAME): the last é is half.
        let name = &"worker-xéééé".as_bytes()[..15];
        assert!(std::str::from_utf8(name).is_err());
        let s = parse_stat(&line(name)).unwrap();
        assert_eq!(s.comm, "worker-xééé\u{fffd}");
        assert_eq!(s.starttime, 987654);
    }

    #[test]
    fn a_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let s = parse_stat(&line(b"a) S 1 2 (b) )")).unwrap();
        assert_eq!(s.comm, "a) S 1 2 (b) )");
        assert_eq!(s.ppid, 17);
        assert_eq!(s.starttime, 987654);
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for bad in [
            &b""[..],
            b"12",
            b"12 (x",
            b"x (y) S 1",
            b"12 (y) S 1 2",
            b"12 (y) S z 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
            b"12 (y)",
            b")(",
        ] {
            assert!(
                parse_stat(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
