//! What `cpushield measure latency | determinism | noise` are asked about
//! the probe, as given (their options but the outputs and the tracing), and
//! the probe's configuration each asks for. Where the probe's threads go
//! (the placer) is the caller's: it depends on the shield.

use crate::determinism::{DeterminismConfig, Work};
use crate::latency::{LatencyConfig, Length};
use crate::noise::NoiseConfig;
use crate::period::Period;
use crate::source::SourceRequest;
use cpushield_cpuset::CpuSet;
use std::time::Duration;

/// `measure latency`'s probe.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LatencyRequest {
    /// CPUs to measure, one thread each (list `1,3-4` or mask `0x2`).
    #[cfg_attr(feature = "clap", arg(long, value_parser = CpuSet::parse_arg))]
    pub cpus: CpuSet,
    /// What wakes the measuring thread: `timer` (clock_nanosleep, an hrtimer),
    /// `rtc` (realfeel: /dev/rtc0's periodic interrupt, its IRQ bound to the
    /// measured CPU for the run), `hpet` (/dev/hpet), `timerlat` (the
    /// kernel's timerlat tracer: its threads at SCHED_FIFO 95 measure, the
    /// IRQ and thread latency of each wakeup are read from the trace; needs
    /// CONFIG_TIMERLAT_TRACER, as PREEMPT_RT kernels have). `auto` is the
    /// timer: the one source every machine has; the others measure another
    /// path and must be asked for.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = SourceRequest::Auto))]
    pub source: SourceRequest,
    /// Wakeups per second [default: 2048, as realfeel].
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "HZ", conflicts_with = "interval")
    )]
    pub rate: Option<u32>,
    /// Wakeup interval instead of a rate (e.g. 1ms).
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg))]
    pub interval: Option<Duration>,
    /// How long to measure [default: 60s].
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, conflicts_with = "samples"))]
    pub duration: Option<Duration>,
    /// Measure this many samples per CPU instead of a duration.
    #[cfg_attr(feature = "clap", arg(long))]
    pub samples: Option<u64>,
    /// SCHED_FIFO priority 1..99; 0 runs at SCHED_OTHER.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 95))]
    pub priority: u8,
    /// Wake this much before each deadline and spin to it (e.g. 20us).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_parser = advance_arg, allow_hyphen_values = true)
    )]
    pub advance: Option<Duration>,
    /// Keep the measured CPUs polling instead of halting when idle (a SCHED_IDLE
    /// spinner per CPU): in a VM a halted vCPU waits for the host to run it again.
    #[cfg_attr(feature = "clap", arg(long))]
    pub idle_poll: bool,
}

impl LatencyRequest {
    /// The probe asked for (its placer left to the caller).
    pub fn config(&self) -> LatencyConfig {
        let mut config = LatencyConfig::new(self.cpus.clone());
        config.period = Period::from_rate_or_interval(self.rate, self.interval);
        config.length = Length::from_samples_or_duration(self.samples, self.duration);
        config.priority = fifo(self.priority);
        config.advance = self.advance;
        config.idle_poll = self.idle_poll;
        config.source = self.source.source();
        config
    }
}

/// `measure determinism`'s probe.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DeterminismRequest {
    /// CPUs to measure, one thread each.
    #[cfg_attr(feature = "clap", arg(long, value_parser = CpuSet::parse_arg))]
    pub cpus: CpuSet,
    /// Work per run: the loop is calibrated once to take this long [default: 1s].
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, conflicts_with = "iterations"))]
    pub work: Option<Duration>,
    /// Work per run as a loop iteration count (from an earlier report), for the same workload.
    #[cfg_attr(feature = "clap", arg(long))]
    pub iterations: Option<u64>,
    /// Runs per CPU.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 60))]
    pub runs: u32,
    /// SCHED_FIFO priority 1..99; 0 runs at SCHED_OTHER.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 95))]
    pub priority: u8,
    /// Sleep between runs, giving the CPU back to the kernel's per-CPU work.
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "100ms"))]
    pub rest: Duration,
}

impl DeterminismRequest {
    /// The probe asked for (its placer left to the caller).
    pub fn config(&self) -> DeterminismConfig {
        let mut config = DeterminismConfig::new(self.cpus.clone());
        config.work = Work::from_iterations_or_duration(self.iterations, self.work);
        config.runs = self.runs;
        config.priority = fifo(self.priority);
        config.rest = self.rest;
        config
    }
}

/// `measure noise`'s probe.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct NoiseRequest {
    /// CPUs to measure, one busy loop each.
    #[cfg_attr(feature = "clap", arg(long, value_parser = CpuSet::parse_arg))]
    pub cpus: CpuSet,
    /// How long to measure.
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "60s"))]
    pub duration: Duration,
    /// Run the loop at SCHED_FIFO with this priority (default: SCHED_OTHER;
    /// with RT throttling on, a FIFO spinner is stopped 50 ms each second).
    #[cfg_attr(feature = "clap", arg(long))]
    pub priority: Option<u8>,
    /// Gaps at or above this count as interruptions (stolen time).
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "1us"))]
    pub threshold: Duration,
}

impl NoiseRequest {
    /// The probe asked for (its placer left to the caller).
    pub fn config(&self) -> NoiseConfig {
        let mut config = NoiseConfig::new(self.cpus.clone());
        config.duration = self.duration;
        config.priority = self.priority.and_then(fifo);
        config.threshold = self.threshold;
        config
    }
}

/// A `--priority` as the probes take it: 0 means SCHED_OTHER.
pub fn fifo(priority: u8) -> Option<u8> {
    (priority != 0).then_some(priority)
}

/// `--advance`: a duration that refuses a leading minus with a message naming
/// the remedy.
#[cfg(feature = "clap")]
fn advance_arg(text: &str) -> Result<Duration, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!(
            "'{text}' is negative: give how early to wake before each deadline, e.g. 20us"
        ));
    }
    cpushield_cpuset::parse_duration_arg(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_of_0_is_sched_other_and_the_rest_fifo() {
        assert_eq!(fifo(0), None);
        assert_eq!(fifo(95), Some(95));
    }

    #[test]
    fn a_latency_request_gives_its_period_length_priority_advance_and_polling() {
        let request = LatencyRequest {
            cpus: CpuSet::from_cpus([1]),
            source: SourceRequest::Auto,
            rate: None,
            interval: Some(Duration::from_millis(1)),
            duration: None,
            samples: Some(500),
            priority: 0,
            advance: Some(Duration::from_micros(20)),
            idle_poll: true,
        };
        let config = request.config();
        assert_eq!(
            config.period,
            Period::from_interval(Duration::from_millis(1))
        );
        assert!(matches!(config.length, Length::Samples(500)));
        assert_eq!(config.priority, None);
        assert_eq!(config.advance, Some(Duration::from_micros(20)));
        assert!(config.idle_poll);
    }
}
