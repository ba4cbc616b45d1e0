//! `cpushield run` (not yet implemented).

use clap::Args;
use std::process::ExitCode;

/// Arguments of `cpushield run`.
#[derive(Args)]
pub struct RunArgs {}

/// Runs `cpushield run`.
pub fn run(_args: RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'run' is not implemented yet")
}
