# Scenario follow-requests-v2: an affinity a task (taskset -p) or an IRQ's owner
# (smp_affinity) sets while shielded becomes its request (Brosky's rule over time): a
# later shield applies the rule to it and reset gives it back; the rest resets exactly.
# Cgroup v2 (the isolated partition clamps a widening taskset).
# guest-test: v2_an_affinity_set_while_shielded_is_followed_by_later_shields_and_reset
# guest-cost: 11
# guest-boot: shared-last
# guest-tcg: single
# guest-timeout: 300
GUEST_CGROUP=v2

scenario_main() {
    follow_requests
}
