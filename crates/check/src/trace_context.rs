//! What the tracer (`cpushield-trace`) needs to know of the kernel to explain
//! a spike, read with `check`'s own facts: the tick period of each traced CPU
//! (none on a nohz_full CPU), the preemption model, whether the CPUs are
//! virtual, and USER_HZ.

use crate::facts::Facts;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_trace::KernelContext;
use std::path::Path;

/// The [`KernelContext`] of `cpus` on this kernel, for
/// `cpushield_trace::TraceOptions::kernel`.
pub fn trace_context(k: &dyn Kernel, cpus: &CpuSet) -> KernelContext {
    let (kconfig, source) = cpushield_kernel::kconfig(k);
    let hz: Option<u64> = kconfig.get("CONFIG_HZ").and_then(|h| h.parse().ok());
    let read = |p: &str| k.read(Path::new(p)).map(|s| s.trim().to_string()).ok();
    let facts = Facts {
        cmdline: cpushield_kernel::Procfs::new(k)
            .cmdline()
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        kernel_version: cpushield_kernel::kernel_version(k)
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        nohz_full: cpushield_kernel::nohz_full(k)
            .ok()
            .map(|s| s.trim().to_string()),
        // Read raw, as check's facts read it (only when debugfs is mounted).
        preempt_debugfs: read(cpushield_kernel::paths::PREEMPT),
        kconfig,
        kconfig_source: source,
        ..Default::default()
    };
    let nohz = crate::analyze::nohz_full_cpus(&facts);
    let tick_ns = cpus
        .iter()
        .map(|c| {
            (
                c,
                if nohz.contains(c) {
                    None
                } else {
                    hz.map(|h| 1_000_000_000 / h.max(1))
                },
            )
        })
        .collect();
    let (model, _) = crate::analyze::preempt_model(&facts);
    KernelContext {
        tick_ns,
        preempt_model: Some(model),
        virtual_cpu: cpushield_kernel::Procfs::new(k)
            .cpuinfo()
            .is_ok_and(|c| cpushield_parse::cpuinfo::runs_under_hypervisor(&c)),
        user_hz: crate::snapshot::user_hz(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    #[test]
    fn nohz_full_cpus_have_no_tick_and_the_others_the_configured_one() {
        let k = FakeKernel::new();
        k.set_file("/proc/sys/kernel/osrelease", "6.18.0\n");
        k.set_file(
            "/boot/config-6.18.0",
            "CONFIG_HZ=250\nCONFIG_PREEMPT_VOLUNTARY=y\n",
        );
        k.set_file("/proc/cmdline", "quiet nohz_full=2\n");
        k.set_file(
            "/proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu hypervisor\n",
        );
        let ctx = trace_context(&k, &CpuSet::parse_list("1-2").unwrap());
        assert_eq!(ctx.tick_ns.get(&1), Some(&Some(4_000_000)));
        assert_eq!(ctx.tick_ns.get(&2), Some(&None));
        assert_eq!(ctx.preempt_model.as_deref(), Some("voluntary"));
        assert!(ctx.virtual_cpu);
    }

    #[test]
    fn without_a_kernel_config_the_tick_is_unknown_and_the_cpu_physical() {
        let k = FakeKernel::new();
        let ctx = trace_context(&k, &CpuSet::parse_list("1").unwrap());
        assert_eq!(ctx.tick_ns.get(&1), Some(&None));
        assert_eq!(ctx.preempt_model.as_deref(), Some("unknown"));
        assert!(!ctx.virtual_cpu);
    }
}
