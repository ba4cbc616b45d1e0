//! Lines of the text trace (`per_cpu/cpuN/trace_pipe`) parsed into events.
//!
//! A line is `<comm>-<pid> [<cpu>] <flags> <secs>.<usecs>: <event>: <fields>`.
//! The command name may contain spaces, dashes and even ` [N]`, so parsing
//! anchors on the ` [NNN] <flags> <secs>.<frac>:` pattern. Text gives microsecond timestamps; that is enough to
//! attribute spikes of 10 us and more.

/// The interrupt vectors whose entry/exit events the x86 kernel has
/// (`irq_vectors:<name>_entry`), and what each is, for the report.
pub const VECTORS: &[(&str, &str)] = &[
    ("local_timer", "local timer interrupt"),
    ("reschedule", "reschedule IPI"),
    ("call_function", "function-call IPI"),
    ("call_function_single", "function-call IPI (single)"),
    ("irq_work", "irq_work interrupt"),
    ("x86_platform_ipi", "platform IPI"),
    ("thermal_apic", "thermal interrupt"),
    ("error_apic", "APIC error interrupt"),
    ("spurious_apic", "spurious interrupt"),
    ("deferred_error_apic", "deferred error interrupt"),
    ("threshold_apic", "threshold interrupt"),
];

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A device interrupt handler started.
    IrqEntry {
        /// IRQ number.
        irq: u32,
        /// Handler name.
        name: String,
    },
    /// A device interrupt handler ended.
    IrqExit {
        /// IRQ number.
        irq: u32,
    },
    /// A softirq started.
    SoftirqEntry {
        /// Its name (`TIMER`, `NET_RX`, ...).
        name: String,
    },
    /// A softirq ended.
    SoftirqExit {
        /// Its name.
        name: String,
    },
    /// An interrupt vector handler started (`local_timer`, `reschedule`, ...).
    VectorEntry {
        /// The vector's event prefix.
        vector: String,
    },
    /// An interrupt vector handler ended.
    VectorExit {
        /// The vector's event prefix.
        vector: String,
    },
    /// An hrtimer callback started.
    HrtimerEntry {
        /// The callback (`hrtimer_wakeup`, `tick_nohz_handler`, ...).
        function: String,
        /// The hrtimer base's time when it ran (CLOCK_MONOTONIC ns).
        now_ns: Option<u64>,
    },
    /// An hrtimer callback ended.
    HrtimerExit,
    /// An hrtimer was armed (`hrtimer_start`): the task current when it is
    /// recorded armed it, unless it is recorded inside an interrupt (a
    /// periodic timer re-armed after its callback).
    HrtimerStart {
        /// The callback it will run (`hrtimer_wakeup` for a task sleeping
        /// in `clock_nanosleep`, `timerlat_irq` for the timerlat tracer's thread).
        function: String,
        /// When it expires, on its clock (CLOCK_MONOTONIC for both), ns.
        expires_ns: u64,
    },
    /// A context switch.
    Switch {
        /// Outgoing task's name.
        prev_comm: String,
        /// Outgoing task's pid.
        prev_pid: i32,
        /// Outgoing state (`R`, `S`, `D`, ...; `R+` = preempted).
        prev_state: String,
        /// Incoming task's name.
        next_comm: String,
        /// Incoming task's pid.
        next_pid: i32,
        /// Incoming task's kernel priority (below 100 = real-time).
        next_prio: i32,
    },
    /// A task was woken.
    Wakeup {
        /// Its name.
        comm: String,
        /// Its pid.
        pid: i32,
        /// Its kernel priority.
        prio: i32,
        /// The CPU it will run on.
        target_cpu: Option<usize>,
    },
    /// A task was moved to another CPU's run queue (`sched_migrate_task`).
    Migrate {
        /// Its pid.
        pid: i32,
        /// The CPU it was moved to.
        dest_cpu: usize,
    },
    /// A workqueue item started in a kworker.
    WorkStart {
        /// The work function.
        function: String,
    },
    /// A workqueue item ended.
    WorkEnd,
    /// One of the timerlat tracer's records: how late its timer was seen in
    /// one context of activation `seq` on this CPU (`#1234 context irq
    /// timer_latency 1580 ns`).
    TimerlatSample {
        /// The activation's number, counting up per CPU.
        seq: u64,
        /// Where the latency was taken.
        context: TimerlatContext,
        /// Time from the timer's expiry to this context, ns.
        latency_ns: u64,
    },
    /// An osnoise tracepoint (`osnoise:irq_noise`, `softirq_noise`,
    /// `thread_noise`, `nmi_noise`): something that took the CPU from the
    /// osnoise or timerlat workload, recorded when it ended.
    Noise(Noise),
    /// The start of a [`Noise`], placed at its start by the attribution (the
    /// trace records only its end).
    NoiseStart(Noise),
    /// The end of a [`Noise`], as placed by the attribution.
    NoiseEnd(Noise),
    /// A trace_marker line.
    Marker {
        /// The text written.
        text: String,
    },
    /// Any other event.
    Other {
        /// Event name.
        name: String,
    },
}

/// One timerlat record: a latency of one activation, in one context, on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerlatRecord {
    /// The CPU.
    pub cpu: usize,
    /// The activation's number (per CPU).
    pub seq: u64,
    /// Interrupt handler or thread.
    pub context: TimerlatContext,
    /// Timer expiry to this context, ns.
    pub latency_ns: u64,
    /// When it was recorded (trace clock `mono` = CLOCK_MONOTONIC), ns.
    pub ts_ns: u64,
    /// The task current when it was recorded: for a thread record, the
    /// timerlat thread itself (global ID).
    pub pid: i32,
}

/// Where the timerlat tracer took a latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerlatContext {
    /// In the timer's interrupt handler.
    Irq,
    /// When its thread (kernel `timerlat/N`, or a user thread reading
    /// `timerlat_fd`) ran.
    Thread,
    /// When a user-space thread came back to the kernel (`user-ret`, 6.6+).
    User,
}

/// What kind of thing an osnoise event says took the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoiseClass {
    /// A hard interrupt: a device IRQ or an interrupt vector.
    Irq,
    /// A softirq.
    Softirq,
    /// A thread.
    Thread,
    /// A non-maskable interrupt.
    Nmi,
}

/// One osnoise interference: its class, its name and number as the event
/// prints them (IRQ name and IRQ or vector number, softirq name and vector,
/// thread name and ID), and how long it ran, net of what interrupted it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Noise {
    /// What kind.
    pub class: NoiseClass,
    /// `local_timer`, `virtio0-input.0`, `TIMER`, `kworker/3:1`; empty for an NMI.
    pub name: String,
    /// The vector or IRQ number, the softirq number, or the thread ID.
    pub number: i64,
    /// How long it ran, ns.
    pub duration_ns: u64,
}

/// One trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Time (trace clock `mono` = CLOCK_MONOTONIC), ns.
    pub ts_ns: u64,
    /// The CPU it was recorded on.
    pub cpu: usize,
    /// The task current when it was recorded (0 = idle).
    pub pid: i32,
    /// That task's name.
    pub comm: String,
    /// What happened.
    pub kind: EventKind,
    /// The flags column showed a reschedule pending (`N`, `n`, `p`, or a
    /// lazy variant, second flag character): a task woken on this CPU is to
    /// preempt the current one. False when the column is absent.
    pub need_resched: bool,
    /// The line as read, for the saved trace windows.
    pub raw: String,
}

/// Parses a trace line; `None` for comments, blank lines and lines that do
/// not have the expected shape (e.g. `CPU:1 [LOST 12 EVENTS]`).
pub fn parse_line(line: &str) -> Option<Event> {
    let line = line.trim_end();
    if line.trim_start().starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (open, close, ts_ns, flags, after_ts) = cpu_column(line)?;
    let cpu: usize = line[open + 1..close].parse().ok()?;
    let task = line[..open].trim();
    let (comm, pid) = task.rsplit_once('-')?;
    let pid: i32 = pid.parse().ok()?;
    let after_ts = after_ts.trim_start();
    let (name, args) = after_ts.split_once(':').unwrap_or((after_ts, ""));
    let args = args.trim_start();
    Some(Event {
        ts_ns,
        cpu,
        pid,
        comm: comm.to_string(),
        kind: parse_kind(name.trim(), args),
        need_resched: flags
            .and_then(|f| f.as_bytes().get(1))
            .is_some_and(|c| *c != b'.'),
        raw: line.to_string(),
    })
}

/// Finds the CPU column: `[NNN]` preceded by a space and followed by the
/// flags field (optional: `irq-info` may be off) and the `<secs>.<frac>:`
/// timestamp, with a `comm-pid` task before it. A task name may itself hold
/// ` [N]` (e.g. `kworker [3]`), so a bracket that is not followed by the
/// flags and timestamp is not the column, and the search goes on to the right.
/// Returns the brackets' positions, the timestamp, the flags field (when
/// present) and the text after the timestamp.
fn cpu_column(line: &str) -> Option<(usize, usize, u64, Option<&str>, &str)> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' && i > 0 && b[i - 1] == b' ' {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > i + 1 && j < b.len() && b[j] == b']' {
                let task_ok = line[..i]
                    .trim()
                    .rsplit_once('-')
                    .is_some_and(|(_, pid)| pid.parse::<i32>().is_ok());
                if task_ok {
                    if let Some((ts, flags, after)) = flags_and_timestamp(&line[j + 1..]) {
                        return Some((i, j, ts, flags, after));
                    }
                }
            }
        }
        i += 1;
    }
    None
}

/// After the CPU column: ` <flags> <secs>.<frac>: rest` or ` <secs>.<frac>: rest`;
/// the timestamp in ns, the flags (when present) and the rest.
fn flags_and_timestamp(rest: &str) -> Option<(u64, Option<&str>, &str)> {
    if !rest.starts_with(' ') {
        return None;
    }
    let mut tail = rest;
    let mut flags = None;
    for _ in 0..2 {
        let trimmed = tail.trim_start_matches(' ');
        let end = trimmed.find(' ').unwrap_or(trimmed.len());
        let word = &trimmed[..end];
        if word.is_empty() {
            return None;
        }
        if let Some(ts) = word.strip_suffix(':').and_then(parse_ts) {
            return Some((ts, flags, &trimmed[end..]));
        }
        flags = Some(word);
        tail = &trimmed[end..];
    }
    None
}

/// `612.177320` → ns.
fn parse_ts(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// The value after `key=` up to the next space.
fn field<'a>(args: &'a str, key: &str) -> Option<&'a str> {
    let start = find_key(args, key)?;
    let v = &args[start..];
    Some(v.split_whitespace().next().unwrap_or(""))
}

/// The value after `key=` up to ` next_key=` (values that may contain spaces).
fn field_until<'a>(args: &'a str, key: &str, next_key: &str) -> Option<&'a str> {
    let start = find_key(args, key)?;
    let v = &args[start..];
    let end = v.find(&format!(" {next_key}=")).unwrap_or(v.len());
    Some(&v[..end])
}

fn find_key(args: &str, key: &str) -> Option<usize> {
    let pat = format!("{key}=");
    let mut from = 0;
    while let Some(pos) = args[from..].find(&pat) {
        let at = from + pos;
        if at == 0 || args.as_bytes()[at - 1] == b' ' {
            return Some(at + pat.len());
        }
        from = at + pat.len();
    }
    None
}

fn num<T: std::str::FromStr>(args: &str, key: &str) -> Option<T> {
    field(args, key)?.parse().ok()
}

/// `#1234 context    irq timer_latency      1580 ns`: a timerlat record.
fn parse_timerlat(text: &str) -> Option<EventKind> {
    let mut words = text.split_whitespace();
    let seq = words.next()?.strip_prefix('#')?.parse().ok()?;
    (words.next()? == "context").then_some(())?;
    let context = match words.next()? {
        "irq" => TimerlatContext::Irq,
        "thread" => TimerlatContext::Thread,
        "user-ret" => TimerlatContext::User,
        _ => return None,
    };
    (words.next()? == "timer_latency").then_some(())?;
    let latency_ns = words.next()?.parse().ok()?;
    (words.next()? == "ns").then_some(EventKind::TimerlatSample {
        seq,
        context,
        latency_ns,
    })
}

/// The arguments of an osnoise event: `NAME:NUMBER start S.NNNNNNNNN duration
/// D ns` (`start S duration D ns` for an NMI). A thread's name may hold a
/// colon (`kworker/3:1:123`): the number is after the last one. The start
/// is left out: it is read on the tracer's own clock (`trace_clock_local`),
/// not the trace's, so the attribution places the start at the event's time
/// minus the duration instead.
fn parse_noise(class: NoiseClass, args: &str) -> Option<Noise> {
    let (who, rest) = match args.split_once(" start ") {
        Some((who, rest)) => (who.trim(), rest),
        None => ("", args.trim().strip_prefix("start ")?),
    };
    let (name, number) = if who.is_empty() {
        (String::new(), 0)
    } else {
        let (name, number) = who.rsplit_once(':')?;
        (name.trim().to_string(), number.parse().ok()?)
    };
    let (_, duration) = rest.split_once("duration ")?;
    let duration_ns = duration.trim().strip_suffix("ns")?.trim().parse().ok()?;
    Some(Noise {
        class,
        name,
        number,
        duration_ns,
    })
}

fn parse_kind(name: &str, args: &str) -> EventKind {
    let noise = |class| parse_noise(class, args).map(EventKind::Noise);
    let parsed = if name.starts_with('#') {
        parse_timerlat(name)
    } else {
        match name {
            "irq_noise" => noise(NoiseClass::Irq),
            "softirq_noise" => noise(NoiseClass::Softirq),
            "thread_noise" => noise(NoiseClass::Thread),
            "nmi_noise" => noise(NoiseClass::Nmi),
            "irq_handler_entry" | "irq_handler_exit" => parse_irq(name, args),
            "softirq_entry" | "softirq_exit" => Some(parse_softirq(name, args)),
            "sched_switch" => parse_switch(args),
            "sched_wakeup" | "sched_wakeup_new" => parse_wakeup(args),
            "sched_migrate_task" => parse_migrate(args),
            "hrtimer_expire_entry" | "hrtimer_expire_exit" | "hrtimer_start" => {
                parse_hrtimer(name, args)
            }
            "workqueue_execute_start" => Some(EventKind::WorkStart {
                function: args
                    .split_once("function ")
                    .map(|(_, f)| f.trim().to_string())
                    .unwrap_or_default(),
            }),
            "workqueue_execute_end" => Some(EventKind::WorkEnd),
            "tracing_mark_write" | "print" => Some(EventKind::Marker {
                text: args.to_string(),
            }),
            _ => parse_vector(name),
        }
    };
    parsed.unwrap_or_else(|| EventKind::Other {
        name: name.to_string(),
    })
}

/// `irq_handler_entry` / `irq_handler_exit`; `None` without an IRQ number.
fn parse_irq(name: &str, args: &str) -> Option<EventKind> {
    let irq = num(args, "irq")?;
    Some(if name == "irq_handler_entry" {
        EventKind::IrqEntry {
            irq,
            name: field(args, "name").unwrap_or("").to_string(),
        }
    } else {
        EventKind::IrqExit { irq }
    })
}

/// `softirq_entry` / `softirq_exit`, named by the action (`NET_RX`), or by
/// `vec` where the action is not printed.
fn parse_softirq(name: &str, args: &str) -> EventKind {
    let action = args
        .split_once("[action=")
        .map(|(_, a)| a.trim_end_matches(']').to_string())
        .or_else(|| field(args, "vec").map(|v| format!("vec{v}")))
        .unwrap_or_default();
    if name == "softirq_entry" {
        EventKind::SoftirqEntry { name: action }
    } else {
        EventKind::SoftirqExit { name: action }
    }
}

/// `sched_switch`; `None` when a field is missing.
fn parse_switch(args: &str) -> Option<EventKind> {
    Some(EventKind::Switch {
        prev_comm: field_until(args, "prev_comm", "prev_pid")?.to_string(),
        prev_pid: num(args, "prev_pid")?,
        prev_state: field(args, "prev_state")?.to_string(),
        next_comm: field_until(args, "next_comm", "next_pid")?.to_string(),
        next_pid: num(args, "next_pid")?,
        next_prio: num(args, "next_prio")?,
    })
}

/// `sched_wakeup` / `sched_wakeup_new`; `None` when a field is missing.
fn parse_wakeup(args: &str) -> Option<EventKind> {
    Some(EventKind::Wakeup {
        comm: field_until(args, "comm", "pid")?.to_string(),
        pid: num(args, "pid")?,
        prio: num(args, "prio")?,
        target_cpu: num(args, "target_cpu"),
    })
}

/// `sched_migrate_task`; `None` when a field is missing.
fn parse_migrate(args: &str) -> Option<EventKind> {
    Some(EventKind::Migrate {
        pid: num(args, "pid")?,
        dest_cpu: num(args, "dest_cpu")?,
    })
}

/// The hrtimer events; `None` for an `hrtimer_start` without its expiry.
fn parse_hrtimer(name: &str, args: &str) -> Option<EventKind> {
    let function = || field(args, "function").unwrap_or("").to_string();
    match name {
        "hrtimer_expire_entry" => Some(EventKind::HrtimerEntry {
            function: function(),
            now_ns: num(args, "now"),
        }),
        "hrtimer_expire_exit" => Some(EventKind::HrtimerExit),
        _ => Some(EventKind::HrtimerStart {
            function: function(),
            expires_ns: num(args, "expires")?,
        }),
    }
}

/// An interrupt vector's entry or exit (`local_timer_entry`); `None` for
/// any other name.
fn parse_vector(name: &str) -> Option<EventKind> {
    let known = |v: &str| VECTORS.iter().any(|(n, _)| *n == v);
    if let Some(v) = name.strip_suffix("_entry").filter(|v| known(v)) {
        return Some(EventKind::VectorEntry {
            vector: v.to_string(),
        });
    }
    let v = name.strip_suffix("_exit").filter(|v| known(v))?;
    Some(EventKind::VectorExit {
        vector: v.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_line_with_odd_names_parses() {
        let l = " memfd:sealed-91-10527   [001] d..2.   612.198219: sched_switch: prev_comm=memfd:sealed-91 prev_pid=10527 prev_prio=120 prev_state=S ==> next_comm=my prog next_pid=13782 next_prio=4";
        let e = parse_line(l).unwrap();
        assert_eq!(e.cpu, 1);
        assert_eq!(e.pid, 10527);
        assert_eq!(e.comm, "memfd:sealed-91");
        assert_eq!(e.ts_ns, 612_198_219_000);
        match e.kind {
            EventKind::Switch {
                next_comm,
                next_pid,
                next_prio,
                prev_state,
                ..
            } => {
                assert_eq!(next_comm, "my prog");
                assert_eq!(next_pid, 13782);
                assert_eq!(next_prio, 4);
                assert_eq!(prev_state, "S");
            }
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn irq_softirq_vector_hrtimer_and_marker_lines_parse() {
        let lines = [
            "          <idle>-0       [001] d.h1.   100.000010: irq_handler_entry: irq=38 name=virtio2-input.0",
            "           rustc-13782   [001] ..s..   612.180028: softirq_entry: vec=9 [action=RCU]",
            "           rustc-13782   [001] d.h..   612.180006: local_timer_entry: vector=236",
            "           rustc-13782   [001] d.h..   612.198159: hrtimer_expire_entry: hrtimer=0000000045807b74 function=hrtimer_wakeup now=612198156865",
            "            bash-13795   [001] ...1.   612.177320: tracing_mark_write: cpushield spike seq=3",
            "           rustc-13782   [001] dNh3.   612.198170: sched_wakeup: comm=memfd:sealed-91 pid=10527 prio=120 target_cpu=001",
        ];
        let kinds: Vec<EventKind> = lines.iter().map(|l| parse_line(l).unwrap().kind).collect();
        assert_eq!(
            kinds[0],
            EventKind::IrqEntry {
                irq: 38,
                name: "virtio2-input.0".into()
            }
        );
        assert_eq!(kinds[1], EventKind::SoftirqEntry { name: "RCU".into() });
        assert_eq!(
            kinds[2],
            EventKind::VectorEntry {
                vector: "local_timer".into()
            }
        );
        assert_eq!(
            kinds[3],
            EventKind::HrtimerEntry {
                function: "hrtimer_wakeup".into(),
                now_ns: Some(612198156865)
            }
        );
        assert_eq!(
            kinds[4],
            EventKind::Marker {
                text: "cpushield spike seq=3".into()
            }
        );
        assert_eq!(
            kinds[5],
            EventKind::Wakeup {
                comm: "memfd:sealed-91".into(),
                pid: 10527,
                prio: 120,
                target_cpu: Some(1)
            }
        );
    }

    #[test]
    fn a_migrate_line_gives_the_task_and_its_new_cpu() {
        let e = parse_line("    taskset-4242  [000] d..2.   100.000100: sched_migrate_task: comm=CPU 0/TCG pid=101 prio=120 orig_cpu=0 dest_cpu=1").unwrap();
        assert_eq!(
            e.kind,
            EventKind::Migrate {
                pid: 101,
                dest_cpu: 1
            }
        );
    }

    #[test]
    fn an_hrtimer_start_line_gives_the_callback_and_the_expiry() {
        let e = parse_line("      cyclictest-812     [001] d..1.   612.198300: hrtimer_start: hrtimer=00000000d1f5bb27 function=hrtimer_wakeup expires=612198644865 softexpires=612198644865 mode=ABS").unwrap();
        assert_eq!((e.pid, e.comm.as_str()), (812, "cyclictest"));
        assert_eq!(
            e.kind,
            EventKind::HrtimerStart {
                function: "hrtimer_wakeup".into(),
                expires_ns: 612_198_644_865
            }
        );
        let cut =
            parse_line("  x-1 [001] ..... 5.000001: hrtimer_start: hrtimer=00 function=f").unwrap();
        assert!(matches!(cut.kind, EventKind::Other { .. }));
    }

    #[test]
    fn older_four_flag_lines_and_comments_are_handled() {
        let e = parse_line(
            "          <idle>-0     [003] d.h1  55.123456: irq_handler_exit: irq=36 ret=handled",
        )
        .unwrap();
        assert_eq!((e.cpu, e.pid, e.ts_ns), (3, 0, 55_123_456_000));
        assert_eq!(e.kind, EventKind::IrqExit { irq: 36 });
        assert!(parse_line("# tracer: nop").is_none());
        assert!(parse_line("CPU:1 [LOST 12 EVENTS]").is_none());
    }

    #[test]
    fn a_task_name_holding_a_bracketed_number_still_parses() {
        // A comm such as "worker [3]" (prctl PR_SET_NAME allows it): the first
        // " [3]" is part of the name, the CPU column is the one before the flags.
        let e = parse_line(
            "      worker [3]-4242    [001] d.h1.   612.180006: local_timer_entry: vector=236",
        )
        .unwrap();
        assert_eq!((e.cpu, e.pid, e.ts_ns), (1, 4242, 612_180_006_000));
        assert_eq!(e.comm, "worker [3]");
        assert_eq!(
            e.kind,
            EventKind::VectorEntry {
                vector: "local_timer".into()
            }
        );
        let e = parse_line(
            "  a [7] b [12]-99 [000] ..s.. 5.000001: softirq_entry: vec=1 [action=TIMER]",
        )
        .unwrap();
        assert_eq!((e.cpu, e.pid, e.comm.as_str()), (0, 99, "a [7] b [12]"));
    }

    #[test]
    fn timerlat_records_parse_with_their_context_and_latency() {
        let irq = parse_line("          <idle>-0       [003] d.h2.   426.271226: #58634 context    irq timer_latency      1580 ns").unwrap();
        assert_eq!((irq.cpu, irq.ts_ns), (3, 426_271_226_000));
        assert_eq!(
            irq.kind,
            EventKind::TimerlatSample {
                seq: 58634,
                context: TimerlatContext::Irq,
                latency_ns: 1580
            }
        );
        let thread = parse_line("     timerlat/3-791     [003] .....   426.271247: #58634 context thread timer_latency     10823 ns").unwrap();
        assert_eq!((thread.pid, thread.comm.as_str()), (791, "timerlat/3"));
        assert_eq!(
            thread.kind,
            EventKind::TimerlatSample {
                seq: 58634,
                context: TimerlatContext::Thread,
                latency_ns: 10823
            }
        );
        let user = parse_line(
            "  rtla-900 [001] ..... 5.000001: #7 context user-ret timer_latency 30000 ns",
        )
        .unwrap();
        assert!(matches!(
            user.kind,
            EventKind::TimerlatSample {
                context: TimerlatContext::User,
                ..
            }
        ));
        // A record cut short is not taken for a sample.
        let cut = parse_line("  x-1 [001] ..... 5.000001: #7 context irq timer_latency").unwrap();
        assert!(matches!(cut.kind, EventKind::Other { .. }));
    }

    #[test]
    fn osnoise_events_parse_name_number_and_duration() {
        let kinds: Vec<EventKind> = [
            "              sh-109404 [006] dNLh313   426.271258: irq_noise: local_timer:236 start 426.271245463 duration 12553 ns",
            "          <idle>-0     [001] d.h..   10.000100: irq_noise: virtio0-input.0:25 start 10.000090000 duration 3000 ns",
            "          <idle>-0     [001] ..s..   10.000200: softirq_noise:    TIMER:1 start 10.000150000 duration 40000 ns",
            "     timerlat/1-700    [001] d....   10.000300: thread_noise: kworker/1:2:88 start 10.000200000 duration 90000 ns",
            "          <idle>-0     [001] d.Z..   10.000400: nmi_noise: start 10.000390000 duration 800 ns",
        ]
        .iter()
        .map(|l| parse_line(l).unwrap().kind)
        .collect();
        let noise = |class, name: &str, number, duration_ns| {
            EventKind::Noise(Noise {
                class,
                name: name.into(),
                number,
                duration_ns,
            })
        };
        assert_eq!(kinds[0], noise(NoiseClass::Irq, "local_timer", 236, 12553));
        assert_eq!(
            kinds[1],
            noise(NoiseClass::Irq, "virtio0-input.0", 25, 3000)
        );
        assert_eq!(kinds[2], noise(NoiseClass::Softirq, "TIMER", 1, 40000));
        assert_eq!(
            kinds[3],
            noise(NoiseClass::Thread, "kworker/1:2", 88, 90000)
        );
        assert_eq!(kinds[4], noise(NoiseClass::Nmi, "", 0, 800));
    }

    #[test]
    fn a_line_without_the_flags_field_parses() {
        let e = parse_line("  bash-17 [002] 12.5: tracing_mark_write: hello").unwrap();
        assert_eq!((e.cpu, e.pid, e.ts_ns), (2, 17, 12_500_000_000));
    }

    #[test]
    fn an_overflowing_timestamp_is_rejected_not_wrapped() {
        assert!(parse_line(
            "  bash-17 [002] .... 99999999999999999999.000001: tracing_mark_write: x"
        )
        .is_none());
        assert!(
            parse_line("  bash-17 [002] .... 18446744074.000001: tracing_mark_write: x").is_none()
        );
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    #[test]
    fn an_irq_event_needs_its_number_and_an_entry_keeps_the_handler_name() {
        assert_eq!(
            parse_irq("irq_handler_entry", "irq=38 name=virtio2-input.0"),
            Some(EventKind::IrqEntry {
                irq: 38,
                name: "virtio2-input.0".into()
            })
        );
        assert_eq!(
            parse_irq("irq_handler_exit", "irq=38 ret=handled"),
            Some(EventKind::IrqExit { irq: 38 })
        );
        assert_eq!(parse_irq("irq_handler_entry", "name=x"), None);
    }

    #[test]
    fn a_softirq_is_named_by_its_action_or_else_its_vector() {
        assert_eq!(
            parse_softirq("softirq_entry", "vec=3 [action=NET_RX]"),
            EventKind::SoftirqEntry {
                name: "NET_RX".into()
            }
        );
        assert_eq!(
            parse_softirq("softirq_exit", "vec=9"),
            EventKind::SoftirqExit {
                name: "vec9".into()
            }
        );
    }

    #[test]
    fn a_switch_or_wakeup_missing_a_field_is_not_taken() {
        let switch = "prev_comm=a prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=b next_pid=2 next_prio=4";
        assert!(matches!(
            parse_switch(switch),
            Some(EventKind::Switch { next_pid: 2, .. })
        ));
        assert_eq!(parse_switch("prev_comm=a prev_pid=1"), None);
        assert!(matches!(
            parse_wakeup("comm=probe pid=50 prio=4 target_cpu=001"),
            Some(EventKind::Wakeup {
                pid: 50,
                target_cpu: Some(1),
                ..
            })
        ));
        assert_eq!(parse_wakeup("comm=probe prio=4"), None);
    }

    #[test]
    fn an_hrtimer_start_needs_its_expiry() {
        assert_eq!(
            parse_hrtimer(
                "hrtimer_start",
                "hrtimer=1 function=tick_nohz_handler expires=500 softexpires=500"
            ),
            Some(EventKind::HrtimerStart {
                function: "tick_nohz_handler".into(),
                expires_ns: 500
            })
        );
        assert_eq!(parse_hrtimer("hrtimer_start", "function=f"), None);
        assert_eq!(
            parse_hrtimer("hrtimer_expire_exit", ""),
            Some(EventKind::HrtimerExit)
        );
    }

    #[test]
    fn only_known_vectors_parse_as_vector_entries_and_exits() {
        assert_eq!(
            parse_vector("local_timer_entry"),
            Some(EventKind::VectorEntry {
                vector: "local_timer".into()
            })
        );
        assert_eq!(
            parse_vector("local_timer_exit"),
            Some(EventKind::VectorExit {
                vector: "local_timer".into()
            })
        );
        assert_eq!(parse_vector("made_up_entry"), None);
        assert_eq!(parse_vector("sched_switch"), None);
    }
}
