#!/bin/sh
# Boot the test guest on one scenario and report.
#
#   tests/guest/run.sh SCENARIO [KERNEL_ARG...]
#
# SCENARIO is a file tests/guest/scenarios/SCENARIO.sh; extra kernel arguments (for example
# nohz_full=3 rcu_nocbs=3) are appended to the command line. Exit status 0 only if the guest
# printed GUEST-DONE and no GUEST-FAIL line. The console log is kept in
# target/guest/logs/SCENARIO.log.
#
# A scenario file may carry headers read here:
#   # guest-mem: MiB        guest memory (default 512)
#   # guest-timeout: SEC    wall-clock limit for the boot (default 300)
#   # guest-append: ARGS    kernel arguments the scenario always needs
#   # guest-smp: SPEC       QEMU -smp value, e.g. 4,threads=2 for SMT (default 4)
#   # guest-cpu: MODEL      QEMU -cpu value (default max; SMT under TCG needs an Intel
#                           vendor, e.g. max,vendor=GenuineIntel: QEMU's AMD max has no
#                           hyperthreading without topoext)
#
# Environment: GUEST_CACHE (default target/guest), GUEST_NO_BUILD=1 to reuse an existing
# initramfs instead of rebuilding it, GUEST_SMP (default 4), GUEST_TIMEOUT, GUEST_MEM override
# the headers, GUEST_QUIET=1 prints only the GUEST- lines.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/tests/guest"
CACHE="${GUEST_CACHE:-$ROOT/target/guest}"
export GUEST_CACHE="$CACHE"

[ $# -ge 1 ] || { echo "usage: $0 SCENARIO [KERNEL_ARG...]" >&2; exit 1; }
SCENARIO=$1; shift
FILE="$HERE/scenarios/$SCENARIO.sh"
[ -f "$FILE" ] || { echo "run.sh: no scenario $FILE; have: $(cd "$HERE/scenarios" && ls | sed 's/\.sh$//' | tr '\n' ' ')" >&2; exit 1; }

header() { sed -n "s/^# $1: *//p" "$FILE" | head -n 1; }
MEM=${GUEST_MEM:-$(header guest-mem)}; MEM=${MEM:-512}
TIMEOUT=${GUEST_TIMEOUT:-$(header guest-timeout)}; TIMEOUT=${TIMEOUT:-300}
APPEND_SCENARIO=$(header guest-append)
SMP=${GUEST_SMP:-$(header guest-smp)}; SMP=${SMP:-4}
CPU_MODEL=$(header guest-cpu); CPU_MODEL=${CPU_MODEL:-max}

command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: qemu-system-x86_64 not found; apt-get install qemu-system-x86" >&2; exit 1; }
KERNEL=$("$HERE/fetch-kernel.sh")
if [ "${GUEST_NO_BUILD:-0}" = 1 ] && [ -s "$CACHE/initramfs.cpio" ]; then
    INITRD="$CACHE/initramfs.cpio"
else
    INITRD=$("$HERE/build-initramfs.sh")
fi

mkdir -p "$CACHE/logs"
LOG="$CACHE/logs/$SCENARIO.log"
# no_timer_check: under emulation on a busy host the kernel's IO-APIC timer check can fail
# ("IO-APIC + timer doesn't work!") and panic at boot.
APPEND="console=ttyS0 quiet panic=-1 no_timer_check cpushield.scenario=$SCENARIO $APPEND_SCENARIO $*"
echo "run.sh: booting $SCENARIO (smp $SMP, ${MEM}M, timeout ${TIMEOUT}s): $APPEND" >&2

set +e
timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu "$CPU_MODEL" -smp "$SMP" -m "$MEM" \
    -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" \
    -nographic -no-reboot -monitor none -serial stdio -nodefaults \
    </dev/null >"$LOG" 2>&1
QEMU_RC=$?
set -e
# The serial console uses CRLF line ends.
sed -i 's/\r$//; s/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g' "$LOG"

if [ "${GUEST_QUIET:-0}" = 1 ]; then grep 'GUEST-' "$LOG" || true; else cat "$LOG"; fi

PASSES=$(grep -c 'GUEST-PASS ' "$LOG" || true)
FAILS=$(grep -c 'GUEST-FAIL ' "$LOG" || true)
if [ "$QEMU_RC" = 124 ] || [ "$QEMU_RC" = 137 ]; then
    echo "run.sh: $SCENARIO: FAILED: guest did not finish within ${TIMEOUT}s (log: $LOG)" >&2
    exit 1
fi
if ! grep -q 'GUEST-DONE' "$LOG"; then
    echo "run.sh: $SCENARIO: FAILED: guest stopped without GUEST-DONE (qemu exit $QEMU_RC; kernel panic or /init died; log: $LOG)" >&2
    exit 1
fi
if [ "$FAILS" != 0 ]; then
    echo "run.sh: $SCENARIO: FAILED: $FAILS failed, $PASSES passed (log: $LOG)" >&2
    grep 'GUEST-FAIL ' "$LOG" >&2
    exit 1
fi
if [ "$PASSES" = 0 ]; then
    echo "run.sh: $SCENARIO: FAILED: no check ran (log: $LOG)" >&2
    exit 1
fi
echo "run.sh: $SCENARIO: ok, $PASSES passed" >&2
