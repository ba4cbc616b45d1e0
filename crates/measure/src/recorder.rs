//! The live side of a distribution: what a measuring thread records into.
//!
//! A log-linear histogram (hdrhistogram, 1 ns to 10 s, 3 significant digits,
//! about 200 KiB, never resized) plus exact count, min, max, sum and sum of
//! squares, plus the [`TOP_N`](crate::top::TOP_N) largest samples. Recording
//! neither allocates nor makes a system call, and memory stays the same over any
//! run length. [`Recorder::new`] writes every page of the histogram and runs the
//! record path once, so with memory locked as it is faulted in (the probes'
//! `mlockall(MCL_ONFAULT)`) recording later takes no page fault.
//! [`Recorder::finish`] turns it into a plain [`Distribution`].

use crate::distribution::{Bin, Distribution, Percentiles, Summary};
use crate::top::{TopSample, TopSamples};
use hdrhistogram::Histogram;

/// Lowest value the histogram tells apart from zero: 1 ns.
pub const LOWEST_NS: u64 = 1;
/// Highest value the histogram tracks: 10 s. Larger samples are counted in its
/// top bin; their exact value still shows in max and the largest samples.
pub const HIGHEST_NS: u64 = 10_000_000_000;
/// Significant decimal digits kept by the histogram.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Records samples in nanoseconds.
#[derive(Debug, Clone)]
pub struct Recorder {
    histogram: Histogram<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_squares: u128,
    top: TopSamples,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// An empty recorder; allocates its histogram once, here, and faults it in:
    /// one sample is recorded (so the code of the record path is mapped too)
    /// and then cleared by writing every count, which touches every page.
    pub fn new() -> Self {
        let mut histogram = Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        histogram.auto(false);
        let mut recorder = Self {
            histogram,
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sum_squares: 0,
            top: TopSamples::new(),
        };
        recorder.record(HIGHEST_NS, 0, 0);
        recorder.clear();
        recorder
    }

    /// Forgets every sample; writes every count of the histogram (the
    /// allocator hands out zeroed pages that are not yet mapped: this maps them).
    fn clear(&mut self) {
        // the counts are zero already after allocation; black_box keeps the
        // compiler from proving that and dropping the writes
        std::hint::black_box(&mut self.histogram).reset();
        self.count = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.sum = 0;
        self.sum_squares = 0;
        self.top = TopSamples::new();
    }

    /// Records one sample of `value_ns` that happened `offset_ns` after the start
    /// of the run, as sample number `index`.
    #[inline]
    pub fn record(&mut self, value_ns: u64, offset_ns: u64, index: u64) {
        self.histogram.saturating_record(value_ns);
        self.count += 1;
        self.min = self.min.min(value_ns);
        self.max = self.max.max(value_ns);
        self.sum += value_ns as u128;
        self.sum_squares += value_ns as u128 * value_ns as u128;
        self.top.offer(TopSample {
            value_ns,
            offset_ns,
            index,
        });
    }

    /// Records `count` samples of `value_ns` whose times were not kept (a
    /// probe's fast path for small values): they count in every statistic but
    /// are not candidates for the largest samples.
    pub fn record_many(&mut self, value_ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.histogram.saturating_record_n(value_ns, count);
        self.count += count;
        self.min = self.min.min(value_ns);
        self.max = self.max.max(value_ns);
        self.sum += value_ns as u128 * count as u128;
        self.sum_squares += value_ns as u128 * value_ns as u128 * count as u128;
    }

    /// Number of samples so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Largest sample so far (0 if none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The finished distribution as plain data.
    pub fn finish(&self) -> Distribution {
        if self.count == 0 {
            return Distribution::default();
        }
        let n = self.count as f64;
        let mean = self.sum as f64 / n;
        // population variance from exact integer sums: E[x^2] - E[x]^2, computed
        // as (n*sum_sq - sum^2) / n^2 in integers to avoid cancellation.
        let n_int = self.count as u128;
        let var_num = n_int
            .checked_mul(self.sum_squares)
            .and_then(|a| a.checked_sub(self.sum * self.sum));
        let variance = match var_num {
            Some(v) => v as f64 / (n * n),
            None => (self.sum_squares as f64 / n - mean * mean).max(0.0),
        };
        let mut values = [0u64; 7];
        let saturated = self.histogram.lowest_equivalent(HIGHEST_NS);
        for (slot, q) in values.iter_mut().zip(Percentiles::QUANTILES) {
            let v = self.histogram.value_at_quantile(q);
            // a quantile in the saturated top bin is only known to be > 10 s: use the exact max
            let v = if v >= saturated && self.max > HIGHEST_NS {
                self.max
            } else {
                v
            };
            *slot = v.clamp(self.min, self.max);
        }
        let mut histogram: Vec<Bin> = self
            .histogram
            .iter_recorded()
            .map(|v| {
                let high = v.value_iterated_to();
                Bin {
                    low_ns: self.histogram.lowest_equivalent(high),
                    high_ns: high,
                    count: v.count_since_last_iteration(),
                }
            })
            .collect();
        if let Some(first) = histogram.first_mut() {
            first.low_ns = first.low_ns.max(self.min).min(first.high_ns);
        }
        if let Some(last) = histogram.last_mut() {
            // samples above HIGHEST_NS sit in the top bin; stretch it to the true max
            last.high_ns = if self.max > last.high_ns {
                self.max
            } else {
                last.high_ns.min(self.max).max(last.low_ns)
            };
        }
        Distribution {
            summary: Summary {
                count: self.count,
                min_ns: self.min,
                mean_ns: mean,
                stddev_ns: variance.sqrt(),
                max_ns: self.max,
                percentiles: Percentiles::from_values(values),
            },
            histogram,
            top: self.top.as_slice().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(values: impl IntoIterator<Item = u64>) -> Distribution {
        let mut r = Recorder::new();
        for (i, v) in values.into_iter().enumerate() {
            r.record(v, i as u64 * 1000, i as u64);
        }
        r.finish()
    }

    #[test]
    fn percentiles_of_one_to_a_thousand_are_exact() {
        let d = recorded(1..=1000);
        let s = d.summary;
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_ns, 1);
        assert_eq!(s.max_ns, 1000);
        assert_eq!(s.mean_ns, 500.5);
        // population stddev of 1..=n is sqrt((n^2-1)/12)
        assert!((s.stddev_ns - ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt()).abs() < 1e-9);
        assert_eq!(s.percentiles.p50_ns, 500);
        assert_eq!(s.percentiles.p90_ns, 900);
        assert_eq!(s.percentiles.p99_ns, 990);
        assert_eq!(s.percentiles.p99_9_ns, 999);
        assert_eq!(s.percentiles.p99_99_ns, 1000);
        assert_eq!(s.percentiles.p99_9999_ns, 1000);
    }

    #[test]
    fn large_values_keep_three_significant_digits() {
        // 999_999 samples of 10 us and one of 5 ms
        let d = recorded(std::iter::repeat_n(10_000u64, 999_999).chain([5_000_000]));
        let p = d.summary.percentiles;
        assert_eq!(p.p50_ns, 10_000 + 7, "10 us to within its bin (8 ns)");
        assert_eq!(
            p.p99_9999_ns, p.p50_ns,
            "one in a million is not above p99.9999"
        );
        assert_eq!(d.summary.max_ns, 5_000_000, "max is exact");
        let last = d.histogram.last().unwrap();
        assert_eq!(last.count, 1);
        assert!(last.low_ns <= 5_000_000 && last.high_ns == 5_000_000);
        assert!((last.low_ns as f64) > 5_000_000.0 * 0.999);
    }

    #[test]
    fn histogram_counts_add_up_and_stay_in_order() {
        let d = recorded((0..10_000u64).map(|i| (i * 7919) % 3_000_000));
        let total: u64 = d.histogram.iter().map(|b| b.count).sum();
        assert_eq!(total, 10_000);
        for w in d.histogram.windows(2) {
            assert!(w[0].high_ns < w[1].low_ns);
        }
        assert_eq!(d.histogram[0].low_ns, d.summary.min_ns);
    }

    #[test]
    fn values_beyond_ten_seconds_are_counted_and_max_stays_exact() {
        let d = recorded([1_000, 30_000_000_000]);
        assert_eq!(d.summary.count, 2);
        assert_eq!(d.summary.max_ns, 30_000_000_000);
        assert_eq!(d.histogram.last().unwrap().high_ns, 30_000_000_000);
        assert_eq!(d.summary.percentiles.p99_ns, 30_000_000_000);
        assert_eq!(d.top[0].value_ns, 30_000_000_000);
    }

    #[test]
    fn recording_many_at_once_equals_recording_one_by_one() {
        let mut one = Recorder::new();
        let mut many = Recorder::new();
        for v in [80u64, 80, 80, 95, 1_000_000] {
            one.record(v, 0, 0);
        }
        many.record_many(80, 3);
        many.record_many(95, 1);
        many.record_many(7, 0);
        many.record(1_000_000, 0, 0);
        let (a, b) = (one.finish(), many.finish());
        assert_eq!(a.summary, b.summary);
        assert_eq!(a.histogram, b.histogram);
        assert_eq!(
            b.top.len(),
            1,
            "values without times are not among the largest"
        );
    }

    #[test]
    fn a_new_recorder_holds_nothing_of_its_warm_up_sample() {
        let r = Recorder::new();
        assert_eq!(r.count(), 0);
        assert_eq!(r.max(), 0);
        let d = recorded([7]);
        assert_eq!(d.summary.count, 1);
        assert_eq!(d.summary.min_ns, 7);
        assert_eq!(d.summary.max_ns, 7);
        assert_eq!(d.histogram.len(), 1, "only the one sample's bin");
        assert_eq!(d.top.len(), 1);
    }

    #[test]
    fn an_empty_recorder_gives_an_empty_distribution() {
        let d = Recorder::new().finish();
        assert_eq!(d.summary.count, 0);
        assert!(d.histogram.is_empty());
    }

    #[test]
    fn the_largest_samples_carry_their_times() {
        let d = recorded([5, 50, 500, 5000]);
        assert_eq!(d.top[0].value_ns, 5000);
        assert_eq!(d.top[0].offset_ns, 3000);
        assert_eq!(d.top[0].index, 3);
    }
}
