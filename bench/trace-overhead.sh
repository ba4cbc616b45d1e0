#!/usr/bin/env bash
# Tracing overhead of the check crate's tracer (`measure latency --trace-above`):
# cyclictest on CPU 1 with and without our tracing of CPU 1, alternating, in
# the same run. Optionally under the stress-ng load of issue 6 (--load).
#
#   bench/trace-overhead.sh [--rounds 2] [--duration 20] [--load]   (or ROUNDS DURATION)
#
# Prints, per mode, cyclictest's latency distribution (from its -h histogram)
# and the events per second the tracer read. Needs root, cyclictest, CPU 1
# (and stress-ng for --load).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "ROUNDS=2 DURATION=20 +LOAD" "$@"
rounds=$ROUNDS duration=$DURATION load=$LOAD
bench_root
bench_need cyclictest
[ "$load" = 0 ] || bench_need stress-ng

here=$BENCH_ROOT
target="${CARGO_TARGET_DIR:-$here/target}"
cargo build --quiet --release -p cpushield-cli --example trace_spikes --manifest-path "$here/Cargo.toml"
tracer="$target/release/examples/trace_spikes"

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [ "$load" = 1 ]; then
  (cd "$work" && exec stress-ng --sock 1 --fifo 1 --mmap 1 --fp 1 --fallocate 1 --hdd 1 --opcode 1 \
      --timeout $(( rounds * 2 * (duration + 8) + 10 )) >/dev/null 2>&1) &
  pids+=($!)
  sleep 2
fi

# p50/p99/p99.9/max from a cyclictest -h histogram (one line per microsecond).
summarise() {
  awk '
    /^# Max Latencies:/ { max = $4 + 0 }
    /^# Avg Latencies:/ { avg = $4 + 0 }
    /^# Min Latencies:/ { min = $4 + 0 }
    /^# Histogram Overflows:/ { over = $4 + 0 }
    /^[0-9]+ +[0-9]+/ { n[$1 + 0] = $2; total += $2 }
    END {
      total += over
      split("0.5 0.99 0.999 0.9999", q, " ")
      for (i = 1; i <= 4; i++) { want[i] = q[i] * total; got[i] = ">20000" }
      c = 0
      for (us = 0; us < 100000; us++) {
        c += n[us]
        for (i = 1; i <= 4; i++) if (got[i] == ">20000" && c >= want[i]) got[i] = us
      }
      printf "samples %d  min %d  avg %d  p50 %s  p99 %s  p99.9 %s  p99.99 %s  max %d (us)\n", total, min, avg, got[1], got[2], got[3], got[4], max
    }' "$1"
}

run_cyclictest() {
  cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D "$duration" -h 20000 > "$1"
}

echo "tracing overhead on CPU 1: cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D $duration, $rounds rounds, load: $([ "$load" = 1 ] && echo stress-ng || echo none)"
for r in $(seq 1 "$rounds"); do
  run_cyclictest "$work/plain-$r.txt"
  echo "round $r  without tracing: $(summarise "$work/plain-$r.txt")"

  "$tracer" hold --cpus 1 --duration $(( duration + 3 )) > "$work/hold-$r.txt" 2>&1 &
  hold=$!
  pids+=($hold)
  for _ in $(seq 1 50); do grep -q '^tracing' "$work/hold-$r.txt" 2>/dev/null && break; sleep 0.1; done
  run_cyclictest "$work/traced-$r.txt"
  wait "$hold" || { echo "tracer failed:"; cat "$work/hold-$r.txt"; exit 1; }
  events=$(sed -n 's/^events read: \([0-9]*\), lost: \([0-9]*\).*/\1 events (\2 lost)/p' "$work/hold-$r.txt")
  echo "round $r  with tracing:    $(summarise "$work/traced-$r.txt")  tracer read $events in $(( duration + 3 )) s"
done
