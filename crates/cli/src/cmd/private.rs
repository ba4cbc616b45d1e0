//! The started process's side of a run in a private PID namespace (`tune`,
//! `compare`, `demo`): when the namespace's init was killed before it could
//! restore the machine, the restore is done here, from what its state
//! records; where that fails, the one command that finishes it is printed.

use cpushield_kernel::namespace;
use std::path::Path;

/// Runs `body` as the init of a private PID namespace
/// ([`namespace::run_private`]); the load's files go under `load_dir`.
/// The init holds its namespace's liveness lock in the state directory all
/// along, so that `reset --namespace-gone` refuses while it lives, from
/// wherever it is run (a state directory it cannot write means no shield
/// either: then there is no lock).
pub fn run<F: FnOnce() -> i32>(body: F, load_dir: &Path) -> std::io::Result<i32> {
    let host = crate::host::real();
    namespace::run_private(
        host.kernel(),
        || {
            let store = crate::host::state_files();
            let ns = cpushield_shield::snapshot::pid_namespace(host.kernel());
            let alive = store.hold_namespace_alive(&ns);
            let code = body();
            if alive.is_ok() {
                store.release_namespace_alive(&ns);
            }
            code
        },
        |sig| after_init_killed(sig, load_dir),
    )
}

/// The command that restores what a killed run left, as the user types it
/// (with the state directory when it is not the default one).
fn reset_command() -> String {
    match std::env::var_os("CPUSHIELD_STATE_DIR") {
        Some(dir) => format!(
            "CPUSHIELD_STATE_DIR={} cpushield reset --namespace-gone",
            dir.to_string_lossy()
        ),
        None => "cpushield reset --namespace-gone".into(),
    }
}

/// Removes the run directories this run's load made under `dir` (named
/// after the started process's PID, [`namespace::run_tag`]); says how many.
fn remove_load_dirs(dir: &Path) -> usize {
    let prefix = format!("cpushield-load-{}-", namespace::run_tag());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
        .count()
}

fn after_init_killed(sig: i32, load_dir: &Path) -> i32 {
    let name = nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str())
        .unwrap_or("a signal");
    eprintln!(
        "cpushield: the run was killed by {name} before it could restore the machine; restoring what its state records"
    );
    let dirs = remove_load_dirs(load_dir);
    let options = cpushield_shield::Options {
        is_root: nix::unistd::geteuid().is_root(),
        whole_cores: false,
    };
    match cpushield_shield::reset_namespace_gone(&crate::host::real(), options) {
        Ok(report) => eprintln!(
            "cpushield: restored: {} IRQs, {} tasks moved, {} settings; {dirs} load director{} removed",
            report.outcome.irqs,
            report.outcome.moved,
            report.outcome.applied,
            if dirs == 1 { "y" } else { "ies" }
        ),
        Err(e) => eprintln!(
            "cpushield: error: the machine could not be restored ({e}); run `{}` to restore it",
            reset_command()
        ),
    }
    128 + sig
}
