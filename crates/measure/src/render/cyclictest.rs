//! cyclictest's `-h` histogram text, so existing OSADL and gnuplot scripts read
//! our results unchanged:
//!
//! ```text
//! # Histogram
//! 000000 000000 000000
//! 000001 000012 000009
//! ...
//! # Total: 000001979 000001990
//! # Min Latencies: 00008 00007
//! # Avg Latencies: 00017 00016
//! # Max Latencies: 00084 00051
//! # Histogram Overflows: 00021 00010
//! # Histogram Overflow at cycle number:
//! # Thread 0: 00272 00275
//! # Thread 1: 00018 # 00009 others
//! ```
//!
//! One row per microsecond bin (a sample of `v` ns falls in bin `v / 1000`, as
//! cyclictest truncates), one tab-separated column per CPU. Samples at or above
//! `bins` microseconds are overflows, left out of the rows and the total, as in
//! cyclictest. cyclictest lists the cycle numbers of up to 1024 overflows; we
//! keep the 10 largest samples, so the overflows among them are listed and the
//! rest counted as "others". Bins are exact up to 8 us and to the histogram's
//! 3 significant digits above.

use crate::distribution::Distribution;
use crate::latency::LatencyReport;

/// Writes the histogram of `threads` (one distribution per measured CPU, in
/// order) with `bins` one-microsecond bins.
pub fn write_histogram(threads: &[&Distribution], bins: usize) -> String {
    let mut columns: Vec<Vec<u64>> = Vec::new();
    let mut overflows: Vec<u64> = Vec::new();
    for dist in threads {
        let mut col = vec![0u64; bins];
        let mut over = 0u64;
        for bin in &dist.histogram {
            let us = (bin.low_ns / 1000) as usize;
            if us < bins {
                col[us] += bin.count;
            } else {
                over += bin.count;
            }
        }
        columns.push(col);
        overflows.push(over);
    }
    let mut out = String::from("# Histogram\n");
    for i in 0..bins {
        let row: Vec<String> = columns.iter().map(|c| format!("{:06}", c[i])).collect();
        out.push_str(&format!("{i:06} {}\n", row.join("\t")));
    }
    let per_thread = |f: &dyn Fn(usize) -> String| -> String {
        (0..threads.len())
            .map(|j| format!(" {}", f(j)))
            .collect::<String>()
    };
    out.push_str(&format!(
        "# Total:{}\n",
        per_thread(&|j| format!("{:09}", columns[j].iter().sum::<u64>()))
    ));
    out.push_str(&format!(
        "# Min Latencies:{}\n",
        per_thread(&|j| format!("{:05}", threads[j].summary.min_ns / 1000))
    ));
    out.push_str(&format!(
        "# Avg Latencies:{}\n",
        per_thread(&|j| format!("{:05}", (threads[j].summary.mean_ns / 1000.0) as u64))
    ));
    out.push_str(&format!(
        "# Max Latencies:{}\n",
        per_thread(&|j| format!("{:05}", threads[j].summary.max_ns / 1000))
    ));
    out.push_str(&format!(
        "# Histogram Overflows:{}\n",
        per_thread(&|j| format!("{:05}", overflows[j]))
    ));
    out.push_str("# Histogram Overflow at cycle number:\n");
    for (j, dist) in threads.iter().enumerate() {
        // top is largest first; a sample at the limit whose bin straddles it
        // counts as in range, so list no more overflows than were counted
        let mut cycles: Vec<u64> = dist
            .top
            .iter()
            .filter(|t| t.value_ns / 1000 >= bins as u64)
            .take(overflows[j] as usize)
            .map(|t| t.index)
            .collect();
        cycles.sort_unstable();
        out.push_str(&format!("# Thread {j}:"));
        for c in &cycles {
            out.push_str(&format!(" {c:05}"));
        }
        let listed = cycles.len() as u64;
        if listed < overflows[j] {
            out.push_str(&format!(" # {:05} others", overflows[j] - listed));
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// The largest bin count (one per microsecond: a second).
pub const MAX_BINS: usize = 1_000_000;

/// A bin count as typed (`--histogram-bins 100`): 1 to [`MAX_BINS`].
pub fn parse_bins(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_BINS).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{text}' is not a bin count: use 1..={MAX_BINS} (one bin per microsecond), e.g. 100"
        )),
    }
}

/// cyclictest's `-h` histogram of every CPU of `report`, in `bins`
/// microsecond bins (default: enough to hold the largest latency, at least 100).
pub fn histogram_of(report: &LatencyReport, bins: Option<usize>) -> String {
    let dists: Vec<&Distribution> = report.cpus.iter().map(|c| &c.latency).collect();
    let bins = bins.unwrap_or_else(|| bins_to_cover(&dists, 100));
    write_histogram(&dists, bins)
}

/// The bin count that covers every sample of `threads` (no overflows), and at
/// least `min_bins`.
pub fn bins_to_cover(threads: &[&Distribution], min_bins: usize) -> usize {
    let max_us = threads
        .iter()
        .map(|d| d.summary.max_ns / 1000)
        .max()
        .unwrap_or(0) as usize;
    (max_us + 1).max(min_bins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bin_count_is_one_to_a_seconds_worth_of_microseconds() {
        assert_eq!(parse_bins(" 100 "), Ok(100));
        assert_eq!(parse_bins("1000000"), Ok(MAX_BINS));
        for bad in ["0", "1000001", "-1", "many"] {
            let e = parse_bins(bad).unwrap_err();
            assert!(e.contains("use 1..=1000000"), "{bad}: {e}");
        }
    }
}
