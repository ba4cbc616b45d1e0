#!/usr/bin/env bash
# --advance on CPU 1 with the machine loaded on CPU 0: how late the work starts
# after each 1 ms deadline, plain absolute sleep vs wake-early-and-spin, with
# cyclictest (same interval, priority, CPU) under the same load as the anchor.
#   load:  stress-ng --cpu 1 --taskset 0 --timeout <whole bench>   (SCHED_OTHER, CPU 0)
#   plain: cpushield measure latency --cpus 1 --interval 1ms --duration <S>s --json F
#   adv:   the same with --advance 20us, and with --advance 100us
#   ref:   cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D <S> -h 20000
# Prints per run: p50, p99, p99.99 and max of the deviation (us), the mean spin
# (us) and the wakeups that came too late to spin.
#
# Usage: dev/bench/measure-advance.sh [SECS=10] [ROUNDS=2]   (or --secs N --rounds N)
# Needs: root, rt-tests, stress-ng, jq, time; CPU 1 online. Takes 4 x ROUNDS x SECS seconds.
source "$(dirname "$0")/lib.sh"
bench_args "SECS=10 ROUNDS=2" "$@"
source dev/bench/measure-common.sh

stress-ng --cpu 1 --taskset 0 --timeout "$((4 * ROUNDS * SECS + 30))s" --quiet &
BG+=($!)
sleep 2

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), CPU 1 at FIFO 95, 1 ms period, ${SECS} s per run; load: stress-ng --cpu 1 --taskset 0"
printf "%-6s %-16s %8s %8s %9s %9s %9s %8s %8s\n" round mode p50_us p99_us p9999_us max_us spin_us late samples
for r in $(seq 1 "$ROUNDS"); do
    for adv in none 20us 100us; do
        args=()
        [ "$adv" = none ] || args=(--advance "$adv")
        "$BIN" measure latency --cpus 1 --interval 1ms --duration "${SECS}s" "${args[@]}" \
            --json "$WORK/a$r$adv.json" >/dev/null 2>"$WORK/a$r$adv.err"
        jq -r '.cpus[0] | [.latency.summary.percentiles.p50_ns, .latency.summary.percentiles.p99_ns,
               .latency.summary.percentiles.p99_99_ns, .latency.summary.max_ns,
               (.advance.spin.summary.mean_ns // 0), (.advance.late_wakeups // 0), .samples] | @tsv' \
            "$WORK/a$r$adv.json" |
            awk -v r="$r" -v m="advance $adv" '{ printf "%-6s %-16s %8.1f %8.1f %9.1f %9.1f %9.1f %8d %8d\n",
                r, m, $1 / 1000, $2 / 1000, $3 / 1000, $4 / 1000, $5 / 1000, $6, $7 }'
    done
    cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D "$SECS" -h 20000 >"$WORK/ct$r.hist" 2>/dev/null
    read -r mn av p99 p9999 mx n _ < <(cyclictest_hist "$WORK/ct$r.hist")
    p50=$(awk '/^[0-9]+ / { b[k++] = $2; t += $2 } /^# Histogram Overflows/ { t += $4 }
               END { for (i = 0; i < k; i++) { c += b[i]; if (c >= 0.5 * t) { print i; exit } } }' "$WORK/ct$r.hist")
    printf "%-6s %-16s %8s %8s %9s %9s %9s %8s %8s\n" "$r" cyclictest "$p50" "$p99" "$p9999" "$mx" - - "$n"
done
grep -h "warning" "$WORK"/a*.err | sort | uniq -c | sed 's/^/# ours: /' || true
