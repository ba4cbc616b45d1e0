# Scenario main-job-demo: `cpushield demo` as a user runs it on 4 CPUs (the behaviour only;
# timings under TCG mean nothing), at a short --duration and with a load QEMU's TCG can run
# (`--load ttcp,fifos-mmap,fpu`: the default's crashme runs random instructions TCG cannot,
# see lib/main-job.sh): it exits 0; it writes report.json, with a row for each of its
# scenarios (CPU 3 measured, CPU 2 by unshielded-cpu with the shield up), and
# report.html; no verdict, finding, cause row or output line names a cpushield process;
# no thread of cpushield but the measuring ones and the pollers runs on the measured CPUs
# (sampled from /proc/*/task); the machine is as found. On 6.1 alone, for CI's time: its
# experiment is the default compare's, which main-job-4 runs on both kernels; what the
# demo adds (its command, its load, its output) is the same on either kernel.
# guest-test: demo_on_4_cpus_exits_0_with_its_report_names_no_cpushield_process_and_leaves_the_machine_as_found
# guest-cost: 140
# guest-kernels: 6.1
# guest-mem: 1024
# guest-timeout: 1200
# guest-tcg: single
GUEST_CGROUP=v2
CS_TIMES=1

scenario_main() {
    lo_up
    # The demo's load directory, as on any machine a user runs (fifos-mmap maps 69 MiB there).
    var_tmp 256
    snapshot /tmp/before
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
