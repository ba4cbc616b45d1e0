//! Placing a task onto shielded CPUs (for `cpushield run`): into the shield's
//! cpuset, which plain sched_setaffinity cannot reach once the kernel enforces
//! the shield, then pinned.

use crate::state;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Host, Kernel, Procfs};
use std::io;
use std::sync::Arc;

/// How a thread reaches its CPUs where plain affinity cannot (a shield's
/// cpuset fences them off): given the thread ID (0: the caller) and the
/// CPUs. Cheap to clone, so that every thread a probe starts places itself
/// the same way on the same machine.
#[derive(Clone)]
pub struct PlaceFn(Arc<Place>);

/// The function inside a [`PlaceFn`].
type Place = dyn Fn(i32, &CpuSet) -> io::Result<()> + Send + Sync;

impl PlaceFn {
    /// A placer that calls `f`.
    pub fn new(f: impl Fn(i32, &CpuSet) -> io::Result<()> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Places thread `tid` (0: the caller) on `cpus`.
    pub fn place(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        (self.0)(tid, cpus)
    }
}

impl std::fmt::Debug for PlaceFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlaceFn")
    }
}

/// [`place_task`] on `host`, as a [`PlaceFn`].
pub fn task_placer(host: &Host) -> PlaceFn {
    let host = host.clone();
    PlaceFn::new(move |tid, cpus| place_task(&host, tid, cpus))
}

/// [`place_own_thread`] on `host`, as a [`PlaceFn`]: cpushield's own
/// measuring threads, each alone, never its process.
pub fn own_thread_placer(host: &Host) -> PlaceFn {
    let host = host.clone();
    PlaceFn::new(move |tid, cpus| place_own_thread(&host, tid, cpus))
}

/// The CPUs shielded from processes now (empty when nothing is shielded).
pub fn shielded_procs(host: &Host) -> io::Result<CpuSet> {
    Ok(state::load(host.store())?
        .map(|s| s.masks.procs)
        .unwrap_or_default())
}

/// Places thread `tid` on `cpus`: when they are all shielded, moves it (v1) or
/// its process (v2) into the shield cgroup first; then sets its affinity.
/// Reservations (`run --reserve`) are checked by the callers that place tasks
/// for users (`run` and the rt library), which know who holds them.
///
/// cpushield's own placement is not the task's request: when the shield has a
/// record of what it set on `tid`, the record is updated, so that `reset`
/// still gives the task its affinity from before the placement.
pub fn place_task(host: &Host, tid: i32, cpus: &CpuSet) -> io::Result<()> {
    let kernel = host.kernel();
    let saved = state::load(host.store())?;
    if let Some(saved) = &saved {
        if !cpus.is_empty() && cpus.is_subset(&saved.masks.procs) {
            let dir = saved.layout.shield_dir();
            let id = if saved.layout.moves_processes() {
                tgid_of(kernel, tid)?
            } else {
                tid
            };
            let file = saved.layout.tasks_file(&dir);
            kernel
                .write(&file, &id.to_string())
                .map_err(|e| cpushield_kernel::with_path(e, &file))?;
        }
    }
    kernel.set_affinity(tid, cpus)?;
    if saved.is_some_and(|s| s.set.tasks.contains_key(&tid)) {
        record_placement(host, tid)?;
    }
    Ok(())
}

/// Places one thread of a running program on `cpus`, Sherer's way (the C
/// API's `cps_place`, `RtThread::on`): `tid` (0: the calling thread) alone
/// enters the shield when `cpus` are all shielded; the other threads of its
/// process stay where they are, on the housekeeping CPUs. Then its affinity
/// is set.
///
/// cgroup v1: the TID goes to the shield cpuset's `tasks`. cgroup v2: to the
/// threaded shield cgroup's `cgroup.threads`, which the kernel allows only for
/// a process in the shield's threaded domain (the root cgroup); otherwise the
/// error names the process's cgroup and the remedy.
///
/// The thread is adopted in the shield's state with `cpus` as its request,
/// so a later shield change keeps it there and `reset` takes it out of the
/// shield (to its process's cgroup), leaving it the affinity it asked for.
pub fn place_thread_alone(host: &Host, tid: i32, cpus: &CpuSet) -> io::Result<()> {
    let kernel = host.kernel();
    let tid = if tid == 0 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    } else {
        tid
    };
    let saved = state::load(host.store())?;
    let mut entered = false;
    if let Some(saved) = &saved {
        if !cpus.is_empty() && cpus.is_subset(&saved.masks.procs) {
            let file = saved.layout.threads_file(&saved.layout.shield_dir());
            kernel
                .write(&file, &tid.to_string())
                .map_err(|e| thread_move_error(kernel, &saved.layout, tid, e, &file))?;
            entered = true;
        }
    }
    kernel.set_affinity(tid, cpus)?;
    if entered {
        adopt_placed(host, tid, cpus)?;
    }
    if saved.is_some_and(|s| s.set.tasks.contains_key(&tid)) {
        record_placement(host, tid)?;
    }
    Ok(())
}

/// Places thread `tid` of cpushield itself (the probes of `compare` and
/// `tune`) on `cpus` under the shield saved in `host` (if any), moving that
/// thread alone, never its process:
/// the process's other threads (the main thread, the tracer's reader) and
/// the children it starts later (the load, the anchor) must stay on the
/// housekeeping CPUs, and a later thread must still be able to reach a CPU
/// outside the shield (on cgroup v2 a thread inside the isolated partition
/// cannot be given one: EINVAL).
///
/// When `cpus` are all shielded the thread enters the shield (v1: its
/// `tasks`; v2: the threaded shield's `cgroup.threads`, which needs the
/// process in the root cgroup, see [`enter_root_cgroup`]). When they are
/// not, a thread found in the shield is first taken out of it, into the
/// root cgroup. Nothing is recorded in the shield's state: the thread is
/// the shield's measurement, and ends with it.
pub fn place_own_thread(host: &Host, tid: i32, cpus: &CpuSet) -> io::Result<()> {
    place_own_under(
        host.kernel(),
        state::load(host.store())?.as_ref(),
        tid,
        cpus,
    )
}

/// [`place_own_thread`] under the shield `saved` (None: no shield).
fn place_own_under(
    kernel: &dyn Kernel,
    saved: Option<&state::SavedState>,
    tid: i32,
    cpus: &CpuSet,
) -> io::Result<()> {
    if let Some(saved) = saved {
        let layout = &saved.layout;
        if !cpus.is_empty() && cpus.is_subset(&saved.masks.procs) {
            let file = layout.threads_file(&layout.shield_dir());
            kernel
                .write(&file, &tid.to_string())
                .map_err(|e| thread_move_error(kernel, layout, tid, e, &file))?;
        } else if thread_in_shield(kernel, layout, tid) {
            let file = layout.threads_file(layout.root());
            kernel
                .write(&file, &tid.to_string())
                .map_err(|e| cpushield_kernel::with_path(e, &file))?;
        }
    }
    kernel.set_affinity(tid, cpus)
}

/// Places thread `tid` of this process alone on `cpus` (see
/// [`place_own_thread`]) for a caller whose process may be in any cgroup
/// (`measure`, the agent's probe, `run --idle-poll`): when the thread must
/// enter a cgroup v2 shield, this process first moves to the root cgroup,
/// the shield's threaded domain ([`enter_root_cgroup`]), and stays there.
/// So only the thread enters the shield; the process's main thread, which
/// only waits, stays on the CPUs the shield leaves to the system.
pub fn place_own_thread_from_anywhere(host: &Host, tid: i32, cpus: &CpuSet) -> io::Result<()> {
    place_own_from_anywhere_under(
        host.kernel(),
        state::load(host.store())?.as_ref(),
        tid,
        cpus,
    )
}

/// [`place_own_thread_from_anywhere`] on `host`, as a [`PlaceFn`].
pub fn own_thread_from_anywhere_placer(host: &Host) -> PlaceFn {
    let host = host.clone();
    PlaceFn::new(move |tid, cpus| place_own_thread_from_anywhere(&host, tid, cpus))
}

/// [`place_own_thread_from_anywhere`] under the shield `saved`.
fn place_own_from_anywhere_under(
    kernel: &dyn Kernel,
    saved: Option<&state::SavedState>,
    tid: i32,
    cpus: &CpuSet,
) -> io::Result<()> {
    if let Some(saved) = saved {
        if !cpus.is_empty() && cpus.is_subset(&saved.masks.procs) {
            // Idempotent: the first thread moves the process, the others
            // find it in the root cgroup.
            enter_root_cgroup(kernel, &saved.layout)?;
        }
    }
    place_own_under(kernel, saved, tid, cpus)
}

/// Whether thread `tid` is in the shield's cgroup now.
fn thread_in_shield(kernel: &dyn Kernel, layout: &crate::layout::CgroupLayout, tid: i32) -> bool {
    Procfs::new(kernel)
        .thread_file(tid, tid, "cgroup")
        .ok()
        .flatten()
        .and_then(|t| crate::layout::cgroup_of(layout, &t))
        .is_some_and(|cg| cg.trim_start_matches('/') == crate::layout::SHIELD_CGROUP)
}

/// On cgroup v2, moves this process into the root cgroup, the threaded
/// domain of the shield, so that one of its threads can join the shield
/// alone ([`place_own_thread`]); returns the cgroup it was in, for
/// [`leave_root_cgroup`]. Nothing to do on v1 (a thread moves alone there)
/// or when the process is in the root cgroup already: None. (The process is
/// named as the kernel's "0", the writer itself, and read as /proc/self:
/// right in any PID namespace.)
pub fn enter_root_cgroup(
    kernel: &dyn Kernel,
    layout: &crate::layout::CgroupLayout,
) -> io::Result<Option<String>> {
    if !layout.moves_processes() {
        return Ok(None);
    }
    let text = Procfs::new(kernel).own_file("cgroup")?;
    let Some(cgroup) = crate::layout::cgroup_of(layout, &text) else {
        return Ok(None);
    };
    if cgroup == "/" {
        return Ok(None);
    }
    let file = layout.tasks_file(layout.root());
    kernel
        .write(&file, "0")
        .map_err(|e| cpushield_kernel::with_path(e, &file))?;
    Ok(Some(cgroup))
}

/// Sets every thread of this process to `cpus`. A move between cgroups gives
/// each thread moved its new cgroup's CPUs, and so, on some kernels (6.1),
/// does a change of the partition the process is in: a caller that keeps
/// its threads off CPUs it measures sets them again after either. Threads
/// that exit meanwhile are passed over.
pub fn pin_own_threads(kernel: &dyn Kernel, cpus: &CpuSet) {
    let _ = kernel.set_affinity(0, cpus);
    for tid in Procfs::new(kernel).own_threads().unwrap_or_default() {
        let _ = kernel.set_affinity(tid, cpus);
    }
}

/// Gives this process back the cgroup [`enter_root_cgroup`] took it from.
pub fn leave_root_cgroup(
    kernel: &dyn Kernel,
    layout: &crate::layout::CgroupLayout,
    cgroup: &str,
) -> io::Result<()> {
    let file = layout.tasks_file(&layout.dir_of(cgroup));
    kernel
        .write(&file, "0")
        .map_err(|e| cpushield_kernel::with_path(e, &file))
}

/// The error of a refused per-thread move, with the remedy: on cgroup v2
/// (the error is EOPNOTSUPP) a thread can only move within its process's
/// threaded domain.
fn thread_move_error(
    kernel: &dyn Kernel,
    layout: &crate::layout::CgroupLayout,
    tid: i32,
    error: io::Error,
    file: &std::path::Path,
) -> io::Error {
    if cpushield_kernel::os_errno(&error) != Some(libc::EOPNOTSUPP) {
        return cpushield_kernel::with_path(error, file);
    }
    let cgroup = Procfs::new(kernel)
        .process_file(tid, "cgroup")
        .ok()
        .flatten()
        .and_then(|t| crate::layout::cgroup_of(layout, &t))
        .unwrap_or_else(|| "?".into());
    let tgid = tgid_of(kernel, tid).unwrap_or(tid);
    cpushield_kernel::with_path_and_remedy(
        error,
        file,
        format!(
            "on cgroup v2 one thread can join the shield only from a process in the root cgroup, and process {tgid} is in {cgroup}: start it from the root cgroup, or place the whole process with `cpushield run --pid {tgid} --cpus ...`"
        ),
    )
}

/// Adopts `tid` in the shield's state with `cpus` as its requested affinity
/// (see [`place_thread_alone`]).
fn adopt_placed(host: &Host, tid: i32, cpus: &CpuSet) -> io::Result<()> {
    let (kernel, store) = (host.kernel(), host.store());
    let stat_path = Procfs::new(kernel).process_dir(tid).join("stat");
    let stat = kernel
        .read_bytes(&stat_path)
        .map_err(|e| cpushield_kernel::with_path(e, &stat_path))?;
    let stat = cpushield_parse::pid_stat::parse_stat(&stat)
        .map_err(|e| io::Error::other(format!("{}: {e}", stat_path.display())))?;
    let _lock = store.lock()?;
    let Some(mut saved) = state::load(store)? else {
        return Ok(());
    };
    let adopted = state::AdoptedTask {
        starttime: saved.start_as_saved(tid, stat.starttime),
        requested: cpus.clone(),
    };
    if saved.adopted.get(&tid) == Some(&adopted) {
        return Ok(());
    }
    saved.adopted.insert(tid, adopted);
    state::store_in(store, &saved)
}

/// Updates the shield's record of what was set on `tid` to its affinity now.
fn record_placement(host: &Host, tid: i32) -> io::Result<()> {
    let store = host.store();
    let _lock = store.lock()?;
    let Some(mut saved) = state::load(store)? else {
        return Ok(());
    };
    let now = host.kernel().get_affinity(tid)?;
    match saved.set.tasks.get_mut(&tid) {
        Some(rec) if rec.cpus != now => rec.cpus = now,
        _ => return Ok(()),
    }
    state::store_in(store, &saved)
}

fn tgid_of(kernel: &dyn Kernel, tid: i32) -> io::Result<i32> {
    let proc = Procfs::new(kernel);
    let status = proc
        .process_file(tid, "status")?
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    cpushield_parse::pid_status::parse_tgid(&status).ok_or_else(|| {
        io::Error::other(format!(
            "{}: no Tgid",
            proc.process_dir(tid).join("status").display()
        ))
    })
}

/// Records, in the shield's state, the scheduling policy of each thread in
/// `tids` before `cpushield run --pid` changes it, so that `reset` gives it
/// back. A thread already recorded keeps its first (original) record. Does
/// nothing when no shield is up (there is no reset to restore it).
pub fn record_sched(host: &Host, pid: i32, tids: &[i32]) -> io::Result<()> {
    let (kernel, store) = (host.kernel(), host.store());
    let _lock = store.lock()?;
    let Some(mut saved) = state::load(store)? else {
        return Ok(());
    };
    let mut changed = false;
    let proc = Procfs::new(kernel);
    for &tid in tids {
        let Some(stat) = proc.thread_bytes(pid, tid, "stat")? else {
            continue;
        };
        let stat = cpushield_parse::pid_stat::parse_stat(&stat).map_err(|e| {
            let path = proc.thread_dir(pid, tid).join("stat");
            io::Error::other(format!("{}: {e}", path.display()))
        })?;
        // In the terms of the saved tasks, which reset's snapshot compares.
        let starttime = saved.start_as_saved(tid, stat.starttime);
        if saved
            .sched
            .get(&tid)
            .is_some_and(|s| s.starttime == starttime)
        {
            continue;
        }
        let p = match kernel.get_sched(tid) {
            Ok(p) => p,
            Err(e) if cpushield_kernel::is_gone(&e) => continue,
            Err(e) => return Err(e),
        };
        saved.sched.insert(
            tid,
            state::SavedSched {
                starttime,
                policy: p.policy,
                flags: p.flags,
                nice: p.nice,
                priority: p.priority,
                deadline: [p.runtime, p.deadline, p.period],
            },
        );
        changed = true;
    }
    if changed {
        state::store_in(store, &saved)?;
    }
    Ok(())
}

/// How a probe's measuring threads reach `cpus` (see [`probe_placement`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbePlacement {
    /// No requested CPU is shielded: plain sched_setaffinity.
    Plain,
    /// Some requested CPUs are shielded: each thread goes through
    /// [`place_own_thread_from_anywhere`] (alone into the shield's cpuset
    /// when its CPU is shielded).
    Shield,
}

/// Decides, without I/O, how `cpushield measure` places its threads on `cpus`
/// given the shielded CPUs (`shielded`, from the saved state) and whether a
/// move into the cpuset hierarchy takes a whole process (cgroup v2). Err: one
/// line naming the fix.
///
/// On cgroup v2 a process, not a thread, joins a cgroup: a run that mixes
/// shielded and unshielded CPUs cannot place both, so it is refused.
pub fn probe_placement(
    cpus: &CpuSet,
    shielded: &CpuSet,
    whole_processes: bool,
    is_root: bool,
) -> Result<ProbePlacement, String> {
    let inside = cpus.intersection(shielded);
    if inside.is_empty() {
        return Ok(ProbePlacement::Plain);
    }
    if !is_root {
        return Err(format!(
            "CPUs {inside} are shielded: entering the shield's cpuset needs root; run as root, or `cpushield unshield --all {inside}` first"
        ));
    }
    if whole_processes && inside != *cpus {
        let outside = cpus.difference(shielded);
        return Err(format!(
            "--cpus {cpus} mixes shielded CPUs ({inside}) and unshielded ones ({outside}); on cgroup v2 one process cannot be in both: measure them in separate runs"
        ));
    }
    Ok(ProbePlacement::Shield)
}

/// How `cpushield measure` places its measuring threads on `cpus` now: reads
/// the shield's saved state of `host`.
pub fn probe_placement_now(
    host: &Host,
    cpus: &CpuSet,
    is_root: bool,
) -> Result<ProbePlacement, String> {
    let saved = state::load(host.store()).map_err(|e| {
        format!(
            "cannot read the shield state in {} ({e}): run as root, or set CPUSHIELD_STATE_DIR to the directory `cpushield shield` used",
            host.store().dir().display()
        )
    })?;
    match saved {
        None => Ok(ProbePlacement::Plain),
        Some(s) => probe_placement(cpus, &s.masks.procs, s.layout.moves_processes(), is_root),
    }
}

/// How `cpushield measure`'s threads reach `cpus`: plain affinity (`None`)
/// where no shield fences them off, else the shield's own-thread placer (the
/// one `compare` uses). The error is one line naming the fix.
pub fn probe_placer(host: &Host, cpus: &CpuSet, is_root: bool) -> Result<Option<PlaceFn>, String> {
    match probe_placement_now(host, cpus, is_root)? {
        ProbePlacement::Plain => Ok(None),
        ProbePlacement::Shield => Ok(Some(own_thread_from_anywhere_placer(host))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> CpuSet {
        CpuSet::parse_list(text).unwrap()
    }

    #[test]
    fn without_a_saved_shield_the_probe_places_by_plain_affinity() {
        let k = cpushield_kernel::FakeKernel::new();
        let store = cpushield_kernel::store::MemoryStore::default();
        let host = Host::fake(&k, &store);
        assert!(probe_placer(&host, &set("1"), false).unwrap().is_none());
    }

    use crate::layout::CgroupLayout;
    use cpushield_kernel::FakeKernel;

    const V2_ROOT: &str = "/sys/fs/cgroup";

    /// A cgroup v2 machine with a shield on CPU 3, and thread `tid` of
    /// process `pid` in cgroup `cgroup` with affinity 0-3.
    fn v2_shielded(pid: i32, tid: i32, cgroup: &str) -> (FakeKernel, state::SavedState) {
        let k = FakeKernel::new();
        for dir in ["", "/cpushield-shield", "/user.slice"] {
            for file in ["cgroup.procs", "cgroup.threads"] {
                k.set_file(format!("{V2_ROOT}{dir}/{file}"), "");
            }
        }
        k.set_file(
            format!("{V2_ROOT}{cgroup}/cgroup.procs"),
            format!("{pid}\n"),
        );
        k.set_file(format!("/proc/{pid}/cgroup"), format!("0::{cgroup}\n"));
        k.set_file("/proc/self/cgroup", format!("0::{cgroup}\n"));
        k.set_file(
            format!("/proc/{tid}/task/{tid}/cgroup"),
            format!("0::{cgroup}\n"),
        );
        k.set_thread_affinity(tid, set("0-3"));
        let mut saved = crate::fake_machine::saved_state(crate::ShieldMasks::all(&set("3")), "0-3");
        saved.layout = CgroupLayout::v2(V2_ROOT);
        (k, saved)
    }

    fn lines(k: &FakeKernel, file: &str) -> Vec<String> {
        k.file(format!("{V2_ROOT}{file}"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn an_own_thread_enters_a_v2_shield_alone_and_its_process_stays_out() {
        let (k, saved) = v2_shielded(500, 501, "/");
        place_own_under(&k, Some(&saved), 501, &set("3")).unwrap();
        assert_eq!(lines(&k, "/cpushield-shield/cgroup.threads"), ["501"]);
        assert!(
            lines(&k, "/cpushield-shield/cgroup.procs").is_empty(),
            "the process must not join the shield: its other threads would run on the shielded CPU"
        );
        assert_eq!(k.get_affinity(501).unwrap(), set("3"));
    }

    #[test]
    fn an_own_thread_placed_outside_the_shield_is_not_moved_into_it() {
        let (k, saved) = v2_shielded(500, 502, "/");
        place_own_under(&k, Some(&saved), 502, &set("2")).unwrap();
        assert!(lines(&k, "/cpushield-shield/cgroup.threads").is_empty());
        assert!(lines(&k, "/cpushield-shield/cgroup.procs").is_empty());
        assert_eq!(k.get_affinity(502).unwrap(), set("2"));
    }

    #[test]
    fn an_own_thread_found_in_the_shield_goes_back_to_the_root_before_an_unshielded_cpu() {
        let (k, saved) = v2_shielded(500, 503, "/cpushield-shield");
        place_own_under(&k, Some(&saved), 503, &set("2")).unwrap();
        assert_eq!(lines(&k, "/cgroup.threads"), ["503"]);
        assert_eq!(k.get_affinity(503).unwrap(), set("2"));
    }

    #[test]
    fn an_own_thread_without_a_shield_gets_plain_affinity() {
        let (k, _) = v2_shielded(500, 504, "/");
        place_own_under(&k, None, 504, &set("3")).unwrap();
        assert!(lines(&k, "/cpushield-shield/cgroup.threads").is_empty());
        assert_eq!(k.get_affinity(504).unwrap(), set("3"));
    }

    #[test]
    fn the_process_moves_to_the_root_cgroup_and_back_on_v2_only() {
        // "0": the writing process itself, whatever PID namespace it is in.
        let (k, saved) = v2_shielded(600, 600, "/user.slice");
        let was = enter_root_cgroup(&k, &saved.layout).unwrap();
        assert_eq!(was.as_deref(), Some("/user.slice"));
        assert_eq!(lines(&k, "/cgroup.procs"), ["0"]);
        leave_root_cgroup(&k, &saved.layout, "/user.slice").unwrap();
        assert_eq!(lines(&k, "/user.slice/cgroup.procs"), ["600", "0"]);

        let (k, saved) = v2_shielded(601, 601, "/");
        assert_eq!(enter_root_cgroup(&k, &saved.layout).unwrap(), None);
        let v1 = CgroupLayout::v1("/sys/fs/cgroup/cpuset");
        assert_eq!(enter_root_cgroup(&k, &v1).unwrap(), None);
    }

    #[test]
    fn a_probe_thread_from_another_cgroup_enters_a_v2_shield_alone_and_its_process_waits_in_the_root(
    ) {
        let (k, saved) = v2_shielded(700, 701, "/user.slice");
        place_own_from_anywhere_under(&k, Some(&saved), 701, &set("3")).unwrap();
        assert_eq!(
            lines(&k, "/cgroup.procs"),
            ["0"],
            "the process moves to the root cgroup"
        );
        assert_eq!(lines(&k, "/cpushield-shield/cgroup.threads"), ["701"]);
        assert!(
            lines(&k, "/cpushield-shield/cgroup.procs").is_empty(),
            "the process must not join the shield: its main thread would wait on the shielded CPU"
        );
        assert_eq!(k.get_affinity(701).unwrap(), set("3"));

        // Outside the shield: plain affinity, the process left where it is.
        let (k, saved) = v2_shielded(710, 711, "/user.slice");
        place_own_from_anywhere_under(&k, Some(&saved), 711, &set("1")).unwrap();
        assert!(lines(&k, "/cgroup.procs").is_empty());
        assert!(lines(&k, "/cpushield-shield/cgroup.threads").is_empty());
        assert_eq!(k.get_affinity(711).unwrap(), set("1"));
    }

    #[test]
    fn unshielded_cpus_are_placed_by_plain_affinity() {
        assert_eq!(
            probe_placement(&set("1"), &CpuSet::default(), false, true),
            Ok(ProbePlacement::Plain)
        );
        assert_eq!(
            probe_placement(&set("0"), &set("1"), true, false),
            Ok(ProbePlacement::Plain)
        );
    }

    #[test]
    fn shielded_cpus_are_entered_through_the_shield() {
        assert_eq!(
            probe_placement(&set("1"), &set("1"), false, true),
            Ok(ProbePlacement::Shield)
        );
        assert_eq!(
            probe_placement(&set("1"), &set("1-2"), true, true),
            Ok(ProbePlacement::Shield)
        );
        // cgroup v1 places each thread on its own: a mixed run works.
        assert_eq!(
            probe_placement(&set("0-1"), &set("1"), false, true),
            Ok(ProbePlacement::Shield)
        );
    }

    #[test]
    fn a_mixed_run_on_cgroup_v2_is_refused_naming_separate_runs() {
        let e = probe_placement(&set("0-1"), &set("1"), true, true).unwrap_err();
        assert!(e.contains("separate runs"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_shielded_cpu_without_root_is_refused_naming_root_or_unshield() {
        let e = probe_placement(&set("1"), &set("1"), false, false).unwrap_err();
        assert!(e.contains("run as root"), "{e}");
        assert!(e.contains("cpushield unshield --all 1"), "{e}");
    }
}
