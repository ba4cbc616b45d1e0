# Scenario pid-reuse: reset reads the stat of a task only where the kernel's PID
# allocator may have given its ID again since the first shield (docs/RELIABILITY.md). With
# pid_max lowered to 1500 the allocator wraps inside the test: task A (pinned to CPU 2)
# and task C (pinned to CPU 1) get their IDs before the wrap, the shield comes after it,
# then A exits and a new task B gets A's ID. B's ID lies in the interval the allocator
# went through since the shield: reset must read it and restore B as a new task (its
# parent's saved affinity, every CPU), not as A (CPU 2; B asks for CPU 2 too, so only its
# start time tells it from A). C's ID lies outside: reset takes
# it as the task saved and restores CPU 1. The shield reads A and C without their stat
# (the first shield's leaders): A's start time is not saved, and B is told from A by the
# tick before which every task saved so started (B started after it).
# guest-timeout: 400
# Written on the v1 layout; a kernel without v1 cpusets (6.12-rt) runs it on v2.
if v1_cpuset_available; then GUEST_CGROUP=v1; else GUEST_CGROUP=v2; fi

# The ID of each new task is $! (reading ns_last_pid with the shell's `read` is no good:
# it reads byte by byte, and an integer sysctl read at an offset reads empty).

# fork_until ID: short-lived subshells until one gets an ID of at least ID.
fork_until() {
    while :; do
        (:) &
        _p=$!
        wait "$_p"
        [ "$_p" -ge "$1" ] && break
    done
}

# fork_until_wrap: short-lived subshells until the allocator has wrapped to the low IDs;
# prints the first low ID.
fork_until_wrap() {
    _prev=0
    while :; do
        (:) &
        _p=$!
        wait "$_p"
        [ "$_p" -lt "$_prev" ] && break
        _prev=$_p
    done
    echo "$_p"
}

scenario_main() {
    old_max=$(cat /proc/sys/kernel/pid_max)
    # Forks are slow under emulation: a small ring, and A well inside the half of it
    # that the allocator may pass before reset stops trusting the interval.
    echo 1500 >/proc/sys/kernel/pid_max
    check_eq reuse/pid-max 1500 "$(cat /proc/sys/kernel/pid_max)" "pid_max"
    fork_until 700
    taskset -c 2 sleep 1000 &
    A=$!
    fork_until 1200
    taskset -c 1 sleep 1000 &
    C=$!
    info "A=$A (CPU 2), C=$C (CPU 1); the allocator wrapped to $(fork_until_wrap)"

    # Test hook: the first shield reads the leaders without their stat even when it lists
    # them within one tick (docs/RELIABILITY.md): A is then saved with no start time, and
    # only the tick the state names tells B from it.
    export CPUSHIELD_TEST_WAIT_TICK=1
    cs_ok reuse/shield shield --all 3
    unset CPUSHIELD_TEST_WAIT_TICK
    if grep -q '"pid_cursor":{"last_pid":' /run/cpushield/state.json; then
        pass reuse/cursor-saved
    else
        fail reuse/cursor-saved "no pid_cursor in the state"
    fi
    if grep -q '"unread_start_before":[0-9]' /run/cpushield/state.json &&
        grep -q "\"$A\":\[$A,\"\",0," /run/cpushield/state.json; then
        pass reuse/a-saved-without-its-stat
    else
        fail reuse/a-saved-without-its-stat "$(grep -o "\"$A\":\[[^]]*\]" /run/cpushield/state.json) $(grep -o '"unread_start_before":[0-9]*' /run/cpushield/state.json)"
    fi
    check_eq reuse/a-shielded 2 "$(cpus_of "$A")" "A's affinity while shielded"

    # A exits; the allocator's last ID is then set to A's minus one (ns_last_pid, as
    # CRIU does), so the next task gets A's ID. Forking up to it instead lost the race
    # once in CI: a kernel thread took A-1 between two forks and the last subshell got A.
    # A task of the kernel can still take A in the instant between the write and the
    # fork; then B is ended and the write repeated (a few times at most).
    kill "$A"
    wait "$A" 2>/dev/null
    # B asks for CPU 2 as A did, so that it looks like A to everything but its start
    # time (what the shield set on A is what B has: no request to follow). On v2 the
    # shield leaves this shell in the root cgroup, so B is born outside the shield's
    # cgroups and keeps what it asks for: there B asks for nothing (restored as new it
    # gets every CPU back from the partition's teardown; taken for A it would get 2).
    if [ "$GUEST_CGROUP" = v1 ]; then b_pin="taskset -c 2"; else b_pin=""; fi
    _try=0
    while :; do
        echo $((A - 1)) >/proc/sys/kernel/ns_last_pid
        $b_pin sleep 1000 &
        B=$!
        [ "$B" = "$A" ] && break
        _try=$((_try + 1))
        [ "$_try" -ge 5 ] && break
        info "B got $B, not A's $A (try $_try): ended, ns_last_pid written again"
        kill "$B"
        wait "$B" 2>/dev/null
    done
    check_eq reuse/b-got-a-s-id "$A" "$B" "the new task's ID"
    _i=0
    while [ -n "$b_pin" ] && [ "$(cpus_of "$B")" != 2 ] && [ "$_i" -lt 200 ]; do
        usleep 10000
        _i=$((_i + 1))
    done
    info "B=$B in the housekeeping cpuset with $(cpus_of "$B")"

    cs_ok reuse/reset reset
    check_eq reuse/b-is-restored-as-new "0-3" "$(cpus_of "$B")" \
        "affinity of the new task B that took A's ID: its parent's (taken for A's, it would be 2)"
    check_eq reuse/c-is-restored-as-saved 1 "$(cpus_of "$C")" "affinity of the saved task C"
    for t in B C; do
        eval "pid=\$$t"
        if in_root_cpuset "$pid"; then
            pass "reuse/$t-back-in-root"
        else
            fail "reuse/$t-back-in-root" "$(cgroups_of "$pid")"
        fi
    done
    kill "$B" "$C" 2>/dev/null
    wait 2>/dev/null
    echo "$old_max" >/proc/sys/kernel/pid_max
}
