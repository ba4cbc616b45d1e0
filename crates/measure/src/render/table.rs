//! The papers' bucket table (Brosky & Rotolo, figures 6 and 7):
//!
//! ```text
//! 59999983 samples < 0.1ms (99.99997%)
//! 8 samples < 0.2ms
//! 5 samples < 0.3ms
//! ```
//!
//! Edges are evenly spaced at a power of ten chosen so the table has at most
//! eleven lines and its last edge is above the maximum. The first line counts
//! every sample below the first edge that has any, with its percentage; each
//! later line counts the samples between the previous edge and its own, and
//! empty buckets are left out. Counts are to the histogram's 3 significant
//! digits: a bin straddling an edge counts above it.

use super::units::{ms_label, percent};
use crate::distribution::Distribution;

/// One line of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketLine {
    /// Upper edge of the bucket, in nanoseconds (samples are below it).
    pub edge_ns: u64,
    /// Samples in the bucket; for the first line, all samples below the edge.
    pub count: u64,
    /// Whether this is the first, cumulative line.
    pub cumulative: bool,
}

/// The bucket width for a maximum: the smallest power of ten (in ns) that is at
/// least a tenth of it.
pub fn bucket_step(max_ns: u64) -> u64 {
    let mut step = 1u64;
    while step.saturating_mul(10) < max_ns {
        step *= 10;
    }
    step
}

/// The table's lines for a distribution (empty when it has no samples).
pub fn bucket_lines(dist: &Distribution) -> Vec<BucketLine> {
    let total = dist.summary.count;
    if total == 0 {
        return Vec::new();
    }
    let step = bucket_step(dist.summary.max_ns);
    let last = dist.summary.max_ns / step + 1;
    let mut lines = Vec::new();
    let mut below_prev = 0u64;
    for i in 1..=last {
        let edge = i * step;
        let below = dist.count_below(edge);
        if below == 0 {
            continue;
        }
        if lines.is_empty() {
            lines.push(BucketLine {
                edge_ns: edge,
                count: below,
                cumulative: true,
            });
        } else if below > below_prev {
            lines.push(BucketLine {
                edge_ns: edge,
                count: below - below_prev,
                cumulative: false,
            });
        }
        below_prev = below;
    }
    lines
}

/// The table as text, one line per bucket.
pub fn render_bucket_table(dist: &Distribution) -> String {
    let total = dist.summary.count;
    let mut out = String::new();
    for line in bucket_lines(dist) {
        if line.cumulative {
            out.push_str(&format!(
                "{} samples < {} ({}%)\n",
                line.count,
                ms_label(line.edge_ns),
                percent(line.count, total)
            ));
        } else {
            out.push_str(&format!(
                "{} samples < {}\n",
                line.count,
                ms_label(line.edge_ns)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_keeps_the_table_at_most_eleven_lines() {
        assert_eq!(bucket_step(565_000), 100_000);
        assert_eq!(bucket_step(27_000), 10_000);
        assert_eq!(bucket_step(100_000), 10_000);
        assert_eq!(bucket_step(100_001), 100_000);
        assert_eq!(bucket_step(5), 1);
        for max in [1u64, 9, 10, 11, 99_999, 100_000, 123_456_789] {
            assert!(max / bucket_step(max) < 11, "{max}");
        }
    }
}
