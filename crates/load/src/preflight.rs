//! The thin shell under [`crate::plan`]: gathers the [`SystemFacts`] a plan
//! needs (online CPUs, the directory, free space, tools) and asks stress-ng
//! whether it accepts the user's arguments. Changes nothing on the system
//! (a probe directory is made and removed at once).

use crate::error::LoadError;
use crate::plan::{plan, LoadSpec, Plan, SystemFacts};
use cpushield_kernel::{online_cpus, Kernel};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Checks everything a load needs and returns what it would run, without
/// starting anything.
pub fn validate(kernel: &dyn Kernel, spec: &LoadSpec) -> Result<Plan, LoadError> {
    let facts = probe(kernel, spec)?;
    let plan = plan(spec, &facts)?;
    if let Some(run) = &plan.stress_ng {
        stress_ng_dry_run(&run.path, &run.args)?;
    }
    Ok(plan)
}

/// Snapshots the facts about the system that `spec` depends on.
pub fn probe(kernel: &dyn Kernel, spec: &LoadSpec) -> Result<SystemFacts, LoadError> {
    let online = online_cpus(kernel).map_err(|e| LoadError::io("reading the online CPUs", e))?;
    let (dir_problem, free_bytes) = match dir_status(&spec.dir) {
        Ok(free) => (None, free),
        Err(reason) => (Some(reason), 0),
    };
    Ok(SystemFacts {
        online,
        dir_problem,
        free_bytes,
        cc: ["cc", "gcc", "clang"].into_iter().find_map(which),
        echo: which("echo"),
        stress_ng: which("stress-ng"),
    })
}

/// Whether the load can make its run directory under `dir`; on success, the
/// bytes available there.
fn dir_status(dir: &Path) -> Result<u64, String> {
    let meta = std::fs::metadata(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_string(),
        _ => format!("cannot be read ({e})"),
    })?;
    if !meta.is_dir() {
        return Err("is not a directory".into());
    }
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(|_| "contains a NUL byte")?;
    // SAFETY: statvfs is a plain C struct of integers; all zeroes is valid.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated CString and `vfs` a writable statvfs,
    // both alive for the whole call.
    if unsafe { libc::statvfs(path.as_ptr(), &mut vfs) } != 0 {
        return Err(format!(
            "statvfs failed ({})",
            std::io::Error::last_os_error()
        ));
    }
    if vfs.f_flag & libc::ST_RDONLY != 0 {
        return Err("is on a read-only file system".into());
    }
    let probe = dir.join(format!(".cpushield-load-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| format!("cannot create a directory in it ({e})"))?;
    let _ = std::fs::remove_dir(&probe);
    Ok((vfs.f_bavail as u64).saturating_mul(vfs.f_frsize as u64))
}

/// The first executable file called `name` in `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Asks stress-ng whether it accepts `args` (`--dry-run`).
fn stress_ng_dry_run(path: &Path, args: &[String]) -> Result<(), LoadError> {
    let out = Command::new(path)
        .args(args)
        .arg("--dry-run")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LoadError::io(format!("running {}", path.display()), e))?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let reason = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("Try ") && !l.contains(" info: "))
        .unwrap_or("it exited with an error")
        .to_string();
    Err(LoadError::StressNgRejected {
        args: args.join(" "),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_dir_is_named_as_missing() {
        assert_eq!(
            dir_status(Path::new("/nonexistent/cpushield")).unwrap_err(),
            "does not exist"
        );
    }

    #[test]
    fn a_file_is_not_a_dir() {
        let f = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(dir_status(f.path()).unwrap_err(), "is not a directory");
    }

    #[test]
    fn proc_cannot_hold_files() {
        let err = dir_status(Path::new("/proc")).unwrap_err();
        assert!(err.contains("cannot create"), "{err}");
    }

    #[test]
    fn a_temp_dir_is_usable_and_left_as_found() {
        let d = tempfile::tempdir().unwrap();
        assert!(dir_status(d.path()).unwrap() > 0);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn which_finds_sh_and_not_nonsense() {
        assert!(which("sh").is_some());
        assert!(which("cpushield-no-such-tool").is_none());
    }
}
