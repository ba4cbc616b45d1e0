//! `cpushield shield` for real on this host, inside a private PID namespace
//! whose tasks are "the system": the rule holds, the cpuset enforces it, IRQs
//! move, and `reset` puts every affinity, cgroup and IRQ back byte for byte.

use std::path::Path;
use std::process::Command;

mod support;
use support::serial;
use support::{bin, skip, system_state};

/// Root, unshare(1) and a second CPU: or why not.
fn can_shield_here() -> Result<(), String> {
    support::can_shield_here(&["unshare"])
}

/// Runs a bash script inside a fresh PID + mount namespace; returns stdout.
fn in_namespace(script: &str, state_dir: &Path) -> (String, i32) {
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "bash", "-c", script])
        .env("CS", bin())
        .env("CPUSET_ROOT", support::cpuset_root())
        .env("CPUSHIELD_STATE_DIR", state_dir)
        .output()
        .expect("run unshare");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (text, out.status.code().unwrap_or(-1))
}

const SCENARIO: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
aff() { grep Cpus_allowed_list /proc/$1/status | cut -f2; }
cg() { grep ':cpuset:' /proc/$1/cgroup | cut -d: -f3; }
sleep 60 & ALL=$!
taskset -c 1 sleep 60 & ONLY1=$!
taskset -c 0 sleep 60 & ONLY0=$!
sleep 0.2
before=$(for p in $ALL $ONLY1 $ONLY0 $$; do echo "$p $(aff $p) $(cg $p)"; done)
$CS shield --all 1 || fail "shield exit $?"
[ "$(aff $ALL)" = 0 ] || fail "all-CPU task on $(aff $ALL), want 0"
[ "$(aff $ONLY1)" = 1 ] || fail "only-shield task on $(aff $ONLY1), want 1"
[ "$(aff $ONLY0)" = 0 ] || fail "CPU0 task on $(aff $ONLY0)"
[ "$(cg $ONLY1)" = /cpushield-shield ] || fail "only-shield task in $(cg $ONLY1)"
[ "$(cg $ALL)" = /cpushield-system ] || fail "task in $(cg $ALL)"
sleep 60 & CHILD=$!
sleep 0.1
[ "$(aff $CHILD)" = 0 ] || fail "forked task reached $(aff $CHILD)"
taskset -p -c 0-1 $CHILD >/dev/null 2>&1
[ "$(aff $CHILD)" = 0 ] || fail "taskset widening reached $(aff $CHILD)"
$CS show --json | grep -q '"procs": "1"' || fail "show --json lacks procs 1"
$CS shield --all 0-1 >/dev/null 2>&1; [ $? = 1 ] || fail "shielding every CPU not refused with 1"
$CS reset || fail "reset exit $?"
$CS reset || fail "second reset exit $?"
after=$(for p in $ALL $ONLY1 $ONLY0 $$; do echo "$p $(aff $p) $(cg $p)"; done)
[ "$before" = "$after" ] || fail "tasks differ after reset: [$before] vs [$after]"
[ "$(aff $CHILD)" = 0-1 ] || fail "task born under the shield got $(aff $CHILD) after reset, want 0-1"
[ "$(cg $CHILD)" = / ] || fail "task born under the shield left in $(cg $CHILD)"
kill $ALL $ONLY1 $ONLY0 $CHILD
echo SCENARIO-DONE
"#;

#[test]
fn shield_and_reset_in_a_private_namespace_restore_everything() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let (out, code) = in_namespace(SCENARIO, state.path());
    let state_after = system_state();
    assert_eq!(
        state_before, state_after,
        "IRQ affinities differ after reset"
    );
    support::assert_no_shield_cgroups();
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}

#[test]
fn bad_cpu_lists_exit_1_with_one_line_and_change_nothing() {
    let _serial = serial();
    let state = tempfile::tempdir().unwrap();
    let state_before = system_state();
    for args in [
        vec!["shield", "--all", "99"],
        vec!["shield", "--all", "0x"],
        vec!["shield", "--all", "3-1"],
        vec!["shield", "--all", ""],
        vec!["shield"],
        vec!["shield", "--procs", "0-1"],
    ] {
        let out = Command::new(bin())
            .args(&args)
            .env("CPUSHIELD_STATE_DIR", state.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(err.starts_with("cpushield: error: "), "{args:?}: {err}");
        assert!(
            !state.path().join("state.json").exists(),
            "{args:?} wrote state"
        );
    }
    assert_eq!(state_before, system_state());
}

/// A thread whose name is not valid UTF-8 (prctl cuts "worker-xéééé" at 15
/// bytes, mid-character) used to be invisible to the shield and stay on the
/// shielded CPU. It must be moved like its siblings and restored by reset.
const NON_UTF8_THREAD: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
python3 - <<'PY' &
import ctypes, threading, time
libc = ctypes.CDLL(None)
def worker():
    libc.prctl(15, "worker-xéééé".encode(), 0, 0, 0)
    time.sleep(60)
t = threading.Thread(target=worker); t.start()
time.sleep(60)
PY
PY=$!
# Wait (up to 20 s: python starts slowly on a loaded machine) for the worker
# thread to exist and to have taken its name.
TID=
for _ in $(seq 200); do
    for t in /proc/$PY/task/*; do
        t=${t##*/}
        [ "$t" != $PY ] && head -c 8 /proc/$PY/task/$t/comm 2>/dev/null | grep -q '^worker-x' && TID=$t
    done
    [ -n "$TID" ] && break
    sleep 0.1
done
[ -n "$TID" ] || fail "no worker thread named worker-x... after 20 s"
head -c 16 /proc/$PY/task/$TID/comm | od -c | head -1
before=$(grep Cpus_allowed_list /proc/$PY/task/$TID/status | cut -f2)
$CS shield --all 1 || fail "shield exit $?"
now=$(grep Cpus_allowed_list /proc/$PY/task/$TID/status | cut -f2)
[ "$now" = 0 ] || fail "non-UTF-8 thread $TID still on CPUs $now after shield --all 1"
$CS show --json | grep '"procs": "1"' >/dev/null || fail "show lacks procs 1"
$CS reset || fail "reset exit $?"
after=$(grep Cpus_allowed_list /proc/$PY/task/$TID/status | cut -f2)
[ "$after" = "$before" ] || fail "non-UTF-8 thread on $after after reset, was $before"
kill $PY
echo SCENARIO-DONE
"#;

#[test]
fn a_thread_named_with_invalid_utf8_is_shielded_and_restored() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let (out, code) = in_namespace(NON_UTF8_THREAD, state.path());
    assert_eq!(
        state_before,
        system_state(),
        "IRQ affinities differ after reset"
    );
    support::assert_no_shield_cgroups();
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}

/// Shell helpers for the state-file fault tests: `edit_both SED` applies a
/// sed expression to the state file and its copy, as a hand edit would;
/// `keep`/`put_back` save and restore both.
const FAULT_LIB: &str = r##"
set -u
fail() { echo "ASSERT-FAIL $*"; }
aff() { grep Cpus_allowed_list /proc/$1/status | cut -f2; }
SD=$CPUSHIELD_STATE_DIR
edit_both() { for f in $SD/state.json $SD/state.json.bak; do sed -i -e "$1" $f; done; }
keep() { cp $SD/state.json $SD/keep.json; cp $SD/state.json.bak $SD/keep.bak; }
put_back() { cp $SD/keep.json $SD/state.json; cp $SD/keep.bak $SD/state.json.bak; }
# expect_refused WHAT TEXT...: the last command's output ($out, $rc) is exit 1
# naming every TEXT, the state is kept and the task $S still shielded.
expect_refused() {
    what=$1; shift
    [ "$rc" = 1 ] || fail "$what: exit $rc, want 1: $out"
    for t in "$@"; do
        case "$out" in *"$t"*) ;; *) fail "$what: message lacks [$t]: $out" ;; esac
    done
    case "$out" in *"forget the shield"*|*"rm "*state*|*"remove the state"*) fail "$what: advice that loses data: $out" ;; esac
    [ -f $SD/state.json ] || fail "$what: state file gone"
    [ "$(aff $S)" = 0 ] || fail "$what: task $S moved to $(aff $S): something changed"
}
sleep 60 & S=$!
sleep 0.2
"##;

const BAD_VALUES: &str = r##"
$CS shield --all 1 >/dev/null || fail "shield exit $?"
keep
IRQ=$(grep -o '"irqs":{"[0-9]*"' $SD/state.json | head -n 1 | grep -o '[0-9]*')  # the saved masks come before the records of what was set
# A saved task is {"tgid":S,"comm":"sleep","starttime":N,"affinity":"0-1",...}.
aff_of_s="s/\"$S\":{\"tgid\":$S,\"comm\":\"\([^\"]*\)\",\"starttime\":\([0-9]*\),\"affinity\":\"[^\"]*\"/\"$S\":{\"tgid\":$S,\"comm\":\"\1\",\"starttime\":\2,\"affinity\":\"AFF\"/"

edit_both "$(echo "$aff_of_s" | sed 's/AFF/5000-8191/')"
out=$($CS reset 2>&1); rc=$?
expect_refused "affinity 5000-8191" "task $S" "saved affinity '5000-8191'"
put_back

edit_both "$(echo "$aff_of_s" | sed 's/AFF//')"
edit_both "s/\"irqs\":{\"$IRQ\":\"[^\"]*\"/\"irqs\":{\"$IRQ\":\"zz\"/"
out=$($CS reset 2>&1); rc=$?
expect_refused "empty affinity and IRQ zz" "task $S" "saved affinity ''" "IRQ $IRQ: saved affinity mask 'zz'" "state.json.bak"
put_back

mkdir $CPUSET_ROOT/cpushield-hosttest-foreign
edit_both "s#\"created_cgroups\":\\[#\"created_cgroups\":[\"$CPUSET_ROOT/cpushield-hosttest-foreign\",\"cpushield-shield\",#"
edit_both 's#"files":{#"files":{"/etc/cpushield-hosttest":"1",#'
out=$($CS reset 2>&1); rc=$?
expect_refused "foreign cgroup, relative path, file outside" \
    "cgroup $CPUSET_ROOT/cpushield-hosttest-foreign: not one cpushield creates" \
    "cgroup cpushield-shield: not one cpushield creates" "file /etc/cpushield-hosttest: not a file cpushield changes"
[ -d $CPUSET_ROOT/cpushield-hosttest-foreign ] || fail "the foreign cgroup was removed"
rmdir $CPUSET_ROOT/cpushield-hosttest-foreign
[ -e /etc/cpushield-hosttest ] && fail "a file outside /proc and /sys was written"
put_back

edit_both 's#"pid_namespace":"[^"]*"#"pid_namespace":"pid:[1]"#'
out=$($CS shield --all 1 2>&1); rc=$?
expect_refused "shield from another namespace" "PID namespace pid:[1]"
out=$($CS reset 2>&1); rc=$?
expect_refused "reset from another namespace" "PID namespace pid:[1]" "--namespace-gone"
put_back

head -c 100 $SD/keep.json > $SD/state.json
out=$($CS reset 2>&1); rc=$?
[ "$rc" = 0 ] || fail "reset with a truncated state file and a good copy: exit $rc: $out"
case "$out" in *"damaged"*) ;; *) fail "no word of the recovery: $out" ;; esac
[ "$(aff $S)" = 0-1 ] || fail "task on $(aff $S) after the recovered reset"
rm -f $SD/keep.json $SD/keep.bak
[ -e $SD/state.json ] && fail "state file left after a complete reset"
[ -e $SD/state.json.bak ] && fail "state copy left after a complete reset"
kill $S
echo SCENARIO-DONE
"##;

fn cleanup_cgroup(name: &str) {
    let _ = std::fs::remove_dir(support::cpuset_root().join(name));
}

#[test]
fn damaged_or_unrestorable_state_refuses_reset_naming_each_object_and_changes_nothing() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let (out, code) = in_namespace(&format!("{FAULT_LIB}{BAD_VALUES}"), state.path());
    cleanup_cgroup("cpushield-hosttest-foreign");
    assert_eq!(
        state_before,
        system_state(),
        "IRQ affinities differ after reset"
    );
    support::assert_no_shield_cgroups();
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}

const DISK_FULL_READ_ONLY: &str = r##"
T=$(mktemp -d /tmp/cpushield-hosttest-fs.XXXXXX)
mount -t tmpfs -o size=64k tmpfs $T || fail "mount tmpfs"
export CPUSHIELD_STATE_DIR=$T/state
SD=$CPUSHIELD_STATE_DIR
mkdir $SD
dd if=/dev/zero of=$T/fill bs=4k count=100 2>/dev/null
out=$($CS shield --all 1 2>&1); rc=$?
[ "$rc" = 1 ] || fail "shield on a full disk: exit $rc: $out"
case "$out" in *"$SD/state.json"*"free space in $SD"*) ;; *) fail "message lacks the path or the remedy: $out" ;; esac
left=$(ls $SD | grep -v '^lock$')
[ -z "$left" ] || fail "left behind on a full disk: $left"
[ "$(aff $S)" = 0-1 ] || fail "task moved to $(aff $S) by a shield that failed"
[ -d $CPUSET_ROOT/cpushield-shield ] && fail "cgroup created by a shield that failed"
rm $T/fill
$CS shield --all 1 >/dev/null || fail "shield after freeing space: exit $?"
[ "$(aff $S)" = 0 ] || fail "not shielded: $(aff $S)"
mount -o remount,ro $T || fail "remount ro"
out=$($CS reset 2>&1); rc=$?
[ "$rc" = 1 ] || fail "reset on a read-only state dir: exit $rc, want 1 (state not removed): $out"
case "$out" in *"everything was restored"*"$SD/state.json"*"reset"*) ;; *) fail "read-only reset message: $out" ;; esac
[ "$(aff $S)" = 0-1 ] || fail "read-only reset did not restore the task: $(aff $S)"
[ -d $CPUSET_ROOT/cpushield-shield ] && fail "read-only reset left the cgroup"
mount -o remount,rw $T
$CS reset >/dev/null || fail "second reset exit $?"
[ -e $SD/state.json ] && fail "state file left"
umount $T; rmdir $T
kill $S
echo SCENARIO-DONE
"##;

#[test]
fn a_full_or_read_only_state_dir_names_the_path_leaves_nothing_and_reset_still_restores() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let (out, code) = in_namespace(&format!("{FAULT_LIB}{DISK_FULL_READ_ONLY}"), state.path());
    assert_eq!(
        state_before,
        system_state(),
        "IRQ affinities differ after reset"
    );
    support::assert_no_shield_cgroups();
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}

const KILL_FIFO_UNSHIELD: &str = r##"
$CS shield --all 1 >/dev/null || fail "shield exit $?"
CPUSHIELD_TEST_STEP_DELAY_US=100000 $CS reset >/dev/null 2>&1 & R=$!
sleep 0.3; kill -9 $R; wait $R 2>/dev/null
[ -f $SD/state.json ] || fail "state gone after a killed reset"
$CS reset >/dev/null || fail "reset after a killed reset: exit $?"
[ "$(aff $S)" = 0-1 ] || fail "task on $(aff $S) after the reset that followed a killed one"

$CS shield --all 1 >/dev/null || fail "shield exit $?"
$CS run --cpus 1 --pid $S --fifo 10 >/dev/null || fail "run --pid --fifo exit $?"
case "$(chrt -p $S)" in *SCHED_FIFO*) ;; *) fail "run did not set SCHED_FIFO: $(chrt -p $S)" ;; esac
$CS reset >/dev/null || fail "reset exit $?"
case "$(chrt -p $S)" in *SCHED_OTHER*"priority: 0"*) ;; *) fail "policy not restored by reset: $(chrt -p $S)" ;; esac
[ "$(aff $S)" = 0-1 ] || fail "task on $(aff $S) after reset"

$CS shield --all 1 >/dev/null || fail "shield exit $?"
CPUSHIELD_TEST_STEP_DELAY_US=20000 $CS unshield --all 1 >/dev/null 2>&1 & U=$!
sleep 0.2
$CS shield --procs 1 >/dev/null || fail "shield during unshield: exit $?"
wait $U || fail "unshield exit $?"
$CS show --json | grep '"procs": "1"' >/dev/null || fail "the shield taken during unshield was undone"
[ "$(aff $S)" = 0 ] || fail "task on $(aff $S) under the second shield"
$CS reset >/dev/null || fail "final reset exit $?"
[ "$(aff $S)" = 0-1 ] || fail "task on $(aff $S) after the final reset"
kill $S
echo SCENARIO-DONE
"##;

#[test]
fn killed_reset_run_policy_and_unshield_under_one_lock_all_end_restored() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let (out, code) = in_namespace(&format!("{FAULT_LIB}{KILL_FIFO_UNSHIELD}"), state.path());
    assert_eq!(
        state_before,
        system_state(),
        "IRQ affinities differ after reset"
    );
    support::assert_no_shield_cgroups();
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}

/// `shield` killed with SIGKILL half way (while it moves tasks, and while it
/// writes IRQ masks), then `reset`: every file the shield writes reads again
/// byte for byte as before (IRQ masks and the other masks as mask text, the
/// sysctls, the cpuset hierarchy's directories), and every task has its
/// `Cpus_allowed` mask and cpuset cgroup line back. A third kill is followed by
/// a whole shield over the debris before the reset. `CPUSHIELD_TEST_STEP_DELAY_US`
/// slows each change so that the kills land inside the window of writes; each
/// round checks that its kill did land there.
const SIGKILL_MID_SHIELD: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
N=150
SLEEPERS=""
i=0
while [ $i -lt $N ]; do
    case $((i % 3)) in
        0) sleep 600 & ;;
        1) taskset -c 1 sleep 600 & ;;
        *) taskset -c 0 sleep 600 & ;;
    esac
    SLEEPERS="$SLEEPERS $!"
    i=$((i + 1))
done
sleep 0.5
files() {
    grep -H '' /proc/irq/*/smp_affinity /proc/irq/default_smp_affinity \
        /sys/devices/virtual/workqueue/cpumask /proc/sys/kernel/watchdog_cpumask \
        /proc/sys/kernel/timer_migration /proc/sys/vm/stat_interval 2>/dev/null
    ls -d "$CPUSET_ROOT"/*/
}
irqs() { grep -H '' /proc/irq/*/smp_affinity 2>/dev/null; }
tasks() {
    for p in $$ $SLEEPERS; do
        echo "$p $(grep '^Cpus_allowed:' /proc/$p/status | cut -f2) $(grep ':cpuset:' /proc/$p/cgroup)"
    done
}
moved() {
    for p in $SLEEPERS; do echo /proc/$p/cgroup; done | xargs grep -h ':cpuset:' | grep -c '/cpushield-'
}
alive() { [ -e /proc/$1 ] && ! grep -q '^State:[[:space:]]*Z' /proc/$1/status; }
files_before=$(files)
tasks_before=$(tasks)
irqs_before=$(irqs)
[ "$(moved)" = 0 ] || fail "tasks in cpushield cgroups before any shield"

# kill_when ROUND DELAY_US TEST: start `shield --all 1` slowed by DELAY_US after
# each change, and SIGKILL it as soon as TEST holds; TEST must come true while
# the shield still runs.
kill_when() {
    CPUSHIELD_TEST_STEP_DELAY_US=$2 $CS shield --all 1 >/dev/null 2>&1 &
    V=$!
    k=0
    while ! $3; do
        alive $V || { fail "$1: shield finished before the kill point"; wait $V; return; }
        k=$((k + 1))
        [ $k -lt 3000 ] || { fail "$1: kill point never reached"; kill -9 $V; wait $V; return; }
    done
    alive $V || fail "$1: shield finished before the kill"
    kill -9 $V
    wait $V 2>/dev/null
}
expect_restored() {
    $CS reset >/dev/null 2>&1 || fail "$1: reset exit $?"
    [ ! -e "$CPUSHIELD_STATE_DIR/state.json" ] || fail "$1: state left after reset"
    now=$(files)
    [ "$now" = "$files_before" ] || fail "$1: files differ after reset: $(printf '%s\n' "$files_before" > /tmp/cpushield-sigkill.$$.a; printf '%s\n' "$now" | diff /tmp/cpushield-sigkill.$$.a - | grep '^[<>]' | head -n 6 | tr '\n' ' ')"
    now=$(tasks)
    [ "$now" = "$tasks_before" ] || fail "$1: tasks differ after reset: $(printf '%s\n' "$tasks_before" > /tmp/cpushield-sigkill.$$.a; printf '%s\n' "$now" | diff /tmp/cpushield-sigkill.$$.a - | grep '^[<>]' | head -n 6 | tr '\n' ' ')"
    rm -f /tmp/cpushield-sigkill.$$.a
}

a_third_moved() { [ "$(moved)" -ge $((N / 3)) ]; }
kill_when moves 5000 a_third_moved
m=$(moved)
[ "$m" -gt 0 ] && [ "$m" -lt $N ] || fail "moves: the kill did not land while tasks moved ($m of $N moved)"
[ -e "$CPUSHIELD_STATE_DIR/state.json" ] || fail "moves: no state after the kill"
expect_restored moves

an_irq_changed() { [ "$(irqs)" != "$irqs_before" ]; }
kill_when irqs 20000 an_irq_changed
[ "$(moved)" = $N ] || fail "irqs: the kill came before every task moved ($(moved) of $N)"
expect_restored irqs

kill_when again 5000 a_third_moved
$CS shield --all 1 >/dev/null 2>&1 || fail "again: shield over the debris exit $?"
[ "$(moved)" = $N ] || fail "again: $(moved) of $N tasks moved by the whole shield"
expect_restored again

# A kill between a cgroup's mkdir and its mark, a window too narrow for the kills
# above to aim at: the state stored before the first change names the cgroup, which
# is left unmarked and as mkdir made it. Reset removes it; so does a reset after a
# shield again over it.
$CS shield --all 1 >/dev/null 2>&1 || fail "unmarked: shield exit $?"
saved=$(mktemp -d)
cp "$CPUSHIELD_STATE_DIR/state.json" "$CPUSHIELD_STATE_DIR/state.json.bak" "$saved"/
$CS reset >/dev/null 2>&1 || fail "unmarked: first reset exit $?"
for round in unmarked unmarked-again; do
    cp "$saved"/state.json "$saved"/state.json.bak "$CPUSHIELD_STATE_DIR"/
    mkdir "$CPUSET_ROOT/cpushield-system" || fail "$round: mkdir exit $?"
    if [ "$round" = unmarked-again ]; then
        $CS shield --all 1 >/dev/null 2>&1 || fail "$round: shield over the debris exit $?"
    fi
    expect_restored "$round"
    [ ! -d "$CPUSET_ROOT/cpushield-system" ] || { fail "$round: cgroup left"; rmdir "$CPUSET_ROOT/cpushield-system"; }
done
rm -r "$saved"

kill $SLEEPERS
echo SCENARIO-DONE
"#;

#[test]
fn shield_killed_half_way_then_reset_restores_every_file_byte_for_byte() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let before = system_state();
    let out = support::run_scenario_in_pid_namespace(SIGKILL_MID_SHIELD, &[], state.path());
    assert_eq!(before, system_state(), "machine state differs after reset");
    support::assert_no_shield_cgroups();
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "{out}");
}

#[test]
fn a_second_pid_namespace_sharing_the_state_dir_is_refused_and_changes_nothing() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let flags = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let script = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
unshare --pid --fork --mount-proc bash -c '
    sleep 60 & S=$!
    $CS shield --all 1 >/dev/null || echo "ASSERT-FAIL first namespace: shield exit $?"
    touch $F/up
    while [ ! -e $F/go ]; do sleep 0.05; done
    $CS reset >/dev/null || echo "ASSERT-FAIL first namespace: reset exit $?"
    kill $S' &
A=$!
for i in $(seq 100); do [ -e $F/up ] && break; sleep 0.05; done
[ -e $F/up ] || fail "first namespace never shielded"
for verb in "shield --all 1" "reset" "unshield --all 1"; do
    out=$(unshare --pid --fork --mount-proc bash -c "\$CS $verb" 2>&1); rc=$?
    [ "$rc" = 1 ] || fail "$verb from a second namespace: exit $rc: $out"
    case "$out" in *"PID namespace"*) ;; *) fail "$verb: message lacks the reason: $out" ;; esac
done
[ -d $CPUSET_ROOT/cpushield-shield ] || fail "the first namespace's shield was undone"
touch $F/go
wait $A
[ -e $CPUSHIELD_STATE_DIR/state.json ] && fail "state left after the first namespace's reset"
echo SCENARIO-DONE
"#;
    let out = Command::new("bash")
        .args(["-c", script])
        .env("CS", bin())
        .env("CPUSET_ROOT", support::cpuset_root())
        .env("CPUSHIELD_STATE_DIR", state.path())
        .env("F", flags.path())
        .output()
        .expect("run bash");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        state_before,
        system_state(),
        "IRQ affinities differ after reset"
    );
    support::assert_no_shield_cgroups();
    assert!(!text.contains("ASSERT-FAIL"), "{text}");
    assert!(text.contains("SCENARIO-DONE"), "{text}");
}

/// `measure` on a CPU that `shield --all 1` fenced off enters the shield the
/// way `compare` does (it used to fail with EINVAL), and `reset` still puts
/// everything back.
const MEASURE_IN_SHIELD: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
aff() { grep Cpus_allowed_list /proc/$1/status | cut -f2; }
before=$(aff $$)
$CS shield --all 1 || fail "shield exit $?"
$CS measure latency --cpus 1 --duration 1s --json /tmp/cpushield-measure-in-shield.$$.json
rc=$?
[ $rc = 0 ] || fail "measure latency in the shield exit $rc"
grep -q '"samples"' /tmp/cpushield-measure-in-shield.$$.json || fail "no samples in the JSON"
rm -f /tmp/cpushield-measure-in-shield.$$.json
$CS measure noise --cpus 1 --duration 1s >/dev/null || fail "measure noise in the shield exit $?"
$CS measure determinism --cpus 1 --runs 2 --work 10ms --rest 10ms >/dev/null || fail "measure determinism in the shield exit $?"
$CS measure net --cpus 1,1 --sizes 64 --duration 200ms --warmup 10 >/dev/null || fail "measure net in the shield exit $?"
# Without the shield's state (another state directory) the CPU cannot be entered:
# refused with one line naming the fix.
CPUSHIELD_STATE_DIR=/tmp/cpushield-no-state.$$ $CS measure latency --cpus 1 --duration 1s >/dev/null 2>/tmp/cpushield-no-state.$$.err
[ $? = 1 ] || fail "measure without the shield state did not exit 1"
grep -q "CPUSHIELD_STATE_DIR" /tmp/cpushield-no-state.$$.err || fail "refusal does not name CPUSHIELD_STATE_DIR: $(cat /tmp/cpushield-no-state.$$.err)"
rm -rf /tmp/cpushield-no-state.$$ /tmp/cpushield-no-state.$$.err
$CS reset || fail "reset exit $?"
[ "$(aff $$)" = "$before" ] || fail "shell on $(aff $$) after reset, was $before"
echo SCENARIO-DONE
"#;

#[test]
fn measure_latency_on_a_shielded_cpu_enters_the_shield_and_reset_restores() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let (out, code) = in_namespace(MEASURE_IN_SHIELD, state.path());
    assert_eq!(
        state_before,
        system_state(),
        "IRQ affinities differ after reset"
    );
    support::assert_no_shield_cgroups();
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}

/// Shields this machine's CPU 1 from interrupts and keeps what `shield`,
/// `show` and `check` said, and where every IRQ was meanwhile, in `$OUT`.
const PENDING_MOVES: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
$CS shield --irqs 1 --json >"$OUT/shield.json" || fail "shield exit $?"
$CS show --json >"$OUT/show.json" || fail "show exit $?"
$CS check --cpus 1 --interval 1s --json >"$OUT/check.json"
# A move still pending now was pending all along (an IRQ that fired meanwhile
# moved, and nothing wrote its mask since).
for d in /proc/irq/[0-9]*; do
    echo "${d##*/} $(cat $d/smp_affinity_list) $(cat $d/effective_affinity_list 2>/dev/null)"
done >"$OUT/irqs"
$CS reset || fail "reset exit $?"
echo SCENARIO-DONE
"#;

/// Whether `text` names `n` as a whole number.
fn names_number(text: &str, n: u32) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .any(|w| w == n.to_string())
}

/// The state a boot leaves on this host: IRQs the kernel placed on CPU 1
/// that do not fire keep CPU 1 as their effective CPU after the shield
/// writes masks without it (the kernel moves them at their next interrupt).
/// `shield`, `show --json` and `check --json` name each as a pending move,
/// never as an IRQ the shield did not move; `reset` restores every mask.
#[test]
fn irq_moves_left_pending_by_the_shield_are_named_by_shield_show_and_check() {
    let _serial = serial();
    if let Err(why) = can_shield_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let state_before = system_state();
    let text = support::run_scenario_in_pid_namespace(
        PENDING_MOVES,
        &[("OUT", out_dir.path().as_os_str())],
        state.path(),
    );
    assert_eq!(state_before, system_state(), "IRQ masks differ after reset");
    assert!(!text.contains("ASSERT-FAIL"), "{text}");
    assert!(text.contains("SCENARIO-DONE"), "{text}");
    let read = |f: &str| std::fs::read_to_string(out_dir.path().join(f)).unwrap();
    let list = |s: &str| cpushield_cpuset::CpuSet::parse_list(s).unwrap_or_default();
    let pending: Vec<u32> = read("irqs")
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let (irq, mask, eff) = (w.first()?, w.get(1)?, w.get(2)?);
            (!list(mask).contains(1) && list(eff).contains(1)).then(|| irq.parse().ok())?
        })
        .collect();
    if pending.is_empty() {
        skip("no IRQ of this machine was left with CPU 1 effective (none placed there at boot, or this kernel moves IRQs at once)");
        return;
    }
    let shield: serde_json::Value = serde_json::from_str(&read("shield.json")).unwrap();
    let note = shield["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["text"].as_str())
        .find(|t| t.starts_with("move pending for IRQ"))
        .unwrap_or_else(|| panic!("no pending-move note: {shield}"));
    let show: serde_json::Value = serde_json::from_str(&read("show.json")).unwrap();
    let cpu1 = show["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cpu"] == 1)
        .unwrap();
    let check: serde_json::Value = serde_json::from_str(&read("check.json")).unwrap();
    let titles: Vec<&str> = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap())
        .collect();
    for irq in pending {
        assert!(names_number(note, irq), "IRQ {irq} not in: {note}");
        assert!(
            cpu1["irq_moves_pending"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["irq"] == irq),
            "IRQ {irq} not in show's irq_moves_pending: {cpu1}"
        );
        assert!(
            titles.iter().any(|t| (t.starts_with("move pending for IRQ")
                && names_number(t.split(" off ").next().unwrap(), irq))
                || (t.starts_with(&format!("IRQ {irq} ")) && t.contains("pending move"))),
            "IRQ {irq} not named pending by check: {titles:#?}"
        );
        assert!(
            !titles
                .iter()
                .any(|t| t.starts_with(&format!("IRQ {irq} ")) && t.ends_with("arrives on CPU 1")),
            "IRQ {irq} called an IRQ arriving: {titles:#?}"
        );
    }
}
