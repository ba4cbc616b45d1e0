//! `cpushield load`: run the papers' background workloads for a while and
//! report what each did. Argument parsing and printing only; the work is in
//! cpushield-load.

use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_load::request::{self, LoadRequest};
use cpushield_report::output::Output;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield load`.
#[derive(Args)]
pub struct LoadArgs {
    /// Profiles and workloads to run (default: stress-kernel); see --list.
    #[arg(value_name = "PROFILE|WORKLOAD")]
    pub names: Vec<String>,
    /// List the profiles and workloads, then exit.
    #[arg(long)]
    pub list: bool,
    /// Confine the load to these CPUs (list 0-1 or mask 0x1); default unconfined.
    #[arg(long, value_name = "CPUS", value_parser = crate::args::cpu_set)]
    pub cpus: Option<CpuSet>,
    /// How long to run: 60s, 2m, 500ms; a bare number is seconds.
    #[arg(long, default_value = "60s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// Instances of each workload (of compute: per CPU), 1 to 64.
    #[arg(long, default_value_t = 1)]
    pub scale: u32,
    /// Directory for the load's files; a per-run directory is made there and removed.
    #[arg(long, default_value = "/var/tmp")]
    pub dir: PathBuf,
    /// Size cap per file-writing workload instance (fs, disknoise, filemove, iodisk): 1G, 256M, or bytes.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = request::parse_size)]
    pub size: u64,
    /// Also write the report as JSON to FILE ("-": stdout, the table then goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run stress-ng with these arguments instead of the built-in workloads.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub stress_ng: Option<String>,
    /// Flood another machine instead of loopback: ionet (netflood) sends UDP
    /// datagrams (and ICMP echo requests where a raw socket is permitted) to
    /// HOST:PORT, ttcp sends TCP data sets to a ttcp receiver there [PORT: 5001].
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with_all = ["listen", "stress_ng"])]
    pub peer: Option<String>,
    /// Let another machine flood us: ionet counts the UDP datagrams and ttcp the
    /// TCP data arriving on PORT (all addresses).
    #[arg(long, value_name = "PORT", conflicts_with = "stress_ng")]
    pub listen: Option<u16>,
}

/// Runs `cpushield load`.
pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        print!("{}", request::catalogue());
        return Ok(ExitCode::SUCCESS);
    }
    let spec = LoadRequest {
        names: args.names,
        stress_ng: args.stress_ng,
        peer: args.peer,
        listen: args.listen,
        cpus: args.cpus,
        scale: args.scale,
        dir: args.dir,
        size_cap: args.size,
    }
    .spec()?;
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
