# Shared by dev/bench/measure-*.sh (sourced after dev/bench/lib.sh and bench_args, not
# run): the tools and checks they need, BIN, a work directory that is removed on
# every exit path, background PIDs ended on exit, and JSON/histogram helpers.
# Everything measures on CPU 1; CPU 0 belongs to the environment.
set -euo pipefail

bench_need cyclictest oslat stress-ng jq /usr/bin/time
bench_root
grep -qw 1 <(tr ',-' '  ' </sys/devices/system/cpu/online) || bench_die "needs CPU 1 online"
bench_bin

WORK=$(mktemp -d /var/tmp/cpushield-measure-bench.XXXXXX)
BG=()
cleanup() {
    for pid in "${BG[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${BG[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# timed OUT CMD... : runs CMD, writes "elapsed user sys maxrss_kb" to OUT.
timed() {
    local out=$1; shift
    /usr/bin/time -f "%e %U %S %M" -o "$out" "$@"
}

# ns -> us with one decimal
us() { awk -v n="$1" 'BEGIN { printf "%.1f", n / 1000 }'; }

# ours_latency JSON -> "min avg p99 p99.99 max samples missed p50" (us, us, us, us, us, n, n, us)
ours_latency() {
    jq -r '.cpus[0] | [.latency.summary.min_ns, .latency.summary.mean_ns, .latency.summary.percentiles.p99_ns,
           .latency.summary.percentiles.p99_99_ns, .latency.summary.max_ns, .samples, .missed_periods,
           .latency.summary.percentiles.p50_ns]
           | "\(.[0]/1000) \(.[1]/1000) \(.[2]/1000) \(.[3]/1000) \(.[4]/1000) \(.[5]) \(.[6]) \(.[7]/1000)"' "$1" |
        awk '{ printf "%.1f %.1f %.1f %.1f %.1f %d %d %.1f\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
}

# cyclictest_hist FILE -> "min avg p99 p99.99 max samples p50" from cyclictest -h
# output (us, integer bins; overflows count as above every bin)
cyclictest_hist() {
    awk '/^[0-9]+ / { bin[n++] = $2 + 0; total += $2 }
         /^# Min Latencies/ { min = $4 + 0 }
         /^# Avg Latencies/ { avg = $4 + 0 }
         /^# Max Latencies/ { max = $4 + 0 }
         /^# Histogram Overflows/ { over = $4 + 0 }
         END {
             all = total + over; p50 = -1; p99 = -1; p9999 = -1; c = 0
             for (i = 0; i < n; i++) {
                 c += bin[i]
                 if (p50 < 0 && c >= 0.5 * all) p50 = i
                 if (p99 < 0 && c >= 0.99 * all) p99 = i
                 if (p9999 < 0 && c >= 0.9999 * all) p9999 = i
             }
             if (p50 < 0) p50 = max; if (p99 < 0) p99 = max; if (p9999 < 0) p9999 = max
             printf "%d %d %d %d %d %d %d\n", min, avg, p99, p9999, max, all, p50
         }' "$1"
}

# cpu_ms TIMEFILE -> user+sys in ms
cpu_ms() { awk '{ printf "%.0f", ($2 + $3) * 1000 }' "$1"; }
# rss_kb TIMEFILE
rss_kb() { awk '{ print $4 }' "$1"; }
