# Scenario kubepods-v1: cpushield leaves Kubernetes pods alone on cgroup v1 (cgroupfs
# driver layout /kubepods/burstable/pod…), and compare --system charges a pod task's time
# to the pod, with the kubelet's fix. See dev/guest/lib/kubepods.sh.
# guest-test: v1_tasks_of_kubernetes_pods_are_neither_moved_nor_narrowed_by_shield_or_reset
# guest-timeout: 420
# guest-tcg: single
# guest-kernels: 6.1
# (cgroup v1 cpuset: Debian's 6.12-rt is built without CONFIG_CPUSETS_V1)
GUEST_CGROUP=v1

scenario_main() {
    kubepods_semantics v1
}
