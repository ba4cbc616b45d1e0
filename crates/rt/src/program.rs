//! The machine of a program that links cpushield-rt and calls it directly
//! ([`crate::thread::RtThread`], [`crate::sched::pin`], the C API): such a
//! program has no cpushield command in front of it to build the machine,
//! so the library's own entry points build it here, once per process — the
//! running kernel, the shield's state directory (`CPUSHIELD_STATE_DIR`,
//! else /run/cpushield) and the directory of CPU reservations
//! (`CPUSHIELD_RESERVE_DIR`). Everything below those entry points takes the
//! [`Host`] and the [`ReserveDir`] it is given.

use crate::reserve::ReserveDir;
use cpushield_kernel::store::FileStore;
use cpushield_kernel::{Host, RealKernel};
use std::sync::{Arc, OnceLock};

/// This machine, as a program's own calls into cpushield-rt see it.
pub fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| Host::new(Arc::new(RealKernel), Arc::new(FileStore::from_env())))
}

/// Where this program's CPU reservations are kept.
pub fn reserves() -> ReserveDir {
    ReserveDir::from_env()
}
