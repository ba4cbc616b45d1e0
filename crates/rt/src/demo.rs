//! The programs the guest tests start (`cpushield thread-demo`): a program
//! started normally, not through `cpushield run`, that places one of its two
//! threads on CPUs the Sherer way — through the C API's `cps_place` or
//! through [`RtThread::on`] — while the other thread stays where it started;
//! or one thread per CPU, each pinning itself to its own.

use crate::capi;
use crate::thread::RtThread;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::gettid;
use std::ffi::{CStr, CString};
use std::sync::mpsc;
use std::time::Duration;

/// Which programming interface places the thread (`thread-demo --api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Api {
    /// `cps_place(0, cpus, CPS_SCHED_OTHER, 0)` from the thread itself.
    C,
    /// `RtThread::on(cpus).spawn(...)`.
    Rust,
}

/// Starts one thread that places itself on `cpus` through `api` and then
/// stays `stay`; returns its thread ID, or the library's one-line refusal.
pub fn place_one(api: Api, cpus: &CpuSet, stay: Duration) -> Result<i32, String> {
    let lost = |e: mpsc::RecvError| e.to_string();
    match api {
        Api::C => {
            let (tx, rx) = mpsc::channel();
            let cpus = CString::new(cpus.to_list()).map_err(|e| e.to_string())?;
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
            rx.recv().map_err(lost)?
        }
        Api::Rust => {
            let (tx, rx) = mpsc::channel();
            let handle = RtThread::on(cpus.clone())
                .name("placed")
                .spawn(move || {
                    let _ = tx.send(gettid());
                    std::thread::sleep(stay);
                })
                .map_err(|e| format!("RtThread::on: {e}"))?;
            let tid = rx.recv().map_err(lost)?;
            debug_assert_eq!(tid, handle.tid());
            // The thread stays for `stay`; the program exits without joining it.
            std::mem::forget(handle);
            Ok(tid)
        }
    }
}

/// Starts one thread per CPU of `cpus`, each pinning itself to its own CPU
/// (plain affinity, as a program started by `cpushield run` does within the
/// CPUs it was given) and staying `stay`; returns their thread IDs in CPU
/// order, or the one-line refusal naming the first CPU a thread could not
/// pin itself to.
pub fn pin_one_per_cpu(cpus: &CpuSet, stay: Duration) -> Result<Vec<i32>, String> {
    let (tx, rx) = mpsc::channel();
    for (i, cpu) in cpus.iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let pinned = crate::sched::pin(0, &CpuSet::from_cpus([cpu]));
            let pinned = pinned
                .map(|()| gettid())
                .map_err(|e| format!("a thread could not pin itself to CPU {cpu}: {e}"));
            let _ = tx.send((i, pinned));
            std::thread::sleep(stay);
        });
    }
    drop(tx);
    let mut tids = vec![0; cpus.len()];
    for (i, got) in rx.iter().take(cpus.len()) {
        tids[i] = got?;
    }
    Ok(tids)
}
