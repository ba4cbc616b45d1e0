//! Running the experiment inside a private PID namespace (with its own /proc),
//! whose tasks are then "the system": shielding moves only them, while IRQs are
//! moved for real. When the namespace's init exits, the kernel kills every task
//! left in it, so nothing the experiment started can outlive it.
//!
//! Two processes then carry one run: the one the user started (outside) and
//! the namespace's init (the work). A signal to either ends the run the way
//! ^C does, and a SIGKILL of either leaves at most one command to run, which
//! the parent prints ([`run_private`]).

use crate::Kernel;
use nix::fcntl::OFlag;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{
    sigaction, sigprocmask, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal,
};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, pipe2, ForkResult};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

static HOST_PROC: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Inside [`run_private`]'s namespace: a path to the machine's own /proc
/// (where global thread IDs, as tracefs reports them, can be looked up).
/// `None` outside it.
pub fn host_proc() -> Option<&'static std::path::Path> {
    HOST_PROC.get().map(|p| p.as_path())
}

/// The link text of the initial PID namespace (`/proc/self/ns/pid` of a
/// task in it): its inode is fixed by the kernel (PROC_PID_INIT_INO).
pub const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// Whether the /proc at `proc_root` is a nested PID namespace's: it lists
/// tasks, but not kthreadd (PID 2 of the initial namespace; kernel threads
/// show in no other namespace's /proc), and this process does not run in
/// the initial namespace either. Trace events name tasks by their IDs in
/// the initial namespace, which such a /proc cannot look up: there they
/// name other tasks or none. A /proc that lists nothing tells nothing (false).
pub fn is_nested_proc(kernel: &dyn Kernel, proc_root: &std::path::Path) -> bool {
    let proc = crate::Procfs::at(kernel, proc_root);
    let in_initial = proc
        .own_link("ns/pid")
        .is_ok_and(|ns| ns.as_os_str() == INITIAL_PID_NAMESPACE);
    !in_initial && !shows_kthreadd(kernel, proc_root) && proc.pids().is_ok_and(|p| !p.is_empty())
}

/// Whether the /proc at `proc_root` shows kthreadd, which only the initial
/// PID namespace's /proc does.
pub fn shows_kthreadd(kernel: &dyn Kernel, proc_root: &std::path::Path) -> bool {
    kernel
        .read(&proc_root.join("2/comm"))
        .is_ok_and(|comm| comm.trim() == "kthreadd")
}

/// The environment variable that carries [`run_tag`] to the programs a
/// private run starts (the batch job's `cpushield load`).
pub const RUN_TAG_ENV: &str = "CPUSHIELD_RUN_TAG";

/// The PID of the process the user started, as the machine numbers it: inside
/// [`run_private`]'s namespace (and in what it starts) the parent's, so that
/// names made from it (the load's run directories) are unique on the machine
/// and known to the parent; elsewhere this process's own.
pub fn run_tag() -> u32 {
    std::env::var(RUN_TAG_ENV)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(std::process::id)
}

/// The namespace's init, while the parent waits for it: where the parent's
/// handler forwards SIGINT, SIGTERM and SIGHUP. 0 when there is none.
static INIT: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    // SAFETY: errno is thread-local; saving and restoring it keeps the
    // interrupted code's errno as it was. kill is async-signal-safe.
    unsafe {
        let errno = *libc::__errno_location();
        let init = INIT.load(Ordering::SeqCst);
        if init > 0 {
            // An init takes only the signals it handles: the work handles
            // SIGINT and SIGTERM, so a hang-up is passed on as SIGTERM.
            let sig = if sig == libc::SIGHUP {
                libc::SIGTERM
            } else {
                sig
            };
            libc::kill(init, sig);
        }
        *libc::__errno_location() = errno;
    }
}

const FORWARDED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

fn forwarded_set() -> SigSet {
    let mut set = SigSet::empty();
    for sig in FORWARDED {
        set.add(sig);
    }
    set
}

/// Whether the process at the write end of `pipe` has ended: its end closes
/// when it does, whatever killed it.
fn writer_gone(pipe: &OwnedFd) -> bool {
    let mut fds = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let ready = unsafe { libc::poll(&mut fds, 1, 0) };
    ready > 0 && fds.revents & (libc::POLLHUP | libc::POLLIN) != 0
}

/// Runs `body` as PID 1 of a new PID and mount namespace, whose /proc is
/// mounted through `kernel`, and returns its exit code. Must be called while the process is single-threaded (before any
/// thread is spawned).
///
/// A supervisor stops the process it started (`kill PID`, `timeout`,
/// systemd's stop, a CI runner's cancel): the parent forwards SIGINT and
/// SIGTERM (and SIGHUP as SIGTERM) to the namespace's init, whose `body`
/// stops and restores as on ^C. Should the parent die, SIGKILL included, the
/// init gets SIGTERM (its parent-death signal) and does the same. Should the
/// init die without restoring (SIGKILL), the kernel ends every task of the
/// namespace, and the parent, which is outside it, calls `after_kill` with
/// the signal, back on the machine's own /proc, and returns what it returns.
pub fn run_private<F, K>(kernel: &dyn Kernel, body: F, after_kill: K) -> io::Result<i32>
where
    F: FnOnce() -> i32,
    K: FnOnce(i32) -> i32,
{
    enter_namespaces()?;
    // The child learns that the parent is gone from this pipe: getppid is 0
    // in a namespace's init, whoever its parent is.
    let (alive_r, alive_w) = pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    // Until each side has its handlers, a signal waits: the parent's default
    // action would end it before it can forward, and an init without a
    // handler drops the signal.
    let mut before = SigSet::empty();
    sigprocmask(
        SigmaskHow::SIG_BLOCK,
        Some(&forwarded_set()),
        Some(&mut before),
    )
    .map_err(io::Error::from)?;
    let started = std::process::id();
    // SAFETY: the caller must call this while single-threaded (documented above),
    // so the child's copy of memory holds no lock another thread held; the child
    // runs `body` and then _exit.
    let forked = unsafe { fork() };
    let forked = match forked {
        Ok(f) => f,
        Err(e) => {
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&before), None);
            return Err(e.into());
        }
    };
    match forked {
        ForkResult::Child => {
            drop(alive_w);
            be_init(kernel, body, alive_r, &before, started)
        }
        ForkResult::Parent { child } => {
            drop(alive_r);
            supervise(child, alive_w, &before, after_kill)
        }
    }
}

/// Unshares the PID and mount namespaces, the mount namespace made private
/// so that the new /proc mount stays out of the parent's.
fn enter_namespaces() -> io::Result<()> {
    unshare(CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS).map_err(|e| {
        io::Error::other(format!(
            "unshare(CLONE_NEWPID|CLONE_NEWNS) failed: {e}; run as root, or use --system"
        ))
    })?;
    // Keep the new /proc mount out of the parent's mount namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| io::Error::other(format!("making / private in the new mount namespace: {e}")))
}

/// The forked child, the namespace's init: stops on the forwarded signals
/// and on its parent's death, mounts the namespace's /proc, runs `body` and
/// exits with its code.
fn be_init<F: FnOnce() -> i32>(
    kernel: &dyn Kernel,
    body: F,
    alive_r: OwnedFd,
    before: &SigSet,
    started: u32,
) -> ! {
    // Single-threaded still: nothing reads the environment meanwhile.
    std::env::set_var(RUN_TAG_ENV, started.to_string());
    let installed = crate::signal::stop_on_signals(crate::signal::SecondSignal::Kills);
    // SAFETY: prctl on this process only.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(before), None);
    // A parent that died before the line above sent no signal.
    if installed.is_err() || writer_gone(&alive_r) {
        crate::signal::request_stop();
    }
    drop(alive_r);
    // The machine's /proc, kept open before the namespace's own is
    // mounted over it: trace events carry global thread IDs, which
    // only this view can look up.
    if let Ok(dir) = std::fs::File::open("/proc") {
        let fd = std::os::fd::IntoRawFd::into_raw_fd(dir);
        let _ = HOST_PROC.set(std::path::PathBuf::from(format!("/proc/self/fd/{fd}")));
    }
    let code = match kernel.mount("proc", std::path::Path::new(crate::procfs::PROC)) {
        Ok(()) => body(),
        Err(e) => {
            eprintln!("cpushield: error: mounting /proc in the private namespace: {e}");
            1
        }
    };
    // SAFETY: _exit ends the child without running destructors or atexit handlers
    // that belong to the parent's state.
    unsafe { libc::_exit(code) }
}

/// The parent, outside the namespace: forwards the stop signals to the
/// init, waits for it, puts the machine's /proc back, and returns its exit
/// code, or what `after_kill` makes of the signal that killed it.
fn supervise<K: FnOnce(i32) -> i32>(
    child: nix::unistd::Pid,
    alive_w: OwnedFd,
    before: &SigSet,
    after_kill: K,
) -> io::Result<i32> {
    INIT.store(child.as_raw(), Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(forward),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in FORWARDED {
        // SAFETY: the handler only calls kill and touches errno and
        // an atomic, all async-signal-safe.
        unsafe { sigaction(sig, &action) }.map_err(io::Error::from)?;
    }
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(before), None).map_err(io::Error::from)?;
    let ended = wait_for(child);
    // The init's PID may be given to another process once reaped:
    // nothing is forwarded from here on.
    INIT.store(0, Ordering::SeqCst);
    let ended = ended.and_then(|status| {
        reap(child)?;
        Ok(status)
    });
    drop(alive_w);
    // The namespace's /proc was mounted over the machine's in this
    // (shared) mount namespace: the machine's is needed again.
    let _ = umount2("/proc", MntFlags::MNT_DETACH);
    match ended? {
        Ended::Exited(code) => Ok(code),
        Ended::Killed(sig) => Ok(after_kill(sig)),
    }
}

/// How the namespace's init ended.
enum Ended {
    Exited(i32),
    Killed(i32),
}

/// Waits until `child` has ended, leaving it unreaped (its PID stays its own
/// meanwhile, so a forwarded signal cannot reach another process).
fn wait_for(child: nix::unistd::Pid) -> io::Result<Ended> {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child, writing into `info`.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                child.as_raw() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == -1 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        // SAFETY: waitid filled in a CLD_* record for the child.
        let status = unsafe { info.si_status() };
        return Ok(match info.si_code {
            libc::CLD_EXITED => Ended::Exited(status),
            _ => Ended::Killed(status),
        });
    }
}

fn reap(child: nix::unistd::Pid) -> io::Result<()> {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => return Ok(()),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeKernel;
    use std::path::Path;

    #[test]
    fn a_proc_that_lists_tasks_but_not_kthreadd_is_a_nested_namespaces() {
        let k = FakeKernel::new();
        k.set_file("/nested/1/comm", "bash\n");
        k.set_file("/nested/2/comm", "cpushield\n");
        assert!(is_nested_proc(&k, Path::new("/nested")));
        k.set_file("/initial/1/comm", "systemd\n");
        k.set_file("/initial/2/comm", "kthreadd\n");
        assert!(!is_nested_proc(&k, Path::new("/initial")));
        assert!(!is_nested_proc(&k, Path::new("/empty")));
        // A process of the initial namespace reads what it reads as the
        // machine's, kthreadd listed or not.
        k.set_file("/nested/self/ns/pid", INITIAL_PID_NAMESPACE);
        assert!(!is_nested_proc(&k, Path::new("/nested")));
        k.set_file("/nested/self/ns/pid", "pid:[4026532200]");
        assert!(is_nested_proc(&k, Path::new("/nested")));
    }
}
