//! The `check` run beside the shielded probes, as a dependency the caller
//! supplies: `compare` asks what breaks or weakens the shield on the measured
//! CPUs and names the fix beside each cause of the latency table; the
//! checking itself (cpushield-check) is wired in by the command line.

use cpushield_cpuset::CpuSet;
use cpushield_report::CheckFinding;
use std::time::Duration;

/// Checks the measured CPUs while a shielded probe runs.
pub trait ShieldAudit: Send + Sync + std::fmt::Debug {
    /// Watches `cpus` until `done()` returns true, for at most `interval`,
    /// and returns what it found about those CPUs at warning severity or
    /// above, in any order (empty when the check could not run).
    fn findings_until(
        &self,
        cpus: &CpuSet,
        interval: Duration,
        done: &dyn Fn() -> bool,
    ) -> Vec<CheckFinding>;

    /// The fix for a cause the tracer named (`kind` and `name` as in the
    /// cause table) on `cpus`, when the findings do not name one: work items
    /// and kernel threads too short for sampling to see, and tasks the
    /// experiment's scope left in place (`namespace_scope`).
    fn fix_for_cause(
        &self,
        _kind: &str,
        _name: &str,
        _cpus: &CpuSet,
        _namespace_scope: bool,
    ) -> Option<String> {
        None
    }
}
