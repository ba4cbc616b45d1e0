//! The saved original state: written durably before the first change so that
//! `reset` can restore the machine exactly, even after a SIGKILL half way.

use crate::layout::CgroupLayout;
use crate::masks::ShieldMasks;
use crate::snapshot::{Scope, Snapshot};
use cpushield_cpuset::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Version of the state file format.
pub const STATE_VERSION: u32 = 1;

/// A task as it was before the first shield.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedTask {
    /// Process ID.
    pub tgid: i32,
    /// Command name, for messages.
    pub comm: String,
    /// Start time (ticks since boot): tells a reused PID from the original task.
    pub starttime: u64,
    /// The affinity it had: its requested affinity under the seed's rule.
    pub affinity: CpuSet,
    /// Its cgroup in the cpuset hierarchy.
    pub cgroup: String,
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
}

impl SavedState {
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
        }
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
    std::env::var_os("CPUSHIELD_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/cpushield"))
}

/// Path of the state file.
pub fn state_path() -> PathBuf {
    state_dir().join("state.json")
}

/// Loads the saved state; `Ok(None)` when nothing is shielded.
pub fn load() -> io::Result<Option<SavedState>> {
    let path = state_path();
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: corrupt state file ({e}); inspect it, then remove it to forget the shield",
                    path.display()
                ),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(cpushield_sys::with_path(e, &path)),
    }
}

/// Writes the state durably: temp file, fsync, rename, fsync of the directory.
pub fn store(state: &SavedState) -> io::Result<()> {
    let dir = state_dir();
    std::fs::create_dir_all(&dir).map_err(|e| cpushield_sys::with_path(e, &dir))?;
    let tmp = dir.join("state.json.tmp");
    let text = serde_json::to_string(state).map_err(io::Error::other)?;
    {
        let mut file = File::create(&tmp).map_err(|e| cpushield_sys::with_path(e, &tmp))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, state_path())?;
    File::open(&dir)?.sync_all()
}

/// Removes the state file (after a complete reset).
pub fn remove() -> io::Result<()> {
    match std::fs::remove_file(state_path()) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => File::open(state_dir())
            .and_then(|d| d.sync_all())
            .or(Ok(())),
    }
}

/// An exclusive lock serialising cpushield invocations; released on drop or death.
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Waits for and takes the lock.
    pub fn acquire() -> io::Result<Self> {
        let dir = state_dir();
        std::fs::create_dir_all(&dir).map_err(|e| cpushield_sys::with_path(e, &dir))?;
        let path = dir.join("lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| cpushield_sys::with_path(e, &path))?;
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(cpushield_sys::with_path(io::Error::last_os_error(), &path));
        }
        Ok(Self { _file: file })
    }
}

/// Whether a state dir exists with a state file (for messages).
pub fn is_shielded() -> bool {
    Path::new(&state_path()).exists()
}
