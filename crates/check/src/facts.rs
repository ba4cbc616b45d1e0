//! The configuration that limits what a shield can guarantee, and the thin
//! layer that reads it. Every field is plain data so analysis runs on fixtures.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::paths::{self, sysctl};
use cpushield_kernel::Kernel;
use cpushield_shield::layout::{self, Isolation};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One idle state of a CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdleState {
    /// `stateN` directory name.
    pub id: String,
    /// Its name (`POLL`, `C1`, `C6`, ...).
    pub name: String,
    /// Exit latency in us.
    pub latency_us: u64,
    /// Whether it is disabled.
    pub disabled: bool,
}

/// Per-CPU facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuFacts {
    /// cpufreq scaling governor, when there is a cpufreq driver.
    pub governor: Option<String>,
    /// Idle states (empty without a cpuidle driver).
    pub idle_states: Vec<IdleState>,
    /// SMT siblings including the CPU itself.
    pub siblings: Option<CpuSet>,
}

/// Whether an IRQ's affinity is managed by the kernel (cannot be changed at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Managed {
    /// debugfs says IRQD_AFFINITY_MANAGED.
    Yes,
    /// debugfs says it is not.
    No,
    /// No debugfs: a queue interrupt of a multi-queue block driver, which the
    /// kernel usually manages.
    Likely,
    /// No debugfs and nothing suggests it is managed.
    Unknown,
}

/// Facts about one device IRQ (its affinity is in the snapshots, read at
/// the start and at the end of the interval).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqFacts {
    /// Whether the kernel manages its affinity.
    pub managed: Managed,
}

/// A cpuset cgroup that holds some of the checked CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpusetInfo {
    /// Directory.
    pub path: PathBuf,
    /// Whether it is the hierarchy's root.
    pub is_root: bool,
    /// The CPUs it has in effect ([`layout::Cpusets::cpus_file`]).
    pub cpus: CpuSet,
    /// How it keeps them to itself (v1 exclusive, v2 partition).
    pub isolation: Isolation,
    /// Its threads ([`layout::Cpusets::thread_list`]), when readable.
    pub tasks: Option<Vec<i32>>,
}

impl Facts {
    /// CPUs in nohz_full mode: sysfs when it says, else the command line.
    pub fn nohz_full_cpus(&self) -> CpuSet {
        cpushield_parse::cmdline::nohz_full_cpus(self.nohz_full.as_deref(), &self.cmdline)
    }

    /// CPUs whose RCU callbacks the command line asks to offload:
    /// `rcu_nocbs=` and every nohz_full CPU (the rule `show` uses). What
    /// the kernel did is [`Facts::rcu_offload`].
    pub fn rcu_offloaded_cpus(&self) -> CpuSet {
        cpushield_parse::cmdline::rcu_offloaded_cpus(&self.cmdline, &self.nohz_full_cpus())
    }

    /// The CPUs whose RCU callbacks the kernel offloads, from what proves it
    /// where something does: its own boot record in the log ("Offload RCU
    /// callbacks from CPUs: LIST"), else the rcuo threads (`threads`, each
    /// thread's name and state letter): a CPU without one is not offloaded,
    /// and a kernel that parks the rcuo threads of the CPUs it does not
    /// offload (6.12 does; 6.1 starts one for every CPU and parks none, so
    /// there a thread proves nothing) offloads the CPUs whose thread is not
    /// parked. Without proof, the command line's rule.
    pub fn rcu_offload<'a>(&self, threads: impl Iterator<Item = (&'a str, char)>) -> RcuOffload {
        use cpushield_parse::kernel_log::RcuOffloadRecord;
        match &self.rcu_offload_log {
            Some(RcuOffloadRecord::Offloaded(cpus)) => {
                return RcuOffload {
                    evidence: format!(
                        "the kernel logged at boot 'Offload RCU callbacks from CPUs: {}' (dmesg)",
                        cpus.to_list()
                    ),
                    cpus: cpus.clone(),
                    proven: true,
                }
            }
            Some(RcuOffloadRecord::NoneLogged) => {
                return RcuOffload {
                    cpus: CpuSet::new(),
                    proven: true,
                    evidence: "the kernel's log reaches back to the boot and holds no 'Offload RCU callbacks from CPUs' line (dmesg): no CPU is offloaded".into(),
                }
            }
            _ => {}
        }
        let rcuo: Vec<(usize, char)> = threads
            .filter_map(|(comm, state)| {
                cpushield_parse::kthread_name::per_cpu_thread(comm, &["rcuop", "rcuos"])
                    .map(|(_, cpu)| (cpu, state))
            })
            .collect();
        let parked: CpuSet = rcuo
            .iter()
            .filter(|(_, s)| *s == 'P')
            .map(|(c, _)| *c)
            .collect();
        let running: CpuSet = rcuo
            .iter()
            .filter(|(_, s)| *s != 'P')
            .map(|(c, _)| *c)
            .collect();
        let why_not_log = match &self.rcu_offload_log {
            None => "the kernel's log is not readable here (dmesg needs CAP_SYSLOG)",
            Some(_) => "the kernel's log no longer reaches back to its boot record",
        };
        if rcuo.is_empty() {
            return RcuOffload {
                cpus: CpuSet::new(),
                proven: true,
                evidence: format!(
                    "{why_not_log}; no rcuop/N thread exists, so no CPU's callbacks are offloaded"
                ),
            };
        }
        if !parked.is_empty() {
            return RcuOffload {
                evidence: format!(
                    "{why_not_log}; this kernel parks the rcuop thread of every CPU it does not offload: rcuop of CPUs {} parked, of CPUs {} not",
                    parked.to_list(),
                    if running.is_empty() { "-".to_string() } else { running.to_list() }
                ),
                cpus: running,
                proven: true,
            };
        }
        RcuOffload {
            cpus: self.rcu_offloaded_cpus(),
            proven: false,
            evidence: format!(
                "{why_not_log}; this kernel starts an rcuop thread for CPUs {} and parks none, so the threads do not tell which CPUs it offloads (the command line asks for {})",
                running.to_list(),
                if self.rcu_offloaded_cpus().is_empty() { "none".to_string() } else { self.rcu_offloaded_cpus().to_list() }
            ),
        }
    }
}

/// The CPUs whose RCU callbacks the kernel offloads to rcuo threads, and
/// what shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcuOffload {
    /// The offloaded CPUs (without proof, those the command line asks for).
    pub cpus: CpuSet,
    /// Whether the kernel's own record proves `cpus`.
    pub proven: bool,
    /// What was read, in a phrase.
    pub evidence: String,
}

/// Everything configuration-related `check` looks at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Facts {
    /// Online CPUs.
    pub online: CpuSet,
    /// /proc/cmdline.
    pub cmdline: String,
    /// Kernel build options (from /proc/config.gz or /boot/config-*), possibly empty.
    pub kconfig: BTreeMap<String, String>,
    /// Where `kconfig` came from.
    pub kconfig_source: Option<String>,
    /// /proc/sys/kernel/version (`#1 SMP PREEMPT_DYNAMIC ...`, as `uname -v`).
    pub kernel_version: String,
    /// /sys/devices/system/cpu/nohz_full, raw.
    pub nohz_full: Option<String>,
    /// /sys/devices/system/cpu/isolated, raw.
    pub isolated: Option<String>,
    /// /sys/kernel/debug/sched/preempt (`none voluntary (full) lazy`), when debugfs is mounted.
    pub preempt_debugfs: Option<String>,
    /// kernel.sched_rt_runtime_us.
    pub rt_runtime_us: Option<i64>,
    /// kernel.sched_rt_period_us.
    pub rt_period_us: Option<i64>,
    /// kernel.timer_migration.
    pub timer_migration: Option<u32>,
    /// kernel.numa_balancing (None: a kernel without automatic NUMA balancing).
    pub numa_balancing: Option<u32>,
    /// /sys/devices/virtual/workqueue/cpumask.
    pub workqueue_cpumask: Option<CpuSet>,
    /// /proc/irq/default_smp_affinity.
    pub default_irq_affinity: Option<CpuSet>,
    /// cpuidle driver name (`none` in many VMs).
    pub idle_driver: Option<String>,
    /// The CPUs are virtual (`hypervisor` in /proc/cpuinfo's flags).
    pub hypervisor: bool,
    /// The boot parameters the loaded tuned profile asked for (its
    /// bootloader plugin's `/etc/tuned/bootcmdline`); empty without tuned.
    pub tuned_boot_line: Vec<String>,
    /// Per checked CPU.
    pub cpus: BTreeMap<usize, CpuFacts>,
    /// Per device IRQ.
    pub irqs: BTreeMap<u32, IrqFacts>,
    /// cpusets holding checked CPUs (and the roots).
    pub cpusets: Vec<CpusetInfo>,
    /// The machine's memory nodes (none on a kernel without NUMA).
    pub nodes: Vec<cpushield_kernel::numa::NumaNode>,
    /// The node of the device behind each device IRQ, where known.
    pub irq_nodes: BTreeMap<u32, usize>,
    /// Resident pages of its own (not of files) per node of each real-time
    /// process with a thread on checked CPUs only, by PID (its numa_maps).
    pub rt_pages: BTreeMap<i32, BTreeMap<usize, u64>>,
    /// What the kernel's log says of RCU callback offloading (None: the
    /// log is not readable).
    #[serde(skip)]
    pub rcu_offload_log: Option<cpushield_parse::kernel_log::RcuOffloadRecord>,
}

fn read_opt(k: &dyn Kernel, p: impl AsRef<Path>) -> Option<String> {
    k.read(p.as_ref()).ok().map(|s| s.trim().to_string())
}

/// What a typed reader of the kernel door read, trimmed; `None` on error.
fn trimmed(read: std::io::Result<String>) -> Option<String> {
    read.ok().map(|s| s.trim().to_string())
}

fn read_list(k: &dyn Kernel, p: &str) -> Option<CpuSet> {
    read_opt(k, p).and_then(|s| CpuSet::parse_list(&s).ok())
}

fn read_mask(k: &dyn Kernel, p: &str) -> Option<CpuSet> {
    cpushield_kernel::read_cpu_mask(k, Path::new(p)).ok()
}

fn read_number<T: std::str::FromStr>(k: &dyn Kernel, p: &str) -> Option<T> {
    cpushield_kernel::read_number(k, Path::new(p)).ok()
}

/// Reads the facts for the checked CPUs (the thin layer; read-only).
pub fn read_facts(kernel: &dyn Kernel, checked: &CpuSet, irq_numbers: &[u32]) -> Facts {
    let k = kernel;
    let procfs = cpushield_kernel::Procfs::new(k);
    let mut facts = Facts {
        online: cpushield_kernel::online_cpus(k).unwrap_or_default(),
        cmdline: trimmed(procfs.cmdline()).unwrap_or_default(),
        kernel_version: trimmed(cpushield_kernel::kernel_version(k)).unwrap_or_default(),
        nohz_full: trimmed(cpushield_kernel::nohz_full(k)),
        isolated: trimmed(cpushield_kernel::isolated(k)),
        // As read: a finding's evidence shows the model list the kernel wrote.
        preempt_debugfs: read_opt(k, paths::PREEMPT),
        rt_runtime_us: read_number(k, sysctl::RT_RUNTIME),
        rt_period_us: read_number(k, sysctl::RT_PERIOD),
        timer_migration: read_number(k, sysctl::TIMER_MIGRATION),
        numa_balancing: cpushield_kernel::numa::balancing(k),
        workqueue_cpumask: read_mask(k, paths::WORKQUEUE_CPUMASK),
        default_irq_affinity: read_mask(k, paths::DEFAULT_IRQ_AFFINITY),
        idle_driver: trimmed(cpushield_kernel::idle_driver(k)),
        hypervisor: cpushield_parse::cpuinfo::runs_under_hypervisor(
            &trimmed(procfs.cpuinfo()).unwrap_or_default(),
        ),
        rcu_offload_log: k
            .kernel_log()
            .ok()
            .map(|log| cpushield_parse::kernel_log::rcu_offload(&log)),
        ..Default::default()
    };
    let (kconfig, source) = cpushield_kernel::kconfig(k);
    facts.kconfig = kconfig;
    facts.kconfig_source = source;
    for cpu in checked.iter().chain(siblings_of(k, checked).iter()) {
        facts.cpus.entry(cpu).or_insert_with(|| read_cpu(k, cpu));
    }
    for &irq in irq_numbers {
        facts.irqs.insert(irq, read_irq(k, irq));
    }
    facts.cpusets = read_cpusets(k, checked);
    facts.nodes = cpushield_kernel::numa::nodes(k);
    if facts.nodes.len() > 1 {
        facts.irq_nodes = cpushield_kernel::numa::irq_device_nodes(k);
    }
    facts.tuned_boot_line = cpushield_shield::tuned::read_claim(k)
        .map(|c| c.boot_line)
        .unwrap_or_default();
    facts
}

fn siblings_of(k: &dyn Kernel, cpus: &CpuSet) -> CpuSet {
    let mut all = CpuSet::new();
    for cpu in cpus.iter() {
        if let Ok(s) = cpushield_kernel::thread_siblings(k, cpu) {
            all = all.union(&s);
        }
    }
    all
}

fn read_cpu(k: &dyn Kernel, cpu: usize) -> CpuFacts {
    let idle_states = cpushield_kernel::cpu::idle_states(k, cpu)
        .into_iter()
        .map(|s| IdleState {
            name: s.name.unwrap_or_default(),
            latency_us: s.latency_us.unwrap_or(0),
            disabled: s.disable.is_some_and(|d| d == "1"),
            id: s.id,
        })
        .collect();
    CpuFacts {
        governor: cpushield_kernel::cpu::governor(k, cpu).ok(),
        idle_states,
        siblings: cpushield_kernel::thread_siblings(k, cpu).ok(),
    }
}

fn read_irq(k: &dyn Kernel, irq: u32) -> IrqFacts {
    let managed = match read_opt(k, paths::irq_debugfs(irq)) {
        Some(text) if text.contains("AFFINITY_MANAGED") => Managed::Yes,
        Some(_) => Managed::No,
        None => {
            let name = k
                .read_dir(&paths::irq_dir(irq))
                .unwrap_or_default()
                .into_iter()
                .find(|n| looks_like_managed_queue(n));
            if name.is_some() {
                Managed::Likely
            } else {
                Managed::Unknown
            }
        }
    };
    IrqFacts { managed }
}

/// Whether an IRQ handler name is a queue interrupt of a multi-queue block
/// driver (virtio-blk `virtio1-req.0`, NVMe I/O queues `nvme0q3`), which the
/// kernel spreads over CPUs with managed affinity.
pub fn looks_like_managed_queue(name: &str) -> bool {
    if name.starts_with("virtio") && name.contains("-req.") {
        return true;
    }
    if let Some(rest) = name.strip_prefix("nvme") {
        if let Some((_, q)) = rest.split_once('q') {
            return q.parse::<u32>().is_ok_and(|n| n > 0);
        }
    }
    false
}

/// The cpusets of the hierarchy the shield uses ([`layout::detect`]) that
/// hold some of `checked`, and its root.
fn read_cpusets(k: &dyn Kernel, checked: &CpuSet) -> Vec<CpusetInfo> {
    let mut out = Vec::new();
    let Some(layout) = layout::detect(k) else {
        return out;
    };
    let (root, cpus_file, list) = (layout.root(), layout.cpus_file(), layout.thread_list());
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut visited = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        visited += 1;
        if visited > 2000 {
            break;
        }
        let is_root = dir == root;
        let cpus = read_list(k, &dir.join(cpus_file).to_string_lossy()).unwrap_or_default();
        if is_root || cpus.intersects(checked) {
            out.push(CpusetInfo {
                path: dir.clone(),
                is_root,
                cpus: cpus.clone(),
                isolation: layout.isolation(k, &dir),
                tasks: k
                    .read(&dir.join(list))
                    .ok()
                    .and_then(|t| cpushield_parse::id_list::parse_ids(list, &t).ok()),
            });
        }
        if depth < 4 {
            if let Ok(mut names) = k.read_dir(&dir) {
                names.sort();
                for n in names {
                    let child = dir.join(&n);
                    if k.exists(&child.join(cpus_file)) {
                        stack.push((child, depth + 1));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nohz_full_cpu_counts_as_rcu_offloaded() {
        let facts = Facts {
            cmdline: "quiet nohz_full=1 rcu_nocbs=3".into(),
            nohz_full: Some("(null)".into()),
            ..Default::default()
        };
        assert_eq!(facts.nohz_full_cpus().to_list(), "1");
        assert_eq!(facts.rcu_offloaded_cpus().to_list(), "1,3");
        let from_sysfs = Facts {
            nohz_full: Some("2".into()),
            ..facts
        };
        assert_eq!(from_sysfs.rcu_offloaded_cpus().to_list(), "2-3");
    }

    #[test]
    fn block_queue_irqs_look_managed_and_network_irqs_do_not() {
        assert!(looks_like_managed_queue("virtio1-req.0"));
        assert!(looks_like_managed_queue("nvme0q3"));
        assert!(!looks_like_managed_queue("nvme0q0"));
        assert!(!looks_like_managed_queue("virtio2-input.0"));
    }
}
