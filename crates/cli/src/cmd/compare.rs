//! `cpushield compare` (not yet implemented).

use clap::Args;
use std::process::ExitCode;

/// Arguments of `cpushield compare`.
#[derive(Args)]
pub struct CompareArgs {}

/// Arguments of `cpushield demo`.
#[derive(Args)]
pub struct DemoArgs {}

/// Runs `cpushield compare`.
pub fn compare(_args: CompareArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'compare' is not implemented yet")
}

/// Runs `cpushield demo`.
pub fn demo(_args: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'demo' needs the measure, load and compare issues, which have not landed yet")
}
