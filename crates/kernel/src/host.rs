//! The machine a command works on, built once where the command starts.
//!
//! A [`Host`] holds the kernel door, the shield's state store and the clock.
//! The command line builds the real one (`RealKernel`, the state directory,
//! CLOCK_MONOTONIC); a test builds one on a [`crate::FakeKernel`], a
//! [`crate::store::MemoryStore`] and, where time matters, a [`FakeClock`].
//! Library code takes a `&Host` and never makes its own: then which machine
//! a function touches is decided in one place, and every library function
//! runs whole on the fake kernel.

use crate::store::StateStore;
use crate::Kernel;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A source of CLOCK_MONOTONIC time in nanoseconds (the clock trace
/// timestamps are in).
pub trait Clock: Send + Sync {
    /// The current time, ns.
    fn now_ns(&self) -> u64;

    /// Lets `d` pass on this clock: the system's sleeps, a fake one moves
    /// itself forward, so that a wait with a deadline on it ends at once.
    fn sleep(&self, d: std::time::Duration) {
        std::thread::sleep(d);
    }
}

/// The system's CLOCK_MONOTONIC.
#[derive(Debug, Default, Clone, Copy)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        crate::clock::now_ns()
    }
}

/// A clock a test moves by hand.
#[derive(Debug, Default)]
pub struct FakeClock {
    now: AtomicU64,
}

impl FakeClock {
    /// A clock standing at `now_ns`.
    pub fn at(now_ns: u64) -> Self {
        Self {
            now: AtomicU64::new(now_ns),
        }
    }

    /// Moves the clock forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.now.fetch_add(ns, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sleep(&self, d: std::time::Duration) {
        self.advance(d.as_nanos() as u64);
    }
}

/// The kernel door, the state store and the clock of one machine. Cheap to
/// clone (three shared pointers), so a thread or a session that outlives
/// the call keeps its own clone.
#[derive(Clone)]
pub struct Host {
    kernel: Arc<dyn Kernel>,
    store: Arc<dyn StateStore>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("store", &self.store.dir())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// The machine behind `kernel`, keeping the shield's state in `store`,
    /// timed by CLOCK_MONOTONIC.
    pub fn new(kernel: Arc<dyn Kernel>, store: Arc<dyn StateStore>) -> Self {
        Self {
            kernel,
            store,
            clock: Arc::new(MonotonicClock),
        }
    }

    /// The fake machine `kernel` with its state in `store`: the host shares
    /// both with the test, which keeps setting files and reading back
    /// through its own handles.
    pub fn fake(kernel: &crate::FakeKernel, store: &crate::store::MemoryStore) -> Self {
        Self::new(Arc::new(kernel.handle()), Arc::new(store.handle()))
    }

    /// The same machine timed by `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same machine keeping its state in `store` (a [`crate::store::Locked`]
    /// store for a command of several steps under one lock).
    pub fn with_store(&self, store: Arc<dyn StateStore>) -> Self {
        Self {
            kernel: Arc::clone(&self.kernel),
            store,
            clock: Arc::clone(&self.clock),
        }
    }

    /// The kernel door.
    pub fn kernel(&self) -> &dyn Kernel {
        self.kernel.as_ref()
    }

    /// The kernel door, shared, for what keeps it beyond the call (a trace
    /// session, a thread).
    pub fn shared_kernel(&self) -> Arc<dyn Kernel> {
        Arc::clone(&self.kernel)
    }

    /// Where the shield keeps the state it restores.
    pub fn store(&self) -> &dyn StateStore {
        self.store.as_ref()
    }

    /// The state store, shared.
    pub fn shared_store(&self) -> Arc<dyn StateStore> {
        Arc::clone(&self.store)
    }

    /// The clock.
    pub fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// The current CLOCK_MONOTONIC time of this machine's clock, ns.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
}

/// A shared kernel is a kernel: `&Arc<FakeKernel>` passes where a
/// `&dyn Kernel` is taken, so a test keeps its handle on the fake it gave a
/// [`Host`].
impl<K: Kernel + ?Sized> Kernel for Arc<K> {
    fn read_bytes(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        (**self).read_bytes(path)
    }
    fn read(&self, path: &std::path::Path) -> std::io::Result<String> {
        (**self).read(path)
    }
    fn write(&self, path: &std::path::Path, data: &str) -> std::io::Result<()> {
        (**self).write(path, data)
    }
    fn open_for_writes<'a>(
        &'a self,
        path: &std::path::Path,
    ) -> std::io::Result<Box<dyn crate::KernelWriter + 'a>> {
        (**self).open_for_writes(path)
    }
    fn read_dir(&self, path: &std::path::Path) -> std::io::Result<Vec<String>> {
        (**self).read_dir(path)
    }
    fn exists(&self, path: &std::path::Path) -> bool {
        (**self).exists(path)
    }
    fn read_link(&self, path: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
        (**self).read_link(path)
    }
    fn mkdir(&self, path: &std::path::Path) -> std::io::Result<()> {
        (**self).mkdir(path)
    }
    fn rmdir(&self, path: &std::path::Path) -> std::io::Result<()> {
        (**self).rmdir(path)
    }
    fn remove_tree(&self, path: &std::path::Path) -> std::io::Result<()> {
        (**self).remove_tree(path)
    }
    fn get_affinity(&self, tid: i32) -> std::io::Result<cpushield_cpuset::CpuSet> {
        (**self).get_affinity(tid)
    }
    fn set_affinity(&self, tid: i32, cpus: &cpushield_cpuset::CpuSet) -> std::io::Result<()> {
        (**self).set_affinity(tid, cpus)
    }
    fn set_xattr(&self, path: &std::path::Path, name: &str, value: &[u8]) -> std::io::Result<()> {
        (**self).set_xattr(path, name, value)
    }
    fn get_xattr(&self, path: &std::path::Path, name: &str) -> std::io::Result<Vec<u8>> {
        (**self).get_xattr(path, name)
    }
    fn get_sched(&self, tid: i32) -> std::io::Result<crate::SchedParams> {
        (**self).get_sched(tid)
    }
    fn set_sched(&self, tid: i32, params: &crate::SchedParams) -> std::io::Result<()> {
        (**self).set_sched(tid, params)
    }
    fn mount(&self, fstype: &str, target: &std::path::Path) -> std::io::Result<()> {
        (**self).mount(fstype, target)
    }
    fn unmount(&self, target: &std::path::Path) -> std::io::Result<()> {
        (**self).unmount(target)
    }
    fn lock_file(
        &self,
        path: &std::path::Path,
        kind: crate::LockKind,
    ) -> std::io::Result<Box<dyn crate::FileLock>> {
        (**self).lock_file(path, kind)
    }
    fn put_file(&self, path: &std::path::Path, text: &str) -> std::io::Result<()> {
        (**self).put_file(path, text)
    }
    fn remove_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        (**self).remove_file(path)
    }
    fn open_trace_pipe(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<Box<dyn crate::TracePipe>> {
        (**self).open_trace_pipe(path)
    }
    fn open_trace_marker(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<Box<dyn crate::TraceMarker>> {
        (**self).open_trace_marker(path)
    }
    fn kernel_log(&self) -> std::io::Result<String> {
        (**self).kernel_log()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use crate::FakeKernel;
    use std::path::Path;

    #[test]
    fn a_host_on_the_fake_kernel_reads_what_the_test_wrote_and_tells_its_clock() {
        let fake = FakeKernel::new();
        let store = MemoryStore::new();
        let clock = Arc::new(FakeClock::at(1_000));
        let host = Host::fake(&fake, &store).with_clock(clock.clone());
        host.store().write_atomically("state.json", b"{}").unwrap();
        assert_eq!(store.copy("state.json").unwrap(), b"{}");
        fake.set_file("/proc/sys/kernel/x", "1\n");
        assert_eq!(
            host.kernel().read(Path::new("/proc/sys/kernel/x")).unwrap(),
            "1\n"
        );
        clock.advance(500);
        assert_eq!(host.now_ns(), 1_500);
        assert_eq!(host.store().dir(), Path::new("/memory/cpushield"));
        let clone = host.clone();
        clone
            .kernel()
            .write(Path::new("/proc/sys/kernel/x"), "2")
            .unwrap();
        assert_eq!(fake.read(Path::new("/proc/sys/kernel/x")).unwrap(), "2");
    }
}
