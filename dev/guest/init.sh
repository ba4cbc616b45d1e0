#!/bin/busybox sh
# /init of the test guest. Mounts the pseudo filesystems, mounts the cgroup hierarchy the
# scenarios ask for, runs the scenarios named by the kernel argument
# cpushield.scenario=NAME[,NAME...] one after another, prints GUEST-DONE and powers off.
# Scenario results are the GUEST-PASS / GUEST-FAIL lines, each scenario's between its
# GUEST-BEGIN NAME and GUEST-END NAME failures=N lines.
#
# Several scenarios in one boot (a batch, dev/guest/run.sh) share the kernel, so each must
# find it as a fresh boot leaves it: each runs in a subshell of its own (no variable or
# function of one is seen by the next), /tmp is emptied after each, and before the next
# starts the machine is compared with what the batch found at boot (batch_state). A
# difference ends the batch with a GUEST-UNCLEAN line naming it: the scenarios not run
# are booted again by the harness, each on a fresh kernel, so none runs on a machine
# another one changed.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bin/busybox mount -t tmpfs -o mode=755 tmpfs /run
/bin/busybox mount -t tmpfs -o mode=1777 tmpfs /tmp
export PATH=/bin:/sbin:/usr/bin HOME=/root
# stdin/stdout/stderr on the serial console, not the kernel's initial /dev/console fd of a
# process without a controlling terminal.
exec </dev/console >/dev/console 2>&1

SCENARIOS=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        cpushield.scenario=*) SCENARIOS=$(echo "${arg#cpushield.scenario=}" | tr ',' ' ') ;;
    esac
done

for lib in /guest/lib/*.sh; do . "$lib"; done

# cgroup_of NAME: the GUEST_CGROUP scenario NAME sets (v2 unless it says otherwise).
cgroup_of() {
    (GUEST_CGROUP=v2; . "/guest/scenarios/$1.sh" >/dev/null 2>&1; echo "$GUEST_CGROUP")
}

# batch_processes: "PID COMM" of every process but /init and kernel threads (whose exe
# link leads nowhere). Builtins only, so that the listing sees no process of its own.
batch_processes() {
    for _p in /proc/[0-9]*; do
        [ "${_p#/proc/}" = 1 ] && continue
        [ -e "$_p/exe" ] || continue
        read -r _c <"$_p/comm" 2>/dev/null || continue
        echo "${_p#/proc/} $_c"
    done
}

# batch_state DIR: what a scenario may not leave changed for the next one of its batch,
# beyond the snapshot its own checks compare (common.sh): the processes running, the
# mounts, what is in /run and /var (cpushield's state and run directories), and tracefs's
# global settings.
batch_state() {
    snapshot "$1"
    batch_processes >"$1/processes"
    awk '{ print $2, $3, $4 }' /proc/mounts | sort >"$1/mounts"
    # cpushield's run directory, its lock files (the shield's, and that of tracefs's users'
    # starts and ends) and its reservations' directory stay once made, and mean nothing: a
    # state file, a reservation, a tracefs mount marker or anything else there does.
    { find /run /var 2>/dev/null | grep -v -x -e /run/cpushield -e /run/cpushield/lock \
          -e /run/cpushield/tracefs.lock -e /run/cpushield/reserve | sort
      for _t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
          [ -r "$_t/current_tracer" ] || continue
          echo "$_t current_tracer $(cat "$_t/current_tracer")"
          echo "$_t tracing_on $(cat "$_t/tracing_on")"
          echo "$_t instances $(ls "$_t/instances" 2>/dev/null | tr '\n' ' ')"
          echo "$_t set_event $(tr '\n' ' ' <"$_t/set_event")"
      done; } >"$1/other"
}

# batch_reap FOUND: ends with SIGKILL every process that was not running at FOUND (a
# batch_state directory) and says which: the sleepers and loops a scenario left behind,
# which its own boot would have kept until poweroff.
batch_reap() {
    batch_processes >/.batch-left
    # (FILENAME, not NR == FNR: the first file is empty when the boot found no process.)
    awk 'FILENAME == ARGV[1] { found[$1]; next } !($1 in found)' "$1/processes" /.batch-left >/.batch-kill
    [ -s /.batch-kill ] || return 0
    info "left running by the scenario, ended before the next: $(tr '\n' ' ' </.batch-kill | head -c 300)"
    kill -9 $(cut -d' ' -f1 /.batch-kill) 2>/dev/null
    _i=0
    while [ "$_i" -lt 50 ]; do
        batch_processes >/.batch-left
        awk 'FILENAME == ARGV[1] { found[$1]; next } !($1 in found)' "$1/processes" /.batch-left | grep -q . || break
        usleep 100000
        _i=$((_i + 1))
    done
}

# batch_unclean FOUND NOW: prints what differs between the two batch_state directories.
batch_unclean() {
    _d=$(diff_movable "$1" "$2")
    [ -z "$_d" ] || echo "task affinities: $(echo "$_d" | head -n 3 | tr '\n' ' ')"
    _d=$(diff_cgroups_pids "$1/cgroups" "$2/cgroups" "$1/procs" "$2/procs")
    [ -z "$_d" ] || echo "task cgroups: $(echo "$_d" | head -n 3 | tr '\n' ' ')"
    for _p in irqs irqmasks irqdefault wq sysctl cgtree; do
        cmp -s "$1/$_p" "$2/$_p" || echo "$_p: $(diff "$1/$_p" "$2/$_p" | grep '^[-+][^-+]' | head -n 4 | tr '\n' ' ')"
    done
    for _p in processes mounts other; do
        cmp -s "$1/$_p" "$2/$_p" || echo "$_p: $(diff "$1/$_p" "$2/$_p" | grep '^[-+][^-+]' | head -n 4 | tr '\n' ' ')"
    done
}

set -- $SCENARIOS
if [ $# = 0 ]; then
    fail boot "no scenario (kernel argument cpushield.scenario=NAME[,NAME...])"
else
    CGROUP=
    for name in "$@"; do
        if [ ! -f "/guest/scenarios/$name.sh" ]; then
            fail boot "no scenario '$name' (kernel argument cpushield.scenario=NAME[,NAME...])"
            CGROUP=bad
            break
        fi
        c=$(cgroup_of "$name")
        [ -z "$CGROUP" ] && CGROUP=$c
        if [ "$c" != "$CGROUP" ]; then
            fail boot "scenario $name wants cgroup $c, the batch's first $CGROUP: one boot mounts one hierarchy"
            CGROUP=bad
            break
        fi
    done
    if [ "$CGROUP" = bad ]; then
        :
    elif ! mount_cgroups "$CGROUP"; then
        fail boot "could not mount cgroup hierarchy $CGROUP"
    else
        [ $# -gt 1 ] && batch_state /.batch-found
        prev=
        for name in "$@"; do
            if [ -n "$prev" ]; then
                rm -rf /tmp/* /tmp/.[!.]* 2>/dev/null
                batch_reap /.batch-found
                batch_state /.batch-now
                unclean=$(batch_unclean /.batch-found /.batch-now | tr '\n' ';')
                rm -rf /.batch-now
                if [ -n "$unclean" ]; then
                    echo "GUEST-UNCLEAN $prev: left the machine changed for the next scenario: $unclean"
                    break
                fi
            fi
            echo "GUEST-BEGIN $name"
            # The subshell's exit status is its failure count (to 255), and GUEST-END is
            # said out here: a scenario may use any variable, `name` included.
            (
                GUEST_CGROUP=v2
                GUEST_FAILURES=0
                . "/guest/scenarios/$name.sh"
                info "scenario $name, kernel $(uname -r), cpus online $(cat /sys/devices/system/cpu/online), cgroup $GUEST_CGROUP"
                scenario_main
                [ "$GUEST_FAILURES" -gt 255 ] && GUEST_FAILURES=255
                exit "$GUEST_FAILURES"
            )
            failed=$?
            echo "GUEST-END $name failures=$failed"
            [ "$failed" = 0 ] || GUEST_FAILURES=$((GUEST_FAILURES + 1))
            prev=$name
        done
    fi
fi
# Under emulation on a busy host the kernel may find the TSC unstable and fall back to a
# clock that costs an emulated device access per read: say which one the scenarios ran on.
info "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null), up $(cut -d' ' -f1 /proc/uptime) s"
echo "GUEST-DONE failures=$GUEST_FAILURES"
sync
poweroff -f
