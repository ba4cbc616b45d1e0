# Scenario numa: a guest of two memory nodes (CPUs 0-1 on node 0, 2-3 on node 1), cgroup
# v2. `shield --all 2-3` gives the shield's partition node 1 and `show` says so; a task
# started with `run --mlock` keeps its pages on node 1, an adopted one has them moved
# there; `check` names checked CPUs that span both nodes; `--mems 4` is refused in one
# line with nothing changed; `--mems 0` gives the shield node 0, and `check` names a
# real-time task on CPU 3 whose pages sit there; each reset restores everything exactly.
# Then a NIC on node 0 (guest-numa-device) whose receive IRQ is bound to CPU 3: `check`
# names the device's node and the fix, and no longer once the IRQ is back. Where the
# kernel balances NUMA (6.1), `boot-params` turns it off at boot and `check` names it on.
# Last, `tune --knobs mems` tries the shield on both nodes in its private PID namespace,
# and kswapd and kcompactd, which that namespace does not show, end on their nodes' CPUs.
# guest-test: numa_shield_takes_its_cpus_node_keeps_task_pages_local_resets_exactly_and_check_names_a_remote_device_irq
# guest-numa: 2
# guest-numa-device: 0
# guest-tcg: single
# guest-cost: 45
# guest-timeout: 300
GUEST_CGROUP=v2

scenario_main() {
    numa_semantics
    numa_remote_device
    numa_balancing_step
    numa_tune_step
}
