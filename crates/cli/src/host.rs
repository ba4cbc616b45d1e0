//! The one place the command line wires in the machine: the running kernel,
//! the state directory (`CPUSHIELD_STATE_DIR`, else /run/cpushield) and
//! CLOCK_MONOTONIC. Every command builds its [`Host`] here, once, and hands
//! it to the libraries.

use cpushield_kernel::store::FileStore;
use cpushield_kernel::{Host, RealKernel};
use std::sync::Arc;

/// This machine.
pub fn real() -> Host {
    Host::new(Arc::new(RealKernel), Arc::new(FileStore::from_env()))
}
