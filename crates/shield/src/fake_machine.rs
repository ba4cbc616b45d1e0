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

/// The state of a shield of CPU 1 of a 2-CPU [`v1_machine`], saved in PID
/// namespace `pid:[1]`: task 7 (`comm`, affinity 0-1, root cgroup), IRQ 10
/// at mask 3, and the two cgroups the shield made.
pub fn one_task_state(comm: &str) -> crate::state::SavedState {
    let mut s = saved_state(crate::ShieldMasks::all(&CpuSet::from_cpus([1])), "0-1");
    s.tasks.insert(
        7,
        crate::state::SavedTask {
            tgid: 7,
            comm: comm.into(),
            starttime: 5,
            affinity: CpuSet::from_cpus([0, 1]),
            cgroup: "/".into(),
            kthread: false,
            pinned_by_kernel: false,
        },
    );
    s.irqs.insert(10, "3".into());
    let root = s.layout.root().to_path_buf();
    s.created_cgroups = vec![root.join("cpushield-system"), root.join("cpushield-shield")];
    s.pid_namespace = "pid:[1]".into();
    s
}

/// The size of a [`big_machine`]: online (and possible) CPUs, IRQs with an
/// affinity file, and threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineSize {
    /// CPUs, all online.
    pub cpus: usize,
    /// IRQs.
    pub irqs: usize,
    /// Threads, kernel threads included.
    pub threads: usize,
}

impl MachineSize {
    /// A big real-time server: 512 CPUs, 4,096 IRQ vectors (multi-queue NICs
    /// and NVMe) and 100,000 threads.
    pub const BIG: MachineSize = MachineSize {
        cpus: 512,
        irqs: 4096,
        threads: 100_000,
    };

    /// 512 CPUs with few IRQs and threads (64 and 3,000): as wide as
    /// [`MachineSize::BIG`], for what prints a line or a block per CPU, and
    /// quick to build and shield.
    pub const WIDE: MachineSize = MachineSize {
        cpus: 512,
        irqs: 64,
        threads: 3000,
    };

    /// This size times `factor` (each count at least 8, CPUs even).
    pub fn scaled(self, factor: f64) -> MachineSize {
        let times = |n: usize| ((n as f64 * factor).round() as usize).max(8);
        MachineSize {
            cpus: times(self.cpus) / 2 * 2,
            irqs: times(self.irqs),
            threads: times(self.threads),
        }
    }

    /// The CPUs of memory node 1 of a [`big_machine`] of this size (the
    /// second socket, both hyperthreads of each core): what a shield of one
    /// socket names.
    pub fn second_socket(self) -> CpuSet {
        let (half, quarter) = (self.cpus / 2, self.cpus / 4);
        (quarter..half).chain(half + quarter..self.cpus).collect()
    }
}

/// Per-CPU kernel threads of a [`big_machine`], per CPU (cpuhp, migration,
/// ksoftirqd, kworker), each bound to its CPU by the kernel.
const PER_CPU_KTHREADS: [&str; 4] = ["cpuhp", "migration", "ksoftirqd", "kworker"];

/// Threads per process of the multi-threaded half of a [`big_machine`]'s user threads.
const THREADS_PER_PROCESS: usize = 16;

/// A stat line as /proc/PID/task/TID/stat shows it (52 fields), start
/// time 1000 + `tid`.
pub fn stat_line(
    tid: i32,
    comm: &str,
    ppid: i32,
    tgid: i32,
    flags: u64,
    threads: usize,
    cpu: usize,
) -> String {
    format!(
        "{tid} ({comm}) S {ppid} {tgid} {tgid} 0 -1 {flags} 0 0 0 0 {u} {s} 0 0 20 0 {threads} 0 {start} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 {cpu} 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        u = tid % 97,
        s = tid % 13,
        start = 1000 + tid
    )
}

/// A fake machine of `size` with cgroup-v1 cpusets at [`V1_ROOT`], seen
/// from the initial PID namespace (kernel threads visible), for measuring
/// how the shield, `show`, `check` and the agent grow:
///
/// - CPUs `0-(N-1)`, SMT siblings `i` and `i + N/2`, two memory nodes (the
///   lower and upper quarter of each sibling half: two sockets);
/// - four per-CPU kernel threads per CPU, bound by the kernel, children of
///   kthreadd (PID 2); the other threads are user threads, half of them
///   single-threaded processes and half in processes of 16 threads; one in
///   a hundred is pinned by its owner to one CPU, the rest may use every CPU;
/// - IRQs 32 and up, three in four on every CPU and one in four a
///   kernel-managed queue vector bound to one CPU (its mask cannot be
///   written), all with counts in a full `/proc/interrupts` (one column per
///   CPU, as the kernel prints it), and `/proc/softirqs` and `/proc/stat`
///   with a column or line per CPU.
pub fn big_machine(size: MachineSize) -> FakeKernel {
    let k = FakeKernel::new();
    let mut files = Files::default();
    system_files(&mut files, size);
    let affinities = threads(&mut files, size);
    irqs(&mut files, &k, size);
    counters(&mut files, size.cpus);
    k.set_files(files.0);
    k.set_thread_affinities(affinities);
    k
}

/// A [`big_machine`] of `size` with the shield up on its
/// [`MachineSize::second_socket`] (all its masks, as root, not whole cores),
/// the shield's state saved in `store`.
pub fn shielded_big_machine(
    size: MachineSize,
    store: &cpushield_kernel::store::MemoryStore,
) -> FakeKernel {
    let k = big_machine(size);
    let options = crate::Options {
        is_root: true,
        whole_cores: false,
    };
    let masks = crate::ShieldMasks::all(&size.second_socket());
    crate::shield(&cpushield_kernel::Host::fake(&k, store), &masks, options)
        .expect("the shield goes up on the big machine's second socket");
    k
}

/// The files of a big machine, in the order written.
#[derive(Default)]
struct Files(Vec<(std::path::PathBuf, String)>);

impl Files {
    fn put(&mut self, path: impl Into<std::path::PathBuf>, text: impl Into<String>) {
        self.0.push((path.into(), text.into()));
    }
}

/// The SMT sibling of `cpu` among `cpus`: the CPU half the machine away.
fn sibling_of(cpu: usize, cpus: usize) -> usize {
    let half = cpus / 2;
    if cpu < half {
        cpu + half
    } else {
        cpu - half
    }
}

/// CPUs, topology, memory nodes, boot line, the settings the shield saves
/// and the root cpuset of a big machine.
fn system_files(files: &mut Files, size: MachineSize) {
    let cpus = size.cpus;
    let all = CpuSet::first_n(cpus);
    let list = all.to_list();
    let mask = all.to_mask_padded(cpus);
    files.put("/proc/self/ns/pid", "pid:[4026531836]");
    files.put(
        "/proc/self/mountinfo",
        format!("26 25 0:23 / {V1_ROOT} rw - cgroup cgroup rw,cpuset\n"),
    );
    files.put("/sys/devices/system/cpu/online", format!("{list}\n"));
    files.put("/sys/devices/system/cpu/possible", format!("{list}\n"));
    files.put("/sys/devices/system/cpu/isolated", "\n");
    files.put("/sys/devices/system/cpu/nohz_full", "(null)\n");
    files.put(
        "/proc/cmdline",
        "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n",
    );
    files.put("/proc/2/comm", "kthreadd\n");
    for cpu in 0..cpus {
        let pair = CpuSet::from_cpus([cpu, sibling_of(cpu, cpus)]).to_list();
        files.put(
            format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
            format!("{pair}\n"),
        );
    }
    let node_dir = cpushield_kernel::numa::NODE_DIR;
    let second = size.second_socket();
    for (node, cpus) in [(0, all.difference(&second)), (1, second)] {
        files.put(
            format!("{node_dir}/node{node}/cpulist"),
            format!("{}\n", cpus.to_list()),
        );
    }
    files.put(format!("{node_dir}/has_memory"), "0-1\n");
    files.put(format!("{node_dir}/online"), "0-1\n");
    files.put("/proc/irq/default_smp_affinity", format!("{mask}\n"));
    files.put(
        "/sys/devices/virtual/workqueue/cpumask",
        format!("{mask}\n"),
    );
    files.put("/proc/sys/kernel/watchdog_cpumask", format!("{list}\n"));
    files.put("/proc/sys/kernel/timer_migration", "1\n");
    files.put("/proc/sys/vm/stat_interval", "1\n");
    for (file, value) in [
        ("cgroup.procs", String::new()),
        ("cpuset.cpus", format!("{list}\n")),
        ("cpuset.mems", "0-1\n".to_string()),
        ("cpuset.cpu_exclusive", "1\n".to_string()),
        ("cpuset.sched_load_balance", "1\n".to_string()),
    ] {
        files.put(format!("{V1_ROOT}/{file}"), value);
    }
}

/// The threads of a big machine as they are written: their files, the
/// root cpuset's task list and their affinities.
struct Threads<'a> {
    files: &'a mut Files,
    affinities: Vec<(i32, CpuSet)>,
    listed: String,
}

impl Threads<'_> {
    /// Thread `tid` of process `tgid`, in the root cpuset.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        tid: i32,
        tgid: i32,
        comm: &str,
        ppid: i32,
        flags: u64,
        in_process: usize,
        affinity: CpuSet,
    ) {
        use std::fmt::Write;
        let base = format!("/proc/{tgid}/task/{tid}");
        let cpu = affinity.first().unwrap_or(0);
        let stat = stat_line(tid, comm, ppid, tgid, flags, in_process, cpu);
        if tid == tgid {
            self.files.put(format!("/proc/{tgid}/stat"), stat.clone());
            self.files
                .put(format!("/proc/{tgid}/cgroup"), "3:cpuset:/\n");
        }
        self.files.put(format!("{base}/stat"), stat);
        self.files.put(
            format!("{base}/schedstat"),
            format!("{} 0 {}\n", tid as u64 * 1000, tid % 7),
        );
        self.files.put(format!("{base}/cgroup"), "3:cpuset:/\n");
        let _ = writeln!(self.listed, "{tid}");
        self.affinities.push((tid, affinity));
    }
}

/// The name of the `n`th per-CPU kernel thread (four to a CPU).
fn per_cpu_kthread_comm(n: usize) -> String {
    let (cpu, kind) = (
        n / PER_CPU_KTHREADS.len(),
        PER_CPU_KTHREADS[n % PER_CPU_KTHREADS.len()],
    );
    if kind == "kworker" {
        format!("kworker/{cpu}:0")
    } else {
        format!("{kind}/{cpu}")
    }
}

/// Threads: the per-CPU kernel threads first, then user processes; their
/// affinities.
fn threads(files: &mut Files, size: MachineSize) -> Vec<(i32, CpuSet)> {
    let MachineSize { cpus, threads, .. } = size;
    let all = CpuSet::first_n(cpus);
    let mut t = Threads {
        files,
        affinities: Vec::with_capacity(threads),
        listed: String::with_capacity(threads * 7),
    };
    let kthread_flags = cpushield_parse::pid_stat::PF_KTHREAD;
    let bound_flags = kthread_flags | cpushield_parse::pid_stat::PF_NO_SETAFFINITY;
    t.add(2, 2, "kthreadd", 0, kthread_flags, 1, all.clone());
    let mut tid = 10;
    let kthreads = (PER_CPU_KTHREADS.len() * cpus).min(threads.saturating_sub(1));
    for n in 0..kthreads {
        let cpu = n / PER_CPU_KTHREADS.len();
        let comm = per_cpu_kthread_comm(n);
        t.add(tid, tid, &comm, 2, bound_flags, 1, CpuSet::from_cpus([cpu]));
        tid += 1;
    }
    let mut left = threads.saturating_sub(1 + kthreads);
    let mut user = 0usize;
    while left > 0 {
        let in_process = if user.is_multiple_of(2) {
            1
        } else {
            THREADS_PER_PROCESS.min(left)
        };
        let tgid = tid;
        for _ in 0..in_process {
            let affinity = if tid % 100 == 0 {
                CpuSet::from_cpus([tid as usize % cpus])
            } else {
                all.clone()
            };
            t.add(tid, tgid, &format!("app{tgid}"), 1, 0, in_process, affinity);
            tid += 1;
        }
        left -= in_process;
        user += 1;
    }
    let Threads {
        files,
        affinities,
        listed,
    } = t;
    files.put(format!("{V1_ROOT}/tasks"), listed);
    affinities
}

/// A header line of one `CPUn` column per CPU, as /proc/interrupts and
/// /proc/softirqs print it.
fn cpu_columns(cpus: usize) -> String {
    use std::fmt::Write;
    let mut line = String::from("          ");
    for cpu in 0..cpus {
        let _ = write!(line, " {:>10}", format!("CPU{cpu}"));
    }
    line.push('\n');
    line
}

/// IRQs 32 and up, with their affinity files and the counters of every CPU
/// in /proc/interrupts; the writes of managed ones are refused.
fn irqs(files: &mut Files, k: &FakeKernel, size: MachineSize) {
    use std::fmt::Write;
    let MachineSize { cpus, irqs, .. } = size;
    let all = CpuSet::first_n(cpus);
    let mut interrupts = String::with_capacity((irqs + 8) * (cpus * 11 + 48));
    interrupts.push_str(&cpu_columns(cpus));
    for n in 0..irqs {
        let irq = 32 + n;
        let managed = n % 4 == 3;
        let affinity = if managed {
            CpuSet::from_cpus([n % cpus])
        } else {
            all.clone()
        };
        let dir = format!("/proc/irq/{irq}");
        files.put(
            format!("{dir}/smp_affinity"),
            format!("{}\n", affinity.to_mask_padded(cpus)),
        );
        files.put(
            format!("{dir}/smp_affinity_list"),
            format!("{}\n", affinity.to_list()),
        );
        files.put(
            format!("{dir}/effective_affinity_list"),
            format!("{}\n", n % cpus),
        );
        let _ = write!(interrupts, "{:>4}:", irq);
        for cpu in 0..cpus {
            let count = if cpu == n % cpus { 1000 + n } else { 0 };
            let _ = write!(interrupts, " {count:>10}");
        }
        let name = if managed {
            format!("nvme{}q{}", n / 256, n % 256)
        } else {
            format!("eth{}-TxRx-{}", n / 1024, n % 1024)
        };
        let _ = writeln!(
            interrupts,
            "  IR-PCI-MSIX-0000:{:02x}:00.0 {n}-edge      {name}",
            n / 256
        );
        if managed {
            k.refuse_writes(format!("{dir}/smp_affinity"));
        }
    }
    for (id, what) in [
        ("NMI", "Non-maskable interrupts"),
        ("LOC", "Local timer interrupts"),
        ("RES", "Rescheduling interrupts"),
        ("CAL", "Function call interrupts"),
    ] {
        let _ = write!(interrupts, "{id:>4}:");
        for cpu in 0..cpus {
            let _ = write!(interrupts, " {:>10}", 5000 + cpu);
        }
        let _ = writeln!(interrupts, "   {what}");
    }
    files.put("/proc/interrupts", interrupts);
}

/// /proc/softirqs, /proc/stat (a column or line per CPU) and an empty
/// /proc/diskstats.
fn counters(files: &mut Files, cpus: usize) {
    use std::fmt::Write;
    let mut softirqs = cpu_columns(cpus);
    for kind in [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ] {
        let _ = write!(softirqs, "{kind:>9}:");
        for cpu in 0..cpus {
            let _ = write!(softirqs, " {:>10}", 100 + cpu);
        }
        softirqs.push('\n');
    }
    files.put("/proc/softirqs", softirqs);
    let mut stat = String::from("cpu  1000 0 1000 100000 0 0 0 0 0 0\n");
    for cpu in 0..cpus {
        let _ = writeln!(stat, "cpu{cpu} 10 0 10 1000 0 0 0 0 0 0");
    }
    stat.push_str(
        "intr 0\nctxt 0\nbtime 1700000000\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n",
    );
    files.put("/proc/stat", stat);
    files.put("/proc/diskstats", String::new());
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

    #[test]
    fn a_big_machine_has_the_cpus_irqs_and_threads_of_its_size() {
        let size = MachineSize {
            cpus: 8,
            irqs: 12,
            threads: 100,
        };
        let k = big_machine(size);
        let snap = crate::snapshot::take(&k, &crate::layout::detect(&k).unwrap()).unwrap();
        assert_eq!(snap.online.len(), 8);
        assert_eq!(snap.irqs.len(), 12);
        assert_eq!(snap.tasks.len(), 100);
        assert_eq!(snap.scope, crate::snapshot::Scope::System);
        let bound = snap.tasks.iter().filter(|t| t.pinned_by_kernel).count();
        assert_eq!(bound, 4 * 8, "four per-CPU kernel threads per CPU");
        assert!(
            snap.tasks.iter().any(|t| t.tgid != t.tid),
            "multi-threaded processes"
        );
        assert_eq!(size.second_socket().to_list(), "2-3,6-7");
        assert_eq!(
            k.read(std::path::Path::new("/proc/interrupts"))
                .unwrap()
                .lines()
                .count(),
            1 + 12 + 4
        );
    }

    #[test]
    fn a_big_machines_siblings_are_half_the_machine_apart() {
        assert_eq!(sibling_of(0, 8), 4);
        assert_eq!(sibling_of(5, 8), 1);
    }

    #[test]
    fn per_cpu_kernel_threads_come_four_to_a_cpu_named_as_the_kernel_names_them() {
        let names: Vec<String> = (0..5).map(per_cpu_kthread_comm).collect();
        assert_eq!(
            names,
            [
                "cpuhp/0",
                "migration/0",
                "ksoftirqd/0",
                "kworker/0:0",
                "cpuhp/1"
            ]
        );
    }

    #[test]
    fn counter_tables_have_one_column_per_cpu() {
        assert_eq!(
            cpu_columns(2),
            format!("{:10} {:>10} {:>10}\n", "", "CPU0", "CPU1")
        );
    }
}
