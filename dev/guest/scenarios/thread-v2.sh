# Scenario thread-v2: per-thread placement (Sherer), cgroup v2: the shield is a threaded
# cgroup (still an isolated partition), so one thread of a process in the root cgroup
# joins it through cgroup.threads (cps_place, RtThread::on) while its sibling stays on
# the housekeeping CPUs; a process in another cgroup is refused in one line; a later
# shield keeps the thread; reset is exact.
# guest-test: v2_cps_place_and_rt_thread_put_one_thread_alone_in_the_threaded_shield
# guest-cost: 13
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 300
GUEST_CGROUP=v2

scenario_main() {
    thread_placement
}
