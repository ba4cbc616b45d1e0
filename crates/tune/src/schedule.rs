//! The trial scheduler: how long each trial is and how many each
//! comparison gets, so that the whole run stays within `--budget` and
//! leaves time for the sets measured together at the end. Re-planned before
//! every comparison from the time left and the overhead measured so far, so
//! a slow start does not push the end past the budget.

use crate::decide::{Arm, MIN_TRIALS_PER_ARM};
use std::time::Duration;

/// The shortest trial: 1,024 wakeups at 2048 Hz.
pub const MIN_TRIAL: Duration = Duration::from_millis(500);
/// Trials grow to this length before more trials are added.
pub const TARGET_TRIAL: Duration = Duration::from_secs(5);
/// The most trials per arm (beyond, the rank test's power grows little).
pub const MAX_TRIALS_PER_ARM: usize = 12;
/// Time kept for the set measured together, in comparisons' worth.
pub const FINAL_SHARE: u32 = 1;
/// What one trial costs beyond its measuring time until measured: the
/// probe's set-up and the switch of a knob.
pub const FIRST_OVERHEAD: Duration = Duration::from_millis(150);

/// Time kept at the end for restoring the knobs, lifting the shield and
/// stopping the load.
pub fn teardown(budget: Duration) -> Duration {
    Duration::from_secs(5) + budget / 50
}

/// The smallest comparison: [`MIN_TRIALS_PER_ARM`] trials per arm of
/// [`MIN_TRIAL`].
pub const SMALLEST: Slot = Slot {
    trial: MIN_TRIAL,
    per_arm: MIN_TRIALS_PER_ARM,
};

/// One comparison's trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Length of each trial.
    pub trial: Duration,
    /// Trials per arm.
    pub per_arm: usize,
}

impl Slot {
    /// The arms in run order, A B B A A B B A ...: a drift of the machine
    /// over the comparison falls on both arms alike.
    pub fn order(&self) -> Vec<Arm> {
        (0..self.per_arm)
            .flat_map(|i| {
                if i % 2 == 0 {
                    [Arm::Start, Arm::Candidate]
                } else {
                    [Arm::Candidate, Arm::Start]
                }
            })
            .collect()
    }

    /// The time the comparison takes with `overhead` per trial.
    pub fn time(&self, overhead: Duration) -> Duration {
        (self.trial + overhead) * (2 * self.per_arm) as u32
    }
}

/// The trials that fit in `time`: at least [`MIN_TRIALS_PER_ARM`] per arm of
/// at least [`MIN_TRIAL`]; trials grow to [`TARGET_TRIAL`], then more are
/// added, up to [`MAX_TRIALS_PER_ARM`]. `None` when not even the smallest
/// comparison fits.
pub fn slot(time: Duration, overhead: Duration) -> Option<Slot> {
    let per_trial = |per_arm: usize| (time / (2 * per_arm) as u32).checked_sub(overhead);
    let mut per_arm = MIN_TRIALS_PER_ARM;
    let mut trial = per_trial(per_arm)?;
    if trial > TARGET_TRIAL {
        let fit = time.as_secs_f64() / (2.0 * (TARGET_TRIAL + overhead).as_secs_f64());
        per_arm = (fit as usize).clamp(MIN_TRIALS_PER_ARM, MAX_TRIALS_PER_ARM);
        trial = per_trial(per_arm)?;
    }
    (trial >= MIN_TRIAL).then_some(Slot { trial, per_arm })
}

/// Plans each comparison from the time left.
#[derive(Debug, Clone, Copy)]
pub struct Planner {
    /// The whole budget.
    pub budget: Duration,
}

impl Planner {
    fn left(&self, elapsed: Duration) -> Duration {
        self.budget
            .saturating_sub(teardown(self.budget))
            .saturating_sub(elapsed)
    }

    /// The next single knob's trials, with `knobs_left` (this one included)
    /// still to measure and the final sets' share kept.
    pub fn next_knob(
        &self,
        elapsed: Duration,
        knobs_left: usize,
        overhead: Duration,
    ) -> Option<Slot> {
        let shares = knobs_left as u32 + FINAL_SHARE;
        slot(self.left(elapsed) / shares.max(1), overhead)
    }

    /// The next set's trials, with `sets_left` (this one included) to measure.
    pub fn next_set(
        &self,
        elapsed: Duration,
        sets_left: usize,
        overhead: Duration,
    ) -> Option<Slot> {
        slot(self.left(elapsed) / (sets_left.max(1) as u32), overhead)
    }

    /// The time kept for `comparisons` still to come, each at its smallest
    /// with `overhead` per trial: what a comparison whose switches turn out
    /// slow may not take from the others.
    pub fn kept_for(comparisons: usize, overhead: Duration) -> Duration {
        SMALLEST.time(overhead) * comparisons as u32
    }

    /// The smallest budget that measures `knobs` and the final sets with the
    /// shortest trials, after `setup` (shield, load, warm-up).
    pub fn minimum_budget(knobs: usize, setup: Duration) -> Duration {
        let smallest = SMALLEST.time(FIRST_OVERHEAD);
        let work = setup + smallest * (knobs as u32 + FINAL_SHARE);
        // teardown(b) = 5 s + b/50: solve b = work + teardown(b).
        (work + Duration::from_secs(5)).mul_f64(50.0 / 49.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OVERHEAD: Duration = Duration::from_millis(150);

    #[test]
    fn trials_alternate_a_b_b_a() {
        let s = Slot {
            trial: MIN_TRIAL,
            per_arm: 4,
        };
        use Arm::{Candidate as B, Start as A};
        assert_eq!(s.order(), [A, B, B, A, A, B, B, A]);
    }

    #[test]
    fn a_short_slot_has_four_trials_per_arm_and_a_long_one_more() {
        let s = slot(Duration::from_secs(34), OVERHEAD).unwrap();
        assert_eq!(s.per_arm, 4);
        assert!(s.trial > Duration::from_secs(4) && s.trial < TARGET_TRIAL);
        assert!(s.time(OVERHEAD) <= Duration::from_secs(34));
        let s = slot(Duration::from_secs(200), OVERHEAD).unwrap();
        assert!(s.per_arm > 4 && s.per_arm <= MAX_TRIALS_PER_ARM, "{s:?}");
        assert!(s.time(OVERHEAD) <= Duration::from_secs(200));
        let s = slot(Duration::from_secs(3600), OVERHEAD).unwrap();
        assert_eq!(s.per_arm, MAX_TRIALS_PER_ARM);
        assert!(slot(Duration::from_secs(4), OVERHEAD).is_none());
    }

    #[test]
    fn five_minutes_for_six_knobs_fit_with_the_final_sets() {
        let budget = Duration::from_secs(300);
        let p = Planner { budget };
        let mut elapsed = Duration::from_secs(8); // shield, load, warm-up
        for left in (1..=6).rev() {
            let s = p.next_knob(elapsed, left, OVERHEAD).unwrap();
            elapsed += s.time(OVERHEAD);
        }
        let s = p.next_set(elapsed, 1, OVERHEAD).unwrap();
        elapsed += s.time(OVERHEAD);
        assert!(elapsed + teardown(budget) <= budget, "{elapsed:?}");
        assert!(
            elapsed + teardown(budget) > budget.mul_f64(0.9),
            "the budget is used: {elapsed:?}"
        );
    }

    #[test]
    fn a_slow_start_shrinks_the_later_trials_instead_of_the_end() {
        let p = Planner {
            budget: Duration::from_secs(300),
        };
        let on_time = p.next_knob(Duration::from_secs(10), 6, OVERHEAD).unwrap();
        let late = p.next_knob(Duration::from_secs(60), 6, OVERHEAD).unwrap();
        assert!(late.trial < on_time.trial);
    }

    #[test]
    fn the_minimum_budget_is_just_enough() {
        let setup = Duration::from_secs(8);
        let min = Planner::minimum_budget(6, setup);
        let p = Planner { budget: min };
        let mut elapsed = setup;
        for left in (1..=6).rev() {
            let s = p.next_knob(elapsed, left, FIRST_OVERHEAD).expect("fits");
            elapsed += s.time(FIRST_OVERHEAD);
        }
        assert!(elapsed + teardown(min) <= min + Duration::from_millis(10));
        let short = Planner {
            budget: min.mul_f64(0.8),
        };
        assert!(short.next_knob(setup, 6, FIRST_OVERHEAD).is_none());
    }
}
