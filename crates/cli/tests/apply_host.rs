//! `cpushield apply` for real on this host, inside a private PID namespace:
//! the config file brings the shield up, a second apply changes nothing,
//! `--dry-run` prints the plan and changes nothing, apply mixed with `shield`
//! ends where the file says, and `reset` restores everything.

mod support;

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
