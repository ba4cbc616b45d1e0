# Scenario numa: a guest of two memory nodes (CPUs 0-1 on node 0, 2-3 on node 1), cgroup
# v2. `shield --all 2-3` gives the shield's partition node 1 and `show` says so; a task
# started with `run --mlock` keeps its pages on node 1, an adopted one has them moved
# there; `check` names checked CPUs that span both nodes; `--mems 4` is refused in one
# line with nothing changed; `--mems 0` gives the shield node 0, and `check` names a
# real-time task on CPU 3 whose pages sit there; each reset restores everything exactly.
# guest-test: numa_shield_takes_its_cpus_node_keeps_task_pages_local_and_resets_exactly
# guest-numa: 2
# guest-cost: 40
# guest-timeout: 300
GUEST_CGROUP=v2

scenario_main() {
    numa_semantics
}
