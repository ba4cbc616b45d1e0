//! Running a task on shielded CPUs, start to end: the orchestration behind
//! `cpushield run` and the C API's `cps_place` (the Brosky & Rotolo shield
//! with the RTLinuxPro programming model on top).
//!
//! [`RtRun::check`] turns a [`RunSpec`] into a [`Request`]: every refusal
//! happens there, before any change. [`RtRun::run`] then starts the command
//! placed before it runs (or adopts an existing task with `--pid`), sets its
//! policy, lets it lock its memory, binds IRQs to its CPUs, reserves them,
//! keeps them polling, waits for the task and restores the IRQs — on failure
//! too: every binding made is restored when it drops.
//!
//! A started command is placed (shield cgroup, affinity, policy) before it
//! runs, so every thread it creates inherits the placement; the run waits for
//! it and ends with the command's own status.
//!
//! Memory locks do not survive exec (mlockall's MCL_FUTURE is dropped by
//! execve), so a run cannot lock a command's memory for it. It lifts the
//! task's RLIMIT_MEMLOCK to unlimited instead, so the program can lock all of
//! its memory itself. Where that is not permitted (no CAP_SYS_RESOURCE) a
//! task with CAP_IPC_LOCK (root) may lock beyond it anyway.
//!
//! Lifetimes: a started command inherits the reservation's lock, so the
//! reservation lasts exactly as long as the command, even if the run is
//! killed. IRQs are restored by the run itself when the task ends: a SIGKILLed
//! run cannot restore them. An adopted task cannot be handed a lock: the run
//! holds the reservation and IRQs itself and waits until the task exits (or the
//! run is stopped by SIGTERM/SIGINT, which restores them).
//!
//! What the run has to say on the way is handed to the caller as [`Event`]s;
//! the caller prints them.

use crate::idle_poll::{IdlePoller, PollerError};
use crate::irq::{self, IrqBinding, IrqError};
use crate::launch::{self, Exit, PidWait};
use crate::reserve::{Holder, Reservation, ReserveDir, ReserveError};
use crate::sched::{self, PlaceFn, Policy};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::numa;
use cpushield_kernel::{Kernel, Procfs};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How a thread reaches its CPUs, and what is noted before its policy changes.
pub trait Placer {
    /// Puts thread `tid` (0: the caller) on `cpus`.
    fn place(&self, tid: i32, cpus: &CpuSet) -> io::Result<()>;

    /// Records the scheduling policy of the threads `tids` of `pid` before it
    /// changes, so that it can be given back later. By default nothing.
    fn record_sched(&self, _pid: i32, _tids: &[i32]) -> io::Result<()> {
        Ok(())
    }

    /// How the `--idle-poll` threads reach their CPUs (None: plain affinity).
    fn poller_placement(&self) -> Option<PlaceFn> {
        None
    }
}

/// Places by CPU affinity alone (sched_setaffinity): what the C API does.
#[derive(Debug, Clone, Copy, Default)]
pub struct AffinityPlacer;

impl Placer for AffinityPlacer {
    fn place(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        sched::pin(tid, cpus)
    }
}

/// Places one thread alone: into the shield's cpuset when its CPUs are all
/// shielded (the other threads of its process stay where they are), then by
/// affinity; elsewhere by affinity alone. What the C API's `cps_place` and
/// [`crate::thread::RtThread`] do (Sherer's per-thread placement; see
/// `cpushield_shield::placement::place_thread_alone`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AlonePlacer;

impl Placer for AlonePlacer {
    fn place(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        place_thread_alone(tid, cpus)
    }
}

/// [`AlonePlacer`] as a function: thread `tid` (0: the caller) alone onto `cpus`.
pub fn place_thread_alone(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    cpushield_shield::placement::place_thread_alone(crate::program::host(), tid, cpus)
}

/// Host steal time of some CPUs since a start: called when the CPUs start
/// polling, it returns a function that gives the steal time since then in
/// nanoseconds (None where it cannot be read).
pub type StealMeter = fn(&CpuSet) -> Option<Box<dyn FnOnce() -> Option<u64>>>;

/// What the caller asked for, unchecked (`cpushield run`'s options but the
/// policy's).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct RunSpec {
    /// CPUs to run on (list `3`, `2-3` or mask `0x8`); they must be shielded.
    #[cfg_attr(feature = "clap", arg(long, value_name = "CPUS", value_parser = CpuSet::parse_arg))]
    pub cpus: CpuSet,
    /// Scheduling policy to set (None: leave it).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub policy: Option<Policy>,
    /// IRQ to send to the CPUs while the task lives, old affinity restored
    /// afterwards (repeat, or separate with commas).
    #[cfg_attr(
        feature = "clap",
        arg(long = "irq", value_name = "IRQ", value_delimiter = ',')
    )]
    pub irqs: Vec<u32>,
    /// Reserve the CPUs while the task lives: other placements are refused.
    #[cfg_attr(feature = "clap", arg(long))]
    pub reserve: bool,
    /// With --reserve: reserve the CPUs' SMT sibling threads too (a busy
    /// sibling slows the reserved CPU down; Sherer §6).
    #[cfg_attr(feature = "clap", arg(long = "smt-siblings", requires = "reserve"))]
    pub reserve_siblings: bool,
    /// Let the task lock all its memory: lifts its RLIMIT_MEMLOCK (memory locks
    /// do not survive exec, so the program must call mlockall itself).
    #[cfg_attr(feature = "clap", arg(long))]
    pub mlock: bool,
    /// Keep the CPUs polling instead of halting while the task lives (a
    /// SCHED_IDLE spinner per CPU): in a VM a halted vCPU waits for the host.
    #[cfg_attr(feature = "clap", arg(long))]
    pub idle_poll: bool,
    /// Move this existing task instead of starting a command.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PID", conflicts_with = "command", value_parser = clap::value_parser!(i32).range(1..))
    )]
    pub pid: Option<i32>,
    /// With --pid: move every thread of the process, not only the one named.
    #[cfg_attr(feature = "clap", arg(long))]
    pub threads: bool,
    /// Place the task even on CPUs that are not shielded (no isolation).
    #[cfg_attr(feature = "clap", arg(long))]
    pub allow_unshielded: bool,
    /// The command to start, after `--`.
    #[cfg_attr(feature = "clap", arg(last = true, value_name = "COMMAND"))]
    pub command: Vec<String>,
    /// Share the CPUs' idle time (the Hyades paper's ARTiS sharing): run the
    /// task as best-effort work, SCHED_IDLE at nice 19, placed in the shield
    /// like any task; never real-time, memory not locked.
    #[cfg_attr(feature = "clap", arg(long))]
    pub share: bool,
}

/// The policy of a shared (`--share`) task: SCHED_IDLE at nice 19, so it runs
/// only when no real-time or normal task on the CPU wants to, and never holds
/// the CPU against one (the ARTiS RT1+/Linux task on an RT CPU's idle time).
pub const SHARE_POLICY: Policy = Policy::Idle { nice: 19 };

/// What the task is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A command to start: the resolved program and its argv.
    Exec {
        /// The program, resolved through `$PATH`.
        program: PathBuf,
        /// Its arguments, `argv[0]` first.
        argv: Vec<String>,
    },
    /// An existing process and the threads of it to move.
    Pid {
        /// The process.
        pid: i32,
        /// Its threads to move.
        tids: Vec<i32>,
    },
}

/// A checked request (see [`RtRun::check`]).
#[derive(Debug, Clone)]
pub struct Request {
    /// CPUs to run on.
    pub cpus: CpuSet,
    /// Scheduling policy to set.
    pub policy: Option<Policy>,
    /// The task.
    pub target: Target,
    /// IRQs to bind.
    pub irqs: Vec<u32>,
    /// Reserve the CPUs.
    pub reserve: bool,
    /// The CPUs reserved with `reserve`: `cpus`, plus their SMT siblings when asked.
    pub reserve_cpus: CpuSet,
    /// Let the task lock its memory.
    pub mlock: bool,
    /// Keep the CPUs polling.
    pub idle_poll: bool,
}

/// A thread that could not be placed.
#[derive(Debug)]
pub struct PlaceError {
    /// The thread.
    pub tid: i32,
    /// What the kernel said.
    pub error: io::Error,
    /// The kernel's refusal explained, with the remedy (no PID in it).
    pub detail: String,
    /// The affinity was set but the policy was refused.
    pub policy_refused: bool,
}

impl fmt::Display for PlaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tid = self.tid;
        match self.error.raw_os_error() {
            _ if self.policy_refused => write!(f, "PID {tid}: {}", self.detail),
            Some(libc::ESRCH) => write!(f, "no task with PID {tid}: it exited"),
            Some(libc::EPERM) | Some(libc::EACCES) => write!(
                f,
                "not permitted to move PID {tid}: {}; run as root",
                self.error
            ),
            _ => write!(f, "PID {tid}: {}", self.detail),
        }
    }
}

impl std::error::Error for PlaceError {}

/// Why a run was refused or failed. Refusals ([`RtRun::check`]) change nothing.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad input or a failure, told in one line with the remedy.
    #[error("{0}")]
    Message(String),
    /// A step failed: what was being done, and why.
    #[error("{what}")]
    Step {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Reading the system failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A reservation was refused or failed.
    #[error(transparent)]
    Reserve(#[from] ReserveError),
    /// An IRQ could not be bound.
    #[error(transparent)]
    Irq(#[from] IrqError),
    /// A thread could not be placed.
    #[error(transparent)]
    Place(#[from] PlaceError),
    /// The CPUs could not be kept polling.
    #[error(transparent)]
    Poller(#[from] PollerError),
}

fn refuse(message: impl Into<String>) -> RunError {
    RunError::Message(message.into())
}

fn step(what: impl Into<String>) -> impl FnOnce(io::Error) -> RunError {
    let what = what.into();
    move |source| RunError::Step { what, source }
}

impl RunSpec {
    /// With `share`, the first option given that a shared run cannot have,
    /// named as on the command line (`--fifo`, `--mlock`…).
    pub fn share_conflict(&self) -> Option<&'static str> {
        if !self.share {
            return None;
        }
        let policy = self.policy.map(|p| match p {
            Policy::Fifo(_) => "--fifo",
            Policy::RoundRobin(_) => "--rr",
            Policy::Deadline { .. } => "--deadline",
            Policy::Other { .. } | Policy::Idle { .. } => "--nice",
        });
        let holds = [
            (self.mlock, "--mlock"),
            (self.reserve, "--reserve"),
            (self.idle_poll, "--idle-poll"),
        ];
        policy.or_else(|| first_given(&holds))
    }

    /// Why a shared run cannot also have what this spec asks for, in one
    /// line with the remedy; `None` when nothing conflicts.
    pub fn share_refusal(&self) -> Option<String> {
        self.share_conflict().map(|flag| {
            format!(
                "--share with {flag}: shared work runs at {SHARE_POLICY} in the CPUs' idle \
                 time, never real-time, never locked or holding the CPUs; drop {flag} or --share"
            )
        })
    }

    /// The first option only a root `run` has (the agent places on CPUs
    /// with SCHED_FIFO or SCHED_RR and nothing more), named as on the
    /// command line.
    pub fn root_only(&self) -> Option<&'static str> {
        let deadline = matches!(self.policy, Some(Policy::Deadline { .. }));
        let nice = matches!(
            self.policy,
            Some(Policy::Other { .. } | Policy::Idle { .. })
        );
        first_given(&[
            (!self.irqs.is_empty(), "--irq"),
            (self.reserve, "--reserve"),
            (self.idle_poll, "--idle-poll"),
            (self.mlock, "--mlock"),
            (self.threads, "--threads"),
            (deadline, "--deadline"),
            (nice, "--nice"),
            (self.allow_unshielded, "--allow-unshielded"),
            (self.share, "--share"),
        ])
    }
}

/// The name of the first option `given`.
fn first_given(options: &[(bool, &'static str)]) -> Option<&'static str> {
    options
        .iter()
        .find_map(|&(given, name)| given.then_some(name))
}

/// Why a task may lock all its memory (see [`Event::MemoryLockAllowed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemlockGrant {
    /// Its RLIMIT_MEMLOCK was lifted to unlimited.
    Unlimited,
    /// The limit stays, but the task has CAP_IPC_LOCK.
    IpcLock,
}

/// What a run has to say on the way. Its `Display` is the line to print;
/// [`Event::is_progress`] tells standard output from the error stream.
#[derive(Debug)]
pub enum Event {
    /// The task may lock all its memory (and must do it itself).
    MemoryLockAllowed {
        /// The task.
        pid: i32,
        /// Why it may.
        how: MemlockGrant,
    },
    /// An existing task was moved.
    Moved {
        /// The process.
        pid: i32,
        /// How many of its threads moved.
        threads: usize,
        /// Where to.
        cpus: CpuSet,
        /// Its policy now, if set.
        policy: Option<Policy>,
    },
    /// The run holds these for the adopted task until it exits.
    Holding {
        /// The process.
        pid: i32,
        /// What is held ("IRQ 41", "the reservation of CPU(s) 1", ...).
        what: Vec<String>,
    },
    /// The host took a noticeable share of the polling CPUs' time.
    HostStole {
        /// The polling CPUs.
        cpus: CpuSet,
        /// Steal time while polling.
        steal_ms: u64,
        /// How long they polled.
        elapsed_ms: u64,
    },
    /// An IRQ could not be given its old affinity back.
    IrqNotRestored {
        /// The IRQ.
        irq: u32,
        /// The mask it should have got back.
        old_mask: String,
        /// Why it did not.
        error: IrqError,
    },
    /// The task's memory was bound to the nodes of its CPUs (`--mlock` on
    /// a machine of several memory nodes).
    MemoryBound {
        /// The task.
        pid: i32,
        /// The nodes.
        nodes: CpuSet,
    },
    /// The pages of an adopted task were moved to the nodes of its CPUs.
    PagesMoved {
        /// The task.
        pid: i32,
        /// The nodes.
        nodes: CpuSet,
        /// Pages the kernel could not move.
        not_moved: u64,
    },
    /// The task's memory could not be placed on its CPUs' nodes.
    MemoryNotPlaced {
        /// The task (0: not started yet).
        pid: i32,
        /// The nodes.
        nodes: CpuSet,
        /// Why.
        error: String,
    },
    /// Pages of the task's own (heap, stack, anonymous) sit on a node that
    /// is not its CPUs'.
    RemotePages {
        /// The task.
        pid: i32,
        /// The nodes of its CPUs.
        nodes: CpuSet,
        /// Its pages elsewhere.
        remote: u64,
        /// All its pages of its own.
        total: u64,
    },
    /// The run was stopped by a signal before the adopted task exited.
    Interrupted {
        /// The task.
        pid: i32,
        /// The signal.
        signal: i32,
    },
}

impl Event {
    /// Progress for standard output (else a note, warning or error for the
    /// error stream).
    pub fn is_progress(&self) -> bool {
        matches!(
            self,
            Event::Moved { .. }
                | Event::Holding { .. }
                | Event::MemoryBound { .. }
                | Event::PagesMoved { .. }
        )
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::MemoryLockAllowed { pid, how } => {
                let how = match how {
                    MemlockGrant::Unlimited => "RLIMIT_MEMLOCK unlimited",
                    MemlockGrant::IpcLock => "it has CAP_IPC_LOCK",
                };
                write!(
                    f,
                    "note: memory locks do not survive exec; PID {pid} may lock all its memory \
                     ({how}) and must call mlockall itself"
                )
            }
            Event::Moved {
                pid,
                threads,
                cpus,
                policy,
            } => {
                let policy = policy.map(|p| format!(" at {p}")).unwrap_or_default();
                let s = if *threads == 1 { "" } else { "s" };
                write!(
                    f,
                    "moved PID {pid} ({threads} thread{s}) to CPU(s) {cpus}{policy}"
                )
            }
            Event::Holding { pid, what } => {
                write!(f, "holding {} until PID {pid} exits", what.join(", "))
            }
            Event::HostStole {
                cpus,
                steal_ms,
                elapsed_ms,
            } => write!(
                f,
                "while CPU(s) {cpus} polled, the host took {steal_ms} ms of {elapsed_ms} ms from \
                 them (steal): polling may be hurting here; `cpushield compare --cpus {cpus} \
                 --idle auto` measures halting against polling under your load"
            ),
            Event::IrqNotRestored {
                irq,
                old_mask,
                error,
            } => write!(f, "error: restoring IRQ {irq} to mask {old_mask}: {error}"),
            Event::MemoryBound { pid, nodes } => write!(
                f,
                "bound the memory of PID {pid} to node(s) {nodes}, the nodes of its CPUs (MPOL_BIND)"
            ),
            Event::PagesMoved {
                pid,
                nodes,
                not_moved,
            } => {
                write!(f, "moved the pages of PID {pid} to node(s) {nodes}, the nodes of its CPUs")?;
                if *not_moved > 0 {
                    write!(f, " ({not_moved} pages could not move)")?;
                }
                Ok(())
            }
            Event::MemoryNotPlaced { pid, nodes, error } => write!(
                f,
                "warning: the memory of {} was not placed on node(s) {nodes}, the nodes of its CPUs: {error}; its pages come from any node (fix: `cpushield shield --procs CPUS` gives the shield those nodes)",
                if *pid == 0 { "the task".to_string() } else { format!("PID {pid}") }
            ),
            Event::RemotePages {
                pid,
                nodes,
                remote,
                total,
            } => write!(
                f,
                "warning: {remote} of the {total} resident pages of PID {pid}'s own sit on another node than its CPUs' ({nodes}): each access to them is remote (fix: migratepages {pid} all {nodes}, or start it with `cpushield run --mlock`)"
            ),
            Event::Interrupted { pid, signal } => write!(
                f,
                "stopped by signal {signal} before PID {pid} exited; IRQs restored, reservation \
                 released"
            ),
        }
    }
}

/// The pages of task `pid`'s own (not of files) that sit off `local`, as a
/// warning; `None` when there are none or they cannot be read.
pub fn remote_pages(kernel: &dyn Kernel, pid: i32, local: &CpuSet) -> Option<Event> {
    let pages = numa::pages_per_node(kernel, pid).ok()?.private;
    let total: u64 = pages.values().sum();
    let remote: u64 = pages
        .iter()
        .filter(|(node, _)| !local.contains(**node))
        .map(|(_, n)| n)
        .sum();
    (remote > 0).then(|| Event::RemotePages {
        pid,
        nodes: local.clone(),
        remote,
        total,
    })
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The started command ended so.
    Exited(Exit),
    /// The adopted task was moved; nothing was held for it.
    Moved,
    /// The adopted task exited; what was held for it is let go.
    TaskEnded,
    /// The run was stopped by this signal before the adopted task exited.
    Interrupted(i32),
}

impl Outcome {
    /// The status to exit with: the command's own, 128 + a signal that
    /// stopped the run, else 0.
    pub fn shell_status(self) -> u8 {
        match self {
            Outcome::Exited(exit) => exit.shell_status(),
            Outcome::Moved | Outcome::TaskEnded => 0,
            Outcome::Interrupted(sig) => Exit::Signal(sig).shell_status(),
        }
    }
}

/// The orchestration of one run: reads the system through a [`Kernel`],
/// places through a [`Placer`], reserves in a [`ReserveDir`].
pub struct RtRun<'k> {
    kernel: &'k dyn Kernel,
    placer: &'k dyn Placer,
    reserves: ReserveDir,
    steal: Option<StealMeter>,
}

impl<'k> RtRun<'k> {
    /// A run on `kernel`, placing with `placer`, reserving in `reserves`.
    pub fn new(kernel: &'k dyn Kernel, placer: &'k dyn Placer, reserves: ReserveDir) -> Self {
        Self {
            kernel,
            placer,
            reserves,
            steal: None,
        }
    }

    /// With `--idle-poll`, warns ([`Event::HostStole`]) when the host took
    /// more than 1% of the polling CPUs' time, measured by `meter`.
    pub fn with_steal_meter(mut self, meter: StealMeter) -> Self {
        self.steal = Some(meter);
        self
    }

    /// Checks `spec` against the system (`shielded`: the CPUs shielded from
    /// processes now); changes nothing.
    pub fn check(&self, spec: RunSpec, shielded: &CpuSet) -> Result<Request, RunError> {
        if spec.threads && spec.pid.is_none() {
            return Err(refuse(
                "--threads needs --pid: it moves every thread of an existing task",
            ));
        }
        if let Some(m) = spec.share_refusal() {
            return Err(refuse(m));
        }
        let cpus = spec.cpus.clone();
        if cpus.is_empty() {
            return Err(refuse("--cpus names no CPU: give e.g. --cpus 3"));
        }
        let online = cpushield_kernel::online_cpus(self.kernel)?;
        if !cpus.is_subset(&online) {
            return Err(refuse(format!(
                "CPU(s) {} not online (online CPUs: {online}): pick CPUs from the online list",
                cpus.difference(&online)
            )));
        }
        if !cpus.is_subset(shielded) && !spec.allow_unshielded {
            let now = if shielded.is_empty() {
                "none".to_string()
            } else {
                shielded.to_list()
            };
            return Err(refuse(format!(
                "CPU(s) {} not shielded (shielded now: {now}): shield them first with \
                 `cpushield shield --all {cpus}`, or pass --allow-unshielded to run without isolation",
                cpus.difference(shielded)
            )));
        }
        for &n in &spec.irqs {
            if !self.kernel.exists(&irq::affinity_path(n)) {
                return Err(IrqError::NoSuchIrq { irq: n }.into());
            }
        }
        let target =
            match (spec.pid, spec.command.split_first()) {
                (Some(pid), _) => Target::Pid {
                    pid,
                    tids: self.task_threads(pid, spec.threads)?,
                },
                (None, Some((name, _))) => Target::Exec {
                    program: launch::resolve_program(name)
                        .map_err(|e| refuse(format!("{e}: check the name, or give its path")))?,
                    argv: spec.command.clone(),
                },
                (None, None) => return Err(refuse(
                    "nothing to run: give a command after -- or an existing task with --pid PID",
                )),
            };
        let placing = match target {
            Target::Pid { pid, .. } => pid,
            Target::Exec { .. } => std::process::id() as i32,
        };
        if spec.reserve_siblings && !spec.reserve {
            return Err(refuse(
                "--smt-siblings widens a reservation: give it with --reserve",
            ));
        }
        let reserve_cpus = if spec.reserve_siblings {
            self.with_siblings(&cpus)?
        } else {
            cpus.clone()
        };
        self.reserves.check(&reserve_cpus, placing)?;
        Ok(Request {
            cpus,
            policy: if spec.share {
                Some(SHARE_POLICY)
            } else {
                spec.policy
            },
            target,
            irqs: spec.irqs,
            reserve: spec.reserve,
            reserve_cpus,
            mlock: spec.mlock,
            idle_poll: spec.idle_poll,
        })
    }

    /// `cpus` and their SMT sibling threads (topology/thread_siblings_list).
    fn with_siblings(&self, cpus: &CpuSet) -> Result<CpuSet, RunError> {
        let mut all = cpus.clone();
        for cpu in cpus.iter() {
            let sibs = cpushield_kernel::thread_siblings(self.kernel, cpu)
                .map_err(step(format!("reading the SMT siblings of CPU {cpu}")))?;
            all = all.union(&sibs);
        }
        Ok(all)
    }

    /// The threads of `pid` to move: all of them, or just `pid`.
    fn task_threads(&self, pid: i32, all: bool) -> Result<Vec<i32>, RunError> {
        let proc = Procfs::new(self.kernel);
        let no_task = || {
            refuse(format!(
                "no task with PID {pid}: check the PID (ps -eLf lists tasks and threads)"
            ))
        };
        if pid <= 0 || !self.kernel.exists(&proc.process_dir(pid).join("task")) {
            return Err(no_task());
        }
        if !all {
            return Ok(vec![pid]);
        }
        proc.threads(pid)
            .map_err(step(format!("listing the threads of PID {pid}")))?
            .ok_or_else(no_task)
    }

    /// Carries out a checked request to its end, telling `report` what
    /// happens on the way.
    pub fn run(&self, req: &Request, report: &mut dyn FnMut(Event)) -> Result<Outcome, RunError> {
        match &req.target {
            Target::Exec { program, argv } => self.run_command(req, program, argv, report),
            Target::Pid { pid, tids } => self.adopt(req, *pid, tids, report),
        }
    }

    /// Places thread `tid` (0: the caller) on `cpus` with `policy` now, as
    /// the C API's `cps_place` does: refuses a bad policy and CPUs another
    /// process has reserved.
    pub fn place_now(&self, tid: i32, cpus: &CpuSet, policy: Policy) -> Result<(), RunError> {
        policy.validate().map_err(RunError::Message)?;
        self.reserves.check(cpus, std::process::id() as i32)?;
        Ok(self.place(tid, cpus, Some(policy))?)
    }

    /// Starts the command placed, waits for it, restores.
    fn run_command(
        &self,
        req: &Request,
        program: &Path,
        argv: &[String],
        report: &mut dyn FnMut(Event),
    ) -> Result<Outcome, RunError> {
        let reservation = self.reserve(req, &Holder::current())?;
        let keep: Vec<_> = reservation.iter().flat_map(Reservation::raw_fds).collect();
        // The child inherits this thread's memory policy through fork and
        // exec: bound here, its every page comes from its CPUs' nodes.
        let nodes = if req.mlock {
            self.local_nodes(&req.cpus)
        } else {
            None
        };
        let bound = nodes.as_ref().map(numa::bind_this_thread);
        let pending = launch::fork_held(program, argv, &keep);
        let bound = bound.map(|b| b.map(drop));
        let pending = pending.map_err(step("starting the command"))?;
        let child = pending.pid();
        match (nodes, bound) {
            (Some(nodes), Some(Ok(()))) => report(Event::MemoryBound { pid: child, nodes }),
            (Some(nodes), Some(Err(e))) => report(Event::MemoryNotPlaced {
                pid: child,
                nodes,
                error: format!("set_mempolicy: {e}"),
            }),
            _ => {}
        }
        // Any error from here on drops `pending`: the child is killed before it runs.
        self.place(child, &req.cpus, req.policy)?;
        if req.mlock {
            report(self.allow_mlock(child)?);
        }
        let bindings = self.bind_irqs(&req.irqs, &req.cpus)?;
        let poller = self.keep_polling(req)?;
        if let Some(r) = &reservation {
            r.set_holder(&Holder {
                pid: child,
                command: argv.join(" "),
            })
            .map_err(step("recording the task in its reservation"))?;
        }
        let running = pending.release().map_err(|e| {
            RunError::Message(format!("cannot execute '{}': {e}", program.display()))
        })?;
        let exit = running.wait().map_err(step("waiting for the task"))?;
        stop_polling(poller, report);
        restore_irqs(bindings, report);
        drop(reservation);
        Ok(Outcome::Exited(exit))
    }

    /// Moves an existing task; with IRQs, a reservation or polling, holds
    /// them until it exits.
    fn adopt(
        &self,
        req: &Request,
        pid: i32,
        tids: &[i32],
        report: &mut dyn FnMut(Event),
    ) -> Result<Outcome, RunError> {
        // Opened first: the task may end at any moment from here on.
        let watch = launch::PidWatch::open(pid)
            .map_err(|e| refuse(format!("no task with PID {pid}: {e}; check the PID")))?;
        let reservation = self.reserve(req, &Holder::of_pid(pid))?;
        if req.policy.is_some() {
            // Before the change: `reset` gives each thread its policy back.
            self.placer.record_sched(pid, tids).map_err(step(
                "recording the task's scheduling policy in the shield state",
            ))?;
        }
        let mut moved = 0;
        for &tid in tids {
            match self.place(tid, &req.cpus, req.policy) {
                Ok(()) => moved += 1,
                // A thread that ended while we worked is no longer there to move.
                Err(_)
                    if tid != pid
                        && !self
                            .kernel
                            .exists(&Procfs::new(self.kernel).thread_dir(pid, tid)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if req.mlock {
            report(self.allow_mlock(pid)?);
            self.move_pages(pid, &req.cpus, report);
        }
        report(Event::Moved {
            pid,
            threads: moved,
            cpus: req.cpus.clone(),
            policy: req.policy,
        });
        if req.irqs.is_empty() && reservation.is_none() && !req.idle_poll {
            return Ok(Outcome::Moved);
        }
        let bindings = self.bind_irqs(&req.irqs, &req.cpus)?;
        let poller = self.keep_polling(req)?;
        let mut held: Vec<String> = req.irqs.iter().map(|n| format!("IRQ {n}")).collect();
        if reservation.is_some() {
            held.push(format!("the reservation of CPU(s) {}", req.reserve_cpus));
        }
        if poller.is_some() {
            held.push(format!("CPU(s) {} polling", req.cpus));
        }
        report(Event::Holding { pid, what: held });
        let why = watch.wait().map_err(step("watching the task"))?;
        stop_polling(poller, report);
        restore_irqs(bindings, report);
        drop(reservation);
        match why {
            PidWait::Exited => Ok(Outcome::TaskEnded),
            PidWait::Interrupted(signal) => {
                report(Event::Interrupted { pid, signal });
                Ok(Outcome::Interrupted(signal))
            }
        }
    }

    fn reserve(&self, req: &Request, holder: &Holder) -> Result<Option<Reservation>, RunError> {
        if !req.reserve {
            return Ok(None);
        }
        Ok(Some(self.reserves.reserve(&req.reserve_cpus, holder)?))
    }

    /// Puts thread `tid` on the CPUs (the placer's way) and sets its policy.
    fn place(&self, tid: i32, cpus: &CpuSet, policy: Option<Policy>) -> Result<(), PlaceError> {
        self.placer.place(tid, cpus).map_err(|error| PlaceError {
            tid,
            detail: sched::describe_pin_error(cpus, &error),
            error,
            policy_refused: false,
        })?;
        if let Some(p) = policy {
            sched::set_policy(tid, p).map_err(|error| PlaceError {
                tid,
                detail: sched::describe_policy_error(&p, &error),
                error,
                policy_refused: true,
            })?;
        }
        Ok(())
    }

    /// The memory nodes of `cpus` where placing memory on them means
    /// something: `None` on a machine of one node, and where they are every
    /// node with memory.
    fn local_nodes(&self, cpus: &CpuSet) -> Option<CpuSet> {
        let nodes = numa::nodes(self.kernel);
        let with_memory = CpuSet::from_cpus(nodes.iter().filter(|n| n.memory).map(|n| n.id));
        let local = numa::nodes_of(&nodes, cpus);
        (nodes.len() > 1 && !local.is_empty() && local != with_memory).then_some(local)
    }

    /// Moves the pages of adopted task `pid` to the nodes of `cpus`, then
    /// says how many of its own still sit elsewhere.
    fn move_pages(&self, pid: i32, cpus: &CpuSet, report: &mut dyn FnMut(Event)) {
        let Some(local) = self.local_nodes(cpus) else {
            return;
        };
        let all = CpuSet::from_cpus(numa::nodes(self.kernel).iter().map(|n| n.id));
        match numa::migrate_pages(pid, &all.difference(&local), &local) {
            Ok(not_moved) => report(Event::PagesMoved {
                pid,
                nodes: local.clone(),
                not_moved,
            }),
            Err(e) => report(Event::MemoryNotPlaced {
                pid,
                nodes: local.clone(),
                error: format!("migrate_pages: {e}"),
            }),
        }
        if let Some(event) = remote_pages(self.kernel, pid, &local) {
            report(event);
        }
    }

    /// Lets task `pid` lock all its memory: lifts its RLIMIT_MEMLOCK, or,
    /// where that is not permitted (no CAP_SYS_RESOURCE), relies on its
    /// CAP_IPC_LOCK.
    fn allow_mlock(&self, pid: i32) -> Result<Event, RunError> {
        let how = match sched::unlimit_memlock(pid) {
            Ok(()) => MemlockGrant::Unlimited,
            // The limit stays, but CAP_IPC_LOCK overrides it.
            Err(_) if self.has_ipc_lock(pid) => MemlockGrant::IpcLock,
            Err(e) => {
                return Err(refuse(format!(
                    "cannot lift RLIMIT_MEMLOCK of PID {pid}: {e}; --mlock needs root \
                     (CAP_SYS_RESOURCE, or a task with CAP_IPC_LOCK)"
                )))
            }
        };
        Ok(Event::MemoryLockAllowed { pid, how })
    }

    /// Whether task `pid` has CAP_IPC_LOCK (locks memory beyond RLIMIT_MEMLOCK).
    fn has_ipc_lock(&self, pid: i32) -> bool {
        const CAP_IPC_LOCK: u32 = 14;
        Procfs::new(self.kernel)
            .process_file(pid, "status")
            .ok()
            .flatten()
            .and_then(|s| cpushield_parse::pid_status::parse_cap_eff(&s))
            .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
    }

    /// Binds each IRQ to the CPUs; on an error the bindings made so far drop,
    /// restoring their IRQs.
    fn bind_irqs(&self, irqs: &[u32], cpus: &CpuSet) -> Result<Vec<IrqBinding<'k>>, RunError> {
        irqs.iter()
            .map(|&n| irq::bind_irq_with(self.kernel, n, cpus).map_err(RunError::from))
            .collect()
    }

    /// With `--idle-poll`, a SCHED_IDLE spinner on each of the task's CPUs,
    /// placed the way the task is.
    fn keep_polling(&self, req: &Request) -> Result<Option<Polling>, RunError> {
        if !req.idle_poll {
            return Ok(None);
        }
        let steal_since = self.steal.and_then(|meter| meter(&req.cpus));
        Ok(Some(Polling {
            poller: IdlePoller::start(&req.cpus, self.placer.poller_placement())?,
            cpus: req.cpus.clone(),
            started: Instant::now(),
            steal_since,
        }))
    }
}

/// Polling CPUs and the evidence on whether polling helps: a vCPU that never
/// halts competes on the host with the VM's own I/O emulation, and steal
/// time on the polled CPUs is the sign that it lost.
struct Polling {
    poller: IdlePoller,
    cpus: CpuSet,
    started: Instant,
    steal_since: Option<Box<dyn FnOnce() -> Option<u64>>>,
}

/// Stops the pollers; says whether the host took more than 1% of the time
/// from the polling CPUs.
fn stop_polling(polling: Option<Polling>, report: &mut dyn FnMut(Event)) {
    let Some(p) = polling else { return };
    // Measured while the pollers still run, then they stop.
    let steal_ns = p.steal_since.and_then(|since| since());
    let elapsed_ms = p.started.elapsed().as_millis() as u64;
    drop(p.poller);
    let Some(steal_ns) = steal_ns else { return };
    let steal_ms = steal_ns / 1_000_000;
    if steal_ms * 100 > elapsed_ms.max(1) {
        report(Event::HostStole {
            cpus: p.cpus,
            steal_ms,
            elapsed_ms,
        });
    }
}

fn restore_irqs(bindings: Vec<IrqBinding<'_>>, report: &mut dyn FnMut(Event)) {
    for b in bindings {
        let (irq, old_mask) = (b.irq(), b.old_mask().to_string());
        if let Err(error) = b.restore() {
            report(Event::IrqNotRestored {
                irq,
                old_mask,
                error,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;
    use std::cell::RefCell;

    /// Records where it was asked to place threads; moves nothing.
    #[derive(Default)]
    struct RecordingPlacer {
        placed: RefCell<Vec<(i32, CpuSet)>>,
        poller_fails: bool,
    }

    fn refuse_poller(_tid: i32, _cpus: &CpuSet) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EPERM))
    }

    impl Placer for RecordingPlacer {
        fn place(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
            self.placed.borrow_mut().push((tid, cpus.clone()));
            Ok(())
        }
        fn poller_placement(&self) -> Option<PlaceFn> {
            self.poller_fails.then(|| PlaceFn::new(refuse_poller))
        }
    }

    fn fake_system() -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_file("/proc/irq/41/smp_affinity", "f\n");
        k.set_file("/proc/irq/42/smp_affinity", "f\n");
        k.refuse_writes("/proc/irq/42/smp_affinity");
        k.add_dir("/proc/4242/task/4242");
        k.add_dir("/proc/4242/task/4243");
        k
    }

    fn spec(cpus: &[usize]) -> RunSpec {
        RunSpec {
            cpus: CpuSet::from_cpus(cpus.iter().copied()),
            allow_unshielded: true,
            command: vec!["true".into()],
            ..RunSpec::default()
        }
    }

    /// Checks a spec on a fake 4-CPU system where nothing is shielded.
    fn check(spec: RunSpec) -> Result<Request, RunError> {
        let reserves = tempfile::tempdir().unwrap();
        let placer = RecordingPlacer::default();
        RtRun::new(&fake_system(), &placer, ReserveDir::new(reserves.path()))
            .check(spec, &CpuSet::new())
    }

    fn err(r: Result<Request, RunError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn shielded_cpus_need_no_override_and_reserved_ones_are_refused() {
        let reserves = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(reserves.path());
        let shielded = CpuSet::from_cpus([2, 3]);
        let kernel = fake_system();
        let placer = RecordingPlacer::default();
        let run = RtRun::new(&kernel, &placer, rd.clone());
        let shielded_spec = || RunSpec {
            allow_unshielded: false,
            ..spec(&[3])
        };
        assert!(run.check(shielded_spec(), &shielded).is_ok());
        let holder = Holder {
            pid: 777,
            command: "rt-app".into(),
        };
        let _held = rd.reserve(&CpuSet::from_cpus([3]), &holder).unwrap();
        let e = err(run.check(shielded_spec(), &shielded));
        assert!(e.contains("CPU 3 is reserved by PID 777 (rt-app)"), "{e}");
    }

    #[test]
    fn smt_siblings_widen_the_reservation_to_the_core_and_a_held_sibling_refuses() {
        let reserves = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(reserves.path());
        let kernel = fake_system();
        kernel.set_file(
            "/sys/devices/system/cpu/cpu3/topology/thread_siblings_list",
            "1,3\n",
        );
        let placer = RecordingPlacer::default();
        let run = RtRun::new(&kernel, &placer, rd.clone());
        let reserving = |siblings| RunSpec {
            reserve: true,
            reserve_siblings: siblings,
            ..spec(&[3])
        };
        let req = run.check(reserving(false), &CpuSet::new()).unwrap();
        assert_eq!(req.reserve_cpus, CpuSet::from_cpus([3]));
        let req = run.check(reserving(true), &CpuSet::new()).unwrap();
        assert_eq!(req.reserve_cpus, CpuSet::from_cpus([1, 3]));
        assert_eq!(
            req.cpus,
            CpuSet::from_cpus([3]),
            "the task still runs on CPU 3 only"
        );
        let _held = rd
            .reserve(
                &CpuSet::from_cpus([1]),
                &Holder {
                    pid: 777,
                    command: "other-rt".into(),
                },
            )
            .unwrap();
        assert!(run.check(reserving(false), &CpuSet::new()).is_ok());
        let e = err(run.check(reserving(true), &CpuSet::new()));
        assert!(e.contains("CPU 1 is reserved by PID 777 (other-rt)"), "{e}");
        let e = err(run.check(
            RunSpec {
                reserve: false,
                ..reserving(true)
            },
            &CpuSet::new(),
        ));
        assert!(e.contains("give it with --reserve"), "{e}");
    }

    #[test]
    fn threads_without_a_pid_and_an_empty_cpu_list_are_refused() {
        let e = err(check(RunSpec {
            threads: true,
            ..spec(&[1])
        }));
        assert!(e.contains("--threads needs --pid"), "{e}");
        let e = err(check(spec(&[])));
        assert!(e.contains("--cpus names no CPU"), "{e}");
    }

    #[test]
    fn unshielded_cpus_are_refused_naming_the_shield_command() {
        let e = err(check(RunSpec {
            allow_unshielded: false,
            ..spec(&[2])
        }));
        assert!(
            e.contains("CPU(s) 2 not shielded (shielded now: none)"),
            "{e}"
        );
        assert!(e.contains("cpushield shield --all 2"), "{e}");
        assert!(check(spec(&[2])).is_ok());
    }

    #[test]
    fn offline_cpus_missing_irqs_tasks_and_commands_are_refused() {
        let e = err(check(spec(&[9])));
        assert!(e.contains("CPU(s) 9 not online (online CPUs: 0-3)"), "{e}");
        let e = err(check(RunSpec {
            irqs: vec![7],
            ..spec(&[2])
        }));
        assert!(e.contains("IRQ 7 does not exist"), "{e}");
        let e = err(check(RunSpec {
            pid: Some(99),
            ..spec(&[2])
        }));
        assert!(e.contains("no task with PID 99"), "{e}");
        let e = err(check(RunSpec {
            command: vec!["cpushield-no-such-cmd".into()],
            ..spec(&[2])
        }));
        assert!(e.contains("'cpushield-no-such-cmd' not found"), "{e}");
        let e = err(check(RunSpec {
            command: Vec::new(),
            ..spec(&[2])
        }));
        assert!(e.contains("nothing to run"), "{e}");
    }

    #[test]
    fn a_shared_run_is_sched_idle_at_nice_19_and_nothing_more() {
        let req = check(RunSpec {
            share: true,
            ..spec(&[2])
        })
        .unwrap();
        assert_eq!(req.policy, Some(Policy::Idle { nice: 19 }));
        assert!(!req.mlock && !req.reserve && !req.idle_poll);
        for (bad, named) in [
            (
                RunSpec {
                    policy: Some(Policy::Fifo(80)),
                    ..spec(&[2])
                },
                "--fifo",
            ),
            (
                RunSpec {
                    policy: Some(Policy::RoundRobin(5)),
                    ..spec(&[2])
                },
                "--rr",
            ),
            (
                RunSpec {
                    policy: Some(Policy::Other { nice: 0 }),
                    ..spec(&[2])
                },
                "--nice",
            ),
            (
                RunSpec {
                    mlock: true,
                    ..spec(&[2])
                },
                "--mlock",
            ),
            (
                RunSpec {
                    reserve: true,
                    ..spec(&[2])
                },
                "--reserve",
            ),
            (
                RunSpec {
                    idle_poll: true,
                    ..spec(&[2])
                },
                "--idle-poll",
            ),
        ] {
            let shared = RunSpec { share: true, ..bad };
            assert_eq!(shared.share_conflict(), Some(named));
            let e = err(check(shared));
            assert!(
                e.starts_with(&format!(
                    "--share with {named}: shared work runs at SCHED_IDLE (nice 19)"
                )),
                "{e}"
            );
            assert!(e.ends_with(&format!("drop {named} or --share")), "{e}");
        }
        let unshared = RunSpec {
            policy: Some(Policy::Fifo(80)),
            ..spec(&[2])
        };
        assert_eq!(unshared.share_conflict(), None, "no --share, no conflict");
    }

    #[test]
    fn through_the_agent_only_cpus_and_a_fifo_or_rr_priority_may_be_asked_for() {
        let plain = RunSpec {
            policy: Some(Policy::RoundRobin(5)),
            ..spec(&[1])
        };
        let plain = RunSpec {
            allow_unshielded: false,
            ..plain
        };
        assert_eq!(plain.root_only(), None);
        for (flag, asked) in [
            (
                "--irq",
                RunSpec {
                    irqs: vec![24],
                    ..plain.clone()
                },
            ),
            (
                "--reserve",
                RunSpec {
                    reserve: true,
                    ..plain.clone()
                },
            ),
            (
                "--deadline",
                RunSpec {
                    policy: Some(Policy::Deadline {
                        runtime_ns: 200_000,
                        deadline_ns: 1_000_000,
                        period_ns: 1_000_000,
                    }),
                    ..plain.clone()
                },
            ),
            (
                "--nice",
                RunSpec {
                    policy: Some(Policy::Other { nice: 3 }),
                    ..plain.clone()
                },
            ),
            (
                "--mlock",
                RunSpec {
                    mlock: true,
                    ..plain.clone()
                },
            ),
            (
                "--share",
                RunSpec {
                    share: true,
                    policy: None,
                    ..plain.clone()
                },
            ),
        ] {
            assert_eq!(asked.root_only(), Some(flag));
        }
    }

    #[test]
    fn threads_selects_every_thread_of_the_process() {
        let adopt = |threads| RunSpec {
            pid: Some(4242),
            threads,
            command: Vec::new(),
            ..spec(&[2])
        };
        assert_eq!(
            check(adopt(false)).unwrap().target,
            Target::Pid {
                pid: 4242,
                tids: vec![4242]
            }
        );
        assert_eq!(
            check(adopt(true)).unwrap().target,
            Target::Pid {
                pid: 4242,
                tids: vec![4242, 4243]
            }
        );
    }

    #[test]
    fn a_command_is_resolved_through_path() {
        let req = check(RunSpec {
            irqs: vec![41],
            command: vec!["sh".into(), "-c".into(), "true".into()],
            ..spec(&[2])
        })
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

    /// A checked request on the fake system: `target` with IRQs `irqs` on CPU 1.
    fn request(target: Target, irqs: &[u32]) -> Request {
        Request {
            cpus: CpuSet::from_cpus([1]),
            policy: None,
            target,
            irqs: irqs.to_vec(),
            reserve: false,
            reserve_cpus: CpuSet::from_cpus([1]),
            mlock: false,
            idle_poll: false,
        }
    }

    fn sh(script: &str) -> Target {
        Target::Exec {
            program: launch::resolve_program("sh").unwrap(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
        }
    }

    fn irq41(k: &FakeKernel) -> String {
        k.file("/proc/irq/41/smp_affinity")
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn a_started_command_is_placed_and_its_irqs_restored_when_it_ends_with_its_status() {
        let kernel = fake_system();
        let placer = RecordingPlacer::default();
        let reserves = tempfile::tempdir().unwrap();
        let run = RtRun::new(&kernel, &placer, ReserveDir::new(reserves.path()));
        let req = request(sh("exit 7"), &[41]);
        let mut events = Vec::new();
        let outcome = run.run(&req, &mut |e| events.push(e)).unwrap();
        assert_eq!(outcome, Outcome::Exited(Exit::Code(7)));
        assert_eq!(outcome.shell_status(), 7);
        let placed = placer.placed.borrow();
        assert_eq!(placed.len(), 1, "the child, once: {placed:?}");
        assert_eq!(placed[0].1, CpuSet::from_cpus([1]));
        assert_eq!(irq41(&kernel), "f", "IRQ 41 restored");
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn an_irq_that_cannot_be_bound_restores_the_ones_bound_and_the_command_never_runs() {
        let kernel = fake_system();
        let placer = RecordingPlacer::default();
        let reserves = tempfile::tempdir().unwrap();
        let run = RtRun::new(&kernel, &placer, ReserveDir::new(reserves.path()));
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let req = request(sh(&format!("touch {}", marker.display())), &[41, 42]);
        let e = run.run(&req, &mut |_| {}).unwrap_err();
        assert!(matches!(e, RunError::Irq(_)), "{e:?}");
        assert_eq!(irq41(&kernel), "f", "IRQ 41 restored on the failure");
        assert!(!marker.exists(), "the command must not run unplaced");
    }

    #[test]
    fn an_adopted_task_is_moved_and_released_when_nothing_is_held() {
        let kernel = fake_system();
        let placer = RecordingPlacer::default();
        let reserves = tempfile::tempdir().unwrap();
        let run = RtRun::new(&kernel, &placer, ReserveDir::new(reserves.path()));
        let me = std::process::id() as i32;
        let req = request(
            Target::Pid {
                pid: me,
                tids: vec![me],
            },
            &[],
        );
        let mut events = Vec::new();
        assert_eq!(
            run.run(&req, &mut |e| events.push(e)).unwrap(),
            Outcome::Moved
        );
        assert_eq!(*placer.placed.borrow(), [(me, CpuSet::from_cpus([1]))]);
        let lines: Vec<String> = events.iter().map(ToString::to_string).collect();
        assert_eq!(lines, [format!("moved PID {me} (1 thread) to CPU(s) 1")]);
        assert!(events[0].is_progress());
    }

    #[test]
    fn pollers_that_cannot_start_restore_the_irqs_of_an_adopted_task() {
        let kernel = fake_system();
        let placer = RecordingPlacer {
            poller_fails: true,
            ..RecordingPlacer::default()
        };
        let reserves = tempfile::tempdir().unwrap();
        let run = RtRun::new(&kernel, &placer, ReserveDir::new(reserves.path()));
        let me = std::process::id() as i32;
        let mut req = request(
            Target::Pid {
                pid: me,
                tids: vec![me],
            },
            &[41],
        );
        req.idle_poll = true;
        let e = run.run(&req, &mut |_| {}).unwrap_err();
        assert!(
            e.to_string().contains("could not keep CPU 1 polling"),
            "{e}"
        );
        assert_eq!(irq41(&kernel), "f", "IRQ 41 restored on the failure");
    }

    #[test]
    fn place_now_refuses_a_bad_policy_and_reserved_cpus_before_placing() {
        let kernel = fake_system();
        let placer = RecordingPlacer::default();
        let reserves = tempfile::tempdir().unwrap();
        let rd = ReserveDir::new(reserves.path());
        let run = RtRun::new(&kernel, &placer, rd.clone());
        let e = run
            .place_now(0, &CpuSet::from_cpus([1]), Policy::Fifo(0))
            .unwrap_err();
        assert!(matches!(e, RunError::Message(_)), "{e:?}");
        let _held = rd
            .reserve(
                &CpuSet::from_cpus([1]),
                &Holder {
                    pid: 777,
                    command: "rt-app".into(),
                },
            )
            .unwrap();
        let e = run
            .place_now(0, &CpuSet::from_cpus([1]), Policy::Other { nice: 0 })
            .unwrap_err();
        assert!(matches!(e, RunError::Reserve(_)), "{e:?}");
        assert!(placer.placed.borrow().is_empty());
    }

    #[test]
    fn place_errors_name_the_task_and_the_remedy() {
        let esrch = PlaceError {
            tid: 5,
            error: io::Error::from_raw_os_error(libc::ESRCH),
            detail: "d".into(),
            policy_refused: false,
        };
        assert_eq!(esrch.to_string(), "no task with PID 5: it exited");
        let eperm = PlaceError {
            error: io::Error::from_raw_os_error(libc::EPERM),
            ..esrch
        };
        assert!(eperm
            .to_string()
            .starts_with("not permitted to move PID 5: "));
        assert!(eperm.to_string().ends_with("; run as root"));
        let policy = PlaceError {
            policy_refused: true,
            ..eperm
        };
        assert_eq!(policy.to_string(), "PID 5: d");
    }

    #[test]
    fn events_read_as_one_line_each_with_the_remedy_where_there_is_one() {
        let cpus = CpuSet::from_cpus([1]);
        let lines = [
            Event::MemoryLockAllowed {
                pid: 9,
                how: MemlockGrant::IpcLock,
            },
            Event::HostStole {
                cpus: cpus.clone(),
                steal_ms: 30,
                elapsed_ms: 1000,
            },
            Event::Interrupted { pid: 9, signal: 15 },
            Event::Holding {
                pid: 9,
                what: vec!["IRQ 41".into(), "CPU(s) 1 polling".into()],
            },
        ]
        .map(|e| e.to_string());
        assert_eq!(
            lines,
            [
                "note: memory locks do not survive exec; PID 9 may lock all its memory \
                 (it has CAP_IPC_LOCK) and must call mlockall itself",
                "while CPU(s) 1 polled, the host took 30 ms of 1000 ms from them (steal): polling \
                 may be hurting here; `cpushield compare --cpus 1 --idle auto` measures halting \
                 against polling under your load",
                "stopped by signal 15 before PID 9 exited; IRQs restored, reservation released",
                "holding IRQ 41, CPU(s) 1 polling until PID 9 exits",
            ]
        );
        assert_eq!(Outcome::Interrupted(15).shell_status(), 143);
        assert_eq!(Outcome::TaskEnded.shell_status(), 0);
    }

    #[test]
    fn a_task_whose_own_pages_sit_off_its_nodes_is_named_with_the_fix_and_file_pages_do_not_count()
    {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file(
            "/proc/9/numa_maps",
            "00400000 default file=/bin/rt N0=50\n7f0000000000 default anon=30 N0=10 N1=20\n",
        );
        let local = CpuSet::from_cpus([1]);
        let event = remote_pages(&k, 9, &local).unwrap();
        assert_eq!(
            event.to_string(),
            "warning: 10 of the 30 resident pages of PID 9's own sit on another node than its \
             CPUs' (1): each access to them is remote (fix: migratepages 9 all 1, or start it \
             with `cpushield run --mlock`)"
        );
        assert!(!event.is_progress());
        k.set_file("/proc/9/numa_maps", "7f0000000000 default anon=30 N1=30\n");
        assert!(remote_pages(&k, 9, &local).is_none());
        let bound = Event::MemoryBound {
            pid: 9,
            nodes: local,
        };
        assert!(bound.is_progress());
        assert_eq!(
            bound.to_string(),
            "bound the memory of PID 9 to node(s) 1, the nodes of its CPUs (MPOL_BIND)"
        );
    }
}
