# Scenario thread-v1: per-thread placement (Sherer), cgroup v1: a program started
# normally places one of its two threads on shielded CPU 3 with cps_place and with
# RtThread::on; only that thread joins the shield cpuset's tasks and runs on CPU 3, its
# sibling stays on the housekeeping CPUs; a later shield keeps it; reset is exact.
# guest-test: v1_cps_place_and_rt_thread_put_one_thread_alone_in_the_shield
# guest-cost: 9
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 300
# guest-kernels: 6.1
# (cgroup v1 cpuset: Debian's 6.12-rt is built without CONFIG_CPUSETS_V1)
GUEST_CGROUP=v1

scenario_main() {
    thread_placement
}
