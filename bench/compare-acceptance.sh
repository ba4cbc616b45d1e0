#!/usr/bin/env bash
# Issue 5's acceptance run, with cyclictest as the anchor in the same run.
#
# 1. cpushield compare --duration <S>s --scenarios idle,loaded,shielded,shielded+advance
#                      --runs <R> --idle <IDLE> --out <work>/report
# 2. cyclictest on CPU 1 at compare's rate and priority (-i 488 -p 95 -m), <S> s
#    each, started through `cpushield run --cpus 1` so it lands where compare's
#    probe does:
#      idle, halting        (nothing else; the CPU's idle loop halts)
#      idle, polling        (a SCHED_IDLE spinner on CPU 1: run --idle-poll)
#      loaded, polling      (under `cpushield load stress-kernel`)
#      shielded, polling    (`cpushield shield --all 1`, the same load, then reset)
#    Every row runs inside its own private PID namespace (unshare --pid --fork
#    --mount-proc), as compare does, so the shield moves only our tasks; IRQ
#    affinities are restored by `cpushield reset` on every exit path.
#
# Usage: bench/compare-acceptance.sh [SECS=60] [RUNS=15] [IDLE=auto]
# Env:   CPUSHIELD=path to a built binary (default: cargo build --release).
# Needs: root, rt-tests (cyclictest), util-linux (unshare), CPU 1 online.
# Takes about 4 x (SECS + 10) s for compare plus 4 x SECS s for cyclictest.
set -euo pipefail
SECS=${1:-60}
RUNS=${2:-15}
IDLE=${3:-auto}

cd "$(dirname "$0")/.."
for tool in cyclictest unshare; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install rt-tests util-linux)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run as root (shield, SCHED_FIFO, IRQ affinity)" >&2; exit 1; }
grep -qw 1 <(tr ',-' '  ' </sys/devices/system/cpu/online) || { echo "needs CPU 1 online" >&2; exit 1; }
source bench/cpushield-bin.sh
WORK=$(mktemp -d /var/tmp/cpushield-acceptance.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r), $(nproc) CPUs"
echo "# command: bench/compare-acceptance.sh $SECS $RUNS $IDLE"
echo
echo "## cpushield compare"
set +e
"$BIN" compare --duration "${SECS}s" --scenarios idle,loaded,shielded,shielded+advance \
    --runs "$RUNS" --idle "$IDLE" --out "$WORK/report" </dev/null 2>&1 | tr '\r' '\n' | grep -v '^\s*\[' | grep -v '^$'
echo "(compare exit status ${PIPESTATUS[0]})"
set -e
jq -r '"determinism run times (ms): " + ([.scenarios[] | "\(.name) [\(.determinism.run_times_s | map(. * 1000 | floor) | join(" "))]"] | join("; "))' \
    "$WORK/report/report.json" 2>/dev/null || true

# cyclictest ROW SETUP: runs cyclictest on CPU 1 in a private PID namespace
# after the shell commands SETUP; POLL=1 keeps CPU 1 polling.
cyclictest_row() {
    local row=$1 setup=$2 poll=$3
    local flags="--allow-unshielded"
    [[ $poll = 1 ]] && flags="$flags --idle-poll"
    unshare --pid --fork --mount-proc env BIN="$BIN" WORK="$WORK" SECS="$SECS" FLAGS="$flags" bash -c '
        set -euo pipefail
        LOAD=
        finish() { [ -n "$LOAD" ] && kill -INT "$LOAD" 2>/dev/null && wait "$LOAD" 2>/dev/null; "$BIN" reset >/dev/null 2>&1 || true; }
        trap finish EXIT
        '"$setup"'
        "$BIN" run --cpus 1 $FLAGS -- cyclictest -m -p 95 -i 488 -a 1 -t 1 -q -D "$SECS" \
            2>&1 | grep -E "^T:" | sed "s/^/'"$row"': /"
    ' </dev/null
}
LOADCMD='"$BIN" load stress-kernel --duration $((SECS + 30))s --dir "$WORK" >/dev/null 2>&1 & LOAD=$!; sleep 2'
echo
echo "## cyclictest anchor (CPU 1, -i 488 -p 95, ${SECS} s each; Min/Avg/Max in us)"
cyclictest_row "idle, halting    " ':' 0
cyclictest_row "idle, polling    " ':' 1
cyclictest_row "loaded, polling  " "$LOADCMD" 1
cyclictest_row "shielded, polling" '"$BIN" shield --all 1 >/dev/null; '"$LOADCMD" 1
