//! `cpushield tune`: this machine's best run-time settings for a shielded
//! CPU, found by interleaved A/B trials under load, written as a config
//! file `apply` applies. Runs inside a private PID namespace, as `compare`.

use crate::args::{EXIT_ERROR, EXIT_OK};
use crate::progress;
use clap::Args;
use cpushield_tune::command::{self, TuneRequest};
use cpushield_tune::real::TuneConfig;
use cpushield_tune::render;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield tune`.
#[derive(Args)]
pub struct TuneArgs {
    #[command(flatten)]
    request: TuneRequest,
    /// Report directory (default ./cpushield-tune-<time>/).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `cpushield tune`.
pub fn tune(args: TuneArgs) -> anyhow::Result<ExitCode> {
    let host = crate::host::real();
    let config = args.request.config(host.kernel())?;
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
