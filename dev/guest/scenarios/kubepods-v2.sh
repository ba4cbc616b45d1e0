# Scenario kubepods-v2: cpushield leaves Kubernetes pods alone on cgroup v2 (systemd
# driver layout /kubepods.slice/…). See dev/guest/lib/kubepods.sh.
# guest-timeout: 300
# guest-tcg: single
GUEST_CGROUP=v2

scenario_main() {
    kubepods_semantics v2
}
