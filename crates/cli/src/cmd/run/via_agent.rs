//! `cpushield run` without root while an agent listens (or with
//! `--via-agent`): the agent places the
//! caller's own process through its socket ([access] grants,
//! `cpushield_agent::socket::ask`), then this
//! process execs the command, which keeps the CPUs and the policy.

use super::RunArgs;
use crate::args::{EXIT_ERROR, EXIT_OK};
use cpushield_agent::access::{Place, Policy, Request};
use cpushield_rt::run::RunSpec;
use cpushield_rt::sched::Policy as RtPolicy;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The agent's socket when `run` goes through the agent: asked for, or not
/// root while an agent's socket exists (without one, a user's `run` places
/// by itself as before, as far as its rights go).
pub(super) fn wanted(args: &RunArgs) -> Option<PathBuf> {
    let socket = socket_path(args);
    let wanted = args.via_agent
        || args.agent_socket.is_some()
        || (!nix::unistd::geteuid().is_root() && socket.exists());
    wanted.then_some(socket)
}

/// The agent's socket: `--agent-socket`, `$CPUSHIELD_AGENT_SOCKET`, or the default.
fn socket_path(args: &RunArgs) -> PathBuf {
    args.agent_socket.clone().unwrap_or_else(|| {
        std::env::var_os("CPUSHIELD_AGENT_SOCKET")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| cpushield_config::DEFAULT_SOCKET.into())
    })
}

fn refuse(message: String) -> anyhow::Result<ExitCode> {
    eprintln!("cpushield: {message}");
    Ok(ExitCode::from(EXIT_ERROR))
}

/// Asks the agent at `socket` to place this process (or `--pid`), then
/// execs the command.
pub(super) fn run(spec: RunSpec, socket: &Path) -> anyhow::Result<ExitCode> {
    if let Some(flag) = spec.root_only() {
        return refuse(format!(
            "{flag} needs root: through the agent, `run` places on --cpus with --fifo or --rr only; run as root, or drop {flag}"
        ));
    }
    if spec.pid.is_none() && spec.command.is_empty() {
        return refuse("give the command after `--`, or --pid PID".into());
    }
    let (policy, priority) = match spec.policy {
        Some(RtPolicy::Fifo(p)) => (Policy::Fifo, p as u32),
        Some(RtPolicy::RoundRobin(p)) => (Policy::Rr, p as u32),
        _ => (Policy::Other, 0),
    };
    let request = Request::Place(Place {
        pid: spec.pid.unwrap_or(0),
        cpus: spec.cpus.to_list(),
        policy,
        priority,
    });
    let reply = match cpushield_agent::socket::ask(socket, &request) {
        Ok(reply) => reply,
        Err(refusal) => return refuse(refusal.to_string()),
    };
    println!("cpushield: agent: {reply}");
    if spec.command.is_empty() {
        return Ok(ExitCode::from(EXIT_OK));
    }
    let error = std::process::Command::new(&spec.command[0])
        .args(&spec.command[1..])
        .exec();
    refuse(format!("cannot start {} ({error})", spec.command[0]))
}
