//! The rank test and the effect's interval behind every decision of `tune`.
//!
//! Why a rank test over per-trial values and not a bootstrap: a knob gets 4
//! to 12 short trials per arm. A bootstrap interval over so few values is
//! known to cover less than it claims (it resamples the few values it has,
//! so it can never see a worse trial than the worst observed), while the
//! permutation distribution of the Wilcoxon-Mann-Whitney rank sum gives an
//! exact p-value at any size under the one assumption the interleaved
//! A B B A order is there to make true: that without an effect, which arm a
//! trial belongs to is exchangeable. Ranks also keep one host stall of 20 ms
//! from outweighing a consistent gain, which a mean would not.
//!
//! The effect is the Hodges-Lehmann estimate of the shift between the arms
//! on a log scale (a ratio: latency effects multiply), with its
//! distribution-free interval from the order statistics of the pairwise
//! differences (Hollander & Wolfe, "Nonparametric Statistical Methods").

use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::SeedableRng;

/// Splits enumerated exactly; above this the permutation distribution is
/// sampled (12 against 12 trials is 2.7 million splits).
const EXACT_SPLITS: u64 = 200_000;
/// Random splits drawn when there are too many to enumerate.
const SAMPLED_SPLITS: usize = 20_000;
/// The seed of those draws: the same trials always give the same p-value.
const SEED: u64 = 0x7475_6e65;

/// One-sided p-values of the rank-sum test of `b` against `a`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankTest {
    /// The chance, without an effect, of `b`'s ranks being this low or lower:
    /// small when `b`'s values are smaller (better, for latencies).
    pub p_lower: f64,
    /// The same for this high or higher: small when `b` is worse.
    pub p_higher: f64,
    /// Whether every split was enumerated (else sampled).
    pub exact: bool,
}

/// Mid-ranks (1-based) of the values of `a` then `b` pooled: tied values
/// share the mean of their ranks.
fn mid_ranks(pooled: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..pooled.len()).collect();
    order.sort_by(|&i, &j| pooled[i].total_cmp(&pooled[j]));
    let mut ranks = vec![0.0; pooled.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && pooled[order[end]] == pooled[order[start]] {
            end += 1;
        }
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

/// C(n, k), saturating.
fn choose(n: u64, k: u64) -> u64 {
    let k = k.min(n - k);
    let mut c: u64 = 1;
    for i in 0..k {
        c = c.saturating_mul(n - i) / (i + 1);
    }
    c
}

/// The rank-sum permutation test of `b` against `a` (ties by mid-ranks).
/// With an empty side both p-values are 1.
pub fn rank_test(a: &[f64], b: &[f64]) -> RankTest {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return RankTest {
            p_lower: 1.0,
            p_higher: 1.0,
            exact: true,
        };
    }
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let ranks = mid_ranks(&pooled);
    let observed: f64 = ranks[m..].iter().sum();
    // Rank sums are multiples of 0.5: compare with a margin far below that.
    let eps = 1e-9;
    let (mut lower, mut higher, mut total) = (0u64, 0u64, 0u64);
    let mut count = |sum: f64| {
        total += 1;
        if sum <= observed + eps {
            lower += 1;
        }
        if sum >= observed - eps {
            higher += 1;
        }
    };
    let splits = choose((m + n) as u64, n as u64);
    if splits <= EXACT_SPLITS {
        // Every choice of n positions out of m + n, in lexicographic order.
        let mut idx: Vec<usize> = (0..n).collect();
        loop {
            count(idx.iter().map(|&i| ranks[i]).sum());
            let Some(pos) = (0..n).rev().find(|&p| idx[p] != p + m) else {
                break;
            };
            idx[pos] += 1;
            for q in pos + 1..n {
                idx[q] = idx[q - 1] + 1;
            }
        }
        RankTest {
            p_lower: lower as f64 / total as f64,
            p_higher: higher as f64 / total as f64,
            exact: true,
        }
    } else {
        let mut rng = StdRng::seed_from_u64(SEED);
        for _ in 0..SAMPLED_SPLITS {
            count(sample(&mut rng, m + n, n).iter().map(|i| ranks[i]).sum());
        }
        // The observed split counts as one of the draws (never a p of 0).
        RankTest {
            p_lower: (lower + 1) as f64 / (total + 1) as f64,
            p_higher: (higher + 1) as f64 / (total + 1) as f64,
            exact: false,
        }
    }
}

/// How many of the C(m+n, n) splits give each Mann-Whitney count U (pairs
/// with the `b` value below the `a` value), without ties: index U.
fn null_counts(m: usize, n: usize) -> Vec<f64> {
    // f[i][j][u]: arrangements of i a's and j b's with count u; built up
    // by the last value being an a (which exceeds all j b's) or a b.
    let max_u = m * n;
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0;
    }
    for _ in 0..m {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n + 1];
        cur[0][0] = 1.0;
        for j in 1..=n {
            for u in 0..=max_u {
                let as_a = if u >= j { prev[j][u - j] } else { 0.0 };
                cur[j][u] = as_a + cur[j - 1][u];
            }
        }
        prev = cur;
    }
    prev[n].clone()
}

/// An effect: the shift of `b` from `a` estimated on a log scale, so a
/// ratio `b / a`, with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// The Hodges-Lehmann estimate of the ratio.
    pub ratio: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
    /// The interval's exact coverage (0 when too few trials give none).
    pub coverage: f64,
}

/// The Hodges-Lehmann ratio of `b` to `a` and its distribution-free
/// interval at the widest coverage not above `1 - 2 * alpha_one_sided`'s
/// complement: the interval [D(k), D(mn+1-k)] of the sorted pairwise log
/// differences, with k the largest count whose tail P(U < k) is at most
/// `alpha_one_sided`. Values below 1 are taken as 1 (latencies in ns).
pub fn hodges_lehmann(a: &[f64], b: &[f64], alpha_one_sided: f64) -> Shift {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return Shift {
            ratio: 1.0,
            low: 0.0,
            high: f64::INFINITY,
            coverage: 0.0,
        };
    }
    let log = |x: f64| x.max(1.0).ln();
    let mut diffs: Vec<f64> = a
        .iter()
        .flat_map(|&x| b.iter().map(move |&y| log(y) - log(x)))
        .collect();
    diffs.sort_by(f64::total_cmp);
    let mid = diffs.len() / 2;
    let median = if diffs.len() % 2 == 1 {
        diffs[mid]
    } else {
        (diffs[mid - 1] + diffs[mid]) / 2.0
    };
    let counts = null_counts(m, n);
    let total: f64 = counts.iter().sum();
    // Largest k with P(U <= k - 1) <= alpha.
    let mut k = 0;
    let mut tail = 0.0;
    for (u, c) in counts.iter().enumerate() {
        tail += c / total;
        if tail > alpha_one_sided + 1e-12 {
            break;
        }
        k = u + 1;
    }
    if k == 0 {
        return Shift {
            ratio: median.exp(),
            low: 0.0,
            high: f64::INFINITY,
            coverage: 0.0,
        };
    }
    let below: f64 = counts[..k].iter().sum::<f64>() / total;
    Shift {
        ratio: median.exp(),
        low: diffs[k - 1].exp(),
        high: diffs[diffs.len() - k].exp(),
        coverage: 1.0 - 2.0 * below,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_separation_of_four_against_four_gives_one_in_seventy() {
        let a = [10.0, 11.0, 12.0, 13.0];
        let b = [1.0, 2.0, 3.0, 4.0];
        let t = rank_test(&a, &b);
        assert!(t.exact);
        assert!((t.p_lower - 1.0 / 70.0).abs() < 1e-12, "{t:?}");
        assert!((t.p_higher - 1.0).abs() < 1e-12);
        let back = rank_test(&b, &a);
        assert!((back.p_higher - 1.0 / 70.0).abs() < 1e-12);
    }

    #[test]
    fn identical_arms_give_no_evidence_either_way() {
        let a = [5.0; 4];
        let t = rank_test(&a, &a);
        assert_eq!(t.p_lower, 1.0);
        assert_eq!(t.p_higher, 1.0);
    }

    #[test]
    fn one_overlap_in_four_against_four_is_two_in_seventy() {
        // b's ranks 1,2,3,5: sums of 10 (1 split) and 11 (1 split) lie at or below.
        let a = [4.0, 6.0, 7.0, 8.0];
        let b = [1.0, 2.0, 3.0, 5.0];
        let t = rank_test(&a, &b);
        assert!((t.p_lower - 2.0 / 70.0).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn large_arms_are_sampled_and_still_find_a_clear_shift() {
        let a: Vec<f64> = (0..12).map(|i| 100.0 + i as f64).collect();
        let b: Vec<f64> = (0..12).map(|i| 10.0 + i as f64).collect();
        let t = rank_test(&a, &b);
        assert!(!t.exact);
        assert!(t.p_lower < 0.001, "{t:?}");
        assert_eq!(t, rank_test(&a, &b), "the draws are seeded");
    }

    #[test]
    fn null_counts_are_the_mann_whitney_distribution() {
        let c = null_counts(4, 4);
        assert_eq!(c.iter().sum::<f64>(), 70.0);
        assert_eq!(&c[..4], &[1.0, 1.0, 2.0, 3.0]);
        assert_eq!(c[0], c[16], "symmetric");
        let c = null_counts(2, 3);
        assert_eq!(c, vec![1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]);
    }

    #[test]
    fn hodges_lehmann_halving_is_a_ratio_of_one_half_inside_its_interval() {
        let a = [100.0, 110.0, 120.0, 130.0];
        let b = [50.0, 55.0, 60.0, 65.0];
        let s = hodges_lehmann(&a, &b, 0.05);
        assert!((s.ratio - 0.5).abs() < 1e-9, "{s:?}");
        assert!(s.low <= 0.5 && 0.5 <= s.high && s.high < 1.0, "{s:?}");
        assert!((s.coverage - (1.0 - 4.0 / 70.0)).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn too_few_trials_give_no_interval() {
        let s = hodges_lehmann(&[1.0, 2.0], &[1.0, 2.0], 0.05);
        assert_eq!(s.coverage, 0.0);
        assert!(s.high.is_infinite());
    }
}
