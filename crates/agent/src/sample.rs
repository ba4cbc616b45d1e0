//! One reading of the counters `check` uses, for the shielded CPUs: IRQs per
//! CPU (/proc/interrupts), softirqs (/proc/softirqs) and steal (/proc/stat),
//! read through the kernel door and parsed by `cpushield-parse`.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use std::collections::BTreeMap;
use std::io;

/// Counters since boot, per shielded CPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// (cpu, IRQ id as in /proc/interrupts: `36`, `LOC`, ...) to count.
    pub interrupts: BTreeMap<(usize, String), u64>,
    /// (cpu, softirq kind: `TIMER`, `NET_RX`, ...) to count.
    pub softirqs: BTreeMap<(usize, String), u64>,
    /// cpu to steal time in USER_HZ ticks.
    pub steal_ticks: BTreeMap<usize, u64>,
}

fn parse_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Reads the counters of the CPUs in `cpus`.
pub fn read(kernel: &dyn Kernel, cpus: &CpuSet) -> io::Result<Sample> {
    let mut sample = Sample::default();
    if cpus.is_empty() {
        return Ok(sample);
    }
    let text = cpushield_kernel::Procfs::new(kernel).interrupts()?;
    for line in cpushield_parse::interrupts::parse_interrupts(&text).map_err(parse_error)? {
        for cpu in cpus.iter() {
            if let Some(n) = line.per_cpu.get(&cpu) {
                sample.interrupts.insert((cpu, line.id.clone()), *n);
            }
        }
    }
    let text = cpushield_kernel::Procfs::new(kernel).softirqs()?;
    for (kind, per_cpu) in cpushield_parse::softirqs::parse_softirqs(&text).map_err(parse_error)? {
        for cpu in cpus.iter() {
            if let Some(n) = per_cpu.get(&cpu) {
                sample.softirqs.insert((cpu, kind.clone()), *n);
            }
        }
    }
    let text = cpushield_kernel::Procfs::new(kernel).stat()?;
    for (cpu, times) in cpushield_parse::stat::parse_cpu_times(&text).map_err(parse_error)? {
        if cpus.contains(cpu) {
            sample.steal_ticks.insert(cpu, times.steal);
        }
    }
    Ok(sample)
}
