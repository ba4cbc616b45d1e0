//! Facts every report carries about the run itself.

use crate::warnings::Warning;
use cpushield_kernel::Kernel;
use serde::{Deserialize, Serialize};

/// When and where a probe ran, whether it was cut short, and what to distrust.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunInfo {
    /// Start, in nanoseconds since the Unix epoch (CLOCK_REALTIME).
    pub started_unix_ns: u64,
    /// How long the run took, in nanoseconds.
    pub elapsed_ns: u64,
    /// True when SIGINT/SIGTERM (or the caller's stop flag) ended the run early.
    pub interrupted: bool,
    /// `uname -r` of the measured kernel.
    pub kernel_release: String,
    /// Guardrail warnings, in the order found.
    pub warnings: Vec<Warning>,
}

/// The running kernel's release string, or "unknown".
pub(crate) fn kernel_release(kernel: &dyn Kernel) -> String {
    cpushield_kernel::kernel_release(kernel)
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
