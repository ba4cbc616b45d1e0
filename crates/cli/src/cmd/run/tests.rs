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
fn share_with_a_policy_or_a_hold_on_the_cpus_names_the_conflicting_flag() {
    for (extra, flag) in [
        (&["--fifo", "80"][..], "--fifo"),
        (&["--rr", "5"][..], "--rr"),
        (&["--nice", "0"][..], "--nice"),
        (&["--mlock"][..], "--mlock"),
        (&["--reserve"][..], "--reserve"),
        (&["--idle-poll"][..], "--idle-poll"),
    ] {
        let mut argv = vec!["--cpus", "1", "--share"];
        argv.extend_from_slice(extra);
        assert_eq!(
            parse(&argv).unwrap().share_conflict(),
            Some(flag),
            "{argv:?}"
        );
    }
    let shared = parse(&["--cpus", "1", "--share", "--", "batch"]).unwrap();
    assert_eq!(shared.share_conflict(), None);
    let spec = shared.spec();
    assert!(spec.share && spec.policy.is_none());
    assert_eq!(
        parse(&["--cpus", "1", "--fifo", "80"])
            .unwrap()
            .share_conflict(),
        None
    );
}

#[test]
fn through_the_agent_only_cpus_and_a_fifo_or_rr_priority_are_asked_for() {
    let plain = parse(&["--via-agent", "--cpus", "1", "--rr", "5", "--", "app"]).unwrap();
    assert!(via_agent::wanted(&plain));
    assert_eq!(via_agent::root_only(&plain), None);
    for (flag, argv) in [
        ("--irq", vec!["--cpus", "1", "--irq", "24"]),
        ("--reserve", vec!["--cpus", "1", "--reserve"]),
        (
            "--deadline",
            vec!["--cpus", "1", "--deadline", "200us/1ms/1ms"],
        ),
        ("--nice", vec!["--cpus", "1", "--nice", "3"]),
        ("--mlock", vec!["--cpus", "1", "--mlock"]),
    ] {
        assert_eq!(via_agent::root_only(&parse(&argv).unwrap()), Some(flag));
    }
    let named = parse(&["--agent-socket", "/tmp/a.sock", "--cpus", "1"]).unwrap();
    assert!(
        via_agent::wanted(&named),
        "naming the socket asks the agent"
    );
}
