//! A run in a private PID namespace (`tune`, `compare`, `demo`): the body runs
//! as the namespace's init, holding its liveness lock, and when that init was
//! killed before it could restore the machine, the started process restores
//! it from what the state records; where that fails, the one command that
//! finishes it is named.

use crate::Options;
use cpushield_kernel::namespace;
use cpushield_kernel::store::{FileStore, StateStore};
use cpushield_kernel::Host;
use std::path::Path;

/// Runs `body` as the init of a private PID namespace
/// ([`namespace::run_private`]) on `host`, whose state directory is `files`;
/// the load's files go under `load_dir`. The init holds its namespace's
/// liveness lock in the state directory all along, so that `reset
/// --namespace-gone` refuses while it lives, from wherever it is run (a state
/// directory it cannot write means no shield either: then there is no lock).
/// The kernel threads of the root cgroup, which the namespace does not show,
/// get back the affinities the kernel rewrote when the run's partition came
/// and went ([`crate::root_kthreads`]). `say` prints the lines about a
/// killed init and about a kernel thread that could not be given back, one
/// at a time.
pub fn run<F: FnOnce() -> i32>(
    host: &Host,
    files: &FileStore,
    body: F,
    load_dir: &Path,
    say: &dyn Fn(&str),
) -> std::io::Result<i32> {
    crate::root_kthreads::around(
        host.kernel(),
        || {
            namespace::run_private(
                host.kernel(),
                || {
                    let ns = crate::snapshot::pid_namespace(host.kernel());
                    let alive = files.hold_namespace_alive(&ns);
                    let code = body();
                    if alive.is_ok() {
                        files.release_namespace_alive(&ns);
                    }
                    code
                },
                |sig| after_init_killed(host, files, sig, load_dir, say),
            )
        },
        say,
    )
}

/// The command that restores what a killed run left, as the user types it
/// (with the state directory when it is not the default one).
pub fn reset_command(files: &FileStore) -> String {
    let dir = StateStore::dir(files);
    if dir == Path::new(DEFAULT_STATE_DIR) {
        "cpushield reset --namespace-gone".into()
    } else {
        format!(
            "CPUSHIELD_STATE_DIR={} cpushield reset --namespace-gone",
            dir.display()
        )
    }
}

/// Where the state is kept when `CPUSHIELD_STATE_DIR` is not set.
const DEFAULT_STATE_DIR: &str = "/run/cpushield";

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

fn after_init_killed(
    host: &Host,
    files: &FileStore,
    sig: i32,
    load_dir: &Path,
    say: &dyn Fn(&str),
) -> i32 {
    let name = nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str())
        .unwrap_or("a signal");
    say(&format!(
        "cpushield: the run was killed by {name} before it could restore the machine; restoring what its state records"
    ));
    let dirs = remove_load_dirs(load_dir);
    let options = Options {
        is_root: nix::unistd::geteuid().is_root(),
        whole_cores: false,
    };
    match crate::reset_namespace_gone(host, options) {
        Ok(report) => say(&format!(
            "cpushield: restored: {} IRQs, {} tasks moved, {} settings; {dirs} load director{} removed",
            report.outcome.irqs,
            report.outcome.moved,
            report.outcome.applied,
            if dirs == 1 { "y" } else { "ies" }
        )),
        Err(e) => say(&format!(
            "cpushield: error: the machine could not be restored ({e}); run `{}` to restore it",
            reset_command(files)
        )),
    }
    128 + sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reset_command_names_a_state_directory_that_is_not_the_default() {
        assert_eq!(
            reset_command(&FileStore::new("/run/cpushield")),
            "cpushield reset --namespace-gone"
        );
        assert_eq!(
            reset_command(&FileStore::new("/tmp/st")),
            "CPUSHIELD_STATE_DIR=/tmp/st cpushield reset --namespace-gone"
        );
    }

    #[test]
    fn only_this_runs_load_directories_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let mine = format!("cpushield-load-{}-7", namespace::run_tag());
        std::fs::create_dir(tmp.path().join(&mine)).unwrap();
        std::fs::create_dir(tmp.path().join("cpushield-load-1-7")).unwrap();
        assert_eq!(remove_load_dirs(tmp.path()), 1);
        assert!(!tmp.path().join(mine).exists());
        assert!(tmp.path().join("cpushield-load-1-7").exists());
    }
}
