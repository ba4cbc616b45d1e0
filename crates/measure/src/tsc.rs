//! The TSC as a clock for the noise probe's busy loop: one `rdtsc` per loop
//! instead of a vDSO `clock_gettime` (which reads the TSC too, then scales it),
//! as oslat does. Used only where it is a clock: x86-64 with `constant_tsc` and
//! `nonstop_tsc` on every CPU (/proc/cpuinfo, through the parse crate). Its rate
//! is measured against CLOCK_MONOTONIC over a short window at the start (the
//! kernel does not export `tsc_khz` everywhere), so gaps come out in the same
//! nanoseconds as CLOCK_MONOTONIC's.

use cpushield_kernel::Kernel;
use cpushield_rt::clock::now_ns;
use std::time::Duration;

/// How long the rate is measured against CLOCK_MONOTONIC: with each end of the
/// window bracketed to a few tens of nanoseconds, the rate is good to a few
/// parts per million.
pub const CALIBRATION_WINDOW: Duration = Duration::from_millis(50);

/// Fixed-point shift of [`TscClock`]'s ticks-to-nanoseconds factor.
const SHIFT: u32 = 32;

/// A clock the noise loop reads: a raw count and its scale to nanoseconds.
pub(crate) trait GapClock {
    /// The raw count now.
    fn read(&self) -> u64;
    /// A raw difference in nanoseconds.
    fn ns(&self, raw: u64) -> u64;
    /// The raw difference that spans `ns` nanoseconds (at least).
    fn raw(&self, ns: u64) -> u64;
}

/// CLOCK_MONOTONIC through the vDSO: raw counts are nanoseconds.
pub(crate) struct Monotonic;

impl GapClock for Monotonic {
    #[inline(always)]
    fn read(&self) -> u64 {
        now_ns()
    }

    #[inline(always)]
    fn ns(&self, raw: u64) -> u64 {
        raw
    }

    #[inline(always)]
    fn raw(&self, ns: u64) -> u64 {
        ns
    }
}

/// The TSC with its measured rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TscClock {
    /// Ticks per second, as measured.
    pub hz: u64,
    /// Nanoseconds per tick in 32.32 fixed point.
    mult: u64,
}

impl TscClock {
    /// The clock for `hz` ticks per second (None for 0).
    pub fn from_hz(hz: u64) -> Option<Self> {
        if hz == 0 {
            return None;
        }
        let mult = ((1_000_000_000u128 << SHIFT) / hz as u128).min(u64::MAX as u128) as u64;
        Some(Self { hz, mult })
    }

    /// The TSC, if it is a clock here (x86-64, invariant on every CPU as
    /// /proc/cpuinfo says), with its rate measured over `window`; None
    /// otherwise (the caller falls back to CLOCK_MONOTONIC).
    pub fn calibrate(kernel: &dyn Kernel, window: Duration) -> Option<Self> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        let cpuinfo = cpushield_kernel::Procfs::new(kernel).cpuinfo().ok()?;
        if !cpushield_parse::cpuinfo::has_invariant_tsc(&cpuinfo) {
            return None;
        }
        let (mono0, tsc0) = paired_read()?;
        std::thread::sleep(window);
        let (mono1, tsc1) = paired_read()?;
        let (dns, dticks) = (mono1.checked_sub(mono0)?, tsc1.checked_sub(tsc0)?);
        if dns == 0 {
            return None;
        }
        Self::from_hz((dticks as u128 * 1_000_000_000 / dns as u128) as u64)
    }
}

impl GapClock for TscClock {
    #[inline(always)]
    fn read(&self) -> u64 {
        rdtsc()
    }

    #[inline(always)]
    fn ns(&self, raw: u64) -> u64 {
        ((raw as u128 * self.mult as u128) >> SHIFT) as u64
    }

    fn raw(&self, ns: u64) -> u64 {
        (ns as u128 * self.hz as u128)
            .div_ceil(1_000_000_000)
            .min(u64::MAX as u128) as u64
    }
}

/// The TSC now (0 where there is none; never called there).
#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc reads a counter; it has no operands in memory and
        // every x86-64 CPU has it (user-mode access is only off with
        // CR4.TSD, which Linux leaves clear unless a task asks for it via
        // prctl(PR_SET_TSC), which we never do).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// CLOCK_MONOTONIC and the TSC read as close together as this CPU allows: the
/// TSC between two clock reads, from the tightest of a few tries, paired with
/// the middle of its bracket.
fn paired_read() -> Option<(u64, u64)> {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..16 {
        let before = now_ns();
        let tsc = rdtsc();
        let after = now_ns();
        let width = after - before;
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, before + width / 2, tsc));
        }
    }
    best.map(|(_, mono, tsc)| (mono, tsc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::RealKernel;
    use std::path::Path;

    #[test]
    fn ticks_scale_to_nanoseconds_and_back() {
        let c = TscClock::from_hz(2_500_000_000).unwrap();
        assert_eq!(
            c.ns(2_500_000_000),
            999_999_999,
            "one second, within a tick"
        );
        assert_eq!(c.ns(25), 9, "10 ns, truncated");
        assert_eq!(c.raw(1_000), 2_500);
        assert_eq!(c.raw(1), 3, "rounded up: at least the span asked for");
        assert!(TscClock::from_hz(0).is_none());
    }

    #[test]
    fn the_monotonic_clock_counts_in_nanoseconds() {
        assert_eq!(Monotonic.ns(123), 123);
        assert_eq!(Monotonic.raw(123), 123);
        assert!(Monotonic.read() > 0);
    }

    /// Where the TSC is a clock (this machine's flags say so), its measured
    /// rate must turn a span of TSC ticks into the span CLOCK_MONOTONIC saw.
    #[test]
    fn a_calibrated_tsc_agrees_with_the_monotonic_clock() {
        let cpuinfo = RealKernel
            .read(Path::new("/proc/cpuinfo"))
            .unwrap_or_default();
        let invariant =
            cfg!(target_arch = "x86_64") && cpushield_parse::cpuinfo::has_invariant_tsc(&cpuinfo);
        let clock = TscClock::calibrate(&RealKernel, Duration::from_millis(20));
        if !invariant {
            assert!(clock.is_none(), "no invariant TSC: no TSC clock");
            return;
        }
        let clock = clock.expect("an invariant TSC calibrates");
        assert!(clock.hz > 100_000_000, "a TSC of {} Hz", clock.hz);
        let (m0, t0) = paired_read().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let (m1, t1) = paired_read().unwrap();
        let (mono, tsc) = (m1 - m0, clock.ns(t1 - t0));
        let diff = mono.abs_diff(tsc);
        // 1000 ppm: far looser than the calibration, tight enough to catch a wrong scale
        assert!(diff * 1000 <= mono, "monotonic {mono} ns vs TSC {tsc} ns");
    }
}
