#!/usr/bin/env bash
# Peak memory (max RSS from /usr/bin/time, which includes what mlockall pinned)
# of a short latency run against fast-forwarded long ones, next to cyclictest
# doing the same runs. An hour at 2048 Hz is 7.4 M samples; the long runs get
# their samples faster with a 20 us interval (every wakeup that is not late is
# a sample; the rest are counted as missed periods), so the sample counts
# reached are printed and converted to "minutes at 2048 Hz". Two long runs, one
# twice the other, show whether memory grows with the sample count.
#   short:  cpushield measure latency --cpus 1 --duration 10s          (2048 Hz)
#   long:   cpushield measure latency --cpus 1 --interval 20us --duration <L/2>s
#   longer: cpushield measure latency --cpus 1 --interval 20us --duration <L>s
#   cyclictest -m -p 95 -a 1 -t 1 -q -h 20000 with -i 488 -D 10 and -i 20 -D <L>
#
# Usage: dev/bench/measure-memory.sh [LONG=60]   (or --long N): seconds of the longer run
# Needs: root, rt-tests, jq, time; CPU 1 online. Takes 20 + 2.5 x LONG seconds.
source "$(dirname "$0")/lib.sh"
bench_args "LONG=60" "$@"
source dev/bench/measure-common.sh

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), CPU 1, FIFO 95"
printf "%-10s %-28s %10s %10s %12s\n" tool run samples min@2048Hz maxrss_kb
run_ours() {
    local name=$1; shift
    timed "$WORK/$name.time" "$BIN" measure latency --cpus 1 "$@" --json "$WORK/$name.json" >/dev/null 2>&1
    local n
    n=$(jq '.cpus[0].samples' "$WORK/$name.json")
    printf "%-10s %-28s %10d %10.1f %12s\n" cpushield "$*" "$n" "$(awk -v n="$n" 'BEGIN { print n / 2048 / 60 }')" \
        "$(rss_kb "$WORK/$name.time")"
}
run_ct() {
    local name=$1; shift
    timed "$WORK/$name.time" cyclictest -m -p 95 -a 1 -t 1 -q -h 20000 "$@" >"$WORK/$name.hist" 2>/dev/null
    local n
    n=$(cyclictest_hist "$WORK/$name.hist" | awk '{ print $6 }')
    printf "%-10s %-28s %10d %10.1f %12s\n" cyclictest "$*" "$n" "$(awk -v n="$n" 'BEGIN { print n / 2048 / 60 }')" \
        "$(rss_kb "$WORK/$name.time")"
}
run_ours short --duration 10s
run_ours long --interval 20us --duration "$((LONG / 2))s"
run_ours longer --interval 20us --duration "${LONG}s"
run_ct ct-short -i 488 -D 10
run_ct ct-long -i 20 -D "$LONG"
