//! `cpushield check`: what still reaches a shielded CPU, why, and the fix.

use crate::args;
use clap::Args;
use cpushield_check::{render, CheckOptions};
use cpushield_cpuset::CpuSet;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield check`.
#[derive(Args)]
pub struct CheckArgs {
    /// CPUs to check, as a list (1,3-4) or a mask (0x8). Default: the shielded CPUs.
    #[arg(long, value_parser = CpuSet::parse_arg)]
    pub cpus: Option<CpuSet>,
    /// How long to watch the CPUs (e.g. 5s, 500ms).
    #[arg(long, default_value = "5s", value_parser = cpushield_cpuset::parse_duration_arg)]
    pub interval: Duration,
    /// How often to sample the threads' run time during the interval.
    #[arg(long, default_value = "100ms", value_parser = cpushield_cpuset::parse_duration_arg, hide = true)]
    pub sample_every: Duration,
    /// In a VM: the virtio-serial port where the host side (`cpushield vm
    /// watch`) answers what kept each vCPU from running during the check
    /// (default: the port named org.cpushield.vm.0, when there is one;
    /// `none`: do not ask).
    #[arg(long, value_name = "PATH")]
    pub host_channel: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// After the verdict and the fixes, every finding with its evidence and
    /// what ran on the CPUs.
    #[arg(long, short)]
    pub verbose: bool,
}

/// Runs `cpushield check`: exit 0 when clean, 3 when something breaks the shield.
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let opts = CheckOptions {
        interval: args.interval,
        sample_every: args.sample_every,
    };
    let checked = cpushield_check::command::check_host(
        &crate::host::real(),
        args.cpus,
        opts,
        args.host_channel.as_deref(),
    )?;
    let (report, set_by) = (&checked.report, &checked.set_by);
    if args.json {
        println!("{}", render::json_with_set_by(report, set_by)?);
    } else {
        print!(
            "{}",
            render::render_with_set_by(report, set_by, args.verbose)
        );
    }
    Ok(ExitCode::from(if report.breaks_shield {
        args::EXIT_FINDINGS
    } else {
        args::EXIT_OK
    }))
}
