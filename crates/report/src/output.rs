//! Output paths: checked before any work starts (so a bad `--out`, `--json` or
//! `--histogram` fails at once instead of losing a finished run), and written
//! through a temporary file in the same directory and a rename (so a failed or
//! interrupted run leaves no empty or half-written file).

use std::io::Write;
use std::path::{Path, PathBuf};

/// An output path that cannot be written: one line naming the option, the
/// path and the remedy.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OutputError(String);

macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err(OutputError(format!($($arg)*)))
    };
}

/// Whether `path` means standard output (`-`).
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// The directory a file `path` goes into (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates and removes a probe file in the existing directory `dir`.
fn probe(dir: &Path) -> Result<(), String> {
    tempfile::Builder::new()
        .prefix(".cpushield-probe-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| {
            // tempfile's error carries the probe's random name; the OS error is enough.
            let e = e.to_string();
            e.split(" at path ").next().unwrap_or_default().to_string()
        })
}

/// Checks that files can be created in `dir`, or in the nearest existing
/// directory above it when `dir` does not exist yet (it would be created),
/// by creating and removing a probe file. Changes nothing.
fn check_creatable_dir(dir: &Path, flag: &str, shown: &Path) -> Result<(), OutputError> {
    let mut existing = dir.to_path_buf();
    while !existing.exists() {
        existing = match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
    }
    if !existing.is_dir() {
        refuse!(
            "cannot write {flag} {}: {} is not a directory; pick a writable path",
            shown.display(),
            existing.display()
        );
    }
    probe(&existing).map_err(|e| {
        OutputError(format!(
            "cannot write {flag} {}: cannot create files in {} ({e}); pick a writable path",
            shown.display(),
            existing.display()
        ))
    })
}

/// Checks, before any work, that the file `path` can be written (`-` is stdout
/// and always can): its directory must exist (a missing one is most likely a
/// typo) and take new files. Creates nothing.
pub fn check_file(path: &Path, flag: &str) -> Result<(), OutputError> {
    if is_stdout(path) {
        return Ok(());
    }
    if path.is_dir() {
        refuse!(
            "cannot write {flag} {}: it is a directory; name a file, e.g. {}/result.json",
            path.display(),
            path.display()
        );
    }
    let dir = parent_of(path);
    if !dir.is_dir() {
        refuse!(
            "cannot write {flag} {}: {} is not a directory; pick a writable path",
            path.display(),
            dir.display()
        );
    }
    probe(&dir).map_err(|e| {
        OutputError(format!(
            "cannot write {flag} {}: cannot create files in {} ({e}); pick a writable path",
            path.display(),
            dir.display()
        ))
    })
}

/// Checks, before any work, that `dir` is or can become a directory files can
/// be written into. Creates nothing.
pub fn check_dir(dir: &Path, flag: &str) -> Result<(), OutputError> {
    if dir.exists() && !dir.is_dir() {
        refuse!(
            "cannot write {flag} {}: it exists and is not a directory; name a new or existing directory",
            dir.display()
        );
    }
    check_creatable_dir(dir, flag, dir)
}

/// Writes `bytes` to `path` (`-`: stdout) through a temporary file in the same
/// directory and a rename, creating the directory if needed.
pub fn write_file(path: &Path, flag: &str, bytes: &[u8]) -> Result<(), OutputError> {
    if is_stdout(path) {
        let mut out = std::io::stdout().lock();
        let stdout_error = |e: std::io::Error| OutputError(format!("writing to stdout: {e}"));
        out.write_all(bytes).map_err(stdout_error)?;
        return out.flush().map_err(stdout_error);
    }
    let dir = parent_of(path);
    let fail = |e: &dyn std::fmt::Display| {
        OutputError(format!(
            "{flag} {}: cannot write it ({e}); pick a writable path",
            path.display()
        ))
    };
    std::fs::create_dir_all(&dir).map_err(|e| fail(&e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".cpushield-")
        .tempfile_in(&dir)
        .map_err(|e| fail(&e))?;
    tmp.write_all(bytes).map_err(|e| fail(&e))?;
    tmp.as_file().sync_all().map_err(|e| fail(&e))?;
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// An output file checked before any work (so a bad path fails at once) and
/// written only at the end, whole (so a failed run leaves no empty file);
/// `-` is stdout.
pub enum Output {
    /// Standard output.
    Stdout,
    /// A file, and the option that named it.
    File(PathBuf, &'static str),
}

impl Output {
    /// Checks `path` (named by `flag`) now; `None` for no path.
    pub fn open(path: Option<&Path>, flag: &'static str) -> Result<Option<Self>, OutputError> {
        let Some(path) = path else {
            return Ok(None);
        };
        if is_stdout(path) {
            return Ok(Some(Output::Stdout));
        }
        check_file(path, flag)?;
        Ok(Some(Output::File(path.to_path_buf(), flag)))
    }

    /// Writes `text` whole.
    pub fn write(self, text: &str) -> Result<(), OutputError> {
        match self {
            Output::Stdout => write_file(Path::new("-"), "", text.as_bytes()),
            Output::File(path, flag) => write_file(&path, flag, text.as_bytes()),
        }
    }
}

/// A new report directory's default name: `PREFIX-<unix seconds>`.
pub fn default_dir(prefix: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from(format!("{prefix}-{secs}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_file_path_is_refused_before_work() {
        let err = check_file(Path::new("/proc/nope.json"), "--json").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot write --json /proc/nope.json"),
            "{err}"
        );
        assert!(!Path::new("/proc/nope.json").exists());
    }

    #[test]
    fn a_missing_report_directory_is_accepted_and_not_created_but_a_files_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("new/sub/a.json");
        assert!(check_file(&path, "--json").is_err());
        check_file(&tmp.path().join("a.json"), "--json").unwrap();
        check_dir(&tmp.path().join("report"), "--out").unwrap();
        assert!(!tmp.path().join("report").exists());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_directory_is_not_a_file_and_a_file_is_not_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(check_file(tmp.path(), "--json").is_err());
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(check_dir(&file, "--out").is_err());
        assert!(check_file(&file.join("below.json"), "--json").is_err());
    }

    #[test]
    fn writing_replaces_the_file_whole_and_leaves_no_temporary() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("d/a.json");
        write_file(&path, "--json", b"{}\n").unwrap();
        write_file(&path, "--json", b"[1]\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1]\n");
        assert_eq!(std::fs::read_dir(tmp.path().join("d")).unwrap().count(), 1);
    }
}
