//! Placement and scheduling of the calling thread: CPU affinity, policy and
//! priority, memory locking, stack pre-faulting, and holding
//! /dev/cpu_dma_latency at zero.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Kernel, SchedParams};
use std::fs::File;
use std::io::{self, Write};

/// A scheduling policy with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_OTHER, normal time sharing, with a nice value.
    Other {
        /// Nice value -20..=19.
        nice: i32,
    },
    /// SCHED_FIFO at priority 1..=99.
    Fifo(u8),
    /// SCHED_RR at priority 1..=99.
    RoundRobin(u8),
    /// SCHED_IDLE (below every nice level of SCHED_OTHER) with a nice value:
    /// best-effort work that runs only when nothing else on the CPU wants it
    /// (`cpushield run --share`, the Hyades paper's ARTiS sharing).
    Idle {
        /// Nice value -20..=19 (kept by the kernel; the weight is SCHED_IDLE's).
        nice: i32,
    },
    /// SCHED_DEADLINE with runtime <= deadline <= period, in nanoseconds.
    Deadline {
        /// Worst-case run time per period.
        runtime_ns: u64,
        /// Relative deadline.
        deadline_ns: u64,
        /// Period.
        period_ns: u64,
    },
}

impl Policy {
    /// Checks the parameters: priority in 1..=99, nice in -20..=19, deadline
    /// ordering and SCHED_DEADLINE's 1024 ns minimum runtime. The message says
    /// what is wrong and what would be right.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Policy::Fifo(p) | Policy::RoundRobin(p) if !(1..=99).contains(&p) => {
                Err(format!("priority {p} is out of range: use 1..99"))
            }
            Policy::Other { nice } | Policy::Idle { nice } if !(-20..=19).contains(&nice) => {
                Err(format!("nice {nice} is out of range: use -20..19"))
            }
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
            } => {
                if runtime_ns < 1024 {
                    Err(format!(
                        "deadline runtime {runtime_ns}ns is below the kernel's minimum of 1024ns"
                    ))
                } else if !(runtime_ns <= deadline_ns && deadline_ns <= period_ns) {
                    Err(format!(
                        "deadline parameters need runtime <= deadline <= period, got {runtime_ns}/{deadline_ns}/{period_ns} ns"
                    ))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

/// A real-time priority as typed (`80`), in 1..=99 as [`Policy::validate`]
/// checks it.
pub fn parse_priority(text: &str) -> Result<u8, String> {
    let p: u8 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a priority: use 1..99"))?;
    Policy::Fifo(p).validate().map(|()| p)
}

/// A nice value as typed (`-5`), in -20..=19.
pub fn parse_nice(text: &str) -> Result<i32, String> {
    let n: i32 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a nice value: use -20..19"))?;
    Policy::Other { nice: n }.validate().map(|()| n)
}

/// SCHED_DEADLINE as typed, `RUNTIME/DEADLINE/PERIOD`, each part read by
/// `duration` (`200us/1ms/1ms`), checked as [`Policy::validate`] checks it.
pub fn parse_deadline(
    text: &str,
    duration: impl Fn(&str) -> Result<std::time::Duration, String>,
) -> Result<Policy, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let [r, d, p] = parts[..] else {
        return Err(format!(
            "'{text}' is not RUNTIME/DEADLINE/PERIOD: use e.g. 200us/1ms/1ms"
        ));
    };
    let ns = |t: &str| duration(t).map(|d| d.as_nanos().min(u64::MAX as u128) as u64);
    let policy = Policy::Deadline {
        runtime_ns: ns(r)?,
        deadline_ns: ns(d)?,
        period_ns: ns(p)?,
    };
    policy.validate().map(|()| policy)
}

const SCHED_DEADLINE: u32 = 6;

/// The kernel's scheduling parameters for `policy` (struct sched_attr's fields).
pub(crate) fn sched_params(policy: Policy) -> SchedParams {
    let mut p = SchedParams::default();
    match policy {
        Policy::Other { nice } => {
            p.policy = libc::SCHED_OTHER as u32;
            p.nice = nice;
        }
        Policy::Idle { nice } => {
            p.policy = libc::SCHED_IDLE as u32;
            p.nice = nice;
        }
        Policy::Fifo(prio) => {
            p.policy = libc::SCHED_FIFO as u32;
            p.priority = prio as u32;
        }
        Policy::RoundRobin(prio) => {
            p.policy = libc::SCHED_RR as u32;
            p.priority = prio as u32;
        }
        Policy::Deadline {
            runtime_ns,
            deadline_ns,
            period_ns,
        } => {
            p.policy = SCHED_DEADLINE;
            p.runtime = runtime_ns;
            p.deadline = deadline_ns;
            p.period = period_ns;
        }
    }
    p
}

/// Sets the policy of thread `tid` (0 = the calling thread) with sched_setattr
/// (through the kernel door).
///
/// SCHED_IDLE takes its nice value in a first step at SCHED_OTHER: the
/// kernel applies `sched_nice` only to SCHED_OTHER and SCHED_BATCH, and
/// keeps the nice value when the policy then becomes SCHED_IDLE.
pub fn set_policy(tid: i32, policy: Policy) -> io::Result<()> {
    set_policy_with(crate::program::host().kernel(), tid, policy)
}

/// [`set_policy`] through `kernel`.
pub fn set_policy_with(kernel: &dyn Kernel, tid: i32, policy: Policy) -> io::Result<()> {
    policy
        .validate()
        .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
    if let Policy::Idle { nice } = policy {
        kernel.set_sched(tid, &sched_params(Policy::Other { nice }))?;
    }
    kernel.set_sched(tid, &sched_params(policy))
}

/// How a thread reaches its CPUs where plain affinity cannot (a shield's
/// cpuset fences them off). [`pin`] is the plain one; the shield's
/// placement is another.
pub use cpushield_shield::placement::PlaceFn;

/// Pins thread `tid` (0 = the calling thread) to `cpus` (sched_setaffinity
/// through the kernel door).
pub fn pin(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    crate::program::host().kernel().set_affinity(tid, cpus)
}

/// Locks all current and future memory of the process (mlockall).
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: mlockall takes only flags and changes no memory contents.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Locks every page of the process the moment it is first touched, now and
/// later (mlockall MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT, Linux 4.4+): a
/// page once used is never paged out, but pages never used (most of a large
/// binary's text, reserved stack and heap) are not brought in, so the resident
/// size stays what the process uses. The caller pre-faults what its
/// time-critical path will touch (e.g. [`prefault_stack`]).
pub fn lock_memory_on_fault() -> io::Result<()> {
    // SAFETY: mlockall takes only flags and changes no memory contents.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Touches `bytes` of the calling thread's stack so later use takes no page fault.
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 4096;
    fn touch(remaining: usize) {
        let mut page = [0u8; CHUNK];
        std::hint::black_box(&mut page);
        if remaining > CHUNK {
            touch(remaining - CHUNK);
        }
        std::hint::black_box(&page);
    }
    touch(bytes);
}

/// Keeps /dev/cpu_dma_latency at a target (0 = no deep C-states) while alive,
/// as cyclictest does. The kernel drops the request when the file closes.
pub struct DmaLatencyGuard {
    _file: File,
}

impl DmaLatencyGuard {
    /// Opens /dev/cpu_dma_latency and writes the target in microseconds.
    pub fn hold(target_us: i32) -> io::Result<Self> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")?;
        file.write_all(&target_us.to_ne_bytes())?;
        Ok(Self { _file: file })
    }
}

/// Lifts process `pid`'s RLIMIT_MEMLOCK to unlimited (prlimit), so it may lock
/// all its memory: mlockall does not survive exec, so a command started for a
/// real-time task must lock its memory itself, and this lets it.
pub fn unlimit_memlock(pid: i32) -> io::Result<()> {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit with a valid new limit and no old-limit output.
    let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_MEMLOCK, &unlimited, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Policy::Other { nice } => write!(f, "SCHED_OTHER (nice {nice})"),
            Policy::Idle { nice } => write!(f, "SCHED_IDLE (nice {nice})"),
            Policy::Fifo(p) => write!(f, "SCHED_FIFO priority {p}"),
            Policy::RoundRobin(p) => write!(f, "SCHED_RR priority {p}"),
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
            } => write!(
                f,
                "SCHED_DEADLINE {runtime_ns}/{deadline_ns}/{period_ns} ns"
            ),
        }
    }
}

/// One line saying why [`set_policy`] failed and what to do about it.
pub fn describe_policy_error(policy: &Policy, error: &io::Error) -> String {
    let remedy = match (policy, error.raw_os_error()) {
        (Policy::Deadline { .. }, Some(libc::EPERM)) => {
            "SCHED_DEADLINE needs root and a task allowed on a whole root domain \
             (all CPUs, or an exclusive cpuset such as the shield's)"
        }
        (Policy::Deadline { .. }, Some(libc::EBUSY)) => {
            "the CPUs' deadline bandwidth is used up: lower runtime/period"
        }
        (_, Some(libc::EPERM)) => {
            "run as root, or grant CAP_SYS_NICE or raise RLIMIT_RTPRIO (ulimit -r)"
        }
        (_, Some(libc::ESRCH)) => "the task is gone",
        (_, Some(libc::EINVAL)) => "the kernel refused the parameters",
        _ => "see sched_setattr(2)",
    };
    format!("cannot set {policy}: {error}; {remedy}")
}

/// One line saying why [`pin`] to `cpus` failed and what to do about it.
pub fn describe_pin_error(cpus: &CpuSet, error: &io::Error) -> String {
    let remedy = match error.raw_os_error() {
        Some(libc::EINVAL) => {
            "they are offline or outside the task's cpuset: \
             put the process on the shield first (cpushield run --cpus ... -- app)"
        }
        Some(libc::EPERM) => "the task belongs to another user: run as root",
        Some(libc::ESRCH) => "the task is gone",
        _ => "see sched_setaffinity(2)",
    };
    format!("cannot place the task on CPUs {cpus}: {error}; {remedy}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(t: &str) -> Result<std::time::Duration, String> {
        let us: u64 = t
            .strip_suffix("us")
            .and_then(|n| n.parse().ok())
            .ok_or(format!("'{t}' is not N us"))?;
        Ok(std::time::Duration::from_micros(us))
    }

    #[test]
    fn typed_priorities_and_nice_values_are_checked_naming_the_range() {
        assert_eq!(parse_priority("80"), Ok(80));
        assert_eq!(
            parse_priority("0").unwrap_err(),
            "priority 0 is out of range: use 1..99"
        );
        assert!(parse_priority("high").unwrap_err().contains("use 1..99"));
        assert_eq!(parse_nice("-5"), Ok(-5));
        assert!(parse_nice("20").unwrap_err().contains("use -20..19"));
        assert!(parse_nice("x").unwrap_err().contains("not a nice value"));
    }

    #[test]
    fn a_typed_deadline_is_three_durations_in_order() {
        assert_eq!(
            parse_deadline("200us/1000us/2000us", micros),
            Ok(Policy::Deadline {
                runtime_ns: 200_000,
                deadline_ns: 1_000_000,
                period_ns: 2_000_000
            })
        );
        let e = parse_deadline("2000us/1000us/1000us", micros).unwrap_err();
        assert!(e.contains("runtime <= deadline <= period"), "{e}");
        let e = parse_deadline("1000us", micros).unwrap_err();
        assert!(e.contains("RUNTIME/DEADLINE/PERIOD"), "{e}");
        let e = parse_deadline("1us/2ms/3us", micros).unwrap_err();
        assert!(e.contains("'2ms' is not N us"), "the part's own error: {e}");
    }

    #[test]
    fn invalid_priorities_and_deadlines_are_refused() {
        assert!(Policy::Fifo(0).validate().is_err());
        assert!(Policy::RoundRobin(100).validate().is_err());
        assert!(Policy::Fifo(80).validate().is_ok());
        assert!(Policy::Deadline {
            runtime_ns: 2_000,
            deadline_ns: 1_000,
            period_ns: 3_000
        }
        .validate()
        .is_err());
        assert!(Policy::Deadline {
            runtime_ns: 500_000,
            deadline_ns: 1_000_000,
            period_ns: 1_000_000
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn sched_idle_is_policy_5_with_its_nice_value() {
        let p = sched_params(Policy::Idle { nice: 19 });
        assert_eq!((p.policy, p.nice, p.priority), (5, 19, 0));
        assert_eq!(
            Policy::Idle { nice: 19 }.to_string(),
            "SCHED_IDLE (nice 19)"
        );
        assert!(Policy::Idle { nice: 20 }.validate().is_err());
    }

    #[test]
    fn sched_idle_is_set_after_its_nice_value() {
        let k = cpushield_kernel::FakeKernel::new();
        let rec = cpushield_kernel::RecordingKernel::new(&k);
        k.set_thread_affinity(77, CpuSet::from_cpus([0]));
        set_policy_with(&rec, 77, Policy::Idle { nice: 19 }).unwrap();
        let steps: Vec<(u32, i32)> = rec
            .changes()
            .into_iter()
            .filter_map(|c| match c {
                cpushield_kernel::Change::Sched(77, p) => Some((p.policy, p.nice)),
                _ => None,
            })
            .collect();
        assert_eq!(steps, [(0, 19), (5, 19)]);
    }

    #[test]
    fn errors_name_the_remedy() {
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        let msg = describe_policy_error(&Policy::Fifo(80), &eperm);
        assert!(
            msg.starts_with("cannot set SCHED_FIFO priority 80"),
            "{msg}"
        );
        assert!(msg.contains("RLIMIT_RTPRIO"), "{msg}");
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        let msg = describe_pin_error(&CpuSet::from_cpus([3]), &einval);
        assert!(
            msg.contains("CPUs 3") && msg.contains("cpushield run"),
            "{msg}"
        );
    }

    #[test]
    fn pinning_the_calling_thread_moves_it() {
        let online = cpushield_kernel::online_cpus(&cpushield_kernel::RealKernel).unwrap();
        let last = online.last().unwrap();
        std::thread::spawn(move || {
            pin(0, &CpuSet::from_cpus([last])).unwrap();
            assert_eq!(cpushield_kernel::current_cpu(), last);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn prefaulting_the_stack_does_not_overflow() {
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(|| prefault_stack(512 * 1024))
            .unwrap()
            .join()
            .unwrap();
    }
}
