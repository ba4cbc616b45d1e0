//! What `check` reports: a finding with its severity, evidence and remedy.

use serde::Serialize;
use std::fmt;

/// How much a finding matters to the shield's guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Worth knowing; does not limit the guarantee by itself.
    Info,
    /// Limits the guarantee or adds jitter; the shield still holds.
    Warn,
    /// Something reaches the CPU that a shield should keep away.
    BreaksShield,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::BreaksShield => "breaks-shield",
        })
    }
}

/// Where a remedy is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemedyKind {
    /// A `cpushield` command, applied at run time.
    Cpushield,
    /// A sysctl or a write to /proc or /sys, applied at run time.
    Runtime,
    /// A kernel command-line parameter: needs a reboot.
    Boot,
    /// Outside this machine (the hypervisor's host) or outside the kernel.
    Host,
}

/// One exact way to fix a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Remedy {
    /// Where it applies.
    pub kind: RemedyKind,
    /// The command, sysctl or boot parameter itself, ready to use.
    pub action: String,
}

impl Remedy {
    /// A `cpushield ...` command.
    pub fn cpushield(action: impl Into<String>) -> Self {
        Self {
            kind: RemedyKind::Cpushield,
            action: action.into(),
        }
    }
    /// A sysctl or /proc, /sys write.
    pub fn runtime(action: impl Into<String>) -> Self {
        Self {
            kind: RemedyKind::Runtime,
            action: action.into(),
        }
    }
    /// A kernel boot parameter.
    pub fn boot(action: impl Into<String>) -> Self {
        Self {
            kind: RemedyKind::Boot,
            action: action.into(),
        }
    }
    /// Something to do outside the guest or the kernel.
    pub fn host(action: impl Into<String>) -> Self {
        Self {
            kind: RemedyKind::Host,
            action: action.into(),
        }
    }
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            RemedyKind::Boot => write!(f, "boot with {}", self.action),
            RemedyKind::Host => write!(f, "on the host: {}", self.action),
            _ => f.write_str(&self.action),
        }
    }
}

/// What a finding is about; stable names for scripts reading `--json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topic {
    /// A device interrupt (numbered IRQ).
    Irq,
    /// A device interrupt whose move off the CPU the kernel completes at its
    /// next interrupt, which still arrives there (at most one more).
    IrqPending,
    /// An architecture interrupt kind (LOC, RES, CAL, TLB, ...).
    InterruptKind,
    /// A softirq.
    Softirq,
    /// A user task that ran on the CPU.
    Task,
    /// A kernel thread that ran on the CPU.
    KernelThread,
    /// Kernel enforcement of the shield (cpusets).
    Enforcement,
    /// Tick, RCU callbacks, isolcpus boot parameters.
    Isolation,
    /// Kernel preemption model.
    Preemption,
    /// Real-time throttling.
    RtThrottling,
    /// Frequency scaling and idle states.
    Power,
    /// Timer migration.
    Timers,
    /// Unbound workqueues.
    Workqueue,
    /// irqbalance.
    Irqbalance,
    /// SMT sibling.
    Smt,
    /// Hypervisor steal time.
    Steal,
    /// Memory nodes: CPUs, devices and pages on different nodes.
    Numa,
    /// A virtual machine's threads on this host: vCPU pinning, emulator
    /// threads, vCPU policies, its kvm-pit thread.
    Vm,
}

impl Topic {
    /// The topic's stable name, as in `--json` (`irq`, `irq-pending`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Topic::Irq => "irq",
            Topic::IrqPending => "irq-pending",
            Topic::InterruptKind => "interrupt-kind",
            Topic::Softirq => "softirq",
            Topic::Task => "task",
            Topic::KernelThread => "kernel-thread",
            Topic::Enforcement => "enforcement",
            Topic::Isolation => "isolation",
            Topic::Preemption => "preemption",
            Topic::RtThrottling => "rt-throttling",
            Topic::Power => "power",
            Topic::Timers => "timers",
            Topic::Workqueue => "workqueue",
            Topic::Irqbalance => "irqbalance",
            Topic::Smt => "smt",
            Topic::Steal => "steal",
            Topic::Numa => "numa",
            Topic::Vm => "vm",
        }
    }
}

/// One thing found on a checked CPU (or the whole system), with its fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// What it is about.
    pub topic: Topic,
    /// The CPU it concerns; `None` for system-wide settings.
    pub cpu: Option<usize>,
    /// One line saying what was found.
    pub title: String,
    /// The numbers or file contents that show it.
    pub evidence: String,
    /// What the shield in force already does about it (so the remedies
    /// are what is left); absent without a shield or when it does nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_place: Option<String>,
    /// Ways to fix it, best first; empty when nothing needs doing.
    pub remedies: Vec<Remedy>,
}

impl Finding {
    /// A finding without remedies; add them with [`Finding::remedy`].
    pub fn new(
        severity: Severity,
        topic: Topic,
        cpu: Option<usize>,
        title: impl Into<String>,
        evidence: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            topic,
            cpu,
            title: title.into(),
            evidence: evidence.into(),
            in_place: None,
            remedies: Vec::new(),
        }
    }

    /// Adds a remedy.
    pub fn remedy(mut self, remedy: Remedy) -> Self {
        self.remedies.push(remedy);
        self
    }

    /// Adds a remedy when there is one.
    pub fn remedy_if(self, remedy: Option<Remedy>) -> Self {
        match remedy {
            Some(r) => self.remedy(r),
            None => self,
        }
    }

    /// Says what the shield in force already does about it (joined with
    /// `; ` to what was said before).
    pub fn in_place(mut self, what: Option<String>) -> Self {
        if let Some(what) = what {
            self.in_place = Some(match self.in_place.take() {
                Some(before) => format!("{before}; {what}"),
                None => what,
            });
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_topic_name_is_its_json_name() {
        for t in [
            Topic::Irq,
            Topic::IrqPending,
            Topic::InterruptKind,
            Topic::Softirq,
            Topic::Task,
            Topic::KernelThread,
            Topic::Enforcement,
            Topic::Isolation,
            Topic::Preemption,
            Topic::RtThrottling,
            Topic::Power,
            Topic::Timers,
            Topic::Workqueue,
            Topic::Irqbalance,
            Topic::Smt,
            Topic::Steal,
            Topic::Numa,
            Topic::Vm,
        ] {
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
        }
    }
}
