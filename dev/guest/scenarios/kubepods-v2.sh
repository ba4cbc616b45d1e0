# Scenario kubepods-v2: cpushield leaves Kubernetes pods alone on cgroup v2 (systemd
# driver layout /kubepods.slice/…). See dev/guest/lib/kubepods.sh.
# guest-test: v2_tasks_of_kubernetes_pods_are_not_moved_and_the_partition_is_warned_about
# guest-cost: 8
# guest-boot: shared-last
# guest-timeout: 300
# guest-tcg: single
GUEST_CGROUP=v2

scenario_main() {
    kubepods_semantics v2
}
