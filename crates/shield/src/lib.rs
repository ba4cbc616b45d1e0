//! RedHawk-style CPU shielding on a stock kernel (seeds 000 and 001).
//!
//! Three masks (processes, interrupts, local timer); the seed-001 affinity rule
//! applied to every task and IRQ; enforcement by cpusets (cgroup v2 isolated
//! partition or v1 exclusive cpuset); the original state saved durably before
//! the first change so that [`reset`] undoes everything exactly.
//!
//! Shape: [`snapshot`] reads, [`plan`] decides (pure), [`apply`] writes.

pub mod apply;
pub mod bootparams;
pub mod layout;
pub mod masks;
pub mod placement;
pub mod plan;
pub mod snapshot;
pub mod state;
pub mod status;

use apply::Outcome;
use cpushield_cpuset::CpuSet;
use cpushield_sys::Kernel;
use layout::CgroupLayout;
pub use masks::ShieldMasks;
use plan::Note;
use serde::Serialize;
use state::SavedState;

/// Why a shield operation was refused or failed. Refusals happen before any change.
#[derive(Debug, thiserror::Error)]
pub enum ShieldError {
    /// Not running as root.
    #[error("shielding changes cgroups, IRQs and other tasks: run as root (sudo cpushield …)")]
    NotRoot,
    /// No CPU was named.
    #[error("no CPU given: name CPUs with --all, --procs, --irqs or --ltmr (e.g. --all 3)")]
    NothingRequested,
    /// CPUs that are not online.
    #[error("CPU(s) {asked} not online (online CPUs: {online}): pick CPUs from the online list")]
    NotOnline {
        /// The offending CPUs.
        asked: CpuSet,
        /// The online CPUs.
        online: CpuSet,
    },
    /// The request would shield every online CPU from one kind.
    #[error("shielding {kind} on every online CPU ({online}) is refused: at least one CPU must stay unshielded for the rest of the system")]
    AllCpus {
        /// The kind of shield: processes, interrupts, local timer.
        kind: &'static str,
        /// The online CPUs.
        online: CpuSet,
    },
    /// No cpuset controller is mounted.
    #[error("no cpuset controller found in /proc/self/mountinfo: mount one (mount -t cgroup -o cpuset none /sys/fs/cgroup/cpuset) or enable it in cgroup v2 (echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control)")]
    NoCpuset,
    /// The shield was set up from another PID namespace.
    #[error("the shield was set up in PID namespace {saved} but this is {here}: run `cpushield reset` first")]
    OtherNamespace {
        /// Namespace of the saved state.
        saved: String,
        /// Namespace of this invocation.
        here: String,
    },
    /// An I/O error, with the path and what to do.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a shield, unshield or reset did, for printing.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The masks now in force (empty after reset).
    pub masks: ShieldMasks,
    /// The enforcement mechanism.
    pub mechanism: String,
    /// Scope of the tasks handled.
    pub scope: snapshot::Scope,
    /// Counts of what changed.
    pub outcome: Outcome,
    /// Notes from planning (unmovable threads, SMT, scope).
    pub notes: Vec<Note>,
}

/// Options common to shield operations.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Whether the caller is root (checked by the CLI with geteuid).
    pub is_root: bool,
    /// Also shield the SMT siblings of each CPU (`--whole-cores`).
    pub whole_cores: bool,
}

fn layout(kernel: &dyn Kernel) -> Result<CgroupLayout, ShieldError> {
    layout::detect(kernel).ok_or(ShieldError::NoCpuset)
}

/// Checks a request against the machine before anything is written.
pub fn validate(masks: &ShieldMasks, online: &CpuSet) -> Result<(), ShieldError> {
    let any = masks.any();
    let offline = any.difference(online);
    if !offline.is_empty() {
        return Err(ShieldError::NotOnline {
            asked: offline,
            online: online.clone(),
        });
    }
    for (kind, mask) in [
        ("processes", &masks.procs),
        ("interrupts", &masks.irqs),
        ("the local timer", &masks.ltmr),
    ] {
        if online.is_subset(mask) {
            return Err(ShieldError::AllCpus {
                kind,
                online: online.clone(),
            });
        }
    }
    Ok(())
}

fn with_siblings(masks: &ShieldMasks, snap: &snapshot::Snapshot) -> ShieldMasks {
    let grow = |set: &CpuSet| {
        set.iter().fold(set.clone(), |acc, cpu| {
            snap.siblings.get(&cpu).map(|s| acc.union(s)).unwrap_or(acc)
        })
    };
    ShieldMasks {
        procs: grow(&masks.procs),
        irqs: grow(&masks.irqs),
        ltmr: grow(&masks.ltmr),
    }
}

/// Refuses, before anything is read under the lock or written, a request that
/// names no CPU or offline CPUs, or a caller that is not root.
fn check_request(
    kernel: &dyn Kernel,
    request: &ShieldMasks,
    options: Options,
) -> Result<(), ShieldError> {
    if request.is_empty() {
        return Err(ShieldError::NothingRequested);
    }
    let online = cpushield_sys::online_cpus(kernel)?;
    let offline = request.any().difference(&online);
    if !offline.is_empty() {
        return Err(ShieldError::NotOnline {
            asked: offline,
            online,
        });
    }
    if !options.is_root {
        return Err(ShieldError::NotRoot);
    }
    Ok(())
}

/// Adds `request` to the shield (the first call saves the original state).
pub fn shield(
    kernel: &dyn Kernel,
    request: &ShieldMasks,
    options: Options,
) -> Result<Report, ShieldError> {
    check_request(kernel, request, options)?;
    let layout = layout(kernel)?;
    let _lock = state::StateLock::acquire()?;
    let saved = state::load()?;
    let layout = saved.as_ref().map(|s| s.layout.clone()).unwrap_or(layout);
    let snap = snapshot::take(kernel, &layout)?;
    let request = if options.whole_cores {
        with_siblings(request, &snap)
    } else {
        request.clone()
    };
    let masks = saved
        .as_ref()
        .map(|s| s.masks.union(&request))
        .unwrap_or_else(|| request.clone());
    validate(&masks, &snap.online)?;
    let saved = saved.unwrap_or_else(|| SavedState::from_snapshot(&snap, ShieldMasks::default()));
    change(kernel, snap, saved, masks)
}

/// Removes `request` from the shield; when nothing stays shielded, resets.
pub fn unshield(
    kernel: &dyn Kernel,
    request: &ShieldMasks,
    options: Options,
) -> Result<Report, ShieldError> {
    check_request(kernel, request, options)?;
    let lock = state::StateLock::acquire()?;
    let Some(saved) = state::load()? else {
        return Ok(empty_report(kernel));
    };
    let masks = saved.masks.difference(request);
    if masks.is_empty() {
        drop(lock);
        return reset(kernel, options);
    }
    let snap = snapshot::take(kernel, &saved.layout)?;
    change(kernel, snap, saved, masks)
}

fn change(
    kernel: &dyn Kernel,
    snap: snapshot::Snapshot,
    mut saved: SavedState,
    masks: ShieldMasks,
) -> Result<Report, ShieldError> {
    saved.absorb_new_objects(&snap);
    for (tid, starttime, requested) in plan::born_tasks(&snap, &saved) {
        saved.adopted.insert(
            tid,
            state::AdoptedTask {
                starttime,
                requested,
            },
        );
    }
    let plan = plan::plan_shield(&snap, &saved, &masks);
    for dir in &plan.creates {
        if !saved.created_cgroups.contains(dir) {
            saved.created_cgroups.push(dir.clone());
        }
    }
    saved.masks = masks.clone();
    if masks.procs.is_empty() {
        // The teardown in the plan removes them; forget them only once done.
        let outcome = apply_and_store(kernel, &plan, &mut saved, true)?;
        return Ok(report(&snap, masks, outcome, plan.notes));
    }
    let outcome = apply_and_store(kernel, &plan, &mut saved, false)?;
    Ok(report(&snap, masks, outcome, plan.notes))
}

fn apply_and_store(
    kernel: &dyn Kernel,
    plan: &plan::Plan,
    saved: &mut SavedState,
    forget_cgroups: bool,
) -> Result<Outcome, ShieldError> {
    // Durable before the first change: a SIGKILL from here on is undone by reset.
    state::store(saved)?;
    let outcome = apply::apply(kernel, plan)?;
    if forget_cgroups {
        saved.created_cgroups.clear();
        state::store(saved)?;
    }
    Ok(outcome)
}

fn report(
    snap: &snapshot::Snapshot,
    masks: ShieldMasks,
    outcome: Outcome,
    notes: Vec<Note>,
) -> Report {
    Report {
        masks,
        mechanism: snap.layout.mechanism().to_string(),
        scope: snap.scope,
        outcome,
        notes,
    }
}

fn empty_report(kernel: &dyn Kernel) -> Report {
    Report {
        masks: ShieldMasks::default(),
        mechanism: layout::detect(kernel)
            .map(|l| l.mechanism().to_string())
            .unwrap_or_default(),
        scope: snapshot::detect_scope(kernel),
        outcome: Outcome::default(),
        notes: Vec::new(),
    }
}

/// Restores exactly the state saved before the first shield. Idempotent; a
/// no-op when nothing is shielded. The state file is removed only when every
/// change has been undone.
pub fn reset(kernel: &dyn Kernel, options: Options) -> Result<Report, ShieldError> {
    if !options.is_root {
        return Err(ShieldError::NotRoot);
    }
    let _lock = state::StateLock::acquire()?;
    let Some(saved) = state::load()? else {
        return Ok(empty_report(kernel));
    };
    let mut total = Outcome::default();
    let mut notes = Vec::new();
    let mut last_snap = None;
    // Tasks forked while reset runs are caught by the next pass.
    for _ in 0..3 {
        let snap = snapshot::take(kernel, &saved.layout)?;
        let plan = plan::plan_reset(&snap, &saved);
        let work = plan
            .steps
            .iter()
            .any(|s| !matches!(s, plan::Step::Drain { .. } | plan::Step::Rmdir(_)));
        let outcome = apply::apply(kernel, &plan)?;
        total.applied += outcome.applied;
        total.moved += outcome.moved;
        total.affinities += outcome.affinities;
        total.irqs += outcome.irqs;
        total.vanished += outcome.vanished;
        total.notes.extend(outcome.notes);
        notes = plan.notes;
        last_snap = Some(snap);
        if !work {
            break;
        }
    }
    state::remove()?;
    let snap = last_snap.expect("at least one pass");
    Ok(report(&snap, ShieldMasks::default(), total, notes))
}
