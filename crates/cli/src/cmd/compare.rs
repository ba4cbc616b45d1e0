//! `cpushield compare` and `cpushield demo`: the papers' experiments in one
//! command; `demo` is the same code path with short durations.

use crate::args::{cpu_set, duration, EXIT_ERROR, EXIT_OK, EXIT_THRESHOLD};
use crate::progress;
use clap::Args;
use cpushield_compare::command::{self, Ending, View};
use cpushield_compare::idle::IdleMode;
use cpushield_compare::{CompareConfig, Scope};
use cpushield_cpuset::CpuSet;
use cpushield_load::request;
use cpushield_measure::Period;
use cpushield_report::CompareReport;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield compare`.
#[derive(Args)]
pub struct CompareArgs {
    /// CPUs to shield and measure (default: the highest CPU and its SMT siblings).
    #[arg(long, value_parser = cpu_set)]
    cpus: Option<CpuSet>,
    /// Load profile or workloads (comma-separated), as `cpushield load --list`
    /// shows (default: stress-kernel; without compile where no C compiler is
    /// installed).
    #[arg(long)]
    load: Option<String>,
    /// Latency probe time per scenario.
    #[arg(long, value_parser = duration, default_value = "60s")]
    duration: Duration,
    /// Scenarios to run, comma-separated; `shielded+shared` (run only when
    /// named) adds a batch job sharing the shielded CPU's idle time.
    #[arg(
        long,
        default_value = "idle,loaded,shielded,shielded+advance,unshielded-cpu"
    )]
    scenarios: String,
    /// Shield the whole machine instead of a private PID namespace.
    #[arg(long)]
    system: bool,
    /// Report directory (default ./cpushield-report-<time>/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Exit 2 when a shielded scenario's worst latency exceeds this.
    #[arg(long, value_parser = duration)]
    max_latency: Option<Duration>,
    /// Advance of the shielded+advance scenario (default: the shielded
    /// scenario's measured 99.999th percentile wakeup latency).
    #[arg(long, value_parser = duration)]
    advance: Option<Duration>,
    /// Latency probe rate in Hz (realfeel's 2048 by default).
    #[arg(long, default_value_t = 2048)]
    rate: u32,
    /// Determinism runs per scenario (0 skips the determinism probe).
    #[arg(long, default_value_t = 20)]
    runs: u32,
    /// Length of one determinism run.
    #[arg(long, value_parser = duration, default_value = "200ms")]
    work: Duration,
    /// Directory for the load's files.
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
    /// What a measured CPU does when idle: auto (run the probe briefly both
    /// ways in each scenario and keep the better worst case), halt (the
    /// kernel's idle loop, as cyclictest), or poll (a SCHED_IDLE spinner).
    #[arg(long, value_enum, default_value_t = IdleMode::Auto)]
    idle: IdleMode,
    /// Do not trace the measured CPUs (no guest/host split of the spikes).
    #[arg(long)]
    no_attribute: bool,
    /// Explain every sample above this latency from the trace (default: four
    /// times the unloaded machine's p99, measured at the start).
    #[arg(long, value_parser = duration)]
    attribute_above: Option<Duration>,
    /// Do not run the anchors (cyclictest; rtla timerlat where the kernel has the
    /// timerlat tracer) in the loaded and shielded scenarios.
    #[arg(long)]
    no_anchor: bool,
    /// Print every table after the answer: each scenario's figures, the idle
    /// calibration, the causes, the samples below each threshold, the notes
    /// and the warnings (all of it is in report.html and report.json anyway).
    #[arg(long, short)]
    verbose: bool,
    /// Brosky & Rotolo Figure 4 instead of the scenarios: one shielded CPU
    /// (--cpus, one CPU; default the highest with an SMT sibling off CPU 0's
    /// core) measured with its SMT sibling busy, idle and offline (the sibling
    /// is brought back online afterwards). Refused where there is no SMT.
    #[arg(long, conflicts_with = "scenarios")]
    smt: bool,
    /// In a VM: the virtio-serial port where the host side (`cpushield vm
    /// watch`) answers what kept a vCPU from running (default: the port
    /// named org.cpushield.vm.0, when there is one; `none`: do not ask).
    #[arg(long, value_name = "PATH")]
    host_channel: Option<PathBuf>,
}

/// Arguments of `cpushield demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// CPUs to shield and measure (default: the highest CPU and its SMT siblings).
    #[arg(long, value_parser = cpu_set)]
    cpus: Option<CpuSet>,
    /// Report directory (default ./cpushield-report-<time>/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Latency probe time per scenario.
    #[arg(long, value_parser = duration, default_value = "15s")]
    duration: Duration,
    /// Load profile or workloads (comma-separated), as `cpushield load --list`
    /// shows, as `compare --load` takes them (default: stress-kernel; without
    /// compile where no C compiler is installed).
    #[arg(long)]
    load: Option<String>,
    /// Print every table after the answer (all of it is in report.html and
    /// report.json anyway).
    #[arg(long, short)]
    verbose: bool,
}

/// Runs `cpushield compare`.
pub fn compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let host = crate::host::real();
    let scenarios = cpushield_compare::scenario::parse_list(&args.scenarios)
        .map_err(|e| anyhow::anyhow!("--scenarios: {e}"))?;
    let (load, load_name) = request::choose(args.load.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = CompareConfig::new(&host, load, load_name);
    config.cpus = args.cpus;
    config.scenarios = scenarios;
    config.load_dir = args.dir;
    config.duration = args.duration;
    config.period = Period::from_rate(args.rate);
    config.advance = args.advance;
    config.determinism_runs = args.runs;
    config.determinism_work = args.work;
    if args.system {
        config.scope = Scope::System;
    }
    config.idle = args.idle;
    config.attribute = !args.no_attribute;
    config.attribute_above = args.attribute_above;
    config.anchor = !args.no_anchor;
    config.smt = args.smt;
    let view = view(args.verbose, 0);
    execute(
        "compare",
        config,
        args.out,
        args.max_latency,
        view,
        args.host_channel,
    )
}

/// Runs `cpushield demo`: every scenario, the stress-kernel load, short runs.
pub fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let host = crate::host::real();
    let (load, load_name) = request::choose(args.load.as_deref()).map_err(anyhow::Error::msg)?;
    let mut config = CompareConfig::new(&host, load, load_name);
    config.cpus = args.cpus;
    config.duration = args.duration;
    let intro = command::demo_intro(&config, terminal_width());
    for line in &intro {
        println!("{line}");
    }
    execute(
        "demo",
        config,
        args.out,
        None,
        view(args.verbose, intro.len()),
        None,
    )
}

/// The layout of the answer on this terminal.
fn view(verbose: bool, lines_before: usize) -> View {
    View {
        verbose,
        width: terminal_width(),
        lines_before,
    }
}

/// The width of the terminal stdout is, if it is one.
fn terminal_width() -> Option<usize> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return None;
    }
    console::Term::stdout()
        .size_checked()
        .map(|(_rows, columns)| usize::from(columns))
}

/// Runs the experiment `config` for the command named `command` (`compare`
/// or `demo`, as a refusal names it).
fn execute(
    name: &str,
    config: CompareConfig,
    out: Option<PathBuf>,
    max_latency: Option<Duration>,
    view: View,
    host_channel: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let out = command::check_request(&config, out, host_channel.as_deref())?;
    let host = crate::host::real();
    let reserved = crate::host::reserve_dir();
    command::prepare(&host, &config, name, &reserved, &mut |line| {
        eprintln!("cpushield: {line}")
    })?;
    let experiment = || experiment(&config, &out, max_latency, view, host_channel.as_deref());
    if config.scope == Scope::System {
        return Ok(ExitCode::from(experiment()));
    }
    Ok(crate::host::run_private(experiment, &config.load_dir)?)
}

/// The experiment proper, with its progress bar and what it prints; returns
/// the exit code (it may run as a namespace's init).
fn experiment(
    config: &CompareConfig,
    out: &Path,
    max_latency: Option<Duration>,
    view: View,
    host_channel: Option<&Path>,
) -> u8 {
    let bar = progress::runner_bar(1000, "starting");
    let mut on_progress =
        |p: cpushield_compare::Progress| bar.update((p.done() * 1000.0) as u64, || p.message());
    let mut print_answer = |report: &CompareReport, host_lines: &[String]| {
        bar.clear();
        print!("{}", command::answer(report, host_lines, view));
    };
    let host = crate::host::real();
    let result = command::run_to_end(
        &host,
        config,
        out,
        max_latency,
        host_channel,
        &mut on_progress,
        &mut print_answer,
    );
    let said = match progress::finish(&bar, result) {
        Ok(said) => said,
        Err(code) => return code,
    };
    progress::print_said(&said.stdout, &said.stderr);
    match said.ending {
        Ending::Done => EXIT_OK,
        Ending::Failed => EXIT_ERROR,
        Ending::OverLimit => EXIT_THRESHOLD,
    }
}
