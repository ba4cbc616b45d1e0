//! `measure latency --source timerlat`: the kernel measures. Its timerlat
//! tracer runs a `timerlat/N` thread per measured CPU (SCHED_FIFO 95) woken by
//! a periodic hrtimer, and records for each wakeup how late the timer's
//! interrupt handler ran (IRQ latency) and how late the thread ran (thread
//! latency, what the timer probe measures from user space). The trace session
//! (`cpushield-trace`, a private instance) reads the records; here they are
//! turned into the same per-CPU result as every other source: the thread
//! latency is the `latency` distribution, the IRQ latency a second one.

use crate::recorder::Recorder;
use crate::spike::Spike;
use cpushield_trace::event::TimerlatContext;
use cpushield_trace::TimerlatRecord;

/// One CPU's records gathered into distributions.
pub(crate) struct TimerlatCpu {
    /// Thread latency.
    pub(crate) thread: Recorder,
    /// IRQ latency.
    pub(crate) irq: Recorder,
    /// Activations whose thread record never came (a gap in the numbers).
    pub(crate) missed: u64,
    /// The last thread record's activation number.
    last_seq: Option<u64>,
    /// The timerlat thread's (global) ID, from its records.
    pub(crate) tid: Option<i32>,
}

impl TimerlatCpu {
    /// Empty recorders, faulted in.
    pub(crate) fn new() -> Self {
        Self {
            thread: Recorder::new(),
            irq: Recorder::new(),
            missed: 0,
            last_seq: None,
            tid: None,
        }
    }

    /// Takes one record of this CPU, `offset_ns` into the run. Returns the
    /// wakeup as a spike candidate for a thread record (due at the thread's
    /// record time minus its latency: the timer's expiry).
    pub(crate) fn take(&mut self, r: &TimerlatRecord, offset_ns: u64) -> Option<Spike> {
        match r.context {
            TimerlatContext::Irq => {
                self.irq.record(r.latency_ns, offset_ns, self.irq.count());
                None
            }
            TimerlatContext::Thread => {
                if let Some(last) = self.last_seq {
                    self.missed += r.seq.saturating_sub(last + 1);
                }
                self.last_seq = Some(r.seq);
                self.tid = Some(r.pid);
                self.thread
                    .record(r.latency_ns, offset_ns, self.thread.count());
                Some(Spike {
                    seq: 0,
                    cpu: r.cpu,
                    tid: r.pid,
                    intended_ns: r.ts_ns.saturating_sub(r.latency_ns),
                    actual_ns: r.ts_ns,
                })
            }
            // A user thread's return to the kernel: not in the kernel-thread mode run here.
            TimerlatContext::User => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, context: TimerlatContext, latency_ns: u64, ts_ns: u64) -> TimerlatRecord {
        TimerlatRecord {
            cpu: 3,
            seq,
            context,
            latency_ns,
            ts_ns,
            pid: 812,
        }
    }

    #[test]
    fn thread_and_irq_latency_go_to_their_own_distributions() {
        let mut c = TimerlatCpu::new();
        assert!(c
            .take(&rec(1, TimerlatContext::Irq, 1_500, 10_001_500), 1_500)
            .is_none());
        let s = c
            .take(&rec(1, TimerlatContext::Thread, 9_000, 10_009_000), 9_000)
            .unwrap();
        assert_eq!(
            (s.intended_ns, s.actual_ns, s.tid, s.cpu),
            (10_000_000, 10_009_000, 812, 3)
        );
        assert_eq!(s.latency_ns(), 9_000);
        c.take(&rec(2, TimerlatContext::Irq, 700, 11_000_700), 1_000_700);
        c.take(
            &rec(2, TimerlatContext::Thread, 4_000, 11_004_000),
            1_004_000,
        );
        let (thread, irq) = (c.thread.finish(), c.irq.finish());
        assert_eq!((thread.summary.count, thread.summary.max_ns), (2, 9_000));
        assert_eq!((irq.summary.count, irq.summary.max_ns), (2, 1_500));
        assert_eq!((c.missed, c.tid), (0, Some(812)));
    }

    #[test]
    fn a_gap_in_the_activation_numbers_counts_as_missed() {
        let mut c = TimerlatCpu::new();
        c.take(&rec(7, TimerlatContext::Thread, 1_000, 5_000), 0);
        c.take(&rec(10, TimerlatContext::Thread, 1_000, 9_000), 4_000);
        assert_eq!(c.missed, 2);
        assert_eq!(c.thread.count(), 2);
    }
}
