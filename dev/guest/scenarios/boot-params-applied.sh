# Scenario boot-params-applied: booted with the fragment `cpushield boot-params --all 3`
# printed (see dev/guest/run-boot-params.sh). The kernel must report nohz_full and
# isolcpus on CPU 3 and IRQs kept off it, and a runtime shield must then be complete
# (ltmr shielded, show reporting nohz_full and rcu_nocbs on CPU 3, check clean: exit 0).
# guest-timeout: 200
GUEST_CGROUP=v2

scenario_main() {
    info "command line: $(cat /proc/cmdline)"
    check_eq applied/nohz_full 3 "$(cat /sys/devices/system/cpu/nohz_full)" "/sys/devices/system/cpu/nohz_full"
    check_eq applied/isolated 3 "$(cat /sys/devices/system/cpu/isolated)" "/sys/devices/system/cpu/isolated"
    check_eq applied/irq-default 0-2 "$(mask_to_list "$(cat /proc/irq/default_smp_affinity)")" "default_smp_affinity"
    probe_irqs
    snapshot /tmp/before
    cs_ok applied/shield shield --all 3
    expect_show applied/show 3 3 3
    info "show --json: $(head -c 1500 /tmp/cs.out | tr '\n' ' ')"
    # show's table: nohz_full, rcu_nocbs and isolated are "yes" on CPU 3 alone.
    cs_ok applied/show-text show
    check_eq applied/show-tick-and-rcu "0 - - -|1 - - -|2 - - -|3 yes yes yes|" \
        "$(awk '$1 ~ /^[0-9]+$/ { print $1, $5, $6, $7 }' /tmp/cs.out | tr '\n' '|')" \
        "CPU nohz_full rcu_nocbs isolated in show"
    # With the boot parameters and the runtime shield, nothing breaks the shield of CPU 3.
    cs check --interval 2s --json
    check_eq applied/check-clean-exit-0 0 "$CS_RC" "check's exit status (findings that break the shield: $(grep -B 1 '"severity": "breaks-shield"' /tmp/cs.out | grep -o '"title": "[^"]*"' | tr '\n' ' '))"
    cs_ok applied/boot-params boot-params --all 3
    info "boot-params with the parameters in place: $(tr '\n' '|' </tmp/cs.out)"
    cs_ok applied/reset reset
    expect_restored applied/restored /tmp/before
}
