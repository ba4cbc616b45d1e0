# Scenario boot-params-applied: booted with the fragment `cpushield boot-params --all 3`
# printed (see dev/guest/run-boot-params.sh). The kernel must report nohz_full and
# isolcpus on CPU 3 and IRQs kept off it; `check --cpus 3`, with one task busy on CPU 3,
# must find every parameter in effect (isolcpus' domain and managed_irq parts,
# nohz_full, rcu_nocbs by the kernel's boot record, irqaffinity) and the tick stopped,
# advise nothing already in effect, and exit 0. Then the papers'
# configuration in full: a whole-system shield from the initial namespace on top, and
# `check --cpus 3` (and `check` taking its CPUs from the shield) finds nothing that
# breaks the shield, and show has nohz_full, rcu_nocbs and isolated on CPU 3 alone;
# reset is exact. One TCG thread: `check` and the shield turn kernel text patching on
# (static keys), and a 6.12-rt guest died of an `Oops: int3` in CI under multi-threaded TCG.
# guest-timeout: 300
# guest-tcg: single
GUEST_CGROUP=v2

scenario_main() {
    info "command line: $(cat /proc/cmdline)"
    check_eq applied/nohz_full 3 "$(cat /sys/devices/system/cpu/nohz_full)" "/sys/devices/system/cpu/nohz_full"
    check_eq applied/isolated 3 "$(cat /sys/devices/system/cpu/isolated)" "/sys/devices/system/cpu/isolated"
    check_eq applied/irq-default 0-2 "$(mask_to_list "$(cat /proc/irq/default_smp_affinity)")" "default_smp_affinity"
    probe_irqs
    snapshot /tmp/before

    # The closed loop: every parameter of the line, checked where the kernel shows it.
    busy_on 3
    cs check --cpus 3 --interval 3s --json
    cp /tmp/cs.out /tmp/check-boot.json
    check_eq applied/check-exit 0 "$CS_RC" "check exit status (verdict: $(grep '"verdict"' /tmp/check-boot.json))"
    for p in "isolcpus=managed_irq,domain,3 (its domain part)" "isolcpus=managed_irq,domain,3 (its managed_irq part)" \
        nohz_full=3 rcu_nocbs=3 irqaffinity=0-2; do
        expect_finding "applied/in-effect/${p%% *}${p#*(its }" /tmp/check-boot.json "boot parameter $p in effect"
    done
    expect_finding applied/tick-stopped /tmp/check-boot.json "the tick stopped on nohz_full CPU 3"
    # rcu_nocbs proven by the kernel's own boot record, not by an rcuop thread (6.1 and
    # 6.12 start one on every CPU); the stopped tick is not also "still fires"; nothing
    # already in effect is advised again.
    if finding_json /tmp/check-boot.json "boot parameter rcu_nocbs=3 in effect" |
        grep -q "the kernel logged at boot 'Offload RCU callbacks from CPUs: 3'"; then
        pass applied/rcu-nocbs-by-the-boot-record
    else
        fail applied/rcu-nocbs-by-the-boot-record "$(finding_json /tmp/check-boot.json "boot parameter rcu_nocbs" | head -c 600)"
    fi
    expect_no_finding applied/no-still-fires /tmp/check-boot.json "the local timer still fires on nohz_full CPU 3"
    expect_no_finding applied/rcu-callbacks-offloaded /tmp/check-boot.json "RCU callbacks of CPU 3 run on it"
    if grep -q '"action": "\(nohz_full=3\|rcu_nocbs=3 rcu_nocb_poll\|sysctl -w kernel.timer_migration=1\)"' /tmp/check-boot.json; then
        fail applied/no-advice-in-place "$(grep -B 12 '"action": "\(nohz_full=3\|rcu_nocbs=3 rcu_nocb_poll\|sysctl -w kernel.timer_migration=1\)"' /tmp/check-boot.json | grep -o '"title": "[^"]*' | tr '\n' ' ')"
    else
        pass applied/no-advice-in-place
    fi
    info "tick: $(finding_json /tmp/check-boot.json "the tick" | grep -o '"evidence": "[^"]*')"
    kill "$BUSY_PID"
    wait "$BUSY_PID" 2>/dev/null

    # The papers' configuration complete: the boot line and a whole-system shield.
    cs_ok applied/shield shield --all 3
    expect_show applied/show 3 3 3
    info "partition: $(cat /sys/fs/cgroup/cpushield-shield/cpuset.cpus.partition); its cpus $(cat /sys/fs/cgroup/cpushield-shield/cpuset.cpus) effective $(cat /sys/fs/cgroup/cpushield-shield/cpuset.cpus.effective) exclusive $(cat /sys/fs/cgroup/cpushield-shield/cpuset.cpus.exclusive 2>/dev/null); root effective $(cat /sys/fs/cgroup/cpuset.cpus.effective) isolated $(cat /sys/fs/cgroup/cpuset.cpus.isolated 2>/dev/null)"
    info "show --json: $(head -c 1500 /tmp/cs.out | tr '\n' ' ')"
    # show's table: nohz_full, rcu_nocbs and isolated are "yes" on CPU 3 alone.
    cs_ok applied/show-text show
    check_eq applied/show-tick-and-rcu "0 - - -|1 - - -|2 - - -|3 yes yes yes|" \
        "$(awk '$1 ~ /^[0-9]+$/ { print $1, $5, $6, $7 }' /tmp/cs.out | tr '\n' '|')" \
        "CPU nohz_full rcu_nocbs isolated in show"
    # With the boot parameters and the runtime shield, nothing breaks the shield of CPU 3.
    cs check --interval 2s --json
    check_eq applied/check-clean-exit-0 0 "$CS_RC" "check's exit status (findings that break the shield: $(grep -B 1 '"severity": "breaks-shield"' /tmp/cs.out | grep -o '"title": "[^"]*"' | tr '\n' ' '))"
    cs check --cpus 3 --interval 3s --json
    cp /tmp/cs.out /tmp/check-full.json
    check_eq applied/full/nothing-breaks 0 "$CS_RC" "check exit status with the boot line and the shield ($(findings_of breaks-shield /tmp/check-full.json))"
    info "remaining with the boot line and the shield, warnings: $(findings_of warn /tmp/check-full.json)"
    info "and notes: $(findings_of info /tmp/check-full.json)"
    cs_ok applied/boot-params boot-params --all 3
    info "boot-params with the parameters in place: $(tr '\n' '|' </tmp/cs.out)"
    cs_ok applied/reset reset
    expect_restored applied/restored /tmp/before
}
