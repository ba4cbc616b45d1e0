//! A machine's setting files as the tests of the runtime settings and of
//! `tune` (which writes its winners as such settings) both plan against.

use crate::machine::{
    CpuFiles, IdleStateFile, Machine, RT_RUNTIME, STAT_INTERVAL, TIMER_MIGRATION,
};
use cpushield_cpuset::CpuSet;
use cpushield_parse::preempt::parse_preempt;

/// A 4-CPU machine whose files all have a candidate: timer migration on,
/// RT throttling at 950 ms, vmstat every 10 s, voluntary preemption of a
/// dynamic kernel, and CPU 3 (SMT sibling of CPU 1) at `powersave` with
/// the idle states POLL and C1, both enabled.
pub fn machine() -> Machine {
    let mut m = Machine {
        online: CpuSet::parse_list("0-3").unwrap(),
        ..Default::default()
    };
    m.sysctls.insert(TIMER_MIGRATION, "1".into());
    m.sysctls.insert(RT_RUNTIME, "950000".into());
    m.sysctls.insert(STAT_INTERVAL, "10".into());
    m.preempt = parse_preempt("none (voluntary) full lazy");
    m.kernel_version = "#1 SMP PREEMPT_DYNAMIC".into();
    m.cpus.insert(
        3,
        CpuFiles {
            governor: Some("powersave".into()),
            governors: vec!["performance".into(), "powersave".into()],
            idle_states: vec![
                IdleStateFile {
                    dir: "/sys/devices/system/cpu/cpu3/cpuidle/state0".into(),
                    name: "POLL".into(),
                    latency_us: 0,
                    disable: "0".into(),
                },
                IdleStateFile {
                    dir: "/sys/devices/system/cpu/cpu3/cpuidle/state1".into(),
                    name: "C1".into(),
                    latency_us: 2,
                    disable: "0".into(),
                },
            ],
            siblings: CpuSet::parse_list("1,3").unwrap(),
            ..Default::default()
        },
    );
    m
}
