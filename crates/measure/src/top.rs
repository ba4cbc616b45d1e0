//! The largest samples of a run, with when they happened, in a fixed-size array:
//! no allocation on the measuring thread, constant memory over any run length.

use serde::{Deserialize, Serialize};

/// How many of the largest samples are kept.
pub const TOP_N: usize = 10;

/// One kept sample: its value and when it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TopSample {
    /// The sample's value in nanoseconds.
    pub value_ns: u64,
    /// When it happened, in nanoseconds since the start of the run.
    pub offset_ns: u64,
    /// The sample's index in the run (0-based; cyclictest's "cycle number").
    pub index: u64,
}

/// The [`TOP_N`] largest samples seen so far. Ties keep the earlier sample.
#[derive(Debug, Clone)]
pub struct TopSamples {
    /// Sorted largest first; only `len` entries are valid.
    items: [TopSample; TOP_N],
    len: usize,
}

impl Default for TopSamples {
    fn default() -> Self {
        Self::new()
    }
}

impl TopSamples {
    /// An empty set.
    pub fn new() -> Self {
        Self {
            items: [TopSample::default(); TOP_N],
            len: 0,
        }
    }

    /// Offers a sample; keeps it if it is among the largest so far.
    #[inline]
    pub fn offer(&mut self, sample: TopSample) {
        if self.len == TOP_N && sample.value_ns <= self.items[TOP_N - 1].value_ns {
            return;
        }
        self.insert(sample);
    }

    #[inline(never)]
    fn insert(&mut self, sample: TopSample) {
        // position: after every kept sample that is >= this one
        let mut pos = self.len.min(TOP_N - 1);
        while pos > 0 && self.items[pos - 1].value_ns < sample.value_ns {
            pos -= 1;
        }
        let end = self.len.min(TOP_N - 1);
        self.items.copy_within(pos..end, pos + 1);
        self.items[pos] = sample;
        self.len = (self.len + 1).min(TOP_N);
    }

    /// The kept samples, largest first.
    pub fn as_slice(&self) -> &[TopSample] {
        &self.items[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(value_ns: u64, index: u64) -> TopSample {
        TopSample {
            value_ns,
            offset_ns: index * 10,
            index,
        }
    }

    #[test]
    fn keeps_the_ten_largest_in_descending_order() {
        let mut top = TopSamples::new();
        // a permutation of 0..100
        for i in 0..100u64 {
            let v = (i * 37) % 100;
            top.offer(s(v, i));
        }
        let values: Vec<u64> = top.as_slice().iter().map(|t| t.value_ns).collect();
        assert_eq!(values, (90..100).rev().collect::<Vec<_>>());
        for t in top.as_slice() {
            assert_eq!(
                (t.index * 37) % 100,
                t.value_ns,
                "timestamp kept with value"
            );
        }
    }

    #[test]
    fn fewer_than_ten_samples_are_all_kept() {
        let mut top = TopSamples::new();
        for (i, v) in [5u64, 1, 9].into_iter().enumerate() {
            top.offer(s(v, i as u64));
        }
        let values: Vec<u64> = top.as_slice().iter().map(|t| t.value_ns).collect();
        assert_eq!(values, vec![9, 5, 1]);
    }

    #[test]
    fn ties_keep_the_earlier_sample() {
        let mut top = TopSamples::new();
        for i in 0..20 {
            top.offer(s(7, i));
        }
        let idx: Vec<u64> = top.as_slice().iter().map(|t| t.index).collect();
        assert_eq!(idx, (0..10).collect::<Vec<_>>());
    }
}
