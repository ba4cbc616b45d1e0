# Scenario tune-sigkill: `cpushield tune` SIGKILLed half way, then `reset --namespace-gone`
# restores everything byte for byte. The guest has SMT (CPU 3's sibling is CPU 2) and a
# PREEMPT_DYNAMIC kernel, so the knobs that write files are all there: the preemption
# model (debugfs, which tune mounts in its private mount namespace and reset mounts for
# the write only), kernel.timer_migration, vm.stat_interval, RT throttling, CPU 2
# offline and IRQs kept off CPU 2 (through the shield). The kill lands once a knob is
# journaled in the shield's state, at a random moment after, while that knob may be in
# place; whatever it left, reset writes back. Timings under TCG mean nothing.
# guest-test: tune_killed_half_way_is_restored_byte_for_byte_by_reset
# guest-cost: 19
# guest-boot: shared
# guest-tcg: single
# guest-smp: 4,threads=2
# guest-cpu: max,vendor=GenuineIntel
# guest-timeout: 600
GUEST_CGROUP=v2

PREEMPT=/sys/kernel/debug/sched/preempt

# preempt_model: the preemption model file's text, read with debugfs mounted for the read.
preempt_model() {
    mount -t debugfs none /sys/kernel/debug 2>/dev/null
    cat "$PREEMPT" 2>/dev/null || echo "<unreadable>"
    umount /sys/kernel/debug 2>/dev/null
}

scenario_main() {
    check_eq tune/topology 2-3 "$(cat /sys/devices/system/cpu/cpu3/topology/thread_siblings_list)" "siblings of CPU 3"
    model_before=$(preempt_model)
    info "preemption model before: $model_before"
    snapshot /tmp/before
    # Round 1 kills during the sysctls and the preemption model (the first
    # knob measured); round 2 once CPU 2's online file is journaled, while
    # CPU 2 may be offline.
    for round in 1 2; do
        state_dir=/run/cpushield
        case $round in
            1) knobs=preempt,timer-migration,stat-interval,rt-throttling; journaled='"runtime"' ;;
            2) knobs=smt-offline,irq-siblings; journaled='cpu2/online' ;;
        esac
        "$CS" tune --cpus 3 --load none --budget 120s --knobs "$knobs" \
            --out /tmp/tune-$round >/tmp/tune.out 2>&1 &
        tune=$!
        # Wait for a knob to be journaled, then a random further 0-4 s.
        waited=0
        while ! grep -q "$journaled" "$state_dir/state.json" 2>/dev/null && [ "$waited" -lt 900 ]; do
            usleep 200000
            waited=$((waited + 1))
        done
        if grep -q "$journaled" "$state_dir/state.json" 2>/dev/null; then
            pass "round-$round/journaled-before-the-kill"
        else
            fail "round-$round/journaled-before-the-kill" "no $journaled in the state after $((waited / 5)) s: $(head -c 300 /tmp/tune.out)"
        fi
        usleep $(( $(od -An -N2 -tu2 /dev/urandom) % 4000 * 1000 ))
        info "round $round: killed with CPU online $(cat /sys/devices/system/cpu/online), timer_migration $(cat /proc/sys/kernel/timer_migration), stat_interval $(cat /proc/sys/vm/stat_interval), rt_runtime $(cat /proc/sys/kernel/sched_rt_runtime_us)"
        for init in $(cat /proc/$tune/task/$tune/children 2>/dev/null); do
            kill -9 "$init"
        done
        kill -9 "$tune" 2>/dev/null
        wait "$tune" 2>/dev/null
        cs_ok "round-$round/reset-exit-0" reset --namespace-gone
        check_eq "round-$round/preemption-model" "$model_before" "$(preempt_model)"
        check_eq "round-$round/cpus-online" 0-3 "$(cat /sys/devices/system/cpu/online)"
        if mount | grep -q ' /sys/kernel/debug '; then
            fail "round-$round/debugfs-unmounted" "debugfs left mounted"
        else
            pass "round-$round/debugfs-unmounted"
        fi
        expect_restored "round-$round/restored" /tmp/before
    done
}
