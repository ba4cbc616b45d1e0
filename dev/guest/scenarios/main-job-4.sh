# Scenario main-job-4: the main job as a user runs it, with the defaults, on 4 CPUs
# (the behaviour only; timings under TCG mean nothing). This initramfs is a minimal
# system: no /var/tmp, no C compiler, and as little disk as /var/tmp is given.
#  1. No /var/tmp: `compare` and `demo` refuse before the first scenario, in one line said
#     once, suggesting neither the missing directory nor an option the command lacks.
#  2. Too little disk for the default load's fs workload: the same, naming the MiB.
#  3. With room: the default `compare` (every default scenario; the shield on CPU 3, the
#     unshielded-cpu scenario on CPU 2, measured with the shield up) exits 0 with its
#     report; the default load runs without compile (no compiler here) and says so; meanwhile
#     no thread of cpushield but the measuring ones and the pollers may run on CPUs 2-3
#     (sampled from /proc/*/task); no verdict or finding names a cpushield process; the
#     machine is as found afterwards. (Its load: GUEST_LOAD, lib/main-job.sh.) On 6.1 only,
#     for CI's time: main-job-tools runs each scenario of compare alone on 6.12-rt.
# guest-test: main_job_defaults_on_4_cpus_run_keep_cpushield_off_the_measured_cpus_and_refuse_a_minimal_system_in_one_line
# guest-kernels: 6.1
# guest-cost: 270
# guest-mem: 2048
# guest-timeout: 1200
# guest-tcg: single
GUEST_CGROUP=v2

scenario_main() {
    lo_up
    snapshot /tmp/before
    # 1. No /var/tmp.
    var_tmp none
    expect_one_line_refusal minimal/no-var-tmp/compare /tmp/before \
        'e\.g\. --dir /var/tmp|--size|--scale|leave out' compare --duration 2s --out /tmp/r0
    if grep -q 'mkdir' /tmp/cs.err; then pass minimal/no-var-tmp/names-mkdir; else
        fail minimal/no-var-tmp/names-mkdir "$(cat /tmp/cs.err)"; fi
    expect_one_line_refusal minimal/no-var-tmp/demo /tmp/before \
        'cpushield demo .*--dir|--size|--scale|leave out|^[^`]*--dir ' demo --duration 2s --out /tmp/r0
    # 2. Too little disk.
    var_tmp 64
    expect_one_line_refusal minimal/little-disk/compare /tmp/before \
        '--size|--scale|leave out|lower' compare --duration 2s --out /tmp/r0
    if grep -q 'MiB' /tmp/cs.err; then pass minimal/little-disk/names-mib; else
        fail minimal/little-disk/names-mib "$(cat /tmp/cs.err)"; fi
    # The default load here: stress-kernel without compile, said so.
    if grep -q 'stress-kernel without compile (no C compiler here' /tmp/cs.err; then
        pass minimal/default-load-without-compiler-said
    else
        fail minimal/default-load-without-compiler-said "$(cat /tmp/cs.err)"
    fi
    expect_one_line_refusal minimal/little-disk/demo /tmp/before \
        '--size|--scale|leave out|lower' demo --duration 2s --out /tmp/r0

    # 3. The default compare, with room for its load.
    var_tmp 1400
    snapshot /tmp/before
    own_watch_start
    cs compare --duration 2s --runs 2 --work 20ms --load "$GUEST_LOAD" --out /tmp/r4
    own_watch_stop
    check_eq compare/exit-0 0 "$CS_RC" "exit status ($(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
    sed 's/^/GUEST-INFO compare-out: /' /tmp/cs.out
    expect_report compare /tmp/r4 idle loaded shielded shielded+advance unshielded-cpu
    check_eq compare/measured-cpus "3,3,3,3,2" "$(measured_cpus /tmp/r4/report.json)"
    expect_no_own_blame compare/no-own-blame /tmp/cs.out /tmp/r4/report.json
    expect_own_threads_off compare/own-threads-off 2-3
    expect_restored compare/restored /tmp/before
}
