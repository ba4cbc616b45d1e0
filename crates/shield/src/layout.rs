//! The cpuset hierarchy: where it is mounted (cgroup v2, v1, or none), and
//! what differs between the two versions as the shield uses them, behind one
//! trait, [`Cpusets`], with a v1 and a v2 implementation.

use crate::steps::{Plan, Severity, Step, WriteKind};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{read_trimmed, Kernel};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Name of the shield's cgroup, relative to the hierarchy root.
pub const SHIELD_CGROUP: &str = "cpushield-shield";
/// The housekeeping cgroup (v1 only; v2 partitions need none).
pub const SYSTEM_CGROUP: &str = "cpushield-system";

/// Extended attribute set on each cgroup cpushield creates (kernfs keeps
/// `trusted.*` attributes on cgroup v1 and v2 directories): only a cgroup
/// that carries it is emptied and removed.
pub const CGROUP_MARK: &str = "trusted.cpushield";

/// Whether a cgroup path (as in /proc/PID/cgroup) is one of ours.
pub fn is_ours(cgroup: &str) -> bool {
    let top = cgroup
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    top == SHIELD_CGROUP || top == SYSTEM_CGROUP
}

/// Whether cgroup `dir` exists without cpushield's mark ([`CGROUP_MARK`]);
/// another error reading the attribute counts as not known to lack it.
pub fn lacks_mark(kernel: &dyn Kernel, dir: &Path) -> bool {
    kernel
        .get_xattr(dir, CGROUP_MARK)
        .is_err_and(|e| cpushield_kernel::os_errno(&e) == Some(libc::ENODATA))
}

/// Whether cgroup `dir` is as mkdir left it: no task or thread in it, no
/// cgroup below it, no CPUs given to it. A shield killed between making one
/// of its cgroups and marking it ([`CGROUP_MARK`]) leaves exactly that, and
/// the state it wrote first names the directory. Reset may then remove it
/// unmarked: nothing runs in it and nothing was set in it, so removing it
/// takes nothing from whoever else might have made a cgroup of that name.
/// A file that cannot be read counts as not untouched.
pub fn is_untouched(kernel: &dyn Kernel, layout: &dyn Cpusets, dir: &Path) -> bool {
    let empty = |name: &str| read_trimmed(kernel, &dir.join(name)).is_ok_and(|t| t.is_empty());
    if !(empty("cgroup.procs") && empty(layout.thread_list()) && empty("cpuset.cpus")) {
        return false;
    }
    kernel.read_dir(dir).is_ok_and(|names| {
        !names
            .iter()
            .any(|name| kernel.exists(&dir.join(name).join("cgroup.procs")))
    })
}

/// Whether a cgroup path (as in /proc/PID/cgroup) belongs to Kubernetes pods.
/// The kubelet's CPU manager owns these tasks' CPUs, so the shield leaves them be.
pub use cpushield_parse::pid_cgroup::is_kubepods;

/// The lines of /proc/PID/cgroup as (hierarchy ID, controllers, path).
pub use cpushield_parse::pid_cgroup::lines as cgroup_lines;

/// Whether /proc/PID/cgroup puts the task under Kubernetes pods in any
/// hierarchy: the shield leaves such a task to the kubelet's CPU manager.
pub use cpushield_parse::pid_cgroup::in_kubepods;

/// What the shield's cgroups are set up from (see [`Cpusets::enforce`]).
#[derive(Debug, Clone)]
pub struct Enforcement<'a> {
    /// The online CPUs shielded from processes (not empty).
    pub procs: &'a CpuSet,
    /// The online CPUs left to everything else.
    pub housekeeping: &'a CpuSet,
    /// The CPUs the shield's cgroup held before and keeps.
    pub kept: CpuSet,
    /// The cgroups earlier shields created.
    pub created: &'a [PathBuf],
    /// Memory nodes of the hierarchy root.
    pub root_mems: &'a str,
    /// Memory nodes of the shield's cgroup: `None` for every node of the
    /// root (see [`crate::mems`]).
    pub shield_mems: Option<&'a CpuSet>,
    /// The text of the shield cgroup's `cpuset.mems` now, where it exists.
    pub shield_mems_now: Option<&'a str>,
    /// Child cgroups of the root that are not ours, with their CPUs.
    pub foreign: &'a [(String, CpuSet)],
    /// Whether the whole machine is shielded (not a private PID namespace).
    pub whole_system: bool,
    /// The root's controllers enabled for its children (v2).
    pub subtree_control: &'a str,
}

/// Where Brosky's rule puts one task (see [`Cpusets::place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place<'a> {
    /// Left in its cgroup, which is someone else's: its affinity alone
    /// follows the rule.
    Stay,
    /// The shield's cgroup.
    Shield,
    /// The housekeeping cgroup.
    System,
    /// This cgroup (relative to the root, as in /proc/PID/cgroup).
    Cgroup(&'a str),
}

/// One task as [`Cpusets::place`] weighs it.
#[derive(Debug, Clone, Copy)]
pub struct Placing<'a> {
    /// The cgroup it was in before the first shield.
    pub origin: &'a str,
    /// The cgroup it is in now.
    pub here: &'a str,
    /// Its affinity under Brosky's rule.
    pub effective: &'a CpuSet,
    /// The CPUs shielded from processes (online; empty when none).
    pub procs: &'a CpuSet,
    /// Whether every thread of its process (this one too) is to run on
    /// shielded CPUs only.
    pub whole_process_shielded: bool,
}

impl Placing<'_> {
    /// Whether the rule leaves it on shielded CPUs only.
    fn shielded(&self) -> bool {
        !self.procs.is_empty() && self.effective.is_subset(self.procs)
    }
}

/// How one cpuset cgroup keeps its CPUs to itself, as read from the kernel
/// (`check` weighs it): each version has its own settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Isolation {
    /// cgroup v1: whether the cpuset is exclusive (`cpuset.cpu_exclusive`)
    /// and the scheduler balances load across it
    /// (`cpuset.sched_load_balance`); `None` where unreadable.
    Exclusive {
        /// `cpuset.cpu_exclusive` is 1.
        exclusive: Option<bool>,
        /// `cpuset.sched_load_balance` is 1.
        load_balance: Option<bool>,
    },
    /// cgroup v2: the partition type (`cpuset.cpus.partition`: `member`,
    /// `root`, `isolated`, or `... invalid ...`); `None` where unreadable
    /// (the root cgroup has no such file).
    Partition(Option<String>),
}

impl Isolation {
    /// A v2 partition that takes its CPUs from every other cgroup
    /// (`isolated`, or a load-balanced `root`).
    pub fn is_valid_partition(&self) -> bool {
        matches!(self, Isolation::Partition(Some(p)) if p == "isolated" || p == "root")
    }

    /// A v2 partition the kernel made invalid (it enforces nothing).
    pub fn is_invalid_partition(&self) -> bool {
        matches!(self, Isolation::Partition(Some(p)) if p.contains("invalid"))
    }

    /// Whether the scheduler balances load across a v1 cpuset; `None` on v2
    /// or where unreadable.
    pub fn load_balance(&self) -> Option<bool> {
        match self {
            Isolation::Exclusive { load_balance, .. } => *load_balance,
            Isolation::Partition(_) => None,
        }
    }

    /// The v2 partition type; `None` on v1 or where unreadable.
    pub fn partition(&self) -> Option<&str> {
        match self {
            Isolation::Partition(p) => p.as_deref(),
            Isolation::Exclusive { .. } => None,
        }
    }

    /// The cgroup version (1 or 2) these settings belong to.
    pub fn version(&self) -> u8 {
        match self {
            Isolation::Exclusive { .. } => 1,
            Isolation::Partition(_) => 2,
        }
    }

    /// A v1 exclusive cpuset without load balancing.
    pub fn is_exclusive_unbalanced(&self) -> bool {
        matches!(
            self,
            Isolation::Exclusive {
                exclusive: Some(true),
                load_balance: Some(false)
            }
        )
    }

    /// Its settings as `check` prints them (` exclusive=1
    /// sched_load_balance=0`, ` partition=isolated`; empty when unread).
    pub fn settings(&self) -> String {
        match self {
            Isolation::Exclusive {
                exclusive,
                load_balance,
            } => {
                let mut out = String::new();
                if let Some(e) = exclusive {
                    out.push_str(&format!(" exclusive={}", *e as u8));
                }
                if let Some(lb) = load_balance {
                    out.push_str(&format!(" sched_load_balance={}", *lb as u8));
                }
                out
            }
            Isolation::Partition(p) => p
                .as_ref()
                .map(|p| format!(" partition={p}"))
                .unwrap_or_default(),
        }
    }
}

/// The trimmed text of a file; `None` where unreadable.
fn read_setting(kernel: &dyn Kernel, path: &Path) -> Option<String> {
    kernel.read(path).ok().map(|s| s.trim().to_string())
}

/// What differs between the cgroup versions' cpuset hierarchies, as the
/// shield uses them. Pure but for [`Cpusets::enforcement_status`].
pub trait Cpusets {
    /// The hierarchy's mount point.
    fn root(&self) -> &Path;

    /// A name for humans and JSON: "cgroup v2 cpuset partition" etc.
    fn mechanism(&self) -> &'static str;

    /// The file an ID is written to, to move a task into `cgroup`: one
    /// thread (v1) or its whole process (v2).
    fn tasks_file(&self, cgroup: &Path) -> PathBuf;

    /// The file a TID is written to, to move that one thread into `cgroup`
    /// (v2: the cgroup must be threaded, and the thread's process in the
    /// same threaded domain).
    fn threads_file(&self, cgroup: &Path) -> PathBuf;

    /// The name of a cgroup's file listing its threads.
    fn thread_list(&self) -> &'static str;

    /// The root's file of the CPUs a cgroup can hold.
    fn root_cpus_file(&self) -> &'static str;

    /// The root's file of the memory nodes a cgroup can hold.
    fn root_mems_file(&self) -> &'static str;

    /// The root's setting the shield changes (saved and restored).
    fn root_setting(&self) -> PathBuf;

    /// The kernel's own value of [`Cpusets::root_setting`], where it has one
    /// that the shield's is told from.
    fn root_setting_default(&self) -> Option<&'static str>;

    /// A task's cgroup in this hierarchy, from the text of /proc/TID/cgroup.
    fn cgroup_of(&self, proc_cgroup: &str) -> Option<String>;

    /// Whether a move takes a task's whole process.
    fn moves_processes(&self) -> bool;

    /// The ID written to move thread `tid` of process `tgid`; `None` for a
    /// task this hierarchy does not move.
    fn move_id(&self, tid: i32, tgid: i32, kthread: bool) -> Option<i32>;

    /// The steps that create (the first time) and size the shield's cgroups
    /// for `e.procs`, and what the user should know.
    fn enforce(&self, e: &Enforcement) -> Plan;

    /// Where Brosky's rule puts a task.
    fn place<'a>(&self, task: &Placing<'a>) -> Place<'a>;

    /// The steps that take down one of the shield's cgroups, its tasks to
    /// the root.
    fn teardown(&self, dir: &Path) -> Vec<Step> {
        vec![
            Step::Drain {
                from: dir.to_path_buf(),
                to: self.tasks_file(self.root()),
            },
            Step::Rmdir(dir.to_path_buf()),
        ]
    }

    /// Whether taking the shield down sets again the affinity of tasks that
    /// stay in their cgroup (the kernel gives a cpuset's CPUs to its tasks).
    fn teardown_resets_affinities(&self) -> bool;

    /// Whether a task in `cgroup` is confined to the housekeeping CPUs by
    /// the shield: the kernel narrows its affinity requests to them.
    fn in_housekeeping(&self, cgroup: &str) -> bool;

    /// How the shield's cgroup `dir` enforces it now, read from the kernel.
    fn enforcement_status(&self, kernel: &dyn Kernel, dir: &Path) -> String;

    /// The cgroup version (1 or 2), as messages name it.
    fn version(&self) -> u8;

    /// The file of the CPUs a cgroup of the hierarchy has in effect.
    fn cpus_file(&self) -> &'static str;

    /// How cgroup `dir` keeps its CPUs to itself, read from the kernel.
    fn isolation(&self, kernel: &dyn Kernel, dir: &Path) -> Isolation;

    /// The shield's cgroup.
    fn shield_dir(&self) -> PathBuf {
        self.root().join(SHIELD_CGROUP)
    }

    /// The housekeeping cgroup.
    fn system_dir(&self) -> PathBuf {
        self.root().join(SYSTEM_CGROUP)
    }

    /// The absolute directory of a cgroup given its path inside the
    /// hierarchy (`/` or `/system.slice`), as /proc/PID/cgroup shows it.
    fn dir_of(&self, cgroup: &str) -> PathBuf {
        let rel = cgroup.trim_start_matches('/');
        if rel.is_empty() {
            self.root().to_path_buf()
        } else {
            self.root().join(rel)
        }
    }
}

/// A cgroup v1 cpuset hierarchy: two cpusets at the root, the shield
/// (exclusive, no load balancing) and the housekeeping one, where every
/// movable task of the root cpuset goes; tasks move one thread at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct V1 {
    /// Mount point of the cpuset hierarchy.
    pub root: PathBuf,
}

/// The unified hierarchy with the cpuset controller: the shield is an
/// isolated partition, which takes its CPUs from every other cgroup; tasks
/// move a whole process at a time (one thread only into a threaded cgroup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct V2 {
    /// Mount point of cgroup2.
    pub root: PathBuf,
}

impl Cpusets for V1 {
    fn root(&self) -> &Path {
        &self.root
    }

    fn mechanism(&self) -> &'static str {
        "cgroup v1 exclusive cpuset, sched_load_balance=0"
    }

    fn tasks_file(&self, cgroup: &Path) -> PathBuf {
        cgroup.join("tasks")
    }

    fn threads_file(&self, cgroup: &Path) -> PathBuf {
        cgroup.join("tasks")
    }

    fn thread_list(&self) -> &'static str {
        "tasks"
    }

    fn root_cpus_file(&self) -> &'static str {
        "cpuset.cpus"
    }

    fn root_mems_file(&self) -> &'static str {
        "cpuset.mems"
    }

    fn root_setting(&self) -> PathBuf {
        self.root.join("cpuset.sched_load_balance")
    }

    fn root_setting_default(&self) -> Option<&'static str> {
        Some("1")
    }

    fn cgroup_of(&self, proc_cgroup: &str) -> Option<String> {
        cgroup_lines(proc_cgroup)
            .find(|(_, controllers, _)| controllers.split(',').any(|c| c == "cpuset"))
            .map(|(_, _, path)| path.to_string())
    }

    fn moves_processes(&self) -> bool {
        false
    }

    fn move_id(&self, tid: i32, _tgid: i32, _kthread: bool) -> Option<i32> {
        Some(tid)
    }

    /// Creates both cpusets, then shrinks before it grows so that
    /// exclusivity holds throughout.
    fn enforce(&self, e: &Enforcement) -> Plan {
        let mut plan = Plan::default();
        let (shield, system) = (self.shield_dir(), self.system_dir());
        let exists = |dir: &PathBuf| e.created.contains(dir);
        // A v1 cpuset takes no task before it has memory nodes: the
        // housekeeping one keeps the root's, the shield's gets its own.
        let shield_mems = e
            .shield_mems
            .map_or_else(|| e.root_mems.to_string(), CpuSet::to_list);
        for dir in [&system, &shield] {
            if !exists(dir) {
                plan.creates.push(dir.clone());
                plan.steps.push(Step::Mkdir(dir.clone()));
                let mems = if dir == &shield {
                    shield_mems.as_str()
                } else {
                    e.root_mems
                };
                plan.write(dir.join("cpuset.mems"), mems, WriteKind::Required);
            }
        }
        if !exists(&shield) {
            // The pages of a task follow it into the shield and follow the
            // shield's nodes when they change (cgroup v2 does so always).
            plan.write(
                shield.join("cpuset.memory_migrate"),
                "1",
                WriteKind::BestEffort(
                    "the shield cpuset could not migrate memory: pages a task had before it was shielded stay on their nodes".into(),
                ),
            );
        }
        if exists(&shield) && e.shield_mems_now != Some(shield_mems.as_str()) {
            plan.write(shield.join("cpuset.mems"), shield_mems, WriteKind::Required);
        }
        let overlapping: Vec<&str> = e
            .foreign
            .iter()
            .filter(|(_, cpus)| cpus.intersects(e.procs))
            .map(|(name, _)| name.as_str())
            .collect();
        if exists(&shield) && !overlapping.is_empty() {
            // An exclusive cpuset may not take CPUs a sibling holds.
            plan.write(
                shield.join("cpuset.cpu_exclusive"),
                "0",
                WriteKind::Required,
            );
        }
        if exists(&shield) && !e.kept.is_empty() {
            plan.write(
                shield.join("cpuset.cpus"),
                e.kept.to_list(),
                WriteKind::Required,
            );
        }
        plan.write(
            system.join("cpuset.cpus"),
            e.housekeeping.to_list(),
            WriteKind::Required,
        );
        plan.write(
            shield.join("cpuset.cpus"),
            e.procs.to_list(),
            WriteKind::Required,
        );
        if overlapping.is_empty() {
            plan.write(
                shield.join("cpuset.cpu_exclusive"),
                "1",
                WriteKind::BestEffort("the shield cpuset could not be made exclusive".into()),
            );
        } else {
            plan.note(
                Severity::Warn,
                format!(
                    "cpusets not ours ({}) include shielded CPUs: cpushield does not change them, so the shield is not exclusive; their tasks get Brosky's affinity rule without a move (tasks of Kubernetes pods are left to the kubelet)",
                    overlapping.join(", ")
                ),
                Some("remove the shielded CPUs from those cpusets with the tool that owns them (docker, kubelet, systemd)".into()),
            );
        }
        plan.write(
            shield.join("cpuset.sched_load_balance"),
            "0",
            WriteKind::Required,
        );
        if e.whole_system {
            plan.write(self.root_setting(), "0", WriteKind::Required);
        } else {
            plan.note(
                Severity::Info,
                "scope is a private PID namespace: the root cpuset keeps load balancing on, so the scheduler may still look at the shielded CPUs when balancing tasks that are not ours".into(),
                Some("shield from the initial PID namespace (the whole system) for full isolation".into()),
            );
        }
        plan
    }

    /// A task of the root cpuset or of ours goes to the shield's cpuset when
    /// the rule leaves it shielded CPUs only, else to the housekeeping one;
    /// with no process shield, back where it was. A task of a cpuset that is
    /// someone else's stays there.
    fn place<'a>(&self, task: &Placing<'a>) -> Place<'a> {
        if task.origin != "/" && !is_ours(task.origin) {
            Place::Stay
        } else if task.procs.is_empty() {
            Place::Cgroup(task.origin)
        } else if task.shielded() {
            Place::Shield
        } else {
            Place::System
        }
    }

    fn teardown_resets_affinities(&self) -> bool {
        false
    }

    fn in_housekeeping(&self, cgroup: &str) -> bool {
        top_cgroup(cgroup) == SYSTEM_CGROUP
    }

    fn version(&self) -> u8 {
        1
    }

    fn cpus_file(&self) -> &'static str {
        "cpuset.cpus"
    }

    fn isolation(&self, kernel: &dyn Kernel, dir: &Path) -> Isolation {
        let flag = |name: &str| read_setting(kernel, &dir.join(name)).map(|s| s == "1");
        Isolation::Exclusive {
            exclusive: flag("cpuset.cpu_exclusive"),
            load_balance: flag("cpuset.sched_load_balance"),
        }
    }

    fn enforcement_status(&self, kernel: &dyn Kernel, dir: &Path) -> String {
        let excl = read_trimmed(kernel, &dir.join("cpuset.cpu_exclusive")).unwrap_or_default();
        let lb = read_trimmed(kernel, &dir.join("cpuset.sched_load_balance")).unwrap_or_default();
        format!(
            "{}: cpu_exclusive={excl} sched_load_balance={lb}",
            dir.display()
        )
    }
}

impl Cpusets for V2 {
    fn root(&self) -> &Path {
        &self.root
    }

    fn mechanism(&self) -> &'static str {
        "cgroup v2 cpuset partition (isolated)"
    }

    fn tasks_file(&self, cgroup: &Path) -> PathBuf {
        cgroup.join("cgroup.procs")
    }

    fn threads_file(&self, cgroup: &Path) -> PathBuf {
        cgroup.join("cgroup.threads")
    }

    fn thread_list(&self) -> &'static str {
        "cgroup.threads"
    }

    fn root_cpus_file(&self) -> &'static str {
        "cpuset.cpus.effective"
    }

    fn root_mems_file(&self) -> &'static str {
        "cpuset.mems.effective"
    }

    fn root_setting(&self) -> PathBuf {
        self.root.join("cgroup.subtree_control")
    }

    /// Which controllers the root enabled for its children before is not
    /// the kernel's to say.
    fn root_setting_default(&self) -> Option<&'static str> {
        None
    }

    fn cgroup_of(&self, proc_cgroup: &str) -> Option<String> {
        cgroup_lines(proc_cgroup)
            .find(|(id, controllers, _)| *id == "0" && controllers.is_empty())
            .map(|(_, _, path)| path.to_string())
    }

    fn moves_processes(&self) -> bool {
        true
    }

    /// Kernel threads stay in the root cgroup.
    fn move_id(&self, _tid: i32, tgid: i32, kthread: bool) -> Option<i32> {
        (!kthread).then_some(tgid)
    }

    /// Enables the cpuset controller for the root's children, creates the
    /// shield's cgroup (threaded) and makes it an isolated partition.
    fn enforce(&self, e: &Enforcement) -> Plan {
        let mut plan = Plan::default();
        let shield = self.shield_dir();
        if !e.subtree_control.split_whitespace().any(|c| c == "cpuset") {
            plan.write(self.root_setting(), "+cpuset", WriteKind::Required);
        }
        if !e.created.contains(&shield) {
            plan.creates.push(shield.clone());
            plan.steps.push(Step::Mkdir(shield.clone()));
            // Threaded (its domain is the root): one thread of a process in
            // the root cgroup can join it through cgroup.threads (Sherer's
            // per-thread placement, cps_place), while whole processes still
            // join through cgroup.procs. Only an empty cgroup can turn
            // threaded, so right after mkdir.
            plan.write(
                shield.join("cgroup.type"),
                "threaded",
                WriteKind::BestEffort(
                    "the shield cgroup could not be made threaded: a single thread cannot join it (cps_place, RtThread), whole processes still can".into(),
                ),
            );
        }
        // Empty takes the parent's nodes, as a new cgroup does.
        let shield_mems = e.shield_mems.map(CpuSet::to_list).unwrap_or_default();
        if e.shield_mems_now.unwrap_or("") != shield_mems {
            plan.write(shield.join("cpuset.mems"), shield_mems, WriteKind::Required);
        }
        plan.write(
            shield.join("cpuset.cpus"),
            e.procs.to_list(),
            WriteKind::Required,
        );
        plan.write(
            shield.join("cpuset.cpus.partition"),
            "isolated",
            WriteKind::IsolatedPartition,
        );
        // An empty cpuset.cpus in v2 means every CPU of the parent.
        let pods: Vec<&str> = e
            .foreign
            .iter()
            .filter(|(name, cpus)| {
                is_kubepods(name) && (cpus.is_empty() || cpus.intersects(e.procs))
            })
            .map(|(name, _)| name.as_str())
            .collect();
        if !pods.is_empty() {
            plan.note(
                Severity::Warn,
                format!(
                    "the shield's isolated partition takes CPUs {} out of the Kubernetes pods' cgroup {}: pods pinned there by the kubelet lose them",
                    e.procs,
                    pods.join(", ")
                ),
                Some("shield CPUs the kubelet never gives to pods (reservedSystemCPUs with strict-cpu-reservation), or shield pods' CPUs from irqs and ltmr only (docs/fleet.md)".into()),
            );
        }
        plan
    }

    /// A process whose threads all run on shielded CPUs only goes into the
    /// shield's cgroup, and so does a thread placed there alone that still
    /// asks for shielded CPUs only; every other task stays in (or goes back
    /// to) the cgroup it was in, where the partition keeps it off the
    /// shielded CPUs.
    fn place<'a>(&self, task: &Placing<'a>) -> Place<'a> {
        let placed_alone = top_cgroup(task.here) == SHIELD_CGROUP && task.shielded();
        if task.whole_process_shielded || placed_alone {
            Place::Shield
        } else {
            Place::Cgroup(task.origin)
        }
    }

    /// The partition is turned back into a member first.
    fn teardown(&self, dir: &Path) -> Vec<Step> {
        vec![
            Step::Write {
                path: dir.join("cpuset.cpus.partition"),
                value: "member".into(),
                kind: WriteKind::BestEffort(
                    "the shield partition could not be turned back into a member".into(),
                ),
            },
            Step::Drain {
                from: dir.to_path_buf(),
                to: self.tasks_file(&self.root),
            },
            Step::Rmdir(dir.to_path_buf()),
        ]
    }

    fn teardown_resets_affinities(&self) -> bool {
        true
    }

    fn in_housekeeping(&self, cgroup: &str) -> bool {
        top_cgroup(cgroup) != SHIELD_CGROUP
    }

    fn version(&self) -> u8 {
        2
    }

    fn cpus_file(&self) -> &'static str {
        "cpuset.cpus.effective"
    }

    fn isolation(&self, kernel: &dyn Kernel, dir: &Path) -> Isolation {
        Isolation::Partition(read_setting(kernel, &dir.join("cpuset.cpus.partition")))
    }

    fn enforcement_status(&self, kernel: &dyn Kernel, dir: &Path) -> String {
        let part = read_trimmed(kernel, &dir.join("cpuset.cpus.partition")).unwrap_or_default();
        if part == "isolated" {
            format!("{}: partition isolated", dir.display())
        } else {
            format!("DEGRADED: {} partition is '{part}'", dir.display())
        }
    }
}

/// The first component of a cgroup path (`` for the root).
fn top_cgroup(cgroup: &str) -> &str {
    cgroup
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("")
}

/// Where cpusets live on this machine: the hierarchy's version and mount
/// point. Dereferences to its version's [`Cpusets`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CgroupLayout {
    /// The unified hierarchy has the cpuset controller (partitions available).
    V2(V2),
    /// A legacy hierarchy has the cpuset controller.
    V1(V1),
}

impl CgroupLayout {
    /// A cgroup v1 cpuset hierarchy mounted at `root`.
    pub fn v1(root: impl Into<PathBuf>) -> Self {
        Self::V1(V1 { root: root.into() })
    }

    /// A cgroup v2 hierarchy with the cpuset controller mounted at `root`.
    pub fn v2(root: impl Into<PathBuf>) -> Self {
        Self::V2(V2 { root: root.into() })
    }
}

impl std::ops::Deref for CgroupLayout {
    type Target = dyn Cpusets;

    fn deref(&self) -> &Self::Target {
        match self {
            CgroupLayout::V1(v1) => v1,
            CgroupLayout::V2(v2) => v2,
        }
    }
}

/// Finds the cpuset controller from /proc/self/mountinfo: on cgroup2 when its
/// root lists `cpuset` in cgroup.controllers, else on a v1 mount with the
/// `cpuset` option. `None` when neither exists.
pub fn detect(kernel: &dyn Kernel) -> Option<CgroupLayout> {
    let mountinfo = cpushield_kernel::Procfs::new(kernel)
        .own_file("mountinfo")
        .ok()?;
    let mut v1 = None;
    let mut v2 = None;
    for mount in cpushield_parse::mounts::parse_mountinfo(&mountinfo) {
        match mount.fs_type.as_str() {
            "cgroup2" if v2.is_none() => {
                let controllers = kernel
                    .read(&mount.mount_point.join("cgroup.controllers"))
                    .unwrap_or_default();
                if controllers.split_whitespace().any(|c| c == "cpuset") {
                    v2 = Some(mount.mount_point);
                }
            }
            "cgroup" if v1.is_none() && mount.has_option("cpuset") => {
                v1 = Some(mount.mount_point);
            }
            _ => {}
        }
    }
    v2.map(CgroupLayout::v2).or(v1.map(CgroupLayout::v1))
}

/// The hierarchy's cgroup path of a task, from the text of /proc/TID/cgroup.
pub fn cgroup_of(layout: &CgroupLayout, proc_cgroup: &str) -> Option<String> {
    layout.cgroup_of(proc_cgroup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    const HYBRID: &str = "\
25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
27 25 0:24 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn hybrid_host_uses_the_v1_cpuset_when_v2_lacks_it() {
        let k = FakeKernel::new();
        k.set_file("/proc/self/mountinfo", HYBRID);
        k.set_file("/sys/fs/cgroup/unified/cgroup.controllers", "memory pids\n");
        let layout = detect(&k).unwrap();
        assert_eq!(layout, CgroupLayout::v1("/sys/fs/cgroup/cpuset"));
    }

    #[test]
    fn v2_with_cpuset_is_preferred() {
        let k = FakeKernel::new();
        k.set_file(
            "/proc/self/mountinfo",
            "27 25 0:24 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
        );
        k.set_file(
            "/sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        );
        assert_eq!(detect(&k).unwrap(), CgroupLayout::v2("/sys/fs/cgroup"));
    }

    #[test]
    fn no_cpuset_anywhere_is_none() {
        let k = FakeKernel::new();
        k.set_file(
            "/proc/self/mountinfo",
            "27 25 0:24 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
        );
        k.set_file("/sys/fs/cgroup/cgroup.controllers", "memory pids\n");
        assert!(detect(&k).is_none());
    }

    #[test]
    fn task_cgroup_is_read_from_the_right_line() {
        let text = "12:cpuset:/docker/abc\n0::/system.slice/x.service\n";
        let v1 = CgroupLayout::v1("/c");
        let v2 = CgroupLayout::v2("/c");
        assert_eq!(cgroup_of(&v1, text).unwrap(), "/docker/abc");
        assert_eq!(cgroup_of(&v2, text).unwrap(), "/system.slice/x.service");
    }

    #[test]
    fn the_layout_is_saved_as_its_kind_and_root() {
        let v1 = CgroupLayout::v1("/sys/fs/cgroup/cpuset");
        let text = serde_json::to_string(&v1).unwrap();
        assert_eq!(text, r#"{"kind":"v1","root":"/sys/fs/cgroup/cpuset"}"#);
        assert_eq!(serde_json::from_str::<CgroupLayout>(&text).unwrap(), v1);
        let v2: CgroupLayout =
            serde_json::from_str(r#"{"kind":"v2","root":"/sys/fs/cgroup"}"#).unwrap();
        assert_eq!(v2, CgroupLayout::v2("/sys/fs/cgroup"));
    }

    #[test]
    fn our_cgroups_are_recognised_by_their_top_directory() {
        assert!(is_ours("/cpushield-shield"));
        assert!(is_ours("/cpushield-system/x"));
        assert!(!is_ours("/"));
        assert!(!is_ours("/system.slice"));
    }

    fn placing<'a>(
        origin: &'a str,
        here: &'a str,
        effective: &'a CpuSet,
        procs: &'a CpuSet,
        whole: bool,
    ) -> Placing<'a> {
        Placing {
            origin,
            here,
            effective,
            procs,
            whole_process_shielded: whole,
        }
    }

    #[test]
    fn v1_places_each_thread_and_leaves_a_cpuset_that_is_someone_elses() {
        let v1 = V1 { root: "/c".into() };
        let (shielded, housekeeping, procs) = (
            CpuSet::from_cpus([3]),
            CpuSet::from_cpus([0, 1, 2]),
            CpuSet::from_cpus([3]),
        );
        let none = CpuSet::new();
        assert_eq!(
            v1.place(&placing("/", "/", &shielded, &procs, false)),
            Place::Shield
        );
        assert_eq!(
            v1.place(&placing("/", "/", &housekeeping, &procs, true)),
            Place::System
        );
        assert_eq!(
            v1.place(&placing(
                "/docker/abc",
                "/docker/abc",
                &housekeeping,
                &procs,
                false
            )),
            Place::Stay
        );
        assert_eq!(
            v1.place(&placing(
                "/",
                "/cpushield-system",
                &housekeeping,
                &none,
                false
            )),
            Place::Cgroup("/")
        );
    }

    #[test]
    fn v2_places_whole_processes_and_keeps_a_thread_placed_alone() {
        let v2 = V2 { root: "/c".into() };
        let (shielded, housekeeping, procs) = (
            CpuSet::from_cpus([3]),
            CpuSet::from_cpus([0, 1, 2]),
            CpuSet::from_cpus([3]),
        );
        assert_eq!(
            v2.place(&placing("/", "/", &shielded, &procs, true)),
            Place::Shield
        );
        assert_eq!(
            v2.place(&placing("/app", "/app", &shielded, &procs, false)),
            Place::Cgroup("/app"),
            "its process has threads outside the shield"
        );
        assert_eq!(
            v2.place(&placing("/", "/cpushield-shield", &shielded, &procs, false)),
            Place::Shield
        );
        assert_eq!(
            v2.place(&placing("/app", "/app", &housekeeping, &procs, false)),
            Place::Cgroup("/app")
        );
        assert_eq!(v2.move_id(7, 5, false), Some(5));
        assert_eq!(v2.move_id(7, 7, true), None);
    }
}
