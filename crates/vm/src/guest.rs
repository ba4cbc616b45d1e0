//! The guest side: finds the host's port, estimates the clock offset by
//! ping-pong, collects the host's view while a measurement runs, and
//! explains a spike's time outside the guest from it.

use crate::protocol::{GapsQuery, Op, Reply, Request, MAX_REPLY_BYTES, PORT_NAME, VERSION};
use crate::timeline::{Gap, GapState, Occupant, OccupantKind};
use cpushield_cpuset::fmt_ns;
use cpushield_kernel::Kernel;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The port to the host: `/dev/virtio-ports/NAME` where udev made it, else the
/// `/dev/vportNpM` whose `/sys/class/virtio-ports/vportNpM/name` is [`PORT_NAME`].
pub fn find_port(kernel: &dyn Kernel) -> Option<PathBuf> {
    let by_name = Path::new("/dev/virtio-ports").join(PORT_NAME);
    if kernel.exists(&by_name) {
        return Some(by_name);
    }
    let class = Path::new(cpushield_kernel::paths::VIRTIO_PORTS);
    kernel.read_dir(class).ok()?.into_iter().find_map(|p| {
        let name = kernel.read(&class.join(&p).join("name")).ok()?;
        (name.trim() == PORT_NAME).then(|| Path::new("/dev").join(&p))
    })
}

/// Talking to the host failed.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The port could not be opened.
    #[error("{0}")]
    Open(String),
    /// No answer in time: no host side, or it died.
    #[error("no answer from the host side within {0:?}")]
    Timeout(Duration),
    /// The host answered with an error, or nonsense.
    #[error("{0}")]
    Refused(String),
}

/// The host − guest clock offset and its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Host CLOCK_MONOTONIC − guest CLOCK_MONOTONIC, ns.
    pub offset_ns: i64,
    /// Half the round trip of the ping it came from, ns: the host's time
    /// was read somewhere in it.
    pub err_ns: u64,
}

impl ClockOffset {
    /// A `gaps` request for `vcpu` (or every vCPU) from `from_ns` to
    /// `to_ns` (guest time), carrying this offset and its error.
    pub fn query(&self, vcpu: Option<u32>, from_ns: u64, to_ns: u64, min_ns: u64) -> GapsQuery {
        GapsQuery {
            vcpu,
            from_ns,
            to_ns,
            offset_ns: self.offset_ns,
            err_ns: self.err_ns,
            min_ns,
        }
    }

    /// The offset from one ping: sent at guest `t0`, answered at host `h`,
    /// received at guest `t1`.
    pub fn from_ping(t0: u64, h: u64, t1: u64) -> ClockOffset {
        let mid = t0 + (t1.saturating_sub(t0)) / 2;
        ClockOffset {
            offset_ns: h as i64 - mid as i64,
            err_ns: t1.saturating_sub(t0).div_ceil(2),
        }
    }
}

/// The port, opened.
pub struct Channel {
    file: File,
    next_id: u64,
    pending: Vec<u8>,
    now: fn() -> u64,
}

impl Channel {
    /// Opens the port (non-blocking: with no host side connected a write
    /// would wait forever).
    pub fn open(path: &Path, now: fn() -> u64) -> Result<Channel, ChannelError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| ChannelError::Open(format!("{}: {e}", path.display())))?;
        Ok(Channel::from_file(file, now))
    }

    /// A channel over an open file (the port, or one end of a socket pair).
    pub fn from_file(file: File, now: fn() -> u64) -> Channel {
        Channel {
            file,
            next_id: 1,
            pending: Vec::new(),
            now,
        }
    }

    /// Sends `op`, waits up to `timeout` for its answer.
    pub fn ask(&mut self, op: Op, timeout: Duration) -> Result<Reply, ChannelError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = Request { v: VERSION, id, op }.to_line();
        let deadline = Instant::now() + timeout;
        let mut sent = 0;
        let bytes = line.as_bytes();
        while sent < bytes.len() {
            if !self.wait(libc::POLLOUT, deadline) {
                return Err(ChannelError::Timeout(timeout));
            }
            match self.file.write(&bytes[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(ChannelError::Open(e.to_string())),
            }
        }
        loop {
            while let Some(nl) = self.pending.iter().position(|b| *b == b'\n') {
                let l: Vec<u8> = self.pending.drain(..=nl).collect();
                let Ok(reply) = serde_json::from_slice::<Reply>(&l[..nl]) else {
                    continue;
                };
                // An answer to an earlier request that timed out is skipped.
                if reply.id == Some(id) || (reply.id.is_none() && !reply.ok) {
                    return if reply.ok {
                        Ok(reply)
                    } else {
                        Err(ChannelError::Refused(reply.error.unwrap_or_default()))
                    };
                }
            }
            if self.pending.len() > MAX_REPLY_BYTES {
                self.pending.clear();
                return Err(ChannelError::Refused("answer too long".into()));
            }
            if !self.wait(libc::POLLIN, deadline) {
                return Err(ChannelError::Timeout(timeout));
            }
            let mut chunk = [0u8; 16384];
            match self.file.read(&mut chunk) {
                // No host connected: the port reads as ended; wait and see.
                Ok(0) => std::thread::sleep(Duration::from_millis(20)),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => return Err(ChannelError::Open(e.to_string())),
            }
        }
    }

    /// Waits for the port to be ready for `events` until `deadline`. A port
    /// with no host side connected reports a hang-up: the caller's read or
    /// write then finds nothing to do, sleeps a little and waits again.
    fn wait(&self, events: i16, deadline: Instant) -> bool {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let mut fd = libc::pollfd {
                fd: self.file.as_raw_fd(),
                events,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, 1000) as i32;
            // SAFETY: one valid pollfd of a file we hold open.
            let n = unsafe { libc::poll(&mut fd, 1, ms) };
            if n > 0 && fd.revents & (events | libc::POLLERR | libc::POLLHUP) != 0 {
                return true;
            }
            if n < 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// The best of `rounds` pings (the shortest round trip).
    pub fn sync_clock(
        &mut self,
        rounds: usize,
        timeout: Duration,
    ) -> Result<ClockOffset, ChannelError> {
        let mut best: Option<ClockOffset> = None;
        for _ in 0..rounds.max(1) {
            let t0 = (self.now)();
            let r = self.ask(Op::Ping, timeout)?;
            let t1 = (self.now)();
            let h = r
                .host_ns
                .ok_or_else(|| ChannelError::Refused("ping answered without host_ns".into()))?;
            let o = ClockOffset::from_ping(t0, h, t1);
            if best.is_none_or(|b| o.err_ns < b.err_ns) {
                best = Some(o);
            }
        }
        Ok(best.expect("at least one round"))
    }
}

/// What the host saw while the guest measured: its gaps (guest time), and
/// when the host answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostView {
    /// The host side's program and version (`hello`).
    pub host: String,
    /// The gaps collected, in guest time.
    pub gaps: Vec<Gap>,
    /// The host traced from this guest time on.
    pub seen_from_ns: Option<u64>,
    /// The host's last answer covered up to this guest time: after it, its
    /// view is missing (it stopped answering, or the run ended).
    pub seen_to_ns: Option<u64>,
    /// The host stopped answering before the collection ended.
    pub lost: bool,
    /// The clock error of the answers, ns (the worst used).
    pub err_ns: u64,
}

/// Gaps kept by the collector at most (oldest dropped first).
pub const MAX_COLLECTED: usize = 8192;

/// Asks the host for its gaps every `every` while a measurement runs.
pub struct Collector {
    view: Arc<Mutex<HostView>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Channel, ClockOffset)>>,
    min_ns: u64,
}

/// Pages one pass may ask for: when the host has more gaps than one answer
/// holds, the pass asks on from the last one it got, up to this many times;
/// the rest waits for the next pass, which starts where this one stopped.
const MAX_PAGES_PER_PASS: usize = 64;

/// Spikes asked about one by one at the end (the worst first, as the
/// callers order them); the others are explained from the collected view.
pub const MAX_ASKED_SPIKES: usize = 64;

/// Where the next page of a `gaps` answer starts: at the start of its last
/// gap when the answer was cut (`truncated`) and that moves past `from`;
/// None when the answer was whole (or could not move on).
pub fn next_page(from_ns: u64, r: &Reply) -> Option<u64> {
    if r.truncated != Some(true) {
        return None;
    }
    let last = r.gaps.as_ref()?.iter().map(|g| g.from_ns).max()?;
    (last > from_ns).then_some(last)
}

/// Asks for the gaps of `vcpu` (or every vCPU) from `from_ns` to `to_ns`,
/// page after page while the answers are cut, at most `max_pages`, merging
/// each into `view`. Returns how far the answers covered: `to_ns` when the
/// last was whole, else where the next page would start. Err: the host did
/// not answer the first page.
fn ask_pages(
    ch: &mut Channel,
    view: &Mutex<HostView>,
    q: GapsQuery,
    max_pages: usize,
) -> Result<u64, ChannelError> {
    let mut from = q.from_ns;
    for page in 0..max_pages.max(1) {
        let r = match ch.ask(
            Op::Gaps(GapsQuery {
                from_ns: from,
                ..q.clone()
            }),
            Duration::from_secs(1),
        ) {
            Ok(r) => r,
            Err(e) if page == 0 => return Err(e),
            Err(_) => return Ok(from),
        };
        merge(&mut view.lock().expect("view"), &r, q.err_ns);
        match next_page(from, &r) {
            Some(next) => from = next,
            None => return Ok(q.to_ns),
        }
    }
    Ok(from)
}

/// One pass of the collector: asks again about each gap still open at the
/// last answer, then for every gap from `cursor` to `to`, page by page.
/// Returns the new cursor: how far the answers covered (unchanged, and the
/// view marked lost, when the host did not answer).
fn collect_pass(
    ch: &mut Channel,
    v: &Mutex<HostView>,
    clock: ClockOffset,
    cursor: u64,
    to: u64,
    min_ns: u64,
) -> u64 {
    // A gap still open at the last answer is asked again, for its vCPU alone
    // (it has no later gap while open): the answer has its end and what held
    // the vCPU since.
    let open: Vec<(u32, u64)> = v
        .lock()
        .expect("view")
        .gaps
        .iter()
        .filter(|g| g.open)
        .map(|g| (g.vcpu, g.from_ns))
        .take(MAX_ASKED_SPIKES)
        .collect();
    for (vcpu, from) in open {
        let q = clock.query(
            Some(vcpu),
            from.saturating_sub(2 * clock.err_ns),
            cursor.max(from),
            min_ns,
        );
        if ask_pages(ch, v, q, 1).is_err() {
            break;
        }
    }
    // The rest from where the answers got to, less the clock's error (the
    // offset moves between pings).
    let from = cursor
        .saturating_sub(2 * clock.err_ns)
        .max(to.saturating_sub(crate::protocol::MAX_RANGE_NS));
    let q = clock.query(None, from, to, min_ns);
    match ask_pages(ch, v, q, MAX_PAGES_PER_PASS) {
        Ok(covered) => covered,
        Err(_) => {
            let mut view = v.lock().expect("view");
            if view.seen_to_ns.is_some() {
                view.lost = true;
            }
            cursor
        }
    }
}

impl Collector {
    /// Greets the host side and starts collecting gaps of at least `min_ns`.
    /// An error: there is no host side (or it does not answer).
    pub fn start(
        path: &Path,
        now: fn() -> u64,
        min_ns: u64,
        every: Duration,
    ) -> Result<Collector, ChannelError> {
        let mut ch = Channel::open(path, now)?;
        let hello = ch.ask(Op::Hello, Duration::from_secs(2))?;
        let mut clock = ch.sync_clock(8, Duration::from_secs(2))?;
        let view = Arc::new(Mutex::new(HostView {
            host: hello.host.unwrap_or_default(),
            err_ns: clock.err_ns,
            ..HostView::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (v, s) = (view.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("cpushield-hostview".into())
            .spawn(move || {
                // Every gap up to here is collected (or was cut by the bounds).
                let mut cursor = now().saturating_sub(1_000_000_000);
                let mut last_sync = Instant::now();
                let mut last_pass = false;
                loop {
                    let finishing = s.load(Ordering::SeqCst);
                    if last_sync.elapsed() > Duration::from_secs(5) {
                        if let Ok(c) = ch.sync_clock(4, Duration::from_secs(1)) {
                            clock = c;
                        }
                        last_sync = Instant::now();
                    }
                    cursor = collect_pass(&mut ch, &v, clock, cursor, now(), min_ns);
                    if last_pass {
                        break;
                    }
                    if finishing {
                        last_pass = true;
                        continue;
                    }
                    let until = Instant::now() + every;
                    while Instant::now() < until && !s.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                (ch, clock)
            })
            .map_err(|e| ChannelError::Open(format!("cannot start the host view thread: {e}")))?;
        Ok(Collector {
            view,
            stop,
            thread: Some(thread),
            min_ns,
        })
    }

    /// Asks once more and returns everything collected.
    pub fn finish(self) -> HostView {
        self.finish_asking(&[])
    }

    /// Asks once more, then about each of `windows` (vCPU, guest-time start
    /// and end of a spike; the first [`MAX_ASKED_SPIKES`]) for that vCPU
    /// alone, and returns everything collected. The collected view can miss
    /// a spike's gap where the guest's view was bounded (a busy host has
    /// thousands of short gaps a second); the host keeps its own for a
    /// minute, and an answer about one vCPU and a few milliseconds holds
    /// them all. Where the host no longer answers, the collected view stays.
    pub fn finish_asking(mut self, windows: &[(u32, u64, u64)]) -> HostView {
        self.stop.store(true, Ordering::SeqCst);
        let Some((mut ch, clock)) = self.thread.take().and_then(|t| t.join().ok()) else {
            return self.view.lock().expect("view").clone();
        };
        let lost = self.view.lock().expect("view").lost;
        if !lost {
            for &(vcpu, from, to) in windows.iter().take(MAX_ASKED_SPIKES) {
                let q = clock.query(
                    Some(vcpu),
                    from.saturating_sub(clock.err_ns),
                    to.saturating_add(clock.err_ns).max(from),
                    self.min_ns,
                );
                if ask_pages(&mut ch, &self.view, q, 4).is_err() {
                    break;
                }
            }
        }
        self.view.lock().expect("view").clone()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Adds an answer's gaps to the view (one gap per vCPU and start: a newer
/// answer replaces an open gap), keeps at most [`MAX_COLLECTED`].
pub fn merge(view: &mut HostView, r: &Reply, err_ns: u64) {
    if view.lost {
        // It answered again: what it saw before is still good, the hole is
        // only where it did not answer.
        view.lost = false;
    }
    if view.seen_from_ns.is_none() {
        view.seen_from_ns = r.seen_from_ns;
    }
    if let Some(t) = r.seen_to_ns {
        view.seen_to_ns = Some(view.seen_to_ns.unwrap_or(t).max(t));
    }
    view.err_ns = view.err_ns.max(err_ns);
    let mut kept: VecDeque<Gap> = std::mem::take(&mut view.gaps).into();
    for g in r.gaps.iter().flatten() {
        // Within the clock error of one start, the same gap (the offset
        // moves between answers). An open gap overlapped by a newer answer's
        // gap of that vCPU and state is that gap too, however far the offset
        // moved: kept beside its end, it would shadow it with occupants
        // charged only up to when it was still open (a hog that ran without
        // an event on its CPU is charged when it is switched out).
        if let Some(old) = kept.iter_mut().find(|o| {
            o.vcpu == g.vcpu
                && o.state == g.state
                && (o.from_ns.abs_diff(g.from_ns) <= 2 * err_ns.max(1)
                    || (o.open && o.from_ns <= g.to_ns && g.from_ns <= o.to_ns))
        }) {
            *old = g.clone();
        } else {
            kept.push_back(g.clone());
        }
    }
    while kept.len() > MAX_COLLECTED {
        kept.pop_front();
    }
    let mut gaps: Vec<Gap> = kept.into();
    gaps.sort_by_key(|g| (g.from_ns, g.vcpu));
    view.gaps = gaps;
}

/// The host's explanation of one spike's time outside the guest: the
/// report's own record of it.
pub use cpushield_report::HostCause;

impl HostView {
    /// Whether the host's answers reach from `from_ns` to `to_ns` (guest
    /// time) at all: it started watching by then and answered since.
    fn covers(&self, from_ns: u64, to_ns: u64) -> bool {
        self.seen_from_ns.is_some_and(|f| f <= to_ns) && self.seen_to_ns.unwrap_or(0) >= from_ns
    }

    /// The host's cause for vCPU `vcpu` not running between `from_ns` and
    /// `to_ns` (guest time): the gap overlapping most, within the clock error.
    pub fn explain(&self, vcpu: u32, from_ns: u64, to_ns: u64) -> HostCause {
        let err = self.err_ns;
        let base = HostCause {
            line: String::new(),
            kind: String::new(),
            vcpu,
            overlap_ns: 0,
            err_ns: err,
            culprit: None,
            culprit_pid: None,
            host_cpu: None,
            culprit_ns: None,
            missing_from_ns: None,
        };
        if !self.covers(from_ns, to_ns) {
            let since = self.seen_to_ns.or(self.seen_from_ns);
            return HostCause {
                line: match since {
                    Some(t) => format!(
                        "the host's view is missing from {} (its last answer): it stopped answering{}",
                        fmt_s(t),
                        if self.lost { "" } else { " before the run ended" }
                    ),
                    None => "the host's view is missing: the host side never answered about this time".into(),
                },
                kind: "missing".into(),
                missing_from_ns: since,
                ..base
            };
        }
        let lo = from_ns.saturating_sub(err);
        let hi = to_ns.saturating_add(err);
        let overlap = |g: &Gap| g.to_ns.min(hi).saturating_sub(g.from_ns.max(lo));
        let best = self
            .gaps
            .iter()
            .filter(|g| g.vcpu == vcpu && overlap(g) > 0)
            .max_by_key(|g| overlap(g));
        let Some(g) = best else {
            return HostCause {
                line: format!(
                    "the host saw vCPU {vcpu} run throughout ({} ± {}): a contradiction, the time outside the guest was not the host scheduler's (SMI, or the emulator itself)",
                    fmt_ns(to_ns.saturating_sub(from_ns)),
                    fmt_ns(err)
                ),
                kind: "nothing".into(),
                ..base
            };
        };
        let ov = overlap(g).min(to_ns.saturating_sub(from_ns) + 2 * err);
        // The largest named occupant: idle and the summed rest say nothing.
        let top =
            g.by.iter()
                .find(|o| !matches!(o.kind, OccupantKind::Idle | OccupantKind::Others))
                .or(g.by.first());
        let line = gap_line(vcpu, g, top);
        HostCause {
            line: format!("{line} (clock offset error ± {})", fmt_ns(err)),
            kind: g.state.label().to_string(),
            overlap_ns: ov,
            culprit: top.map(|o| o.name.clone()),
            culprit_pid: top.and_then(|o| o.pid),
            host_cpu: top.map(|o| o.host_cpu).or(Some(g.host_cpu)),
            culprit_ns: top.map(|o| o.ns),
            ..base
        }
    }
}

/// What the host saw of one vCPU over a stretch of guest time: how long it
/// held the vCPU off (runnable and not run, or woken and kept waiting), by
/// why, and what held its host CPU most.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldOffSummary {
    /// The vCPU.
    pub vcpu: u32,
    /// Time held off within the stretch, ns ([`Gap::held_off_ns`], clipped).
    pub held_off_ns: u64,
    /// Gaps that held it off.
    pub gaps: usize,
    /// Held-off time by why, ns.
    pub by_state: std::collections::BTreeMap<GapState, u64>,
    /// What held its host CPU longest over those gaps, at most three,
    /// longest first (idle and the summed rest left out), each with its
    /// time summed over them.
    pub top: Vec<Holder>,
    /// The clock offset's error, ns.
    pub err_ns: u64,
}

/// One holder of a vCPU's host CPU over several gaps: the occupant (its
/// `ns` the time summed over them, its name the latest seen) and every host
/// CPU it held the vCPU's off (a task may move between them).
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// Who, and for how long in all.
    pub occupant: Occupant,
    /// The host CPUs it held, ascending.
    pub host_cpus: std::collections::BTreeSet<usize>,
}

impl Holder {
    /// "sh (pid 879) on host CPU 1 for 48.2 ms", or "on host CPUs 0, 1".
    fn line(&self) -> String {
        let cpus: Vec<String> = self.host_cpus.iter().map(usize::to_string).collect();
        format!(
            "{} on host CPU{} {} for {}",
            who(&self.occupant),
            if cpus.len() == 1 { "" } else { "s" },
            cpus.join(", "),
            fmt_ns(self.occupant.ns)
        )
    }
}

impl HeldOffSummary {
    /// One line: "the host held vCPU 1 off 48.6 ms in 3 gaps (preempted
    /// 48.2 ms, halted then waiting 400 us), most by sh (pid 879) on host
    /// CPU 1 for 48.2 ms, then ... (clock offset error ± 270 us)".
    pub fn line(&self) -> String {
        let states: Vec<String> = self
            .by_state
            .iter()
            .filter(|(_, ns)| **ns > 0)
            .map(|(s, ns)| {
                let what = match s {
                    GapState::Halted => "halted then waiting",
                    other => other.label(),
                };
                format!("{what} {}", fmt_ns(*ns))
            })
            .collect();
        format!(
            "the host held vCPU {} off {} in {} gap{} ({}){} (clock offset error ± {})",
            self.vcpu,
            fmt_ns(self.held_off_ns),
            self.gaps,
            if self.gaps == 1 { "" } else { "s" },
            states.join(", "),
            if self.top.is_empty() {
                String::new()
            } else {
                let held: Vec<String> = self.top.iter().map(Holder::line).collect();
                format!(", most by {}", held.join(", then "))
            },
            fmt_ns(self.err_ns)
        )
    }
}

impl HostView {
    /// What the host saw of vCPU `vcpu` from `from_ns` to `to_ns` (guest
    /// time): the time it held the vCPU off, or, where its view does not
    /// cover the stretch, the line that says from when it is missing.
    pub fn held_off(&self, vcpu: u32, from_ns: u64, to_ns: u64) -> Result<HeldOffSummary, String> {
        if !self.covers(from_ns, to_ns) {
            return Err(self.explain(vcpu, from_ns, to_ns).line);
        }
        let mut sum = HeldOffSummary {
            vcpu,
            held_off_ns: 0,
            gaps: 0,
            by_state: Default::default(),
            top: Vec::new(),
            err_ns: self.err_ns,
        };
        let mut by: Vec<Holder> = Vec::new();
        for g in self.gaps.iter().filter(|g| g.vcpu == vcpu) {
            let Some(start) = g.held_off_from_ns() else {
                continue;
            };
            let ns = g.to_ns.min(to_ns).saturating_sub(start.max(from_ns));
            if ns == 0 {
                continue;
            }
            sum.held_off_ns += ns;
            sum.gaps += 1;
            *sum.by_state.entry(g.state).or_default() += ns;
            for o in
                g.by.iter()
                    .filter(|o| !matches!(o.kind, OccupantKind::Idle | OccupantKind::Others))
            {
                match by.iter_mut().find(|b| b.occupant.is_same_as(o)) {
                    Some(b) => {
                        b.occupant.ns += o.ns;
                        b.occupant.name.clone_from(&o.name);
                        b.host_cpus.insert(o.host_cpu);
                    }
                    None => by.push(Holder {
                        occupant: o.clone(),
                        host_cpus: [o.host_cpu].into(),
                    }),
                }
            }
        }
        by.sort_by_key(|h| std::cmp::Reverse(h.occupant.ns));
        by.truncate(3);
        sum.top = by;
        Ok(sum)
    }
}

/// How an occupant of a vCPU's host CPU is named in a cause's line.
fn who(o: &Occupant) -> String {
    match (o.kind, o.pid, o.vcpu) {
        (OccupantKind::Vcpu, _, Some(k)) => format!("the guest's own vCPU {k}"),
        (OccupantKind::OtherVcpu, Some(p), _) => {
            format!("another guest's vCPU thread {} (pid {p})", o.name)
        }
        (_, Some(p), _) => format!("{} (pid {p})", o.name),
        _ => o.name.clone(),
    }
}

/// The line that says why vCPU `vcpu` was not running, from the gap and its
/// largest named occupant. A halted gap stays halted when its thread was
/// woken and then kept waiting: the guest had idled it, so the delay is a
/// wakeup path, and what held the host CPU after the wakeup is named beside it.
fn gap_line(vcpu: u32, g: &Gap, top: Option<&Occupant>) -> String {
    match (g.state, top) {
        (GapState::Halted, t) => {
            let named = t.filter(|o| {
                o.ns > 0 && !matches!(o.kind, OccupantKind::Idle | OccupantKind::Others)
            });
            match (g.woken_ns, named) {
                (Some(w), Some(o)) => format!(
                    "vCPU {vcpu} halted (guest idle){}, then woken and kept waiting {} on host CPU {} by {} for {} of it: a wakeup path",
                    match w.saturating_sub(g.from_ns) {
                        0 => String::new(),
                        idle => format!(" for {}", fmt_ns(idle)),
                    },
                    fmt_ns(g.to_ns.saturating_sub(w.max(g.from_ns))),
                    o.host_cpu,
                    who(o),
                    fmt_ns(o.ns)
                ),
                (Some(w), None) => format!(
                    "vCPU {vcpu} halted (guest idle) for {}: a wakeup path; woken {} before it ran",
                    fmt_ns(g.len_ns()),
                    fmt_ns(g.to_ns.saturating_sub(w.max(g.from_ns)))
                ),
                (None, _) => format!(
                    "vCPU {vcpu} halted (guest idle) for {}: a wakeup path",
                    fmt_ns(g.len_ns())
                ),
            }
        }
        (GapState::Interrupted, Some(o)) => format!(
            "on the host, {} ran on host CPU {} for {} while vCPU {vcpu}'s thread was running",
            o.name,
            o.host_cpu,
            fmt_ns(o.ns)
        ),
        (GapState::Exit, _) => format!(
            "a VM exit of vCPU {vcpu} took the host {} to handle",
            fmt_ns(g.len_ns())
        ),
        (_, Some(o)) => format!(
            "on the host, {} ran on host CPU {} for {} while vCPU {vcpu} was runnable",
            who(o),
            o.host_cpu,
            fmt_ns(o.ns),
        ),
        (_, None) => format!(
            "vCPU {vcpu} was runnable and not run for {}",
            fmt_ns(g.len_ns())
        ),
    }
}

fn fmt_s(ns: u64) -> String {
    format!("{:.3} s (guest clock)", ns as f64 / 1e9)
}

/// The line printed where no host side answered.
pub const NO_HOST_HINT: &str = "for the host's side of time outside the guest, run `cpushield vm watch` on the host with a virtio-serial port named org.cpushield.vm.0 (docs/fleet.md)";

#[cfg(test)]
mod tests {
    use super::*;

    /// A host side answering on one end of a socket pair from `timeline`,
    /// and the guest's channel on the other.
    fn served(timeline: crate::timeline::Timeline) -> Channel {
        use std::io::BufRead;
        let (guest, host) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        std::thread::spawn(move || {
            let mut out = host.try_clone().expect("clone");
            let reader = std::io::BufReader::new(host);
            for line in reader.lines() {
                let Ok(line) = line else { break };
                let facts = crate::protocol::HostFacts {
                    vcpus: 2,
                    retention_ns: 60_000_000_000,
                    now_ns: 10_000_000_000,
                };
                let reply = crate::protocol::answer(line.as_bytes(), &timeline, facts);
                if out.write_all(reply.to_line().as_bytes()).is_err() {
                    break;
                }
            }
        });
        guest.set_nonblocking(true).expect("non-blocking");
        Channel::from_file(File::from(std::os::fd::OwnedFd::from(guest)), || 0)
    }

    /// One thread running both vCPUs (single-threaded TCG), switched out
    /// `n` times for 1 ms each, every 2 ms from 1 s on (host time).
    fn many_short_gaps(n: u64) -> crate::timeline::Timeline {
        use cpushield_trace::event::{Event, EventKind};
        let mut t = crate::timeline::Timeline::new([(100, 0), (100, 1)]);
        // A line is recorded in the name of the task current then: the one
        // switched out.
        let switch = |ts: u64, prev: (i32, &str), next: (i32, &str)| Event {
            ts_ns: ts,
            cpu: 1,
            pid: prev.0,
            comm: prev.1.into(),
            need_resched: false,
            raw: String::new(),
            kind: EventKind::Switch {
                prev_comm: prev.1.into(),
                prev_pid: prev.0,
                prev_state: "R".into(),
                next_comm: next.1.into(),
                next_pid: next.0,
                next_prio: 120,
            },
        };
        for i in 0..n {
            let at = 1_000_000_000 + i * 2_000_000;
            t.feed(&switch(at, (100, "ALL CPUs/TCG"), (7, "hog")));
            t.feed(&switch(at + 1_000_000, (7, "hog"), (100, "ALL CPUs/TCG")));
        }
        t.read_up_to(1_000_000_000 + n * 2_000_000);
        t
    }

    #[test]
    fn held_off_time_sums_preemptions_whole_and_halts_from_their_wakeup_and_names_the_longest_holder(
    ) {
        let mut halted = gap(
            1,
            10_000_000,
            20_000_000,
            GapState::Halted,
            vec![hog(4_000_000)],
        );
        halted.woken_ns = Some(16_000_000);
        let v = view(vec![
            gap(
                1,
                1_000_000,
                3_000_000,
                GapState::Preempted,
                vec![hog(2_000_000)],
            ),
            halted,
            // Not woken: the guest idled throughout, nothing held it off.
            gap(1, 30_000_000, 40_000_000, GapState::Halted, vec![]),
            gap(
                0,
                1_000_000,
                9_000_000,
                GapState::Preempted,
                vec![hog(8_000_000)],
            ),
        ]);
        let s = v.held_off(1, 0, 50_000_000).expect("seen");
        assert_eq!(s.held_off_ns, 2_000_000 + 4_000_000);
        assert_eq!(s.gaps, 2);
        assert_eq!(s.by_state.get(&GapState::Halted), Some(&4_000_000));
        assert_eq!(s.top.first().map(|h| h.occupant.ns), Some(6_000_000));
        let line = s.line();
        assert!(line.starts_with("the host held vCPU 1 off 6"), "{line}");
        assert!(
            line.contains("stress-ng (pid 4711) on host CPU 1"),
            "{line}"
        );
        // A stretch the host never answered about is missing, not clean.
        let missing = v.held_off(1, 2_000_000_000, 3_000_000_000).unwrap_err();
        assert!(
            missing.starts_with("the host's view is missing"),
            "{missing}"
        );
    }

    #[test]
    fn a_task_that_moved_host_cpu_and_execd_between_gaps_is_one_holder_as_the_timeline_counts_it() {
        let v = view(vec![
            gap(
                1,
                1_000_000,
                3_000_000,
                GapState::Preempted,
                vec![occupant("sh", Some(879), 0, 2_000_000)],
            ),
            gap(
                1,
                5_000_000,
                8_000_000,
                GapState::Preempted,
                vec![
                    occupant("stress-ng", Some(879), 1, 3_000_000),
                    occupant("stress-ng", Some(880), 1, 1_000_000),
                ],
            ),
        ]);
        let s = v.held_off(1, 0, 10_000_000).expect("seen");
        let holders: Vec<(Option<i32>, &str, u64, Vec<usize>)> = s
            .top
            .iter()
            .map(|h| {
                let o = &h.occupant;
                (
                    o.pid,
                    o.name.as_str(),
                    o.ns,
                    h.host_cpus.iter().copied().collect(),
                )
            })
            .collect();
        assert_eq!(
            holders,
            [
                (Some(879), "stress-ng", 5_000_000, vec![0, 1]),
                (Some(880), "stress-ng", 1_000_000, vec![1]),
            ]
        );
        let line = s.line();
        assert!(
            line.contains("most by stress-ng (pid 879) on host CPUs 0, 1 for 5"),
            "{line}"
        );
        assert!(
            line.contains("then stress-ng (pid 880) on host CPU 1 for 1"),
            "{line}"
        );
    }

    #[test]
    fn a_cut_answer_is_asked_on_from_its_last_gap_and_a_whole_one_ends_the_pages() {
        let g = |from: u64| gap(0, from, from + 10, GapState::Preempted, vec![]);
        let cut = Reply {
            truncated: Some(true),
            gaps: Some(vec![g(100), g(300), g(200)]),
            ..Reply::ok(1)
        };
        assert_eq!(next_page(50, &cut), Some(300));
        // No progress past `from`: asking again would get the same page.
        assert_eq!(next_page(300, &cut), None);
        let whole = Reply {
            truncated: Some(false),
            ..cut.clone()
        };
        assert_eq!(next_page(50, &whole), None);
    }

    /// A query of every vCPU's gaps of 0.2 ms or more over the first 3 s,
    /// clocks equal.
    fn every_vcpu_for_3_s() -> GapsQuery {
        let clock = ClockOffset {
            offset_ns: 0,
            err_ns: 0,
        };
        clock.query(None, 0, 3_000_000_000, 200_000)
    }

    #[test]
    fn every_gap_of_a_range_with_more_than_one_answer_holds_is_collected_page_by_page() {
        // 600 gaps of each of the two vCPUs: 1,200, over four answers' worth.
        let mut ch = served(many_short_gaps(600));
        let view = Mutex::new(HostView::default());
        let q = every_vcpu_for_3_s();
        let covered = ask_pages(&mut ch, &view, q.clone(), MAX_PAGES_PER_PASS).expect("answered");
        assert_eq!(covered, q.to_ns);
        let view = view.into_inner().expect("view");
        assert_eq!(view.gaps.len(), 1_200);
        // The last stall is the one a single answer (the oldest first) left out.
        let last = view.explain(1, 2_198_100_000, 2_198_900_000);
        assert_eq!(last.kind, "preempted", "{}", last.line);
        assert!(last.line.contains("hog (pid 7)"), "{}", last.line);
    }

    #[test]
    fn a_pass_that_runs_out_of_pages_says_where_the_next_one_starts() {
        let mut ch = served(many_short_gaps(600));
        let view = Mutex::new(HostView::default());
        let q = every_vcpu_for_3_s();
        let covered = ask_pages(&mut ch, &view, q.clone(), 2).expect("answered");
        assert!(covered > 0 && covered < q.to_ns, "covered to {covered}");
        let got = view.into_inner().expect("view").gaps;
        assert!(
            got.iter().all(|g| g.from_ns <= covered),
            "nothing past the cursor"
        );
    }

    fn gap(vcpu: u32, from: u64, to: u64, state: GapState, by: Vec<Occupant>) -> Gap {
        Gap {
            vcpu,
            from_ns: from,
            to_ns: to,
            state,
            host_cpu: 1,
            woken_ns: None,
            by,
            open: false,
        }
    }

    fn hog(ns: u64) -> Occupant {
        Occupant {
            kind: OccupantKind::Task,
            name: "stress-ng".into(),
            pid: Some(4711),
            vcpu: None,
            host_cpu: 1,
            ns,
        }
    }

    fn occupant(name: &str, pid: Option<i32>, host_cpu: usize, ns: u64) -> Occupant {
        Occupant {
            kind: OccupantKind::Task,
            name: name.into(),
            pid,
            vcpu: None,
            host_cpu,
            ns,
        }
    }

    fn view(gaps: Vec<Gap>) -> HostView {
        HostView {
            host: "cpushield".into(),
            gaps,
            seen_from_ns: Some(0),
            seen_to_ns: Some(100_000_000),
            lost: false,
            err_ns: 50_000,
        }
    }

    #[test]
    fn an_occupant_is_named_with_its_pid_or_as_a_vcpu() {
        assert_eq!(who(&hog(1)), "stress-ng (pid 4711)");
        let own = Occupant {
            kind: OccupantKind::Vcpu,
            vcpu: Some(2),
            ..hog(1)
        };
        assert_eq!(who(&own), "the guest's own vCPU 2");
        let other = Occupant {
            kind: OccupantKind::OtherVcpu,
            name: "CPU 0/KVM".into(),
            ..hog(1)
        };
        assert_eq!(
            who(&other),
            "another guest's vCPU thread CPU 0/KVM (pid 4711)"
        );
        assert_eq!(who(&occupant("softirq TIMER", None, 1, 1)), "softirq TIMER");
    }

    #[test]
    fn a_gaps_line_says_what_held_the_vcpu_by_its_state() {
        let g = gap(1, 0, 5_000_000, GapState::Preempted, vec![hog(4_000_000)]);
        assert_eq!(
            gap_line(1, &g, g.by.first()),
            "on the host, stress-ng (pid 4711) ran on host CPU 1 for 4.00 ms while vCPU 1 was runnable"
        );
        assert_eq!(
            gap_line(1, &g, None),
            "vCPU 1 was runnable and not run for 5.00 ms"
        );
        let exit = Gap {
            state: GapState::Exit,
            ..g.clone()
        };
        assert_eq!(
            gap_line(1, &exit, None),
            "a VM exit of vCPU 1 took the host 5.00 ms to handle"
        );
        // Halted, woken at 1 ms, then held off by the host task till 5 ms;
        // an idle host CPU after the wakeup names nobody.
        let mut halted = gap(1, 0, 5_000_000, GapState::Halted, vec![hog(3_900_000)]);
        halted.woken_ns = Some(1_000_000);
        assert_eq!(
            gap_line(1, &halted, halted.by.first()),
            "vCPU 1 halted (guest idle) for 1.00 ms, then woken and kept waiting 4.00 ms on host CPU 1 by stress-ng (pid 4711) for 3.90 ms of it: a wakeup path"
        );
        let idle = Occupant {
            kind: OccupantKind::Idle,
            name: "idle".into(),
            pid: None,
            ..hog(3_900_000)
        };
        assert_eq!(
            gap_line(1, &halted, Some(&idle)),
            "vCPU 1 halted (guest idle) for 5.00 ms: a wakeup path; woken 4.00 ms before it ran"
        );
    }

    #[test]
    fn the_offset_is_the_midpoint_and_its_error_half_the_round_trip() {
        let o = ClockOffset::from_ping(1_000, 11_000_500, 2_000);
        assert_eq!(
            o,
            ClockOffset {
                offset_ns: 10_999_000,
                err_ns: 500
            }
        );
    }

    #[test]
    fn a_spike_is_charged_to_the_host_task_that_held_the_vcpus_cpu() {
        let v = view(vec![
            gap(
                0,
                10_000_000,
                30_000_000,
                GapState::Preempted,
                vec![hog(20_000_000)],
            ),
            gap(
                1,
                10_000_000,
                25_100_000,
                GapState::Preempted,
                vec![hog(15_100_000)],
            ),
        ]);
        let c = v.explain(1, 10_000_000, 25_300_000);
        assert_eq!(c.kind, "preempted");
        assert_eq!(
            (c.culprit_pid, c.host_cpu, c.culprit_ns),
            (Some(4711), Some(1), Some(15_100_000))
        );
        assert_eq!(
            c.line,
            "on the host, stress-ng (pid 4711) ran on host CPU 1 for 15.1 ms while vCPU 1 was runnable (clock offset error ± 50.0 us)"
        );
    }

    #[test]
    fn a_halted_vcpu_is_a_wakeup_path_not_a_preemption() {
        let mut g = gap(1, 10_000_000, 12_000_000, GapState::Halted, vec![]);
        g.woken_ns = Some(11_990_000);
        let c = view(vec![g]).explain(1, 10_500_000, 12_000_000);
        assert_eq!(c.kind, "halted");
        assert!(
            c.line
                .starts_with("vCPU 1 halted (guest idle) for 2.00 ms: a wakeup path"),
            "{}",
            c.line
        );
    }

    #[test]
    fn a_halted_vcpu_woken_and_kept_waiting_is_halted_and_names_what_held_its_cpu() {
        let mut g = gap(
            1,
            10_000_000,
            58_000_000,
            GapState::Halted,
            vec![occupant("sh", Some(9691), 1, 47_700_000)],
        );
        g.woken_ns = Some(10_000_000);
        let c = view(vec![g.clone()]).explain(1, 7_600_000, 58_000_000);
        assert_eq!(c.kind, "halted", "{}", c.line);
        assert_eq!(
            (
                c.culprit.as_deref(),
                c.culprit_pid,
                c.host_cpu,
                c.culprit_ns
            ),
            (Some("sh"), Some(9691), Some(1), Some(47_700_000))
        );
        assert_eq!(
            c.line,
            "vCPU 1 halted (guest idle), then woken and kept waiting 48.0 ms on host CPU 1 by sh (pid 9691) for 47.7 ms of it: a wakeup path (clock offset error ± 50.0 us)"
        );
        // Woken only at the end: still halted, the short wait named.
        g.woken_ns = Some(57_000_000);
        g.by = vec![occupant("sh", Some(9691), 1, 1_000_000)];
        let c = view(vec![g]).explain(1, 7_600_000, 58_000_000);
        assert_eq!(c.kind, "halted");
        assert!(
            c.line.starts_with(
                "vCPU 1 halted (guest idle) for 47.0 ms, then woken and kept waiting 1.00 ms"
            ),
            "{}",
            c.line
        );
    }

    #[test]
    fn a_vcpu_switched_out_runnable_stays_preempted_by_what_held_its_cpu() {
        let g = gap(
            1,
            10_000_000,
            58_000_000,
            GapState::Preempted,
            vec![occupant("sh", Some(9691), 1, 47_700_000)],
        );
        let c = view(vec![g]).explain(1, 7_600_000, 58_000_000);
        assert_eq!(c.kind, "preempted");
        assert_eq!(
            c.line,
            "on the host, sh (pid 9691) ran on host CPU 1 for 47.7 ms while vCPU 1 was runnable (clock offset error ± 50.0 us)"
        );
    }

    #[test]
    fn where_the_host_stopped_answering_the_cause_says_from_when_its_view_is_missing() {
        let mut v = view(vec![]);
        v.lost = true;
        let c = v.explain(1, 200_000_000, 210_000_000);
        assert_eq!(c.kind, "missing");
        assert_eq!(c.missing_from_ns, Some(100_000_000));
        assert!(c.line.contains("missing from 0.100 s"), "{}", c.line);
    }

    #[test]
    fn a_host_that_saw_the_vcpu_run_contradicts_the_guest() {
        let c = view(vec![]).explain(1, 10_000_000, 20_000_000);
        assert_eq!(c.kind, "nothing");
        assert!(c.line.contains("contradiction"));
    }

    #[test]
    fn an_open_gap_is_replaced_by_its_end_even_after_the_offset_moved() {
        let mut v = HostView::default();
        let reply = |gaps: Vec<Gap>| Reply {
            gaps: Some(gaps),
            seen_from_ns: Some(0),
            seen_to_ns: Some(100_000_000),
            ..Reply::error(Some(1), "")
        };
        let mut open = gap(
            1,
            10_000_000,
            20_000_000,
            GapState::Halted,
            vec![occupant("lto", Some(7), 1, 8_000_000)],
        );
        open.open = true;
        merge(&mut v, &reply(vec![open]), 100_000);
        // The same gap, ended, in guest time 1 ms later: the offset moved by
        // more than twice the error.
        let ended = gap(
            1,
            11_000_000,
            60_000_000,
            GapState::Halted,
            vec![hog(40_000_000), occupant("lto", Some(7), 1, 8_000_000)],
        );
        merge(&mut v, &reply(vec![ended.clone()]), 100_000);
        assert_eq!(v.gaps, [ended]);
        let c = v.explain(1, 12_000_000, 59_000_000);
        assert_eq!(c.culprit_pid, Some(4711), "{}", c.line);
    }

    #[test]
    fn merging_answers_replaces_an_open_gap_and_bounds_the_collection() {
        let mut v = HostView::default();
        let mut open = gap(1, 1_000, 5_000, GapState::Preempted, vec![]);
        open.open = true;
        let reply = |gaps: Vec<Gap>| Reply {
            gaps: Some(gaps),
            seen_from_ns: Some(0),
            seen_to_ns: Some(9_000),
            ..Reply::error(Some(1), "")
        };
        merge(&mut v, &reply(vec![open]), 10);
        merge(
            &mut v,
            &reply(vec![gap(1, 1_000, 8_000, GapState::Preempted, vec![])]),
            10,
        );
        assert_eq!(v.gaps.len(), 1);
        assert_eq!((v.gaps[0].to_ns, v.gaps[0].open), (8_000, false));
        let many: Vec<Gap> = (0..MAX_COLLECTED as u64 + 10)
            .map(|i| {
                gap(
                    0,
                    100_000 + i * 1000,
                    100_000 + i * 1000 + 10,
                    GapState::Preempted,
                    vec![],
                )
            })
            .collect();
        merge(&mut v, &reply(many), 10);
        assert_eq!(v.gaps.len(), MAX_COLLECTED);
    }
}
