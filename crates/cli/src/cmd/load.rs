//! `cpushield load`: run the papers' background workloads for a while and
//! report what each did. Argument parsing and printing only; the work is in
//! cpushield-load.

use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_load::{
    parse_selection, stressng, Load, LoadSpec, Profile, Remote, Waited, Workload,
};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
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
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = size)]
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

/// ttcp's traditional port, the default of `--peer HOST`.
pub const DEFAULT_PEER_PORT: u16 = 5001;

/// Set by SIGINT, SIGTERM or SIGHUP: stop the load, report, exit.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Runs `cpushield load`.
pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        print!("{}", list());
        return Ok(ExitCode::SUCCESS);
    }
    if args.duration.is_zero() {
        anyhow::bail!("--duration 0s: a load needs a positive duration; use e.g. --duration 60s");
    }
    let spec = spec(&args)?;
    if let Some(path) = &args.json {
        crate::output::check_file(path, "--json")?;
    }
    install_stop_handlers();
    let load = Load::start(crate::host::real().shared_kernel(), &spec)?;
    eprintln!(
        "cpushield: load running: {} on {} for {}; supervisor pid {}, files under {}; Ctrl-C stops it",
        describe(&spec, &args),
        spec.cpus
            .as_ref()
            .map_or("all CPUs (unconfined)".to_string(), |c| format!("CPUs {c}")),
        humantime::format_duration(args.duration),
        load.pids()[0],
        load.run_dir().display(),
    );
    let waited = load.wait(args.duration, &STOP)?;
    let report = load.stop();
    if waited == Waited::Interrupted {
        eprintln!(
            "cpushield: load stopped by a signal after {:.1} s",
            report.seconds
        );
    }
    let table = report.render();
    match &args.json {
        Some(path) if path.as_os_str() == "-" => {
            eprint!("{table}");
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        Some(path) => {
            print!("{table}");
            crate::output::write_file(
                path,
                "--json",
                (serde_json::to_string_pretty(&report)? + "\n").as_bytes(),
            )?;
        }
        None => print!("{table}"),
    }
    if let Some(first) = report.failures.first() {
        anyhow::bail!("workload {first}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The request from the arguments.
fn spec(args: &LoadArgs) -> anyhow::Result<LoadSpec> {
    let mut spec = match &args.stress_ng {
        Some(text) => {
            if !args.names.is_empty() {
                anyhow::bail!(
                    "--stress-ng runs stress-ng instead of the built-in workloads: drop '{}' or --stress-ng",
                    args.names.join(" ")
                );
            }
            let words = stressng::split_args(text)
                .map_err(|e| anyhow::anyhow!("--stress-ng \"{text}\": {e}"))?;
            if words.is_empty() {
                anyhow::bail!("--stress-ng is empty: give stressors, e.g. --stress-ng \"--cpu 1\"");
            }
            let mut spec = LoadSpec::new(Vec::new());
            spec.stress_ng = Some(words);
            spec
        }
        None => LoadSpec::new(parse_selection(&args.names)?),
    };
    spec.remote = remote(args, &spec.workloads)?;
    spec.cpus = args.cpus.clone();
    spec.scale = args.scale;
    spec.dir = args.dir.clone();
    spec.size_cap = args.size;
    Ok(spec)
}

/// `--peer` / `--listen`, refused when no selected workload talks to a network.
fn remote(args: &LoadArgs, workloads: &[Workload]) -> anyhow::Result<Option<Remote>> {
    let flag = match (&args.peer, args.listen) {
        (Some(_), _) => "--peer",
        (None, Some(_)) => "--listen",
        (None, None) => return Ok(None),
    };
    let networked = [Workload::Netflood, Workload::Ttcp];
    if !workloads.iter().any(|w| networked.contains(w)) || args.names.is_empty() {
        anyhow::bail!(
            "{flag} applies to the network workloads: name ionet (netflood) or ttcp, e.g. cpushield load ionet {flag} ..."
        );
    }
    if let Some(port) = args.listen {
        if port == 0 {
            anyhow::bail!(
                "--listen 0: give the port the other machine sends to, e.g. --listen 5001"
            );
        }
        return Ok(Some(Remote::Listen(port)));
    }
    let text = args.peer.as_deref().unwrap_or_default();
    Ok(Some(Remote::Peer(peer_addr(text)?)))
}

/// `HOST[:PORT]` (an IPv6 address in brackets with a port) to an address.
fn peer_addr(text: &str) -> anyhow::Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let bad = || {
        anyhow::anyhow!(
            "--peer '{text}' is not HOST[:PORT]: give the other machine, e.g. --peer 192.0.2.7 or --peer 192.0.2.7:5001"
        )
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let with_port = match t.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{DEFAULT_PEER_PORT}"),
        Ok(ip) => format!("{ip}:{DEFAULT_PEER_PORT}"),
        Err(_)
            if t.rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok()) =>
        {
            t.to_string()
        }
        Err(_) => format!("{t}:{DEFAULT_PEER_PORT}"),
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|_| bad())?
        .next()
        .ok_or_else(bad)?;
    if addr.port() == 0 {
        return Err(bad());
    }
    Ok(addr)
}

fn describe(spec: &LoadSpec, args: &LoadArgs) -> String {
    if let Some(words) = &spec.stress_ng {
        return format!("stress-ng {}", words.join(" "));
    }
    let names: Vec<&str> = spec.workloads.iter().map(|w| w.name()).collect();
    let scale = if args.scale > 1 {
        format!(" x{}", args.scale)
    } else {
        String::new()
    };
    let remote = match spec.remote {
        Some(Remote::Peer(a)) => format!(" flooding {a}"),
        Some(Remote::Listen(p)) => format!(" receiving on port {p}"),
        None => String::new(),
    };
    format!("{}{scale}{remote}", names.join(", "))
}

fn install_stop_handlers() {
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The `--list` text.
fn list() -> String {
    let mut out = String::from("Profiles (default: stress-kernel):\n");
    for p in Profile::ALL {
        let names: Vec<&str> = p.workloads().iter().map(|w| w.name()).collect();
        let _ = writeln!(out, "  {:<14} {}", p.name(), p.about());
        let _ = writeln!(out, "  {:<14} = {}", "", names.join(" "));
    }
    out.push_str("\nWorkloads (source; one op is):\n");
    for w in Workload::ALL {
        let _ = writeln!(out, "  {:<11} {}", w.name(), w.about());
        let _ = writeln!(out, "  {:<11} {}; op = {}", "", w.source(), w.unit());
    }
    out.push_str("\nOr --stress-ng \"ARGS\" to run stress-ng (if installed) instead.\n");
    out
}

/// clap value parser for a size: bytes, or a number with K, M, G, T, P
/// (binary multiples, optional `iB`/`B`).
pub fn size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || format!("'{text}' is not a size: use e.g. 64M, 1G or a byte count");
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let number: u64 = t[..digits].parse().map_err(|_| bad())?;
    let suffix = t[digits..].trim().to_ascii_uppercase();
    let suffix = suffix.trim_end_matches("IB").trim_end_matches('B');
    let shift = match suffix {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "P" => 50,
        _ => return Err(bad()),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(size("64M"), Ok(64 << 20));
        assert_eq!(size("1GiB"), Ok(1 << 30));
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("2kb"), Ok(2048));
        assert!(size("lots").is_err());
        assert!(size("1X").is_err());
        assert!(size("99999999P").is_err());
    }

    #[test]
    fn a_peer_gets_ttcps_port_unless_it_names_one() {
        assert_eq!(
            peer_addr("192.0.2.7").unwrap().to_string(),
            "192.0.2.7:5001"
        );
        assert_eq!(peer_addr("192.0.2.7:9").unwrap().to_string(), "192.0.2.7:9");
        assert_eq!(peer_addr("::1").unwrap().to_string(), "[::1]:5001");
        assert_eq!(peer_addr("[::1]:7").unwrap().to_string(), "[::1]:7");
        for bad in ["", "192.0.2.7:0", "no such host!"] {
            assert!(
                peer_addr(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("HOST[:PORT]"),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_list_names_every_profile_and_workload() {
        let text = list();
        for p in Profile::ALL {
            assert!(text.contains(p.name()));
        }
        for w in Workload::ALL {
            assert!(text.contains(w.about()));
        }
    }
}
