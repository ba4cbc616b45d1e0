# Scenario check-shielded: with `cpushield shield --all 3` up, `cpushield check` without
# --cpus checks the shielded CPU (from the shield state file), finds the kernel
# enforcement (v2 isolated partition), and no IRQ or task reaching CPU 3; neither it nor
# `check --cpus 3` advises a shield command the shield already applies (`shield --all 3`,
# `--procs 3`, `--irqs 3`, `--ltmr 3` would change nothing), and what the kernel still
# sends to CPU 3 (the tick, IPIs) says what the shield already does; it exits 0 (clean).
# Then a CPU that is not shielded, with movable tasks busy on it: exit 3.
# guest-test: check_finds_a_real_shield_clean
# guest-cost: 17
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 300
GUEST_CGROUP=v2

scenario_main() {
    cs_ok check-shielded/shield shield --all 3
    cs check --interval 2s --json
    rc=$CS_RC
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
    # Clean: nothing breaks the shield, so the exit status is 0 and the report says so.
    check_eq check-shielded/breaks-nothing '"breaks_shield": false,' \
        "$(grep -o '"breaks_shield": [a-z]*,' /tmp/check-json | head -n 1)" "breaks_shield"
    check_eq check-shielded/exit-0 0 "$rc" "check's exit status (findings: $(grep -B 1 '"severity": "breaks-shield"' /tmp/check-json | grep -o '"title": "[^"]*"' | tr '\n' ' '))"

    # CPU 2 is not shielded: two busy tasks allowed CPUs 1-2 share CPUs 1 and 2,
    # so a movable task runs on CPU 2 while it is checked, which breaks a shield.
    taskset -c 1-2 sh -c 'while :; do :; done' & b1=$!
    taskset -c 1-2 sh -c 'while :; do :; done' & b2=$!
    cs check --cpus 2 --interval 2s --json
    kill "$b1" "$b2"
    wait "$b1" "$b2" 2>/dev/null
    check_eq check-unshielded/exit-3 3 "$CS_RC" "check's exit status"
    if grep -Eq "\"title\": \"task [^\"]* \(pid ($b1|$b2)\) ran on CPU 2 for .* it may run on other CPUs" /tmp/cs.out; then
        pass check-unshielded/names-the-busy-task
    else
        fail check-unshielded/names-the-busy-task "no finding for $b1 or $b2: $(grep '"title": "task' /tmp/cs.out | tr '\n' ' ')"
    fi
    cs_ok check-shielded/reset reset
}
