# Scenario vm-blame: the host tells the guest what took its vCPU. This machine is the
# guest's host: run.sh runs the host side, `cpushield vm watch`, on QEMU's QMP socket and on
# the guest's virtio-serial port (guest-vm-watch), and stalls the guest's vCPU thread on
# request with a SCHED_FIFO hog on host CPU 1 (guest-stall, as compare-stall does).
# One TCG thread runs every vCPU (as compare-stall: the guest turns tracepoints on), so the
# host's gap is every vCPU's, and the thread sleeps (halted) only while the whole guest idles.
# Three short shielded compare runs, each with one stall in its probe, and one measure run:
#   1. host side up, a STALL_MS stall while a spinner keeps vCPU 0 (so the thread) busy: the
#      report charges the spike outside the guest and gives the host's cause: preempted (the
#      thread was switched out runnable; or halted for microseconds on QEMU's lock, then woken
#      and kept waiting: see hog_cause), a host task (the hog: `sh`, or `taskset` or `chrt`
#      where it was not seen again after its exec) with its pid, on host CPU 1, for about
#      the stall's length (within the stated clock error and a quarter), printed and in JSON;
#   2. host side up, `measure latency --attribute` on vCPU 1 of an otherwise idle guest,
#      four STALL_MS stalls: where the thread slept when the hog took host CPU 1 and was
#      woken late, the spike's host cause says halted (guest idle), then woken and kept
#      waiting by the hog with its pid on host CPU 1, not "preempted" (see measure_idle;
#      required: idle-halted, idle-halted-hog, and every stall's hog named but one);
#   3. host side SIGKILLed halfway, then a LONG_STALL_MS stall (longer than any the emulator
#      itself causes, so that it is the worst sample): the run finishes, and the report says
#      from when the host's view is missing;
#   4. no host side any more: the report is as before plus one line on how to get one;
#   and between 2 and 3, `check --cpus 1` during one stall: its finding that the host held
#   vCPU 1 off names the hog with its pid (check_stalled).
# 6.1 builds virtio_console (the port's driver) as a module: the scenario loads the virtio
# modules the initramfs carries first (6.12 builds it in).
# guest-smp: 2
# guest-tcg: single
# guest-stall: yes
# guest-vm-watch: yes
# guest-timeout: 420
# guest-test: the_host_side_names_the_host_task_that_stalled_a_vcpu_and_says_when_its_view_ends
# guest-kernels: 6.1 6.12-rt
# guest-cost: 106
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

# run_compare NAME BEFORE_STALL MS [PROBE]: one shielded compare (a probe of PROBE, 5 s by
# default) into /tmp/NAME; BEFORE_STALL is run once the probe runs, then the host stalls
# the vCPU for MS ms. Leaves the flat report
# in /tmp/NAME.flat.
run_compare() {
    name=$1 before=$2 ms=$3 probe=${4:-5s}
    cpushield compare --cpus 1 --scenarios shielded --duration "$probe" --runs 0 --no-anchor \
        --load fpu --idle halt --attribute-above 1ms --dir /tmp --out "/tmp/$name" \
        >"/tmp/$name.out" 2>"/tmp/$name.err" &
    COMPARE=$!
    SPINNER=""
    if await_probe "$name"; then
        sleep 1
        $before
        echo "GUEST-STALL $ms"
    fi
    wait "$COMPARE"
    [ -z "$SPINNER" ] || kill "$SPINNER" 2>/dev/null
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

# hog_cause NAME: the index of the host cause that is the hog's (a host task with a pid on
# host CPU 1): the guest asks about each of its worst samples outside the guest, and on a
# busy host the stall need not be the worst of them. Preempted (the thread was switched out
# runnable), or halted for microseconds, then woken and kept waiting by the hog: under TCG
# even a busy guest's thread sleeps that briefly on QEMU's own lock, and the hog may arrive
# then (seen about half the time on 6.12-rt); a halt of milliseconds is the guest's idling.
hog_cause() {
    i=0
    while k=$(at "$i.kind" "$1"); do
        if [ "$(at "$i.host_cpu" "$1")" = 1 ] && at "$i.culprit_pid" "$1" >/dev/null; then
            case "$k:$(at "$i.line" "$1")" in
                preempted:* | "halted:vCPU 1 halted (guest idle) for "*" us, then woken"* | "halted:vCPU 1 halted (guest idle) for "*" ns, then woken"* | "halted:vCPU 1 halted (guest idle), then woken"*)
                    case "$(at "$i.culprit" "$1")" in sh | taskset | chrt) echo "$i"; return 0 ;; esac ;;
            esac
        fi
        i=$((i + 1))
    done
    return 1
}

nothing() { :; }
# spin_vcpu0: keeps vCPU 0 busy, so that QEMU's one TCG thread is runnable when the hog
# takes its host CPU (the probe's vCPU 1 is shielded: vCPU 0 is the other).
spin_vcpu0() {
    taskset -c 0 sh -c 'while :; do :; done' &
    SPINNER=$!
    sleep 0.3
}

# measure_idle: `measure latency --attribute` on vCPU 1 with nothing else running in the
# guest; once its traced run began (after the 2-second run that sets the threshold) the host
# stalls it IDLE_STALLS times. The spikes charged outside the guest get the host's cause:
# the thread slept when the hog took host CPU 1 (halted), then was woken and kept waiting
# by the hog (QEMU's main loop, which delivers the guest's timer interrupts, waits on host
# CPU 0 during a stall: run.sh's stall_vcpu). The guest is only mostly idle (the probe and
# the trace reader wake it some hundred times a second, and TCG runs them slowly): a stall
# that found the thread running is rightly "preempted", so one halted stall of the four
# (in trace-summary.json's notes) is what is required.
IDLE_STALLS=4
measure_idle() {
    cpushield measure latency --cpus 1 --rate 50 --duration 2500ms --attribute \
        --trace-dir /tmp/idle-trace >/tmp/idle.out 2>/tmp/idle.err &
    M=$!
    waited=0
    while [ "$waited" -lt 300 ] && [ ! -d "/sys/kernel/tracing/instances/cpushield-$M" ]; do
        kill -0 "$M" 2>/dev/null || break
        sleep 0.1
        waited=$((waited + 1))
    done
    if [ -d "/sys/kernel/tracing/instances/cpushield-$M" ]; then
        n=0
        while [ "$n" -lt "$IDLE_STALLS" ]; do
            sleep 0.5
            echo "GUEST-STALL $STALL_MS"
            n=$((n + 1))
        done
    else
        fail vm-blame/idle-traced "never saw measure latency's trace instance"
    fi
    wait "$M"
    check_eq vm-blame/idle-exit 0 "$?" "exit status (stderr: $(tail -c 400 /tmp/idle.err | tr '\n' ' '))"
    grep '^spike .*outside the guest\|^host side' /tmp/idle.out | while read -r line; do info "idle: $line"; done
    # Halted for milliseconds (the guest idled; QEMU's lock is a matter of microseconds),
    # then woken and kept waiting milliseconds on host CPU 1 by the hog, with its pid: woken
    # late. A vCPU woken on a busy host CPU waits first behind short tasks and softirqs, and
    # the hog comes after them: the host must still name it (a gap's biggest occupants).
    halted="vCPU 1 halted (guest idle) for [0-9.]* ms, then woken and kept waiting [0-9.]* ms on host CPU 1 by "
    hog='\(sh\|taskset\|chrt\) (pid [0-9]*)'
    # Every spike's cause is a note in trace-summary.json; the three with the most time
    # outside the guest are printed (on this loaded host, not always the hog's).
    grep -q "outside the guest [^:\"]*: $halted" /tmp/idle-trace/trace-summary.json &&
        pass vm-blame/idle-halted || fail vm-blame/idle-halted "no spike's host cause (trace-summary.json notes) says halted, then woken and kept waiting milliseconds on host CPU 1: $(grep -o "outside the guest [^\"]*" /tmp/idle-trace/trace-summary.json | head -c 900)"
    grep -q "outside the guest [^:\"]*: $halted$hog" /tmp/idle-trace/trace-summary.json &&
        pass vm-blame/idle-halted-hog || fail vm-blame/idle-halted-hog "no halted spike names the hog (sh, through taskset and chrt) with its pid: $(grep -o "outside the guest [^\"]*" /tmp/idle-trace/trace-summary.json | head -c 900)"
    # Each stall is its own hog with its own pid, and each makes a spike: the guest asks the
    # host about every spike at the end, so all but at most one (a stall that came as the
    # run ended) are named, halted or preempted.
    named=$(grep -o "outside the guest [^:\"]*: [^\"]*$hog" /tmp/idle-trace/trace-summary.json |
        grep -o "$hog\$" | grep -o "pid [0-9]*" | sort -u | wc -l)
    if [ "$named" -ge $((IDLE_STALLS - 1)) ]; then pass vm-blame/idle-every-stall-named; else
        fail vm-blame/idle-every-stall-named "$named of $IDLE_STALLS stalls' hogs named in the spikes' host causes: $(grep -o "outside the guest [^\"]*" /tmp/idle-trace/trace-summary.json | head -c 900)"
    fi
    if grep -q "^spike [0-9]* on CPU 1: outside the guest [^:]*: .*host CPU 1" /tmp/idle.out; then pass vm-blame/idle-printed; else
        fail vm-blame/idle-printed "no printed spike with the host's cause: $(head -c 600 /tmp/idle.out)"
    fi
}

# check_stalled: `cpushield check --cpus 1` while the host stalls vCPU 1 once: the host's
# account of vCPU 1 over the check is a finding whose evidence names the hog with its pid
# among what held host CPU 1 (others may hold it longer in sum on this shared host).
check_stalled() {
    cpushield check --cpus 1 --interval 2s --json >/tmp/check.json 2>/tmp/check.err &
    C=$!
    sleep 0.7
    echo "GUEST-STALL $STALL_MS"
    wait "$C"
    rc=$?
    case $rc in 0 | 3) pass vm-blame/check-exit ;; *) fail vm-blame/check-exit "exit $rc: $(tail -c 300 /tmp/check.err)" ;; esac
    line=$(grep -o '"the host held vCPU 1 off [^"]*most by [^"]*' /tmp/check.json | head -1)
    info "check: ${line#\"}"
    if printf '%s' "$line" | grep -q "most by .*\(sh\|taskset\|chrt\) (pid [0-9]*) on host CPU 1"; then
        pass vm-blame/check-names-the-hog
    else
        fail vm-blame/check-names-the-hog "no finding of check names the hog with its pid on host CPU 1: $(grep -o '"evidence": "[^"]*host[^"]*' /tmp/check.json | head -c 600)"
    fi
}

kill_host_side() {
    echo "GUEST-VM-WATCH-KILL"
    sleep 1.5
}

scenario_main() {
    load_virtio_modules
    if ls /sys/class/virtio-ports/*/name >/dev/null 2>&1; then pass vm-blame/port; else
        fail vm-blame/port "no virtio-serial port (modules: $(cut -d' ' -f1 /proc/modules | tr '\n' ' '))"
    fi
    run_compare up spin_vcpu0 "$STALL_MS"
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
    info "the hog's cause: $(at "$i.kind" up): $(at "$i.line" up)"
    grep -q "outside the guest .*: \(on the host, [a-z]* (pid $pid) ran on host CPU 1 for .* while vCPU 1 was runnable\|vCPU 1 halted .* on host CPU 1 by [a-z]* (pid $pid)\).* (clock offset error" /tmp/up.out &&
        pass vm-blame/up-printed || fail vm-blame/up-printed "no host cause line in: $(grep -i host /tmp/up.out | head -c 400)"

    measure_idle
    check_stalled

    # 8 s: the kill and its wait come before the stall, which must still fall in the probe
    # (in CI, two guests at once, a 5 s probe once ended before the stall came).
    run_compare killed kill_host_side "$LONG_STALL_MS" 8s
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
