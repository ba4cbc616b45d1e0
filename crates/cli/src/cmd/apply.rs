//! `cpushield apply`: make the shield match the config file, through the
//! same shield, unshield and reset calls (and so the same saved state) as the
//! `shield` commands.

use crate::args::EXIT_OK;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cpushield apply`.
#[derive(Args)]
pub struct ApplyArgs {
    /// The config file.
    #[arg(long, value_name = "PATH", default_value = cpushield_config::DEFAULT_PATH)]
    config: PathBuf,
    /// Print the plan, one change per line, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `cpushield apply`.
pub fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let options = crate::host::shield_options(false);
    let host = crate::host::real();
    cpushield_runtime::apply::apply_file(
        &host,
        &args.config,
        args.dry_run,
        options,
        &mut |text| print!("{text}"),
    )?;
    Ok(ExitCode::from(EXIT_OK))
}
