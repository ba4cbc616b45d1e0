#!/bin/sh
# Boot the test guest on one scenario and report.
#
#   dev/guest/run.sh SCENARIO [KERNEL_ARG...]
#   GUEST_KERNEL=6.12-rt dev/guest/run.sh SCENARIO
#   dev/guest/run.sh SCENARIO,SCENARIO,...      # several in one boot (a batch)
#
# SCENARIO is a file dev/guest/scenarios/SCENARIO.sh; extra kernel arguments (for example
# nohz_full=3 rcu_nocbs=3) are appended to the command line. GUEST_KERNEL names the kernel
# (dev/guest/kernels.sh; default GUEST_KERNEL_DEFAULT). The console log is kept in
# target/guest/logs/KERNEL/SCENARIO.log.
#
# A comma-separated list boots the kernel once and runs the scenarios one after another
# (init.sh): they must agree on every header that shapes the boot (mem, smp, cpu, tcg,
# append, the cgroup hierarchy) and have neither guest-net nor guest-stall. The whole
# console is kept in target/guest/logs/KERNEL/batch-FIRST.log, each scenario's part of it
# in its own SCENARIO.log. init.sh stops a batch when a scenario left the machine changed
# (GUEST-UNCLEAN); a scenario that did not start is said NOT RUN, to be booted again.
#
# One closing line on stderr per scenario, which crates/cli/tests/guest.rs reads:
#   run.sh: SCENARIO on KERNEL: ok, N passed (...)
#   run.sh: SCENARIO on KERNEL: FAILED: why
#   run.sh: SCENARIO on KERNEL: NOT RUN: why
# Exit status 0 only if every scenario is ok: it printed GUEST-END with at least one
# GUEST-PASS and no GUEST-FAIL line.
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
#                           of speed the scenarios do not need. And for any scenario that
#                           needs no thread per vCPU: the harness boots two guests on two
#                           host CPUs, where a guest's second host thread only takes a CPU
#                           from the other guest, and one thread does the same work in less
#                           host CPU time (shield-sigkill on 6.1, alone: 67 s of host CPU
#                           with a thread per vCPU, 51 s with one, in about the same wall
#                           time).
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
#   # guest-stall: yes      the host stalls the guest's vCPUs on request: each console line
#                           `GUEST-STALL MS [VCPU]` makes this script (the guest's host)
#                           pin QEMU's vCPU thread (the one thread of `guest-tcg: single`,
#                           else vCPU VCPU's, else every one) to host CPU 1, QEMU's other
#                           threads to host CPU 0, and run a SCHED_FIFO hog on CPU 1 for MS
#                           milliseconds (1-200), then give the threads their affinity
#                           back: time the guest's vCPU does not run,
#                           as a busy hypervisor's steal. Each stall is logged in
#                           SCENARIO.stalls.log. See stall_hook.
#   # guest-vm-watch: yes   the host side of the guest's blame runs: QEMU gets a QMP socket
#                           and a virtio-serial port named org.cpushield.vm.0 on a unix-socket
#                           chardev (SCENARIO.qmp and SCENARIO.vm.sock beside the log), and
#                           `cpushield vm watch --qmp ... --channel ...` (the host binary:
#                           GUEST_HOST_CPUSHIELD, with HOST_STATE_DIR as its state
#                           directory) answers the guest on it, its output in
#                           SCENARIO.vm-watch.log. A console line `GUEST-VM-WATCH-KILL` SIGKILLs
#                           it (a host side that dies halfway). See vm_watch_hook.
#   # guest-test: NAME      makes the scenario a test of crates/cli/tests/guest.rs, named
#                           guest_NAME::on_KERNEL, once per kernel it runs on (not read here)
#   # guest-cost: SEC       about how long it runs alone on a 2-CPU host; guest.rs starts
#                           the longest first (not read here)
#   # guest-boot: shared    the scenario leaves the machine as it found it, and may share
#                           one boot with others of the same boot headers (guest.rs
#                           batches them; not read here); shared-last: only as the last
#                           of its boot (it leaves what it set up itself)
#   # guest-exclusive: WHY  guest.rs boots it with no other guest running beside it
#                           (not read here)
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
# The state directory of the host side (`cpushield vm watch`, see vm_watch_hook): its
# own, so that a guest run leaves nothing in the host's /run/cpushield, and one for every
# run.sh of this checkout, not one per guest: two guests booted at once (guest.rs's
# GUEST_JOBS) have two host sides on the host's one tracefs, which agree on mounting and
# unmounting it through the locks in this directory.
HOST_STATE_DIR=${CPUSHIELD_STATE_DIR:-$ROOT/target/guest-host-state}
HERE="$ROOT/dev/guest"
CACHE="${GUEST_CACHE:-$ROOT/target/guest}"
export GUEST_CACHE="$CACHE"
. "$HERE/kernels.sh"
guest_kernel "${GUEST_KERNEL:-$GUEST_KERNEL_DEFAULT}" || exit 1

[ $# -ge 1 ] || { echo "usage: $0 SCENARIO[,SCENARIO...] [KERNEL_ARG...]" >&2; exit 1; }
SCENARIOS=$(echo "$1" | tr ',' ' '); shift
# shellcheck disable=SC2086 # a list of names
set -- $SCENARIOS -- "$@"
SCENARIO=$1
NUM=0
for _s in $SCENARIOS; do
    NUM=$((NUM + 1))
    [ -f "$HERE/scenarios/$_s.sh" ] || { echo "run.sh: no scenario $HERE/scenarios/$_s.sh; have: $(cd "$HERE/scenarios" && ls | sed 's/\.sh$//' | tr '\n' ' ')" >&2; exit 1; }
done
while [ "$1" != -- ]; do shift; done
shift
FILE="$HERE/scenarios/$SCENARIO.sh"

# header KEY [FILE]: the value of FILE's (default the first scenario's) `# KEY:` line.
header() { sed -n "s/^# $1: *//p" "${2:-$FILE}" | head -n 1; }
# The cgroup hierarchy a scenario mounts: its last GUEST_CGROUP= line (run-v1.sh sources
# run.sh's scenario, then sets v1), else v2.
cgroup_of() { sed -n 's/^GUEST_CGROUP=//p' "$1" | tail -n 1 | grep . || echo v2; }
TIMEOUT_SUM=0
for _s in $SCENARIOS; do
    _f="$HERE/scenarios/$_s.sh"
    # A file that only declares a test booted its own way (guest-runner, no scenario_main:
    # systemd.sh) is not a scenario of this initramfs. One that sources another scenario
    # (run-v1.sh) has no guest-runner.
    RUNNER=$(header guest-runner "$_f")
    if [ -n "$RUNNER" ] && [ "$RUNNER" != run.sh ] && ! grep -q '^scenario_main()' "$_f"; then
        echo "run.sh: $_s is not booted from the initramfs: run dev/guest/$RUNNER (its guest-runner header)" >&2
        exit 1
    fi
    KERNELS=$(header guest-kernels "$_f")
    case " ${KERNELS:-$GUEST_KERNELS} " in
        *" $KERNEL_NAME "*) ;;
        *) echo "run.sh: $_s runs only on kernels $KERNELS (its guest-kernels header), not on $KERNEL_NAME" >&2; exit 1 ;;
    esac
    if [ "$NUM" -gt 1 ]; then
        for _h in guest-mem guest-smp guest-cpu guest-tcg guest-append guest-numa guest-numa-device; do
            if [ "$(header "$_h" "$_f")" != "$(header "$_h")" ]; then
                echo "run.sh: $_s and $SCENARIO differ in # $_h: they cannot share one boot" >&2
                exit 1
            fi
        done
        if [ "$(cgroup_of "$_f")" != "$(cgroup_of "$FILE")" ]; then
            echo "run.sh: $_s and $SCENARIO mount different cgroup hierarchies: they cannot share one boot" >&2
            exit 1
        fi
        if [ -n "$(header guest-net "$_f")$(header guest-stall "$_f")" ]; then
            echo "run.sh: $_s has the host take part (guest-net or guest-stall): it boots alone" >&2
            exit 1
        fi
    fi
    _t=${GUEST_TIMEOUT:-$(header guest-timeout "$_f")}
    TIMEOUT_SUM=$((TIMEOUT_SUM + ${_t:-300}))
done
MEM=${GUEST_MEM:-$(header guest-mem)}; MEM=${MEM:-512}
TIMEOUT=$TIMEOUT_SUM
BOOT_LIMIT=${GUEST_BOOT_LIMIT:-90}
APPEND_SCENARIO=$(header guest-append)
SMP=${GUEST_SMP:-$(header guest-smp)}; SMP=${SMP:-4}
CPU_MODEL=$(header guest-cpu); CPU_MODEL=${CPU_MODEL:-max}
TCG=$(header guest-tcg); TCG=${TCG:-multi}
case "$TCG" in single | multi) ;; *) echo "run.sh: $FILE: guest-tcg: single or multi, got '$TCG'" >&2; exit 1 ;; esac
# guest-numa: N splits the vCPUs and the memory evenly into N nodes (QEMU 7.2 needs a
# memory backend per node).
NUMA=$(header guest-numa); NUMA_ARGS=""
if [ -n "$NUMA" ]; then
    case "$NUMA" in *[!0-9]* | 0) echo "run.sh: $FILE: guest-numa: a number of nodes, got '$NUMA'" >&2; exit 1 ;; esac
    _cpus=${SMP%%,*}; _per_cpu=$((_cpus / NUMA)); _per_mem=$((MEM / NUMA)); _i=0
    while [ "$_i" -lt "$NUMA" ]; do
        _first=$((_i * _per_cpu)); _last=$((_first + _per_cpu - 1))
        NUMA_ARGS="$NUMA_ARGS -object memory-backend-ram,id=mem$_i,size=${_per_mem}M -numa node,nodeid=$_i,cpus=$_first-$_last,memdev=mem$_i"
        _i=$((_i + 1))
    done
fi
# guest-numa-device: NODE puts a NIC (virtio-net, on QEMU's user network with restrict=on:
# it reaches nothing but QEMU) behind a PCI expander bridge of memory node NODE, so the
# guest's /sys/bus/pci/devices/*/numa_node says where a device sits, as on a two-socket
# server (a device on the root bus has no node under QEMU: -1).
NUMA_DEV=$(header guest-numa-device)
if [ -n "$NUMA_DEV" ]; then
    case "$NUMA_DEV" in *[!0-9]*) echo "run.sh: $FILE: guest-numa-device: a node number, got '$NUMA_DEV'" >&2; exit 1 ;; esac
    [ -n "$NUMA" ] && [ "$NUMA_DEV" -lt "$NUMA" ] || {
        echo "run.sh: $FILE: guest-numa-device: node $NUMA_DEV is not one of the guest-numa nodes" >&2
        exit 1
    }
    NUMA_ARGS="$NUMA_ARGS -device pxb,id=pxb$NUMA_DEV,bus_nr=16,numa_node=$NUMA_DEV -netdev user,id=numadev,restrict=on -device virtio-net-pci,netdev=numadev,bus=pxb$NUMA_DEV,addr=0x0"
fi
STALL=$(header guest-stall)
case "$STALL" in "" | no) STALL="" ;; yes) ;; *) echo "run.sh: $FILE: guest-stall: yes or no, got '$STALL'" >&2; exit 1 ;; esac
VMW=$(header guest-vm-watch)
case "$VMW" in "" | no) VMW="" ;; yes) ;; *) echo "run.sh: $FILE: guest-vm-watch: yes or no, got '$VMW'" >&2; exit 1 ;; esac
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
if [ "$NUM" = 1 ]; then LOG="$LOGS/$SCENARIO.log"; else LOG="$LOGS/batch-$SCENARIO.log"; fi
LIST=$(echo $SCENARIOS | tr ' ' ',')
# no_timer_check: under emulation on a busy host the kernel's IO-APIC timer check can fail
# ("IO-APIC + timer doesn't work!") and panic at boot.
APPEND="console=ttyS0 quiet panic=-1 no_timer_check cpushield.scenario=$LIST $APPEND_SCENARIO $*"
echo "run.sh: booting $LIST on $KERNEL_NAME (smp $SMP, tcg $TCG, ${MEM}M, timeout ${TIMEOUT}s): $APPEND" >&2

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

# stall_vcpu PID MS [VCPU]: the guest's vCPU not running for MS ms, as a hypervisor's
# steal. PID is QEMU or its parent (the `timeout` that runs it). QEMU's vCPU thread(s)
# (named by `-name ...,debug-threads=on`: `ALL CPUs/TCG` under thread=single, `CPU N/TCG`
# under multi, VCPU's alone when given) are pinned to host CPU 1 and QEMU's other threads
# to host CPU 0, a SCHED_FIFO hog runs on host CPU 1 for MS ms (never CPU 0, which belongs
# to the host's own services; the hog is a child of ours, ended by `timeout` waiting on
# CPU 0), then each thread gets its own affinity back. Prints one line saying what it did.
stall_vcpu() {
    _pid=$1 _ms=$2 _vcpu=${3:-}
    case "$_ms" in '' | *[!0-9]*) echo "stall: MS must be a number of milliseconds, got '$_ms'"; return 1 ;; esac
    if [ "$_ms" -lt 1 ] || [ "$_ms" -gt 200 ]; then
        echo "stall: $_ms ms is outside 1-200 ms"
        return 1
    fi
    [ "$(nproc)" -ge 2 ] || { echo "stall: the host has no CPU 1"; return 1; }
    # QEMU itself: PID, or PID's child named qemu-system-*.
    _qemu=$_pid
    case "$(cat "/proc/$_pid/comm" 2>/dev/null)" in
        qemu-system*) ;;
        *) _qemu=$(awk -v p="$_pid" '$4 == p && $2 ~ /^\(qemu-system/ { print $1; exit }' /proc/[0-9]*/stat 2>/dev/null) ;;
    esac
    _tids=""
    for _task in /proc/"${_qemu:-none}"/task/*; do
        _comm=$(cat "$_task/comm" 2>/dev/null) || continue
        case "$_comm" in
            "ALL CPUs/TCG") _tids="$_tids ${_task##*/}" ;;
            "CPU $_vcpu/TCG") _tids="$_tids ${_task##*/}" ;;
            CPU\ */TCG) [ -z "$_vcpu" ] && _tids="$_tids ${_task##*/}" ;;
        esac
    done
    [ -n "$_tids" ] || { echo "stall: no vCPU thread in QEMU '${_qemu}' (started without debug-threads=on?)"; return 1; }
    _saved=""
    for _tid in $_tids; do
        _saved="$_saved $_tid:$(taskset -pc "$_tid" | sed 's/.*: *//')"
        taskset -pc 1 "$_tid" >/dev/null || { echo "stall: cannot pin QEMU's thread $_tid to host CPU 1"; return 1; }
    done
    # QEMU's other threads (its main loop delivers the guest's timer interrupts and wakes a
    # halted vCPU) wait on host CPU 0 meanwhile, as a hypervisor's emulator threads sit off
    # the vCPUs' CPUs: a halted vCPU is then woken on time and kept waiting by the hog,
    # instead of its wakeup being stalled too.
    for _task in /proc/"$_qemu"/task/*; do
        _tid=${_task##*/}
        case " $_tids " in *" $_tid "*) continue ;; esac
        _aff=$(taskset -pc "$_tid" 2>/dev/null | sed 's/.*: *//') || continue
        taskset -pc 0 "$_tid" >/dev/null 2>&1 && _saved="$_saved $_tid:$_aff"
    done
    _secs=$(awk -v ms="$_ms" 'BEGIN { printf "%.3f", ms / 1000 }')
    _t0=$(date +%s%N)
    # The hog is SCHED_FIFO before it reaches CPU 1 (chrt, then taskset moves it): one that
    # arrived as an ordinary task would get the CPU at the vCPU thread's next short sleep on
    # QEMU's lock, and a busy vCPU would look halted.
    taskset -c 0 timeout -s KILL "$_secs" chrt -f 50 taskset -c 1 sh -c 'while :; do :; done' || true
    _t1=$(date +%s%N)
    for _entry in $_saved; do
        taskset -pc "${_entry#*:}" "${_entry%%:*}" >/dev/null 2>&1 || true
    done
    echo "stall: QEMU $_qemu's vCPU thread(s)$_tids kept off host CPU 1 by a SCHED_FIFO hog for $(((_t1 - _t0) / 1000000)) ms (asked $_ms ms)"
}

# stall_hook PID LOG STALL_LOG: while PID (QEMU, or the timeout running it) lives, answers
# each new `GUEST-STALL MS [VCPU]` line of the console LOG with stall_vcpu, one after
# another, and appends what it did to STALL_LOG.
stall_hook() {
    _answered=0
    while kill -0 "$1" 2>/dev/null; do
        _asked=$(grep -a 'GUEST-STALL ' "$2" 2>/dev/null | tr -d '\r' | sed 's/.*GUEST-STALL //' || true)
        if [ "$(printf '%s\n' "$_asked" | grep -c .)" -gt "$_answered" ]; then
            _answered=$((_answered + 1))
            _request=$(printf '%s\n' "$_asked" | sed -n "${_answered}p")
            # shellcheck disable=SC2086 # MS and VCPU, as two words
            _what=$(stall_vcpu "$1" $_request) || true
            echo "run.sh: $_what" >&2
            echo "$(date -u +%H:%M:%S.%N) $_what" >>"$3"
        else
            sleep 0.1
        fi
    done
}

# tracefs_last_resort: unmounts the host's tracefs that a SIGKILLed host side left mounted,
# by cpushield's own rule (crates/trace/src/mount.rs) and under its locks: only where no
# cpushield process uses tracefs any more (the host side of another guest booted beside
# this one may still trace, and the last of them unmounts), and only where a cpushield
# process mounted it (its marker) or it was not mounted when this run.sh began.
tracefs_last_resort() {
    grep -q ' /sys/kernel/tracing tracefs ' /proc/mounts || return 0
    _sd=$HOST_STATE_DIR
    _stem="$_sd/tracefs-$(readlink /proc/self/ns/mnt | tr -dc 0-9)-sys-kernel-tracing"
    [ -e "$_stem.mounted" ] || [ "$TRACEFS_AT_START" = 0 ] || return 0
    mkdir -p "$_sd"
    # The lock of a user's start and end, then the users' lock alone without waiting:
    # refused, a cpushield process still traces.
    flock "$_sd/tracefs.lock" flock -n "$_stem.users" \
        sh -c 'umount /sys/kernel/tracing && rm -f "$1.mounted" "$1.users"' sh "$_stem" 2>/dev/null || true
}

# vm_watch_hook QEMU_PID QMP SOCK LOG: once QEMU's QMP socket exists, runs the host side
# (`cpushield vm watch`) on it and on the guest's channel SOCK until QEMU ends (then
# SIGTERM: it restores tracefs), or SIGKILLs it at the console's `GUEST-VM-WATCH-KILL`.
vm_watch_hook() {
    _host=${GUEST_HOST_CPUSHIELD:-$ROOT/target/release/cpushield}
    while kill -0 "$1" 2>/dev/null && [ ! -S "$2" ]; do sleep 0.1; done
    kill -0 "$1" 2>/dev/null || return 0
    mkdir -p "$HOST_STATE_DIR"
    CPUSHIELD_STATE_DIR=$HOST_STATE_DIR "$_host" vm watch --qmp "$2" --channel "$3" >"$4" 2>&1 &
    _watch=$!
    echo "run.sh: host side cpushield vm watch started (pid $_watch)" >&2
    while kill -0 "$1" 2>/dev/null; do
        if kill -0 "$_watch" 2>/dev/null && grep -aq 'GUEST-VM-WATCH-KILL' "$LOG" 2>/dev/null; then
            kill -KILL "$_watch" 2>/dev/null || true
            echo "run.sh: host side killed (SIGKILL) as the guest asked" >&2
            echo "$(date -u +%H:%M:%S.%N) SIGKILLed as the guest asked" >>"$4"
        fi
        sleep 0.1
    done
    kill -TERM "$_watch" 2>/dev/null || true
    wait "$_watch" 2>/dev/null || true
    # What a SIGKILLed host side left: its trace instance (tracing on), and tracefs mounted
    # (which the next cpushield user to end would unmount: there may be none).
    rmdir "/sys/kernel/tracing/instances/cpushield-vm-$_watch" 2>/dev/null || true
    tracefs_last_resort
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

# Whether the host's tracefs was mounted when this run began (not when each boot began: a
# host side of another guest may have mounted it since), for tracefs_last_resort.
TRACEFS_AT_START=$(grep -c ' /sys/kernel/tracing tracefs ' /proc/mounts || true)
STARTED=$(date +%s)
BOOT_S=?
ATTEMPT=1
DIED=0
HUNG=0
INT3_RERUN=0
while :; do
    # Emptied here, not by QEMU's redirection below: that happens in the background, and
    # boot_watch could otherwise find the last run's GUEST-INFO in it.
    : >"$LOG"
    # The last boot's sockets: vm_watch_hook waits for QEMU's own.
    [ -z "$VMW" ] || rm -f "$LOGS/$SCENARIO.qmp" "$LOGS/$SCENARIO.vm.sock"
    set +e
    # shellcheck disable=SC2086 # NET_ARGS is a list of words
    timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
        -accel tcg,thread=$TCG -cpu "$CPU_MODEL" -smp "$SMP" -m "$MEM" \
        -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" \
        -nographic -no-reboot -monitor none -serial stdio -nodefaults $NET_ARGS $NUMA_ARGS \
        ${STALL:+-name "cpushield-$SCENARIO,debug-threads=on"} \
        ${VMW:+-name "cpushield-$SCENARIO,debug-threads=on" -qmp "unix:$LOGS/$SCENARIO.qmp,server=on,wait=off"} \
        ${VMW:+-chardev "socket,id=cpushield-vm,path=$LOGS/$SCENARIO.vm.sock,server=on,wait=off"} \
        ${VMW:+-device virtio-serial-pci -device "virtserialport,chardev=cpushield-vm,name=org.cpushield.vm.0"} \
        </dev/null >"$LOG" 2>&1 &
    QEMU_PID=$!
    VMW_PID=""
    if [ -n "$VMW" ]; then
        vm_watch_hook "$QEMU_PID" "$LOGS/$SCENARIO.qmp" "$LOGS/$SCENARIO.vm.sock" "$LOGS/$SCENARIO.vm-watch.log" &
        VMW_PID=$!
    fi
    HOOK_PID=""
    if [ -n "$NET_PORT" ]; then
        flood_hook "$QEMU_PID" &
        HOOK_PID=$!
    fi
    STALL_PID=""
    if [ -n "$STALL" ]; then
        : >"$LOGS/$SCENARIO.stalls.log"
        stall_hook "$QEMU_PID" "$LOG" "$LOGS/$SCENARIO.stalls.log" &
        STALL_PID=$!
    fi
    boot_watch "$QEMU_PID"
    BOOTED=$?
    wait "$QEMU_PID"
    QEMU_RC=$?
    [ -z "$HOOK_PID" ] || wait "$HOOK_PID"
    [ -z "$STALL_PID" ] || wait "$STALL_PID"
    [ -z "$VMW_PID" ] || wait "$VMW_PID"
    set -e
    # The serial console uses CRLF line ends.
    sed -i 's/\r$//; s/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g' "$LOG"
    # A kernel that died before /init (an oops under TCG, e.g. an int3 left by
    # cross-CPU code patching) says nothing about the scenario either.
    if [ "$BOOTED" = 0 ] && ! grep -aq 'GUEST-INFO' "$LOG"; then
        BOOTED=2
    fi
    # The same race after /init: a static key flipped while the scenarios ran (creating the
    # first cpuset flips cpusets_enabled_key, patched into __alloc_pages, and an 8-CPU 6.12-rt
    # guest died of it in CI once). Under TCG another vCPU can run code translated before
    # the patch and trap on an int3 the kernel already removed: QEMU's, not the scenario's;
    # the whole boot runs once more, and only once.
    if [ "$BOOTED" = 0 ] && [ "$INT3_RERUN" = 0 ] && grep -aq 'Oops: int3' "$LOG"; then
        INT3_RERUN=1
        cp "$LOG" "$LOGS/$SCENARIO.int3-oops.log"
        echo "run.sh: $SCENARIO: the guest kernel trapped on a stale int3 of cross-CPU code patching (a TCG race; console kept in $LOGS/$SCENARIO.int3-oops.log), its lines:" >&2
        grep -a -m 1 -A 3 'Oops: int3' "$LOG" | sed 's/^/run.sh:   | /' >&2
        ATTEMPT=$((ATTEMPT + 1))
        echo "run.sh: $SCENARIO: booting again, once" >&2
        continue
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
        for _s in $SCENARIOS; do
            echo "run.sh: $_s on $KERNEL_NAME: FAILED: the guest kernel died at boot $DIED times and hung $HUNG times" >&2
        done
        exit 1
    fi
    ATTEMPT=$((ATTEMPT + 1))
    echo "run.sh: $SCENARIO: booting again" >&2
done

if [ "${GUEST_QUIET:-0}" = 1 ]; then grep 'GUEST-' "$LOG" || true; else cat "$LOG"; fi

# The host CPU time of QEMU and the floods (the shell's children), beside the wall time:
# how much of a CPU the boot keeps busy, for packing guests side by side.
# (`times` redirected, not piped: a pipeline would run it in a subshell with no children.)
times >"$LOG.times"
CPU_S=$(tail -n 1 "$LOG.times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, t, /m/); n += t[1] * 60 + t[2] } printf "%d", n }')
WALL_S=$(($(date +%s) - STARTED))
if [ "$NUM" = 1 ]; then
    SPENT="$WALL_S s, host CPU ${CPU_S} s, booted in ${BOOT_S} s"
else
    SPENT="in one boot with $((NUM - 1)) more: $WALL_S s, host CPU ${CPU_S} s for all, booted in ${BOOT_S} s"
fi

# What ended the guest early, for the scenario that was running then.
ended_early() {
    if [ "$QEMU_RC" = 124 ] || [ "$QEMU_RC" = 137 ]; then
        echo "guest did not finish within ${TIMEOUT}s (log: $LOG)"
    else
        echo "guest stopped without GUEST-END (qemu exit $QEMU_RC; kernel panic or /init died; log: $LOG)"
    fi
}
# last_lines: the oops, if there was one, and the console's last lines (the log file
# stays on the CI machine).
last_lines() {
    grep -a -m 1 -A 12 -e 'Oops' -e 'Kernel panic' -e 'BUG:' "$LOG" | sed 's/^/run.sh:   | /' >&2 || true
    tail -n 15 "$LOG" | sed 's/^/run.sh:   | /' >&2
}

# Each scenario's verdict from its part of the console. A GUEST-FAIL outside every
# scenario's part (init.sh's `boot` checks) fails them all.
OUTSIDE=$(awk '/GUEST-BEGIN /{ inside = 1 } !inside && /GUEST-FAIL /{ print } /GUEST-END /{ inside = 0 }' "$LOG")
ANY_BEGUN=$(grep -c 'GUEST-BEGIN ' "$LOG" || true)
UNCLEAN=$(grep -a -m 1 'GUEST-UNCLEAN ' "$LOG" | sed 's/.*GUEST-UNCLEAN //' || true)
ALL_OK=1
for _s in $SCENARIOS; do
    _part="$LOGS/$_s.log"
    [ "$_part" = "$LOG" ] || awk -v s="$_s" '$0 ~ "GUEST-BEGIN " s "$" { on = 1 } on { print } on && $0 ~ "GUEST-END " s " " { exit }' "$LOG" >"$_part"
    if [ -n "$OUTSIDE" ]; then
        echo "run.sh: $_s on $KERNEL_NAME: FAILED: the guest's /init failed before any scenario (log: $LOG)" >&2
        printf '%s\n' "$OUTSIDE" >&2
        ALL_OK=0
        continue
    fi
    if ! grep -q "GUEST-BEGIN $_s\$" "$_part" 2>/dev/null; then
        ALL_OK=0
        if [ "$ANY_BEGUN" = 0 ]; then
            echo "run.sh: $_s on $KERNEL_NAME: FAILED: no scenario started: $(ended_early), its last lines:" >&2
            last_lines
        elif [ -n "$UNCLEAN" ]; then
            echo "run.sh: $_s on $KERNEL_NAME: NOT RUN: $UNCLEAN" >&2
        else
            echo "run.sh: $_s on $KERNEL_NAME: NOT RUN: the guest ended before it (log: $LOG)" >&2
        fi
        continue
    fi
    PASSES=$(grep -c 'GUEST-PASS ' "$_part" || true)
    FAILS=$(grep -c 'GUEST-FAIL ' "$_part" || true)
    if ! grep -q "GUEST-END $_s " "$_part"; then
        ALL_OK=0
        echo "run.sh: $_s on $KERNEL_NAME: FAILED: $(ended_early), $FAILS failed and $PASSES passed before, its last lines:" >&2
        last_lines
        grep 'GUEST-FAIL ' "$_part" >&2 || true
    elif [ "$FAILS" != 0 ]; then
        ALL_OK=0
        echo "run.sh: $_s on $KERNEL_NAME: FAILED: $FAILS failed, $PASSES passed (log: $_part)" >&2
        grep 'GUEST-FAIL ' "$_part" >&2
    elif [ "$PASSES" = 0 ]; then
        ALL_OK=0
        echo "run.sh: $_s on $KERNEL_NAME: FAILED: no check ran (log: $_part)" >&2
    else
        echo "run.sh: $_s on $KERNEL_NAME: ok, $PASSES passed ($SPENT)" >&2
    fi
done
[ "$ALL_OK" = 1 ]
