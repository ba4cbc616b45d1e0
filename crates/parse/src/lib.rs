//! Pure parsers of the kernel's text files, in the style of procfs-core:
//! functions from text (or bytes) to data, no I/O, one module per file
//! format. The reading is done through the kernel door (`cpushield_kernel`);
//! callers read there and parse here, so each fact is parsed in one place.

pub mod cmdline;
pub mod cpuinfo;
pub mod diskstats;
pub mod id_list;
pub mod interrupts;
pub mod irq_affinity;
pub mod kconfig;
pub mod kernel_log;
pub mod kthread_name;
pub mod mounts;
pub mod numa;
pub mod pid_cgroup;
pub mod pid_stat;
pub mod pid_status;
pub mod preempt;
pub mod qemu_args;
pub mod qemu_thread;
pub mod schedstat;
pub mod softirqs;
pub mod stat;
pub mod tuned;

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

/// Maps a `CPU0 CPU1 ...` header line (of /proc/interrupts or /proc/softirqs)
/// to the CPU number of each column (offline CPUs have no column).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_columns_name_the_online_cpus_only() {
        assert_eq!(
            cpu_columns("     CPU0  CPU2   CPU3", "f").unwrap(),
            vec![0, 2, 3]
        );
        assert!(cpu_columns("   ", "f").is_err());
        assert!(cpu_columns(" CPU0 CPUx", "f").is_err());
    }
}
