//! Where each kernel fact is: the one spelling of every /proc and /sys path
//! the workspace names.
//!
//! The readers of this crate read these files; code elsewhere that writes a
//! file by path (and journals it, so that reset can write it back), checks a
//! path it was given, or names a file in a finding's evidence takes the path
//! from here. A path spelt here is spelt nowhere else outside tests.

use std::path::{Path, PathBuf};

/// The kernel's boot command line.
pub const CMDLINE: &str = "/proc/cmdline";
/// Each IRQ's count per CPU.
pub const INTERRUPTS: &str = "/proc/interrupts";
/// Each softirq's count per CPU.
pub const SOFTIRQS: &str = "/proc/softirqs";
/// The time each CPU spent in each state.
pub const STAT: &str = "/proc/stat";
/// The CPUs' model and flags.
pub const CPUINFO: &str = "/proc/cpuinfo";
/// The running kernel's build configuration, gzipped (CONFIG_IKCONFIG_PROC).
pub const CONFIG_GZ: &str = "/proc/config.gz";
/// The cgroups of the calling thread.
pub const THREAD_SELF_CGROUP: &str = "/proc/thread-self/cgroup";

/// The directory of every IRQ's files (`/proc/irq/N/...`).
pub const IRQ_DIR: &str = "/proc/irq";
/// The affinity new IRQs start with (a hex mask).
pub const DEFAULT_IRQ_AFFINITY: &str = "/proc/irq/default_smp_affinity";
/// The directory of IRQ `irq`.
pub fn irq_dir(irq: u32) -> PathBuf {
    PathBuf::from(format!("{IRQ_DIR}/{irq}"))
}
/// The file `name` of IRQ `irq` (`smp_affinity_list`, `effective_affinity_list`).
pub fn irq_file(irq: u32, name: &str) -> PathBuf {
    PathBuf::from(format!("{IRQ_DIR}/{irq}/{name}"))
}
/// The affinity of IRQ `irq` as a hex mask, the file the shield writes.
pub fn irq_affinity(irq: u32) -> PathBuf {
    irq_file(irq, "smp_affinity")
}
/// debugfs's state of IRQ `irq` (its flags: `AFFINITY_MANAGED`), with
/// CONFIG_GENERIC_IRQ_DEBUGFS and debugfs mounted.
pub fn irq_debugfs(irq: u32) -> PathBuf {
    PathBuf::from(format!("{IRQ_DEBUGFS_DIR}/{irq}"))
}
/// The directory of [`irq_debugfs`].
pub const IRQ_DEBUGFS_DIR: &str = "/sys/kernel/debug/irq/irqs";

/// The directory of the CPUs' files (`/sys/devices/system/cpu/cpuN/...`).
pub const CPU_DIR: &str = "/sys/devices/system/cpu";
/// The online CPUs (a CPU list).
pub const ONLINE_CPUS: &str = "/sys/devices/system/cpu/online";
/// The possible CPUs (a CPU list).
pub const POSSIBLE_CPUS: &str = "/sys/devices/system/cpu/possible";
/// The CPUs isolated at boot (`isolcpus=`; a CPU list).
pub const ISOLATED: &str = "/sys/devices/system/cpu/isolated";
/// The CPUs in nohz_full mode (`(null)` or a CPU list).
pub const NOHZ_FULL: &str = "/sys/devices/system/cpu/nohz_full";
/// The cpuidle driver in use.
pub const IDLE_DRIVER: &str = "/sys/devices/system/cpu/cpuidle/current_driver";
/// The directory of CPU `cpu`.
pub fn cpu_dir(cpu: usize) -> PathBuf {
    PathBuf::from(format!("{CPU_DIR}/cpu{cpu}"))
}
/// The file `leaf` of CPU `cpu` (`cpufreq/scaling_governor`, `online`).
pub fn cpu_file(cpu: usize, leaf: &str) -> PathBuf {
    PathBuf::from(format!("{CPU_DIR}/cpu{cpu}/{leaf}"))
}
/// Whether CPU `cpu` is online (`1` or `0`; CPU hotplug writes it).
pub fn cpu_online(cpu: usize) -> PathBuf {
    cpu_file(cpu, "online")
}
/// The SMT siblings of CPU `cpu`, itself included (a CPU list).
pub fn thread_siblings(cpu: usize) -> PathBuf {
    cpu_file(cpu, "topology/thread_siblings_list")
}
/// CPU number and leaf of a per-CPU file (`/sys/devices/system/cpu/cpu3/online`
/// is `(3, "online")`); `None` for any other path.
pub fn cpu_and_leaf(path: &str) -> Option<(u32, &str)> {
    let rest = path.strip_prefix(CPU_DIR)?.strip_prefix("/cpu")?;
    let (cpu, leaf) = rest.split_once('/')?;
    Some((cpu.parse().ok()?, leaf))
}

/// The CPUs unbound workqueues may run on (a hex mask).
pub const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";

/// sysfs.
pub const SYS: &str = "/sys";
/// Where debugfs is mounted.
pub const DEBUGFS: &str = "/sys/kernel/debug";
/// The preemption model of a `PREEMPT_DYNAMIC` kernel (debugfs).
pub const PREEMPT: &str = "/sys/kernel/debug/sched/preempt";
/// The kernel's lockdown mode, the word in brackets
/// (`none [integrity] confidentiality`).
pub const LOCKDOWN: &str = "/sys/kernel/security/lockdown";
/// tracefs's usual mount point.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// tracefs as older systems reach it, inside debugfs.
pub const TRACEFS_IN_DEBUGFS: &str = "/sys/kernel/debug/tracing";
/// The virtio-serial ports of a guest, each with its `name`.
pub const VIRTIO_PORTS: &str = "/sys/class/virtio-ports";

/// The sysctls: `/proc/sys`, and the ones the workspace names.
pub mod sysctl {
    use super::{Path, PathBuf};

    /// Where the sysctls are.
    pub const DIR: &str = "/proc/sys";
    /// kernel.sched_rt_runtime_us (-1: no RT throttling).
    pub const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
    /// kernel.sched_rt_period_us.
    pub const RT_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";
    /// kernel.timer_migration.
    pub const TIMER_MIGRATION: &str = "/proc/sys/kernel/timer_migration";
    /// kernel.watchdog_cpumask.
    pub const WATCHDOG_CPUMASK: &str = "/proc/sys/kernel/watchdog_cpumask";
    /// kernel.numa_balancing.
    pub const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";
    /// vm.stat_interval.
    pub const STAT_INTERVAL: &str = "/proc/sys/vm/stat_interval";

    /// The file of the sysctl `key` (`kernel.timer_migration`).
    pub fn path(key: &str) -> PathBuf {
        Path::new(DIR).join(key.replace('.', "/"))
    }

    /// The key of the sysctl at `path` (`kernel.timer_migration`); `None`
    /// for a path outside [`DIR`].
    pub fn key(path: &Path) -> Option<String> {
        let rest = path.strip_prefix(DIR).ok()?;
        Some(rest.display().to_string().replace('/', "."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sysctl_key_and_its_path_map_both_ways() {
        let path = sysctl::path("kernel.timer_migration");
        assert_eq!(path, Path::new(sysctl::TIMER_MIGRATION));
        assert_eq!(
            sysctl::key(&path).as_deref(),
            Some("kernel.timer_migration")
        );
        assert_eq!(sysctl::key(Path::new("/sys/kernel/x")), None);
    }

    #[test]
    fn per_cpu_and_per_irq_paths_are_under_their_directories() {
        assert_eq!(
            cpu_online(3),
            Path::new("/sys/devices/system/cpu/cpu3/online")
        );
        assert_eq!(
            cpu_and_leaf("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"),
            Some((3, "cpufreq/scaling_governor"))
        );
        assert_eq!(cpu_and_leaf("/sys/devices/system/cpu/online"), None);
        assert_eq!(irq_affinity(36), Path::new("/proc/irq/36/smp_affinity"));
        assert_eq!(irq_debugfs(36), Path::new("/sys/kernel/debug/irq/irqs/36"));
    }
}
