# Scenario shield-v1: the shield's semantics on the hybrid layout of our CI host: v1 cpuset
# (with a foreign cpuset "existing" on CPUs 0-1 holding tasks) plus cgroup2 without
# controllers at /sys/fs/cgroup/unified.
# guest-test: cgroup_v1_shield_follows_rule_enforces_and_resets_exactly
# guest-cost: 37
# guest-boot: shared-last
# guest-tcg: single
# guest-timeout: 400
# guest-kernels: 6.1
# (cgroup v1 cpuset: Debian's 6.12-rt is built without CONFIG_CPUSETS_V1)
GUEST_CGROUP=v1

scenario_main() {
    shield_semantics v1
}
