//! The one narrow door to the kernel.
//!
//! Every read and write of /proc, /sys, cgroupfs and tracefs, and the affinity and
//! scheduling syscalls that shielding needs, go through the [`Kernel`] trait. The
//! real implementation is [`RealKernel`]; [`FakeKernel`] is an in-memory system
//! that planners and tests run against.

use cpushield_cpuset::CpuSet;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub mod clock;
pub mod cpu;
mod fake;
pub mod host;
pub mod irq;
pub mod namespace;
pub mod numa;
pub mod paths;
pub mod procfs;
mod real;
pub mod signal;
pub mod store;

pub use fake::FakeKernel;
pub use host::Host;
pub use procfs::Procfs;
pub use real::RealKernel;

/// The name of every idle-polling thread starts with this (`cpushield-poll3`),
/// so a tracer can tell the poller's time from real work. The runtime names
/// its pollers with it; the tracer recognises them by it.
pub const POLLER_THREAD_PREFIX: &str = "cpushield-poll";

/// Access to the kernel's files and the scheduling syscalls.
///
/// Paths are absolute as on a real system (`/proc/irq/36/smp_affinity`); a fake
/// maps them to memory. Errors are plain `io::Error`s; callers add the path and
/// the remedy.
///
/// Kernel files are bytes, not text: a thread may name itself with invalid
/// UTF-8 (`prctl(PR_SET_NAME)` cuts a name at 15 bytes, mid-character), and
/// that name shows up in `/proc/PID/stat`. [`Kernel::read_bytes`] is the one
/// read; [`Kernel::read`] is its lossy text view and never fails on encoding.
pub trait Kernel: Send + Sync {
    /// Reads a whole file as bytes.
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Reads a whole file as text; invalid UTF-8 becomes U+FFFD (never an error).
    fn read(&self, path: &Path) -> io::Result<String> {
        self.read_bytes(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
    /// Writes text to a file (no truncation semantics beyond what the kernel does).
    fn write(&self, path: &Path, data: &str) -> io::Result<()>;
    /// Opens a file for many writes, each one write(2) call acting on its
    /// own (a cgroup `tasks` file takes one TID per write): moving thousands
    /// of tasks then opens the file once. The default writes through
    /// [`Kernel::write`] each time.
    fn open_for_writes<'a>(&'a self, path: &Path) -> io::Result<Box<dyn KernelWriter + 'a>> {
        Ok(Box::new(WriteEach {
            kernel: self,
            path: path.to_path_buf(),
        }))
    }
    /// Names of the entries of a directory.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Whether a path exists.
    fn exists(&self, path: &Path) -> bool;
    /// The target of a symbolic link (e.g. /proc/self/ns/pid).
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// Creates a directory (a cgroup).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory (a cgroup).
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// Removes a directory and everything in it (the files a load left).
    fn remove_tree(&self, path: &Path) -> io::Result<()>;
    /// The CPUs a thread may run on (sched_getaffinity).
    fn get_affinity(&self, tid: i32) -> io::Result<CpuSet>;
    /// Sets the CPUs a thread may run on (sched_setaffinity).
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> io::Result<()>;
    /// Sets an extended attribute (cpushield marks the cgroups it creates).
    fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> io::Result<()>;
    /// Reads an extended attribute: ENODATA when absent, EOPNOTSUPP when the
    /// file system has none.
    fn get_xattr(&self, path: &Path, name: &str) -> io::Result<Vec<u8>>;
    /// A thread's scheduling policy and parameters (sched_getattr).
    fn get_sched(&self, tid: i32) -> io::Result<SchedParams>;
    /// Sets a thread's scheduling policy and parameters (sched_setattr).
    fn set_sched(&self, tid: i32, params: &SchedParams) -> io::Result<()>;
    /// Mounts a kernel file system of type `fstype` (debugfs) on `target`.
    /// The default refuses (EOPNOTSUPP).
    fn mount(&self, fstype: &str, target: &Path) -> io::Result<()> {
        let _ = (fstype, target);
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    /// Unmounts what [`Kernel::mount`] mounted on `target`. The default
    /// refuses (EOPNOTSUPP).
    fn unmount(&self, target: &Path) -> io::Result<()> {
        let _ = target;
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    /// Takes an advisory lock (flock(2)) on the file at `path`, made (with
    /// its directory) when absent: a file of cpushield's own, in its state
    /// directory, that several cpushield processes agree through. The lock
    /// lasts until the returned handle is dropped, or until the process
    /// dies: the kernel releases it then, so a killed holder never leaves
    /// it taken. [`LockKind::TryExclusive`] fails at once with EWOULDBLOCK
    /// where another holds the file. The default refuses (EOPNOTSUPP).
    fn lock_file(&self, path: &Path, kind: LockKind) -> io::Result<Box<dyn FileLock>> {
        let _ = (path, kind);
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    /// Creates or replaces a file of cpushield's own (a marker in its state
    /// directory), its directory made when absent. The default refuses
    /// (EOPNOTSUPP).
    fn put_file(&self, path: &Path, text: &str) -> io::Result<()> {
        let _ = (path, text);
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    /// Removes a file of cpushield's own ([`Kernel::put_file`]'s, or a lock
    /// file of [`Kernel::lock_file`]); ENOENT when absent. The default
    /// refuses (EOPNOTSUPP).
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let _ = path;
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    /// Opens a per-CPU tracefs `trace_pipe` to be read without blocking.
    /// The default refuses (EOPNOTSUPP).
    fn open_trace_pipe(&self, path: &Path) -> io::Result<Box<dyn TracePipe>> {
        let _ = path;
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    /// Opens tracefs's `trace_marker` for the lines the measuring threads
    /// write into the trace. The default refuses (EOPNOTSUPP).
    fn open_trace_marker(&self, path: &Path) -> io::Result<Box<dyn TraceMarker>> {
        let _ = path;
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    /// The kernel's log buffer as `dmesg` reads it (syslog(2)
    /// SYSLOG_ACTION_READ_ALL, which leaves it as it is): the kernel's own
    /// record of what it did at boot, as far back as the buffer still
    /// reaches. EPERM without CAP_SYSLOG where `kernel.dmesg_restrict` is 1.
    /// The default refuses (EOPNOTSUPP).
    fn kernel_log(&self) -> io::Result<String> {
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
}

/// Most bytes one [`TracePipe::read_available`] call returns, so that one
/// busy CPU cannot starve the others (a trace_pipe read returns at most a
/// page of text).
pub const TRACE_PIPE_READ_BUDGET: usize = 1 << 20;

/// How [`Kernel::lock_file`] locks a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// Shared with every other shared holder; waits while one holds it
    /// exclusively.
    Shared,
    /// Held alone; waits until no one else holds it.
    Exclusive,
    /// Held alone, or EWOULDBLOCK at once when another holds it.
    TryExclusive,
}

/// A lock taken by [`Kernel::lock_file`]: released when dropped.
pub trait FileLock: Send + Sync {}

/// A per-CPU trace pipe opened by [`Kernel::open_trace_pipe`].
pub trait TracePipe: Send {
    /// Appends what is waiting now, at most [`TRACE_PIPE_READ_BUDGET`]
    /// bytes, to `buf`; returns the number of bytes read (0 when nothing
    /// is waiting).
    fn read_available(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
}

/// tracefs's `trace_marker`, opened by [`Kernel::open_trace_marker`] and
/// shared by every thread that marks.
pub trait TraceMarker: Send + Sync {
    /// Writes one line with one write(2) call.
    fn write_line(&self, line: &[u8]) -> io::Result<()>;
}

/// A kernel file held open by [`Kernel::open_for_writes`].
pub trait KernelWriter {
    /// Writes `data` with one write(2) call.
    fn write(&mut self, data: &str) -> io::Result<()>;
}

/// The default [`KernelWriter`]: each write goes through [`Kernel::write`].
struct WriteEach<'a, K: Kernel + ?Sized> {
    kernel: &'a K,
    path: PathBuf,
}

impl<K: Kernel + ?Sized> KernelWriter for WriteEach<'_, K> {
    fn write(&mut self, data: &str) -> io::Result<()> {
        self.kernel.write(&self.path, data)
    }
}

/// A thread's scheduling policy and parameters, as sched_getattr(2) gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedParams {
    /// SCHED_OTHER 0, SCHED_FIFO 1, SCHED_RR 2, SCHED_BATCH 3, SCHED_IDLE 5, SCHED_DEADLINE 6.
    pub policy: u32,
    /// SCHED_FLAG_* bits (reset-on-fork…).
    pub flags: u64,
    /// Nice value (SCHED_OTHER, SCHED_BATCH).
    pub nice: i32,
    /// Real-time priority (SCHED_FIFO, SCHED_RR).
    pub priority: u32,
    /// SCHED_DEADLINE runtime, ns.
    pub runtime: u64,
    /// SCHED_DEADLINE deadline, ns.
    pub deadline: u64,
    /// SCHED_DEADLINE period, ns.
    pub period: u64,
}

/// Where the shield keeps its state and lock: `CPUSHIELD_STATE_DIR`, else
/// `/run/cpushield`. Shared by the shield (which writes the state) and `check`
/// (which reads the shielded CPUs from it).
pub fn shield_state_dir() -> PathBuf {
    std::env::var_os("CPUSHIELD_STATE_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/cpushield"))
}

/// The shield's state file (`state.json` in [`shield_state_dir`]).
pub fn shield_state_file() -> PathBuf {
    shield_state_dir().join("state.json")
}

/// Reads a file and trims trailing whitespace, with the path in the error.
pub fn read_trimmed(kernel: &dyn Kernel, path: &Path) -> io::Result<String> {
    kernel
        .read(path)
        .map(|s| s.trim_end().to_string())
        .map_err(|e| with_path(e, path))
}

/// Reads a file holding a CPU list (`0-3,8`).
pub fn read_cpu_list(kernel: &dyn Kernel, path: &Path) -> io::Result<CpuSet> {
    let text = read_trimmed(kernel, path)?;
    CpuSet::parse_list(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Reads a file holding a CPU mask in hex (`ff,00000000`), as
/// `smp_affinity`, `default_smp_affinity` and the workqueue cpumask do.
pub fn read_cpu_mask(kernel: &dyn Kernel, path: &Path) -> io::Result<CpuSet> {
    let text = read_trimmed(kernel, path)?;
    CpuSet::parse_mask(text.trim()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Reads a file holding one number (a sysctl such as
/// `kernel.sched_rt_runtime_us`), with the path in the error.
pub fn read_number<T: std::str::FromStr>(kernel: &dyn Kernel, path: &Path) -> io::Result<T> {
    let text = read_trimmed(kernel, path)?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a number: '{text}'", path.display()),
        )
    })
}

/// An I/O error on a path: the path (and a remedy) for the message, the
/// original error, errno included, kept whole. Its text already holds the
/// original error's, so it names no `source()` (a printed chain would repeat it).
#[derive(Debug)]
pub struct PathError {
    /// The file or directory the operation was on.
    pub path: PathBuf,
    /// The original error, errno included.
    pub error: io::Error,
    /// What to do about it, when known.
    pub remedy: Option<String>,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)?;
        if let Some(remedy) = &self.remedy {
            write!(f, ": {remedy}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PathError {}

/// Adds the path to an I/O error's message, keeping its kind and its errno
/// (reachable with [`os_errno`]).
pub fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(
        error.kind(),
        PathError {
            path: path.to_path_buf(),
            error,
            remedy: None,
        },
    )
}

/// [`with_path`] plus what to do about it.
pub fn with_path_and_remedy(error: io::Error, path: &Path, remedy: String) -> io::Error {
    io::Error::new(
        error.kind(),
        PathError {
            path: path.to_path_buf(),
            error,
            remedy: Some(remedy),
        },
    )
}

/// The errno of an I/O error, looking through the path added by [`with_path`].
pub fn os_errno(error: &io::Error) -> Option<i32> {
    error.raw_os_error().or_else(|| {
        error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<PathError>())
            .and_then(|p| os_errno(&p.error))
    })
}

/// Whether an error means the task (or its /proc entry) is gone: ENOENT or ESRCH.
pub fn is_gone(error: &io::Error) -> bool {
    matches!(os_errno(error), Some(libc::ENOENT) | Some(libc::ESRCH))
        || error.kind() == io::ErrorKind::NotFound
}

/// The running kernel's version string (`uname -v`: build number, date and
/// flags such as PREEMPT_DYNAMIC), as read.
pub fn kernel_version(kernel: &dyn Kernel) -> io::Result<String> {
    Procfs::new(kernel).file("sys/kernel/version")
}

/// The running kernel's release (`uname -r`), as read.
pub fn kernel_release(kernel: &dyn Kernel) -> io::Result<String> {
    Procfs::new(kernel).file("sys/kernel/osrelease")
}

/// The kernel build configuration and where it was read (/proc/config.gz or
/// /boot/config-RELEASE); empty when neither is there.
pub fn kconfig(kernel: &dyn Kernel) -> (BTreeMap<String, String>, Option<String>) {
    use cpushield_parse::kconfig::parse_kconfig;
    // Binary, so not through `Kernel::read`; asked only when the kernel (or
    // a fake of it) says the file exists.
    if kernel.exists(Path::new(paths::CONFIG_GZ)) {
        if let Some(text) = read_config_gz() {
            return (parse_kconfig(&text), Some(paths::CONFIG_GZ.into()));
        }
    }
    let release = kernel_release(kernel)
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let path = format!("/boot/config-{release}");
    match kernel.read(Path::new(&path)) {
        Ok(text) => (parse_kconfig(&text), Some(path)),
        Err(_) => (BTreeMap::new(), None),
    }
}

/// /proc/config.gz, decompressed by `zcat` when both exist (no extra crate).
fn read_config_gz() -> Option<String> {
    if !Path::new(paths::CONFIG_GZ).exists() {
        return None;
    }
    let out = std::process::Command::new("zcat")
        .arg(paths::CONFIG_GZ)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The cpuidle driver in use (`none` without one), as read.
pub fn idle_driver(kernel: &dyn Kernel) -> io::Result<String> {
    let path = Path::new(paths::IDLE_DRIVER);
    kernel.read(path).map_err(|e| with_path(e, path))
}

/// The CPUs in nohz_full mode as sysfs says (`(null)` or a CPU list), as
/// read; older kernels have no such file.
pub fn nohz_full(kernel: &dyn Kernel) -> io::Result<String> {
    let path = Path::new(paths::NOHZ_FULL);
    kernel.read(path).map_err(|e| with_path(e, path))
}

/// The CPUs isolated at boot (`isolcpus=`), as read (a CPU list, empty
/// for none).
pub fn isolated(kernel: &dyn Kernel) -> io::Result<String> {
    let path = Path::new(paths::ISOLATED);
    kernel.read(path).map_err(|e| with_path(e, path))
}

/// The CPUs isolated at boot (`isolcpus=`).
pub fn isolated_cpus(kernel: &dyn Kernel) -> io::Result<CpuSet> {
    read_cpu_list(kernel, Path::new(paths::ISOLATED))
}

/// The online CPUs of the machine.
pub fn online_cpus(kernel: &dyn Kernel) -> io::Result<CpuSet> {
    read_cpu_list(kernel, Path::new(paths::ONLINE_CPUS))
}

/// The possible CPUs (what IRQ masks are padded to).
pub fn possible_cpus(kernel: &dyn Kernel) -> io::Result<CpuSet> {
    read_cpu_list(kernel, Path::new(paths::POSSIBLE_CPUS))
}

/// The SMT siblings of `cpu` (its `topology/thread_siblings_list`, the CPU
/// itself included).
pub fn thread_siblings(kernel: &dyn Kernel, cpu: usize) -> io::Result<CpuSet> {
    read_cpu_list(kernel, &paths::thread_siblings(cpu))
}

/// The calling thread's ID (gettid), as /proc and the scheduling calls name it.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// A descriptor that refers to process `pid` (pidfd_open): unlike the PID,
/// it never names a later process that is given the same ID.
pub fn pidfd_open(pid: i32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor this process owns and nothing else closes.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// The CPU the calling thread is running on right now (sched_getcpu, a vDSO
/// call: cheap enough for a measuring loop).
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    unsafe { libc::sched_getcpu() }.max(0) as usize
}

/// USER_HZ: the clock ticks per second of /proc/stat and of utime/stime in
/// /proc/PID/stat (100 when the system does not say).
pub fn user_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// A record of every write made through a [`RecordingKernel`], for tests and dry runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A file write.
    Write(PathBuf, String),
    /// A directory creation.
    Mkdir(PathBuf),
    /// A directory removal.
    Rmdir(PathBuf),
    /// A directory removed with everything in it.
    RemoveTree(PathBuf),
    /// A file of cpushield's own removed.
    RemoveFile(PathBuf),
    /// An affinity change.
    Affinity(i32, CpuSet),
    /// An extended attribute set (name, value).
    Xattr(PathBuf, String, Vec<u8>),
    /// A scheduling policy change.
    Sched(i32, SchedParams),
    /// A file system mounted (type, target).
    Mount(String, PathBuf),
    /// A file system unmounted.
    Unmount(PathBuf),
}

/// Wraps a kernel and records every change it is asked to make.
pub struct RecordingKernel<'a> {
    inner: &'a dyn Kernel,
    log: Mutex<Vec<Change>>,
}

impl<'a> RecordingKernel<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a dyn Kernel) -> Self {
        Self {
            inner,
            log: Mutex::new(Vec::new()),
        }
    }

    /// The changes made so far, in order.
    pub fn changes(&self) -> Vec<Change> {
        self.log.lock().expect("log lock").clone()
    }

    fn record(&self, change: Change) {
        self.log.lock().expect("log lock").push(change);
    }
}

impl Kernel for RecordingKernel<'_> {
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read_bytes(path)
    }
    fn write(&self, path: &Path, data: &str) -> io::Result<()> {
        self.record(Change::Write(path.to_path_buf(), data.to_string()));
        self.inner.write(path, data)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.read_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.read_link(path)
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.record(Change::Mkdir(path.to_path_buf()));
        self.inner.mkdir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.record(Change::Rmdir(path.to_path_buf()));
        self.inner.rmdir(path)
    }
    fn remove_tree(&self, path: &Path) -> io::Result<()> {
        self.record(Change::RemoveTree(path.to_path_buf()));
        self.inner.remove_tree(path)
    }
    fn get_affinity(&self, tid: i32) -> io::Result<CpuSet> {
        self.inner.get_affinity(tid)
    }
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        self.record(Change::Affinity(tid, cpus.clone()));
        self.inner.set_affinity(tid, cpus)
    }
    fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
        self.record(Change::Xattr(
            path.to_path_buf(),
            name.to_string(),
            value.to_vec(),
        ));
        self.inner.set_xattr(path, name, value)
    }
    fn get_xattr(&self, path: &Path, name: &str) -> io::Result<Vec<u8>> {
        self.inner.get_xattr(path, name)
    }
    fn get_sched(&self, tid: i32) -> io::Result<SchedParams> {
        self.inner.get_sched(tid)
    }
    fn set_sched(&self, tid: i32, params: &SchedParams) -> io::Result<()> {
        self.record(Change::Sched(tid, *params));
        self.inner.set_sched(tid, params)
    }
    fn mount(&self, fstype: &str, target: &Path) -> io::Result<()> {
        self.record(Change::Mount(fstype.to_string(), target.to_path_buf()));
        self.inner.mount(fstype, target)
    }
    fn unmount(&self, target: &Path) -> io::Result<()> {
        self.record(Change::Unmount(target.to_path_buf()));
        self.inner.unmount(target)
    }
    fn lock_file(&self, path: &Path, kind: LockKind) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock_file(path, kind)
    }
    fn put_file(&self, path: &Path, text: &str) -> io::Result<()> {
        self.record(Change::Write(path.to_path_buf(), text.to_string()));
        self.inner.put_file(path, text)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.record(Change::RemoveFile(path.to_path_buf()));
        self.inner.remove_file(path)
    }
    fn open_trace_pipe(&self, path: &Path) -> io::Result<Box<dyn TracePipe>> {
        self.inner.open_trace_pipe(path)
    }
    fn open_trace_marker(&self, path: &Path) -> io::Result<Box<dyn TraceMarker>> {
        self.inner.open_trace_marker(path)
    }
    fn kernel_log(&self) -> io::Result<String> {
        self.inner.kernel_log()
    }
}

/// Files of a fake system, keyed by absolute path. Used to build a [`FakeKernel`].
pub type FakeFiles = BTreeMap<PathBuf, String>;

/// Whether this machine has the Unix group `name` (getgrnam_r, so the
/// groups of every NSS source count).
pub fn group_exists(name: &str) -> bool {
    matches!(nix::unistd::Group::from_name(name), Ok(Some(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_siblings_are_read_from_the_cpu_topology() {
        let k = FakeKernel::new();
        k.set_file(
            "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
            "1,5\n",
        );
        assert_eq!(thread_siblings(&k, 1).unwrap().to_list(), "1,5");
        assert!(thread_siblings(&k, 2).is_err());
    }

    #[test]
    fn user_hz_is_a_positive_tick_rate() {
        assert!((1..=10_000).contains(&user_hz()));
    }

    #[test]
    fn with_path_keeps_esrch_and_eperm_reachable_and_names_the_path() {
        for code in [libc::ESRCH, libc::EPERM, libc::ENOSPC] {
            let e = with_path(
                io::Error::from_raw_os_error(code),
                Path::new("/proc/7/stat"),
            );
            assert_eq!(os_errno(&e), Some(code));
            assert!(e.to_string().starts_with("/proc/7/stat: "), "{e}");
            let twice = with_path(e, Path::new("/outer"));
            assert_eq!(os_errno(&twice), Some(code), "nested path keeps the errno");
            let fix = with_path_and_remedy(
                io::Error::from_raw_os_error(code),
                Path::new("/run/x"),
                "do this".into(),
            );
            assert_eq!(os_errno(&fix), Some(code));
            assert!(fix.to_string().ends_with(": do this"), "{fix}");
            assert!(std::error::Error::source(&fix).is_none_or(|s| s.source().is_none()));
        }
    }

    #[test]
    fn a_vanished_task_is_told_from_other_errors() {
        let gone = with_path(io::Error::from_raw_os_error(libc::ESRCH), Path::new("/x"));
        let enoent = with_path(io::Error::from_raw_os_error(libc::ENOENT), Path::new("/x"));
        let eacces = with_path(io::Error::from_raw_os_error(libc::EACCES), Path::new("/x"));
        assert!(is_gone(&gone) && is_gone(&enoent));
        assert!(!is_gone(&eacces));
    }

    #[test]
    fn read_is_lossy_on_invalid_utf8() {
        let k = FakeKernel::new();
        k.set_file_bytes("/proc/5/comm", b"worker-x\xc3\n".to_vec());
        assert_eq!(
            k.read(Path::new("/proc/5/comm")).unwrap(),
            "worker-x\u{fffd}\n"
        );
        assert_eq!(
            k.read_bytes(Path::new("/proc/5/comm")).unwrap(),
            b"worker-x\xc3\n"
        );
    }

    #[test]
    fn the_kernel_log_is_read_as_dmesg_reads_it_or_refused_without_the_right() {
        match RealKernel.kernel_log() {
            // The buffer holds records of this boot, each with its level.
            Ok(log) => assert!(log.starts_with('<') && log.contains("] "), "{log:.200}"),
            Err(e) => assert_eq!(os_errno(&e), Some(libc::EPERM), "{e}"),
        }
        let fake = FakeKernel::new();
        let recording = RecordingKernel::new(&fake);
        assert_eq!(
            os_errno(&recording.kernel_log().unwrap_err()),
            Some(libc::EPERM)
        );
    }

    /// Shared locks together, an exclusive one alone, released on drop:
    /// the same on a real file and on the fake.
    fn check_lock_semantics(k: &dyn Kernel, path: &Path) {
        let a = k.lock_file(path, LockKind::Shared).unwrap();
        let b = k.lock_file(path, LockKind::Shared).unwrap();
        let refused = k.lock_file(path, LockKind::TryExclusive).err().unwrap();
        assert_eq!(os_errno(&refused), Some(libc::EWOULDBLOCK), "{refused}");
        drop(a);
        assert!(
            k.lock_file(path, LockKind::TryExclusive).is_err(),
            "b holds it"
        );
        drop(b);
        let alone = k.lock_file(path, LockKind::TryExclusive).unwrap();
        assert!(k.lock_file(path, LockKind::TryExclusive).is_err());
        // A file made again is another file: a lock on the old one is not on it.
        k.remove_file(path).unwrap();
        let _new = k.lock_file(path, LockKind::TryExclusive).unwrap();
        drop(alone);
    }

    #[test]
    fn file_locks_are_shared_or_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("made/here.lock");
        check_lock_semantics(&RealKernel, &path);
        assert!(path.exists(), "made with its directory");
        check_lock_semantics(&FakeKernel::new(), Path::new("/run/cpushield/x.lock"));
    }

    #[test]
    fn a_file_of_our_own_is_put_and_removed_and_a_missing_one_is_enoent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d/marker");
        let fake = FakeKernel::new();
        for (k, p) in [
            (&RealKernel as &dyn Kernel, path.as_path()),
            (&fake, Path::new("/run/m")),
        ] {
            k.put_file(p, "x\n").unwrap();
            assert_eq!(k.read(p).unwrap(), "x\n");
            k.remove_file(p).unwrap();
            assert!(!k.exists(p));
            assert_eq!(os_errno(&k.remove_file(p).unwrap_err()), Some(libc::ENOENT));
        }
    }

    #[test]
    fn a_fake_mount_shows_in_proc_self_mounts_until_it_is_unmounted() {
        let k = FakeKernel::new();
        k.set_unmounted_file("/sys/kernel/tracing", "/sys/kernel/tracing/trace", "");
        let mounts = Path::new("/proc/self/mounts");
        k.mount("tracefs", Path::new("/sys/kernel/tracing"))
            .unwrap();
        assert!(k
            .read(mounts)
            .unwrap()
            .contains(" /sys/kernel/tracing tracefs "));
        k.unmount(Path::new("/sys/kernel/tracing")).unwrap();
        assert!(!k.exists(mounts), "made by the mount, gone with it");
        k.set_file(mounts, "proc /proc proc rw 0 0\n");
        k.mount("tracefs", Path::new("/sys/kernel/tracing"))
            .unwrap();
        k.unmount(Path::new("/sys/kernel/tracing")).unwrap();
        assert_eq!(k.read(mounts).unwrap(), "proc /proc proc rw 0 0\n");
    }
}
