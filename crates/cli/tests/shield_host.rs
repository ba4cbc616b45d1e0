//! `cpushield shield` for real on this host, inside a private PID namespace
//! whose tasks are "the system": the rule holds, the cpuset enforces it, IRQs
//! move, and `reset` puts every affinity, cgroup and IRQ back byte for byte.

use std::path::Path;
use std::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cpushield")
}

fn can_shield_here() -> Result<(), String> {
    if !nix_is_root() {
        return Err("not root".into());
    }
    if Command::new("unshare").arg("--help").output().is_err() {
        return Err("unshare(1) missing".into());
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if online.trim() == "0" {
        return Err("needs 2 CPUs".into());
    }
    Ok(())
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        .unwrap_or(false)
}

fn irq_masks() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let p = e.path().join("smp_affinity");
        if let Ok(t) = std::fs::read_to_string(&p) {
            out.push((p.display().to_string(), t));
        }
    }
    out.push((
        "default".into(),
        std::fs::read_to_string("/proc/irq/default_smp_affinity").unwrap(),
    ));
    out.sort();
    out
}

/// Runs a bash script inside a fresh PID + mount namespace; returns stdout.
fn in_namespace(script: &str, state_dir: &Path) -> (String, i32) {
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "bash", "-c", script])
        .env("CS", bin())
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
    if let Err(why) = can_shield_here() {
        eprintln!("skipped: {why}");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let irqs_before = irq_masks();
    let (out, code) = in_namespace(SCENARIO, state.path());
    let irqs_after = irq_masks();
    assert_eq!(irqs_before, irqs_after, "IRQ affinities differ after reset");
    assert!(!Path::new("/sys/fs/cgroup/cpuset/cpushield-shield").exists());
    assert!(!Path::new("/sys/fs/cgroup/cpuset/cpushield-system").exists());
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}

#[test]
fn bad_cpu_lists_exit_1_with_one_line_and_change_nothing() {
    let state = tempfile::tempdir().unwrap();
    let irqs_before = irq_masks();
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
        assert!(!err.trim().is_empty(), "{args:?} printed no error");
        assert!(
            !state.path().join("state.json").exists(),
            "{args:?} wrote state"
        );
    }
    assert_eq!(irqs_before, irq_masks());
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
sleep 0.5
TID=$(for t in /proc/$PY/task/*; do t=${t##*/}; [ "$t" != $PY ] && echo $t; done | head -1)
[ -n "$TID" ] || fail "no worker thread"
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
    if let Err(why) = can_shield_here() {
        eprintln!("skipped: {why}");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let irqs_before = irq_masks();
    let (out, code) = in_namespace(NON_UTF8_THREAD, state.path());
    assert_eq!(
        irqs_before,
        irq_masks(),
        "IRQ affinities differ after reset"
    );
    assert!(!Path::new("/sys/fs/cgroup/cpuset/cpushield-shield").exists());
    assert!(!out.contains("ASSERT-FAIL"), "{out}");
    assert!(out.contains("SCENARIO-DONE"), "exit {code}: {out}");
}
