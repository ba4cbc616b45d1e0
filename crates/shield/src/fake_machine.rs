//! A fake machine with cgroup-v1 cpusets, for the tests of the shield and of
//! what is built on it (the agent): one description of the files the shield
//! reads, so that a test states only what it adds.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::FakeKernel;

/// Where [`v1_machine`] mounts the cpuset hierarchy.
pub const V1_ROOT: &str = "/sys/fs/cgroup/cpuset";

/// A fake machine of 4 possible CPUs, `online` of them online, with the
/// cpuset hierarchy (v1) at [`V1_ROOT`] and `tasks` (thread ID, affinity list)
/// in its root cpuset, each its own process (parent 1, start time 1000 + ID).
/// The settings the shield saves are at their defaults (every CPU); the
/// caller adds IRQs, `/proc/interrupts` and whatever else its test reads.
pub fn v1_machine(online: &str, tasks: &[(i32, &str)]) -> FakeKernel {
    let k = FakeKernel::new();
    // The PID namespace this process runs in (a fake link holds its target).
    k.set_file("/proc/self/ns/pid", "pid:[4026531836]");
    k.set_file(
        "/proc/self/mountinfo",
        format!("26 25 0:23 / {V1_ROOT} rw - cgroup cgroup rw,cpuset\n"),
    );
    k.set_file("/sys/devices/system/cpu/online", format!("{online}\n"));
    k.set_file("/sys/devices/system/cpu/possible", "0-3\n");
    for (file, value) in [
        ("tasks", ""),
        ("cgroup.procs", ""),
        ("cpuset.cpus", &format!("{online}\n")),
        ("cpuset.mems", "0\n"),
        ("cpuset.cpu_exclusive", "1\n"),
        ("cpuset.sched_load_balance", "1\n"),
    ] {
        k.set_file(format!("{V1_ROOT}/{file}"), value);
    }
    let mut listed = String::new();
    for &(tid, affinity) in tasks {
        let base = format!("/proc/{tid}/task/{tid}");
        k.set_file(
            format!("{base}/stat"),
            format!("{tid} (task{tid}) S 1 {tid} {tid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", 1000 + tid),
        );
        k.set_file(format!("{base}/cgroup"), "3:cpuset:/\n");
        let affinity = CpuSet::parse_list(affinity)
            .unwrap_or_else(|e| panic!("task {tid}: affinity '{affinity}': {e}"));
        k.set_thread_affinity(tid, affinity);
        listed.push_str(&format!("{tid}\n"));
    }
    k.set_file(format!("{V1_ROOT}/tasks"), listed);
    k.set_file("/proc/irq/default_smp_affinity", "f\n");
    k.set_file("/sys/devices/virtual/workqueue/cpumask", "f\n");
    k.set_file("/proc/sys/kernel/watchdog_cpumask", format!("{online}\n"));
    k.set_file("/proc/sys/kernel/timer_migration", "1\n");
    k.set_file("/proc/sys/vm/stat_interval", "1\n");
    k
}

/// Gives a fake machine one memory node per entry of `node_cpus` (node N
/// holds the CPUs of entry N), each with memory, and the root cpuset of
/// [`v1_machine`] every node.
pub fn add_nodes(k: &FakeKernel, node_cpus: &[&str]) {
    let dir = cpushield_kernel::numa::NODE_DIR;
    for (node, cpus) in node_cpus.iter().enumerate() {
        k.set_file(format!("{dir}/node{node}/cpulist"), format!("{cpus}\n"));
    }
    let all = CpuSet::first_n(node_cpus.len()).to_list();
    k.set_file(format!("{dir}/has_memory"), format!("{all}\n"));
    k.set_file(format!("{dir}/online"), format!("{all}\n"));
    k.set_file(format!("{V1_ROOT}/cpuset.mems"), format!("{all}\n"));
}

/// A saved state as the shield writes it for `masks` on CPUs `online` of
/// a [`v1_machine`], with no task, IRQ or file recorded: tests add what
/// they state.
pub fn saved_state(masks: crate::ShieldMasks, online: &str) -> crate::state::SavedState {
    crate::state::SavedState {
        version: crate::state::STATE_VERSION,
        masks,
        layout: crate::layout::CgroupLayout::v1(V1_ROOT),
        scope: crate::snapshot::Scope::Namespace,
        online: CpuSet::parse_list(online)
            .unwrap_or_else(|e| panic!("online CPUs '{online}': {e}")),
        tasks: Default::default(),
        adopted: Default::default(),
        irqs: Default::default(),
        files: Default::default(),
        created_cgroups: Vec::new(),
        pid_namespace: String::new(),
        sched: Default::default(),
        set: Default::default(),
        unread_start_before: None,
        runtime: Default::default(),
        load_dirs: Vec::new(),
        mems: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::Kernel;

    #[test]
    fn the_machine_lists_its_tasks_in_the_root_cpuset_with_their_affinity() {
        let k = v1_machine("0-2", &[(100, "0-1"), (101, "3")]);
        assert_eq!(k.file(format!("{V1_ROOT}/tasks")).unwrap(), "100\n101\n");
        assert_eq!(
            k.get_affinity(101).unwrap(),
            CpuSet::parse_list("3").unwrap()
        );
        let snap = crate::snapshot::take(&k, &crate::layout::detect(&k).unwrap()).unwrap();
        assert_eq!(snap.online, CpuSet::parse_list("0-2").unwrap());
        assert_eq!(
            snap.tasks.iter().map(|t| t.tid).collect::<Vec<_>>(),
            vec![100, 101]
        );
    }
}
