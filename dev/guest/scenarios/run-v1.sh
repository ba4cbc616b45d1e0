# Scenario run-v1: scenario run (see run.sh) on the hybrid layout of this project's
# host: cgroup v1 cpuset (exclusive cpuset shield), cgroup2 without controllers.
# guest-test: run_places_a_task_on_the_v1_shield_binds_irqs_and_reserves
# guest-cost: 7
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 300
. /guest/scenarios/run.sh
# guest-kernels: 6.1
# (cgroup v1 cpuset: Debian's 6.12-rt is built without CONFIG_CPUSETS_V1)
GUEST_CGROUP=v1
