//! A snapshot of the per-CPU counters and threads, and the thin layer that reads
//! one from the kernel. Parsing is separate from reading, so fixtures work.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Kernel, Procfs};
use cpushield_parse::interrupts::{parse_interrupts, IrqLine};
use cpushield_parse::irq_affinity::{IrqAffinity, IrqAffinityText};
use cpushield_parse::pid_stat::{parse_thread_stat, ThreadStat};
use cpushield_parse::schedstat::parse_schedstat_runtime;
use cpushield_parse::softirqs::{parse_softirqs, SoftirqCounts};
use cpushield_parse::stat::{parse_cpu_times, CpuTimes};
use cpushield_parse::ParseError;
use std::collections::BTreeMap;

/// The text of the files a snapshot is made of, as read.
#[derive(Debug, Clone, Default)]
pub struct RawSnapshot {
    /// CLOCK_MONOTONIC time of the reading, in ns.
    pub at_ns: u64,
    /// /proc/interrupts.
    pub interrupts: String,
    /// /proc/softirqs.
    pub softirqs: String,
    /// /proc/stat.
    pub stat: String,
    /// Per thread: (process id, `stat` text, `schedstat` text if readable).
    pub threads: Vec<RawThread>,
    /// USER_HZ, the unit of /proc/stat and of utime/stime.
    pub user_hz: u64,
    /// Each IRQ's smp_affinity_list and effective_affinity_list, by IRQ.
    pub irq_affinity: BTreeMap<u32, IrqAffinityText>,
}

/// The files of one thread, as read.
#[derive(Debug, Clone, Default)]
pub struct RawThread {
    /// The process (thread group) id.
    pub pid: i32,
    /// /proc/PID/task/TID/stat.
    pub stat: String,
    /// /proc/PID/task/TID/schedstat, when the kernel has it.
    pub schedstat: Option<String>,
    /// The thread's CPU affinity, when it was asked for.
    pub affinity: Option<CpuSet>,
    /// Its process's /proc/PID/cgroup, read with the affinities.
    pub cgroup: Option<String>,
}

/// One thread at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSample {
    /// The process (thread group) id.
    pub pid: i32,
    /// What its stat file says.
    pub stat: ThreadStat,
    /// Total CPU time it has run, in ns: schedstat's exact sum when present,
    /// else (utime + stime) ticks.
    pub runtime_ns: u64,
    /// Its CPU affinity, when read.
    pub affinity: Option<CpuSet>,
    /// It belongs to a Kubernetes pod (a `kubepods*` cgroup), which the
    /// shield leaves to the kubelet's CPU manager. False when not read.
    pub in_kubepods: bool,
}

/// Parsed counters and threads at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC time, ns.
    pub at_ns: u64,
    /// /proc/interrupts lines.
    pub interrupts: Vec<IrqLine>,
    /// /proc/softirqs counts.
    pub softirqs: SoftirqCounts,
    /// /proc/stat per-CPU times (USER_HZ ticks).
    pub cpu_times: BTreeMap<usize, CpuTimes>,
    /// Every thread that could be read (threads that exit while being read are skipped).
    pub threads: Vec<ThreadSample>,
    /// USER_HZ.
    pub user_hz: u64,
    /// Each IRQ's requested and effective CPUs (IRQs whose files do not
    /// parse are left out): a move pending at the start of an interval is
    /// told from one the shield never made.
    pub irq_affinity: BTreeMap<u32, IrqAffinity>,
}

impl Snapshot {
    /// Parses a raw snapshot. Threads whose files do not parse (they exited
    /// mid-read) are skipped; the /proc counter files must parse.
    pub fn parse(raw: &RawSnapshot) -> Result<Snapshot, ParseError> {
        let user_hz = raw.user_hz.max(1);
        let threads = raw
            .threads
            .iter()
            .filter_map(|t| parse_thread(t, user_hz))
            .collect();
        Ok(Snapshot {
            at_ns: raw.at_ns,
            interrupts: parse_interrupts(&raw.interrupts)?,
            softirqs: parse_softirqs(&raw.softirqs)?,
            cpu_times: parse_cpu_times(&raw.stat)?,
            threads,
            user_hz,
            irq_affinity: raw
                .irq_affinity
                .iter()
                .filter_map(|(irq, text)| Some((*irq, IrqAffinity::parse(text).ok()?)))
                .collect(),
        })
    }
}

/// Parses one thread's files.
pub fn parse_thread(raw: &RawThread, user_hz: u64) -> Option<ThreadSample> {
    let stat = parse_thread_stat(&raw.stat).ok()?;
    let runtime_ns = raw
        .schedstat
        .as_deref()
        .and_then(parse_schedstat_runtime)
        .unwrap_or_else(|| ticks_to_ns(stat.utime.saturating_add(stat.stime), user_hz));
    Some(ThreadSample {
        pid: raw.pid,
        stat,
        runtime_ns,
        affinity: raw.affinity.clone(),
        in_kubepods: raw
            .cgroup
            .as_deref()
            .is_some_and(cpushield_shield::layout::in_kubepods),
    })
}

/// `ticks` of USER_HZ in nanoseconds, saturating instead of overflowing on
/// absurd counters.
fn ticks_to_ns(ticks: u64, user_hz: u64) -> u64 {
    let ns = ticks as u128 * 1_000_000_000 / user_hz.max(1) as u128;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// What to read into a snapshot.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// Also read each thread's affinity (one syscall per thread) and each
    /// process's cgroup (one read per process).
    pub affinities: bool,
}

/// Reads the counter files and every thread's stat/schedstat (the thin layer).
pub fn read_raw(
    kernel: &dyn Kernel,
    opts: ReadOptions,
    now_ns: u64,
) -> std::io::Result<RawSnapshot> {
    let proc = Procfs::new(kernel);
    Ok(RawSnapshot {
        at_ns: now_ns,
        interrupts: proc.interrupts()?,
        softirqs: proc.softirqs()?,
        stat: proc.stat()?,
        threads: read_threads(kernel, opts),
        user_hz: user_hz(),
        irq_affinity: cpushield_kernel::irq::affinity_texts(kernel),
    })
}

/// Reads the stat and schedstat files of every thread of every process.
/// A thread that cannot be read (it ended, or belongs to another user under
/// hidepid) is passed over: a sample is what could be seen.
pub fn read_threads(kernel: &dyn Kernel, opts: ReadOptions) -> Vec<RawThread> {
    let proc = Procfs::new(kernel);
    let mut out = Vec::new();
    for pid in proc.pids().unwrap_or_default() {
        let Ok(Some(tids)) = proc.threads(pid) else {
            continue;
        };
        let cgroup = if opts.affinities {
            proc.process_file(pid, "cgroup").ok().flatten()
        } else {
            None
        };
        for tid in tids {
            let Ok(Some(stat)) = proc.thread_file(pid, tid, "stat") else {
                continue;
            };
            let schedstat = proc.thread_file(pid, tid, "schedstat").ok().flatten();
            let affinity = if opts.affinities {
                kernel.get_affinity(tid).ok()
            } else {
                None
            };
            out.push(RawThread {
                pid,
                stat,
                schedstat,
                affinity,
                cgroup: cgroup.clone(),
            });
        }
    }
    out
}

/// USER_HZ (clock ticks per second of /proc/stat and utime/stime), from
/// the kernel door.
pub use cpushield_kernel::user_hz;
