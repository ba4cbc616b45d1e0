#!/usr/bin/env bash
# `cpushield measure net` against sockperf: ping-pong round trips over
# loopback, rounds interleaved, same CPUs, size, duration and policy:
#   cpushield measure net --cpus A,B --sizes S --protocols P --duration <T>s --json F
#   taskset -c B sockperf server -i 127.0.0.1 -p PORT [--tcp]
#   taskset -c A sockperf ping-pong -i 127.0.0.1 -p PORT -m S -t T --full-rtt [--tcp]
# Both report full round-trip times (sockperf's --full-rtt; without it sockperf
# prints half). CPUS (default 1,1: client and server both on CPU 1; CPU 0
# belongs to the environment), SIZE (default 64) and FIFO=1 (both ends at
# SCHED_FIFO 95: ours --priority 95, sockperf under chrt -f 95) come from the
# environment. SHIELD=1 runs everything in a private PID namespace with both CPUs
# shielded (`cpushield shield --all CPUS`, reset on every exit): ours enters the shield
# by itself, sockperf through `cpushield run --cpus CPU [--fifo 95]`. LOAD=NAME runs
# `cpushield load NAME` (unconfined: with SHIELD=1 it lands on the other CPUs) for the
# whole comparison, e.g. LOAD=artis.
#
# Prints per round and protocol: p50, mean, p99 and max round trip (us) and
# round trips per second for each tool, then the medians over the rounds and
# ours/sockperf of the median p50 (the acceptance: within 20 % at 64 B).
#
# Usage: dev/bench/net-vs-sockperf.sh [SECS=2] [ROUNDS=3]   (or --secs N --rounds N)
# Needs: root (for FIFO and SHIELD), sockperf, jq, util-linux (unshare).
# Takes about 2 x 2 x ROUNDS x (SECS+1) seconds.
source "$(dirname "$0")/lib.sh"
bench_args "SECS=2 ROUNDS=3" "$@"
set -euo pipefail
bench_need sockperf jq taskset
if [ "${SHIELD:-0}" = 1 ] && [ -z "${CPUSHIELD_NET_BENCH_INNER:-}" ]; then
    bench_root
    bench_bin
    # The shield moves only the tasks of this namespace.
    exec unshare --pid --fork --mount-proc env CPUSHIELD_NET_BENCH_INNER=1 CPUSHIELD="$BIN" \
        bash "$0" --secs "$SECS" --rounds "$ROUNDS" </dev/null
fi
CPUS=${CPUS:-1,1}
SIZE=${SIZE:-64}
CLIENT=${CPUS%%,*}
SERVER=${CPUS##*,}
[[ $CLIENT =~ ^[0-9]+$ && $SERVER =~ ^[0-9]+$ ]] || bench_die "CPUS=$CPUS: give CLIENT,SERVER, e.g. CPUS=1,1"
[[ $SIZE =~ ^[0-9]+$ ]] || bench_die "SIZE=$SIZE: give a byte count, e.g. SIZE=64"
[ "$SECS" -gt 0 ] || bench_die "SECS must be at least 1"
bench_bin

OURS_PRIO=()
CHRT=()
POLICY=SCHED_OTHER
if [ "${FIFO:-0}" = 1 ]; then
    bench_root
    OURS_PRIO=(--priority 95)
    CHRT=(chrt -f 95)
    POLICY="SCHED_FIFO 95"
fi

WORK=$(mktemp -d /var/tmp/cpushield-net-bench.XXXXXX)
SERVER_PID=
LOAD_PID=
SHIELDED=0
cleanup() {
    for pid in $SERVER_PID $LOAD_PID; do
        kill -INT "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    [ "$SHIELDED" = 0 ] || "$BIN" reset >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# place CPU CMD...: exec CMD on CPU (through the shield when SHIELD=1) at the policy
# asked. It replaces the calling shell, so call it in a subshell: `(place ...) &` then
# leaves $! the PID of CMD itself (cpushield run and taskset exec it), which kill reaches.
place() {
    local cpu=$1; shift
    if [ "${SHIELD:-0}" = 1 ]; then
        local fifo=()
        [ "${FIFO:-0}" = 1 ] && fifo=(--fifo 95)
        exec "$BIN" run --cpus "$cpu" "${fifo[@]}" -- "$@"
    else
        exec "${CHRT[@]}" taskset -c "$cpu" "$@"
    fi
}
if [ "${SHIELD:-0}" = 1 ]; then
    SHIELDED=1
    "$BIN" shield --all "$CPUS" >/dev/null
    POLICY="$POLICY, CPUs $CPUS shielded"
fi
if [ -n "${LOAD:-}" ]; then
    "$BIN" load "$LOAD" --duration 1h --dir /var/tmp >"$WORK/load.out" 2>&1 &
    LOAD_PID=$!
    sleep 2
    POLICY="$POLICY, load $LOAD"
fi
PORT=$((20000 + $$ % 20000))

# ours PROTO ROUND -> "p50 mean p99 max trips/s"
ours() {
    local json="$WORK/ours-$1-$2.json"
    "$BIN" measure net --cpus "$CPUS" --sizes "$SIZE" --protocols "$1" --duration "${SECS}s" \
        "${OURS_PRIO[@]}" --json "$json" >/dev/null 2>"$WORK/ours-$1-$2.err"
    jq -r '.results[0] | [.rtt.summary.percentiles.p50_ns, .rtt.summary.mean_ns,
           .rtt.summary.percentiles.p99_ns, .rtt.summary.max_ns, .round_trips_per_s] | @tsv' "$json" |
        awk '{ printf "%.2f %.2f %.2f %.1f %.0f\n", $1 / 1000, $2 / 1000, $3 / 1000, $4 / 1000, $5 }'
}

# theirs PROTO ROUND -> "p50 mean p99 max trips/s"
theirs() {
    local tcp=() out="$WORK/sockperf-$1-$2.txt" port=$((PORT + 2 * $2))
    [ "$1" = tcp ] && tcp=(--tcp) && port=$((port + 1))
    # A port per round and protocol: theirs runs in a pipeline's subshell, so a
    # counter would not advance, and a server still bound would answer instead.
    (place "$SERVER" sockperf server -i 127.0.0.1 -p "$port" "${tcp[@]}") \
        >"$WORK/sockperf-server.log" 2>&1 &
    SERVER_PID=$!
    sleep 0.5
    (place "$CLIENT" sockperf ping-pong -i 127.0.0.1 -p "$port" -m "$SIZE" \
        -t "$SECS" --full-rtt "${tcp[@]}") >"$out" 2>&1 || bench_die "sockperf failed: $(tail -3 "$out")"
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
    sed 's/\x1b\[[0-9;]*m//g' "$out" | awk '
        /Valid Duration/ { for (i = 1; i <= NF; i++) if ($i ~ /^RunTime=/) { split($i, a, "="); secs = a[2] + 0 }
                           for (i = 1; i <= NF; i++) if ($i ~ /^ReceivedMessages=/) { split($i, b, "="); n = b[2] + 0 } }
        /avg-rtt=/ { sub(/.*avg-rtt=/, ""); mean = $0 + 0 }
        /percentile 50.000 =/ { p50 = $NF }
        /percentile 99.000 =/ { p99 = $NF }
        /<MAX> observation =/ { max = $NF }
        END { printf "%.2f %.2f %.2f %.1f %.0f\n", p50, mean, p99, max, (secs > 0 ? n / secs : 0) }'
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), loopback, client CPU $CLIENT, server CPU $SERVER, $POLICY, $SIZE B, ${SECS} s per run, $ROUNDS rounds"
printf "%-6s %-5s %-10s %9s %9s %9s %9s %10s\n" round proto tool p50_us mean_us p99_us max_us trips/s
for r in $(seq 1 "$ROUNDS"); do
    for proto in udp tcp; do
        ours "$proto" "$r" | tee -a "$WORK/ours-$proto.all" |
            awk -v r="$r" -v p="$proto" '{ printf "%-6s %-5s %-10s %9s %9s %9s %9s %10s\n", r, p, "cpushield", $1, $2, $3, $4, $5 }'
        theirs "$proto" "$r" | tee -a "$WORK/sockperf-$proto.all" |
            awk -v r="$r" -v p="$proto" '{ printf "%-6s %-5s %-10s %9s %9s %9s %9s %10s\n", r, p, "sockperf", $1, $2, $3, $4, $5 }'
    done
done

# median of column 1 (p50) of FILE
median_p50() { sort -g -k1,1 "$1" | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
echo "# medians over $ROUNDS rounds of the round-trip p50 (us)"
for proto in udp tcp; do
    o=$(median_p50 "$WORK/ours-$proto.all")
    t=$(median_p50 "$WORK/sockperf-$proto.all")
    awk -v p="$proto" -v o="$o" -v t="$t" 'BEGIN {
        ratio = (t > 0 ? o / t : 0)
        verdict = (ratio > 1.2 ? "MORE than 20 % slower" : ratio < 0.8 ? "more than 20 % faster: check both time the same round trip" : "within 20 %")
        printf "%-5s cpushield %.2f  sockperf %.2f  ours/sockperf %.3f  %s\n", p, o, t, ratio, verdict }'
done
grep -h "warning" "$WORK"/ours-*.err | sort | uniq -c | sed 's/^/# ours: /' || true
