# Scenario whole-cores: `shield --whole-cores` on a guest with two threads per core
# (CPUs 2 and 3 share one). `shield --all 3` alone shields CPU 3 and says that CPU 2
# shares its core; `shield --all 3 --whole-cores` shields the whole core, 2-3, from
# processes, IRQs and the local timer, every task and IRQ following Brosky's rule against
# 2-3; reset restores everything exactly.
# guest-test: whole_cores_shields_every_smt_sibling_and_reset_restores
# guest-cost: 12
# guest-boot: shared
# guest-tcg: single
# guest-smp: 4,threads=2
# guest-cpu: max,vendor=GenuineIntel
# guest-timeout: 300
GUEST_CGROUP=v2

scenario_main() {
    check_eq whole-cores/topology 2-3 "$(cat /sys/devices/system/cpu/cpu3/topology/thread_siblings_list)" "siblings of CPU 3"
    : >/tmp/spawned
    for cpus in all 3 2-3 1 0-2; do spawn "t-$cpus" "$cpus"; done
    sleep 1
    probe_irqs
    snapshot /tmp/before

    cs_ok one-thread/shield shield --all 3
    if grep -q "CPU 3 shares a core with unshielded CPU(s) 2" /tmp/cs.out /tmp/cs.err; then
        pass one-thread/names-the-sibling
    else
        fail one-thread/names-the-sibling "no note of the sibling: $(cat /tmp/cs.out /tmp/cs.err | tr '\n' ' ' | head -c 400)"
    fi
    expect_show one-thread/show 3 3 3
    cs_ok one-thread/reset reset
    expect_restored one-thread/restored /tmp/before

    cs_ok whole-core/shield shield --all 3 --whole-cores
    expect_show whole-core/show 2-3 2-3 2-3
    snapshot /tmp/shielded
    expect_rule whole-core /tmp/before /tmp/shielded 2-3 2-3
    if grep -q "shares a core" /tmp/cs.out /tmp/cs.err; then
        fail whole-core/no-sibling-note "a sibling is still named: $(grep 'shares a core' /tmp/cs.out /tmp/cs.err)"
    else
        pass whole-core/no-sibling-note
    fi
    cs_ok whole-core/reset reset
    expect_restored whole-core/restored /tmp/before
}
