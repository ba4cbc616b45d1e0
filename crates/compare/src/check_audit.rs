//! The real [`ShieldAudit`]: `cpushield check` on the measured CPUs while
//! the shielded probes run, and the fix it names for a cause the tracer found.

use crate::audit::ShieldAudit;
use crate::experiment::Scope;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_report::CheckFinding;
use std::sync::Arc;
use std::time::Duration;

/// `cpushield check` on the shielded CPUs while the shielded probes run,
/// through the same kernel door as the experiment ([`crate::Lab`]'s).
pub struct CheckAudit {
    kernel: Arc<dyn Kernel>,
}

impl CheckAudit {
    /// The check, reading the machine through `kernel`.
    pub fn new(kernel: Arc<dyn Kernel>) -> Self {
        Self { kernel }
    }
}

impl std::fmt::Debug for CheckAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckAudit")
    }
}

impl ShieldAudit for CheckAudit {
    fn findings_until(
        &self,
        cpus: &CpuSet,
        interval: Duration,
        done: &dyn Fn() -> bool,
    ) -> Vec<CheckFinding> {
        let opts = cpushield_check::CheckOptions {
            interval,
            ..Default::default()
        };
        let kernel = self.kernel.as_ref();
        let shield = cpushield_check::shield_in_force(kernel).ok().flatten();
        match cpushield_check::run_check_until(
            kernel,
            cpus,
            cpushield_check::CpuSource::ShieldState,
            shield.as_ref(),
            opts,
            done,
        ) {
            Ok(report) => compare_findings(&report.findings, cpus),
            Err(_) => Vec::new(),
        }
    }

    fn fix_for_cause(
        &self,
        kind: &str,
        name: &str,
        cpus: &CpuSet,
        namespace_scope: bool,
    ) -> Option<String> {
        let scope = if namespace_scope {
            Scope::Namespace
        } else {
            Scope::System
        };
        let kernel = self.kernel.as_ref();
        let shield = cpushield_check::shield_in_force(kernel).ok().flatten();
        let housekeeping = cpushield_kernel::online_cpus(kernel)
            .unwrap_or_default()
            .difference(cpus);
        let at = cpushield_check::causes::CauseContext {
            cpus,
            scope,
            shield: shield.as_ref(),
            housekeeping: &housekeeping,
        };
        cpushield_check::causes::remedy_for_cause(kind, name, &at).map(|r| r.action)
    }
}

/// The findings compare reports: warnings and worse about `cpus` (or about
/// no CPU in particular), with their remedies and whether one of them is a
/// runtime fix.
fn compare_findings(findings: &[cpushield_check::Finding], cpus: &CpuSet) -> Vec<CheckFinding> {
    findings
        .iter()
        .filter(|f| f.severity >= cpushield_check::Severity::Warn)
        .filter(|f| f.cpu.is_none_or(|c| cpus.contains(c)))
        .map(|f| CheckFinding {
            severity: f.severity.to_string(),
            title: f.title.clone(),
            remedies: f.remedies.iter().map(|r| r.action.clone()).collect(),
            runtime_fix: f.remedies.iter().any(|r| {
                matches!(
                    r.kind,
                    cpushield_check::RemedyKind::Cpushield | cpushield_check::RemedyKind::Runtime
                )
            }),
            topic: f.topic.name().to_string(),
        })
        .collect()
}

/// What the tracer knows of this kernel, for every online CPU (any of them
/// may be the measured one).
pub fn trace_context(kernel: &dyn Kernel) -> cpushield_trace::KernelContext {
    let cpus = cpushield_kernel::online_cpus(kernel).unwrap_or_default();
    cpushield_check::trace_context(kernel, &cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_check::{Finding, Remedy, Severity, Topic};

    #[test]
    fn only_warnings_and_worse_about_the_measured_cpus_are_kept_with_their_remedies() {
        let findings = [
            Finding::new(
                Severity::BreaksShield,
                Topic::Irq,
                Some(1),
                "IRQ 36 on CPU 1",
                "",
            )
            .remedy(Remedy::boot("isolcpus=managed_irq,1"))
            .remedy(Remedy::cpushield("cpushield shield --irqs")),
            Finding::new(Severity::Warn, Topic::Task, None, "task hog (812)", "")
                .remedy(Remedy::boot("nohz_full=1")),
            Finding::new(Severity::Info, Topic::Irq, Some(1), "IRQ 9 quiet", ""),
            Finding::new(Severity::Warn, Topic::Irq, Some(0), "IRQ 4 on CPU 0", ""),
        ];
        let kept = compare_findings(&findings, &CpuSet::from_cpus([1]));
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].severity, Severity::BreaksShield.to_string());
        assert_eq!(kept[0].title, "IRQ 36 on CPU 1");
        assert_eq!(
            kept[0].remedies,
            vec!["isolcpus=managed_irq,1", "cpushield shield --irqs"]
        );
        assert!(kept[0].runtime_fix);
        assert_eq!(kept[1].title, "task hog (812)");
        assert!(!kept[1].runtime_fix);
    }
}
