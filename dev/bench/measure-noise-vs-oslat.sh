#!/usr/bin/env bash
# `cpushield measure noise` against oslat on CPU 1: alternating rounds, same
# CPU, duration and policy (SCHED_OTHER by default, as both tools default to):
#   cpushield measure noise --cpus 1 --duration <S>s --json F
#   oslat -c 1 -D <S> -q --json F
# With FIFO=1 both run at SCHED_FIFO 95 (cpushield --priority 95, oslat -f 95)
# and RT throttling stays as it is (this script never changes a sysctl): with
# kernel.sched_rt_runtime_us=950000 both then show the ~50 ms throttling gaps.
#
# Prints per run: loops per second, gaps above 1 us, p99.99 and max gap (us),
# and the tool's peak RSS, then the median loop rate of each tool over the
# rounds and their ratio, and the clock our loop read (tsc where the TSC is
# invariant, as oslat's; else monotonic). oslat's figures are whole
# microseconds rounded up (its buckets); ours are to 3 significant digits.
#
# Usage: dev/bench/measure-noise-vs-oslat.sh [SECS=10] [ROUNDS=3]   (or --secs N --rounds N)
# Needs: root, rt-tests, jq, time; CPU 1 online. Takes 2 x ROUNDS x SECS seconds.
source "$(dirname "$0")/lib.sh"
bench_args "SECS=10 ROUNDS=3" "$@"
source dev/bench/measure-common.sh
OURS_PRIO=()
OSLAT_PRIO=()
POLICY=SCHED_OTHER
if [ "${FIFO:-0}" = 1 ]; then
    OURS_PRIO=(--priority 95)
    OSLAT_PRIO=(-f 95)
    POLICY="SCHED_FIFO 95, sched_rt_runtime_us=$(cat /proc/sys/kernel/sched_rt_runtime_us)"
fi

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), CPU 1, ${POLICY}, ${SECS} s per run, ${ROUNDS} rounds"
printf "%-6s %-10s %12s %12s %10s %10s %9s\n" round tool loops/s "gaps>1us" p9999_us max_us rss_kb
for r in $(seq 1 "$ROUNDS"); do
    timed "$WORK/ours$r.time" "$BIN" measure noise --cpus 1 --duration "${SECS}s" "${OURS_PRIO[@]}" \
        --json "$WORK/ours$r.json" >/dev/null 2>"$WORK/ours$r.err"
    jq -r '.cpus[0] | [(.gaps.summary.count / (.elapsed_ns / 1e9)), .interruptions,
           (.gaps.summary.percentiles.p99_99_ns / 1000), (.gaps.summary.max_ns / 1000)] | @tsv' \
        "$WORK/ours$r.json" |
        awk -v r="$r" -v rss="$(rss_kb "$WORK/ours$r.time")" \
            '{ printf "%-6s %-10s %12.0f %12d %10.1f %10.1f %9s\n", r, "cpushield", $1, $2, $3, $4, rss }' |
        tee -a "$WORK/ours.rows"

    timed "$WORK/os$r.time" oslat -c 1 -D "$SECS" -q "${OSLAT_PRIO[@]}" --json "$WORK/os$r.json" \
        >/dev/null 2>"$WORK/os$r.err"
    jq -r '.thread["0"] | [.duration, .max, (.histogram | to_entries | map([(.key | tonumber), .value]))] | @json' \
        "$WORK/os$r.json" |
        jq -r '. as [$d, $max, $h] | ($h | map(.[1]) | add) as $n
               | ($h | map(select(.[0] >= 2) | .[1]) | add // 0) as $over
               | (reduce $h[] as $b ({c: 0, p: null}; .c += $b[1] | if .p == null and .c >= 0.9999 * $n then .p = $b[0] else . end)) as $q
               | [($n / $d), $over, $q.p, $max] | @tsv' |
        awk -v r="$r" -v rss="$(rss_kb "$WORK/os$r.time")" \
            '{ printf "%-6s %-10s %12.0f %12d %10d %10d %9s\n", r, "oslat", $1, $2, $3, $4, rss }' |
        tee -a "$WORK/oslat.rows"
done
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ours_rate=$(awk '{ print $3 }' "$WORK/ours.rows" | median)
oslat_rate=$(awk '{ print $3 }' "$WORK/oslat.rows" | median)
echo "# median loops/s over ${ROUNDS} rounds: cpushield ${ours_rate} ($(jq -r '.settings.clock // "monotonic"' "$WORK/ours1.json")), oslat ${oslat_rate};" \
    "ratio $(awk -v a="$ours_rate" -v b="$oslat_rate" 'BEGIN { printf "%.2f", a / b }') (target >= 1)"
grep -h "warning" "$WORK"/ours*.err | sort | uniq -c | sed 's/^/# ours: /' || true
