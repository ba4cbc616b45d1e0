# Scenario reset-idempotent: reset with nothing shielded is a successful no-op, reset twice
# after a shield gives the same state, and concurrent invocations are serialised.
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

    # Two shields at once: both succeed (one waits for the other's lock), result as one.
    "$CS" shield --all 3 >/tmp/c1.out 2>&1 & p1=$!
    "$CS" shield --all 3 >/tmp/c2.out 2>&1 & p2=$!
    wait "$p1"; r1=$?; wait "$p2"; r2=$?
    check_eq concurrent/shields-exit "0 0" "$r1 $r2" "exit statuses ($(cat /tmp/c1.out /tmp/c2.out | tr '\n' ' '))"
    snapshot /tmp/shielded
    expect_rule concurrent /tmp/before /tmp/shielded 3 3
    # Two resets at once: both succeed, state restored.
    "$CS" reset >/tmp/c1.out 2>&1 & p1=$!
    "$CS" reset >/tmp/c2.out 2>&1 & p2=$!
    wait "$p1"; r1=$?; wait "$p2"; r2=$?
    check_eq concurrent/resets-exit "0 0" "$r1 $r2" "exit statuses ($(cat /tmp/c1.out /tmp/c2.out | tr '\n' ' '))"
    expect_restored concurrent/restored /tmp/before
}
