//! `cpushield run` through the agent, the caller's side: the run asked for
//! as the one request the socket takes, refused in one line when it asks
//! for more than the agent grants, and sent.

use crate::access::{Place, Policy, Request};
use cpushield_rt::run::RunSpec;
use cpushield_rt::sched::Policy as RtPolicy;
use std::path::Path;

/// The request that places `spec`'s process (its `--pid`, else the caller
/// itself, which then execs the command); refused, in one line naming the
/// remedy, when `spec` asks for what only a root `run` does, or names
/// neither a command nor a process.
pub fn place_request(spec: &RunSpec) -> Result<Request, String> {
    if let Some(flag) = spec.root_only() {
        return Err(format!(
            "{flag} needs root: through the agent, `run` places on --cpus with --fifo or --rr only; run as root, or drop {flag}"
        ));
    }
    if spec.pid.is_none() && spec.command.is_empty() {
        return Err("give the command after `--`, or --pid PID".into());
    }
    let (policy, priority) = match spec.policy {
        Some(RtPolicy::Fifo(p)) => (Policy::Fifo, p as u32),
        Some(RtPolicy::RoundRobin(p)) => (Policy::Rr, p as u32),
        _ => (Policy::Other, 0),
    };
    Ok(Request::Place(Place {
        pid: spec.pid.unwrap_or(0),
        cpus: spec.cpus.to_list(),
        policy,
        priority,
    }))
}

/// Asks the agent on `socket` to place `spec`'s process; returns the
/// agent's `ok: ...` line, or the one line that says why not.
pub fn place(spec: &RunSpec, socket: &Path) -> Result<String, String> {
    let request = place_request(spec)?;
    crate::socket::ask(socket, &request).map_err(|refusal| refusal.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_cpuset::CpuSet;

    fn spec() -> RunSpec {
        RunSpec {
            cpus: CpuSet::from_cpus([2, 3]),
            command: vec!["app".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_fifo_or_rr_run_becomes_a_placement_of_the_caller_at_that_priority() {
        let fifo = RunSpec {
            policy: Some(RtPolicy::Fifo(80)),
            ..spec()
        };
        assert_eq!(
            place_request(&fifo),
            Ok(Request::Place(Place {
                pid: 0,
                cpus: "2-3".into(),
                policy: Policy::Fifo,
                priority: 80
            }))
        );
        let rr_pid = RunSpec {
            policy: Some(RtPolicy::RoundRobin(5)),
            pid: Some(4242),
            command: Vec::new(),
            ..spec()
        };
        let Ok(Request::Place(place)) = place_request(&rr_pid) else {
            panic!("a placement");
        };
        assert_eq!(
            (place.pid, place.policy, place.priority),
            (4242, Policy::Rr, 5)
        );
        let Ok(Request::Place(plain)) = place_request(&spec()) else {
            panic!("a placement");
        };
        assert_eq!((plain.policy, plain.priority), (Policy::Other, 0));
    }

    #[test]
    fn what_only_root_does_or_nothing_to_place_is_refused_naming_the_remedy() {
        let mlock = RunSpec {
            mlock: true,
            ..spec()
        };
        let e = place_request(&mlock).unwrap_err();
        assert!(e.starts_with("--mlock needs root"), "{e}");
        let nothing = RunSpec {
            command: Vec::new(),
            ..spec()
        };
        assert_eq!(
            place_request(&nothing).unwrap_err(),
            "give the command after `--`, or --pid PID"
        );
    }
}
