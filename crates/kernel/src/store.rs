//! Where the shield's saved state lives: the state file and its verified
//! copy, and the lock that serialises cpushield invocations. The bytes are
//! the shield's business (cpushield-shield encodes, verifies and recovers
//! them); this module only keeps them, durably, on disk ([`FileStore`]) or
//! in memory for tests ([`MemoryStore`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the saved state lives: the state file and its verified copy, written
/// atomically, and the lock serialising cpushield invocations. [`FileStore`]
/// keeps them in the state directory; [`MemoryStore`] in memory, so that
/// `shield`, `unshield` and `reset` run whole against a fake kernel. The
/// copy written first, recovery and the error texts are the
/// same for every store (they live in cpushield-shield's `state` module).
pub trait StateStore: Send + Sync {
    /// The directory the copies are named in, for messages.
    fn dir(&self) -> PathBuf;
    /// The bytes of one copy (`STATE_FILE` or `BACKUP_FILE`); NotFound when absent.
    fn read(&self, name: &str) -> io::Result<Vec<u8>>;
    /// Whether a copy exists.
    fn exists(&self, name: &str) -> bool;
    /// Replaces one copy with `bytes`, durably and all or nothing (no partial
    /// copy and no temp file outlives a failure).
    fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Removes one copy; a missing copy is not an error.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Waits for and takes the exclusive lock.
    fn lock(&self) -> io::Result<StateLock>;
    /// Takes the lock for a reset, which also works where the store is read-only.
    fn lock_for_reset(&self) -> io::Result<StateLock>;
    /// What tells this version of one copy from any other without reading
    /// it, when the store can say: a copy is only ever replaced whole
    /// ([`StateStore::write_atomically`]), so a version that has not changed
    /// names the same bytes. `None` (the default, and when the copy is
    /// absent) means read and compare.
    fn version(&self, _name: &str) -> Option<CopyVersion> {
        None
    }
    /// Whether the init of PID namespace `ns` (as `/proc/self/ns/pid` names
    /// it) holds its liveness lock here ([`FileStore::hold_namespace_alive`]):
    /// a namespace this process cannot see (a sibling, on cgroup v1) is
    /// still known to live. By default no namespace holds one.
    fn namespace_alive(&self, _ns: &str) -> bool {
        false
    }
    /// Removes the liveness file of PID namespace `ns`, once it is known to
    /// be gone: an init killed (SIGKILL) could not remove its own, and a
    /// later run would take it for a namespace still there. By default
    /// there is none.
    fn forget_namespace(&self, _ns: &str) {}
}

/// One version of a copy in its store ([`StateStore::version`]): for a file,
/// its device and inode, size, and modification and change times, with the
/// file held open, so that while this version is kept no later copy can be
/// given the same inode (a freed inode number is soon given to the next
/// file, and times have a granularity of milliseconds); in memory, the
/// write that made it. Two versions are equal when their numbers are.
#[derive(Debug, Clone)]
pub struct CopyVersion {
    numbers: [u64; 7],
    _held: Option<Arc<File>>,
}

impl PartialEq for CopyVersion {
    fn eq(&self, other: &Self) -> bool {
        self.numbers == other.numbers
    }
}

impl Eq for CopyVersion {}

/// A store whose lock the caller already holds: every read and write goes
/// to `inner`, and taking the lock again (which `flock` would refuse the same
/// process on a new descriptor until the first is released) is a no-op. For
/// a command made of several steps that must be one locked operation
/// (`apply`: shield, then its `[runtime]` settings).
pub struct Locked {
    inner: Arc<dyn StateStore>,
    _lock: StateLock,
}

impl Locked {
    /// Takes `inner`'s lock until the returned store is dropped.
    pub fn take(inner: Arc<dyn StateStore>) -> io::Result<Self> {
        let lock = inner.lock()?;
        Ok(Self { inner, _lock: lock })
    }
}

impl StateStore for Locked {
    fn dir(&self) -> PathBuf {
        self.inner.dir()
    }
    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        self.inner.read(name)
    }
    fn exists(&self, name: &str) -> bool {
        self.inner.exists(name)
    }
    fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_atomically(name, bytes)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn version(&self, name: &str) -> Option<CopyVersion> {
        self.inner.version(name)
    }
    fn lock(&self) -> io::Result<StateLock> {
        Ok(StateLock { _file: None })
    }
    fn lock_for_reset(&self) -> io::Result<StateLock> {
        Ok(StateLock { _file: None })
    }
    fn namespace_alive(&self, ns: &str) -> bool {
        self.inner.namespace_alive(ns)
    }
    fn forget_namespace(&self, ns: &str) {
        self.inner.forget_namespace(ns)
    }
}

/// The state in the state directory (`CPUSHIELD_STATE_DIR` or /run/cpushield).
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    fn prepare(&self) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| store_error(e, &self.dir))
    }

    /// The store in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The store where every cpushield command looks:
    /// [`crate::shield_state_dir`] (`CPUSHIELD_STATE_DIR`, else
    /// /run/cpushield). Called where a command starts, never in a library.
    pub fn from_env() -> Self {
        Self::new(crate::shield_state_dir())
    }

    /// Opens (creating it if need be) a file of the state directory whose
    /// lock is taken: the store's lock, a namespace's liveness lock.
    fn open_lock_file(&self, path: &Path) -> io::Result<File> {
        self.prepare()?;
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| store_error(e, path))
    }

    /// The file whose lock the init of PID namespace `ns` holds: named after
    /// the namespace's inode (`pid:[4026532204]` → `namespace-4026532204.alive`).
    fn alive_file(&self, ns: &str) -> PathBuf {
        let inode: String = ns.chars().filter(char::is_ascii_digit).collect();
        self.dir.join(format!("namespace-{inode}.alive"))
    }

    /// For the init of a private PID namespace (`compare`, `tune`, `demo`),
    /// before it changes anything: an exclusive lock on a file here named
    /// after its namespace `ns`, held as long as the returned file is open
    /// (the init's whole life; a child it forks shares it until it ends,
    /// and the kernel ends them all with the init). A lock crosses PID
    /// namespaces where a process list does not: `reset --namespace-gone`
    /// run where this namespace's tasks cannot be seen still finds it alive
    /// ([`StateStore::namespace_alive`]).
    pub fn hold_namespace_alive(&self, ns: &str) -> io::Result<File> {
        let path = self.alive_file(ns);
        let file = self.open_lock_file(&path)?;
        // SAFETY: flock on a descriptor `file` owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(crate::with_path(io::Error::last_os_error(), &path));
        }
        Ok(file)
    }

    /// Removes the liveness file of namespace `ns` (its init's end); a
    /// missing file is not an error.
    pub fn release_namespace_alive(&self, ns: &str) {
        let _ = std::fs::remove_file(self.alive_file(ns));
    }
}

impl StateStore for FileStore {
    fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.dir.join(name))
    }

    fn exists(&self, name: &str) -> bool {
        self.dir.join(name).exists()
    }

    fn version(&self, name: &str) -> Option<CopyVersion> {
        use std::os::unix::fs::MetadataExt;
        let file = File::open(self.dir.join(name)).ok()?;
        let m = file.metadata().ok()?;
        // Times as their raw bits: nanoseconds may be negative for a time before 1970.
        let numbers = [
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime() as u64,
            m.mtime_nsec() as u64,
            m.ctime() as u64,
            m.ctime_nsec() as u64,
        ];
        Some(CopyVersion {
            numbers,
            _held: Some(Arc::new(file)),
        })
    }

    /// Through a temp file: write, fsync, rename, then the directory fsync'd.
    fn write_atomically(&self, name: &str, text: &[u8]) -> io::Result<()> {
        self.prepare()?;
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let result = (|| {
            let mut file = File::create(&tmp).map_err(|e| store_error(e, &tmp))?;
            file.write_all(text).map_err(|e| store_error(e, &tmp))?;
            file.sync_all().map_err(|e| store_error(e, &tmp))?;
            if path.is_dir() {
                // A damaged state "file" that is an empty directory (see load_from).
                std::fs::remove_dir(&path).map_err(|e| store_error(e, &path))?;
            }
            std::fs::rename(&tmp, &path).map_err(|e| store_error(e, &path))?;
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| store_error(e, &self.dir))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let path = self.dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            // A state "file" that is an (empty) directory.
            Err(e) if path.is_dir() => std::fs::remove_dir(&path).map_err(|_| e),
            Err(e) => Err(e),
        }
        .map_err(|e| crate::with_path(e, &path))
    }

    fn lock(&self) -> io::Result<StateLock> {
        let path = self.dir.join("lock");
        let file = self.open_lock_file(&path)?;
        StateLock::flock(file, &path)
    }

    /// Where the state directory is read-only the lock file is opened for
    /// reading (flock works on any open file); with no lock file there, no
    /// shield can be written meanwhile either, so none is needed.
    fn lock_for_reset(&self) -> io::Result<StateLock> {
        match self.lock() {
            Ok(lock) => Ok(lock),
            Err(e)
                if matches!(
                    crate::os_errno(&e),
                    Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::ENOSPC)
                ) =>
            {
                let path = self.dir.join("lock");
                match File::open(&path) {
                    Ok(file) => StateLock::flock(file, &path),
                    Err(_) => Ok(StateLock { _file: None }),
                }
            }
            Err(e) => Err(e),
        }
    }

    fn namespace_alive(&self, ns: &str) -> bool {
        // Read-only is enough to test a lock: a reset may run where the
        // store cannot be written.
        let Ok(file) = File::open(self.alive_file(ns)) else {
            return false;
        };
        // SAFETY: flock on a descriptor `file` owns; a lock taken here is
        // released when `file` closes at the end of this function.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
    }

    fn forget_namespace(&self, ns: &str) {
        self.release_namespace_alive(ns);
    }
}

/// A state store in memory, for tests: the same protocol as [`FileStore`]
/// (two copies, recovery), with injectable write failures.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Arc<std::sync::Mutex<MemoryInner>>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    copies: BTreeMap<String, Vec<u8>>,
    /// Each copy's version: a number no earlier change of any copy had.
    versions: BTreeMap<String, u64>,
    changes: u64,
    fail_writes: Option<i32>,
    writes: usize,
    alive: std::collections::BTreeSet<String>,
    /// Namespaces whose liveness file was left by a killed init.
    left: std::collections::BTreeSet<String>,
}

impl MemoryInner {
    /// Gives copy `name` a version no copy had before.
    fn changed(&mut self, name: &str) {
        self.changes += 1;
        let version = self.changes;
        self.versions.insert(name.to_string(), version);
    }
}

impl MemoryStore {
    /// An empty store: nothing shielded.
    pub fn new() -> Self {
        Self::default()
    }

    /// A second handle on this same store (a [`crate::Host`] keeps one
    /// while the test keeps the other, to damage or inspect the copies).
    pub fn handle(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }

    /// From now on every write fails with `errno` (ENOSPC, EROFS…), as a full
    /// or read-only state directory does; `None` lets writes through again.
    pub fn fail_writes(&self, errno: Option<i32>) {
        self.inner.lock().unwrap().fail_writes = errno;
    }

    /// The bytes of one copy (`STATE_FILE` or `BACKUP_FILE`), if present.
    pub fn copy(&self, name: &str) -> Option<Vec<u8>> {
        self.inner.lock().unwrap().copies.get(name).cloned()
    }

    /// Replaces (or with `None` removes) one copy, e.g. to damage it.
    pub fn set_copy(&self, name: &str, bytes: Option<Vec<u8>>) {
        let mut inner = self.inner.lock().unwrap();
        match bytes {
            Some(b) => inner.copies.insert(name.to_string(), b),
            None => inner.copies.remove(name),
        };
        inner.changed(name);
    }

    /// Marks PID namespace `ns` as holding its liveness lock (or not).
    pub fn set_namespace_alive(&self, ns: &str, alive: bool) {
        let mut inner = self.inner.lock().unwrap();
        if alive {
            inner.alive.insert(ns.to_string());
        } else {
            inner.alive.remove(ns);
        }
    }

    /// Leaves the liveness file of PID namespace `ns` behind, as its init
    /// killed with SIGKILL does (its lock released, the file still there).
    pub fn leave_namespace_file(&self, ns: &str) {
        let mut inner = self.inner.lock().unwrap();
        inner.alive.remove(ns);
        inner.left.insert(ns.to_string());
    }

    /// Whether the liveness file of PID namespace `ns` is there (held by
    /// its init, or left by one killed).
    pub fn has_namespace_file(&self, ns: &str) -> bool {
        let inner = self.inner.lock().unwrap();
        inner.alive.contains(ns) || inner.left.contains(ns)
    }

    /// How many copies were written successfully so far.
    pub fn writes(&self) -> usize {
        self.inner.lock().unwrap().writes
    }

    fn failure(&self, name: &str) -> io::Result<()> {
        match self.inner.lock().unwrap().fail_writes {
            Some(errno) => Err(store_error(
                io::Error::from_raw_os_error(errno),
                &self.dir().join(name),
            )),
            None => Ok(()),
        }
    }
}

impl StateStore for MemoryStore {
    fn dir(&self) -> PathBuf {
        PathBuf::from("/memory/cpushield")
    }

    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        self.copy(name)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn exists(&self, name: &str) -> bool {
        self.copy(name).is_some()
    }

    fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.failure(name)?;
        let mut inner = self.inner.lock().unwrap();
        inner.copies.insert(name.to_string(), bytes.to_vec());
        inner.changed(name);
        inner.writes += 1;
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.failure(name)?;
        let mut inner = self.inner.lock().unwrap();
        inner.copies.remove(name);
        inner.changed(name);
        Ok(())
    }

    fn version(&self, name: &str) -> Option<CopyVersion> {
        let inner = self.inner.lock().unwrap();
        inner.copies.get(name)?;
        let version = *inner.versions.get(name)?;
        Some(CopyVersion {
            numbers: [version, 0, 0, 0, 0, 0, 0],
            _held: None,
        })
    }

    fn lock(&self) -> io::Result<StateLock> {
        Ok(StateLock { _file: None })
    }

    fn lock_for_reset(&self) -> io::Result<StateLock> {
        Ok(StateLock { _file: None })
    }

    fn namespace_alive(&self, ns: &str) -> bool {
        self.inner.lock().unwrap().alive.contains(ns)
    }

    fn forget_namespace(&self, ns: &str) {
        let mut inner = self.inner.lock().unwrap();
        inner.alive.remove(ns);
        inner.left.remove(ns);
    }
}

/// An error saving the state, with the path and the remedy; the errno stays
/// reachable through [`crate::os_errno`].
fn store_error(e: io::Error, path: &Path) -> io::Error {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let remedy = match crate::os_errno(&e) {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => format!("free space in {}", dir.display()),
        Some(libc::EROFS) => format!("{} is read-only: remount it read-write", dir.display()),
        _ => format!("make {} writable", dir.display()),
    };
    crate::with_path_and_remedy(
        e,
        path,
        format!("cannot save the shield state: {remedy}, or set CPUSHIELD_STATE_DIR to a writable directory; nothing was changed"),
    )
}

/// An exclusive lock serialising cpushield invocations; released on drop or death.
pub struct StateLock {
    _file: Option<File>,
}

impl StateLock {
    fn flock(file: File, path: &Path) -> io::Result<Self> {
        // SAFETY: flock on a file descriptor this function owns (valid while `file` lives).
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(crate::with_path(io::Error::last_os_error(), path));
        }
        Ok(Self { _file: Some(file) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copys_version_stays_until_the_copy_is_replaced_in_either_store() {
        let dir = tempfile::tempdir().unwrap();
        let file = FileStore::new(dir.path().join("state"));
        let memory = MemoryStore::new();
        for store in [&file as &dyn StateStore, &memory] {
            assert_eq!(store.version("state.json"), None, "absent");
            store.write_atomically("state.json", b"{}").unwrap();
            let first = store.version("state.json").unwrap();
            assert_eq!(store.version("state.json").as_ref(), Some(&first));
            store.write_atomically("other.json", b"{}").unwrap();
            assert_eq!(
                store.version("state.json").as_ref(),
                Some(&first),
                "another copy written"
            );
            // The same bytes again are a new version: a version never
            // names two writes.
            store.write_atomically("state.json", b"{}").unwrap();
            let second = store.version("state.json").unwrap();
            assert_ne!(second, first);
            store.remove("state.json").unwrap();
            assert_eq!(store.version("state.json"), None, "removed");
        }
    }

    #[test]
    fn a_namespace_holds_its_liveness_lock_until_its_file_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().join("state"));
        let ns = "pid:[4026532204]";
        assert!(!store.namespace_alive(ns), "no lock file: not alive");
        let held = store.hold_namespace_alive(ns).unwrap();
        assert!(dir.path().join("state/namespace-4026532204.alive").exists());
        // Another open of the file, as another PID namespace's reset makes.
        assert!(FileStore::new(dir.path().join("state")).namespace_alive(ns));
        assert!(!store.namespace_alive("pid:[4026532205]"));
        drop(held);
        assert!(!store.namespace_alive(ns), "the init's end releases it");
        // A killed init leaves its file: forgotten once the namespace is gone.
        assert!(dir.path().join("state/namespace-4026532204.alive").exists());
        store.forget_namespace(ns);
        assert!(!dir.path().join("state/namespace-4026532204.alive").exists());
        store.release_namespace_alive(ns);
        assert!(!dir.path().join("state/namespace-4026532204.alive").exists());
    }
}
