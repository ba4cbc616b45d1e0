//! "vCPU k not running from T1 to T2, because X", from host trace events.
//!
//! Fed the host's `sched_switch`, `sched_wakeup`, IRQ, softirq and (under
//! KVM) `kvm_exit`/`kvm_entry` events of the CPUs the vCPU threads run on,
//! in time order per CPU, the timeline keeps, per vCPU thread:
//!
//! - switched out runnable (`R`, `R+`): **preempted**; the gap's occupants
//!   are what ran on its host CPU until it ran again (tasks with their pid,
//!   IRQs, softirqs, this guest's other vCPUs, another guest's vCPUs);
//! - switched out sleeping: **halted** (the vCPU thread waited: the guest
//!   idled, or under TCG QEMU's own lock); occupants are charged only from
//!   its wakeup on, the time it was runnable and not run;
//! - running, but an IRQ or softirq took its CPU: **interrupted**;
//! - under KVM, a VM exit the host took long to handle: **exit**.
//!
//! Bounded: at most [`Limits::max_gaps`] gaps, none older than
//! [`Limits::retention_ns`] behind the newest, at most
//! [`MAX_OCCUPANTS`] occupants per gap (the rest summed as "others").

use cpushield_parse::qemu_thread::is_vcpu_thread_name;
use cpushield_trace::event::{Event, EventKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Occupants named per gap; the rest are summed into one "others" entry.
pub const MAX_OCCUPANTS: usize = 8;

/// Occupants an open gap tracks by name before the rest count as "others".
/// A gap names its [`MAX_OCCUPANTS`] biggest only once it is known which
/// are biggest: a vCPU woken on a busy host CPU waits first behind many
/// short tasks and softirqs, and the task that then holds the CPU for
/// milliseconds comes after them.
const OPEN_OCCUPANTS: usize = 64;

/// Why the vCPU did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GapState {
    /// Runnable, not run: something else had its host CPU.
    Preempted,
    /// Its thread slept (the guest idled, or QEMU's lock): then, from
    /// `woken_ns`, runnable and not run.
    Halted,
    /// Its thread was current, but a host IRQ or softirq ran.
    Interrupted,
    /// A VM exit the host took long to handle (KVM).
    Exit,
}

/// What held a host CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OccupantKind {
    /// A host task.
    Task,
    /// Another vCPU of the same guest.
    Vcpu,
    /// A vCPU thread of another guest.
    OtherVcpu,
    /// A host device interrupt.
    Irq,
    /// A host softirq.
    Softirq,
    /// The host CPU was idle.
    Idle,
    /// Everything past the named occupants.
    Others,
}

/// Something that held the vCPU's host CPU during a gap, and for how long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupant {
    /// What it is.
    pub kind: OccupantKind,
    /// Its name: a task's comm, `irq 24 eth0`, `softirq NET_RX`.
    pub name: String,
    /// A task's pid (thread ID on the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// For [`OccupantKind::Vcpu`], the vCPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu: Option<u32>,
    /// The host CPU it ran on.
    pub host_cpu: usize,
    /// How long it held it during the gap, ns.
    pub ns: u64,
}

impl Occupant {
    /// Whether `self` and `other` are the same holder: a task is its pid
    /// (its name is the latest seen: it may exec), anything else its kind
    /// and name. Where it ran does not matter: a task that moved between
    /// host CPUs is still one task.
    pub fn is_same_as(&self, other: &Occupant) -> bool {
        self.kind == other.kind
            && self.pid == other.pid
            && (self.pid.is_some() || self.name == other.name)
    }
}

/// One stretch of time a vCPU did not run guest code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// The vCPU (QEMU's cpu-index).
    pub vcpu: u32,
    /// When it stopped running, ns.
    pub from_ns: u64,
    /// When it ran again (for an open gap, when the host last read its trace), ns.
    pub to_ns: u64,
    /// Why.
    pub state: GapState,
    /// The host CPU it waited for (where it was switched out, or woken onto).
    pub host_cpu: usize,
    /// For a halted gap: when its thread was woken, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken_ns: Option<u64>,
    /// What held the host CPU meanwhile, largest first.
    pub by: Vec<Occupant>,
    /// Still not running when the host last read its trace.
    #[serde(default)]
    pub open: bool,
}

impl Gap {
    /// Its length, ns.
    pub fn len_ns(&self) -> u64 {
        self.to_ns.saturating_sub(self.from_ns)
    }

    /// How long the guest had work for the vCPU that the host did not run:
    /// all of it, but for a halted gap only from the wake-up on (before
    /// it, the guest was idle).
    pub fn held_off_ns(&self) -> u64 {
        self.held_off_from_ns()
            .map_or(0, |from| self.to_ns.saturating_sub(from))
    }

    /// When the guest began to have work for the vCPU that the host did not
    /// run: the gap's start, or for a halted gap its wake-up (None: never
    /// woken, never held off).
    pub fn held_off_from_ns(&self) -> Option<u64> {
        match (self.state, self.woken_ns) {
            (GapState::Halted, Some(w)) => Some(w.max(self.from_ns)),
            (GapState::Halted, None) => None,
            _ => Some(self.from_ns),
        }
    }
}

impl GapState {
    /// Its name in the protocol and in metrics' labels.
    pub fn label(self) -> &'static str {
        match self {
            GapState::Preempted => "preempted",
            GapState::Halted => "halted",
            GapState::Interrupted => "interrupted",
            GapState::Exit => "exit",
        }
    }
}

impl OccupantKind {
    /// Its name in the protocol and in metrics' labels.
    pub fn label(self) -> &'static str {
        match self {
            OccupantKind::Task => "task",
            OccupantKind::Vcpu => "vcpu",
            OccupantKind::OtherVcpu => "other-vcpu",
            OccupantKind::Irq => "irq",
            OccupantKind::Softirq => "softirq",
            OccupantKind::Idle => "idle",
            OccupantKind::Others => "others",
        }
    }
}

/// One vCPU's held-off time since the watch began, kept as gaps are
/// recorded (the bounds that drop old gaps do not lower it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldOff {
    /// By why the vCPU did not run, ns ([`Gap::held_off_ns`]).
    pub by_state: BTreeMap<GapState, u64>,
    /// By what held its host CPU meanwhile, ns.
    pub by_occupant: BTreeMap<OccupantKind, u64>,
    /// Gaps recorded.
    pub gaps: u64,
}

/// The timeline's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Gaps kept at most.
    pub max_gaps: usize,
    /// Gaps ending more than this before the newest event are dropped, ns.
    pub retention_ns: u64,
    /// Shorter gaps are not kept, ns.
    pub min_gap_ns: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_gaps: 16_384,
            retention_ns: 60_000_000_000,
            min_gap_ns: 20_000,
        }
    }
}

/// What the CPU was doing, innermost last.
#[derive(Debug, Clone, Default)]
struct CpuState {
    task: Option<(i32, String)>,
    softirq: Option<(String, u64)>,
    irq: Option<(u32, String, u64)>,
    /// The CPU's last event (None before its first).
    last_ns: Option<u64>,
}

#[derive(Debug, Clone)]
enum VcpuState {
    Unknown,
    Running { exit_ns: Option<u64> },
    Off(Gap),
}

/// The host's bounded record of the guest's vCPU gaps.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Host thread → the vCPUs it runs: one each under KVM and
    /// multi-threaded TCG, all of them under single-threaded TCG.
    threads: BTreeMap<i32, Vec<u32>>,
    limits: Limits,
    cpus: BTreeMap<usize, CpuState>,
    vcpus: BTreeMap<i32, VcpuState>,
    gaps: VecDeque<Gap>,
    seen_from: Option<u64>,
    seen_to: Option<u64>,
    dropped: u64,
    held_off: BTreeMap<u32, HeldOff>,
}

impl Timeline {
    /// A timeline of the vCPU threads `threads` ((host thread ID, vCPU)
    /// pairs; one thread may run several vCPUs), default limits.
    pub fn new(threads: impl IntoIterator<Item = (i32, u32)>) -> Self {
        Self::with_limits(threads, Limits::default())
    }

    /// The same with chosen limits.
    pub fn with_limits(pairs: impl IntoIterator<Item = (i32, u32)>, limits: Limits) -> Self {
        let mut threads: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
        for (tid, k) in pairs {
            let v = threads.entry(tid).or_default();
            if !v.contains(&k) {
                v.push(k);
                v.sort_unstable();
            }
        }
        let vcpus = threads.keys().map(|t| (*t, VcpuState::Unknown)).collect();
        Self {
            threads,
            limits,
            cpus: BTreeMap::new(),
            vcpus,
            gaps: VecDeque::new(),
            seen_from: None,
            seen_to: None,
            dropped: 0,
            held_off: BTreeMap::new(),
        }
    }

    /// Each vCPU's held-off time since the watch began.
    pub fn held_off(&self) -> &BTreeMap<u32, HeldOff> {
        &self.held_off
    }

    /// The host has watched from `ns` (its trace started then).
    pub fn started(&mut self, ns: u64) {
        self.seen_from = Some(self.seen_from.map_or(ns, |s| s.min(ns)));
        self.seen_to = Some(self.seen_to.unwrap_or(ns).max(ns));
    }

    /// The host has read every event up to `ns` (the reader drained its pipes then).
    pub fn read_up_to(&mut self, ns: u64) {
        self.seen_to = Some(self.seen_to.unwrap_or(ns).max(ns));
    }

    /// From when to when the host saw (None before it started).
    pub fn seen(&self) -> (Option<u64>, Option<u64>) {
        (self.seen_from, self.seen_to)
    }

    /// Gaps kept now.
    pub fn len(&self) -> usize {
        self.gaps.len()
    }

    /// No gap kept.
    pub fn is_empty(&self) -> bool {
        self.gaps.is_empty()
    }

    /// Gaps dropped by the bounds.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Takes one event (events of one CPU in time order).
    pub fn feed(&mut self, ev: &Event) {
        let ts = ev.ts_ns;
        if self.seen_from.is_none() {
            self.seen_from = Some(ts);
        }
        let mut st = self.cpus.remove(&ev.cpu).unwrap_or_default();
        match &mut st.task {
            // A task that exec'd since it was switched in has a new name
            // (a hog started through taskset and chrt ends as `sh`).
            Some((pid, comm)) if *pid == ev.pid => {
                if *comm != ev.comm {
                    comm.clone_from(&ev.comm);
                }
            }
            // The line names the task current when it was recorded, which
            // holds even where the trace shows no switch to it: the host's
            // trace can lack the switch from idle to a task a migration
            // brought (a SCHED_FIFO hog moved by `taskset`), and the hog's
            // next lines are then the only sign that it holds the CPU.
            _ => st.task = Some((ev.pid, ev.comm.clone())),
        }
        self.charge(ev.cpu, &st, ts);
        match &ev.kind {
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                next_comm,
                ..
            } => {
                self.switched_out(*prev_pid, prev_state, ev.cpu, ts);
                self.switched_in(*next_pid, ts);
                st.task = Some((*next_pid, next_comm.clone()));
                st.irq = None;
                st.softirq = None;
            }
            EventKind::Wakeup {
                pid, target_cpu, ..
            } => self.woken(*pid, *target_cpu, ts),
            EventKind::Migrate { pid, dest_cpu } => self.migrated(*pid, *dest_cpu),
            EventKind::IrqEntry { irq, name } => st.irq = Some((*irq, name.clone(), ts)),
            EventKind::IrqExit { .. } => {
                if let Some((irq, name, from)) = st.irq.take() {
                    let who = self.occupant_of_irq(irq, &name, ev.cpu);
                    self.interrupted(&st, ev.cpu, from, ts, who);
                }
            }
            EventKind::SoftirqEntry { name } => st.softirq = Some((name.clone(), ts)),
            EventKind::SoftirqExit { .. } => {
                if let Some((name, from)) = st.softirq.take() {
                    let who = occupant(
                        OccupantKind::Softirq,
                        format!("softirq {name}"),
                        None,
                        ev.cpu,
                    );
                    self.interrupted(&st, ev.cpu, from, ts, who);
                }
            }
            EventKind::Other { name } if name == "kvm_exit" => {
                if let Some(VcpuState::Running { exit_ns }) = self.vcpus.get_mut(&ev.pid) {
                    *exit_ns = Some(ts);
                }
            }
            EventKind::Other { name } if name == "kvm_entry" => {
                self.entered_guest(ev.pid, ev.cpu, ts)
            }
            _ => {}
        }
        st.last_ns = Some(st.last_ns.map_or(ts, |l| l.max(ts)));
        self.cpus.insert(ev.cpu, st);
    }

    /// A thread switched out on `cpu`: a vCPU's gap opens, halted when it
    /// went to sleep, preempted when it was still runnable.
    fn switched_out(&mut self, pid: i32, state: &str, cpu: usize, ts: u64) {
        let Some(k) = self.first_vcpu(pid) else {
            return;
        };
        let halted = !state.starts_with('R');
        self.vcpus.insert(
            pid,
            VcpuState::Off(Gap {
                vcpu: k,
                from_ns: ts,
                to_ns: ts,
                state: if halted {
                    GapState::Halted
                } else {
                    GapState::Preempted
                },
                host_cpu: cpu,
                woken_ns: None,
                by: Vec::new(),
                open: false,
            }),
        );
    }

    /// A thread switched in: a vCPU's gap closes and is kept; it runs.
    fn switched_in(&mut self, pid: i32, ts: u64) {
        if !self.threads.contains_key(&pid) {
            return;
        }
        if let Some(VcpuState::Off(mut g)) = self.vcpus.remove(&pid) {
            // Events of two CPUs read in separate drains can come out of
            // order: a gap never ends before it began.
            g.to_ns = ts.max(g.from_ns);
            self.keep(pid, g);
        }
        self.vcpus.insert(pid, VcpuState::Running { exit_ns: None });
    }

    /// A wakeup: a halted vCPU's first one marks when it became runnable,
    /// and on which host CPU.
    fn woken(&mut self, pid: i32, target_cpu: Option<usize>, ts: u64) {
        if let Some(VcpuState::Off(g)) = self.vcpus.get_mut(&pid) {
            if g.state == GapState::Halted && g.woken_ns.is_none() {
                g.woken_ns = Some(ts);
                if let Some(c) = target_cpu {
                    g.host_cpu = c;
                }
            }
        }
    }

    /// A vCPU thread waiting to run was moved to another CPU's run queue
    /// (its affinity changed, or the load balancer pulled it): from now on
    /// it waits for that CPU, and what holds that CPU is what keeps it off.
    fn migrated(&mut self, pid: i32, dest_cpu: usize) {
        if let Some(VcpuState::Off(g)) = self.vcpus.get_mut(&pid) {
            if g.state != GapState::Halted || g.woken_ns.is_some() {
                g.host_cpu = dest_cpu;
            }
        }
    }

    /// `kvm_entry` after a `kvm_exit`: the time in between is an exit gap.
    fn entered_guest(&mut self, pid: i32, cpu: usize, ts: u64) {
        let exit = match self.vcpus.get_mut(&pid) {
            Some(VcpuState::Running { exit_ns }) => exit_ns.take(),
            _ => None,
        };
        if let (Some(from), Some(k)) = (exit, self.first_vcpu(pid)) {
            self.keep(
                pid,
                Gap {
                    vcpu: k,
                    from_ns: from,
                    to_ns: ts.max(from),
                    state: GapState::Exit,
                    host_cpu: cpu,
                    woken_ns: None,
                    by: Vec::new(),
                    open: false,
                },
            );
        }
    }

    /// The time since the CPU's last event, charged to what held it, in
    /// every open gap waiting for that CPU (a halted one only once woken).
    fn charge(&mut self, cpu: usize, st: &CpuState, ts: u64) {
        let Some(last) = st.last_ns else { return };
        let who = self.occupant_now(st, cpu);
        for v in self.vcpus.values_mut() {
            let VcpuState::Off(g) = v else { continue };
            if g.host_cpu != cpu {
                continue;
            }
            let since = match (g.state, g.woken_ns) {
                (GapState::Halted, None) => continue,
                (GapState::Halted, Some(w)) => w,
                _ => g.from_ns,
            };
            let start = last.max(since);
            if ts <= start {
                continue;
            }
            add(&mut g.by, &who, ts - start);
        }
    }

    fn occupant_now(&self, st: &CpuState, cpu: usize) -> Occupant {
        if let Some((irq, name, _)) = &st.irq {
            return self.occupant_of_irq(*irq, name, cpu);
        }
        if let Some((name, _)) = &st.softirq {
            return occupant(OccupantKind::Softirq, format!("softirq {name}"), None, cpu);
        }
        let (pid, comm) = st.task.clone().unwrap_or((0, String::new()));
        if pid == 0 {
            return occupant(OccupantKind::Idle, "idle".into(), None, cpu);
        }
        if let Some(k) = self.first_vcpu(pid) {
            let mut o = occupant(OccupantKind::Vcpu, comm, Some(pid), cpu);
            o.vcpu = Some(k);
            return o;
        }
        let kind = if is_vcpu_thread_name(&comm) {
            OccupantKind::OtherVcpu
        } else {
            OccupantKind::Task
        };
        occupant(kind, comm, Some(pid), cpu)
    }

    fn occupant_of_irq(&self, irq: u32, name: &str, cpu: usize) -> Occupant {
        occupant(OccupantKind::Irq, format!("irq {irq} {name}"), None, cpu)
    }

    /// An IRQ or softirq ran from `from` to `to` on `cpu`: a gap of the
    /// vCPU whose thread was current there.
    fn interrupted(&mut self, st: &CpuState, cpu: usize, from: u64, to: u64, mut who: Occupant) {
        let Some((pid, _)) = &st.task else { return };
        let pid = *pid;
        let Some(k) = self.first_vcpu(pid) else {
            return;
        };
        if !matches!(self.vcpus.get(&pid), Some(VcpuState::Running { .. })) {
            return;
        }
        who.ns = to.saturating_sub(from);
        self.keep(
            pid,
            Gap {
                vcpu: k,
                from_ns: from,
                to_ns: to.max(from),
                state: GapState::Interrupted,
                host_cpu: cpu,
                woken_ns: None,
                by: vec![who],
                open: false,
            },
        );
    }

    fn first_vcpu(&self, tid: i32) -> Option<u32> {
        self.threads.get(&tid).and_then(|v| v.first().copied())
    }

    /// Keeps a gap of thread `tid`: one for each vCPU the thread runs.
    fn keep(&mut self, tid: i32, mut g: Gap) {
        if g.len_ns() < self.limits.min_gap_ns {
            return;
        }
        fold(&mut g.by);
        let newest = g.to_ns;
        for k in self.threads.get(&tid).cloned().unwrap_or_default() {
            let mut one = g.clone();
            one.vcpu = k;
            let h = self.held_off.entry(k).or_default();
            *h.by_state.entry(one.state).or_default() += one.held_off_ns();
            for o in &one.by {
                *h.by_occupant.entry(o.kind).or_default() += o.ns;
            }
            h.gaps += 1;
            self.gaps.push_back(one);
        }
        while self.gaps.len() > self.limits.max_gaps
            || self
                .gaps
                .front()
                .is_some_and(|f| f.to_ns + self.limits.retention_ns < newest)
        {
            self.gaps.pop_front();
            self.dropped += 1;
        }
    }

    /// Gaps of `vcpu` (or every vCPU) overlapping `from..to`, at least
    /// `min_ns` long, oldest first, open ones (up to the last read) too; at
    /// most `max`, and whether more matched.
    pub fn gaps(
        &self,
        vcpu: Option<u32>,
        from: u64,
        to: u64,
        min_ns: u64,
        max: usize,
    ) -> (Vec<Gap>, bool) {
        let seen_to = self.seen_to.unwrap_or(0);
        let open = self.vcpus.iter().flat_map(|(tid, v)| {
            let ks = match v {
                VcpuState::Off(_) => self.threads.get(tid).cloned().unwrap_or_default(),
                _ => Vec::new(),
            };
            ks.into_iter().filter_map(move |k| match v {
                VcpuState::Off(g) => {
                    let mut g = g.clone();
                    g.vcpu = k;
                    g.to_ns = seen_to.max(g.from_ns);
                    g.open = true;
                    fold(&mut g.by);
                    Some(g)
                }
                _ => None,
            })
        });
        let mut found: Vec<Gap> = self
            .gaps
            .iter()
            .cloned()
            .chain(open)
            .filter(|g| vcpu.is_none_or(|k| g.vcpu == k))
            .filter(|g| g.from_ns <= to && g.to_ns >= from && g.len_ns() >= min_ns)
            .collect();
        found.sort_by_key(|g| (g.from_ns, g.vcpu));
        let truncated = found.len() > max;
        found.truncate(max);
        (found, truncated)
    }
}

fn occupant(kind: OccupantKind, name: String, pid: Option<i32>, cpu: usize) -> Occupant {
    Occupant {
        kind,
        name,
        pid,
        vcpu: None,
        host_cpu: cpu,
        ns: 0,
    }
}

/// Keeps a gap's [`MAX_OCCUPANTS`] - 1 biggest occupants by name and sums
/// the rest as "others"; biggest first.
fn fold(by: &mut Vec<Occupant>) {
    by.sort_by_key(|o| (o.kind == OccupantKind::Others, std::cmp::Reverse(o.ns)));
    if by.len() > MAX_OCCUPANTS {
        let rest: u64 = by.drain(MAX_OCCUPANTS - 1..).map(|o| o.ns).sum();
        let host_cpu = by.first().map_or(0, |o| o.host_cpu);
        by.push(others(host_cpu, rest));
    }
    by.sort_by_key(|o| std::cmp::Reverse(o.ns));
}

/// Adds `ns` of `who` to a gap's occupants, at most [`OPEN_OCCUPANTS`] named.
fn add(by: &mut Vec<Occupant>, who: &Occupant, ns: u64) {
    if let Some(o) = by.iter_mut().find(|o| o.is_same_as(who)) {
        o.ns += ns;
        o.name.clone_from(&who.name);
        return;
    }
    if by.len() + 1 < OPEN_OCCUPANTS {
        let mut o = who.clone();
        o.ns = ns;
        by.push(o);
        return;
    }
    match by.iter_mut().find(|o| o.kind == OccupantKind::Others) {
        Some(o) => o.ns += ns,
        None => by.push(others(who.host_cpu, ns)),
    }
}

/// The one entry that sums a gap's occupants not named.
fn others(host_cpu: usize, ns: u64) -> Occupant {
    let mut o = occupant(OccupantKind::Others, "others".into(), None, host_cpu);
    o.ns = ns;
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts_us: u64, cpu: usize, pid: i32, comm: &str, kind: EventKind) -> Event {
        Event {
            ts_ns: ts_us * 1000,
            cpu,
            pid,
            comm: comm.into(),
            kind,
            need_resched: false,
            raw: String::new(),
        }
    }

    /// A wakeup of vCPU 1's thread (101) onto host CPU `target`, recorded
    /// on `cpu` in the name of `current`, the task running there.
    fn wakes_vcpu_1(ts_us: u64, cpu: usize, current: (i32, &str), target: usize) -> Event {
        ev(
            ts_us,
            cpu,
            current.0,
            current.1,
            EventKind::Wakeup {
                comm: "CPU 1/TCG".into(),
                pid: 101,
                prio: 120,
                target_cpu: Some(target),
            },
        )
    }

    fn switch(ts_us: u64, cpu: usize, prev: (i32, &str, &str), next: (i32, &str)) -> Event {
        ev(
            ts_us,
            cpu,
            prev.0,
            prev.1,
            EventKind::Switch {
                prev_comm: prev.1.into(),
                prev_pid: prev.0,
                prev_state: prev.2.into(),
                next_comm: next.1.into(),
                next_pid: next.0,
                next_prio: 120,
            },
        )
    }

    fn timeline() -> Timeline {
        Timeline::new(BTreeMap::from([(100, 0), (101, 1)]))
    }

    /// vCPU 1 (thread 101) preempted on host CPU 1 by the host task
    /// stress-ng (4711) from 1 ms to 16.1 ms: 15.1 ms held off.
    fn preempted_by_stress_ng(t: &mut Timeline) {
        t.feed(&switch(
            1_000,
            1,
            (101, "CPU 1/TCG", "R+"),
            (4711, "stress-ng"),
        ));
        t.feed(&switch(
            16_100,
            1,
            (4711, "stress-ng", "S"),
            (101, "CPU 1/TCG"),
        ));
    }

    #[test]
    fn held_off_time_counts_a_preemption_whole_and_a_halt_from_its_wake_up_by_state_and_occupant() {
        let mut t = timeline();
        preempted_by_stress_ng(&mut t);
        // Halted 20 ms, woken at 30 ms, run 3 ms later.
        t.feed(&switch(
            20_000,
            1,
            (101, "CPU 1/TCG", "S"),
            (0, "swapper/1"),
        ));
        t.feed(&switch(25_000, 1, (0, "swapper/1", "R"), (77, "hog")));
        t.feed(&wakes_vcpu_1(30_000, 1, (77, "hog"), 1));
        t.feed(&switch(33_000, 1, (77, "hog", "S"), (101, "CPU 1/TCG")));
        let h = &t.held_off()[&1];
        assert_eq!(h.gaps, 2);
        assert_eq!(h.by_state[&GapState::Preempted], 15_100_000);
        assert_eq!(h.by_state[&GapState::Halted], 3_000_000);
        assert_eq!(h.by_occupant[&OccupantKind::Task], 18_100_000);
        assert!(!t.held_off().contains_key(&0));
    }

    #[test]
    fn the_time_between_a_kvm_exit_and_the_next_entry_is_an_exit_gap() {
        let mut t = timeline();
        let other = |name: &str| EventKind::Other { name: name.into() };
        t.feed(&switch(1_000, 1, (0, "swapper/1", "R"), (101, "CPU 1/KVM")));
        t.feed(&ev(2_000, 1, 101, "CPU 1/KVM", other("kvm_exit")));
        t.feed(&ev(2_500, 1, 101, "CPU 1/KVM", other("kvm_entry")));
        // An entry with no exit before it is no gap.
        t.feed(&ev(3_000, 1, 101, "CPU 1/KVM", other("kvm_entry")));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(
            (
                gaps[0].state,
                gaps[0].from_ns,
                gaps[0].to_ns,
                gaps[0].host_cpu
            ),
            (GapState::Exit, 2_000_000, 2_500_000, 1)
        );
    }

    #[test]
    fn a_host_task_that_preempts_a_vcpu_is_named_with_its_pid_and_time() {
        let mut t = timeline();
        preempted_by_stress_ng(&mut t);
        let (gaps, more) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        assert!(!more);
        assert_eq!(gaps.len(), 1);
        let g = &gaps[0];
        assert_eq!(
            (g.state, g.from_ns, g.to_ns),
            (GapState::Preempted, 1_000_000, 16_100_000)
        );
        assert_eq!(g.by[0].kind, OccupantKind::Task);
        assert_eq!((g.by[0].pid, g.by[0].ns), (Some(4711), 15_100_000));
        assert_eq!(g.by[0].name, "stress-ng");
    }

    #[test]
    fn a_vcpu_that_slept_is_halted_and_only_its_runnable_time_is_charged() {
        let mut t = timeline();
        t.feed(&switch(1_000, 1, (101, "CPU 1/TCG", "S"), (0, "swapper/1")));
        t.feed(&switch(5_000, 1, (0, "swapper/1", "R"), (77, "hog")));
        let wake = wakes_vcpu_1(9_000, 1, (77, "hog"), 1);
        t.feed(&wake);
        t.feed(&switch(12_000, 1, (77, "hog", "S"), (101, "CPU 1/TCG")));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        let g = &gaps[0];
        assert_eq!(g.state, GapState::Halted);
        assert_eq!(g.woken_ns, Some(9_000_000));
        assert_eq!(g.by.len(), 1, "{:?}", g.by);
        assert_eq!((g.by[0].pid, g.by[0].ns), (Some(77), 3_000_000));
    }

    #[test]
    fn a_task_holding_the_cpu_after_many_short_ones_is_named_first_in_the_gap() {
        let mut t = timeline();
        // Halted, woken at once, then kept waiting behind twelve short
        // tasks before a hog holds host CPU 1 for 40 ms.
        t.feed(&switch(1_000, 1, (101, "CPU 1/TCG", "S"), (200, "short")));
        t.feed(&wakes_vcpu_1(1_005, 0, (55, "qemu"), 1));
        for i in 0..12 {
            let ts = 1_100 + i as u64 * 100;
            t.feed(&switch(ts, 1, (200 + i, "short", "S"), (201 + i, "short")));
        }
        t.feed(&switch(2_400, 1, (212, "short", "S"), (77, "hog")));
        t.feed(&switch(42_400, 1, (77, "hog", "X"), (101, "CPU 1/TCG")));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        let g = &gaps[0];
        assert_eq!(g.state, GapState::Halted);
        assert_eq!(
            (g.by[0].pid, g.by[0].ns),
            (Some(77), 40_000_000),
            "{:?}",
            g.by
        );
        assert_eq!(g.by.len(), MAX_OCCUPANTS);
        assert_eq!(g.by.iter().map(|o| o.ns).sum::<u64>(), g.held_off_ns());
    }

    #[test]
    fn a_task_whose_switch_in_the_trace_lacks_is_known_by_the_lines_it_is_current_in() {
        let mut t = timeline();
        t.feed(&switch(1_000, 1, (101, "CPU 1/TCG", "S"), (0, "swapper/1")));
        t.feed(&wakes_vcpu_1(1_500, 0, (55, "qemu"), 1));
        // The hog holds CPU 1 from about 2 ms; no switch to it is seen,
        // only the softirqs that interrupt it.
        for k in 0..10u64 {
            let at = 2_000 + k * 4_000;
            let name = "RCU".to_string();
            t.feed(&ev(
                at,
                1,
                77,
                "sh",
                EventKind::SoftirqEntry { name: name.clone() },
            ));
            t.feed(&ev(at + 10, 1, 77, "sh", EventKind::SoftirqExit { name }));
        }
        t.feed(&switch(42_000, 1, (77, "sh", "X"), (101, "CPU 1/TCG")));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        let g = &gaps[0];
        assert_eq!(g.state, GapState::Halted);
        assert_eq!(g.by[0].pid, Some(77), "{:?}", g.by);
        assert!(g.by[0].ns >= 39_000_000, "{:?}", g.by);
    }

    #[test]
    fn a_woken_vcpu_moved_to_another_cpu_is_kept_off_by_what_holds_that_cpu() {
        let mut t = timeline();
        t.feed(&switch(0, 0, (0, "swapper/0", "R"), (55, "rustc")));
        t.feed(&switch(500, 0, (55, "rustc", "R"), (101, "CPU 1/TCG")));
        t.feed(&switch(1_000, 0, (101, "CPU 1/TCG", "S"), (55, "rustc")));
        t.feed(&switch(1_000, 1, (0, "swapper/1", "R"), (77, "hog")));
        // Each line names the task current on its CPU: rustc, interrupted
        // by the wakeup (a timer) and by the move (an IPI).
        let wake = |ts, cpu| wakes_vcpu_1(ts, cpu, (55, "rustc"), 0);
        t.feed(&wake(2_000, 0));
        // Its affinity set to host CPU 1 while it waited on CPU 0.
        t.feed(&ev(
            3_000,
            0,
            55,
            "rustc",
            EventKind::Migrate {
                pid: 101,
                dest_cpu: 1,
            },
        ));
        t.feed(&switch(50_000, 1, (77, "hog", "X"), (101, "CPU 1/TCG")));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        let g = &gaps[0];
        assert_eq!((g.state, g.host_cpu), (GapState::Halted, 1));
        assert_eq!(g.by[0].pid, Some(77), "{:?}", g.by);
        assert!(g.by[0].ns >= 47_000_000, "{:?}", g.by);
        assert_eq!(
            g.by.iter().find(|o| o.pid == Some(55)).map(|o| o.ns),
            Some(1_000_000),
            "rustc held CPU 0 from the wakeup to the move: {:?}",
            g.by
        );
    }

    #[test]
    fn another_vcpu_of_the_guest_and_another_guests_vcpu_are_told_apart() {
        let mut t = timeline();
        t.feed(&switch(0, 1, (101, "CPU 1/TCG", "R"), (100, "CPU 0/TCG")));
        t.feed(&switch(
            2_000,
            1,
            (100, "CPU 0/TCG", "R"),
            (900, "CPU 3/KVM"),
        ));
        t.feed(&switch(
            3_000,
            1,
            (900, "CPU 3/KVM", "R"),
            (101, "CPU 1/TCG"),
        ));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        let by: Vec<_> = gaps[0].by.iter().map(|o| (o.kind, o.vcpu, o.ns)).collect();
        assert_eq!(
            by,
            [
                (OccupantKind::Vcpu, Some(0), 2_000_000),
                (OccupantKind::OtherVcpu, None, 1_000_000)
            ]
        );
    }

    #[test]
    fn an_irq_while_the_vcpu_thread_runs_is_an_interrupted_gap() {
        let mut t = timeline();
        t.feed(&switch(0, 1, (0, "swapper/1", "R"), (101, "CPU 1/TCG")));
        t.feed(&ev(
            100,
            1,
            101,
            "CPU 1/TCG",
            EventKind::IrqEntry {
                irq: 24,
                name: "eth0".into(),
            },
        ));
        t.feed(&ev(
            400,
            1,
            101,
            "CPU 1/TCG",
            EventKind::IrqExit { irq: 24 },
        ));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].state, GapState::Interrupted);
        assert_eq!(gaps[0].by[0].name, "irq 24 eth0");
        assert_eq!(gaps[0].len_ns(), 300_000);
    }

    #[test]
    fn a_gap_still_open_is_answered_up_to_the_last_read() {
        let mut t = timeline();
        t.feed(&switch(1_000, 1, (101, "CPU 1/TCG", "R+"), (4711, "hog")));
        t.read_up_to(9_000_000);
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        assert!(gaps[0].open);
        assert_eq!(gaps[0].to_ns, 9_000_000);
        assert!(t.gaps(Some(0), 0, u64::MAX, 0, 10).0.is_empty());
    }

    #[test]
    fn memory_is_bounded_by_count_and_age_and_occupants_by_number() {
        let mut t = Timeline::with_limits(
            BTreeMap::from([(101, 1)]),
            Limits {
                max_gaps: 5,
                retention_ns: 1_000_000_000,
                min_gap_ns: 0,
            },
        );
        for i in 0..100u64 {
            t.feed(&switch(
                i * 100,
                1,
                (101, "CPU 1/TCG", "R"),
                (1000 + i as i32, "t"),
            ));
            t.feed(&switch(
                i * 100 + 50,
                1,
                (1000 + i as i32, "t", "S"),
                (101, "CPU 1/TCG"),
            ));
        }
        assert_eq!(t.len(), 5);
        assert_eq!(t.dropped(), 95);
        // An old gap falls out once a gap ends a retention later.
        t.feed(&switch(5_000_000, 1, (101, "CPU 1/TCG", "R"), (1, "late")));
        t.feed(&switch(5_000_100, 1, (1, "late", "S"), (101, "CPU 1/TCG")));
        assert_eq!(t.len(), 1);
        // Twenty occupants in one gap: eight entries, the rest as "others".
        t.feed(&switch(6_000_000, 1, (101, "CPU 1/TCG", "R"), (2000, "a")));
        for i in 0..20i32 {
            t.feed(&switch(
                6_000_010 + i as u64 * 10,
                1,
                (2000 + i, "a", "R"),
                (2001 + i, "a"),
            ));
        }
        t.feed(&switch(6_001_000, 1, (2020, "a", "R"), (101, "CPU 1/TCG")));
        let (gaps, _) = t.gaps(Some(1), 6_000_000_000, u64::MAX, 0, 10);
        assert_eq!(gaps[0].by.len(), MAX_OCCUPANTS);
        assert!(gaps[0].by.iter().any(|o| o.kind == OccupantKind::Others));
        let total: u64 = gaps[0].by.iter().map(|o| o.ns).sum();
        assert_eq!(total, gaps[0].len_ns());
    }

    #[test]
    fn a_host_task_that_execs_is_one_occupant_under_its_latest_name() {
        let mut t = timeline();
        t.feed(&switch(
            1_000,
            1,
            (101, "CPU 1/TCG", "R+"),
            (4711, "taskset"),
        ));
        t.feed(&ev(
            2_000,
            1,
            4711,
            "sh",
            EventKind::SoftirqEntry {
                name: "TIMER".into(),
            },
        ));
        t.feed(&ev(
            2_010,
            1,
            4711,
            "sh",
            EventKind::SoftirqExit {
                name: "TIMER".into(),
            },
        ));
        t.feed(&switch(41_000, 1, (4711, "sh", "S"), (101, "CPU 1/TCG")));
        let (gaps, _) = t.gaps(Some(1), 0, u64::MAX, 0, 10);
        let task: Vec<_> = gaps[0]
            .by
            .iter()
            .filter(|o| o.kind == OccupantKind::Task)
            .map(|o| (o.name.as_str(), o.pid, o.ns))
            .collect();
        assert_eq!(task, [("sh", Some(4711), 39_990_000)]);
    }

    #[test]
    fn one_thread_running_every_vcpu_gives_each_vcpu_the_gap() {
        let mut t = Timeline::new([(300, 0), (300, 1)]);
        t.feed(&switch(
            1_000,
            1,
            (300, "ALL CPUs/TCG", "R+"),
            (4711, "hog"),
        ));
        t.feed(&switch(2_000, 1, (4711, "hog", "S"), (300, "ALL CPUs/TCG")));
        let (gaps, _) = t.gaps(None, 0, u64::MAX, 0, 10);
        let who: Vec<_> = gaps.iter().map(|g| (g.vcpu, g.by[0].pid)).collect();
        assert_eq!(who, [(0, Some(4711)), (1, Some(4711))]);
    }
}
