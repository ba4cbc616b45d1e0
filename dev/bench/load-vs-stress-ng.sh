#!/usr/bin/env bash
# How much does each built-in load disturb this machine, next to stress-ng?
#
# Part 1, per workload: interrupts/s (every counter of /proc/interrupts,
# all CPUs: device IRQs, local timer, IPIs), context switches/s (/proc/stat
# ctxt) and softirqs/s (/proc/stat softirq) while `cpushield load W` runs,
# then the same while the nearest stress-ng stressor runs, plus an idle row.
#
# Part 2: the maximum wakeup latency cyclictest sees on CPU 1
#   cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D <secs>
# idle, under `cpushield load stress-kernel` and under
#   stress-ng --sock 1 --fifo 1 --mmap 1 --fp 1 --fallocate 1 --hdd 1 --opcode 1
# alternating the two loads for ROUNDS rounds. Loads are unconfined (both
# CPUs), SCHED_OTHER; cyclictest is the only real-time task, on CPU 1.
#
# Usage: dev/bench/load-vs-stress-ng.sh [SECS=10] [CT_SECS=30] [ROUNDS=2]
#        (or --secs N --ct-secs N --rounds N): seconds per workload, cyclictest
#        seconds per run, rounds.
# Env:   SCALES (default "1"): the --scale values of our stress-kernel run
#        in part 2, e.g. SCALES="1 2" runs both in each round;
#        PART=1|2 to run one part only; CARGO_TARGET_DIR as usual;
#        CPUSHIELD=path to use a built binary instead of building one.
# Needs: root, stress-ng, rt-tests (cyclictest), gcc.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "SECS=10 CT_SECS=30 ROUNDS=2" "$@"
SCALES=${SCALES:-1}
PART=${PART:-all}
case $PART in 1 | 2 | all) ;; *) bench_die "PART=$PART: use PART=1, PART=2 or leave it unset (both)" ;; esac
bench_need stress-ng cyclictest cc
bench_bin

WORK=$(mktemp -d /var/tmp/cpushield-bench.XXXXXX)
BG=()
cleanup() {
    for pid in "${BG[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# Totals: interrupts (all rows, all CPU columns), ctxt, softirq, time (s).
snapshot() {
    local irq
    irq=$(awk 'NR == 1 { ncpu = NF; next }
               { for (i = 2; i <= ncpu + 1 && i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i }
               END { printf "%d", s }' /proc/interrupts)
    echo "$irq $(awk '/^ctxt/ { print $2 }' /proc/stat) $(awk '/^softirq/ { print $2 }' /proc/stat) $(date +%s.%N)"
}

# rates BEFORE AFTER -> "irq/s ctxt/s softirq/s"
rates() {
    echo "$1 $2" | awk '{ t = $8 - $4; printf "%.0f %.0f %.0f", ($5 - $1) / t, ($6 - $2) / t, ($7 - $3) / t }'
}

# measure CMD... -> rates while CMD runs (CMD must run about $SECS s).
measure() {
    local before after
    before=$(snapshot)
    "$@" >/dev/null 2>"$WORK/last.err" || { echo "FAILED: $*" >&2; cat "$WORK/last.err" >&2; }
    after=$(snapshot)
    rates "$before" "$after"
}

ours() { "$BIN" load "$@" --duration "${SECS}s" --dir "$WORK"; }
sng() { stress-ng "$@" --timeout "${SECS}s" --temp-path "$WORK" --quiet; }

echo "# cpushield load vs stress-ng — $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs"
echo "# command: dev/bench/load-vs-stress-ng.sh $SECS $CT_SECS $ROUNDS (SCALES=\"$SCALES\")"

if [[ $PART == all || $PART == 1 ]]; then
    echo
    echo "## Part 1: disturbance per workload, ${SECS} s each, unconfined"
    echo
    echo "| workload | irq/s | ctxt/s | softirq/s | nearest stress-ng | irq/s | ctxt/s | softirq/s |"
    echo "|---|---:|---:|---:|---|---:|---:|---:|"
    read -r i c s <<<"$(measure sleep "$SECS")"
    echo "| (idle) | $i | $c | $s | (idle) | $i | $c | $s |"
    while read -r w stressor; do
        read -r oi oc os <<<"$(measure ours "$w")"
        # shellcheck disable=SC2086
        read -r si sc ss <<<"$(measure sng $stressor)"
        echo "| $w | $oi | $oc | $os | \`$stressor\` | $si | $sc | $ss |"
    done <<'EOF'
compile --exec 1
ttcp --sock 1
fifos-mmap --fifo 1 --mmap 1
fpu --matrix 1
fs --fallocate 1
crashme --opcode 1
disknoise --hdd 1
launch --exec 1
find --getdent 1
filemove --copy-file 1
netflood --udp-flood 1
ioctl --pty 1
iodisk --hdd 1 --hdd-opts direct
compute --cpu 0
EOF
fi

# cyclictest's "Max:" and "Avg:" for one run (stdout: "max_us avg_us").
cyclic() {
    cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D "$CT_SECS" |
        awk '/Max:/ { for (i = 1; i <= NF; i++) { if ($i == "Max:") m = $(i + 1); if ($i == "Avg:") a = $(i + 1) } print m, a }'
}

# under NAME CMD...: start CMD in the background, let it settle, run
# cyclictest, stop CMD with SIGINT; prints "max_us avg_us irq/s ctxt/s softirq/s".
under() {
    local pid before after lat r
    "$@" >/dev/null 2>"$WORK/bg.err" &
    pid=$!
    BG+=("$pid")
    sleep 3
    before=$(snapshot)
    lat=$(cyclic)
    after=$(snapshot)
    r=$(rates "$before" "$after")
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    BG=("${BG[@]/$pid}")
    echo "$lat $r"
}

if [[ $PART == all || $PART == 2 ]]; then
    LONG=$((CT_SECS + 60))
    SNG_KERNEL=(--sock 1 --fifo 1 --mmap 1 --fp 1 --fallocate 1 --hdd 1 --opcode 1)
    echo
    echo "## Part 2: cyclictest max wakeup latency on CPU 1, ${CT_SECS} s per run"
    echo
    echo "cyclictest -m -p 95 -i 1000 -a 1 -t 1 -q -D $CT_SECS"
    echo
    echo "| round | load | max latency (us) | avg (us) | irq/s | ctxt/s | softirq/s |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    read -r m a i c s <<<"$(under sleep "$LONG")"
    echo "| - | idle | $m | $a | $i | $c | $s |"
    for round in $(seq 1 "$ROUNDS"); do
        for scale in $SCALES; do
            read -r m a i c s <<<"$(under "$BIN" load stress-kernel --scale "$scale" --duration "${LONG}s" --dir "$WORK")"
            echo "| $round | cpushield load stress-kernel --scale $scale | $m | $a | $i | $c | $s |"
        done
        read -r m a i c s <<<"$(under stress-ng "${SNG_KERNEL[@]}" --timeout "${LONG}s" --temp-path "$WORK" --quiet)"
        echo "| $round | stress-ng ${SNG_KERNEL[*]} | $m | $a | $i | $c | $s |"
    done
fi
