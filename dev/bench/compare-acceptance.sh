#!/usr/bin/env bash
# The verdict's stability: N consecutive runs of `cpushield compare --duration <S>s`
# with default settings (idle policy calibrated per scenario, every spike traced and
# explained, cyclictest run in the loaded and shielded scenarios as the anchor, its
# wakeups traced and split as the probe's are), then, unless --no-demo, one
# `cpushield demo`, timed.
#
# Per run it prints: the verdict line, its category (works, works-with-remaining,
# leaks, cannot-judge), the effect (the worst case caused inside the guest, loaded /
# shielded, with its low end and its spread over slices of the loaded probe), the raw
# ratio, each anchor's line as the report sets it beside the verdict ("in the guest
# 21.0x: agrees"), what remains with what removes it, each scenario's share of latency
# above the threshold charged to a named cause, its time outside the guest next to
# /proc/stat steal, and the shielded guest causes above 100 us. Then, over the runs:
# how many gave each category (the acceptance: one category in every run), how many
# anchors agreed, disagreed or could not be compared, and the medians.
#
# Usage: dev/bench/compare-acceptance.sh [RUNS=5] [SECS=30] [--no-demo]
#        (or --runs N --secs N)
# Env:   CPUSHIELD=path to a built binary (default: cargo build --release).
#        KEEP=DIR keeps every run's report (report.json, report.html, plots) there.
# Needs: root, rt-tests (cyclictest), jq, CPU 1 online. Run nothing else
#        meanwhile: this measures the machine.
# Takes about RUNS x (4 x (SECS + SECS/3 + 8) + SECS) s, plus ~2.5 min for the demo.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "RUNS=5 SECS=30 +NO_DEMO" "$@"
bench_need cyclictest jq
bench_root
bench_bin
WORK=$(mktemp -d /var/tmp/cpushield-acceptance.XXXXXX)
trap 'if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$WORK"/. "$KEEP"/; fi; rm -rf "$WORK"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r), $(nproc) CPUs, $("$BIN" --version 2>/dev/null || echo cpushield)"
echo "# command: dev/bench/compare-acceptance.sh $RUNS $SECS  (each run: $BIN compare --duration ${SECS}s)"
for i in $(seq 1 "$RUNS"); do
    echo
    echo "## run $i/$RUNS ($(date -u +%H:%M:%S))"
    set +e
    "$BIN" compare --duration "${SECS}s" --out "$WORK/run$i" </dev/null >"$WORK/run$i.txt" 2>&1
    status=$?
    set -e
    echo "compare exit status $status"
    if [ ! -s "$WORK/run$i/report.json" ]; then
        echo "no report.json; its output:"
        tail -n 20 "$WORK/run$i.txt"
        continue
    fi
    jq -r '
      def ms: . / 1e6 | (. * 100 | round) / 100;
      def x: if . == null then "-" else (. * 10 | round / 10 | tostring) + "x" end;
      .verdict as $v
      | $v.line,
      "category \($v.category) | effect in the guest \($v.guest_loaded_over_shielded | x)"
        + " (low \($v.guest_loaded_over_shielded_low | x)"
        + (if $v.effect_slices then "; \($v.effect_slices.min | x)-\($v.effect_slices.max | x) over \($v.effect_slices.count) slices" else "" end)
        + ") | raw \($v.loaded_over_shielded | x) | pass=\($v.pass) | anchors agree=\($v.anchor_agrees)",
      ($v.anchors[] | "anchor \(.tool): \(.line) (\(.terms): loaded \(.loaded_ns | ms) ms, shielded \(.shielded_ns | ms) ms)"),
      ($v.remains[] | "remains, needs \(.needs): \(.what | join(", ")) (fix: \(.fix))"),
      (.scenarios[] | "  \(.name): max \(.latency.max_ns | ms) ms, idle \(.idle.policy) (halt \((.idle.halt_max_ns // 0) | ms) / poll \((.idle.poll_max_ns // 0) | ms) ms)"
        + (if .attribution then
             ", above \(.attribution.threshold_ns / 1000 | floor) us: \(.attribution.samples_above) samples (\(.attribution.samples_with_outside) with time outside), named \(if .attribution.latency_ns == 0 then "- (nothing above)" else "\((.attribution.named_ns * 1000 / .attribution.latency_ns | round) / 10)%" end)"
             + ", guest worst \(.attribution.guest_worst_ns | ms) ms (low \((.attribution.guest_worst_low_ns // .attribution.guest_worst_ns) | ms)), outside max \(.attribution.outside_worst_ns | ms) ms"
             + ", outside total \(.attribution.outside_ns | ms) ms vs steal \(.attribution.steal_ns | ms) ms"
           else "" end)
        + (if .anchor then ", cyclictest max \(.anchor.max_ns | ms) ms" + (if .anchor.attribution then " (\(.anchor.traced_wakeups) wakeups traced, guest worst \(.anchor.attribution.guest_worst_ns | ms) ms)" else " (not traced)" end) else "" end)
        + (if .determinism then ", jitter \(.determinism.jitter_pct * 100 | round / 100)% (guest \(.determinism.guest_jitter_pct // 0 | . * 100 | round / 100)%)" else "" end))
    ' "$WORK/run$i/report.json"
    # The shielded scenario's guest causes above 100 us, and whether each has a fix.
    jq -r '.scenarios[] | select(.name == "shielded") | .attribution.causes[]?
      | select(.guest and .worst_ns > 100000)
      | "  shielded guest cause > 100 us: \(.kind) \(.name), worst \(.worst_ns / 1000 | floor) us, fix: \(.fix // "NONE")"' \
        "$WORK/run$i/report.json"
    jq -c '{category: .verdict.category, raw: .verdict.loaded_over_shielded, guest: .verdict.guest_loaded_over_shielded, guest_low: .verdict.guest_loaded_over_shielded_low, anchors: [.verdict.anchors[] | {tool, terms, ratio, agrees}], agrees: .verdict.anchor_agrees, shielded_guest_ns: (.scenarios[] | select(.name=="shielded") | .attribution.guest_worst_ns), min_named: ([.scenarios[] | .attribution | select(. and .latency_ns > 0) | (.named_ns / .latency_ns)] | min)}' \
        "$WORK/run$i/report.json" >>"$WORK/summary.jsonl"
done

echo
echo "## over $RUNS runs"
if [ -s "$WORK/summary.jsonl" ]; then
    jq -s -r '
      def median: sort | if length == 0 then null elif length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
      def r: if . == null then "-" else (. * 10 | round / 10 | tostring) + "x" end;
      "verdict categories: \(group_by(.category) | map("\(.[0].category) \(length)") | join(", ")) of \(length) runs; the same in every run: \(if (map(.category) | unique | length) == 1 and length == '"$RUNS"' then "yes" else "NO" end)",
      "anchors: \([.[].anchors[]] | group_by(.tool) | map("\(.[0].tool): agrees \(map(select(.agrees == true)) | length), DISAGREES \(map(select(.agrees == false)) | length), not compared \(map(select(.agrees == null)) | length), in the guest \(map(select(.terms == "in the guest")) | length)/\(length)") | join("; "))",
      "effect in the guest: median \(map(.guest) | median | r) (low ends: median \(map(.guest_low // .guest) | median | r)); raw: median \(map(.raw) | median | r); cyclictest in the guest: median \([.[].anchors[] | select(.tool == "cyclictest") | .ratio] | median | r)",
      "shielded guest-caused worst: median \(map(.shielded_guest_ns) | median / 1000 | floor) us, max \(map(.shielded_guest_ns) | max / 1000 | floor) us",
      "lowest share of latency above the threshold charged to a named cause, per run: \(map(if .min_named == null then "-" else "\(.min_named * 1000 | round / 10)%" end) | join(", "))"
    ' "$WORK/summary.jsonl"
else
    echo "no run wrote a report"
fi

if [ "$NO_DEMO" = 1 ]; then
    exit 0
fi
echo
echo "## cpushield demo"
start=$(date +%s)
set +e
"$BIN" demo --out "$WORK/demo" </dev/null >"$WORK/demo.txt" 2>&1
status=$?
set -e
end=$(date +%s)
echo "demo exit status $status, $((end - start)) s"
grep -E '^(SHIELD|CANNOT|still reaching)' "$WORK/demo.txt" || true
if [ -s "$WORK/demo/report.json" ]; then
    jq -r '"category \(.verdict.category)", (.verdict.anchors[] | "anchor \(.tool): \(.line)")' "$WORK/demo/report.json"
fi
