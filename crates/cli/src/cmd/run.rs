//! `cpushield run`: start a command, or move an existing task, onto shielded
//! CPUs with a scheduling policy; optionally bind IRQs to those CPUs, reserve
//! them and keep them polling for as long as the task lives.
//!
//! The run itself (validation, spawn or adopt, placement, policy, mlock, IRQ
//! binding and restore, reservation, idle poll, wait) is
//! [`cpushield_rt::run::RtRun`]; this file parses the arguments, supplies the
//! shield's placement and the steal-time meter, and prints what the run says.

use anyhow::Context;
use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_measure::procstat;
use cpushield_rt::run::{RtRun, RunSpec};
use cpushield_rt::sched::{self, Policy};
use cpushield_rt::shield_placer::ShieldPlacer;
use cpushield_shield::placement;
use std::process::ExitCode;

/// Arguments of `cpushield run`: the run's own ([`RunSpec`]), the policy,
/// and whether the agent places it.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("policy").multiple(false))]
pub struct RunArgs {
    #[command(flatten)]
    spec: RunSpec,
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
    /// Ask the agent (its socket, [access] grants) to place this process
    /// instead of placing it here; the default when not root and the agent's
    /// socket exists.
    #[arg(long)]
    via_agent: bool,
    /// The agent's socket (default $CPUSHIELD_AGENT_SOCKET, else /run/cpushield/agent.sock).
    #[arg(long, value_name = "PATH")]
    agent_socket: Option<std::path::PathBuf>,
}

/// `--deadline`: RUNTIME/DEADLINE/PERIOD, each a duration as every option takes it.
fn deadline(text: &str) -> Result<Policy, String> {
    sched::parse_deadline(text, cpushield_cpuset::parse_duration_arg)
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
            ..self.spec
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
