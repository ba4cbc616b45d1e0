#!/usr/bin/env bash
# The Hyades paper's ARTiS sharing, measured: RUNS consecutive
# runs of `cpushield compare --cpus 1 --scenarios shielded,shielded+shared
# --duration <SECS>s` (stress-kernel load, private PID namespace, defaults
# otherwise). The shielded+shared scenario adds a best-effort batch job (the
# compute workload, `cpushield run --share`: SCHED_IDLE nice 19 in the shield)
# on CPU 1.
#
# Per run it prints the real-time task's 99.999 % and maximum latency without
# and with sharing, the batch job's ops/s and CPU share, and the sharing line;
# then the medians, in the form of the paper's Table 2.
#
# Usage: dev/bench/compare-shared.sh [RUNS=3] [SECS=60]   (or --runs N --secs N)
# Env:   CPUSHIELD=path to a built binary (default: cargo build --release).
#        KEEP=DIR keeps every run's report there.
# Needs: root, jq, CPU 1 online. Run nothing else meanwhile: this measures the
#        machine (and other work on CPU 1 takes the batch job's share).
# Takes about RUNS x 2 x (SECS + SECS/3 + 8) s, plus the load's start-up.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "RUNS=3 SECS=60" "$@"
bench_need jq
bench_root
bench_bin
WORK=$(mktemp -d /var/tmp/cpushield-shared.XXXXXX)
trap 'if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$WORK"/. "$KEEP"/; fi; rm -rf "$WORK"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r), $(nproc) CPUs"
echo "# command: dev/bench/compare-shared.sh $RUNS $SECS"
echo "# each run: $BIN compare --cpus 1 --scenarios shielded,shielded+shared --duration ${SECS}s"
for i in $(seq 1 "$RUNS"); do
    out="$WORK/run$i"
    set +e
    "$BIN" compare --cpus 1 --scenarios shielded,shielded+shared --duration "${SECS}s" \
        --out "$out" </dev/null >"$out.txt" 2>&1
    status=$?
    set -e
    if [ ! -f "$out/report.json" ] || [ "$(jq '.sharing == null' "$out/report.json")" = true ]; then
        echo "run $i: compare exit status $status, no sharing block:"; tail -3 "$out.txt"; continue
    fi
    jq -c --arg run "$i" '
      .sharing as $s |
      {run: ($run | tonumber),
       without_p99999_us: ($s.rows[0].p99999_ns / 1000 | floor),
       without_max_us: ($s.rows[0].max_ns / 1000 | floor),
       with_p99999_us: ($s.rows[1].p99999_ns / 1000 | floor),
       with_max_us: ($s.rows[1].max_ns / 1000 | floor),
       batch_ops_per_s: ($s.rows[1].batch_ops_per_s // 0 | floor),
       batch_cpu_pct: ($s.rows[1].batch_cpu_share_pct // 0 | . * 10 | round / 10),
       max_ratio: ($s.max_with_over_without // 0 | . * 100 | round / 100),
       keeps: $s.keeps_latency}' "$out/report.json" | tee -a "$WORK/summary.jsonl"
    grep -E '^SHARING|^sharing not judged' "$out.txt" || true
done

[ -s "$WORK/summary.jsonl" ] || bench_die "no run produced a sharing block"
echo
echo "## medians over $RUNS runs (the Hyades paper's Table 2 form; user latency of the RT task on CPU 1)"
jq -s -r '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  "| configuration | 99.999% | maximum | batch ops/s | batch CPU |",
  "|---|---|---|---|---|",
  "| shielded | \(map(.without_p99999_us) | median) us | \(map(.without_max_us) | median) us | - | - |",
  "| shielded+shared | \(map(.with_p99999_us) | median) us | \(map(.with_max_us) | median) us | \(map(.batch_ops_per_s) | median) | \(map(.batch_cpu_pct) | median) % |",
  "",
  "max with / without sharing: median \(map(.max_ratio) | median)x; sharing kept the latency (<= 2x) in \(map(select(.keeps == true)) | length) of \(length) runs"
' "$WORK/summary.jsonl"
