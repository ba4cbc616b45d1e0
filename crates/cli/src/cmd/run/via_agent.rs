//! `cpushield run` without root while an agent listens (or with
//! `--via-agent`): the agent places the
//! caller's own process through its socket ([access] grants,
//! `cpushield_agent::socket::ask`), then this
//! process execs the command, which keeps the CPUs and the policy.

use super::RunArgs;
use crate::args::{EXIT_ERROR, EXIT_OK};
use cpushield_agent::access::{Place, Policy, Request};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

/// Whether `run` goes through the agent: asked for, or not root while an
/// agent's socket exists (without one, a user's `run` places by itself as
/// before, as far as its rights go).
pub(super) fn wanted(args: &RunArgs) -> bool {
    args.via_agent
        || args.agent_socket.is_some()
        || (!nix::unistd::geteuid().is_root() && socket_path(args).exists())
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

/// The options only a root `run` has, named as on the command line.
pub(super) fn root_only(args: &RunArgs) -> Option<&'static str> {
    [
        (!args.irq.is_empty(), "--irq"),
        (args.reserve, "--reserve"),
        (args.idle_poll, "--idle-poll"),
        (args.mlock, "--mlock"),
        (args.threads, "--threads"),
        (args.deadline.is_some(), "--deadline"),
        (args.nice.is_some(), "--nice"),
        (args.allow_unshielded, "--allow-unshielded"),
        (args.share, "--share"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

fn refuse(message: String) -> anyhow::Result<ExitCode> {
    eprintln!("cpushield: {message}");
    Ok(ExitCode::from(EXIT_ERROR))
}

/// Asks the agent to place this process (or `--pid`), then execs the command.
pub(super) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(flag) = root_only(&args) {
        return refuse(format!(
            "{flag} needs root: through the agent, `run` places on --cpus with --fifo or --rr only; run as root, or drop {flag}"
        ));
    }
    if args.pid.is_none() && args.command.is_empty() {
        return refuse("give the command after `--`, or --pid PID".into());
    }
    let (policy, priority) = match (args.fifo, args.rr) {
        (Some(p), _) => (Policy::Fifo, p as u32),
        (_, Some(p)) => (Policy::Rr, p as u32),
        _ => (Policy::Other, 0),
    };
    let request = Request::Place(Place {
        pid: args.pid.unwrap_or(0),
        cpus: args.cpus.to_list(),
        policy,
        priority,
    });
    let reply = match cpushield_agent::socket::ask(&socket_path(&args), &request) {
        Ok(reply) => reply,
        Err(refusal) => return refuse(refusal.to_string()),
    };
    println!("cpushield: agent: {reply}");
    if args.command.is_empty() {
        return Ok(ExitCode::from(EXIT_OK));
    }
    let error = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .exec();
    refuse(format!("cannot start {} ({error})", args.command[0]))
}
