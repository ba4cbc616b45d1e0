# Scenario numa-v1: the numa scenario on cgroup v1 cpusets (the shield's cpuset gets node
# 1 and migrates pages, the housekeeping cpuset keeps both nodes), 6.1 only: the 6.12-rt
# kernel has no v1 cpuset.
# guest-test: numa_v1_shield_takes_its_cpus_node_keeps_task_pages_local_and_resets_exactly
# guest-numa: 2
# guest-tcg: single
# guest-kernels: 6.1
# guest-cost: 35
# guest-timeout: 300
GUEST_CGROUP=v1

scenario_main() {
    numa_semantics
}
