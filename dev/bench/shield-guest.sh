#!/usr/bin/env bash
# Time `cpushield shield --all 3` and `cpushield reset` in the test guest with 2,500,
# 5,000 and 10,000 sleeping tasks, to show how the cost grows with the number of tasks.
#
#   dev/bench/shield-guest.sh [TASKS...]        # default: 2500 5000 10000
#
# The guest is QEMU under software emulation (TCG): absolute times are many times those of
# real hardware and only the growth with the task count means anything.
set -eu
source "$(dirname "$0")/lib.sh"
bench_args "TASKS..." "$@"
[ ${#TASKS[@]} -gt 0 ] || TASKS=(2500 5000 10000)
set -- "${TASKS[@]}"
ROOT=$BENCH_ROOT
CACHE="${GUEST_CACHE:-$ROOT/target/guest}"
. "$ROOT/dev/guest/kernels.sh"
export GUEST_KERNEL="${GUEST_KERNEL:-$GUEST_KERNEL_DEFAULT}"
LOG="$CACHE/logs/$GUEST_KERNEL/bench.log"

"$ROOT/dev/guest/build-initramfs.sh" >/dev/null
RESULTS=""
for n in "$@"; do
    if GUEST_NO_BUILD=1 GUEST_QUIET=1 "$ROOT/dev/guest/run.sh" bench "cpushield.tasks=$n" >/dev/null 2>&1; then
        line=$(sed -n 's/.*GUEST-BENCH //p' "$LOG")
        RESULTS="$RESULTS$line
"
        echo "bench: $line" >&2
    else
        echo "bench: run with $n tasks failed; see $LOG:" >&2
        grep 'GUEST-FAIL' "$LOG" >&2 || tail -n 20 "$LOG" >&2
        exit 1
    fi
done

echo "cpushield shield/reset in a 4-CPU QEMU guest (TCG software emulation, Debian $GUEST_KERNEL kernel)"
echo "NOTE: emulated-guest times are not hardware times; compare the growth with task count only."
printf '%10s %12s %12s %14s %14s\n' tasks shield_ms reset_ms shield_us/task reset_us/task
printf '%s' "$RESULTS" | while read -r t s r; do
    t=${t#tasks=}; s=${s#shield_ms=}; r=${r#reset_ms=}
    printf '%10s %12s %12s %14s %14s\n' "$t" "$s" "$r" $((s * 1000 / t)) $((r * 1000 / t))
done
