//! The file door of install and uninstall: every read and change of the
//! installed files goes through [`Files`], so the planner runs on a test's
//! files as on the real ones.

use std::io;
use std::path::{Path, PathBuf};

/// The files install and uninstall read and change, named by absolute paths.
pub trait Files {
    /// The file's bytes, `None` if there is no such file.
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
    /// Whether a directory is there.
    fn is_dir(&self, path: &Path) -> bool;
    /// Writes a file whole (temp file + rename), mode 0644.
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    /// Creates one directory (its parent exists).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory; a directory with files, or none, is left (Ok).
    fn rmdir_if_empty(&self, path: &Path) -> io::Result<()>;
}

/// [`Files`] on the real filesystem, every path taken under `root`.
pub struct RootFiles {
    /// The directory the plan's absolute paths are taken under.
    pub root: PathBuf,
}

impl RootFiles {
    fn at(&self, path: &Path) -> PathBuf {
        self.root.join(path.strip_prefix("/").unwrap_or(path))
    }
}

impl Files for RootFiles {
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.at(path)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.at(path).is_dir()
    }
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let target = self.at(path);
        let dir = target.parent().unwrap_or(Path::new("/"));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(data)?;
        tmp.as_file().sync_all()?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
        tmp.persist(&target).map_err(|e| e.error)?;
        Ok(())
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(self.at(path))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(self.at(path))
    }
    fn rmdir_if_empty(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_dir(self.at(path)) {
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => Ok(()),
            // Listed by an install that failed before making it.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// [`Files`] in memory: a test's machine, with no disk behind it.
#[derive(Debug, Default)]
pub struct MemoryFiles {
    files: std::cell::RefCell<std::collections::BTreeMap<PathBuf, Vec<u8>>>,
    dirs: std::cell::RefCell<std::collections::BTreeSet<PathBuf>>,
}

impl MemoryFiles {
    /// Only the root directory.
    pub fn new() -> Self {
        let files = Self::default();
        files.dirs.borrow_mut().insert(PathBuf::from("/"));
        files
    }

    /// Puts a file there, with the directories above it.
    pub fn put(&self, path: &str, data: &str) {
        let path = PathBuf::from(path);
        for dir in path.ancestors().skip(1) {
            self.dirs.borrow_mut().insert(dir.to_path_buf());
        }
        self.files
            .borrow_mut()
            .insert(path, data.as_bytes().to_vec());
    }

    /// Every directory and file, sorted, directories with a trailing `/`.
    pub fn tree(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .dirs
            .borrow()
            .iter()
            .map(|d| format!("{}/", d.display()).replace("//", "/"))
            .chain(self.files.borrow().keys().map(|f| f.display().to_string()))
            .collect();
        out.sort();
        out
    }

    /// The text of a file, if there is one.
    pub fn text(&self, path: &str) -> Option<String> {
        self.files
            .borrow()
            .get(Path::new(path))
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, path.display().to_string())
}

impl Files for MemoryFiles {
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        Ok(self.files.borrow().get(path).cloned())
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.dirs.borrow().contains(path)
    }
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        if !path.parent().is_some_and(|p| self.is_dir(p)) {
            return Err(not_found(path));
        }
        self.files
            .borrow_mut()
            .insert(path.to_path_buf(), data.to_vec());
        Ok(())
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        if !path.parent().is_some_and(|p| self.is_dir(p)) {
            return Err(not_found(path));
        }
        if !self.dirs.borrow_mut().insert(path.to_path_buf()) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.files
            .borrow_mut()
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn rmdir_if_empty(&self, path: &Path) -> io::Result<()> {
        let busy = self
            .files
            .borrow()
            .keys()
            .chain(self.dirs.borrow().iter())
            .any(|p| p != path && p.starts_with(path));
        if !busy {
            self.dirs.borrow_mut().remove(path);
        }
        Ok(())
    }
}
