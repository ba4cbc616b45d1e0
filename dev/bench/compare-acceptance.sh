#!/usr/bin/env bash
# The verdict's stability: N consecutive runs of `cpushield compare --duration <S>s`
# with default settings (idle policy calibrated per scenario, every spike
# traced and explained, cyclictest run in the loaded and shielded scenarios as
# the anchor), then one `cpushield demo`, timed.
#
# Per run it prints: the verdict, the raw loaded/shielded ratio, the ratio of
# the worst cases caused inside the guest, cyclictest's loaded/shielded ratio
# from the same run and whether the verdict agrees with it, each scenario's
# share of latency above the threshold charged to a named cause, its time
# outside the guest next to /proc/stat steal, and the shielded guest-caused
# worst case with what still reaches the shielded CPU. Then the medians.
#
# Usage: dev/bench/compare-acceptance.sh [RUNS=5] [SECS=30]   (or --runs N --secs N)
# Env:   CPUSHIELD=path to a built binary (default: cargo build --release).
#        KEEP=DIR keeps every run's report (report.json, report.html, plots) there.
# Needs: root, rt-tests (cyclictest), jq, CPU 1 online. Run nothing else
#        meanwhile: this measures the machine.
# Takes about RUNS x (4 x (SECS + SECS/3 + 8) + SECS) s, plus ~2.5 min for the demo.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "RUNS=5 SECS=30" "$@"
bench_need cyclictest jq
bench_root
bench_bin
WORK=$(mktemp -d /var/tmp/cpushield-acceptance.XXXXXX)
trap 'if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$WORK"/. "$KEEP"/; fi; rm -rf "$WORK"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r), $(nproc) CPUs"
echo "# command: dev/bench/compare-acceptance.sh $RUNS $SECS  (each run: $BIN compare --duration ${SECS}s)"
for i in $(seq 1 "$RUNS"); do
    echo
    echo "## run $i/$RUNS ($(date -u +%H:%M:%S))"
    set +e
    "$BIN" compare --duration "${SECS}s" --out "$WORK/run$i" </dev/null >"$WORK/run$i.txt" 2>&1
    status=$?
    set -e
    echo "compare exit status $status"
    grep -E '^(SHIELD|still reaching|note)' "$WORK/run$i.txt" || true
    jq -r '
      def ms: . / 1e6 | (. * 100 | round) / 100;
      def sc($n): .scenarios[] | select(.name == $n);
      "raw loaded/shielded \(.verdict.loaded_over_shielded // 0 | . * 10 | round / 10)x"
      + " | guest loaded/shielded \(.verdict.guest_loaded_over_shielded // 0 | . * 10 | round / 10)x"
      + " | cyclictest loaded/shielded \(.verdict.anchor_loaded_over_shielded // 0 | . * 10 | round / 10)x"
      + " (loaded \((sc("loaded").anchor.max_ns // 0) | ms) ms, shielded \((sc("shielded").anchor.max_ns // 0) | ms) ms)"
      + " | verdict pass=\(.verdict.pass) agrees-with-anchor=\(.verdict.anchor_agrees)",
      (.scenarios[] | "  \(.name): max \(.latency.max_ns | ms) ms, idle \(.idle.policy) (halt \((.idle.halt_max_ns // 0) | ms) / poll \((.idle.poll_max_ns // 0) | ms) ms)"
        + (if .attribution then
             ", above \(.attribution.threshold_ns / 1000 | floor) us: \(.attribution.samples_above) samples, named \((.attribution.named_ns * 1000 / ([.attribution.latency_ns, 1] | max) | round) / 10)%"
             + ", guest worst \(.attribution.guest_worst_ns | ms) ms, outside max \(.attribution.outside_worst_ns | ms) ms"
             + ", outside total \(.attribution.outside_ns | ms) ms vs steal \(.attribution.steal_ns | ms) ms"
           else "" end)
        + (if .determinism then ", jitter \(.determinism.jitter_pct * 100 | round / 100)% (guest \(.determinism.guest_jitter_pct // 0 | . * 100 | round / 100)%)" else "" end))
    ' "$WORK/run$i/report.json"
    # The shielded scenario's guest causes above 100 us, and whether each has a fix.
    jq -r '.scenarios[] | select(.name == "shielded") | .attribution.causes[]?
      | select(.guest and .worst_ns > 100000)
      | "  shielded guest cause > 100 us: \(.kind) \(.name), worst \(.worst_ns / 1000 | floor) us, fix: \(.fix // "NONE")"' \
        "$WORK/run$i/report.json"
    jq -c '{raw: .verdict.loaded_over_shielded, guest: .verdict.guest_loaded_over_shielded, anchor: .verdict.anchor_loaded_over_shielded, pass: .verdict.pass, agrees: .verdict.anchor_agrees, shielded_guest_ns: (.scenarios[] | select(.name=="shielded") | .attribution.guest_worst_ns), min_named: ([.scenarios[] | .attribution | select(.) | (.named_ns / ([.latency_ns,1]|max))] | min), unfixed_over_100us: ([.scenarios[] | select(.name=="shielded") | .attribution.causes[]? | select(.guest and .worst_ns > 100000 and .fix == null and .kind != "self")] | length)}' \
        "$WORK/run$i/report.json" >>"$WORK/summary.jsonl"
done

echo
echo "## over $RUNS runs (median)"
jq -s -r '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  "raw loaded/shielded: median \(map(.raw) | median | . * 10 | round / 10)x, runs >= 20x: \(map(select(.raw >= 20)) | length)/\(length)",
  "guest loaded/shielded: median \(map(.guest) | median | . * 10 | round / 10)x",
  "cyclictest loaded/shielded: median \(map(.anchor // 0) | median | . * 10 | round / 10)x",
  "verdict says the shield works: \(map(select(.pass)) | length)/\(length); agrees with its anchor: \(map(select(.agrees != false)) | length)/\(length)",
  "shielded guest-caused worst: median \(map(.shielded_guest_ns) | median / 1000 | floor) us, max \(map(.shielded_guest_ns) | max / 1000 | floor) us",
  "lowest share of latency above the threshold charged to a named cause, per run: \(map(.min_named * 1000 | round / 10) | join("%, "))%",
  "shielded guest causes above 100 us without a fix (the probe own path, kind self, not counted), per run: \(map(.unfixed_over_100us) | map(tostring) | join(", "))"
' "$WORK/summary.jsonl"

echo
echo "## cpushield demo"
start=$(date +%s)
set +e
"$BIN" demo --out "$WORK/demo" </dev/null >"$WORK/demo.txt" 2>&1
status=$?
set -e
end=$(date +%s)
echo "demo exit status $status, $((end - start)) s"
grep -E '^(SHIELD|still reaching)' "$WORK/demo.txt" || true
