//! The reading side of a check: sample over the interval, then analyse.

use crate::analyze::{analyze, CheckInput, CheckReport, CpuSource, HostSaid};
use crate::facts::read_facts;
use crate::sampling::RunTracker;
use crate::snapshot::{parse_thread, read_raw, read_threads, user_hz, ReadOptions, Snapshot};
use crate::target::ShieldInForce;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{online_cpus, Kernel};
use std::time::{Duration, Instant};

/// How a check samples.
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions {
    /// How long to watch.
    pub interval: Duration,
    /// How often to sample the threads' run time.
    pub sample_every: Duration,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(5),
            sample_every: Duration::from_millis(100),
        }
    }
}

impl CheckOptions {
    /// Refuses a zero interval or sampling period, in one line naming the
    /// option and a value that works.
    pub fn validate(&self) -> Result<(), String> {
        if self.interval.is_zero() {
            return Err("--interval 0 watches nothing: use e.g. --interval 5s".into());
        }
        if self.sample_every.is_zero() {
            return Err("--sample-every 0 is not a period: use e.g. --sample-every 100ms".into());
        }
        Ok(())
    }
}

/// A check that could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A CPU asked about is not online.
    #[error("CPU {cpu} is not online (online: {online}): pass --cpus with online CPUs")]
    Offline {
        /// The first offline CPU.
        cpu: usize,
        /// The online CPUs.
        online: String,
    },
    /// No CPU to check.
    #[error("no CPU to check: pass --cpus, e.g. --cpus 1")]
    Empty,
    /// Bad options or CPUs, with the remedy; nothing was read.
    #[error("{0}")]
    Refused(String),
    /// A kernel file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A kernel file had an unexpected shape.
    #[error("{0}")]
    Parse(#[from] cpushield_parse::ParseError),
}

/// Watches `cpus` for `opts.interval` and analyses what reached them, the
/// shield in force (`shield`, from its saved state) taken into account.
/// Read-only.
pub fn run_check(
    kernel: &dyn Kernel,
    cpus: &CpuSet,
    source: CpuSource,
    shield: Option<&ShieldInForce>,
    opts: CheckOptions,
) -> Result<CheckReport, CheckError> {
    run_check_until(kernel, cpus, source, shield, opts, &|| false)
}

/// Like [`run_check`], but ends early, with what was seen so far, once
/// `done()` returns true (checked at every sample): for watching a CPU
/// exactly while something else runs.
pub fn run_check_until(
    kernel: &dyn Kernel,
    cpus: &CpuSet,
    source: CpuSource,
    shield: Option<&ShieldInForce>,
    opts: CheckOptions,
    done: &dyn Fn() -> bool,
) -> Result<CheckReport, CheckError> {
    let s = sample(kernel, cpus, opts, done)?;
    Ok(s.analyse(kernel, cpus, source, shield, &HostSaid::NotAsked))
}

/// What a check saw over its interval, before the analysis.
pub struct Sampled {
    before: Snapshot,
    after: Snapshot,
    runs: RunTracker,
    sampling: String,
}

impl Sampled {
    /// The analysis of what was sampled, with what a VM's host side said.
    pub fn analyse(
        &self,
        kernel: &dyn Kernel,
        cpus: &CpuSet,
        source: CpuSource,
        shield: Option<&ShieldInForce>,
        host: &HostSaid,
    ) -> CheckReport {
        analyse_snapshots(
            kernel,
            cpus,
            source,
            shield,
            &self.before,
            &self.after,
            &self.runs,
            &self.sampling,
            host,
        )
    }
}

/// Watches `cpus` for `opts.interval` (until `done()`, checked at every
/// sample): the snapshots and run-time samples the analysis takes.
pub fn sample(
    kernel: &dyn Kernel,
    cpus: &CpuSet,
    opts: CheckOptions,
    done: &dyn Fn() -> bool,
) -> Result<Sampled, CheckError> {
    if cpus.is_empty() {
        return Err(CheckError::Empty);
    }
    let online = online_cpus(kernel)?;
    if let Some(cpu) = cpus.difference(&online).first() {
        return Err(CheckError::Offline {
            cpu,
            online: online.to_list(),
        });
    }
    let start = Instant::now();
    let clock = |i: Instant| i.duration_since(start).as_nanos() as u64;
    let hz = user_hz();
    let mut runs = RunTracker::new();
    let before = Snapshot::parse(&read_raw(kernel, ReadOptions::default(), 0)?)?;
    runs.add(&before.threads);
    runs.add_activity(read_activity(kernel));
    let end = start + opts.interval;
    loop {
        let now = Instant::now();
        let next = now + opts.sample_every;
        if done() {
            break;
        }
        if next >= end {
            std::thread::sleep(end.saturating_duration_since(now));
            break;
        }
        std::thread::sleep(opts.sample_every);
        let threads: Vec<_> = read_threads(kernel, ReadOptions::default())
            .iter()
            .filter_map(|t| parse_thread(t, hz))
            .collect();
        runs.add(&threads);
        runs.add_activity(read_activity(kernel));
    }
    let raw = read_raw(
        kernel,
        ReadOptions { affinities: true },
        clock(Instant::now()),
    )?;
    let after = Snapshot::parse(&raw)?;
    runs.add(&after.threads);
    let sampling = format!(
        "threads sampled every {} ms from /proc/*/task/*/stat (last CPU) and schedstat (run time); run time between samples is charged to the CPU of the later sample, and threads that lived less than one sample are not seen",
        opts.sample_every.as_millis()
    );
    Ok(Sampled {
        before,
        after,
        runs,
        sampling,
    })
}

/// The CPUs' time counters and the disks' busy time now (empty where a file
/// cannot be read).
fn read_activity(kernel: &dyn Kernel) -> crate::sampling::ActivitySample {
    let procfs = cpushield_kernel::Procfs::new(kernel);
    crate::sampling::ActivitySample {
        cpu_times: cpushield_parse::stat::parse_cpu_times(&procfs.stat().unwrap_or_default())
            .unwrap_or_default(),
        disk_busy_ms: cpushield_parse::diskstats::parse_io_ticks(
            &procfs.file("diskstats").unwrap_or_default(),
        )
        .values()
        .fold(0u64, |sum, ms| sum.saturating_add(*ms)),
    }
}

/// Reads the configuration facts and analyses two snapshots and the run-time
/// samples between them (`after` should carry thread affinities), with the
/// shield in force (`shield`) and what a VM's host side said (`host`) taken
/// into account.
#[allow(clippy::too_many_arguments)]
pub fn analyse_snapshots(
    kernel: &dyn Kernel,
    cpus: &CpuSet,
    source: CpuSource,
    shield: Option<&ShieldInForce>,
    before: &Snapshot,
    after: &Snapshot,
    runs: &RunTracker,
    sampling: &str,
    host: &HostSaid,
) -> CheckReport {
    let irqs: Vec<u32> = after.interrupts.iter().filter_map(|l| l.number()).collect();
    let mut facts = read_facts(kernel, cpus, &irqs);
    if facts.nodes.len() > 1 {
        for pid in crate::analyze::numa::rt_processes_on(after, cpus) {
            if let Ok(pages) = cpushield_kernel::numa::pages_per_node(kernel, pid) {
                facts.rt_pages.insert(pid, pages.private);
            }
        }
    }
    let input = CheckInput {
        cpus,
        source,
        before,
        after,
        runs,
        facts: &facts,
        self_pid: std::process::id() as i32,
        shield,
        host,
        derived: Default::default(),
    };
    analyze(&input, sampling)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_intervals_are_refused_naming_the_option() {
        assert_eq!(CheckOptions::default().validate(), Ok(()));
        let none = CheckOptions {
            interval: Duration::ZERO,
            ..CheckOptions::default()
        };
        assert!(none.validate().unwrap_err().starts_with("--interval 0 "));
        let never = CheckOptions {
            sample_every: Duration::ZERO,
            ..CheckOptions::default()
        };
        assert!(never
            .validate()
            .unwrap_err()
            .starts_with("--sample-every 0 "));
    }
}
