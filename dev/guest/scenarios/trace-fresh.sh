# Scenario trace-fresh: on a kernel that has never traced, a trace session (in a
# private instance, as measure and compare use) leaves every tracefs setting meaning
# what it meant before. A never-used ring buffer reads "7 (expanded: 1408)" at
# the top level and "7" per CPU; the kernel means 1408, and a restore that wrote back
# the literal 7 would leave every later tracefs user a 7 KB buffer per CPU. Using an
# instance alone flips a never-used top-level buffer to a plain 7 on this kernel. (A
# session on the top-level buffer is covered by the unit tests and the host test: on
# this 6.1 guest under TCG, resizing one CPU's top-level buffer soft-locks the guest.)
# guest-test: trace_on_a_fresh_kernel_restores_what_tracefs_meant
# guest-timeout: 300
# guest-tcg: single
GUEST_CGROUP=v2

T=/sys/kernel/tracing

# tracefs settings as the kernel means them: a never-used buffer is its expanded size.
trace_settings() {
    top=$(cat $T/buffer_size_kb)
    expanded=$(echo "$top" | sed -n 's/.*(expanded: *\([0-9]*\)).*/\1/p')
    small=$(echo "$top" | sed -n 's/^\([0-9]*\) *(expanded.*/\1/p')
    for f in tracing_on current_tracer trace_clock tracing_cpumask buffer_size_kb \
        per_cpu/cpu0/buffer_size_kb per_cpu/cpu3/buffer_size_kb \
        events/sched/sched_switch/enable events/sched/sched_switch/filter \
        events/irq/irq_handler_entry/enable; do
        v=$(cat "$T/$f" 2>/dev/null | head -n 1)
        v=$(echo "$v" | sed 's/^[0-9]* *(expanded: *\([0-9]*\))$/\1/')
        if [ -n "$expanded" ] && [ "${f##*/}" = buffer_size_kb ] && [ "$v" = "$small" ]; then
            v=$expanded
        fi
        # Sizes are kept in whole pages: 1408 KB written reads 1410 KB, the
        # same 354 pages the kernel's own expansion gives.
        [ "${f##*/}" = buffer_size_kb ] && v="~$((v / 16 * 16))"
        echo "$f=$v"
    done
    ls $T/instances 2>/dev/null | sed 's/^/instance=/'
}

scenario_main() {
    mount -t tracefs nodev $T || { fail trace-fresh/mount "cannot mount tracefs"; return; }
    fresh=$(cat $T/buffer_size_kb)
    case "$fresh" in
        *expanded*) pass trace-fresh/never-used ;;
        *) fail trace-fresh/never-used "the guest's ring buffer was already used: buffer_size_kb reads '$fresh'" ;;
    esac
    info "before: top $(cat $T/buffer_size_kb), cpu3 $(cat $T/per_cpu/cpu3/buffer_size_kb)"
    trace_settings >/tmp/trace-before

    # A session in a private instance (the default).
    cs measure latency --cpus 3 --duration 2s --rate 200 --trace-above 1ms --trace-dir /tmp/tr1
    check_eq trace-fresh/instance-exit 0 "$CS_RC" "exit status (stderr: $(head -c 300 /tmp/cs.err))"
    trace_settings >/tmp/trace-after1
    if cmp -s /tmp/trace-before /tmp/trace-after1; then
        pass trace-fresh/instance-restored
    else
        fail trace-fresh/instance-restored "$(diff /tmp/trace-before /tmp/trace-after1 | tr '\n' ' ')"
    fi

    case "$(cat $T/buffer_size_kb) / $(cat $T/per_cpu/cpu3/buffer_size_kb)" in
        *expanded*) pass trace-fresh/no-7kb-buffer ;;  # still never used: expands on first use
        *" / 7") fail trace-fresh/no-7kb-buffer "CPU 3's buffer was left at the never-used 7 KB" ;;
        *) pass trace-fresh/no-7kb-buffer ;;
    esac
}
