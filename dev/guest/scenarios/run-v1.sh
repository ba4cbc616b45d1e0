# Scenario run-v1: scenario run (see run.sh) on the hybrid layout of this project's
# host: cgroup v1 cpuset (exclusive cpuset shield), cgroup2 without controllers.
# guest-timeout: 300
. /guest/scenarios/run.sh
GUEST_CGROUP=v1
