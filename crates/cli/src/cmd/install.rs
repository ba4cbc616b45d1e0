//! `cpushield install` and `uninstall`: the arguments and the printing; the
//! planners, the file layer and the manifest are `cpushield_install`.

use crate::args::EXIT_OK;
use clap::Args;
use cpushield_install::{InstallRequest, DEFAULT_UNIT_DIR};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cpushield install`.
#[derive(Args)]
pub struct InstallArgs {
    /// Install under this directory instead of / (an image being prepared, a test).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// The unit directory under the root (/lib/systemd/system for a package).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_UNIT_DIR)]
    unit_dir: PathBuf,
    /// The cpushield binary the units run (default: this one).
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// Print what would be done, one step a line, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Arguments of `cpushield uninstall`.
#[derive(Args)]
pub struct UninstallArgs {
    /// Uninstall from under this directory instead of /.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Print what would be done, one step a line, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `cpushield install`.
pub fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let request = InstallRequest {
        root: args.root,
        unit_dir: args.unit_dir,
        bin: args.bin,
        dry_run: args.dry_run,
    };
    cpushield_install::install(&request, &mut |line| println!("{line}"))?;
    Ok(ExitCode::from(EXIT_OK))
}

/// Runs `cpushield uninstall`.
pub fn uninstall(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    cpushield_install::uninstall(&args.root, args.dry_run, &mut |line| println!("{line}"))?;
    Ok(ExitCode::from(EXIT_OK))
}
