# Scenario follow-requests-v1: an affinity a task (taskset -p) or an IRQ's owner
# (smp_affinity) sets while shielded becomes its request (Brosky's rule over time): a
# later shield applies the rule to it and reset gives it back; the rest resets exactly.
# Cgroup v1 (the cpuset clamps a widening taskset to the housekeeping CPUs).
# guest-test: v1_an_affinity_set_while_shielded_is_followed_by_later_shields_and_reset
# guest-cost: 9
# guest-boot: shared-last
# guest-tcg: single
# guest-timeout: 300
# guest-kernels: 6.1
# (cgroup v1 cpuset: Debian's 6.12-rt is built without CONFIG_CPUSETS_V1)
GUEST_CGROUP=v1

scenario_main() {
    follow_requests
}
