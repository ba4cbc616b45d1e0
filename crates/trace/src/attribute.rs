//! Pure attribution of one latency spike to what the trace shows ran on its
//! CPU between the intended wakeup and the actual one.
//!
//! The CPU's context at any time is the innermost of: a device IRQ handler, an
//! interrupt vector (local timer, IPIs), an hrtimer callback, a softirq, a
//! workqueue item, or else the current task (every trace line names the task
//! that was current when it was recorded). Each stretch between two events is
//! charged to the context in force. Time the kernel did not see is reported as
//! "outside the kernel's view": the CPU idle while the timer should already
//! have fired, a context with interrupts enabled running on past a timer
//! interrupt that was due (the measured task's own timer before its
//! wakeup, or the next tick, at most one period after the latest local timer
//! interrupt), or a stretch with no event longer than the tick period allows
//! (interrupts off, or the vCPU not running: steal time is the evidence).
//! Where a vCPU stops between two due interrupts the guest cannot see it: up
//! to one tick period of a stop can stay charged to the context it hit.

use super::event::{Event, EventKind, Noise, NoiseClass, VECTORS};
use cpushield_cpuset::fmt_ns;
use serde::Serialize;
use std::collections::BTreeMap;

/// The longest a hard-interrupt handler (device IRQ, interrupt vector,
/// hrtimer callback), or the measured task's own way from being switched in
/// to user space, is taken to run between two events on a virtual CPU; time
/// beyond it in one such stretch is time the vCPU did not run.
pub const HANDLER_BOUND_NS: u64 = 100_000;

/// Sequence numbers of determinism windows start here; a latency spike's (a
/// probe's own from 0, a watched thread's from [`crate::watch::WATCH_SEQ_BASE`])
/// are below it. A window measures the task's own computing, so its stretches
/// of the measured task are its work; a latency spike's are only the way from
/// the wakeup to user space.
pub const DETERMINISM_SEQ_BASE: u64 = 1 << 48;

impl Spike {
    /// Whether this is a determinism window rather than a late wakeup.
    pub fn is_determinism_window(&self) -> bool {
        self.seq >= DETERMINISM_SEQ_BASE
    }
}

/// A latency spike to explain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Spike {
    /// Sequence number chosen by the caller (unique per session).
    pub seq: u64,
    /// The CPU the measuring thread runs on.
    pub cpu: usize,
    /// The measuring thread's TID.
    pub tid: i32,
    /// When it should have woken (CLOCK_MONOTONIC ns).
    pub intended_ns: u64,
    /// When it woke (CLOCK_MONOTONIC ns).
    pub actual_ns: u64,
}

impl Spike {
    /// actual − intended.
    pub fn latency_ns(&self) -> u64 {
        self.actual_ns.saturating_sub(self.intended_ns)
    }
}

/// What kind of thing took the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseKind {
    /// A device interrupt handler.
    Irq,
    /// An interrupt vector: local timer, IPIs, irq_work.
    Vector,
    /// An hrtimer callback (inside the local timer interrupt).
    Hrtimer,
    /// A softirq.
    Softirq,
    /// A workqueue item in a kworker.
    Work,
    /// A user task.
    Task,
    /// A kernel thread.
    KernelThread,
    /// A user task of another PID namespace than the measuring one: inside
    /// the machine, but outside a shield scoped to that namespace.
    OtherNamespace,
    /// A user task of a Kubernetes pod: the shield leaves pods to the
    /// kubelet's CPU manager, whatever its scope.
    PodTask,
    /// A task that ran while the woken real-time task waited, because RT
    /// throttling (kernel.sched_rt_runtime_us) had stopped real-time tasks.
    RtThrottled,
    /// The measured task itself, from being switched in to user space.
    MeasuredTask,
    /// Time no kernel event accounts for: hypervisor, SMI, interrupts off.
    Outside,
    /// Before the first traced event (the trace does not reach back that far).
    Untraced,
}

/// Whether a kernel thread's name is that of a per-CPU one, bound to its CPU
/// by the kernel (`ksoftirqd/1`, `kworker/1:2H`, `migration/1`, `rcuc/1`);
/// `kworker/u8:3` and `kdamond.0` are unbound.
pub fn is_per_cpu_kthread(comm: &str) -> bool {
    comm.split_once('/')
        .is_some_and(|(_, rest)| rest.starts_with(|c: char| c.is_ascii_digit()))
}

impl CauseKind {
    /// The short word reports and JSON use for this kind (`irq`, `kthread`,
    /// `other-ns`, `outside`, ...).
    pub fn word(self) -> &'static str {
        match self {
            CauseKind::Irq => "irq",
            CauseKind::Vector => "vector",
            CauseKind::Hrtimer => "hrtimer",
            CauseKind::Softirq => "softirq",
            CauseKind::Work => "work",
            CauseKind::Task => "task",
            CauseKind::KernelThread => "kthread",
            CauseKind::OtherNamespace => "other-ns",
            CauseKind::PodTask => "pod",
            CauseKind::RtThrottled => "throttled",
            CauseKind::MeasuredTask => "self",
            CauseKind::Outside => "outside",
            CauseKind::Untraced => "untraced",
        }
    }
}

/// Where in the wakeup the time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Intended time → the measured task is woken (the timer interrupt was late).
    BeforeWakeup,
    /// Woken → switched in (something kept the CPU).
    AfterWakeup,
    /// Switched in → back in user space.
    Running,
    /// No wakeup of the measured task in the trace window.
    Unknown,
}

/// One cause with the time it took within the spike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// What kind.
    pub kind: CauseKind,
    /// Its name: `irq 38 virtio2-input.0`, `softirq NET_RX`, `stress-ng-hdd (812)`.
    pub name: String,
    /// In which phase.
    pub phase: Phase,
    /// Time taken, ns.
    pub ns: u64,
}

/// Steal time around a spike, from /proc/stat samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StealEvidence {
    /// Steal time between the samples, ns.
    pub steal_ns: u64,
    /// The sample before the spike (CLOCK_MONOTONIC ns).
    pub from_ns: u64,
    /// The sample after it.
    pub to_ns: u64,
}

/// What attribution needs besides the events.
pub struct AttributionContext<'a> {
    /// The tick period when the tick runs on this CPU; `None` on a nohz_full
    /// CPU, where long stretches without events are normal.
    pub tick_ns: Option<u64>,
    /// Whether a pid is a kernel thread.
    pub is_kthread: &'a dyn Fn(i32) -> bool,
    /// Whether a pid is a task of another PID namespace than the measuring
    /// one (always false when the measurement is not namespace-scoped).
    pub in_other_namespace: &'a dyn Fn(i32) -> bool,
    /// Whether a pid is a task of a Kubernetes pod (its cgroup is under
    /// `kubepods`).
    pub in_kubepods: &'a dyn Fn(i32) -> bool,
    /// Steal time around the spike, when sampled.
    pub steal: Option<StealEvidence>,
    /// Whether the CPU is a virtual one (the hypervisor flag): only there is
    /// a hard-interrupt handler (or the probe's way to user space) that shows
    /// no event for longer than [`HANDLER_BOUND_NS`] taken to have lost its
    /// vCPU (on bare metal a slow driver can really take that long).
    pub virtual_cpu: bool,
    /// The kernel's preemption model (`none`, `voluntary`, `full`, ...), for the notes.
    pub preempt_model: Option<String>,
    /// When tracing started (CLOCK_MONOTONIC ns). Before the first event of a
    /// window, and after this, the CPU ran the task named by that first event
    /// (an idle CPU records nothing); before it, nothing is known.
    pub trace_start_ns: Option<u64>,
}

/// The explanation of one spike.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attribution {
    /// The spike.
    pub spike: Spike,
    /// Its latency, ns.
    pub latency_ns: u64,
    /// Causes, largest first (one entry per cause and phase).
    pub causes: Vec<Cause>,
    /// Time outside the kernel's view, ns.
    pub outside_ns: u64,
    /// Steal time around the spike.
    pub steal: Option<StealEvidence>,
    /// The interrupt that woke the measured task entered, ns after the
    /// intended time: the kernel latency of the Hyades paper's Table 2
    /// (interrupt entry − intended); `latency_ns` is its user latency.
    pub irq_entry_after_ns: Option<u64>,
    /// Measured task woken, ns after the intended time.
    pub wakeup_after_ns: Option<u64>,
    /// Measured task switched in, ns after the intended time.
    pub switch_in_after_ns: Option<u64>,
    /// Trace events in the window.
    pub events: usize,
    /// Notes that explain the causes.
    pub notes: Vec<String>,
    /// The saved raw trace window, when saved.
    pub trace_file: Option<String>,
}

impl Attribution {
    /// One line: the latency and its three largest causes.
    pub fn one_line(&self) -> String {
        let top: Vec<String> = self
            .causes
            .iter()
            .take(3)
            .map(|c| format!("{} {} ({})", fmt_ns(c.ns), c.name, phase_word(c.phase)))
            .collect();
        format!(
            "spike {} on CPU {}: {} late: {}",
            self.spike.seq,
            self.spike.cpu,
            fmt_ns(self.latency_ns),
            if top.is_empty() {
                "no events".to_string()
            } else {
                top.join("; ")
            }
        )
    }
}

/// Short text for a phase.
pub fn phase_word(p: Phase) -> &'static str {
    match p {
        Phase::BeforeWakeup => "before the wakeup",
        Phase::AfterWakeup => "after the wakeup",
        Phase::Running => "switching in",
        Phase::Unknown => "no wakeup seen",
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Ctx {
    Irq(u32, String),
    Vector(String),
    Hrtimer(String),
    Softirq(String),
    /// A work item, with the kworker running it.
    Work(String, i32),
    /// An interference an osnoise event reported.
    Noise(Noise),
}

impl Ctx {
    fn cause(&self) -> (CauseKind, String) {
        match self {
            Ctx::Irq(n, name) => (CauseKind::Irq, format!("irq {n} {name}")),
            Ctx::Vector(v) => (
                CauseKind::Vector,
                VECTORS
                    .iter()
                    .find(|(n, _)| n == v)
                    .map(|(_, d)| d.to_string())
                    .unwrap_or_else(|| v.clone()),
            ),
            Ctx::Hrtimer(f) => (CauseKind::Hrtimer, format!("hrtimer {f}")),
            Ctx::Softirq(s) => (CauseKind::Softirq, format!("softirq {s}")),
            Ctx::Work(f, _) => (CauseKind::Work, format!("workqueue {f}")),
            Ctx::Noise(n) => noise_cause(n),
        }
    }
    fn matches_exit(&self, kind: &EventKind) -> bool {
        match (self, kind) {
            (Ctx::Irq(a, _), EventKind::IrqExit { irq }) => a == irq,
            (Ctx::Vector(a), EventKind::VectorExit { vector }) => a == vector,
            (Ctx::Hrtimer(_), EventKind::HrtimerExit) => true,
            (Ctx::Softirq(a), EventKind::SoftirqExit { name }) => a == name,
            (Ctx::Work(..), EventKind::WorkEnd) => true,
            (Ctx::Noise(a), EventKind::NoiseEnd(b)) => a == b,
            _ => false,
        }
    }
}

fn exit_ctx(kind: &EventKind) -> Option<Ctx> {
    match kind {
        EventKind::IrqExit { irq } => Some(Ctx::Irq(*irq, String::new())),
        EventKind::VectorExit { vector } => Some(Ctx::Vector(vector.clone())),
        EventKind::HrtimerExit => Some(Ctx::Hrtimer("callback".into())),
        EventKind::SoftirqExit { name } => Some(Ctx::Softirq(name.clone())),
        EventKind::WorkEnd => Some(Ctx::Work("item".into(), 0)),
        EventKind::NoiseEnd(n) => Some(Ctx::Noise(n.clone())),
        _ => None,
    }
}

/// The cause an osnoise interference names: a vector by its description, a
/// device IRQ as `irq N name`, a softirq, an NMI; a thread is charged as a
/// task (see [`State::charge`]), so it is only named here.
fn noise_cause(n: &Noise) -> (CauseKind, String) {
    match n.class {
        NoiseClass::Irq => match VECTORS.iter().find(|(v, _)| *v == n.name) {
            Some((_, description)) => (CauseKind::Vector, description.to_string()),
            None => (CauseKind::Irq, format!("irq {} {}", n.number, n.name)),
        },
        NoiseClass::Softirq => (CauseKind::Softirq, format!("softirq {}", n.name)),
        NoiseClass::Nmi => (CauseKind::Vector, "NMI".to_string()),
        NoiseClass::Thread => (CauseKind::Task, format!("{} ({})", n.name, n.number)),
    }
}

/// The events with each osnoise interference ([`EventKind::Noise`], recorded
/// at its end) replaced by a start and an end: the start at the event's time
/// minus its duration (its own start field is on another clock). The
/// duration is net of what interrupted the interference, so a start can be
/// placed a little late; the stretches between events are charged as usual,
/// and an interference only refines which context held the CPU. Returns the
/// events unchanged when there is none.
fn with_noise_spans(events: &[Event]) -> std::borrow::Cow<'_, [Event]> {
    if !events.iter().any(|e| matches!(e.kind, EventKind::Noise(_))) {
        return std::borrow::Cow::Borrowed(events);
    }
    let mut out = Vec::with_capacity(events.len() + events.len() / 2);
    for e in events {
        match &e.kind {
            EventKind::Noise(n) => {
                out.push(Event {
                    ts_ns: e.ts_ns.saturating_sub(n.duration_ns),
                    kind: EventKind::NoiseStart(n.clone()),
                    ..e.clone()
                });
                out.push(Event {
                    kind: EventKind::NoiseEnd(n.clone()),
                    ..e.clone()
                });
            }
            _ => out.push(e.clone()),
        }
    }
    // Stable: events of one time keep their order, a start goes before the end.
    out.sort_by_key(|e| e.ts_ns);
    std::borrow::Cow::Owned(out)
}

/// Whether an event was placed by [`with_noise_spans`] rather than recorded
/// there: the task it names was current at the interference's end, not here.
fn is_placed(kind: &EventKind) -> bool {
    matches!(kind, EventKind::NoiseStart(_) | EventKind::NoiseEnd(_))
}

/// One stretch between events, and what it is charged to.
struct Stretch {
    from: u64,
    to: u64,
    phase: Phase,
    kind: CauseKind,
    name: String,
    /// The current task is the idle poller.
    polling: bool,
    /// The CPU left idle inside the stretch (no tick is known to be due).
    left_idle: bool,
}

struct State<'a> {
    ctx: &'a AttributionContext<'a>,
    spike: Spike,
    wake: Option<u64>,
    switch_in: Option<u64>,
    /// When the interrupt that woke the measured task entered: until then
    /// its timer, due at the intended time, is pending.
    waking_entry: Option<u64>,
    /// The latest local timer interrupt, or the CPU leaving idle (where the
    /// kernel restarts a stopped tick): the next tick is due at most one
    /// tick period after it.
    tick_anchor: Option<u64>,
    stack: Vec<Ctx>,
    task: (i32, String),
    throttled: bool,
    totals: BTreeMap<(CauseKind, String, Phase), u64>,
}

impl State<'_> {
    fn phase(&self, t: u64) -> Phase {
        match (self.wake, self.switch_in) {
            (None, _) => Phase::Unknown,
            (Some(w), _) if t < w => Phase::BeforeWakeup,
            (Some(_), Some(s)) if t >= s => Phase::Running,
            _ => Phase::AfterWakeup,
        }
    }

    /// Makes `pid` the current task from `at_ns`; the CPU leaving idle
    /// restarts the tick there.
    fn set_task(&mut self, pid: i32, comm: &str, at_ns: u64) {
        if self.task.0 == 0 && pid != 0 {
            self.tick_anchor = Some(self.tick_anchor.map_or(at_ns, |a| a.max(at_ns)));
        }
        if self.task.0 != pid || self.task.1 != comm {
            self.task = (pid, comm.to_string());
        }
    }

    /// The earliest timer interrupt due at or before `from` that a context
    /// with interrupts enabled cannot hold off: the measured task's own
    /// timer (at the intended time, until the interrupt that woke it
    /// entered) and the next tick (at most one period after `tick_anchor`).
    fn interrupt_due(&self, from: u64, to: u64) -> Option<u64> {
        let timer = match (self.wake, self.waking_entry) {
            (Some(_), Some(entry)) if from < entry => Some(self.spike.intended_ns),
            _ => None,
        };
        let tick = self
            .ctx
            .tick_ns
            .zip(self.tick_anchor)
            .map(|(period, anchor)| anchor + period);
        [timer, tick]
            .into_iter()
            .flatten()
            .min()
            .filter(|d| *d < to)
    }

    fn add(&mut self, kind: CauseKind, name: String, phase: Phase, ns: u64) {
        if ns > 0 {
            *self.totals.entry((kind, name, phase)).or_insert(0) += ns;
        }
    }

    /// Charges [from, to) to the context in force (or to `exiting`). Outside
    /// handlers the time goes to the task named by the event that ends the
    /// stretch (`end_task`): every trace line names the task current when it
    /// was recorded, which stays right when context switches between ordinary
    /// tasks are filtered out of the trace.
    fn charge(&mut self, from: u64, to: u64, exiting: Option<Ctx>, end_task: Option<(i32, &str)>) {
        let stretch_end = to;
        // The CPU left idle inside this stretch: the tick restarted at an
        // unknown time in it, so no tick is known to be due here.
        let left_idle = self.task.0 == 0 && end_task.is_some_and(|(pid, _)| pid != 0);
        let from = from.max(self.spike.intended_ns);
        let to = to.min(self.spike.actual_ns);
        if to <= from {
            if let Some((pid, comm)) = end_task {
                self.set_task(pid, comm, stretch_end);
            }
            return;
        }
        let phase = self.phase(from);
        if let Some((pid, comm)) = end_task {
            self.follow_task(pid, comm, phase, stretch_end);
        }
        let polling = self
            .task
            .1
            .starts_with(cpushield_kernel::POLLER_THREAD_PREFIX);
        let (kind, name) = self.stretch_cause(exiting.as_ref(), phase, polling);
        let s = Stretch {
            from,
            to,
            phase,
            kind,
            name,
            polling,
            left_idle,
        };
        if self.charge_vcpu_gone(&s)
            || self.charge_missed_interrupt(&s)
            || self.charge_missed_tick(&s)
        {
            return;
        }
        self.add(s.kind, s.name, s.phase, s.to - s.from);
    }

    /// Makes `pid` the current task when the event ending a stretch names
    /// another; a switch between two other tasks while the real-time task
    /// was runnable means real-time tasks were throttled.
    fn follow_task(&mut self, pid: i32, comm: &str, phase: Phase, at: u64) {
        if pid == self.task.0 {
            return;
        }
        if phase == Phase::AfterWakeup
            && pid != self.spike.tid
            && self.task.0 != self.spike.tid
            && self.task.0 > 0
            && pid > 0
        {
            self.throttled = true;
        }
        self.set_task(pid, comm, at);
    }

    /// What a stretch in `phase` is charged to: the handler leaving
    /// (`exiting`) or on top of the stack, else the current task as what it
    /// is (idle, the poller, the measured task, a throttled one, or a task).
    fn stretch_cause(
        &self,
        exiting: Option<&Ctx>,
        phase: Phase,
        polling: bool,
    ) -> (CauseKind, String) {
        // A work item counts only while its kworker is the current task (a
        // switch away from it may not be in the trace).
        let cur = self.task.0;
        let top = self
            .stack
            .iter()
            .rev()
            .find(|c| !matches!(c, Ctx::Work(_, pid) if *pid != cur));
        match exiting.or(top) {
            Some(Ctx::Noise(n)) if n.class == NoiseClass::Thread => (
                self.task_kind(n.number as i32, &n.name),
                format!("{} ({})", n.name, n.number),
            ),
            Some(c) => c.cause(),
            // The idle poller gives way to any task at once, and nothing it
            // does delays an interrupt: a timer that fires late while it
            // spins was delivered late (the vCPU was not running).
            None if polling && matches!(phase, Phase::BeforeWakeup | Phase::Unknown) => (
                CauseKind::Outside,
                "CPU polling while the timer should have fired: vCPU not running (hypervisor) or SMI".to_string(),
            ),
            None if cur == 0 => {
                let why = if matches!(phase, Phase::BeforeWakeup | Phase::Unknown) {
                    "CPU idle while the timer should have fired: hypervisor, SMI or idle-state exit"
                } else {
                    "CPU idle"
                };
                (CauseKind::Outside, why.to_string())
            }
            None if cur == self.spike.tid => (
                CauseKind::MeasuredTask,
                format!(
                    "measured task {} ({}) on its way to user space",
                    self.task.1, self.task.0
                ),
            ),
            None if self.throttled && phase == Phase::AfterWakeup => (
                CauseKind::RtThrottled,
                format!(
                    "RT throttling: {} ({}) ran while the real-time task waited",
                    self.task.1, self.task.0
                ),
            ),
            None => (
                self.task_kind(self.task.0, &self.task.1),
                format!("{} ({})", self.task.1, self.task.0),
            ),
        }
    }

    /// On a virtual CPU, a bounded stretch (a hard-interrupt handler, the
    /// measured task's way to user space, the poller giving way) that shows
    /// no event for longer than [`HANDLER_BOUND_NS`]: the rest was the vCPU
    /// not running. Returns whether it charged the stretch.
    fn charge_vcpu_gone(&mut self, s: &Stretch) -> bool {
        // A hard-interrupt handler (device IRQ, vector, hrtimer callback)
        // runs for microseconds; one that shows no event for longer was not
        // running: the vCPU was taken away inside it.
        // The measured task of a late wakeup is bounded in every phase: its
        // own work between the intended time and user space is a switch and
        // a return, even when the trace holds no wakeup to place the phase
        // (a determinism window, which computes for milliseconds between
        // ticks, is not bounded). The idle poller counts only while it gives
        // way after the wakeup.
        let bounded = match s.kind {
            CauseKind::Irq | CauseKind::Vector | CauseKind::Hrtimer => true,
            CauseKind::MeasuredTask => !self.spike.is_determinism_window(),
            CauseKind::Task => s.polling,
            _ => false,
        };
        let ns = s.to - s.from;
        if !(self.ctx.virtual_cpu && bounded && ns > HANDLER_BOUND_NS) {
            return false;
        }
        self.add(s.kind, s.name.clone(), s.phase, HANDLER_BOUND_NS);
        let why = if matches!(s.kind, CauseKind::MeasuredTask | CauseKind::Task) {
            format!(
                "{} showed no event for longer than switching to the probe takes ({}): the vCPU was not running",
                if s.kind == CauseKind::Task { "the idle poller giving way" } else { "the probe's way to user space" },
                fmt_ns(HANDLER_BOUND_NS)
            )
        } else {
            format!(
                "{} showed no event for longer than any handler runs ({}): the vCPU was not running",
                s.name,
                fmt_ns(HANDLER_BOUND_NS)
            )
        };
        self.add(CauseKind::Outside, why, s.phase, ns - HANDLER_BOUND_NS);
        true
    }

    /// Interrupts are enabled in a task, a kernel thread, a work item or a
    /// softirq: a timer interrupt that was due comes at once. A stretch that
    /// runs on past it without one had interrupts off or a vCPU the
    /// hypervisor did not run; up to [`HANDLER_BOUND_NS`] of it is the
    /// interrupt's own way in (and short sections with interrupts off).
    /// Returns whether it charged the stretch.
    fn charge_missed_interrupt(&mut self, s: &Stretch) -> bool {
        let interruptible = match s.kind {
            CauseKind::Task => !s.polling,
            CauseKind::MeasuredTask => s.phase == Phase::Unknown,
            CauseKind::KernelThread
            | CauseKind::OtherNamespace
            | CauseKind::PodTask
            | CauseKind::RtThrottled
            | CauseKind::Softirq
            | CauseKind::Work => true,
            _ => false,
        };
        let due = (interruptible && !s.left_idle)
            .then(|| self.interrupt_due(s.from, s.to))
            .flatten();
        let Some(due) = due else {
            return false;
        };
        let held_from = (due + HANDLER_BOUND_NS).max(s.from);
        if held_from >= s.to {
            return false;
        }
        self.add(s.kind, s.name.clone(), s.phase, held_from - s.from);
        self.add(
            CauseKind::Outside,
            "a timer interrupt was due and did not come: interrupts off or vCPU not running"
                .to_string(),
            s.phase,
            s.to - held_from,
        );
        true
    }

    /// A stretch without any event longer than the tick allows: the kernel
    /// did not run its tick, so the excess is outside its view. Returns
    /// whether it charged the stretch.
    fn charge_missed_tick(&mut self, s: &Stretch) -> bool {
        let ns = s.to - s.from;
        let Some(tick) = self.ctx.tick_ns else {
            return false;
        };
        if s.kind == CauseKind::Outside || ns <= tick + tick / 2 {
            return false;
        }
        self.add(s.kind, s.name.clone(), s.phase, tick);
        self.add(
            CauseKind::Outside,
            format!(
                "no kernel event for {} (tick every {}): interrupts off or vCPU not running",
                fmt_ns(ns),
                fmt_ns(tick)
            ),
            s.phase,
            ns - tick,
        );
        true
    }

    /// What kind of task `pid` (named `comm`) is, for a cause.
    fn task_kind(&self, pid: i32, comm: &str) -> CauseKind {
        if (self.ctx.is_kthread)(pid) {
            // An unbound kernel thread (kdamond.0, kswapd0) belongs to the
            // machine: a namespace-scoped shield leaves it in place, as it
            // leaves other namespaces' tasks. A per-CPU one (ksoftirqd/1) no
            // shield can move.
            if !is_per_cpu_kthread(comm) && (self.ctx.in_other_namespace)(pid) {
                CauseKind::OtherNamespace
            } else {
                CauseKind::KernelThread
            }
        } else if (self.ctx.in_kubepods)(pid) {
            CauseKind::PodTask
        } else if (self.ctx.in_other_namespace)(pid) {
            CauseKind::OtherNamespace
        } else {
            CauseKind::Task
        }
    }

    fn apply(&mut self, e: &Event) {
        if !is_placed(&e.kind) {
            self.set_task(e.pid, &e.comm, e.ts_ns);
        }
        match &e.kind {
            EventKind::NoiseStart(n) => self.stack.push(Ctx::Noise(n.clone())),
            EventKind::IrqEntry { irq, name } => self.stack.push(Ctx::Irq(*irq, name.clone())),
            EventKind::VectorEntry { vector } => {
                if vector == "local_timer" {
                    self.tick_anchor = Some(e.ts_ns);
                }
                self.stack.push(Ctx::Vector(vector.clone()))
            }
            EventKind::HrtimerEntry { function, .. } => {
                self.stack.push(Ctx::Hrtimer(function.clone()))
            }
            EventKind::SoftirqEntry { name } => self.stack.push(Ctx::Softirq(name.clone())),
            EventKind::WorkStart { function } => {
                self.stack.push(Ctx::Work(function.clone(), e.pid))
            }
            k @ (EventKind::IrqExit { .. }
            | EventKind::VectorExit { .. }
            | EventKind::HrtimerExit
            | EventKind::SoftirqExit { .. }
            | EventKind::WorkEnd
            | EventKind::NoiseEnd(_)) => {
                if let Some(pos) = self.stack.iter().rposition(|c| c.matches_exit(k)) {
                    self.stack.truncate(pos);
                }
            }
            EventKind::Switch {
                next_comm,
                next_pid,
                next_prio,
                ..
            } => {
                self.stack.clear();
                if let Some(w) = self.wake {
                    let waiting = e.ts_ns >= w && self.switch_in.is_none_or(|s| e.ts_ns < s);
                    if waiting && *next_pid != self.spike.tid && *next_prio >= 100 {
                        self.throttled = true;
                    }
                }
                self.set_task(*next_pid, next_comm, e.ts_ns);
            }
            _ => {}
        }
    }
}

/// The interrupt that woke the measured task when no sched_wakeup event is
/// in the trace: the first interrupt or vector that entered at or after
/// `from` and left a reschedule pending at its exit (the `N` flag: a task it
/// woke is to preempt the current one), before the task was switched in.
/// Returns its entry and exit times. A timer that expired while interrupts
/// were off fires in the first local timer interrupt after it, and the
/// wakeup of a real-time task sets the flag, so this is the interrupt that
/// ran the measured task's wakeup, to within that interrupt's own length.
fn waking_interrupt(events: &[Event], spike: &Spike, from: u64, end: u64) -> Option<(u64, u64)> {
    let mut open: Vec<(&EventKind, u64)> = Vec::new();
    for e in events.iter().filter(|e| e.ts_ns >= from) {
        if e.ts_ns > end {
            break;
        }
        match &e.kind {
            EventKind::VectorEntry { .. } | EventKind::IrqEntry { .. } => {
                open.push((&e.kind, e.ts_ns))
            }
            EventKind::VectorExit { vector } => {
                if let Some(pos) = open.iter().rposition(
                    |(k, _)| matches!(k, EventKind::VectorEntry { vector: v } if v == vector),
                ) {
                    let entry = open[pos].1;
                    open.truncate(pos);
                    if e.need_resched {
                        return Some((entry, e.ts_ns));
                    }
                }
            }
            EventKind::IrqExit { irq } => {
                if let Some(pos) = open
                    .iter()
                    .rposition(|(k, _)| matches!(k, EventKind::IrqEntry { irq: i, .. } if i == irq))
                {
                    let entry = open[pos].1;
                    open.truncate(pos);
                    if e.need_resched {
                        return Some((entry, e.ts_ns));
                    }
                }
            }
            EventKind::Switch { next_pid, .. } if *next_pid == spike.tid => break,
            _ => {}
        }
    }
    None
}

/// The time of `causes` no kernel event accounts for (hypervisor, SMI,
/// interrupts off), in ns.
fn outside_ns(causes: &[Cause]) -> u64 {
    causes
        .iter()
        .filter(|c| c.kind == CauseKind::Outside)
        .map(|c| c.ns)
        .sum()
}

/// Explains a spike from the events of its CPU. `events` must be that CPU's
/// events in time order, reaching back before the intended time when possible
/// (the context in force at the start is taken from the events before it).
///
/// Where the trace holds osnoise events (the timerlat or osnoise tracer ran),
/// each interference they report marks the context from its start to its end
/// as well.
pub fn attribute(events: &[Event], spike: &Spike, ctx: &AttributionContext<'_>) -> Attribution {
    let events = with_noise_spans(events);
    let events: &[Event] = &events;
    let start = spike.intended_ns;
    let end = spike.actual_ns.max(start);
    let m = Milestones::find(events, spike);
    let mut st = State {
        ctx,
        spike: *spike,
        wake: m.wake,
        switch_in: m.switch_in,
        waking_entry: m.irq_entry,
        tick_anchor: None,
        stack: Vec::new(),
        task: (-1, String::new()),
        throttled: false,
        totals: BTreeMap::new(),
    };
    st.charge_before_first(events, start, end);
    let in_window = st.walk(events, start, end);
    let causes = st.causes();
    let outside_ns = outside_ns(&causes);
    let mut notes = wakeup_notes(events, spike, &m, &causes, ctx, st.throttled);
    notes.extend(steal_note(ctx.steal.as_ref(), outside_ns));
    Attribution {
        spike: *spike,
        latency_ns: spike.latency_ns(),
        causes,
        outside_ns,
        steal: ctx.steal,
        irq_entry_after_ns: m.irq_entry.map(|t| t - start),
        wakeup_after_ns: m.wake.map(|w| w - start),
        switch_in_after_ns: m.switch_in.map(|s| s - start),
        events: in_window,
        notes,
        trace_file: None,
    }
}

/// Text timestamps are whole microseconds: events are matched to the spike
/// with 2 us of rounding allowed.
const TS_SLACK_NS: u64 = 2_000;

/// When the measured task was woken, by what, and when it was switched in
/// (times clamped to the intended time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Milestones {
    /// The sched_wakeup event of the measured task, when traced.
    wake_event_ns: Option<u64>,
    /// The wakeup: that event, or the exit of the interrupt that woke it.
    wake: Option<u64>,
    /// The entry of the interrupt the wakeup ran in.
    irq_entry: Option<u64>,
    /// The switch to the measured task after its wakeup.
    switch_in: Option<u64>,
}

impl Milestones {
    fn find(events: &[Event], spike: &Spike) -> Self {
        let start = spike.intended_ns;
        let end = spike.actual_ns.max(start);
        let slack = TS_SLACK_NS;
        let wake_ev = events.iter().find(|e| {
            e.ts_ns + slack >= start
                && e.ts_ns <= end
                && matches!(e.kind, EventKind::Wakeup { pid, .. } if pid == spike.tid)
        });
        // Without a wakeup event (the tracer leaves sched_wakeup out: it fires
        // in the measured CPU's own wakeup path), the wakeup is the end of the
        // interrupt that woke the task.
        let by_interrupt = match wake_ev {
            Some(_) => None,
            None => waking_interrupt(events, spike, start.saturating_sub(slack), end),
        };
        let wake = wake_ev
            .map(|e| e.ts_ns.max(start))
            .or(by_interrupt.map(|(_, exit)| exit.max(start)));
        // The interrupt the wakeup ran in: the last interrupt or vector entry at
        // or before the wakeup event, inside the window.
        let irq_entry = by_interrupt.map(|(entry, _)| entry.max(start)).or_else(|| {
            wake_ev.and_then(|w| {
                events
                    .iter()
                    .filter(|e| e.ts_ns <= w.ts_ns && e.ts_ns + slack >= start)
                    .rev()
                    .find(|e| {
                        matches!(
                            e.kind,
                            EventKind::VectorEntry { .. } | EventKind::IrqEntry { .. }
                        )
                    })
                    .map(|e| e.ts_ns.max(start))
            })
        });
        let switch_in = events
            .iter()
            .find(|e| {
                e.ts_ns + slack >= wake.unwrap_or(start)
                    && e.ts_ns <= end
                    && matches!(e.kind, EventKind::Switch { next_pid, .. } if next_pid == spike.tid)
            })
            .map(|e| e.ts_ns.max(start));
        Self {
            wake_event_ns: wake_ev.map(|e| e.ts_ns),
            wake,
            irq_entry,
            switch_in,
        }
    }
}

impl State<'_> {
    /// Charges the time from the intended time to the first event: untraced
    /// before tracing started, else the task that first event names (an
    /// idle CPU records nothing).
    fn charge_before_first(&mut self, events: &[Event], start: u64, end: u64) {
        let traced_from = self.ctx.trace_start_ns.unwrap_or(u64::MAX);
        match events.first() {
            Some(first) if first.ts_ns > start => {
                let known = traced_from.max(start);
                if known > start {
                    let to = known.min(first.ts_ns).min(end);
                    self.add(
                        CauseKind::Untraced,
                        "before tracing started".into(),
                        self.phase(start),
                        to - start,
                    );
                }
                if first.ts_ns > known {
                    self.task = (first.pid, first.comm.clone());
                    self.charge(known, first.ts_ns, None, Some((first.pid, &first.comm)));
                }
            }
            None => self.add(
                CauseKind::Untraced,
                "no trace events".into(),
                Phase::Unknown,
                end - start,
            ),
            _ => {}
        }
    }

    /// Charges each stretch between events up to `end` to the context in
    /// force; returns how many events fell inside the spike.
    fn walk(&mut self, events: &[Event], start: u64, end: u64) -> usize {
        let mut in_window = 0;
        let mut prev: Option<u64> = None;
        for e in events {
            if e.ts_ns > end {
                break;
            }
            // A noise's placed start is the same recorded event as its end.
            if e.ts_ns >= start && !matches!(e.kind, EventKind::NoiseStart(_)) {
                in_window += 1;
            }
            if let Some(p) = prev {
                let on_stack = self.stack.iter().any(|c| c.matches_exit(&e.kind));
                let exiting = if on_stack { None } else { exit_ctx(&e.kind) };
                let end_task = (!is_placed(&e.kind)).then_some((e.pid, e.comm.as_str()));
                self.charge(p, e.ts_ns, exiting, end_task);
            }
            self.apply(e);
            prev = Some(e.ts_ns);
        }
        if let Some(p) = prev {
            self.charge(p, end, None, None);
        }
        in_window
    }

    /// The causes charged, largest first (by name among equals).
    fn causes(&self) -> Vec<Cause> {
        let mut causes: Vec<Cause> = self
            .totals
            .iter()
            .map(|((kind, name, phase), ns)| Cause {
                kind: *kind,
                name: name.clone(),
                phase: *phase,
                ns: *ns,
            })
            .collect();
        causes.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.name.cmp(&b.name)));
        causes
    }
}

/// What the wakeup's timing says: when its timer ran, how late the waking
/// interrupt came and what ran then, and why the switch waited.
fn wakeup_notes(
    events: &[Event],
    spike: &Spike,
    m: &Milestones,
    causes: &[Cause],
    ctx: &AttributionContext<'_>,
    throttled: bool,
) -> Vec<String> {
    let start = spike.intended_ns;
    let end = spike.actual_ns.max(start);
    let Some(w) = m.wake else {
        return vec![
            "no wakeup of the measured task in the window (it may have been running or spinning)"
                .to_string(),
        ];
    };
    let mut notes = Vec::new();
    let fired = events
        .iter()
        .filter(|e| e.ts_ns <= m.wake_event_ns.unwrap_or(w))
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::HrtimerEntry {
                function,
                now_ns: Some(now),
            } if function == "hrtimer_wakeup" => Some(*now),
            _ => None,
        });
    if let Some(now) = fired {
        notes.push(format!(
            "the wakeup timer ran {} after the intended time (hrtimer now={now})",
            fmt_ns(now.saturating_sub(start))
        ));
    }
    // How late the interrupt that woke it came (its entry; the wakeup
    // itself when the entry is not in the trace).
    let before = m.irq_entry.unwrap_or(w).saturating_sub(start);
    if before > 100_000 {
        let busy = causes.iter().find(|c| {
            c.phase == Phase::BeforeWakeup
                && matches!(c.kind, CauseKind::Task | CauseKind::KernelThread)
        });
        if let Some(top) = busy {
            notes.push(format!(
                "the timer interrupt came {} late while {} ran: interrupts were disabled in the kernel, or the hypervisor delivered it late",
                fmt_ns(before),
                top.name
            ));
        }
    }
    let after = m.switch_in.unwrap_or(end).saturating_sub(w);
    if after > 100_000 {
        let model = ctx.preempt_model.as_deref().unwrap_or("unknown");
        let why = if throttled {
            "RT throttling had stopped real-time tasks".to_string()
        } else if matches!(model, "none" | "voluntary") {
            format!("the kernel's preemption model is '{model}': a task in a system call keeps the CPU until it returns or calls cond_resched()")
        } else {
            "the running task had preemption or interrupts disabled".to_string()
        };
        notes.push(format!(
            "{} passed between the wakeup and the switch: {why}",
            fmt_ns(after)
        ));
    }
    notes
}

/// What /proc/stat's steal time around the spike says, if anything.
fn steal_note(steal: Option<&StealEvidence>, outside_ns: u64) -> Option<String> {
    let s = steal?;
    if s.steal_ns > 0 {
        Some(format!(
            "steal time +{} on this CPU between samples {} ms apart around the spike (/proc/stat)",
            fmt_ns(s.steal_ns),
            (s.to_ns - s.from_ns) / 1_000_000
        ))
    } else if outside_ns > 0 {
        Some("no steal time was counted around the spike: the time outside the kernel's view was not taken by the hypervisor's scheduler as far as /proc/stat shows (SMI, interrupts off, or steal below its 10 ms resolution)".to_string())
    } else {
        None
    }
}

#[cfg(test)]
mod part_tests {
    use super::*;
    use crate::event::parse_line;

    fn ev(line: &str) -> Event {
        parse_line(line).expect("parses")
    }

    fn spike() -> Spike {
        Spike {
            seq: 1,
            cpu: 1,
            tid: 50,
            intended_ns: 1_000_000_000,
            actual_ns: 1_001_000_000,
        }
    }

    fn ctx() -> AttributionContext<'static> {
        AttributionContext {
            tick_ns: None,
            is_kthread: &|pid| pid <= 0,
            in_other_namespace: &|_| false,
            in_kubepods: &|_| false,
            virtual_cpu: false,
            steal: None,
            preempt_model: Some("full".into()),
            trace_start_ns: Some(0),
        }
    }

    #[test]
    fn milestones_are_the_wakeup_its_interrupt_and_the_switch_in() {
        let events = [
            ev("  load-70 [001] d.h.. 1.000100: local_timer_entry: vector=236"),
            ev("  load-70 [001] d.h.. 1.000200: sched_wakeup: comm=probe pid=50 prio=4 target_cpu=001"),
            ev("  load-70 [001] d.h.. 1.000300: local_timer_exit: vector=236"),
            ev("  load-70 [001] d..2. 1.000800: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid=50 next_prio=4"),
        ];
        let m = Milestones::find(&events, &spike());
        let at = |us: u64| Some(1_000_000_000 + us * 1000);
        assert_eq!(m.wake_event_ns, at(200));
        assert_eq!(m.wake, at(200));
        assert_eq!(m.irq_entry, at(100));
        assert_eq!(m.switch_in, at(800));
        assert_eq!(
            Milestones::find(&[], &spike()),
            Milestones {
                wake_event_ns: None,
                wake: None,
                irq_entry: None,
                switch_in: None
            }
        );
    }

    #[test]
    fn without_a_wakeup_the_only_note_says_so_and_a_slow_switch_names_the_preemption_model() {
        let none = Milestones {
            wake_event_ns: None,
            wake: None,
            irq_entry: None,
            switch_in: None,
        };
        let notes = wakeup_notes(&[], &spike(), &none, &[], &ctx(), false);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("no wakeup of the measured task"));
        let slow_switch = Milestones {
            wake: Some(1_000_010_000),
            switch_in: Some(1_000_900_000),
            ..none
        };
        let notes = wakeup_notes(&[], &spike(), &slow_switch, &[], &ctx(), false);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("preemption or interrupts disabled"),
            "{notes:?}"
        );
        let notes = wakeup_notes(&[], &spike(), &slow_switch, &[], &ctx(), true);
        assert!(notes[0].contains("RT throttling"), "{notes:?}");
    }

    #[test]
    fn steal_is_noted_when_counted_and_its_absence_only_when_time_was_outside() {
        let steal = |steal_ns| StealEvidence {
            steal_ns,
            from_ns: 0,
            to_ns: 20_000_000,
        };
        let counted = steal_note(Some(&steal(3_000_000)), 0).expect("a note");
        assert!(counted.contains("20 ms apart"), "{counted}");
        assert!(steal_note(Some(&steal(0)), 5)
            .expect("a note")
            .starts_with("no steal time"));
        assert_eq!(steal_note(Some(&steal(0)), 0), None);
        assert_eq!(steal_note(None, 5), None);
    }

    fn state<'a>(ctx: &'a AttributionContext<'a>, task: (i32, &str)) -> State<'a> {
        State {
            ctx,
            spike: spike(),
            wake: Some(1_000_100_000),
            switch_in: None,
            waking_entry: None,
            tick_anchor: None,
            stack: Vec::new(),
            task: (task.0, task.1.to_string()),
            throttled: false,
            totals: BTreeMap::new(),
        }
    }

    fn stretch(kind: CauseKind, from: u64, to: u64) -> Stretch {
        Stretch {
            from,
            to,
            phase: Phase::BeforeWakeup,
            kind,
            name: "x (7)".into(),
            polling: false,
            left_idle: false,
        }
    }

    #[test]
    fn a_switch_between_two_other_tasks_after_the_wakeup_means_throttling() {
        let c = ctx();
        let mut st = state(&c, (70, "load"));
        st.follow_task(80, "other", Phase::BeforeWakeup, 1);
        assert!(!st.throttled);
        st.follow_task(90, "third", Phase::AfterWakeup, 2);
        assert!(st.throttled);
        assert_eq!(st.task, (90, "third".to_string()));
    }

    #[test]
    fn a_stretch_is_charged_to_the_handler_on_top_or_to_what_the_task_is() {
        let c = ctx();
        let idle = state(&c, (0, "swapper/1"));
        let (kind, why) = idle.stretch_cause(None, Phase::BeforeWakeup, false);
        assert_eq!(kind, CauseKind::Outside);
        assert!(why.starts_with("CPU idle while the timer"), "{why}");
        let measured = state(&c, (50, "probe"));
        assert_eq!(
            measured.stretch_cause(None, Phase::Running, false).0,
            CauseKind::MeasuredTask
        );
        let mut task = state(&c, (70, "load"));
        assert_eq!(
            task.stretch_cause(None, Phase::BeforeWakeup, false),
            (CauseKind::Task, "load (70)".to_string())
        );
        task.stack.push(Ctx::Softirq("NET_RX".into()));
        assert_eq!(
            task.stretch_cause(None, Phase::BeforeWakeup, false).0,
            CauseKind::Softirq
        );
    }

    #[test]
    fn on_a_virtual_cpu_a_handler_past_its_bound_is_the_vcpu_gone() {
        let mut c = ctx();
        c.virtual_cpu = true;
        let mut st = state(&c, (70, "load"));
        assert!(!st.charge_vcpu_gone(&stretch(CauseKind::Task, 0, 500_000)));
        assert!(st.charge_vcpu_gone(&stretch(CauseKind::Irq, 0, 500_000)));
        let outside = outside_ns(&st.causes());
        assert_eq!(outside, 500_000 - HANDLER_BOUND_NS);
        let mut bare = ctx();
        bare.virtual_cpu = false;
        let mut st = state(&bare, (70, "load"));
        assert!(!st.charge_vcpu_gone(&stretch(CauseKind::Irq, 0, 500_000)));
    }

    #[test]
    fn a_task_running_past_a_due_tick_had_interrupts_off_after_the_bound() {
        let mut c = ctx();
        c.tick_ns = Some(1_000_000);
        let mut st = state(&c, (70, "load"));
        st.tick_anchor = Some(0);
        // The tick was due at 1 ms; the task ran on to 3 ms without it.
        assert!(st.charge_missed_interrupt(&stretch(CauseKind::Task, 0, 3_000_000)));
        let causes = st.causes();
        let outside = causes
            .iter()
            .find(|c| c.kind == CauseKind::Outside)
            .unwrap();
        assert_eq!(outside.ns, 3_000_000 - 1_000_000 - HANDLER_BOUND_NS);
        // A hard-interrupt handler has interrupts off by nature.
        let mut st = state(&c, (70, "load"));
        st.tick_anchor = Some(0);
        assert!(!st.charge_missed_interrupt(&stretch(CauseKind::Irq, 0, 3_000_000)));
    }

    #[test]
    fn a_stretch_longer_than_a_tick_and_a_half_is_outside_past_one_tick() {
        let mut c = ctx();
        c.tick_ns = Some(1_000_000);
        let mut st = state(&c, (70, "load"));
        assert!(!st.charge_missed_tick(&stretch(CauseKind::Irq, 0, 1_400_000)));
        assert!(st.charge_missed_tick(&stretch(CauseKind::Irq, 0, 4_000_000)));
        let outside = outside_ns(&st.causes());
        assert_eq!(outside, 3_000_000);
        assert!(!st.charge_missed_tick(&stretch(CauseKind::Outside, 0, 4_000_000)));
    }
}
