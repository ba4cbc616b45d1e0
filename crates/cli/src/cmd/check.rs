//! `cpushield check` (not yet implemented).

use clap::Args;
use std::process::ExitCode;

/// Arguments of `cpushield check`.
#[derive(Args)]
pub struct CheckArgs {}

/// Runs `cpushield check`.
pub fn run(_args: CheckArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'check' is not implemented yet")
}
