//! Stopping a long-running loop on SIGINT or SIGTERM: a handler sets a flag
//! the loop polls.

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// What a second SIGINT or SIGTERM does once the first has set the flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondSignal {
    /// Acts as usual (the handler resets itself): a stuck run can be killed.
    Kills,
    /// Sets the flag again: the loop finishes its own way (e.g. restoring).
    Caught,
}

/// Installs SIGINT and SIGTERM handlers that set the returned flag.
pub fn stop_on_signals(second: SecondSignal) -> io::Result<&'static AtomicBool> {
    let flags = match second {
        SecondSignal::Kills => SaFlags::SA_RESETHAND | SaFlags::SA_RESTART,
        SecondSignal::Caught => SaFlags::SA_RESTART,
    };
    let action = SigAction::new(SigHandler::Handler(on_signal), flags, SigSet::empty());
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.map_err(io::Error::from)?;
    }
    Ok(&STOP)
}

/// Sets the flag [`stop_on_signals`] returns, as a signal would: for a stop
/// whose signal could not arrive (a parent that died before the child could
/// hear of it).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}
