//! Stopping a probe on SIGINT or SIGTERM: a handler sets a flag the probe polls,
//! and the probe reports what it measured so far. A second signal of the same
//! kind acts as usual (the handler resets itself), so a stuck run can be killed.

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs SIGINT and SIGTERM handlers that set the returned flag. Pass the
/// flag as the `stop` argument of a probe's `run`.
pub fn stop_on_signals() -> io::Result<&'static AtomicBool> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESETHAND | SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.map_err(io::Error::from)?;
    }
    Ok(&STOP)
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
