//! `cpushield measure latency | determinism | noise | net`: parse arguments, run the
//! probe from cpushield-measure, print the report (text, JSON, cyclictest
//! histogram) and pick the exit code. Measuring is in the library.

use crate::args::{EXIT_OK, EXIT_THRESHOLD};
use crate::progress::{self, Bar};
use anyhow::Context;
use clap::{Args, Subcommand};
use cpushield_cpuset::CpuSet;
use cpushield_measure::net::{self, Link, NetConfig, Protocol, ServeConfig};
use cpushield_measure::render::net as render_net;
use cpushield_measure::render::{cyclictest, text};
use cpushield_measure::request::{fifo, DeterminismRequest, LatencyRequest, NoiseRequest};
use cpushield_measure::trace::{self, SpikeTracing, TraceAbove};
use cpushield_measure::{determinism, json, noise, Progress, Warning};
use cpushield_report::output::{self, Output};
use cpushield_rt::sched::PlaceFn;
use cpushield_shield::placement;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Arguments of `cpushield measure`.
#[derive(Args)]
pub struct MeasureArgs {
    #[command(subcommand)]
    probe: Probe,
}

#[derive(Subcommand)]
enum Probe {
    /// Periodic wakeup latency: timer wakeups as cyclictest (optionally waking early
    /// and spinning), a device's periodic interrupt (--source rtc: Brosky &
    /// Rotolo's realfeel; --source hpet), or the kernel's timerlat tracer
    /// (--source timerlat: IRQ and thread latency measured in the kernel).
    Latency(LatencyArgs),
    /// Time a fixed CPU-bound loop again and again: ideal, max, jitter (Brosky & Rotolo figures 1-4).
    Determinism(DeterminismArgs),
    /// Busy-loop on the clock and histogram the gaps: OS noise (oslat-like).
    Noise(NoiseArgs),
    /// Messaging latency and throughput vs size (the Hyades paper): UDP and TCP
    /// ping-pong between two pinned endpoints, over loopback, a veth pair, or
    /// to `measure net --listen` on another machine.
    Net(NetArgs),
}

#[derive(Args)]
struct LatencyArgs {
    #[command(flatten)]
    probe: LatencyRequest,
    /// Write cyclictest's -h histogram text to FILE.
    #[arg(long, value_name = "FILE")]
    histogram: Option<PathBuf>,
    /// Microsecond bins of --histogram [default: enough to hold the largest latency].
    #[arg(long, value_name = "N", requires = "histogram", value_parser = cyclictest::parse_bins)]
    histogram_bins: Option<usize>,
    /// Write the JSON report (docs/measure-json.md) to FILE; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Exit with code 2 if any latency exceeds this (e.g. 100us).
    #[arg(long, value_parser = cpushield_cpuset::parse_duration_arg)]
    max_latency: Option<Duration>,
    /// Trace the measured CPUs' kernel events and attribute every latency above this to its causes.
    #[arg(long, value_parser = cpushield_cpuset::parse_duration_arg)]
    trace_above: Option<Duration>,
    /// Trace the measured CPUs and explain every sample above four times the
    /// p99 of a 2-second run made first (as `compare` does): guest causes vs
    /// time outside the guest, kernel vs user latency.
    #[arg(long, conflicts_with = "trace_above")]
    attribute: bool,
    /// Where --trace-above keeps each spike's raw trace window [default: ./cpushield-trace-<time>].
    #[arg(long, value_name = "DIR")]
    trace_dir: Option<PathBuf>,
    /// In a VM, with --attribute or --trace-above: the virtio-serial port
    /// where the host side (`cpushield vm watch`) answers what kept a vCPU
    /// from running (default: the port named org.cpushield.vm.0, when there
    /// is one; `none`: do not ask).
    #[arg(long, value_name = "PATH")]
    host_channel: Option<PathBuf>,
}

#[derive(Args)]
struct DeterminismArgs {
    #[command(flatten)]
    probe: DeterminismRequest,
    /// Write the JSON report to FILE; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct NoiseArgs {
    #[command(flatten)]
    probe: NoiseRequest,
    /// Write the JSON report to FILE; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs `cpushield measure`.
pub fn run(args: MeasureArgs) -> anyhow::Result<ExitCode> {
    match args.probe {
        Probe::Latency(a) => run_latency(a),
        Probe::Determinism(a) => run_determinism(a),
        Probe::Noise(a) => run_noise(a),
        Probe::Net(a) => run_net(a),
    }
}

/// How the measuring threads reach `cpus`: into the shield's cpuset when
/// `cpushield shield` fenced them off (the placement `compare` uses), else by
/// plain affinity. Refuses, in one line naming the fix, when that cannot work.
fn placer(cpus: &CpuSet) -> anyhow::Result<Option<PlaceFn>> {
    super::reserved::guard("measure", cpus, cpushield_rt::reserve::CpuUse::Place)?;
    let is_root = nix::unistd::geteuid().is_root();
    placement::probe_placer(&crate::host::real(), cpus, is_root).map_err(anyhow::Error::msg)
}

fn online() -> anyhow::Result<CpuSet> {
    cpushield_kernel::online_cpus(crate::host::real().kernel()).context("reading the online CPUs")
}

/// Whether `path` is `-`, standard output.
fn is_stdout(path: &Option<PathBuf>) -> bool {
    path.as_deref().is_some_and(output::is_stdout)
}

/// Shows a probe's progress `p` on `bar` (of 1000 steps), counting `what`.
fn show(bar: &Bar, p: Progress, what: &str) {
    bar.update((p.fraction * 1000.0) as u64, || p.message(what));
}

fn print_warnings(warnings: &[Warning]) {
    for line in text::warnings(warnings).lines() {
        eprintln!("cpushield: {line}");
    }
}

/// The flag SIGINT and SIGTERM set to end a probe early.
fn stop_flag() -> anyhow::Result<&'static AtomicBool> {
    cpushield_measure::signal::stop_on_signals().context("installing the SIGINT handler")
}

/// How determinism, noise and net end: the warnings, the text unless the
/// JSON goes to stdout, the JSON.
fn finish<R: json::Kind>(
    report: &R,
    warnings: &[Warning],
    text: String,
    json: &Option<PathBuf>,
    json_out: Option<Output>,
) -> anyhow::Result<ExitCode> {
    print_warnings(warnings);
    if !is_stdout(json) {
        print!("{text}");
    }
    if let Some(out) = json_out {
        out.write(&json::to_string(report))?;
    }
    Ok(ExitCode::from(EXIT_OK))
}

fn run_latency(a: LatencyArgs) -> anyhow::Result<ExitCode> {
    let mut config = a.probe.config();
    config.placer = placer(&config.cpus)?;
    config.validate(&online()?)?;
    let json_out = Output::open(a.json.as_deref(), "--json")?;
    let hist_out = Output::open(a.histogram.as_deref(), "--histogram")?;
    let stop = stop_flag()?;
    let host = crate::host::real();
    let tracing = TraceAbove::from_options(a.trace_above, a.attribute).map(|above| SpikeTracing {
        above,
        dir: a.trace_dir.clone(),
        kernel: cpushield_check::trace_context(host.kernel(), &config.cpus),
        host_channel: a.host_channel.clone(),
    });
    if let Some(p) = &a.host_channel {
        cpushield_vm::blame::check_channel_arg(p).map_err(anyhow::Error::msg)?;
    }
    let bar = Bar::new(1000, progress::PROBE_STYLE);
    let traced = trace::run_latency(
        &host,
        config,
        tracing,
        stop,
        &mut |p| show(&bar, p, "samples"),
        &mut |e| eprintln!("cpushield: warning: {e}"),
    );
    bar.clear();
    let traced = traced?;
    let report = traced.report;
    if let Some(spikes) = &traced.spikes {
        print!("{}", text::spikes(spikes));
    }
    print_warnings(&report.run.warnings);
    if !is_stdout(&a.json) && !is_stdout(&a.histogram) {
        print!("{}", text::latency(&report));
    }
    if let Some(out) = hist_out {
        out.write(&cyclictest::histogram_of(&report, a.histogram_bins))?;
    }
    if let Some(out) = json_out {
        out.write(&json::to_string(&report))?;
    }
    if let Some(over) = a
        .max_latency
        .and_then(|l| text::over_max_latency(&report, l))
    {
        eprintln!("cpushield: {over}");
        return Ok(ExitCode::from(EXIT_THRESHOLD));
    }
    Ok(ExitCode::from(EXIT_OK))
}

fn run_determinism(a: DeterminismArgs) -> anyhow::Result<ExitCode> {
    let mut config = a.probe.config();
    config.placer = placer(&config.cpus)?;
    config.validate(&online()?)?;
    let json_out = Output::open(a.json.as_deref(), "--json")?;
    let stop = stop_flag()?;
    let bar = Bar::new(1000, progress::PROBE_STYLE);
    let report = determinism::run(&crate::host::real(), &config, stop, &mut |p| {
        show(&bar, p, "runs")
    });
    bar.clear();
    let report = report?;
    let text = text::determinism(&report);
    finish(&report, &report.run.warnings, text, &a.json, json_out)
}

fn run_noise(a: NoiseArgs) -> anyhow::Result<ExitCode> {
    let mut config = a.probe.config();
    config.placer = placer(&config.cpus)?;
    config.validate(&online()?)?;
    let json_out = Output::open(a.json.as_deref(), "--json")?;
    let stop = stop_flag()?;
    let bar = Bar::new(1000, progress::PROBE_STYLE);
    let report = noise::run(&crate::host::real(), &config, stop, &mut |p| {
        show(&bar, p, "loops")
    });
    bar.clear();
    let report = report?;
    let text = text::noise(&report);
    finish(&report, &report.run.warnings, text, &a.json, json_out)
}

#[derive(Args)]
struct NetArgs {
    /// CPUs of the client and the server end, `A,B` (`A` alone: both on A); with
    /// --listen, the server's CPU. A shielded CPU is entered as `compare` does.
    #[arg(long, value_name = "A,B", value_parser = net::parse_endpoint_cpus)]
    cpus: (usize, usize),
    /// Message sizes, bytes or K (1024): 8 to 64K. UDP sends 64K as 65507, the
    /// largest datagram.
    #[arg(long, value_parser = sizes_arg, default_value = "64,256,1K,4K,16K,64K")]
    sizes: NetSizes,
    /// Protocols, in run order.
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["udp", "tcp"])]
    protocols: Vec<Protocol>,
    /// How long to measure each protocol and size.
    #[arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "1s")]
    duration: Duration,
    /// Round trips before each measurement, not recorded.
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    /// SCHED_FIFO priority 1..99 of both ends [default: SCHED_OTHER].
    #[arg(long)]
    priority: Option<u8>,
    /// Put the two ends in two network namespaces joined by a veth pair (made
    /// for the run and removed after it, on Ctrl-C too); needs root and iproute2.
    #[arg(long, conflicts_with_all = ["peer", "listen"])]
    veth: bool,
    /// Measure against `cpushield measure net --listen PORT` on HOST.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "listen")]
    peer: Option<String>,
    /// Be the server end for a client on another machine: echo UDP and TCP on
    /// PORT (all addresses) until Ctrl-C.
    #[arg(long, value_name = "PORT")]
    listen: Option<u16>,
    /// Write the JSON report to FILE; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `--sizes`, kept as a type of its own so clap does not split it.
#[derive(Clone)]
struct NetSizes(Vec<usize>);

fn sizes_arg(text: &str) -> Result<NetSizes, String> {
    net::parse_sizes(text).map(NetSizes)
}

fn run_net(a: NetArgs) -> anyhow::Result<ExitCode> {
    let (client_cpu, server_cpu) = a.cpus;
    if let Some(port) = a.listen {
        let mut config = ServeConfig::on_port(client_cpu, port);
        config.priority = a.priority.and_then(fifo);
        config.placer = placer(&CpuSet::from_cpus([client_cpu]))?;
        let stop = stop_flag()?;
        let summary = net::serve(&crate::host::real(), &config, stop, |udp, tcp| {
            eprintln!(
                "cpushield: echoing UDP on {udp} and TCP on {tcp} on CPU {client_cpu}; Ctrl-C stops"
            );
        })?;
        println!("{summary}");
        return Ok(ExitCode::from(EXIT_OK));
    }
    let mut config = NetConfig::new(client_cpu, server_cpu);
    config.link = Link::from_options(a.peer.as_deref(), a.veth).map_err(anyhow::Error::msg)?;
    config.sizes = a.sizes.0;
    config.protocols = a.protocols;
    config.duration = a.duration;
    config.warmup = a.warmup;
    config.priority = a.priority.and_then(fifo);
    config.placer = placer(&config.cpus())?;
    config.validate(&online()?)?;
    let json_out = Output::open(a.json.as_deref(), "--json")?;
    let stop = stop_flag()?;
    let report = net::run(&crate::host::real(), &config, stop)?;
    let text = render_net::report(&report);
    finish(&report, &report.run.warnings, text, &a.json, json_out)
}
