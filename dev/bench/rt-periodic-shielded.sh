#!/usr/bin/env bash
# dev/bench/rt-periodic.sh on a shielded CPU under load, halting and polling:
# in a private PID namespace (so the shield moves only our tasks), for each of
# "halting" and "--idle-poll":
#   cpushield shield --all CPU; cpushield load stress-kernel (lands on the
#   housekeeping CPUs); cpushield run --cpus CPU [--idle-poll] -- dev/bench/rt-periodic.sh ...;
#   cpushield reset (also on failure or Ctrl-C).
#
# Usage: dev/bench/rt-periodic-shielded.sh [CPU=1] [CYCLES=5000] [PERIOD_US=1000] [ADVANCE_US=50]
#        (or --cpu N --cycles N --period-us N --advance-us N)
# Env:   CPUSHIELD=path to a built binary (default: cargo build --release).
# Needs: root, rt-tests (cyclictest), util-linux (unshare).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "CPU=1 CYCLES=5000 PERIOD_US=1000 ADVANCE_US=50" "$@"
args=("$CPU" "$CYCLES" "$PERIOD_US" "$ADVANCE_US")
cpu=$CPU
[ "$cpu" != 0 ] || bench_die "CPU 0 keeps the rest of the system: use CPU 1"
bench_root
bench_bin
# Build the bench outside the shield, so only the measurement runs on it.
cargo bench -q -p cpushield-rt --bench periodic --no-run >/dev/null 2>&1
for mode in halting --idle-poll; do
    flag=""; [[ $mode = --idle-poll ]] && flag=--idle-poll
    echo "=== CPU $cpu shielded, stress-kernel on the other CPUs, idle: $mode"
    unshare --pid --fork --mount-proc env BIN="$BIN" FLAG="$flag" ARGS="${args[*]}" CPU="$cpu" bash -c '
        set -euo pipefail
        LOAD=
        finish() { [ -n "$LOAD" ] && kill -INT "$LOAD" 2>/dev/null && wait "$LOAD" 2>/dev/null; "$BIN" reset >/dev/null 2>&1 || true; }
        trap finish EXIT
        "$BIN" shield --all "$CPU" >/dev/null
        "$BIN" load stress-kernel --duration 120s --dir /var/tmp >/dev/null 2>&1 & LOAD=$!
        sleep 2
        "$BIN" run --cpus "$CPU" $FLAG -- dev/bench/rt-periodic.sh $ARGS
    ' </dev/null
done
