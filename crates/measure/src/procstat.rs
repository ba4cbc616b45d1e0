//! Per-CPU time accounting from /proc/stat: parsed (pure) and snapshotted
//! (through the [`Kernel`] door), so steal time and a sibling's busy time can be
//! taken as the difference of two snapshots.

use cpushield_sys::Kernel;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// One CPU's counters from a `cpuN` line of /proc/stat, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// Time in user mode (including nice).
    pub user: u64,
    /// Time in kernel mode, hard and soft interrupts.
    pub system: u64,
    /// Idle time (including iowait).
    pub idle: u64,
    /// Time the hypervisor ran something else on this vCPU.
    pub steal: u64,
}

impl CpuTicks {
    /// All accounted time.
    pub fn total(&self) -> u64 {
        self.user
            .saturating_add(self.system)
            .saturating_add(self.idle)
            .saturating_add(self.steal)
    }

    /// Time not idle (user, system, steal).
    pub fn busy(&self) -> u64 {
        self.total().saturating_sub(self.idle)
    }

    /// Counter increases from `earlier` to `self` (saturating: a CPU that went
    /// offline and back restarts its counters).
    pub fn since(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// A snapshot of every CPU's counters.
pub type CpuTimes = BTreeMap<usize, CpuTicks>;

/// Parses /proc/stat. Lines other than `cpuN` are ignored; missing trailing
/// fields (older kernels) count as zero.
pub fn parse(text: &str) -> CpuTimes {
    let mut out = CpuTimes::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(cpu) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal guest guest_nice;
        // guest time is already included in user.
        out.insert(
            cpu,
            CpuTicks {
                user: at(0).saturating_add(at(1)),
                system: at(2).saturating_add(at(5)).saturating_add(at(6)),
                idle: at(3).saturating_add(at(4)),
                steal: at(7),
            },
        );
    }
    out
}

/// Reads and parses /proc/stat.
pub fn snapshot(kernel: &dyn Kernel) -> io::Result<CpuTimes> {
    let path = Path::new("/proc/stat");
    let text = kernel
        .read(path)
        .map_err(|e| cpushield_sys::with_path(e, path))?;
    Ok(parse(&text))
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

/// USER_HZ: the unit of /proc/stat, in ticks per second.
pub fn user_hz() -> u64 {
    // SAFETY: sysconf takes a constant and touches no memory.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  35336 0 4766 90986 587 0 129 184 0 0\n\
cpu0 17342 0 2492 45656 368 0 50 109 0 0\n\
cpu1 17993 5 2273 45329 218 1 78 75 0 0\n\
intr 123 4 5\n\
ctxt 999\n";

    #[test]
    fn per_cpu_lines_are_parsed_and_the_total_line_is_skipped() {
        let t = parse(STAT);
        assert_eq!(t.len(), 2);
        let c1 = t[&1];
        assert_eq!(c1.user, 17998);
        assert_eq!(c1.system, 2273 + 1 + 78);
        assert_eq!(c1.idle, 45329 + 218);
        assert_eq!(c1.steal, 75);
    }

    #[test]
    fn the_difference_of_two_snapshots_gives_steal_during_the_run() {
        let before = parse("cpu1 10 0 10 100 0 0 0 5 0 0\n");
        let after = parse("cpu1 20 0 10 150 0 0 0 9 0 0\n");
        let d = after[&1].since(&before[&1]);
        assert_eq!(d.steal, 4);
        assert_eq!(d.busy(), 14);
        assert_eq!(d.total(), 64);
    }

    #[test]
    fn short_lines_from_old_kernels_count_missing_fields_as_zero() {
        let t = parse("cpu3 1 2 3 4\n");
        assert_eq!(t[&3].steal, 0);
        assert_eq!(t[&3].idle, 4);
    }
}
