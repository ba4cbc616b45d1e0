//! Warnings: what makes a measurement lie (the guardrails), found before and
//! after a run, each naming the fix. The checks are pure functions of a
//! [`SystemView`] and /proc/stat snapshots; only [`SystemView::read`] touches the
//! kernel, through the [`Kernel`] door.

use crate::procstat::{CpuTicks, CpuTimes};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{paths, Kernel};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// What a warning is about (stable names, used in the JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// The process is not root.
    NotRoot,
    /// A measuring thread could not get its real-time policy.
    NoRtPriority,
    /// Memory could not be locked.
    MemoryNotLocked,
    /// /dev/cpu_dma_latency could not be held at 0.
    DmaLatency,
    /// RT throttling can stop a spinning real-time thread.
    RtThrottling,
    /// The hypervisor took time from a measured CPU (steal time).
    VirtualMachine,
    /// An SMT sibling of a measured CPU was busy.
    SmtSiblingBusy,
    /// The control thread had to share a measured CPU.
    ControlOnMeasuredCpu,
}

/// A guardrail warning: what was seen and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// What was seen, in one line.
    pub message: String,
    /// What to do about it, in one line.
    pub fix: String,
}

impl Warning {
    /// A warning of `kind`.
    pub fn new(kind: WarningKind, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            fix: fix.into(),
        }
    }
}

/// The facts about the machine the guardrails need, read once before a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SystemView {
    /// Online CPUs.
    pub online: CpuSet,
    /// kernel.sched_rt_runtime_us (-1 = no throttling); None if unreadable.
    pub rt_runtime_us: Option<i64>,
    /// kernel.sched_rt_period_us; None if unreadable.
    pub rt_period_us: Option<i64>,
    /// SMT siblings of each CPU (the CPU itself included), where known.
    pub siblings: BTreeMap<usize, CpuSet>,
}

impl SystemView {
    /// Reads online CPUs (required), the RT throttling sysctls and the SMT
    /// siblings of `cpus` (optional: missing files leave them unknown).
    pub fn read(kernel: &dyn Kernel, cpus: &CpuSet) -> io::Result<Self> {
        let online = cpushield_kernel::online_cpus(kernel)?;
        let sysctl = |path: &str| cpushield_kernel::read_number(kernel, Path::new(path)).ok();
        let mut siblings = BTreeMap::new();
        for cpu in cpus.iter() {
            if let Ok(set) = cpushield_kernel::thread_siblings(kernel, cpu) {
                siblings.insert(cpu, set);
            }
        }
        Ok(Self {
            online,
            rt_runtime_us: sysctl(paths::sysctl::RT_RUNTIME),
            rt_period_us: sysctl(paths::sysctl::RT_PERIOD),
            siblings,
        })
    }
}

/// How a probe spins: its longest uninterrupted run on the CPU and the fraction
/// of the CPU it uses on average, both at a real-time policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spin {
    /// Longest stretch without sleeping, in nanoseconds.
    pub longest_ns: u64,
    /// Average fraction of the CPU used (0..=1).
    pub fraction: f64,
}

/// Reads the system view every probe starts from, as a probe error.
pub(crate) fn read_view(
    kernel: &dyn Kernel,
    cpus: &CpuSet,
) -> Result<SystemView, crate::MeasureError> {
    SystemView::read(kernel, cpus).map_err(|source| crate::MeasureError::System {
        what: "reading the online CPUs".into(),
        error: source,
    })
}

/// Checks the CPUs to measure: not empty, all online. The error names the
/// CPUs and the remedy.
pub fn validate_cpus(cpus: &CpuSet, online: &CpuSet) -> Result<(), String> {
    if cpus.is_empty() {
        return Err(format!(
            "--cpus is empty: name CPUs to measure from {online}, e.g. --cpus 1"
        ));
    }
    let missing = cpus.difference(online);
    if !missing.is_empty() {
        return Err(format!(
            "--cpus {cpus}: CPU {missing} is not online (online CPUs: {online}): pick CPUs from {online}"
        ));
    }
    Ok(())
}

/// The CPUs the control thread may run on: online and not measured. None when
/// every online CPU is measured.
pub fn control_cpus(cpus: &CpuSet, online: &CpuSet) -> Option<CpuSet> {
    let rest = online.difference(cpus);
    (!rest.is_empty()).then_some(rest)
}

/// Warnings known before the run starts. `spin` is Some for probes that spin at
/// a real-time policy.
pub fn before_run(
    view: &SystemView,
    cpus: &CpuSet,
    is_root: bool,
    spin: Option<Spin>,
) -> Vec<Warning> {
    let mut out = Vec::new();
    if !is_root {
        out.push(Warning::new(
            WarningKind::NotRoot,
            "not running as root: SCHED_FIFO, memory locking and /dev/cpu_dma_latency may be refused, and the run would measure an ordinary task",
            "run as root, or give the binary CAP_SYS_NICE and CAP_IPC_LOCK (setcap cap_sys_nice,cap_ipc_lock+ep)",
        ));
    }
    if let Some(w) = spin.and_then(|spin| throttling(view, spin)) {
        out.push(w);
    }
    if control_cpus(cpus, &view.online).is_none() {
        out.push(Warning::new(
            WarningKind::ControlOnMeasuredCpu,
            format!(
                "every online CPU ({}) is measured, so the control thread shares a measured CPU",
                view.online
            ),
            "leave one online CPU out of --cpus for the control thread",
        ));
    }
    out
}

/// The RT throttling warning, if a real-time thread spinning like `spin` can
/// be throttled: its longest spin reaches the runtime budget or its average
/// use reaches the budget's share of the period.
pub fn throttling(view: &SystemView, spin: Spin) -> Option<Warning> {
    let runtime_us = view.rt_runtime_us?;
    if runtime_us < 0 {
        return None;
    }
    let period_us = view.rt_period_us.unwrap_or(1_000_000).max(1);
    let budget = runtime_us as f64 / period_us as f64;
    if spin.longest_ns < runtime_us as u64 * 1000 && spin.fraction < budget {
        return None;
    }
    Some(Warning::new(
        WarningKind::RtThrottling,
        format!(
            "RT throttling is active (kernel.sched_rt_runtime_us={runtime_us} of {period_us}): a real-time thread spinning past {} ms per {} ms is stopped for the rest of the period, which shows up as gaps of about {} ms",
            runtime_us / 1000,
            period_us / 1000,
            (period_us - runtime_us) / 1000
        ),
        format!(
            "for this run only, sysctl -w kernel.sched_rt_runtime_us=-1 and restore {runtime_us} afterwards (a runaway real-time task then owns the CPU), or measure at SCHED_OTHER"
        ),
    ))
}

/// Busy fraction of an SMT sibling above which it is reported.
pub const SIBLING_BUSY_FRACTION: f64 = 0.10;

/// Warnings from what happened during the run: steal time on measured CPUs,
/// and busy SMT siblings of measured CPUs. `user_hz` is the unit of the ticks.
pub fn after_run(
    view: &SystemView,
    cpus: &CpuSet,
    before: &CpuTimes,
    after: &CpuTimes,
    user_hz: u64,
) -> Vec<Warning> {
    let delta =
        |cpu: usize| -> Option<CpuTicks> { Some(after.get(&cpu)?.since(before.get(&cpu)?)) };
    let ms = |ticks: u64| ticks * 1000 / user_hz.max(1);
    let mut out = Vec::new();
    let mut stolen: Vec<String> = Vec::new();
    for cpu in cpus.iter() {
        if let Some(d) = delta(cpu) {
            if d.steal > 0 {
                stolen.push(format!("{} ms from CPU {cpu}", ms(d.steal)));
            }
        }
    }
    if !stolen.is_empty() {
        out.push(Warning::new(
            WarningKind::VirtualMachine,
            format!(
                "running in a VM: the hypervisor took {} during the run (steal time in /proc/stat), so these figures include the host's noise",
                stolen.join(", ")
            ),
            "measure on bare metal, or give the VM dedicated physical CPUs (vCPU pinning, no overcommit)",
        ));
    }
    for cpu in cpus.iter() {
        let Some(siblings) = view.siblings.get(&cpu) else {
            continue;
        };
        for sib in siblings.iter().filter(|s| *s != cpu && !cpus.contains(*s)) {
            let Some(d) = delta(sib) else { continue };
            if d.total() == 0 {
                continue;
            }
            let busy = d.busy() as f64 / d.total() as f64;
            if busy > SIBLING_BUSY_FRACTION {
                out.push(Warning::new(
                    WarningKind::SmtSiblingBusy,
                    format!(
                        "CPU {sib}, the SMT sibling of measured CPU {cpu}, was {:.0}% busy during the run: they share one core",
                        busy * 100.0
                    ),
                    format!(
                        "shield the sibling too (cpushield shield --cpus {}) or turn SMT off (echo off > /sys/devices/system/cpu/smt/control)",
                        CpuSet::from_cpus([cpu, sib])
                    ),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procstat::parse;
    use cpushield_kernel::FakeKernel;

    fn view(online: &str, runtime: i64) -> SystemView {
        SystemView {
            online: CpuSet::parse_list(online).unwrap(),
            rt_runtime_us: Some(runtime),
            rt_period_us: Some(1_000_000),
            siblings: BTreeMap::new(),
        }
    }

    fn kinds(w: &[Warning]) -> Vec<WarningKind> {
        w.iter().map(|w| w.kind).collect()
    }

    #[test]
    fn an_offline_cpu_is_refused_with_the_online_list() {
        let online = CpuSet::parse_list("0-1").unwrap();
        let err = validate_cpus(&CpuSet::from_cpus([7]), &online).unwrap_err();
        assert!(err.contains("CPU 7 is not online"), "{err}");
        assert!(err.contains("0-1"), "{err}");
        assert!(validate_cpus(&CpuSet::from_cpus([1]), &online).is_ok());
        assert!(validate_cpus(&CpuSet::new(), &online).is_err());
    }

    #[test]
    fn a_spinner_longer_than_the_rt_budget_is_warned_about() {
        let spin = Spin {
            longest_ns: 1_000_000_000,
            fraction: 0.9,
        };
        let w = before_run(
            &view("0-1", 950_000),
            &CpuSet::from_cpus([1]),
            true,
            Some(spin),
        );
        assert_eq!(kinds(&w), vec![WarningKind::RtThrottling]);
        assert!(w[0].message.contains("950000"));
        assert!(w[0].fix.contains("sched_rt_runtime_us=-1"));
    }

    #[test]
    fn no_throttling_warning_when_throttling_is_off_or_the_spin_is_short() {
        let cpus = CpuSet::from_cpus([1]);
        let long = Spin {
            longest_ns: 60_000_000_000,
            fraction: 1.0,
        };
        assert!(before_run(&view("0-1", -1), &cpus, true, Some(long)).is_empty());
        let short = Spin {
            longest_ns: 20_000,
            fraction: 0.04,
        };
        assert!(before_run(&view("0-1", 950_000), &cpus, true, Some(short)).is_empty());
        assert!(before_run(&view("0-1", 950_000), &cpus, true, None).is_empty());
    }

    #[test]
    fn measuring_every_cpu_and_not_being_root_are_warned_about() {
        let w = before_run(
            &view("0-1", 950_000),
            &CpuSet::parse_list("0-1").unwrap(),
            false,
            None,
        );
        assert_eq!(
            kinds(&w),
            vec![WarningKind::NotRoot, WarningKind::ControlOnMeasuredCpu]
        );
        assert_eq!(
            control_cpus(&CpuSet::from_cpus([1]), &CpuSet::parse_list("0-1").unwrap()),
            Some(CpuSet::from_cpus([0]))
        );
    }

    #[test]
    fn steal_on_a_measured_cpu_reports_a_vm() {
        let before = parse("cpu0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 100 0 0 0 10\n");
        let after = parse("cpu0 0 0 0 0 0 0 0 500\ncpu1 0 0 0 200 0 0 0 13\n");
        let w = after_run(
            &view("0-1", 950_000),
            &CpuSet::from_cpus([1]),
            &before,
            &after,
            100,
        );
        assert_eq!(kinds(&w), vec![WarningKind::VirtualMachine]);
        assert!(
            w[0].message.contains("30 ms from CPU 1"),
            "{}",
            w[0].message
        );
    }

    #[test]
    fn a_busy_smt_sibling_is_reported_and_an_idle_one_is_not() {
        let mut v = view("0-3", 950_000);
        v.siblings.insert(1, CpuSet::parse_list("1,3").unwrap());
        let cpus = CpuSet::from_cpus([1]);
        let before = parse("cpu1 0 0 0 0\ncpu3 0 0 0 0\n");
        let busy = parse("cpu1 0 0 0 100\ncpu3 80 0 0 20\n");
        let idle = parse("cpu1 0 0 0 100\ncpu3 1 0 0 99\n");
        let w = after_run(&v, &cpus, &before, &busy, 100);
        assert_eq!(kinds(&w), vec![WarningKind::SmtSiblingBusy]);
        assert!(w[0].message.contains("CPU 3") && w[0].message.contains("80%"));
        assert!(after_run(&v, &cpus, &before, &idle, 100).is_empty());
    }

    #[test]
    fn the_system_view_is_read_through_the_kernel_door() {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_file("/proc/sys/kernel/sched_rt_runtime_us", "950000\n");
        k.set_file("/proc/sys/kernel/sched_rt_period_us", "1000000\n");
        k.set_file(
            "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
            "1,3\n",
        );
        let v = SystemView::read(&k, &CpuSet::from_cpus([1, 2])).unwrap();
        assert_eq!(v.online.to_list(), "0-3");
        assert_eq!(v.rt_runtime_us, Some(950_000));
        assert_eq!(v.siblings[&1].to_list(), "1,3");
        assert!(!v.siblings.contains_key(&2));
    }
}
