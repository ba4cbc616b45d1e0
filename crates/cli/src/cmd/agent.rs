//! `cpushield agent`: keeps the shield true and serves Prometheus metrics
//! (its options are [`Choices`]; the start-up and the loop are
//! `cpushield_agent`; here only what `--once` prints).

use crate::args::EXIT_OK;
use cpushield_agent::start::Choices;
use std::process::ExitCode;

/// Runs `cpushield agent`.
pub fn agent(choices: Choices) -> anyhow::Result<ExitCode> {
    if let Some(metrics) = cpushield_agent::start::run(
        &crate::host::real(),
        crate::host::reserve_dir(),
        &choices,
        env!("CARGO_PKG_VERSION"),
    )? {
        print!("{metrics}");
    }
    Ok(ExitCode::from(EXIT_OK))
}
