//! A read-only picture of everything shielding looks at: tasks, IRQs, and the
//! files it may change. The planner works on this, never on the kernel.

use crate::layout::{cgroup_of, CgroupLayout};
use crate::pid_reuse::{new_ids_between, NewIds, PidCursor, UNREAD_START};
use crate::state::{SavedState, SavedTask};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{is_gone, read_cpu_list, read_trimmed, with_path, Kernel};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Path of the unbound workqueue cpumask.
pub const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";
/// Path of the default affinity of new IRQs.
pub const DEFAULT_IRQ_AFFINITY: &str = "/proc/irq/default_smp_affinity";
/// Sysctls the local-timer shield may change.
pub const LTMR_SYSCTLS: [&str; 3] = [
    "/proc/sys/kernel/watchdog_cpumask",
    "/proc/sys/kernel/timer_migration",
    "/proc/sys/vm/stat_interval",
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
    /// Parent process ID; 0 when not read (a task reset takes as the one
    /// saved, see [`take_with_saved`]).
    pub ppid: i32,
    /// Command name.
    pub comm: String,
    /// Start time in clock ticks since boot: with `tid` it names a task uniquely
    /// even if the PID is reused. [`UNREAD_START`] for a task whose stat the
    /// first shield did not read (see [`Snapshot::unread_start_before`]).
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
    /// All IRQs with an affinity file.
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
    /// The PID allocator's position before the tasks were read (see
    /// [`crate::pid_reuse`]); `None` where the kernel does not show it.
    #[serde(default)]
    pub pid_cursor: Option<PidCursor>,
    /// Set when tasks were read without their stat ([`take_first`]): each
    /// such task carries start time [`UNREAD_START`] and started before this
    /// tick (see [`crate::pid_reuse`]).
    #[serde(default)]
    pub unread_start_before: Option<u64>,
}

/// Names of the cgroups cpushield creates, relative to the hierarchy root.
pub const SHIELD_CGROUP: &str = "cpushield-shield";
/// The housekeeping cgroup (v1 only; v2 partitions need none).
pub const SYSTEM_CGROUP: &str = "cpushield-system";

/// Whether a cgroup path (as in /proc/PID/cgroup) is one of ours.
pub fn is_ours(cgroup: &str) -> bool {
    let top = cgroup
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    top == SHIELD_CGROUP || top == SYSTEM_CGROUP
}

/// Whether a cgroup path (as in /proc/PID/cgroup) belongs to Kubernetes pods.
/// The kubelet's CPU manager owns these tasks' CPUs, so the shield leaves them be.
pub use cpushield_parse::pid_cgroup::is_kubepods;

/// A task the tool could not read: shielding must not go on without it.
fn unreadable(tid: i32, what: &str, path: &Path, error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!(
        "thread {tid}: cannot read {what} ({}: {error}); the shield would miss this task, so nothing was changed",
        path.display()
    ))
}

/// How a message names task `tid`: with its command name, read now where the
/// snapshot did not read it (the first shield reads leaders without it).
pub fn task_label(kernel: &dyn Kernel, tid: i32, comm: &str) -> String {
    let comm = if comm.is_empty() {
        kernel
            .read(std::path::Path::new(&format!("/proc/{tid}/comm")))
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

/// Reads one thread; `Ok(None)` if it vanished meanwhile (ENOENT, ESRCH).
/// Any other failure is an error naming the thread and the path: a task the
/// tool cannot see would escape the shield.
pub fn read_task(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    pid: i32,
    tid: i32,
) -> std::io::Result<Option<TaskInfo>> {
    read_task_in(kernel, layout, &CgroupMembers::default(), pid, tid)
}

/// Reads and parses a stat file; `Ok(None)` if the task vanished meanwhile.
fn read_stat(
    kernel: &dyn Kernel,
    tid: i32,
    stat_path: &Path,
) -> std::io::Result<Option<cpushield_parse::pid_stat::ProcStat>> {
    let stat_bytes = match kernel.read_bytes(stat_path) {
        Ok(b) => b,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(unreadable(tid, "its stat", stat_path, e)),
    };
    if stat_bytes.is_empty() {
        // An exiting thread shows an empty file for a moment.
        return Ok(None);
    }
    cpushield_parse::pid_stat::parse_stat(&stat_bytes)
        .map(Some)
        .map_err(|e| unreadable(tid, "its stat", stat_path, e))
}

/// [`read_task`] with the cgroups already read from the hierarchy
/// ([`cgroup_members`]); a thread missing there has its own cgroup file read.
fn read_task_in(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cgroups: &CgroupMembers,
    pid: i32,
    tid: i32,
) -> std::io::Result<Option<TaskInfo>> {
    let base = PathBuf::from(format!("/proc/{pid}/task/{tid}"));
    let Some(stat) = read_stat(kernel, tid, &base.join("stat"))? else {
        return Ok(None);
    };
    task_from_stat(kernel, layout, cgroups, pid, tid, stat)
}

/// Completes a thread from its parsed stat: its cgroup and its affinity.
fn task_from_stat(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cgroups: &CgroupMembers,
    pid: i32,
    tid: i32,
    stat: cpushield_parse::pid_stat::ProcStat,
) -> std::io::Result<Option<TaskInfo>> {
    let cgroup = match cgroups.get(tid) {
        Some(c) => c.to_string(),
        None => {
            let cgroup_path = PathBuf::from(format!("/proc/{pid}/task/{tid}/cgroup"));
            let cgroup_text = match kernel.read(&cgroup_path) {
                Ok(t) => t,
                Err(e) if is_gone(&e) => return Ok(None),
                Err(e) => return Err(unreadable(tid, "its cgroup", &cgroup_path, e)),
            };
            cgroup_of(layout, &cgroup_text).unwrap_or_else(|| "/".into())
        }
    };
    let affinity = match kernel.get_affinity(tid) {
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

/// Control files of a cgroup directory, by prefix: entries named so are not
/// child cgroups (a child named so anyway is read from /proc instead).
const CONTROL_FILES: [&str; 16] = [
    "cgroup.",
    "cpuset.",
    "cpu.",
    "cpuacct.",
    "memory.",
    "io.",
    "pids.",
    "hugetlb.",
    "rdma.",
    "misc.",
    "blkio.",
    "net_",
    "devices.",
    "freezer.",
    "perf_event.",
    "notify_on_release",
];

/// The cgroup of each thread the cpuset hierarchy's lists name.
#[derive(Debug, Clone, Default)]
pub struct CgroupMembers {
    /// Thread ID to cgroup path relative to the hierarchy's root (`/` for the root).
    members: BTreeMap<i32, String>,
}

impl CgroupMembers {
    /// The members of the cgroups `lists` (each a cgroup's path and the IDs
    /// its list names); a thread named twice (it moved while the lists were
    /// read) is in the cgroup listed later.
    fn from_lists(lists: Vec<(String, Vec<i32>)>) -> Self {
        let mut out = Self::default();
        for (cgroup, ids) in lists {
            for id in ids {
                out.members.insert(id, cgroup.clone());
            }
        }
        out
    }

    /// Adds the members of `later`, read after these: where both name a
    /// thread, `later` says where it is.
    fn extend_with(&mut self, later: Self) {
        self.members.extend(later.members);
    }

    /// The cgroup of thread `tid`, when a list named it.
    pub fn get(&self, tid: i32) -> Option<&str> {
        self.members.get(&tid).map(String::as_str)
    }

    /// Whether a list named thread `tid`.
    pub fn contains(&self, tid: i32) -> bool {
        self.members.contains_key(&tid)
    }

    /// Every thread ID named, in order.
    pub fn ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.members.keys().copied()
    }

    /// How many threads the lists name.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the lists name no thread.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// The cgroup of every thread listed by the cpuset hierarchy itself (v1
/// `tasks`, v2 `cgroup.threads` of each cgroup, IDs as this PID namespace
/// sees them): one read per cgroup instead of one per thread. Threads it
/// misses (created meanwhile, a cgroup that could not be read) are read from
/// /proc one by one.
pub fn cgroup_members(kernel: &dyn Kernel, layout: &CgroupLayout) -> CgroupMembers {
    hierarchy_lists(kernel, layout).0
}

/// [`cgroup_members`], and whether every cgroup's list could be read: then
/// the map names every thread this PID namespace sees (every task is in
/// exactly one cgroup of the hierarchy), without listing /proc.
fn hierarchy_lists(kernel: &dyn Kernel, layout: &CgroupLayout) -> (CgroupMembers, bool) {
    let (out, complete) = read_lists(kernel, layout, &hierarchy_cgroups(kernel, layout));
    let complete = complete && !out.is_empty();
    (out, complete)
}

/// The name of a cgroup's list of threads in this hierarchy.
fn thread_list(layout: &CgroupLayout) -> &'static str {
    if layout.is_v2() {
        "cgroup.threads"
    } else {
        "tasks"
    }
}

/// Every cgroup of the hierarchy with its path from the root (`/` for the
/// root), the root first, then depth first.
fn hierarchy_cgroups(kernel: &dyn Kernel, layout: &CgroupLayout) -> Vec<(PathBuf, String)> {
    let list = thread_list(layout);
    let mut out = Vec::new();
    let mut todo = vec![(layout.root().to_path_buf(), "/".to_string())];
    while let Some((dir, rel)) = todo.pop() {
        for name in kernel.read_dir(&dir).unwrap_or_default() {
            if name == list
                || name == "release_agent"
                || CONTROL_FILES.iter().any(|c| name.starts_with(c))
            {
                continue;
            }
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

/// Reads the thread list of each cgroup of `cgroups`, in order: every thread
/// listed with its cgroup, and whether every list could be read.
fn read_lists(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cgroups: &[(PathBuf, String)],
) -> (CgroupMembers, bool) {
    let list = thread_list(layout);
    let mut lists = Vec::with_capacity(cgroups.len());
    let mut complete = true;
    for (dir, rel) in cgroups {
        let ids = kernel
            .read(&dir.join(list))
            .ok()
            .and_then(|text| cpushield_parse::id_list::parse_ids(list, &text).ok());
        let Some(ids) = ids else {
            complete = false;
            continue;
        };
        lists.push((rel.clone(), ids));
    }
    (CgroupMembers::from_lists(lists), complete)
}

/// The cgroup likely to hold most threads: cpushield's housekeeping cpuset
/// while a v1 shield is up, otherwise the root.
fn likely_fullest(kernel: &dyn Kernel, layout: &CgroupLayout) -> PathBuf {
    let system = layout.root().join(SYSTEM_CGROUP);
    if !layout.is_v2() && kernel.exists(&system.join(thread_list(layout))) {
        system
    } else {
        layout.root().to_path_buf()
    }
}

/// Reads every visible thread. A thread that cannot be read (other than one
/// that exited meanwhile) is an error, never skipped in silence.
///
/// The threads come from the cpuset hierarchy's own lists
/// ([`cgroup_members`]), read twice but the fullest cgroup once (a task
/// moving between cgroups during the first reading is in the second), not
/// from listing /proc: every task is
/// in one of its cgroups, and one read per cgroup costs less than listing
/// /proc. When a list could not be read, /proc is listed instead. Per thread this is one
/// stat read and one sched_getaffinity (the stat's `num_threads` tells a
/// process of one thread, whose ID is its process ID; a thread of a process
/// of several has its process found in its status and its process's threads
/// read together).
pub fn read_tasks(kernel: &dyn Kernel, layout: &CgroupLayout) -> std::io::Result<Vec<TaskInfo>> {
    Ok(read_tasks_knowing(kernel, layout, &Reading::Whole)?.0)
}

/// How a snapshot reads its tasks.
enum Reading<'a> {
    /// Every task whole.
    Whole,
    /// The first shield's: a thread-group leader by its affinity alone where
    /// [`StatFree`] allows, given the PID allocator's position and the uptime
    /// read before the lists.
    First {
        cursor: Option<PidCursor>,
        uptime: Option<u64>,
    },
    /// Against a saved state ([`take_with_saved`]).
    Saved(&'a SavedState),
}

/// The thread-group leaders the first shield reads without their stat: those
/// listed in the hierarchy's `cgroup.procs`, but kernel threads and tasks
/// given their IDs while the lists were read.
struct StatFree {
    leaders: HashSet<i32>,
    given_meanwhile: NewIds,
}

impl StatFree {
    fn takes(&self, tid: i32) -> bool {
        self.leaders.contains(&tid) && !self.given_meanwhile.may_contain(tid)
    }
}

/// Test hook: where set, a first shield that listed its tasks within one
/// tick waits for the next tick (up to 100 ms) instead of reading every task
/// whole, so that a small test machine takes the path a large one takes.
/// Unset in normal use.
pub const WAIT_TICK_ENV: &str = "CPUSHIELD_TEST_WAIT_TICK";

/// The uptime in ticks where a tick is what a stat's start time counts (the
/// uptime's hundredths of a second where USER_HZ is 100); `None` otherwise.
fn uptime_ticks(kernel: &dyn Kernel) -> Option<u64> {
    if cpushield_kernel::user_hz() != 100 {
        return None;
    }
    let text = kernel.read(Path::new("/proc/uptime")).ok()?;
    cpushield_parse::uptime::parse_centiseconds(&text).ok()
}

/// Decides, once the task lists of `cgroups` are read, which tasks the first
/// shield reads without their stat, and the tick before which all of those
/// started (see [`crate::pid_reuse`]). `None` (every task read whole) where
/// a fact it needs cannot be read: a `cgroup.procs` list, kthreadd's children
/// (CONFIG_PROC_CHILDREN) where kernel threads are visible, the allocator's
/// position; where the allocator may have gone round meanwhile; and where the
/// uptime has not yet reached the next tick after `uptime_before` (a few
/// tasks, listed in under a tick: reading them whole costs less than waiting).
fn decide_stat_free(
    kernel: &dyn Kernel,
    cgroups: &[(PathBuf, String)],
    cursor_before: Option<PidCursor>,
    uptime_before: Option<u64>,
) -> Option<(StatFree, u64)> {
    let (cursor_before, uptime_before) = (cursor_before?, uptime_before?);
    let mut leaders = HashSet::new();
    for (dir, _) in cgroups {
        let text = kernel.read(&dir.join("cgroup.procs")).ok()?;
        leaders.extend(cpushield_parse::id_list::parse_ids("cgroup.procs", &text).ok()?);
    }
    if detect_scope(kernel) == Scope::System {
        // Every kernel thread but kthreadd is kthreadd's child: their flags
        // (per-CPU, pinned) are in their stat.
        let text = kernel.read(Path::new("/proc/2/task/2/children")).ok()?;
        leaders.remove(&2);
        for pid in cpushield_parse::id_list::parse_ids("/proc/2/task/2/children", &text).ok()? {
            leaders.remove(&pid);
        }
    }
    let given_meanwhile = new_ids_between(&cursor_before, &read_pid_cursor(kernel)?)?;
    let start_before = uptime_before + 1;
    let mut uptime = uptime_ticks(kernel)?;
    if std::env::var_os(WAIT_TICK_ENV).is_some() {
        for _ in 0..100 {
            if uptime >= start_before {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            uptime = uptime_ticks(kernel)?;
        }
    }
    (uptime >= start_before).then_some((
        StatFree {
            leaders,
            given_meanwhile,
        },
        start_before,
    ))
}

/// Saved tasks whose IDs cannot have been given to a new task since they
/// were saved: reset takes such a task as the one saved and reads only its
/// affinity, not its stat.
struct KnownTasks<'a> {
    saved: &'a BTreeMap<i32, SavedTask>,
    new_ids: NewIds,
}

impl KnownTasks<'_> {
    /// The saved task with ID `tid` when its ID cannot have been given again.
    fn original(&self, tid: i32) -> Option<&SavedTask> {
        if self.new_ids.may_contain(tid) {
            return None;
        }
        self.saved.get(&tid)
    }
}

/// The cpuset hierarchy's task lists, as a snapshot reads them.
struct HierarchyLists {
    /// Every cgroup, the one read last (the fullest) last.
    order: Vec<(PathBuf, String)>,
    /// The cgroup of each thread listed.
    cgroups: CgroupMembers,
    /// Whether every list could be read twice (else the tasks are found by
    /// listing /proc, and `cgroups` holds the first reading).
    complete: bool,
}

/// Reads every cgroup's task list, then again every one but the last read
/// ([`HierarchyLists`]).
fn read_hierarchy_lists(kernel: &dyn Kernel, layout: &CgroupLayout) -> HierarchyLists {
    // The kernel builds and sorts a cgroup's whole list on each read (about
    // 0.8 us a thread at 50,000): the fullest cgroup is read last, so that
    // the second reading below can leave it out.
    let mut order = hierarchy_cgroups(kernel, layout);
    let fullest = likely_fullest(kernel, layout);
    if let Some(at) = order.iter().position(|(dir, _)| *dir == fullest) {
        let dir = order.remove(at);
        order.push(dir);
    }
    let (mut cgroups, complete) = read_lists(kernel, layout, &order);
    let complete = complete && !cgroups.is_empty();
    // A task that moved, while the lists were read, from a cgroup not read yet
    // to one already read is in neither list (listing /proc has no such gap):
    // a second reading finds it where it went. It reads every cgroup but the
    // last one read, into which no task can have moved unseen, and the
    // cgroups created meanwhile.
    let (again, complete_again) = if complete {
        let last = order.last().map(|(dir, _)| dir.clone());
        let again: Vec<(PathBuf, String)> = hierarchy_cgroups(kernel, layout)
            .into_iter()
            .filter(|(dir, _)| Some(dir) != last.as_ref())
            .collect();
        read_lists(kernel, layout, &again)
    } else {
        (CgroupMembers::default(), false)
    };
    if complete && complete_again {
        cgroups.extend_with(again);
    }
    HierarchyLists {
        order,
        cgroups,
        complete: complete && complete_again,
    }
}

/// [`read_tasks`] as `reading` says, and the tick before which the tasks
/// read without their stat started (`None` when every task was read whole).
fn read_tasks_knowing(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    reading: &Reading,
) -> std::io::Result<(Vec<TaskInfo>, Option<u64>)> {
    let saved = match reading {
        Reading::Saved(saved) => Some(*saved),
        _ => None,
    };
    let mut laps = crate::timing::Laps::from_env();
    let HierarchyLists {
        order,
        cgroups,
        complete,
    } = read_hierarchy_lists(kernel, layout);
    laps.lap("  snapshot: the hierarchy's task lists (the fullest once)");
    if !complete {
        return Ok((
            read_processes(kernel, layout, &cgroups, &list_proc(kernel)?)?,
            None,
        ));
    }
    let (stat_free, unread_start_before) = match reading {
        Reading::First { cursor, uptime } => {
            let decided = decide_stat_free(kernel, &order, *cursor, *uptime);
            laps.lap("  snapshot: the leaders' lists");
            decided.unzip()
        }
        _ => (None, None),
    };
    // Read after the lists: every ID listed was given before this cursor.
    let known = saved.and_then(|s| {
        let then = s.pid_cursor.as_ref()?;
        let new_ids = new_ids_between(then, &read_pid_cursor(kernel)?)?;
        Some(KnownTasks {
            saved: &s.tasks,
            new_ids,
        })
    });
    let tids: Vec<i32> = cgroups.ids().collect();
    let tasks = read_listed(
        kernel,
        layout,
        &cgroups,
        &tids,
        known.as_ref(),
        stat_free.as_ref(),
    )?;
    laps.lap(if known.is_some() {
        "  snapshot: tasks (the saved ones by their affinity)"
    } else if stat_free.is_some() {
        "  snapshot: tasks (the leaders by their affinity)"
    } else {
        "  snapshot: tasks"
    });
    Ok((tasks, unread_start_before))
}

/// `task` with its affinity read now; `Ok(None)` when it is gone.
fn with_affinity(kernel: &dyn Kernel, task: TaskInfo) -> std::io::Result<Option<TaskInfo>> {
    match kernel.get_affinity(task.tid) {
        Ok(affinity) => Ok(Some(TaskInfo { affinity, ..task })),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(unreadable(
            task.tid,
            "its affinity",
            Path::new("sched_getaffinity"),
            e,
        )),
    }
}

/// Reads each thread of `tids` (IDs from the hierarchy's lists): a task of
/// `known` by its affinity alone; a leader `stat_free` takes by its affinity
/// alone too (no command name, start time [`UNREAD_START`]); a process of one
/// thread from /proc/TID/stat alone; a thread of a process of several with
/// the other listed threads of that process (found from its status' `Tgid`).
fn read_listed(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cgroups: &CgroupMembers,
    tids: &[i32],
    known: Option<&KnownTasks>,
    stat_free: Option<&StatFree>,
) -> std::io::Result<Vec<TaskInfo>> {
    let mut tasks = Vec::with_capacity(tids.len());
    let mut done = HashSet::new();
    let cgroup_of = |tid: i32| cgroups.get(tid).unwrap_or("/").to_string();
    for &tid in tids {
        if done.contains(&tid) {
            continue;
        }
        let without_stat = if let Some(saved) = known.and_then(|k| k.original(tid)) {
            Some(TaskInfo {
                tid,
                tgid: saved.tgid,
                ppid: 0,
                comm: saved.comm.clone(),
                starttime: saved.starttime,
                kthread: saved.kthread,
                pinned_by_kernel: saved.pinned_by_kernel,
                affinity: CpuSet::new(),
                cgroup: cgroup_of(tid),
            })
        } else if stat_free.is_some_and(|s| s.takes(tid)) {
            Some(TaskInfo {
                tid,
                tgid: tid,
                ppid: 0,
                comm: String::new(),
                starttime: UNREAD_START,
                kthread: false,
                pinned_by_kernel: false,
                affinity: CpuSet::new(),
                cgroup: cgroup_of(tid),
            })
        } else {
            None
        };
        if let Some(task) = without_stat {
            done.insert(tid);
            tasks.extend(with_affinity(kernel, task)?);
            continue;
        }
        let pid = match read_stat(kernel, tid, Path::new(&format!("/proc/{tid}/stat"))) {
            Ok(Some(stat)) if stat.num_threads == 1 => {
                if let Some(task) = task_from_stat(kernel, layout, cgroups, tid, tid, stat)? {
                    tasks.push(task);
                }
                continue;
            }
            // One of several threads: its process, from its status.
            Ok(Some(_)) => kernel
                .read(Path::new(&format!("/proc/{tid}/status")))
                .ok()
                .and_then(|status| cpushield_parse::pid_status::parse_tgid(&status))
                .unwrap_or(tid),
            // No such file or an error: read as a process, as a /proc entry
            // would be (an error is then named with its path).
            _ => tid,
        };
        // Only the threads the lists hold: one started since (cpushield's own
        // reading thread among them) is left to the next reading, as a
        // process started since is.
        let listed = |t: i32| cgroups.contains(t) && done.insert(t);
        read_process_threads(kernel, layout, cgroups, pid, listed, &mut tasks)?;
    }
    Ok(tasks)
}

/// Reads every thread of process `pid` that `take` accepts into `out`; a
/// process gone meanwhile adds nothing. A process whose threads cannot be
/// listed is an error: the shield would miss them.
fn read_process_threads(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cgroups: &CgroupMembers,
    pid: i32,
    mut take: impl FnMut(i32) -> bool,
    out: &mut Vec<TaskInfo>,
) -> std::io::Result<()> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let tids = match kernel.read_dir(&dir) {
        Ok(t) => t,
        Err(e) if is_gone(&e) => return Ok(()),
        Err(e) => {
            return Err(std::io::Error::other(format!(
                "process {pid}: cannot list its threads ({}); the shield would miss them, so nothing was changed",
                with_path(e, &dir)
            )))
        }
    };
    for tid in tids.iter().filter_map(|t| t.parse::<i32>().ok()) {
        if take(tid) {
            if let Some(task) = read_task_in(kernel, layout, cgroups, pid, tid)? {
                out.push(task);
            }
        }
    }
    Ok(())
}

/// Process IDs listed in /proc, in order.
fn list_proc(kernel: &dyn Kernel) -> std::io::Result<Vec<i32>> {
    let entries = kernel
        .read_dir(Path::new("/proc"))
        .map_err(|e| with_path(e, Path::new("/proc")))?;
    let mut pids: Vec<i32> = entries.iter().filter_map(|e| e.parse().ok()).collect();
    pids.sort_unstable();
    Ok(pids)
}

/// Reads every thread of each process in `pids`, in order.
fn read_processes(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    cgroups: &CgroupMembers,
    pids: &[i32],
) -> std::io::Result<Vec<TaskInfo>> {
    let mut tasks = Vec::with_capacity(pids.len());
    for &pid in pids {
        // A process of one thread: its stat is its thread's. Anything else
        // (several threads, no such file, an error) is read thread by thread.
        if let Ok(Some(stat)) = read_stat(kernel, pid, Path::new(&format!("/proc/{pid}/stat"))) {
            if stat.num_threads == 1 {
                if let Some(task) = task_from_stat(kernel, layout, cgroups, pid, pid, stat)? {
                    tasks.push(task);
                }
                continue;
            }
        }
        read_process_threads(kernel, layout, cgroups, pid, |_| true, &mut tasks)?;
    }
    Ok(tasks)
}

/// Reads every IRQ that has an affinity file, with names from /proc/interrupts.
pub fn read_irqs(kernel: &dyn Kernel) -> Vec<IrqInfo> {
    let names = cpushield_parse::interrupts::irq_names(
        &kernel
            .read(Path::new("/proc/interrupts"))
            .unwrap_or_default(),
    );
    let mut irqs = Vec::new();
    let Ok(entries) = kernel.read_dir(Path::new("/proc/irq")) else {
        return irqs;
    };
    let mut numbers: Vec<u32> = entries.iter().filter_map(|e| e.parse().ok()).collect();
    numbers.sort_unstable();
    for irq in numbers {
        let path = PathBuf::from(format!("/proc/irq/{irq}/smp_affinity"));
        let Ok(text) = read_trimmed(kernel, &path) else {
            continue;
        };
        let Ok(affinity) = CpuSet::parse_mask(&text) else {
            continue;
        };
        irqs.push(IrqInfo {
            irq,
            mask_text: text,
            affinity,
            name: names.get(&irq).cloned().unwrap_or_default(),
        });
    }
    irqs
}

/// What a change left, read back cheaply: each task of `before` with its
/// affinity now (one sched_getaffinity each; tasks gone meanwhile are
/// dropped) and every IRQ now. Tasks born meanwhile are not in it: the state
/// records what the shield set only on tasks it knows, all of which were in
/// `before`. A task in `left` (what the change's own affinity steps read
/// last, [`crate::apply::Outcome::affinities_left`]) is not read again.
pub fn read_back(
    kernel: &dyn Kernel,
    before: &Snapshot,
    left: &[(i32, CpuSet)],
) -> std::io::Result<Snapshot> {
    let left: HashMap<i32, &CpuSet> = left.iter().map(|(tid, cpus)| (*tid, cpus)).collect();
    let mut tasks = Vec::with_capacity(before.tasks.len());
    for task in &before.tasks {
        if let Some(cpus) = left.get(&task.tid) {
            tasks.push(TaskInfo {
                affinity: (*cpus).clone(),
                ..task.clone()
            });
            continue;
        }
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
        irqs: read_irqs(kernel),
        ..before.clone_without_tasks()
    })
}

/// A new snapshot of the tasks of `before` only: each one's affinity and
/// cgroup now (tasks gone meanwhile dropped), every IRQ and file now. It
/// skips what a full [`take`] reads per task (its stat) and the tasks born
/// since, so it is for a reset pass once cpushield's cgroups are gone: a task
/// born then is not in them, and reset leaves such a task as it is.
pub fn refresh(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    before: &Snapshot,
) -> std::io::Result<Snapshot> {
    let cgroups = cgroup_members(kernel, layout);
    let mut tasks = Vec::with_capacity(before.tasks.len());
    for task in &before.tasks {
        let stat = cpushield_parse::pid_stat::ProcStat {
            pid: task.tid,
            comm: task.comm.to_string(),
            state: 'S',
            ppid: task.ppid,
            flags: 0,
            starttime: task.starttime,
            num_threads: 1,
        };
        if let Some(now) = task_from_stat(kernel, layout, &cgroups, task.tgid, task.tid, stat)? {
            tasks.push(TaskInfo {
                kthread: task.kthread,
                pinned_by_kernel: task.pinned_by_kernel,
                ..now
            });
        }
    }
    let files = candidate_files(layout)
        .into_iter()
        .filter_map(|p| read_trimmed(kernel, &p).ok().map(|t| (p, t)))
        .collect();
    Ok(Snapshot {
        tasks,
        irqs: read_irqs(kernel),
        files,
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
            pid_cursor: self.pid_cursor,
            unread_start_before: self.unread_start_before,
        }
    }
}

/// Detects the scope: kthreadd (PID 2) is visible only from the initial PID namespace.
pub fn detect_scope(kernel: &dyn Kernel) -> Scope {
    match kernel.read(Path::new("/proc/2/comm")) {
        Ok(comm) if comm.trim() == "kthreadd" => Scope::System,
        _ => Scope::Namespace,
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
    match layout {
        CgroupLayout::V1 { root } => files.push(root.join("cpuset.sched_load_balance")),
        CgroupLayout::V2 { root } => files.push(root.join("cgroup.subtree_control")),
    }
    files
}

/// The PID namespace this process runs in (link text of /proc/self/ns/pid),
/// empty when unknown.
pub fn pid_namespace(kernel: &dyn Kernel) -> String {
    kernel
        .read_link(Path::new("/proc/self/ns/pid"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// The PID allocator's position and the kernel's task counters now; `None`
/// when one of them cannot be read (a kernel without `ns_last_pid`).
pub fn read_pid_cursor(kernel: &dyn Kernel) -> Option<PidCursor> {
    let number = |path: &str| read_trimmed(kernel, Path::new(path)).ok()?.parse().ok();
    let forks = kernel.read(Path::new("/proc/stat")).ok()?;
    let tasks = kernel.read(Path::new("/proc/loadavg")).ok()?;
    Some(PidCursor {
        last_pid: number("/proc/sys/kernel/ns_last_pid")?,
        pid_max: number("/proc/sys/kernel/pid_max")?,
        forks: cpushield_parse::stat::parse_forks(&forks).ok()?,
        tasks: cpushield_parse::loadavg::parse_total_tasks(&tasks).ok()?,
    })
}

/// Takes a snapshot of the system.
pub fn take(kernel: &dyn Kernel, layout: &CgroupLayout) -> std::io::Result<Snapshot> {
    take_knowing(kernel, layout, Reading::Whole)
}

/// [`take`] for the first shield, which saves what it reads: a thread-group
/// leader that is not a kernel thread is read by its affinity alone (one
/// sched_getaffinity instead of its stat file, most of a snapshot's cost),
/// with no command name and start time [`UNREAD_START`]; the snapshot's
/// `unread_start_before` then says when all of those started (see
/// [`crate::pid_reuse`]). Where that cannot be shown, every task is read
/// whole, as by [`take`]. Any later snapshot compared with the state saved
/// from this one is taken by [`take_with_saved`].
pub fn take_first(kernel: &dyn Kernel, layout: &CgroupLayout) -> std::io::Result<Snapshot> {
    take_knowing(
        kernel,
        layout,
        Reading::First {
            cursor: None,
            uptime: None,
        },
    )
}

/// [`take`] to compare with `saved` (a shield again, unshield, reset): a task
/// whose ID the saved state names and the PID allocator cannot have given
/// again since (see [`crate::pid_reuse`]) is the task saved, so only its
/// affinity and cgroup are read; its comm, start time and kernel-thread flags
/// are the saved ones and its parent is not read (0). Every other task is read
/// whole, as by [`take`], and one that is a saved task
/// ([`crate::pid_reuse::same_task`]) carries the saved start time.
pub fn take_with_saved(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    saved: &SavedState,
) -> std::io::Result<Snapshot> {
    take_knowing(kernel, layout, Reading::Saved(saved))
}

fn take_knowing(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    reading: Reading,
) -> std::io::Result<Snapshot> {
    // Before the tasks are read: every task created later has a later ID.
    let pid_cursor = read_pid_cursor(kernel);
    let reading = match reading {
        // Right after the position: every task that exists then started in
        // this tick or before.
        Reading::First { .. } => Reading::First {
            cursor: pid_cursor,
            uptime: uptime_ticks(kernel),
        },
        other => other,
    };
    let online = cpushield_kernel::online_cpus(kernel)?;
    let possible = cpushield_kernel::possible_cpus(kernel)
        .map(|p| p.last().map(|c| c + 1).unwrap_or(1))
        .unwrap_or_else(|_| online.last().map(|c| c + 1).unwrap_or(1));
    let root = layout.root();
    let cpus_file = if layout.is_v2() {
        "cpuset.cpus.effective"
    } else {
        "cpuset.cpus"
    };
    let root_cpus = read_cpu_list(kernel, &root.join(cpus_file)).unwrap_or_else(|_| online.clone());
    let mems_file = if layout.is_v2() {
        "cpuset.mems.effective"
    } else {
        "cpuset.mems"
    };
    let root_mems = read_trimmed(kernel, &root.join(mems_file)).unwrap_or_else(|_| "0".into());
    let mut foreign_cgroups = Vec::new();
    for name in kernel.read_dir(root).unwrap_or_default() {
        let dir = root.join(&name);
        if is_ours(&name) || !kernel.exists(&dir.join("cgroup.procs")) {
            continue;
        }
        let cpus = read_cpu_list(kernel, &dir.join("cpuset.cpus")).unwrap_or_default();
        foreign_cgroups.push((format!("/{name}"), cpus));
    }
    let files = candidate_files(layout)
        .into_iter()
        .filter_map(|p| read_trimmed(kernel, &p).ok().map(|t| (p, t)))
        .collect();
    let pid_namespace = pid_namespace(kernel);
    // Saved task IDs name tasks only in the namespace they were saved in.
    let reading = match reading {
        Reading::Saved(s) if !s.pid_namespace.is_empty() && s.pid_namespace != pid_namespace => {
            Reading::Whole
        }
        other => other,
    };
    let (mut tasks, unread_start_before) = read_tasks_knowing(kernel, layout, &reading)?;
    if let Reading::Saved(saved) = reading {
        for task in &mut tasks {
            task.starttime = saved.start_as_saved(task.tid, task.starttime);
        }
    }
    Ok(Snapshot {
        pid_namespace,
        siblings: read_siblings(kernel, &online),
        online,
        possible,
        layout: layout.clone(),
        scope: detect_scope(kernel),
        tasks,
        pid_cursor,
        unread_start_before,
        irqs: read_irqs(kernel),
        files,
        root_cpus,
        root_mems,
        foreign_cgroups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_members_put_a_thread_named_twice_where_the_later_list_says() {
        let mut members = CgroupMembers::from_lists(vec![
            ("/".into(), vec![1, 5, 9]),
            // 5 moved to /app while the lists were read: named in both.
            ("/app".into(), vec![3, 5]),
        ]);
        assert_eq!(members.ids().collect::<Vec<_>>(), vec![1, 3, 5, 9]);
        assert_eq!(members.get(5), Some("/app"));
        assert_eq!(members.get(1), Some("/"));
        assert_eq!(members.get(4), None);
        // The second reading: 9 moved to /app, 12 was born there.
        members.extend_with(CgroupMembers::from_lists(vec![(
            "/app".into(),
            vec![9, 12],
        )]));
        assert_eq!(members.len(), 5);
        assert_eq!(members.get(9), Some("/app"));
        assert_eq!(members.get(12), Some("/app"));
        assert_eq!(members.get(1), Some("/"));
        assert!(members.contains(3) && !members.contains(2));
    }

    #[test]
    fn known_tasks_are_the_saved_ones_but_none_whose_id_was_given_again() {
        let task = |tid: i32| SavedTask {
            tgid: tid,
            comm: "t".into(),
            starttime: 1,
            affinity: CpuSet::from_cpus([0]),
            cgroup: "/".into(),
            kthread: false,
            pinned_by_kernel: false,
        };
        let saved: BTreeMap<i32, SavedTask> = [2, 4, 6, 8, 10].map(|t| (t, task(t))).into();
        let cursor_at = |last_pid| crate::pid_reuse::PidCursor {
            last_pid,
            pid_max: 32768,
            forks: 100,
            tasks: 10,
        };
        // IDs 7 and 8 may have been given since the tasks were saved.
        let known = KnownTasks {
            saved: &saved,
            new_ids: crate::pid_reuse::new_ids_between(&cursor_at(6), &cursor_at(8)).unwrap(),
        };
        for (tid, expected) in [
            (1, None),
            (2, Some(2)),
            (3, None),
            (6, Some(6)),
            (8, None),
            (4, Some(4)),
            (10, Some(10)),
            (11, None),
            (2, Some(2)),
        ] {
            assert_eq!(
                known.original(tid).map(|t| t.tgid),
                expected,
                "thread {tid}"
            );
        }
    }

    fn fake_with_thread(stat: Vec<u8>) -> (cpushield_kernel::FakeKernel, CgroupLayout) {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file_bytes("/proc/7/task/7/stat", stat);
        k.set_file("/proc/7/task/7/cgroup", "3:cpuset:/\n");
        k.set_thread_affinity(7, CpuSet::from_cpus([0, 1]));
        let layout = CgroupLayout::V1 {
            root: "/sys/fs/cgroup/cpuset".into(),
        };
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

    /// A fake machine where, the first time `trigger` is read, task 7 moves
    /// from the housekeeping cpuset (not read yet) to the root (read
    /// already), and which counts the reads of each list.
    struct MovesWhileRead {
        fake: cpushield_kernel::FakeKernel,
        trigger: PathBuf,
        reads: std::sync::Mutex<BTreeMap<PathBuf, usize>>,
    }

    impl Kernel for MovesWhileRead {
        fn read_bytes(&self, path: &Path) -> std::io::Result<Vec<u8>> {
            let first = {
                let mut reads = self.reads.lock().unwrap();
                let n = reads.entry(path.to_path_buf()).or_default();
                *n += 1;
                *n == 1 && path == self.trigger
            };
            if first {
                let root = "/sys/fs/cgroup/cpuset";
                self.fake.set_file(format!("{root}/tasks"), "1\n7\n");
                self.fake
                    .set_file(format!("{root}/{SYSTEM_CGROUP}/tasks"), "8\n");
            }
            self.fake.read_bytes(path)
        }
        fn write(&self, path: &Path, data: &str) -> std::io::Result<()> {
            self.fake.write(path, data)
        }
        fn read_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
            self.fake.read_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.fake.exists(path)
        }
        fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
            self.fake.read_link(path)
        }
        fn mkdir(&self, path: &Path) -> std::io::Result<()> {
            self.fake.mkdir(path)
        }
        fn rmdir(&self, path: &Path) -> std::io::Result<()> {
            self.fake.rmdir(path)
        }
        fn get_affinity(&self, tid: i32) -> std::io::Result<CpuSet> {
            self.fake.get_affinity(tid)
        }
        fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> std::io::Result<()> {
            self.fake.set_affinity(tid, cpus)
        }
        fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
            self.fake.set_xattr(path, name, value)
        }
        fn get_xattr(&self, path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
            self.fake.get_xattr(path, name)
        }
        fn get_sched(&self, tid: i32) -> std::io::Result<cpushield_kernel::SchedParams> {
            self.fake.get_sched(tid)
        }
        fn set_sched(
            &self,
            tid: i32,
            params: &cpushield_kernel::SchedParams,
        ) -> std::io::Result<()> {
            self.fake.set_sched(tid, params)
        }
    }

    #[test]
    fn a_task_moving_while_the_lists_are_read_is_found_and_the_fullest_list_is_read_once() {
        let root = "/sys/fs/cgroup/cpuset";
        let fake = cpushield_kernel::FakeKernel::new();
        fake.set_file(format!("{root}/tasks"), "1\n");
        fake.set_file(format!("{root}/{SHIELD_CGROUP}/tasks"), "");
        fake.set_file(format!("{root}/{SYSTEM_CGROUP}/tasks"), "7\n8\n");
        for tid in [1, 7, 8] {
            fake.set_file(
                format!("/proc/{tid}/stat"),
                format!(
                    "{tid} (t{tid}) S 0 {tid} 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0\n",
                    100 + tid
                ),
            );
            fake.set_thread_affinity(tid, CpuSet::from_cpus([0]));
        }
        // The housekeeping cpuset holds most tasks while a v1 shield is up: it
        // is read last. Task 7 leaves it for the root, read already, while
        // the shield's cpuset is read.
        let k = MovesWhileRead {
            fake,
            trigger: format!("{root}/{SHIELD_CGROUP}/tasks").into(),
            reads: Default::default(),
        };
        let layout = CgroupLayout::V1 { root: root.into() };
        let tasks = read_tasks(&k, &layout).unwrap();
        let got: Vec<(i32, &str)> = tasks.iter().map(|t| (t.tid, t.cgroup.as_str())).collect();
        assert_eq!(
            got,
            vec![(1, "/"), (7, "/"), (8, "/cpushield-system")],
            "task 7 is found where it went"
        );
        let reads = k.reads.lock().unwrap();
        assert_eq!(reads[Path::new(&format!("{root}/tasks"))], 2);
        assert_eq!(
            reads[Path::new(&format!("{root}/{SYSTEM_CGROUP}/tasks"))],
            1,
            "the fullest list, read last, is not read again"
        );
    }

    #[test]
    fn tasks_come_from_the_hierarchys_lists_with_threads_grouped_by_process_and_unlisted_threads_left_out(
    ) {
        let k = cpushield_kernel::FakeKernel::new();
        let root = "/sys/fs/cgroup/cpuset";
        k.set_file(format!("{root}/tasks"), "7\n8\n");
        k.set_file(format!("{root}/cgroup.procs"), "7\n8\n");
        k.set_file(format!("{root}/work/tasks"), "9\n");
        k.set_file(format!("{root}/work/cgroup.procs"), "8\n");
        let stat = |tid: i32, threads: u32| {
            format!(
                "{tid} (t{tid}) S 1 {tid} 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 {threads} 0 {} 0 0\n",
                100 + tid
            )
        };
        k.set_file("/proc/7/stat", stat(7, 1));
        for tid in [8, 9] {
            k.set_file(format!("/proc/{tid}/stat"), stat(tid, 2));
            k.set_file(format!("/proc/{tid}/status"), "Name:\tt\nTgid:\t8\n");
            k.set_file(format!("/proc/8/task/{tid}/stat"), stat(tid, 2));
        }
        // In /proc but in no cgroup's list: not read (/proc is not listed).
        k.set_file("/proc/50/stat", stat(50, 1));
        // A thread of process 8 started after the lists were read (as
        // cpushield's own reading thread is): left out like a new process.
        k.set_file("/proc/8/task/10/stat", stat(10, 2));
        k.set_file("/proc/8/task/10/cgroup", "3:cpuset:/\n");
        for tid in [7, 8, 9, 10, 50] {
            k.set_thread_affinity(tid, CpuSet::from_cpus([0]));
        }
        let layout = CgroupLayout::V1 { root: root.into() };
        let tasks = read_tasks(&k, &layout).unwrap();
        let got: Vec<(i32, i32, &str, u64)> = tasks
            .iter()
            .map(|t| (t.tid, t.tgid, t.cgroup.as_str(), t.starttime))
            .collect();
        assert_eq!(
            got,
            vec![(7, 7, "/", 107), (8, 8, "/", 108), (9, 8, "/work", 109)]
        );
    }

    #[test]
    fn our_cgroups_are_recognised_by_their_top_directory() {
        assert!(is_ours("/cpushield-shield"));
        assert!(is_ours("/cpushield-system/x"));
        assert!(!is_ours("/"));
        assert!(!is_ours("/system.slice"));
    }
}
