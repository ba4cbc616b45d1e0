//! /proc/stat: per-CPU time counters (in USER_HZ ticks).

use crate::ParseError;
use serde::Serialize;
use std::collections::BTreeMap;

/// One `cpuN` line of /proc/stat, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    /// user
    pub user: u64,
    /// nice
    pub nice: u64,
    /// system
    pub system: u64,
    /// idle
    pub idle: u64,
    /// iowait
    pub iowait: u64,
    /// irq
    pub irq: u64,
    /// softirq
    pub softirq: u64,
    /// steal: time the hypervisor ran something else on this vCPU.
    pub steal: u64,
}

impl CpuTimes {
    /// All ticks counted.
    pub fn total(&self) -> u64 {
        [
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(self.user, |sum, v| sum.saturating_add(*v))
    }

    /// Ticks not idle (iowait counts as idle).
    pub fn busy(&self) -> u64 {
        self.total()
            .saturating_sub(self.idle)
            .saturating_sub(self.iowait)
    }

    /// Field-wise `self - earlier` (saturating: counters can step back on hotplug).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// A CPU's time in four parts, in USER_HZ ticks: what the probes' guards
/// and steal accounting compare between two snapshots.
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

impl From<CpuTimes> for CpuTicks {
    /// Groups the counters: user + nice, system + irq + softirq, idle +
    /// iowait, steal (guest time is already included in user).
    fn from(t: CpuTimes) -> CpuTicks {
        CpuTicks {
            user: t.user.saturating_add(t.nice),
            system: t.system.saturating_add(t.irq).saturating_add(t.softirq),
            idle: t.idle.saturating_add(t.iowait),
            steal: t.steal,
        }
    }
}

/// Parses the `cpuN` lines of /proc/stat (the `cpu` total line is skipped).
pub fn parse_cpu_times(text: &str) -> Result<BTreeMap<usize, CpuTimes>, ParseError> {
    const FILE: &str = "/proc/stat";
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        let Some(num) = first.strip_prefix("cpu") else {
            continue;
        };
        let Ok(cpu) = num.parse::<usize>() else {
            continue; // the "cpu" total
        };
        let v: Vec<u64> = words
            .map(|w| w.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| ParseError::new(FILE, format!("bad numbers on line '{line}'")))?;
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        if v.len() < 4 {
            return Err(ParseError::new(FILE, format!("short line '{line}'")));
        }
        out.insert(
            cpu,
            CpuTimes {
                user: get(0),
                nice: get(1),
                system: get(2),
                idle: get(3),
                iowait: get(4),
                irq: get(5),
                softirq: get(6),
                steal: get(7),
            },
        );
    }
    if out.is_empty() {
        return Err(ParseError::new(FILE, "no cpuN lines"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cpu_lines_are_parsed_and_the_total_skipped() {
        let text = "cpu  16969 0 3389 73004 547 0 117 53 0 0\ncpu0 8237 0 1838 36568 346 0 46 27 0 0\ncpu1 8732 0 1551 36436 200 0 71 25 0 0\nintr 1 2\n";
        let t = parse_cpu_times(text).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[&1].steal, 25);
        assert_eq!(t[&1].busy(), 8732 + 1551 + 71 + 25);
    }

    #[test]
    fn since_gives_deltas() {
        let a = CpuTimes {
            steal: 5,
            idle: 10,
            ..Default::default()
        };
        let b = CpuTimes {
            steal: 9,
            idle: 30,
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!((d.steal, d.idle), (4, 20));
    }

    const STAT: &str = "cpu  35336 0 4766 90986 587 0 129 184 0 0\n\
cpu0 17342 0 2492 45656 368 0 50 109 0 0\n\
cpu1 17993 5 2273 45329 218 1 78 75 0 0\n\
intr 123 4 5\n\
ctxt 999\n";

    fn ticks(text: &str) -> BTreeMap<usize, CpuTicks> {
        parse_cpu_times(text)
            .unwrap()
            .into_iter()
            .map(|(c, t)| (c, t.into()))
            .collect()
    }

    #[test]
    fn per_cpu_lines_are_parsed_and_the_total_line_is_skipped() {
        let t = ticks(STAT);
        assert_eq!(t.len(), 2);
        let c1 = t[&1];
        assert_eq!(c1.user, 17998);
        assert_eq!(c1.system, 2273 + 1 + 78);
        assert_eq!(c1.idle, 45329 + 218);
        assert_eq!(c1.steal, 75);
    }

    #[test]
    fn the_difference_of_two_snapshots_gives_steal_during_the_run() {
        let before = ticks("cpu1 10 0 10 100 0 0 0 5 0 0\n");
        let after = ticks("cpu1 20 0 10 150 0 0 0 9 0 0\n");
        let d = after[&1].since(&before[&1]);
        assert_eq!(d.steal, 4);
        assert_eq!(d.busy(), 14);
        assert_eq!(d.total(), 64);
    }

    #[test]
    fn short_lines_from_old_kernels_count_missing_fields_as_zero() {
        let t = ticks("cpu3 1 2 3 4\n");
        assert_eq!(t[&3].steal, 0);
        assert_eq!(t[&3].idle, 4);
    }

    #[test]
    fn cpus_without_a_line_are_absent_not_zero() {
        // CPU 1 offline: /proc/stat skips its line.
        let t =
            parse_cpu_times("cpu  2 0 2 2 0 0 0 0\ncpu0 1 0 1 1 0 0 0 0\ncpu2 1 0 1 1 0 0 0 0\n")
                .unwrap();
        assert_eq!(t.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
    }
}
