# Scenario main-job-minimal: `compare` and `demo` as a user runs them, with the defaults, on
# a minimal system: no /var/tmp, no C compiler (this initramfs), and as little disk as
# /var/tmp is given.
#  1. No /var/tmp: both refuse before the first scenario, in one line said once, naming
#     mkdir and suggesting neither the missing directory nor an option the command lacks;
#     nothing changed.
#  2. Too little disk for the default load's fs workload: the same, naming the MiB, and
#     the default load said to run without compile (no compiler here).
# On 6.1 only: these refusals come from the load's directory, disk and PATH, checked
# before cpushield touches the kernel, so the kernel cannot change them (main-job-4 runs
# the defaults that do touch it on both kernels).
# guest-test: main_job_on_a_minimal_system_refuses_compare_and_demo_in_one_line_with_a_remedy_that_exists
# guest-kernels: 6.1
# guest-boot: shared
# guest-tcg: single
# guest-cost: 10
GUEST_CGROUP=v2
CS_TIMES=1

scenario_main() {
    _had_var=no
    [ -d /var ] && _had_var=yes
    var_tmp none
    snapshot /tmp/before
    # 1. No /var/tmp.
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
    # As the boot found it, for the next scenario of the boot.
    var_tmp none
    [ "$_had_var" = yes ] || rmdir /var 2>/dev/null
}
