# Scenario boot-params-missing: booted with the fragment of `cpushield boot-params
# --all 3` without its isolcpus= word (see dev/guest/run-boot-params.sh), the failure a
# tuned machine meets ("profile active, isolated list empty"): `check --cpus 3` names
# isolcpus as not on the command line, finds the other parameters in effect, and exits 3.
# guest-timeout: 200
GUEST_CGROUP=v2

scenario_main() {
    info "command line: $(cat /proc/cmdline)"
    check_eq missing/isolated "" "$(cat /sys/devices/system/cpu/isolated)" "/sys/devices/system/cpu/isolated"
    busy_on 3
    cs check --cpus 3 --interval 3s --json
    cp /tmp/cs.out /tmp/check-missing.json
    check_eq missing/check-exit-3 3 "$CS_RC" "check exit status (verdict: $(grep '"verdict"' /tmp/check-missing.json))"
    expect_finding missing/isolcpus-named /tmp/check-missing.json \
        "boot parameter isolcpus=managed_irq,domain,3 (its domain part) from .cpushield boot-params --all 3. is not in effect: isolcpus is not on the kernel command line"
    for p in nohz_full=3 rcu_nocbs=3 irqaffinity=0-2; do
        expect_finding "missing/still-in-effect/$p" /tmp/check-missing.json "boot parameter $p in effect"
    done
    expect_no_finding missing/only-isolcpus /tmp/check-missing.json "boot parameter \\(nohz_full\\|rcu_nocbs\\|irqaffinity\\)[^ ]* from"
    kill "$BUSY_PID"
    wait "$BUSY_PID" 2>/dev/null
}
