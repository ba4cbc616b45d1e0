//! A finished distribution of samples as plain data: exact count, min, max, mean
//! and standard deviation; percentiles and the histogram to 3 significant digits;
//! the largest samples with their times. This is what reports, JSON and the
//! renderers work from.

use crate::top::TopSample;
use serde::{Deserialize, Serialize};

/// The percentiles every report gives, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p99_9_ns: u64,
    /// 99.99th percentile.
    pub p99_99_ns: u64,
    /// 99.999th percentile (ARTiS's figure, the Hyades paper).
    pub p99_999_ns: u64,
    /// 99.9999th percentile.
    pub p99_9999_ns: u64,
}

impl Percentiles {
    /// The quantiles, in the order of the fields.
    pub const QUANTILES: [f64; 7] = [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999];

    /// Labels of the fields for display, in the same order.
    pub const LABELS: [&'static str; 7] = [
        "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999",
    ];

    /// Builds the struct from values in the order of [`Percentiles::QUANTILES`].
    pub fn from_values(v: [u64; 7]) -> Self {
        Self {
            p50_ns: v[0],
            p90_ns: v[1],
            p99_ns: v[2],
            p99_9_ns: v[3],
            p99_99_ns: v[4],
            p99_999_ns: v[5],
            p99_9999_ns: v[6],
        }
    }

    /// The values in the order of [`Percentiles::QUANTILES`].
    pub fn values(&self) -> [u64; 7] {
        [
            self.p50_ns,
            self.p90_ns,
            self.p99_ns,
            self.p99_9_ns,
            self.p99_99_ns,
            self.p99_999_ns,
            self.p99_9999_ns,
        ]
    }
}

/// Summary statistics. Count, min, max, mean and stddev are exact; percentiles
/// are to 3 significant digits (and never outside min..max).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample in nanoseconds (0 if there were none).
    pub min_ns: u64,
    /// Arithmetic mean in nanoseconds.
    pub mean_ns: f64,
    /// Population standard deviation in nanoseconds.
    pub stddev_ns: f64,
    /// Largest sample in nanoseconds.
    pub max_ns: u64,
    /// Percentiles.
    pub percentiles: Percentiles,
}

/// One non-empty histogram bin: `count` samples whose values lie in
/// `low_ns..=high_ns` (the values the 3-significant-digit histogram cannot tell apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bin {
    /// Lowest value of the bin, in nanoseconds.
    pub low_ns: u64,
    /// Highest value of the bin, in nanoseconds.
    pub high_ns: u64,
    /// Samples in the bin.
    pub count: u64,
}

/// A finished distribution: summary, full histogram and largest samples.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Distribution {
    /// Summary statistics.
    pub summary: Summary,
    /// Non-empty bins in increasing order; the counts add up to `summary.count`.
    /// The first bin's low and the last bin's high are clamped to the exact min and max.
    pub histogram: Vec<Bin>,
    /// The largest samples, largest first, with when they happened.
    pub top: Vec<TopSample>,
}

impl Distribution {
    /// Samples known to be below `edge_ns`: the bins lying wholly below it. A bin
    /// straddling the edge counts as not below, so tails are never understated.
    pub fn count_below(&self, edge_ns: u64) -> u64 {
        self.histogram
            .iter()
            .take_while(|b| b.high_ns < edge_ns)
            .map(|b| b.count)
            .sum()
    }
}
