//! `cpushield vm watch`: the host side of a guest's blame. Finds the guest's
//! vCPU threads, traces their host CPUs and answers the guest's questions on
//! its virtio-serial port (the tracing and the protocol are `cpushield_vm`).

use crate::args::{EXIT_ERROR, EXIT_OK};
use clap::{Args, Subcommand};
use cpushield_vm::watch::{self, WatchRequest};
use std::process::ExitCode;

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
    Watch(WatchRequest),
}

/// Runs `cpushield vm`.
pub fn vm(args: VmArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        VmCommand::Watch(w) => watch(w),
    }
}

fn watch(request: WatchRequest) -> anyhow::Result<ExitCode> {
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
