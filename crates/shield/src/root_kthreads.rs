//! The root cgroup's kernel threads across a run in a private PID namespace
//! (`tune`, `compare`). The run's shield cannot see them, yet making and
//! undoing its cgroup v2 partition makes the kernel give every thread of the
//! root cgroup the root's CPUs, per-CPU kernel threads excepted: kswapd and
//! kcompactd lose the CPUs of their memory node, IRQ threads those of their
//! IRQ, and nothing the run saved could give them back. The process that
//! started the run still sees every task: it keeps their affinities before
//! and, after, gives back exactly those the kernel rewrote, and no other.

use crate::layout;
use crate::snapshot::{read_tasks, TaskInfo};
use crate::steps::TaskAffinity;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{is_gone, read_cpu_list, Kernel};

/// A kernel thread of the root cgroup as found before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptThread {
    /// Thread ID.
    pub tid: i32,
    /// Start time: with the ID it names the thread, not a later one given the same ID.
    pub starttime: u64,
    /// Command name, for messages.
    pub comm: String,
    /// Its affinity before the run.
    pub affinity: CpuSet,
}

/// The affinities of the root cgroup's kernel threads before a run (none
/// where this process sees no kernel thread: inside a PID namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeptThreads {
    /// The threads, as found.
    pub threads: Vec<KeptThread>,
}

/// Whether `task` is a kernel thread of the root cgroup whose affinity can
/// be set: the threads the kernel rewrites when a partition of the root is
/// made or undone.
fn rewritten_by_partitions(task: &TaskInfo) -> bool {
    task.kthread && !task.pinned_by_kernel && task.cgroup == "/"
}

/// Reads the root cgroup's kernel threads and their affinities. A machine
/// without a cpuset hierarchy, or whose tasks cannot all be read, keeps
/// none, and then nothing is given back.
pub fn keep(kernel: &dyn Kernel) -> KeptThreads {
    let Some(layout) = layout::detect(kernel) else {
        return KeptThreads::default();
    };
    let threads = read_tasks(kernel, &layout)
        .unwrap_or_default()
        .into_iter()
        .filter(rewritten_by_partitions)
        .map(|t| KeptThread {
            tid: t.tid,
            starttime: t.starttime,
            comm: t.comm,
            affinity: t.affinity,
        })
        .collect();
    KeptThreads { threads }
}

/// The affinities to give back: each kept thread that is still the same
/// task and a kernel thread of the root cgroup, whose affinity differs from
/// the one kept and is the one the kernel gives the root's threads,
/// `root_cpus` (the root cpuset's effective CPUs now). A thread whose
/// affinity someone set since to anything else is left as it is.
pub fn plan_give_back(
    kept: &KeptThreads,
    now: &[TaskInfo],
    root_cpus: &CpuSet,
) -> Vec<TaskAffinity> {
    let now_of: std::collections::HashMap<i32, &TaskInfo> =
        now.iter().map(|t| (t.tid, t)).collect();
    kept.threads
        .iter()
        .filter(|k| {
            now_of.get(&k.tid).is_some_and(|t| {
                t.starttime == k.starttime
                    && rewritten_by_partitions(t)
                    && t.affinity != k.affinity
                    && t.affinity == *root_cpus
            })
        })
        .map(|k| TaskAffinity {
            tid: k.tid,
            cpus: k.affinity.clone(),
        })
        .collect()
}

/// What [`give_back`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GivenBack {
    /// Kernel threads given back their affinity.
    pub restored: usize,
    /// One line for each that could not be, with the command that does it.
    pub failed: Vec<String>,
}

/// Gives back the affinity of each of `kept` the kernel rewrote since
/// ([`plan_give_back`]). A thread that has exited meanwhile is no failure.
pub fn give_back(kernel: &dyn Kernel, kept: &KeptThreads) -> GivenBack {
    let mut out = GivenBack::default();
    if kept.threads.is_empty() {
        return out;
    }
    let Some(layout) = layout::detect(kernel) else {
        return out;
    };
    let root_file = layout.root().join(layout.root_cpus_file());
    let (now, root_cpus) = match (
        read_tasks(kernel, &layout),
        read_cpu_list(kernel, &root_file),
    ) {
        (Ok(now), Ok(cpus)) => (now, cpus),
        (Err(e), _) | (_, Err(e)) => {
            out.failed.push(format!(
                "the kernel threads of the root cgroup could not be read back ({e}); their affinities before the run were: {}",
                kept.threads
                    .iter()
                    .map(|t| format!("{} ({}) {}", t.tid, t.comm, t.affinity))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            return out;
        }
    };
    for back in plan_give_back(kept, &now, &root_cpus) {
        match kernel.set_affinity(back.tid, &back.cpus) {
            Ok(()) => out.restored += 1,
            Err(e) if is_gone(&e) => {}
            Err(e) => {
                let comm = kept
                    .threads
                    .iter()
                    .find(|t| t.tid == back.tid)
                    .map_or("", |t| t.comm.as_str());
                out.failed.push(format!(
                    "kernel thread {} ({comm}) could not be given back CPUs {} ({e}): run `taskset -pc {} {}`",
                    back.tid, back.cpus, back.cpus, back.tid
                ));
            }
        }
    }
    out
}

/// Runs `body` (a run in a private PID namespace), keeping the root
/// cgroup's kernel threads' affinities before it and giving back, after it,
/// those the kernel rewrote ([`give_back`]); `say` prints each one that
/// could not be given back.
pub fn around<R>(kernel: &dyn Kernel, body: impl FnOnce() -> R, say: &dyn Fn(&str)) -> R {
    let kept = keep(kernel);
    let out = body();
    for line in give_back(kernel, &kept).failed {
        say(&format!("cpushield: {line}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;
    use std::path::Path;

    const ROOT: &str = "/sys/fs/cgroup";

    fn set(text: &str) -> CpuSet {
        CpuSet::parse_list(text).unwrap()
    }

    /// A stat line of single-threaded process `tid` with `flags` and start
    /// time 1000 + tid.
    fn stat(tid: i32, comm: &str, ppid: i32, flags: u64) -> String {
        crate::fake_machine::stat_line(tid, comm, ppid, tid, flags, 1, 0)
    }

    /// A 4-CPU cgroup v2 machine on two memory nodes (CPUs 0-1, 2-3) as
    /// the process that starts a run sees it: kthreadd, kswapd0 and
    /// kswapd1 on their nodes' CPUs, a per-CPU ksoftirqd/3, a kernel thread
    /// of another cgroup and a user process on CPU 1, all in the root cgroup
    /// but the one.
    fn machine() -> FakeKernel {
        use cpushield_parse::pid_stat::{PF_KTHREAD, PF_NO_SETAFFINITY};
        let k = FakeKernel::new();
        k.set_file("/proc/self/ns/pid", "pid:[4026531836]");
        k.set_file(
            "/proc/self/mountinfo",
            format!("30 1 0:26 / {ROOT} rw - cgroup2 cgroup2 rw\n"),
        );
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_file(format!("{ROOT}/cgroup.controllers"), "cpuset cpu\n");
        k.set_file(format!("{ROOT}/cgroup.subtree_control"), "cpuset\n");
        k.set_file(format!("{ROOT}/cpuset.cpus.effective"), "0-3\n");
        for file in ["cpuset.cpus", "cgroup.type", "cpuset.cpus.partition"] {
            k.set_file(format!("{ROOT}/{file}"), "");
        }
        let kthread = PF_KTHREAD;
        let threads: [(i32, &str, i32, u64, &str); 6] = [
            (2, "kthreadd", 0, kthread, "0-3"),
            (30, "ksoftirqd/3", 2, kthread | PF_NO_SETAFFINITY, "3"),
            (40, "kswapd0", 2, kthread, "0-1"),
            (41, "kswapd1", 2, kthread, "2-3"),
            (50, "kdamond.0", 2, kthread, "2-3"),
            (100, "app", 1, 0x400000, "1"),
        ];
        let mut root_threads = String::new();
        for (tid, comm, ppid, flags, cpus) in threads {
            k.set_file(
                format!("/proc/{tid}/task/{tid}/stat"),
                stat(tid, comm, ppid, flags),
            );
            k.set_file(format!("/proc/{tid}/stat"), stat(tid, comm, ppid, flags));
            if tid == 30 {
                k.set_per_cpu_thread(30, 3);
            } else {
                k.set_thread_affinity(tid, set(cpus));
            }
            if tid != 50 {
                root_threads.push_str(&format!("{tid}\n"));
            }
        }
        k.set_file(format!("{ROOT}/cgroup.threads"), root_threads.clone());
        k.set_file(format!("{ROOT}/cgroup.procs"), root_threads);
        k.set_file(format!("{ROOT}/other/cgroup.threads"), "50\n");
        k.set_file(format!("{ROOT}/other/cgroup.procs"), "50\n");
        k
    }

    /// What a run's shield in a private PID namespace does to the cpuset
    /// hierarchy (it sees none of the machine's threads): its partition on
    /// CPUs 2-3 made, then undone and removed.
    fn trial_partition(k: &FakeKernel) {
        let shield = Path::new(ROOT).join("cpushield-shield");
        k.mkdir(&shield).unwrap();
        k.write(&shield.join("cpuset.cpus"), "2-3").unwrap();
        k.write(&shield.join("cpuset.cpus.partition"), "isolated")
            .unwrap();
        k.write(&shield.join("cpuset.cpus.partition"), "member")
            .unwrap();
        k.rmdir(&shield).unwrap();
    }

    #[test]
    fn a_run_whose_partition_the_kernel_undid_gives_kswapd_back_its_nodes_cpus_and_nothing_else_changes(
    ) {
        let k = machine();
        let before = k.affinities();
        let said = std::sync::Mutex::new(Vec::new());
        let say = |line: &str| said.lock().unwrap().push(line.to_string());
        around(
            &k,
            || {
                trial_partition(&k);
                // The kernel's rewrite, as the fake models it: the root's
                // threads on every CPU, the per-CPU one and the other
                // cgroup's kernel thread where they were.
                let now = k.affinities();
                assert_eq!(now[&40], set("0-3"));
                assert_eq!(now[&41], set("0-3"));
                assert_eq!(now[&100], set("0-3"));
                assert_eq!(now[&30], set("3"));
                assert_eq!(now[&50], set("2-3"));
            },
            &say,
        );
        let after = k.affinities();
        assert_eq!(after[&40], before[&40], "kswapd0 is back on node 0");
        assert_eq!(after[&41], before[&41], "kswapd1 is back on node 1");
        assert_eq!(after[&2], before[&2]);
        assert_eq!(after[&30], before[&30]);
        assert_eq!(after[&50], before[&50]);
        assert_eq!(
            after[&100],
            set("0-3"),
            "a user process is not a kernel thread: left as it is"
        );
        assert!(
            said.lock().unwrap().is_empty(),
            "{:?}",
            said.lock().unwrap()
        );
    }

    #[test]
    fn a_kernel_thread_set_since_to_other_cpus_or_a_new_thread_of_the_same_id_is_left_as_it_is() {
        let k = machine();
        let kept = keep(&k);
        assert_eq!(
            kept.threads.iter().map(|t| t.tid).collect::<Vec<_>>(),
            [2, 40, 41],
            "the settable kernel threads of the root cgroup"
        );
        trial_partition(&k);
        // Someone set kswapd0's affinity meanwhile; kswapd1 exited and a
        // new kernel thread took its ID.
        k.set_thread_affinity(40, set("1"));
        k.set_file(
            "/proc/41/stat",
            stat(41, "kworker/u8:3", 2, 0x200000).replace(" 1041 ", " 5000 "),
        );
        let given = give_back(&k, &kept);
        assert_eq!(given, GivenBack::default());
        assert_eq!(k.get_affinity(40).unwrap(), set("1"));
        assert_eq!(k.get_affinity(41).unwrap(), set("0-3"));
    }

    #[test]
    fn kernel_threads_not_rewritten_are_not_written() {
        let k = machine();
        let kept = keep(&k);
        let recording = cpushield_kernel::RecordingKernel::new(&k);
        assert_eq!(give_back(&recording, &kept), GivenBack::default());
        assert!(recording.changes().is_empty(), "{:?}", recording.changes());
    }

    #[test]
    fn where_no_kernel_thread_is_seen_nothing_is_kept_or_given_back() {
        let k = machine();
        for tid in [2, 30, 40, 41, 50] {
            k.remove_tree(Path::new(&format!("/proc/{tid}"))).unwrap();
        }
        assert_eq!(keep(&k), KeptThreads::default());
    }

    #[test]
    fn a_kernel_thread_that_cannot_be_given_back_is_said_with_the_command_that_does_it() {
        let k = machine();
        let kept = keep(&k);
        trial_partition(&k);
        let refusing = RefusingAffinity(&k);
        let given = give_back(&refusing, &kept);
        assert_eq!(given.restored, 0);
        assert_eq!(given.failed.len(), 2, "{:?}", given.failed);
        assert!(
            given.failed[0]
                .starts_with("kernel thread 40 (kswapd0) could not be given back CPUs 0-1 (")
                && given.failed[0].ends_with("run `taskset -pc 0-1 40`"),
            "{}",
            given.failed[0]
        );
    }

    /// A kernel whose sched_setaffinity fails with EPERM.
    struct RefusingAffinity<'a>(&'a FakeKernel);

    impl Kernel for RefusingAffinity<'_> {
        fn read_bytes(&self, path: &Path) -> std::io::Result<Vec<u8>> {
            self.0.read_bytes(path)
        }
        fn write(&self, path: &Path, data: &str) -> std::io::Result<()> {
            self.0.write(path, data)
        }
        fn read_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
            self.0.read_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.0.exists(path)
        }
        fn read_link(&self, path: &Path) -> std::io::Result<std::path::PathBuf> {
            self.0.read_link(path)
        }
        fn mkdir(&self, path: &Path) -> std::io::Result<()> {
            self.0.mkdir(path)
        }
        fn rmdir(&self, path: &Path) -> std::io::Result<()> {
            self.0.rmdir(path)
        }
        fn remove_tree(&self, path: &Path) -> std::io::Result<()> {
            self.0.remove_tree(path)
        }
        fn get_affinity(&self, tid: i32) -> std::io::Result<CpuSet> {
            self.0.get_affinity(tid)
        }
        fn set_affinity(&self, _: i32, _: &CpuSet) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EPERM))
        }
        fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
            self.0.set_xattr(path, name, value)
        }
        fn get_xattr(&self, path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
            self.0.get_xattr(path, name)
        }
        fn get_sched(&self, tid: i32) -> std::io::Result<cpushield_kernel::SchedParams> {
            self.0.get_sched(tid)
        }
        fn set_sched(
            &self,
            tid: i32,
            params: &cpushield_kernel::SchedParams,
        ) -> std::io::Result<()> {
            self.0.set_sched(tid, params)
        }
    }
}
