# Scenario pid-reuse: a task that gets the ID of a task saved before the shield is never
# taken for it (docs/RELIABILITY.md): reset tells them apart by the start time in their
# stat. Task A (pinned to CPU 2) and task C (pinned to CPU 1) are saved by the shield;
# then A exits and a new task B, also asking for CPU 2, gets A's ID the way
# checkpoint/restore tools give a chosen ID: ns_last_pid is written to A's minus one just
# before B's fork, and written back afterwards to where the allocator was, so that
# nothing in the allocator's position shows that A's ID was given again. Reset must
# restore B as a new task (its parent's saved affinity, every CPU), not as A (CPU 2),
# and C as the task saved (CPU 1).
# guest-test: reset_restores_a_new_task_with_a_saved_tasks_id_as_new_and_a_saved_one_as_saved
# guest-timeout: 300
# guest-tcg: single
# Written on the v1 layout; a kernel without v1 cpusets (6.12-rt) runs it on v2.
if v1_cpuset_available; then GUEST_CGROUP=v1; else GUEST_CGROUP=v2; fi

scenario_main() {
    taskset -c 2 sleep 1000 &
    A=$!
    taskset -c 1 sleep 1000 &
    C=$!
    info "A=$A (CPU 2), C=$C (CPU 1)"
    cs_ok reuse/shield shield --all 3
    check_eq reuse/a-shielded 2 "$(cpus_of "$A")" "A's affinity while shielded"

    kill "$A"
    wait "$A" 2>/dev/null
    # B asks for CPU 2 as A did, so that it looks like A to everything but its start
    # time (what the shield set on A is what B has: no request to follow). On v2 the
    # shield leaves this shell in the root cgroup, so B is born outside the shield's
    # cgroups and keeps what it asks for: there B asks for nothing (restored as new it
    # gets every CPU back from the partition's teardown; taken for A it would get 2).
    if [ "$GUEST_CGROUP" = v1 ]; then b_pin="taskset -c 2"; else b_pin=""; fi
    # The allocator's position, written back once B has A's ID. A task of the kernel can
    # take A's ID in the instant between the write and the fork; then B is ended and the
    # write repeated (a few times at most).
    # (`read` reads byte by byte, and an integer sysctl read at an offset reads empty.)
    last=$(cat /proc/sys/kernel/ns_last_pid)
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
    [ "$last" -gt "$B" ] && echo "$last" >/proc/sys/kernel/ns_last_pid
    check_eq reuse/b-got-a-s-id "$A" "$B" "the new task's ID"
    _i=0
    while [ -n "$b_pin" ] && [ "$(cpus_of "$B")" != 2 ] && [ "$_i" -lt 200 ]; do
        usleep 10000
        _i=$((_i + 1))
    done
    info "B=$B in the housekeeping cpuset with $(cpus_of "$B"); ns_last_pid $(cat /proc/sys/kernel/ns_last_pid)"

    cs_ok reuse/reset reset
    check_eq reuse/b-is-restored-as-new "0-3" "$(cpus_of "$B")" \
        "affinity of the new task B that took A's ID: its parent's (taken for A, it would be 2)"
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
}
