//! The spike hook: samples above a threshold, passed from the measuring threads
//! to the caller without slowing them down. A measuring thread pushes into a
//! fixed-size lock-free ring (no allocation, no system call, never blocks; when
//! full the spike is counted as dropped); the control thread drains the ring
//! every tick and forwards each spike to the caller's channel.

use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// A sample above the spike threshold: the tracer's own type
/// ([`cpushield_trace::Spike`]), so a spike goes from the probe to the trace
/// unchanged. Times are CLOCK_MONOTONIC nanoseconds, the clock tracers can be
/// set to (`trace_clock` = mono), for correlation. The probe leaves `seq` at
/// 0; whoever forwards spikes to a trace numbers them.
pub use cpushield_trace::Spike;

/// Where to send spikes, and above what.
#[derive(Debug, Clone)]
pub struct SpikeTap {
    /// Samples strictly above this latency are spikes.
    pub threshold: Duration,
    /// Receives each spike, from the control thread, within one control tick.
    pub sender: Sender<Spike>,
}

/// Told by the measuring threads themselves what a tracer needs to follow
/// them: which thread measures which CPU, and when each determinism run ran.
/// Called on the measuring thread, never inside a timed stretch.
pub trait ProbeObserver: Send + Sync + std::fmt::Debug {
    /// A measuring thread is on its CPU and about to take its first sample.
    /// `tid` is the thread's ID in the caller's PID namespace; a tracer that
    /// sees global IDs learns the mapping from a write made on this thread.
    fn thread_started(&self, cpu: usize, tid: i32);
    /// A determinism run finished: it ran from `start_ns` to `end_ns`
    /// (CLOCK_MONOTONIC). `index` counts from 0 per CPU.
    fn run_finished(&self, _cpu: usize, _tid: i32, _index: u32, _start_ns: u64, _end_ns: u64) {}
}

/// Capacity of the ring between measuring and control threads.
pub const RING_CAPACITY: usize = 4096;

/// The ring between the measuring threads and the control thread.
pub(crate) struct SpikeRing {
    threshold_ns: u64,
    queue: ArrayQueue<Spike>,
    dropped: AtomicU64,
}

impl SpikeRing {
    /// A ring for spikes above `threshold_ns`.
    pub(crate) fn new(threshold_ns: u64) -> Self {
        Self {
            threshold_ns,
            queue: ArrayQueue::new(RING_CAPACITY),
            dropped: AtomicU64::new(0),
        }
    }

    /// Called by a measuring thread for every sample: cheap when below threshold.
    #[inline]
    pub(crate) fn offer(&self, spike: Spike) {
        if spike.latency_ns() > self.threshold_ns && self.queue.push(spike).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Called by the control thread: forwards every queued spike.
    pub(crate) fn drain_to(&self, sender: &Sender<Spike>) {
        while let Some(spike) = self.queue.pop() {
            // a receiver that went away just stops listening
            let _ = sender.send(spike);
        }
    }

    /// Spikes lost because the ring was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spike(latency_ns: u64) -> Spike {
        Spike {
            seq: 0,
            cpu: 1,
            tid: 1,
            intended_ns: 1000,
            actual_ns: 1000 + latency_ns,
        }
    }

    #[test]
    fn only_samples_above_the_threshold_are_forwarded() {
        let ring = SpikeRing::new(100);
        let (tx, rx) = std::sync::mpsc::channel();
        ring.offer(spike(100));
        ring.offer(spike(101));
        ring.offer(spike(5));
        ring.drain_to(&tx);
        let got: Vec<u64> = rx.try_iter().map(|s| s.latency_ns()).collect();
        assert_eq!(got, vec![101]);
    }

    #[test]
    fn a_full_ring_counts_dropped_spikes_instead_of_blocking() {
        let ring = SpikeRing::new(0);
        for _ in 0..RING_CAPACITY + 5 {
            ring.offer(spike(1));
        }
        assert_eq!(ring.dropped(), 5);
        let (tx, rx) = std::sync::mpsc::channel();
        ring.drain_to(&tx);
        assert_eq!(rx.try_iter().count(), RING_CAPACITY);
    }
}
