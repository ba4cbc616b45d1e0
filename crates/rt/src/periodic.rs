//! A periodic loop on absolute CLOCK_MONOTONIC deadlines, with Sherer's
//! TIMER_ADVANCE: sleep to `deadline - advance`, then spin to the deadline, so
//! the wakeup latency of the sleep is absorbed by the spin.
//!
//! Sherer's §5 test in a few lines — a 1 ms loop printing its worst deviation:
//!
//! ```no_run
//! use cpushield_rt::periodic::Periodic;
//! use std::time::Duration;
//!
//! let mut lp = Periodic::new(Duration::from_millis(1)).with_advance(Duration::from_micros(20));
//! for _ in 0..1000 {
//!     lp.wait_next();
//!     // ... the real-time work of this period ...
//! }
//! let s = lp.stats();
//! println!("worst {} ns over {} cycles, {} overruns", s.worst_deviation_ns, s.cycles, s.overruns);
//! ```

use crate::clock::{now_ns, sleep_until_ns, spin_until_ns};
use std::time::Duration;

/// What the loop has seen so far. `#[repr(C)]`: the C API hands it out as is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PeriodicStats {
    /// Deadlines waited for.
    pub cycles: u64,
    /// Deadlines missed: already past when `wait_next` was called, because the
    /// work (or a late wakeup) took longer than the period. They are skipped.
    pub overruns: u64,
    /// The largest lateness of a return from `wait_next` past its deadline.
    pub worst_deviation_ns: u64,
    /// Sum of all deviations (mean = total / cycles).
    pub total_deviation_ns: u64,
    /// The largest lateness of the sleep itself past its target
    /// (`deadline - advance`): the advance that would hide every wakeup
    /// latency seen so far.
    pub worst_sleep_latency_ns: u64,
}

impl PeriodicStats {
    /// The mean deviation in nanoseconds (0 before the first cycle).
    pub fn mean_deviation_ns(&self) -> u64 {
        self.total_deviation_ns
            .checked_div(self.cycles)
            .unwrap_or(0)
    }

    fn record(&mut self, tick: &Tick) {
        self.cycles += 1;
        self.overruns += tick.missed;
        self.worst_deviation_ns = self.worst_deviation_ns.max(tick.deviation_ns);
        self.total_deviation_ns = self.total_deviation_ns.saturating_add(tick.deviation_ns);
        self.worst_sleep_latency_ns = self.worst_sleep_latency_ns.max(tick.sleep_latency_ns);
    }
}

/// One return from [`Periodic::wait_next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// The deadline waited for (CLOCK_MONOTONIC ns).
    pub deadline_ns: u64,
    /// How late the return was (first clock read at or after the deadline).
    pub deviation_ns: u64,
    /// How late the sleep woke past its own target (`deadline - advance`).
    pub sleep_latency_ns: u64,
    /// Deadlines skipped because they had passed before this call.
    pub missed: u64,
}

/// The deadline arithmetic, without the clock: which deadline comes next and
/// how many were missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    period_ns: u64,
    next_ns: u64,
}

impl Schedule {
    /// Deadlines at `first_ns`, `first_ns + period`, ...
    ///
    /// # Panics
    /// If `period_ns` is 0.
    pub fn new(first_ns: u64, period_ns: u64) -> Self {
        assert!(period_ns > 0, "a periodic loop needs a period above 0");
        Self {
            period_ns,
            next_ns: first_ns,
        }
    }

    /// The next deadline.
    pub fn next_ns(&self) -> u64 {
        self.next_ns
    }

    /// If `now_ns` is already past the next deadline, skips to the first
    /// deadline after `now_ns` and returns how many were skipped; else 0.
    pub fn skip_missed(&mut self, now_ns: u64) -> u64 {
        if now_ns <= self.next_ns {
            return 0;
        }
        let missed = (now_ns - self.next_ns).div_ceil(self.period_ns);
        self.next_ns += missed * self.period_ns;
        missed
    }

    /// Moves to the deadline after the current one.
    pub fn advance(&mut self) {
        self.next_ns += self.period_ns;
    }
}

/// A periodic loop: call [`wait_next`](Periodic::wait_next) once per period.
#[derive(Debug, Clone)]
pub struct Periodic {
    schedule: Schedule,
    advance_ns: u64,
    stats: PeriodicStats,
}

impl Periodic {
    /// A loop whose first deadline is one period from now.
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn new(period: Duration) -> Self {
        let period_ns = duration_ns(period);
        Self::starting_at(now_ns() + period_ns, period)
    }

    /// A loop whose first deadline is `first_ns` (CLOCK_MONOTONIC, see
    /// [`crate::clock::now_ns`]), so several threads can share a phase.
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn starting_at(first_ns: u64, period: Duration) -> Self {
        Self {
            schedule: Schedule::new(first_ns, duration_ns(period)),
            advance_ns: 0,
            stats: PeriodicStats::default(),
        }
    }

    /// Sleeps only to `deadline - advance` and spins the rest of the way (Sherer
    /// §5.3). Choose the worst wakeup latency of this CPU, e.g. a previous
    /// run's `worst_sleep_latency_ns`. The spin costs up to `advance` of CPU per
    /// period: use it on a shielded CPU only. Clamped to the period.
    pub fn with_advance(mut self, advance: Duration) -> Self {
        self.advance_ns = duration_ns(advance).min(self.schedule.period_ns);
        self
    }

    /// The advance in nanoseconds.
    pub fn advance_ns(&self) -> u64 {
        self.advance_ns
    }

    /// The next deadline (CLOCK_MONOTONIC ns).
    pub fn next_deadline_ns(&self) -> u64 {
        self.schedule.next_ns()
    }

    /// Waits for the next deadline and returns how it went. Deadlines already
    /// past are counted as overruns and skipped, never caught up in a burst.
    pub fn wait_next(&mut self) -> Tick {
        let missed = self.schedule.skip_missed(now_ns());
        let deadline = self.schedule.next_ns();
        let target = deadline - self.advance_ns.min(deadline);
        sleep_until_ns(target, true);
        let woke = now_ns();
        let sleep_latency_ns = woke.saturating_sub(target);
        let returned = if woke < deadline {
            spin_until_ns(deadline)
        } else {
            woke
        };
        self.schedule.advance();
        let tick = Tick {
            deadline_ns: deadline,
            deviation_ns: returned - deadline,
            sleep_latency_ns,
            missed,
        };
        self.stats.record(&tick);
        tick
    }

    /// What the loop has seen so far.
    pub fn stats(&self) -> PeriodicStats {
        self.stats
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_not_yet_reached_is_not_an_overrun() {
        let mut s = Schedule::new(1_000, 100);
        assert_eq!(s.skip_missed(999), 0);
        assert_eq!(s.skip_missed(1_000), 0);
        assert_eq!(s.next_ns(), 1_000);
    }

    #[test]
    fn missed_deadlines_are_counted_and_skipped_to_the_first_future_one() {
        let mut s = Schedule::new(1_000, 100);
        assert_eq!(s.skip_missed(1_001), 1);
        assert_eq!(s.next_ns(), 1_100);
        assert_eq!(s.skip_missed(1_350), 3);
        assert_eq!(s.next_ns(), 1_400);
    }

    #[test]
    fn stats_keep_the_worst_and_the_mean() {
        let mut st = PeriodicStats::default();
        for (dev, sleep, missed) in [(10, 30, 0), (50, 5, 2), (30, 70, 0)] {
            st.record(&Tick {
                deadline_ns: 0,
                deviation_ns: dev,
                sleep_latency_ns: sleep,
                missed,
            });
        }
        assert_eq!(st.cycles, 3);
        assert_eq!(st.overruns, 2);
        assert_eq!(st.worst_deviation_ns, 50);
        assert_eq!(st.mean_deviation_ns(), 30);
        assert_eq!(st.worst_sleep_latency_ns, 70);
    }

    #[test]
    fn waits_return_at_or_after_their_deadlines_one_period_apart() {
        let mut lp = Periodic::new(Duration::from_micros(500));
        let first = lp.wait_next();
        let second = lp.wait_next();
        assert_eq!(second.deadline_ns - first.deadline_ns, 500_000);
        assert!(now_ns() >= second.deadline_ns);
        assert_eq!(lp.stats().cycles, 2);
    }

    #[test]
    fn work_longer_than_the_period_counts_overruns() {
        let mut lp = Periodic::new(Duration::from_micros(200));
        lp.wait_next();
        std::thread::sleep(Duration::from_millis(2));
        let tick = lp.wait_next();
        assert!(
            tick.missed >= 9,
            "2 ms of work over a 200 us period: {tick:?}"
        );
        assert_eq!(lp.stats().overruns, tick.missed);
    }

    #[test]
    fn advance_is_clamped_to_the_period() {
        let lp = Periodic::new(Duration::from_millis(1)).with_advance(Duration::from_secs(1));
        assert_eq!(lp.advance_ns(), 1_000_000);
    }
}
