# Scenario shield-sigkill: `cpushield shield --all 3` killed with SIGKILL at several points
# while it works through a few thousand tasks; after each kill, `cpushield reset` must bring
# back exactly the state from before. The kill delays search, with random jitter, the
# window in which shield writes (see below), within the time a whole shield takes.
# guest-test: reset_after_sigkill_mid_shield_restores_everything
# guest-cost: 110
# guest-mem: 1024
# guest-tcg: single
# guest-timeout: 900
GUEST_CGROUP=v2

scenario_main() {
    # Test hook: a pause after each change widens the window in which shield
    # writes, so that the kills below land in it rather than around it.
    export CPUSHIELD_TEST_STEP_DELAY_US=300
    tasks=$(cmdline_arg tasks 2000)
    iterations=$(cmdline_arg iterations 4)
    spawn_mix "$tasks"
    sleep 2
    probe_irqs
    snapshot /tmp/before
    info "$(wc -l </tmp/before/procs) tasks in /proc"

    # Calibrate: how long does a whole shield take here?
    t0=$(uptime_cs)
    cs_ok calibrate/shield-exit-0 shield --all 3
    t1=$(uptime_cs)
    if grep -q '"version":7' /run/cpushield/state.json; then
        pass calibrate/state-version-7
    else
        fail calibrate/state-version-7 "$(head -c 200 /run/cpushield/state.json)"
    fi
    snapshot /tmp/shielded
    expect_rule calibrate /tmp/before /tmp/shielded 3 3
    cs_ok calibrate/reset-exit-0 reset
    expect_restored calibrate/restored /tmp/before
    span=$(((t1 - t0) * 10))
    [ "$span" -ge 20 ] || span=20
    info "a whole shield of $tasks tasks took ${span} ms (emulated guest)"

    # Most of a shield is reading /proc; the writes come in a shorter window at the end.
    # Search for it: a kill that saw no change moves the lower bound up, a shield that
    # finished first moves the upper bound down; each delay is drawn at random from the
    # middle half of the current bounds.
    midway=0
    lo=0
    hi=$span
    k=1
    while [ "$k" -le "$iterations" ]; do
        width=$((hi - lo)); [ "$width" -ge 4 ] || width=4
        delay=$((lo + width / 4 + RANDOM % (width / 2 + 1)))
        "$CS" shield --all 3 >/tmp/killed.out 2>&1 &
        victim=$!
        usleep $((delay * 1000))
        if kill -0 "$victim" 2>/dev/null; then
            kill -9 "$victim"
            wait "$victim"
            if changed_quick /tmp/before; then
                midway=$((midway + 1))
                info "kill $k after ${delay} ms: killed mid-way (system partly shielded)"
            else
                lo=$delay
                info "kill $k after ${delay} ms: no change seen yet"
            fi
        else
            wait "$victim"
            info "kill $k after ${delay} ms: shield had already finished (exit $?)"
            hi=$delay
        fi
        if [ "$k" = "$iterations" ]; then
            # Last round: shield again to completion over the debris, then reset.
            cs_ok "kill-$k/shield-again-exit-0" shield --all 3
            snapshot /tmp/again
            expect_rule "kill-$k/shield-again" /tmp/before /tmp/again 3 3
        fi
        cs_ok "kill-$k/reset-exit-0" reset
        expect_restored "kill-$k/restored" /tmp/before
        k=$((k + 1))
    done
    if [ "$midway" -ge 1 ]; then
        pass sigkill/coverage
    else
        fail sigkill/coverage "no kill landed while shield was part-way (all $iterations too early or too late)"
    fi
    info "$midway of $iterations kills landed mid-way"
}
