//! Tests of `cpushield run`'s argument parsing (the run's own decisions are
//! tested in `cpushield_rt::run`).

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn parse(argv: &[&str]) -> Result<RunArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("run").chain(argv.iter().copied())).map(|c| c.run)
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

/// The messages themselves are tested with the parsers in `cpushield_rt::sched`.
#[test]
fn bad_policy_values_are_refused_by_the_policy_parsers_and_one_policy_only() {
    for (flag, bad) in [("--fifo", "0"), ("--rr", "100"), ("--nice", "-50")] {
        let e = parse(&["--cpus", "1", flag, bad]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{flag}");
    }
    let e = parse(&["--cpus", "1", "--deadline", "2ms/1ms/1ms"]).unwrap_err();
    assert!(
        e.to_string().contains("runtime <= deadline <= period"),
        "{e}"
    );
    assert!(parse(&["--cpus", "1", "--fifo", "10", "--rr", "10"]).is_err());
}

#[test]
fn every_flag_reaches_the_run_spec() {
    let spec = parse(&[
        "--cpus",
        "2-3",
        "--rr",
        "5",
        "--irq",
        "41,42",
        "--reserve",
        "--mlock",
        "--idle-poll",
        "--pid",
        "4242",
        "--threads",
        "--allow-unshielded",
    ])
    .unwrap()
    .spec();
    assert_eq!(spec.cpus, CpuSet::from_cpus([2, 3]));
    assert_eq!(spec.policy, Some(Policy::RoundRobin(5)));
    assert_eq!(spec.irqs, [41, 42]);
    assert!(spec.reserve && spec.mlock && spec.idle_poll);
    assert!(spec.threads && spec.allow_unshielded);
    assert_eq!(spec.pid, Some(4242));
    assert!(spec.command.is_empty());
    let spec = parse(&["--cpus", "1", "--", "sh", "-c", "true"])
        .unwrap()
        .spec();
    assert_eq!(spec.command, ["sh", "-c", "true"]);
    assert_eq!(spec.pid, None);
}

#[test]
fn naming_the_agent_or_its_socket_goes_through_the_agent() {
    let asked = parse(&["--via-agent", "--cpus", "1", "--rr", "5", "--", "app"]).unwrap();
    assert!(via_agent::wanted(&asked).is_some());
    let named = parse(&["--agent-socket", "/tmp/a.sock", "--cpus", "1"]).unwrap();
    assert_eq!(
        via_agent::wanted(&named).as_deref(),
        Some(std::path::Path::new("/tmp/a.sock")),
        "naming the socket asks the agent"
    );
}
