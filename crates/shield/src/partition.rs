//! Making the shield's cgroup v2 cpuset an isolated partition on CPUs the
//! kernel isolated at boot (`isolcpus=domain,N`, as `cpushield boot-params`
//! prints). Kernels before upstream commit 216217ebee16 ("cpuset: fix failure
//! to enable isolated partition when containing isolcpus", 2025; Debian's
//! 6.12 PREEMPT_RT among them) refuse to turn a cpuset holding such CPUs
//! into an isolated partition: it reads `isolated invalid (partition config
//! conflicts with housekeeping setup)`. The same partition is valid when it
//! is made isolated on a housekeeping CPU and then given the isolated ones
//! (the commit's own example), so that is done when, and only when, the
//! kernel refused.

use crate::steps::{Note, Severity};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{read_cpu_list, read_trimmed, Kernel};
use std::io;
use std::path::Path;

/// The reason the kernel gives for the refusal (`PERR_HKEEPING`).
const HOUSEKEEPING_CONFLICT: &str = "conflicts with housekeeping setup";

/// After `isolated` was written to `partition` (a cgroup's
/// `cpuset.cpus.partition`): if the kernel refused it for boot-isolated CPUs,
/// makes it isolated on a housekeeping CPU of its parent first, then gives it
/// its CPUs back. Returns a note when the partition is still invalid.
pub(crate) fn settle_isolated(kernel: &dyn Kernel, partition: &Path) -> io::Result<Option<Note>> {
    let state = read_trimmed(kernel, partition)?;
    if !state.contains(HOUSEKEEPING_CONFLICT) {
        return Ok(None);
    }
    let (Some(dir), Some(parent)) = (
        partition.parent(),
        partition.parent().and_then(Path::parent),
    ) else {
        return Ok(None);
    };
    let cpus_file = dir.join("cpuset.cpus");
    let wanted = read_trimmed(kernel, &cpus_file)?;
    let wanted_set = CpuSet::parse_list(&wanted).unwrap_or_default();
    let boot_isolated = cpushield_kernel::isolated_cpus(kernel).unwrap_or_default();
    let spare = read_cpu_list(kernel, &parent.join("cpuset.cpus.effective"))?
        .difference(&wanted_set)
        .difference(&boot_isolated);
    // The parent keeps at least one CPU while the spare one is lent.
    let Some(spare) = spare.iter().last().filter(|_| spare.len() > 1) else {
        return Ok(Some(still_invalid(partition, &state)));
    };
    kernel.write(&cpus_file, &spare.to_string())?;
    if read_trimmed(kernel, partition)? != "isolated" {
        kernel.write(partition, "isolated")?;
    }
    kernel.write(&cpus_file, &wanted)?;
    let now = read_trimmed(kernel, partition)?;
    Ok((now != "isolated").then(|| still_invalid(partition, &now)))
}

fn still_invalid(partition: &Path, state: &str) -> Note {
    Note {
        severity: Severity::Warn,
        text: format!(
            "{} reads '{state}': the kernel does not enforce the shield (this kernel refuses an isolated partition on CPUs isolated at boot, fixed upstream by commit 216217ebee16)",
            partition.display()
        ),
        remedy: Some(
            "boot without the domain flag of isolcpus (isolcpus=managed_irq,CPUS), or with a kernel that has the fix".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    const SHIELD: &str = "/sys/fs/cgroup/cpushield-shield";

    fn machine(state: &str) -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/system/cpu/isolated", "3\n");
        k.set_file("/sys/fs/cgroup/cpuset.cpus.effective", "0-3\n");
        k.set_file(format!("{SHIELD}/cpuset.cpus"), "3\n");
        k.set_file(
            format!("{SHIELD}/cpuset.cpus.partition"),
            format!("{state}\n"),
        );
        k
    }

    #[test]
    fn a_partition_refused_for_boot_isolated_cpus_is_made_on_a_housekeeping_cpu_then_given_them() {
        let k = machine("isolated invalid (partition config conflicts with housekeeping setup)");
        // What the kernel shows after each write: valid once on CPU 2, still so on CPU 3.
        k.set_file_sequence(
            format!("{SHIELD}/cpuset.cpus.partition"),
            &[
                "isolated invalid (partition config conflicts with housekeeping setup)\n",
                "isolated invalid (partition config conflicts with housekeeping setup)\n",
                "isolated\n",
            ],
        );
        let part = Path::new(SHIELD).join("cpuset.cpus.partition");
        assert_eq!(settle_isolated(&k, &part).unwrap(), None);
        assert_eq!(k.file(format!("{SHIELD}/cpuset.cpus")).unwrap(), "3");
        assert_eq!(k.file(&part).unwrap().trim(), "isolated");
    }

    #[test]
    fn a_valid_partition_or_another_refusal_is_left_alone() {
        let k = machine("isolated");
        let part = Path::new(SHIELD).join("cpuset.cpus.partition");
        assert_eq!(settle_isolated(&k, &part).unwrap(), None);
        assert_eq!(k.file(format!("{SHIELD}/cpuset.cpus")).unwrap(), "3\n");
        let k = machine("isolated invalid (Cpu list in cpuset.cpus not exclusive)");
        assert_eq!(settle_isolated(&k, &part).unwrap(), None);
        assert_eq!(k.file(format!("{SHIELD}/cpuset.cpus")).unwrap(), "3\n");
    }
}
