//! `cpushield run` without root while an agent listens (or with
//! `--via-agent`): the agent places the caller's own process through its
//! socket ([access] grants, [`cpushield_agent::client`]), then this process
//! execs the command, which keeps the CPUs and the policy.

use super::RunArgs;
use crate::args::{EXIT_ERROR, EXIT_OK};
use cpushield_rt::run::RunSpec;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The agent's socket when `run` goes through the agent: asked for, or not
/// root while an agent's socket exists (without one, a user's `run` places
/// by itself as before, as far as its rights go).
pub(super) fn wanted(args: &RunArgs) -> Option<PathBuf> {
    let socket = crate::host::agent_socket(args.agent_socket.clone());
    let wanted = args.via_agent
        || args.agent_socket.is_some()
        || (!nix::unistd::geteuid().is_root() && socket.exists());
    wanted.then_some(socket)
}

fn refuse(message: String) -> anyhow::Result<ExitCode> {
    eprintln!("cpushield: {message}");
    Ok(ExitCode::from(EXIT_ERROR))
}

/// Asks the agent at `socket` to place this process (or `--pid`), then
/// execs the command.
pub(super) fn run(spec: RunSpec, socket: &Path) -> anyhow::Result<ExitCode> {
    let reply = match cpushield_agent::client::place(&spec, socket) {
        Ok(reply) => reply,
        Err(refusal) => return refuse(refusal),
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
