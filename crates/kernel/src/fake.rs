//! An in-memory system for tests: files, directories and per-thread affinities.

use crate::{
    FakeFiles, FileLock, Kernel, KernelWriter, LockKind, SchedParams, TraceMarker, TracePipe,
    TRACE_PIPE_READ_BUDGET,
};
use cpushield_cpuset::CpuSet;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::ops::Bound;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A fake kernel. Files are plain strings; writing a file replaces its text,
/// except cgroup `tasks`/`cgroup.procs` files, which move the written TID from
/// every other cgroup of the same hierarchy into this one, as the kernel does.
/// Paths listed with [`FakeKernel::refuse_writes`] fail with EIO, like a
/// kernel-managed IRQ. A trace pipe hands out its file's text once (reading
/// empties it); a trace marker appends each line to its file. A cgroup v2
/// partition made or undone under a root that shows `cpuset.cpus.effective`
/// gives the root's threads the root's new CPUs, as the kernel does
/// ([`FakeKernel::set_per_cpu_thread`] names the threads it leaves alone).
#[derive(Default)]
pub struct FakeKernel {
    /// Shared with the trace pipes and markers opened, which outlive a borrow.
    state: Arc<Mutex<FakeState>>,
}

/// The files of a fake system: each file's text by path, and the paths in
/// order. Every read, write and existence test is a hash lookup of the
/// path's bytes; only listings and subtrees walk the order. (A `BTreeMap` by
/// path alone cost each lookup some twenty component-by-component path
/// comparisons: at 100,000 threads that was most of a shield's time on the
/// fake kernel, far more than a real kernel's path walk. The fake's paths
/// are built, never typed, so byte equality is path equality here.)
#[derive(Default)]
struct Files {
    text: HashMap<Vec<u8>, String>,
    order: BTreeSet<PathBuf>,
    names: Names,
}

/// The names directly in each directory, by the directory's path bytes: a
/// listing is a lookup, where a walk of the ordered paths below a directory
/// made each listing of /proc/PID/task cost some ten path comparisons per
/// thread file. Paths here are built, never typed, as in [`Files`]; a
/// directory asked for is normalised first ([`dir_key`]).
#[derive(Default)]
struct Names(HashMap<Vec<u8>, BTreeSet<String>>);

impl Names {
    fn add(&mut self, path: &Path) {
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            let names = self.0.entry(key(parent).to_vec()).or_default();
            let name = name.to_string_lossy();
            if !names.contains(name.as_ref()) {
                names.insert(name.into_owned());
            }
        }
    }

    fn remove(&mut self, path: &Path) {
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            if let Some(names) = self.0.get_mut(key(parent)) {
                names.remove(name.to_string_lossy().as_ref());
                if names.is_empty() {
                    self.0.remove(key(parent));
                }
            }
        }
    }

    fn of(&self, dir: &[u8]) -> impl Iterator<Item = &String> {
        self.0.get(dir).into_iter().flatten()
    }
}

/// The directories of a fake system, in order, with each one's names.
#[derive(Default)]
struct Dirs {
    order: BTreeSet<PathBuf>,
    names: Names,
}

impl Dirs {
    fn contains(&self, path: &Path) -> bool {
        self.order.contains(path)
    }

    fn insert(&mut self, path: PathBuf) -> bool {
        if self.order.contains(&path) {
            return false;
        }
        self.names.add(&path);
        self.order.insert(path)
    }

    fn remove(&mut self, path: &Path) -> bool {
        let removed = self.order.remove(path);
        if removed {
            self.names.remove(path);
        }
        removed
    }

    fn retain(&mut self, keep: impl Fn(&Path) -> bool) {
        let gone: Vec<PathBuf> = self.order.iter().filter(|p| !keep(p)).cloned().collect();
        for p in gone {
            self.remove(&p);
        }
    }

    fn range_path<'a>(&'a self, from: Bound<&'a Path>) -> impl Iterator<Item = &'a PathBuf> {
        self.order.range::<Path, _>((from, Bound::Unbounded))
    }
}

/// The lookup key of a directory asked for: its path normalised (no
/// trailing separator, no `.` component), as the stored parents are.
fn dir_key(path: &Path) -> Vec<u8> {
    key(&path.components().collect::<PathBuf>()).to_vec()
}

fn key(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

impl Files {
    fn get(&self, path: &Path) -> Option<&String> {
        self.text.get(key(path))
    }

    fn get_mut(&mut self, path: &Path) -> Option<&mut String> {
        self.text.get_mut(key(path))
    }

    fn contains_key(&self, path: &Path) -> bool {
        self.text.contains_key(key(path))
    }

    fn insert(&mut self, path: PathBuf, text: String) {
        if let Some(old) = self.text.get_mut(key(&path)) {
            *old = text;
            return;
        }
        self.text.insert(key(&path).to_vec(), text);
        self.names.add(&path);
        self.order.insert(path);
    }

    fn remove(&mut self, path: &Path) -> Option<String> {
        let text = self.text.remove(key(path))?;
        self.order.remove(path);
        self.names.remove(path);
        Some(text)
    }

    fn retain(&mut self, keep: impl Fn(&Path) -> bool) {
        let gone: Vec<PathBuf> = self.order.iter().filter(|p| !keep(p)).cloned().collect();
        for p in gone {
            self.remove(&p);
        }
    }

    /// The paths from `from` on, in order.
    fn range(&self, from: Bound<&Path>) -> impl Iterator<Item = &PathBuf> {
        self.order.range::<Path, _>((from, Bound::Unbounded))
    }

    /// Every file, in order.
    fn to_map(&self) -> FakeFiles {
        self.order
            .iter()
            .filter_map(|p| Some((p.clone(), self.get(p)?.clone())))
            .collect()
    }
}

#[derive(Default)]
struct FakeState {
    files: Files,
    /// Files whose bytes are not valid UTF-8 (they shadow `files`).
    raw: BTreeMap<PathBuf, Vec<u8>>,
    /// Scheduling parameters by thread (absent: SCHED_OTHER, nice 0).
    sched: BTreeMap<i32, SchedParams>,
    /// Extended attributes by path and name.
    xattrs: BTreeMap<(PathBuf, String), Vec<u8>>,
    /// Paths whose read fails with this errno.
    unreadable: BTreeMap<PathBuf, i32>,
    /// Texts a file shows on its next reads, one per read (the last stays).
    sequences: BTreeMap<PathBuf, std::collections::VecDeque<String>>,
    dirs: Dirs,
    affinity: BTreeMap<i32, CpuSet>,
    /// Paths whose write fails, with the errno.
    refused: HashMap<PathBuf, i32>,
    /// Per-CPU kernel threads: their affinity cannot be set, and a cpuset
    /// change of the root leaves it alone.
    per_cpu: BTreeSet<i32>,
    /// File systems not mounted, by mount point: their files appear on
    /// [`Kernel::mount`] and go again on [`Kernel::unmount`].
    unmounted: BTreeMap<PathBuf, FakeFiles>,
    /// Mount points mounted with [`Kernel::mount`], each with the line it
    /// added to /proc/self/mounts (taken out again on [`Kernel::unmount`]).
    mounted: BTreeMap<PathBuf, String>,
    /// /proc/self/mounts was made by a mount (and goes when it is empty).
    mounts_file_made: bool,
    /// The lock files of [`Kernel::lock_file`], each with an inode number
    /// (a new one when the file is made again, as a lock on a removed file
    /// is not one on its successor). Apart from `files`: cpushield's own
    /// files are not the system a test looks at.
    lock_files: BTreeMap<PathBuf, u64>,
    /// The locks held, by handle: the lock file's inode and whether
    /// exclusive.
    locks: BTreeMap<u64, (u64, bool)>,
    /// The next inode or handle number.
    next_lock: u64,
    /// What [`Kernel::kernel_log`] shows (absent: EPERM, as for a user
    /// without CAP_SYSLOG).
    kernel_log: Option<String>,
    /// Cgroup thread lists (`tasks`, `cgroup.procs`, `cgroup.threads`) a
    /// write has changed, kept as ordered sets: moving one thread then costs
    /// a lookup, not a rewrite of every list's text (100,000 moves out of a
    /// list of 100,000 would otherwise rewrite 10^10 bytes). The text in
    /// `files` is stale while the path is in `lists_dirty`.
    /// By path bytes, as [`Files`].
    lists: HashMap<Vec<u8>, ThreadList>,
    /// Lists whose text in `files` is behind their [`ThreadList`].
    lists_dirty: HashSet<Vec<u8>>,
    /// Every cgroup thread list file ever put (some may be gone since: a
    /// write checks `files`), so that a move finds the lists of its
    /// hierarchy without a walk of every file in it.
    list_paths: BTreeSet<PathBuf>,
    /// The paths of `list_paths` of each hierarchy and list name (keyed by
    /// [`hierarchy_list_key`]), found once: a move of each of 100,000
    /// threads would otherwise walk and copy them every time. Emptied when
    /// `list_paths` grows.
    hierarchy_lists: HashMap<Vec<u8>, Arc<[PathBuf]>>,
    /// The `/proc/*/task/TID/cgroup` files of each thread, so that a thread
    /// joining a v1 cpuset updates its own files without a scan of /proc.
    cgroup_files: HashMap<i32, Vec<PathBuf>>,
}

/// What a read finds: bytes that are not valid UTF-8, or text.
enum Read<'a> {
    Raw(&'a Vec<u8>),
    Text(&'a String),
}

/// The lines of a cgroup thread list in the order written, with each line's
/// place (by its trimmed text).
#[derive(Default)]
struct ThreadList {
    lines: BTreeMap<u64, String>,
    place: HashMap<String, u64>,
    next: u64,
}

impl ThreadList {
    fn from_text(text: &str) -> Self {
        let mut list = Self::default();
        for line in text.lines() {
            list.push(line);
        }
        list
    }

    /// Appends `line`; an earlier line with the same text goes.
    fn push(&mut self, line: &str) {
        self.remove(line.trim());
        self.place.insert(line.trim().to_string(), self.next);
        self.lines.insert(self.next, line.to_string());
        self.next += 1;
    }

    fn remove(&mut self, key: &str) {
        if let Some(at) = self.place.remove(key) {
            self.lines.remove(&at);
        }
    }

    fn text(&self) -> String {
        let mut out = String::with_capacity(self.lines.len() * 8);
        for line in self.lines.values() {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

impl FakeState {
    /// Brings the text of list `path` up to date with its [`ThreadList`].
    fn settle(&mut self, path: &Path) {
        if !self.lists_dirty.remove(key(path)) {
            return;
        }
        if let (Some(list), Some(text)) = (self.lists.get(key(path)), self.files.get_mut(path)) {
            *text = list.text();
        }
    }

    /// [`FakeState::settle`] for every list.
    fn settle_all(&mut self) {
        for bytes in std::mem::take(&mut self.lists_dirty) {
            let path = Path::new(std::ffi::OsStr::from_bytes(&bytes));
            if let (Some(list), Some(text)) = (self.lists.get(&bytes), self.files.get_mut(path)) {
                *text = list.text();
            }
        }
    }

    /// Forgets the list kept for `path`: its text in `files` is the truth again.
    fn forget_list(&mut self, path: &Path) {
        self.settle(path);
        self.lists.remove(key(path));
    }

    /// The list of `path`, built from its text the first time.
    fn list_mut(&mut self, path: &Path) -> &mut ThreadList {
        if !self.lists.contains_key(key(path)) {
            let text = self.files.get(path).map(String::as_str).unwrap_or("");
            let list = ThreadList::from_text(text);
            self.lists.insert(key(path).to_vec(), list);
        }
        if !self.lists_dirty.contains(key(path)) {
            self.lists_dirty.insert(key(path).to_vec());
        }
        self.lists.get_mut(key(path)).expect("inserted above")
    }

    /// The thread lists named `name` in the hierarchy at `root` (some may
    /// be gone since: the caller checks `files`).
    fn hierarchy_lists(&mut self, root: &Path, name: &std::ffi::OsStr) -> Arc<[PathBuf]> {
        let k = hierarchy_list_key(root, name);
        if let Some(found) = self.hierarchy_lists.get(&k) {
            return Arc::clone(found);
        }
        let found: Arc<[PathBuf]> = self
            .list_paths
            .range::<Path, _>((Bound::Included(root), Bound::Unbounded))
            .take_while(|p| p.starts_with(root))
            .filter(|p| p.file_name() == Some(name))
            .cloned()
            .collect();
        self.hierarchy_lists.insert(k, Arc::clone(&found));
        found
    }

    /// Records a thread list put or mounted at `path`.
    fn add_list_path(&mut self, path: &Path) {
        if !self.list_paths.contains(path) {
            self.list_paths.insert(path.to_path_buf());
            self.hierarchy_lists.clear();
        }
    }

    /// What a read of `path` shows: the next text of its sequence, its raw
    /// bytes, or its text (a list's brought up to date).
    fn read(&mut self, path: &Path) -> io::Result<Read<'_>> {
        if let Some(texts) = self.sequences.get_mut(path) {
            let text = if texts.len() > 1 {
                texts.pop_front()
            } else {
                texts.front().cloned()
            };
            if let Some(text) = text {
                self.files.insert(path.to_path_buf(), text);
            }
        }
        if let Some(&errno) = self.unreadable.get(path) {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if self.raw.contains_key(path) {
            return Ok(Read::Raw(&self.raw[path]));
        }
        self.settle(path);
        self.files
            .get(path)
            .map(Read::Text)
            .ok_or_else(|| not_found(path))
    }

    /// Adds or replaces a file (and its parent directories).
    fn put_file(&mut self, path: PathBuf, text: String) {
        add_parents(&mut self.dirs, &path);
        if is_thread_list(&path) {
            self.add_list_path(&path);
        }
        self.sequences.remove(&path);
        self.forget_list(&path);
        if let Some(tid) = thread_cgroup_file_tid(&path) {
            let known = self.cgroup_files.entry(tid).or_default();
            if !known.contains(&path) {
                known.push(path.clone());
            }
        }
        self.files.insert(path, text);
    }

    /// The paths of files and directories at or below `dir`, in order (a
    /// directory's descendants sort together, just after it).
    fn files_below<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = &'a PathBuf> + 'a {
        self.files
            .range(Bound::Included(dir))
            .take_while(move |p| p.starts_with(dir))
    }

    /// The directories at or below `dir`, in order.
    fn dirs_below<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = &'a PathBuf> + 'a {
        self.dirs
            .range_path(Bound::Included(dir))
            .take_while(move |p| p.starts_with(dir))
    }
}

/// Whether `path` is a cgroup thread list (`tasks`, `cgroup.procs`,
/// `cgroup.threads`), which a write of a TID moves it into.
fn is_thread_list(path: &Path) -> bool {
    matches!(
        path.file_name().and_then(|n| n.to_str()),
        Some("tasks" | "cgroup.procs" | "cgroup.threads")
    )
}

/// The thread ID of a `/proc/PID/task/TID/cgroup` path.
fn thread_cgroup_file_tid(path: &Path) -> Option<i32> {
    if !path.starts_with("/proc") || path.file_name()? != "cgroup" {
        return None;
    }
    let tid_dir = path.parent()?;
    if tid_dir.parent()?.file_name()? != "task" {
        return None;
    }
    tid_dir.file_name()?.to_str()?.parse().ok()
}

impl FakeKernel {
    /// An empty fake system.
    pub fn new() -> Self {
        Self::default()
    }

    /// A second handle on this same fake system (a [`crate::Host`] keeps
    /// one while the test keeps the other, to set files and read back).
    pub fn handle(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
        }
    }

    /// Adds or replaces a file (and its parent directories); a sequence set
    /// on it ends.
    pub fn set_file(&self, path: impl AsRef<Path>, text: impl Into<String>) {
        let mut st = self.state.lock().expect("fake lock");
        st.put_file(path.as_ref().to_path_buf(), text.into());
    }

    /// [`FakeKernel::set_file`] for many files at once (one lock: a machine
    /// of 100,000 threads is built in one call).
    pub fn set_files(&self, files: impl IntoIterator<Item = (PathBuf, String)>) {
        let mut st = self.state.lock().expect("fake lock");
        for (path, text) in files {
            st.put_file(path, text);
        }
    }

    /// [`FakeKernel::set_thread_affinity`] for many threads at once.
    pub fn set_thread_affinities(&self, affinities: impl IntoIterator<Item = (i32, CpuSet)>) {
        self.state
            .lock()
            .expect("fake lock")
            .affinity
            .extend(affinities);
    }

    /// Adds or replaces a file holding raw bytes (e.g. a thread name that is
    /// not valid UTF-8); [`Kernel::read`] shows it lossily.
    pub fn set_file_bytes(&self, path: impl AsRef<Path>, bytes: Vec<u8>) {
        let mut st = self.state.lock().expect("fake lock");
        let path = path.as_ref().to_path_buf();
        st.put_file(path.clone(), String::from_utf8_lossy(&bytes).into_owned());
        st.raw.insert(path, bytes);
    }

    /// Makes `path` show `texts` one per read, in order, the last one from
    /// then on: a file that changes between two reads (an uptime, a counter).
    pub fn set_file_sequence(&self, path: impl AsRef<Path>, texts: &[&str]) {
        assert!(!texts.is_empty(), "a sequence shows at least one text");
        let path = path.as_ref().to_path_buf();
        self.set_file(&path, texts[0]);
        self.state
            .lock()
            .expect("fake lock")
            .sequences
            .insert(path, texts.iter().map(|t| t.to_string()).collect());
    }

    /// Sets what the kernel's log buffer holds ([`Kernel::kernel_log`]).
    pub fn set_kernel_log(&self, text: impl Into<String>) {
        self.state.lock().expect("fake lock").kernel_log = Some(text.into());
    }

    /// Makes reads of `path` fail with `errno` (EACCES, EIO, ESRCH…).
    pub fn refuse_reads(&self, path: impl AsRef<Path>, errno: i32) {
        self.state
            .lock()
            .expect("fake lock")
            .unreadable
            .insert(path.as_ref().to_path_buf(), errno);
    }

    /// Adds a directory (and its parents).
    pub fn add_dir(&self, path: impl AsRef<Path>) {
        let mut st = self.state.lock().expect("fake lock");
        let path = path.as_ref().to_path_buf();
        add_parents(&mut st.dirs, &path);
        st.dirs.insert(path);
    }

    /// Sets a thread's affinity directly (as if it had called sched_setaffinity).
    pub fn set_thread_affinity(&self, tid: i32, cpus: CpuSet) {
        self.state
            .lock()
            .expect("fake lock")
            .affinity
            .insert(tid, cpus);
    }

    /// Makes `tid` a per-CPU kernel thread bound to `cpu`: sched_setaffinity
    /// on it fails with EINVAL (PF_NO_SETAFFINITY), and the kernel leaves it
    /// where it is when the root cpuset's CPUs change.
    pub fn set_per_cpu_thread(&self, tid: i32, cpu: usize) {
        let mut st = self.state.lock().expect("fake lock");
        st.affinity.insert(tid, CpuSet::from_cpus([cpu]));
        st.per_cpu.insert(tid);
    }

    /// Makes writes to `path` fail with EIO.
    pub fn refuse_writes(&self, path: impl AsRef<Path>) {
        self.refuse_writes_with(path, libc::EIO);
    }

    /// Makes writes to `path` fail with `errno` (EPERM: a kernel's lockdown).
    pub fn refuse_writes_with(&self, path: impl AsRef<Path>, errno: i32) {
        self.state
            .lock()
            .expect("fake lock")
            .refused
            .insert(path.as_ref().to_path_buf(), errno);
    }

    /// A copy of the current text of a file.
    pub fn file(&self, path: impl AsRef<Path>) -> Option<String> {
        let mut st = self.state.lock().expect("fake lock");
        st.settle(path.as_ref());
        st.files.get(path.as_ref()).cloned()
    }

    /// A copy of all files, for comparing whole-system states.
    pub fn files(&self) -> FakeFiles {
        let mut st = self.state.lock().expect("fake lock");
        st.settle_all();
        st.files.to_map()
    }

    /// A copy of all scheduling parameters set (threads never set are absent).
    pub fn scheds(&self) -> BTreeMap<i32, SchedParams> {
        self.state.lock().expect("fake lock").sched.clone()
    }

    /// A copy of all thread affinities.
    pub fn affinities(&self) -> BTreeMap<i32, CpuSet> {
        self.state.lock().expect("fake lock").affinity.clone()
    }

    /// Adds a file of a file system not mounted on `target` (debugfs): it
    /// shows only while [`Kernel::mount`] has mounted `target`.
    pub fn set_unmounted_file(&self, target: impl AsRef<Path>, path: impl AsRef<Path>, text: &str) {
        let mut st = self.state.lock().expect("fake lock");
        st.dirs.insert(target.as_ref().to_path_buf());
        st.unmounted
            .entry(target.as_ref().to_path_buf())
            .or_default()
            .insert(path.as_ref().to_path_buf(), text.to_string());
    }

    /// Whether `target` is mounted (by [`Kernel::mount`]).
    pub fn is_mounted(&self, target: impl AsRef<Path>) -> bool {
        self.state
            .lock()
            .expect("fake lock")
            .mounted
            .contains_key(target.as_ref())
    }

    /// Whether a lock file of [`Kernel::lock_file`] exists.
    pub fn has_lock_file(&self, path: impl AsRef<Path>) -> bool {
        self.state
            .lock()
            .expect("fake lock")
            .lock_files
            .contains_key(path.as_ref())
    }

    /// Whether a directory exists.
    pub fn has_dir(&self, path: impl AsRef<Path>) -> bool {
        self.state
            .lock()
            .expect("fake lock")
            .dirs
            .contains(path.as_ref())
    }
}

/// /proc/self/mounts, where a fake mount shows.
const SELF_MOUNTS: &str = "/proc/self/mounts";

/// A lock of a [`FakeKernel`]'s lock file, released when dropped.
struct FakeLock {
    state: Arc<Mutex<FakeState>>,
    handle: u64,
}

impl FileLock for FakeLock {}

impl Drop for FakeLock {
    fn drop(&mut self) {
        if let Ok(mut st) = self.state.lock() {
            st.locks.remove(&self.handle);
        }
    }
}

/// A trace pipe or marker of a [`FakeKernel`]: the file it names.
struct FakeTraceFile {
    state: Arc<Mutex<FakeState>>,
    path: PathBuf,
}

impl TracePipe for FakeTraceFile {
    fn read_available(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let mut st = self.state.lock().expect("fake lock");
        let Some(text) = st.files.get_mut(&self.path) else {
            return Err(not_found(&self.path));
        };
        let mut end = text.len().min(TRACE_PIPE_READ_BUDGET);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        buf.extend_from_slice(&text.as_bytes()[..end]);
        text.drain(..end);
        Ok(end)
    }
}

impl TraceMarker for FakeTraceFile {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        let Some(text) = st.files.get_mut(&self.path) else {
            return Err(not_found(&self.path));
        };
        text.push_str(&String::from_utf8_lossy(line));
        Ok(())
    }
}

fn add_parents(dirs: &mut Dirs, path: &Path) {
    let mut p = path.parent();
    while let Some(dir) = p {
        if dir.as_os_str().is_empty() {
            break;
        }
        dirs.insert(dir.to_path_buf());
        p = dir.parent();
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: not found", path.display()),
    )
}

impl Kernel for FakeKernel {
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut st = self.state.lock().expect("fake lock");
        match st.read(path)? {
            Read::Raw(bytes) => Ok(bytes.clone()),
            Read::Text(text) => Ok(text.as_bytes().to_vec()),
        }
    }

    /// The text without the copy through bytes of the default: at 512 CPUs
    /// and 4,096 IRQs /proc/interrupts is 23 MB, read several times a look.
    fn read(&self, path: &Path) -> io::Result<String> {
        let mut st = self.state.lock().expect("fake lock");
        match st.read(path)? {
            Read::Raw(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            Read::Text(text) => Ok(text.clone()),
        }
    }

    fn write(&self, path: &Path, data: &str) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if let Some(&errno) = st.refused.get(path) {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if !st.files.contains_key(path) {
            return Err(not_found(path));
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if is_thread_list(path) {
            let target = ListTarget::resolve(&mut st, path);
            target.attach(&mut st, data.trim(), None);
            return Ok(());
        }
        st.raw.remove(path);
        st.forget_list(path);
        st.files.insert(path.to_path_buf(), data.to_string());
        if name == "cpuset.cpus" {
            emulate_cpuset_resize(&mut st, path, data);
        }
        if name == "cpuset.cpus.partition" {
            emulate_partition_change(&mut st, path);
        }
        Ok(())
    }

    /// A cgroup thread list is resolved once, as the kernel resolves the
    /// path once at open(2): its hierarchy, the lists a thread leaves and
    /// the cpuset's CPUs are not found again for each thread written. Any
    /// other file is written through [`Kernel::write`] each time.
    fn open_for_writes<'a>(&'a self, path: &Path) -> io::Result<Box<dyn KernelWriter + 'a>> {
        if !is_thread_list(path) {
            return Ok(Box::new(FakeWriteEach {
                kernel: self,
                path: path.to_path_buf(),
            }));
        }
        let mut st = self.state.lock().expect("fake lock");
        if !st.files.contains_key(path) {
            return Err(not_found(path));
        }
        let target = ListTarget::resolve(&mut st, path);
        Ok(Box::new(FakeListWriter {
            kernel: self,
            target,
            cpus: None,
        }))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let st = self.state.lock().expect("fake lock");
        if !st.dirs.contains(path) {
            return Err(not_found(path));
        }
        let dir = dir_key(path);
        let (files, dirs) = (st.files.names.of(&dir), st.dirs.names.of(&dir));
        let mut names: Vec<String> = files.chain(dirs).cloned().collect();
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock().expect("fake lock");
        st.files.contains_key(path) || st.dirs.contains(path)
    }

    fn mount(&self, fstype: &str, target: &Path) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if st.mounted.contains_key(target) {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        let Some(files) = st.unmounted.get(target).cloned() else {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        };
        for (path, text) in files {
            add_parents(&mut st.dirs, &path);
            if is_thread_list(&path) {
                st.add_list_path(&path);
            }
            st.files.insert(path, text);
        }
        // Listed where the kernel lists it, so that whoever looks finds it.
        let line = format!("{fstype} {} {fstype} rw,relatime 0 0\n", target.display());
        let mounts = Path::new(SELF_MOUNTS);
        let text = match st.files.get(mounts) {
            Some(text) => format!("{text}{line}"),
            None => {
                st.mounts_file_made = true;
                line.clone()
            }
        };
        st.put_file(mounts.to_path_buf(), text);
        st.mounted.insert(target.to_path_buf(), line);
        Ok(())
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        let Some(line) = st.mounted.remove(target) else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        let mounts = Path::new(SELF_MOUNTS);
        if let Some(text) = st.files.get(mounts).map(|t| t.replacen(&line, "", 1)) {
            if text.is_empty() && st.mounts_file_made {
                st.files.remove(mounts);
                st.mounts_file_made = false;
            } else {
                st.files.insert(mounts.to_path_buf(), text);
            }
        }
        st.settle_all();
        let inside: Vec<PathBuf> = st
            .files
            .range(Bound::Included(target))
            .take_while(|p| p.starts_with(target))
            .cloned()
            .collect();
        let mut kept = FakeFiles::new();
        for path in inside {
            if let Some(text) = st.files.remove(&path) {
                kept.insert(path, text);
            }
        }
        st.dirs.retain(|d| !d.starts_with(target) || d == target);
        st.unmounted.insert(target.to_path_buf(), kept);
        Ok(())
    }

    /// Locks as flock(2) does between open files, each call one open file.
    /// A fake cannot wait: where a real lock would wait for another holder,
    /// EDEADLK (the test would wait forever).
    fn lock_file(&self, path: &Path, kind: LockKind) -> io::Result<Box<dyn FileLock>> {
        let mut st = self.state.lock().expect("fake lock");
        let inode = match st.lock_files.get(path) {
            Some(&inode) => inode,
            None => {
                st.next_lock += 1;
                let inode = st.next_lock;
                st.lock_files.insert(path.to_path_buf(), inode);
                inode
            }
        };
        let exclusive = kind != LockKind::Shared;
        let conflict = st
            .locks
            .values()
            .any(|&(i, ex)| i == inode && (ex || exclusive));
        if conflict {
            let errno = match kind {
                LockKind::TryExclusive => libc::EWOULDBLOCK,
                LockKind::Shared | LockKind::Exclusive => libc::EDEADLK,
            };
            return Err(io::Error::from_raw_os_error(errno));
        }
        st.next_lock += 1;
        let handle = st.next_lock;
        st.locks.insert(handle, (inode, exclusive));
        Ok(Box::new(FakeLock {
            state: Arc::clone(&self.state),
            handle,
        }))
    }

    fn put_file(&self, path: &Path, text: &str) -> io::Result<()> {
        self.state
            .lock()
            .expect("fake lock")
            .put_file(path.to_path_buf(), text.to_string());
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        let lock = st.lock_files.remove(path).is_some();
        if st.files.remove(path).is_none() && !lock {
            let enoent = io::Error::from_raw_os_error(libc::ENOENT);
            return Err(crate::with_path(enoent, path));
        }
        Ok(())
    }

    fn open_trace_pipe(&self, path: &Path) -> io::Result<Box<dyn TracePipe>> {
        if !self.exists(path) {
            return Err(not_found(path));
        }
        Ok(Box::new(FakeTraceFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn open_trace_marker(&self, path: &Path) -> io::Result<Box<dyn TraceMarker>> {
        self.open_trace_pipe(path).map(|_| {
            Box::new(FakeTraceFile {
                state: Arc::clone(&self.state),
                path: path.to_path_buf(),
            }) as Box<dyn TraceMarker>
        })
    }

    fn kernel_log(&self) -> io::Result<String> {
        self.state
            .lock()
            .expect("fake lock")
            .kernel_log
            .clone()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EPERM))
    }

    /// A fake link is a file holding its target.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.read(path).map(|t| PathBuf::from(t.trim_end()))
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if st.dirs.contains(path) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        st.dirs.insert(path.to_path_buf());
        // A new cgroup gets its control files, copied (empty) from its parent.
        if let Some(parent) = path.parent() {
            let controls: Vec<PathBuf> = st
                .files_below(parent)
                .filter(|p| p.parent() == Some(parent))
                .cloned()
                .collect();
            for control in controls {
                let name = control.file_name().expect("has name").to_owned();
                let value = match name.to_str() {
                    Some("tasks") | Some("cgroup.procs") | Some("cgroup.threads") => String::new(),
                    Some("cpuset.cpus.partition") => "member\n".to_string(),
                    _ => String::new(),
                };
                st.put_file(path.join(name), value);
            }
        }
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if !st.dirs.contains(path) {
            return Err(not_found(path));
        }
        st.settle_all();
        for task_file in ["tasks", "cgroup.procs"] {
            if let Some(t) = st.files.get(&path.join(task_file)) {
                if !t.trim().is_empty() {
                    return Err(io::Error::from_raw_os_error(libc::EBUSY));
                }
            }
        }
        if st.dirs_below(path).any(|d| d.parent() == Some(path)) {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        st.dirs.remove(path);
        let inside: Vec<PathBuf> = st
            .files_below(path)
            .filter(|p| p.parent() == Some(path))
            .cloned()
            .collect();
        for p in inside {
            st.lists.remove(key(&p));
            st.files.remove(&p);
        }
        st.xattrs.retain(|(p, _), _| p != path);
        Ok(())
    }

    fn remove_tree(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if !st.dirs.contains(path) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        st.settle_all();
        st.lists
            .retain(|p, _| !Path::new(std::ffi::OsStr::from_bytes(p)).starts_with(path));
        st.files.retain(|p| !p.starts_with(path));
        st.raw.retain(|p, _| !p.starts_with(path));
        st.dirs.retain(|p| !p.starts_with(path));
        Ok(())
    }

    fn get_affinity(&self, tid: i32) -> io::Result<CpuSet> {
        self.state
            .lock()
            .expect("fake lock")
            .affinity
            .get(&tid)
            .cloned()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
    }

    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if !st.affinity.contains_key(&tid) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        if cpus.is_empty() || st.per_cpu.contains(&tid) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        st.affinity.insert(tid, cpus.clone());
        Ok(())
    }

    fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if !st.dirs.contains(path) && !st.files.contains_key(path) {
            return Err(not_found(path));
        }
        st.xattrs
            .insert((path.to_path_buf(), name.to_string()), value.to_vec());
        Ok(())
    }

    fn get_xattr(&self, path: &Path, name: &str) -> io::Result<Vec<u8>> {
        let st = self.state.lock().expect("fake lock");
        if !st.dirs.contains(path) && !st.files.contains_key(path) {
            return Err(not_found(path));
        }
        st.xattrs
            .get(&(path.to_path_buf(), name.to_string()))
            .cloned()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODATA))
    }

    fn get_sched(&self, tid: i32) -> io::Result<SchedParams> {
        let st = self.state.lock().expect("fake lock");
        if !st.affinity.contains_key(&tid) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(st.sched.get(&tid).copied().unwrap_or_default())
    }

    fn set_sched(&self, tid: i32, params: &SchedParams) -> io::Result<()> {
        let mut st = self.state.lock().expect("fake lock");
        if !st.affinity.contains_key(&tid) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        st.sched.insert(tid, *params);
        Ok(())
    }
}

/// A cgroup thread list a TID is written to, resolved: the list, the
/// lists of its hierarchy a thread leaves, the cgroup's name as
/// /proc/TID/cgroup shows it and the file of its CPUs.
struct ListTarget {
    path: PathBuf,
    lists: Arc<[PathBuf]>,
    cgroup: String,
    cpus_file: PathBuf,
}

impl ListTarget {
    fn resolve(st: &mut FakeState, path: &Path) -> Self {
        let hierarchy_root = cgroup_hierarchy_root(path);
        let lists = match path.file_name() {
            Some(name) => st.hierarchy_lists(&hierarchy_root, name),
            None => Arc::from([]),
        };
        let dir = path.parent().unwrap_or(Path::new("/"));
        let rel = dir.strip_prefix(&hierarchy_root).unwrap_or(Path::new(""));
        Self {
            path: path.to_path_buf(),
            lists,
            cgroup: format!("/{}", rel.display()),
            cpus_file: dir.join("cpuset.cpus"),
        }
    }

    /// Moves thread `tid` here from every other list of the hierarchy, as
    /// the kernel does; `cpus` is the cpuset's CPUs where the caller has
    /// them parsed from the file's current text.
    fn attach(&self, st: &mut FakeState, tid: &str, cpus: Option<&CpuSet>) {
        for list in self.lists.iter() {
            if list != &self.path && st.files.contains_key(list) {
                st.list_mut(list).remove(tid);
            }
        }
        st.list_mut(&self.path).push(tid);
        let parsed;
        let cpus = match cpus {
            Some(c) => Some(c),
            None => {
                parsed = st
                    .files
                    .get(&self.cpus_file)
                    .and_then(|t| CpuSet::parse_list(t).ok());
                parsed.as_ref()
            }
        };
        emulate_v1_attach(st, &self.cgroup, cpus, tid);
    }
}

/// The default writer of a file that is not a thread list.
struct FakeWriteEach<'a> {
    kernel: &'a FakeKernel,
    path: PathBuf,
}

impl KernelWriter for FakeWriteEach<'_> {
    fn write(&mut self, data: &str) -> io::Result<()> {
        self.kernel.write(&self.path, data)
    }
}

/// A cgroup thread list held open ([`Kernel::open_for_writes`]).
struct FakeListWriter<'a> {
    kernel: &'a FakeKernel,
    target: ListTarget,
    /// The cpuset's CPUs as last parsed, with the text they were parsed
    /// from (parsed again only when the text changed).
    cpus: Option<(String, Option<CpuSet>)>,
}

impl KernelWriter for FakeListWriter<'_> {
    fn write(&mut self, data: &str) -> io::Result<()> {
        let mut st = self.kernel.state.lock().expect("fake lock");
        if let Some(&errno) = st.refused.get(&self.target.path) {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if !st.files.contains_key(&self.target.path) {
            return Err(not_found(&self.target.path));
        }
        let text = st.files.get(&self.target.cpus_file).map(String::as_str);
        if self.cpus.as_ref().map(|(t, _)| t.as_str()) != text {
            self.cpus = text.map(|t| (t.to_string(), CpuSet::parse_list(t).ok()));
        }
        let cpus = self.cpus.as_ref().and_then(|(_, c)| c.as_ref());
        self.target.attach(&mut st, data.trim(), cpus);
        Ok(())
    }
}

/// What the kernel does when a thread joins a v1 cpuset `cgroup` of CPUs
/// `cpus`: /proc/TID/cgroup shows the new cgroup and the thread's affinity
/// becomes the cpuset's CPUs.
fn emulate_v1_attach(st: &mut FakeState, cgroup: &str, cpus: Option<&CpuSet>, tid: &str) {
    let thread = tid.parse::<i32>().ok();
    let keys = thread
        .and_then(|t| st.cgroup_files.remove(&t))
        .unwrap_or_default();
    for key in &keys {
        let Some(text) = st.files.get_mut(key) else {
            continue;
        };
        let mut out = String::with_capacity(text.len() + cgroup.len());
        for l in text.lines() {
            match l.split_once(":cpuset:") {
                Some((id, _)) => {
                    out.push_str(id);
                    out.push_str(":cpuset:");
                    out.push_str(cgroup);
                }
                None => out.push_str(l),
            }
            out.push('\n');
        }
        *text = out;
    }
    if let (Some(t), false) = (thread, keys.is_empty()) {
        st.cgroup_files.insert(t, keys);
    }
    if let (Some(cpus), Some(tid)) = (cpus, thread) {
        if !cpus.is_empty() {
            if let Some(affinity) = st.affinity.get_mut(&tid) {
                affinity.clone_from(cpus);
            }
        }
    }
}

/// What the kernel (6.1) does when a cpuset's CPUs change: every task in it
/// gets the cpuset's whole CPU list as its affinity.
fn emulate_cpuset_resize(st: &mut FakeState, cpus_file: &Path, data: &str) {
    let (Some(dir), Ok(cpus)) = (cpus_file.parent(), CpuSet::parse_list(data)) else {
        return;
    };
    if cpus.is_empty() {
        return;
    }
    st.settle(&dir.join("tasks"));
    let tids: Vec<i32> = st
        .files
        .get(&dir.join("tasks"))
        .map(|t| {
            t.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for tid in tids {
        if st.affinity.contains_key(&tid) {
            st.affinity.insert(tid, cpus.clone());
        }
    }
}

/// What the kernel does when a child of the cgroup v2 root becomes a
/// partition or stops being one: the root's effective CPUs become the online
/// CPUs but those of its partitions, and every thread of the root cgroup
/// (kernel threads included, per-CPU ones excepted) gets them as its
/// affinity, whatever it had. Only where the root shows
/// `cpuset.cpus.effective` and the online CPUs are known.
fn emulate_partition_change(st: &mut FakeState, partition_file: &Path) {
    let Some(root) = partition_file.parent().and_then(Path::parent) else {
        return;
    };
    let effective_file = root.join("cpuset.cpus.effective");
    let online = st
        .files
        .get(Path::new("/sys/devices/system/cpu/online"))
        .and_then(|t| CpuSet::parse_list(t.trim()).ok());
    let (Some(mut effective), true) = (online, st.files.contains_key(&effective_file)) else {
        return;
    };
    let children: Vec<PathBuf> = st
        .dirs_below(root)
        .filter(|d| d.parent() == Some(root))
        .cloned()
        .collect();
    for child in children {
        let state = st
            .files
            .get(&child.join("cpuset.cpus.partition"))
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        if state == "isolated" || state == "root" {
            let cpus = st
                .files
                .get(&child.join("cpuset.cpus"))
                .and_then(|t| CpuSet::parse_list(t.trim()).ok())
                .unwrap_or_default();
            effective = effective.difference(&cpus);
        }
    }
    if effective.is_empty() {
        return;
    }
    st.files
        .insert(effective_file, format!("{}\n", effective.to_list()));
    let mut tids = BTreeSet::new();
    for list in ["cgroup.procs", "cgroup.threads"] {
        st.settle(&root.join(list));
        if let Some(text) = st.files.get(&root.join(list)) {
            tids.extend(
                text.split_whitespace()
                    .filter_map(|x| x.parse::<i32>().ok()),
            );
        }
    }
    for tid in tids {
        if st.affinity.contains_key(&tid) && !st.per_cpu.contains(&tid) {
            st.affinity.insert(tid, effective.clone());
        }
    }
}

/// The key of [`FakeState::hierarchy_lists`]: the hierarchy's path, a NUL
/// (never in a path) and the list's name.
fn hierarchy_list_key(root: &Path, name: &std::ffi::OsStr) -> Vec<u8> {
    let mut k = key(root).to_vec();
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

/// The mount point of the cgroup hierarchy a control file belongs to, e.g.
/// `/sys/fs/cgroup/cpuset` for `/sys/fs/cgroup/cpuset/a/b/tasks`.
fn cgroup_hierarchy_root(path: &Path) -> PathBuf {
    let comps: Vec<_> = path.components().collect();
    // /sys/fs/cgroup/<hierarchy>/...: keep 5 components ("/", sys, fs, cgroup, name).
    if comps.len() > 5 && path.starts_with("/sys/fs/cgroup") {
        comps[..5].iter().collect()
    } else {
        PathBuf::from("/sys/fs/cgroup")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_lists_its_own_files_and_directories_not_what_is_below_them() {
        let k = FakeKernel::new();
        k.set_file("/proc/12/stat", "s");
        k.set_file("/proc/12/task/12/stat", "s");
        k.set_file("/proc/123/stat", "s");
        k.set_file("/proc/1230/task/1230/comm", "c");
        k.set_file("/proc/interrupts", "i");
        k.add_dir("/proc/9");
        k.set_file("/proc-x/1", "x");
        // Past a child with many entries below it, the listing searches on.
        for tid in 0..30 {
            k.set_file(format!("/proc/5/task/{tid}/stat"), "s");
        }
        k.set_file("/proc/50/stat", "s");
        let list = |p: &str| k.read_dir(Path::new(p)).unwrap();
        assert_eq!(
            list("/proc"),
            ["12", "123", "1230", "5", "50", "9", "interrupts"]
        );
        assert_eq!(list("/proc/5/task").len(), 30);
        assert_eq!(list("/proc/12"), ["stat", "task"]);
        assert_eq!(list("/proc/1230/task"), ["1230"]);
        assert!(list("/proc/9").is_empty());
        assert!(k.read_dir(Path::new("/proc/13")).is_err());
    }

    #[test]
    fn writing_a_tid_to_a_tasks_file_moves_it_between_cgroups() {
        let k = FakeKernel::new();
        k.set_file("/sys/fs/cgroup/cpuset/tasks", "1\n2\n");
        k.set_file("/sys/fs/cgroup/cpuset/a/tasks", "");
        k.write(Path::new("/sys/fs/cgroup/cpuset/a/tasks"), "2")
            .unwrap();
        assert_eq!(k.file("/sys/fs/cgroup/cpuset/tasks").unwrap(), "1\n");
        assert_eq!(k.file("/sys/fs/cgroup/cpuset/a/tasks").unwrap(), "2\n");
    }

    #[test]
    fn moving_thirty_thousand_threads_one_by_one_costs_each_move_a_lookup_not_a_rewrite() {
        // Rewriting every list's text at each move made this 9 x 10^8 line
        // copies (tens of seconds); kept as sets it is a blink.
        let k = FakeKernel::new();
        let n = 30_000;
        let listed: String = (1..=n).map(|t| format!("{t}\n")).collect();
        k.set_file("/sys/fs/cgroup/cpuset/tasks", listed);
        k.set_file("/sys/fs/cgroup/cpuset/a/tasks", "");
        let started = std::time::Instant::now();
        for tid in 1..=n {
            k.write(Path::new("/sys/fs/cgroup/cpuset/a/tasks"), &tid.to_string())
                .unwrap();
        }
        let took = started.elapsed();
        assert_eq!(k.file("/sys/fs/cgroup/cpuset/tasks").unwrap(), "");
        let moved = k.file("/sys/fs/cgroup/cpuset/a/tasks").unwrap();
        assert_eq!(moved.lines().count(), n);
        assert!(moved.starts_with("1\n2\n"), "in the order written");
        assert!(took.as_secs() < 5, "{n} moves took {took:?}");
    }

    #[test]
    fn a_thread_moved_into_a_v1_cpuset_shows_it_in_its_cgroup_file_and_takes_its_cpus() {
        let k = FakeKernel::new();
        k.set_file("/sys/fs/cgroup/cpuset/tasks", "7\n");
        k.set_file("/sys/fs/cgroup/cpuset/rt/tasks", "");
        k.set_file("/sys/fs/cgroup/cpuset/rt/cpuset.cpus", "3\n");
        k.set_file("/proc/5/task/7/cgroup", "4:cpuset:/\n1:name=systemd:/\n");
        k.set_thread_affinity(7, CpuSet::from_cpus([0, 1, 2, 3]));
        k.write(Path::new("/sys/fs/cgroup/cpuset/rt/tasks"), "7")
            .unwrap();
        assert_eq!(
            k.file("/proc/5/task/7/cgroup").unwrap(),
            "4:cpuset:/rt\n1:name=systemd:/\n"
        );
        assert_eq!(k.get_affinity(7).unwrap(), CpuSet::from_cpus([3]));
        assert_eq!(
            k.read_dir(Path::new("/sys/fs/cgroup/cpuset")).unwrap(),
            vec!["rt", "tasks"]
        );
    }

    #[test]
    fn a_v2_partition_made_then_undone_gives_the_roots_threads_the_roots_cpus_but_per_cpu_ones() {
        let k = FakeKernel::new();
        let root = "/sys/fs/cgroup";
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_file(format!("{root}/cpuset.cpus.effective"), "0-3\n");
        k.set_file(format!("{root}/cgroup.procs"), "2\n40\n41\n");
        k.set_file(format!("{root}/cgroup.threads"), "2\n30\n40\n41\n");
        k.set_file(format!("{root}/cpuset.cpus"), "");
        k.set_file(format!("{root}/cpuset.cpus.partition"), "");
        k.set_thread_affinity(2, CpuSet::parse_list("0-3").unwrap());
        k.set_thread_affinity(40, CpuSet::parse_list("0-1").unwrap());
        k.set_thread_affinity(41, CpuSet::parse_list("2-3").unwrap());
        k.set_per_cpu_thread(30, 3);
        let shield = Path::new(root).join("shield");
        k.mkdir(&shield).unwrap();
        k.write(&shield.join("cpuset.cpus"), "2-3").unwrap();
        k.write(&shield.join("cpuset.cpus.partition"), "isolated")
            .unwrap();
        let list = |tid| k.get_affinity(tid).unwrap().to_list();
        assert_eq!(
            k.file(format!("{root}/cpuset.cpus.effective")).unwrap(),
            "0-1\n"
        );
        assert_eq!(
            [list(2), list(40), list(41), list(30)],
            ["0-1", "0-1", "0-1", "3"]
        );
        k.write(&shield.join("cpuset.cpus.partition"), "member")
            .unwrap();
        assert_eq!(
            [list(2), list(40), list(41), list(30)],
            ["0-3", "0-3", "0-3", "3"]
        );
        assert_eq!(
            k.set_affinity(30, &CpuSet::from_cpus([1]))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EINVAL),
            "a per-CPU kernel thread's affinity cannot be set"
        );
    }

    #[test]
    fn refused_writes_fail_like_a_managed_irq() {
        let k = FakeKernel::new();
        k.set_file("/proc/irq/36/smp_affinity", "3\n");
        k.refuse_writes("/proc/irq/36/smp_affinity");
        assert!(k
            .write(Path::new("/proc/irq/36/smp_affinity"), "1")
            .is_err());
    }

    #[test]
    fn a_file_set_as_a_sequence_shows_one_text_per_read_then_keeps_the_last() {
        let k = FakeKernel::new();
        k.set_file_sequence("/proc/uptime", &["1.00 0\n", "1.01 0\n"]);
        let read = || k.read(Path::new("/proc/uptime")).unwrap();
        assert_eq!(read(), "1.00 0\n");
        assert_eq!(read(), "1.01 0\n");
        assert_eq!(read(), "1.01 0\n");
    }

    #[test]
    fn files_of_an_unmounted_file_system_show_only_while_it_is_mounted() {
        let k = FakeKernel::new();
        let debug = Path::new("/sys/kernel/debug");
        let file = Path::new("/sys/kernel/debug/sched/preempt");
        k.set_unmounted_file(debug, file, "(voluntary) full");
        assert!(!k.exists(file));
        k.mount("debugfs", debug).unwrap();
        assert!(k.is_mounted(debug));
        k.write(file, "full").unwrap();
        k.unmount(debug).unwrap();
        assert!(!k.exists(file));
        k.mount("debugfs", debug).unwrap();
        assert_eq!(k.read(file).unwrap(), "full", "what was written stays");
        assert!(k.unmount(Path::new("/nowhere")).is_err());
    }

    #[test]
    fn rmdir_refuses_a_cgroup_with_tasks() {
        let k = FakeKernel::new();
        k.set_file("/sys/fs/cgroup/cpuset/tasks", "");
        k.mkdir(Path::new("/sys/fs/cgroup/cpuset/x")).unwrap();
        k.write(Path::new("/sys/fs/cgroup/cpuset/x/tasks"), "5")
            .unwrap();
        assert!(k.rmdir(Path::new("/sys/fs/cgroup/cpuset/x")).is_err());
        k.write(Path::new("/sys/fs/cgroup/cpuset/tasks"), "5")
            .unwrap();
        k.rmdir(Path::new("/sys/fs/cgroup/cpuset/x")).unwrap();
        assert!(!k.has_dir("/sys/fs/cgroup/cpuset/x"));
    }

    #[test]
    fn a_trace_pipe_hands_out_its_text_once_and_a_marker_appends_lines() {
        let k = FakeKernel::new();
        let pipe = Path::new("/sys/kernel/tracing/per_cpu/cpu1/trace_pipe");
        let marker = Path::new("/sys/kernel/tracing/trace_marker");
        k.set_file(pipe, "event one\n");
        k.set_file(marker, "");
        let mut reader = k.open_trace_pipe(pipe).unwrap();
        let writer = k.open_trace_marker(marker).unwrap();
        let mut buf = Vec::new();
        assert_eq!(reader.read_available(&mut buf).unwrap(), 10);
        assert_eq!(reader.read_available(&mut buf).unwrap(), 0, "read once");
        k.set_file(pipe, "event two\n");
        reader.read_available(&mut buf).unwrap();
        assert_eq!(buf, b"event one\nevent two\n");
        writer.write_line(b"mark a\n").unwrap();
        writer.write_line(b"mark b\n").unwrap();
        assert_eq!(k.file(marker).unwrap(), "mark a\nmark b\n");
        assert!(k.open_trace_pipe(Path::new("/nowhere")).is_err());
    }
}
