//! The period of a periodic probe, kept exact: 2048 Hz is 488281.25 ns, which no
//! whole number of nanoseconds is, so wakeup `k` is computed as `k * 1e9 / rate`
//! rather than by adding a rounded interval `k` times.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The shortest period a probe accepts (10 us): a timer wakeup plus the
/// sample's bookkeeping takes microseconds, so shorter periods only miss.
pub const MIN_PERIOD_NS: u64 = 10_000;

/// The highest rate a probe accepts: one wakeup per [`MIN_PERIOD_NS`].
pub const MAX_RATE_HZ: u32 = (1_000_000_000 / MIN_PERIOD_NS) as u32;

/// A wakeup period, either a rate in Hz or a fixed interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    /// `hz` wakeups per second, exactly (2048 Hz as realfeel).
    Rate {
        /// Wakeups per second; at least 1.
        hz: u32,
    },
    /// A fixed interval in nanoseconds; at least 1.
    Interval {
        /// The interval in nanoseconds.
        ns: u64,
    },
}

impl Period {
    /// A period of `hz` wakeups per second.
    pub fn from_rate(hz: u32) -> Self {
        Period::Rate { hz }
    }

    /// The period `--rate` or `--interval` names (the interval when both
    /// do); realfeel's 2048 Hz when neither does.
    pub fn from_rate_or_interval(rate: Option<u32>, interval: Option<Duration>) -> Self {
        match (rate, interval) {
            (_, Some(i)) => Period::from_interval(i),
            (Some(r), None) => Period::from_rate(r),
            (None, None) => Period::from_rate(2048),
        }
    }

    /// A period of a fixed interval.
    pub fn from_interval(interval: Duration) -> Self {
        Period::Interval {
            ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Checks that the period is not zero and not shorter than
    /// [`MIN_PERIOD_NS`] (what a timer wakeup can keep up with), naming the remedy.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Period::Rate { hz: 0 } => {
                Err("--rate 0: the rate must be at least 1 Hz: use e.g. --rate 2048".into())
            }
            Period::Interval { ns: 0 } => Err(
                "--interval 0: the interval must be longer than 0: use e.g. --interval 1ms".into(),
            ),
            Period::Rate { hz } if hz > MAX_RATE_HZ => Err(format!(
                "--rate {hz}: a period below 10 us is more than a timer wakeup can keep up with: use --rate {MAX_RATE_HZ} or less (e.g. 2048)"
            )),
            Period::Interval { ns } if ns < MIN_PERIOD_NS => Err(format!(
                "--interval {ns}ns: a period below 10 us is more than a timer wakeup can keep up with: use --interval 10us or longer (e.g. 1ms)"
            )),
            _ => Ok(()),
        }
    }

    /// The index of the first wakeup due at or after `elapsed_ns` from the
    /// first one: the smallest `k` with `offset_ns(k) >= elapsed_ns`. Computed,
    /// not stepped to, so a wakeup that came very late costs no loop.
    pub fn first_due_at_or_after(&self, elapsed_ns: u64) -> u64 {
        self.wakeups_in(elapsed_ns)
    }

    /// Offset of wakeup `k` from the first wakeup, in nanoseconds, exact to the
    /// nanosecond (rounded down).
    #[inline]
    pub fn offset_ns(&self, k: u64) -> u64 {
        match *self {
            Period::Rate { hz } => ((k as u128 * 1_000_000_000) / hz.max(1) as u128) as u64,
            Period::Interval { ns } => k.saturating_mul(ns),
        }
    }

    /// The length of one period in nanoseconds (rounded down for rates).
    pub fn nominal_ns(&self) -> u64 {
        match *self {
            Period::Rate { hz } => 1_000_000_000 / hz.max(1) as u64,
            Period::Interval { ns } => ns,
        }
    }

    /// How many wakeups fall in `[0, duration)` from the first one.
    pub fn wakeups_in(&self, duration_ns: u64) -> u64 {
        match *self {
            Period::Rate { hz } => {
                // smallest k with k * 1e9 / hz >= duration, i.e. ceil(duration * hz / 1e9)
                let num = duration_ns as u128 * hz as u128;
                u64::try_from(num.div_ceil(1_000_000_000)).unwrap_or(u64::MAX)
            }
            Period::Interval { ns } => duration_ns.div_ceil(ns.max(1)),
        }
    }

    /// Wakeups per second, as a float for display.
    pub fn hz(&self) -> f64 {
        match *self {
            Period::Rate { hz } => hz as f64,
            Period::Interval { ns } => 1e9 / ns.max(1) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2048_hz_rate_does_not_drift_over_a_second() {
        let p = Period::from_rate(2048);
        assert_eq!(p.offset_ns(1), 488_281);
        assert_eq!(p.offset_ns(2048), 1_000_000_000);
        assert_eq!(p.offset_ns(2048 * 3600), 3600 * 1_000_000_000);
    }

    #[test]
    fn wakeup_count_matches_offsets_below_the_duration() {
        for p in [
            Period::from_rate(2048),
            Period::from_rate(3),
            Period::from_interval(Duration::from_micros(700)),
        ] {
            for d in [1u64, 999_999, 1_000_000_000, 2_000_000_001] {
                let n = p.wakeups_in(d);
                assert!(n == 0 || p.offset_ns(n - 1) < d, "{p:?} {d}");
                assert!(p.offset_ns(n) >= d, "{p:?} {d}");
            }
        }
    }

    #[test]
    fn zero_rate_and_zero_interval_are_refused() {
        assert!(Period::from_rate(0).validate().is_err());
        assert!(Period::from_interval(Duration::ZERO).validate().is_err());
        assert!(Period::from_rate(1).validate().is_ok());
    }

    #[test]
    fn periods_below_ten_microseconds_are_refused_naming_the_limit() {
        let err = Period::from_rate(4_000_000_000).validate().unwrap_err();
        assert!(err.contains("--rate 100000 or less"), "{err}");
        assert!(Period::from_rate(100_000).validate().is_ok());
        assert!(Period::from_rate(100_001).validate().is_err());
        let err = Period::from_interval(Duration::from_micros(9))
            .validate()
            .unwrap_err();
        assert!(err.contains("10us"), "{err}");
        assert!(Period::from_interval(Duration::from_micros(10))
            .validate()
            .is_ok());
    }

    #[test]
    fn the_first_due_wakeup_is_computed_exactly() {
        for p in [
            Period::from_rate(2048),
            Period::from_rate(100_000),
            Period::from_rate(7),
            Period::from_interval(Duration::from_micros(700)),
        ] {
            for e in [0u64, 1, 488_281, 488_282, 10_000_000_007, u64::MAX / 2] {
                let k = p.first_due_at_or_after(e);
                assert!(p.offset_ns(k) >= e, "{p:?} {e}");
                assert!(k == 0 || p.offset_ns(k - 1) < e, "{p:?} {e}");
            }
        }
    }
}
