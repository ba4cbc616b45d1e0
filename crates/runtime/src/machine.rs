//! The machine's run-time setting files, read once through the [`Kernel`]
//! door: the sysctls, the preemption model, the cpufreq and cpuidle files of
//! the shielded CPUs and their SMT siblings. What a config's `[runtime]`
//! section is planned against ([`crate::settings`]), and what `tune`'s knob
//! catalog is built on.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::numa::NumaNode;
use cpushield_kernel::Kernel;
use cpushield_parse::preempt::{parse_preempt, PreemptModels};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The sysctls [runtime] may change: kernel.sched_rt_runtime_us,
/// kernel.timer_migration, vm.stat_interval.
pub use cpushield_kernel::paths::sysctl::{RT_RUNTIME, STAT_INTERVAL, TIMER_MIGRATION};
/// The preemption model file of a `PREEMPT_DYNAMIC` kernel (debugfs).
pub use cpushield_kernel::paths::PREEMPT as PREEMPT_FILE;
/// The PM QoS latency request device.
pub const DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// One file a candidate writes, with the value it had (written back after).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The file.
    pub path: PathBuf,
    /// What it held, in the form it is written back.
    pub original: String,
    /// The candidate value.
    pub candidate: String,
}

/// One idle state of a CPU, as its files say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdleStateFile {
    /// Its directory (`/sys/devices/system/cpu/cpu1/cpuidle/state2`).
    pub dir: PathBuf,
    /// Its name (`C6`).
    pub name: String,
    /// Exit latency, us.
    pub latency_us: u64,
    /// The `disable` file's value.
    pub disable: String,
}

/// The knobs' files of one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuFiles {
    /// scaling_governor, when there is a cpufreq driver.
    pub governor: Option<String>,
    /// scaling_available_governors.
    pub governors: Vec<String>,
    /// energy_performance_preference, where the driver has it.
    pub epp: Option<String>,
    /// energy_performance_available_preferences.
    pub epps: Vec<String>,
    /// Its idle states (none without a cpuidle driver).
    pub idle_states: Vec<IdleStateFile>,
    /// Its SMT siblings, itself included.
    pub siblings: CpuSet,
}

/// The memory nodes a shield's cpuset can have, and the ones it has.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryNodes {
    /// The machine's nodes (none where the kernel has no NUMA).
    pub nodes: Vec<NumaNode>,
    /// The root cpuset's nodes: every node a cpuset may take.
    pub root: CpuSet,
    /// The shield cpuset's `cpuset.mems`, where the shield is up; empty on
    /// cgroup v2 means the root's nodes.
    pub shield: Option<CpuSet>,
}

/// What the knob catalog and the `[runtime]` settings need to know of the machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Machine {
    /// Online CPUs.
    pub online: CpuSet,
    /// /proc/cmdline.
    pub cmdline: String,
    /// /proc/sys/kernel/version (`#1 SMP PREEMPT_DYNAMIC ...`).
    pub kernel_version: String,
    /// The preemption models, when debugfs shows them.
    pub preempt: Option<PreemptModels>,
    /// Why debugfs could not be reached, when it could not.
    pub debugfs_problem: Option<String>,
    /// Whether /dev/cpu_dma_latency exists.
    pub dma_latency: bool,
    /// Each sysctl file's value (trimmed), when it exists.
    pub sysctls: BTreeMap<&'static str, String>,
    /// The cpuidle driver (`none` in many VMs).
    pub idle_driver: Option<String>,
    /// The cpuset hierarchy is cgroup v1.
    pub cgroup_v1: bool,
    /// Per CPU: the measured ones and their siblings.
    pub cpus: BTreeMap<usize, CpuFiles>,
    /// Automatic NUMA balancing applies (a kernel with it, several memory
    /// nodes): the boot line turns it off.
    pub numa_balancing: bool,
    /// The memory nodes, for memory placement.
    pub memory: MemoryNodes,
}

fn read(kernel: &dyn Kernel, path: &str) -> Option<String> {
    kernel
        .read(Path::new(path))
        .ok()
        .map(|s| s.trim().to_string())
}

impl Machine {
    /// Reads the setting files of the machine and of the CPUs `cpus` and
    /// their SMT siblings.
    pub fn read(kernel: &dyn Kernel, cpus: &CpuSet) -> Self {
        let mut sysctls = BTreeMap::new();
        for path in [RT_RUNTIME, TIMER_MIGRATION, STAT_INTERVAL] {
            if let Some(v) = read(kernel, path) {
                sysctls.insert(path, v);
            }
        }
        let preempt_read = kernel.read(Path::new(PREEMPT_FILE));
        let debugfs_problem = match &preempt_read {
            Err(e) if kernel.exists(Path::new(PREEMPT_FILE)) => {
                let e = cpushield_shield::runtime::debugfs_error(
                    kernel,
                    Path::new(PREEMPT_FILE),
                    cpushield_kernel::os_errno(e).map_or_else(
                        || std::io::Error::new(e.kind(), e.to_string()),
                        std::io::Error::from_raw_os_error,
                    ),
                );
                Some(format!("the kernel refuses to read it ({e})"))
            }
            _ => None,
        };
        let nodes = cpushield_kernel::numa::nodes(kernel);
        let layout = cpushield_shield::layout::detect(kernel);
        let mut machine = Machine {
            online: cpushield_kernel::online_cpus(kernel).unwrap_or_default(),
            cmdline: cpushield_kernel::Procfs::new(kernel)
                .cmdline()
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            kernel_version: cpushield_kernel::kernel_version(kernel)
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            preempt: preempt_read.ok().and_then(|t| parse_preempt(&t)),
            debugfs_problem,
            dma_latency: kernel.exists(Path::new(DMA_LATENCY)),
            sysctls,
            numa_balancing: cpushield_kernel::numa::balancing_applies(
                &nodes,
                cpushield_kernel::numa::balancing(kernel),
            ),
            memory: memory_nodes(kernel, layout.as_ref(), nodes),
            idle_driver: cpushield_kernel::idle_driver(kernel)
                .ok()
                .map(|s| s.trim().to_string()),
            cgroup_v1: matches!(
                layout,
                Some(cpushield_shield::layout::CgroupLayout::V1 { .. })
            ),
            cpus: BTreeMap::new(),
        };
        for cpu in cpus.iter() {
            let files = read_cpu(kernel, cpu);
            let siblings = files.siblings.clone();
            machine.cpus.insert(cpu, files);
            for sib in siblings.iter() {
                machine
                    .cpus
                    .entry(sib)
                    .or_insert_with(|| read_cpu(kernel, sib));
            }
        }
        machine
    }
}

/// The root cpuset's nodes and the shield's, read in the cpuset hierarchy
/// `layout` (none: no cpuset, so no node a shield could be given).
fn memory_nodes(
    kernel: &dyn Kernel,
    layout: Option<&cpushield_shield::layout::CgroupLayout>,
    nodes: Vec<NumaNode>,
) -> MemoryNodes {
    let list = |path: &Path| {
        let text = kernel.read(path).ok()?;
        cpushield_parse::numa::parse_node_list(&path.display().to_string(), &text).ok()
    };
    let Some(layout) = layout else {
        return MemoryNodes {
            nodes,
            ..MemoryNodes::default()
        };
    };
    MemoryNodes {
        nodes,
        root: list(&layout.root().join(layout.root_mems_file())).unwrap_or_default(),
        shield: list(&layout.shield_dir().join("cpuset.mems")),
    }
}

fn read_cpu(kernel: &dyn Kernel, cpu: usize) -> CpuFiles {
    use cpushield_kernel::cpu;
    let idle_states = cpu::idle_states(kernel, cpu)
        .into_iter()
        .map(|s| IdleStateFile {
            name: s.name.unwrap_or(s.id),
            latency_us: s.latency_us.unwrap_or(0),
            disable: s.disable.unwrap_or_default(),
            dir: s.dir,
        })
        .collect();
    CpuFiles {
        governor: cpu::governor(kernel, cpu).ok(),
        governors: cpu::governors(kernel, cpu).unwrap_or_default(),
        epp: cpu::energy_performance_preference(kernel, cpu).ok(),
        epps: cpu::energy_performance_preferences(kernel, cpu).unwrap_or_default(),
        idle_states,
        siblings: cpushield_kernel::thread_siblings(kernel, cpu)
            .unwrap_or_else(|_| CpuSet::from_cpus([cpu])),
    }
}
