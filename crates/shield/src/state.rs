//! The saved original state: written durably before the first change so that
//! `reset` can restore the machine exactly, even after a SIGKILL half way.

use crate::layout::CgroupLayout;
use crate::layout::{SHIELD_CGROUP, SYSTEM_CGROUP};
use crate::masks::ShieldMasks;
use crate::snapshot::{Scope, Snapshot};
use cpushield_cpuset::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

pub use cpushield_kernel::store::{FileStore, Locked, MemoryStore, StateLock, StateStore};

/// Version of the state file format. Version 2 added [`SavedState::set`]
/// (what the shield last set); version 3 tasks saved without their start time
/// ([`SavedState::unread_start_before`]); version 4 wrote each task and each
/// record of what was set as an array in field order. Version 5 writes every
/// type as the object its fields derive. Version 6 added
/// [`SavedState::load_dirs`]; version 7 [`SavedState::mems`]. Versions 1 to
/// 6 still load and reset (serde reads an array into a struct in field
/// order; a field a version lacks is empty).
pub const STATE_VERSION: u32 = 7;

/// The oldest state format this cpushield still reads.
pub const OLDEST_STATE_VERSION: u32 = 1;

/// The effective affinity the shield set on a task, as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetTask {
    /// Start time, as in [`SavedTask`]: a reused TID is not compared.
    pub starttime: u64,
    /// The affinity the task had once the shield was applied.
    pub cpus: CpuSet,
}

/// What the shield last set on each task and IRQ, read back once a change was
/// complete. A value found different later was set by someone else (the task
/// itself, irqbalance, a user writing smp_affinity): under Brosky's rule it is
/// that object's new requested affinity ([`SavedState::follow_requests`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetRecords {
    /// Set while a change is being applied (and after one that could not be
    /// read back): the values are then not trusted, and every object is taken
    /// as untouched (exact undo).
    #[serde(default)]
    pub applying: bool,
    /// Task affinities, by TID.
    #[serde(default)]
    pub tasks: BTreeMap<i32, SetTask>,
    /// IRQ smp_affinity texts, by IRQ.
    #[serde(default)]
    pub irqs: BTreeMap<u32, String>,
}

impl SetRecords {
    /// Whether nothing is recorded (a version-1 state, or a new one).
    pub fn is_empty(&self) -> bool {
        !self.applying && self.tasks.is_empty() && self.irqs.is_empty()
    }
}

/// A requested affinity found changed behind the shield's back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// A task set its own affinity.
    Task {
        /// Thread ID.
        tid: i32,
        /// Command name.
        comm: String,
        /// The affinity the shield had set.
        was: CpuSet,
        /// Its new requested affinity.
        now: CpuSet,
    },
    /// An IRQ's owner wrote its smp_affinity.
    Irq {
        /// IRQ number.
        irq: u32,
        /// The mask the shield had set.
        was: String,
        /// Its new requested mask.
        now: String,
    },
}

/// A task as it was before the first shield.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedTask {
    /// Process ID.
    pub tgid: i32,
    /// Command name, for messages.
    pub comm: String,
    /// Start time (ticks since boot): tells a reused PID from the original task.
    pub starttime: u64,
    /// The affinity it had: its requested affinity under Brosky's rule.
    pub affinity: CpuSet,
    /// Its cgroup in the cpuset hierarchy.
    pub cgroup: String,
    /// A kernel thread.
    #[serde(default)]
    pub kthread: bool,
    /// The kernel forbids changing its affinity (per-CPU kernel thread).
    #[serde(default)]
    pub pinned_by_kernel: bool,
}

/// A task created while the shield was up, adopted by a later `shield` or
/// `unshield` so the rule can be re-applied to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdoptedTask {
    /// Start time, as in [`SavedTask`].
    pub starttime: u64,
    /// What it is taken to have requested.
    pub requested: CpuSet,
}

/// A thread's scheduling policy before `cpushield run --pid` changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSched {
    /// Start time, as in [`SavedTask`]: a reused TID is not restored.
    pub starttime: u64,
    /// Policy number (SCHED_OTHER 0, SCHED_FIFO 1, SCHED_RR 2, SCHED_BATCH 3,
    /// SCHED_IDLE 5, SCHED_DEADLINE 6).
    pub policy: u32,
    /// SCHED_FLAG_* bits.
    #[serde(default)]
    pub flags: u64,
    /// Nice value.
    pub nice: i32,
    /// Real-time priority.
    pub priority: u32,
    /// SCHED_DEADLINE runtime, deadline and period (ns).
    #[serde(default)]
    pub deadline: [u64; 3],
}

impl SavedSched {
    /// The parameters to give back to the kernel.
    pub fn params(&self) -> cpushield_kernel::SchedParams {
        cpushield_kernel::SchedParams {
            policy: self.policy,
            flags: self.flags,
            nice: self.nice,
            priority: self.priority,
            runtime: self.deadline[0],
            deadline: self.deadline[1],
            period: self.deadline[2],
        }
    }
}

/// Everything needed to undo the shield, and the shield's current masks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedState {
    /// Format version.
    pub version: u32,
    /// The masks in force (updated by each shield/unshield).
    pub masks: ShieldMasks,
    /// Cpuset hierarchy used.
    pub layout: CgroupLayout,
    /// What the tool could see when shielding.
    pub scope: Scope,
    /// Online CPUs at the first shield.
    pub online: CpuSet,
    /// Tasks before the first shield, by TID.
    pub tasks: BTreeMap<i32, SavedTask>,
    /// Tasks born while shielded, by TID.
    pub adopted: BTreeMap<i32, AdoptedTask>,
    /// Exact smp_affinity text of every IRQ before the first shield.
    pub irqs: BTreeMap<u32, String>,
    /// Original text of every other file that may be written.
    pub files: BTreeMap<PathBuf, String>,
    /// Cgroups created by cpushield, in creation order.
    pub created_cgroups: Vec<PathBuf>,
    /// The PID namespace the task IDs belong to (`pid:[4026531836]`): task
    /// IDs are only meaningful there.
    #[serde(default)]
    pub pid_namespace: String,
    /// Scheduling policies `cpushield run --pid` changed, by TID, as they were.
    #[serde(default)]
    pub sched: BTreeMap<i32, SavedSched>,
    /// What the shield last set on each task and IRQ (version 2; absent in
    /// older states, which then keep the requests saved at the first shield).
    #[serde(default)]
    pub set: SetRecords,
    /// Set in states of versions 3 and 4 whose first shield saved tasks
    /// without reading their stat: such a task has start time 0 and started
    /// before this tick (see [`SavedState::start_as_saved`]). Versions 1, 2
    /// and 5 read every task's start time.
    #[serde(default)]
    pub unread_start_before: Option<u64>,
    /// Run-time settings `tune` or `apply` changed beyond the shield, with
    /// the values reset writes back (see [`crate::runtime`]).
    #[serde(default)]
    pub runtime: crate::runtime::RuntimeJournal,
    /// The run directories of a load started beside the shield (`tune`,
    /// `compare`): a run killed before it could stop its load leaves its
    /// files there, and reset removes them (version 6).
    #[serde(default)]
    pub load_dirs: Vec<PathBuf>,
    /// The memory nodes asked with `shield --mems`, in force until reset;
    /// `None` gives the shield's cpuset the nodes of its CPUs (version 7).
    /// Only cgroups cpushield creates get nodes, and reset removes them:
    /// the root's and every other cgroup's `cpuset.mems` are never written.
    #[serde(default)]
    pub mems: Option<CpuSet>,
}

impl SavedState {
    /// The start time under which this state knows the task with ID `tid`
    /// that started at tick `start` (read from its stat): the saved one where
    /// the saved task has start time 0 in a state of version 3 or 4 and this
    /// task started before the state's [`Self::unread_start_before`] tick.
    /// Such a task was alive when that first shield read it, so it is the
    /// task saved; a task given the same ID later started at that tick or
    /// after. Otherwise `start`: every record keyed by ID and start time is
    /// compared in these terms.
    pub fn start_as_saved(&self, tid: i32, start: u64) -> u64 {
        match (self.tasks.get(&tid), self.unread_start_before) {
            (Some(saved), Some(tick)) if saved.starttime == 0 && start < tick => 0,
            _ => start,
        }
    }

    /// The original state as seen in a snapshot, before any change.
    pub fn from_snapshot(snap: &Snapshot, masks: ShieldMasks) -> Self {
        Self {
            version: STATE_VERSION,
            masks,
            layout: snap.layout.clone(),
            scope: snap.scope,
            online: snap.online.clone(),
            tasks: snap
                .tasks
                .iter()
                .filter(|t| !crate::snapshot::is_ours(&t.cgroup))
                .map(|t| {
                    (
                        t.tid,
                        SavedTask {
                            tgid: t.tgid,
                            comm: t.comm.clone(),
                            starttime: t.starttime,
                            affinity: t.affinity.clone(),
                            cgroup: t.cgroup.clone(),
                            kthread: t.kthread,
                            pinned_by_kernel: t.pinned_by_kernel,
                        },
                    )
                })
                .collect(),
            adopted: BTreeMap::new(),
            irqs: snap
                .irqs
                .iter()
                .map(|i| (i.irq, i.mask_text.clone()))
                .collect(),
            files: snap.files.clone(),
            created_cgroups: Vec::new(),
            pid_namespace: snap.pid_namespace.clone(),
            sched: BTreeMap::new(),
            set: SetRecords::default(),
            unread_start_before: None,
            runtime: Default::default(),
            load_dirs: Vec::new(),
            mems: None,
        }
    }

    /// Brosky's rule over time: every task and IRQ whose current affinity
    /// differs from what the shield last set (see [`SetRecords`]) was given a
    /// new affinity by its owner, which becomes its requested affinity here
    /// (and what reset restores). Tasks are compared only with
    /// `with_tasks` (same PID namespace). Nothing is followed while the
    /// records are untrusted. Returns what was followed.
    pub fn follow_requests(&mut self, snap: &Snapshot, with_tasks: bool) -> Vec<Followed> {
        let mut out = Vec::new();
        if self.set.applying {
            return out;
        }
        for task in snap.tasks.iter().filter(|_| with_tasks) {
            // An IRQ handler thread's affinity changes with its IRQ: the
            // kernel's doing, not a request (and one set by hand lasts only
            // until its IRQ's mask is written, by reset among others).
            if task.pinned_by_kernel || crate::irq_threads::handler_irq(task, snap).is_some() {
                continue;
            }
            let Some(rec) = self
                .set
                .tasks
                .get(&task.tid)
                .filter(|r| r.starttime == task.starttime)
            else {
                continue;
            };
            if rec.cpus == task.affinity || task.affinity.is_empty() {
                continue;
            }
            let now = if self.clamped_to_housekeeping(task, snap) {
                snap.online.clone()
            } else {
                task.affinity.clone()
            };
            let was = rec.cpus.clone();
            let same = |starttime: u64| starttime == task.starttime;
            if let Some(saved) = self.tasks.get_mut(&task.tid).filter(|s| same(s.starttime)) {
                saved.affinity = now.clone();
            } else if let Some(adopted) = self
                .adopted
                .get_mut(&task.tid)
                .filter(|a| same(a.starttime))
            {
                adopted.requested = now.clone();
            } else {
                continue;
            }
            out.push(Followed::Task {
                tid: task.tid,
                comm: task.comm.clone(),
                was,
                now,
            });
        }
        for irq in &snap.irqs {
            let Some(rec) = self.set.irqs.get(&irq.irq) else {
                continue;
            };
            let changed = match CpuSet::parse_mask(rec) {
                Ok(set) => {
                    set.intersection(&snap.online) != irq.affinity.intersection(&snap.online)
                }
                Err(_) => false,
            };
            if !changed || irq.affinity.is_empty() {
                continue;
            }
            if let Some(original) = self.irqs.get_mut(&irq.irq) {
                *original = irq.mask_text.clone();
                out.push(Followed::Irq {
                    irq: irq.irq,
                    was: rec.clone(),
                    now: irq.mask_text.clone(),
                });
            }
        }
        out
    }

    /// Whether a task's affinity may be the shield's cpuset clamping a wider
    /// request: the kernel intersects `sched_setaffinity` with the task's
    /// cpuset, so in the housekeeping cpuset (v1) or outside the isolated
    /// partition (v2) a request for every CPU reads back as every housekeeping
    /// CPU. Such a task is taken to request every CPU; a narrower set is a
    /// real request as it reads.
    fn clamped_to_housekeeping(&self, task: &crate::snapshot::TaskInfo, snap: &Snapshot) -> bool {
        let procs = self.masks.procs.intersection(&snap.online);
        if procs.is_empty() || task.affinity != snap.online.difference(&procs) {
            return false;
        }
        self.layout.in_housekeeping(&task.cgroup)
    }

    /// Records what a complete change left on every task and IRQ the state
    /// knows, as read back in `snap`, and trusts the records again.
    pub fn record_set(&mut self, snap: &Snapshot) {
        let known = |tid: i32, starttime: u64| {
            self.tasks
                .get(&tid)
                .is_some_and(|s| s.starttime == starttime)
                || self
                    .adopted
                    .get(&tid)
                    .is_some_and(|a| a.starttime == starttime)
        };
        let tasks = snap
            .tasks
            .iter()
            .filter(|t| !t.pinned_by_kernel && known(t.tid, t.starttime))
            .map(|t| {
                (
                    t.tid,
                    SetTask {
                        starttime: t.starttime,
                        cpus: t.affinity.clone(),
                    },
                )
            })
            .collect();
        let irqs = snap
            .irqs
            .iter()
            .filter(|i| self.irqs.contains_key(&i.irq))
            .map(|i| (i.irq, i.mask_text.clone()))
            .collect();
        self.set = SetRecords {
            applying: false,
            tasks,
            irqs,
        };
    }

    /// Records what a new snapshot shows that the saved state lacks: IRQs and
    /// files that appeared since (their current value is their original).
    pub fn absorb_new_objects(&mut self, snap: &Snapshot) {
        for irq in &snap.irqs {
            self.irqs
                .entry(irq.irq)
                .or_insert_with(|| irq.mask_text.clone());
        }
        for (path, text) in &snap.files {
            self.files
                .entry(path.clone())
                .or_insert_with(|| text.clone());
        }
    }
}

/// Where state and lock files live; `CPUSHIELD_STATE_DIR` overrides for tests.
pub fn state_dir() -> PathBuf {
    cpushield_kernel::shield_state_dir()
}

/// Path of the state file.
pub fn state_path() -> PathBuf {
    state_dir().join(STATE_FILE)
}

/// Name of the state file in the state directory.
pub const STATE_FILE: &str = "state.json";
/// Name of its second copy, written first.
pub const BACKUP_FILE: &str = "state.json.bak";

/// The largest CPU number the kernel door can set (8192 CPUs).
const MAX_CPUS: usize = 8192;

impl SavedState {
    /// Everything wrong with a state that no machine could restore: each
    /// problem names the object (task, IRQ, file, cgroup) and the value.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let root = self.layout.root();
        if !root.is_absolute() || has_dot_dot(root) {
            out.push(format!(
                "cgroup root '{}' is not an absolute path",
                root.display()
            ));
        }
        let cpu_set_ok = |set: &CpuSet| !set.is_empty() && set.last().is_some_and(|c| c < MAX_CPUS);
        for (tid, t) in &self.tasks {
            if !cpu_set_ok(&t.affinity) {
                out.push(format!(
                    "{}: saved affinity '{}' is not a CPU list that can be set",
                    crate::snapshot::task_name(*tid, &t.comm),
                    t.affinity.to_list()
                ));
            }
            if !t.cgroup.starts_with('/') || has_dot_dot(Path::new(&t.cgroup)) {
                out.push(format!(
                    "{}: saved cgroup '{}' is not a cgroup path",
                    crate::snapshot::task_name(*tid, &t.comm),
                    t.cgroup
                ));
            }
        }
        for dir in &self.load_dirs {
            if !is_load_dir(dir) {
                out.push(format!(
                    "load directory '{}' is not an absolute path named cpushield-load-*, so reset will not remove it",
                    dir.display()
                ));
            }
        }
        for (tid, a) in &self.adopted {
            if !cpu_set_ok(&a.requested) {
                out.push(format!(
                    "task {tid} (born under the shield): affinity '{}' is not a CPU list that can be set",
                    a.requested.to_list()
                ));
            }
        }
        for (tid, p) in &self.sched {
            let valid = match p.policy {
                0 | 3 | 5 => (-20..=19).contains(&p.nice) && p.priority == 0,
                1 | 2 => (1..=99).contains(&p.priority),
                6 => p.deadline[0] <= p.deadline[1] && p.deadline[1] <= p.deadline[2],
                _ => false,
            };
            if !valid {
                out.push(format!(
                    "task {tid}: saved scheduling policy {} (priority {}, nice {}) is not one the kernel takes",
                    p.policy, p.priority, p.nice
                ));
            }
        }
        for (irq, text) in &self.irqs {
            match CpuSet::parse_mask(text) {
                Ok(set) if cpu_set_ok(&set) => {}
                _ => out.push(format!(
                    "IRQ {irq}: saved affinity mask '{text}' is not a CPU mask that can be set"
                )),
            }
        }
        let allowed = crate::snapshot::candidate_files(&self.layout);
        for (path, value) in &self.files {
            if !allowed.contains(path) {
                out.push(format!(
                    "file {}: not a file cpushield changes (only {})",
                    path.display(),
                    allowed
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            } else if !file_value_ok(path, value) {
                out.push(format!(
                    "file {}: saved value '{value}' is not a value it takes",
                    path.display()
                ));
            }
        }
        out.extend(self.runtime.problems());
        for dir in &self.created_cgroups {
            let ours = [SHIELD_CGROUP, SYSTEM_CGROUP].map(|n| root.join(n));
            if !ours.contains(dir) {
                out.push(format!(
                    "cgroup {}: not one cpushield creates ({} or {}); it is never removed",
                    dir.display(),
                    ours[0].display(),
                    ours[1].display()
                ));
            }
        }
        out
    }
}

fn has_dot_dot(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
}

/// Whether a saved value is one the file takes (the planner writes it back verbatim).
fn file_value_ok(path: &Path, value: &str) -> bool {
    let v = value.trim();
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        "default_smp_affinity" | "cpumask" => CpuSet::parse_mask(v).is_ok_and(|s| !s.is_empty()),
        "watchdog_cpumask" => CpuSet::parse_list(v).is_ok(),
        "timer_migration" | "cpuset.sched_load_balance" => v == "0" || v == "1",
        "stat_interval" => v.parse::<u64>().is_ok(),
        "cgroup.subtree_control" => v
            .split_whitespace()
            .all(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
        _ => false,
    }
}

/// Decodes and verifies one copy of the state: UTF-8, JSON, version,
/// and [`SavedState::problems`]. A file torn or damaged is refused by its
/// parsing (it is written by temp file, fsync and rename, so a crash leaves
/// the old file or the new one); a value edited by hand is taken as written,
/// which is how docs/RELIABILITY.md asks a user to correct one.
pub fn decode(bytes: &[u8]) -> Result<SavedState, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8 text (byte {})", e.valid_up_to()))?;
    if text.trim().is_empty() {
        return Err("empty".into());
    }
    let state: SavedState =
        serde_json::from_str(text).map_err(|e| format!("not a valid state ({e})"))?;
    if !(OLDEST_STATE_VERSION..=STATE_VERSION).contains(&state.version) {
        return Err(format!(
            "format version {} (this cpushield reads {OLDEST_STATE_VERSION} to {STATE_VERSION})",
            state.version
        ));
    }
    let problems = state.problems();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(state)
}

/// The state text as written.
pub fn encode(state: &SavedState) -> String {
    serde_json::to_string(state).expect("a state serialises")
}

/// A loaded state and, when the state file was damaged, how it was recovered.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The verified state.
    pub state: SavedState,
    /// Set when the state file was damaged and its verified copy was used.
    pub recovered: Option<String>,
}

enum StateCopy {
    Missing,
    Bad(String),
    Good(Box<SavedState>),
}

fn read_copy(read: &dyn Fn(&str) -> io::Result<Vec<u8>>, name: &str) -> StateCopy {
    match read(name) {
        Ok(bytes) => match decode(&bytes) {
            Ok(s) => StateCopy::Good(Box::new(s)),
            Err(why) => StateCopy::Bad(why),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => StateCopy::Missing,
        Err(e) => StateCopy::Bad(format!("cannot be read ({e})")),
    }
}

/// Loads and verifies the saved state from `store`; `Ok(None)` when nothing is
/// shielded. A damaged state file is recovered from its verified copy; when
/// both are damaged, the error names each problem and both stay untouched.
pub fn load_from(store: &dyn StateStore) -> io::Result<Option<Loaded>> {
    load_copies(&store.dir(), &|name| store.read(name))
}

/// The saved state as a caller that loads it again and again (the agent, at
/// every look) last decoded it, with the bytes of the state file it came
/// from and the store's version of that file ([`StateStore::version`]: a
/// file's inode and times, one `stat`). A load that finds the same version
/// reuses the state without reading the file; one that finds the same bytes
/// (a command wrote the state again unchanged) reuses it without decoding.
/// At 100,000 tasks the state is megabytes of JSON: decoding it was a tenth
/// of a look, and reading it to compare a twentieth.
#[derive(Debug, Default)]
pub struct LoadCache {
    version: Option<cpushield_kernel::store::CopyVersion>,
    bytes: Vec<u8>,
    state: Option<std::sync::Arc<SavedState>>,
}

impl LoadCache {
    /// [`load_from`], decoding only when the state file changed since the
    /// last load. A state recovered from its copy is not kept (the damaged
    /// file is read and judged again next time, as [`load_from`] does).
    pub fn load(
        &mut self,
        store: &dyn StateStore,
    ) -> io::Result<Option<std::sync::Arc<SavedState>>> {
        // The version is taken before the bytes are read: a change between
        // the two makes the next load read again, never keep a stale state.
        let version = store.version(STATE_FILE);
        if let Some(state) = &self.state {
            if version.is_some() && version == self.version {
                return Ok(Some(std::sync::Arc::clone(state)));
            }
        }
        let bytes = store.read(STATE_FILE).ok();
        if let (Some(bytes), Some(state)) = (&bytes, &self.state) {
            if *bytes == self.bytes {
                self.version = version;
                return Ok(Some(std::sync::Arc::clone(state)));
            }
        }
        self.version = None;
        self.state = None;
        let Some(loaded) = load_from(store)? else {
            return Ok(None);
        };
        let state = std::sync::Arc::new(loaded.state);
        if let (Some(bytes), None) = (bytes, &loaded.recovered) {
            self.version = version;
            self.bytes = bytes;
            self.state = Some(std::sync::Arc::clone(&state));
        }
        Ok(Some(state))
    }
}

/// [`load_from`] the state directory `dir` read through the kernel door: how
/// other commands (`check`) read the shield's state without writing it.
pub fn load_through(
    kernel: &dyn cpushield_kernel::Kernel,
    dir: &Path,
) -> io::Result<Option<Loaded>> {
    load_copies(dir, &|name| kernel.read_bytes(&dir.join(name)))
}

/// The one reader of the two copies in `dir`: verified, recovered from the
/// copy when the state file is damaged.
fn load_copies(
    dir: &Path,
    read: &dyn Fn(&str) -> io::Result<Vec<u8>>,
) -> io::Result<Option<Loaded>> {
    let (main, bak) = (dir.join(STATE_FILE), dir.join(BACKUP_FILE));
    // The copy is decoded only when the state file is not good.
    let loaded =
        |state: SavedState, recovered: Option<String>| Ok(Some(Loaded { state, recovered }));
    let main_copy = match read_copy(read, STATE_FILE) {
        StateCopy::Good(state) => return loaded(*state, None),
        other => other,
    };
    match (main_copy, read_copy(read, BACKUP_FILE)) {
        (StateCopy::Missing, StateCopy::Missing) => Ok(None),
        (main_copy, StateCopy::Good(state)) => {
            let why = match main_copy {
                StateCopy::Bad(why) => why,
                _ => "missing".into(),
            };
            loaded(
                *state,
                Some(format!(
                    "the state file {} is damaged ({why}); the verified copy {} was used",
                    main.display(),
                    bak.display()
                )),
            )
        }
        (main_copy, bak_copy) => {
            let describe = |c: StateCopy| match c {
                StateCopy::Missing => "missing".to_string(),
                StateCopy::Bad(why) => why,
                StateCopy::Good(_) => unreachable!("handled above"),
            };
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the shield state cannot be trusted: {}: {}; {}: {}. Nothing was changed and both files are kept (they record the state before the shield): correct the named values by hand (docs/RELIABILITY.md), then run the command again",
                    main.display(),
                    describe(main_copy),
                    bak.display(),
                    describe(bak_copy)
                ),
            ))
        }
    }
}

/// Writes the state durably to `store`, twice: the copy first, then the
/// state file. When the first state cannot be written, nothing is left behind.
pub fn store_in(store: &dyn StateStore, state: &SavedState) -> io::Result<()> {
    let first = !store.exists(STATE_FILE);
    let text = encode(state);
    store.write_atomically(BACKUP_FILE, text.as_bytes())?;
    if let Err(e) = store.write_atomically(STATE_FILE, text.as_bytes()) {
        if first {
            // Leave nothing behind: no change was made yet.
            let _ = store.remove(BACKUP_FILE);
        }
        return Err(e);
    }
    Ok(())
}

/// Journals each `(path, original)` not journaled yet in the saved state of
/// `store`, durably, under the state lock. Err NotFound when there is no
/// shield: run-time settings live in the shield's state, so that one
/// `reset` undoes both.
pub fn record_runtime_in(store: &dyn StateStore, entries: &[(PathBuf, String)]) -> io::Result<()> {
    let _lock = store.lock()?;
    let Some(loaded) = load_from(store)? else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no shield is up: run-time settings are recorded in the shield's saved state; shield first",
        ));
    };
    let mut saved = loaded.state;
    let mut added = false;
    for (path, original) in entries {
        if !crate::runtime::is_runtime_file(path) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: not a run-time setting cpushield restores",
                    path.display()
                ),
            ));
        }
        added |= saved.runtime.record(path, original);
    }
    if added {
        store_in(store, &saved)?;
    }
    Ok(())
}

/// Forgets `paths` in the saved state of `store` (their values were written
/// back); nothing when there is no state.
pub fn forget_runtime_in(store: &dyn StateStore, paths: &[PathBuf]) -> io::Result<()> {
    let _lock = store.lock()?;
    let Some(loaded) = load_from(store)? else {
        return Ok(());
    };
    let mut saved = loaded.state;
    let before = saved.runtime.files.len();
    for path in paths {
        saved.runtime.forget(path);
    }
    if saved.runtime.files.len() != before {
        store_in(store, &saved)?;
    }
    Ok(())
}

/// Whether `dir` may be a load's run directory: an absolute path without
/// `..` whose last part is named as a load names it (`cpushield-load-*`).
pub fn is_load_dir(dir: &Path) -> bool {
    dir.is_absolute()
        && !has_dot_dot(dir)
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("cpushield-load-"))
}

/// Records `dir`, a load's run directory, in the saved state of `store`, so
/// that reset removes what a run killed before it stopped its load left
/// there. Nothing when there is no state (the run then removes its own).
pub fn record_load_dir_in(store: &dyn StateStore, dir: &Path) -> io::Result<()> {
    if !is_load_dir(dir) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a load's run directory", dir.display()),
        ));
    }
    let _lock = store.lock()?;
    let Some(loaded) = load_from(store)? else {
        return Ok(());
    };
    let mut saved = loaded.state;
    if saved.load_dirs.iter().any(|d| d == dir) {
        return Ok(());
    }
    saved.load_dirs.push(dir.to_path_buf());
    store_in(store, &saved)
}

/// Removes the state file and its copy from `store` (after a complete reset).
pub fn remove_from(store: &dyn StateStore) -> io::Result<()> {
    store.remove(STATE_FILE)?;
    store.remove(BACKUP_FILE)
}

/// The saved state in `store`, without how it was recovered (see
/// [`load_from`]); `Ok(None)` when nothing is shielded.
pub fn load(store: &dyn StateStore) -> io::Result<Option<SavedState>> {
    Ok(load_from(store)?.map(|l| l.state))
}

/// Whether a state file (or its copy) exists in `store` (for messages).
pub fn is_shielded(store: &dyn StateStore) -> bool {
    store.exists(STATE_FILE) || store.exists(BACKUP_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`crate::fake_machine::one_task_state`] with a task name that is not
    /// plain UTF-8 as read, and the default IRQ affinity recorded.
    fn sample() -> SavedState {
        let mut s = crate::fake_machine::one_task_state("worker-xééé\u{fffd}");
        s.files
            .insert(PathBuf::from("/proc/irq/default_smp_affinity"), "3".into());
        s
    }

    /// A store that cannot tell versions apart: every load reads and compares.
    struct Unversioned(cpushield_kernel::store::MemoryStore);

    impl StateStore for Unversioned {
        fn dir(&self) -> PathBuf {
            self.0.dir()
        }
        fn read(&self, name: &str) -> io::Result<Vec<u8>> {
            self.0.read(name)
        }
        fn exists(&self, name: &str) -> bool {
            self.0.exists(name)
        }
        fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
            self.0.write_atomically(name, bytes)
        }
        fn remove(&self, name: &str) -> io::Result<()> {
            self.0.remove(name)
        }
        fn lock(&self) -> io::Result<cpushield_kernel::store::StateLock> {
            self.0.lock()
        }
        fn lock_for_reset(&self) -> io::Result<cpushield_kernel::store::StateLock> {
            self.0.lock_for_reset()
        }
    }

    #[test]
    fn a_load_cache_reuses_a_state_until_its_file_is_replaced_or_removed() {
        let memory = cpushield_kernel::store::MemoryStore::new();
        let unversioned = Unversioned(memory.handle());
        let versioned = memory.handle();
        for store in [&versioned as &dyn StateStore, &unversioned] {
            let mut cache = LoadCache::default();
            let mut first = sample();
            first.pid_namespace = "pid:[1]".into();
            store
                .write_atomically(STATE_FILE, encode(&first).as_bytes())
                .unwrap();
            let a = cache.load(store).unwrap().unwrap();
            let again = cache.load(store).unwrap().unwrap();
            assert!(std::sync::Arc::ptr_eq(&a, &again), "decoded again");
            // Written again unchanged (a new version of the same bytes).
            store
                .write_atomically(STATE_FILE, encode(&first).as_bytes())
                .unwrap();
            let rewritten = cache.load(store).unwrap().unwrap();
            assert!(
                std::sync::Arc::ptr_eq(&a, &rewritten),
                "decoded the same bytes again"
            );
            let mut second = sample();
            second.pid_namespace = "pid:[2]".into();
            store
                .write_atomically(STATE_FILE, encode(&second).as_bytes())
                .unwrap();
            assert_eq!(cache.load(store).unwrap().unwrap().pid_namespace, "pid:[2]");
            store.remove(STATE_FILE).unwrap();
            assert!(cache.load(store).unwrap().is_none());
        }
    }

    #[test]
    fn an_encoded_state_decodes_to_itself() {
        let s = sample();
        let back = decode(encode(&s).as_bytes()).unwrap();
        assert_eq!(
            serde_json::to_value(&back.tasks).unwrap(),
            serde_json::to_value(&s.tasks).unwrap()
        );
    }

    #[test]
    fn truncated_empty_invalid_non_utf8_and_missing_keys_are_refused() {
        let good = encode(&sample());
        let missing_key = good.replacen("\"masks\":", "\"maskz\":", 1);
        let mut non_utf8 = good.clone().into_bytes();
        let at = good.find("worker").unwrap();
        non_utf8[at] = 0xff;
        for (what, bytes) in [
            ("truncated", good.as_bytes()[..good.len() / 2].to_vec()),
            ("empty", Vec::new()),
            ("invalid", b"{not json".to_vec()),
            ("missing key", missing_key.into_bytes()),
            ("non-UTF-8", non_utf8),
        ] {
            assert!(decode(&bytes).is_err(), "{what} accepted");
        }
    }

    #[test]
    fn a_newer_version_is_refused_naming_the_versions_this_cpushield_reads() {
        let mut s = sample();
        s.version = STATE_VERSION + 1;
        let err = decode(encode(&s).as_bytes()).unwrap_err();
        assert!(
            err.contains(&format!("format version {}", STATE_VERSION + 1)),
            "{err}"
        );
        assert!(
            err.contains(&format!("reads 1 to {STATE_VERSION}")),
            "{err}"
        );
    }

    #[test]
    fn every_field_is_written_by_name_and_read_back_as_written() {
        let mut s = sample();
        s.tasks.insert(
            21,
            SavedTask {
                tgid: 2,
                comm: "kworker/1:0".into(),
                starttime: 0,
                affinity: CpuSet::from_cpus([1]),
                cgroup: "/".into(),
                kthread: true,
                pinned_by_kernel: true,
            },
        );
        s.set.tasks.insert(
            7,
            SetTask {
                starttime: 5,
                cpus: CpuSet::from_cpus([0]),
            },
        );
        let text = encode(&s);
        for element in [
            r#""21":{"tgid":2,"comm":"kworker/1:0","starttime":0,"affinity":"1","cgroup":"/","kthread":true,"pinned_by_kernel":true}"#,
            r#""set":{"applying":false,"tasks":{"7":{"starttime":5,"cpus":"0"}}"#,
        ] {
            assert!(text.contains(element), "{element} not in {text}");
        }
        let back = decode(text.as_bytes()).unwrap();
        assert_eq!(back.tasks, s.tasks);
        assert_eq!(back.set, s.set);
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&s).unwrap()
        );
    }

    /// A state of each older format, as that version of cpushield wrote it
    /// (checksum 0: unsealed, as after a hand edit).
    const OLD_STATES: [&str; 4] = [
        r#"{"version":1,"masks":{"procs":"1","irqs":"1","ltmr":"1"},
            "layout":{"kind":"v1","root":"/sys/fs/cgroup/cpuset"},"scope":"namespace",
            "online":"0-1",
            "tasks":{"7":{"tgid":7,"comm":"worker","starttime":5,"affinity":"0-1","cgroup":"/"}},
            "adopted":{},"irqs":{"10":"3"},"files":{},"created_cgroups":[],
            "pid_namespace":"pid:[1]","sched":{},"checksum":0}"#,
        r#"{"version":2,"masks":{"procs":"1","irqs":"1","ltmr":"1"},
            "layout":{"kind":"v1","root":"/sys/fs/cgroup/cpuset"},"scope":"namespace",
            "online":"0-1",
            "tasks":{"7":{"tgid":7,"comm":"worker","starttime":5,"affinity":"0-1","cgroup":"/"}},
            "adopted":{},"irqs":{"10":"3"},"files":{},"created_cgroups":[],
            "pid_namespace":"pid:[1]","sched":{},
            "set":{"tasks":{"7":{"starttime":5,"cpus":"0"}},"irqs":{"10":"1"}},"checksum":0}"#,
        r#"{"version":3,"masks":{"procs":"1","irqs":"1","ltmr":"1"},
            "layout":{"kind":"v1","root":"/sys/fs/cgroup/cpuset"},"scope":"namespace",
            "online":"0-1",
            "tasks":{"7":{"tgid":7,"comm":"worker","starttime":5,"affinity":"0-1","cgroup":"/"},
                     "9":{"tgid":9,"comm":"kworker/1:0","starttime":0,"affinity":"1",
                          "cgroup":"/","kthread":true,"pinned_by_kernel":true}},
            "adopted":{},"irqs":{"10":"3"},"files":{},"created_cgroups":[],
            "pid_namespace":"pid:[1]","sched":{},
            "set":{"tasks":{"7":{"starttime":5,"cpus":"0"}}},
            "pid_cursor":{"last_pid":300,"pid_max":32768,"forks":900,"tasks":120},
            "unread_start_before":4000,"checksum":0}"#,
        r#"{"version":4,"masks":{"procs":"1","irqs":"1","ltmr":"1"},
            "layout":{"kind":"v1","root":"/sys/fs/cgroup/cpuset"},"scope":"namespace",
            "online":"0-1",
            "tasks":{"7":[7,"worker",5,"0-1","/"],"9":[9,"kworker/1:0",0,"1","/",true,true]},
            "adopted":{},"irqs":{"10":"3"},"files":{},"created_cgroups":[],
            "pid_namespace":"pid:[1]","sched":{},
            "set":{"tasks":{"7":[5,"0"]}},
            "pid_cursor":{"last_pid":300,"pid_max":32768,"forks":900,"tasks":120},
            "unread_start_before":4000,"checksum":0}"#,
    ];

    #[test]
    fn states_of_versions_1_to_4_still_decode_with_every_value() {
        for (at, text) in OLD_STATES.iter().enumerate() {
            let version = at as u32 + 1;
            let state =
                decode(text.as_bytes()).unwrap_or_else(|e| panic!("version {version}: {e}"));
            assert_eq!(state.version, version);
            assert_eq!(state.masks, ShieldMasks::all(&CpuSet::from_cpus([1])));
            let worker = &state.tasks[&7];
            assert_eq!(
                (worker.tgid, worker.comm.as_str(), worker.starttime),
                (7, "worker", 5)
            );
            assert_eq!(worker.affinity, CpuSet::from_cpus([0, 1]));
            assert_eq!(worker.cgroup, "/");
            assert!(!worker.kthread && !worker.pinned_by_kernel);
            assert_eq!(state.irqs[&10], "3");
            if version >= 2 {
                assert_eq!(
                    state.set.tasks[&7].cpus,
                    CpuSet::from_cpus([0]),
                    "version {version}"
                );
            } else {
                assert!(state.set.is_empty());
            }
            if version >= 3 {
                assert!(state.tasks[&9].kthread && state.tasks[&9].pinned_by_kernel);
                assert_eq!(state.unread_start_before, Some(4000));
            }
        }
    }

    #[test]
    fn a_task_written_twice_keeps_its_last_value() {
        let mut text = serde_json::to_string(&sample()).unwrap();
        let at = text.find("\"tasks\":{").unwrap() + "\"tasks\":{".len();
        text.insert_str(
            at,
            r#""7":{"tgid":7,"comm":"first","starttime":5,"affinity":"0","cgroup":"/"},"#,
        );
        let state = decode(text.as_bytes()).unwrap();
        assert_eq!(state.tasks.len(), 1);
        assert_eq!(state.tasks[&7].comm, "worker-x\u{e9}\u{e9}\u{e9}\u{fffd}");
    }

    #[test]
    fn what_the_shield_set_survives_encoding() {
        let mut s = sample();
        s.set.tasks.insert(
            7,
            SetTask {
                starttime: 5,
                cpus: CpuSet::from_cpus([0]),
            },
        );
        s.set.irqs.insert(10, "1".into());
        let back = decode(encode(&s).as_bytes()).unwrap();
        assert_eq!(back.set, s.set);
    }

    #[test]
    fn values_that_cannot_be_restored_are_named() {
        let mut s = sample();
        s.tasks.get_mut(&7).unwrap().affinity = CpuSet::parse_list("5000-8191").unwrap();
        s.irqs.insert(11, "zz".into());
        s.tasks.insert(
            8,
            SavedTask {
                tgid: 8,
                comm: "empty".into(),
                starttime: 1,
                affinity: CpuSet::new(),
                cgroup: "/../../etc".into(),
                kthread: false,
                pinned_by_kernel: false,
            },
        );
        let p = s.problems().join("\n");
        assert!(p.contains("task 8 (empty): saved affinity ''"), "{p}");
        assert!(
            p.contains("task 8 (empty): saved cgroup '/../../etc'"),
            "{p}"
        );
        assert!(p.contains("IRQ 11: saved affinity mask 'zz'"), "{p}");
        // 5000-8191 is a settable list in itself; the check against the
        // machine (lib.rs) refuses it there.
        assert!(!p.contains("task 7"), "{p}");
    }

    #[test]
    fn cgroups_and_files_outside_what_cpushield_owns_are_refused() {
        let mut s = sample();
        s.created_cgroups
            .push("/sys/fs/cgroup/cpuset/docker".into());
        s.created_cgroups.push("cpushield-shield".into());
        s.files.insert("/etc/passwd".into(), "x".into());
        s.files
            .insert("/proc/sys/kernel/timer_migration".into(), "7".into());
        let p = s.problems().join("\n");
        assert!(
            p.contains("cgroup /sys/fs/cgroup/cpuset/docker: not one cpushield creates"),
            "{p}"
        );
        assert!(p.contains("cgroup cpushield-shield: not one"), "{p}");
        assert!(
            p.contains("file /etc/passwd: not a file cpushield changes"),
            "{p}"
        );
        assert!(
            p.contains("file /proc/sys/kernel/timer_migration: saved value '7'"),
            "{p}"
        );
    }

    #[test]
    fn a_version_6_state_loads_with_no_mems_and_mems_asked_by_hand_are_kept() {
        let mut v6: serde_json::Value = serde_json::from_str(&encode(&sample())).unwrap();
        v6["version"] = 6.into();
        v6.as_object_mut().unwrap().remove("mems");
        assert_eq!(decode(v6.to_string().as_bytes()).unwrap().mems, None);
        let mut asked = sample();
        asked.mems = Some(CpuSet::from_cpus([1]));
        let back = decode(encode(&asked).as_bytes()).unwrap();
        assert_eq!(back.mems, Some(CpuSet::from_cpus([1])));
    }

    #[test]
    fn a_version_5_state_loads_with_no_load_directory_and_a_bad_one_is_refused() {
        let mut v5: serde_json::Value = serde_json::from_str(&encode(&sample())).unwrap();
        v5["version"] = 5.into();
        v5.as_object_mut().unwrap().remove("load_dirs");
        let state = decode(v5.to_string().as_bytes()).unwrap();
        assert!(state.load_dirs.is_empty());
        let mut bad = sample();
        bad.load_dirs = vec![
            PathBuf::from("/home/user"),
            PathBuf::from("/var/tmp/cpushield-load-1-1-0"),
        ];
        let problems = bad.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("/home/user"), "{problems:?}");
    }
}
