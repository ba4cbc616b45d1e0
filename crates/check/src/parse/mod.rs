//! Parsers of kernel text files: pure functions from text to data, no I/O.

pub mod cmdline;
pub mod diskstats;
pub mod interrupts;
pub mod softirqs;
pub mod stat;
pub mod task;

/// A file's text did not have the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct ParseError {
    /// The file (or kind of file) being parsed.
    pub file: String,
    /// What was wrong.
    pub reason: String,
}

impl ParseError {
    pub(crate) fn new(file: &str, reason: impl Into<String>) -> Self {
        Self {
            file: file.to_string(),
            reason: reason.into(),
        }
    }
}

/// Maps a `CPU0 CPU1 ...` header line to the CPU number of each column
/// (offline CPUs have no column).
pub(crate) fn cpu_columns(header: &str, file: &str) -> Result<Vec<usize>, ParseError> {
    let cols: Result<Vec<usize>, _> = header
        .split_whitespace()
        .map(|w| {
            w.strip_prefix("CPU")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| ParseError::new(file, format!("bad header column '{w}'")))
        })
        .collect();
    let cols = cols?;
    if cols.is_empty() {
        return Err(ParseError::new(file, "no CPU columns in the header"));
    }
    Ok(cols)
}
