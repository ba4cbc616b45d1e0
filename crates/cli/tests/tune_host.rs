//! `cpushield tune` for real on this host (root; it runs in a private PID
//! namespace of its own): after a short run, and after a run SIGKILLed half
//! way and `reset --namespace-gone`, every sysctl it may touch, every IRQ
//! mask and the cpuset tree are what they were before, and the config it
//! wrote is one `apply --dry-run` accepts. Run under
//! `flock /tmp/cpushield-hosttest.lock`: it shields CPU 1.

use std::process::Command;
use std::time::Duration;

mod support;
use support::serial;
use support::{bin, skip};

fn can_tune_here() -> Result<(), String> {
    support::can_shield_here(&["unshare"])?;
    if std::fs::read_to_string("/sys/devices/system/cpu/online")
        .unwrap_or_default()
        .trim()
        == "0-0"
    {
        return Err("needs CPU 1".into());
    }
    Ok(())
}

const KNOBS: &str = "timer-migration,stat-interval,rt-throttling,idle-poll";

/// The knobs `tune` journals and writes (sysctls), without idle-poll, which
/// only changes the probe and is measured first: the first of these is then
/// in place right after the setup.
const WRITTEN_KNOBS: &str = "timer-migration,stat-interval,rt-throttling";

/// The sysctls of [`WRITTEN_KNOBS`].
const KNOB_SYSCTLS: [&str; 3] = [
    "/proc/sys/kernel/sched_rt_runtime_us",
    "/proc/sys/kernel/timer_migration",
    "/proc/sys/vm/stat_interval",
];

/// `cpushield tune` on CPU 1 without load for `budget` over `knobs`, its
/// state in `state` and its report in `out`.
fn tune(state: &std::path::Path, out: &std::path::Path, knobs: &str, budget: &str) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args([
        "tune", "--cpus", "1", "--load", "none", "--budget", budget, "--knobs", knobs,
    ])
    .arg("--out")
    .arg(out)
    .env("CPUSHIELD_STATE_DIR", state);
    cmd
}

#[test]
fn a_short_tune_leaves_the_machine_as_found_and_writes_a_config_apply_accepts() {
    let _serial = serial();
    if let Err(why) = can_tune_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let before = support::tunable_state();
    let started = std::time::Instant::now();
    // A little above the smallest budget for four knobs (38 s).
    let budget = Duration::from_secs(40);
    let run = tune(state.path(), out.path(), KNOBS, "40s")
        .output()
        .unwrap();
    let took = started.elapsed();
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert_eq!(before, support::tunable_state(), "{text}");
    assert_eq!(run.status.code(), Some(0), "{text}");
    assert!(took <= budget.mul_f64(1.1), "took {took:?}: {text}");
    for knob in KNOBS.split(',') {
        assert!(
            text.lines().any(|l| l.starts_with(knob)),
            "no row for {knob}: {text}"
        );
    }
    assert!(text.contains("kernel command line: "), "{text}");
    assert!(
        !state.path().join("state.json").exists(),
        "the shield's state is gone"
    );
    let config = out.path().join("cpushield.toml");
    let dry = Command::new(bin())
        .args(["apply", "--dry-run", "--config"])
        .arg(&config)
        .env("CPUSHIELD_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(String::from_utf8_lossy(&dry.stdout).contains("shield CPU 1 from processes"));
    assert!(out.path().join("report.html").exists() && out.path().join("tune.json").exists());
    assert_eq!(before, support::tunable_state());
}

#[test]
fn a_tune_killed_half_way_is_undone_by_reset() {
    let _serial = serial();
    if let Err(why) = can_tune_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let before = support::tunable_state();
    let knobs_before = KNOB_SYSCTLS.map(|p| std::fs::read_to_string(p).unwrap_or_default());
    let mut child = tune(state.path(), out.path(), WRITTEN_KNOBS, "45s")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Past the setup, inside the first knob's trials: killed once a knob's
    // candidate is journaled and written, so that reset has it to undo.
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let (journaled, written) = loop {
        let journaled =
            std::fs::read_to_string(state.path().join("state.json")).unwrap_or_default();
        let written = KNOB_SYSCTLS
            .iter()
            .zip(&knobs_before)
            .any(|(p, was)| std::fs::read_to_string(p).unwrap_or_default() != *was);
        if (journaled.contains("\"runtime\"") && written)
            || std::time::Instant::now() >= deadline
            || child.try_wait().unwrap().is_some()
        {
            break (journaled, written);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The namespace's init (tune's child) does the work: SIGKILL it, which
    // ends every task of the namespace at once, then its parent.
    let pid = child.id();
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    for init in children.split_whitespace() {
        let _ = Command::new("kill").args(["-9", init]).status();
    }
    let _ = child.kill();
    child.wait().unwrap();
    assert!(
        journaled.contains("\"runtime\"") && written,
        "the kill came before a knob was journaled and written: {journaled:.300}"
    );
    let reset = Command::new(bin())
        .args(["reset", "--namespace-gone"])
        .env("CPUSHIELD_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(
        reset.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&reset.stderr)
    );
    assert_eq!(before, support::tunable_state());
}

#[test]
fn apply_sets_the_runtime_section_after_the_shield_and_reset_restores_it() {
    let _serial = serial();
    if let Err(why) = can_tune_here() {
        skip(&why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("cpushield.toml");
    let flipped = match std::fs::read_to_string("/proc/sys/kernel/timer_migration")
        .unwrap()
        .trim()
    {
        "0" => 1,
        _ => 0,
    };
    std::fs::write(
        &config,
        format!("[shield]\nall = \"1\"\n\n[runtime]\ntimer_migration = {flipped}\nstat_interval = 120\n"),
    )
    .unwrap();
    let before = support::tunable_state();
    let script = format!(
        r#"
set -u
fail() {{ echo "ASSERT-FAIL $*"; }}
$CS apply --config {config} || fail "apply exit $?"
[ "$(cat /proc/sys/kernel/timer_migration)" = {flipped} ] || fail "timer_migration $(cat /proc/sys/kernel/timer_migration)"
[ "$(cat /proc/sys/vm/stat_interval)" = 120 ] || fail "stat_interval $(cat /proc/sys/vm/stat_interval)"
$CS apply --config {config} | grep -q "nothing to change" || fail "second apply changed something"
$CS reset || fail "reset exit $?"
echo SCENARIO-DONE
"#,
        config = config.display()
    );
    let out = support::run_scenario_in_pid_namespace(&script, &[], &state);
    assert_eq!(before, support::tunable_state(), "{out}");
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "{out}");
}
