//! `cpushield shield` (not yet implemented).

use clap::Args;
use std::process::ExitCode;

/// Arguments of `cpushield shield`.
#[derive(Args)]
pub struct ShieldArgs {}
/// Arguments of `cpushield unshield`.
#[derive(Args)]
pub struct UnshieldArgs {}
/// Arguments of `cpushield reset`.
#[derive(Args)]
pub struct ResetArgs {}
/// Arguments of `cpushield show`.
#[derive(Args)]
pub struct ShowArgs {}
/// Arguments of `cpushield boot-params`.
#[derive(Args)]
pub struct BootParamsArgs {}

/// Runs `cpushield shield`.
pub fn shield(_a: ShieldArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not yet") }
/// Runs `cpushield unshield`.
pub fn unshield(_a: UnshieldArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not yet") }
/// Runs `cpushield reset`.
pub fn reset(_a: ResetArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not yet") }
/// Runs `cpushield show`.
pub fn show(_a: ShowArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not yet") }
/// Runs `cpushield boot-params`.
pub fn boot_params(_a: BootParamsArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not yet") }
