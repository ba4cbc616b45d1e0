//! Wakeups of a thread the session did not start, told from the kernel's own
//! record: cyclictest's measuring thread, or the kernel's `timerlat/N`
//! thread of `rtla timerlat`. Such a thread arms an hrtimer for its next
//! wakeup (`hrtimer_start`, recorded while it is current, with the expiry:
//! the intended time) and the scheduler switches it in when it runs
//! (`sched_switch`, kept for real-time tasks): the switch-in minus the expiry
//! is how late it was. A wakeup later than the threshold becomes a [`Spike`]
//! and is explained by the same rules as the probe's own samples, so an
//! anchor's figures can be split into time caused inside the guest and time
//! outside it, as the verdict's are.

use crate::attribute::Spike;
use crate::event::{Event, EventKind};
use serde::Serialize;
use std::collections::HashMap;

/// The event that tells when a watched thread meant to wake.
pub const WATCH_EVENT: &str = "timer/hrtimer_start";

/// The hrtimer callbacks of a thread sleeping until a time: a task in
/// `clock_nanosleep` (cyclictest) and the timerlat tracer's thread.
pub const WAKEUP_CALLBACKS: &[&str] = &["hrtimer_wakeup", "timerlat_irq"];

/// Sequence numbers of a watched thread's spikes start here (a probe's own
/// spikes count from 0, determinism windows from 2^48).
pub const WATCH_SEQ_BASE: u64 = 1 << 40;

/// Which threads to watch, and from how late a wakeup is explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeupWatch {
    /// Threads whose name starts with one of these (`cyclictest`, `timerlat/`).
    pub comm_prefixes: Vec<String>,
    /// Wakeups later than this are explained, ns.
    pub threshold_ns: u64,
}

/// What the trace saw of the watched threads' wakeups.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WatchedWakeups {
    /// Wakeups seen (an expiry, then the thread switched in).
    pub wakeups: u64,
    /// The latest of them: switch-in minus expiry, ns.
    pub max_ns: u64,
    /// Of them, later than the threshold (each explained as a spike).
    pub above: u64,
    /// The threads seen, `name (tid)`.
    pub threads: Vec<String>,
}

/// Follows the watched threads through the events of the traced CPUs, each
/// CPU's in time order.
#[derive(Debug)]
pub struct WakeupTracker {
    watch: WakeupWatch,
    /// (CPU, thread) -> the expiry of the timer it armed last.
    armed: HashMap<(usize, i32), u64>,
    seen: WatchedWakeups,
}

impl WakeupTracker {
    /// A tracker for `watch`.
    pub fn new(watch: WakeupWatch) -> Self {
        Self {
            watch,
            armed: HashMap::new(),
            seen: WatchedWakeups::default(),
        }
    }

    fn watched(&self, comm: &str) -> bool {
        self.watch
            .comm_prefixes
            .iter()
            .any(|p| comm.starts_with(p.as_str()))
    }

    /// Takes one event; returns the spike of a watched thread's wakeup later
    /// than the threshold, when this event is its switch-in.
    pub fn see(&mut self, e: &Event) -> Option<Spike> {
        match &e.kind {
            EventKind::HrtimerStart {
                function,
                expires_ns,
            } if WAKEUP_CALLBACKS.contains(&function.as_str()) && self.watched(&e.comm) => {
                self.armed.insert((e.cpu, e.pid), *expires_ns);
                None
            }
            EventKind::Switch {
                next_pid,
                next_comm,
                next_prio,
                ..
            } if *next_prio < 100 => {
                let intended = self.armed.remove(&(e.cpu, *next_pid))?;
                let late = e.ts_ns.saturating_sub(intended);
                self.seen.wakeups += 1;
                self.seen.max_ns = self.seen.max_ns.max(late);
                let name = format!("{next_comm} ({next_pid})");
                if !self.seen.threads.contains(&name) {
                    self.seen.threads.push(name);
                }
                if late <= self.watch.threshold_ns {
                    return None;
                }
                let seq = WATCH_SEQ_BASE + self.seen.above;
                self.seen.above += 1;
                Some(Spike {
                    seq,
                    cpu: e.cpu,
                    tid: *next_pid,
                    intended_ns: intended,
                    actual_ns: e.ts_ns.max(intended),
                })
            }
            _ => None,
        }
    }

    /// What was seen so far.
    pub fn seen(&self) -> &WatchedWakeups {
        &self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_line;

    fn tracker() -> WakeupTracker {
        WakeupTracker::new(WakeupWatch {
            comm_prefixes: vec!["cyclictest".into(), "timerlat/".into()],
            threshold_ns: 100_000,
        })
    }

    fn feed(t: &mut WakeupTracker, text: &str) -> Vec<Spike> {
        text.lines()
            .filter_map(parse_line)
            .filter_map(|e| t.see(&e))
            .collect()
    }

    #[test]
    fn a_watched_thread_switched_in_late_after_its_timer_expired_is_a_spike_from_the_expiry() {
        let mut t = tracker();
        let spikes = feed(
            &mut t,
            "\
      cyclictest-812     [001] d..1.   10.000100: hrtimer_start: hrtimer=00000000aa function=hrtimer_wakeup expires=10000500000 softexpires=10000500000 mode=ABS
      cyclictest-812     [001] d..2.   10.000101: sched_switch: prev_comm=cyclictest prev_pid=812 prev_prio=4 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] d..2.   10.000530: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=cyclictest next_pid=812 next_prio=4
      cyclictest-812     [001] d..1.   10.000540: hrtimer_start: hrtimer=00000000aa function=hrtimer_wakeup expires=10001000000 softexpires=10001000000 mode=ABS
      cyclictest-812     [001] d.h1.   10.000600: hrtimer_start: hrtimer=00000000bb function=tick_nohz_handler expires=10004000000 softexpires=10004000000 mode=ABS_PINNED_HARD
      cyclictest-812     [001] d..2.   10.000601: sched_switch: prev_comm=cyclictest prev_pid=812 prev_prio=4 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
            load-70      [001] d..2.   10.001400: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=cyclictest next_pid=812 next_prio=4
",
        );
        // 30 us late, then 400 us late: one wakeup above the threshold.
        assert_eq!(
            spikes,
            [Spike {
                seq: WATCH_SEQ_BASE,
                cpu: 1,
                tid: 812,
                intended_ns: 10_001_000_000,
                actual_ns: 10_001_400_000,
            }]
        );
        assert_eq!(
            t.seen(),
            &WatchedWakeups {
                wakeups: 2,
                max_ns: 400_000,
                above: 1,
                threads: vec!["cyclictest (812)".into()],
            }
        );
    }

    #[test]
    fn other_threads_timers_and_ordinary_switch_ins_are_not_wakeups_of_a_watched_thread() {
        let mut t = tracker();
        let spikes = feed(
            &mut t,
            "\
           probe-50      [001] d..1.   10.000100: hrtimer_start: hrtimer=00000000aa function=hrtimer_wakeup expires=10000500000 softexpires=10000500000 mode=ABS
      cyclictest-811     [001] d..1.   10.000200: hrtimer_start: hrtimer=00000000cc function=hrtimer_wakeup expires=10000300000 softexpires=10000300000 mode=REL
          <idle>-0       [001] d..2.   10.009000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=probe next_pid=50 next_prio=4
            load-70      [001] d..2.   10.009000: sched_switch: prev_comm=load prev_pid=70 prev_prio=4 prev_state=S ==> next_comm=cyclictest next_pid=811 next_prio=120
",
        );
        // The probe is not watched; cyclictest's main thread (811, not
        // real-time) sleeping in nanosleep is no measured wakeup.
        assert!(spikes.is_empty(), "{spikes:?}");
        assert_eq!(t.seen().wakeups, 0);
    }

    #[test]
    fn the_kernels_timerlat_thread_is_watched_through_its_own_timer() {
        let mut t = tracker();
        let spikes = feed(
            &mut t,
            "\
      timerlat/3-791     [003] d..1.   20.000010: hrtimer_start: hrtimer=00000000dd function=timerlat_irq expires=20001000000 softexpires=20001000000 mode=ABS_PINNED_HARD
          <idle>-0       [003] d..2.   20.001250: sched_switch: prev_comm=swapper/3 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=timerlat/3 next_pid=791 next_prio=4
",
        );
        assert_eq!(spikes.len(), 1);
        assert_eq!(
            (spikes[0].cpu, spikes[0].tid, spikes[0].latency_ns()),
            (3, 791, 250_000)
        );
    }
}
