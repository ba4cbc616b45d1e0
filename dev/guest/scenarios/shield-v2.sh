# Scenario shield-v2: the shield's semantics on a pure cgroup v2 system (cpuset enabled at
# the root, tasks in the root and in a systemd-like slice).
# guest-timeout: 400
GUEST_CGROUP=v2

scenario_main() {
    shield_semantics v2
}
