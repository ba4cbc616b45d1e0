//! What a measured CPU does when idle: halt (the kernel's idle loop) or poll
//! (a SCHED_IDLE spinner), chosen by measurement.
//!
//! In a VM whose idle loop halts, a halted vCPU waits for the host to run it
//! again at the next timer; a polling vCPU never halts, but then competes on
//! the host with the VM's own I/O emulation, and the host may take it away
//! for tens of milliseconds. Which one is worse depends on the host and on
//! the load, so `--idle auto` runs the probe briefly both ways under the
//! scenario's own conditions and keeps the better worst case. Without a
//! calibration the CPU halts, as cyclictest leaves it.

use cpushield_cpuset::fmt_ns;
use cpushield_report::IdleChoice;

/// What the measured CPUs do when idle (`compare --idle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum IdleMode {
    /// Measure halting and polling briefly in each scenario; keep the better.
    Auto,
    /// Keep polling (a SCHED_IDLE spinner per measured CPU).
    Poll,
    /// Let the kernel's idle loop run (as cyclictest does).
    Halt,
}

/// One calibration run's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Calibration {
    /// Worst latency, ns.
    pub max_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Steal on the measured CPUs during the run, ns.
    pub steal_ns: u64,
}

/// Polling must cut the worst case by at least this factor to be chosen:
/// a smaller difference is within the run-to-run noise of a short run.
pub const POLL_MUST_WIN_BY: f64 = 1.5;

/// Chooses halt or poll from one calibration run of each, and says why.
/// Halting wins ties and noise; polling wins only when its worst case is
/// clearly better and it did not make the host take the vCPU away more.
pub fn decide(halt: Calibration, poll: Calibration, seconds: f64) -> IdleChoice {
    let steal_budget = (seconds * 1e9 * 0.01) as u64; // 1% of the run
    let clearly_better = (poll.max_ns as f64) * POLL_MUST_WIN_BY < halt.max_ns as f64;
    let more_steal = poll.steal_ns > halt.steal_ns + steal_budget;
    let (policy, reason) = if clearly_better && !more_steal {
        (
            "poll",
            format!(
                "polling cut the worst case from {} to {} (steal {} vs {}): the halted vCPU waited for the host",
                fmt_ns(halt.max_ns),
                fmt_ns(poll.max_ns),
                fmt_ns(halt.steal_ns),
                fmt_ns(poll.steal_ns)
            ),
        )
    } else if clearly_better {
        (
            "halt",
            format!(
                "polling had the lower worst case ({} vs {}) but made the host steal {} instead of {}: a vCPU that never halts competes with the VM's I/O emulation, so it halts",
                fmt_ns(poll.max_ns),
                fmt_ns(halt.max_ns),
                fmt_ns(poll.steal_ns),
                fmt_ns(halt.steal_ns)
            ),
        )
    } else {
        (
            "halt",
            format!(
                "halting {} vs polling {} (steal {} vs {}): polling did not clearly help ({}x needed), so the CPU halts",
                fmt_ns(halt.max_ns),
                fmt_ns(poll.max_ns),
                fmt_ns(halt.steal_ns),
                fmt_ns(poll.steal_ns),
                POLL_MUST_WIN_BY
            ),
        )
    };
    IdleChoice {
        policy: policy.into(),
        how: "calibrated".into(),
        halt_max_ns: Some(halt.max_ns),
        poll_max_ns: Some(poll.max_ns),
        halt_steal_ns: Some(halt.steal_ns),
        poll_steal_ns: Some(poll.steal_ns),
        calibration_s: seconds,
        reason,
    }
}

/// The choice when no calibration ran.
pub fn fixed(mode: IdleMode) -> IdleChoice {
    let (policy, how, reason) = match mode {
        IdleMode::Poll => ("poll", "asked", "--idle poll"),
        IdleMode::Halt | IdleMode::Auto => ("halt", "asked", "--idle halt"),
    };
    IdleChoice {
        policy: policy.into(),
        how: how.into(),
        reason: reason.into(),
        ..IdleChoice::default()
    }
}

/// The idle policy of `shielded+shared`: the batch job fills the CPUs' idle
/// time, so they never idle; they halt (no poller to compete with the job).
pub fn shared() -> IdleChoice {
    IdleChoice {
        policy: "halt".into(),
        how: "shared".into(),
        reason: "the batch job fills the CPU's idle time: nothing to poll or calibrate".into(),
        ..IdleChoice::default()
    }
}

/// How long each calibration run lasts for a scenario of `duration`: a sixth
/// of it, between 1 and 5 seconds.
pub fn calibration_length(duration: std::time::Duration) -> std::time::Duration {
    (duration / 6).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(5),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(max_us: u64, steal_ms: u64) -> Calibration {
        Calibration {
            max_ns: max_us * 1000,
            p99_ns: 10_000,
            steal_ns: steal_ms * 1_000_000,
        }
    }

    #[test]
    fn polling_that_makes_the_host_steal_is_refused_even_with_a_lower_max() {
        // The measurement: polling + I/O on CPU 0 -> 2.4 s of steal.
        let choice = decide(c(24_000, 0), c(1_600, 2_410), 5.0);
        assert_eq!(choice.policy, "halt");
        assert!(choice.reason.contains("steal"), "{}", choice.reason);
    }

    #[test]
    fn polling_is_chosen_when_it_clearly_cuts_the_worst_case() {
        let choice = decide(c(3_229, 0), c(281, 0), 5.0);
        assert_eq!(choice.policy, "poll");
        assert_eq!(choice.halt_max_ns, Some(3_229_000));
        assert_eq!(choice.poll_max_ns, Some(281_000));
        assert!(choice.reason.contains("3.23 ms"), "{}", choice.reason);
    }

    #[test]
    fn a_difference_within_the_noise_keeps_the_cpu_halting() {
        assert_eq!(decide(c(400, 0), c(300, 0), 5.0).policy, "halt");
        assert_eq!(decide(c(296, 0), c(24_300, 2_410), 5.0).policy, "halt");
    }

    #[test]
    fn without_calibration_the_cpu_halts() {
        assert_eq!(fixed(IdleMode::Halt).policy, "halt");
        assert_eq!(fixed(IdleMode::Poll).policy, "poll");
    }

    #[test]
    fn calibration_runs_are_a_sixth_of_the_scenario_within_bounds() {
        use std::time::Duration;
        assert_eq!(
            calibration_length(Duration::from_secs(15)),
            Duration::from_millis(2500)
        );
        assert_eq!(
            calibration_length(Duration::from_secs(60)),
            Duration::from_secs(5)
        );
        assert_eq!(
            calibration_length(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
    }
}
