# Scenario main-job-tools: the rest of the main job as a user runs it on 4 CPUs, each
# command at its shortest (the behaviour only; timings under TCG mean nothing): `compare`
# with each default scenario alone (at 1 s, with the lightest load: fpu, one workload and
# no files); `measure latency` (timer, rtc, hpet where the guest has it,
# timerlat where the kernel has the tracer), `measure determinism`, `measure noise`,
# `measure net`; `measure latency`, `measure determinism` and `run --idle-poll` under
# `shield --all 3`, with no thread of cpushield but the measuring ones and the pollers on
# CPU 3 (sampled from /proc/*/task); `check --cpus 3`; `run --reserve`; every `load` workload, all in one
# `load` of 2 s (each reports its count; compile refused in one line: this guest has no C
# compiler; crashme left out: QEMU's TCG cannot run its random instructions); `tune` at
# its smallest budget. Each exits as documented; the commands that write a report write
# it; no verdict, finding or output line names a cpushield process; the machine is as
# found afterwards (tune leaves out the preemption model where it could switch it: see
# below). On both kernels: the tracers, timerlat, the knobs tune finds and the
# partition's clamping differ between 6.1 and 6.12-rt.
# guest-test: main_job_tools_on_4_cpus_each_exit_as_documented_and_leave_the_machine_as_found
# guest-cost: 200
# guest-mem: 1024
# guest-timeout: 1200
# guest-tcg: single
GUEST_CGROUP=v2
CS_TIMES=1

scenario_main() {
    lo_up
    # ioctl's pseudo-terminal, as on any machine a user runs.
    mkdir -p /dev/pts
    mount -t devpts devpts /dev/pts 2>/dev/null
    [ -e /dev/ptmx ] || ln -s pts/ptmx /dev/ptmx
    var_tmp 400
    snapshot /tmp/before
    for s in idle loaded shielded shielded+advance unshielded-cpu; do
        cs compare --scenarios "$s" --duration 1s --runs 2 --work 20ms --load fpu --out "/tmp/c-$s"
        check_eq "alone/$s/exit-0" 0 "$CS_RC" "exit status ($(tail -c 300 /tmp/cs.err | tr '\n' ' '))"
        expect_report "alone/$s" "/tmp/c-$s" "$s"
        expect_no_own_blame "alone/$s/no-own-blame" /tmp/cs.out "/tmp/c-$s/report.json"
    done
    expect_restored alone/restored /tmp/before

    cs_ok measure/latency-timer measure latency --cpus 3 --duration 1s
    cs_ok measure/latency-rtc measure latency --cpus 3 --duration 1s --source rtc
    if [ -e /dev/hpet ]; then
        # QEMU's HPET may refuse the periodic interrupt (EIO): then refused in one line.
        cs measure latency --cpus 3 --duration 1s --source hpet
        if [ "$CS_RC" = 0 ] || { [ "$CS_RC" = 1 ] && [ "$(wc -l </tmp/cs.err)" = 1 ]; }; then
            pass measure/latency-hpet
            [ "$CS_RC" = 0 ] || info "measure/latency-hpet: $(cat /tmp/cs.err)"
        else
            fail measure/latency-hpet "exit $CS_RC: $(head -c 300 /tmp/cs.err)"
        fi
    else
        info "measure/latency-hpet: no /dev/hpet in this guest"
    fi
    if grep -qw timerlat /sys/kernel/tracing/available_tracers 2>/dev/null ||
        { mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null &&
            grep -qw timerlat /sys/kernel/tracing/available_tracers; }; then
        cs_ok measure/latency-timerlat measure latency --cpus 3 --duration 1s --source timerlat
    else
        cs measure latency --cpus 3 --duration 1s --source timerlat
        check_eq measure/latency-timerlat-refused 1 "$CS_RC"
        check_eq measure/latency-timerlat-one-line 1 "$(wc -l </tmp/cs.err | tr -d ' ')" "$(head -c 300 /tmp/cs.err)"
    fi
    cs_ok measure/determinism measure determinism --cpus 3 --runs 3 --work 20ms
    cs_ok measure/noise measure noise --cpus 3 --duration 1s
    cs_ok measure/net measure net --cpus 2,3 --duration 200ms --sizes 64,1K
    expect_no_own_blame measure/no-own-blame /tmp/cs.out

    # Under a shield (cgroup v2 here) the measuring threads and run's idle pollers enter it
    # alone: no other thread of cpushield (measure's or run's main thread) runs on CPU 3.
    cs_ok shielded/shield shield --all 3
    own_watch_start
    # Each long enough for the sampler to see a misplaced thread (1.5 s of running).
    cs_ok shielded/measure-latency measure latency --cpus 3 --duration 2s
    cs_ok shielded/measure-determinism measure determinism --cpus 3 --runs 4 --work 500ms
    cs_ok shielded/run-idle-poll run --cpus 3 --idle-poll -- sleep 2
    own_watch_stop
    expect_own_threads_off shielded/own-threads-off 3
    cs_ok shielded/reset reset

    cs check --cpus 3 --json
    if [ "$CS_RC" = 0 ] || [ "$CS_RC" = 3 ]; then pass check/exit; else
        fail check/exit "check exited $CS_RC: $(head -c 300 /tmp/cs.err)"; fi
    expect_no_own_blame check/no-own-blame /tmp/cs.out

    "$CS" run --cpus 3 --allow-unshielded --reserve -- sleep 1000 >/tmp/holder.out 2>&1 &
    runner=$!
    holder=$(reserve_holder 3 "$runner")
    if [ -n "$holder" ]; then
        pass run/reserved
        cs run --cpus 3 --allow-unshielded -- true
        check_eq run/placement-refused 1 "$CS_RC"
        kill "$holder"
    else
        fail run/reserved "CPU 3 never reserved: $(head -c 300 /tmp/holder.out)"
        kill "$runner"
    fi
    wait "$runner" 2>/dev/null

    # crashme runs random bytes, which QEMU's TCG cannot (see GUEST_LOAD): not here.
    # All at once, as compare runs its load: one start and one stop for the twelve.
    _all="ttcp fifos-mmap fpu fs disknoise launch find filemove netflood ioctl iodisk compute"
    # shellcheck disable=SC2086
    cs load $_all --duration 2s --size 64M --dir /var/tmp --json /tmp/load.json
    check_eq load/exit-0 0 "$CS_RC" "exit status ($(head -c 300 /tmp/cs.err | tr '\n' ' '))"
    json_flat </tmp/load.json 2>/dev/null |
        awk -F '\t' '$1 ~ /^workloads\.[0-9]+\.name$/ { n = $2 } $1 ~ /^workloads\.[0-9]+\.ops$/ { print n, $2 }' >/tmp/load.ops
    info "load: $(tr '\n' ' ' </tmp/load.ops)"
    for w in $_all; do
        if grep -q "^$w " /tmp/load.ops; then pass "load/$w"; else
            fail "load/$w" "no count for $w in the load's report: $(tr '\n' ' ' </tmp/load.ops | head -c 300)"; fi
    done
    cs load compile --duration 1s --dir /var/tmp
    check_eq load/compile-refused 1 "$CS_RC"
    check_eq load/compile-one-line 1 "$(wc -l </tmp/cs.err | tr -d ' ')" "$(head -c 300 /tmp/cs.err)"

    # A load without files (see GUEST_LOAD): its budget is fixed, its load does not
    # lengthen it. Every knob but, where the kernel can switch it (PREEMPT_DYNAMIC: 6.1),
    # the preemption model: each switch patches the kernel's text, which under TCG takes
    # minutes. tune times each switch and leaves a knob unmeasured once its switches no
    # longer fit, but a knob's first switch cannot be foreseen: a run ends within its
    # budget plus one first switch there and back. Here that is most of the run: with
    # the preemption model, a 6.1 tune of an 81 s budget took 413 s, its first switch
    # 188 s and the switch back about as long (the scenario 649 s and 186 s of host CPU,
    # against 223 s and 103 s without it, on a loaded host). tune-sigkill switches it on
    # 6.1 and checks it is restored.
    _knobs=
    if grep -q PREEMPT_DYNAMIC /proc/sys/kernel/version; then
        _knobs="--knobs idle-poll,dma-latency,idle-states,rt-throttling,timer-migration,stat-interval,governor,epp,smt-offline,irq-siblings,probe-priority"
    fi
    # shellcheck disable=SC2086
    cs tune --load fpu,ttcp $_knobs --budget 1s --out /tmp/t0
    least=$(sed -n 's/.*give at least --budget \([0-9]*\)s.*/\1/p' /tmp/cs.err)
    info "tune: smallest budget ${least:-?} s${_knobs:+ (}${_knobs}${_knobs:+)}"
    if [ -n "$least" ]; then
        # shellcheck disable=SC2086
        cs tune --load fpu,ttcp $_knobs --budget "${least}s" --out /tmp/tune
        check_eq tune/exit-0 0 "$CS_RC" "exit status ($(tail -c 300 /tmp/cs.err | tr '\n' ' '))"
        # Its answer, and what it spent its budget on (tune overran it under TCG).
        sed 's/^/GUEST-INFO tune-out: /' /tmp/cs.out
        for _f in cpushield.toml report.html tune.json; do
            if [ -s "/tmp/tune/$_f" ]; then pass "tune/$_f"; else fail "tune/$_f" "no /tmp/tune/$_f"; fi
        done
        expect_no_own_blame tune/no-own-blame /tmp/cs.out
    else
        fail tune/smallest-budget "no smallest budget in: $(head -c 300 /tmp/cs.err)"
    fi
    expect_restored tools/restored /tmp/before
}
