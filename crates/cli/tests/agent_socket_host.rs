//! Unprivileged placement through the agent's socket, for real on this host
//! inside a private PID namespace, with real users made for the test: a
//! member of the granted group runs `cpushield run --cpus 1 --fifo 10 -- sh`
//! and the shell runs on CPU 1 under SCHED_FIFO 10 in the shield's cpuset;
//! another CPU, a priority above the grant, another user's PID and a user
//! outside the group are each refused with one line naming the rule, and any
//! other request on the socket is refused. A member's running process placed
//! by `--pid` gets its policy back from the shield's journal at reset.

mod support;

use std::process::Command;
use support::{can_shield_here, run_scenario_in_pid_namespace, skip, system_state};

const SCENARIO: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
printf '[shield]\nall = "1"\n[access]\nsocket = "%s"\n[[access.grant]]\ngroup = "%s"\ncpus = "1"\nmax_priority = 50\n[agent]\non_stop = "reset"\n' \
  "$SOCK" "$GRP" > "$CFG"
$CS apply --config "$CFG" >/dev/null || fail "apply exit $?"
$CS agent --config "$CFG" --listen 127.0.0.1:0 --interval 1s > "$LOG" 2>&1 & AGENT=$!
for i in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || fail "no socket: $(cat $LOG)"
[ "$(stat -c '%a %G' "$SOCK")" = "660 $GRP" ] || fail "socket mode/group: $(stat -c '%a %G' "$SOCK")"
# Not root: `run` asks the agent by itself (its socket named by the environment).
as() { u=$1; shift; runuser -u "$u" -- env CPUSHIELD_AGENT_SOCKET="$SOCK" "$@"; }
# Allowed: the member's own process, on CPU 1, SCHED_FIFO 10, in the shield.
out=$(as "$MEMBER" $CS run --cpus 1 --fifo 10 -- sh -c 'grep Cpus_allowed_list /proc/self/status; cat /proc/self/cpuset; chrt -p $$' 2>&1)
echo "allowed: $out"
echo "$out" | grep -q '^cpushield: agent: ok: placed process' || fail "not placed: $out"
echo "$out" | grep -qP '^Cpus_allowed_list:\s+1$' || fail "not on CPU 1: $out"
echo "$out" | grep -q 'cpushield-shield' || fail "not in the shield's cpuset: $out"
echo "$out" | grep -q 'SCHED_FIFO' || fail "not SCHED_FIFO: $out"
echo "$out" | grep -q 'priority: 10' || fail "not priority 10: $out"
refused() { # WHAT EXPECTED USER ARGS...
  what=$1; want=$2; u=$3; shift 3
  out=$(as "$u" $CS run "$@" 2>&1); rc=$?
  echo "$what: rc $rc: $out"
  [ $rc = 1 ] || fail "$what: exit $rc: $out"
  echo "$out" | grep -q "$want" || fail "$what: no [$want] in: $out"
  [ "$(echo "$out" | wc -l)" = 1 ] || fail "$what: not one line: $out"
  echo "$out" | grep -q 'started' && fail "$what: the command ran: $out"
}
refused "another CPU" "refused: CPU 0 is not granted to you by \[\[access.grant\]\] group = \"$GRP\"" "$MEMBER" --cpus 0 --fifo 10 -- echo started
refused "too high a priority" "refused: priority 60 is above max_priority 50" "$MEMBER" --cpus 1 --fifo 60 -- echo started
before=$(grep Cpus_allowed_list /proc/$AGENT/status)
refused "another user's PID" "refused: process $AGENT belongs to uid 0, not to you" "$MEMBER" --cpus 1 --fifo 10 --pid $AGENT
[ "$(grep Cpus_allowed_list /proc/$AGENT/status)" = "$before" ] || fail "the agent was moved"
chrt -p $AGENT | grep -q SCHED_OTHER || fail "the agent's policy changed: $(chrt -p $AGENT)"
refused "outside the group" "refused: the agent's socket $SOCK admits only group $GRP" "$OUTSIDER" --cpus 1 --fifo 10 -- echo started
# Any other request, from a member, is refused and changes nothing.
ask() { as "$MEMBER" perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!"; print $s "$ARGV[1]\n"; print scalar <$s>' "$SOCK" "$1"; }
for req in '{"reset":{}}' 'shield --all 1' '{"place":{"pid":0,"cpus":"1","policy":"fifo","priority":10,"command":"sh"}}'; do
  out=$(ask "$req" 2>&1)
  echo "$out" | grep -q '^refused: the socket accepts only {"place"' || fail "request [$req] not refused: $out"
done
grep -q "uid [0-9]* pid [0-9]*: ok: placed" "$LOG" || fail "no placement logged: $(cat $LOG)"
grep -q "refused: priority 60" "$LOG" || fail "no refusal logged: $(cat $LOG)"
# The member's own running process, by --pid: placed, its old policy in
# the shield's journal, so the reset on the agent's stop gives it back.
mkdir -m 777 "$DIR/u"
as "$MEMBER" sh -c 'sleep 30 & echo $! > "$0/sleep.pid"' "$DIR/u"
SL=$(cat "$DIR/u/sleep.pid")
out=$(as "$MEMBER" $CS run --pid $SL --cpus 1 --rr 5 2>&1)
echo "$out" | grep -q "^cpushield: agent: ok: placed process $SL" || fail "--pid not placed: $out"
chrt -p $SL | grep -q 'SCHED_RR' || fail "--pid not SCHED_RR: $(chrt -p $SL)"
grep -qP '^Cpus_allowed_list:\s+1$' /proc/$SL/status || fail "--pid not on CPU 1: $(grep Cpus_allowed_list /proc/$SL/status)"
kill -TERM $AGENT; wait $AGENT; rc=$?
chrt -p $SL | grep -q 'SCHED_OTHER' || fail "reset did not give the policy back: $(chrt -p $SL)"
kill $SL
[ $rc = 0 ] || fail "agent exit $rc: $(cat $LOG)"
[ -e "$SOCK" ] && fail "socket left behind"
echo "agent log:"; cat "$LOG"
echo SCENARIO-DONE
"#;

/// Test users and a group, removed when dropped (also on failure).
struct Users {
    group: String,
    member: String,
    outsider: String,
}

impl Users {
    fn new() -> Self {
        let n = std::process::id();
        let u = Users {
            group: format!("cpsrt{n}"),
            member: format!("cpsin{n}"),
            outsider: format!("cpsout{n}"),
        };
        let run = |args: &[&str]| {
            let st = Command::new(args[0]).args(&args[1..]).status().unwrap();
            assert!(st.success(), "{args:?}: {st}");
        };
        run(&["groupadd", &u.group]);
        run(&[
            "useradd", "-M", "-N", "-s", "/bin/sh", "-G", &u.group, &u.member,
        ]);
        run(&["useradd", "-M", "-N", "-s", "/bin/sh", &u.outsider]);
        u
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        for user in [&self.member, &self.outsider] {
            let _ = Command::new("userdel").arg(user).status();
        }
        let _ = Command::new("groupdel").arg(&self.group).status();
    }
}

#[test]
fn a_group_member_places_its_own_process_through_the_agent_and_everything_else_is_refused() {
    if let Err(why) = can_shield_here(&["unshare", "runuser", "useradd", "chrt", "perl"]) {
        skip(&why);
        return;
    }
    let users = Users::new();
    let dir = tempfile::tempdir().unwrap();
    // The test users reach the socket (and nothing else lives here).
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let state = dir.path().join("state");
    let before = system_state();
    let (cfg, log) = (
        dir.path().join("cpushield.toml"),
        dir.path().join("agent.log"),
    );
    let sock = dir.path().join("agent.sock");
    let text = run_scenario_in_pid_namespace(
        SCENARIO,
        &[
            ("CFG", cfg.as_os_str()),
            ("LOG", log.as_os_str()),
            ("SOCK", sock.as_os_str()),
            ("DIR", dir.path().as_os_str()),
            ("GRP", users.group.as_ref()),
            ("MEMBER", users.member.as_ref()),
            ("OUTSIDER", users.outsider.as_ref()),
        ],
        &state,
    );
    drop(users);
    assert_eq!(before, system_state(), "IRQs or sysctls differ after reset");
    support::assert_no_shield_cgroups();
    assert!(!text.contains("ASSERT-FAIL"), "{text}");
    assert!(text.contains("SCENARIO-DONE"), "{text}");
    eprintln!("{text}");
}
