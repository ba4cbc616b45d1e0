# Scenario main-job-4: the main job as a user runs it, with the defaults, on 4 CPUs (the
# behaviour only; timings under TCG mean nothing): the default `compare` (every default
# scenario; the shield on CPU 3, the unshielded-cpu scenario on CPU 2, measured with the
# shield up), at a short --duration, with the default load as it runs here (GUEST_LOAD,
# lib/main-job.sh: stress-kernel less compile and crashme), exits 0 with its report;
# meanwhile no thread of cpushield but the measuring ones and the pollers runs on CPUs 2-3
# (sampled from /proc/*/task); no verdict or finding names a cpushield process; the
# machine is as found afterwards. The minimal system's refusals are main-job-minimal's.
# On both kernels; main-job-8 runs the default compare on 8 CPUs.
# guest-test: main_job_defaults_on_4_cpus_run_keep_cpushield_off_the_measured_cpus_and_leave_the_machine_as_found
# guest-cost: 150
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
}
