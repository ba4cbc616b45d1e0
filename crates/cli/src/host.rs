//! The one place the command line wires in the machine: the running kernel,
//! the state directory (`CPUSHIELD_STATE_DIR`, else /run/cpushield),
//! CLOCK_MONOTONIC, the directory of CPU reservations
//! (`CPUSHIELD_RESERVE_DIR`) and the agent's socket
//! (`CPUSHIELD_AGENT_SOCKET`). The [`Host`] is built once per process (one
//! command) and handed to the libraries; every later [`real`] is a clone of
//! it.

use crate::args::EXIT_ERROR;
use cpushield_kernel::store::FileStore;
use cpushield_kernel::{Host, RealKernel};
use cpushield_rt::reserve::ReserveDir;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

/// This machine.
pub fn real() -> Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| Host::new(Arc::new(RealKernel), Arc::new(state_files())))
        .clone()
}

/// The shield's options for this process: whether it runs as root (as
/// the kernel will judge its writes), and `whole_cores`.
pub fn shield_options(whole_cores: bool) -> cpushield_shield::Options {
    cpushield_shield::Options {
        is_root: nix::unistd::geteuid().is_root(),
        whole_cores,
    }
}

/// The state directory itself, for what only files can do: the liveness
/// lock a private PID namespace's init holds there.
pub fn state_files() -> FileStore {
    FileStore::from_env()
}

/// Runs `body` as the init of a private PID namespace on this machine
/// ([`cpushield_shield::private_run::run`]), the load's files under
/// `load_dir`; what a killed init leaves is restored and said on stderr.
/// Returns the init's exit code ([`EXIT_ERROR`] for one that is not a byte).
pub fn run_private<F: FnOnce() -> u8>(body: F, load_dir: &Path) -> std::io::Result<ExitCode> {
    let say = |line: &str| eprintln!("{line}");
    let code = cpushield_shield::private_run::run(
        &real(),
        &state_files(),
        || body().into(),
        load_dir,
        &say,
    )?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(EXIT_ERROR)))
}

/// Where the CPU reservations of `run`, the agent and the C API are kept:
/// `CPUSHIELD_RESERVE_DIR`, else /run/cpushield/reserve.
pub fn reserve_dir() -> ReserveDir {
    ReserveDir::from_env()
}

/// The agent's socket: `named` (`--agent-socket`), else
/// `CPUSHIELD_AGENT_SOCKET`, else /run/cpushield/agent.sock.
pub fn agent_socket(named: Option<PathBuf>) -> PathBuf {
    named.unwrap_or_else(|| {
        std::env::var_os("CPUSHIELD_AGENT_SOCKET")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| cpushield_config::DEFAULT_SOCKET.into())
    })
}
