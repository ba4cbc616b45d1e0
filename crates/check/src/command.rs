//! `cpushield check` from its options to what it prints from: the options
//! checked, the CPUs chosen ([`crate::target::choose`]), watched and analysed
//! ([`run_check`]), and which tool set the settings cpushield and tuned both
//! set.

use crate::analyze::{CheckReport, HostSaid};
use crate::run::{sample, CheckError, CheckOptions};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_shield::tuned::SetBy;
use cpushield_vm::blame::{Heard, HostSide};
use std::path::Path;

/// What a check of a machine found.
#[derive(Debug)]
pub struct Checked {
    /// The findings on the CPUs checked.
    pub report: CheckReport,
    /// Which tool set each setting cpushield and tuned both set.
    pub set_by: Vec<SetBy>,
}

/// Checks `cpus` on `host` (`None`: the shielded CPUs) as `opts` says; a
/// zero interval or a choice of CPUs that cannot work is refused in one line
/// naming the option, before anything is read. In a VM whose host runs
/// `cpushield vm watch` (on `host_channel`, or the port found by name;
/// `none`: not asked), the host's account of each checked vCPU over the
/// interval is part of the analysis. Read-only.
pub fn check_host(
    host: &Host,
    cpus: Option<CpuSet>,
    opts: CheckOptions,
    host_channel: Option<&Path>,
) -> Result<Checked, CheckError> {
    opts.validate().map_err(CheckError::Refused)?;
    let kernel = host.kernel();
    let (cpus, source, shield) =
        crate::target::choose(kernel, cpus).map_err(CheckError::Refused)?;
    let side = HostSide::start(kernel, host_channel);
    let from_ns = cpushield_kernel::clock::now_ns();
    let sampled = sample(kernel, &cpus, opts, &|| false)?;
    let to_ns = cpushield_kernel::clock::now_ns();
    let windows: Vec<cpushield_report::SampleWindow> = cpus
        .iter()
        .map(|cpu| cpushield_report::SampleWindow {
            cpu,
            intended_ns: from_ns,
            actual_ns: to_ns,
            outside_ns: 0,
        })
        .collect();
    let said = host_said(&side.finish_asking(&windows), &cpus, from_ns, to_ns);
    let report = sampled.analyse(kernel, &cpus, source, shield.as_ref(), &said);
    let set_by = cpushield_shield::tuned::read_who_set_what(kernel, host.store());
    Ok(Checked { report, set_by })
}

/// What the host side said of each of `cpus` (vCPUs) from `from_ns` to
/// `to_ns` (guest time), as the analysis takes it.
pub fn host_said(heard: &Heard, cpus: &CpuSet, from_ns: u64, to_ns: u64) -> HostSaid {
    match heard {
        Heard::Off => HostSaid::NotAsked,
        Heard::Absent(why) => HostSaid::Absent(cpushield_vm::blame::no_host_line(why)),
        Heard::View(view) => HostSaid::Held(
            cpus.iter()
                .map(|cpu| {
                    let said = view
                        .held_off(cpu as u32, from_ns, to_ns)
                        .map(|s| (s.held_off_ns, s.line()));
                    (cpu, said)
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::store::MemoryStore;
    use cpushield_kernel::FakeKernel;
    use std::time::Duration;

    #[test]
    fn a_zero_interval_is_refused_naming_the_option() {
        let (k, store) = (FakeKernel::new(), MemoryStore::new());
        let opts = CheckOptions {
            interval: Duration::ZERO,
            ..Default::default()
        };
        let e = check_host(&Host::fake(&k, &store), None, opts, None).unwrap_err();
        assert!(matches!(e, CheckError::Refused(_)), "{e}");
        assert!(e.to_string().contains("--interval 0"), "{e}");
    }

    #[test]
    fn named_cpus_that_are_not_online_are_refused_naming_them() {
        let (k, store) = (FakeKernel::new(), MemoryStore::new());
        k.set_file("/sys/devices/system/cpu/online", "0-1\n");
        let cpus = Some(CpuSet::from_cpus([5]));
        let e =
            check_host(&Host::fake(&k, &store), cpus, CheckOptions::default(), None).unwrap_err();
        assert!(e.to_string().contains("CPU 5"), "{e}");
    }
}
