//! The agent for real on this host, inside a private PID namespace with a
//! private state directory, under the host-test lock: `run --via-agent` as
//! root goes through the agent's socket (not the root placement it would
//! otherwise take), is refused in one line with no agent or with an option
//! only a root `run` has, and on SIGTERM the agent leaves the shield up with
//! `on_stop = "keep"` and resets it with `on_stop = "reset"`.

mod support;

use std::os::fd::AsRawFd;
use std::path::Path;
use support::{can_shield_here, run_scenario_in_pid_namespace, skip, system_state};

const SCENARIO: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
masks() { $CS show --json | grep -E '^  "(procs|irqs|ltmr)":' | tr -d ' \n'; }
wait_socket() { for i in $(seq 100); do [ -S "$SOCK" ] && return; sleep 0.1; done; fail "no socket: $(cat $1)"; }
via() { CPUSHIELD_AGENT_SOCKET="$SOCK" $CS run --via-agent "$@"; }
printf '[shield]\nall = "1"\n[access]\nsocket = "%s"\n[[access.grant]]\ngroup = "%s"\ncpus = "1"\nmax_priority = 50\n[agent]\non_stop = "keep"\n' \
  "$SOCK" "$(id -gn)" > "$CFG"
$CS apply --config "$CFG" >/dev/null || fail "apply exit $?"
# No agent yet: refused, the command does not run.
out=$(via --cpus 1 --fifo 10 -- echo started 2>&1); rc=$?
echo "no agent: rc $rc: $out"
[ $rc = 1 ] || fail "no agent: exit $rc"
echo "$out" | grep -q "^cpushield: no agent answers on $SOCK" || fail "no agent: $out"
echo "$out" | grep -q started && fail "no agent: the command ran"
$CS agent --config "$CFG" --listen 127.0.0.1:0 --interval 200ms > "$LOG" 2>&1 & AGENT=$!
wait_socket "$LOG"
# Root with --via-agent: the agent places it (root alone would place it itself).
out=$(via --cpus 1 --fifo 10 -- sh -c 'grep Cpus_allowed_list /proc/self/status; cat /proc/self/cpuset; chrt -p $$' 2>&1)
echo "via agent: $out"
echo "$out" | grep -q '^cpushield: agent: ok: placed process' || fail "not placed by the agent: $out"
echo "$out" | grep -qP '^Cpus_allowed_list:\s+1$' || fail "not on CPU 1: $out"
echo "$out" | grep -q 'cpushield-shield' || fail "not in the shield's cpuset: $out"
echo "$out" | grep -q 'SCHED_FIFO' || fail "not SCHED_FIFO: $out"
echo "$out" | grep -q 'priority: 10' || fail "not priority 10: $out"
grep -q 'socket: uid 0 pid [0-9]*: ok: placed process' "$LOG" || fail "the agent logged no placement: $(cat $LOG)"
# An option only a root `run` has: refused in one line, nothing runs.
out=$(via --reserve --cpus 1 --fifo 10 -- echo started 2>&1); rc=$?
echo "root-only: rc $rc: $out"
[ $rc = 1 ] || fail "root-only option: exit $rc"
[ "$(echo "$out" | wc -l)" = 1 ] || fail "root-only option: not one line: $out"
echo "$out" | grep -q -- '--reserve needs root: through the agent' || fail "root-only option: $out"
echo "$out" | grep -q started && fail "root-only option: the command ran"
# on_stop = "keep": SIGTERM leaves the shield up.
kill -TERM $AGENT; wait $AGENT; rc=$?
[ $rc = 0 ] || fail "keep: agent exit $rc: $(cat $LOG)"
grep -q 'stopped; shield left up (on_stop = "keep")' "$LOG" || fail "keep: $(cat $LOG)"
[ "$(masks)" = '"procs":"1","irqs":"1","ltmr":"1",' ] || fail "keep: masks after the agent stopped: $(masks)"
[ -e "$SOCK" ] && fail "keep: socket left behind"
# on_stop = "reset": SIGTERM resets it.
sed -i 's/^on_stop = "keep"$/on_stop = "reset"/' "$CFG"
$CS agent --config "$CFG" --listen 127.0.0.1:0 --interval 200ms > "$LOG.2" 2>&1 & AGENT=$!
wait_socket "$LOG.2"
kill -TERM $AGENT; wait $AGENT; rc=$?
[ $rc = 0 ] || fail "reset: agent exit $rc: $(cat $LOG.2)"
grep -q 'stopped; shield reset (on_stop = "reset")' "$LOG.2" || fail "reset: $(cat $LOG.2)"
[ "$(masks)" = '"procs":"","irqs":"","ltmr":"",' ] || fail "reset: masks after the agent stopped: $(masks)"
# Whatever failed above, leave nothing shielded.
$CS reset >/dev/null 2>&1 || fail "the final reset failed"
echo "agent logs:"; cat "$LOG" "$LOG.2"
echo SCENARIO-DONE
"#;

/// The host-test lock: one shielding test on this machine at a time.
const HOST_LOCK: &str = "/tmp/cpushield-hosttest.lock";

/// Holds [`HOST_LOCK`], unless this process runs under it already
/// (`flock /tmp/cpushield-hosttest.lock cargo test ...` passes its locked
/// descriptor down; taking the lock again would wait for ever).
struct HostLock {
    _held: Option<std::fs::File>,
}

impl HostLock {
    fn take() -> Self {
        let inherited = std::fs::read_dir("/proc/self/fd")
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == Path::new(HOST_LOCK)));
        if inherited {
            return HostLock { _held: None };
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(HOST_LOCK)
            .expect("open the host-test lock");
        // SAFETY: flock on a descriptor this function just opened and keeps.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
        HostLock { _held: Some(file) }
    }
}

#[test]
fn run_via_agent_goes_through_the_socket_and_on_stop_keeps_or_resets_the_shield() {
    if let Err(why) = can_shield_here(&["unshare", "chrt"]) {
        skip(&why);
        return;
    }
    let _lock = HostLock::take();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let before = system_state();
    let (cfg, log, sock) = (
        dir.path().join("cpushield.toml"),
        dir.path().join("agent.log"),
        dir.path().join("agent.sock"),
    );
    let text = run_scenario_in_pid_namespace(
        SCENARIO,
        &[
            ("CFG", cfg.as_os_str()),
            ("LOG", log.as_os_str()),
            ("SOCK", sock.as_os_str()),
        ],
        &state,
    );
    assert_eq!(before, system_state(), "IRQs or sysctls differ after reset");
    assert!(!text.contains("ASSERT-FAIL"), "{text}");
    assert!(text.contains("SCENARIO-DONE"), "{text}");
    eprintln!("{text}");
}
