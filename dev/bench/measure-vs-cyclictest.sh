#!/usr/bin/env bash
# `cpushield measure latency` against cyclictest on CPU 1: alternating rounds,
# same interval (1 ms), priority (FIFO 95), CPU and duration:
#   cpushield measure latency --cpus 1 --interval 1ms --priority 95 --duration <S>s --json F
#   cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D <S> -h 20000
#   cyclictest ... --mainaffinity=0   (row ct-main@0: its main thread off CPU 1, as ours)
# Prints min/avg/p50/p99/p99.99/max (us) of each run, the samples, and each
# tool's own CPU time (user+sys, from /usr/bin/time) per 1000 samples and peak
# RSS; then each tool's medians over the rounds and ours over each cyclictest's.
# cyclictest's figures are whole microseconds (it truncates); ours are to 0.1 us
# (percentiles to 3 significant digits).
#
# BASELINE=PATH (another cpushield binary, e.g. an older commit's build) adds a row
# `baseline` measured the same way in each round, the two builds taking turns to go
# first: to put a change in the figures on one commit range, with cyclictest in the same
# window.
#
# Usage: dev/bench/measure-vs-cyclictest.sh [SECS=10] [ROUNDS=3]   (or --secs N --rounds N)
# Needs: root, rt-tests, jq, time; CPU 1 online. Takes 3 x ROUNDS x SECS seconds (4 x
# with BASELINE).
source "$(dirname "$0")/lib.sh"
bench_args "SECS=10 ROUNDS=3" "$@"
source dev/bench/measure-common.sh
[ -z "${BASELINE:-}" ] || [ -x "$BASELINE" ] ||
    { echo "BASELINE=$BASELINE: not an executable file; give a cpushield binary" >&2; exit 1; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), CPU 1, 1 ms interval, ${SECS} s per run, ${ROUNDS} rounds"
row() { # round tool min avg p50 p99 p99.99 max samples cpu_ms/1k rss_kb
    printf "%-6s %-10s %8s %8s %8s %8s %8s %9s %8s %10s %9s\n" "$@"
    [ "$1" = round ] || echo "$2 $3 $4 $5 $6 ${11}" >>"$WORK/rows"
    [ "$1" = round ] || echo "$1 $2 $5" >>"$WORK/p50s"
}
# median_of: the median of the numbers on stdin, one per line.
median_of() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# paired A B: the median over the rounds of A's p50 minus B's in the same round (us).
paired() {
    awk -v a="$1" -v b="$2" '$2 == a { x[$1] = $3 } $2 == b { y[$1] = $3 }
        END { for (r in x) if (r in y) print x[r] - y[r] }' "$WORK/p50s" | median_of
}
row round tool min_us avg_us p50_us p99_us p9999_us max_us samples cpu_ms/1k rss_kb
# probe ROUND NAME BINARY FILE_STEM: one run of `measure latency` by BINARY, as row NAME.
probe() {
    timed "$WORK/$4$1.time" "$3" measure latency --cpus 1 --interval 1ms --priority 95 \
        --duration "${SECS}s" --json "$WORK/$4$1.json" >/dev/null 2>"$WORK/$4$1.err"
    read -r mn av p99 p9999 mx n missed p50 < <(ours_latency "$WORK/$4$1.json")
    row "$1" "$2" "$mn" "$av" "$p50" "$p99" "$p9999" "$mx" "$n" \
        "$(awk -v c="$(cpu_ms "$WORK/$4$1.time")" -v n="$n" 'BEGIN { printf "%.2f", c * 1000 / n }')" \
        "$(rss_kb "$WORK/$4$1.time")"
}
for r in $(seq 1 "$ROUNDS"); do
    # With a baseline, the two builds take turns going first: a host that grows
    # quieter or busier during the run favours neither.
    if [ -n "${BASELINE:-}" ] && [ $((r % 2)) = 0 ]; then
        probe "$r" baseline "$BASELINE" base
        probe "$r" cpushield "$BIN" ours
    else
        probe "$r" cpushield "$BIN" ours
        [ -z "${BASELINE:-}" ] || probe "$r" baseline "$BASELINE" base
    fi

    timed "$WORK/ct$r.time" cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D "$SECS" -h 20000 \
        >"$WORK/ct$r.hist" 2>"$WORK/ct$r.err"
    read -r mn av p99 p9999 mx n p50 < <(cyclictest_hist "$WORK/ct$r.hist")
    row "$r" cyclictest "$mn" "$av" "$p50" "$p99" "$p9999" "$mx" "$n" \
        "$(awk -v c="$(cpu_ms "$WORK/ct$r.time")" -v n="$n" 'BEGIN { printf "%.2f", c * 1000 / n }')" \
        "$(rss_kb "$WORK/ct$r.time")"

    # Like for like: cyclictest's main thread off the measured CPU, as ours is
    # (by default cyclictest's main thread shares the CPU given to -a and wakes
    # there every 10 ms, which lowers its minimum on this VM).
    timed "$WORK/cm$r.time" cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D "$SECS" -h 20000 \
        --mainaffinity=0 >"$WORK/cm$r.hist" 2>"$WORK/cm$r.err"
    read -r mn av p99 p9999 mx n p50 < <(cyclictest_hist "$WORK/cm$r.hist")
    row "$r" ct-main@0 "$mn" "$av" "$p50" "$p99" "$p9999" "$mx" "$n" \
        "$(awk -v c="$(cpu_ms "$WORK/cm$r.time")" -v n="$n" 'BEGIN { printf "%.2f", c * 1000 / n }')" \
        "$(rss_kb "$WORK/cm$r.time")"
done
# median COLUMN TOOL over the rounds (rows: tool min avg p50 p99 rss)
median() {
    awk -v t="$2" -v c="$1" '$1 == t { print $c }' "$WORK/rows" | median_of
}
echo "# medians of ${ROUNDS} rounds: min / avg / p50 / p99 (us), peak RSS (kB)"
for t in cpushield ${BASELINE:+baseline} cyclictest ct-main@0; do
    printf "#   %-10s %6s / %6s / %6s / %6s   %6s kB\n" "$t" "$(median 2 "$t")" "$(median 3 "$t")" \
        "$(median 4 "$t")" "$(median 5 "$t")" "$(median 6 "$t")"
done
for t in cyclictest ct-main@0; do
    awk -v a="$(median 2 cpushield)" -v b="$(median 2 "$t")" -v c="$(median 4 cpushield)" -v d="$(median 4 "$t")" \
        -v e="$(median 6 cpushield)" -v f="$(median 6 "$t")" -v t="$t" \
        'BEGIN { printf "#   cpushield vs %s: min %+.1f us (target within 0.5), p50 %+.1f us, in whole us as cyclictest bins %+d (target <= 0), peak RSS %.2fx (target <= 1.5)\n", t, a - b, c - d, int(c) - d, e / f }'
done
for t in ${BASELINE:+baseline} cyclictest ct-main@0; do
    printf "#   p50 paired by round, cpushield minus %s: median %+.1f us\n" "$t" "$(paired cpushield "$t")"
done
grep -h "warning" "$WORK"/ours*.err | sort | uniq -c | sed 's/^/# ours: /' || true
