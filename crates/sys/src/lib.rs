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

pub mod cmdline;
mod fake;
mod real;

pub use fake::FakeKernel;
pub use real::RealKernel;

/// Access to the kernel's files and the scheduling syscalls.
///
/// Paths are absolute as on a real system (`/proc/irq/36/smp_affinity`); a fake
/// maps them to memory. Errors are plain `io::Error`s; callers add the path and
/// the remedy.
pub trait Kernel: Send + Sync {
    /// Reads a whole file as text.
    fn read(&self, path: &Path) -> io::Result<String>;
    /// Writes text to a file (no truncation semantics beyond what the kernel does).
    fn write(&self, path: &Path, data: &str) -> io::Result<()>;
    /// Names of the entries of a directory.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Whether a path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Creates a directory (a cgroup).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory (a cgroup).
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// The CPUs a thread may run on (sched_getaffinity).
    fn get_affinity(&self, tid: i32) -> io::Result<CpuSet>;
    /// Sets the CPUs a thread may run on (sched_setaffinity).
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> io::Result<()>;
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

/// Adds the path to an I/O error's message, keeping its kind and errno.
pub fn with_path(error: io::Error, path: &Path) -> io::Error {
    let raw = error.raw_os_error();
    let msg = format!("{}: {error}", path.display());
    match raw {
        Some(code) => io::Error::new(io::Error::from_raw_os_error(code).kind(), msg),
        None => io::Error::new(error.kind(), msg),
    }
}

/// The online CPUs of the machine.
pub fn online_cpus(kernel: &dyn Kernel) -> io::Result<CpuSet> {
    read_cpu_list(kernel, Path::new("/sys/devices/system/cpu/online"))
}

/// The possible CPUs (what IRQ masks are padded to).
pub fn possible_cpus(kernel: &dyn Kernel) -> io::Result<CpuSet> {
    read_cpu_list(kernel, Path::new("/sys/devices/system/cpu/possible"))
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
    /// An affinity change.
    Affinity(i32, CpuSet),
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
}

impl Kernel for RecordingKernel<'_> {
    fn read(&self, path: &Path) -> io::Result<String> {
        self.inner.read(path)
    }
    fn write(&self, path: &Path, data: &str) -> io::Result<()> {
        self.log
            .lock()
            .expect("log lock")
            .push(Change::Write(path.to_path_buf(), data.to_string()));
        self.inner.write(path, data)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.read_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.log
            .lock()
            .expect("log lock")
            .push(Change::Mkdir(path.to_path_buf()));
        self.inner.mkdir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.log
            .lock()
            .expect("log lock")
            .push(Change::Rmdir(path.to_path_buf()));
        self.inner.rmdir(path)
    }
    fn get_affinity(&self, tid: i32) -> io::Result<CpuSet> {
        self.inner.get_affinity(tid)
    }
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        self.log
            .lock()
            .expect("log lock")
            .push(Change::Affinity(tid, cpus.clone()));
        self.inner.set_affinity(tid, cpus)
    }
}

/// Files of a fake system, keyed by absolute path. Used to build a [`FakeKernel`].
pub type FakeFiles = BTreeMap<PathBuf, String>;
