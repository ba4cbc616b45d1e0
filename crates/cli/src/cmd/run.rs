//! `cpushield run`: start a command, or move an existing task, onto shielded
//! CPUs with a scheduling policy; optionally bind IRQs to those CPUs, reserve
//! them and keep them polling for as long as the task lives.
//!
//! The run itself (validation, spawn or adopt, placement, policy, mlock, IRQ
//! binding and restore, reservation, idle poll, wait) is
//! [`cpushield_rt::run::RtRun`]; this file parses the arguments, supplies the
//! shield's placement and the steal-time meter, and prints what the run says.

use crate::args::{cpu_set, duration};
use anyhow::Context;
use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_measure::procstat;
use cpushield_rt::run::{RtRun, RunSpec};
use cpushield_rt::sched::{self, Policy};
use cpushield_rt::shield_placer::ShieldPlacer;
use cpushield_shield::placement;
use std::process::ExitCode;

/// Arguments of `cpushield run`.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("policy").multiple(false))]
pub struct RunArgs {
    /// CPUs to run on (list `3`, `2-3` or mask `0x8`); they must be shielded.
    #[arg(long, value_parser = cpu_set, value_name = "CPUS")]
    cpus: CpuSet,
    /// SCHED_FIFO at this priority (1-99).
    #[arg(long, value_name = "PRIO", group = "policy", value_parser = sched::parse_priority)]
    fifo: Option<u8>,
    /// SCHED_RR at this priority (1-99).
    #[arg(long, value_name = "PRIO", group = "policy", value_parser = sched::parse_priority)]
    rr: Option<u8>,
    /// SCHED_DEADLINE with RUNTIME/DEADLINE/PERIOD, e.g. 200us/1ms/1ms.
    #[arg(long, value_name = "R/D/P", group = "policy", value_parser = deadline)]
    deadline: Option<Policy>,
    /// SCHED_OTHER at this nice value (-20..19).
    #[arg(long, value_name = "NICE", group = "policy", allow_hyphen_values = true, value_parser = sched::parse_nice)]
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
    /// With --reserve: reserve the CPUs' SMT sibling threads too (a busy
    /// sibling slows the reserved CPU down; Sherer §6).
    #[arg(long, requires = "reserve")]
    smt_siblings: bool,
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
    /// Share the CPUs' idle time (the Hyades paper's ARTiS sharing): run the
    /// task as best-effort work, SCHED_IDLE at nice 19, placed in the shield
    /// like any task; never real-time, memory not locked.
    #[arg(long)]
    share: bool,
    /// Ask the agent (its socket, [access] grants) to place this process
    /// instead of placing it here; the default when not root and the agent's
    /// socket exists.
    #[arg(long)]
    via_agent: bool,
    /// The agent's socket (default $CPUSHIELD_AGENT_SOCKET, else /run/cpushield/agent.sock).
    #[arg(long, value_name = "PATH")]
    agent_socket: Option<std::path::PathBuf>,
    /// The command to start, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// `--deadline`: RUNTIME/DEADLINE/PERIOD, each a duration as every option takes it.
fn deadline(text: &str) -> Result<Policy, String> {
    sched::parse_deadline(text, duration)
}

impl RunArgs {
    fn policy(&self) -> Option<Policy> {
        self.fifo
            .map(Policy::Fifo)
            .or(self.rr.map(Policy::RoundRobin))
            .or(self.deadline)
            .or(self.nice.map(|nice| Policy::Other { nice }))
    }

    fn spec(self) -> RunSpec {
        RunSpec {
            policy: self.policy(),
            cpus: self.cpus,
            irqs: self.irq,
            reserve: self.reserve,
            reserve_siblings: self.smt_siblings,
            mlock: self.mlock,
            idle_poll: self.idle_poll,
            pid: self.pid,
            threads: self.threads,
            allow_unshielded: self.allow_unshielded,
            command: self.command,
            share: self.share,
        }
    }
}

/// Steal time of `cpus` from /proc/stat, from now to when it is asked.
fn steal_meter(cpus: &CpuSet) -> Option<Box<dyn FnOnce() -> Option<u64>>> {
    procstat::steal_meter(&crate::host::real(), cpus)
}

/// Runs `cpushield run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let agent = via_agent::wanted(&args);
    let spec = args.spec();
    if let Some(refusal) = spec.share_refusal() {
        anyhow::bail!(refusal);
    }
    if let Some(socket) = agent {
        return via_agent::run(spec, &socket);
    }
    let host = crate::host::real();
    let shielded = placement::shielded_procs(&host).context("reading the shield state")?;
    let placer = ShieldPlacer(host.clone());
    let run = RtRun::new(host.kernel(), &placer, crate::host::reserve_dir())
        .with_steal_meter(steal_meter);
    let req = run.check(spec, &shielded)?;
    let outcome = run.run(&req, &mut |event| {
        if event.is_progress() {
            println!("{event}");
        } else {
            eprintln!("cpushield: {event}");
        }
    })?;
    Ok(ExitCode::from(outcome.shell_status()))
}

mod via_agent;

#[cfg(test)]
mod tests;
