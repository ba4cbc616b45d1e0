//! `cpushield run`: start a command, or move an existing task, onto shielded
//! CPUs with a scheduling policy; optionally bind IRQs to those CPUs and
//! reserve them for as long as the task lives (Brosky & Rotolo and Sherer).
//!
//! A started command is placed (shield cgroup, affinity, policy) before it
//! runs, so every thread it creates inherits the placement; `run` waits for it,
//! restores the IRQs and exits with the command's own status.
//!
//! `--mlock`: memory locks do not survive exec (mlockall's MCL_FUTURE is
//! dropped by execve), so `run` cannot lock a command's memory for it. It lifts
//! the task's RLIMIT_MEMLOCK to unlimited instead, so the program can lock all
//! of its memory itself (mlockall, `cps_lock_memory`, `sched::lock_memory`),
//! and says so. Where lifting the limit is not permitted (no CAP_SYS_RESOURCE)
//! a task with CAP_IPC_LOCK (root) may lock beyond it anyway.
//!
//! Lifetimes: a started command inherits the reservation's lock, so the
//! reservation lasts exactly as long as the command, even if `run` is killed.
//! IRQs are restored by `run` itself when the task ends: a SIGKILLed `run`
//! cannot restore them. With `--pid`, `run` cannot hand a lock to a process it
//! did not start: it holds the reservation and IRQs itself and waits until the
//! task exits (or `run` is stopped by SIGTERM/SIGINT, which restores them).

use crate::args::{cpu_set, duration, EXIT_OK};
use anyhow::{anyhow, bail, Context};
use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_rt::idle_poll::IdlePoller;
use cpushield_rt::irq::{self, IrqBinding};
use cpushield_rt::launch::{self, PidWait};
use cpushield_rt::reserve::{Holder, Reservation, ReserveDir};
use cpushield_rt::sched::{self, Policy};
use cpushield_shield::placement;
use cpushield_sys::{Kernel, RealKernel};
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `cpushield run`.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("policy").multiple(false))]
pub struct RunArgs {
    /// CPUs to run on (list `3`, `2-3` or mask `0x8`); they must be shielded.
    #[arg(long, value_parser = cpu_set, value_name = "CPUS")]
    cpus: CpuSet,
    /// SCHED_FIFO at this priority (1-99).
    #[arg(long, value_name = "PRIO", group = "policy", value_parser = rt_priority)]
    fifo: Option<u8>,
    /// SCHED_RR at this priority (1-99).
    #[arg(long, value_name = "PRIO", group = "policy", value_parser = rt_priority)]
    rr: Option<u8>,
    /// SCHED_DEADLINE with RUNTIME/DEADLINE/PERIOD, e.g. 200us/1ms/1ms.
    #[arg(long, value_name = "R/D/P", group = "policy", value_parser = deadline)]
    deadline: Option<Policy>,
    /// SCHED_OTHER at this nice value (-20..19).
    #[arg(long, value_name = "NICE", group = "policy", allow_hyphen_values = true, value_parser = nice)]
    nice: Option<i32>,
    /// Let the task lock all its memory: lifts its RLIMIT_MEMLOCK (memory locks
    /// do not survive exec, so the program must call mlockall itself).
    #[arg(long)]
    mlock: bool,
    /// IRQ to send to the CPUs while the task lives, old affinity restored
    /// afterwards (repeat, or separate with commas).
    #[arg(long, value_name = "IRQ", value_delimiter = ',')]
    irq: Vec<u32>,
    /// Reserve the CPUs while the task lives: other placements are refused.
    #[arg(long)]
    reserve: bool,
    /// Keep the CPUs polling instead of halting while the task lives (a
    /// SCHED_IDLE spinner per CPU): in a VM a halted vCPU waits for the host.
    #[arg(long)]
    idle_poll: bool,
    /// Move this existing task instead of starting a command.
    #[arg(long, value_name = "PID", conflicts_with = "command", value_parser = clap::value_parser!(i32).range(1..))]
    pid: Option<i32>,
    /// With --pid: move every thread of the process, not only the one named.
    #[arg(long)]
    threads: bool,
    /// Place the task even on CPUs that are not shielded (no isolation).
    #[arg(long)]
    allow_unshielded: bool,
    /// The command to start, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn rt_priority(text: &str) -> Result<u8, String> {
    let p: u8 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a priority: use 1..99"))?;
    Policy::Fifo(p).validate().map(|()| p)
}

fn nice(text: &str) -> Result<i32, String> {
    let n: i32 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a nice value: use -20..19"))?;
    Policy::Other { nice: n }.validate().map(|()| n)
}

/// Parses `RUNTIME/DEADLINE/PERIOD` (durations such as `200us`).
fn deadline(text: &str) -> Result<Policy, String> {
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

impl RunArgs {
    fn policy(&self) -> Option<Policy> {
        self.fifo
            .map(Policy::Fifo)
            .or(self.rr.map(Policy::RoundRobin))
            .or(self.deadline)
            .or(self.nice.map(|nice| Policy::Other { nice }))
    }
}

/// What the task is.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A command to start: the resolved program and its argv.
    Exec { program: PathBuf, argv: Vec<String> },
    /// An existing process and the threads of it to move.
    Pid { pid: i32, tids: Vec<i32> },
}

/// A checked request: every refusal happens while building it, before any change.
#[derive(Debug)]
struct Request {
    cpus: CpuSet,
    policy: Option<Policy>,
    target: Target,
    irqs: Vec<u32>,
    reserve: bool,
    mlock: bool,
    idle_poll: bool,
}

/// Checks the arguments against the system (`shielded`: the CPUs shielded
/// from processes now); changes nothing.
fn check_request(
    kernel: &dyn Kernel,
    args: RunArgs,
    shielded: &CpuSet,
    reserves: &ReserveDir,
) -> anyhow::Result<Request> {
    if args.threads && args.pid.is_none() {
        bail!("--threads needs --pid: it moves every thread of an existing task");
    }
    let cpus = args.cpus.clone();
    if cpus.is_empty() {
        bail!("--cpus names no CPU: give e.g. --cpus 3");
    }
    let online = cpushield_sys::online_cpus(kernel)?;
    if !cpus.is_subset(&online) {
        bail!(
            "CPU(s) {} not online (online CPUs: {online}): pick CPUs from the online list",
            cpus.difference(&online)
        );
    }
    if !cpus.is_subset(shielded) && !args.allow_unshielded {
        let now = if shielded.is_empty() {
            "none".to_string()
        } else {
            shielded.to_list()
        };
        bail!(
            "CPU(s) {} not shielded (shielded now: {now}): shield them first with \
             `cpushield shield --all {cpus}`, or pass --allow-unshielded to run without isolation",
            cpus.difference(shielded)
        );
    }
    for &n in &args.irq {
        if !kernel.exists(&irq::affinity_path(n)) {
            bail!(irq::IrqError::NoSuchIrq { irq: n });
        }
    }
    let target = match (args.pid, args.command.split_first()) {
        (Some(pid), _) => Target::Pid {
            pid,
            tids: task_threads(kernel, pid, args.threads)?,
        },
        (None, Some((name, _))) => Target::Exec {
            program: launch::resolve_program(name)
                .map_err(|e| anyhow!("{e}: check the name, or give its path"))?,
            argv: args.command.clone(),
        },
        (None, None) => {
            bail!("nothing to run: give a command after -- or an existing task with --pid PID")
        }
    };
    let placing = match target {
        Target::Pid { pid, .. } => pid,
        Target::Exec { .. } => std::process::id() as i32,
    };
    reserves.check(&cpus, placing)?;
    Ok(Request {
        policy: args.policy(),
        cpus,
        target,
        irqs: args.irq,
        reserve: args.reserve,
        mlock: args.mlock,
        idle_poll: args.idle_poll,
    })
}

/// The threads of `pid` to move: all of them, or just `pid`.
fn task_threads(kernel: &dyn Kernel, pid: i32, all: bool) -> anyhow::Result<Vec<i32>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    if pid <= 0 || !kernel.exists(&dir) {
        bail!("no task with PID {pid}: check the PID (ps -eLf lists tasks and threads)");
    }
    if !all {
        return Ok(vec![pid]);
    }
    let mut tids: Vec<i32> = kernel
        .read_dir(&dir)
        .with_context(|| format!("listing the threads of PID {pid}"))?
        .iter()
        .filter_map(|name| name.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// Runs `cpushield run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let kernel = RealKernel;
    let reserves = ReserveDir::from_env();
    let shielded = placement::shielded_procs(&kernel).context("reading the shield state")?;
    let req = check_request(&kernel, args, &shielded, &reserves)?;
    match &req.target {
        Target::Exec { program, argv } => run_command(&kernel, &reserves, &req, program, argv),
        Target::Pid { pid, tids } => move_task(&kernel, &reserves, &req, *pid, tids),
    }
}

/// Starts the command placed, waits for it, restores; exits with its status.
fn run_command(
    kernel: &dyn Kernel,
    reserves: &ReserveDir,
    req: &Request,
    program: &Path,
    argv: &[String],
) -> anyhow::Result<ExitCode> {
    let reservation = reserve(reserves, req, &Holder::current())?;
    let keep: Vec<_> = reservation.iter().flat_map(Reservation::raw_fds).collect();
    let pending = launch::fork_held(program, argv, &keep).context("starting the command")?;
    let child = pending.pid();
    // Any error from here on drops `pending`: the child is killed before it runs.
    place(kernel, child, &req.cpus, req.policy)?;
    if req.mlock {
        allow_mlock(child)?;
    }
    let bindings = bind_irqs(&req.irqs, &req.cpus)?;
    let poller = keep_polling(req)?;
    if let Some(r) = &reservation {
        r.set_holder(&Holder {
            pid: child,
            command: argv.join(" "),
        })
        .context("recording the task in its reservation")?;
    }
    let running = pending
        .release()
        .map_err(|e| anyhow!("cannot execute '{}': {e}", program.display()))?;
    let exit = running.wait().context("waiting for the task")?;
    drop(poller);
    restore_irqs(bindings);
    drop(reservation);
    Ok(ExitCode::from(exit.shell_status()))
}

/// Moves an existing task; with --irq or --reserve, holds them until it exits.
fn move_task(
    kernel: &dyn Kernel,
    reserves: &ReserveDir,
    req: &Request,
    pid: i32,
    tids: &[i32],
) -> anyhow::Result<ExitCode> {
    // Opened first: the task may end at any moment from here on.
    let watch = launch::PidWatch::open(pid)
        .map_err(|e| anyhow!("no task with PID {pid}: {e}; check the PID"))?;
    let reservation = reserve(reserves, req, &Holder::of_pid(pid))?;
    if req.policy.is_some() {
        // Before the change: `reset` gives each thread its policy back.
        placement::record_sched(kernel, pid, tids)
            .context("recording the task's scheduling policy in the shield state")?;
    }
    let mut moved = 0;
    for &tid in tids {
        match place(kernel, tid, &req.cpus, req.policy) {
            Ok(()) => moved += 1,
            // A thread that ended while we worked is no longer there to move.
            Err(_) if tid != pid && !Path::new(&format!("/proc/{pid}/task/{tid}")).exists() => {}
            Err(e) => return Err(e),
        }
    }
    if req.mlock {
        allow_mlock(pid)?;
    }
    let policy = req.policy.map(|p| format!(" at {p}")).unwrap_or_default();
    println!(
        "moved PID {pid} ({moved} thread{}) to CPU(s) {}{policy}",
        if moved == 1 { "" } else { "s" },
        req.cpus
    );
    if req.irqs.is_empty() && reservation.is_none() && !req.idle_poll {
        return Ok(ExitCode::from(EXIT_OK));
    }
    let bindings = bind_irqs(&req.irqs, &req.cpus)?;
    let poller = keep_polling(req)?;
    let mut held: Vec<String> = req.irqs.iter().map(|n| format!("IRQ {n}")).collect();
    if reservation.is_some() {
        held.push(format!("the reservation of CPU(s) {}", req.cpus));
    }
    if poller.is_some() {
        held.push(format!("CPU(s) {} polling", req.cpus));
    }
    println!("holding {} until PID {pid} exits", held.join(", "));
    let why = watch.wait().context("watching the task")?;
    drop(poller);
    restore_irqs(bindings);
    drop(reservation);
    match why {
        PidWait::Exited => Ok(ExitCode::from(EXIT_OK)),
        PidWait::Interrupted(sig) => {
            eprintln!("cpushield: stopped by signal {sig} before PID {pid} exited; IRQs restored, reservation released");
            Ok(ExitCode::from(launch::Exit::Signal(sig).shell_status()))
        }
    }
}

/// With --idle-poll, a SCHED_IDLE spinner on each of the task's CPUs, placed
/// the way the task is (into the shield's cpuset). Dropping it stops the
/// spinners and says whether the host took time from the polling CPUs.
fn keep_polling(req: &Request) -> anyhow::Result<Option<Polling>> {
    if !req.idle_poll {
        return Ok(None);
    }
    fn place_poller(tid: i32, cpus: &CpuSet) -> io::Result<()> {
        placement::place_task(&RealKernel, tid, cpus)
    }
    let steal_before = cpushield_measure::procstat::snapshot(&RealKernel).ok();
    Ok(Some(Polling {
        _poller: IdlePoller::start(&req.cpus, Some(place_poller))?,
        cpus: req.cpus.clone(),
        started: std::time::Instant::now(),
        steal_before,
    }))
}

/// Polling CPUs and the evidence on whether polling helps: a vCPU that never
/// halts competes on the host with the VM's own I/O emulation, and steal
/// time on the polled CPUs is the sign that it lost.
struct Polling {
    _poller: IdlePoller,
    cpus: CpuSet,
    started: std::time::Instant,
    steal_before: Option<cpushield_measure::procstat::CpuTimes>,
}

impl Drop for Polling {
    fn drop(&mut self) {
        let (Some(before), Ok(after)) = (
            self.steal_before.as_ref(),
            cpushield_measure::procstat::snapshot(&RealKernel),
        ) else {
            return;
        };
        let steal_ms =
            cpushield_measure::procstat::steal_ns(before, &after, &self.cpus) / 1_000_000;
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        // More than 1% of the time taken by the host while polling.
        if steal_ms * 100 > elapsed_ms.max(1) {
            eprintln!(
                "cpushield: while CPU(s) {} polled, the host took {steal_ms} ms of {elapsed_ms} ms from them (steal): polling may be hurting here; `cpushield compare --cpus {} --idle auto` measures halting against polling under your load",
                self.cpus, self.cpus
            );
        }
    }
}

fn reserve(
    reserves: &ReserveDir,
    req: &Request,
    holder: &Holder,
) -> anyhow::Result<Option<Reservation>> {
    if !req.reserve {
        return Ok(None);
    }
    Ok(Some(reserves.reserve(&req.cpus, holder)?))
}

/// Puts thread `tid` on the CPUs (into the shield's cpuset when they are
/// shielded) and sets its policy.
fn place(
    kernel: &dyn Kernel,
    tid: i32,
    cpus: &CpuSet,
    policy: Option<Policy>,
) -> anyhow::Result<()> {
    placement::place_task(kernel, tid, cpus)
        .map_err(|e| anyhow!(describe_place_error(tid, cpus, &e)))?;
    if let Some(p) = policy {
        sched::set_policy(tid, p)
            .map_err(|e| anyhow!("PID {tid}: {}", sched::describe_policy_error(&p, &e)))?;
    }
    Ok(())
}

fn describe_place_error(tid: i32, cpus: &CpuSet, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ESRCH) => format!("no task with PID {tid}: it exited"),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("not permitted to move PID {tid}: {e}; run as root")
        }
        _ => format!("PID {tid}: {}", sched::describe_pin_error(cpus, e)),
    }
}

/// Lets task `pid` lock all its memory: lifts its RLIMIT_MEMLOCK, or, where
/// that is not permitted (no CAP_SYS_RESOURCE), relies on its CAP_IPC_LOCK.
fn allow_mlock(pid: i32) -> anyhow::Result<()> {
    let how = match sched::unlimit_memlock(pid) {
        Ok(()) => "RLIMIT_MEMLOCK unlimited",
        Err(e) if has_ipc_lock(pid) => {
            let _ = e; // the limit stays, but CAP_IPC_LOCK overrides it
            "it has CAP_IPC_LOCK"
        }
        Err(e) => bail!(
            "cannot lift RLIMIT_MEMLOCK of PID {pid}: {e}; --mlock needs root \
             (CAP_SYS_RESOURCE, or a task with CAP_IPC_LOCK)"
        ),
    };
    eprintln!(
        "cpushield: note: memory locks do not survive exec; PID {pid} may lock all its memory \
         ({how}) and must call mlockall itself"
    );
    Ok(())
}

/// Whether task `pid` has CAP_IPC_LOCK (locks memory beyond RLIMIT_MEMLOCK).
fn has_ipc_lock(pid: i32) -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

fn bind_irqs(irqs: &[u32], cpus: &CpuSet) -> anyhow::Result<Vec<IrqBinding<'static>>> {
    // On an error the bindings made so far drop here, restoring their IRQs.
    irqs.iter()
        .map(|&n| irq::bind_irq(n, cpus).map_err(anyhow::Error::from))
        .collect()
}

fn restore_irqs(bindings: Vec<IrqBinding<'static>>) {
    for b in bindings {
        let (n, old) = (b.irq(), b.old_mask().to_string());
        if let Err(e) = b.restore() {
            eprintln!("cpushield: error: restoring IRQ {n} to mask {old}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use cpushield_sys::FakeKernel;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(argv: &[&str]) -> Result<RunArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("run").chain(argv.iter().copied())).map(|c| c.run)
    }

    fn fake_system() -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_file("/proc/irq/41/smp_affinity", "f\n");
        k.add_dir("/proc/4242/task/4242");
        k.add_dir("/proc/4242/task/4243");
        k
    }

    /// Checks a request on a fake 4-CPU system where nothing is shielded.
    fn check(argv: &[&str]) -> anyhow::Result<Request> {
        let reserves = tempfile::tempdir().unwrap();
        check_request(
            &fake_system(),
            parse(argv)?,
            &CpuSet::new(),
            &ReserveDir::new(reserves.path()),
        )
    }

    #[test]
    fn shielded_cpus_need_no_override_and_reserved_ones_are_refused() {
        let reserves = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(reserves.path());
        let shielded = CpuSet::from_cpus([2, 3]);
        let args = || parse(&["--cpus", "3", "--", "true"]).unwrap();
        assert!(check_request(&fake_system(), args(), &shielded, &rd).is_ok());
        let holder = Holder {
            pid: 777,
            command: "rt-app".into(),
        };
        let _held = rd.reserve(&CpuSet::from_cpus([3]), &holder).unwrap();
        let e = check_request(&fake_system(), args(), &shielded, &rd)
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU 3 is reserved by PID 777 (rt-app)"), "{e}");
    }

    #[test]
    fn a_policy_flag_becomes_the_policy() {
        assert_eq!(
            parse(&["--cpus", "1", "--fifo", "80"]).unwrap().policy(),
            Some(Policy::Fifo(80))
        );
        assert_eq!(
            parse(&["--cpus", "1", "--deadline", "200us/1ms/2ms"])
                .unwrap()
                .policy(),
            Some(Policy::Deadline {
                runtime_ns: 200_000,
                deadline_ns: 1_000_000,
                period_ns: 2_000_000
            })
        );
        assert_eq!(
            parse(&["--cpus", "1", "--nice", "-5"]).unwrap().policy(),
            Some(Policy::Other { nice: -5 })
        );
        assert_eq!(parse(&["--cpus", "1"]).unwrap().policy(), None);
    }

    #[test]
    fn out_of_range_priorities_and_bad_deadlines_are_usage_errors_naming_the_range() {
        let e = parse(&["--cpus", "1", "--fifo", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("priority 0 is out of range: use 1..99"), "{e}");
        let e = parse(&["--cpus", "1", "--deadline", "2ms/1ms/1ms"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("runtime <= deadline <= period"), "{e}");
        let e = parse(&["--cpus", "1", "--deadline", "1ms"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("RUNTIME/DEADLINE/PERIOD"), "{e}");
        assert!(
            parse(&["--cpus", "1", "--fifo", "10", "--rr", "10"]).is_err(),
            "one policy only"
        );
        let e = check(&["--cpus", "1", "--threads", "--", "true"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--threads needs --pid"), "{e}");
    }

    #[test]
    fn unshielded_cpus_are_refused_naming_the_shield_command() {
        let e = check(&["--cpus", "2", "--", "true"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("CPU(s) 2 not shielded (shielded now: none)"),
            "{e}"
        );
        assert!(e.contains("cpushield shield --all 2"), "{e}");
        assert!(check(&["--cpus", "2", "--allow-unshielded", "--", "true"]).is_ok());
    }

    #[test]
    fn offline_cpus_missing_irqs_tasks_and_commands_are_refused() {
        let e = check(&["--cpus", "9", "--allow-unshielded", "--", "true"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU(s) 9 not online (online CPUs: 0-3)"), "{e}");
        let e = check(&[
            "--cpus",
            "2",
            "--allow-unshielded",
            "--irq",
            "7",
            "--",
            "true",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("IRQ 7 does not exist"), "{e}");
        let e = check(&["--cpus", "2", "--allow-unshielded", "--pid", "99"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no task with PID 99"), "{e}");
        let e = check(&[
            "--cpus",
            "2",
            "--allow-unshielded",
            "--",
            "cpushield-no-such-cmd",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("'cpushield-no-such-cmd' not found"), "{e}");
        let e = check(&["--cpus", "2", "--allow-unshielded"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("nothing to run"), "{e}");
    }

    #[test]
    fn threads_selects_every_thread_of_the_process() {
        let one = check(&["--cpus", "2", "--allow-unshielded", "--pid", "4242"]).unwrap();
        assert_eq!(
            one.target,
            Target::Pid {
                pid: 4242,
                tids: vec![4242]
            }
        );
        let all = check(&[
            "--cpus",
            "2",
            "--allow-unshielded",
            "--pid",
            "4242",
            "--threads",
        ])
        .unwrap();
        assert_eq!(
            all.target,
            Target::Pid {
                pid: 4242,
                tids: vec![4242, 4243]
            }
        );
    }

    #[test]
    fn a_command_is_resolved_through_path() {
        let req = check(&[
            "--cpus",
            "2",
            "--allow-unshielded",
            "--irq",
            "41",
            "--",
            "sh",
            "-c",
            "true",
        ])
        .unwrap();
        match req.target {
            Target::Exec { program, argv } => {
                assert!(program.is_absolute());
                assert_eq!(argv, ["sh", "-c", "true"]);
            }
            t => panic!("{t:?}"),
        }
        assert_eq!(req.irqs, [41]);
    }
}
