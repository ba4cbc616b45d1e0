//! `cpushield load` (not yet implemented).

use clap::Args;
use std::process::ExitCode;

/// Arguments of `cpushield load`.
#[derive(Args)]
pub struct LoadArgs {}

/// Runs `cpushield load`.
pub fn run(_args: LoadArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'load' is not implemented yet")
}
