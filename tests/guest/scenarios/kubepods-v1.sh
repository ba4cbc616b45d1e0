# Scenario kubepods-v1: cpushield leaves Kubernetes pods alone on cgroup v1 (cgroupfs
# driver layout /kubepods/burstable/pod…). See tests/guest/lib/kubepods.sh.
# guest-timeout: 300
GUEST_CGROUP=v1

scenario_main() {
    kubepods_semantics v1
}
