//! The tasks of a /proc, through the kernel door: which processes there
//! are, which threads each has, and the files of each, with one treatment
//! of a task that exits while it is read.
//!
//! A task can end between any two reads: its directory is listed and then
//! gone, its stat file opens and reads empty. Every reader here turns that
//! into `Ok(None)` (the task is passed over), and any other failure into an
//! error that names the path, so a caller never mistakes an unreadable task
//! for one that ended.

use crate::{is_gone, with_path, Kernel};
use std::io;
use std::path::{Path, PathBuf};

/// The machine's (or the PID namespace's) /proc.
pub const PROC: &str = "/proc";

/// The one treatment of "the task exited while we read it": an error that
/// says the task (or its /proc entry) is gone becomes `Ok(None)`; any other
/// error stays one.
pub fn unless_gone<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A /proc read through a kernel door.
#[derive(Clone, Copy)]
pub struct Procfs<'k> {
    kernel: &'k dyn Kernel,
    root: &'k Path,
}

impl<'k> Procfs<'k> {
    /// This PID namespace's /proc.
    pub fn new(kernel: &'k dyn Kernel) -> Self {
        Self::at(kernel, Path::new(PROC))
    }

    /// A /proc mounted at `root` (the machine's, seen from inside a private
    /// PID namespace: [`crate::namespace::host_proc`]).
    pub fn at(kernel: &'k dyn Kernel, root: &'k Path) -> Self {
        Self { kernel, root }
    }

    /// The kernel door it is read through.
    pub fn kernel(&self) -> &'k dyn Kernel {
        self.kernel
    }

    /// Where this /proc is.
    pub fn root(&self) -> &Path {
        self.root
    }

    /// The directory of process `pid`.
    pub fn process_dir(&self, pid: i32) -> PathBuf {
        self.root.join(pid.to_string())
    }

    /// The directory of thread `tid` of process `pid`.
    pub fn thread_dir(&self, pid: i32, tid: i32) -> PathBuf {
        self.under(format_args!("{pid}/task/{tid}"))
    }

    /// `rest` (relative) below the root, in two allocations where joining
    /// each component took five: a snapshot builds three paths for each of
    /// 100,000 threads.
    fn under(&self, rest: std::fmt::Arguments<'_>) -> PathBuf {
        self.root.join(rest.to_string())
    }

    /// Every process listed, by PID, in order.
    pub fn pids(&self) -> io::Result<Vec<i32>> {
        let names = self
            .kernel
            .read_dir(self.root)
            .map_err(|e| with_path(e, self.root))?;
        Ok(numbers(&names))
    }

    /// The threads of process `pid`, by ID, in order; `None` when the
    /// process has ended.
    pub fn threads(&self, pid: i32) -> io::Result<Option<Vec<i32>>> {
        let dir = self.under(format_args!("{pid}/task"));
        unless_gone(self.kernel.read_dir(&dir))
            .map(|names| names.map(|n| numbers(&n)))
            .map_err(|e| with_path(e, &dir))
    }

    /// The threads of the calling process, by ID, in order.
    pub fn own_threads(&self) -> io::Result<Vec<i32>> {
        let dir = self.root.join("self/task");
        let names = self.kernel.read_dir(&dir).map_err(|e| with_path(e, &dir))?;
        Ok(numbers(&names))
    }

    /// A file of /proc itself (`interrupts`, `sys/kernel/osrelease`), with
    /// the path in the error.
    pub fn file(&self, name: &str) -> io::Result<String> {
        let path = self.root.join(name);
        self.kernel.read(&path).map_err(|e| with_path(e, &path))
    }

    /// /proc/interrupts: each IRQ's count per CPU.
    pub fn interrupts(&self) -> io::Result<String> {
        self.file("interrupts")
    }

    /// /proc/softirqs: each softirq's count per CPU.
    pub fn softirqs(&self) -> io::Result<String> {
        self.file("softirqs")
    }

    /// /proc/stat: the time each CPU spent in each state.
    pub fn stat(&self) -> io::Result<String> {
        self.file("stat")
    }

    /// /proc/cmdline: the kernel's boot command line.
    pub fn cmdline(&self) -> io::Result<String> {
        self.file("cmdline")
    }

    /// /proc/cpuinfo.
    pub fn cpuinfo(&self) -> io::Result<String> {
        self.file("cpuinfo")
    }

    /// A file of the calling process (`maps`, `cgroup`), with the path in
    /// the error.
    pub fn own_file(&self, file: &str) -> io::Result<String> {
        let path = self.root.join("self").join(file);
        self.kernel.read(&path).map_err(|e| with_path(e, &path))
    }

    /// The link `file` of the calling process points to (`ns/pid`).
    pub fn own_link(&self, file: &str) -> io::Result<PathBuf> {
        let path = self.root.join("self").join(file);
        self.kernel
            .read_link(&path)
            .map_err(|e| with_path(e, &path))
    }

    /// Every thread of every process, as (PID, TID), in order; a process
    /// that ends while it is listed is passed over, and so is one whose
    /// threads cannot be listed (another user's, under hidepid).
    pub fn tasks(&self) -> io::Result<Vec<(i32, i32)>> {
        let mut out = Vec::new();
        for pid in self.pids()? {
            if let Ok(Some(tids)) = self.threads(pid) {
                out.extend(tids.into_iter().map(|tid| (pid, tid)));
            }
        }
        Ok(out)
    }

    /// A file of process `pid` (`stat`, `status`, `cgroup`, `ns/pid`…) as
    /// bytes; `None` when the process has ended, or the file reads empty
    /// (a task that is exiting).
    pub fn process_bytes(&self, pid: i32, file: &str) -> io::Result<Option<Vec<u8>>> {
        self.read_bytes(&self.under(format_args!("{pid}/{file}")))
    }

    /// [`Procfs::process_bytes`] as text (invalid UTF-8 becomes U+FFFD).
    pub fn process_file(&self, pid: i32, file: &str) -> io::Result<Option<String>> {
        Ok(self.process_bytes(pid, file)?.map(lossy))
    }

    /// A file of thread `tid` of process `pid` as bytes; `None` when the
    /// thread has ended, or the file reads empty (a thread that is exiting).
    pub fn thread_bytes(&self, pid: i32, tid: i32, file: &str) -> io::Result<Option<Vec<u8>>> {
        self.read_bytes(&self.under(format_args!("{pid}/task/{tid}/{file}")))
    }

    /// [`Procfs::thread_bytes`] as text (invalid UTF-8 becomes U+FFFD).
    pub fn thread_file(&self, pid: i32, tid: i32, file: &str) -> io::Result<Option<String>> {
        Ok(self.thread_bytes(pid, tid, file)?.map(lossy))
    }

    /// The link `file` of process `pid` points to (`ns/pid`); `None` when
    /// the process has ended.
    pub fn process_link(&self, pid: i32, file: &str) -> io::Result<Option<PathBuf>> {
        let path = self.process_dir(pid).join(file);
        unless_gone(self.kernel.read_link(&path)).map_err(|e| with_path(e, &path))
    }

    fn read_bytes(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        let bytes = unless_gone(self.kernel.read_bytes(path)).map_err(|e| with_path(e, path))?;
        // An exiting task shows empty files for a moment.
        Ok(bytes.filter(|b| !b.is_empty()))
    }
}

/// The numeric names of a /proc listing, in order (`self`, `irq`… left out).
fn numbers(names: &[String]) -> Vec<i32> {
    let mut ids: Vec<i32> = names
        .iter()
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeKernel;

    fn machine() -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file("/proc/12/stat", "12 (a) S 1 12 12 0 -1\n");
        k.add_dir("/proc/12/task/12");
        k.add_dir("/proc/12/task/14");
        k.set_file("/proc/12/task/14/comm", "worker\n");
        k.add_dir("/proc/3/task/3");
        k.set_file("/proc/self/stat", "12 (a) S 1 12 12 0 -1\n");
        k.add_dir("/proc/irq/5");
        k.set_file("/proc/uptime", "1.0 1.0\n");
        k
    }

    #[test]
    fn processes_and_threads_are_listed_in_order_without_the_other_entries() {
        let k = machine();
        let proc = Procfs::new(&k);
        assert_eq!(proc.pids().unwrap(), vec![3, 12]);
        assert_eq!(proc.threads(12).unwrap(), Some(vec![12, 14]));
        assert_eq!(proc.tasks().unwrap(), vec![(3, 3), (12, 12), (12, 14)]);
        assert_eq!(
            proc.thread_file(12, 14, "comm").unwrap().as_deref(),
            Some("worker\n")
        );
    }

    #[test]
    fn a_task_that_ended_or_is_ending_reads_as_none_and_other_failures_are_errors() {
        let k = machine();
        let proc = Procfs::new(&k);
        assert_eq!(proc.threads(99).unwrap(), None);
        assert_eq!(proc.process_file(99, "stat").unwrap(), None);
        k.set_file("/proc/3/stat", "");
        assert_eq!(proc.process_file(3, "stat").unwrap(), None);
        k.refuse_reads("/proc/12/stat", libc::ESRCH);
        assert_eq!(proc.process_file(12, "stat").unwrap(), None);
        k.refuse_reads("/proc/12/stat", libc::EACCES);
        let e = proc.process_file(12, "stat").unwrap_err();
        assert!(e.to_string().contains("/proc/12/stat"), "{e}");
    }

    #[test]
    fn a_proc_elsewhere_is_read_there() {
        let k = FakeKernel::new();
        k.add_dir("/host/proc/7/task/8");
        let proc = Procfs::at(&k, Path::new("/host/proc"));
        assert_eq!(proc.tasks().unwrap(), vec![(7, 8)]);
        assert_eq!(proc.thread_dir(7, 8), Path::new("/host/proc/7/task/8"));
    }
}
