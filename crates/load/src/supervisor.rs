//! The supervisor: the one child the caller forks. It owns everything the
//! load makes, so cleanup holds however the caller ends:
//!
//! - it dies with its parent (PR_SET_PDEATHSIG = SIGTERM, handled), is a
//!   child subreaper (orphaned descendants come back to it) and in its own
//!   process group (a terminal's Ctrl-C reaches the caller only);
//! - it makes the per-run directory and forks one worker per instance; each
//!   worker is in its own process group, dies with the supervisor
//!   (PDEATHSIG = SIGKILL), runs SCHED_OTHER, confined to its CPUs;
//! - on SIGTERM/SIGINT/SIGHUP or its parent's death it kills every worker's
//!   group, reaps every descendant (killing stragglers it finds in /proc),
//!   removes the run directory, and only then exits.

use crate::plan::{Instance, Plan};
use crate::procs::{self, Exit};
use crate::shm::{
    Shared, SLOT_EXITED, SLOT_FAILED, SLOT_RUNNING, SLOT_STARTING, SUP_DONE, SUP_RUNNING,
};
use crate::stressng;
use crate::workloads::{self, Ctx};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Slots reserved after the instances for stress-ng's per-stressor results.
pub const STRESS_NG_SLOTS: usize = 32;
/// Grace stress-ng gets to stop on SIGINT and write its metrics.
const STRESS_NG_GRACE: Duration = Duration::from_secs(10);
/// Longest the final reaping may take before the supervisor gives up on a
/// descendant stuck in the kernel (it is SIGKILLed already).
const REAP_LIMIT: Duration = Duration::from_secs(20);

const STOP_SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// What the supervisor needs, prepared by the caller before the fork.
pub struct Job<'a> {
    /// The kernel door every process of the load goes through.
    pub kernel: &'a dyn Kernel,
    /// The plan.
    pub plan: &'a Plan,
    /// The per-run directory to make (and remove).
    pub run_dir: &'a Path,
    /// Bytes per file-writing instance.
    pub size_cap: u64,
    /// The shared counters: instance slots, then stress-ng's.
    pub shared: &'a Shared,
    /// The caller's pid.
    pub parent: libc::pid_t,
    /// The network workloads' other machine, if any.
    pub remote: Option<crate::plan::Remote>,
    /// Where the supervisor itself stays once its workers are forked (they
    /// keep the load's CPUs).
    pub supervisor_cpus: Option<&'a CpuSet>,
}

/// The supervisor's main, in the forked child. Returns its exit code.
pub fn supervise(job: &Job) -> i32 {
    let waited = procs::sigset(&[
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGCHLD,
    ]);
    // SAFETY: process-attribute calls on ourselves.
    unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, &waited, std::ptr::null_mut());
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    procs::die_with_parent(libc::SIGTERM, job.parent);
    procs::set_name("cpushield-load");
    procs::detach_fds();
    let header = job.shared.header();
    if let Err(e) = procs::set_sched_other(job.kernel) {
        header.fail(&format!("cannot set SCHED_OTHER: {e}"));
        return 1;
    }
    if let Some(cpus) = &job.plan.cpus {
        if let Err(e) = job.kernel.set_affinity(0, cpus) {
            header.fail(&format!("cannot confine the load to CPUs {cpus}: {e}"));
            return 1;
        }
    }
    if let (Some(cpus), Some(_)) = (job.supervisor_cpus, &job.plan.cpus) {
        // It only forks, waits and reaps, off the CPUs a caller measures;
        // each worker confines itself to the load's CPUs. Not being able to
        // is no reason to stop the load.
        let _ = job.kernel.set_affinity(0, cpus);
    }
    if let Err(e) = make_dirs(job) {
        header.fail(&e);
        remove_run_dir(job.run_dir);
        return 1;
    }

    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let mut workers = Vec::new();
    for (i, inst) in job.plan.instances.iter().enumerate() {
        let slot = job.shared.slot(i);
        slot.set_state(SLOT_STARTING);
        match procs::fork_child(|| worker(job, i, inst, me)) {
            Ok(pid) => {
                // Also from this side, so a group kill can never miss it.
                // SAFETY: setpgid on our own child.
                unsafe { libc::setpgid(pid, pid) };
                slot.set_pid(pid);
                workers.push(pid);
            }
            Err(e) => {
                header.fail(&format!("fork failed: {e}"));
                shutdown(job, &workers);
                return 1;
            }
        }
    }
    header.set_state(SUP_RUNNING);

    let tick = libc::timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    loop {
        // SAFETY: waiting for blocked signals with a timeout.
        let sig = unsafe { libc::sigtimedwait(&waited, std::ptr::null_mut(), &tick) };
        if STOP_SIGNALS.contains(&sig) {
            break;
        }
        reap_running(job, &workers);
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != job.parent {
            break;
        }
    }
    shutdown(job, &workers);
    header.set_state(SUP_DONE);
    0
}

fn make_dirs(job: &Job) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700);
    builder
        .create(job.run_dir)
        .map_err(|e| format!("cannot create {}: {e}", job.run_dir.display()))?;
    for inst in &job.plan.instances {
        let dir = job.run_dir.join(inst.dir_name());
        builder
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Reaps children that ended while the load runs; a worker that ends then
/// failed (or, for stress-ng, finished on its own).
fn reap_running(job: &Job, workers: &[libc::pid_t]) {
    loop {
        let mut status = 0;
        // SAFETY: reaping our own children.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        let Some(i) = workers.iter().position(|&w| w == pid) else {
            continue; // an orphaned descendant handed to us as subreaper
        };
        let exit = Exit::from_status(status);
        let slot = job.shared.slot(i);
        if slot.state() == SLOT_FAILED {
            continue;
        }
        if job.plan.instances[i].workload.is_none() && exit.success() {
            slot.set_state(SLOT_EXITED);
        } else {
            slot.fail(&format!("the worker ended unexpectedly ({exit})"));
        }
        procs::kill_group(pid, libc::SIGKILL);
    }
}

/// Stops everything, reaps every descendant, removes the run directory.
fn shutdown(job: &Job, workers: &[libc::pid_t]) {
    // stress-ng first gets SIGINT, to stop its stressors and write metrics.
    for (i, &pid) in workers.iter().enumerate() {
        if job.plan.instances[i].workload.is_none() && job.shared.slot(i).state() == SLOT_RUNNING {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGINT) };
            let deadline = Instant::now() + STRESS_NG_GRACE;
            while Instant::now() < deadline && !has_exited(pid) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    for &pid in workers {
        procs::kill_group(pid, libc::SIGKILL);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    reap_all(job.kernel, workers);
    if job.plan.stress_ng.is_some() {
        record_stress_ng_metrics(job);
    }
    remove_run_dir(job.run_dir);
}

/// Whether `pid` (our child) has exited; leaves it unreaped.
fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: waitid with WNOWAIT only peeks.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        rc != 0 || info.si_pid() == pid
    }
}

/// Reaps until we have no children left, SIGKILLing any still alive.
fn reap_all(kernel: &dyn Kernel, workers: &[libc::pid_t]) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let deadline = Instant::now() + REAP_LIMIT;
    let mut last_scan = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: reaping our own children.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            continue;
        }
        if pid < 0 || Instant::now() > deadline {
            return; // ECHILD: nothing left
        }
        if last_scan.elapsed() > Duration::from_millis(50) {
            for &w in workers {
                procs::kill_group(w, libc::SIGKILL);
            }
            for p in procs::all_processes(kernel)
                .into_iter()
                .filter(|p| p.ppid == me)
            {
                // SAFETY: our own child (reparented to us as subreaper).
                unsafe { libc::kill(p.pid, libc::SIGKILL) };
            }
            last_scan = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn remove_run_dir(dir: &Path) {
    for _ in 0..5 {
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => return,
        }
    }
}

fn yaml_path(job: &Job) -> PathBuf {
    job.run_dir
        .join(job.plan.instances[0].dir_name())
        .join("metrics.yaml")
}

fn record_stress_ng_metrics(job: &Job) {
    let text = std::fs::read_to_string(yaml_path(job)).unwrap_or_default();
    let first = job.plan.instances.len();
    for (k, (name, ops)) in stressng::parse_metrics_yaml(&text)
        .into_iter()
        .take(STRESS_NG_SLOTS)
        .enumerate()
    {
        let slot = job.shared.slot(first + k);
        slot.set_name(&name);
        slot.add(ops);
        slot.set_state(SLOT_EXITED);
    }
}

/// A worker's main, in its forked child. Returns its exit code.
fn worker(job: &Job, index: usize, inst: &Instance, supervisor: libc::pid_t) -> i32 {
    let slot = job.shared.slot(index);
    procs::die_with_parent(libc::SIGKILL, supervisor);
    // SAFETY: process-attribute calls on ourselves.
    unsafe { libc::setpgid(0, 0) };
    procs::reset_signals();
    let slot_addr = slot as *const _ as usize;
    std::panic::set_hook(Box::new(move |info| {
        // SAFETY: the slot lives in the shared mapping, which outlives this process.
        let slot = unsafe { &*(slot_addr as *const crate::shm::Slot) };
        slot.fail(&format!("panicked: {info}"));
    }));
    let dir = job.run_dir.join(inst.dir_name());
    if let Err(message) = enter(job.kernel, inst, &dir) {
        slot.fail(&message);
        return 1;
    }
    match inst.workload {
        Some(w) => {
            let mut ctx = Ctx::new(
                job.kernel,
                &dir,
                job.size_cap,
                &job.plan.tools,
                seed(index),
                slot,
            );
            ctx.remote = job.remote;
            match workloads::run(w, &ctx) {
                Ok(never) => match never {},
                Err(e) => {
                    slot.fail(&e.to_string());
                    1
                }
            }
        }
        None => {
            let message = exec_stress_ng(job, &dir, slot);
            slot.fail(&message);
            127
        }
    }
}

/// Confines, names and places the worker.
fn enter(kernel: &dyn Kernel, inst: &Instance, dir: &Path) -> Result<(), String> {
    if let Some(cpus) = &inst.cpus {
        kernel
            .set_affinity(0, cpus)
            .map_err(|e| format!("cannot confine it to CPUs {cpus}: {e}"))?;
    }
    std::env::set_current_dir(dir).map_err(|e| format!("cannot enter {}: {e}", dir.display()))?;
    let c_dir = CString::new(dir.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: setenv with valid strings in a single-threaded process; tools
    // like cc put their temporary files under TMPDIR, i.e. in our directory.
    unsafe { libc::setenv(c"TMPDIR".as_ptr(), c_dir.as_ptr(), 1) };
    procs::set_name(&format!("ld-{}", inst.name()));
    Ok(())
}

/// A seed different for each worker and run.
fn seed(index: usize) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // SAFETY: getpid has no preconditions.
    now ^ ((unsafe { libc::getpid() } as u64) << 32) ^ index as u64
}

/// Replaces the worker with stress-ng; returns only with why it could not.
fn exec_stress_ng(job: &Job, dir: &Path, slot: &crate::shm::Slot) -> String {
    let Some(run) = &job.plan.stress_ng else {
        return "no stress-ng in the plan".into();
    };
    let args = stressng::command_args(
        &run.args,
        &dir.to_string_lossy(),
        &yaml_path(job).to_string_lossy(),
    );
    let to_c =
        |s: &[u8]| CString::new(s).map_err(|_| "NUL byte in a stress-ng argument".to_string());
    let mut argv = Vec::new();
    match to_c(b"stress-ng") {
        Ok(a) => argv.push(a),
        Err(e) => return e,
    }
    for a in &args {
        match to_c(a.as_bytes()) {
            Ok(a) => argv.push(a),
            Err(e) => return e,
        }
    }
    let path = match to_c(run.path.as_os_str().as_bytes()) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    slot.set_state(SLOT_RUNNING);
    // SAFETY: NUL-terminated argv of valid C strings.
    unsafe { libc::execv(path.as_ptr(), ptrs.as_ptr()) };
    format!(
        "cannot run {}: {}",
        run.path.display(),
        std::io::Error::last_os_error()
    )
}
