//! Process plumbing for the load: forking a child that never returns into
//! the caller's code, tying a child's life to its parent, signal and stdio
//! hygiene, spawning external programs with `posix_spawn` (no locks taken
//! after a fork), and finding processes by parent or group in /proc.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use cpushield_kernel::{Kernel, Procfs, SchedParams};

/// Turns a -1 return into the errno.
pub fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Forks. The child runs `child` and exits with the code it returns (101 if
/// it panics); it never returns into the caller's code. Returns the child's
/// pid in the parent.
pub fn fork_child<F: FnOnce() -> i32>(child: F) -> io::Result<libc::pid_t> {
    // SAFETY: the child only runs `child` and then _exit()s.
    let pid = cvt(unsafe { libc::fork() })?;
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// In a freshly forked child: be sent `signal` when the parent dies, and exit
/// at once if it already died before this call (the classic race).
pub fn die_with_parent(signal: libc::c_int, parent: libc::pid_t) {
    // SAFETY: plain prctl/getppid.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
}

/// Signals a child should start with the default action for.
const DEFAULT_SIGNALS: [libc::c_int; 9] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGCHLD,
    libc::SIGALRM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGXCPU,
];

/// Gives the calling process default signal actions (handlers installed by
/// the program that forked us are not ours), SIGPIPE ignored so broken pipes
/// come back as EPIPE, and no blocked signals.
pub fn reset_signals() {
    // SAFETY: plain signal(2)/sigprocmask(2) calls.
    unsafe {
        for sig in DEFAULT_SIGNALS {
            libc::signal(sig, libc::SIG_DFL);
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// A signal set holding `signals`.
pub fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: initialising a sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Sets the process name shown by `ps` (15 bytes at most).
pub fn set_name(name: &str) {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: NUL-terminated 16-byte buffer.
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// Points stdin, stdout and stderr at /dev/null and closes every other
/// inherited descriptor, so a load never holds its caller's pipes or files.
pub fn detach_fds() {
    // SAFETY: plain open/dup2/close calls on our own descriptors.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
}

/// Sets SCHED_OTHER (nice unchanged) on the calling thread, in case it was
/// forked from a real-time thread.
pub fn set_sched_other(kernel: &dyn Kernel) -> io::Result<()> {
    let nice = kernel.get_sched(0)?.nice;
    kernel.set_sched(
        0,
        &SchedParams {
            policy: libc::SCHED_OTHER as u32,
            nice,
            ..SchedParams::default()
        },
    )
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// exit(code).
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl Exit {
    /// Decodes a waitpid status.
    pub fn from_status(status: libc::c_int) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }

    /// Whether it was exit(0).
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit status {c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// Waits for `pid` to end, retrying on EINTR.
pub fn wait(pid: libc::pid_t) -> io::Result<Exit> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(Exit::from_status(status));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Sends `signal` to process group `pgid`; a group already gone is fine.
pub fn kill_group(pgid: libc::pid_t, signal: libc::c_int) {
    if pgid > 1 {
        // SAFETY: signalling a group we created.
        unsafe { libc::kill(-pgid, signal) };
    }
}

/// One line of /proc/PID/stat, the parts we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Process id.
    pub pid: i32,
    /// State letter (R, S, D, Z, ...).
    pub state: char,
    /// Parent pid.
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
}

/// Parses /proc/PID/stat text (the command name may hold spaces and parens;
/// the one stat parser is `cpushield_parse::pid_stat`).
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let line = cpushield_parse::pid_stat::StatLine::parse(text.as_bytes()).ok()?;
    Some(ProcStat {
        pid: line.pid,
        state: line.state().ok()?,
        ppid: line.signed(4).ok()?,
        pgrp: line.signed(5).ok()?,
    })
}

/// Every process on the system, from /proc read through `kernel`.
pub fn all_processes(kernel: &dyn Kernel) -> Vec<ProcStat> {
    Procfs::new(kernel)
        .pids()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| stat_of(kernel, pid))
        .collect()
}

/// The stat line of process `pid`, read through `kernel`; `None` when it
/// is gone or unreadable.
pub fn stat_of(kernel: &dyn Kernel, pid: libc::pid_t) -> Option<ProcStat> {
    let text = Procfs::new(kernel).process_file(pid, "stat").ok()??;
    parse_stat(&text)
}

/// Where a spawned program's stdout or stderr goes.
#[derive(Debug, Clone)]
pub enum Redirect {
    /// /dev/null.
    Null,
    /// This descriptor of ours (dup2'd).
    Fd(libc::c_int),
    /// This file, created or truncated.
    File(CString),
}

/// An external program to run with `posix_spawn`: no Rust locks are taken,
/// so it is safe in a child forked from a multi-threaded program. The
/// program starts with default signal actions and nothing blocked, in our
/// process group (so the supervisor's group kill reaches it).
#[derive(Debug, Clone)]
pub struct Spawn {
    path: CString,
    argv: Vec<CString>,
    stdout: Redirect,
    stderr: Redirect,
}

extern "C" {
    static environ: *const *mut libc::c_char;
}

impl Spawn {
    /// `path` run with `args` (argv[0] is the file name), output to /dev/null.
    pub fn new(path: &Path, args: &[&str]) -> io::Result<Spawn> {
        let c = |b: &[u8]| {
            CString::new(b)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in argument"))
        };
        let arg0 = path.file_name().unwrap_or(path.as_os_str());
        let mut argv = vec![c(arg0.as_bytes())?];
        for a in args {
            argv.push(c(a.as_bytes())?);
        }
        Ok(Spawn {
            path: c(path.as_os_str().as_bytes())?,
            argv,
            stdout: Redirect::Null,
            stderr: Redirect::Null,
        })
    }

    /// Sends stdout to `r`.
    pub fn stdout(mut self, r: Redirect) -> Spawn {
        self.stdout = r;
        self
    }

    /// Sends stderr to `r`.
    pub fn stderr(mut self, r: Redirect) -> Spawn {
        self.stderr = r;
        self
    }

    /// Starts the program; returns its pid.
    pub fn spawn(&self) -> io::Result<libc::pid_t> {
        let mut argv: Vec<*mut libc::c_char> =
            self.argv.iter().map(|a| a.as_ptr() as *mut _).collect();
        argv.push(std::ptr::null_mut());
        // SAFETY: the file actions and attributes are initialised, used once
        // and destroyed; every pointer outlives the call.
        unsafe {
            let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
            let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
            libc::posix_spawn_file_actions_init(&mut actions);
            libc::posix_spawnattr_init(&mut attr);
            libc::posix_spawn_file_actions_addopen(
                &mut actions,
                0,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
                0,
            );
            for (fd, r) in [(1, &self.stdout), (2, &self.stderr)] {
                match r {
                    Redirect::Null => {
                        libc::posix_spawn_file_actions_addopen(
                            &mut actions,
                            fd,
                            c"/dev/null".as_ptr(),
                            libc::O_WRONLY,
                            0,
                        );
                    }
                    Redirect::Fd(src) => {
                        libc::posix_spawn_file_actions_adddup2(&mut actions, *src, fd);
                    }
                    Redirect::File(name) => {
                        libc::posix_spawn_file_actions_addopen(
                            &mut actions,
                            fd,
                            name.as_ptr(),
                            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                            0o644,
                        );
                    }
                }
            }
            let defaults = sigset(&[
                libc::SIGPIPE,
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGCHLD,
            ]);
            let empty = sigset(&[]);
            libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
            libc::posix_spawnattr_setsigmask(&mut attr, &empty);
            libc::posix_spawnattr_setflags(
                &mut attr,
                (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
            );
            let mut pid = 0;
            let rc = libc::posix_spawn(
                &mut pid,
                self.path.as_ptr(),
                &actions,
                &attr,
                argv.as_ptr(),
                environ,
            );
            libc::posix_spawn_file_actions_destroy(&mut actions);
            libc::posix_spawnattr_destroy(&mut attr);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(pid)
        }
    }

    /// Runs the program to the end.
    pub fn run(&self) -> io::Result<Exit> {
        wait(self.spawn()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_forked_from_a_real_time_thread_runs_at_sched_other_with_its_nice_value() {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_thread_affinity(0, cpushield_cpuset::CpuSet::from_cpus([1]));
        let fifo = SchedParams {
            policy: libc::SCHED_FIFO as u32,
            priority: 80,
            nice: 5,
            ..SchedParams::default()
        };
        k.set_sched(0, &fifo).unwrap();
        set_sched_other(&k).unwrap();
        let now = k.get_sched(0).unwrap();
        assert_eq!((now.policy, now.priority, now.nice), (0, 0, 5));
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let s = parse_stat("123 (a b) c) S 45 67 67 0 -1").unwrap();
        assert_eq!(
            s,
            ProcStat {
                pid: 123,
                state: 'S',
                ppid: 45,
                pgrp: 67
            }
        );
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn processes_are_found_through_the_kernel_door() {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file("/proc/12/stat", "12 (my (odd) name) S 1 12 12 0 -1\n");
        k.set_file("/proc/13/stat", "13 (z) Z 12 12 12 0 -1\n");
        k.set_file("/proc/self/stat", "12 (x) S 1 12 12 0 -1\n");
        k.set_file("/proc/uptime", "1.0 1.0\n");
        let mut all = all_processes(&k);
        all.sort_by_key(|p| p.pid);
        assert_eq!(
            all.iter()
                .map(|p| (p.pid, p.ppid, p.state))
                .collect::<Vec<_>>(),
            vec![(12, 1, 'S'), (13, 12, 'Z')]
        );
        assert_eq!(stat_of(&k, 13).map(|p| p.state), Some('Z'));
        assert_eq!(stat_of(&k, 14), None);
    }

    #[test]
    fn a_forked_child_exits_with_its_code_and_a_panic_is_101() {
        let pid = fork_child(|| 7).unwrap();
        assert_eq!(wait(pid).unwrap(), Exit::Code(7));
        let pid = fork_child(|| {
            std::panic::set_hook(Box::new(|_| {}));
            panic!("no unwinding into the parent")
        })
        .unwrap();
        assert_eq!(wait(pid).unwrap(), Exit::Code(101));
    }

    #[test]
    fn spawned_programs_report_their_exit() {
        let sh = Path::new("/bin/sh");
        assert!(Spawn::new(sh, &["-c", "exit 0"])
            .unwrap()
            .run()
            .unwrap()
            .success());
        assert_eq!(
            Spawn::new(sh, &["-c", "exit 3"]).unwrap().run().unwrap(),
            Exit::Code(3)
        );
        assert_eq!(
            Spawn::new(sh, &["-c", "kill -9 $$"])
                .unwrap()
                .run()
                .unwrap(),
            Exit::Signal(9)
        );
    }

    #[test]
    fn spawned_output_goes_where_asked() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let name = CString::new(out.as_os_str().as_bytes()).unwrap();
        Spawn::new(Path::new("/bin/sh"), &["-c", "echo hi >&2"])
            .unwrap()
            .stderr(Redirect::File(name))
            .run()
            .unwrap();
        assert_eq!(std::fs::read_to_string(out).unwrap(), "hi\n");
    }
}
