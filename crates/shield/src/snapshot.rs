//! A read-only picture of everything shielding looks at: tasks, IRQs, and the
//! files it may change. The planner works on this, never on the kernel.

use crate::layout::{cgroup_of, CgroupLayout};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::paths::{self, sysctl};
use cpushield_kernel::{is_gone, read_cpu_list, read_trimmed, Kernel, Procfs};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The unbound workqueue cpumask and the default affinity of new IRQs,
/// files the shield writes and journals by path.
pub use cpushield_kernel::paths::{DEFAULT_IRQ_AFFINITY, WORKQUEUE_CPUMASK};

/// Sysctls the local-timer shield may change.
pub const LTMR_SYSCTLS: [&str; 3] = [
    sysctl::WATCHDOG_CPUMASK,
    sysctl::TIMER_MIGRATION,
    sysctl::STAT_INTERVAL,
];

/// Whether the tool sees the whole machine or only a private PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// All tasks of the machine are visible (kernel threads included).
    System,
    /// Only the tasks of a private PID namespace are visible: they are "the system".
    Namespace,
}

/// One thread as seen at snapshot time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// Thread ID.
    pub tid: i32,
    /// Process (thread group) ID.
    pub tgid: i32,
    /// Parent process ID.
    pub ppid: i32,
    /// Command name.
    pub comm: String,
    /// Start time in clock ticks since boot: with `tid` it names a task uniquely
    /// even if the PID is reused.
    pub starttime: u64,
    /// A kernel thread.
    pub kthread: bool,
    /// The kernel forbids changing its affinity (per-CPU kernel thread).
    pub pinned_by_kernel: bool,
    /// Current CPU affinity.
    pub affinity: CpuSet,
    /// Its cgroup in the cpuset hierarchy (`/` for the root).
    pub cgroup: String,
}

/// One IRQ as seen at snapshot time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqInfo {
    /// IRQ number.
    pub irq: u32,
    /// Exact text of /proc/irq/N/smp_affinity (for byte-identical restore).
    pub mask_text: String,
    /// The same, parsed.
    pub affinity: CpuSet,
    /// Device name(s) from /proc/interrupts, when known.
    pub name: String,
}

/// Everything shielding reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// Online CPUs.
    pub online: CpuSet,
    /// Possible CPUs (IRQ masks are padded to this many bits).
    pub possible: usize,
    /// Where cpusets live.
    pub layout: CgroupLayout,
    /// What the tool can see.
    pub scope: Scope,
    /// All visible threads.
    pub tasks: Vec<TaskInfo>,
    /// All IRQs with an affinity file, in IRQ order (as [`read_irqs`]
    /// gives them: a lookup by number is a binary search).
    pub irqs: Vec<IrqInfo>,
    /// Current text of each file shielding may write (absent files omitted).
    pub files: BTreeMap<PathBuf, String>,
    /// CPUs of the hierarchy root (what a cgroup can hold).
    pub root_cpus: CpuSet,
    /// Memory nodes of the hierarchy root (v1 needs them set on new cpusets).
    pub root_mems: String,
    /// Child cgroups of the hierarchy root that are not ours, with their CPUs.
    pub foreign_cgroups: Vec<(String, CpuSet)>,
    /// SMT sibling sets of each online CPU.
    pub siblings: BTreeMap<usize, CpuSet>,
    /// The PID namespace the tool runs in (link text of /proc/self/ns/pid).
    pub pid_namespace: String,
    /// The machine's memory nodes (none where the kernel has no NUMA).
    #[serde(default)]
    pub nodes: Vec<cpushield_kernel::numa::NumaNode>,
    /// The text of the shield cgroup's `cpuset.mems` where that cgroup
    /// exists (v2: empty while it takes its parent's).
    #[serde(default)]
    pub shield_mems: Option<String>,
}

pub use crate::layout::{is_kubepods, is_ours, SHIELD_CGROUP, SYSTEM_CGROUP};

/// A task the tool could not read: shielding must not go on without it.
fn unreadable(tid: i32, what: &str, path: &Path, error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!(
        "thread {tid}: cannot read {what} ({}: {error}); the shield would miss this task, so nothing was changed",
        path.display()
    ))
}

/// [`unreadable`] for a read through [`Procfs`], whose error names the path.
fn unreadable_read(tid: i32, what: &str, error: std::io::Error) -> std::io::Error {
    std::io::Error::other(format!(
        "thread {tid}: cannot read {what} ({error}); the shield would miss this task, so nothing was changed"
    ))
}

/// How a message names task `tid`: with its command name, read now where the
/// snapshot did not read it (the first shield reads leaders without it).
pub fn task_label(kernel: &dyn Kernel, tid: i32, comm: &str) -> String {
    let comm = if comm.is_empty() {
        Procfs::new(kernel)
            .process_file(tid, "comm")
            .ok()
            .flatten()
            .map(|c| c.trim_end().to_string())
            .unwrap_or_default()
    } else {
        comm.to_string()
    };
    task_name(tid, &comm)
}

/// How a message names task `tid` with command name `comm`: `task 42 (name)`,
/// or `task 42` where the name was not read.
pub fn task_name(tid: i32, comm: &str) -> String {
    if comm.is_empty() {
        format!("task {tid}")
    } else {
        format!("task {tid} ({comm})")
    }
}

/// Parses the stat file of thread `tid` as [`Procfs`] read it (in `dir`);
/// `Ok(None)` if the task vanished meanwhile.
fn parse_stat(
    read: std::io::Result<Option<Vec<u8>>>,
    tid: i32,
    dir: impl FnOnce() -> PathBuf,
) -> std::io::Result<Option<cpushield_parse::pid_stat::ProcStat>> {
    let Some(stat_bytes) = read.map_err(|e| unreadable_read(tid, "its stat", e))? else {
        return Ok(None);
    };
    cpushield_parse::pid_stat::parse_stat(&stat_bytes)
        .map(Some)
        .map_err(|e| unreadable(tid, "its stat", &dir().join("stat"), e))
}

/// Reads thread `tid` of process `pid`; `Ok(None)` if it vanished meanwhile
/// (ENOENT, ESRCH). Any other failure is an error naming the thread and the
/// path: a task the tool cannot see would escape the shield.
fn read_task(
    proc: &Procfs,
    layout: &CgroupLayout,
    cgroups: &CgroupMembers,
    pid: i32,
    tid: i32,
) -> std::io::Result<Option<TaskInfo>> {
    let read = proc.thread_bytes(pid, tid, "stat");
    let Some(stat) = parse_stat(read, tid, || proc.thread_dir(pid, tid))? else {
        return Ok(None);
    };
    task_from_stat(proc, layout, cgroups, pid, tid, stat)
}

/// Completes a thread from its parsed stat: its cgroup (from `cgroups`, or
/// its own cgroup file where no list named it) and its affinity.
fn task_from_stat(
    proc: &Procfs,
    layout: &CgroupLayout,
    cgroups: &CgroupMembers,
    pid: i32,
    tid: i32,
    stat: cpushield_parse::pid_stat::ProcStat,
) -> std::io::Result<Option<TaskInfo>> {
    let cgroup = match cgroups.get(&tid) {
        Some(c) => c.to_string(),
        None => {
            let cgroup_text = match proc.thread_file(pid, tid, "cgroup") {
                Ok(Some(t)) => t,
                Ok(None) => return Ok(None),
                Err(e) => return Err(unreadable_read(tid, "its cgroup", e)),
            };
            cgroup_of(layout, &cgroup_text).unwrap_or_else(|| "/".into())
        }
    };
    let affinity = match proc.kernel().get_affinity(tid) {
        Ok(a) => a,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => {
            return Err(unreadable(
                tid,
                "its affinity",
                Path::new("sched_getaffinity"),
                e,
            ))
        }
    };
    let (kthread, pinned_by_kernel) = (stat.is_kthread(), stat.no_setaffinity());
    Ok(Some(TaskInfo {
        tid,
        tgid: pid,
        ppid: stat.ppid,
        comm: stat.comm,
        starttime: stat.starttime,
        kthread,
        pinned_by_kernel,
        affinity,
        cgroup,
    }))
}

/// The cgroup of each thread, by ID, relative to the hierarchy's root (`/`
/// for the root).
type CgroupMembers<'a> = HashMap<i32, &'a str>;

/// The cgroup of every thread listed by the cpuset hierarchy itself (v1
/// `tasks`, v2 `cgroup.threads` of each of `cgroups`, IDs as this PID
/// namespace sees them): one read per cgroup instead of one per thread. A
/// thread named twice (it moved while the lists were read) is in the cgroup
/// read later; a thread named nowhere (it moved or was born meanwhile, or a
/// list could not be read) has its own cgroup file read.
fn cgroup_members<'a>(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cgroups: &'a [(PathBuf, String)],
) -> CgroupMembers<'a> {
    let list = layout.thread_list();
    let mut out = CgroupMembers::new();
    for (dir, rel) in cgroups {
        let ids = kernel
            .read(&dir.join(list))
            .ok()
            .and_then(|text| cpushield_parse::id_list::parse_ids(list, &text).ok());
        for id in ids.unwrap_or_default() {
            out.insert(id, rel);
        }
    }
    out
}

/// Every cgroup of the hierarchy with its path from the root (`/` for the
/// root), the root first, then depth first.
fn hierarchy_cgroups(kernel: &dyn Kernel, layout: &CgroupLayout) -> Vec<(PathBuf, String)> {
    let list = layout.thread_list();
    let mut out = Vec::new();
    let mut todo = vec![(layout.root().to_path_buf(), "/".to_string())];
    while let Some((dir, rel)) = todo.pop() {
        // A child cgroup is a directory with a list of threads.
        for name in kernel.read_dir(&dir).unwrap_or_default() {
            let child = dir.join(&name);
            if kernel.exists(&child.join(list)) {
                let child_rel = if rel == "/" {
                    format!("/{name}")
                } else {
                    format!("{rel}/{name}")
                };
                todo.push((child, child_rel));
            }
        }
        out.push((dir, rel));
    }
    out
}

/// Reads every visible thread: each process listed in /proc, a process of
/// one thread from its own stat (whose `num_threads` says so), the threads
/// of a process of several each from theirs. Per thread that is one stat
/// read (the start time in it tells a task from a later one given the same
/// ID) and one sched_getaffinity; the cgroups come from the hierarchy's lists
/// ([`cgroup_members`]). A thread that cannot be read (other than one that
/// exited meanwhile) is an error, never skipped in silence.
pub fn read_tasks(kernel: &dyn Kernel, layout: &CgroupLayout) -> std::io::Result<Vec<TaskInfo>> {
    let proc = Procfs::new(kernel);
    let hierarchy = hierarchy_cgroups(kernel, layout);
    let cgroups = cgroup_members(kernel, layout, &hierarchy);
    let pids = proc.pids()?;
    let mut tasks = Vec::with_capacity(pids.len());
    for pid in pids {
        // Anything but a stat of one thread (several threads, no such
        // file, an error) is read thread by thread.
        let read = proc.process_bytes(pid, "stat");
        if let Ok(Some(stat)) = parse_stat(read, pid, || proc.process_dir(pid)) {
            if stat.num_threads == 1 {
                tasks.extend(task_from_stat(&proc, layout, &cgroups, pid, pid, stat)?);
                continue;
            }
        }
        let tids = match proc.threads(pid) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(e) => {
                return Err(std::io::Error::other(format!(
                    "process {pid}: cannot list its threads ({e}); the shield would miss them, so nothing was changed"
                )))
            }
        };
        for tid in tids {
            tasks.extend(read_task(&proc, layout, &cgroups, pid, tid)?);
        }
    }
    Ok(tasks)
}

/// The cgroups of the hierarchy whose tasks can run on a CPU of `cpus`:
/// the root (its own tasks are mostly kernel threads, which no cpuset
/// confines: a per-CPU kthread stays on its CPU whatever the root's CPUs
/// are), and every other cgroup whose CPUs in effect
/// ([`crate::layout::Cpusets::cpus_file`]) meet `cpus` or cannot be read.
/// A cgroup whose CPUs exclude `cpus` is left out: the kernel narrows every
/// affinity a task of it asks for (sched_setaffinity) to its cpuset's
/// CPUs, so such a task cannot reach them while it stays there; a task
/// moved into an overlapping cgroup is listed there at the next read.
fn cgroups_reaching(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cpus: &CpuSet,
) -> Vec<(PathBuf, String)> {
    hierarchy_cgroups(kernel, layout)
        .into_iter()
        .filter(|(dir, rel)| {
            rel == "/"
                || read_cpu_list(kernel, &dir.join(layout.cpus_file()))
                    .map_or(true, |own| own.intersects(cpus))
        })
        .collect()
}

/// What [`read_tasks_reaching`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reaching {
    /// Every task of the cgroups that can reach the CPUs asked for.
    Tasks(Vec<TaskInfo>),
    /// A task listed there whose process could not be found (it exited
    /// between the list and its files, or its ID names no process of this
    /// /proc): only a read of every task ([`read_tasks`]) is sure to see it.
    Unplaced(i32),
}

/// The tasks that can run on a CPU of `cpus`: those of the cgroups
/// [`cgroups_reaching`] keeps, read as [`read_tasks`] reads each one. On a
/// shielded machine that is the root's kernel threads, the shield's tasks
/// and any foreign cgroup on shielded CPUs, where [`read_tasks`] reads
/// every thread of the machine (100,000 on a big server), most of them in
/// the housekeeping cgroup. `tgids` gives the process of each thread known
/// from an earlier read; a thread not in it (or no longer in that process)
/// is found through its /proc/TID/status. A caller that must see every
/// task that escaped a cpuset by other means than the kernel's own checks
/// (a kernel thread given CPUs by the kernel) reads all of them now and
/// then.
pub fn read_tasks_reaching(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cpus: &CpuSet,
    tgids: &HashMap<i32, i32>,
) -> std::io::Result<Reaching> {
    let proc = Procfs::new(kernel);
    let reaching = cgroups_reaching(kernel, layout, cpus);
    let cgroups = cgroup_members(kernel, layout, &reaching);
    let mut tids: Vec<i32> = cgroups.keys().copied().collect();
    tids.sort_unstable();
    let mut tasks = Vec::with_capacity(tids.len());
    for tid in tids {
        if let Some(&pid) = tgids.get(&tid) {
            if let Some(task) = read_task(&proc, layout, &cgroups, pid, tid)? {
                tasks.push(task);
                continue;
            }
        }
        // A thread born since, or an ID given to another task meanwhile.
        let status = proc
            .process_file(tid, "status")
            .map_err(|e| unreadable_read(tid, "its status", e))?;
        let Some(pid) = status
            .as_deref()
            .and_then(cpushield_parse::pid_status::parse_tgid)
        else {
            return Ok(Reaching::Unplaced(tid));
        };
        match read_task(&proc, layout, &cgroups, pid, tid)? {
            Some(task) => tasks.push(task),
            None => return Ok(Reaching::Unplaced(tid)),
        }
    }
    Ok(Reaching::Tasks(tasks))
}

/// Reads every IRQ that has an affinity file, with names from /proc/interrupts.
pub fn read_irqs(kernel: &dyn Kernel) -> Vec<IrqInfo> {
    let names = cpushield_parse::interrupts::irq_names(
        &Procfs::new(kernel).interrupts().unwrap_or_default(),
    );
    read_irqs_named(kernel, &names)
}

/// [`read_irqs`] with the names of a reading of /proc/interrupts the caller
/// has made (by IRQ number; an IRQ without one is unnamed): the agent's
/// look takes its counters from the same reading.
pub fn read_irqs_named(kernel: &dyn Kernel, names: &BTreeMap<u32, String>) -> Vec<IrqInfo> {
    read_masks(kernel, |irq| {
        Some(names.get(&irq).cloned().unwrap_or_default())
    })
    .0
}

/// [`read_irqs`] with the names of `known` (a read a moment earlier, in IRQ
/// order) where it has the IRQ: /proc/interrupts, whose text is CPUs x IRQs
/// (23 MB at 512 CPUs and 4,096 IRQs), is read and parsed again only when
/// an IRQ is new since. For reads within one command: over a longer time an
/// IRQ number can be freed and given to another device.
pub fn read_irqs_knowing(kernel: &dyn Kernel, known: &[IrqInfo]) -> Vec<IrqInfo> {
    let name = |irq: u32| {
        known
            .binary_search_by_key(&irq, |i| i.irq)
            .ok()
            .map(|at| known[at].name.clone())
    };
    match read_masks(kernel, name) {
        (irqs, true) => irqs,
        (_, false) => read_irqs(kernel),
    }
}

/// Every IRQ with an affinity file, in IRQ order, each named by `name`;
/// and whether `name` knew every one (one it did not know is unnamed).
fn read_masks(kernel: &dyn Kernel, name: impl Fn(u32) -> Option<String>) -> (Vec<IrqInfo>, bool) {
    let mut irqs = Vec::new();
    let mut all_named = true;
    let Ok(numbers) = cpushield_kernel::irq::numbers(kernel) else {
        return (irqs, all_named);
    };
    for irq in numbers {
        let path = paths::irq_affinity(irq);
        let Ok(text) = read_trimmed(kernel, &path) else {
            continue;
        };
        let Ok(affinity) = CpuSet::parse_mask(&text) else {
            continue;
        };
        let name = name(irq).unwrap_or_else(|| {
            all_named = false;
            String::new()
        });
        irqs.push(IrqInfo {
            irq,
            mask_text: text,
            affinity,
            name,
        });
    }
    (irqs, all_named)
}

/// What a change left: each task of `before` with its affinity now (tasks
/// gone meanwhile are dropped) and every IRQ now. Tasks born meanwhile are
/// not in it: the state records what the shield set only on tasks it knows,
/// all of which were in `before`.
pub fn read_back(kernel: &dyn Kernel, before: &Snapshot) -> std::io::Result<Snapshot> {
    let mut tasks = Vec::with_capacity(before.tasks.len());
    for task in &before.tasks {
        match kernel.get_affinity(task.tid) {
            Ok(affinity) => tasks.push(TaskInfo {
                affinity,
                ..task.clone()
            }),
            Err(e) if is_gone(&e) => {}
            Err(e) => {
                return Err(unreadable(
                    task.tid,
                    "its affinity",
                    Path::new("sched_getaffinity"),
                    e,
                ))
            }
        }
    }
    Ok(Snapshot {
        tasks,
        irqs: read_irqs_knowing(kernel, &before.irqs),
        ..before.clone_without_tasks()
    })
}

impl Snapshot {
    /// A copy of everything but the tasks and IRQs (left empty).
    fn clone_without_tasks(&self) -> Snapshot {
        Snapshot {
            online: self.online.clone(),
            possible: self.possible,
            layout: self.layout.clone(),
            scope: self.scope,
            tasks: Vec::new(),
            irqs: Vec::new(),
            files: self.files.clone(),
            root_cpus: self.root_cpus.clone(),
            root_mems: self.root_mems.clone(),
            foreign_cgroups: self.foreign_cgroups.clone(),
            siblings: self.siblings.clone(),
            pid_namespace: self.pid_namespace.clone(),
            nodes: self.nodes.clone(),
            shield_mems: self.shield_mems.clone(),
        }
    }
}

/// Detects the scope: kthreadd (PID 2) is visible only from the initial PID namespace.
pub fn detect_scope(kernel: &dyn Kernel) -> Scope {
    if cpushield_kernel::namespace::shows_kthreadd(
        kernel,
        Path::new(cpushield_kernel::procfs::PROC),
    ) {
        Scope::System
    } else {
        Scope::Namespace
    }
}

/// SMT siblings of each online CPU.
pub fn read_siblings(kernel: &dyn Kernel, online: &CpuSet) -> BTreeMap<usize, CpuSet> {
    online
        .iter()
        .map(|cpu| {
            let set = cpushield_kernel::thread_siblings(kernel, cpu)
                .unwrap_or_else(|_| CpuSet::from_cpus([cpu]));
            (cpu, set)
        })
        .collect()
}

/// Files shielding may write, for the given layout.
pub fn candidate_files(layout: &CgroupLayout) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = vec![DEFAULT_IRQ_AFFINITY.into(), WORKQUEUE_CPUMASK.into()];
    files.extend(LTMR_SYSCTLS.iter().map(PathBuf::from));
    files.push(layout.root_setting());
    files
}

/// The PID namespace this process runs in (link text of /proc/self/ns/pid),
/// empty when unknown.
pub fn pid_namespace(kernel: &dyn Kernel) -> String {
    Procfs::new(kernel)
        .own_link("ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// Takes a snapshot of the system.
pub fn take(kernel: &dyn Kernel, layout: &CgroupLayout) -> std::io::Result<Snapshot> {
    let online = cpushield_kernel::online_cpus(kernel)?;
    let possible = cpushield_kernel::possible_cpus(kernel)
        .map(|p| p.last().map(|c| c + 1).unwrap_or(1))
        .unwrap_or_else(|_| online.last().map(|c| c + 1).unwrap_or(1));
    let root = layout.root();
    let root_cpus = read_cpu_list(kernel, &root.join(layout.root_cpus_file()))
        .unwrap_or_else(|_| online.clone());
    let root_mems =
        read_trimmed(kernel, &root.join(layout.root_mems_file())).unwrap_or_else(|_| "0".into());
    let mut foreign_cgroups = Vec::new();
    for name in kernel.read_dir(root).unwrap_or_default() {
        let dir = root.join(&name);
        if is_ours(&name) || !kernel.exists(&dir.join("cgroup.procs")) {
            continue;
        }
        let cpus = read_cpu_list(kernel, &dir.join("cpuset.cpus")).unwrap_or_default();
        foreign_cgroups.push((format!("/{name}"), cpus));
    }
    // A sysctl the loaded tuned profile sets is tuned's: the shield neither
    // writes nor restores it (crate::tuned).
    let tuned = crate::tuned::read_claim(kernel);
    let files = candidate_files(layout)
        .into_iter()
        .filter(|p| !tuned.as_ref().is_some_and(|c| c.owns_file(p)))
        .filter_map(|p| read_trimmed(kernel, &p).ok().map(|t| (p, t)))
        .collect();
    Ok(Snapshot {
        pid_namespace: pid_namespace(kernel),
        siblings: read_siblings(kernel, &online),
        online,
        possible,
        layout: layout.clone(),
        scope: detect_scope(kernel),
        tasks: read_tasks(kernel, layout)?,
        irqs: read_irqs(kernel),
        files,
        root_cpus,
        root_mems,
        foreign_cgroups,
        nodes: cpushield_kernel::numa::nodes(kernel),
        shield_mems: read_trimmed(kernel, &layout.shield_dir().join("cpuset.mems")).ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irqs_read_again_keep_known_names_and_read_proc_interrupts_only_for_a_new_irq() {
        let k = cpushield_kernel::FakeKernel::new();
        let interrupts = |irqs: &[(u32, &str)]| {
            let mut text = String::from("           CPU0       CPU1\n");
            for (irq, name) in irqs {
                text.push_str(&format!("{irq:>4}:  1  2  IR-PCI-MSI {irq}-edge  {name}\n"));
            }
            text
        };
        k.set_file("/proc/irq/40/smp_affinity", "3\n");
        k.set_file("/proc/interrupts", interrupts(&[(40, "eth0")]));
        let known = read_irqs(&k);
        assert_eq!(known[0].name, "eth0");
        // The same IRQs: their names come from the earlier read.
        k.set_file("/proc/interrupts", interrupts(&[(40, "renamed")]));
        assert_eq!(read_irqs_knowing(&k, &known)[0].name, "eth0");
        // A new IRQ: /proc/interrupts names them all again.
        k.set_file("/proc/irq/41/smp_affinity", "1\n");
        k.set_file(
            "/proc/interrupts",
            interrupts(&[(40, "eth0"), (41, "nvme0q1")]),
        );
        let again = read_irqs_knowing(&k, &known);
        let names: Vec<&str> = again.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["eth0", "nvme0q1"]);
    }

    #[test]
    fn a_thread_named_by_two_lists_is_in_the_cgroup_read_later() {
        let k = cpushield_kernel::FakeKernel::new();
        let root = "/sys/fs/cgroup/cpuset";
        k.set_file(format!("{root}/tasks"), "1\n5\n9\n");
        // 5 moved to /app while the lists were read: named in both.
        k.set_file(format!("{root}/app/tasks"), "3\n5\n");
        let layout = CgroupLayout::v1(root);
        let hierarchy = hierarchy_cgroups(&k, &layout);
        let members = cgroup_members(&k, &layout, &hierarchy);
        assert_eq!(members[&5], "/app");
        assert_eq!(members[&1], "/");
        assert_eq!(members[&3], "/app");
        assert!(!members.contains_key(&4));
    }

    fn fake_with_thread(stat: Vec<u8>) -> (cpushield_kernel::FakeKernel, CgroupLayout) {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file_bytes("/proc/7/task/7/stat", stat);
        k.set_file("/proc/7/task/7/cgroup", "3:cpuset:/\n");
        k.set_thread_affinity(7, CpuSet::from_cpus([0, 1]));
        let layout = CgroupLayout::v1("/sys/fs/cgroup/cpuset");
        (k, layout)
    }

    #[test]
    fn a_thread_named_with_invalid_utf8_is_seen_not_skipped() {
        let mut stat = b"7 (".to_vec();
        stat.extend_from_slice(&"worker-xéééé".as_bytes()[..15]);
        stat.extend_from_slice(b") S 1 7 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 2 0 5555 0 0\n");
        let (k, layout) = fake_with_thread(stat);
        let tasks = read_tasks(&k, &layout).unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].comm, "worker-xééé\u{fffd}");
        assert_eq!(tasks[0].starttime, 5555);
    }

    #[test]
    fn a_thread_that_cannot_be_read_fails_loudly_naming_it_and_the_path() {
        let (k, layout) =
            fake_with_thread(b"7 (x) S 1 7 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n".to_vec());
        k.refuse_reads("/proc/7/task/7/stat", libc::EACCES);
        let e = read_tasks(&k, &layout).unwrap_err().to_string();
        assert!(
            e.contains("thread 7") && e.contains("/proc/7/task/7/stat"),
            "{e}"
        );
    }

    #[test]
    fn a_malformed_stat_fails_loudly_instead_of_panicking() {
        let (k, layout) = fake_with_thread(b"7 (x) S 1".to_vec());
        let e = read_tasks(&k, &layout).unwrap_err().to_string();
        assert!(e.contains("thread 7") && e.contains("malformed"), "{e}");
    }

    #[test]
    fn a_thread_that_vanished_is_skipped() {
        let (k, layout) =
            fake_with_thread(b"7 (x) S 1 7 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n".to_vec());
        k.refuse_reads("/proc/7/task/7/stat", libc::ESRCH);
        assert!(read_tasks(&k, &layout).unwrap().is_empty());
    }

    #[test]
    fn every_process_in_proc_is_read_with_its_threads_each_in_the_cgroup_its_list_names() {
        let k = cpushield_kernel::FakeKernel::new();
        let root = "/sys/fs/cgroup/cpuset";
        k.set_file(format!("{root}/tasks"), "7\n8\n");
        k.set_file(format!("{root}/work/tasks"), "9\n");
        let stat = |tid: i32, threads: u32| {
            format!(
                "{tid} (t{tid}) S 1 {tid} 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 {threads} 0 {} 0 0\n",
                100 + tid
            )
        };
        k.set_file("/proc/7/stat", stat(7, 1));
        k.set_file("/proc/8/stat", stat(8, 3));
        for tid in [8, 9, 10] {
            k.set_file(format!("/proc/8/task/{tid}/stat"), stat(tid, 3));
        }
        // Named by no list (born or moved while the lists were read): its
        // own cgroup file says where it is.
        k.set_file("/proc/8/task/10/cgroup", "3:cpuset:/work\n");
        k.set_file("/proc/50/stat", stat(50, 1));
        k.set_file("/proc/50/task/50/cgroup", "3:cpuset:/\n");
        for tid in [7, 8, 9, 10, 50] {
            k.set_thread_affinity(tid, CpuSet::from_cpus([0]));
        }
        let layout = CgroupLayout::v1(root);
        let tasks = read_tasks(&k, &layout).unwrap();
        let got: Vec<(i32, i32, &str, u64)> = tasks
            .iter()
            .map(|t| (t.tid, t.tgid, t.cgroup.as_str(), t.starttime))
            .collect();
        assert_eq!(
            got,
            vec![
                (7, 7, "/", 107),
                (8, 8, "/", 108),
                (9, 8, "/work", 109),
                (10, 8, "/work", 110),
                (50, 50, "/", 150)
            ]
        );
    }
}
