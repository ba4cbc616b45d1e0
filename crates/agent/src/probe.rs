//! The optional low-duty latency probe: on one CPU the config names, a
//! SCHED_FIFO thread wakes from absolute CLOCK_MONOTONIC timers at 1 kHz for
//! a short burst every look (the method of `measure`'s timer probe), and each
//! wake-up's lateness goes into `cpushield_latency_seconds`. Between bursts
//! it sleeps: the CPU stays free for the real-time work.

use crate::{lock, Shared};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{clock::now_ns, gettid, Host, SchedParams};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the probe does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSettings {
    /// The CPU it measures.
    pub cpu: usize,
    /// The latency above which `--on-threshold` runs.
    pub limit: Duration,
    /// Its SCHED_FIFO priority.
    pub priority: u8,
    /// Wake-ups per burst (at 1 kHz).
    pub burst: u32,
    /// Time from one burst's start to the next.
    pub every: Duration,
}

const PERIOD_NS: u64 = 1_000_000;

/// Starts the probe thread; it stops when `stop` is set. A probe that
/// cannot be placed logs why and ends (the agent goes on).
pub fn spawn(
    host: &Host,
    settings: ProbeSettings,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    lock(&shared.metrics).enable_latency();
    let host = host.clone();
    std::thread::spawn(move || {
        let cpus = CpuSet::from_iter([settings.cpu]);
        let tid = gettid();
        // The probe's thread alone: the agent's other threads (its server,
        // its samplers) stay off the CPU it probes.
        let placed = cpushield_shield::placement::place_own_thread_from_anywhere(&host, tid, &cpus)
            .and_then(|()| {
                host.kernel().set_sched(
                    tid,
                    &SchedParams {
                        policy: libc::SCHED_FIFO as u32,
                        priority: settings.priority as u32,
                        ..SchedParams::default()
                    },
                )
            });
        if let Err(e) = placed {
            println!(
                "cpushield agent: the latency probe cannot run on CPU {} at SCHED_FIFO {} ({e}); no latency metric",
                settings.cpu, settings.priority
            );
            return;
        }
        while !stop.load(Ordering::SeqCst) {
            let start = now_ns();
            let mut next = start + PERIOD_NS;
            let mut worst = 0u64;
            for _ in 0..settings.burst {
                cpushield_rt::clock::sleep_until_ns(next, true);
                let late = now_ns().saturating_sub(next);
                worst = worst.max(late);
                lock(&shared.metrics).observe_latency(settings.cpu, late as f64 / 1e9);
                next += PERIOD_NS;
            }
            // The last burst decides: a crossing lasts until a burst stays
            // under the limit.
            let over = if worst > settings.limit.as_nanos() as u64 {
                worst
            } else {
                0
            };
            shared.latency_over.store(over, Ordering::SeqCst);
            let resume = start + settings.every.as_nanos() as u64;
            while now_ns() < resume && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    })
}
