//! `cpushield thread-demo` (hidden, for the guest tests): a program started
//! normally, not through `cpushield run`, that places one of its two threads
//! on CPUs the Sherer way — through the C API's `cps_place` or through
//! `RtThread::on` — while the other thread stays where it started.
//!
//! It prints one line, `PID PLACED_TID OTHER_TID`, then both threads sleep
//! for `--seconds` (the test kills it sooner). A refused placement prints
//! the library's one-line message and exits 1.

use crate::args::cpu_set;
use clap::{Args, ValueEnum};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::gettid;
use cpushield_rt::capi;
use cpushield_rt::thread::RtThread;
use std::ffi::{CStr, CString};
use std::io::Write;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

/// Which programming interface places the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Api {
    /// `cps_place(0, cpus, CPS_SCHED_OTHER, 0)` from the thread itself.
    C,
    /// `RtThread::on(cpus).spawn(...)`.
    Rust,
}

/// Arguments of the hidden `cpushield thread-demo`.
#[derive(Args, Debug)]
pub struct ThreadDemoArgs {
    /// CPUs the one placed thread goes to.
    #[arg(long, value_parser = cpu_set, value_name = "CPUS")]
    cpus: CpuSet,
    /// The interface that places it.
    #[arg(long, value_enum, default_value = "c")]
    api: Api,
    /// How long both threads stay before the program exits.
    #[arg(long, default_value_t = 1000)]
    seconds: u64,
    /// Instead: one thread per CPU of --cpus, each pinning itself to its
    /// CPU (plain affinity, as a program started by `cpushield run` does
    /// within the CPUs it was given); prints `PID TID...` in CPU order.
    #[arg(long)]
    per_cpu: bool,
}

/// One thread per CPU of `cpus`, each pinned to its own, staying `stay`.
fn per_cpu(cpus: &CpuSet, stay: Duration) -> anyhow::Result<ExitCode> {
    let (tx, rx) = mpsc::channel();
    for (i, cpu) in cpus.iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let pinned = cpushield_rt::sched::pin(0, &CpuSet::from_cpus([cpu]));
            let _ = tx.send((i, pinned.map(|()| gettid()).map_err(|e| (cpu, e))));
            std::thread::sleep(stay);
        });
    }
    drop(tx);
    let mut tids = vec![0; cpus.len()];
    for (i, got) in rx.iter().take(cpus.len()) {
        match got {
            Ok(tid) => tids[i] = tid,
            Err((cpu, e)) => {
                eprintln!("cpushield: error: a thread could not pin itself to CPU {cpu}: {e}");
                return Ok(ExitCode::from(crate::args::EXIT_ERROR));
            }
        }
    }
    let list: Vec<String> = tids.iter().map(i32::to_string).collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{} {}", std::process::id(), list.join(" "))?;
    out.flush()?;
    drop(out);
    std::thread::sleep(stay);
    Ok(ExitCode::SUCCESS)
}

/// Runs the two-thread program (or, with `--per-cpu`, one thread per CPU).
pub fn run(args: ThreadDemoArgs) -> anyhow::Result<ExitCode> {
    let stay = Duration::from_secs(args.seconds);
    if args.per_cpu {
        return per_cpu(&args.cpus, stay);
    }
    let placed: Result<i32, String> = match args.api {
        Api::C => {
            let (tx, rx) = mpsc::channel();
            let cpus = CString::new(args.cpus.to_list())?;
            std::thread::spawn(move || {
                // SAFETY: `cpus` is a NUL-terminated string that outlives the call.
                let rc = unsafe { capi::cps_place(0, cpus.as_ptr(), capi::CPS_SCHED_OTHER, 0) };
                let sent = if rc == 0 {
                    Ok(gettid())
                } else {
                    // SAFETY: cps_last_error returns this thread's NUL-terminated
                    // message, valid until its next failing call; copied at once.
                    let msg = unsafe { CStr::from_ptr(capi::cps_last_error()) };
                    Err(format!("cps_place: {}", msg.to_string_lossy()))
                };
                let ok = sent.is_ok();
                let _ = tx.send(sent);
                if ok {
                    std::thread::sleep(stay);
                }
            });
            rx.recv()?
        }
        Api::Rust => {
            let (tx, rx) = mpsc::channel();
            match RtThread::on(args.cpus.clone())
                .name("placed")
                .spawn(move || {
                    let _ = tx.send(gettid());
                    std::thread::sleep(stay);
                }) {
                Ok(handle) => {
                    let tid = rx.recv()?;
                    debug_assert_eq!(tid, handle.tid());
                    std::mem::forget(handle);
                    Ok(tid)
                }
                Err(e) => Err(format!("RtThread::on: {e}")),
            }
        }
    };
    match placed {
        Ok(tid) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{} {tid} {}", std::process::id(), gettid())?;
            out.flush()?;
            drop(out);
            std::thread::sleep(stay);
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("cpushield: error: {message}");
            Ok(ExitCode::from(crate::args::EXIT_ERROR))
        }
    }
}
