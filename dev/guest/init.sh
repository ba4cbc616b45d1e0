#!/bin/busybox sh
# /init of the test guest. Mounts the pseudo filesystems, mounts the cgroup hierarchy the
# scenario asks for, runs the scenario named by the kernel argument cpushield.scenario=NAME,
# prints GUEST-DONE and powers off. Scenario results are the GUEST-PASS / GUEST-FAIL lines.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bin/busybox mount -t tmpfs -o mode=755 tmpfs /run
/bin/busybox mount -t tmpfs -o mode=1777 tmpfs /tmp
export PATH=/bin:/sbin:/usr/bin HOME=/root
# stdin/stdout/stderr on the serial console, not the kernel's initial /dev/console fd of a
# process without a controlling terminal.
exec </dev/console >/dev/console 2>&1

SCENARIO=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        cpushield.scenario=*) SCENARIO=${arg#cpushield.scenario=} ;;
    esac
done

for lib in /guest/lib/*.sh; do . "$lib"; done

if [ -z "$SCENARIO" ] || [ ! -f "/guest/scenarios/$SCENARIO.sh" ]; then
    fail boot "no scenario '$SCENARIO' (kernel argument cpushield.scenario=NAME)"
else
    # A scenario sets GUEST_CGROUP (v2, v1 or none) and defines scenario_main.
    GUEST_CGROUP=v2
    . "/guest/scenarios/$SCENARIO.sh"
    info "scenario $SCENARIO, kernel $(uname -r), cpus online $(cat /sys/devices/system/cpu/online), cgroup $GUEST_CGROUP"
    if mount_cgroups "$GUEST_CGROUP"; then
        scenario_main
    else
        fail boot "could not mount cgroup hierarchy $GUEST_CGROUP"
    fi
fi
# Under emulation on a busy host the kernel may find the TSC unstable and fall back to a
# clock that costs an emulated device access per read: say which one the scenario ran on.
info "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null), up $(cut -d' ' -f1 /proc/uptime) s"
echo "GUEST-DONE failures=$GUEST_FAILURES"
sync
poweroff -f
