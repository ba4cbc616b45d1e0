//! `cpushield compare` and `cpushield demo`: the papers' experiments in one
//! command; `demo` is the same code path with short durations.

use crate::args::{EXIT_ERROR, EXIT_OK, EXIT_THRESHOLD};
use crate::progress;
use clap::Args;
use cpushield_compare::command::{self, Ending, View};
use cpushield_compare::request::{CompareRequest, DemoRequest};
use cpushield_compare::{CompareConfig, Scope};
use cpushield_report::CompareReport;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield compare`.
#[derive(Args)]
pub struct CompareArgs {
    #[command(flatten)]
    request: CompareRequest,
    /// Print every table after the answer: each scenario's figures, the idle
    /// calibration, the causes, the samples below each threshold, the notes
    /// and the warnings (all of it is in report.html and report.json anyway).
    #[arg(long, short)]
    verbose: bool,
}

/// Arguments of `cpushield demo`.
#[derive(Args)]
pub struct DemoArgs {
    #[command(flatten)]
    request: DemoRequest,
    /// Print every table after the answer (all of it is in report.html and
    /// report.json anyway).
    #[arg(long, short)]
    verbose: bool,
}

/// Runs `cpushield compare`.
pub fn compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let r = args.request;
    let config = r.config(&crate::host::real())?;
    let view = view(args.verbose, 0);
    execute(
        "compare",
        config,
        r.out,
        r.max_latency,
        view,
        r.host_channel,
    )
}

/// Runs `cpushield demo`: every scenario, the stress-kernel load, short runs.
pub fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let config = args.request.config(&crate::host::real())?;
    let intro = command::demo_intro(&config, terminal_width());
    for line in &intro {
        println!("{line}");
    }
    let view = view(args.verbose, intro.len());
    execute("demo", config, args.request.out, None, view, None)
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
