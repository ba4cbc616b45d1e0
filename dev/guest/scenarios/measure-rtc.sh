# Scenario measure-rtc: `cpushield measure latency --source rtc` is Brosky & Rotolo's
# realfeel on the guest's CMOS RTC: /dev/rtc0 at 2048 Hz, woken by read(). Checks the
# behaviour only (timings under TCG mean nothing): samples arrive near the rate
# (lenient: at least 500/s), the RTC's IRQ (rtc0 in /proc/interrupts) is bound to the
# measured CPU 1 during the run and its affinity is restored after.
# guest-test: measure_latency_source_rtc_reads_realfeel_at_the_rate_and_restores_the_rtc_irq
# guest-cost: 12
# guest-boot: shared
# guest-timeout: 200
# guest-tcg: single
GUEST_CGROUP=v2

rtc_on_cpu1() { awk '/rtc0/ { print $3; exit }' /proc/interrupts; }

scenario_main() {
    if [ ! -c /dev/rtc0 ]; then
        fail measure-rtc/device "no /dev/rtc0 (rtc_cmos not built in?): $(ls /dev | tr '\n' ' ' | head -c 300)"
        return
    fi
    irq=$(awk -F: '/rtc0/ { gsub(/ /, "", $1); print $1; exit }' /proc/interrupts)
    if [ -z "$irq" ]; then
        fail measure-rtc/irq "no rtc0 line in /proc/interrupts: $(tr '\n' '|' </proc/interrupts | head -c 400)"
        return
    fi
    read -r old </proc/irq/$irq/smp_affinity
    before=$(rtc_on_cpu1)
    info "rtc0 is IRQ $irq, affinity $old, $before on CPU 1 before"
    "$CS" measure latency --source rtc --cpus 1 --duration 2s --json /tmp/rtc.json >/tmp/cs.out 2>/tmp/cs.err &
    pid=$!
    seen=
    while kill -0 "$pid" 2>/dev/null; do
        read -r m </proc/irq/$irq/smp_affinity
        case " $seen " in *" $m "*) ;; *) seen="$seen $m" ;; esac
        usleep 50000
    done
    wait "$pid"
    rc=$?
    after=$(rtc_on_cpu1)
    check_eq measure-rtc/exit 0 "$rc" "exit status (stderr: $(head -c 300 /tmp/cs.err))"
    info "affinities seen during the run:$seen; now: $(grep rtc0 /proc/interrupts | tr -s ' '); $(grep -o '"samples":[0-9]*' /tmp/rtc.json | tail -n 1) in 2 s"
    case " $seen " in
        *" 2 "* | *" 02 "* | *" 002 "* | *" 0002 "*) pass measure-rtc/irq-bound ;;
        *) fail measure-rtc/irq-bound "IRQ $irq never had affinity CPU 1 (mask 2) during the run: saw$seen" ;;
    esac
    check_eq measure-rtc/irq-restored "$old" "$(cat /proc/irq/$irq/smp_affinity)"
    samples=$(grep -o '"samples":[0-9]*' /tmp/rtc.json | tail -n 1 | cut -d: -f2)
    if [ -n "$samples" ] && [ "$samples" -ge 1000 ]; then
        pass measure-rtc/rate
    else
        fail measure-rtc/rate "expected at least 1000 samples in 2 s (500/s; 2048/s nominal), got '${samples}': $(head -c 300 /tmp/rtc.json)"
    fi
    # Not checked: on Debian 6.1 under QEMU TCG the rtc0 line of /proc/interrupts
    # stays at 1 however many wakeups the reader gets (why is not established; the
    # kernel may deliver the periodic interrupt by emulation). Logged for the record.
    info "rtc0 counted $((after - before)) on CPU 1 during the run; HPET lines: $(grep -i hpet /proc/interrupts | tr -s ' ' | tr '\n' '|')"
    if grep -q '"source":"rtc"' /tmp/rtc.json && grep -q 'realfeel' /tmp/cs.out; then
        pass measure-rtc/named
    else
        fail measure-rtc/named "JSON source or text name missing: $(head -c 200 /tmp/cs.out)"
    fi
    # --attribute: a 2 s run for the threshold, then the traced run; the RTC's IRQ
    # entry is the kernel latency of each explained sample.
    cs measure latency --source rtc --cpus 1 --duration 2s --attribute --trace-dir /tmp/rtc-trace
    check_eq measure-rtc/attribute-exit 0 "$CS_RC" "exit status (stderr: $(head -c 300 /tmp/cs.err))"
    if [ -s /tmp/rtc-trace/trace-summary.json ]; then
        pass measure-rtc/attribute-summary
    else
        fail measure-rtc/attribute-summary "no /tmp/rtc-trace/trace-summary.json: $(head -c 300 /tmp/cs.out)"
    fi
    info "attribute: $(grep -c '"irq_entry_after_ns": [0-9]' /tmp/rtc-trace/trace-summary.json) samples with a kernel latency, $(grep -c '"irq_entry_after_ns": null' /tmp/rtc-trace/trace-summary.json) without; $(grep -m 1 'kernel latency' /tmp/cs.out)"
    check_eq measure-rtc/attribute-irq-restored "$old" "$(cat /proc/irq/$irq/smp_affinity)"
    if [ -c /dev/hpet ]; then
        cs measure latency --source hpet --cpus 1 --duration 1s --json /tmp/hpet.json
        info "hpet: exit $CS_RC, $(grep -o '"samples":[0-9]*' /tmp/hpet.json | tail -n 1); $(head -c 200 /tmp/cs.err)"
    else
        info "no /dev/hpet in this guest"
    fi
}
