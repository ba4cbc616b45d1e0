# Scenario check-shielded: with `cpushield shield --all 3` up, `cpushield check` without
# --cpus checks the shielded CPU (from the shield state file), finds the kernel
# enforcement (v2 isolated partition), and no IRQ or task reaching CPU 3; neither it nor
# `check --cpus 3` advises a shield command the shield already applies (`shield --all 3`,
# `--procs 3`, `--irqs 3`, `--ltmr 3` would change nothing), and what the kernel still
# sends to CPU 3 (the tick, IPIs) says what the shield already does.
# guest-timeout: 300
GUEST_CGROUP=v2

scenario_main() {
    cs_ok check-shielded/shield shield --all 3
    cs check --interval 2s --json
    cp /tmp/cs.out /tmp/check-json
    info "check verdict: $(grep '"verdict"' /tmp/check-json)"
    check_eq check-shielded/cpus '"cpus": "3",' "$(grep -o '"cpus": "[0-9,-]*",' /tmp/check-json | head -n 1)" "checked CPUs"
    if grep -q '"cpus_source": "shield-state"' /tmp/check-json; then pass check-shielded/source; else fail check-shielded/source "CPUs not taken from the shield state"; fi
    if grep -q '"title": "CPU 3 is kernel-enforced by the cgroup v2 partition' /tmp/check-json; then
        pass check-shielded/enforced
    else
        fail check-shielded/enforced "no enforcement finding: $(grep '"title"' /tmp/check-json | grep -i -e enforc -e cpuset | tr '\n' ' ')"
    fi
    if grep -q '"title": "IRQ [0-9]* (.*) arrives on CPU 3' /tmp/check-json; then
        fail check-shielded/no-irq "an IRQ still reaches CPU 3: $(grep '"title": "IRQ' /tmp/check-json | tr '\n' ' ')"
    else
        pass check-shielded/no-irq
    fi
    if grep -q '"title": "task .* ran on CPU 3 for .* it may run on other CPUs' /tmp/check-json; then
        fail check-shielded/no-task "a movable task ran on CPU 3: $(grep '"title": "task' /tmp/check-json | tr '\n' ' ')"
    else
        pass check-shielded/no-task
    fi
    for f in /tmp/check-json /tmp/check-cpus-json; do
        [ "$f" = /tmp/check-cpus-json ] && { cs check --cpus 3 --interval 2s --json; cp /tmp/cs.out "$f"; }
        applied=$(grep -E '"action": "cpushield shield --(all|procs|irqs|ltmr) 3",?$' "$f")
        if [ -n "$applied" ]; then
            fail "check-shielded/no-applied-remedy-${f#/tmp/}" "remedies the shield already applies: $(echo "$applied" | tr '\n' ' ')"
        else
            pass "check-shielded/no-applied-remedy-${f#/tmp/}"
        fi
    done
    if grep -q '"in_place": "the shield' /tmp/check-json; then
        pass check-shielded/says-what-is-in-place
    else
        fail check-shielded/says-what-is-in-place "no finding says what the shield already does: $(grep '"title"' /tmp/check-json | head -n 6 | tr '\n' ' ')"
    fi
    cs_ok check-shielded/reset reset
}
