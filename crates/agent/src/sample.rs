//! One reading of the counters `check` uses, for the shielded CPUs: IRQs per
//! CPU (/proc/interrupts), softirqs (/proc/softirqs) and steal (/proc/stat),
//! read through the kernel door and parsed by `cpushield-parse`.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_parse::interrupts::{names_of, parse_interrupts_of, IrqLine};
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

/// Reads the counters of the CPUs in `cpus`. An IRQ that never fired on a
/// CPU has no entry: /proc/interrupts has a column per CPU for every IRQ,
/// and entries for all of them would make /metrics CPUs x IRQs series (a
/// million, 60 MB, for 256 shielded CPUs of a 4,096-vector machine), where
/// an IRQ fires on the few CPUs its affinity has held. Prometheus reads an
/// absent counter as one that has not counted yet.
pub fn read(kernel: &dyn Kernel, cpus: &CpuSet) -> io::Result<Sample> {
    if cpus.is_empty() {
        return Ok(Sample::default());
    }
    read_with(kernel, cpus, &Interrupts::read(kernel, cpus))
}

/// One reading of /proc/interrupts, parsed: a look takes the IRQs' names
/// (for its drift watch) and the counters from it. Its text is CPUs x IRQs,
/// 23 MB at 512 CPUs and 4,096 IRQs, and reading and parsing it was most of
/// what a look's growth beyond linear came from: it is read once a look, and
/// only the watched CPUs' counts are parsed.
pub struct Interrupts(io::Result<Vec<IrqLine>>);

impl Interrupts {
    /// Reads /proc/interrupts now, and parses the counts of `cpus`.
    pub fn read(kernel: &dyn Kernel, cpus: &CpuSet) -> Self {
        Self(
            cpushield_kernel::Procfs::new(kernel)
                .interrupts()
                .and_then(|text| parse_interrupts_of(&text, cpus).map_err(parse_error)),
        )
    }

    /// Each device IRQ's name, as `cpushield_parse::interrupts::irq_names`
    /// gives them (none when the file could not be read or parsed).
    pub fn names(&self) -> BTreeMap<u32, String> {
        self.0.as_deref().map(names_of).unwrap_or_default()
    }
}

/// [`read`] with the counts of IRQs from `interrupts` (read for `cpus` or more).
pub fn read_with(
    kernel: &dyn Kernel,
    cpus: &CpuSet,
    interrupts: &Interrupts,
) -> io::Result<Sample> {
    let mut sample = Sample::default();
    if cpus.is_empty() {
        return Ok(sample);
    }
    let lines = match &interrupts.0 {
        Ok(lines) => lines,
        Err(e) => return Err(io::Error::new(e.kind(), e.to_string())),
    };
    for line in lines {
        for (cpu, n) in line.per_cpu.iter() {
            if n > 0 && cpus.contains(cpu) {
                sample.interrupts.insert((cpu, line.id.clone()), n);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readings_names_are_those_irq_names_gives() {
        let k = cpushield_kernel::FakeKernel::new();
        let text = "           CPU0       CPU1\n 36:          5          0   PCI-MSI 1-edge      eth0\n 37:          1          2   IO-APIC   4-edge      ttyS0 ser\n  9:          0          0   acpi\nLOC:         10         20   Local timer interrupts\nERR:          0\n";
        k.set_file("/proc/interrupts", text);
        let names = Interrupts::read(&k, &CpuSet::new()).names();
        assert_eq!(names, cpushield_parse::interrupts::irq_names(text));
        assert_eq!(names.get(&37).map(String::as_str), Some("ttyS0 ser"));
        assert!(
            Interrupts::read(&cpushield_kernel::FakeKernel::new(), &CpuSet::new())
                .names()
                .is_empty()
        );
    }

    #[test]
    fn an_irq_that_never_fired_on_a_cpu_makes_no_series_for_it() {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file(
            "/proc/interrupts",
            "           CPU0       CPU1       CPU2\n 36:          5          0          7   PCI-MSI 1-edge      eth0\n 37:          0          0          0   PCI-MSI 2-edge      eth1\nLOC:         10         20         30   Local timer interrupts\n",
        );
        k.set_file("/proc/softirqs", "                    CPU0       CPU1       CPU2\n      TIMER:          1          2          3\n");
        k.set_file("/proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\ncpu1 1 0 1 10 0 0 0 0 0 0\ncpu2 1 0 1 10 0 0 0 0 0 0\n");
        let s = read(&k, &CpuSet::from_cpus([1, 2])).unwrap();
        let keys: Vec<(usize, &str)> = s.interrupts.keys().map(|(c, i)| (*c, i.as_str())).collect();
        assert_eq!(keys, vec![(1, "LOC"), (2, "36"), (2, "LOC")]);
    }
}
