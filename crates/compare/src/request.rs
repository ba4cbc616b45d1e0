//! What `cpushield compare` and `cpushield demo` are asked, as given (their
//! options), and the experiment each asks for.

use crate::experiment::{CompareConfig, CompareError};
use crate::idle::IdleMode;
use crate::scenario;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_measure::Period;
use cpushield_shield::snapshot::Scope;
use std::path::PathBuf;
use std::time::Duration;

/// `cpushield compare`'s options (but how much it prints).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CompareRequest {
    /// CPUs to shield and measure (default: the highest CPU and its SMT siblings).
    #[cfg_attr(feature = "clap", arg(long, value_parser = CpuSet::parse_arg))]
    pub cpus: Option<CpuSet>,
    /// Load profile or workloads (comma-separated), as `cpushield load --list`
    /// shows (default: stress-kernel; without compile where no C compiler is
    /// installed).
    #[cfg_attr(feature = "clap", arg(long))]
    pub load: Option<String>,
    /// Latency probe time per scenario.
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "60s"))]
    pub duration: Duration,
    /// Scenarios to run, comma-separated; `shielded+shared` (run only when
    /// named) adds a batch job sharing the shielded CPU's idle time.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            default_value = "idle,loaded,shielded,shielded+advance,unshielded-cpu"
        )
    )]
    pub scenarios: String,
    /// Shield the whole machine instead of a private PID namespace.
    #[cfg_attr(feature = "clap", arg(long))]
    pub system: bool,
    /// Report directory (default ./cpushield-report-<time>/).
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: Option<PathBuf>,
    /// Exit 2 when a shielded scenario's worst latency exceeds this.
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg))]
    pub max_latency: Option<Duration>,
    /// Advance of the shielded+advance scenario (default: the shielded
    /// scenario's measured 99.999th percentile wakeup latency).
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg))]
    pub advance: Option<Duration>,
    /// Latency probe rate in Hz (realfeel's 2048 by default).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2048))]
    pub rate: u32,
    /// Determinism runs per scenario (0 skips the determinism probe).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 20))]
    pub runs: u32,
    /// Length of one determinism run.
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "200ms"))]
    pub work: Duration,
    /// Directory for the load's files.
    #[cfg_attr(feature = "clap", arg(long, default_value = "/var/tmp"))]
    pub dir: PathBuf,
    /// What a measured CPU does when idle: auto (run the probe briefly both
    /// ways in each scenario and keep the better worst case), halt (the
    /// kernel's idle loop, as cyclictest), or poll (a SCHED_IDLE spinner).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = IdleMode::Auto))]
    pub idle: IdleMode,
    /// Do not trace the measured CPUs (no guest/host split of the spikes).
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_attribute: bool,
    /// Explain every sample above this latency from the trace (default: four
    /// times the unloaded machine's p99, measured at the start).
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg))]
    pub attribute_above: Option<Duration>,
    /// Do not run the anchors (cyclictest; rtla timerlat where the kernel has the
    /// timerlat tracer) in the loaded and shielded scenarios.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_anchor: bool,
    /// Brosky & Rotolo Figure 4 instead of the scenarios: one shielded CPU
    /// (--cpus, one CPU; default the highest with an SMT sibling off CPU 0's
    /// core) measured with its SMT sibling busy, idle and offline (the sibling
    /// is brought back online afterwards). Refused where there is no SMT.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "scenarios"))]
    pub smt: bool,
    /// In a VM: the virtio-serial port where the host side (`cpushield vm
    /// watch`) answers what kept a vCPU from running (default: the port
    /// named org.cpushield.vm.0, when there is one; `none`: do not ask).
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub host_channel: Option<PathBuf>,
}

impl CompareRequest {
    /// The experiment asked for on `host`; an unknown scenario or load is
    /// refused in one line naming the option.
    pub fn config(&self, host: &Host) -> Result<CompareConfig, CompareError> {
        let scenarios = scenario::parse_list(&self.scenarios)
            .map_err(|e| CompareError::Refused(format!("--scenarios: {e}")))?;
        let mut config = with_load(host, self.load.as_deref())?;
        config.cpus = self.cpus.clone();
        config.scenarios = scenarios;
        config.load_dir = self.dir.clone();
        config.duration = self.duration;
        config.period = Period::from_rate(self.rate);
        config.advance = self.advance;
        config.determinism_runs = self.runs;
        config.determinism_work = self.work;
        if self.system {
            config.scope = Scope::System;
        }
        config.idle = self.idle;
        config.attribute = !self.no_attribute;
        config.attribute_above = self.attribute_above;
        config.anchor = !self.no_anchor;
        config.smt = self.smt;
        Ok(config)
    }
}

/// `cpushield demo`'s options (but how much it prints).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DemoRequest {
    /// CPUs to shield and measure (default: the highest CPU and its SMT siblings).
    #[cfg_attr(feature = "clap", arg(long, value_parser = CpuSet::parse_arg))]
    pub cpus: Option<CpuSet>,
    /// Report directory (default ./cpushield-report-<time>/).
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: Option<PathBuf>,
    /// Latency probe time per scenario.
    #[cfg_attr(feature = "clap", arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "15s"))]
    pub duration: Duration,
    /// Load profile or workloads (comma-separated), as `cpushield load --list`
    /// shows, as `compare --load` takes them (default: stress-kernel; without
    /// compile where no C compiler is installed).
    #[cfg_attr(feature = "clap", arg(long))]
    pub load: Option<String>,
}

impl DemoRequest {
    /// The experiment asked for on `host`: every scenario, short runs.
    pub fn config(&self, host: &Host) -> Result<CompareConfig, CompareError> {
        let mut config = with_load(host, self.load.as_deref())?;
        config.cpus = self.cpus.clone();
        config.duration = self.duration;
        Ok(config)
    }
}

/// The defaults of an experiment on `host` with the load `named` (`None`:
/// this machine's default load).
fn with_load(host: &Host, named: Option<&str>) -> Result<CompareConfig, CompareError> {
    let (load, load_name) =
        cpushield_load::request::choose(named).map_err(CompareError::Refused)?;
    Ok(CompareConfig::new(host, load, load_name))
}
