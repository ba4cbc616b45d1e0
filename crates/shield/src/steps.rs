//! The changes a plan is made of, and what the user should know about it:
//! data shared by the planner, the cgroup versions' rules and apply.

use cpushield_cpuset::CpuSet;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// How a failed write is treated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum WriteKind {
    /// Failure aborts the operation.
    Required,
    /// An IRQ affinity: EIO means kernel-managed, reported, never fatal.
    Irq {
        /// IRQ number.
        irq: u32,
        /// Device name.
        name: String,
    },
    /// Failure is reported with this explanation and the operation goes on.
    BestEffort(String),
    /// `isolated` written to a v2 cpuset's `cpuset.cpus.partition`: failure
    /// aborts, and a kernel that refuses it for CPUs isolated at boot has it
    /// made isolated on a housekeeping CPU first (see `partition`).
    IsolatedPartition,
}

/// One change, applied in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Step {
    /// Create a cgroup directory (existing is fine).
    Mkdir(PathBuf),
    /// Write a value to a kernel file.
    Write {
        /// The file.
        path: PathBuf,
        /// The text written.
        value: String,
        /// What a failure means.
        kind: WriteKind,
    },
    /// Move threads (v1) or processes (v2) into one cgroup, in order, by
    /// writing each ID to its tasks file: one step for a run of moves to the
    /// same cgroup.
    Moves {
        /// The cgroup's tasks or cgroup.procs file.
        to: PathBuf,
        /// Thread (v1) or process (v2) IDs, in the order written.
        ids: Vec<i32>,
    },
    /// Give threads their affinities, in order (a thread that has its
    /// affinity already is left as is).
    Affinities(Vec<TaskAffinity>),
    /// Give a thread back its scheduling policy and parameters.
    Sched {
        /// Thread ID.
        tid: i32,
        /// Command name, for messages.
        comm: String,
        /// Policy number, for messages and the kernel.
        policy: u32,
        /// Real-time priority.
        priority: u32,
        /// Nice value.
        nice: i32,
        /// SCHED_FLAG_* bits.
        flags: u64,
        /// SCHED_DEADLINE runtime, deadline, period (ns).
        deadline: [u64; 3],
    },
    /// Move every task still in a cgroup (including ones not visible) to another.
    Drain {
        /// The cgroup emptied.
        from: PathBuf,
        /// The tasks file they go to.
        to: PathBuf,
    },
    /// Remove a cgroup directory (absent is fine).
    Rmdir(PathBuf),
}

/// One thread's affinity in a [`Step::Affinities`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskAffinity {
    /// Thread ID.
    pub tid: i32,
    /// The affinity it gets.
    pub cpus: CpuSet,
}

/// How much a note matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// For information.
    Info,
    /// Limits the guarantee.
    Warn,
}

/// Something the user should know about the plan, with the remedy when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// How much it matters.
    pub severity: Severity,
    /// What it is.
    pub text: String,
    /// What to do about it.
    pub remedy: Option<String>,
}

/// The ordered changes plus what the user should know.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    /// Changes, in order.
    pub steps: Vec<Step>,
    /// Cgroups this plan creates (recorded in the state before any change).
    pub creates: Vec<PathBuf>,
    /// Notes and warnings.
    pub notes: Vec<Note>,
}

impl Plan {
    pub(crate) fn write(
        &mut self,
        path: impl Into<PathBuf>,
        value: impl Into<String>,
        kind: WriteKind,
    ) {
        self.steps.push(Step::Write {
            path: path.into(),
            value: value.into(),
            kind,
        });
    }

    /// Moves `id` into the cgroup whose tasks file is `to`, after the steps
    /// planned so far: appended to the last step where that is a run of
    /// moves to the same file.
    pub(crate) fn move_task(&mut self, to: &Path, id: i32) {
        match self.steps.last_mut() {
            Some(Step::Moves { to: last, ids }) if last == to => ids.push(id),
            _ => self.steps.push(Step::Moves {
                to: to.to_path_buf(),
                ids: vec![id],
            }),
        }
    }

    /// Appends the affinities `tasks` as one step (none when empty).
    pub(crate) fn set_affinities(&mut self, tasks: Vec<TaskAffinity>) {
        if !tasks.is_empty() {
            self.steps.push(Step::Affinities(tasks));
        }
    }

    pub(crate) fn note(&mut self, severity: Severity, text: String, remedy: Option<String>) {
        self.notes.push(Note {
            severity,
            text,
            remedy,
        });
    }
}
