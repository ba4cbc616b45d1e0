//! Unprivileged placement, the I/O: the agent's Unix socket (mode 0660,
//! owned by the group the config names), the caller identified with
//! SO_PEERCRED, and the placement through the shield's own path
//! (`cpushield_shield::placement`, so the shield's journal records the
//! policy it replaces and `reset` restores it).

use crate::access::{self, Peer, Place, Policy, Rule};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Host, Kernel, Procfs, SchedParams};
use cpushield_rt::reserve::ReserveDir;
use cpushield_shield::placement;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A process held by a pidfd: it cannot be confused with a later process
/// that reuses its PID.
struct Pidfd(OwnedFd);

impl Pidfd {
    fn open(pid: i32) -> io::Result<Self> {
        cpushield_kernel::pidfd_open(pid).map(Self)
    }

    /// Whether the process has exited (its pidfd polls readable).
    fn exited(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, timeout 0.
        let rc = unsafe { libc::poll(&mut p, 1, 0) };
        rc != 0
    }
}

/// Holds process `pid` by a pidfd: the handle answers whether that very
/// process is still alive, even after its PID went to another process.
/// The `hold` of [`answer`] on the real kernel.
pub fn hold_by_pidfd(pid: i32) -> io::Result<Box<dyn Fn() -> bool>> {
    let fd = Pidfd::open(pid)?;
    Ok(Box::new(move || !fd.exited()))
}

fn sched_params(policy: Policy, priority: u32) -> SchedParams {
    SchedParams {
        policy: match policy {
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::Rr => libc::SCHED_RR,
            Policy::Other => libc::SCHED_OTHER,
        } as u32,
        priority,
        ..SchedParams::default()
    }
}

/// Places every thread of `pid` on `cpus` with the policy: the shield's
/// journal records each thread's policy first, then each thread enters the
/// shield and gets the policy.
pub fn place(host: &Host, pid: i32, cpus: &CpuSet, place: &Place) -> io::Result<usize> {
    let kernel = host.kernel();
    let tids = Procfs::new(kernel)
        .threads(pid)?
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    placement::record_sched(host, pid, &tids)?;
    let params = sched_params(place.policy, place.priority);
    for &tid in &tids {
        match placement::place_task(host, tid, cpus).and_then(|()| kernel.set_sched(tid, &params)) {
            Ok(()) => {}
            Err(e) if cpushield_kernel::is_gone(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(tids.len())
}

/// The caller's groups: the primary group from SO_PEERCRED and the
/// supplementary ones of its process.
fn groups_of(kernel: &dyn Kernel, pid: i32, gid: u32) -> Vec<u32> {
    let mut groups = Procfs::new(kernel)
        .process_file(pid, "status")
        .ok()
        .flatten()
        .map(|s| access::parse_groups(&s))
        .unwrap_or_default();
    groups.push(gid);
    groups
}

/// Answers one request line from `peer`: `ok: ...` or `refused: ...`, one
/// line. `hold` opens a handle that tells whether the process is still the
/// one checked (a pidfd on the real kernel). CPUs another process reserved
/// (`run --reserve`) are refused as `run` refuses them.
pub fn answer(
    host: &Host,
    rules: &[Rule],
    reserves: &ReserveDir,
    peer: &Peer,
    line: &str,
    hold: &dyn Fn(i32) -> io::Result<Box<dyn Fn() -> bool>>,
) -> String {
    let (req, cpus) = match access::parse_request(line) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let pid = if req.pid == 0 { peer.pid } else { req.pid };
    let Ok(held) = hold(pid) else {
        return format!("refused: there is no process {pid}");
    };
    let owner = Procfs::new(host.kernel())
        .process_file(pid, "status")
        .ok()
        .flatten()
        .and_then(|s| access::owner_of(&s));
    let Some(owner) = owner else {
        return format!("refused: there is no process {pid}");
    };
    if !held() {
        return format!("refused: process {pid} exited while it was checked");
    }
    let rule = match access::decide(rules, peer, owner, pid, &cpus, req.priority) {
        Ok(r) => r.clone(),
        Err(e) => return e,
    };
    if let Err(e) = reserves.check(&cpus, pid) {
        return format!("refused: {e}");
    }
    if !held() {
        return format!("refused: process {pid} exited while it was checked");
    }
    match place(host, pid, &cpus, &req) {
        Ok(_) if !held() => format!("refused: process {pid} exited while it was placed"),
        Ok(n) => format!(
            "ok: placed process {pid} ({n} thread{}) on CPU {} with {:?} {} (by {})",
            if n == 1 { "" } else { "s" },
            cpus.to_list(),
            req.policy,
            req.priority,
            rule.describe()
        )
        .replace("Fifo", "fifo")
        .replace("Rr", "rr")
        .replace("Other", "other"),
        Err(e) => format!("refused: placing process {pid} failed: {e}"),
    }
}

/// Why a request to the agent got no placement.
#[derive(Debug)]
pub enum AskError {
    /// The socket admits only its group (mode 0660).
    Denied {
        /// The socket.
        path: PathBuf,
    },
    /// No agent listens there.
    NoAgent {
        /// The socket.
        path: PathBuf,
        /// Why connecting failed.
        error: io::Error,
    },
    /// The agent closed the connection without an answer.
    NoAnswer {
        /// The socket.
        path: PathBuf,
    },
    /// Sending or receiving failed half way.
    Io(io::Error),
    /// The agent refused; its one-line answer.
    Refused(String),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::Denied { path } => write!(
                f,
                "refused: the agent's socket {} admits only group {} (mode 0660, [access] socket_group); ask an administrator to add you to it",
                path.display(),
                group_of(path)
            ),
            AskError::NoAgent { path, error } => write!(
                f,
                "no agent answers on {} ({error}): start `cpushield agent` with [[access.grant]] rules, or run as root",
                path.display()
            ),
            AskError::NoAnswer { path } => write!(
                f,
                "the agent on {} closed without an answer",
                path.display()
            ),
            AskError::Io(e) => write!(f, "talking to the agent failed: {e}"),
            AskError::Refused(reply) => f.write_str(reply),
        }
    }
}

impl std::error::Error for AskError {}

/// The name of the group that owns `path`, for a refusal.
fn group_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .and_then(|m| nix::unistd::Group::from_gid(m.gid().into()).ok().flatten())
        .map_or_else(|| "its group".to_string(), |g| g.name)
}

/// Sends `request` to the agent on the socket at `path` (the caller's side
/// of [`answer`]); returns the agent's `ok: ...` line.
pub fn ask(path: &Path, request: &access::Request) -> Result<String, AskError> {
    let mut stream = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(AskError::Denied {
                path: path.to_path_buf(),
            })
        }
        Err(error) => {
            return Err(AskError::NoAgent {
                path: path.to_path_buf(),
                error,
            })
        }
    };
    let line = serde_json::to_string(request)
        .map_err(io::Error::other)
        .map_err(AskError::Io)?;
    stream
        .write_all(format!("{line}\n").as_bytes())
        .map_err(AskError::Io)?;
    let mut reply = String::new();
    BufReader::new(&stream)
        .read_line(&mut reply)
        .map_err(AskError::Io)?;
    let reply = reply.trim();
    match reply {
        "" => Err(AskError::NoAnswer {
            path: path.to_path_buf(),
        }),
        r if r.starts_with("ok:") => Ok(r.to_string()),
        r => Err(AskError::Refused(r.to_string())),
    }
}

/// The socket while the agent serves it; [`Running::stop`] closes it.
pub struct Running {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stops serving, waits for the thread and removes the socket file.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(
    host: &Host,
    reserves: &ReserveDir,
    rules: &[Rule],
    stream: UnixStream,
) -> Option<String> {
    let cred = getsockopt(&stream, PeerCredentials).ok()?;
    let peer = Peer {
        pid: cred.pid(),
        uid: cred.uid(),
        groups: groups_of(host.kernel(), cred.pid(), cred.gid()),
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    let mut reader = BufReader::new((&stream).take(access::MAX_REQUEST as u64));
    let reply = match reader.read_line(&mut line) {
        Ok(_) if line.ends_with('\n') => {
            answer(host, rules, reserves, &peer, &line, &hold_by_pidfd)
        }
        _ => format!(
            "refused: a request is one line of at most {} bytes",
            access::MAX_REQUEST
        ),
    };
    let _ = (&stream).write_all(format!("{reply}\n").as_bytes());
    Some(format!(
        "socket: uid {} pid {}: {reply}",
        peer.uid, peer.pid
    ))
}

/// Listens on `path` (mode 0660, group `gid`) and answers placement requests
/// against `rules` in a thread, printing one log line per request.
pub fn start(
    host: &Host,
    reserves: ReserveDir,
    path: &Path,
    gid: u32,
    rules: Vec<Rule>,
) -> io::Result<Running> {
    let remedy = |e: io::Error, what: &str| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot {what} the agent's socket {} ({e}): run the agent as root, or name another path in [access] socket",
                path.display()
            ),
        )
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| remedy(e, "create the directory of"))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::other(format!(
                    "the agent's socket {} is in use: another agent runs; stop it first",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(|e| remedy(e, "replace"))?;
        }
        Ok(_) => {
            return Err(io::Error::other(format!(
                "{} exists and is not a socket: remove it or name another path in [access] socket",
                path.display()
            )))
        }
        Err(_) => {}
    }
    let listener = UnixListener::bind(path).map_err(|e| remedy(e, "create"))?;
    std::os::unix::fs::chown(path, Some(0), Some(gid)).map_err(|e| remedy(e, "chown"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| remedy(e, "chmod"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let host = host.clone();
    let thread = std::thread::spawn(move || {
        for stream in listener.incoming() {
            if flag.load(Ordering::SeqCst) {
                break;
            }
            let Ok(stream) = stream else { continue };
            if let Some(line) = serve_one(&host, &reserves, &rules, stream) {
                println!("cpushield agent: {line}");
            }
        }
    });
    Ok(Running {
        path: path.to_path_buf(),
        stop,
        thread: Some(thread),
    })
}
