# Scenario main-job-8: the main job with the defaults on 8 CPUs, two threads per core
# (the behaviour only; timings under TCG mean nothing). The default `compare` shields the
# highest CPU with its SMT sibling (6-7) and measures the unshielded CPU 5 with the shield
# up; it exits 0 with its report, no thread of cpushield but the measuring ones and the
# pollers may run on CPUs 5-7 meanwhile, no verdict or finding names a cpushield process,
# and the machine is as found afterwards. Then `compare --smt` measures CPU 7 beside its
# sibling busy, idle and offline, and brings the sibling back. One kernel, for CI's time:
# the 8-CPU half of the main-job matrix (main-job-4 and main-job-tools run on both).
# guest-test: main_job_defaults_on_8_cpus_with_smt_siblings_run_and_keep_cpushield_off_the_measured_cpus
# guest-cost: 240
# guest-smp: 8,threads=2
# guest-cpu: max,vendor=GenuineIntel
# guest-mem: 2048
# guest-timeout: 1500
# guest-tcg: single
# guest-kernels: 6.1
GUEST_CGROUP=v2

scenario_main() {
    lo_up
    check_eq topology/siblings-of-7 6-7 "$(cat /sys/devices/system/cpu/cpu7/topology/thread_siblings_list)"
    var_tmp 1400
    snapshot /tmp/before
    own_watch_start
    cs compare --duration 2s --runs 2 --work 20ms --load "$GUEST_LOAD" --out /tmp/r8
    own_watch_stop
    check_eq compare/exit-0 0 "$CS_RC" "exit status ($(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
    sed 's/^/GUEST-INFO compare-out: /' /tmp/cs.out
    expect_report compare /tmp/r8 idle loaded shielded shielded+advance unshielded-cpu
    check_eq compare/measured-cpus "6-7,6-7,6-7,6-7,5" "$(measured_cpus /tmp/r8/report.json)"
    expect_no_own_blame compare/no-own-blame /tmp/cs.out /tmp/r8/report.json
    expect_own_threads_off compare/own-threads-off 5-7
    expect_restored compare/restored /tmp/before

    snapshot /tmp/before
    cs compare --smt --duration 2s --runs 2 --work 20ms --out /tmp/r8smt
    check_eq smt/exit-0 0 "$CS_RC" "exit status ($(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
    expect_report smt /tmp/r8smt smt-busy smt-idle smt-offline
    expect_no_own_blame smt/no-own-blame /tmp/cs.out /tmp/r8smt/report.json
    check_eq smt/sibling-back-online 0-7 "$(cat /sys/devices/system/cpu/online)"
    expect_restored smt/restored /tmp/before
}
