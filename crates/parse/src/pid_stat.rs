//! /proc/PID/stat (and /proc/PID/task/TID/stat): the one parser of a stat
//! line. It takes whatever the kernel shows: a `comm` with spaces,
//! parentheses and bytes that are not UTF-8. Never panics; a malformed line
//! is an error.
//!
//! Why not procfs-core: its `Stat` parser panics on some malformed lines and
//! wants text, and a thread's name is set by the thread itself.
//!
//! [`StatLine`] splits a line into PID, command name and the fields after
//! it; [`ProcStat`] (shielding), [`ThreadStat`] (`check`) and callers that
//! need other fields (the process group) read what they need from it.

use crate::ParseError;
use serde::Serialize;

/// PF_KTHREAD in the stat `flags` field: a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// PF_NO_SETAFFINITY in the stat `flags` field: user space may not change its
/// affinity (per-CPU kernel threads, some workers).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// Why a stat line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed stat line: {0}")]
pub struct StatError(pub String);

/// A stat line split into its PID, its command name and the fields after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatLine {
    /// Process or thread ID (field 1).
    pub pid: i32,
    /// Command name (field 2), invalid UTF-8 shown as U+FFFD.
    pub comm: String,
    /// Fields 3 and on, as text (everything after the command name).
    rest: String,
    /// Byte range of each field in `rest`.
    spans: Vec<(usize, usize)>,
}

impl StatLine {
    /// Splits one stat line. `comm` runs from the first `(` to the LAST `)`,
    /// so a name holding `) ` cannot shift the fields after it.
    pub fn parse(bytes: &[u8]) -> Result<StatLine, StatError> {
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
        // One allocation for the text and one for the field positions, not
        // one per field: shielding parses a line per thread. What the kernel
        // prints after the name is ASCII: bytes are scanned (the same split
        // as char::is_whitespace there); other text by chars.
        let spans = if rest.is_ascii() {
            field_spans(
                rest.bytes()
                    .enumerate()
                    .map(|(i, b)| (i, matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))),
                rest.len(),
            )
        } else {
            field_spans(
                rest.char_indices().map(|(i, c)| (i, c.is_whitespace())),
                rest.len(),
            )
        };
        Ok(StatLine {
            pid,
            comm,
            rest: rest.to_string(),
            spans,
        })
    }

    /// Field `n` (numbered from 1 as in proc(5); `n >= 3`).
    pub fn field(&self, n: usize) -> Result<&str, StatError> {
        n.checked_sub(3)
            .and_then(|i| self.spans.get(i))
            .map(|&(a, b)| &self.rest[a..b])
            .ok_or_else(|| {
                StatError(format!(
                    "only {} fields, field {n} missing",
                    self.spans.len() + 2
                ))
            })
    }

    /// Field `n` as an unsigned number.
    pub fn number(&self, n: usize) -> Result<u64, StatError> {
        self.field(n)?
            .parse::<u64>()
            .map_err(|_| StatError(format!("field {n} is not a number")))
    }

    /// Field `n` as a signed 32-bit number (PIDs, process groups).
    pub fn signed(&self, n: usize) -> Result<i32, StatError> {
        self.field(n)?
            .parse::<i32>()
            .map_err(|_| StatError(format!("field {n} is not a number")))
    }

    /// The state letter (field 3).
    pub fn state(&self) -> Result<char, StatError> {
        self.field(3)?
            .chars()
            .next()
            .ok_or_else(|| StatError("empty state".into()))
    }
}

/// The byte ranges of the whitespace-separated fields of a text of `len`
/// bytes, given each character's offset and whether it is whitespace.
fn field_spans(chars: impl Iterator<Item = (usize, bool)>, len: usize) -> Vec<(usize, usize)> {
    let mut spans = Vec::with_capacity(52);
    let mut start = None;
    for (i, space) in chars {
        match (space, start) {
            (true, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, len));
    }
    spans
}

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
    /// Threads in its process (field 20): 1 means the thread is the whole
    /// process, so a process's stat names its one thread.
    pub num_threads: u64,
}

impl ProcStat {
    /// Whether it is a kernel thread (PF_KTHREAD).
    pub fn is_kthread(&self) -> bool {
        u64::from(self.flags) & PF_KTHREAD != 0
    }
    /// Whether its affinity is fixed by the kernel (PF_NO_SETAFFINITY).
    pub fn no_setaffinity(&self) -> bool {
        u64::from(self.flags) & PF_NO_SETAFFINITY != 0
    }
}

/// Parses one stat line into the fields shielding needs (see [`StatLine::parse`]).
pub fn parse_stat(bytes: &[u8]) -> Result<ProcStat, StatError> {
    // Shielding parses a line per thread: the fields it needs are picked in
    // one pass, with no copy of the line. Any line this does not take whole
    // is parsed again by the general path, which names what is wrong.
    quick_stat(bytes).map_or_else(|| general_stat(bytes), Ok)
}

/// [`parse_stat`] of a well-formed line: one pass, one allocation (the name).
fn quick_stat(bytes: &[u8]) -> Option<ProcStat> {
    let open = bytes.iter().position(|&b| b == b'(')?;
    let close = bytes
        .iter()
        .rposition(|&b| b == b')')
        .filter(|&c| c > open)?;
    let pid = std::str::from_utf8(&bytes[..open])
        .ok()?
        .trim()
        .parse::<i32>()
        .ok()?;
    let rest = std::str::from_utf8(&bytes[close + 1..]).ok()?;
    if !rest.is_ascii() {
        return None;
    }
    let (mut state, mut ppid, mut flags, mut threads, mut start) = (None, None, None, None, None);
    // The same whitespace as StatLine::parse splits on (ASCII).
    let fields = rest
        .split([' ', '\t', '\n', '\x0b', '\x0c', '\r'])
        .filter(|f| !f.is_empty());
    for (n, field) in (3..).zip(fields) {
        match n {
            3 => state = field.chars().next(),
            4 => ppid = field.parse::<i32>().ok(),
            9 => {
                flags = field
                    .parse::<u64>()
                    .ok()
                    .and_then(|f| u32::try_from(f).ok())
            }
            20 => threads = field.parse::<u64>().ok(),
            22 => {
                start = field.parse::<u64>().ok();
                break;
            }
            _ => {}
        }
    }
    Some(ProcStat {
        pid,
        comm: String::from_utf8_lossy(&bytes[open + 1..close]).into_owned(),
        state: state?,
        ppid: ppid?,
        flags: flags?,
        starttime: start?,
        num_threads: threads?,
    })
}

/// [`parse_stat`] through [`StatLine`], with its errors.
fn general_stat(bytes: &[u8]) -> Result<ProcStat, StatError> {
    let line = StatLine::parse(bytes)?;
    let state = line.state()?;
    let ppid = line
        .field(4)?
        .parse::<i32>()
        .map_err(|_| StatError("field 4 (ppid) is not a number".into()))?;
    let flags = u32::try_from(line.number(9)?)
        .map_err(|_| StatError("field 9 (flags) is out of range".into()))?;
    Ok(ProcStat {
        starttime: line.number(22)?,
        num_threads: line.number(20)?,
        pid: line.pid,
        comm: line.comm,
        state,
        ppid,
        flags,
    })
}

/// The fields of a thread's `stat` file that `check` uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadStat {
    /// Thread id.
    pub tid: i32,
    /// Command name (up to 15 bytes).
    pub comm: String,
    /// State letter (R, S, D, ...).
    pub state: char,
    /// Parent's pid.
    pub ppid: i32,
    /// PF_* flags.
    pub flags: u64,
    /// User time in USER_HZ ticks.
    pub utime: u64,
    /// System time in USER_HZ ticks.
    pub stime: u64,
    /// The CPU it last ran on.
    pub processor: usize,
    /// Real-time priority (0 for SCHED_OTHER).
    pub rt_priority: u32,
    /// Scheduling policy number (0 other, 1 FIFO, 2 RR, 3 batch, 5 idle, 6 deadline).
    pub policy: u32,
}

impl ThreadStat {
    /// Whether it is a kernel thread.
    pub fn is_kthread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
    /// Whether its affinity is fixed by the kernel (PF_NO_SETAFFINITY).
    pub fn no_setaffinity(&self) -> bool {
        self.flags & PF_NO_SETAFFINITY != 0
    }
    /// Whether it runs at a real-time policy: SCHED_FIFO (1), SCHED_RR (2)
    /// or SCHED_DEADLINE (6).
    pub fn is_realtime(&self) -> bool {
        matches!(self.policy, 1 | 2 | 6)
    }
}

/// Parses a thread's `stat` line into the fields `check` uses (see
/// [`StatLine::parse`]); every one of them must be there.
pub fn parse_thread_stat(text: &str) -> Result<ThreadStat, ParseError> {
    const FILE: &str = "/proc/PID/task/TID/stat";
    let err = |e: StatError| ParseError::new(FILE, e.0);
    let line = StatLine::parse(text.as_bytes()).map_err(err)?;
    let number = |n: usize| line.number(n).map_err(err);
    let narrow = |n: usize| -> Result<u32, ParseError> {
        u32::try_from(number(n)?)
            .map_err(|_| ParseError::new(FILE, format!("field {n} is out of range")))
    };
    Ok(ThreadStat {
        tid: line.pid,
        comm: line.comm.clone(),
        state: line.state().unwrap_or('?'),
        ppid: line.signed(4).map_err(err)?,
        flags: number(9)?,
        utime: number(14)?,
        stime: number(15)?,
        processor: usize::try_from(number(39)?)
            .map_err(|_| ParseError::new(FILE, "field 39 is out of range"))?,
        rt_priority: narrow(40)?,
        policy: narrow(41)?,
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
                num_threads: 1,
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
    fn a_line_cut_short_still_gives_its_first_fields() {
        // load's process scan reads the process group (field 5) of any line.
        let line = StatLine::parse(b"123 (a b) c) S 45 67 67 0 -1").unwrap();
        assert_eq!(line.comm, "a b) c");
        assert_eq!(line.state().unwrap(), 'S');
        assert_eq!((line.signed(4).unwrap(), line.signed(5).unwrap()), (45, 67));
        assert!(line.field(9).is_err());
        assert!(line.field(0).is_err());
        assert!(parse_stat(b"123 (a b) c) S 45 67 67 0 -1").is_err());
    }

    #[test]
    fn stat_with_spaces_and_parens_in_comm_parses() {
        let text = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 0 0 0 0 7 3 0 0 -96 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 95 1 0 0 0 0 0 0 0 0 0 0 0\n";
        let s = parse_thread_stat(text).unwrap();
        assert_eq!(s.tid, 4242);
        assert_eq!(s.comm, "my (odd) prog");
        assert_eq!((s.utime, s.stime), (7, 3));
        assert_eq!(s.processor, 1);
        assert_eq!(s.rt_priority, 95);
        assert_eq!(s.policy, 1);
        assert!(!s.is_kthread());
    }

    #[test]
    fn kernel_thread_flags_are_recognised() {
        // ksoftirqd/1 on a 6.x kernel: flags 0x04208040.
        let text = "22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 12 0 0 20 0 1 0 12 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let s = parse_thread_stat(text).unwrap();
        assert!(s.is_kthread());
        assert!(s.no_setaffinity());
        assert_eq!(s.processor, 1);
        let p = parse_stat(text.as_bytes()).unwrap();
        assert!(p.is_kthread() && p.no_setaffinity());
    }

    #[test]
    fn a_thread_stat_without_the_scheduling_fields_is_an_error() {
        let short = "7 (x) S 1 7 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n";
        assert!(parse_stat(short.as_bytes()).is_ok());
        let e = parse_thread_stat(short).unwrap_err();
        assert_eq!(e.file, "/proc/PID/task/TID/stat");
    }

    #[test]
    fn the_one_pass_parse_gives_what_the_general_parse_gives() {
        let mut lines = vec![
            line(b"sleep"),
            line(b"a) b (c"),
            line(b"x\xc3"),
            b"7 (k) S 2 0 0 0 -1 69238848 0 0 0 0 0 0 0 0 20 0 3 0 55 0\n".to_vec(),
            b"7 (k)\tS\x0b2 0 0 0 -1 1 0 0 0 0 0 0 0 0 20 0 1 0 9\n".to_vec(),
        ];
        lines.push(b"7 (k) S 2 0 0 0 -1 99999999999 0 0 0 0 0 0 0 0 20 0 1 0 5\n".to_vec());
        lines.push(b"7 (k) S 2 0 0 0".to_vec());
        for l in &lines {
            assert_eq!(
                parse_stat(l),
                general_stat(l),
                "{}",
                String::from_utf8_lossy(l)
            );
        }
        assert!(
            quick_stat(&lines[0]).is_some(),
            "a plain line takes the one pass"
        );
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
