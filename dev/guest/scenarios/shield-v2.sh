# Scenario shield-v2: the shield's semantics on a pure cgroup v2 system (cpuset enabled at
# the root, tasks in the root and in a systemd-like slice).
# guest-test: cgroup_v2_shield_follows_rule_enforces_and_resets_exactly
# guest-cost: 32
# guest-boot: shared-last
# guest-tcg: single
# guest-timeout: 400
GUEST_CGROUP=v2

scenario_main() {
    shield_semantics v2
}
