//! A machine's setting files as the tests of `[runtime]` and of `tune`'s
//! knobs start from: one description, so that a test states only what it
//! changes.

use crate::machine::{
    CpuFiles, IdleStateFile, Machine, RT_RUNTIME, STAT_INTERVAL, TIMER_MIGRATION,
};
use cpushield_cpuset::CpuSet;
use cpushield_parse::preempt::parse_preempt;

/// CPUs 0-3 online; timer migration on, RT throttling at 950 ms, vmstat
/// every 10 s; a PREEMPT_DYNAMIC kernel in `voluntary`; CPU 3 with the
/// `powersave` governor (`performance` available), idle states POLL and C1
/// (2 us) enabled, and CPU 1 as its SMT sibling.
pub fn machine() -> Machine {
    let mut m = Machine {
        online: CpuSet::parse_list("0-3").expect("a CPU list"),
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
            siblings: CpuSet::parse_list("1,3").expect("a CPU list"),
            ..Default::default()
        },
    );
    m
}
