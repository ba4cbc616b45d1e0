//! `cpushield load`: run the papers' background workloads for a while and
//! report what each did. Argument parsing and printing only; the work, and
//! most options ([`LoadRequest`]), are cpushield-load's.

use clap::Args;
use cpushield_load::request::{self, LoadRequest};
use cpushield_report::output::Output;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield load`.
#[derive(Args)]
pub struct LoadArgs {
    /// List the profiles and workloads, then exit.
    #[arg(long)]
    list: bool,
    /// How long to run: 60s, 2m, 500ms; a bare number is seconds.
    #[arg(long, default_value = "60s", value_parser = cpushield_cpuset::parse_duration_arg)]
    duration: Duration,
    #[command(flatten)]
    request: LoadRequest,
    /// Also write the report as JSON to FILE ("-": stdout, the table then goes to stderr).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs `cpushield load`.
pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        print!("{}", request::catalogue());
        return Ok(ExitCode::SUCCESS);
    }
    let spec = args.request.spec()?;
    let json = Output::open(args.json.as_deref(), "--json")?;
    let kernel = crate::host::real().shared_kernel();
    let report = request::run_for(kernel, &spec, args.duration, &mut |line| {
        eprintln!("cpushield: {line}")
    })?;
    let table = report.render();
    if matches!(json, Some(Output::Stdout)) {
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    if let Some(out) = json {
        out.write(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    }
    if let Some(first) = report.failures.first() {
        anyhow::bail!("workload {first}");
    }
    Ok(ExitCode::SUCCESS)
}
