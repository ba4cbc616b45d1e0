//! tracefs mounted while any cpushield process traces, and unmounted by
//! the last of them, only where a cpushield process mounted it.
//!
//! Several cpushield processes may trace at once (a `vm watch` per guest, a
//! `measure --trace-above` beside them). Each mounting tracefs when it finds
//! it unmounted and unmounting it when it had mounted it does not do: the
//! one that mounted may end first, and its unmount then fails (EBUSY) or
//! pulls tracefs from under the others, and the last one, which did not
//! mount it, leaves it mounted. So the processes agree through three files
//! of the state directory ([`cpushield_kernel::shield_state_dir`]):
//!
//! - `tracefs.lock`, held exclusively for the few steps of a start or an
//!   end, so that two of them never interleave;
//! - `tracefs-NS-ROOT.users` (NS the mount namespace, ROOT the mount point,
//!   `/` as `-`), held shared by every user for its whole session: the
//!   kernel releases it when a user dies, however it dies;
//! - `tracefs-NS-ROOT.mounted`, the marker: tracefs there was mounted by a
//!   cpushield process (in this boot: it holds the boot's ID), which the
//!   last user is to unmount.
//!
//! A user starts by taking the first lock, then its shared lock; where
//! tracefs is not mounted it writes the marker, then mounts (in that order:
//! a start killed between the two leaves a marker of nothing mounted, which
//! the next user corrects, never a mount no one will undo). It ends by
//! taking the first lock, letting its shared lock go and asking for the
//! users' lock exclusively without waiting: granted, no user remains, and
//! it unmounts where the marker says cpushield mounted; refused, another
//! user remains and will. A user killed leaves the marker: the next user
//! to end, or to start and end, unmounts. tracefs mounted by someone else
//! (no marker) is never unmounted. The users' lock and the marker are per
//! mount namespace: a private namespace's tracefs is not the host's.

use cpushield_kernel::{os_errno, FileLock, Kernel, LockKind, Procfs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file held for the steps of a start or an end, in the state directory.
pub const SETUP_LOCK: &str = "tracefs.lock";

/// This process's use of tracefs at one mount point: mounted while it
/// lives. [`TracefsUse::release`] (or dropping it) ends the use, and the
/// last user unmounts what a cpushield process mounted.
pub struct TracefsUse {
    kernel: Arc<dyn Kernel>,
    root: PathBuf,
    /// The lock files and the marker; `None` where the state directory
    /// cannot be used (read-only): then this process unmounts what it
    /// mounted itself, as if alone.
    files: Option<Files>,
    users: Option<Box<dyn FileLock>>,
    mounted_here: bool,
    released: bool,
}

/// The files users of one mount point agree through.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Files {
    setup: PathBuf,
    users: PathBuf,
    marker: PathBuf,
}

impl Files {
    /// The files of tracefs at `root` in this process's mount namespace.
    fn of(k: &dyn Kernel, root: &Path, dir: &Path) -> Files {
        let ns: String = Procfs::new(k)
            .own_link("ns/mnt")
            .map(|l| {
                l.to_string_lossy()
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect()
            })
            .unwrap_or_default();
        let stem = match ns.as_str() {
            "" => format!("tracefs{}", escape(root)),
            ns => format!("tracefs-{ns}{}", escape(root)),
        };
        Files {
            setup: dir.join(SETUP_LOCK),
            users: dir.join(format!("{stem}.users")),
            marker: dir.join(format!("{stem}.mounted")),
        }
    }
}

/// A mount point as part of a file name: each `/` as `-`, letters, digits,
/// `_` and `.` as they are, any other byte as `%XX` (`/sys/kernel/tracing`
/// is `-sys-kernel-tracing`).
fn escape(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in root.as_os_str().as_bytes() {
        match b {
            b'/' => out.push('-'),
            b if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' => out.push(b as char),
            b => out.push_str(&format!("%{b:02x}")),
        }
    }
    out
}

/// What the marker holds: the boot's ID, so that a marker a reboot left
/// (in a state directory that outlives boots) is known stale.
fn boot_id(k: &dyn Kernel) -> String {
    Procfs::new(k)
        .file("sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl TracefsUse {
    /// Starts using tracefs at `root`, mounting it where it is not mounted;
    /// the files users agree through are in `state_dir`. The error says
    /// what to do.
    pub fn acquire(
        kernel: Arc<dyn Kernel>,
        root: &Path,
        state_dir: &Path,
    ) -> Result<TracefsUse, String> {
        let k = kernel.as_ref();
        let files = Files::of(k, root, state_dir);
        let mut this = TracefsUse {
            kernel: kernel.clone(),
            root: root.to_path_buf(),
            files: None,
            users: None,
            mounted_here: false,
            released: false,
        };
        let setup = match k.lock_file(&files.setup, LockKind::Exclusive) {
            Ok(lock) => lock,
            // No state directory to agree through: alone.
            Err(_) => {
                if !tracefs_mounted(k, root) {
                    mount(k, root)?;
                    this.mounted_here = true;
                }
                return Ok(this);
            }
        };
        let users = k.lock_file(&files.users, LockKind::Shared).map_err(|e| {
            format!(
                "{}: cannot take the lock of tracefs's users: {e}",
                files.users.display()
            )
        })?;
        this.users = Some(users);
        if tracefs_mounted(k, root) {
            // A marker of another boot says nothing of this mount.
            if read_marker(k, &files.marker).is_some_and(|b| b != boot_id(k)) {
                let _ = k.remove_file(&files.marker);
            }
        } else {
            // The marker first: a start killed before the mount leaves a
            // marker of nothing, never a mount no one undoes.
            k.put_file(&files.marker, &format!("{}\n", boot_id(k)))
                .map_err(|e| {
                    format!(
                        "{}: cannot write the mount marker: {e}",
                        files.marker.display()
                    )
                })?;
            if let Err(e) = mount(k, root) {
                let _ = k.remove_file(&files.marker);
                return Err(e);
            }
            this.mounted_here = true;
        }
        this.files = Some(files);
        drop(setup);
        Ok(this)
    }

    /// Whether this process mounted tracefs (the summary says so); the
    /// last user unmounts it, whichever it is.
    pub fn mounted_here(&self) -> bool {
        self.mounted_here
    }

    /// Ends this process's use (once; dropping does it too): the last user
    /// unmounts tracefs where a cpushield process mounted it. Returns what
    /// could not be done, each with its remedy.
    pub fn release(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.released, true) {
            return Vec::new();
        }
        let k = self.kernel.as_ref();
        let Some(files) = self.files.clone() else {
            if self.mounted_here {
                return unmount(k, &self.root).into_iter().collect();
            }
            return Vec::new();
        };
        // Waiting for a start or an end of another user, which is short.
        let setup = k.lock_file(&files.setup, LockKind::Exclusive);
        drop(self.users.take());
        let mut errors = Vec::new();
        match k.lock_file(&files.users, LockKind::TryExclusive) {
            Ok(last) => {
                let ours = read_marker(k, &files.marker).map(|b| b == boot_id(k));
                let unmounted = match ours {
                    Some(true) if tracefs_mounted(k, &self.root) => unmount(k, &self.root),
                    _ => None,
                };
                match unmounted {
                    // Kept: a later user, or the test harness, unmounts.
                    Some(e) => errors.push(e),
                    None if ours.is_some() => {
                        let _ = k.remove_file(&files.marker);
                    }
                    None => {}
                }
                // Under both locks no one is between opening this file and
                // locking it, so it can go: a later user makes it again.
                if setup.is_ok() {
                    let _ = k.remove_file(&files.users);
                }
                drop(last);
            }
            // Another user remains: the last one unmounts.
            Err(e) if os_errno(&e) == Some(libc::EWOULDBLOCK) => {}
            Err(e) => errors.push(format!(
                "{}: cannot tell whether tracefs has other users: {e}; unmount {} with umount once no cpushield process traces",
                files.users.display(),
                self.root.display()
            )),
        }
        drop(setup);
        errors
    }
}

impl Drop for TracefsUse {
    fn drop(&mut self) {
        for e in self.release() {
            eprintln!("cpushield: warning: {e}");
        }
    }
}

/// The boot ID a marker holds; `None` when there is no marker.
fn read_marker(k: &dyn Kernel, marker: &Path) -> Option<String> {
    k.read(marker).ok().map(|s| s.trim().to_string())
}

fn mount(k: &dyn Kernel, root: &Path) -> Result<(), String> {
    k.mount("tracefs", root).map_err(|e| {
        format!(
            "{}: cannot mount tracefs: {e}; run as root (or mount it: mount -t tracefs nodev {})",
            root.display(),
            root.display()
        )
    })
}

/// Unmounts tracefs at `root`; the error with its remedy.
fn unmount(k: &dyn Kernel, root: &Path) -> Option<String> {
    k.unmount(root).err().map(|e| {
        format!(
            "{}: could not unmount tracefs: {e} (someone else is using it); unmount it later with umount",
            root.display()
        )
    })
}

/// Whether tracefs is mounted at `root` (from /proc/self/mounts).
pub fn tracefs_mounted(k: &dyn Kernel, root: &Path) -> bool {
    let mounts = Procfs::new(k).own_file("mounts").unwrap_or_default();
    cpushield_parse::mounts::parse_mounts(&mounts)
        .iter()
        .any(|m| m.fs_type == "tracefs" && m.mount_point == root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::{FakeKernel, RealKernel};

    const ROOT: &str = "/sys/kernel/tracing";
    const STATE: &str = "/run/cpushield";
    const USERS: &str = "/run/cpushield/tracefs-4026531841-sys-kernel-tracing.users";
    const MARKER: &str = "/run/cpushield/tracefs-4026531841-sys-kernel-tracing.mounted";

    /// A machine whose tracefs is not mounted.
    fn machine() -> Arc<FakeKernel> {
        let k = Arc::new(FakeKernel::new());
        k.set_file("/proc/self/ns/mnt", "mnt:[4026531841]");
        k.set_file("/proc/sys/kernel/random/boot_id", "b00710\n");
        k.set_unmounted_file(ROOT, format!("{ROOT}/trace_clock"), "[local] mono\n");
        k
    }

    /// One cpushield process starting to trace.
    fn user(k: &Arc<FakeKernel>) -> TracefsUse {
        TracefsUse::acquire(k.clone(), Path::new(ROOT), Path::new(STATE)).unwrap()
    }

    /// What the kernel does for a process killed while it traces: its
    /// locks are released, nothing else is done.
    fn kill(mut u: TracefsUse) {
        drop(u.users.take());
        u.released = true;
    }

    #[test]
    fn the_files_are_named_after_the_mount_namespace_and_the_mount_point() {
        let k = machine();
        let f = Files::of(k.as_ref(), Path::new(ROOT), Path::new(STATE));
        assert_eq!(f.users, Path::new(USERS));
        assert_eq!(f.marker, Path::new(MARKER));
        assert_eq!(f.setup, Path::new("/run/cpushield/tracefs.lock"));
        assert_eq!(escape(Path::new("/mnt/a-b c")), "-mnt-a%2db%20c");
    }

    #[test]
    fn a_lone_user_mounts_tracefs_and_unmounts_it_at_its_end_leaving_no_file() {
        let k = machine();
        let mut a = user(&k);
        assert!(a.mounted_here() && k.is_mounted(ROOT));
        assert_eq!(k.file(MARKER).unwrap(), "b00710\n");
        assert!(a.release().is_empty());
        assert!(!k.is_mounted(ROOT));
        assert!(k.file(MARKER).is_none() && !k.has_lock_file(USERS));
        assert!(k.file("/proc/self/mounts").is_none());
    }

    #[test]
    fn the_user_that_mounted_ending_first_leaves_tracefs_to_the_last_which_unmounts() {
        let k = machine();
        let mut a = user(&k);
        let mut b = user(&k);
        assert!(a.mounted_here() && !b.mounted_here());
        assert!(a.release().is_empty());
        assert!(k.is_mounted(ROOT), "B still traces");
        assert!(k.file(MARKER).is_some());
        assert!(b.release().is_empty());
        assert!(!k.is_mounted(ROOT), "the last user unmounts what A mounted");
        assert!(k.file(MARKER).is_none());
    }

    #[test]
    fn tracefs_mounted_by_someone_else_is_never_unmounted() {
        let k = machine();
        k.mount("tracefs", Path::new(ROOT)).unwrap();
        let mut a = user(&k);
        let mut b = user(&k);
        assert!(!a.mounted_here() && !b.mounted_here());
        assert!(a.release().is_empty() && b.release().is_empty());
        let mut c = user(&k);
        drop(c.release());
        assert!(k.is_mounted(ROOT));
        assert!(k.file(MARKER).is_none());
    }

    #[test]
    fn a_user_killed_leaves_the_unmount_to_the_next_user_to_end() {
        // Killed while another traces: that one unmounts.
        let k = machine();
        let a = user(&k);
        let mut b = user(&k);
        kill(a);
        assert!(k.is_mounted(ROOT));
        assert!(b.release().is_empty());
        assert!(!k.is_mounted(ROOT));
        // Killed alone: the next user finds tracefs mounted, inherits the
        // marker and unmounts at its end.
        let k = machine();
        kill(user(&k));
        assert!(k.is_mounted(ROOT) && k.file(MARKER).is_some());
        let mut c = user(&k);
        assert!(!c.mounted_here());
        assert!(c.release().is_empty());
        assert!(!k.is_mounted(ROOT) && k.file(MARKER).is_none());
    }

    #[test]
    fn a_marker_of_nothing_mounted_or_of_another_boot_is_set_right() {
        // A start killed between the marker and the mount.
        let k = machine();
        k.put_file(Path::new(MARKER), "b00710\n").unwrap();
        let mut a = user(&k);
        assert!(a.mounted_here());
        assert!(a.release().is_empty());
        assert!(!k.is_mounted(ROOT) && k.file(MARKER).is_none());
        // A marker a reboot left, in a state directory that outlives boots,
        // beside a tracefs the new boot mounted.
        let k = machine();
        k.mount("tracefs", Path::new(ROOT)).unwrap();
        k.put_file(Path::new(MARKER), "0ther-b00t\n").unwrap();
        let mut a = user(&k);
        assert!(a.release().is_empty());
        assert!(k.is_mounted(ROOT));
    }

    #[test]
    fn a_mount_refused_leaves_no_marker_and_no_lock() {
        let k = Arc::new(FakeKernel::new());
        k.set_file("/proc/self/ns/mnt", "mnt:[4026531841]");
        let err = TracefsUse::acquire(k.clone(), Path::new(ROOT), Path::new(STATE))
            .err()
            .unwrap();
        assert!(err.contains("cannot mount tracefs"), "{err}");
        assert!(k.file(MARKER).is_none());
        let setup = k.lock_file(
            Path::new("/run/cpushield/tracefs.lock"),
            LockKind::TryExclusive,
        );
        let users = k.lock_file(Path::new(USERS), LockKind::TryExclusive);
        assert!(setup.is_ok() && users.is_ok());
    }

    /// The fake's files and mounts, with the state directory's files real
    /// (under `dir`): the locks are flock(2)'s own.
    struct RealLocks {
        fake: Arc<FakeKernel>,
        dir: PathBuf,
    }

    impl RealLocks {
        fn at(&self, path: &Path) -> &dyn Kernel {
            if path.starts_with(&self.dir) {
                &RealKernel
            } else {
                self.fake.as_ref()
            }
        }
    }

    impl Kernel for RealLocks {
        fn read_bytes(&self, path: &Path) -> std::io::Result<Vec<u8>> {
            self.at(path).read_bytes(path)
        }
        fn write(&self, path: &Path, data: &str) -> std::io::Result<()> {
            self.at(path).write(path, data)
        }
        fn read_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
            self.at(path).read_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.at(path).exists(path)
        }
        fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
            self.fake.read_link(path)
        }
        fn mkdir(&self, path: &Path) -> std::io::Result<()> {
            self.fake.mkdir(path)
        }
        fn rmdir(&self, path: &Path) -> std::io::Result<()> {
            self.fake.rmdir(path)
        }
        fn remove_tree(&self, path: &Path) -> std::io::Result<()> {
            self.fake.remove_tree(path)
        }
        fn get_affinity(&self, tid: i32) -> std::io::Result<cpushield_cpuset::CpuSet> {
            self.fake.get_affinity(tid)
        }
        fn set_affinity(&self, tid: i32, cpus: &cpushield_cpuset::CpuSet) -> std::io::Result<()> {
            self.fake.set_affinity(tid, cpus)
        }
        fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
            self.fake.set_xattr(path, name, value)
        }
        fn get_xattr(&self, path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
            self.fake.get_xattr(path, name)
        }
        fn get_sched(&self, tid: i32) -> std::io::Result<cpushield_kernel::SchedParams> {
            self.fake.get_sched(tid)
        }
        fn set_sched(&self, tid: i32, p: &cpushield_kernel::SchedParams) -> std::io::Result<()> {
            self.fake.set_sched(tid, p)
        }
        fn mount(&self, fstype: &str, target: &Path) -> std::io::Result<()> {
            self.fake.mount(fstype, target)
        }
        fn unmount(&self, target: &Path) -> std::io::Result<()> {
            self.fake.unmount(target)
        }
        fn lock_file(&self, path: &Path, kind: LockKind) -> std::io::Result<Box<dyn FileLock>> {
            self.at(path).lock_file(path, kind)
        }
        fn put_file(&self, path: &Path, text: &str) -> std::io::Result<()> {
            self.at(path).put_file(path, text)
        }
        fn remove_file(&self, path: &Path) -> std::io::Result<()> {
            self.at(path).remove_file(path)
        }
    }

    #[test]
    fn with_real_file_locks_the_last_user_unmounts_and_a_killed_one_is_inherited() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let fake = machine();
        let k: Arc<dyn Kernel> = Arc::new(RealLocks {
            fake: fake.clone(),
            dir: dir.clone(),
        });
        let acquire = || TracefsUse::acquire(k.clone(), Path::new(ROOT), &dir).unwrap();
        let marker = dir.join("tracefs-4026531841-sys-kernel-tracing.mounted");
        let users = dir.join("tracefs-4026531841-sys-kernel-tracing.users");
        let (mut a, mut b) = (acquire(), acquire());
        assert!(a.mounted_here() && marker.exists());
        assert!(a.release().is_empty());
        assert!(fake.is_mounted(ROOT), "B still traces");
        assert!(b.release().is_empty());
        assert!(!fake.is_mounted(ROOT) && !marker.exists() && !users.exists());
        // A killed: the kernel lets its lock go; B, the next to end, unmounts.
        let a = acquire();
        let mut b = acquire();
        kill(a);
        assert!(b.release().is_empty());
        assert!(!fake.is_mounted(ROOT) && !marker.exists());
        // Someone else's tracefs stays.
        fake.mount("tracefs", Path::new(ROOT)).unwrap();
        let mut c = acquire();
        assert!(c.release().is_empty());
        assert!(fake.is_mounted(ROOT));
    }

    #[test]
    fn users_in_another_mount_namespace_do_not_keep_this_ones_tracefs_mounted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        // The host's view and a private mount namespace's (`compare` runs
        // in one), each with tracefs unmounted, sharing the state directory.
        let host = machine();
        let private = machine();
        private.set_file("/proc/self/ns/mnt", "mnt:[4026532999]");
        let on = |fake: &Arc<FakeKernel>| {
            let k: Arc<dyn Kernel> = Arc::new(RealLocks {
                fake: fake.clone(),
                dir: dir.clone(),
            });
            TracefsUse::acquire(k, Path::new(ROOT), &dir).unwrap()
        };
        let (mut a, mut p) = (on(&host), on(&private));
        assert!(a.mounted_here() && p.mounted_here());
        assert!(a.release().is_empty());
        assert!(!host.is_mounted(ROOT), "the host's last user unmounts");
        assert!(private.is_mounted(ROOT));
        assert!(p.release().is_empty());
        assert!(!private.is_mounted(ROOT));
    }
}
