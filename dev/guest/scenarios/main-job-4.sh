# Scenario main-job-4: the main job as a user runs it, with the defaults, on 4 CPUs (the
# behaviour only; timings under TCG mean nothing), on both kernels.
#  1. The default `compare` (every default scenario; the shield on CPU 3, the
#     unshielded-cpu scenario on CPU 2, measured with the shield up), at a short
#     --duration, with the default load as it runs here (GUEST_LOAD, lib/main-job.sh:
#     stress-kernel less compile and crashme), exits 0 with its report.
#  2. `demo` (every scenario, its own determinism runs), at a short --duration, with the
#     load main-job-demo had (ttcp,fifos-mmap,fpu: crashme is out under TCG), exits 0
#     with its report.
# For each: meanwhile no thread of cpushield but the measuring ones and the pollers runs
# on the measured CPUs (sampled from /proc/*/task); no verdict or finding names a
# cpushield process; the machine is as found afterwards. The minimal system's refusals
# are main-job-minimal's.
# guest-test: main_job_defaults_and_demo_on_4_cpus_run_keep_cpushield_off_the_measured_cpus_and_leave_the_machine_as_found
# guest-cost: 200
# guest-mem: 2048
# guest-timeout: 1200
# guest-tcg: single
GUEST_CGROUP=v2
CS_TIMES=1

scenario_main() {
    lo_up
    # The default load's directory, with room for its fs workload (1,093 MiB).
    var_tmp 1400
    snapshot /tmp/before
    # 1. The default compare.
    own_watch_start
    cs compare --duration 1s --runs 2 --work 20ms --load "$GUEST_LOAD" --out /tmp/r4
    own_watch_stop
    check_eq compare/exit-0 0 "$CS_RC" "exit status ($(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
    sed 's/^/GUEST-INFO compare-out: /' /tmp/cs.out
    expect_report compare /tmp/r4 idle loaded shielded shielded+advance unshielded-cpu
    check_eq compare/measured-cpus "3,3,3,3,2" "$(measured_cpus /tmp/r4/report.json)"
    expect_no_own_blame compare/no-own-blame /tmp/cs.out /tmp/r4/report.json
    expect_own_threads_off compare/own-threads-off 2-3
    expect_restored compare/restored /tmp/before

    # 2. The demo, on the machine as found (the snapshot above).
    own_watch_start
    cs demo --duration 1s --load ttcp,fifos-mmap,fpu --out /tmp/rd
    own_watch_stop
    check_eq demo/exit-0 0 "$CS_RC" "exit status ($(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
    sed 's/^/GUEST-INFO demo-out: /' /tmp/cs.out
    expect_report demo /tmp/rd idle loaded shielded shielded+advance unshielded-cpu
    check_eq demo/measured-cpus "3,3,3,3,2" "$(measured_cpus /tmp/rd/report.json)"
    expect_no_own_blame demo/no-own-blame /tmp/cs.out /tmp/rd/report.json
    expect_own_threads_off demo/own-threads-off 2-3
    expect_restored demo/restored /tmp/before
}
