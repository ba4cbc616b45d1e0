//! RedHawk-style CPU shielding on a stock kernel (Brosky & Rotolo and Brosky).
//!
//! Three masks (processes, interrupts, local timer); Brosky's affinity rule
//! applied to every task and IRQ; enforcement by cpusets (cgroup v2 isolated
//! partition or v1 exclusive cpuset); the original state saved durably before
//! the first change so that [`reset`] undoes everything exactly.
//!
//! Shape: [`snapshot`] reads, [`plan`] decides (pure), [`apply`] writes.

pub mod apply;
pub mod bootparams;
pub mod default_cpus;
#[cfg(any(test, feature = "fake"))]
pub mod fake_machine;
pub mod held;
pub mod irq_moves;
pub mod irq_threads;
pub mod layout;
pub mod masks;
pub mod mems;
pub mod orphan;
mod partition;
pub mod placement;
pub mod plan;
pub mod private_run;
pub mod render;
pub mod root_kthreads;
pub mod runtime;
pub mod snapshot;
pub mod state;
pub mod status;
pub mod steps;
pub mod tuned;

use apply::Outcome;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::host::Clock;
use cpushield_kernel::{paths, Host, Kernel};
pub use held::HeldShield;
use layout::CgroupLayout;
pub use masks::ShieldMasks;
use serde::Serialize;
use state::{SavedState, StateStore};
use steps::Note;

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
    #[error("the shield in {dir} was set up in PID namespace {saved} but this is {here}: task IDs differ between namespaces, so nothing was changed; run cpushield in that namespace (`cpushield reset` there undoes it), or, if that namespace no longer exists, `cpushield reset --namespace-gone` restores the cgroups, IRQs and settings")]
    OtherNamespace {
        /// The state directory.
        dir: String,
        /// Namespace of the saved state.
        saved: String,
        /// Namespace of this invocation.
        here: String,
    },
    /// `reset --namespace-gone` while the shield's namespace still exists.
    #[error("the shield in {dir} was set up in PID namespace {saved}, which still exists ({alive}): a reset from outside it would pull the cgroups from under its running tasks, so nothing was changed; run `cpushield reset` in that namespace, or end its tasks and run `cpushield reset --namespace-gone` again")]
    NamespaceAlive {
        /// The state directory.
        dir: String,
        /// Namespace of the saved state.
        saved: String,
        /// What shows it alive: this process in it, or a process in it.
        alive: String,
    },
    /// The saved state holds values that cannot be restored on this machine.
    #[error("the shield state {path} cannot be restored exactly, so nothing was changed and it is kept: {}; correct those values by hand (docs/RELIABILITY.md), then run reset again", problems.join("; "))]
    BadState {
        /// The state file.
        path: String,
        /// Each object that cannot be restored, with its value.
        problems: Vec<String>,
    },
    /// A shield is in place but its state is missing.
    #[error("a shield is in place but there is no shield state in {dir} ({}): a shield set up with another CPUSHIELD_STATE_DIR, or its state was removed; nothing was changed. Run the command again with the state directory it was set up with, or undo the shield with `cpushield reset --without-state` (the affinities, IRQ masks and settings from before it are then not known: it gives back the kernel's defaults)", evidence.join("; "))]
    LostState {
        /// The state directory searched.
        dir: String,
        /// What shows the shield, one item each.
        evidence: Vec<String>,
    },
    /// `reset --without-state` while a state exists.
    #[error("the shield state in {dir} exists: `cpushield reset` restores exactly what it saved; --without-state is only for a shield whose state is gone")]
    StateExists {
        /// The state directory.
        dir: String,
    },
    /// `--mems` names nodes the shield's cpuset cannot have (the message
    /// names them and the nodes it can).
    #[error("{0}")]
    BadMems(String),
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
    /// The memory nodes of the shield's cpuset, in words (`1 (the nodes of
    /// its CPUs)`); `None` with no process shield.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mems: Option<String>,
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
    let online = cpushield_kernel::online_cpus(kernel)?;
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

/// Adds `request` to the shield (the first call saves the original state in
/// the state store). The report notes IRQs whose move to the housekeeping
/// CPUs is still pending.
pub fn shield(host: &Host, request: &ShieldMasks, options: Options) -> Result<Report, ShieldError> {
    shield_with(host, request, None, options)
}

/// [`shield`] with the memory nodes of the shield's cpuset named by hand
/// (`--mems`): they stay in force until reset, and a later shield without
/// them keeps them. `None` keeps what is in force (at first, the nodes of
/// the shielded CPUs).
pub fn shield_with(
    host: &Host,
    request: &ShieldMasks,
    mems: Option<&CpuSet>,
    options: Options,
) -> Result<Report, ShieldError> {
    let mut report = shield_unnoted(host, request, mems, options)?;
    irq_moves::note_pending(host.kernel(), &mut report);
    Ok(report)
}

/// [`shield_with`] without the note on IRQs whose move is still pending.
fn shield_unnoted(
    host: &Host,
    request: &ShieldMasks,
    mems: Option<&CpuSet>,
    options: Options,
) -> Result<Report, ShieldError> {
    let (kernel, store) = (host.kernel(), host.store());
    check_request(kernel, request, options)?;
    let layout = layout(kernel)?;
    let _lock = store.lock()?;
    let loaded = state::load_from(store)?;
    let recovered = loaded.as_ref().and_then(|l| l.recovered.clone());
    let saved = loaded.map(|l| l.state);
    match &saved {
        Some(s) => same_namespace(kernel, store, s)?,
        None => no_lost_shield(kernel, store)?,
    }
    let layout = saved.as_ref().map(|s| s.layout.clone()).unwrap_or(layout);
    let snap = match &saved {
        Some(saved) => take_against(kernel, saved)?,
        None => snapshot::take(kernel, &layout)?,
    };
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
    if let Some(why) = mems.and_then(|m| crate::mems::refusal(&snap, m)) {
        return Err(ShieldError::BadMems(why));
    }
    let mut saved =
        saved.unwrap_or_else(|| SavedState::from_snapshot(&snap, ShieldMasks::default()));
    if let Some(mems) = mems {
        saved.mems = Some(mems.clone());
    }
    let mut report = change(kernel, store, snap, saved, masks)?;
    report.notes.extend(recovered_note(recovered));
    Ok(report)
}

fn recovered_note(recovered: Option<String>) -> Option<Note> {
    recovered.map(|text| Note {
        severity: steps::Severity::Warn,
        text,
        remedy: None,
    })
}

/// Refuses a state written from another PID namespace: its task IDs name
/// other tasks here (one state per scope).
fn same_namespace(
    kernel: &dyn Kernel,
    store: &dyn StateStore,
    saved: &SavedState,
) -> Result<(), ShieldError> {
    let here = snapshot::pid_namespace(kernel);
    if saved.pid_namespace.is_empty() || here.is_empty() || saved.pid_namespace == here {
        return Ok(());
    }
    Err(ShieldError::OtherNamespace {
        dir: store.dir().display().to_string(),
        saved: saved.pid_namespace.clone(),
        here,
    })
}

/// How long `reset --namespace-gone` waits for the tasks of a namespace
/// being torn down to end before it calls the namespace alive. A task killed
/// in the middle of a slow kernel write (a CPU taken offline by `tune`'s
/// trial, seconds on a busy virtual machine) ends only when the write
/// returns: 3 s was seen to be too short in a 4-CPU guest.
pub const NAMESPACE_END_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A process visible here, not a zombie, whose PID namespace is `ns`.
fn process_in_namespace(kernel: &dyn Kernel, ns: &str) -> Option<String> {
    let proc = cpushield_kernel::Procfs::new(kernel);
    proc.pids()
        .unwrap_or_default()
        .into_iter()
        .find(|&pid| {
            let in_ns = proc
                .process_link(pid, "ns/pid")
                .is_ok_and(|link| link.is_some_and(|l| l.to_string_lossy() == ns));
            // A zombie has ended: only its exit status is left to collect.
            let zombie = proc
                .process_file(pid, "stat")
                .ok()
                .flatten()
                .and_then(|stat| {
                    stat.rsplit_once(") ")
                        .and_then(|(_, rest)| rest.chars().next())
                })
                .is_some_and(|state| state == 'Z' || state == 'X');
            in_ns && !zombie
        })
        .map(|pid| pid.to_string())
}

/// Refuses, before any change, a `reset --namespace-gone` of a state whose
/// PID namespace still exists: its init holds its lock in the state
/// directory ([`state::FileStore::hold_namespace_alive`], seen from any PID
/// namespace), this process is in it, or a process this
/// process can see is (its `/proc/PID/ns/pid` names the same inode). A
/// namespace that is neither this one nor one below it shows no process
/// here; its tasks are then looked for where they would be, in cpushield's
/// cgroups.
fn namespace_is_gone(
    kernel: &dyn Kernel,
    store: &dyn StateStore,
    clock: &dyn Clock,
    saved: &SavedState,
) -> Result<(), ShieldError> {
    if saved.pid_namespace.is_empty() {
        return Ok(());
    }
    let alive = |what: String| ShieldError::NamespaceAlive {
        dir: store.dir().display().to_string(),
        saved: saved.pid_namespace.clone(),
        alive: what,
    };
    if snapshot::pid_namespace(kernel) == saved.pid_namespace {
        return Err(alive("this command runs in it".into()));
    }
    // cgroup v2 says whether a cgroup holds a task anywhere on the machine,
    // whichever namespace reads it (v1 lists only the tasks the reader sees).
    let populated = || {
        saved.created_cgroups.iter().find(|dir| {
            kernel
                .read(&dir.join("cgroup.events"))
                .unwrap_or_default()
                .lines()
                .any(|l| l.trim() == "populated 1")
        })
    };
    // Its init's lock crosses PID namespaces: it tells of a namespace whose
    // tasks this one cannot see (a sibling's, on cgroup v1).
    let evidence = || {
        store
            .namespace_alive(&saved.pid_namespace)
            .then(|| "its init still holds its lock in the state directory".to_string())
            .or_else(|| {
                process_in_namespace(kernel, &saved.pid_namespace)
                    .map(|pid| format!("process {pid} here is in it"))
            })
            .or_else(|| populated().map(|dir| format!("{} holds tasks", dir.display())))
    };
    // A namespace whose init was just killed takes a moment to end its other
    // tasks (each gets SIGKILL, then exits): they are waited for a while.
    // On the host's clock: a test's fake clock passes the wait at once.
    let deadline = clock.now_ns() + NAMESPACE_END_WAIT.as_nanos() as u64;
    while let Some(what) = evidence() {
        if clock.now_ns() >= deadline {
            return Err(alive(what));
        }
        clock.sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

/// Removes the run directories of a load that the state records
/// ([`SavedState::load_dirs`]); notes what it could not remove.
fn remove_load_dirs(kernel: &dyn Kernel, saved: &SavedState) -> Vec<Note> {
    let mut notes = Vec::new();
    for dir in &saved.load_dirs {
        if !state::is_load_dir(dir) || !kernel.exists(dir) {
            continue;
        }
        if let Err(e) = kernel.remove_tree(dir) {
            notes.push(Note {
                severity: steps::Severity::Warn,
                text: format!(
                    "the load's files in {} could not be removed: {e}",
                    dir.display()
                ),
                remedy: Some(format!("rm -r {}", dir.display())),
            });
        }
    }
    notes
}

/// A snapshot to compare with `saved`, each task's start time in the
/// state's terms ([`SavedState::start_as_saved`]) where its task IDs name the
/// same tasks (its PID namespace).
fn take_against(kernel: &dyn Kernel, saved: &SavedState) -> std::io::Result<snapshot::Snapshot> {
    let mut snap = snapshot::take(kernel, &saved.layout)?;
    if saved.pid_namespace.is_empty() || saved.pid_namespace == snap.pid_namespace {
        for task in &mut snap.tasks {
            task.starttime = saved.start_as_saved(task.tid, task.starttime);
        }
    }
    Ok(snap)
}

/// Refuses to shield when our cgroups exist but no state does: the new state
/// would record the shielded system as the original. (Settings alone at
/// shield values may be someone else's tuning, and are not refused here.)
fn no_lost_shield(kernel: &dyn Kernel, store: &dyn StateStore) -> Result<(), ShieldError> {
    match orphan::detect(kernel)? {
        Some(found) if !found.cgroups.is_empty() => Err(ShieldError::LostState {
            dir: store.dir().display().to_string(),
            evidence: found.evidence,
        }),
        _ => Ok(()),
    }
}

/// Removes `request` from the shield; when nothing stays shielded, resets.
/// The report notes IRQs whose move is still pending.
pub fn unshield(
    host: &Host,
    request: &ShieldMasks,
    options: Options,
) -> Result<Report, ShieldError> {
    let mut report = unshield_unnoted(host, request, options)?;
    irq_moves::note_pending(host.kernel(), &mut report);
    Ok(report)
}

/// [`unshield`] without the note on IRQs whose move is still pending.
fn unshield_unnoted(
    host: &Host,
    request: &ShieldMasks,
    options: Options,
) -> Result<Report, ShieldError> {
    let (kernel, store) = (host.kernel(), host.store());
    check_request(kernel, request, options)?;
    let lock = store.lock()?;
    let Some(loaded) = state::load_from(store)? else {
        // Nothing to take from a shield this command cannot see.
        return without_state(kernel, store);
    };
    same_namespace(kernel, store, &loaded.state)?;
    let masks = loaded.state.masks.difference(request);
    if masks.is_empty() {
        // Under the same lock: a shield cannot slip in between and be undone.
        return reset_locked(kernel, store, None, &lock);
    }
    let snap = take_against(kernel, &loaded.state)?;
    let mut report = change(kernel, store, snap, loaded.state, masks)?;
    report.notes.extend(recovered_note(loaded.recovered));
    Ok(report)
}

/// Makes the state's cgroups what the kernel has after a shield cut short
/// (SIGKILL): its state, stored before the first change, names every cgroup
/// it meant to make. One it never made is forgotten, so this plan makes it;
/// one made but not yet marked, and left as mkdir made it, is marked now
/// ([`layout::is_untouched`]), so that reset removes it later.
fn settle_cut_creates(kernel: &dyn Kernel, saved: &mut SavedState) {
    saved.created_cgroups.retain(|dir| kernel.exists(dir));
    for dir in &saved.created_cgroups {
        if layout::lacks_mark(kernel, dir) && layout::is_untouched(kernel, &*saved.layout, dir) {
            let _ = kernel.set_xattr(dir, layout::CGROUP_MARK, b"1");
        }
    }
}

fn change(
    kernel: &dyn Kernel,
    store: &dyn StateStore,
    snap: snapshot::Snapshot,
    mut saved: SavedState,
    masks: ShieldMasks,
) -> Result<Report, ShieldError> {
    saved.version = state::STATE_VERSION;
    settle_cut_creates(kernel, &mut saved);
    let followed = saved.follow_requests(&snap, true);
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
    // The teardown in the plan removes the cgroups when no process stays
    // shielded; they are forgotten only once done.
    let forget_cgroups = masks.procs.is_empty();
    let (outcome, mut notes) =
        apply_and_store(kernel, store, &snap, &plan, &mut saved, forget_cgroups)?;
    notes.splice(0..0, followed_notes(kernel, &followed));
    notes.splice(0..0, plan.notes);
    let procs = masks.procs.intersection(&snap.online);
    let mems = (!procs.is_empty())
        .then(|| crate::mems::choose(&snap, saved.mems.as_ref(), &procs).describe(&snap.root_mems));
    let mut report = report(&snap, masks, outcome, notes);
    report.mems = mems;
    Ok(report)
}

/// One note per requested affinity followed (Brosky's rule over time).
fn followed_notes(kernel: &dyn Kernel, followed: &[state::Followed]) -> Vec<Note> {
    followed
        .iter()
        .map(|f| Note {
            severity: steps::Severity::Info,
            text: match f {
                state::Followed::Task { tid, comm, was, now } => format!(
                    "{} set its affinity to {now} while shielded (the shield had set {was}): that is now its requested affinity, which the shield and reset honour",
                    snapshot::task_label(kernel, *tid, comm)
                ),
                state::Followed::Irq { irq, was, now } => format!(
                    "IRQ {irq}: smp_affinity was set to {now} while shielded (the shield had set {was}): that is now its requested mask, which the shield and reset honour"
                ),
            },
            remedy: None,
        })
        .collect()
}

/// Stores the state (marked as being applied), applies the plan, then reads
/// back what it left on every task and IRQ and stores that as what the shield
/// set. Returns the outcome and a note when the read-back could not be saved.
fn apply_and_store(
    kernel: &dyn Kernel,
    store: &dyn StateStore,
    snap: &snapshot::Snapshot,
    plan: &steps::Plan,
    saved: &mut SavedState,
    forget_cgroups: bool,
) -> Result<(Outcome, Vec<Note>), ShieldError> {
    // Durable before the first change: a SIGKILL from here on is undone by
    // reset, which then trusts no record of what was set (exact undo).
    saved.set.applying = true;
    state::store_in(store, saved)?;
    let outcome = apply::apply(kernel, plan)?;
    let mut notes = Vec::new();
    let after = snapshot::read_back(kernel, snap);
    match after {
        Ok(after) => saved.record_set(&after),
        Err(e) => notes.push(Note {
            severity: steps::Severity::Warn,
            text: format!(
                "the shield is applied, but what it set could not be read back ({e}): an affinity a task or an IRQ's owner sets from now on is not followed, and reset restores the affinities saved before"
            ),
            remedy: None,
        }),
    }
    if forget_cgroups {
        saved.created_cgroups.clear();
        state::store_in(store, saved)?;
    } else if let Err(e) = state::store_in(store, saved) {
        // The saved state (marked as being applied) still undoes everything.
        notes.push(Note {
            severity: steps::Severity::Warn,
            text: format!(
                "the shield is applied, but what it set could not be saved ({e}): an affinity a task or an IRQ's owner sets from now on is not followed, and reset restores the affinities saved before"
            ),
            remedy: None,
        });
    }
    Ok((outcome, notes))
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
        mems: None,
    }
}

/// What unshield and reset do where no state is saved: a shield the kernel
/// shows without its state is refused (its original settings are lost);
/// none is nothing to undo.
fn without_state(kernel: &dyn Kernel, store: &dyn StateStore) -> Result<Report, ShieldError> {
    match orphan::detect(kernel)? {
        Some(found) => Err(ShieldError::LostState {
            dir: store.dir().display().to_string(),
            evidence: found.evidence,
        }),
        None => Ok(empty_report(kernel)),
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
        mems: None,
    }
}

/// Restores exactly the state saved before the first shield. Idempotent; a
/// no-op when nothing is shielded. The whole state is checked against the
/// machine before any change: a value that cannot be restored refuses the
/// reset, naming each object, and keeps the state. The state file is removed
/// only when every change has been undone.
pub fn reset(host: &Host, options: Options) -> Result<Report, ShieldError> {
    let (kernel, store) = (host.kernel(), host.store());
    if !options.is_root {
        return Err(ShieldError::NotRoot);
    }
    let lock = store.lock_for_reset()?;
    reset_locked(kernel, store, None, &lock)
}

/// [`reset`] of a shield set up from a PID namespace that no longer exists:
/// its tasks are gone, so cgroups, IRQs and settings are restored and task
/// IDs (which name other tasks here) are left alone.
pub fn reset_namespace_gone(host: &Host, options: Options) -> Result<Report, ShieldError> {
    let (kernel, store) = (host.kernel(), host.store());
    if !options.is_root {
        return Err(ShieldError::NotRoot);
    }
    let lock = store.lock_for_reset()?;
    reset_locked(kernel, store, Some(host.clock()), &lock)
}

/// Undoes a shield whose state is gone ([`orphan`]) as far as the kernel
/// shows: tasks in cpushield's cgroups to the root with every online CPU,
/// its marked cgroups removed, IRQs and settings at the kernel's defaults;
/// the report's notes say what it cannot know. Refused where a state exists
/// (`reset` restores that exactly); nothing to do where nothing shows a
/// shield.
pub fn reset_without_state(host: &Host, options: Options) -> Result<Report, ShieldError> {
    let (kernel, store) = (host.kernel(), host.store());
    if !options.is_root {
        return Err(ShieldError::NotRoot);
    }
    let _lock = store.lock_for_reset()?;
    if state::load_from(store)?.is_some() {
        return Err(ShieldError::StateExists {
            dir: store.dir().display().to_string(),
        });
    }
    let layout = layout(kernel)?;
    let Some(found) = orphan::detect(kernel)? else {
        return Ok(empty_report(kernel));
    };
    join_root_cpuset(kernel, &layout);
    let snap = snapshot::take(kernel, &layout)?;
    let plan = orphan::plan_undo(&snap, &found);
    let outcome = apply::apply(kernel, &plan)?;
    Ok(report(&snap, ShieldMasks::default(), outcome, plan.notes))
}

/// Everything in a saved state that this machine cannot restore: CPUs it does
/// not have, a cgroup root that is not its cpuset hierarchy, cgroups without
/// cpushield's mark (but one left as mkdir made it: [`layout::is_untouched`]).
pub fn machine_problems(
    kernel: &dyn Kernel,
    saved: &SavedState,
    snap: &snapshot::Snapshot,
) -> Vec<String> {
    let mut out = Vec::new();
    let fits = |set: &CpuSet| {
        set.last().is_some_and(|c| c < snap.possible) && set.intersects(&snap.online)
    };
    let online = snap.online.to_list();
    // Only tasks still alive need their values: an exited task is not
    // restored, and none is alive here where the state's task IDs name the
    // tasks of another PID namespace.
    let same_tasks = saved.pid_namespace.is_empty() || saved.pid_namespace == snap.pid_namespace;
    let alive: std::collections::HashSet<(i32, u64)> = snap
        .tasks
        .iter()
        .filter(|_| same_tasks)
        .map(|t| (t.tid, t.starttime))
        .collect();
    let alive = |tid: i32, start: u64| alive.contains(&(tid, start));
    for (tid, t) in &saved.tasks {
        if !fits(&t.affinity) && alive(*tid, t.starttime) {
            out.push(format!(
                "{}: saved affinity '{}' does not fit this machine (online CPUs {online}, {} possible)",
                snapshot::task_name(*tid, &t.comm),
                t.affinity.to_list(),
                snap.possible
            ));
        }
    }
    for (tid, a) in &saved.adopted {
        if !fits(&a.requested) && alive(*tid, a.starttime) {
            out.push(format!(
                "task {tid} (born under the shield): affinity '{}' does not fit this machine (online CPUs {online})",
                a.requested.to_list()
            ));
        }
    }
    for (irq, text) in &saved.irqs {
        let ok = CpuSet::parse_mask(text).is_ok_and(|s| fits(&s));
        if !ok {
            out.push(format!(
                "IRQ {irq}: saved mask '{text}' does not fit this machine (online CPUs {online})"
            ));
        }
    }
    match layout::detect(kernel) {
        Some(l) if l == saved.layout => {}
        other => out.push(format!(
            "cgroup hierarchy {} is not the cpuset hierarchy mounted here ({})",
            saved.layout.root().display(),
            other
                .map(|l| l.root().display().to_string())
                .unwrap_or_else(|| "none".into())
        )),
    }
    for dir in &saved.created_cgroups {
        if !kernel.exists(dir) {
            continue;
        }
        if layout::lacks_mark(kernel, dir) && !layout::is_untouched(kernel, &*saved.layout, dir) {
            out.push(format!(
                "cgroup {}: has no cpushield mark ({}), so cpushield did not create it and will not empty or remove it",
                dir.display(),
                layout::CGROUP_MARK
            ));
        }
    }
    out
}

/// Whether every path a plan touches lies where reset may write: the cpuset
/// hierarchy, /proc/sys, /proc/irq and /sys. Returns the ones outside.
pub fn paths_outside(plan: &steps::Plan, layout: &CgroupLayout) -> Vec<std::path::PathBuf> {
    let allowed = [
        layout.root(),
        // The prefixes a saved state may name: reset refuses to write anywhere else.
        std::path::Path::new(paths::sysctl::DIR),
        std::path::Path::new(paths::IRQ_DIR),
        std::path::Path::new(paths::SYS),
    ];
    let inside = |p: &std::path::Path| {
        p.is_absolute()
            && !p
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            && allowed.iter().any(|a| p.starts_with(a))
    };
    let mut out = Vec::new();
    // Thousands of moves name a few tasks files: each path is checked once.
    let mut checked = std::collections::HashSet::new();
    for step in &plan.steps {
        let paths: Vec<&std::path::Path> = match step {
            steps::Step::Mkdir(p) | steps::Step::Rmdir(p) => vec![p],
            steps::Step::Write { path, .. } => vec![path],
            steps::Step::Moves { to, .. } => vec![to],
            steps::Step::Drain { from, to } => vec![from, to],
            steps::Step::Affinities(_) | steps::Step::Sched { .. } => vec![],
        };
        out.extend(
            paths
                .into_iter()
                .filter(|p| checked.insert(*p) && !inside(p))
                .map(|p| p.to_path_buf()),
        );
    }
    out
}

/// Follows the requests made since the shield (see
/// [`SavedState::follow_requests`]) and saves them, marked as being applied,
/// before reset changes anything: a reset killed half way is then finished by
/// the next one from the saved requests, never from the half-restored
/// affinities. Where the state cannot be written (a read-only state
/// directory), nothing is followed: reset restores the state as stored.
fn follow_before_reset(
    store: &dyn StateStore,
    saved: &mut SavedState,
    snap: &snapshot::Snapshot,
    with_tasks: bool,
) -> std::io::Result<Vec<state::Followed>> {
    if saved.set.applying || saved.set.is_empty() {
        return Ok(Vec::new());
    }
    let followed = saved.follow_requests(snap, with_tasks);
    saved.set.applying = true;
    saved.version = state::STATE_VERSION;
    if state::store_in(store, saved).is_err() {
        *saved = state::load_from(store)?
            .ok_or_else(|| std::io::Error::other("the shield state vanished during reset"))?
            .state;
        return Ok(Vec::new());
    }
    Ok(followed)
}

/// A reset started from a shell in cpushield's cgroups (v1: the
/// housekeeping cpuset) runs on their CPUs only. This thread joins the root
/// first, where the teardown puts every task left in cpushield's cgroups
/// anyway (so the undo is the same), and reads the tasks on every CPU. Only
/// this thread moves, and only out of cpushield's own cgroups; where it
/// cannot, it stays.
fn join_root_cpuset(kernel: &dyn Kernel, layout: &CgroupLayout) {
    // The writing thread's own cgroup, before it leaves the shield's.
    let Ok(text) = kernel.read(std::path::Path::new(paths::THREAD_SELF_CGROUP)) else {
        return;
    };
    if layout
        .cgroup_of(&text)
        .is_some_and(|c| snapshot::is_ours(&c))
    {
        // 0 names the writing thread itself.
        let _ = kernel.write(&layout.threads_file(layout.root()), "0");
    }
}

/// Plans and applies the reset up to three times: tasks forked while reset
/// runs are caught by the next pass. The last snapshot, what was done, and
/// the last plan's notes.
fn reset_passes(
    kernel: &dyn Kernel,
    saved: &SavedState,
    first: snapshot::Snapshot,
    path: &str,
) -> Result<(snapshot::Snapshot, Outcome, Vec<Note>), ShieldError> {
    let mut total = Outcome::default();
    let mut notes = Vec::new();
    let mut snap = first;
    for pass in 0..3 {
        if pass > 0 {
            snap = take_against(kernel, saved)?;
        }
        let plan = plan::plan_reset(&snap, saved);
        let outside = paths_outside(&plan, &saved.layout);
        if !outside.is_empty() {
            return Err(ShieldError::BadState {
                path: path.to_string(),
                problems: outside_problems(&outside),
            });
        }
        let work = has_work(&plan);
        let outcome = apply::apply(kernel, &plan)?;
        // Every step went through and cpushield's cgroups are gone: no task
        // is left to restore (one born meanwhile is in none of them, and
        // reset leaves it as it is). A step that failed is retried.
        let clean =
            outcome.notes.is_empty() && !saved.created_cgroups.iter().any(|d| kernel.exists(d));
        total.add(outcome);
        notes = plan.notes;
        if !work || clean {
            break;
        }
    }
    Ok((snap, total, notes))
}

/// The problems of a saved state whose reset would write outside what a
/// shield writes.
fn outside_problems(outside: &[std::path::PathBuf]) -> Vec<String> {
    outside
        .iter()
        .map(|p| {
            format!(
                "{}: outside the cpuset hierarchy, /proc/sys, /proc/irq and /sys",
                p.display()
            )
        })
        .collect()
}

/// Whether a reset plan restores anything: draining and removing cgroups
/// and scheduling changes alone leave nothing for another pass.
fn has_work(plan: &steps::Plan) -> bool {
    plan.steps.iter().any(|s| {
        !matches!(
            s,
            steps::Step::Drain { .. } | steps::Step::Rmdir(_) | steps::Step::Sched { .. }
        )
    })
}

/// Removes the saved state once everything is restored.
fn remove_state(store: &dyn StateStore) -> Result<(), ShieldError> {
    state::remove_from(store).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "everything was restored, but the shield state could not be removed ({e}); run `cpushield reset` again once it is writable (a second reset changes nothing)"
            ),
        )
    })?;
    Ok(())
}

/// `namespace_gone`: the reset is `--namespace-gone`'s, which waits on this
/// clock for the namespace's tasks to end.
fn reset_locked(
    kernel: &dyn Kernel,
    store: &dyn StateStore,
    namespace_gone: Option<&dyn Clock>,
    _lock: &state::StateLock,
) -> Result<Report, ShieldError> {
    let Some(loaded) = state::load_from(store)? else {
        return without_state(kernel, store);
    };
    let mut saved = loaded.state;
    if let Some(clock) = namespace_gone {
        namespace_is_gone(kernel, store, clock, &saved)?;
        // Its init, killed, could not remove its liveness file: a later run
        // would find a namespace that is not there.
        if !saved.pid_namespace.is_empty() {
            store.forget_namespace(&saved.pid_namespace);
        }
    } else {
        same_namespace(kernel, store, &saved)?;
    }
    let path = store.dir().join(state::STATE_FILE).display().to_string();
    join_root_cpuset(kernel, &saved.layout);
    let first = take_against(kernel, &saved)?;
    let problems = machine_problems(kernel, &saved, &first);
    if !problems.is_empty() {
        return Err(ShieldError::BadState { path, problems });
    }
    // Changed last (by tune or apply, over the shield): undone first, so a
    // setting the shield also wrote ends at the shield's original.
    let runtime_notes = runtime::restore(kernel, &saved.runtime);
    // Affinities set since the shield are requests: reset restores them, not
    // the ones saved before (tasks only where their IDs mean the same tasks).
    let same_tasks = saved.pid_namespace.is_empty() || saved.pid_namespace == first.pid_namespace;
    let followed = follow_before_reset(store, &mut saved, &first, same_tasks)?;
    // What tuned's loaded profile also sets is written back as tuned sets it.
    let left_to_tuned = tuned::read_claim(kernel)
        .and_then(|claim| tuned::leave_to_tuned(&mut saved, &claim, &first));
    let (snap, total, mut notes) = reset_passes(kernel, &saved, first, &path)?;
    let load_notes = remove_load_dirs(kernel, &saved);
    remove_state(store)?;
    notes.extend(followed_notes(kernel, &followed));
    notes.extend(recovered_note(loaded.recovered));
    notes.extend(runtime_notes);
    notes.extend(load_notes);
    notes.extend(left_to_tuned.map(|text| Note {
        severity: steps::Severity::Info,
        text,
        remedy: None,
    }));
    Ok(report(&snap, ShieldMasks::default(), total, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_reset_plan_of_drains_and_removals_only_has_no_work_for_another_pass() {
        let mut plan = steps::Plan::default();
        plan.steps
            .push(steps::Step::Rmdir(PathBuf::from("/sys/fs/cgroup/x")));
        assert!(!has_work(&plan));
        plan.steps
            .push(steps::Step::Mkdir(PathBuf::from("/sys/fs/cgroup/x")));
        assert!(has_work(&plan));
    }

    #[test]
    fn a_path_outside_what_a_shield_writes_is_named_as_a_problem() {
        let problems = outside_problems(&[PathBuf::from("/etc/passwd")]);
        assert_eq!(
            problems,
            ["/etc/passwd: outside the cpuset hierarchy, /proc/sys, /proc/irq and /sys"]
        );
    }
}
