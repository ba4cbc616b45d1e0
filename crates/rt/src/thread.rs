//! Spawning a real-time thread on chosen CPUs with a policy and priority, and
//! optionally a CPU reservation (Sherer §2-3: `pthread_attr_setcpu_np` and
//! `pthread_attr_setreserve_np`).
//!
//! ```no_run
//! use cpushield_cpuset::CpuSet;
//! use cpushield_rt::{sched::Policy, thread::RtThread};
//!
//! let handle = RtThread::on(CpuSet::from_cpus([1]))
//!     .policy(Policy::Fifo(80))
//!     .reserve(true)
//!     .spawn(|| { /* periodic work */ })
//!     .expect("placed on CPU 1");
//! handle.join().unwrap();
//! ```
//!
//! The thread places itself before running the closure; `spawn` returns only
//! once that worked, or returns why it did not. On shielded CPUs (as root)
//! the thread alone enters the shield's cpuset, as Sherer's model wants: the
//! program's other threads stay on the housekeeping CPUs (see
//! [`crate::run::AlonePlacer`]; on cgroup v2 the process must be in the root
//! cgroup, else start it with `cpushield run --cpus 1 -- app`).

use crate::reserve::{Holder, Reservation, ReserveDir, ReserveError};
use crate::run::place_thread_alone;
use crate::sched::{self, PlaceFn, Policy};
use cpushield_cpuset::CpuSet;
use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Why a real-time thread was not started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// Bad parameters (message says which and what is valid).
    #[error("{0}")]
    Invalid(String),
    /// Another process holds (or the lock file refuses) the CPUs.
    #[error(transparent)]
    Reserve(#[from] ReserveError),
    /// Setting the affinity or the policy failed (message names the remedy).
    #[error("{message}")]
    Placement {
        /// One line with the cause and the remedy.
        message: String,
        /// The system call's error.
        source: io::Error,
    },
    /// The thread could not be created.
    #[error("cannot create a thread: {0}")]
    Spawn(io::Error),
}

/// A builder for a thread placed on CPUs with a scheduling policy.
#[derive(Debug, Clone)]
pub struct RtThread {
    cpus: CpuSet,
    policy: Policy,
    reserve: bool,
    reserve_siblings: bool,
    name: Option<String>,
    stack_size: Option<usize>,
    prefault_bytes: usize,
    placer: PlaceFn,
}

impl RtThread {
    /// A thread to run on `cpus`, SCHED_OTHER until [`policy`](Self::policy) says otherwise.
    pub fn on(cpus: CpuSet) -> Self {
        Self {
            cpus,
            policy: Policy::Other { nice: 0 },
            reserve: false,
            reserve_siblings: false,
            name: None,
            stack_size: None,
            prefault_bytes: 0,
            placer: PlaceFn::new(place_thread_alone),
        }
    }

    /// How the thread places itself (default: into the shield when its CPUs
    /// are shielded, else by affinity; [`sched::pin`] for affinity alone).
    pub fn placer(
        mut self,
        placer: impl Fn(i32, &CpuSet) -> io::Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.placer = PlaceFn::new(placer);
        self
    }

    /// The scheduling policy and priority.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Reserve the CPUs for as long as the thread runs (see [`crate::reserve`]).
    pub fn reserve(mut self, reserve: bool) -> Self {
        self.reserve = reserve;
        self
    }

    /// With [`reserve`](Self::reserve): reserve the CPUs' SMT sibling threads
    /// too (Sherer §6), as `cpushield run --reserve --smt-siblings` does.
    pub fn reserve_siblings(mut self, siblings: bool) -> Self {
        self.reserve_siblings = siblings;
        self
    }

    /// The thread's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The stack size in bytes.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Touch this many bytes of stack before the closure runs, so it takes no
    /// page faults there (pair with [`sched::lock_memory`]).
    pub fn prefault_stack(mut self, bytes: usize) -> Self {
        self.prefault_bytes = bytes;
        self
    }

    /// Starts the thread, places it, and runs `f` there. Refuses CPUs that
    /// another process has reserved.
    pub fn spawn<F, T>(self, f: F) -> Result<RtJoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_in(&crate::program::reserves(), f)
    }

    /// [`spawn`](Self::spawn) with reservations kept in `dir`.
    pub fn spawn_in<F, T>(self, dir: &ReserveDir, f: F) -> Result<RtJoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.cpus.is_empty() {
            return Err(SpawnError::Invalid(
                "no CPU given: name at least one, e.g. CPU 1".into(),
            ));
        }
        self.policy.validate().map_err(SpawnError::Invalid)?;
        let reservation: Option<Reservation> = if self.reserve {
            let cpus = if self.reserve_siblings {
                with_siblings(crate::program::host().kernel(), &self.cpus)
            } else {
                self.cpus.clone()
            };
            Some(dir.reserve(&cpus, &Holder::current())?)
        } else {
            dir.check(&self.cpus, std::process::id() as i32)?;
            None
        };
        let mut builder = std::thread::Builder::new();
        if let Some(name) = &self.name {
            builder = builder.name(name.clone());
        }
        if let Some(size) = self.stack_size {
            builder = builder.stack_size(size);
        }
        let (placed_tx, placed_rx) = mpsc::sync_channel::<Result<i32, SpawnError>>(1);
        let (cpus, policy, prefault) = (self.cpus, self.policy, self.prefault_bytes);
        let placer = self.placer;
        let inner = builder
            .spawn(move || {
                let placed = place_current(placer, &cpus, policy);
                let ok = placed.is_ok();
                let _ = placed_tx.send(placed);
                if !ok {
                    return None;
                }
                if prefault > 0 {
                    sched::prefault_stack(prefault);
                }
                let out = f();
                drop(reservation);
                Some(out)
            })
            .map_err(SpawnError::Spawn)?;
        match placed_rx.recv() {
            Ok(Ok(tid)) => Ok(RtJoinHandle { inner, tid }),
            Ok(Err(e)) => {
                let _ = inner.join();
                Err(e)
            }
            Err(_) => Err(SpawnError::Spawn(io::Error::other(
                "the thread ended before reporting its placement",
            ))),
        }
    }
}

/// `cpus` and their SMT siblings (a CPU whose topology cannot be read counts alone).
pub(crate) fn with_siblings(kernel: &dyn cpushield_kernel::Kernel, cpus: &CpuSet) -> CpuSet {
    cpus.iter().fold(cpus.clone(), |all, cpu| {
        all.union(&cpushield_kernel::thread_siblings(kernel, cpu).unwrap_or_default())
    })
}

/// Places the calling thread on `cpus` and sets its policy; returns its TID.
fn place_current(placer: PlaceFn, cpus: &CpuSet, policy: Policy) -> Result<i32, SpawnError> {
    placer
        .place(0, cpus)
        .map_err(|source| SpawnError::Placement {
            message: sched::describe_pin_error(cpus, &source),
            source,
        })?;
    sched::set_policy(0, policy).map_err(|source| SpawnError::Placement {
        message: sched::describe_policy_error(&policy, &source),
        source,
    })?;
    // SAFETY: gettid has no preconditions.
    Ok(unsafe { libc::gettid() })
}

/// A running real-time thread.
#[derive(Debug)]
pub struct RtJoinHandle<T> {
    inner: JoinHandle<Option<T>>,
    tid: i32,
}

impl<T> RtJoinHandle<T> {
    /// The thread's kernel TID (for /proc, chrt, taskset).
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Waits for the thread and returns what its closure returned.
    pub fn join(self) -> std::thread::Result<T> {
        // A placed thread always runs its closure, so the Option is Some
        // unless the closure panicked (which join reports as Err).
        self.inner
            .join()
            .map(|out| out.expect("a placed thread runs its closure"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu1() -> CpuSet {
        CpuSet::from_cpus([1])
    }

    static PLACED_TID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

    fn record_placed_thread(tid: i32, _cpus: &CpuSet) -> io::Result<()> {
        assert_eq!(tid, 0, "a thread places itself (TID 0: the caller)");
        // SAFETY: gettid has no preconditions.
        PLACED_TID.store(
            unsafe { libc::gettid() },
            std::sync::atomic::Ordering::SeqCst,
        );
        Ok(())
    }

    #[test]
    fn only_the_spawned_thread_is_placed_not_its_spawner() {
        let dir = tempfile::tempdir().unwrap();
        let h = RtThread::on(cpu1())
            .placer(record_placed_thread)
            .spawn_in(&ReserveDir::new(dir.path()), || ())
            .unwrap();
        let placed = PLACED_TID.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(placed, h.tid(), "the placer ran on the new thread");
        // SAFETY: gettid has no preconditions.
        assert_ne!(placed, unsafe { libc::gettid() }, "not on the spawner");
        h.join().unwrap();
    }

    #[test]
    fn a_spawned_thread_runs_on_its_cpu_and_returns_its_value() {
        let dir = tempfile::tempdir().unwrap();
        let h = RtThread::on(cpu1())
            .placer(sched::pin)
            .name("rt-test")
            .prefault_stack(64 * 1024)
            .spawn_in(&ReserveDir::new(dir.path()), cpushield_kernel::current_cpu)
            .unwrap();
        assert!(h.tid() > 0);
        assert_eq!(h.join().unwrap(), 1);
    }

    #[test]
    fn a_reserving_thread_holds_its_cpu_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let h = RtThread::on(cpu1())
            .placer(sched::pin)
            .reserve(true)
            .spawn_in(&rd, move || go_rx.recv().unwrap())
            .unwrap();
        let held = rd.holder(1).unwrap().expect("held while the thread runs");
        assert_eq!(held.pid, std::process::id() as i32);
        // A second reservation is refused even from the same process.
        let err = RtThread::on(cpu1())
            .placer(sched::pin)
            .reserve(true)
            .spawn_in(&rd, || ())
            .unwrap_err();
        assert!(
            err.to_string().contains("CPU 1 is reserved by PID"),
            "{err}"
        );
        go_tx.send(()).unwrap();
        h.join().unwrap();
        assert_eq!(rd.holder(1).unwrap(), None, "released when the thread ends");
    }

    #[test]
    fn siblings_of_the_reserved_cpus_are_read_from_the_topology() {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file(
            "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
            "1,3\n",
        );
        assert_eq!(with_siblings(&k, &cpu1()), CpuSet::from_cpus([1, 3]));
        assert_eq!(
            with_siblings(&k, &CpuSet::from_cpus([2])),
            CpuSet::from_cpus([2]),
            "no topology: the CPU alone"
        );
    }

    #[test]
    fn invalid_parameters_are_refused_before_any_thread_starts() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        let err = RtThread::on(CpuSet::new())
            .placer(sched::pin)
            .spawn_in(&rd, || ())
            .unwrap_err();
        assert!(matches!(err, SpawnError::Invalid(_)));
        let err = RtThread::on(cpu1())
            .placer(sched::pin)
            .policy(Policy::Fifo(0))
            .spawn_in(&rd, || ())
            .unwrap_err();
        assert!(
            err.to_string().contains("priority 0 is out of range"),
            "{err}"
        );
    }

    #[test]
    fn an_impossible_cpu_is_a_placement_error_naming_the_cpu() {
        let dir = tempfile::tempdir().unwrap();
        let err = RtThread::on(CpuSet::from_cpus([4000]))
            .placer(sched::pin)
            .spawn_in(&ReserveDir::new(dir.path()), || ())
            .unwrap_err();
        assert!(matches!(err, SpawnError::Placement { .. }), "{err}");
        assert!(err.to_string().contains("CPUs 4000"), "{err}");
    }
}
