//! The reader thread: drains the per-CPU trace pipes into a rolling window of
//! events, samples steal time, and attributes each queued spike once the
//! trace has been read past it.

use super::attribute::{
    attribute, phase_word, Attribution, AttributionContext, Spike, StealEvidence,
};
use super::event::{parse_line, Event, EventKind, TimerlatRecord};
use super::watch::{WakeupTracker, WatchedWakeups};
use cpushield_parse::pid_cgroup::in_kubepods;
use cpushield_parse::pid_stat::parse_thread_stat;
use cpushield_parse::pid_status::parse_nspid;
use cpushield_parse::stat::parse_cpu_times;

use cpushield_cpuset::fmt_ns;
use cpushield_kernel::{Kernel, Procfs, TracePipe, TRACE_PIPE_READ_BUDGET};
use crossbeam_queue::ArrayQueue;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Context before the intended time kept for attribution (to know which
/// handlers were already running at the start of a spike); the last event
/// before it is always kept as well.
const LOOKBACK_NS: u64 = 10_000_000;
/// Raw lines saved around a spike.
const SAVE_BEFORE_NS: u64 = 1_000_000;
const SAVE_AFTER_NS: u64 = 500_000;
/// A spike is attributed once the pipes were drained this long after it.
const SETTLE_NS: u64 = 2_000_000;
/// The most `finish` waits for the reader to catch up with a busy CPU.
const FINISH_LIMIT_NS: u64 = 2_000_000_000;

/// State shared by the session, the reader and the signal path.
pub struct Shared {
    /// Spikes marked and not yet taken by the reader.
    pub queue: ArrayQueue<Spike>,
    /// Spikes that did not fit in the queue.
    pub dropped: AtomicU64,
    /// Spikes marked.
    pub marked: AtomicU64,
    /// Stop now (signal path).
    pub stop: AtomicBool,
    /// Drain, attribute what is pending, then stop (finish).
    pub finishing: AtomicBool,
    /// What the reader produced.
    pub results: Mutex<Results>,
    /// Set when the reader has returned and closed the pipes.
    pub done: (Mutex<bool>, Condvar),
    /// Keep the timerlat records read (the session runs the tracer).
    pub collect_timerlat: AtomicBool,
    /// The timerlat records read and not yet taken (see `TimerlatFeed`).
    pub timerlat: Mutex<Vec<TimerlatRecord>>,
}

impl Shared {
    /// Empty shared state with room for `capacity` queued spikes.
    pub fn new(capacity: usize) -> Self {
        Self {
            queue: ArrayQueue::new(capacity.max(1)),
            dropped: AtomicU64::new(0),
            marked: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            finishing: AtomicBool::new(false),
            results: Mutex::new(Results::default()),
            done: (Mutex::new(false), Condvar::new()),
            collect_timerlat: AtomicBool::new(false),
            timerlat: Mutex::new(Vec::new()),
        }
    }

    /// Waits until the reader has stopped, at most `timeout`.
    pub fn wait_done(&self, timeout: Duration) -> bool {
        let (lock, cv) = &self.done;
        let guard = lock.lock().expect("done lock");
        let (guard, _) = cv
            .wait_timeout_while(guard, timeout, |d| !*d)
            .expect("done lock");
        *guard
    }
}

/// What the reader produced.
#[derive(Debug, Default)]
pub struct Results {
    /// Attributions made.
    pub attributions: Vec<Attribution>,
    /// Lines parsed into events.
    pub events: u64,
    /// Lines that did not parse.
    pub unparsed: u64,
    /// Events reported lost in the stream.
    pub lost: u64,
    /// Problems met.
    pub errors: Vec<String>,
    /// What the watch saw of its threads' wakeups (set when the reader ends).
    pub watched: Option<WatchedWakeups>,
}

/// Everything the reader thread owns.
pub struct Reader {
    /// (CPU, its pipe).
    pub pipes: Vec<(usize, Box<dyn TracePipe>)>,
    /// For /proc/stat and /proc/PID/stat.
    pub kernel: Arc<dyn Kernel>,
    /// Shared with the session.
    pub shared: Arc<Shared>,
    /// Poll period.
    pub poll: Duration,
    /// How long events are kept.
    pub retention_ns: u64,
    /// Tick period per CPU (None: nohz_full or unknown).
    pub tick_ns: BTreeMap<usize, Option<u64>>,
    /// Preemption model, for the notes.
    pub preempt_model: Option<String>,
    /// Where to save the raw windows.
    pub trace_dir: Option<PathBuf>,
    /// At most this many windows are kept (the largest spikes).
    pub max_saved: usize,
    /// USER_HZ, for steal ticks.
    pub user_hz: u64,
    /// Where thread IDs of trace events are looked up (the machine's /proc).
    pub proc_root: PathBuf,
    /// Tell tasks of other PID namespaces apart (see `TraceOptions`).
    pub namespace_scope: bool,
    /// `proc_root` is a nested PID namespace's /proc (cpushield itself runs
    /// in one): the events' global IDs cannot be looked up there, so a task
    /// other than the measured one is charged as out of this namespace's
    /// view ([`CauseKind::OtherNamespace`](super::attribute::CauseKind)),
    /// never as one in scope.
    pub nested_proc: bool,
    /// The traced CPUs are virtual (the hypervisor flag in /proc/cpuinfo).
    pub virtual_cpu: bool,
    /// A clock (CLOCK_MONOTONIC ns).
    pub now: fn() -> u64,
    /// When tracing started (CLOCK_MONOTONIC ns).
    pub started_ns: u64,
    /// Events recorded before this trace time (ns) are dropped unread: in a
    /// [`TraceInstance`](super::TraceInstance) lent to one session after
    /// another, what the last session's reader did not take before tracing
    /// stopped is still in the buffer, and its markers (spike numbers, thread
    /// announcements) would be taken for this session's.
    pub not_before_ns: u64,
    /// Follows the watched threads' wakeups (see `TraceOptions::watch`).
    pub tracker: Option<WakeupTracker>,
}

/// What is known of the tasks named by events, by global ID.
#[derive(Default)]
struct TaskCache {
    /// Whether it is a kernel thread.
    kthreads: HashMap<i32, bool>,
    /// Whether it belongs to another PID namespace than the measuring one.
    other_namespace: HashMap<i32, bool>,
    /// Whether it is a task of a Kubernetes pod.
    pods: HashMap<i32, bool>,
    /// Every thread seen in the measuring namespace (namespace scope only),
    /// so that one gone before its event was read is still known as ours.
    ours: HashSet<i32>,
    /// When the measuring namespace's threads were last listed.
    ours_listed_ns: Option<u64>,
}

/// How often the measuring namespace's threads are listed: a thread of it
/// that lives shorter than this and is gone before its event is read counts
/// as another namespace's.
const NAMESPACE_LIST_PERIOD_NS: u64 = 250_000_000;

struct Saved {
    latency: u64,
    path: PathBuf,
}

/// Steal-time samples of /proc/stat: (when, steal ticks per CPU).
type StealSamples = VecDeque<(u64, BTreeMap<usize, u64>)>;

/// What the reader keeps from one poll to the next.
#[derive(Default)]
struct ReadState {
    /// Per CPU, the events kept (in time order).
    windows: BTreeMap<usize, VecDeque<Event>>,
    /// Per CPU, the bytes read after the last complete line.
    carry: BTreeMap<usize, Vec<u8>>,
    /// Spikes waiting for the trace to be read past them.
    pending: Vec<Spike>,
    /// Steal-time samples.
    steal: StealSamples,
    /// What is known of the tasks named by events.
    tasks: TaskCache,
    /// The trace windows saved on disk.
    saved: Vec<Saved>,
    /// The buffer pipes are read into.
    buf: Vec<u8>,
    /// Per CPU, the time of the latest event read: the trace is complete up
    /// to there (each CPU's pipe is in time order).
    read_pos: BTreeMap<usize, u64>,
    /// When finishing was first seen.
    finish_started: Option<u64>,
    /// (CPU, thread ID as the measuring thread knows it) -> global thread ID.
    threads: HashMap<(usize, i32), i32>,
}

/// What one batch of lines held.
#[derive(Default)]
struct LineCounts {
    parsed: u64,
    unparsed: u64,
    lost: u64,
}

impl ReadState {
    /// Drops what neither a pending spike (its lookback) nor the retention
    /// period ending at `now` needs, keeping the last older event per CPU
    /// (on an idle CPU it is the only record of which task was current).
    fn trim(&mut self, now: u64, retention_ns: u64) {
        let oldest_needed = self
            .pending
            .iter()
            .map(|s| s.intended_ns.saturating_sub(LOOKBACK_NS))
            .min()
            .unwrap_or(u64::MAX)
            .min(now.saturating_sub(retention_ns));
        for w in self.windows.values_mut() {
            while w.len() > 1 && w[1].ts_ns < oldest_needed {
                w.pop_front();
            }
        }
        while self.steal.len() > 2 && self.steal[1].0 < oldest_needed {
            self.steal.pop_front();
        }
    }

    /// Takes the complete lines read so far on `cpu` out of its carry.
    fn complete_lines(&mut self, cpu: usize) -> Option<String> {
        let c = self.carry.entry(cpu).or_default();
        let last_nl = c.iter().rposition(|&b| b == b'\n')?;
        let complete: Vec<u8> = c.drain(..=last_nl).collect();
        Some(String::from_utf8_lossy(&complete).into_owned())
    }
}

impl Reader {
    /// Runs until stopped; returns when the pipes are closed.
    pub fn run(mut self) {
        let mut st = ReadState {
            buf: Vec::with_capacity(1 << 20),
            ..ReadState::default()
        };
        while !self.shared.stop.load(Ordering::SeqCst) {
            let finishing = self.shared.finishing.load(Ordering::SeqCst);
            let t0 = (self.now)();
            self.list_namespace(&mut st.tasks, t0);
            let drained = self.read_pipes(&mut st);
            self.sample_steal(&mut st.steal, t0);
            while let Some(s) = self.shared.queue.pop() {
                st.pending.push(s);
            }
            if finishing && st.finish_started.is_none() {
                st.finish_started = Some(t0);
            }
            let flush_all = self.flush_all(&st, t0, drained);
            self.attribute_settled(&mut st, t0, drained, flush_all);
            st.trim(t0, self.retention_ns);
            if flush_all {
                break;
            }
            if drained {
                std::thread::sleep(self.poll);
            }
        }
        self.close();
    }

    /// Lists the measuring namespace's threads, every
    /// [`NAMESPACE_LIST_PERIOD_NS`] (namespace scope, from the machine's /proc).
    fn list_namespace(&self, tasks: &mut TaskCache, now: u64) {
        if !self.namespace_scope
            || self.nested_proc
            || tasks
                .ours_listed_ns
                .is_some_and(|t| now.saturating_sub(t) < NAMESPACE_LIST_PERIOD_NS)
        {
            return;
        }
        tasks.ours_listed_ns = Some(now);
        tasks
            .ours
            .extend(namespace_threads(self.kernel.as_ref(), &self.proc_root));
    }

    /// Reads what each pipe has and takes in its complete lines. Returns
    /// whether every pipe was drained.
    fn read_pipes(&mut self, st: &mut ReadState) -> bool {
        let mut drained = true;
        for i in 0..self.pipes.len() {
            let (cpu, pipe) = &mut self.pipes[i];
            let cpu = *cpu;
            st.buf.clear();
            match pipe.read_available(&mut st.buf) {
                // Probably more waiting.
                Ok(n) if n >= TRACE_PIPE_READ_BUDGET / 2 => drained = false,
                Ok(_) => {}
                Err(e) => {
                    self.error(format!("trace pipe of CPU {cpu}: {e}"));
                    drained = false;
                }
            }
            let ReadState { carry, buf, .. } = st;
            carry.entry(cpu).or_default().extend_from_slice(buf);
            if let Some(text) = st.complete_lines(cpu) {
                self.take_lines(cpu, &text, st);
            }
        }
        drained
    }

    /// Takes in one CPU's complete lines: events into its window, lost
    /// events and unparsed lines counted, timerlat records handed over.
    fn take_lines(&mut self, cpu: usize, text: &str, st: &mut ReadState) {
        let collect = self.shared.collect_timerlat.load(Ordering::Relaxed);
        let mut records = Vec::new();
        let mut counts = LineCounts::default();
        for line in text.lines() {
            if let Some(n) = lost_count(line) {
                counts.lost += n;
                continue;
            }
            let Some(e) = parse_line(line) else {
                if !line.trim().is_empty() {
                    counts.unparsed += 1;
                }
                continue;
            };
            if e.ts_ns < self.not_before_ns {
                continue;
            }
            counts.parsed += 1;
            if collect {
                records.extend(timerlat_record(&e));
            }
            self.see(&e, st);
            let p = st.read_pos.entry(cpu).or_insert(0);
            *p = (*p).max(e.ts_ns);
            st.windows.entry(cpu).or_default().push_back(e);
        }
        if !records.is_empty() {
            self.shared
                .timerlat
                .lock()
                .expect("timerlat records")
                .append(&mut records);
        }
        let mut r = self.shared.results.lock().expect("results");
        r.events += counts.parsed;
        r.unparsed += counts.unparsed;
        r.lost += counts.lost;
    }

    /// What an event tells beyond itself: a thread announcement, a watched
    /// thread's late wakeup, the namespace of the task it names.
    fn see(&mut self, e: &Event, st: &mut ReadState) {
        if let Some(key) = thread_announcement(e) {
            st.threads.insert(key, e.pid);
        }
        if let Some(spike) = self.tracker.as_mut().and_then(|t| t.see(e)) {
            st.pending.push(spike);
        }
        // Tell a task's namespace while it still lives: by attribution time
        // a short-lived one is gone.
        if self.namespace_scope
            && !self.nested_proc
            && e.pid > 0
            && !st.tasks.other_namespace.contains_key(&e.pid)
        {
            if let Some(other) = other_namespace(self.kernel.as_ref(), &self.proc_root, e.pid) {
                st.tasks.other_namespace.insert(e.pid, other);
            }
        }
    }

    /// Samples steal time from /proc/stat.
    fn sample_steal(&self, steal: &mut StealSamples, now: u64) {
        if let Ok(text) = Procfs::new(self.kernel.as_ref()).stat() {
            if let Ok(times) = parse_cpu_times(&text) {
                steal.push_back((now, times.iter().map(|(cpu, t)| (*cpu, t.steal)).collect()));
            }
        }
    }

    /// Finishing: whether to attribute everything pending and stop, once
    /// the trace is read up to when finishing began (or was drained), or
    /// after [`FINISH_LIMIT_NS`] on a CPU too busy to catch up.
    fn flush_all(&self, st: &ReadState, now: u64, drained: bool) -> bool {
        st.finish_started.is_some_and(|at| {
            let caught_up = self
                .pipes
                .iter()
                .all(|(cpu, _)| st.read_pos.get(cpu).is_some_and(|&p| p >= at));
            drained || caught_up || now >= at + FINISH_LIMIT_NS
        })
    }

    /// Attributes each pending spike the trace has been read past (all of
    /// them when `flush_all`).
    fn attribute_settled(&self, st: &mut ReadState, now: u64, drained: bool, flush_all: bool) {
        let mut i = 0;
        while i < st.pending.len() {
            let s = st.pending[i];
            let read_past = st
                .read_pos
                .get(&s.cpu)
                .is_some_and(|&p| p >= s.actual_ns + SETTLE_NS);
            if !(flush_all || read_past || (drained && s.actual_ns + SETTLE_NS <= now)) {
                i += 1;
                continue;
            }
            st.pending.swap_remove(i);
            let global_tid = st.threads.get(&(s.cpu, s.tid)).copied();
            let attr = self.attribute_one(&s, global_tid, st);
            self.shared
                .results
                .lock()
                .expect("results")
                .attributions
                .push(attr);
        }
    }

    /// Closes the pipes, hands over what the watch saw and says it is done.
    fn close(mut self) {
        drop(std::mem::take(&mut self.pipes));
        if let Some(t) = &self.tracker {
            self.shared.results.lock().expect("results").watched = Some(t.seen().clone());
        }
        let (lock, cv) = &self.shared.done;
        *lock.lock().expect("done lock") = true;
        cv.notify_all();
    }

    /// Records a problem met.
    fn error(&self, what: String) {
        self.shared
            .results
            .lock()
            .expect("results")
            .errors
            .push(what);
    }

    fn attribute_one(&self, s: &Spike, global_tid: Option<i32>, st: &mut ReadState) -> Attribution {
        let from = s.intended_ns.saturating_sub(LOOKBACK_NS);
        let to = s.actual_ns + SAVE_AFTER_NS;
        let events: Vec<Event> = st
            .windows
            .get(&s.cpu)
            .map(|w| window_events(w, from, to))
            .unwrap_or_default();
        let lookup = TaskLookup {
            reader: self,
            tasks: std::cell::RefCell::new(&mut st.tasks),
        };
        let ctx = AttributionContext {
            tick_ns: self.tick_ns.get(&s.cpu).copied().flatten(),
            is_kthread: &|pid| lookup.is_kthread(pid),
            in_other_namespace: &|pid| lookup.in_other_namespace(pid),
            in_kubepods: &|pid| lookup.in_kubepods(pid),
            virtual_cpu: self.virtual_cpu,
            steal: steal_evidence(&st.steal, s, self.user_hz),
            preempt_model: self.preempt_model.clone(),
            trace_start_ns: Some(self.started_ns),
        };
        // The events name threads by their global ID; the spike may carry the
        // ID from inside a PID namespace.
        let traced = Spike {
            tid: global_tid.unwrap_or(s.tid),
            ..*s
        };
        let mut attr = attribute(&events, &traced, &ctx);
        attr.spike = *s;
        if let Some(dir) = &self.trace_dir {
            match self.save_window(dir, &attr, &events, &mut st.saved) {
                Ok(Some(p)) => attr.trace_file = Some(p.display().to_string()),
                Ok(None) => {}
                Err(e) => self.error(format!(
                    "{}: could not save a trace window: {e}",
                    dir.display()
                )),
            }
        }
        attr
    }

    /// Saves the raw lines around a spike, keeping only the `max_saved`
    /// largest spikes on disk.
    fn save_window(
        &self,
        dir: &Path,
        a: &Attribution,
        events: &[Event],
        saved: &mut Vec<Saved>,
    ) -> std::io::Result<Option<PathBuf>> {
        if self.max_saved == 0 {
            return Ok(None);
        }
        if saved.len() >= self.max_saved {
            let (idx, smallest) = saved
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.latency)
                .map(|(i, s)| (i, s.latency))
                .expect("non-empty");
            if smallest >= a.latency_ns {
                return Ok(None);
            }
            let old = saved.swap_remove(idx);
            let _ = std::fs::remove_file(old.path);
        }
        let s = &a.spike;
        let path = dir.join(format!(
            "spike-{:06}-cpu{}-{}us.txt",
            s.seq,
            s.cpu,
            a.latency_ns / 1000
        ));
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# cpushield trace window: spike {} on CPU {} (tid {}), intended {}.{:09}, actual {}.{:09} (CLOCK_MONOTONIC = trace clock mono), {} late",
            s.seq,
            s.cpu,
            s.tid,
            s.intended_ns / 1_000_000_000,
            s.intended_ns % 1_000_000_000,
            s.actual_ns / 1_000_000_000,
            s.actual_ns % 1_000_000_000,
            fmt_ns(a.latency_ns)
        );
        for c in &a.causes {
            let _ = writeln!(
                text,
                "#   {:>10}  {}  [{}]",
                fmt_ns(c.ns),
                c.name,
                phase_word(c.phase)
            );
        }
        for n in &a.notes {
            let _ = writeln!(text, "# note: {n}");
        }
        let lo = s.intended_ns.saturating_sub(SAVE_BEFORE_NS);
        for e in events.iter().filter(|e| e.ts_ns >= lo) {
            text.push_str(&e.raw);
            text.push('\n');
        }
        std::fs::write(&path, text)?;
        saved.push(Saved {
            latency: a.latency_ns,
            path: path.clone(),
        });
        Ok(Some(path))
    }
}

/// What attribution asks of the tasks events name, answered from the
/// machine's /proc once per task and kept in the reader's cache.
struct TaskLookup<'a> {
    reader: &'a Reader,
    tasks: std::cell::RefCell<&'a mut TaskCache>,
}

impl TaskLookup<'_> {
    /// Whether `pid` is a kernel thread (the idle task included). From a
    /// nested namespace's /proc, never known to be one.
    fn is_kthread(&self, pid: i32) -> bool {
        if pid <= 0 {
            return true;
        }
        if self.reader.nested_proc {
            return false;
        }
        let r = self.reader;
        *self
            .tasks
            .borrow_mut()
            .kthreads
            .entry(pid)
            .or_insert_with(|| {
                Procfs::at(r.kernel.as_ref(), &r.proc_root)
                    .process_file(pid, "stat")
                    .ok()
                    .flatten()
                    .and_then(|t| parse_thread_stat(&t).ok())
                    .map(|stat| stat.is_kthread())
                    .unwrap_or(false)
            })
    }

    /// Whether `pid` is outside the measuring namespace (namespace scope), or
    /// outside the view of a nested namespace's /proc (any scope).
    fn in_other_namespace(&self, pid: i32) -> bool {
        if pid <= 0 {
            return false;
        }
        if self.reader.nested_proc {
            return true;
        }
        if !self.reader.namespace_scope {
            return false;
        }
        let r = self.reader;
        let mut tasks = self.tasks.borrow_mut();
        if let Some(known) = tasks.other_namespace.get(&pid) {
            return *known;
        }
        // Gone before it could be read: ours only if it was listed as ours.
        let other = other_namespace(r.kernel.as_ref(), &r.proc_root, pid)
            .unwrap_or_else(|| !tasks.ours.contains(&pid));
        tasks.other_namespace.insert(pid, other);
        other
    }

    /// Whether `pid` is a task of a Kubernetes pod; one gone before it could
    /// be read is not known as a pod's.
    fn in_kubepods(&self, pid: i32) -> bool {
        if pid <= 0 || self.reader.nested_proc {
            return false;
        }
        let r = self.reader;
        *self.tasks.borrow_mut().pods.entry(pid).or_insert_with(|| {
            Procfs::at(r.kernel.as_ref(), &r.proc_root)
                .process_file(pid, "cgroup")
                .is_ok_and(|t| t.is_some_and(|t| in_kubepods(&t)))
        })
    }
}

/// The steal time on the spike's CPU between the last sample before it was
/// due and the first after it ran; `None` without both.
fn steal_evidence(steal: &StealSamples, s: &Spike, user_hz: u64) -> Option<StealEvidence> {
    let (t0, a) = steal.iter().rev().find(|(t, _)| *t <= s.intended_ns)?;
    let (t1, b) = steal.iter().find(|(t, _)| *t >= s.actual_ns)?;
    let ticks = b
        .get(&s.cpu)
        .copied()
        .unwrap_or(0)
        .saturating_sub(a.get(&s.cpu).copied().unwrap_or(0));
    Some(StealEvidence {
        steal_ns: ticks * 1_000_000_000 / user_hz.max(1),
        from_ns: *t0,
        to_ns: *t1,
    })
}

/// The timerlat record a timerlat sample event carries.
fn timerlat_record(e: &Event) -> Option<TimerlatRecord> {
    let EventKind::TimerlatSample {
        seq,
        context,
        latency_ns,
    } = &e.kind
    else {
        return None;
    };
    Some(TimerlatRecord {
        cpu: e.cpu,
        seq: *seq,
        context: *context,
        latency_ns: *latency_ns,
        ts_ns: e.ts_ns,
        pid: e.pid,
    })
}

/// Whether a task (global ID) belongs to another PID namespace than the
/// measuring one: a task of the measuring namespace has two IDs in NSpid (the
/// machine's and its own). `None` when it cannot be read (it is gone).
fn other_namespace(kernel: &dyn Kernel, proc_root: &Path, pid: i32) -> Option<bool> {
    Procfs::at(kernel, proc_root)
        .process_file(pid, "status")
        .ok()
        .flatten()
        .and_then(|t| parse_nspid(&t))
        .map(|ids| ids.len() < 2)
}

/// The threads (global IDs) of the measuring PID namespace: those of every
/// process whose NSpid has an entry below the machine's namespace. Reads the
/// machine's /proc at `proc_root`; a process gone meanwhile is skipped.
fn namespace_threads(kernel: &dyn Kernel, proc_root: &Path) -> Vec<i32> {
    let proc = Procfs::at(kernel, proc_root);
    let mut out = Vec::new();
    for pid in proc.pids().unwrap_or_default() {
        if other_namespace(kernel, proc_root, pid) != Some(false) {
            continue;
        }
        match proc.threads(pid) {
            Ok(Some(tids)) => out.extend(tids),
            _ => out.push(pid),
        }
    }
    out
}

/// The events from the last one before `from` (the context in force) to the
/// last one at or before `to`, found by bisection (the window is in time order).
fn window_events(w: &VecDeque<Event>, from: u64, to: u64) -> Vec<Event> {
    let first = w.partition_point(|e| e.ts_ns < from).saturating_sub(1);
    let end = w.partition_point(|e| e.ts_ns <= to);
    w.range(first..end.max(first)).cloned().collect()
}

/// A thread announcement (`cpushield thread cpu=1 tid=5`, see
/// `SpikeMarker::announce`): the CPU and the thread ID it names.
fn thread_announcement(e: &Event) -> Option<(usize, i32)> {
    let super::event::EventKind::Marker { text } = &e.kind else {
        return None;
    };
    let rest = text.trim().strip_prefix(super::THREAD_MARK)?;
    let mut cpu = None;
    let mut tid = None;
    for word in rest.split_whitespace() {
        if let Some(v) = word.strip_prefix("cpu=") {
            cpu = v.parse().ok();
        } else if let Some(v) = word.strip_prefix("tid=") {
            tid = v.parse().ok();
        }
    }
    Some((cpu?, tid?))
}

/// `CPU:1 [LOST 12 EVENTS]` → 12.
fn lost_count(line: &str) -> Option<u64> {
    let rest = line.split_once("[LOST ")?.1;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_announcement_names_the_cpu_and_the_namespace_tid() {
        let line = "  cpushield-cpu1-8812    [001] .....  2402.000001: tracing_mark_write: cpushield thread cpu=1 tid=5";
        let e = parse_line(line).expect("parses");
        assert_eq!(e.pid, 8812);
        assert_eq!(thread_announcement(&e), Some((1, 5)));
        let spike = parse_line(
            "  x-1 [001] ..... 1.0: tracing_mark_write: cpushield spike seq=1 cpu=1 tid=5",
        )
        .expect("parses");
        assert_eq!(thread_announcement(&spike), None);
    }

    #[test]
    fn window_events_keep_the_context_before_and_stop_after_the_end() {
        let ev = |ts_us: u64| {
            parse_line(&format!(
                "  x-1 [001] ..... {}.{:06}: local_timer_entry: vector=236",
                ts_us / 1_000_000,
                ts_us % 1_000_000
            ))
            .expect("parses")
        };
        let w: VecDeque<Event> = [10, 20, 30, 40, 50].iter().map(|t| ev(*t)).collect();
        let got: Vec<u64> = window_events(&w, 25_000, 40_000)
            .iter()
            .map(|e| e.ts_ns / 1000)
            .collect();
        assert_eq!(got, vec![20, 30, 40]);
        assert!(window_events(&w, 60_000, 70_000).len() == 1);
        assert_eq!(window_events(&w, 0, 5_000).len(), 0);
    }

    #[test]
    fn lost_event_lines_are_counted() {
        assert_eq!(lost_count("CPU:1 [LOST 12 EVENTS]"), Some(12));
        assert_eq!(lost_count("bash-1 [001] ..."), None);
    }
}

#[cfg(test)]
mod namespace_tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    #[test]
    fn the_measuring_namespace_threads_are_those_with_a_nested_nspid() {
        let k = FakeKernel::new();
        k.set_file("/hostproc/1/status", "Name:\tinit\nNSpid:\t1\n");
        k.set_file("/hostproc/300/status", "Name:\tload\nNSpid:\t300\t4\n");
        k.set_file("/hostproc/300/task/300/stat", "");
        k.set_file("/hostproc/300/task/301/stat", "");
        k.set_file("/hostproc/77/status", "Name:\tkdamond.0\nNSpid:\t77\n");
        k.add_dir("/hostproc/self");
        let mut ours = namespace_threads(&k, Path::new("/hostproc"));
        ours.sort();
        assert_eq!(ours, vec![300, 301]);
    }
}

#[cfg(test)]
mod part_tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    fn spike(cpu: usize, intended_ns: u64, actual_ns: u64) -> Spike {
        Spike {
            seq: 1,
            cpu,
            tid: 5,
            intended_ns,
            actual_ns,
        }
    }

    fn event_at(ts_us: u64) -> Event {
        parse_line(&format!(
            "  x-1 [001] ..... {}.{:06}: local_timer_entry: vector=236",
            ts_us / 1_000_000,
            ts_us % 1_000_000
        ))
        .expect("parses")
    }

    /// A reader of nothing over `kernel`'s /proc at /hostproc.
    fn reader(kernel: Arc<FakeKernel>, namespace_scope: bool, nested_proc: bool) -> Reader {
        Reader {
            pipes: Vec::new(),
            kernel,
            shared: Arc::new(Shared::new(4)),
            poll: Duration::from_millis(1),
            retention_ns: 0,
            tick_ns: BTreeMap::new(),
            preempt_model: None,
            trace_dir: None,
            max_saved: 0,
            user_hz: 100,
            proc_root: PathBuf::from("/hostproc"),
            namespace_scope,
            nested_proc,
            virtual_cpu: false,
            now: || 0,
            started_ns: 0,
            not_before_ns: 0,
            tracker: None,
        }
    }

    #[test]
    fn trimming_keeps_a_pending_spikes_lookback_and_one_older_event() {
        let mut st = ReadState::default();
        let w: VecDeque<Event> = [1_000, 2_000, 30_000, 40_000]
            .iter()
            .map(|t| event_at(*t))
            .collect();
        st.windows.insert(1, w);
        st.steal = (0..4).map(|i| (i * 10_000_000, BTreeMap::new())).collect();
        // The spike was due at 25 ms: its lookback reaches back to 15 ms.
        st.pending.push(spike(1, 25_000_000, 26_000_000));
        st.trim(100_000_000, 0);
        let kept: Vec<u64> = st.windows[&1].iter().map(|e| e.ts_ns / 1000).collect();
        assert_eq!(kept, vec![2_000, 30_000, 40_000]);
        assert_eq!(st.steal.front().map(|s| s.0), Some(10_000_000));
    }

    #[test]
    fn only_complete_lines_are_taken_and_the_rest_waits_for_its_newline() {
        let mut st = ReadState::default();
        st.carry.insert(1, b"one\ntwo\nthr".to_vec());
        assert_eq!(st.complete_lines(1).as_deref(), Some("one\ntwo\n"));
        assert_eq!(st.complete_lines(1), None);
        st.carry.get_mut(&1).unwrap().extend_from_slice(b"ee\n");
        assert_eq!(st.complete_lines(1).as_deref(), Some("three\n"));
    }

    #[test]
    fn steal_evidence_is_the_spike_cpus_steal_between_the_samples_around_it() {
        let at = |t: u64, ticks: u64| (t, BTreeMap::from([(1, ticks)]));
        let steal: StealSamples = [at(10, 5), at(20, 7), at(50, 9)].into_iter().collect();
        let e = steal_evidence(&steal, &spike(1, 25, 40), 100).expect("both samples");
        assert_eq!((e.steal_ns, e.from_ns, e.to_ns), (20_000_000, 20, 50));
        assert!(steal_evidence(&steal, &spike(1, 25, 60), 100).is_none());
    }

    #[test]
    fn a_timerlat_sample_gives_a_record_and_another_event_none() {
        let line = "     timerlat/1-791     [001] .....   1.000010: #7 context thread timer_latency     5000 ns";
        let r = timerlat_record(&parse_line(line).expect("parses")).expect("a record");
        assert_eq!((r.cpu, r.seq, r.ts_ns, r.pid), (1, 7, 1_000_010_000, 791));
        assert_eq!(r.latency_ns, 5000);
        assert!(timerlat_record(&event_at(5)).is_none());
    }

    #[test]
    fn a_task_lookup_reads_the_machines_proc_and_from_a_nested_one_places_no_task_in_scope() {
        let k = Arc::new(FakeKernel::new());
        k.set_file(
            "/hostproc/15/stat",
            "15 (rcu_preempt) I 2 0 0 0 -1 2129984 0 0 0 0 0 12 0 0 20 0 1 0 12 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        );
        k.set_file("/hostproc/15/status", "Name:\trcu_preempt\nNSpid:\t15\n");
        k.set_file("/hostproc/70/status", "Name:\tload\nNSpid:\t70\t3\n");
        let initial = reader(k.clone(), true, false);
        let mut tasks = TaskCache::default();
        let lookup = TaskLookup {
            reader: &initial,
            tasks: std::cell::RefCell::new(&mut tasks),
        };
        assert!(lookup.is_kthread(15));
        assert!(lookup.in_other_namespace(15));
        assert!(!lookup.is_kthread(70));
        assert!(!lookup.in_other_namespace(70));
        assert!(!lookup.in_kubepods(70));
        let nested = reader(k, true, true);
        let mut tasks = TaskCache::default();
        let lookup = TaskLookup {
            reader: &nested,
            tasks: std::cell::RefCell::new(&mut tasks),
        };
        assert!(!lookup.is_kthread(15));
        assert!(lookup.in_other_namespace(15));
        assert!(lookup.in_other_namespace(70));
        assert!(lookup.is_kthread(0) && !lookup.in_other_namespace(0));
    }
}
