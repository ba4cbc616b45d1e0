#!/usr/bin/env bash
# Changes one variable of `cpushield compare` and measures both sides in the
# same window: ROUNDS interleaved pairs (A, B, A, B, ...), each a full compare
# with cyclictest as the anchor in the loaded and shielded scenarios.
#
# Per run it prints the raw loaded/shielded ratio (ours and cyclictest's), the
# shielded worst case, how much of it came from outside the guest, the steal
# on the measured CPU and the idle policy chosen. Then the median per side.
#
# Usage: dev/bench/compare-one-variable.sh ROUNDS SECS "ARGS-A" "ARGS-B"
#   e.g. dev/bench/compare-one-variable.sh 3 30 "" "--dir /dev/shm"
#        (the load's files on the disk vs on tmpfs, all else the same)
# Env:   CPUSHIELD=path to a built binary (default: cargo build --release).
#        KEEP=DIR keeps every run's report there.
# Needs: root, rt-tests (cyclictest), jq. Run nothing else meanwhile.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# Two of the arguments are argument strings, not numbers: parsed here.
if [ $# -ne 4 ] || [[ ! $1 =~ ^[0-9]+$ ]] || [[ ! $2 =~ ^[0-9]+$ ]]; then
    bench_die "usage: $BENCH_NAME ROUNDS SECS \"ARGS-A\" \"ARGS-B\"  (e.g. 3 30 \"\" \"--dir /dev/shm\")"
fi
ROUNDS=$1
SECS=$2
ARGS_A=$3
ARGS_B=$4
bench_need cyclictest jq
bench_root
bench_bin
WORK=$(mktemp -d /var/tmp/cpushield-one-variable.XXXXXX)
trap 'if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$WORK"/. "$KEEP"/; fi; rm -rf "$WORK"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r), $(nproc) CPUs"
echo "# command: dev/bench/compare-one-variable.sh $ROUNDS $SECS \"$ARGS_A\" \"$ARGS_B\""
echo "# A: $BIN compare --duration ${SECS}s --scenarios idle,loaded,shielded $ARGS_A"
echo "# B: $BIN compare --duration ${SECS}s --scenarios idle,loaded,shielded $ARGS_B"
for i in $(seq 1 "$ROUNDS"); do
    for side in A B; do
        if [ "$side" = A ]; then args=$ARGS_A; else args=$ARGS_B; fi
        out="$WORK/$side$i"
        set +e
        # shellcheck disable=SC2086 # the side's arguments are split on purpose
        "$BIN" compare --duration "${SECS}s" --scenarios idle,loaded,shielded $args --out "$out" </dev/null >"$out.txt" 2>&1
        status=$?
        set -e
        if [ ! -f "$out/report.json" ]; then
            echo "$side$i: compare exit status $status, no report:"; tail -3 "$out.txt"; continue
        fi
        jq -c --arg side "$side" --arg run "$i" '
          def sc($n): .scenarios[] | select(.name == $n);
          {side: $side, run: ($run | tonumber),
           raw: .verdict.loaded_over_shielded,
           anchor: .verdict.anchor_loaded_over_shielded,
           pass: .verdict.pass,
           shielded_max_us: (sc("shielded").latency.max_ns / 1000 | floor),
           shielded_outside_us: (sc("shielded").attribution.outside_worst_ns // 0 | . / 1000 | floor),
           shielded_guest_us: (sc("shielded").attribution.guest_worst_ns // 0 | . / 1000 | floor),
           shielded_steal_ms: (sc("shielded").attribution.steal_ns // 0 | . / 1e6 | floor),
           cyclictest_shielded_us: (sc("shielded").anchor.max_ns // 0 | . / 1000 | floor),
           loaded_max_us: (sc("loaded").latency.max_ns / 1000 | floor),
           idle: sc("shielded").idle.policy}' "$out/report.json" | tee -a "$WORK/summary.jsonl"
    done
done

echo
echo "## medians over $ROUNDS runs per side"
jq -s -r '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  group_by(.side)[] | . as $g |
  "\($g[0].side): raw loaded/shielded median \(map(.raw) | median | . * 10 | round / 10)x (runs >= 20x: \(map(select(.raw >= 20)) | length)/\(length)),"
  + " cyclictest \(map(.anchor // 0) | median | . * 10 | round / 10)x,"
  + " shielded max \(map(.shielded_max_us) | median) us (outside \(map(.shielded_outside_us) | median) us, guest \(map(.shielded_guest_us) | median) us),"
  + " steal \(map(.shielded_steal_ms) | median) ms, cyclictest shielded max \(map(.cyclictest_shielded_us) | median) us,"
  + " loaded max \(map(.loaded_max_us) | median) us, verdict works \(map(select(.pass)) | length)/\(length)"
' "$WORK/summary.jsonl"
