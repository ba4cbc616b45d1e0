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

use crate::sched::{self, PlaceFn, Policy};
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
    pub fn start(cpus: &CpuSet, place: Option<PlaceFn>) -> Result<Self, PollerError> {
        let mut poller = Self {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        for cpu in cpus.iter() {
            let (ready_tx, ready_rx) = mpsc::channel();
            let stop = Arc::clone(&poller.stop);
            let place = place.clone();
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

/// Places the calling thread on `cpu` and drops it to SCHED_IDLE. Its nice
/// value is left alone: SCHED_IDLE's weight ignores it, and lowering it
/// would need privilege.
fn enter_poller_thread(cpu: usize, place: Option<PlaceFn>) -> io::Result<()> {
    let target = CpuSet::from_cpus([cpu]);
    match place {
        Some(place) => place.place(cpushield_kernel::gettid(), &target)?,
        None => sched::pin(0, &target)?,
    }
    crate::program::host()
        .kernel()
        .set_sched(0, &sched::sched_params(Policy::Idle { nice: 0 }))
}

/// Whether an idle CPU of this machine hands its time back to a hypervisor
/// (see [`halts_into_hypervisor`]). Then [`IdlePoller`] helps.
pub fn idle_exits_to_hypervisor() -> bool {
    let kernel = crate::program::host().kernel();
    let procfs = cpushield_kernel::Procfs::new(kernel);
    halts_into_hypervisor(
        runs_under_hypervisor(&procfs.cpuinfo().unwrap_or_default()),
        cpushield_kernel::idle_driver(kernel)
            .unwrap_or_default()
            .trim(),
        &procfs.cmdline().unwrap_or_default(),
    )
}

use cpushield_parse::cpuinfo::{halts_into_hypervisor, runs_under_hypervisor};

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::{Kernel, RealKernel};
    use std::path::Path;

    #[test]
    fn a_poller_runs_at_sched_idle_on_its_cpu_and_stops_on_drop() {
        let allowed = RealKernel.get_affinity(0).expect("own affinity");
        // CPU 0 is left to the machine's housekeeping: never spin there.
        let Some(cpu) = allowed.iter().last().filter(|&c| c != 0) else {
            eprintln!("skipped: needs an allowed CPU other than 0");
            return;
        };
        let poller = IdlePoller::start(&CpuSet::from_cpus([cpu]), None).expect("start");
        assert_eq!(poller.cpus(), 1);
        let name = format!("cpushield-poll{cpu}");
        let tasks = Path::new("/proc/self/task");
        let tid: i32 = RealKernel
            .read_dir(tasks)
            .expect("tasks")
            .into_iter()
            .find(|t| {
                RealKernel
                    .read(&tasks.join(t).join("comm"))
                    .is_ok_and(|c| c.trim() == name)
            })
            .expect("the polling thread exists")
            .parse()
            .expect("tid");
        let policy = RealKernel.get_sched(tid).expect("its policy").policy;
        assert_eq!(policy, libc::SCHED_IDLE as u32);
        drop(poller);
        assert!(
            !RealKernel.exists(&tasks.join(tid.to_string())),
            "the polling thread ended when the poller was dropped"
        );
    }
}
