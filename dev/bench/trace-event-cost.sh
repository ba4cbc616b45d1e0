#!/usr/bin/env bash
# What each set of trace events costs the measured CPU's median wakeup, A/B
# within one run (dev/bench/trace-ab.c: a FIFO 95 timer loop on CPU 1 at 1 ms,
# the set's events enabled and disabled in turn every 200 ms in a private
# tracefs instance traced on CPU 1 only, clock mono, 16 MiB buffer, no
# reader). Sets:
#   before      the earlier event set (with sched_wakeup and
#               hrtimer_expire_entry/exit)
#   cpushield   cpushield's events now (crates/trace/src/lib.rs EVENTS)
#   local_timer_entry, sched_wakeup, sched_switch, hrtimer   one each
#   hrtimer_filtered  hrtimer_expire_entry with a filter that drops the
#               probe's own timer (function.function != hrtimer_wakeup)
# Prints every run and, per set, the median over the rounds of on-minus-off
# p50 (us).
#
# Usage: dev/bench/trace-event-cost.sh [SECS=6] [ROUNDS=3]   (or --secs N --rounds N)
# Needs: root, cc, tracefs; CPU 1 online. Takes about 7 x ROUNDS x SECS seconds.
source "$(dirname "$0")/lib.sh"
bench_args "SECS=6 ROUNDS=3" "$@"
[ "$SECS" -ge 1 ] && [ "$ROUNDS" -ge 1 ] || bench_die "SECS and ROUNDS must be at least 1"
bench_root
bench_need cc
[ "$(cat /sys/devices/system/cpu/cpu1/online 2>/dev/null || echo 1)" = 1 ] || bench_die "needs CPU 1 online"

T=/sys/kernel/tracing
MOUNTED=0
if ! mountpoint -q "$T"; then
    mount -t tracefs nodev "$T" || bench_die "cannot mount tracefs on $T"
    MOUNTED=1
fi
WORK=$(mktemp -d /tmp/trace-event-cost.XXXXXX)
I=$T/instances/cpushield-bench-$$
cleanup() {
    if [ -d "$I" ]; then
        echo 0 >"$I/tracing_on"
        echo 0 >"$I/events/enable"
        rmdir "$I"
    fi
    [ "$MOUNTED" = 0 ] || umount "$T"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
cc -O2 -Wall -pthread -o "$WORK/trace-ab" dev/bench/trace-ab.c || bench_die "cannot build dev/bench/trace-ab.c"
mkdir "$I" || bench_die "cannot create the tracefs instance $I"
echo 2 >"$I/tracing_cpumask"
echo mono >"$I/trace_clock"
echo 16384 >"$I/per_cpu/cpu1/buffer_size_kb"
echo 1 >"$I/tracing_on"

CPUSHIELD="irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry irq/softirq_exit sched/sched_switch
 irq_vectors/local_timer_entry irq_vectors/local_timer_exit irq_vectors/reschedule_entry irq_vectors/reschedule_exit
 irq_vectors/call_function_entry irq_vectors/call_function_exit irq_vectors/call_function_single_entry
 irq_vectors/call_function_single_exit irq_vectors/irq_work_entry irq_vectors/irq_work_exit
 irq_vectors/x86_platform_ipi_entry irq_vectors/x86_platform_ipi_exit irq_vectors/thermal_apic_entry
 irq_vectors/thermal_apic_exit ipi/ipi_entry ipi/ipi_exit workqueue/workqueue_execute_start workqueue/workqueue_execute_end"
events_of() {
    case $1 in
        before) echo "$CPUSHIELD sched/sched_wakeup timer/hrtimer_expire_entry timer/hrtimer_expire_exit" ;;
        cpushield) echo "$CPUSHIELD" ;;
        local_timer_entry) echo irq_vectors/local_timer_entry ;;
        sched_wakeup) echo sched/sched_wakeup ;;
        sched_switch) echo sched/sched_switch ;;
        hrtimer) echo timer/hrtimer_expire_entry timer/hrtimer_expire_exit ;;
        hrtimer_filtered) echo timer/hrtimer_expire_entry ;;
    esac
}
SETS="before cpushield local_timer_entry sched_wakeup sched_switch hrtimer hrtimer_filtered"

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), CPU 1, FIFO 95, 1 ms, ${SECS} s per set, ${ROUNDS} rounds; us"
printf "%-6s %-18s %8s %8s %8s %8s %10s\n" round set off_p50 on_p50 off_p10 on_p10 diff_p50
for r in $(seq 1 "$ROUNDS"); do
    for set in $SETS; do
        echo 0 >"$I/events/enable"
        echo 'prev_prio < 100 || next_prio < 100' >"$I/events/sched/sched_switch/filter"
        echo 'prio < 100' >"$I/events/sched/sched_wakeup/filter"
        if [ "$set" = hrtimer_filtered ]; then
            echo 'function.function != hrtimer_wakeup' >"$I/events/timer/hrtimer_expire_entry/filter"
        else
            echo 0 >"$I/events/timer/hrtimer_expire_entry/filter"
        fi
        files=""
        for ev in $(events_of "$set"); do
            [ -e "$I/events/$ev/enable" ] && files="$files $I/events/$ev/enable"
        done
        on="for f in $files; do echo 1 > \$f; done"
        off="for f in $files; do echo 0 > \$f; done"
        line=$("$WORK/trace-ab" "$SECS" "$on" "$off") || bench_die "trace-ab failed for $set"
        read -r _ _ _ offp10 _ offp50 _ _ _ _ _ onp10 _ onp50 _ _ _ diff _ _ <<<"$line"
        printf "%-6s %-18s %8s %8s %8s %8s %+10.1f\n" "$r" "$set" "$offp50" "$onp50" "$offp10" "$onp10" "$diff"
        echo "$set $diff" >>"$WORK/rows"
    done
done
echo "# median over ${ROUNDS} rounds of on-minus-off p50 (us):"
for set in $SETS; do
    awk -v s="$set" '$1 == s { print $2 }' "$WORK/rows" | sort -g |
        awk -v s="$set" '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "#   %-18s %+.1f\n", s, m }'
done
