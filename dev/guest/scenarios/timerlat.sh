# Scenario timerlat: `measure latency --source timerlat`. On a kernel with the timerlat
# tracer (6.12-rt): the kernel's timerlat thread on CPU 3 (SCHED_FIFO 95) measures, the
# report has its thread latency and the IRQ latency of each wakeup, --trace-above
# attributes the spikes with the osnoise events on, with a shield up too, rtla from the
# initramfs runs, a second timerlat user is refused, and every tracefs setting (the
# global osnoise ones included) is back as it was. On a kernel without the tracer (6.1):
# one line naming CONFIG_TIMERLAT_TRACER, exit 1, nothing changed, and compare runs with
# one line saying there is no rtla anchor. On 6.12-rt compare has rtla as its second
# anchor.
# guest-test: measure_latency_source_timerlat_reports_irq_and_thread_latency_or_names_the_missing_tracer
# guest-cost: 80
# guest-timeout: 400
# guest-tcg: single
GUEST_CGROUP=v2

T=/sys/kernel/tracing

# The tracefs settings a timerlat session touches, and the instances.
tracer_settings() {
    for f in current_tracer tracing_on trace_clock tracing_cpumask osnoise/cpus \
        osnoise/timerlat_period_us osnoise/stop_tracing_us osnoise/stop_tracing_total_us \
        osnoise/print_stack events/osnoise/irq_noise/enable; do
        echo "$f=$(cat "$T/$f" 2>/dev/null | head -n 1)"
    done
    ls $T/instances 2>/dev/null | sed 's/^/instance=/'
}

# expect_restored_tracer NAME: the settings are those of /tmp/tl-before.
expect_restored_tracer() {
    tracer_settings >/tmp/tl-after
    if cmp -s /tmp/tl-before /tmp/tl-after; then
        pass "$1"
    else
        fail "$1" "$(diff /tmp/tl-before /tmp/tl-after | grep '^[-+][^-+]' | tr '\n' ' ')"
    fi
}

# json_number FILE KEY: the first number after "KEY": in FILE.
json_number() {
    grep -o "\"$2\":[0-9][0-9]*" "$1" | head -n 1 | cut -d: -f2
}

scenario_main() {
    mount -t tracefs nodev $T || { fail timerlat/mount "cannot mount tracefs"; return; }
    tracer_settings >/tmp/tl-before
    if ! grep -qw timerlat $T/available_tracers; then
        info "no timerlat tracer in $(uname -r): $(cat $T/available_tracers)"
        cs measure latency --source timerlat --cpus 3 --duration 2s
        check_eq timerlat/absent/exit-1 1 "$CS_RC" "exit status"
        check_eq timerlat/absent/one-line 1 "$(wc -l </tmp/cs.err)" "lines on stderr ($(head -c 300 /tmp/cs.err))"
        if grep -q 'CONFIG_TIMERLAT_TRACER' /tmp/cs.err; then
            pass timerlat/absent/names-the-option
        else
            fail timerlat/absent/names-the-option "$(head -c 300 /tmp/cs.err)"
        fi
        expect_restored_tracer timerlat/absent/nothing-changed
        cs compare --cpus 3 --scenarios shielded --duration 2s --runs 0 --load fpu --idle halt \
            --no-attribute --dir /tmp --out /tmp/cmp
        check_eq timerlat/absent/compare-exit 0 "$CS_RC" "compare exit status (stderr: $(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
        if grep -q 'no rtla timerlat anchor: this kernel has no timerlat tracer' /tmp/cmp/report.json &&
            ! grep -q '"rtla":' /tmp/cmp/report.json; then
            pass timerlat/absent/compare-says-so
        else
            fail timerlat/absent/compare-says-so "$(grep -i rtla /tmp/cmp/report.json | head -n 3 | tr '\n' ' ')"
        fi
        return
    fi

    cs measure latency --source timerlat --cpus 3 --duration 3s --interval 1ms --json /tmp/tl.json
    check_eq timerlat/exit-0 0 "$CS_RC" "exit status (stderr: $(head -c 300 /tmp/cs.err))"
    info "report: $(head -c 600 /tmp/tl.json)"
    samples=$(json_number /tmp/tl.json samples)
    if [ "${samples:-0}" -ge 100 ]; then
        pass timerlat/samples
    else
        fail timerlat/samples "expected at least 100 wakeups at 1 ms in 3 s, got '${samples}'"
    fi
    if grep -q '"source":"timerlat"' /tmp/tl.json && grep -q '"irq_latency":{"summary":{"count":[1-9]' /tmp/tl.json; then
        pass timerlat/irq-and-thread-latency
    else
        fail timerlat/irq-and-thread-latency "no source timerlat or no IRQ latency samples in the report"
    fi
    if grep -q '"applied":{"policy":"fifo","priority":95}' /tmp/tl.json; then
        pass timerlat/kernel-thread-fifo-95
    else
        fail timerlat/kernel-thread-fifo-95 "$(grep -o '"applied":{[^}]*}' /tmp/tl.json)"
    fi
    expect_restored_tracer timerlat/restored

    # Inside a shield, with the spikes attributed: the osnoise events are on.
    cs_ok timerlat/shield shield --all 3
    cs measure latency --source timerlat --cpus 3 --duration 3s --interval 1ms \
        --trace-above 20us --trace-dir /tmp/tl-trace
    check_eq timerlat/traced/exit-0 0 "$CS_RC" "exit status (stderr: $(head -c 300 /tmp/cs.err))"
    info "trace: $(grep -m 3 -e 'Trace:' -e 'Top causes' -e 'osnoise' /tmp/cs.out | tr '\n' '|')"
    if grep -q '"tracer": "timerlat"' /tmp/tl-trace/trace-summary.json &&
        grep -q '"osnoise_events": true' /tmp/tl-trace/trace-summary.json; then
        pass timerlat/traced/osnoise-events
    else
        fail timerlat/traced/osnoise-events "$(grep -e '"tracer"' -e '"osnoise_events"' /tmp/tl-trace/trace-summary.json | tr '\n' ' ')"
    fi
    if grep -q '"latency_ns"' /tmp/tl-trace/trace-summary.json; then
        pass timerlat/traced/spikes-attributed
    else
        fail timerlat/traced/spikes-attributed "no attribution in $(head -c 300 /tmp/tl-trace/trace-summary.json)"
    fi
    expect_restored_tracer timerlat/traced/restored
    cs_ok timerlat/reset reset

    # rtla, from the initramfs, on the same tracer; a second user is refused meanwhile.
    /usr/bin/rtla timerlat hist -c 3 -d 20s -p 1000 >/tmp/rtla.out 2>&1 &
    rtla_pid=$!
    _i=0
    while [ "$_i" -lt 300 ] && ! grep -qw timerlat $T/instances/*/current_tracer $T/current_tracer 2>/dev/null; do
        usleep 50000
        _i=$((_i + 1))
    done
    info "while rtla runs: $(grep -H . $T/current_tracer $T/instances/*/current_tracer 2>/dev/null | tr '\n' ' ')"
    cs measure latency --source timerlat --cpus 3 --duration 1s
    check_eq timerlat/busy/exit-1 1 "$CS_RC" "exit status while rtla runs (stderr: $(head -c 300 /tmp/cs.err))"
    if grep -q 'runs the timerlat tracer' /tmp/cs.err; then
        pass timerlat/busy/names-the-user
    else
        fail timerlat/busy/names-the-user "$(head -c 300 /tmp/cs.err)"
    fi
    wait "$rtla_pid"
    rtla_rc=$?
    info "rtla: $(grep -e '^count:' -e '^max:' /tmp/rtla.out | tr '\n' '|')"
    if [ "$rtla_rc" = 0 ] && grep -q '^count:' /tmp/rtla.out; then
        pass timerlat/rtla-runs
    else
        fail timerlat/rtla-runs "exit $rtla_rc: $(tail -n 5 /tmp/rtla.out | tr '\n' '|')"
    fi
    expect_restored_tracer timerlat/after-rtla/restored

    # compare, with rtla timerlat as its second anchor (the guest has no cyclictest:
    # its absence is one line of the report).
    cs compare --cpus 3 --scenarios shielded --duration 4s --runs 0 --load fpu --idle halt \
        --no-attribute --verbose --dir /tmp --out /tmp/cmp
    check_eq timerlat/compare-exit 0 "$CS_RC" "compare exit status (stderr: $(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
    if grep -q '"tool": "rtla timerlat"' /tmp/cmp/report.json && grep -q '"irq_max_ns": [0-9]' /tmp/cmp/report.json; then
        pass timerlat/compare-rtla-anchor
    else
        fail timerlat/compare-rtla-anchor "no rtla anchor in report.json: $(grep -i -e rtla -e anchor /tmp/cmp/report.json | head -n 5 | tr '\n' ' ')"
    fi
    info "$(grep -e 'rtla thread' -e '^shielded ' /tmp/cs.out | head -n 2 | tr '\n' '|')"
    if grep -q 'cyclictest.*rtla thread.*rtla irq' /tmp/cs.out; then
        pass timerlat/compare-rtla-shown
    else
        fail timerlat/compare-rtla-shown "$(tail -c 600 /tmp/cs.out | tr '\n' '|')"
    fi
    [ ! -e /run/cpushield/state.json ] && pass timerlat/compare-reset ||
        fail timerlat/compare-reset "shield state left: $(head -c 200 /run/cpushield/state.json)"
    expect_restored_tracer timerlat/after-compare/restored
}
