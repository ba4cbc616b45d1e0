#!/bin/sh
# Boot the test guest on one scenario and report.
#
#   dev/guest/run.sh SCENARIO [KERNEL_ARG...]
#   GUEST_KERNEL=6.12-rt dev/guest/run.sh SCENARIO
#
# SCENARIO is a file dev/guest/scenarios/SCENARIO.sh; extra kernel arguments (for example
# nohz_full=3 rcu_nocbs=3) are appended to the command line. GUEST_KERNEL names the kernel
# (dev/guest/kernels.sh; default GUEST_KERNEL_DEFAULT). Exit status 0 only if the guest
# printed GUEST-DONE and no GUEST-FAIL line. The console log is kept in
# target/guest/logs/KERNEL/SCENARIO.log.
#
# A scenario file may carry headers read here:
#   # guest-mem: MiB        guest memory (default 512)
#   # guest-timeout: SEC    wall-clock limit for the boot (default 300)
#   # guest-append: ARGS    kernel arguments the scenario always needs
#   # guest-kernels: NAMES  the kernels the scenario runs on (default every kernel of
#                           dev/guest/kernels.sh); another is refused
#   # guest-smp: SPEC       QEMU -smp value, e.g. 4,threads=2 for SMT (default 4)
#   # guest-cpu: MODEL      QEMU -cpu value (default max; SMT under TCG needs an Intel
#                           vendor, e.g. max,vendor=GenuineIntel: QEMU's AMD max has no
#                           hyperthreading without topoext)
#   # guest-tcg: single     run every vCPU on one host thread (QEMU -accel tcg,thread=single)
#                           instead of one thread per vCPU: for scenarios that turn
#                           tracepoints or tracers on. The kernel patches its text then,
#                           through a temporary int3, and under multi-threaded TCG another
#                           vCPU can execute that int3 after the patch completed: an
#                           `Oops: int3`, as in the boot deaths below. A 6.12-rt guest died
#                           in CI while rtla timerlat ran (its console was not kept). One
#                           thread makes the patch atomic to the other vCPUs, at the cost
#                           of speed the scenarios do not need.
#   # guest-net: user PORT  a virtio-net NIC on QEMU's user network, with a host UDP port
#                           on 127.0.0.1 forwarded to the guest's PORT (10.0.2.15). While
#                           the guest runs, each console line `GUEST-FLOOD SECS` makes this
#                           script flood that port from the host for SECS seconds with
#                           `cpushield load ionet --peer 127.0.0.1:HOSTPORT --cpus 1` (the
#                           host binary: GUEST_HOST_CPUSHIELD, default
#                           target/release/cpushield), one flood after another. HOSTPORT is
#                           PORT + 100 x the kernel's place in GUEST_KERNELS (6.1: PORT,
#                           6.12-rt: PORT+100), so that the same scenario can boot on both
#                           kernels at once; GUEST_NET_HOST_PORT sets it.
#   # guest-test: NAME      makes the scenario a test of crates/cli/tests/guest.rs, named
#                           guest_NAME::on_KERNEL, once per kernel it runs on (not read here)
#   # guest-cost: SEC       about how long it runs alone on a 2-CPU host; guest.rs starts
#                           the longest first (not read here)
#   # guest-runner: SCRIPT  the test is dev/guest/SCRIPT, which boots it (and others) with
#                           this script or, for a file with no scenario_main, its own way
#                           (not read here)
#
# Environment: GUEST_CACHE (default target/guest), GUEST_NO_BUILD=1 to reuse an existing
# initramfs instead of rebuilding it, GUEST_SMP (default 4), GUEST_TIMEOUT, GUEST_MEM override
# the headers, GUEST_QUIET=1 prints only the GUEST- lines. GUEST_BOOT_LIMIT (default 90 s):
# a kernel that has not started the scenario by then hung at boot (under TCG on a busy host
# this is rare, one seen in CI so far; a boot normally takes 3-10 s), and is
# booted once more; the hung console is kept as SCENARIO.boot-hangN.log. So is a kernel
# that died before /init (an int3 oops at boot under multi-threaded TCG, common on
# 6.12-rt), booted again up to six times in all.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/dev/guest"
CACHE="${GUEST_CACHE:-$ROOT/target/guest}"
export GUEST_CACHE="$CACHE"
. "$HERE/kernels.sh"
guest_kernel "${GUEST_KERNEL:-$GUEST_KERNEL_DEFAULT}" || exit 1

[ $# -ge 1 ] || { echo "usage: $0 SCENARIO [KERNEL_ARG...]" >&2; exit 1; }
SCENARIO=$1; shift
FILE="$HERE/scenarios/$SCENARIO.sh"
[ -f "$FILE" ] || { echo "run.sh: no scenario $FILE; have: $(cd "$HERE/scenarios" && ls | sed 's/\.sh$//' | tr '\n' ' ')" >&2; exit 1; }

header() { sed -n "s/^# $1: *//p" "$FILE" | head -n 1; }
# A file that only declares a test booted its own way (guest-runner, no scenario_main:
# systemd.sh) is not a scenario of this initramfs. One that sources another scenario
# (run-v1.sh) has no guest-runner.
RUNNER=$(header guest-runner)
if [ -n "$RUNNER" ] && [ "$RUNNER" != run.sh ] && ! grep -q '^scenario_main()' "$FILE"; then
    echo "run.sh: $SCENARIO is not booted from the initramfs: run dev/guest/$RUNNER (its guest-runner header)" >&2
    exit 1
fi
KERNELS=$(header guest-kernels)
case " ${KERNELS:-$GUEST_KERNELS} " in
    *" $KERNEL_NAME "*) ;;
    *) echo "run.sh: $SCENARIO runs only on kernels $KERNELS (its guest-kernels header), not on $KERNEL_NAME" >&2; exit 1 ;;
esac
MEM=${GUEST_MEM:-$(header guest-mem)}; MEM=${MEM:-512}
TIMEOUT=${GUEST_TIMEOUT:-$(header guest-timeout)}; TIMEOUT=${TIMEOUT:-300}
BOOT_LIMIT=${GUEST_BOOT_LIMIT:-90}
APPEND_SCENARIO=$(header guest-append)
SMP=${GUEST_SMP:-$(header guest-smp)}; SMP=${SMP:-4}
CPU_MODEL=$(header guest-cpu); CPU_MODEL=${CPU_MODEL:-max}
TCG=$(header guest-tcg); TCG=${TCG:-multi}
case "$TCG" in single | multi) ;; *) echo "run.sh: $FILE: guest-tcg: single or multi, got '$TCG'" >&2; exit 1 ;; esac
NET=$(header guest-net)
NET_ARGS=""
NET_PORT=""
case "$NET" in
    "") ;;
    "user "*)
        NET_PORT=${NET#user }
        case "$NET_PORT" in *[!0-9]* | "") echo "run.sh: $FILE: guest-net: user PORT, got '$NET'" >&2; exit 1 ;; esac
        GUEST_PORT=$NET_PORT
        if [ -n "${GUEST_NET_HOST_PORT:-}" ]; then
            NET_PORT=$GUEST_NET_HOST_PORT
        else
            _i=0
            for _k in $GUEST_KERNELS; do
                [ "$_k" = "$KERNEL_NAME" ] && break
                _i=$((_i + 1))
            done
            NET_PORT=$((GUEST_PORT + 100 * _i))
        fi
        NET_ARGS="-netdev user,id=n0,hostfwd=udp:127.0.0.1:$NET_PORT-:$GUEST_PORT -device virtio-net-pci,netdev=n0"
        ;;
    *) echo "run.sh: $FILE: guest-net: only 'user PORT' is known, got '$NET'" >&2; exit 1 ;;
esac

command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: qemu-system-x86_64 not found; apt-get install qemu-system-x86" >&2; exit 1; }
KERNEL=$("$HERE/fetch-kernel.sh" "$KERNEL_NAME")
if [ "${GUEST_NO_BUILD:-0}" = 1 ] && [ -s "$CACHE/initramfs.cpio" ]; then
    INITRD="$CACHE/initramfs.cpio"
else
    INITRD=$("$HERE/build-initramfs.sh")
fi

LOGS="$CACHE/logs/$KERNEL_NAME"
mkdir -p "$LOGS"
LOG="$LOGS/$SCENARIO.log"
# no_timer_check: under emulation on a busy host the kernel's IO-APIC timer check can fail
# ("IO-APIC + timer doesn't work!") and panic at boot.
APPEND="console=ttyS0 quiet panic=-1 no_timer_check cpushield.scenario=$SCENARIO $APPEND_SCENARIO $*"
echo "run.sh: booting $SCENARIO on $KERNEL_NAME (smp $SMP, tcg $TCG, ${MEM}M, timeout ${TIMEOUT}s): $APPEND" >&2

# flood_hook QEMU_PID: while QEMU runs, answer each new `GUEST-FLOOD SECS` console line
# with a UDP flood of the forwarded port (guest-net).
flood_hook() {
    _host=${GUEST_HOST_CPUSHIELD:-$ROOT/target/release/cpushield}
    _done=0
    while kill -0 "$1" 2>/dev/null; do
        _lines=$(grep -a 'GUEST-FLOOD ' "$LOG" 2>/dev/null | tr -d '\r' || true)
        _n=$(printf '%s\n' "$_lines" | grep -c 'GUEST-FLOOD ' || true)
        if [ "$_n" -gt "$_done" ]; then
            _done=$((_done + 1))
            _secs=$(printf '%s\n' "$_lines" | sed -n "${_done}p" | sed 's/.*GUEST-FLOOD \([0-9]*\).*/\1/')
            echo "run.sh: flooding 127.0.0.1:$NET_PORT for ${_secs:-3}s" >&2
            "$_host" load ionet --peer "127.0.0.1:$NET_PORT" --cpus 1 --duration "${_secs:-3}s" \
                >"$LOGS/$SCENARIO.flood$_done.log" 2>&1 || true
        else
            sleep 0.3
        fi
    done
}

# boot_watch QEMU_PID: waits until the scenario has started (its GUEST-INFO line) or QEMU
# has ended. Returns 1 and stops QEMU when neither happened within BOOT_LIMIT seconds: the
# kernel hung before /init ran, which says nothing about the scenario.
boot_watch() {
    _waited=0
    while kill -0 "$1" 2>/dev/null; do
        if grep -aq 'GUEST-INFO' "$LOG" 2>/dev/null; then
            BOOT_S=$((_waited / 2))
            return 0
        fi
        if [ "$_waited" -ge "$((BOOT_LIMIT * 2))" ]; then
            kill -TERM "$1" 2>/dev/null
            return 1
        fi
        sleep 0.5
        _waited=$((_waited + 1))
    done
    return 0
}

STARTED=$(date +%s)
BOOT_S=?
ATTEMPT=1
DIED=0
HUNG=0
while :; do
    # Emptied here, not by QEMU's redirection below: that happens in the background, and
    # boot_watch could otherwise find the last run's GUEST-INFO in it.
    : >"$LOG"
    set +e
    # shellcheck disable=SC2086 # NET_ARGS is a list of words
    timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
        -accel tcg,thread=$TCG -cpu "$CPU_MODEL" -smp "$SMP" -m "$MEM" \
        -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" \
        -nographic -no-reboot -monitor none -serial stdio -nodefaults $NET_ARGS \
        </dev/null >"$LOG" 2>&1 &
    QEMU_PID=$!
    HOOK_PID=""
    if [ -n "$NET_PORT" ]; then
        flood_hook "$QEMU_PID" &
        HOOK_PID=$!
    fi
    boot_watch "$QEMU_PID"
    BOOTED=$?
    wait "$QEMU_PID"
    QEMU_RC=$?
    [ -z "$HOOK_PID" ] || wait "$HOOK_PID"
    set -e
    # The serial console uses CRLF line ends.
    sed -i 's/\r$//; s/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g' "$LOG"
    # A kernel that died before /init (an oops under TCG, e.g. an int3 left by
    # cross-CPU code patching) says nothing about the scenario either.
    if [ "$BOOTED" = 0 ] && ! grep -aq 'GUEST-INFO' "$LOG"; then
        BOOTED=2
    fi
    [ "$BOOTED" = 0 ] && break
    cp "$LOG" "$LOGS/$SCENARIO.boot-hang$ATTEMPT.log"
    if [ "$BOOTED" = 2 ]; then
        echo "run.sh: $SCENARIO: the kernel died before /init (attempt $ATTEMPT; console kept in $LOGS/$SCENARIO.boot-hang$ATTEMPT.log), its last lines:" >&2
    else
        echo "run.sh: $SCENARIO: the kernel did not reach /init within ${BOOT_LIMIT}s (attempt $ATTEMPT; console kept in $LOGS/$SCENARIO.boot-hang$ATTEMPT.log), its last lines:" >&2
    fi
    tail -n 15 "$LOG" | sed 's/^/run.sh:   | /' >&2
    # A death at boot costs a few seconds and can come twice in a row (compare-smt's
    # two-threads-per-core 6.12-rt boot did, on this project's CI machine): up to six
    # boots. A hang costs BOOT_LIMIT: two.
    [ "$BOOTED" = 2 ] && DIED=$((DIED + 1)) || HUNG=$((HUNG + 1))
    if [ "$DIED" -ge 6 ] || [ "$HUNG" -ge 2 ]; then
        echo "run.sh: $SCENARIO on $KERNEL_NAME: FAILED: the guest kernel died at boot $DIED times and hung $HUNG times" >&2
        exit 1
    fi
    ATTEMPT=$((ATTEMPT + 1))
    echo "run.sh: $SCENARIO: booting again" >&2
done

if [ "${GUEST_QUIET:-0}" = 1 ]; then grep 'GUEST-' "$LOG" || true; else cat "$LOG"; fi

PASSES=$(grep -c 'GUEST-PASS ' "$LOG" || true)
FAILS=$(grep -c 'GUEST-FAIL ' "$LOG" || true)
if [ "$QEMU_RC" = 124 ] || [ "$QEMU_RC" = 137 ]; then
    echo "run.sh: $SCENARIO on $KERNEL_NAME: FAILED: guest did not finish within ${TIMEOUT}s (log: $LOG), its last lines:" >&2
    tail -n 15 "$LOG" | sed 's/^/run.sh:   | /' >&2
    exit 1
fi
if ! grep -q 'GUEST-DONE' "$LOG"; then
    echo "run.sh: $SCENARIO on $KERNEL_NAME: FAILED: guest stopped without GUEST-DONE (qemu exit $QEMU_RC; kernel panic or /init died; log: $LOG), its last lines:" >&2
    # The oops, if there was one, is what the CI log needs: the log file stays on the CI
    # machine.
    grep -a -m 1 -A 12 -e 'Oops' -e 'Kernel panic' -e 'BUG:' "$LOG" | sed 's/^/run.sh:   | /' >&2 || true
    tail -n 15 "$LOG" | sed 's/^/run.sh:   | /' >&2
    exit 1
fi
if [ "$FAILS" != 0 ]; then
    echo "run.sh: $SCENARIO on $KERNEL_NAME: FAILED: $FAILS failed, $PASSES passed (log: $LOG)" >&2
    grep 'GUEST-FAIL ' "$LOG" >&2
    exit 1
fi
if [ "$PASSES" = 0 ]; then
    echo "run.sh: $SCENARIO on $KERNEL_NAME: FAILED: no check ran (log: $LOG)" >&2
    exit 1
fi
# The host CPU time of QEMU and the floods (the shell's children), beside the wall time:
# how much of a CPU the scenario keeps busy, for packing guests side by side.
# (`times` redirected, not piped: a pipeline would run it in a subshell with no children.)
times >"$LOGS/$SCENARIO.times"
CPU_S=$(tail -n 1 "$LOGS/$SCENARIO.times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, t, /m/); n += t[1] * 60 + t[2] } printf "%d", n }')
echo "run.sh: $SCENARIO on $KERNEL_NAME: ok, $PASSES passed ($(( $(date +%s) - STARTED )) s, host CPU ${CPU_S} s, booted in ${BOOT_S} s)" >&2
