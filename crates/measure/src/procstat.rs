//! Per-CPU time accounting from /proc/stat: parsed (pure) and snapshotted
//! (through the [`Kernel`] door), so steal time and a sibling's busy time can be
//! taken as the difference of two snapshots.

use cpushield_kernel::Kernel;
use std::collections::BTreeMap;
use std::io;

pub use cpushield_parse::stat::CpuTicks;

/// A snapshot of every CPU's counters.
pub type CpuTimes = BTreeMap<usize, CpuTicks>;

/// Parses /proc/stat (with `cpushield_parse::stat`) into ticks per CPU.
/// Lines other than `cpuN` are ignored; missing trailing fields (older
/// kernels) count as zero; text that is not /proc/stat gives no CPUs.
pub fn parse(text: &str) -> CpuTimes {
    cpushield_parse::stat::parse_cpu_times(text)
        .unwrap_or_default()
        .into_iter()
        .map(|(cpu, times)| (cpu, times.into()))
        .collect()
}

/// Reads and parses /proc/stat.
pub fn snapshot(kernel: &dyn Kernel) -> io::Result<CpuTimes> {
    Ok(parse(&cpushield_kernel::Procfs::new(kernel).stat()?))
}

/// A meter of the steal time of `cpus` on `host`, from now to when it is
/// read; None when /proc/stat cannot be read now (and the reading is None
/// when it cannot be read then).
pub fn steal_meter(
    host: &cpushield_kernel::Host,
    cpus: &cpushield_cpuset::CpuSet,
) -> Option<Box<dyn FnOnce() -> Option<u64>>> {
    let before = snapshot(host.kernel()).ok()?;
    let (host, cpus) = (host.clone(), cpus.clone());
    Some(Box::new(move || {
        let after = snapshot(host.kernel()).ok()?;
        Some(steal_ns(&before, &after, &cpus))
    }))
}

/// Steal time of `cpus` between two snapshots, in nanoseconds (USER_HZ
/// resolution; a CPU missing from either snapshot counts nothing).
pub fn steal_ns(before: &CpuTimes, after: &CpuTimes, cpus: &cpushield_cpuset::CpuSet) -> u64 {
    let ticks: u64 = cpus
        .iter()
        .filter_map(|c| Some(after.get(&c)?.since(before.get(&c)?).steal))
        .sum();
    ticks.saturating_mul(1_000_000_000) / user_hz().max(1)
}

/// USER_HZ: the unit of /proc/stat, in ticks per second (from the kernel door).
pub use cpushield_kernel::user_hz;
