//! Running the experiment inside a private PID namespace (with its own /proc),
//! whose tasks are then "the system": shielding moves only them, while IRQs are
//! moved for real. When the namespace's init exits, the kernel kills every task
//! left in it, so nothing the experiment started can outlive it.

use crate::{Kernel, RealKernel};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{signal, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult};
use std::io;

static HOST_PROC: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Inside [`run_private`]'s namespace: a path to the machine's own /proc
/// (where global thread IDs, as tracefs reports them, can be looked up).
/// `None` outside it.
pub fn host_proc() -> Option<&'static std::path::Path> {
    HOST_PROC.get().map(|p| p.as_path())
}

/// Runs `body` as PID 1 of a new PID and mount namespace and returns its exit
/// code. Must be called while the process is single-threaded (before any
/// thread is spawned). The caller ignores SIGINT/SIGTERM while waiting: the
/// terminal's signal reaches the child too, which stops and cleans up.
pub fn run_private<F: FnOnce() -> i32>(body: F) -> io::Result<i32> {
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
    .map_err(|e| io::Error::other(format!("making / private in the new mount namespace: {e}")))?;
    // SAFETY: the caller must call this while single-threaded (documented above),
    // so the child's copy of memory holds no lock another thread held; the child
    // runs `body` and then _exit.
    match unsafe { fork() }.map_err(io::Error::from)? {
        ForkResult::Child => {
            // The machine's /proc, kept open before the namespace's own is
            // mounted over it: trace events carry global thread IDs, which
            // only this view can look up.
            if let Ok(dir) = std::fs::File::open("/proc") {
                let fd = std::os::fd::IntoRawFd::into_raw_fd(dir);
                let _ = HOST_PROC.set(std::path::PathBuf::from(format!("/proc/self/fd/{fd}")));
            }
            let code = match RealKernel.mount("proc", std::path::Path::new("/proc")) {
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
        ForkResult::Parent { child } => {
            for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
                // SAFETY: SIG_IGN installs no handler of ours, so no code can run in signal
                // context.
                unsafe { signal(sig, SigHandler::SigIgn) }.map_err(io::Error::from)?;
            }
            loop {
                match waitpid(child, None) {
                    Ok(WaitStatus::Exited(_, code)) => return Ok(code),
                    Ok(WaitStatus::Signaled(_, sig, _)) => return Ok(128 + sig as i32),
                    Ok(_) => continue,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
}
