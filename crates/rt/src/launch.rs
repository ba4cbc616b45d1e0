//! Starting a command that is placed before it runs a single instruction of its
//! own, and waiting for it (`cpushield run -- app`).
//!
//! [`fork_held`] forks a child that stops before exec, waiting on a pipe. The
//! parent places it — cgroup, affinity, policy, limits: all of which survive
//! exec — then [`Pending::release`]s it to exec the command. Threads the
//! command starts inherit the placement, which moving it after exec could not
//! promise. If the parent dies before releasing it, the child exits without
//! running the command.
//!
//! While the child runs, SIGTERM and SIGHUP sent to the parent are passed on
//! to it; SIGINT and SIGQUIT are ignored by the parent (the terminal sends them
//! to the child as well), so the parent outlives the child and can clean up.

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// exit(code).
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl Exit {
    /// The status a shell would report: the code, or 128 + the signal.
    pub fn shell_status(self) -> u8 {
        match self {
            Exit::Code(c) => (c & 0xff) as u8,
            Exit::Signal(s) => (128 + s).clamp(0, 255) as u8,
        }
    }

    fn from_wait_status(status: libc::c_int) -> Self {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }
}

/// Finds `program` as execvp would: a name with a slash is used as is, else
/// the first executable file of that name in `$PATH`.
pub fn resolve_program(program: &str) -> io::Result<PathBuf> {
    let candidates: Vec<PathBuf> = if program.contains('/') {
        vec![PathBuf::from(program)]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .collect()
    };
    for candidate in &candidates {
        if is_executable(candidate) {
            return Ok(candidate.clone());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("command '{program}' not found or not executable"),
    ))
}

fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) on a NUL-terminated path.
    path.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// The signals the parent handles itself while a child runs.
fn handled_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
    ] {
        set.add(s);
    }
    set
}

/// Blocks the handled signals until dropped (then restores the old mask).
struct SignalBlock {
    old: SigSet,
}

impl SignalBlock {
    fn new() -> io::Result<Self> {
        let mut old = SigSet::empty();
        nix::sys::signal::pthread_sigmask(
            SigmaskHow::SIG_BLOCK,
            Some(&handled_signals()),
            Some(&mut old),
        )?;
        Ok(Self { old })
    }
}

impl Drop for SignalBlock {
    fn drop(&mut self) {
        let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.old), None);
    }
}

/// A forked child waiting to exec its command.
pub struct Pending {
    pid: i32,
    go: OwnedFd,
    exec_error: OwnedFd,
    signals: Option<SignalBlock>,
}

/// Forks a child that will exec `program` (resolved, see [`resolve_program`])
/// with `args` (`args[0]` is the name it sees) once released. `keep_fds` stay
/// open across the exec (reservation locks).
///
/// The calling process must be single-threaded: the child runs only
/// async-signal-safe code until exec, but signal masks are per thread.
pub fn fork_held(program: &Path, args: &[String], keep_fds: &[RawFd]) -> io::Result<Pending> {
    let path = CString::new(program.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the program path"))?;
    let argv_owned: Vec<CString> = args
        .iter()
        .map(|a| CString::new(OsStr::new(a).as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in an argument"))?;
    let mut argv: Vec<*const libc::c_char> = argv_owned.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());

    let (go_r, go_w) = cloexec_pipe()?;
    let (err_r, err_w) = cloexec_pipe()?;
    let signals = SignalBlock::new()?;
    // SAFETY: fork in a single-threaded process (documented precondition);
    // the child below only makes async-signal-safe calls until exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // Child.
        // SAFETY: in the forked child of a single-threaded parent; every call below is
        // async-signal-safe, the descriptors are ours (pipes made above), `byte` and
        // `errno` are locals, and `path`/`argv` (NUL-terminated C strings and a
        // NULL-terminated array, built before fork) live in the child's copy of memory.
        unsafe {
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            let mut byte = 0u8;
            let n = libc::read(go_r.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
            if n != 1 || byte != b'g' {
                libc::_exit(126); // the parent died or gave up: never run unplaced
            }
            for &fd in keep_fds {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                }
            }
            libc::pthread_sigmask(
                libc::SIG_SETMASK,
                signals.old.as_ref(),
                std::ptr::null_mut(),
            );
            libc::execv(path.as_ptr(), argv.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    drop(go_r);
    drop(err_w);
    Ok(Pending {
        pid,
        go: go_w,
        exec_error: err_r,
        signals: Some(signals),
    })
}

fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are new and owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Pending {
    /// The child's PID (to place it).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the child exec; returns once it has (or why it could not).
    pub fn release(mut self) -> io::Result<Running> {
        nix::unistd::write(self.go.as_fd(), b"g")?;
        let mut buf = [0u8; 4];
        let n = loop {
            match nix::unistd::read(self.exec_error.as_raw_fd(), &mut buf) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other?,
            }
        };
        if n == 4 {
            // Exec failed: the child has exited; Drop reaps it.
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
        }
        Ok(Running {
            pid: self.pid,
            _signals: self.signals.take(),
        })
    }
}

impl Drop for Pending {
    /// A child never released (or whose exec failed) is killed and reaped.
    fn drop(&mut self) {
        if self.signals.is_some() {
            // SAFETY: our own child, not yet running its command.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            reap(self.pid);
        }
    }
}

fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}

/// A child running its command.
pub struct Running {
    pid: i32,
    /// Restores the signal mask when the wait is over.
    _signals: Option<SignalBlock>,
}

impl Running {
    /// The child's PID.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits for the child to end, passing SIGTERM and SIGHUP on to it.
    pub fn wait(self) -> io::Result<Exit> {
        let set = handled_signals();
        // Checked every 100 ms as well as on SIGCHLD: in a process with other
        // threads, SIGCHLD may be taken by one of them.
        let tick = libc::timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        loop {
            let mut status = 0;
            // SAFETY: waitpid on our own child.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if rc == self.pid {
                return Ok(Exit::from_wait_status(status));
            }
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
            // SAFETY: sigtimedwait with a valid set and timeout.
            let sig = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &tick) };
            if sig == libc::SIGTERM || sig == libc::SIGHUP {
                // SAFETY: our own child.
                unsafe { libc::kill(self.pid, sig) };
            }
            // SIGINT/SIGQUIT: the terminal delivered them to the child too.
        }
    }
}

/// Why [`PidWatch::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidWait {
    /// The task ended.
    Exited,
    /// This process was asked to stop (SIGTERM, SIGINT, SIGHUP or SIGQUIT).
    Interrupted(i32),
}

/// A handle on a process that is not our child, to wait for its end.
/// Opened early, it refers to that process even if its PID is reused later.
pub struct PidWatch {
    pidfd: OwnedFd,
}

impl PidWatch {
    /// Opens a handle on process `pid` (pidfd_open).
    pub fn open(pid: i32) -> io::Result<Self> {
        Ok(Self {
            pidfd: cpushield_kernel::pidfd_open(pid)?,
        })
    }

    /// Waits until the process ends, or until this process gets a terminating
    /// signal, so whatever is held for the task can be let go.
    pub fn wait(&self) -> io::Result<PidWait> {
        let mut stops = handled_signals();
        stops.remove(Signal::SIGCHLD);
        let _block = SignalBlock::new()?;
        let sigfd = SignalFd::with_flags(&stops, SfdFlags::SFD_CLOEXEC)?;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.pidfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: sigfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: poll on two valid descriptors.
            let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(e);
            }
            if fds[0].revents != 0 {
                return Ok(PidWait::Exited);
            }
            if fds[1].revents != 0 {
                if let Some(info) = sigfd.read_signal()? {
                    return Ok(PidWait::Interrupted(info.ssi_signo as i32));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> (PathBuf, Vec<String>) {
        (
            resolve_program("sh").unwrap(),
            vec!["sh".into(), "-c".into(), script.into()],
        )
    }

    #[test]
    fn programs_resolve_through_path_and_missing_ones_are_named() {
        assert!(resolve_program("sh").unwrap().is_absolute());
        let err = resolve_program("cpushield-no-such-program").unwrap_err();
        assert!(err
            .to_string()
            .contains("'cpushield-no-such-program' not found"));
    }

    #[test]
    fn exit_statuses_map_like_a_shell() {
        assert_eq!(Exit::Code(7).shell_status(), 7);
        assert_eq!(Exit::Signal(9).shell_status(), 137);
    }

    #[test]
    fn a_held_child_runs_only_after_release_and_its_status_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let (prog, args) = sh(&format!("touch {}; exit 7", marker.display()));
        let pending = fork_held(&prog, &args, &[]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !marker.exists(),
            "the command must not start before release"
        );
        let running = pending.release().unwrap();
        assert_eq!(running.wait().unwrap(), Exit::Code(7));
        assert!(marker.exists());
    }

    #[test]
    fn a_child_dropped_unreleased_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let (prog, args) = sh(&format!("touch {}", marker.display()));
        let pending = fork_held(&prog, &args, &[]).unwrap();
        drop(pending);
        assert!(!marker.exists());
    }

    #[test]
    fn an_exec_failure_is_reported_with_its_errno() {
        let dir = tempfile::tempdir().unwrap();
        let not_exec = dir.path().join("plain");
        std::fs::write(&not_exec, "not a program").unwrap();
        let pending = fork_held(&not_exec, &["plain".into()], &[]).unwrap();
        let err = pending.release().err().expect("exec fails");
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    }

    #[test]
    fn a_signal_death_is_reported_as_the_signal() {
        let (prog, args) = sh("kill -9 $$");
        let running = fork_held(&prog, &args, &[]).unwrap().release().unwrap();
        assert_eq!(running.wait().unwrap(), Exit::Signal(9));
    }

    #[test]
    fn waiting_for_another_process_returns_when_it_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let watch = PidWatch::open(child.id() as i32).unwrap();
        let reaper = std::thread::spawn(move || child.wait());
        assert_eq!(watch.wait().unwrap(), PidWait::Exited);
        reaper.join().unwrap().unwrap();
    }
}
