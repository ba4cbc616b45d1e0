# Scenario reset-idempotent: reset with nothing shielded is a successful no-op, reset twice
# after a shield gives the same state, and concurrent invocations are serialised.
# guest-test: reset_is_idempotent_and_serialised
# guest-cost: 23
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 400
GUEST_CGROUP=v2

scenario_main() {
    : >/tmp/spawned
    for cpus in all 3 2-3 1 all 1-3; do spawn "t-$cpus" "$cpus"; done
    spawn_mix 60
    sleep 1
    probe_irqs
    snapshot /tmp/before

    cs_ok noop/reset-1 reset
    cs_ok noop/reset-2 reset
    expect_restored noop/restored /tmp/before
    expect_show noop/show "" "" ""

    cs_ok twice/shield shield --all 3
    snapshot /tmp/shielded
    expect_rule twice/shield /tmp/before /tmp/shielded 3 3
    cs_ok twice/reset-1 reset
    expect_restored twice/after-first-reset /tmp/before
    cs_ok twice/reset-2 reset
    expect_restored twice/after-second-reset /tmp/before

    # Two shields at once: the second waits for the first's lock, and both succeed with
    # the result of one. The first is slowed after each change (a test hook) and takes
    # the lock before the second starts; the order in which they end proves the lock:
    # without it the second, not slowed, would end long before the first.
    concurrent concurrent/shields shield --all 3
    snapshot /tmp/shielded
    expect_rule concurrent /tmp/before /tmp/shielded 3 3
    # Two resets at once, the same way: both succeed, state restored.
    concurrent concurrent/resets reset
    expect_restored concurrent/restored /tmp/before
}

# lock_holder PID: true once PID holds a flock (/proc/locks), within 10 s.
lock_holder() {
    _i=0
    while [ "$_i" -lt 200 ]; do
        awk -v p="$1" '$2 == "FLOCK" && $5 == p { found = 1 } END { exit !found }' /proc/locks && return 0
        usleep 50000
        _i=$((_i + 1))
    done
    return 1
}

# concurrent NAME ARGS...: `cpushield ARGS` twice at once, the first slowed by 30 ms
# after each change. Both must exit 0, the first must hold the state lock while the
# second runs, and the second must end after the first.
concurrent() {
    _n=$1; shift
    : >/tmp/ended
    ( CPUSHIELD_TEST_STEP_DELAY_US=30000 "$CS" "$@" >/tmp/c1.out 2>&1; echo "first $?" >>/tmp/ended ) &
    _p1=$!
    # The first's cpushield is the subshell's only child.
    _i=0; _c1=""
    while [ -z "$_c1" ] && [ "$_i" -lt 100 ]; do
        _c1=$(cat /proc/$_p1/task/*/children 2>/dev/null | awk '{ print $1 }')
        [ -n "$_c1" ] || usleep 20000
        _i=$((_i + 1))
    done
    if [ -n "$_c1" ] && lock_holder "$_c1"; then
        pass "$_n/first-holds-the-lock"
    else
        fail "$_n/first-holds-the-lock" "no flock held by the first cpushield ($_c1) in /proc/locks: $(cat /proc/locks | tr '\n' '|')"
    fi
    ( "$CS" "$@" >/tmp/c2.out 2>&1; echo "second $?" >>/tmp/ended ) &
    _p2=$!
    wait "$_p1" "$_p2"
    check_eq "$_n/exit" "first 0|second 0|" "$(tr '\n' '|' </tmp/ended)" \
        "the order they ended in and their statuses ($(cat /tmp/c1.out /tmp/c2.out | tr '\n' ' '))"
}
