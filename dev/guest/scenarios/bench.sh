# Scenario bench (used by dev/bench/shield-guest.sh): times `shield --all 3` and `reset` with
# cpushield.tasks=N sleepers (kernel argument), and checks reset restored everything so the
# figures are of a working run. Prints GUEST-BENCH tasks=N shield_ms=.. reset_ms=..
# guest-mem: 2048
# guest-timeout: 900
GUEST_CGROUP=v2

scenario_main() {
    tasks=$(cmdline_arg tasks 10000)
    # The kernel's default threads-max for the guest memory may be below the task count.
    echo 65536 >/proc/sys/kernel/threads-max
    spawn_mix "$tasks"
    sleep 2
    probe_irqs
    snapshot /tmp/before
    total=$(wc -l </tmp/before/procs)
    t0=$(uptime_cs)
    cs_ok dev/bench/shield shield --all 3
    t1=$(uptime_cs)
    cs_ok dev/bench/reset reset
    t2=$(uptime_cs)
    expect_restored dev/bench/restored /tmp/before
    echo "GUEST-BENCH tasks=$total shield_ms=$(((t1 - t0) * 10)) reset_ms=$(((t2 - t1) * 10))"
}
