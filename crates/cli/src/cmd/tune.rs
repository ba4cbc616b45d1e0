//! `cpushield tune`: this machine's best run-time settings for a shielded
//! CPU, found by interleaved A/B trials under load, written as a config
//! file `apply` applies. Runs inside a private PID namespace, as `compare`.

use crate::args::{cpu_set, duration, EXIT_ERROR, EXIT_OK};
use crate::progress;
use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_tune::command::{self, TuneRequest};
use cpushield_tune::real::TuneConfig;
use cpushield_tune::render;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield tune`.
#[derive(Args)]
pub struct TuneArgs {
    /// CPUs to shield and measure (default: the highest CPU and its SMT siblings).
    #[arg(long, value_parser = cpu_set)]
    cpus: Option<CpuSet>,
    /// Load profile or workloads (comma-separated, as `cpushield load --list`
    /// shows), or `none` (default: stress-kernel; without compile where no C
    /// compiler is installed).
    #[arg(long)]
    load: Option<String>,
    /// The whole run's time, setup and teardown included. Each knob's switch
    /// is timed and a knob whose switches no longer fit is left unmeasured;
    /// only a knob's first switch cannot be foreseen, so a run may end later
    /// by at most one first switch there and back (the machine is always
    /// restored).
    #[arg(long, value_parser = duration, default_value = "10m")]
    budget: Duration,
    /// Report directory (default ./cpushield-tune-<time>/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only these knobs (comma-separated): idle-poll, dma-latency,
    /// idle-states, preempt, rt-throttling, timer-migration, stat-interval,
    /// governor, epp, smt-offline, irq-siblings, probe-priority, mems.
    #[arg(long)]
    knobs: Option<String>,
    /// Latency probe rate in Hz (realfeel's 2048 by default).
    #[arg(long, default_value_t = 2048)]
    rate: u32,
    /// Directory for the load's files.
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
}

/// Runs `cpushield tune`.
pub fn tune(args: TuneArgs) -> anyhow::Result<ExitCode> {
    let host = crate::host::real();
    let request = TuneRequest {
        cpus: command::cpus_or_default(host.kernel(), args.cpus)?,
        load: args.load,
        knobs: args.knobs,
        budget: args.budget,
        rate: args.rate,
        load_dir: args.dir,
    };
    let config = request.config()?;
    let out = command::prepare(&host, &config, args.out)?;
    super::reserved::guard("tune", &config.cpus, cpushield_rt::reserve::CpuUse::Place)?;
    Ok(crate::host::run_private(
        || session(&config, &out),
        &config.load_dir,
    )?)
}

/// The run proper, with its progress bar and what it prints, as the private
/// namespace's init; returns the exit code.
fn session(config: &TuneConfig, out: &Path) -> u8 {
    let budget = config.budget.as_secs();
    let bar = progress::runner_bar(budget.max(1), "");
    let mut on_progress = |p: &cpushield_tune::session::Progress, elapsed: Duration| {
        bar.update(elapsed.as_secs().min(budget), || {
            render::progress_line(p, elapsed, budget)
        });
    };
    let result = command::run_to_end(&crate::host::real(), config, out, &mut on_progress);
    let said = match progress::finish(&bar, result) {
        Ok(said) => said,
        Err(code) => return code,
    };
    progress::print_said(&said.stdout, &said.stderr);
    if said.ok {
        EXIT_OK
    } else {
        EXIT_ERROR
    }
}
