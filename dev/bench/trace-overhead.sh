#!/usr/bin/env bash
# What tracing costs the measured CPU: in each round, on CPU 1, 1 ms interval,
# FIFO 95, the same duration, one after the other:
#   cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D <S> -h 20000          (untraced anchor)
#   the same with --mainaffinity=0   (its main thread off CPU 1, as ours: like for like)
#   cpushield measure latency --cpus 1 --interval 1ms --priority 95 --duration <S>s
#   cpushield measure latency ... --attribute                          (traced: compare's tracer)
# Prints min/p50/p99/max (us) of each run, and for the traced run the events the
# tracer read and lost (ring-buffer overruns and dropped events of the
# instance's per_cpu/cpu1/stats, and [LOST N EVENTS] lines), then the medians
# over the rounds and the differences the issue asks about: traced p50 minus
# cyclictest's p50 (like for like and default), traced p50 minus our untraced p50.
# `--attribute` first runs 2 s untraced to set its threshold (4x that p99).
#
# With --load, `cpushield load stress-kernel` (Brosky & Rotolo's stress-kernel
# profile, unconfined) runs for the whole script.
#
# Usage: dev/bench/trace-overhead.sh [SECS=20] [ROUNDS=3] [--load]   (or --secs N --rounds N)
# Needs: root, rt-tests, jq, time; CPU 1 online. Takes about 4 x ROUNDS x SECS seconds.
source "$(dirname "$0")/lib.sh"
bench_args "SECS=20 ROUNDS=3 +LOAD" "$@"
source dev/bench/measure-common.sh

if [ "$LOAD" = 1 ]; then
    "$BIN" load stress-kernel --duration "$((ROUNDS * (4 * SECS + 15) + 10))s" \
        >"$WORK/load.out" 2>&1 &
    BG+=($!)
    sleep 3
fi

# ours_pcts JSON -> "min p50 p99 max" (us, one decimal)
ours_pcts() {
    jq -r '.cpus[0].latency.summary | [.min_ns, .percentiles.p50_ns, .percentiles.p99_ns, .max_ns]
           | map(. / 1000) | @tsv' "$1" | awk '{ printf "%.1f %.1f %.1f %.1f\n", $1, $2, $3, $4 }'
}

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), CPU 1, 1 ms interval, FIFO 95, ${SECS} s per run, ${ROUNDS} rounds, load: $([ "$LOAD" = 1 ] && echo stress-kernel || echo none)"
printf "%-6s %-18s %8s %8s %8s %10s %12s %8s\n" round run min_us p50_us p99_us max_us events lost
for r in $(seq 1 "$ROUNDS"); do
    cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D "$SECS" -h 20000 >"$WORK/ct$r.hist" 2>"$WORK/ct$r.err"
    read -r mn _ p99 _ mx _ p50 < <(cyclictest_hist "$WORK/ct$r.hist")
    printf "%-6s %-18s %8s %8s %8s %10s %12s %8s\n" "$r" cyclictest "$mn" "$p50" "$p99" "$mx" - -
    echo "$r $mn $p50" >>"$WORK/ct.rows"

    cyclictest -m -p 95 -i 1000 -a 1 --mainaffinity=0 -t 1 -q -D "$SECS" -h 20000 \
        >"$WORK/ctm$r.hist" 2>"$WORK/ctm$r.err"
    read -r mn _ p99 _ mx _ p50 < <(cyclictest_hist "$WORK/ctm$r.hist")
    printf "%-6s %-18s %8s %8s %8s %10s %12s %8s\n" "$r" "ct-main@0" "$mn" "$p50" "$p99" "$mx" - -
    echo "$r $mn $p50" >>"$WORK/ctm.rows"

    "$BIN" measure latency --cpus 1 --interval 1ms --priority 95 --duration "${SECS}s" \
        --json "$WORK/plain$r.json" >/dev/null 2>"$WORK/plain$r.err"
    read -r mn p50 p99 mx < <(ours_pcts "$WORK/plain$r.json")
    printf "%-6s %-18s %8s %8s %8s %10s %12s %8s\n" "$r" "cpushield" "$mn" "$p50" "$p99" "$mx" - -
    echo "$r $mn $p50" >>"$WORK/plain.rows"

    "$BIN" measure latency --cpus 1 --interval 1ms --priority 95 --duration "${SECS}s" --attribute \
        --trace-dir "$WORK/trace$r" --json "$WORK/traced$r.json" >"$WORK/traced$r.out" 2>"$WORK/traced$r.err"
    read -r mn p50 p99 mx < <(ours_pcts "$WORK/traced$r.json")
    read -r events lost < <(sed -n 's/.* \([0-9]*\) events read, \([0-9]*\) lost.*/\1 \2/p' "$WORK/traced$r.out" | head -1)
    printf "%-6s %-18s %8s %8s %8s %10s %12s %8s\n" "$r" "cpushield traced" "$mn" "$p50" "$p99" "$mx" \
        "${events:-?}" "${lost:-?}"
    echo "$r $mn $p50" >>"$WORK/traced.rows"
done

col() { awk -v c="$2" '{ print $c }' "$WORK/$1.rows" | median; }
ct_min=$(col ct 2) ct_p50=$(col ct 3)
ctm_min=$(col ctm 2) ctm_p50=$(col ctm 3)
pl_min=$(col plain 2) pl_p50=$(col plain 3)
tr_min=$(col traced 2) tr_p50=$(col traced 3)
echo "# medians of ${ROUNDS} rounds: min / p50 (us)"
echo "#   cyclictest untraced:  $ct_min / $ct_p50"
echo "#   cyclictest --mainaffinity=0 untraced:  $ctm_min / $ctm_p50"
echo "#   cpushield untraced:   $pl_min / $pl_p50"
echo "#   cpushield traced:     $tr_min / $tr_p50"
awk -v t="$tr_p50" -v c="$ct_p50" -v m="$ctm_p50" -v p="$pl_p50" \
    'BEGIN { printf "#   traced p50 - cyclictest --mainaffinity=0 p50: %+.1f us (target < 1 us); - default cyclictest p50: %+.1f us; - our untraced p50: %+.1f us\n", t - m, t - c, t - p }'
grep -h "warning" "$WORK"/plain*.err "$WORK"/traced*.err | sort | uniq -c | sed 's/^/# ours: /' || true
