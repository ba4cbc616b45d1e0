//! `CPUSHIELD_TIMING=1`: the time of each phase of a shield or reset on
//! stderr (`cpushield timing: snapshot 41.2 ms`), to find where the time
//! goes without a profiler. Off, it costs nothing but a check.

use std::time::{Duration, Instant};

/// The environment variable that turns the phase times on.
pub const TIMING_ENV: &str = "CPUSHIELD_TIMING";

/// Whether `CPUSHIELD_TIMING` is set to a non-empty value other than `0`.
pub fn enabled() -> bool {
    std::env::var(TIMING_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Prints how long each phase took since the previous one.
#[derive(Debug)]
pub struct Laps {
    last: Option<(Instant, Duration, i64)>,
}

impl Laps {
    /// Starts timing when [`enabled`].
    pub fn from_env() -> Self {
        Self {
            last: enabled().then(|| (Instant::now(), cpu_time(), page_faults())),
        }
    }

    /// Prints the time since the previous lap as `phase`, and the page
    /// faults taken meanwhile.
    pub fn lap(&mut self, phase: &str) {
        if let Some((last, last_cpu, last_faults)) = self.last {
            let (now, cpu, faults) = (Instant::now(), cpu_time(), page_faults());
            eprintln!(
                "cpushield timing: {phase} {:.1} ms (CPU {:.1} ms, {} page faults)",
                (now - last).as_secs_f64() * 1e3,
                cpu.saturating_sub(last_cpu).as_secs_f64() * 1e3,
                faults - last_faults
            );
            self.last = Some((now, cpu, faults));
        }
    }
}

/// CPU time this process has used, on all its threads: a phase whose CPU
/// time is far below its wall time waited (for the kernel, or for a CPU).
fn cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// Page faults this process has taken, on all its threads: in a VM whose
/// host takes back the guest's free memory (virtio-balloon free page
/// reporting), each first touch of a page can cost microseconds, so a phase's
/// time follows the memory it touches.
fn page_faults() -> i64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .map(|usage| usage.minor_page_faults() + usage.major_page_faults())
        .unwrap_or_default()
}

/// Prints one phase's time.
pub fn print(phase: &str, took: Duration) {
    eprintln!(
        "cpushield timing: {phase} {:.1} ms",
        took.as_secs_f64() * 1e3
    );
}
