//! `check` analysis over a fake system: two snapshots of /proc text and the
//! configuration files, through the same reading layer as a real run.

use cpushield_check::sampling::RunTracker;
use cpushield_check::snapshot::{read_raw, ReadOptions, Snapshot};
use cpushield_check::{
    analyse_snapshots, CheckReport, CpuSource, Finding, HostSaid, RemedyKind, Severity,
    ShieldInForce, ShieldKind, Topic,
};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::FakeKernel;

const INTERRUPTS_0: &str = "           CPU0       CPU1       \n 36:          0       1000 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n 38:          0       2000 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n 39:        500          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\nLOC:      10000      10000   Local timer interrupts\nRES:        100        100   Rescheduling interrupts\nTLB:         10         10   TLB shootdowns\nERR:          0\n";
const INTERRUPTS_1: &str = "           CPU0       CPU1       \n 36:          0       1040 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n 38:          0       2500 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n 39:        900          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\nLOC:      10250      10250   Local timer interrupts\nRES:        100        130   Rescheduling interrupts\nTLB:         10         10   TLB shootdowns\nERR:          0\n";
const SOFTIRQS_0: &str = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:        100        100\n      NET_RX:         10         10\n         RCU:        100        100\n";
const SOFTIRQS_1: &str = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:        200        200\n      NET_RX:         10        510\n         RCU:        150        180\n";
const STAT_0: &str =
    "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 100 0 50 1000 0 0 0 0 0 0\ncpu1 100 0 50 1000 0 0 0 5 0 0\n";
const STAT_1: &str =
    "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 150 0 60 1040 0 0 0 0 0 0\ncpu1 180 0 60 1050 0 0 0 7 0 0\n";

fn stat_line(tid: i32, comm: &str, flags: u64, cpu: usize, prio: u32, policy: u32) -> String {
    format!("{tid} ({comm}) S 1 {tid} {tid} 0 -1 {flags} 0 0 0 0 5 5 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 {cpu} {prio} {policy} 0 0 0 0 0 0 0 0 0 0 0\n")
}

/// One thread in the fake /proc, with its affinity and run time so far.
#[derive(Clone, Copy)]
struct Thread {
    pid: i32,
    tid: i32,
    comm: &'static str,
    flags: u64,
    cpu: usize,
    affinity: &'static str,
    run_ns: u64,
}

fn put_thread(k: &FakeKernel, t: &Thread) {
    let base = format!("/proc/{}/task/{}", t.pid, t.tid);
    k.set_file(
        format!("{base}/stat"),
        stat_line(t.tid, t.comm, t.flags, t.cpu, 0, 0),
    );
    k.set_file(format!("{base}/schedstat"), format!("{} 0 1\n", t.run_ns));
    k.set_thread_affinity(t.tid, CpuSet::parse_list(t.affinity).unwrap());
}

/// A two-CPU machine like this host: v1 cpuset without a shield, no
/// nohz_full, RT throttling on, a non-preemptible kernel.
fn base_system() -> FakeKernel {
    let k = FakeKernel::new();
    k.set_file("/sys/devices/system/cpu/online", "0-1\n");
    k.set_file("/proc/cmdline", "console=ttyS0 quiet\n");
    k.set_file("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC\n");
    k.set_file("/proc/sys/kernel/osrelease", "6.1.0-test\n");
    k.set_file("/boot/config-6.1.0-test", "CONFIG_HZ=250\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_NO_HZ_FULL=y\nCONFIG_RCU_NOCB_CPU=y\n");
    k.set_file("/sys/devices/system/cpu/isolated", "\n");
    k.set_file("/proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    k.set_file("/proc/sys/kernel/sched_rt_period_us", "1000000\n");
    k.set_file("/proc/sys/kernel/timer_migration", "1\n");
    k.set_file("/sys/devices/virtual/workqueue/cpumask", "3\n");
    k.set_file("/proc/irq/default_smp_affinity", "3\n");
    k.set_file(
        "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
        "1\n",
    );
    for (irq, aff, eff, name) in [
        (36, "0-1", "1", "virtio1-req.0"),
        (38, "0-1", "1", "virtio2-input.0"),
        (39, "0-1", "0", "virtio2-output.0"),
    ] {
        k.set_file(
            format!("/proc/irq/{irq}/smp_affinity_list"),
            format!("{aff}\n"),
        );
        k.set_file(
            format!("/proc/irq/{irq}/effective_affinity_list"),
            format!("{eff}\n"),
        );
        k.add_dir(format!("/proc/irq/{irq}/{name}"));
    }
    k.set_file(
        "/proc/self/mountinfo",
        "26 25 0:23 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n",
    );
    k.set_file("/sys/fs/cgroup/cpuset/cpuset.cpus", "0-1\n");
    k.set_file("/sys/fs/cgroup/cpuset/cpuset.cpu_exclusive", "1\n");
    k.set_file("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "1\n");
    k.set_file("/sys/fs/cgroup/cpuset/tasks", "1\n");
    k.set_file("/proc/interrupts", INTERRUPTS_0);
    k.set_file("/proc/softirqs", SOFTIRQS_0);
    k.set_file("/proc/stat", STAT_0);
    k
}

/// Takes the first snapshot, applies `during` (what happens in the
/// interval), takes the second, and analyses CPU 1.
fn check(k: &FakeKernel, during: impl FnOnce(&FakeKernel)) -> CheckReport {
    check_under(k, None, during)
}

/// [`check`] with the shield in force `shield`.
fn check_under(
    k: &FakeKernel,
    shield: Option<&ShieldInForce>,
    during: impl FnOnce(&FakeKernel),
) -> CheckReport {
    check_cpus(k, "1", shield, during)
}

/// [`check_under`] of the CPUs `list`.
fn check_cpus(
    k: &FakeKernel,
    list: &str,
    shield: Option<&ShieldInForce>,
    during: impl FnOnce(&FakeKernel),
) -> CheckReport {
    check_told(k, list, shield, &HostSaid::NotAsked, during)
}

/// [`check_cpus`] with what a VM's host side said.
fn check_told(
    k: &FakeKernel,
    list: &str,
    shield: Option<&ShieldInForce>,
    host: &HostSaid,
    during: impl FnOnce(&FakeKernel),
) -> CheckReport {
    let cpus = CpuSet::parse_list(list).unwrap();
    let mut runs = RunTracker::new();
    let before = Snapshot::parse(&read_raw(k, ReadOptions::default(), 0).unwrap()).unwrap();
    runs.add(&before.threads);
    during(k);
    let after =
        Snapshot::parse(&read_raw(k, ReadOptions { affinities: true }, 1_000_000_000).unwrap())
            .unwrap();
    runs.add(&after.threads);
    analyse_snapshots(
        k,
        &cpus,
        CpuSource::Argument,
        shield,
        &before,
        &after,
        &runs,
        "fixture",
        host,
    )
}

fn find<'a>(r: &'a CheckReport, topic: Topic, text: &str) -> &'a Finding {
    r.findings
        .iter()
        .find(|f| f.topic == topic && f.title.contains(text))
        .unwrap_or_else(|| panic!("no {topic:?} finding with '{text}' in {:#?}", r.findings))
}

fn has_remedy(f: &Finding, action: &str) -> bool {
    f.remedies.iter().any(|r| r.action == action)
}

#[test]
fn an_irq_arriving_on_the_cpu_is_named_with_the_shield_remedy() {
    let k = base_system();
    let r = check(&k, |k| k.set_file("/proc/interrupts", INTERRUPTS_1));
    let f = find(&r, Topic::Irq, "IRQ 38 (virtio2-input.0) arrives on CPU 1");
    assert_eq!(f.severity, Severity::BreaksShield);
    assert_eq!(f.cpu, Some(1));
    assert!(has_remedy(f, "cpushield shield --irqs 1"), "{f:#?}");
    assert!(f.evidence.contains("500 on CPU 1"), "{}", f.evidence);
    // IRQ 39 only counted on CPU 0: not a finding about CPU 1.
    assert!(!r.findings.iter().any(|f| f.title.contains("IRQ 39")));
    assert!(r.breaks_shield);
}

#[test]
fn a_block_queue_irq_gets_the_boot_fix_first_where_the_kernel_does_not_say_whether_it_is_managed() {
    let k = base_system();
    let r = check(&k, |k| k.set_file("/proc/interrupts", INTERRUPTS_1));
    let f = find(&r, Topic::Irq, "IRQ 36 (virtio1-req.0)");
    assert_eq!(
        (f.remedies[0].kind, f.remedies[0].action.as_str()),
        (RemedyKind::Boot, "isolcpus=managed_irq,1"),
        "{f:#?}"
    );
    assert!(
        f.remedies[1]
            .action
            .starts_with("cpushield shield --irqs 1 (moves it if the kernel does not manage it)"),
        "{f:#?}"
    );
    assert!(f.evidence.contains("CONFIG_GENERIC_IRQ_DEBUGFS"), "{f:#?}");
    // Where debugfs tells, it is said: managed, and the boot fix alone.
    let k = base_system();
    k.set_file(
        "/sys/kernel/debug/irq/irqs/36",
        "handler:  handle_edge_irq\ndstate:   0x3540a200\n            IRQD_AFFINITY_MANAGED\n",
    );
    let r = check(&k, |k| k.set_file("/proc/interrupts", INTERRUPTS_1));
    let f = find(&r, Topic::Irq, "IRQ 36 (virtio1-req.0) is kernel-managed");
    assert!(
        f.evidence.contains("debugfs: IRQD_AFFINITY_MANAGED"),
        "{f:#?}"
    );
    assert!(
        f.remedies.iter().all(|m| m.kind == RemedyKind::Boot),
        "{f:#?}"
    );
}

#[test]
fn a_block_queue_irq_gets_the_managed_irq_boot_remedy() {
    let k = base_system();
    let r = check(&k, |k| k.set_file("/proc/interrupts", INTERRUPTS_1));
    let f = find(&r, Topic::Irq, "IRQ 36 (virtio1-req.0)");
    assert!(
        f.remedies
            .iter()
            .any(|r| r.kind == RemedyKind::Boot && r.action == "isolcpus=managed_irq,1"),
        "{f:#?}"
    );
}

#[test]
fn interrupt_kinds_and_softirqs_are_counted_per_cpu() {
    let k = base_system();
    let r = check(&k, |k| {
        k.set_file("/proc/interrupts", INTERRUPTS_1);
        k.set_file("/proc/softirqs", SOFTIRQS_1);
    });
    let act = &r.activity[0];
    let count = |id: &str| act.interrupts.iter().find(|c| c.id == id).map(|c| c.count);
    assert_eq!(count("LOC"), Some(250));
    assert_eq!(count("RES"), Some(30));
    assert_eq!(count("TLB"), None);
    let loc = find(&r, Topic::InterruptKind, "local timer fires on CPU 1");
    assert!(
        loc.remedies.iter().any(|r| r.action == "nohz_full=1"),
        "{loc:#?}"
    );
    let net = find(&r, Topic::Softirq, "NET_RX");
    assert!(net.title.contains("500 times"));
    let rcu = find(&r, Topic::Softirq, "RCU");
    assert!(has_remedy(rcu, "rcu_nocbs=1 rcu_nocb_poll"));
}

#[test]
fn a_task_pinned_to_the_cpu_is_named_and_a_movable_one_breaks_the_shield() {
    let k = base_system();
    let hog = Thread {
        pid: 500,
        tid: 500,
        comm: "rt hog",
        flags: 0x400000,
        cpu: 1,
        affinity: "1",
        run_ns: 1_000_000,
    };
    let web = Thread {
        pid: 600,
        tid: 601,
        comm: "web-worker",
        flags: 0x400000,
        cpu: 0,
        affinity: "0-1",
        run_ns: 0,
    };
    let web_main = Thread {
        pid: 600,
        tid: 600,
        comm: "web",
        flags: 0x400000,
        cpu: 0,
        affinity: "0-1",
        run_ns: 0,
    };
    for t in [&hog, &web, &web_main] {
        put_thread(&k, t);
    }
    let r = check(&k, |k| {
        put_thread(
            k,
            &Thread {
                run_ns: 301_000_000,
                ..hog
            },
        );
        put_thread(
            k,
            &Thread {
                run_ns: 40_000_000,
                cpu: 1,
                ..web
            },
        );
    });
    let pinned = find(&r, Topic::Task, "rt hog (pid 500) is pinned to CPU 1");
    assert_eq!(pinned.severity, Severity::Warn);
    assert!(pinned.title.contains("300.00 ms"), "{}", pinned.title);
    assert!(has_remedy(pinned, "taskset -a -pc 0 500"), "{pinned:#?}");
    let movable = find(&r, Topic::Task, "web (pid 600) ran on CPU 1");
    assert_eq!(movable.severity, Severity::BreaksShield);
    assert!(has_remedy(movable, "cpushield shield --procs 1"));
    assert_eq!(r.activity[0].tasks[0].comm, "rt hog");
}

#[test]
fn per_cpu_kernel_threads_are_listed_as_bound_not_as_breaking() {
    let k = base_system();
    let ksoftirqd = Thread {
        pid: 22,
        tid: 22,
        comm: "ksoftirqd/1",
        flags: 0x0420_8040,
        cpu: 1,
        affinity: "1",
        run_ns: 0,
    };
    let rcu = Thread {
        pid: 15,
        tid: 15,
        comm: "rcu_preempt",
        flags: 0x0020_8040,
        cpu: 0,
        affinity: "0-1",
        run_ns: 0,
    };
    put_thread(&k, &ksoftirqd);
    put_thread(&k, &rcu);
    let r = check(&k, |k| {
        put_thread(
            k,
            &Thread {
                run_ns: 5_000_000,
                ..ksoftirqd
            },
        );
        put_thread(
            k,
            &Thread {
                run_ns: 100_000,
                cpu: 1,
                ..rcu
            },
        );
    });
    assert_eq!(
        r.activity[0].bound_kthreads,
        vec!["ksoftirqd/1".to_string()]
    );
    let ks = find(&r, Topic::KernelThread, "ksoftirqd/1");
    assert_eq!(ks.severity, Severity::Warn);
    let moved = find(&r, Topic::KernelThread, "rcu_preempt (pid 15)");
    assert_eq!(moved.severity, Severity::BreaksShield);
}

#[test]
fn configuration_findings_carry_sysctl_and_boot_remedies() {
    let k = base_system();
    k.set_file(
        "/proc/700/task/700/stat",
        stat_line(700, "irqbalance", 0x400000, 0, 0, 0),
    );
    k.set_thread_affinity(700, CpuSet::parse_list("0-1").unwrap());
    let r = check(&k, |k| k.set_file("/proc/stat", STAT_1));
    let rt = find(&r, Topic::RtThrottling, "950 ms of each 1000 ms");
    assert!(has_remedy(rt, "sysctl -w kernel.sched_rt_runtime_us=-1"));
    let pre = find(&r, Topic::Preemption, "'none'");
    assert!(pre
        .remedies
        .iter()
        .any(|r| r.kind == RemedyKind::Boot && r.action == "preempt=full"));
    let nohz = find(&r, Topic::Isolation, "not nohz_full");
    assert!(has_remedy(nohz, "nohz_full=1"));
    let enf = find(&r, Topic::Enforcement, "does not keep new tasks off CPU 1");
    assert!(enf.evidence.contains("sched_load_balance=1"));
    let irqb = find(&r, Topic::Irqbalance, "pid 700");
    assert_eq!(irqb.severity, Severity::BreaksShield);
    let steal = find(&r, Topic::Steal, "20 ms");
    assert!(steal.evidence.contains("+2 ticks"), "{}", steal.evidence);
    let wq = find(&r, Topic::Workqueue, "CPU 1");
    assert!(
        has_remedy(wq, "echo 1 > /sys/devices/virtual/workqueue/cpumask"),
        "{wq:#?}"
    );
}

#[test]
fn a_halting_virtual_cpu_is_named_with_the_idle_poll_remedy() {
    let k = base_system();
    k.set_file(
        "/proc/cpuinfo",
        "processor\t: 1\nflags\t\t: fpu tsc hypervisor\n",
    );
    k.set_file("/sys/devices/system/cpu/cpuidle/current_driver", "none\n");
    let r = check(&k, |_| {});
    let f = find(&r, Topic::Power, "virtual CPU that halts when idle");
    assert!(
        f.evidence.contains("cpuidle driver: none"),
        "{}",
        f.evidence
    );
    assert!(has_remedy(
        f,
        "cpushield run --cpus 1 --idle-poll -- <task> (keeps the CPU polling while the task lives)"
    ));
    assert!(f.remedies.iter().any(|r| r.kind == RemedyKind::Boot));

    let halts = |r: &CheckReport| {
        r.findings
            .iter()
            .any(|f| f.title.contains("halts when idle"))
    };
    k.set_file(
        "/sys/devices/system/cpu/cpuidle/current_driver",
        "haltpoll\n",
    );
    assert!(!halts(&check(&k, |_| {})), "haltpoll polls before halting");
    k.set_file("/sys/devices/system/cpu/cpuidle/current_driver", "none\n");
    k.set_file("/proc/cmdline", "console=ttyS0 idle=poll\n");
    assert!(!halts(&check(&k, |_| {})), "idle=poll never halts");
    k.set_file("/proc/cpuinfo", "processor\t: 1\nflags\t\t: fpu tsc\n");
    k.set_file("/proc/cmdline", "console=ttyS0\n");
    assert!(
        !halts(&check(&k, |_| {})),
        "bare metal has no host to wait for"
    );
}

#[test]
fn an_isolated_v2_partition_counts_as_enforcement_and_a_quiet_cpu_is_clean() {
    let k = base_system();
    k.set_file(
        "/proc/self/mountinfo",
        "27 25 0:24 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
    );
    k.set_file("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n");
    k.set_file("/sys/fs/cgroup/cpuset.cpus.effective", "0-1\n");
    k.set_file("/sys/fs/cgroup/shield/cpuset.cpus.effective", "1\n");
    k.set_file("/sys/fs/cgroup/shield/cpuset.cpus.partition", "isolated\n");
    k.set_file("/sys/fs/cgroup/shield/cgroup.threads", "");
    k.set_file("/proc/irq/38/smp_affinity_list", "0\n");
    k.set_file("/proc/irq/38/effective_affinity_list", "0\n");
    k.set_file("/proc/irq/36/smp_affinity_list", "0\n");
    k.set_file("/proc/irq/36/effective_affinity_list", "0\n");
    k.set_file("/proc/irq/default_smp_affinity", "1\n");
    k.set_file("/sys/devices/virtual/workqueue/cpumask", "1\n");
    let r = check(&k, |_| {});
    let enf = find(
        &r,
        Topic::Enforcement,
        "cgroup v2 partition /sys/fs/cgroup/shield",
    );
    assert_eq!(enf.severity, Severity::Info);
    assert!(!r.breaks_shield, "{:#?}", r.findings);
    assert!(r.verdict.contains("clean"), "{}", r.verdict);
    assert!(!r
        .findings
        .iter()
        .any(|f| f.topic == Topic::Workqueue || f.title.contains("new IRQs")));
}

#[test]
fn an_exclusive_unbalanced_v1_cpuset_under_an_unbalanced_root_counts_as_enforcement() {
    let k = base_system();
    let root = "/sys/fs/cgroup/cpuset";
    k.set_file(format!("{root}/cpuset.sched_load_balance"), "0\n");
    k.set_file(format!("{root}/tasks"), "");
    k.set_file(format!("{root}/shield/cpuset.cpus"), "1\n");
    k.set_file(format!("{root}/shield/cpuset.cpu_exclusive"), "1\n");
    k.set_file(format!("{root}/shield/cpuset.sched_load_balance"), "0\n");
    k.set_file(format!("{root}/shield/tasks"), "");
    let r = check(&k, |_| {});
    let enf = find(
        &r,
        Topic::Enforcement,
        "exclusive cgroup v1 cpuset /sys/fs/cgroup/cpuset/shield",
    );
    assert_eq!(enf.severity, Severity::Info);
    // Load balancing on in the shield's cpuset: nothing enforces CPU 1.
    k.set_file(format!("{root}/shield/cpuset.sched_load_balance"), "1\n");
    let r = check(&k, |_| {});
    let enf = find(&r, Topic::Enforcement, "does not keep new tasks off CPU 1");
    assert!(
        enf.evidence
            .contains("v1 /sys/fs/cgroup/cpuset/shield cpus=1 exclusive=1 sched_load_balance=1"),
        "{}",
        enf.evidence
    );
}

#[test]
fn the_report_serialises_to_json_with_the_documented_fields() {
    let k = base_system();
    let r = check(&k, |k| k.set_file("/proc/interrupts", INTERRUPTS_1));
    let v: serde_json::Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    for key in [
        "version",
        "cpus",
        "cpus_source",
        "interval_s",
        "verdict",
        "breaks_shield",
        "findings",
        "activity",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    let f = &v["findings"][0];
    assert_eq!(f["severity"], "breaks-shield");
    assert!(f["remedies"][0]["action"].is_string());
    assert!(f["remedies"][0]["kind"].is_string());
}

#[test]
fn steal_that_rises_with_disk_io_is_named_with_the_halt_advice() {
    use cpushield_check::sampling::ActivitySample;
    use cpushield_parse::stat::CpuTimes;
    let k = base_system();
    let cpus = CpuSet::parse_list("1").unwrap();
    let before = Snapshot::parse(&read_raw(&k, ReadOptions::default(), 0).unwrap()).unwrap();
    let sample = |steal: u64, disk_busy_ms: u64| ActivitySample {
        cpu_times: [(
            1,
            CpuTimes {
                steal,
                ..CpuTimes::default()
            },
        )]
        .into_iter()
        .collect(),
        disk_busy_ms,
    };
    let judge = |series: &[(u64, u64)]| {
        let mut runs = RunTracker::new();
        runs.add(&before.threads);
        for (steal, disk) in series {
            runs.add_activity(sample(*steal, *disk));
        }
        k.set_file("/proc/stat", STAT_1);
        let after = Snapshot::parse(
            &read_raw(&k, ReadOptions { affinities: true }, 1_000_000_000).unwrap(),
        )
        .unwrap();
        analyse_snapshots(
            &k,
            &cpus,
            CpuSource::Argument,
            None,
            &before,
            &after,
            &runs,
            "fixture",
            &HostSaid::NotAsked,
        )
    };
    // Steal (cumulative ticks) grows only in the samples where the disk was busy.
    let io_bound = [(0, 0), (2, 10), (4, 20), (4, 20), (7, 35), (7, 35), (9, 50)];
    let r = judge(&io_bound);
    let f = find(&r, Topic::Steal, "rises while the disks are busy");
    assert_eq!(f.severity, Severity::Warn);
    assert!(
        f.evidence
            .contains("90 ms stolen in 4 samples with disk I/O vs 0 ms in 2 without"),
        "{}",
        f.evidence
    );
    assert!(f.remedies[0].action.contains("no --idle-poll"), "{f:#?}");
    // The same steal spread evenly, disks idle: no such finding.
    let even = [(0, 0), (2, 0), (4, 0), (6, 0), (8, 0), (9, 0), (10, 0)];
    assert!(!judge(&even)
        .findings
        .iter()
        .any(|f| f.title.contains("rises while the disks")));
}

#[test]
fn a_pod_task_on_the_cpu_names_the_kubelets_cpu_manager_not_a_shield_command() {
    let k = base_system();
    let pod = Thread {
        pid: 700,
        tid: 700,
        comm: "envoy",
        flags: 0x400000,
        cpu: 0,
        affinity: "0-1",
        run_ns: 0,
    };
    let daemon = Thread {
        pid: 800,
        tid: 800,
        comm: "sshd",
        flags: 0x400000,
        cpu: 0,
        affinity: "0-1",
        run_ns: 0,
    };
    k.set_file(
        "/proc/700/cgroup",
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b.slice/cri-containerd-3c4d.scope\n",
    );
    k.set_file("/proc/800/cgroup", "0::/system.slice/ssh.service\n");
    for t in [&pod, &daemon] {
        put_thread(&k, t);
    }
    let r = check(&k, |k| {
        for t in [&pod, &daemon] {
            put_thread(
                k,
                &Thread {
                    run_ns: 20_000_000,
                    cpu: 1,
                    ..*t
                },
            );
        }
    });
    let f = find(
        &r,
        Topic::Task,
        "envoy (pid 700) of a Kubernetes pod ran on CPU 1",
    );
    assert_eq!(f.severity, Severity::BreaksShield);
    assert!(
        f.remedies
            .iter()
            .all(|r| r.kind == RemedyKind::Host && !r.action.contains("shield --procs")),
        "{f:#?}"
    );
    assert!(
        f.remedies[0].action.contains("reservedSystemCPUs")
            && f.remedies[0].action.contains("strict-cpu-reservation"),
        "{f:#?}"
    );
    let other = find(&r, Topic::Task, "sshd (pid 800) ran on CPU 1");
    assert!(
        has_remedy(other, "cpushield shield --procs 1"),
        "{other:#?}"
    );
}

// ---- With the shield up: what is in place, and only what is left ----

const SHIELDED_INTERRUPTS_0: &str = "           CPU0       CPU1       \n 29:          0          0 PCI-MSIX-0000:00:01.0   1-edge      virtio0-inflate\n 36:          0       1000 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n 38:          0       2000 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n 42:       6931       3293 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx\nLOC:      10000      10000   Local timer interrupts\nRES:        100        100   Rescheduling interrupts\nCAL:         50         50   Function call interrupts\nTLB:         10         10   TLB shootdowns\nERR:          0\n";
const SHIELDED_INTERRUPTS_1: &str = "           CPU0       CPU1       \n 29:          0          0 PCI-MSIX-0000:00:01.0   1-edge      virtio0-inflate\n 36:          0       1040 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n 38:        300       2000 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n 42:       7000       3294 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx\nLOC:      10250      10250   Local timer interrupts\nRES:        100        130   Rescheduling interrupts\nCAL:         50         70   Function call interrupts\nTLB:         10         12   TLB shootdowns\nERR:          0\n";
const SHIELDED_SOFTIRQS_0: &str = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:        100        100\n      NET_RX:         10         10\n       BLOCK:          0          0\n     TASKLET:          0          0\n       SCHED:         10         10\n         RCU:        100        100\n";
const SHIELDED_SOFTIRQS_1: &str = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:        200        200\n      NET_RX:         10        510\n       BLOCK:          0         40\n     TASKLET:          0          3\n       SCHED:         20         15\n         RCU:        150        180\n";

fn irq_files(k: &FakeKernel, irq: u32, mask: &str, effective: &str) {
    k.set_file(
        format!("/proc/irq/{irq}/smp_affinity_list"),
        format!("{mask}\n"),
    );
    k.set_file(
        format!("/proc/irq/{irq}/effective_affinity_list"),
        format!("{effective}\n"),
    );
}

/// This host on a fresh boot under `cpushield shield --all 1`, as the
/// issue found it: IRQs 29 and 42 had been placed on CPU 1 at boot and their
/// moves off it are pending; IRQ 36 is kernel-managed (the shield's write
/// left its mask); the shield's state is where the shield writes it.
fn shielded_system() -> FakeKernel {
    use cpushield_shield::snapshot::Scope;
    use cpushield_shield::state;
    use cpushield_shield::ShieldMasks;
    let k = base_system();
    k.set_file("/proc/interrupts", SHIELDED_INTERRUPTS_0);
    k.set_file("/proc/softirqs", SHIELDED_SOFTIRQS_0);
    irq_files(&k, 29, "0", "1");
    irq_files(&k, 36, "0-1", "1");
    irq_files(&k, 38, "0", "0");
    irq_files(&k, 42, "0", "1");
    // What the shield left on the system-wide files.
    k.set_file("/sys/devices/virtual/workqueue/cpumask", "3\n");
    k.set_file("/proc/irq/default_smp_affinity", "3\n");
    k.set_file("/proc/sys/vm/stat_interval", "10\n");
    let text = |m: &str| m.to_string();
    let mut saved = cpushield_shield::fake_machine::saved_state(
        ShieldMasks::all(&CpuSet::from_cpus([1])),
        "0-1",
    );
    saved.scope = Scope::System;
    saved.irqs = [(29, "3"), (36, "3"), (38, "3"), (42, "3")]
        .into_iter()
        .map(|(i, m)| (i, text(m)))
        .collect();
    saved.set.irqs = [(29, "1"), (36, "3"), (38, "1"), (42, "1")]
        .into_iter()
        .map(|(i, m)| (i, text(m)))
        .collect();
    k.set_file(
        cpushield_kernel::shield_state_file()
            .to_string_lossy()
            .into_owned(),
        state::encode(&saved),
    );
    for t in busy_threads() {
        put_thread(&k, &t);
    }
    k
}

/// Per-CPU kernel threads of CPU 1 and a movable task, before they ran.
fn busy_threads() -> [Thread; 4] {
    let bound = |pid, comm| Thread {
        pid,
        tid: pid,
        comm,
        flags: 0x0420_8040,
        cpu: 1,
        affinity: "1",
        run_ns: 0,
    };
    [
        bound(22, "ksoftirqd/1"),
        bound(23, "kworker/1:1-events"),
        bound(19, "migration/1"),
        Thread {
            pid: 600,
            tid: 600,
            comm: "web",
            flags: 0x400000,
            cpu: 0,
            affinity: "0-1",
            run_ns: 0,
        },
    ]
}

/// The interval: IRQ 42 fires once, on CPU 1, and so completes its move;
/// the tick, IPIs, softirqs and the threads run on CPU 1.
fn busy_interval(k: &FakeKernel) {
    k.set_file("/proc/interrupts", SHIELDED_INTERRUPTS_1);
    k.set_file("/proc/softirqs", SHIELDED_SOFTIRQS_1);
    k.set_file("/proc/stat", STAT_1);
    irq_files(k, 42, "0", "0");
    for t in busy_threads() {
        put_thread(
            k,
            &Thread {
                run_ns: 30_000_000,
                cpu: 1,
                ..t
            },
        );
    }
}

/// IRQ 38's mask becomes 0-1 again (irqbalance, a user) and 300 of its
/// interrupts land on CPU 1.
fn irq_38_back_on_cpu_1(k: &FakeKernel) {
    irq_files(k, 38, "0-1", "1");
    k.set_file(
        "/proc/interrupts",
        SHIELDED_INTERRUPTS_1.replace(" 38:        300       2000", " 38:          0       2300"),
    );
}

/// `cpushield shield --KIND LIST` exactly, as (kind, CPUs).
fn shield_command(action: &str) -> Option<(String, CpuSet)> {
    let rest = action.strip_prefix("cpushield shield --")?;
    let (kind, list) = rest.split_once(' ')?;
    Some((kind.to_string(), CpuSet::parse_list(list).ok()?))
}

#[test]
fn with_the_shield_up_check_json_has_no_remedy_the_shield_already_applies() {
    let k = shielded_system();
    let shield = cpushield_check::shield_in_force(&k).unwrap().unwrap();
    let r = check_under(&k, Some(&shield), busy_interval);
    let json = serde_json::to_value(&r).unwrap();
    let mut applied = Vec::new();
    for f in json["findings"].as_array().unwrap() {
        for rem in f["remedies"].as_array().unwrap() {
            let action = rem["action"].as_str().unwrap();
            let Some((kind, cpus)) = shield_command(action) else {
                continue;
            };
            let done = match kind.as_str() {
                "procs" => shield.shielded(ShieldKind::Procs).clone(),
                "irqs" => shield.shielded(ShieldKind::Irqs).clone(),
                "ltmr" => shield.shielded(ShieldKind::Ltmr).clone(),
                _ => shield
                    .masks
                    .procs
                    .intersection(&shield.masks.irqs)
                    .intersection(&shield.masks.ltmr),
            };
            if cpus.is_subset(&done) {
                applied.push(format!("{}: {action}", f["title"]));
            }
        }
    }
    assert!(
        applied.is_empty(),
        "remedies the shield already applies: {applied:#?}"
    );
    // What the fixture makes happen is still found, with what is in place.
    for title in [
        "the local timer fires on CPU 1",
        "rescheduling IPIs on CPU 1",
        "function-call IPIs on CPU 1",
        "TLB shootdowns on CPU 1",
        "TIMER softirq",
        "SCHED softirq",
        "BLOCK softirq",
        "NET_RX softirq",
        "TASKLET softirq",
        "ksoftirqd/1",
        "kworker/1:1-events",
        "migration/1",
        "task web (pid 600) ran on CPU 1",
        "IRQ 36 (virtio1-req.0) is kernel-managed",
        "the kernel does not keep new tasks off CPU 1",
        "unbound workqueue work may run on CPU 1",
        "new IRQs will be allowed on CPU 1",
    ] {
        assert!(
            r.findings.iter().any(|f| f.title.contains(title)),
            "no finding '{title}' in {:#?}",
            r.findings
        );
    }
    let loc = find(&r, Topic::InterruptKind, "the local timer fires on CPU 1");
    assert!(
        loc.in_place.as_deref().unwrap().contains("--ltmr"),
        "{loc:#?}"
    );
    assert!(
        loc.remedies
            .iter()
            .any(|r| r.kind == RemedyKind::Boot && r.action.starts_with("nohz_full=1")),
        "{loc:#?}"
    );
    let res = find(&r, Topic::InterruptKind, "rescheduling IPIs on CPU 1");
    assert!(
        res.in_place.as_deref().unwrap().contains("--procs"),
        "{res:#?}"
    );
    assert!(!res.remedies.is_empty(), "{res:#?}");
    let cal = find(&r, Topic::InterruptKind, "function-call IPIs on CPU 1");
    assert!(
        cal.remedies
            .iter()
            .any(|r| r.action.starts_with("rcupdate.rcu_normal=1")),
        "{cal:#?}"
    );
    let web = find(&r, Topic::Task, "task web (pid 600) ran on CPU 1");
    assert!(has_remedy(web, "taskset -a -pc 0 600"), "{web:#?}");
    // The local-timer shield turns timer migration on: no advice against it.
    assert!(
        !r.findings.iter().any(|f| f.topic == Topic::Timers),
        "{:#?}",
        r.findings
    );
}

#[test]
fn without_a_shield_the_same_activity_gets_the_shield_commands() {
    let k = shielded_system();
    let r = check_under(&k, None, busy_interval);
    let actions: Vec<&str> = r
        .findings
        .iter()
        .flat_map(|f| f.remedies.iter().map(|r| r.action.as_str()))
        .collect();
    for want in [
        "cpushield shield --irqs 1",
        "cpushield shield --procs 1",
        "cpushield shield --ltmr 1",
    ] {
        assert!(actions.contains(&want), "no {want} in {actions:#?}");
    }
}

#[test]
fn a_pending_irq_move_is_told_from_an_irq_the_shield_did_not_move_and_a_managed_one() {
    let k = shielded_system();
    let shield = cpushield_check::shield_in_force(&k).unwrap().unwrap();
    let r = check_under(&k, Some(&shield), busy_interval);
    // IRQ 42: its one interrupt on CPU 1 completed the move: not a leak.
    let done = find(
        &r,
        Topic::IrqPending,
        "IRQ 42 (virtio3-tx) arrived once on CPU 1",
    );
    assert_eq!(done.severity, Severity::Warn);
    assert!(
        done.title.contains("completed its pending move"),
        "{}",
        done.title
    );
    assert!(
        done.evidence
            .contains("at the start smp_affinity_list 0, effective 1; at the end smp_affinity_list 0, effective 0"),
        "{}",
        done.evidence
    );
    assert!(
        done.remedies.iter().all(|r| r.kind == RemedyKind::Boot)
            && done.remedies[0].action.starts_with("irqaffinity=0 "),
        "{done:#?}"
    );
    // IRQ 29 never fired: still pending, at most one more interrupt.
    let pending = find(&r, Topic::IrqPending, "move pending for IRQ 29 off CPU 1");
    assert!(
        pending.title.contains("at most one more interrupt"),
        "{}",
        pending.title
    );
    assert!(!r
        .findings
        .iter()
        .any(|f| f.severity == Severity::BreaksShield
            && f.topic == Topic::Irq
            && f.title.contains("IRQ 42")));
    // IRQ 36: the shield's write left its mask: kernel-managed, boot remedy only.
    let managed = find(&r, Topic::Irq, "IRQ 36 (virtio1-req.0) is kernel-managed");
    assert_eq!(managed.severity, Severity::BreaksShield);
    assert!(
        managed
            .evidence
            .contains("the shield asked the kernel to move it"),
        "{}",
        managed.evidence
    );
    assert!(
        managed.remedies.iter().all(|r| r.kind == RemedyKind::Boot)
            && has_remedy(managed, "isolcpus=managed_irq,1"),
        "{managed:#?}"
    );
    // An IRQ the shield did not move because CPU 1 is not IRQ-shielded.
    let mut procs_only = shield.clone();
    procs_only.masks.irqs = CpuSet::new();
    let k = shielded_system();
    irq_files(&k, 38, "0-1", "1");
    let r = check_under(&k, Some(&procs_only), |k| {
        busy_interval(k);
        irq_38_back_on_cpu_1(k);
    });
    let moved_not = find(&r, Topic::Irq, "IRQ 38 (virtio2-input.0) arrives on CPU 1");
    assert!(
        has_remedy(moved_not, "cpushield shield --irqs 1"),
        "{moved_not:#?}"
    );
}

#[test]
fn an_irq_whose_mask_was_rewritten_after_the_shield_gets_the_shield_again_not_a_no_op() {
    let k = shielded_system();
    let shield = cpushield_check::shield_in_force(&k).unwrap().unwrap();
    // irqbalance (or a user) wrote 0-1 to IRQ 38 after the shield set 0.
    let r = check_under(&k, Some(&shield), |k| {
        busy_interval(k);
        irq_38_back_on_cpu_1(k);
    });
    let f = find(&r, Topic::Irq, "IRQ 38 (virtio2-input.0) arrives on CPU 1");
    assert!(
        f.title
            .contains("its mask was changed after the shield set it"),
        "{}",
        f.title
    );
    assert!(
        f.remedies[0].action.starts_with(
            "cpushield shield --irqs 1 (applies Brosky's rule again, to IRQ 38's new mask)"
        ),
        "{f:#?}"
    );
}

#[test]
fn timer_migration_off_gets_the_local_timer_shield_and_on_gets_no_advice() {
    let k = shielded_system();
    k.set_file("/proc/sys/kernel/timer_migration", "0\n");
    let r = check(&k, |_| {});
    let off = find(&r, Topic::Timers, "timer migration is off");
    assert!(has_remedy(off, "cpushield shield --ltmr 1"), "{off:#?}");
    // With the local-timer shield in force, the shield owns the setting.
    let shield = cpushield_check::shield_in_force(&k).unwrap().unwrap();
    let r = check_under(&k, Some(&shield), |_| {});
    assert!(
        !r.findings.iter().any(|f| f.topic == Topic::Timers),
        "{:#?}",
        r.findings
    );
    // On (what the local-timer shield sets): nothing to advise either way.
    k.set_file("/proc/sys/kernel/timer_migration", "1\n");
    let r = check(&k, |_| {});
    assert!(
        !r.findings.iter().any(|f| f.topic == Topic::Timers),
        "{:#?}",
        r.findings
    );
}

/// A PREEMPT_RT kernel after `shield --irqs 1`: IRQs 38 and 39 on CPU 0 only,
/// IRQ 36 still on both.
fn rt_system() -> FakeKernel {
    let k = base_system();
    k.set_file("/proc/sys/kernel/version", "#1 SMP PREEMPT_RT\n");
    k.set_file(
        "/boot/config-6.1.0-test",
        "CONFIG_HZ=250\nCONFIG_PREEMPT_RT=y\nCONFIG_NO_HZ_FULL=y\nCONFIG_RCU_NOCB_CPU=y\n",
    );
    for irq in [38, 39] {
        k.set_file(format!("/proc/irq/{irq}/smp_affinity_list"), "0\n");
        k.set_file(format!("/proc/irq/{irq}/effective_affinity_list"), "0\n");
    }
    // (pid, comm, affinity, priority, policy)
    for (tid, comm, aff, prio, policy) in [
        (120, "irq/38-virtio2-i", "0", 50, 1),
        (121, "irq/39-virtio2-o", "0-1", 50, 1),
        (30, "ktimers/1", "1", 1, 1),
        (31, "rcuc/1", "1", 1, 1),
        (32, "ksoftirqd/1", "1", 0, 0),
    ] {
        let base = format!("/proc/{tid}/task/{tid}");
        let flags = if comm.starts_with("irq/") {
            0x0020_8040
        } else {
            0x0420_8040
        };
        k.set_file(
            format!("{base}/stat"),
            stat_line(tid, comm, flags, 0, prio, policy),
        );
        k.set_file(format!("{base}/schedstat"), "0 0 1\n");
        k.set_thread_affinity(tid, CpuSet::parse_list(aff).unwrap());
    }
    k
}

#[test]
fn on_preempt_rt_an_irq_thread_that_followed_is_said_and_one_pinned_by_hand_breaks_the_shield() {
    let k = rt_system();
    let r = check(&k, |_| {});
    let followed = find(
        &r,
        Topic::Irq,
        "IRQ handler thread followed its IRQ off CPU 1",
    );
    assert_eq!(followed.severity, Severity::Info);
    assert!(
        followed.evidence.contains("irq/38-virtio2-i (IRQ 38 on 0)"),
        "{followed:?}"
    );
    let left = find(
        &r,
        Topic::Irq,
        "IRQ 39's handler thread irq/39-virtio2-o (pid 121)",
    );
    assert_eq!(left.severity, Severity::BreaksShield);
    assert!(has_remedy(left, "taskset -pc 0 121"), "{left:?}");
    assert!(r.breaks_shield);
    let bare = find(
        &r,
        Topic::Irq,
        "no handler thread on this PREEMPT_RT kernel",
    );
    assert!(bare.evidence.contains("36 virtio1-req.0"), "{bare:?}");
    assert!(!bare.evidence.contains("38"), "{bare:?}");
    // IRQ 39's move still pending (delivered to CPU 1 until its next
    // interrupt): its thread stays with it, not pinned by hand.
    k.set_file("/proc/irq/39/effective_affinity_list", "1\n");
    let r = check(&k, |_| {});
    assert!(
        !r.findings
            .iter()
            .any(|f| f.title.contains("IRQ 39's handler thread")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn on_preempt_rt_ktimers_rcuc_and_ksoftirqd_are_named_with_what_reduces_their_work() {
    let k = rt_system();
    let r = check(&k, |_| {});
    let ktimers = find(&r, Topic::Timers, "ktimers/1 (pid 30, SCHED_FIFO 1)");
    assert!(
        ktimers
            .remedies
            .iter()
            .any(|m| m.action.contains("cpushield run --cpus 1 --fifo 80")),
        "{ktimers:?}"
    );
    assert!(has_remedy(ktimers, "nohz_full=1"), "{ktimers:?}");
    let rcuc = find(
        &r,
        Topic::Isolation,
        "rcuc/1 (pid 31, SCHED_FIFO 1) on CPU 1 runs",
    );
    assert_eq!(rcuc.severity, Severity::Warn);
    assert!(has_remedy(rcuc, "rcu_nocbs=1 rcu_nocb_poll"), "{rcuc:?}");
    let softirqd = find(&r, Topic::Softirq, "ksoftirqd/1 (pid 32, SCHED_OTHER)");
    assert!(
        has_remedy(softirqd, "cpushield shield --irqs 1"),
        "{softirqd:?}"
    );
    // With the callbacks offloaded, rcuc has nothing to do: no warning, no fix.
    k.set_file("/proc/cmdline", "console=ttyS0 nohz_full=1 rcu_nocbs=1\n");
    k.set_file("/sys/devices/system/cpu/nohz_full", "1\n");
    k.set_kernel_log(boot_log_offloading("1"));
    let r = check(&k, |_| {});
    let rcuc = find(
        &r,
        Topic::Isolation,
        "rcuc/1 (pid 31, SCHED_FIFO 1) on CPU 1 has no RCU callbacks",
    );
    assert_eq!((rcuc.severity, rcuc.remedies.len()), (Severity::Info, 0));
    let ktimers = find(&r, Topic::Timers, "ktimers/1");
    assert!(!has_remedy(ktimers, "nohz_full=1"), "{ktimers:?}");
}

#[test]
fn a_kernel_without_preempt_rt_gets_no_note_on_unthreaded_irqs() {
    let r = check(&base_system(), |_| {});
    assert!(
        !r.findings
            .iter()
            .any(|f| f.title.contains("no handler thread")),
        "{:#?}",
        r.findings
    );
}

const LINE: &str = "isolcpus=managed_irq,domain,1 nohz_full=1 rcu_nocbs=1 irqaffinity=0";

/// The kernel's log from its boot, with the line the RCU code logs when it
/// offloads the callbacks of `cpus` (as the 6.1 and 6.12 guests print it).
fn boot_log_offloading(cpus: &str) -> String {
    format!("<5>[    0.000000] Linux version 6.12.117+deb12-rt-amd64\n<6>[    0.000000] rcu: Preemptible hierarchical RCU implementation.\n<6>[    0.000000] rcu: \tOffload RCU callbacks from CPUs: {cpus}.\n")
}

/// The base system booted with `cmdline`, and the effects of the whole line
/// (CPU 1 isolated and nohz_full, its callbacks offloaded as the kernel's
/// log says, rcuop/1, the block queue IRQ and the default mask on CPU 0).
fn booted_with(cmdline: &str) -> FakeKernel {
    let k = base_system();
    k.set_file("/proc/cmdline", format!("console=ttyS0 {cmdline}\n"));
    k.set_kernel_log(boot_log_offloading("1"));
    k.set_file("/sys/devices/system/cpu/isolated", "1\n");
    k.set_file("/sys/devices/system/cpu/nohz_full", "1\n");
    k.set_file("/proc/irq/36/effective_affinity_list", "0\n");
    k.set_file("/proc/irq/default_smp_affinity", "1\n");
    put_thread(
        &k,
        &Thread {
            pid: 12,
            tid: 12,
            comm: "rcuop/1",
            flags: 0x0020_8040,
            cpu: 0,
            affinity: "0",
            run_ns: 0,
        },
    );
    k
}

/// One second in which a task keeps CPU 1 busy and it takes `loc` local
/// timer interrupts.
fn busy_second(k: &FakeKernel, loc: u64) {
    k.set_file(
        "/proc/stat",
        "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 150 0 60 1040 0 0 0 0 0 0\ncpu1 200 0 50 1000 0 0 0 5 0 0\n",
    );
    k.set_file(
        "/proc/interrupts",
        INTERRUPTS_0.replace(
            "LOC:      10000      10000",
            &format!("LOC:      10250      {:5}", 10000 + loc),
        ),
    );
}

fn titles(r: &CheckReport, severity: Severity) -> Vec<String> {
    r.findings
        .iter()
        .filter(|f| f.severity == severity && f.title.contains("boot parameter"))
        .map(|f| f.title.clone())
        .collect()
}

#[test]
fn after_a_boot_with_the_whole_line_every_parameter_and_the_stopped_tick_are_in_effect() {
    let k = booted_with(LINE);
    let r = check(&k, |k| busy_second(k, 1));
    assert_eq!(
        titles(&r, Severity::Info),
        [
            "boot parameter isolcpus=managed_irq,domain,1 (its domain part) in effect",
            "boot parameter isolcpus=managed_irq,domain,1 (its managed_irq part) in effect",
            "boot parameter nohz_full=1 in effect",
            "boot parameter rcu_nocbs=1 in effect",
            "boot parameter irqaffinity=0 in effect",
        ]
    );
    assert!(
        titles(&r, Severity::BreaksShield).is_empty(),
        "{:#?}",
        r.findings
    );
    let tick = find(&r, Topic::Isolation, "the tick stopped on nohz_full CPU 1");
    assert!(tick.evidence.contains("1.0/s, HZ 250"), "{tick:?}");
    assert!(!r.breaks_shield, "{:#?}", r.findings);
}

#[test]
fn a_parameter_left_off_the_line_is_named_and_breaks_the_shield() {
    let k = booted_with("nohz_full=1 rcu_nocbs=1 irqaffinity=0");
    k.set_file("/sys/devices/system/cpu/isolated", "\n");
    let r = check(&k, |k| busy_second(k, 1));
    assert_eq!(
        titles(&r, Severity::BreaksShield),
        [
            "boot parameter isolcpus=managed_irq,domain,1 (its domain part) from `cpushield boot-params --all 1` is not in effect: isolcpus is not on the kernel command line",
            "boot parameter isolcpus=managed_irq,domain,1 (its managed_irq part) from `cpushield boot-params --all 1` is not in effect: isolcpus is not on the kernel command line",
        ]
    );
    let f = find(
        &r,
        Topic::Isolation,
        "isolcpus is not on the kernel command line",
    );
    assert!(has_remedy(f, LINE), "{f:?}");
    assert!(r.breaks_shield);
}

#[test]
fn a_misspelt_parameter_a_list_that_misses_the_cpu_and_a_kernel_without_the_option_are_told_apart()
{
    let k = booted_with("isolcpus=managed_irq,domain,1 nohz_ful=1 rcu_nocbs=0 irqaffinity=0");
    k.set_file("/sys/devices/system/cpu/nohz_full", "(null)\n");
    k.set_file(
        "/proc/12/task/12/stat",
        stat_line(12, "kworker/0:1", 0x0020_8040, 0, 0, 0),
    );
    let r = check(&k, |_| {});
    let nohz = find(&r, Topic::Isolation, "boot parameter nohz_full=1 from");
    assert!(nohz.title.ends_with("'nohz_ful=1' is a misspelling of it, which the kernel does not know (it passes the word to init)"), "{nohz:?}");
    let rcu = find(&r, Topic::Isolation, "boot parameter rcu_nocbs=1 from");
    assert!(
        rcu.title.ends_with("rcu_nocbs=0 does not cover CPU 1"),
        "{rcu:?}"
    );

    let k = booted_with(LINE);
    k.set_file("/sys/devices/system/cpu/nohz_full", "(null)\n");
    k.set_file(
        "/boot/config-6.1.0-test",
        "CONFIG_HZ=250\nCONFIG_PREEMPT_NONE=y\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_RCU_NOCB_CPU=y\n",
    );
    let r = check(&k, |_| {});
    let nohz = find(&r, Topic::Isolation, "boot parameter nohz_full=1 from");
    assert!(nohz.title.ends_with("nohz_full is on the command line, but this kernel is built without CONFIG_NO_HZ_FULL (/boot/config-6.1.0-test)"), "{nohz:?}");
}

#[test]
fn a_tick_that_keeps_running_under_a_busy_task_breaks_the_shield_and_an_idle_cpu_proves_nothing() {
    let k = booted_with(LINE);
    let r = check(&k, |k| busy_second(k, 250));
    let f = find(
        &r,
        Topic::Isolation,
        "the tick still runs on nohz_full CPU 1: 250 local timer",
    );
    assert_eq!(f.severity, Severity::BreaksShield);
    let k = booted_with(LINE);
    let r = check(&k, |_| {});
    let f = find(
        &r,
        Topic::Isolation,
        "the stopped tick on CPU 1 is not verified",
    );
    assert_eq!(f.severity, Severity::Info);
}

#[test]
fn without_any_parameter_of_the_line_no_boot_parameter_is_judged() {
    let r = check(&base_system(), |_| {});
    assert!(
        !r.findings
            .iter()
            .any(|f| f.title.contains("boot parameter")),
        "{:#?}",
        r.findings
    );
}

// ---- The JSON report, unchanged by how the text is laid out ----

/// The JSON of `r` against the file `name` under tests/fixtures, written by
/// the code of the commit before the text answered first (regenerate with
/// CPUSHIELD_WRITE_GOLDEN=1 only for a change meant to alter the JSON).
fn assert_json_as_recorded(r: &CheckReport, name: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let now = serde_json::to_string_pretty(r).unwrap() + "\n";
    if std::env::var_os("CPUSHIELD_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &now).unwrap();
    }
    let recorded = std::fs::read_to_string(&path).unwrap();
    assert!(
        now == recorded,
        "check --json differs from {}:\n{}",
        path.display(),
        now.lines()
            .zip(recorded.lines())
            .filter(|(a, b)| a != b)
            .take(5)
            .map(|(a, b)| format!("now:      {a}\nrecorded: {b}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn check_json_on_the_same_fake_machine_is_what_it_was_before_the_text_answered_first() {
    // Under `shield --all 1`: pending moves, a managed IRQ, the tick, IPIs,
    // softirqs, bound threads and a task the shield did not move.
    let k = shielded_system();
    let shield = cpushield_check::shield_in_force(&k).unwrap().unwrap();
    let r = check_under(&k, Some(&shield), busy_interval);
    assert_json_as_recorded(&r, "check-shielded.json");
    // The same machine with no shield in force: every shield command. IRQ 36
    // (a block queue) gets no interrupt on CPU 1 here.
    let k = shielded_system();
    let r = check_under(&k, None, |k| {
        busy_interval(k);
        k.set_file(
            "/proc/interrupts",
            SHIELDED_INTERRUPTS_1
                .replace(" 36:          0       1040", " 36:          0       1000"),
        );
        irq_files(k, 36, "0-1", "0");
    });
    assert_json_as_recorded(&r, "check-unshielded.json");
}

// ---- After a reboot and on PREEMPT_RT: only what the kernel proves ----

/// An rcuo thread of `cpu` in the state `state` (S sleeping, P parked);
/// rcuop/1 is pid 12, as in [`booted_with`].
fn rcuo_thread(k: &FakeKernel, cpu: usize, state: char) {
    let tid = if cpu == 1 { 12 } else { 60 + cpu as i32 };
    k.set_file(
        format!("/proc/{tid}/task/{tid}/stat"),
        stat_line(tid, &format!("rcuop/{cpu}"), 0x0020_8040, 0, 0, 0).replacen(
            " S ",
            &format!(" {state} "),
            1,
        ),
    );
    k.set_file(format!("/proc/{tid}/task/{tid}/schedstat"), "0 0 1\n");
    k.set_thread_affinity(tid, CpuSet::parse_list("0-1").unwrap());
}

/// The part of the boot line (isolcpus, irqaffinity) with no rcu_nocbs=,
/// and an rcuop thread on each CPU, as 6.1 and 6.12 start them once any
/// CPU is offloaded.
fn booted_without_rcu_nocbs() -> FakeKernel {
    let k = booted_with("isolcpus=managed_irq,domain,1 irqaffinity=0");
    k.set_file("/sys/devices/system/cpu/nohz_full", "(null)\n");
    rcuo_thread(&k, 0, 'S');
    rcuo_thread(&k, 1, 'S');
    k
}

fn rcu_verdict(r: &CheckReport) -> &Finding {
    find(r, Topic::Isolation, "boot parameter rcu_nocbs=1")
}

#[test]
fn an_rcuo_thread_on_every_cpu_is_no_proof_of_offload_the_kernels_boot_record_is() {
    // The kernel logged that it offloads CPU 0 only: rcuop/1 is idle.
    let k = booted_without_rcu_nocbs();
    k.set_kernel_log(boot_log_offloading("0"));
    let r = check(&k, |_| {});
    let f = rcu_verdict(&r);
    assert_eq!(f.severity, Severity::BreaksShield, "{f:#?}");
    assert!(
        f.title
            .contains("rcu_nocbs is not on the kernel command line"),
        "{f:#?}"
    );
    find(&r, Topic::Isolation, "RCU callbacks of CPU 1 run on it");
    // 6.12 without its boot record: it parks the rcuop thread of every CPU
    // it does not offload.
    let k = booted_without_rcu_nocbs();
    k.set_kernel_log("<6>[ 9999.0] eth0: link up\n");
    rcuo_thread(&k, 1, 'P');
    let r = check(&k, |_| {});
    let f = rcu_verdict(&r);
    assert_eq!(f.severity, Severity::BreaksShield, "{f:#?}");
    assert!(f.evidence.contains("/proc/cmdline"), "{f:#?}");
    let rcu = find(&r, Topic::Isolation, "RCU callbacks of CPU 1 run on it");
    assert!(rcu.title.contains("(no rcu_nocbs)"), "{rcu:#?}");
    // rcu_nocbs=1 asked for and the thread parked: the kernel did not apply it.
    let k = booted_with(LINE);
    k.set_kernel_log("<6>[ 9999.0] eth0: link up\n");
    rcuo_thread(&k, 0, 'S');
    rcuo_thread(&k, 1, 'P');
    let r = check(&k, |_| {});
    let f = rcu_verdict(&r);
    assert_eq!(f.severity, Severity::BreaksShield, "{f:#?}");
    assert!(
        f.title.contains("rcuop of CPUs 1 parked"),
        "the kernel's parked thread is the reason: {f:#?}"
    );
    let rcu = find(&r, Topic::Isolation, "RCU callbacks of CPU 1 run on it");
    assert!(
        rcu.title
            .contains("the command line asks to offload them, but the kernel did not"),
        "{rcu:#?}"
    );
}

#[test]
fn where_nothing_the_kernel_shows_proves_offload_rcu_nocbs_is_not_verified_rather_than_in_effect() {
    // 6.1 with its boot record gone: an rcuop thread on each CPU, none parked.
    let k = booted_with(LINE);
    k.set_kernel_log("<6>[ 9999.0] eth0: link up\n");
    rcuo_thread(&k, 0, 'S');
    let r = check(&k, |k| busy_second(k, 1));
    let f = rcu_verdict(&r);
    assert_eq!(f.severity, Severity::Info, "{f:#?}");
    assert!(f.title.contains("not verified"), "{f:#?}");
    assert!(f.title.contains("parks none"), "{f:#?}");
    assert!(!f.title.contains("in effect"), "{f:#?}");
    assert!(!r.breaks_shield, "{:#?}", r.findings);
}

#[test]
fn a_misspelt_parameter_alone_on_the_command_line_is_caught() {
    let k = base_system();
    k.set_file("/proc/cmdline", "console=ttyS0 nohz_ful=1\n");
    let r = check(&k, |_| {});
    let f = find(&r, Topic::Isolation, "boot parameter nohz_full=1 from");
    assert_eq!(f.severity, Severity::BreaksShield);
    assert!(f.title.contains("'nohz_ful=1' is a misspelling"), "{f:#?}");
    assert!(r.breaks_shield);
}

#[test]
fn advice_already_in_place_is_not_given_for_ktimers_rcuc_and_the_local_timer() {
    let k = rt_system();
    k.set_file("/proc/cmdline", "console=ttyS0 nohz_full=1 rcu_nocbs=1\n");
    k.set_file("/sys/devices/system/cpu/nohz_full", "1\n");
    k.set_kernel_log(boot_log_offloading("1"));
    // ktimers/1 and rcuc/1 ran long enough to be named as bound threads;
    // timers and RCU callbacks ran there as softirqs.
    let r = check(&k, |k| {
        k.set_file("/proc/softirqs", SOFTIRQS_1);
        for (tid, comm) in [(30, "ktimers/1"), (31, "rcuc/1")] {
            k.set_file(
                format!("/proc/{tid}/task/{tid}/stat"),
                stat_line(tid, comm, 0x0420_8040, 1, 1, 1),
            );
            k.set_file(format!("/proc/{tid}/task/{tid}/schedstat"), "5000000 0 1\n");
        }
    });
    let all: Vec<String> = r
        .findings
        .iter()
        .filter(|f| f.title.contains("ktimers/1") || f.title.contains("rcuc/1"))
        .flat_map(|f| f.remedies.iter().map(|m| format!("{}: {m}", f.title)))
        .collect();
    assert!(
        all.iter()
            .any(|a| a.contains("cpushield run --cpus 1 --fifo 80")),
        "{all:#?}"
    );
    for already in ["nohz_full=1", "rcu_nocbs=1", "kernel.timer_migration=1"] {
        assert!(
            !all.iter().any(|a| a.contains(already)),
            "{already} is in effect, yet advised: {all:#?}"
        );
    }
    let boot_again: Vec<String> = r
        .findings
        .iter()
        .flat_map(|f| f.remedies.iter().map(move |m| (f, m)))
        .filter(|(_, m)| m.action == "nohz_full=1" || m.action.starts_with("rcu_nocbs=1"))
        .map(|(f, m)| format!("{}: {}", f.title, m.action))
        .collect();
    assert!(
        boot_again.is_empty(),
        "in effect, yet advised: {boot_again:#?}"
    );
    // Timer migration off: then it is advised.
    k.set_file("/proc/sys/kernel/timer_migration", "0\n");
    let r = check(&k, |_| {});
    let ktimers = find(&r, Topic::Timers, "ktimers/1 (pid 30");
    assert!(
        has_remedy(ktimers, "sysctl -w kernel.timer_migration=1"),
        "{ktimers:#?}"
    );
}

#[test]
fn a_stopped_tick_is_not_also_called_a_local_timer_that_still_fires() {
    let k = booted_with(LINE);
    let r = check(&k, |k| busy_second(k, 1));
    find(
        &r,
        Topic::Isolation,
        "the tick stopped on nohz_full CPU 1: 1.0",
    );
    assert!(
        !r.findings.iter().any(|f| f.title.contains("still fires")),
        "{:#?}",
        r.findings
    );
    let loc = find(
        &r,
        Topic::InterruptKind,
        "local timer fired 1 times on nohz_full CPU 1 (1.0/s)",
    );
    assert_eq!(loc.severity, Severity::Info);
    // A tick that runs is said by both.
    let k = booted_with(LINE);
    let r = check(&k, |k| busy_second(k, 250));
    find(&r, Topic::InterruptKind, "still fires on nohz_full CPU 1");
    find(
        &r,
        Topic::Isolation,
        "the tick still runs on nohz_full CPU 1",
    );
}

#[test]
fn under_the_irq_shield_alone_a_kernel_thread_that_ran_is_a_warning_and_the_verdict_says_what_it_promises(
) {
    let k = shielded_system();
    let mut irqs_only = cpushield_check::shield_in_force(&k).unwrap().unwrap();
    irqs_only.masks.procs = CpuSet::new();
    irqs_only.masks.ltmr = CpuSet::new();
    let kcompactd = Thread {
        pid: 36,
        tid: 36,
        comm: "kcompactd0",
        flags: 0x0020_8040,
        cpu: 0,
        affinity: "0-1",
        run_ns: 0,
    };
    put_thread(&k, &kcompactd);
    // The kernel-managed IRQ 36 gets no interrupt on CPU 1 here.
    let quiet_36 = |k: &FakeKernel| {
        busy_interval(k);
        k.set_file(
            "/proc/interrupts",
            SHIELDED_INTERRUPTS_1
                .replace(" 36:          0       1040", " 36:          0       1000"),
        );
        irq_files(k, 36, "0-1", "0");
    };
    let r = check_under(&k, Some(&irqs_only), |k| {
        quiet_36(k);
        put_thread(
            k,
            &Thread {
                run_ns: 40_000,
                cpu: 1,
                ..kcompactd
            },
        );
    });
    let f = find(&r, Topic::KernelThread, "kcompactd0 (pid 36) ran on CPU 1");
    assert_eq!(f.severity, Severity::Warn, "{f:#?}");
    assert!(
        f.in_place
            .as_deref()
            .is_some_and(|p| p.contains("--irqs alone: it does not keep processes")),
        "{f:#?}"
    );
    assert!(has_remedy(f, "cpushield shield --procs 1"), "{f:#?}");
    assert!(!r.breaks_shield, "{:#?}", r.findings);
    assert!(
        r.verdict.starts_with("CPU 1 clean for what the shield in force promises (--irqs: device IRQs kept off; not processes"),
        "{}",
        r.verdict
    );
    // What --irqs does promise still breaks it: an IRQ whose mask was rewritten.
    let k = shielded_system();
    let r = check_under(&k, Some(&irqs_only), |k| {
        quiet_36(k);
        irq_38_back_on_cpu_1(k);
        k.set_file(
            "/proc/interrupts",
            SHIELDED_INTERRUPTS_1
                .replace(" 36:          0       1040", " 36:          0       1000")
                .replace(" 38:        300       2000", " 38:          0       2300"),
        );
    });
    assert!(r.breaks_shield, "{:#?}", r.findings);
    assert!(
        r.verdict
            .contains("NOT shielded: 1 finding breaks what the shield in force promises"),
        "{}",
        r.verdict
    );
}

// ---- A shield whose state is gone ----

#[test]
fn a_shield_whose_state_is_gone_is_named_with_reset_without_state_and_no_shield_command() {
    use cpushield_shield::state::MemoryStore;
    use cpushield_shield::{Options, ShieldMasks};
    let k = cpushield_shield::fake_machine::v1_machine("0-1", &[(600, "0-1")]);
    k.set_file("/proc/interrupts", INTERRUPTS_0);
    k.set_file("/proc/softirqs", SOFTIRQS_0);
    k.set_file("/proc/stat", STAT_0);
    k.set_file("/proc/cmdline", "console=ttyS0\n");
    let options = Options {
        is_root: true,
        whole_cores: false,
    };
    // `shield --all 1`, its state then lost: kept in a store nobody reads.
    cpushield_shield::shield(
        &cpushield_kernel::Host::fake(&k, &MemoryStore::new()),
        &ShieldMasks::all(&CpuSet::from_cpus([1])),
        options,
    )
    .unwrap();
    let shield = cpushield_check::shield_in_force(&k)
        .unwrap()
        .expect("the kernel shows a shield");
    let r = check_under(&k, Some(&shield), |k| {
        k.set_file("/proc/interrupts", INTERRUPTS_1);
        k.set_file("/proc/stat", STAT_1);
    });
    assert!(r.breaks_shield, "{:#?}", r.findings);
    assert!(
        r.verdict.contains("a shield is in place without its saved state; undo it with `cpushield reset --without-state`"),
        "{}",
        r.verdict
    );
    let lost = find(&r, Topic::Enforcement, "without its saved state");
    assert!(
        lost.evidence.contains("cpushield-shield holds CPUs 1"),
        "{lost:#?}"
    );
    assert!(
        lost.remedies[0]
            .action
            .starts_with("cpushield reset --without-state"),
        "{lost:#?}"
    );
    let refused: Vec<String> = r
        .findings
        .iter()
        .flat_map(|f| f.remedies.iter())
        .filter(|m| m.action.starts_with("cpushield shield "))
        .map(|m| m.action.clone())
        .collect();
    assert!(
        refused.is_empty(),
        "advice the shield would refuse over its lost state: {refused:?}"
    );
}

// ---- The text answers first ----

#[test]
fn check_text_leads_with_its_verdict_and_groups_findings_by_fix_in_at_most_15_lines() {
    use cpushield_check::render::{render_text, ANSWER_LINES};
    let k = shielded_system();
    // Five processes of the same program ran there, as the rustc did.
    for pid in 700..705 {
        put_thread(
            &k,
            &Thread {
                pid,
                tid: pid,
                comm: "rustc",
                flags: 0x400000,
                cpu: 0,
                affinity: "0-1",
                run_ns: 0,
            },
        );
    }
    let r = check_under(&k, None, |k| {
        busy_interval(k);
        for pid in 700..705 {
            put_thread(
                k,
                &Thread {
                    pid,
                    tid: pid,
                    comm: "rustc",
                    flags: 0x400000,
                    cpu: 1,
                    affinity: "0-1",
                    run_ns: 5_000_000,
                },
            );
        }
    });
    assert!(r.findings.len() > ANSWER_LINES, "{}", r.findings.len());
    let text = render_text(&r, false);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= ANSWER_LINES, "{text}");
    assert_eq!(lines[0], format!("Verdict: {}", r.verdict), "{text}");
    // One line for the shield, with what it removes: the six tasks among them.
    let shield: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("cpushield shield"))
        .collect();
    assert_eq!(shield.len(), 1, "{text}");
    assert!(
        shield[0].starts_with("  cpushield shield --all 1: 6 tasks, "),
        "{text}"
    );
    // Then the boot line, once, with every parameter only a reboot applies.
    let boot: Vec<&&str> = lines.iter().filter(|l| l.contains("boot with")).collect();
    assert_eq!(boot.len(), 1, "{text}");
    for param in ["nohz_full=1", "rcu_nocbs=1", "rcu_nocb_poll"] {
        assert!(boot[0].contains(param), "{param} not in {}", boot[0]);
    }
    let last = lines.last().unwrap();
    assert!(
        last.contains("cpushield check --cpus 1 --verbose"),
        "{text}"
    );
    // --verbose: the same answer first, then every finding with its evidence.
    let verbose = render_text(&r, true);
    assert!(verbose.starts_with(&format!("Verdict: {}\n", r.verdict)));
    for f in &r.findings {
        assert!(verbose.contains(&f.title), "{} not in --verbose", f.title);
    }
}

#[test]
fn many_different_fixes_still_fit_the_answer_and_the_rest_is_counted() {
    use cpushield_check::render::{render_text, ANSWER_LINES};
    // Twenty tasks pinned to CPU 1 (each its own taskset, one line for all)
    // and ten IRQs that asked for CPU 1 alone (each its own mask to write).
    let k = shielded_system();
    let mut shield = cpushield_check::shield_in_force(&k).unwrap().unwrap();
    let irqs = 50..60u32;
    let lines_with = |count: u64| {
        irqs.clone()
            .map(|irq| format!(" {irq}:          0       {count} PCI-MSIX-0000:00:09.0   1-edge      dev{irq}\n"))
            .collect::<String>()
    };
    let with_irqs =
        |text: &str, count| text.replacen("LOC:", &format!("{}LOC:", lines_with(count)), 1);
    k.set_file("/proc/interrupts", with_irqs(SHIELDED_INTERRUPTS_0, 100));
    for irq in irqs.clone() {
        irq_files(&k, irq, "1", "1");
        shield.irq_requested.insert(irq, CpuSet::from_cpus([1]));
        shield.irq_set.insert(irq, CpuSet::from_cpus([1]));
    }
    for pid in 800..820 {
        put_thread(
            &k,
            &Thread {
                pid,
                tid: pid,
                comm: "pinned",
                flags: 0x400000,
                cpu: 1,
                affinity: "1",
                run_ns: 0,
            },
        );
    }
    let r = check_under(&k, Some(&shield), |k| {
        busy_interval(k);
        k.set_file("/proc/interrupts", with_irqs(SHIELDED_INTERRUPTS_1, 110));
        for pid in 800..820 {
            put_thread(
                k,
                &Thread {
                    pid,
                    tid: pid,
                    comm: "pinned",
                    flags: 0x400000,
                    cpu: 1,
                    affinity: "1",
                    run_ns: 9_000_000,
                },
            );
        }
    });
    let text = render_text(&r, false);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= ANSWER_LINES, "{text}");
    let taskset: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("taskset -a -pc 0"))
        .collect();
    assert_eq!(taskset.len(), 1, "{text}");
    assert!(
        taskset[0].contains("for each PID of 600, 800, 801, 802 and 17 more: 21 tasks"),
        "{text}"
    );
    // What does not fit is counted, and the boot line and the host still show.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  … ") && l.ends_with(" more run-time fixes (--verbose)")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("  boot with ")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("  on the host: ")),
        "{text}"
    );
}

#[test]
fn a_parameter_the_loaded_tuned_profile_left_off_its_boot_line_is_named_not_breaking() {
    // tuned's cpu-partitioning line has nohz_full and rcu_nocbs but neither
    // isolcpus nor irqaffinity.
    let booted = || {
        let k = booted_with("nohz=on nohz_full=1 rcu_nocbs=1");
        k.set_file("/sys/devices/system/cpu/isolated", "\n");
        k.set_file("/proc/irq/default_smp_affinity", "3\n");
        k
    };
    let without_tuned = check(&booted(), |k| busy_second(k, 1));
    assert_eq!(titles(&without_tuned, Severity::BreaksShield).len(), 3);
    let k = booted();
    k.set_file("/etc/tuned/active_profile", "cpu-partitioning\n");
    k.set_file("/run/tuned/tuned.pid", "700\n");
    k.add_dir("/proc/700");
    k.set_file(
        "/etc/tuned/bootcmdline",
        "TUNED_BOOT_CMDLINE=\"nohz=on nohz_full=1 rcu_nocbs=1\"\n",
    );
    let r = check(&k, |k| busy_second(k, 1));
    assert!(
        titles(&r, Severity::BreaksShield).is_empty(),
        "{:#?}",
        r.findings
    );
    let info = titles(&r, Severity::Info);
    for wanted in [
        "boot parameter nohz_full=1 in effect",
        "boot parameter rcu_nocbs=1 in effect",
        "boot parameter isolcpus=managed_irq,domain,1 (its domain part) is not on the boot line of the loaded tuned profile",
        "boot parameter isolcpus=managed_irq,domain,1 (its managed_irq part) is not on the boot line of the loaded tuned profile",
        "boot parameter irqaffinity=0 is not on the boot line of the loaded tuned profile",
    ] {
        assert!(info.iter().any(|t| t == wanted), "no {wanted:?} in {info:#?}");
    }
    // A parameter tuned asked for that is not in effect still breaks it.
    let k = booted();
    k.set_file("/sys/devices/system/cpu/nohz_full", "\n");
    k.set_file("/etc/tuned/active_profile", "cpu-partitioning\n");
    k.set_file("/run/tuned/tuned.pid", "700\n");
    k.add_dir("/proc/700");
    k.set_file(
        "/etc/tuned/bootcmdline",
        "TUNED_BOOT_CMDLINE=\"nohz=on nohz_full=1 rcu_nocbs=1\"\n",
    );
    let r = check(&k, |k| busy_second(k, 1));
    assert!(
        titles(&r, Severity::BreaksShield)
            .iter()
            .any(|t| t.starts_with("boot parameter nohz_full=1 from")),
        "{:#?}",
        r.findings
    );
}

/// [`base_system`] on two memory nodes, CPU 0 on node 0 and CPU 1 on node
/// 1, with the virtio NIC of IRQs 38 and 39 on node 0.
fn two_node_system() -> FakeKernel {
    let k = base_system();
    k.set_file("/sys/devices/system/node/node0/cpulist", "0\n");
    k.set_file("/sys/devices/system/node/node1/cpulist", "1\n");
    k.set_file("/sys/devices/system/node/has_memory", "0-1\n");
    let nic = "/sys/bus/pci/devices/0000:00:03.0";
    k.set_file(format!("{nic}/numa_node"), "0\n");
    k.set_file(format!("{nic}/msi_irqs/38"), "msix\n");
    k.set_file(format!("{nic}/msi_irqs/39"), "msix\n");
    k
}

#[test]
fn a_device_irq_delivered_to_a_checked_cpu_of_another_node_than_its_device_is_named_with_its_fix() {
    let k = two_node_system();
    let r = check(&k, |k| k.set_file("/proc/interrupts", INTERRUPTS_1));
    let f = find(
        &r,
        Topic::Numa,
        "IRQ 38 (virtio2-input.0) is delivered to CPU 1 on node 1, but its device sits on node 0",
    );
    assert_eq!((f.severity, f.cpu), (Severity::Warn, Some(1)));
    assert!(
        has_remedy(
            f,
            "echo 0 > /proc/irq/38/smp_affinity_list (CPUs of node 0)"
        ),
        "{f:#?}"
    );
    assert!(f.evidence.contains("numa_node 0"), "{f:#?}");
    // IRQ 39 goes to CPU 0, which is not checked.
    assert!(!r
        .findings
        .iter()
        .any(|f| f.topic == Topic::Numa && f.title.contains("IRQ 39")));
    assert!(
        !r.findings.iter().any(|f| f.title.contains("span")),
        "one CPU spans one node"
    );
}

#[test]
fn checked_cpus_that_span_memory_nodes_are_named_with_a_shield_of_one_node() {
    let k = two_node_system();
    let r = check_cpus(&k, "0-1", None, |_| {});
    let f = find(
        &r,
        Topic::Numa,
        "the checked CPUs 0-1 span memory nodes 0-1",
    );
    assert_eq!((f.severity, f.cpu), (Severity::Warn, None));
    assert!(has_remedy(f, "cpushield shield --all 1"), "{f:#?}");
    assert!(
        f.evidence.contains("node0 cpulist 0, node1 cpulist 1"),
        "{f:#?}"
    );
}

#[test]
fn a_real_time_task_with_its_pages_on_a_remote_node_is_named_and_file_pages_do_not_count() {
    let k = two_node_system();
    let base = "/proc/700/task/700";
    k.set_file(
        format!("{base}/stat"),
        stat_line(700, "rt-loop", 0, 1, 50, 1),
    );
    k.set_file(format!("{base}/schedstat"), "0 0 1\n");
    k.set_thread_affinity(700, CpuSet::parse_list("1").unwrap());
    k.set_file(
        "/proc/700/numa_maps",
        "00400000 default file=/usr/bin/rt-loop mapped=40 N0=40\n7f0000000000 default anon=120 dirty=120 N0=100 N1=20\n",
    );
    let r = check(&k, |_| {});
    let f = find(
        &r,
        Topic::Numa,
        "real-time task 700 (rt-loop) runs on CPUs 1 (node 1) but 100 of its 120 resident pages",
    );
    assert_eq!(f.cpu, Some(1));
    assert!(
        f.remedies[0]
            .action
            .starts_with("cpushield run --cpus 1 --mlock"),
        "{f:#?}"
    );
    // Its pages all local: nothing to say.
    k.set_file(
        "/proc/700/numa_maps",
        "7f0000000000 default anon=120 N1=120\n00400000 default file=/usr/bin/rt-loop N0=40\n",
    );
    let r = check(&k, |_| {});
    assert!(
        !r.findings
            .iter()
            .any(|f| f.topic == Topic::Numa && f.title.contains("task 700")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn numa_balancing_on_two_nodes_is_named_with_its_sysctl_and_boot_fixes_and_not_when_off() {
    let k = two_node_system();
    k.set_file("/proc/sys/kernel/numa_balancing", "1\n");
    let r = check(&k, |_| {});
    let f = find(
        &r,
        Topic::Numa,
        "automatic NUMA balancing is on (kernel.numa_balancing=1) on a machine of 2 memory nodes",
    );
    assert_eq!(f.severity, Severity::Warn);
    assert!(has_remedy(f, "sysctl -w kernel.numa_balancing=0"), "{f:#?}");
    assert!(has_remedy(f, "numa_balancing=disable"), "{f:#?}");
    k.set_file("/proc/sys/kernel/numa_balancing", "0\n");
    let r = check(&k, |_| {});
    assert!(
        !r.findings
            .iter()
            .any(|f| f.title.contains("NUMA balancing")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn a_machine_of_one_node_has_no_numa_finding() {
    let k = base_system();
    k.set_file("/proc/sys/kernel/numa_balancing", "1\n");
    let r = check_cpus(&k, "0-1", None, |k| {
        k.set_file("/proc/interrupts", INTERRUPTS_1)
    });
    assert!(
        !r.findings.iter().any(|f| f.topic == Topic::Numa),
        "{:#?}",
        r.findings
    );
}

/// A thread of a QEMU process (or a kernel thread of its own) in the fake
/// /proc, with its affinity and scheduling policy.
fn put_vm_thread(k: &FakeKernel, pid: i32, tid: i32, comm: &str, affinity: &str, rt: (u32, u32)) {
    let flags = if comm.starts_with("kvm-pit/") {
        0x0020_0040
    } else {
        0x0040_0040
    };
    let base = format!("/proc/{pid}/task/{tid}");
    k.set_file(
        format!("{base}/stat"),
        stat_line(tid, comm, flags, 0, rt.1, rt.0),
    );
    k.set_file(format!("{base}/schedstat"), "0 0 0\n");
    k.set_thread_affinity(tid, CpuSet::parse_list(affinity).unwrap());
}

/// A one-vCPU QEMU (pid 500) as started without pinning: every thread may
/// run anywhere; its kvm-pit thread 510.
fn unpinned_vm(k: &FakeKernel) {
    put_vm_thread(k, 500, 500, "qemu-system-x86", "0-1", (0, 0));
    put_vm_thread(k, 500, 501, "CPU 0/KVM", "0-1", (0, 0));
    put_vm_thread(k, 500, 502, "IO iothread0", "0-1", (0, 0));
    put_vm_thread(k, 510, 510, "kvm-pit/500", "0-1", (0, 0));
}

fn vm_findings(r: &CheckReport) -> Vec<&Finding> {
    r.findings.iter().filter(|f| f.topic == Topic::Vm).collect()
}

#[test]
fn on_a_vms_host_an_unpinned_vcpu_and_emulator_threads_on_the_checked_cpu_are_named_with_their_fixes(
) {
    let k = base_system();
    unpinned_vm(&k);
    let r = check(&k, |_| {});
    let vcpu = find(&r, Topic::Vm, "vCPU 0 (thread 501) is not pinned");
    assert!(
        vcpu.title.starts_with("VM qemu-system-x86 (pid 500)"),
        "{vcpu:#?}"
    );
    assert!(vcpu.evidence.contains("may run on CPUs 0-1"), "{vcpu:#?}");
    assert!(has_remedy(vcpu, "taskset -pc 1 501"), "{vcpu:#?}");
    let emu = find(
        &r,
        Topic::Vm,
        "2 emulator and I/O threads may run on checked CPU 1",
    );
    assert!(
        emu.evidence
            .contains("qemu-system-x86 (500), IO iothread0 (502)"),
        "{emu:#?}"
    );
    assert!(
        has_remedy(emu, "for t in 500 502; do taskset -pc 0 $t; done"),
        "{emu:#?}"
    );
    // vCPU 0 is not pinned: where kvm-pit belongs is not known yet.
    assert_eq!(vm_findings(&r).len(), 2, "{:#?}", vm_findings(&r));
}

#[test]
fn a_vm_pinned_as_its_fixes_say_leaves_only_its_kvm_pit_thread_then_nothing() {
    let k = base_system();
    unpinned_vm(&k);
    k.set_thread_affinity(501, CpuSet::parse_list("1").unwrap());
    k.set_thread_affinity(500, CpuSet::parse_list("0").unwrap());
    k.set_thread_affinity(502, CpuSet::parse_list("0").unwrap());
    let r = check(&k, |_| {});
    let pit = find(
        &r,
        Topic::Vm,
        "kvm-pit/500 (510) is not with vCPU 0 on CPU 1",
    );
    assert!(has_remedy(pit, "taskset -pc 1 510"), "{pit:#?}");
    assert_eq!(vm_findings(&r).len(), 1, "{:#?}", vm_findings(&r));
    k.set_thread_affinity(510, CpuSet::parse_list("1").unwrap());
    let r = check(&k, |_| {});
    assert!(vm_findings(&r).is_empty(), "{:#?}", vm_findings(&r));
}

#[test]
fn two_vcpus_on_one_checked_cpu_and_a_non_real_time_vcpu_beside_a_fifo_one_are_named() {
    let k = base_system();
    put_vm_thread(&k, 500, 500, "qemu-system-x86", "0", (0, 0));
    put_vm_thread(&k, 500, 501, "CPU 0/KVM", "1", (1, 10));
    put_vm_thread(&k, 500, 503, "CPU 1/KVM", "1", (0, 0));
    let r = check(&k, |_| {});
    let shared = find(&r, Topic::Vm, "vCPU 1 (thread 503) is not pinned");
    assert!(
        shared.evidence.contains("shares CPU 1 with vCPU 0"),
        "{shared:#?}"
    );
    assert!(
        shared
            .evidence
            .contains("every checked CPU (1) already holds a vCPU"),
        "{shared:#?}"
    );
    assert!(shared.remedies.is_empty(), "{shared:#?}");
    let policy = find(
        &r,
        Topic::Vm,
        "vCPU 1 (thread 503) is not real-time, while vCPU 0 is",
    );
    assert!(has_remedy(policy, "chrt -f -p 10 503"), "{policy:#?}");
    assert_eq!(vm_findings(&r).len(), 2, "{:#?}", vm_findings(&r));
}

#[test]
fn a_vm_living_on_the_housekeeping_cpus_is_not_judged() {
    let k = base_system();
    put_vm_thread(&k, 500, 500, "qemu-system-x86", "0", (0, 0));
    put_vm_thread(&k, 500, 501, "CPU 0/KVM", "0", (0, 0));
    put_vm_thread(&k, 500, 502, "IO iothread0", "0-1", (0, 0));
    let r = check(&k, |_| {});
    assert!(vm_findings(&r).is_empty(), "{:#?}", vm_findings(&r));
}

#[test]
fn a_vcpu_pinned_to_a_housekeeping_cpu_beside_one_pinned_to_the_checked_cpu_is_left_alone() {
    let k = base_system();
    put_vm_thread(&k, 500, 500, "qemu-system-x86", "0", (0, 0));
    put_vm_thread(&k, 500, 501, "CPU 0/KVM", "0", (0, 0));
    put_vm_thread(&k, 500, 503, "CPU 1/KVM", "1", (0, 0));
    let r = check(&k, |_| {});
    assert!(vm_findings(&r).is_empty(), "{:#?}", vm_findings(&r));
}

#[test]
fn the_hosts_account_of_a_vcpu_held_off_a_millisecond_or_more_is_a_finding_with_the_host_fix() {
    let told = |said: Result<(u64, String), String>| {
        let host = HostSaid::Held([(1, said)].into_iter().collect());
        check_told(&base_system(), "1", None, &host, |_| {})
    };
    let line = "the host held vCPU 1 off 48.2 ms in 1 gap (preempted 48.2 ms), most by sh (pid 879) on host CPU 1 for 48.2 ms (clock offset error ± 270 us)";
    let r = told(Ok((48_200_000, line.to_string())));
    let held = find(&r, Topic::Steal, "the host held vCPU 1 off 48.2 ms");
    assert_eq!(held.severity, Severity::Warn);
    assert_eq!(held.evidence, line);
    assert!(held.remedies.iter().any(|r| r.kind == RemedyKind::Host));
    assert!(
        r.verdict.contains("1 warning") || r.verdict.contains("warning"),
        "{}",
        r.verdict
    );
    // Microseconds at a time are any host's; not a finding.
    let r = told(Ok((400_000, "the host held vCPU 1 off 400 us".into())));
    assert!(
        !r.findings.iter().any(|f| f.title.contains("the host held")),
        "{:#?}",
        r.findings
    );
    // A host whose view stops before the interval: said, not taken as clean.
    let r = told(Err(
        "the host's view is missing from 12.000 s (guest clock) (its last answer)".into(),
    ));
    let missing = find(
        &r,
        Topic::Steal,
        "the host side's view of vCPU 1 is missing",
    );
    assert_eq!(missing.severity, Severity::Info);
    assert!(missing.evidence.contains("12.000 s"));
}

#[test]
fn steal_without_a_host_side_says_how_to_get_the_hosts_account() {
    let k = base_system();
    let hint = "host side: none answered (no virtio-serial port named org.cpushield.vm.0); run `cpushield vm watch` on the host";
    let r = check_told(&k, "1", None, &HostSaid::Absent(hint.into()), |k| {
        k.set_file("/proc/stat", STAT_1)
    });
    let steal = find(&r, Topic::Steal, "20 ms");
    assert!(steal.evidence.contains(hint), "{}", steal.evidence);
    let r = check(&base_system(), |k| k.set_file("/proc/stat", STAT_1));
    let steal = find(&r, Topic::Steal, "20 ms");
    assert!(!steal.evidence.contains("host side"), "{}", steal.evidence);
}
