# Scenario kubepods-v1: cpushield leaves Kubernetes pods alone on cgroup v1 (cgroupfs
# driver layout /kubepods/burstable/pod…), and compare --system charges a pod task's time
# to the pod, with the kubelet's fix. See dev/guest/lib/kubepods.sh.
# guest-timeout: 420
GUEST_CGROUP=v1

scenario_main() {
    kubepods_semantics v1
}
