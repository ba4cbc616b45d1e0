//! The workloads themselves. Each runs in its own worker process, in its own
//! directory (the current directory), until the supervisor kills its process
//! group; it counts its work into its shared slot and calls
//! [`Ctx::ready`] once set up. A workload returns only with an error.

use crate::catalog::Workload;
use crate::plan::Tools;
use crate::procs::{self, Exit};
use crate::shm::{Slot, SLOT_RUNNING};
use std::convert::Infallible;
use std::io;
use std::path::Path;

mod compile;
mod compute;
mod crashme;
mod disknoise;
mod fifos_mmap;
mod filemove;
mod find;
mod fpu;
mod fs;
mod ioctl;
mod iodisk;
mod launch;
mod netflood;
mod ttcp;

/// What a workload gets to work with.
pub struct Ctx<'a> {
    /// The kernel door.
    pub kernel: &'a dyn cpushield_kernel::Kernel,
    /// Its private directory (also the current directory).
    pub dir: &'a Path,
    /// Bytes it may use under `dir`.
    pub size_cap: u64,
    /// External programs.
    pub tools: &'a Tools,
    /// Seed for anything random.
    pub seed: u64,
    /// The network workloads' other machine (None: loopback).
    pub remote: Option<crate::plan::Remote>,
    slot: &'a Slot,
}

impl<'a> Ctx<'a> {
    /// A context reporting into `slot`.
    pub fn new(
        kernel: &'a dyn cpushield_kernel::Kernel,
        dir: &'a Path,
        size_cap: u64,
        tools: &'a Tools,
        seed: u64,
        slot: &'a Slot,
    ) -> Self {
        Ctx {
            kernel,
            dir,
            size_cap,
            tools,
            seed,
            remote: None,
            slot,
        }
    }

    /// Counts `n` ops.
    pub fn add(&self, n: u64) {
        self.slot.add(n);
    }

    /// Says set-up is done and the work (and counting) has begun.
    pub fn ready(&self) {
        self.slot.set_state(SLOT_RUNNING);
    }
}

/// Runs `workload` until killed; returns only with the error that stopped it.
pub fn run(workload: Workload, ctx: &Ctx) -> io::Result<Infallible> {
    match workload {
        Workload::Compile => compile::run(ctx),
        Workload::Ttcp => ttcp::run(ctx),
        Workload::FifosMmap => fifos_mmap::run(ctx),
        Workload::Fpu => fpu::run(ctx),
        Workload::Fs => fs::run(ctx),
        Workload::Crashme => crashme::run(ctx),
        Workload::Disknoise => disknoise::run(ctx),
        Workload::Launch => launch::run(ctx),
        Workload::Find => find::run(ctx),
        Workload::Filemove => filemove::run(ctx),
        Workload::Netflood => netflood::run(ctx),
        Workload::Ioctl => ioctl::run(ctx),
        Workload::Iodisk => iodisk::run(ctx),
        Workload::Compute => compute::run(ctx),
    }
}

/// Adds what was being done to an I/O error.
pub(crate) fn context(what: impl std::fmt::Display) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A helper process a workload forks (the other end of a pipe or socket).
/// It dies with the workload (PR_SET_PDEATHSIG) and is in its process group.
pub(crate) struct Partner {
    pid: libc::pid_t,
    what: &'static str,
}

impl Partner {
    /// Forks `body` as the partner; its error, if any, ends it with status 1.
    pub fn fork<F: FnOnce() -> io::Result<Infallible>>(
        what: &'static str,
        body: F,
    ) -> io::Result<Partner> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let pid = procs::fork_child(|| {
            procs::die_with_parent(libc::SIGKILL, parent);
            match body() {
                Ok(never) => match never {},
                Err(_) => 1,
            }
        })?;
        Ok(Partner { pid, what })
    }

    /// Fails if the partner has ended.
    pub fn check(&self) -> io::Result<()> {
        let mut status = 0;
        // SAFETY: polling our own child.
        let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if rc == self.pid {
            return Err(io::Error::other(format!(
                "the {} process ended ({})",
                self.what,
                Exit::from_status(status)
            )));
        }
        Ok(())
    }

    /// The error to report when the other end went away: the partner's
    /// exit if it ended, else `err`.
    pub fn explain(&self, err: io::Error) -> io::Error {
        std::thread::sleep(std::time::Duration::from_millis(20));
        self.check().err().unwrap_or(err)
    }
}

/// Sets a receive timeout so a blocked read returns and the partner can be checked.
pub(crate) fn set_recv_timeout(socket: &impl std::os::fd::AsFd, ms: i64) {
    use nix::sys::socket::{setsockopt, sockopt::ReceiveTimeout};
    use nix::sys::time::{TimeVal, TimeValLike};
    let _ = setsockopt(socket, ReceiveTimeout, &TimeVal::milliseconds(ms));
}

/// Whether an I/O error is a receive timeout.
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
