# Scenario supervisor-signals: `tune` and `compare` stopped the way supervisors stop
# things. Each run gets SIGINT (`kill -INT`, a terminal's ^C), SIGTERM (`kill PID`,
# `timeout`, systemd's stop, a CI runner's cancel) or SIGKILL, at a random moment, sent to
# one of its two processes: the one started, or its PID namespace's init (the work). The
# started one forwards SIGINT and SIGTERM to the init; the init gets SIGTERM when the
# started one dies; when the init is killed, the started one restores what the state
# records. Afterwards every task affinity (kworker rescuers included), cgroup, IRQ mask,
# workqueue mask, sysctl and the load's run directory are as found, with at most one
# command run: the one the run printed. Timings under TCG mean nothing.
# guest-test: a_supervisors_signal_to_either_pid_of_tune_or_compare_leaves_the_machine_as_found
# guest-cost: 90
# guest-timeout: 900
# guest-tcg: single
GUEST_CGROUP=v2

LOAD_DIR=/tmp/load
STATE_DIR=/run/cpushield

# one_case NAME SIGNAL TARGET ARGS...: runs cpushield ARGS in the background, sends SIGNAL
# to TARGET (started or init) 0.2-3 s after the shield is up, waits for both to end, runs
# the one command the run printed (if any), and compares the machine with /tmp/before.
one_case() {
    _name=$1 _sig=$2 _target=$3; shift 3
    CASE=$((CASE + 1))
    "$CS" "$@" --dir "$LOAD_DIR" --out "/tmp/out-$CASE" >/tmp/run.out 2>&1 &
    _started=$!
    _init=
    _waited=0
    # The init is the child in another PID namespace (a check the run makes first, such
    # as a tool's --version, is a child too).
    _own=$(readlink "/proc/$_started/ns/pid")
    while [ -z "$_init" ] && [ "$_waited" -lt 300 ]; do
        for _c in $(cat "/proc/$_started/task/$_started/children" 2>/dev/null); do
            _ns=$(readlink "/proc/$_c/ns/pid" 2>/dev/null)
            [ -n "$_ns" ] && [ "$_ns" != "$_own" ] && _init=$_c
        done
        [ -n "$_init" ] || { usleep 100000; _waited=$((_waited + 1)); }
    done
    if [ -z "$_init" ]; then
        fail "$_name/init-found" "no namespace init under $_started: $(head -c 300 /tmp/run.out)"
        wait "$_started" 2>/dev/null
        return
    fi
    # A random moment 0.2-3 s after the shield is up (its state written): a stop before
    # it would leave nothing to restore.
    _waited=0
    while [ ! -e "$STATE_DIR/state.json" ] && [ "$_waited" -lt 600 ]; do
        usleep 100000
        _waited=$((_waited + 1))
    done
    usleep $(( 200000 + $(od -An -N2 -tu2 /dev/urandom) % 2800 * 1000 ))
    case $_target in
        started) _to=$_started ;;
        init) _to=$_init ;;
    esac
    info "$_name: SIG$_sig to $_target ($_to); state journaled: $(grep -c runtime "$STATE_DIR/state.json" 2>/dev/null || echo none), load dirs: $(ls "$LOAD_DIR" | tr '\n' ' ')"
    kill -"$_sig" "$_to"
    wait "$_started" 2>/dev/null
    # The init ends by itself too (after its restore, when its parent died first).
    _waited=0
    while [ -d "/proc/$_init" ] && ! grep -q '^State:.*Z' "/proc/$_init/status" 2>/dev/null &&
        [ "$_waited" -lt 1200 ]; do
        usleep 100000
        _waited=$((_waited + 1))
    done
    if [ -d "/proc/$_init" ] && ! grep -q '^State:.*Z' "/proc/$_init/status" 2>/dev/null; then
        fail "$_name/init-ended" "the namespace init $_init still runs 120 s after the signal"
        kill -9 "$_init" 2>/dev/null
    else
        pass "$_name/init-ended"
    fi
    # The signal reached the work, which stopped early (a run left to its end restores
    # too, and proves nothing); or, its init killed, the started process restored.
    case "$_sig-$_target" in
        KILL-init) _stopped="cpushield: the run was killed by SIGKILL" ;;
        *) _stopped="cpushield: interrupted" ;;
    esac
    if grep -qF "$_stopped" /tmp/run.out; then pass "$_name/stopped-early"; else
        fail "$_name/stopped-early" "no [$_stopped]: $(tr '\n' '|' </tmp/run.out | tail -c 400)"
    fi
    # At most one command, the one printed.
    _commands=$(sed -n 's/.*run `\(cpushield reset[^`]*\)`.*/\1/p' /tmp/run.out)
    _count=$(printf '%s' "$_commands" | grep -c .)
    if [ "$_count" -le 1 ]; then
        pass "$_name/at-most-one-command"
    else
        fail "$_name/at-most-one-command" "$_count commands: $(tr '\n' '|' </tmp/run.out | head -c 400)"
    fi
    if [ -n "$_commands" ]; then
        info "$_name: running the printed command: $_commands"
        # shellcheck disable=SC2086 # the printed command, word by word
        cs_ok "$_name/printed-command" ${_commands#cpushield }
    fi
    info "$_name: output: $(tr '\n' '|' </tmp/run.out | tail -c 300)"
    if [ -e "$STATE_DIR/state.json" ]; then
        fail "$_name/no-state-left" "$(head -c 200 "$STATE_DIR/state.json")"
    else
        pass "$_name/no-state-left"
    fi
    check_eq "$_name/load-files" "" "$(ls -A "$LOAD_DIR")" "the load's directory"
    expect_restored "$_name/restored" /tmp/before
}

scenario_main() {
    CASE=0
    mkdir -p "$LOAD_DIR"
    snapshot /tmp/before
    for sig in INT TERM KILL; do
        for target in started init; do
            one_case "tune/$sig-$target" "$sig" "$target" \
                tune --cpus 3 --load fpu --knobs rt-throttling --budget 22s
            one_case "compare/$sig-$target" "$sig" "$target" \
                compare --cpus 3 --load fpu --scenarios loaded,shielded --duration 3s --runs 0 \
                --idle halt --no-attribute --no-anchor
        done
    done
}
