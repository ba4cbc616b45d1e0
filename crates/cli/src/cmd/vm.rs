//! `cpushield vm watch`: the host side of a guest's blame. Finds the guest's
//! vCPU threads, traces their host CPUs and answers the guest's questions on
//! its virtio-serial port (the tracing and the protocol are `cpushield_vm`).

use crate::args::{EXIT_ERROR, EXIT_OK};
use clap::{Args, Subcommand};
use cpushield_vm::watch::{self, WatchRequest};
use std::path::PathBuf;
use std::process::ExitCode;
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
    /// node_exporter textfile to rewrite every second: each vCPU's time held
    /// off by the host, by why and by what held its host CPU.
    #[arg(long, value_name = "PATH")]
    textfile: Option<PathBuf>,
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
    let request = WatchRequest {
        qmp: args.qmp,
        pid: args.pid,
        channel: args.channel,
        retention: args.retention,
        duration: args.duration,
        textfile: args.textfile,
    };
    let kernel = crate::host::real().shared_kernel();
    let s = watch::watch(kernel, &request, &mut |line| println!("{line}"))?;
    println!("{}", s.line());
    for e in &s.errors {
        eprintln!("cpushield: warning: {e}");
    }
    Ok(ExitCode::from(if s.errors.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    }))
}
