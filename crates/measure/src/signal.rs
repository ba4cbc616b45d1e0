//! Stopping a probe on SIGINT or SIGTERM: a handler sets a flag the probe polls,
//! and the probe reports what it measured so far. A second signal of the same
//! kind acts as usual (the handler resets itself), so a stuck run can be killed.

use nix::sys::signal::{SigSet, Signal};
use std::io;
use std::sync::atomic::AtomicBool;

/// Installs SIGINT and SIGTERM handlers that set the returned flag. Pass the
/// flag as the `stop` argument of a probe's `run`.
pub fn stop_on_signals() -> io::Result<&'static AtomicBool> {
    cpushield_kernel::signal::stop_on_signals(cpushield_kernel::signal::SecondSignal::Kills)
}

/// Blocks SIGINT and SIGTERM in the calling thread, so they are delivered to
/// the control thread and never interrupt a measuring one.
pub(crate) fn block_stop_signals() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    // failing leaves the signals deliverable here, which only costs an EINTR
    let _ = set.thread_block();
}
