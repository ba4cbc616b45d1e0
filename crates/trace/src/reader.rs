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
    /// The traced CPUs are virtual (the hypervisor flag in /proc/cpuinfo).
    pub virtual_cpu: bool,
    /// A clock (CLOCK_MONOTONIC ns).
    pub now: fn() -> u64,
    /// When tracing started (CLOCK_MONOTONIC ns).
    pub started_ns: u64,
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

impl Reader {
    /// Runs until stopped; returns when the pipes are closed.
    pub fn run(mut self) {
        let mut windows: BTreeMap<usize, VecDeque<Event>> = BTreeMap::new();
        let mut carry: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
        let mut pending: Vec<Spike> = Vec::new();
        let mut steal: VecDeque<(u64, BTreeMap<usize, u64>)> = VecDeque::new();
        let mut tasks = TaskCache::default();
        let mut saved: Vec<Saved> = Vec::new();
        let mut buf = Vec::with_capacity(1 << 20);
        // Per CPU, the time of the latest event read: the trace is complete
        // up to there (each CPU's pipe is in time order).
        let mut read_pos: BTreeMap<usize, u64> = BTreeMap::new();
        let mut finish_started: Option<u64> = None;
        // (CPU, thread ID as the measuring thread knows it) -> global thread ID.
        let mut threads: HashMap<(usize, i32), i32> = HashMap::new();
        loop {
            let stop = self.shared.stop.load(Ordering::SeqCst);
            if stop {
                break;
            }
            let finishing = self.shared.finishing.load(Ordering::SeqCst);
            let t0 = (self.now)();
            if self.namespace_scope
                && tasks
                    .ours_listed_ns
                    .is_none_or(|t| t0.saturating_sub(t) >= NAMESPACE_LIST_PERIOD_NS)
            {
                tasks.ours_listed_ns = Some(t0);
                tasks
                    .ours
                    .extend(namespace_threads(self.kernel.as_ref(), &self.proc_root));
            }
            let mut drained = true;
            for (cpu, pipe) in self.pipes.iter_mut() {
                buf.clear();
                match pipe.read_available(&mut buf) {
                    Ok(n) => {
                        if n >= TRACE_PIPE_READ_BUDGET / 2 {
                            drained = false; // probably more waiting
                        }
                    }
                    Err(e) => {
                        self.shared
                            .results
                            .lock()
                            .expect("results")
                            .errors
                            .push(format!("trace pipe of CPU {cpu}: {e}"));
                        drained = false;
                    }
                }
                let c = carry.entry(*cpu).or_default();
                c.extend_from_slice(&buf);
                let Some(last_nl) = c.iter().rposition(|&b| b == b'\n') else {
                    continue;
                };
                let complete: Vec<u8> = c.drain(..=last_nl).collect();
                let text = String::from_utf8_lossy(&complete);
                let w = windows.entry(*cpu).or_default();
                let (mut ok, mut bad, mut lost) = (0u64, 0u64, 0u64);
                let collect = self.shared.collect_timerlat.load(Ordering::Relaxed);
                let mut records = Vec::new();
                for line in text.lines() {
                    if let Some(n) = lost_count(line) {
                        lost += n;
                        continue;
                    }
                    match parse_line(line) {
                        Some(e) => {
                            ok += 1;
                            if let Some(key) = thread_announcement(&e) {
                                threads.insert(key, e.pid);
                            }
                            if let Some(spike) = self.tracker.as_mut().and_then(|t| t.see(&e)) {
                                pending.push(spike);
                            }
                            // Tell a task's namespace while it still lives:
                            // by attribution time a short-lived one is gone.
                            if self.namespace_scope
                                && e.pid > 0
                                && !tasks.other_namespace.contains_key(&e.pid)
                            {
                                if let Some(other) =
                                    other_namespace(self.kernel.as_ref(), &self.proc_root, e.pid)
                                {
                                    tasks.other_namespace.insert(e.pid, other);
                                }
                            }
                            if let (
                                true,
                                EventKind::TimerlatSample {
                                    seq,
                                    context,
                                    latency_ns,
                                },
                            ) = (collect, &e.kind)
                            {
                                records.push(TimerlatRecord {
                                    cpu: e.cpu,
                                    seq: *seq,
                                    context: *context,
                                    latency_ns: *latency_ns,
                                    ts_ns: e.ts_ns,
                                    pid: e.pid,
                                });
                            }
                            let p = read_pos.entry(*cpu).or_insert(0);
                            *p = (*p).max(e.ts_ns);
                            w.push_back(e);
                        }
                        None if line.trim().is_empty() => {}
                        None => bad += 1,
                    }
                }
                if !records.is_empty() {
                    self.shared
                        .timerlat
                        .lock()
                        .expect("timerlat records")
                        .append(&mut records);
                }
                let mut r = self.shared.results.lock().expect("results");
                r.events += ok;
                r.unparsed += bad;
                r.lost += lost;
            }
            if let Ok(text) = Procfs::new(self.kernel.as_ref()).stat() {
                if let Ok(times) = parse_cpu_times(&text) {
                    let steal_ticks = times.iter().map(|(cpu, t)| (*cpu, t.steal)).collect();
                    steal.push_back((t0, steal_ticks));
                }
            }
            while let Some(s) = self.shared.queue.pop() {
                pending.push(s);
            }
            // Finishing: stop once the trace is read up to when finishing began
            // (or was drained), or after FINISH_LIMIT_NS on a CPU too busy to catch up.
            if finishing && finish_started.is_none() {
                finish_started = Some(t0);
            }
            let flush_all = finish_started.is_some_and(|at| {
                let caught_up = self
                    .pipes
                    .iter()
                    .all(|(cpu, _)| read_pos.get(cpu).is_some_and(|&p| p >= at));
                drained || caught_up || t0 >= at + FINISH_LIMIT_NS
            });
            let mut i = 0;
            while i < pending.len() {
                let s = pending[i];
                let read_past = read_pos
                    .get(&s.cpu)
                    .is_some_and(|&p| p >= s.actual_ns + SETTLE_NS);
                if flush_all || read_past || (drained && s.actual_ns + SETTLE_NS <= t0) {
                    pending.swap_remove(i);
                    let attr = self.attribute_one(
                        &s,
                        threads.get(&(s.cpu, s.tid)).copied(),
                        &windows,
                        &steal,
                        &mut tasks,
                        &mut saved,
                    );
                    self.shared
                        .results
                        .lock()
                        .expect("results")
                        .attributions
                        .push(attr);
                } else {
                    i += 1;
                }
            }
            // Keep what pending spikes and the retention period need.
            let oldest_needed = pending
                .iter()
                .map(|s| s.intended_ns.saturating_sub(LOOKBACK_NS))
                .min()
                .unwrap_or(u64::MAX)
                .min(t0.saturating_sub(self.retention_ns));
            for w in windows.values_mut() {
                // Keep at least one older event: on an idle CPU it is the only
                // record of which task (idle) was current.
                while w.len() > 1 && w[1].ts_ns < oldest_needed {
                    w.pop_front();
                }
            }
            while steal.len() > 2 && steal[1].0 < oldest_needed {
                steal.pop_front();
            }
            if flush_all {
                break;
            }
            if drained {
                std::thread::sleep(self.poll);
            }
        }
        drop(std::mem::take(&mut self.pipes));
        if let Some(t) = &self.tracker {
            self.shared.results.lock().expect("results").watched = Some(t.seen().clone());
        }
        let (lock, cv) = &self.shared.done;
        *lock.lock().expect("done lock") = true;
        cv.notify_all();
    }

    fn attribute_one(
        &self,
        s: &Spike,
        global_tid: Option<i32>,
        windows: &BTreeMap<usize, VecDeque<Event>>,
        steal: &VecDeque<(u64, BTreeMap<usize, u64>)>,
        tasks: &mut TaskCache,
        saved: &mut Vec<Saved>,
    ) -> Attribution {
        let from = s.intended_ns.saturating_sub(LOOKBACK_NS);
        let to = s.actual_ns + SAVE_AFTER_NS;
        let events: Vec<Event> = windows
            .get(&s.cpu)
            .map(|w| window_events(w, from, to))
            .unwrap_or_default();
        let before = steal.iter().rev().find(|(t, _)| *t <= s.intended_ns);
        let after = steal.iter().find(|(t, _)| *t >= s.actual_ns);
        let steal_ev = match (before, after) {
            (Some((t0, a)), Some((t1, b))) => {
                let ticks = b
                    .get(&s.cpu)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(a.get(&s.cpu).copied().unwrap_or(0));
                Some(StealEvidence {
                    steal_ns: ticks * 1_000_000_000 / self.user_hz.max(1),
                    from_ns: *t0,
                    to_ns: *t1,
                })
            }
            _ => None,
        };
        let kernel = self.kernel.clone();
        let cache = std::cell::RefCell::new(std::mem::take(&mut tasks.kthreads));
        let is_kthread = |pid: i32| -> bool {
            if pid <= 0 {
                return true;
            }
            *cache.borrow_mut().entry(pid).or_insert_with(|| {
                Procfs::at(kernel.as_ref(), &self.proc_root)
                    .process_file(pid, "stat")
                    .ok()
                    .flatten()
                    .and_then(|t| parse_thread_stat(&t).ok())
                    .map(|stat| stat.is_kthread())
                    .unwrap_or(false)
            })
        };
        let foreign = std::cell::RefCell::new(std::mem::take(&mut tasks.other_namespace));
        let in_other_namespace = |pid: i32| -> bool {
            if !self.namespace_scope || pid <= 0 {
                return false;
            }
            *foreign.borrow_mut().entry(pid).or_insert_with(|| {
                // Gone before it could be read: ours only if it was listed as ours.
                other_namespace(self.kernel.as_ref(), &self.proc_root, pid)
                    .unwrap_or_else(|| !tasks.ours.contains(&pid))
            })
        };
        let pods = std::cell::RefCell::new(std::mem::take(&mut tasks.pods));
        let in_kubepods = |pid: i32| -> bool {
            if pid <= 0 {
                return false;
            }
            // Gone before it could be read: not known as a pod's.
            *pods.borrow_mut().entry(pid).or_insert_with(|| {
                Procfs::at(self.kernel.as_ref(), &self.proc_root)
                    .process_file(pid, "cgroup")
                    .is_ok_and(|t| t.is_some_and(|t| in_kubepods(&t)))
            })
        };
        let ctx = AttributionContext {
            tick_ns: self.tick_ns.get(&s.cpu).copied().flatten(),
            is_kthread: &is_kthread,
            in_other_namespace: &in_other_namespace,
            in_kubepods: &in_kubepods,
            virtual_cpu: self.virtual_cpu,
            steal: steal_ev,
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
        tasks.kthreads = cache.into_inner();
        tasks.other_namespace = foreign.into_inner();
        tasks.pods = pods.into_inner();
        if let Some(dir) = &self.trace_dir {
            match self.save_window(dir, &attr, &events, saved) {
                Ok(Some(p)) => attr.trace_file = Some(p.display().to_string()),
                Ok(None) => {}
                Err(e) => self
                    .shared
                    .results
                    .lock()
                    .expect("results")
                    .errors
                    .push(format!(
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
