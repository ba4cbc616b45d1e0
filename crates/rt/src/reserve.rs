//! CPU reservation (Sherer §3, `pthread_attr_setreserve_np`): while a holder
//! lives, no other cpushield placement may use its CPUs.
//!
//! A reservation is an advisory lock file per CPU, `/run/cpushield/reserve/cpu<N>`,
//! locked with `flock(LOCK_EX | LOCK_NB)` and holding the holder's PID and
//! command. The kernel drops a flock when the last descriptor of its open file
//! closes, so the reservation lives exactly as long as the processes holding
//! that descriptor — a SIGKILLed holder releases it too. `cpushield run
//! --reserve` passes the descriptor to the task across exec for that reason.
//!
//! A file that exists but is not locked is stale (its holder died) and means
//! nothing: only the lock counts.

use cpushield_cpuset::CpuSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where reservations live unless [`DIR_ENV`] says otherwise.
pub const DEFAULT_DIR: &str = "/run/cpushield/reserve";

/// Environment variable naming another reservation directory (tests, or
/// machines without a writable /run). Every cpushield process that should see
/// the same reservations must use the same directory.
pub const DIR_ENV: &str = "CPUSHIELD_RESERVE_DIR";

/// The longest command recorded in a lock file.
const MAX_COMMAND: usize = 200;

/// Who holds a reservation: the lock file's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The holding process (0 if the file could not be read yet).
    pub pid: i32,
    /// Its command line, space-separated and shortened.
    pub command: String,
}

impl Holder {
    /// The calling process.
    pub fn current() -> Self {
        Self::of_pid(std::process::id() as i32)
    }

    /// Process `pid`, its command line read from /proc (empty if gone).
    pub fn of_pid(pid: i32) -> Self {
        let raw = cpushield_kernel::Procfs::new(crate::program::host().kernel())
            .process_bytes(pid, "cmdline")
            .ok()
            .flatten()
            .unwrap_or_default();
        Self {
            pid,
            command: command_line(&raw),
        }
    }

    /// Parses a lock file's text, `<pid> <command>`.
    pub fn parse(text: &str) -> Option<Self> {
        let line = text.lines().next()?;
        let (pid, command) = line.split_once(' ').unwrap_or((line, ""));
        Some(Self {
            pid: pid.trim().parse().ok()?,
            command: command.trim().to_string(),
        })
    }

    /// The lock file's text.
    pub fn to_line(&self) -> String {
        format!("{} {}\n", self.pid, self.command)
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.pid, self.command.is_empty()) {
            (0, _) => write!(f, "a process still writing its lock file"),
            (pid, true) => write!(f, "PID {pid}"),
            (pid, false) => write!(f, "PID {pid} ({})", self.command),
        }
    }
}

/// A NUL-separated /proc cmdline as one shortened line.
fn command_line(raw: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(raw)
        .split('\0')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(['\n', '\r'], " ");
    text.chars().take(MAX_COMMAND).collect()
}

/// Why a reservation was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    /// Another process holds the CPU.
    #[error("CPU {cpu} is reserved by {holder}: wait until it exits or choose another CPU")]
    Held {
        /// The CPU asked for.
        cpu: usize,
        /// Who holds it.
        holder: Holder,
    },
    /// Another process holds a CPU whose shield a command would lift.
    #[error("CPU {cpu} is reserved by {holder}, a task that relies on its shield: stop it first (its reservation ends when it exits), or `cpushield reset` to undo the whole shield anyway")]
    Shielding {
        /// The reserved CPU.
        cpu: usize,
        /// Who holds it.
        holder: Holder,
    },
    /// The lock file could not be created or locked.
    #[error("{}: {source}; reserving needs write access there: run as root or set {DIR_ENV} to a writable directory", path.display())]
    Io {
        /// The lock file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// A directory of per-CPU lock files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveDir {
    path: PathBuf,
}

impl ReserveDir {
    /// Lock files under `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `$CPUSHIELD_RESERVE_DIR` if set, else [`DEFAULT_DIR`].
    pub fn from_env() -> Self {
        match std::env::var_os(DIR_ENV) {
            Some(dir) if !dir.is_empty() => Self::new(dir),
            _ => Self::new(DEFAULT_DIR),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock file of `cpu`.
    pub fn file(&self, cpu: usize) -> PathBuf {
        self.path.join(format!("cpu{cpu}"))
    }

    /// Reserves every CPU of `cpus` for `holder`, or none of them.
    pub fn reserve(&self, cpus: &CpuSet, holder: &Holder) -> Result<Reservation, ReserveError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&self.path)
            .map_err(|source| ReserveError::Io {
                path: self.path.clone(),
                source,
            })?;
        let mut locks = Vec::with_capacity(cpus.len());
        for cpu in cpus.iter() {
            // On error the locks taken so far drop (and unlock) here.
            locks.push(CpuLock::acquire(cpu, self.file(cpu), holder)?);
        }
        Ok(Reservation { locks })
    }

    /// The holder of `cpu`'s reservation, if it is held now.
    pub fn holder(&self, cpu: usize) -> Result<Option<Holder>, ReserveError> {
        let path = self.file(cpu);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ReserveError::Io { path, source }),
        };
        // A shared lock is refused exactly when someone holds the exclusive one.
        match try_flock(&file, libc::LOCK_SH) {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(read_holder(&file))),
            Err(source) => Err(ReserveError::Io { path, source }),
        }
    }

    /// Refuses placing process `pid` on `cpus` if another process holds any of
    /// them. A holder may place itself (and its threads) on its own CPUs.
    pub fn check(&self, cpus: &CpuSet, pid: i32) -> Result<(), ReserveError> {
        self.guard(cpus, pid, CpuUse::Place).map(|_| ())
    }

    /// The one reservation check of every command that places work on `cpus`
    /// or lifts their shield, on behalf of process `pid` (a holder may use its
    /// own CPUs). Changes nothing.
    ///
    /// `Ok(None)`: no other process holds any of them. `Ok(Some(note))`: the
    /// command proceeds anyway and the one-line note says why (`reset`).
    /// `Err`: refused, in one line naming the holder and the remedy.
    pub fn guard(
        &self,
        cpus: &CpuSet,
        pid: i32,
        usage: CpuUse,
    ) -> Result<Option<String>, ReserveError> {
        let mut held = Vec::new();
        for cpu in cpus.iter() {
            let Some(holder) = self.holder(cpu)? else {
                continue;
            };
            if holder.pid == pid {
                continue;
            }
            match usage {
                CpuUse::Place => return Err(ReserveError::Held { cpu, holder }),
                CpuUse::Unshield => return Err(ReserveError::Shielding { cpu, holder }),
                CpuUse::Reset => held.push(format!("CPU {cpu} is reserved by {holder}")),
            }
        }
        Ok((!held.is_empty()).then(|| {
            format!(
                "note: {}; reset proceeds because it undoes the whole shield: the holder now shares its CPU with everything else",
                held.join(", ")
            )
        }))
    }
}

/// What a command does with the CPUs it names, for [`ReserveDir::guard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuUse {
    /// Puts work on them (`run`, `--idle-poll`, `measure`, `compare`, `demo`,
    /// the C API): refused while another process holds one.
    Place,
    /// Lifts their shield (`unshield`): refused while another process holds one.
    Unshield,
    /// Undoes the whole shield (`reset`, the way back from anything): proceeds,
    /// and says why.
    Reset,
}

/// [`ReserveDir::guard`] in the default directory for the calling process.
pub fn guard(cpus: &CpuSet, usage: CpuUse) -> Result<Option<String>, ReserveError> {
    crate::program::reserves().guard(cpus, std::process::id() as i32, usage)
}

/// Reserves `cpus` for the calling process in the default directory.
pub fn reserve(cpus: &CpuSet) -> Result<Reservation, ReserveError> {
    crate::program::reserves().reserve(cpus, &Holder::current())
}

/// Refuses placing the calling process on `cpus` if another process holds any
/// of them (default directory).
pub fn check(cpus: &CpuSet) -> Result<(), ReserveError> {
    crate::program::reserves().check(cpus, std::process::id() as i32)
}

/// Held CPUs. Dropping it releases them (and removes the lock files).
#[derive(Debug)]
pub struct Reservation {
    locks: Vec<CpuLock>,
}

impl Reservation {
    /// The reserved CPUs.
    pub fn cpus(&self) -> CpuSet {
        self.locks.iter().map(|l| l.cpu).collect()
    }

    /// Records another holder in the lock files, e.g. the PID of the task
    /// that inherited the descriptors.
    pub fn set_holder(&self, holder: &Holder) -> io::Result<()> {
        let line = holder.to_line();
        for lock in &self.locks {
            lock.file.set_len(0)?;
            lock.file.write_all_at(line.as_bytes(), 0)?;
        }
        Ok(())
    }

    /// The lock descriptors. A child keeps the reservation alive after exec if
    /// these lose FD_CLOEXEC in it (see [`clear_cloexec`]).
    pub fn raw_fds(&self) -> Vec<RawFd> {
        self.locks.iter().map(|l| l.file.as_raw_fd()).collect()
    }

    /// Closes this process's descriptors without removing the lock files, for
    /// when a child that inherited them still holds the reservation.
    pub fn leave_to_inheritors(mut self) {
        for lock in &mut self.locks {
            lock.unlink_on_drop = false;
        }
    }
}

/// Clears FD_CLOEXEC on `fd` so it survives exec. Async-signal-safe: callable
/// between fork and exec (`CommandExt::pre_exec`).
pub fn clear_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor number has no memory effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    // SAFETY: F_SETFD on a descriptor number takes an int argument and touches no
    // memory; a stale fd only makes it fail with EBADF, which we return.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[derive(Debug)]
struct CpuLock {
    cpu: usize,
    path: PathBuf,
    file: File,
    unlink_on_drop: bool,
}

impl CpuLock {
    fn acquire(cpu: usize, path: PathBuf, holder: &Holder) -> Result<Self, ReserveError> {
        let io_err = |source| ReserveError::Io {
            path: path.clone(),
            source,
        };
        // A releasing holder unlinks its file while still locked; whoever locked
        // the unlinked inode must retry on the new file. Bounded: each retry
        // means another process completed a whole reserve/release meanwhile.
        for _ in 0..100 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .open(&path)
                .map_err(io_err)?;
            if !lock_exclusive(&file).map_err(io_err)? {
                return Err(ReserveError::Held {
                    cpu,
                    holder: read_holder(&file),
                });
            }
            let ours = file.metadata().map_err(io_err)?;
            match std::fs::metadata(&path) {
                Ok(now) if now.dev() == ours.dev() && now.ino() == ours.ino() => {}
                _ => continue,
            }
            let lock = Self {
                cpu,
                path: path.clone(),
                file,
                unlink_on_drop: true,
            };
            let line = holder.to_line();
            lock.file.set_len(0).map_err(io_err)?;
            lock.file.write_all_at(line.as_bytes(), 0).map_err(io_err)?;
            return Ok(lock);
        }
        Err(io_err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "the lock file kept being replaced",
        )))
    }
}

impl Drop for CpuLock {
    fn drop(&mut self) {
        if self.unlink_on_drop {
            // Still locked here, so no one else can be holding this inode.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Tries for the exclusive lock a few times over a millisecond: a checker
/// ([`ReserveDir::holder`]) holds a shared lock for a few microseconds, which
/// must not read as a reservation.
fn lock_exclusive(file: &File) -> io::Result<bool> {
    for attempt in 0..5 {
        if try_flock(file, libc::LOCK_EX)? {
            return Ok(true);
        }
        if attempt < 4 {
            std::thread::sleep(std::time::Duration::from_micros(250));
        }
    }
    Ok(false)
}

/// Tries a non-blocking flock; Ok(false) if another open file holds a
/// conflicting lock.
fn try_flock(file: &File, kind: libc::c_int) -> io::Result<bool> {
    loop {
        // SAFETY: flock on a valid descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), kind | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

fn read_holder(file: &File) -> Holder {
    let mut buf = [0u8; 512];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    Holder::parse(&String::from_utf8_lossy(&buf[..n])).unwrap_or(Holder {
        pid: 0,
        command: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_lines_round_trip() {
        let h = Holder {
            pid: 42,
            command: "./app --fast".into(),
        };
        assert_eq!(Holder::parse(&h.to_line()), Some(h));
        assert_eq!(Holder::parse("garbage"), None);
        assert_eq!(
            Holder::parse("7"),
            Some(Holder {
                pid: 7,
                command: String::new()
            })
        );
    }

    #[test]
    fn command_lines_are_joined_and_shortened() {
        assert_eq!(command_line(b"./app\0-x\0a\nb\0"), "./app -x a b");
        assert_eq!(command_line(&[b'x'; 500]).len(), MAX_COMMAND);
    }

    #[test]
    fn a_second_reservation_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path().join("reserve"));
        let me = Holder {
            pid: 4242,
            command: "first".into(),
        };
        let held = rd.reserve(&CpuSet::from_cpus([1]), &me).unwrap();
        let other = Holder {
            pid: 5151,
            command: "second".into(),
        };
        match rd.reserve(&CpuSet::from_cpus([1]), &other) {
            Err(ReserveError::Held { cpu: 1, holder }) => assert_eq!(holder, me),
            r => panic!("expected Held, got {r:?}"),
        }
        assert_eq!(rd.holder(1).unwrap(), Some(me));
        drop(held);
        assert_eq!(rd.holder(1).unwrap(), None);
        assert!(!rd.file(1).exists(), "the lock file is removed on release");
        rd.reserve(&CpuSet::from_cpus([1]), &other).unwrap();
    }

    #[test]
    fn a_failed_multi_cpu_reservation_takes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        let a = Holder {
            pid: 1,
            command: "a".into(),
        };
        let _held = rd.reserve(&CpuSet::from_cpus([3]), &a).unwrap();
        assert!(rd.reserve(&CpuSet::from_cpus([2, 3]), &a).is_err());
        assert_eq!(rd.holder(2).unwrap(), None);
    }

    #[test]
    fn check_refuses_others_but_lets_the_holder_place_itself() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        let h = Holder {
            pid: 77,
            command: "rt".into(),
        };
        let _held = rd.reserve(&CpuSet::from_cpus([1]), &h).unwrap();
        assert!(rd.check(&CpuSet::from_cpus([1]), 77).is_ok());
        let err = rd.check(&CpuSet::from_cpus([0, 1]), 78).unwrap_err();
        assert!(
            err.to_string().contains("CPU 1 is reserved by PID 77 (rt)"),
            "{err}"
        );
        assert!(rd.check(&CpuSet::from_cpus([0]), 78).is_ok());
    }

    fn held_cpu1(rd: &ReserveDir) -> Reservation {
        rd.reserve(
            &CpuSet::from_cpus([1]),
            &Holder {
                pid: 77,
                command: "rt-app".into(),
            },
        )
        .unwrap()
    }

    #[test]
    fn guard_refuses_placing_on_a_cpu_another_process_holds_naming_it_and_the_remedy() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        let _held = held_cpu1(&rd);
        let err = rd
            .guard(&CpuSet::from_cpus([0, 1]), 78, CpuUse::Place)
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("CPU 1 is reserved by PID 77 (rt-app)"),
            "{msg}"
        );
        assert!(msg.contains("choose another CPU"), "{msg}");
        assert!(!msg.contains('\n'));
        assert_eq!(
            rd.guard(&CpuSet::from_cpus([1]), 77, CpuUse::Place)
                .unwrap(),
            None
        );
        assert_eq!(
            rd.guard(&CpuSet::from_cpus([0]), 78, CpuUse::Place)
                .unwrap(),
            None
        );
    }

    #[test]
    fn guard_refuses_unshielding_a_held_cpu_naming_the_holder_and_reset() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        let _held = held_cpu1(&rd);
        let err = rd
            .guard(&CpuSet::from_cpus([1]), 78, CpuUse::Unshield)
            .unwrap_err();
        assert!(
            matches!(err, ReserveError::Shielding { cpu: 1, .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("CPU 1 is reserved by PID 77 (rt-app)"),
            "{msg}"
        );
        assert!(msg.contains("stop it first"), "{msg}");
        assert!(msg.contains("cpushield reset"), "{msg}");
        assert_eq!(
            rd.guard(&CpuSet::from_cpus([2]), 78, CpuUse::Unshield)
                .unwrap(),
            None
        );
    }

    #[test]
    fn guard_lets_reset_proceed_saying_which_holder_loses_its_shield() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        assert_eq!(
            rd.guard(&CpuSet::from_cpus([1]), 78, CpuUse::Reset)
                .unwrap(),
            None
        );
        let _held = held_cpu1(&rd);
        let note = rd
            .guard(&CpuSet::from_cpus([0, 1]), 78, CpuUse::Reset)
            .unwrap()
            .expect("a note");
        assert!(
            note.starts_with("note: CPU 1 is reserved by PID 77 (rt-app)"),
            "{note}"
        );
        assert!(note.contains("reset proceeds"), "{note}");
    }

    #[test]
    fn a_stale_unlocked_file_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        std::fs::write(rd.file(1), "999999 dead\n").unwrap();
        assert_eq!(rd.holder(1).unwrap(), None);
        let h = Holder {
            pid: 5,
            command: "x".into(),
        };
        rd.reserve(&CpuSet::from_cpus([1]), &h).unwrap();
    }

    #[test]
    fn set_holder_rewrites_the_lock_files() {
        let dir = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(dir.path());
        let long = Holder {
            pid: 123456,
            command: "a much longer command line".into(),
        };
        let r = rd.reserve(&CpuSet::from_cpus([1]), &long).unwrap();
        let short = Holder {
            pid: 9,
            command: "b".into(),
        };
        r.set_holder(&short).unwrap();
        assert_eq!(rd.holder(1).unwrap(), Some(short));
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_the_path() {
        let err = ReserveDir::new("/proc/cpushield-no-such-dir")
            .reserve(&CpuSet::from_cpus([1]), &Holder::current())
            .unwrap_err();
        assert!(
            err.to_string().contains("/proc/cpushield-no-such-dir"),
            "{err}"
        );
    }
}
