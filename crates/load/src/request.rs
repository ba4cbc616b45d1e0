//! A load as a command line asks for it (`cpushield load`, and the `--load`
//! of `compare`, `demo` and `tune`): names to a [`LoadSpec`], the default load
//! where no C compiler is installed, sizes and peers, the catalogue and the
//! one-line description, the stop flag that SIGINT, SIGTERM or SIGHUP set,
//! and `cpushield load`'s run from start to stop.

use crate::{
    parse_selection, stressng, Load, LoadError, LoadReport, LoadSpec, Profile, Remote, RunningLoad,
    Waited, Workload,
};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// ttcp's traditional port, the default of `--peer HOST`.
pub const DEFAULT_PEER_PORT: u16 = 5001;

/// Why a requested load cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A name or setting the catalogue refuses.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Options that do not go together, with the remedy.
    #[error("{0}")]
    Refused(String),
}

/// What `cpushield load` was asked to run (its options but `--list`,
/// `--duration` and `--json`).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LoadRequest {
    /// Profiles and workloads to run (default: stress-kernel); see --list.
    #[cfg_attr(feature = "clap", arg(value_name = "PROFILE|WORKLOAD"))]
    pub names: Vec<String>,
    /// Confine the load to these CPUs (list 0-1 or mask 0x1); default unconfined.
    #[cfg_attr(feature = "clap", arg(long, value_name = "CPUS", value_parser = CpuSet::parse_arg))]
    pub cpus: Option<CpuSet>,
    /// Instances of each workload (of compute: per CPU), 1 to 64.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub scale: u32,
    /// Directory for the load's files; a per-run directory is made there and removed.
    #[cfg_attr(feature = "clap", arg(long, default_value = "/var/tmp"))]
    pub dir: PathBuf,
    /// Size cap per file-writing workload instance (fs, disknoise, filemove, iodisk): 1G, 256M, or bytes.
    #[cfg_attr(
        feature = "clap",
        arg(long = "size", value_name = "SIZE", default_value = "1G", value_parser = parse_size)
    )]
    pub size_cap: u64,
    /// Run stress-ng with these arguments instead of the built-in workloads.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "ARGS", allow_hyphen_values = true)
    )]
    pub stress_ng: Option<String>,
    /// Flood another machine instead of loopback: ionet (netflood) sends UDP
    /// datagrams (and ICMP echo requests where a raw socket is permitted) to
    /// HOST:PORT, ttcp sends TCP data sets to a ttcp receiver there [PORT: 5001].
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "HOST[:PORT]", conflicts_with_all = ["listen", "stress_ng"])
    )]
    pub peer: Option<String>,
    /// Let another machine flood us: ionet counts the UDP datagrams and ttcp the
    /// TCP data arriving on PORT (all addresses).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PORT", conflicts_with = "stress_ng")
    )]
    pub listen: Option<u16>,
}

impl LoadRequest {
    /// The spec to start; refuses, in one line naming the remedy, names with
    /// `--stress-ng`, an empty `--stress-ng`, and `--peer`/`--listen` without a
    /// network workload named.
    pub fn spec(&self) -> Result<LoadSpec, RequestError> {
        let mut spec = match &self.stress_ng {
            Some(text) => {
                if !self.names.is_empty() {
                    return Err(RequestError::Refused(format!(
                        "--stress-ng runs stress-ng instead of the built-in workloads: drop '{}' or --stress-ng",
                        self.names.join(" ")
                    )));
                }
                let words = stressng::split_args(text)
                    .map_err(|e| RequestError::Refused(format!("--stress-ng \"{text}\": {e}")))?;
                if words.is_empty() {
                    return Err(RequestError::Refused(
                        "--stress-ng is empty: give stressors, e.g. --stress-ng \"--cpu 1\"".into(),
                    ));
                }
                let mut spec = LoadSpec::new(Vec::new());
                spec.stress_ng = Some(words);
                spec
            }
            None => LoadSpec::new(parse_selection(&self.names)?),
        };
        spec.remote = self.remote(&spec.workloads)?;
        spec.cpus = self.cpus.clone();
        spec.scale = self.scale;
        spec.dir = self.dir.clone();
        spec.size_cap = self.size_cap;
        Ok(spec)
    }

    /// `--peer` / `--listen`, refused when no named workload talks to a network.
    fn remote(&self, workloads: &[Workload]) -> Result<Option<Remote>, RequestError> {
        let flag = match (&self.peer, self.listen) {
            (Some(_), _) => "--peer",
            (None, Some(_)) => "--listen",
            (None, None) => return Ok(None),
        };
        let networked = [Workload::Netflood, Workload::Ttcp];
        if !workloads.iter().any(|w| networked.contains(w)) || self.names.is_empty() {
            return Err(RequestError::Refused(format!(
                "{flag} applies to the network workloads: name ionet (netflood) or ttcp, e.g. cpushield load ionet {flag} ..."
            )));
        }
        if let Some(port) = self.listen {
            if port == 0 {
                return Err(RequestError::Refused(
                    "--listen 0: give the port the other machine sends to, e.g. --listen 5001"
                        .into(),
                ));
            }
            return Ok(Some(Remote::Listen(port)));
        }
        let text = self.peer.as_deref().unwrap_or_default();
        Ok(Some(Remote::Peer(
            peer_addr(text).map_err(RequestError::Refused)?,
        )))
    }
}

/// `HOST[:PORT]` (an IPv6 address in brackets with a port) to an address;
/// without a port, [`DEFAULT_PEER_PORT`].
pub fn peer_addr(text: &str) -> Result<SocketAddr, String> {
    let bad = || {
        format!(
            "--peer '{text}' is not HOST[:PORT]: give the other machine, e.g. --peer 192.0.2.7 or --peer 192.0.2.7:5001"
        )
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let with_port = match t.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]:{DEFAULT_PEER_PORT}"),
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

/// A size: bytes, or a number with K, M, G, T, P (binary multiples,
/// optional `iB`/`B`).
pub fn parse_size(text: &str) -> Result<u64, String> {
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

/// What `spec` runs, in a few words: the workloads (or the stress-ng
/// command), the scale and the remote end.
pub fn describe(spec: &LoadSpec) -> String {
    if let Some(words) = &spec.stress_ng {
        return format!("stress-ng {}", words.join(" "));
    }
    let names: Vec<&str> = spec.workloads.iter().map(|w| w.name()).collect();
    let scale = if spec.scale > 1 {
        format!(" x{}", spec.scale)
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

/// `cpushield load`'s run: the load of `spec` started on `kernel`, held for
/// `duration` or until SIGINT, SIGTERM or SIGHUP, then stopped; `say` is
/// told, one line each, that it runs (see [`running_line`]) and that a
/// signal stopped it. A zero duration is refused before anything starts.
/// Returns what each workload did.
pub fn run_for(
    kernel: Arc<dyn Kernel>,
    spec: &LoadSpec,
    duration: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<LoadReport, RequestError> {
    if duration.is_zero() {
        return Err(RequestError::Refused(
            "--duration 0s: a load needs a positive duration; use e.g. --duration 60s".into(),
        ));
    }
    let stop = stop_on_signals();
    let load = Load::start(kernel, spec)?;
    say(&running_line(spec, &load, duration));
    let waited = load.wait(duration, stop)?;
    let report = load.stop();
    if waited == Waited::Interrupted {
        say(&format!(
            "load stopped by a signal after {:.1} s",
            report.seconds
        ));
    }
    Ok(report)
}

/// The line that says `load` of `spec` runs: what, on which CPUs, for how
/// long, its supervisor's pid, where its files are, and how to stop it.
pub fn running_line(spec: &LoadSpec, load: &RunningLoad, duration: Duration) -> String {
    format!(
        "load running: {} on {} for {}; supervisor pid {}, files under {}; Ctrl-C stops it",
        describe(spec),
        spec.cpus
            .as_ref()
            .map_or("all CPUs (unconfined)".to_string(), |c| format!("CPUs {c}")),
        humantime::format_duration(duration),
        load.pids()[0],
        load.run_dir().display(),
    )
}

/// The catalogue: every profile with its workloads, every workload with its
/// source and unit (`cpushield load --list`).
pub fn catalogue() -> String {
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

/// The load a `--load` list names, and its name for the report; without
/// one, [`default_load`] for this machine.
pub fn choose(named: Option<&str>) -> Result<(Vec<Workload>, String), String> {
    match named {
        Some(named) => {
            let names: Vec<&str> = named.split(',').map(str::trim).collect();
            let load = parse_selection(&names).map_err(|e| format!("--load: {e}"))?;
            Ok((load, named.to_string()))
        }
        None => Ok(default_load(has_c_compiler())),
    }
}

/// Whether a C compiler (the `compile` workload's) is in PATH.
pub fn has_c_compiler() -> bool {
    ["cc", "gcc", "clang"]
        .into_iter()
        .any(|c| crate::preflight::which(c).is_some())
}

/// The default load (stress-kernel) and its name for the report. Without a
/// C compiler (`cc` false) it runs the profile's other workloads, and its
/// name says so: the user named no workload, so none is theirs to leave out.
pub fn default_load(cc: bool) -> (Vec<Workload>, String) {
    let profile = Profile::StressKernel;
    let all = profile.workloads().to_vec();
    if cc {
        return (all, profile.name().into());
    }
    let without: Vec<_> = all
        .into_iter()
        .filter(|w| *w != Workload::Compile)
        .collect();
    let name = format!(
        "{} without compile (no C compiler here: {})",
        profile.name(),
        without
            .iter()
            .map(|w| w.name())
            .collect::<Vec<_>>()
            .join(",")
    );
    (without, name)
}

/// The workload names a `--load` list stands for (profiles expanded; none
/// for a list the catalogue refuses).
pub fn workload_names(load_name: &str) -> Vec<&'static str> {
    let names: Vec<&str> = load_name.split(',').map(str::trim).collect();
    parse_selection(&names)
        .map(|ws| ws.into_iter().map(|w| w.name()).collect())
        .unwrap_or_default()
}

/// Set by SIGINT, SIGTERM or SIGHUP once [`stop_on_signals`] ran.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs handlers that make SIGINT, SIGTERM and SIGHUP set the returned
/// flag (every one of them, again and again: the load stops, reports and
/// exits), for [`crate::Load::wait`].
pub fn stop_on_signals() -> &'static AtomicBool {
    // SAFETY: the handler only stores to an atomic; the sigaction struct is
    // zeroed, then given the handler and an empty mask.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    &STOP
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_duration_is_refused_before_the_load_starts() {
        let kernel: Arc<dyn Kernel> = Arc::new(cpushield_kernel::FakeKernel::new());
        let spec = LoadSpec::new(vec![Workload::Fpu]);
        let mut said = Vec::new();
        let e = run_for(kernel, &spec, Duration::ZERO, &mut |l| {
            said.push(l.to_string())
        });
        let e = e.unwrap_err().to_string();
        assert!(
            e.starts_with("--duration 0s: a load needs a positive duration"),
            "{e}"
        );
        assert!(said.is_empty(), "nothing started: {said:?}");
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2kb"), Ok(2048));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("1X").is_err());
        assert!(parse_size("99999999P").is_err());
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
            assert!(peer_addr(bad).unwrap_err().contains("HOST[:PORT]"), "{bad}");
        }
    }

    #[test]
    fn the_catalogue_names_every_profile_and_workload() {
        let text = catalogue();
        for p in Profile::ALL {
            assert!(text.contains(p.name()));
        }
        for w in Workload::ALL {
            assert!(text.contains(w.about()));
        }
    }

    #[test]
    fn without_a_c_compiler_the_default_load_leaves_out_compile_and_says_so() {
        let (all, name) = default_load(true);
        assert!(all.contains(&Workload::Compile));
        assert_eq!(name, "stress-kernel");
        let (without, name) = default_load(false);
        assert!(!without.contains(&Workload::Compile));
        assert!(without.contains(&Workload::Fs), "{without:?}");
        assert!(
            name.contains("without compile (no C compiler here"),
            "{name}"
        );
    }

    #[test]
    fn a_peer_or_listen_port_needs_a_network_workload_named() {
        let request = |names: &[&str], peer: Option<&str>, listen: Option<u16>| LoadRequest {
            names: names.iter().map(|n| n.to_string()).collect(),
            peer: peer.map(str::to_string),
            listen,
            scale: 1,
            ..LoadRequest::default()
        };
        let e = request(&["fpu"], Some("192.0.2.7"), None)
            .spec()
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--peer applies to the network workloads"),
            "{e}"
        );
        let e = request(&[], None, Some(5001))
            .spec()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--listen applies"), "{e}");
        let e = request(&["ttcp"], None, Some(0))
            .spec()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--listen 0:"), "{e}");
        let spec = request(&["ttcp"], Some("192.0.2.7"), None).spec().unwrap();
        assert_eq!(describe(&spec), "ttcp flooding 192.0.2.7:5001");
    }

    #[test]
    fn stress_ng_runs_instead_of_named_workloads_and_not_empty() {
        let request = |names: &[&str], args: &str| LoadRequest {
            names: names.iter().map(|n| n.to_string()).collect(),
            stress_ng: Some(args.into()),
            scale: 1,
            ..LoadRequest::default()
        };
        let e = request(&["fpu"], "--cpu 1").spec().unwrap_err().to_string();
        assert!(e.contains("drop 'fpu' or --stress-ng"), "{e}");
        let e = request(&[], "  ").spec().unwrap_err().to_string();
        assert!(e.starts_with("--stress-ng is empty"), "{e}");
        let spec = request(&[], "--cpu 1").spec().unwrap();
        assert_eq!(describe(&spec), "stress-ng --cpu 1");
    }
}
