//! `cpushield apply` for real on this host, inside a private PID namespace:
//! the config file brings the shield up, a second apply changes nothing,
//! `--dry-run` prints the plan and changes nothing, apply mixed with `shield`
//! ends where the file says, and `reset` restores everything.

mod support;
use support::serial;

use support::{can_shield_here, run_scenario_in_pid_namespace, skip, system_state};

const SCENARIO: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
aff() { grep Cpus_allowed_list /proc/$1/status | cut -f2; }
cg() { grep ':cpuset:' /proc/$1/cgroup | cut -d: -f3; }
masks() { $CS show --json | grep -E '^  "(procs|irqs|ltmr)":' | tr -d ' \n'; }
sleep 60 & ALL=$!
sleep 0.2
before="$(aff $ALL) $(cg $ALL) $(aff $$) $(cg $$)"
printf '[shield]\nall = "1"\n' > "$CFG"
$CS apply --config "$CFG" >/dev/null || fail "apply exit $?"
[ "$(aff $ALL)" = 0 ] || fail "task on $(aff $ALL) after apply, want 0"
[ "$(cg $ALL)" = /cpushield-system ] || fail "task in $(cg $ALL) after apply"
[ "$(masks)" = '"procs":"1","irqs":"1","ltmr":"1",' ] || fail "masks after apply: $(masks)"
again=$($CS apply --config "$CFG"); rc=$?
[ $rc = 0 ] || fail "second apply exit $rc"
[ "$again" = "nothing to change: the shield already matches $CFG" ] || fail "second apply said [$again]"
printf '[shield]\nprocs = "1"\n' > "$CFG"
plan=$($CS apply --config "$CFG" --dry-run); rc=$?
[ $rc = 0 ] || fail "dry-run exit $rc"
want='unshield CPU 1 from interrupts
unshield CPU 1 from the local timer'
[ "$plan" = "$want" ] || fail "dry-run plan [$plan]"
[ "$(masks)" = '"procs":"1","irqs":"1","ltmr":"1",' ] || fail "dry-run changed the masks: $(masks)"
printf '[shield]\nprocz = "1"\n' > "$BAD"
bad=$($CS apply --config "$BAD" 2>&1); rc=$?
[ $rc = 1 ] || fail "bad file exit $rc"
case "$bad" in *"$BAD:2: key \`shield.procz\`"*) ;; *) fail "bad file said [$bad]";; esac
[ "$(masks)" = '"procs":"1","irqs":"1","ltmr":"1",' ] || fail "bad file changed the masks: $(masks)"
printf '[shield]\nprocs = "1"\n\n[[irq]]\nnumber = 0\ncpus = "0"\n' > "$BAD"
for dry in "" --dry-run; do
    bad=$($CS apply --config "$BAD" $dry 2>&1); rc=$?
    [ $rc = 1 ] || fail "[[irq]] apply $dry exit $rc: $bad"
    [ "$(printf '%s\n' "$bad" | wc -l)" = 1 ] || fail "[[irq]] apply $dry: not one line: [$bad]"
    case "$bad" in *"$BAD:"[0-9]*": key \`irq\`"*"remove the [[irq]] tables"*) ;; *) fail "[[irq]] apply $dry said [$bad]";; esac
done
[ "$(masks)" = '"procs":"1","irqs":"1","ltmr":"1",' ] || fail "an [[irq]] file changed the masks: $(masks)"
$CS apply --config "$CFG" >/dev/null || fail "apply of the edit exit $?"
[ "$(masks)" = '"procs":"1","irqs":"","ltmr":"",' ] || fail "masks after the edit: $(masks)"
$CS shield --irqs 1 >/dev/null || fail "shield --irqs exit $?"
plan=$($CS apply --config "$CFG" --dry-run)
[ "$plan" = "unshield CPU 1 from interrupts" ] || fail "plan after shield --irqs [$plan]"
$CS apply --config "$CFG" >/dev/null || fail "apply after shield exit $?"
[ "$(masks)" = '"procs":"1","irqs":"","ltmr":"",' ] || fail "masks after apply over shield: $(masks)"
$CS reset >/dev/null || fail "reset exit $?"
after="$(aff $ALL) $(cg $ALL) $(aff $$) $(cg $$)"
[ "$before" = "$after" ] || fail "tasks differ after reset: [$before] vs [$after]"
[ "$(masks)" = '"procs":"","irqs":"","ltmr":"",' ] || fail "masks after reset: $(masks)"
kill $ALL
echo SCENARIO-DONE
"#;

#[test]
fn apply_twice_is_a_no_op_dry_run_changes_nothing_and_reset_restores_everything() {
    let _serial = serial();
    if let Err(why) = can_shield_here(&["unshare"]) {
        skip(&why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let before = system_state();
    let (cfg, bad) = (
        dir.path().join("cpushield.toml"),
        dir.path().join("bad.toml"),
    );
    let text = run_scenario_in_pid_namespace(
        SCENARIO,
        &[("CFG", cfg.as_os_str()), ("BAD", bad.as_os_str())],
        &state,
    );
    assert_eq!(before, system_state(), "IRQs or sysctls differ after reset");
    support::assert_no_shield_cgroups();
    assert!(!text.contains("ASSERT-FAIL"), "{text}");
    assert!(text.contains("SCENARIO-DONE"), "{text}");
}

/// Whether the lock of the state in `state` is free this instant; if so,
/// `while_held` runs while this test holds it (as a `reset` would).
fn with_free_lock(state: &std::path::Path, while_held: impl FnOnce()) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::File::open(state.join("lock")) else {
        return false;
    };
    // SAFETY: flock on a descriptor this function owns; closing it unlocks.
    let got = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if got {
        while_held();
    }
    got
}

#[test]
fn apply_holds_the_state_lock_from_its_shield_to_its_runtime_settings() {
    let _serial = serial();
    if let Err(why) = can_shield_here(&["unshare"]) {
        skip(&why);
        return;
    }
    const TIMER_MIGRATION: &str = "/proc/sys/kernel/timer_migration";
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let original = read(TIMER_MIGRATION);
    let flipped = if original.trim() == "0" { 1 } else { 0 };
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let cfg = dir.path().join("cpushield.toml");
    std::fs::write(
        &cfg,
        format!("[shield]\nall = \"1\"\n\n[runtime]\ntimer_migration = {flipped}\n"),
    )
    .unwrap();
    let before = system_state();
    let shield_dir = support::cpuset_root().join("cpushield-shield");
    let mut gaps = Vec::new();
    let mut failures = Vec::new();
    for round in 0..10 {
        let mut apply = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", support::bin(), "apply"])
            .arg("--config")
            .arg(&cfg)
            .env("CPUSHIELD_STATE_DIR", &state)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Whenever the lock is free while apply runs, the machine must be
        // before apply (no shield) or after it (the setting made): never the
        // shield up without its [runtime] part, where a reset could come in.
        while apply.try_wait().unwrap().is_none() {
            with_free_lock(&state, || {
                if shield_dir.exists()
                    && read(TIMER_MIGRATION) == original
                    && gaps.last() != Some(&round)
                {
                    gaps.push(round);
                }
            });
        }
        let out = apply.wait_with_output().unwrap();
        if !out.status.success() {
            failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let reset = std::process::Command::new(support::bin())
            .args(["reset", "--namespace-gone"])
            .env("CPUSHIELD_STATE_DIR", &state)
            .output()
            .unwrap();
        assert!(reset.status.success(), "{reset:?}");
    }
    assert_eq!(before, system_state(), "IRQs or sysctls differ after reset");
    assert_eq!(read(TIMER_MIGRATION), original);
    support::assert_no_shield_cgroups();
    assert!(failures.is_empty(), "apply failed: {failures:?}");
    assert!(
        gaps.is_empty(),
        "the lock was free with the shield up and its [runtime] part not made, in rounds {gaps:?}"
    );
}
