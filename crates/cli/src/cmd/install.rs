//! `cpushield install` and `uninstall`: the printing; the options
//! ([`InstallRequest`], [`UninstallRequest`]), the planners, the file layer
//! and the manifest are `cpushield_install`.

use crate::args::EXIT_OK;
use cpushield_install::{InstallRequest, UninstallRequest};
use std::process::ExitCode;

/// Runs `cpushield install`.
pub fn install(request: InstallRequest) -> anyhow::Result<ExitCode> {
    cpushield_install::install(&request, &mut |line| println!("{line}"))?;
    Ok(ExitCode::from(EXIT_OK))
}

/// Runs `cpushield uninstall`.
pub fn uninstall(request: UninstallRequest) -> anyhow::Result<ExitCode> {
    cpushield_install::uninstall(&request, &mut |line| println!("{line}"))?;
    Ok(ExitCode::from(EXIT_OK))
}
