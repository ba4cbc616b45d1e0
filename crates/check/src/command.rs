//! `cpushield check` from its options to what it prints from: the options
//! checked, the CPUs chosen ([`crate::target::choose`]), watched and analysed
//! ([`run_check`]), and which tool set the settings cpushield and tuned both
//! set.

use crate::analyze::CheckReport;
use crate::run::{run_check, CheckError, CheckOptions};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_shield::tuned::SetBy;

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
/// naming the option, before anything is read. Read-only.
pub fn check_host(
    host: &Host,
    cpus: Option<CpuSet>,
    opts: CheckOptions,
) -> Result<Checked, CheckError> {
    opts.validate().map_err(CheckError::Refused)?;
    let kernel = host.kernel();
    let (cpus, source, shield) =
        crate::target::choose(kernel, cpus).map_err(CheckError::Refused)?;
    let report = run_check(kernel, &cpus, source, shield.as_ref(), opts)?;
    let set_by = cpushield_shield::tuned::read_who_set_what(kernel, host.store());
    Ok(Checked { report, set_by })
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
        let e = check_host(&Host::fake(&k, &store), None, opts).unwrap_err();
        assert!(matches!(e, CheckError::Refused(_)), "{e}");
        assert!(e.to_string().contains("--interval 0"), "{e}");
    }

    #[test]
    fn named_cpus_that_are_not_online_are_refused_naming_them() {
        let (k, store) = (FakeKernel::new(), MemoryStore::new());
        k.set_file("/sys/devices/system/cpu/online", "0-1\n");
        let cpus = Some(CpuSet::from_cpus([5]));
        let e = check_host(&Host::fake(&k, &store), cpus, CheckOptions::default()).unwrap_err();
        assert!(e.to_string().contains("CPU 5"), "{e}");
    }
}
