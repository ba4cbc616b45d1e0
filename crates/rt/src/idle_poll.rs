//! Keeps CPUs out of the idle loop while a real-time task needs them.
//!
//! A virtual machine whose idle loop halts (no cpuidle driver, or one without a
//! polling state) hands an idle vCPU back to the host: the next timer wakeup
//! then waits until the host runs that vCPU again, which can take milliseconds.
//! On bare metal /dev/cpu_dma_latency = 0 avoids the equivalent (deep C-state
//! exits); in such a VM the only run-time remedy is to never go idle. An
//! [`IdlePoller`] runs one SCHED_IDLE spinning thread per CPU: it takes only
//! time nothing else wants, and any real-time or normal task preempts it at
//! once, so the CPU polls instead of halting (the run-time form of `idle=poll`,
//! limited to the chosen CPUs).

use crate::sched;
use cpushield_cpuset::CpuSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// The name of every polling thread starts with this (`cpushield-poll3`), so
/// a tracer can tell the poller's time from real work.
pub use cpushield_kernel::POLLER_THREAD_PREFIX;

/// Stack of a polling thread: it calls nothing deep.
const POLLER_STACK_BYTES: usize = 64 * 1024;

/// How a polling thread reaches its CPU when plain sched_setaffinity cannot
/// (a shield's cpuset fences the CPU off): given the thread ID and the CPU.
pub type Placer = fn(i32, &CpuSet) -> io::Result<()>;

/// Why the pollers could not start.
#[derive(Debug, thiserror::Error)]
#[error("could not keep CPU {cpu} polling ({source})")]
pub struct PollerError {
    /// The CPU whose poller failed.
    pub cpu: usize,
    /// What the kernel said.
    pub source: io::Error,
}

/// One SCHED_IDLE spinning thread per CPU, stopped and joined on drop.
pub struct IdlePoller {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl IdlePoller {
    /// Starts a poller on every CPU of `cpus`, placed by `place` (None: plain
    /// affinity), and returns once each one runs at SCHED_IDLE on its CPU. On
    /// an error the pollers already started are stopped.
    pub fn start(cpus: &CpuSet, place: Option<Placer>) -> Result<Self, PollerError> {
        let mut poller = Self {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        for cpu in cpus.iter() {
            let (ready_tx, ready_rx) = mpsc::channel();
            let stop = Arc::clone(&poller.stop);
            let handle = std::thread::Builder::new()
                .name(format!("{POLLER_THREAD_PREFIX}{cpu}"))
                .stack_size(POLLER_STACK_BYTES)
                .spawn(move || {
                    let entered = enter_poller_thread(cpu, place);
                    let ok = entered.is_ok();
                    let _ = ready_tx.send(entered);
                    if ok {
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    }
                })
                .map_err(|source| PollerError { cpu, source })?;
            poller.threads.push(handle);
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(source)) => return Err(PollerError { cpu, source }),
                Err(_) => {
                    return Err(PollerError {
                        cpu,
                        source: io::Error::other("the polling thread ended before it started"),
                    })
                }
            }
        }
        Ok(poller)
    }

    /// How many CPUs are kept polling.
    pub fn cpus(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for IdlePoller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

/// Places the calling thread on `cpu` and drops it to SCHED_IDLE.
fn enter_poller_thread(cpu: usize, place: Option<Placer>) -> io::Result<()> {
    let target = CpuSet::from_cpus([cpu]);
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) as i32 };
    match place {
        Some(place) => place(tid, &target)?,
        None => sched::pin(0, &target)?,
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 is us.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether an idle CPU of this machine hands its time back to a hypervisor
/// (see [`halts_into_hypervisor`]). Then [`IdlePoller`] helps.
pub fn idle_exits_to_hypervisor() -> bool {
    use cpushield_kernel::{Kernel, RealKernel};
    let read = |p: &str| RealKernel.read(std::path::Path::new(p)).unwrap_or_default();
    halts_into_hypervisor(
        runs_under_hypervisor(&read("/proc/cpuinfo")),
        read("/sys/devices/system/cpu/cpuidle/current_driver").trim(),
        &read("/proc/cmdline"),
    )
}

use cpushield_parse::cpuinfo::{halts_into_hypervisor, runs_under_hypervisor};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poller_runs_at_sched_idle_on_its_cpu_and_stops_on_drop() {
        use cpushield_kernel::{Kernel, RealKernel};
        let allowed = RealKernel.get_affinity(0).expect("own affinity");
        // CPU 0 is left to the machine's housekeeping: never spin there.
        let Some(cpu) = allowed.iter().last().filter(|&c| c != 0) else {
            eprintln!("skipped: needs an allowed CPU other than 0");
            return;
        };
        let poller = IdlePoller::start(&CpuSet::from_cpus([cpu]), None).expect("start");
        assert_eq!(poller.cpus(), 1);
        let name = format!("cpushield-poll{cpu}");
        let task_dir = std::fs::read_dir("/proc/self/task")
            .expect("tasks")
            .filter_map(|e| e.ok())
            .find(|e| {
                std::fs::read_to_string(e.path().join("comm"))
                    .map(|c| c.trim() == name)
                    .unwrap_or(false)
            })
            .expect("the polling thread exists");
        let tid: i32 = task_dir.file_name().to_string_lossy().parse().expect("tid");
        // SAFETY: sched_getscheduler takes a thread ID and touches no memory.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        assert_eq!(policy, libc::SCHED_IDLE);
        drop(poller);
        assert!(
            !task_dir.path().exists(),
            "the polling thread ended when the poller was dropped"
        );
    }
}
