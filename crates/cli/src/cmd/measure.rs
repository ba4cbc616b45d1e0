//! `cpushield measure` (not yet implemented).

use clap::Args;
use std::process::ExitCode;

/// Arguments of `cpushield measure`.
#[derive(Args)]
pub struct MeasureArgs {}

/// Runs `cpushield measure`.
pub fn run(_args: MeasureArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'measure' is not implemented yet")
}
