//! The `check` run beside the shielded probes, as a dependency the caller
//! supplies: `compare` asks what breaks or weakens the shield on the measured
//! CPUs and names the fix beside each cause of the latency table. The
//! caller supplies it: [`crate::check_audit::CheckAudit`] on a real machine,
//! a fake in the runner's tests.

use cpushield_cpuset::CpuSet;
use cpushield_report::CheckFinding;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

/// The check on some CPUs while a probe runs, in a thread of its own
/// (on the housekeeping CPUs, where the runner is).
pub(crate) struct CheckWhile {
    done: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<CheckFinding>>,
}

impl CheckWhile {
    /// Starts watching `cpus`, for at most `interval`.
    pub(crate) fn start(audit: Arc<dyn ShieldAudit>, cpus: &CpuSet, interval: Duration) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let cpus = cpus.clone();
        let handle = std::thread::spawn(move || {
            audit.findings_until(&cpus, interval, &|| flag.load(Ordering::Relaxed))
        });
        Self { done, handle }
    }

    /// Stops watching and returns what the check found, most severe first.
    pub(crate) fn finish(self) -> Vec<CheckFinding> {
        self.done.store(true, Ordering::Relaxed);
        let mut findings = self.handle.join().unwrap_or_default();
        findings.sort_by(|a, b| b.severity.cmp(&a.severity));
        findings
    }
}

/// The fix `check` names for a cause, matched by IRQ number, softirq name,
/// the local timer, or task ID.
pub(crate) fn fix_for(name: &str, findings: &[CheckFinding]) -> Option<String> {
    let key = if let Some(rest) = name.strip_prefix("irq ") {
        format!("IRQ {} ", rest.split_whitespace().next()?)
    } else if let Some(soft) = name.strip_prefix("softirq ") {
        format!("{soft} softirq ")
    } else if name == "local timer interrupt" {
        "the local timer fires".to_string()
    } else if let Some(open) = name.rfind('(') {
        format!("({}", name[open + 1..].trim_end_matches(')'))
    } else {
        return None;
    };
    findings
        .iter()
        .find(|f| f.title.contains(&key))
        .and_then(|f| f.remedies.first().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(title: &str, remedy: &str) -> CheckFinding {
        CheckFinding {
            severity: "warn".into(),
            title: title.into(),
            remedies: vec![remedy.into()],
            runtime_fix: false,
            topic: "irq".into(),
        }
    }

    #[test]
    fn causes_are_matched_with_the_fix_check_names() {
        let findings = [
            finding(
                "IRQ 36 (virtio1-req.0) is kernel-managed and arrives on CPU 1",
                "isolcpus=managed_irq,1",
            ),
            finding(
                "BLOCK softirq ran 2226 times on CPU 1: completions of disk I/O",
                "isolcpus=managed_irq,1",
            ),
            finding("the local timer fires on CPU 1 (2300/s)", "nohz_full=1"),
            finding(
                "task hog (812) ran 5.0 ms on CPU 1",
                "cpushield shield --procs 1",
            ),
        ];
        assert_eq!(
            fix_for("irq 36 virtio1-req.0", &findings).as_deref(),
            Some("isolcpus=managed_irq,1")
        );
        assert_eq!(
            fix_for("softirq BLOCK", &findings).as_deref(),
            Some("isolcpus=managed_irq,1")
        );
        assert_eq!(
            fix_for("local timer interrupt", &findings).as_deref(),
            Some("nohz_full=1")
        );
        assert_eq!(
            fix_for("hog (812)", &findings).as_deref(),
            Some("cpushield shield --procs 1")
        );
        assert_eq!(fix_for("irq 38 virtio2-input.0", &findings), None);
        assert_eq!(fix_for("softirq NET_RX", &findings), None);
    }
}
