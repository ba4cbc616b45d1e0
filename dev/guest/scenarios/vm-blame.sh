# Scenario vm-blame: the host tells the guest what took its vCPU. This machine is the
# guest's host: run.sh runs the host side, `cpushield vm watch`, on QEMU's QMP socket and on
# the guest's virtio-serial port (guest-vm-watch), and stalls the guest's vCPU thread on
# request with a SCHED_FIFO hog on host CPU 1 (guest-stall, as compare-stall does).
# Three short shielded compare runs, each with one stall in its probe:
#   1. host side up, a STALL_MS stall: the report charges the spike outside the guest and
#      gives the host's cause: preempted, a host task (the hog: `sh`, or `taskset` or `chrt`
#      where it was not seen again after its exec) with its pid, on host CPU 1, for about
#      the stall's length (within the stated clock error and a quarter), printed and in JSON;
#   2. host side SIGKILLed halfway, then a LONG_STALL_MS stall (longer than any the emulator
#      itself causes, so that it is the worst sample): the run finishes, and the report says
#      from when the host's view is missing;
#   3. no host side any more: the report is as before plus one line on how to get one.
# One TCG thread for every vCPU (as compare-stall: the guest turns tracepoints on), so the
# host's gap is every vCPU's. 6.1 builds virtio_console (the port's driver) as a module: the
# scenario loads the virtio modules the initramfs carries first (6.12 builds it in).
# guest-smp: 2
# guest-tcg: single
# guest-stall: yes
# guest-vm-watch: yes
# guest-timeout: 420
# guest-test: the_host_side_names_the_host_task_that_stalled_a_vcpu_and_says_when_its_view_ends
# guest-kernels: 6.1 6.12-rt
# guest-cost: 100
GUEST_CGROUP=v2

STALL_MS=50
LONG_STALL_MS=150

# is_running COMM: a task named COMM exists.
is_running() {
    cat /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null | grep -qx "$1"
}

# await_probe: waits (at most 200 s) until the shielded probe's thread runs.
await_probe() {
    waited=0
    while [ "$waited" -lt 2000 ]; do
        if [ -d "$CGROOT/cpushield-shield" ] && is_running cpushield-cpu1; then
            return 0
        fi
        kill -0 "$COMPARE" 2>/dev/null || break
        sleep 0.1
        waited=$((waited + 1))
    done
    fail "vm-blame/$1-probe-started" "never saw the shielded probe running"
    return 1
}

# run_compare NAME BEFORE_STALL MS: one shielded compare into /tmp/NAME; BEFORE_STALL is
# run once the probe runs, then the host stalls the vCPU for MS ms. Leaves the flat report
# in /tmp/NAME.flat.
run_compare() {
    name=$1 before=$2 ms=$3
    cpushield compare --cpus 1 --scenarios shielded --duration 5s --runs 0 --no-anchor \
        --load fpu --idle halt --attribute-above 1ms --dir /tmp --out "/tmp/$name" \
        >"/tmp/$name.out" 2>"/tmp/$name.err" &
    COMPARE=$!
    if await_probe "$name"; then
        sleep 1
        $before
        echo "GUEST-STALL $ms"
    fi
    wait "$COMPARE"
    check_eq "vm-blame/$name-exit" 0 "$?" "exit status (stderr: $(tail -c 400 "/tmp/$name.err" | tr '\n' ' '))"
    json_flat <"/tmp/$name/report.json" >"/tmp/$name.flat" 2>/dev/null
    grep 'outside the guest\|host side' "/tmp/$name.out" | while read -r line; do info "$name: $line"; done
    outside=$(json_at scenarios.0.attribution.outside_worst_ns <"/tmp/$name.flat")
    # That the stall is charged outside the guest is compare-stall's test: here it is checked
    # where the host's answer about it is (the others are about the host side's absence).
    info "$name: up to $((${outside:-0} / 1000)) us outside the guest in one sample after a $ms ms stall"
    [ "$name" = up ] || return 0
    if [ "${outside:-0}" -ge $((ms * 750000)) ]; then pass "vm-blame/$name-charged-outside"; else
        fail "vm-blame/$name-charged-outside" "at most ${outside:-0} ns outside the guest in one sample after a $ms ms stall"
    fi
}

at() { json_at "scenarios.0.attribution.host_causes.$1" <"/tmp/$2.flat"; }

# hog_cause NAME: the index of the host cause that is the hog's (preempted by a host task
# with a pid on host CPU 1): the guest asks about each of its worst samples outside the
# guest, and on a busy host the stall need not be the worst of them.
hog_cause() {
    i=0
    while k=$(at "$i.kind" "$1"); do
        if [ "$k" = preempted ] && [ "$(at "$i.host_cpu" "$1")" = 1 ] && at "$i.culprit_pid" "$1" >/dev/null; then
            case "$(at "$i.culprit" "$1")" in sh | taskset | chrt) echo "$i"; return 0 ;; esac
        fi
        i=$((i + 1))
    done
    return 1
}

nothing() { :; }
kill_host_side() {
    echo "GUEST-VM-WATCH-KILL"
    sleep 1.5
}

scenario_main() {
    load_virtio_modules
    if ls /sys/class/virtio-ports/*/name >/dev/null 2>&1; then pass vm-blame/port; else
        fail vm-blame/port "no virtio-serial port (modules: $(cut -d' ' -f1 /proc/modules | tr '\n' ' '))"
    fi
    run_compare up nothing "$STALL_MS"
    if i=$(hog_cause up); then pass vm-blame/up-the-hog; else
        fail vm-blame/up-the-hog "no host cause names the hog (sh, through taskset and chrt) on host CPU 1: $(grep host_causes /tmp/up.flat | grep '\.line' | cut -f2 | head -c 600)"
        i=0
    fi
    pid=$(at "$i.culprit_pid" up)
    held=$(at "$i.culprit_ns" up)
    err=$(at "$i.err_ns" up)
    info "the host's hog (pid $pid) held host CPU 1 for $((${held:-0} / 1000)) us of a $STALL_MS ms stall; clock offset error $((${err:-0} / 1000)) us"
    low=$((STALL_MS * 750000 - ${err:-0}))
    high=$((STALL_MS * 1250000 + ${err:-0}))
    if [ "${held:-0}" -ge "$low" ] && [ "${held:-0}" -le "$high" ]; then pass vm-blame/up-stall-length; else
        fail vm-blame/up-stall-length "held ${held:-0} ns, expected $low-$high ns (the stall ± a quarter and the clock error)"
    fi
    grep -q "outside the guest .*: on the host, [a-z]* (pid $pid) ran on host CPU 1 for .* while vCPU 1 was runnable.* (clock offset error" /tmp/up.out &&
        pass vm-blame/up-printed || fail vm-blame/up-printed "no host cause line in: $(grep -i host /tmp/up.out | head -c 400)"

    run_compare killed kill_host_side "$LONG_STALL_MS"
    check_eq vm-blame/killed-missing missing "$(at 0.kind killed)" "host cause of the worst sample"
    from=$(at 0.missing_from_ns killed)
    if [ "${from:-0}" -gt 0 ]; then pass vm-blame/killed-from; else fail vm-blame/killed-from "no time from which the view is missing"; fi
    grep -q "the host's view is missing from" /tmp/killed.out && pass vm-blame/killed-printed ||
        fail vm-blame/killed-printed "no 'missing from' line in: $(grep -i host /tmp/killed.out | head -c 400)"

    run_compare none nothing "$STALL_MS"
    if at 0.kind none >/dev/null; then fail vm-blame/none-no-cause "a host cause without a host side: $(at 0.line none)"; else
        pass vm-blame/none-no-cause
    fi
    grep -q "^host side: none answered .*cpushield vm watch" /tmp/none.out && pass vm-blame/none-hint ||
        fail vm-blame/none-hint "no hint line in: $(tail -c 400 /tmp/none.out | tr '\n' '|')"
}
