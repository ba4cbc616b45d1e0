# Scenario boot-params-applied: booted with the fragment `cpushield boot-params --all 3`
# printed (see dev/guest/run-boot-params.sh). The kernel must report nohz_full and
# isolcpus on CPU 3 and IRQs kept off it, and a runtime shield must then be complete
# (ltmr shielded, nothing left that boot parameters could add).
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
    cs_ok applied/boot-params boot-params --all 3
    info "boot-params with the parameters in place: $(tr '\n' '|' </tmp/cs.out)"
    cs_ok applied/reset reset
    expect_restored applied/restored /tmp/before
}
