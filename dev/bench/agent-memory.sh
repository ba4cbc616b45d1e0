#!/usr/bin/env bash
# Memory of `cpushield agent` over hours, fast-forwarded: the hidden
# `--fast-forward N` runs N looks back to back (no sleep; each look is a full
# one: drift on IRQs, tasks and CPUs, counters, check's analysis every 10
# looks, a scrape's rendering and a textfile write) and prints the resident
# memory after one minute's worth of looks (60 at the 1 s interval) and after
# all N. Flat memory: the two RSS values agree to within the allocator's noise.
# The shield is up on CPU 1 for the run, inside a private PID namespace, and
# reset afterwards (also on failure).
#
# Usage: dev/bench/agent-memory.sh [LOOKS=3600]   (or --looks N); 3600 = 1 hour at 1 s
# Needs: root, unshare; CPU 1 online. A 1-hour run takes well under a minute.
source "$(dirname "$0")/lib.sh"
bench_args "LOOKS=3600" "$@"
bench_root
bench_need unshare
bench_bin
[ "$LOOKS" -ge 60 ] || bench_die "LOOKS $LOOKS is below one minute's worth (60): give at least 60"

WORK=$(mktemp -d)
export CPUSHIELD_STATE_DIR="$WORK/state"
cleanup() {
    # The namespace is gone by now: undo what a failed run left behind.
    if [ -e "$CPUSHIELD_STATE_DIR/state.json" ]; then
        "$BIN" reset --namespace-gone >/dev/null 2>&1 || echo "$BENCH_NAME: reset failed: run cpushield reset --namespace-gone with CPUSHIELD_STATE_DIR=$CPUSHIELD_STATE_DIR" >&2
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
printf '[shield]\nall = "1"\n[agent]\ninterval = "1s"\n' >"$WORK/cpushield.toml"

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), shield on CPU 1, $LOOKS looks at 1 s"
# shellcheck disable=SC2016
unshare --pid --fork --mount-proc bash -c '
    set -e
    "$0" apply --config "$1" >/dev/null
    trap "\"$0\" reset >/dev/null" EXIT
    "$0" agent --config "$1" --fast-forward "$2" --textfile "$3/cpushield.prom"
' "$BIN" "$WORK/cpushield.toml" "$LOOKS" "$WORK"
