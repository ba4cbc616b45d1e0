//! `cpushield vm watch`: the host side of a guest's blame. Finds the guest's
//! vCPU threads, traces their host CPUs and answers the guest's questions on
//! its virtio-serial port (the tracing and the protocol are `cpushield_vm`).

use crate::args::{EXIT_ERROR, EXIT_OK};
use clap::{Args, Subcommand};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::signal::{stop_on_signals, SecondSignal};
use cpushield_kernel::Kernel;
use cpushield_vm::host::{self, VcpuThread, VcpuWatch, WatchOptions};
use cpushield_vm::timeline::Limits;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `cpushield vm`.
#[derive(Args)]
pub struct VmArgs {
    #[command(subcommand)]
    command: VmCommand,
}

#[derive(Subcommand)]
enum VmCommand {
    /// Trace a QEMU/KVM guest's vCPU threads and answer the guest, on its
    /// virtio-serial port, what kept each vCPU from running.
    Watch(WatchArgs),
}

/// Arguments of `cpushield vm watch`.
#[derive(Args)]
struct WatchArgs {
    /// QEMU's QMP socket (`-qmp unix:PATH,server=on,wait=off`): the vCPU
    /// threads come from `query-cpus-fast`.
    #[arg(long, value_name = "PATH", required_unless_present = "pid")]
    qmp: Option<PathBuf>,
    /// QEMU's pid: the vCPU threads by their names (`CPU N/KVM`, `CPU N/TCG`;
    /// QEMU needs `-name NAME,debug-threads=on`). Used where --qmp is not given
    /// or does not answer.
    #[arg(long, value_name = "PID")]
    pid: Option<i32>,
    /// The unix socket of the guest's channel: QEMU's `-chardev
    /// socket,id=ID,path=PATH,server=on,wait=off` with `-device
    /// virtserialport,chardev=ID,name=org.cpushield.vm.0`.
    #[arg(long, value_name = "PATH")]
    channel: PathBuf,
    /// How long gaps are kept (at most 600s).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = retention)]
    retention: Duration,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

fn retention(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e}: e.g. 60s"))?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(600) {
        return Err("between 1s and 600s".into());
    }
    Ok(d)
}

/// Runs `cpushield vm`.
pub fn vm(args: VmArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        VmCommand::Watch(w) => watch(w),
    }
}

fn watch(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let kernel: Arc<dyn Kernel> = crate::host::real().shared_kernel();
    let threads = match find_threads(kernel.as_ref(), &args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cpushield: error: {e}");
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    };
    let online = cpushield_kernel::online_cpus(kernel.as_ref())?;
    // Where the vCPU threads may run: every CPU that can hold one of them.
    let mut cpus = CpuSet::new();
    for t in &threads {
        let allowed = kernel
            .get_affinity(t.tid)
            .unwrap_or_else(|_| online.clone());
        cpus = cpus.union(&allowed);
    }
    let cpus = cpus.intersection(&online);
    let opts = WatchOptions {
        limits: Limits {
            retention_ns: args.retention.as_nanos() as u64,
            ..Limits::default()
        },
        ..WatchOptions::default()
    };
    let stop = stop_on_signals(SecondSignal::Caught)?;
    let w = match VcpuWatch::start(
        kernel.clone(),
        &threads,
        &cpus,
        opts,
        cpushield_kernel::clock::now_ns,
    ) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("cpushield: error: {e}");
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    };
    let list: Vec<String> = threads
        .iter()
        .map(|t| format!("vCPU {} = thread {}", t.vcpu, t.tid))
        .collect();
    println!(
        "watching {} on host CPUs {} ({}); answering on {}",
        list.join(", "),
        w.cpus.to_list(),
        w.events.join(" "),
        args.channel.display()
    );
    if let Some(d) = args.duration {
        std::thread::spawn(move || {
            std::thread::sleep(d);
            cpushield_kernel::signal::request_stop();
        });
    }
    let answered = host::serve(&w, &args.channel, stop);
    let (kept, dropped) = {
        let tl = w.timeline();
        let tl = tl.lock().expect("timeline");
        (tl.len(), tl.dropped())
    };
    let errors = w.finish();
    println!("answered {answered} requests; {kept} gaps kept, {dropped} dropped by the bounds");
    for e in &errors {
        eprintln!("cpushield: warning: {e}");
    }
    let _ = stop.load(Ordering::SeqCst);
    Ok(ExitCode::from(if errors.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    }))
}

/// QMP first; thread names where QMP is not given or does not answer.
fn find_threads(kernel: &dyn Kernel, args: &WatchArgs) -> Result<Vec<VcpuThread>, host::HostError> {
    let qmp = args
        .qmp
        .as_deref()
        .map(|s| host::vcpus_from_qmp(s, Duration::from_secs(3)));
    match (qmp, args.pid) {
        (Some(Ok(t)), _) => Ok(t),
        (Some(Err(_)), Some(pid)) | (None, Some(pid)) => {
            host::vcpus_by_name(kernel, Path::new("/proc"), pid)
        }
        (Some(Err(e)), None) => Err(e),
        (None, None) => Err(host::HostError::Vcpus(
            "pass --qmp SOCKET or --pid QEMU_PID".into(),
        )),
    }
}

/// The guest's side of the channel during a compare run: the host's view
/// collected while it runs, or why there is none.
pub(crate) enum HostSide {
    /// `--host-channel none`.
    Off,
    /// No host side answered.
    Absent(String),
    /// Collecting the host's gaps.
    Collecting(cpushield_vm::guest::Collector),
}

/// Gaps shorter than this are not collected: spikes below a millisecond are
/// not what the host is asked about.
const MIN_GAP_NS: u64 = 200_000;

impl HostSide {
    /// Greets the host side on `explicit` or on the port found by name.
    pub(crate) fn start(kernel: &dyn Kernel, explicit: Option<&Path>) -> HostSide {
        let port = match explicit {
            Some(p) if p == Path::new("none") => return HostSide::Off,
            Some(p) => p.to_path_buf(),
            None => match cpushield_vm::guest::find_port(kernel) {
                Some(p) => p,
                None => {
                    return HostSide::Absent(format!(
                        "no virtio-serial port named {}",
                        cpushield_vm::protocol::PORT_NAME
                    ))
                }
            },
        };
        match cpushield_vm::guest::Collector::start(
            &port,
            cpushield_kernel::clock::now_ns,
            MIN_GAP_NS,
            Duration::from_millis(500),
        ) {
            Ok(c) => HostSide::Collecting(c),
            Err(e) => HostSide::Absent(format!("{}: {e}", port.display())),
        }
    }

    /// Puts the host's cause beside each worst sample charged outside the
    /// guest (probe and anchors); returns the lines to print.
    pub(crate) fn blame(self, report: &mut cpushield_report::CompareReport) -> Vec<String> {
        let mut targets: Vec<(String, &mut cpushield_report::AttributionSummary)> = Vec::new();
        for s in report.scenarios.iter_mut() {
            let name = s.name.clone();
            if let Some(a) = s.attribution.as_mut() {
                targets.push((name.clone(), a));
            }
            for anchor in [s.anchor.as_mut(), s.rtla.as_mut()].into_iter().flatten() {
                let who = format!("{name} ({})", anchor.tool);
                if let Some(a) = anchor.attribution.as_mut() {
                    targets.push((who, a));
                }
            }
        }
        targets.retain(|(_, a)| !a.outside_samples.is_empty());
        match self {
            HostSide::Off => Vec::new(),
            HostSide::Absent(why) if !targets.is_empty() => vec![format!(
                "host side: none answered ({why}); {}",
                cpushield_vm::guest::NO_HOST_HINT
            )],
            HostSide::Absent(_) => Vec::new(),
            HostSide::Collecting(c) => {
                let view = c.finish();
                let mut lines = Vec::new();
                for (who, a) in targets {
                    for (i, w) in a.outside_samples.clone().into_iter().enumerate() {
                        let c = view.explain(w.cpu as u32, w.intended_ns, w.actual_ns);
                        // The worst three printed; every one in the report.
                        if i < 3 {
                            lines.push(format!(
                                "{who}: outside the guest {}: {}",
                                cpushield_report::human_ns(w.outside_ns),
                                c.line
                            ));
                        }
                        a.host_causes.push(c);
                    }
                }
                lines
            }
        }
    }
}
