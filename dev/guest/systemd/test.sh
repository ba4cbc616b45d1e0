# The checks of the systemd guest test (dev/guest/run-systemd.sh), run by
# cpushield-guest-test.service once the boot is done, under busybox like the other
# scenarios. The disk keeps a boot counter: boot 1 checks the shield is up, that
# `systemctl stop cpushield` restores exactly the state from before it, a restart, and a
# SIGKILLed agent followed by `cpushield reset`; boot 2 (the same disk, a new QEMU run)
# checks the shield came back and stops it exactly again. Each boot then runs the tuned
# steps (systemd-tuned.sh).
export PATH=/guest/bin:/usr/sbin:/usr/bin:/sbin:/bin
for lib in /guest/lib/*.sh; do . "$lib"; done
CS=/usr/bin/cpushield
BEFORE=/run/guest/before
. /guest/systemd-snapshot-filter.sh
. /guest/systemd-tuned.sh

# expect_restored NAME BEFORE, on the filtered snapshot (see systemd-snapshot-filter.sh).
expect_restored() {
    snapshot_sd /tmp/snap-now
    compare_snapshots "$1" "$2" /tmp/snap-now
}

mkdir -p /var/lib/guest
BOOT=$(( $(cat /var/lib/guest/boots 2>/dev/null || echo 0) + 1 ))
echo "$BOOT" >/var/lib/guest/boots
sync
B=boot$BOOT
info "$B: kernel $(uname -r), cpus online $(cat /sys/devices/system/cpu/online), init $(cat /proc/1/comm), cgroup $(awk '$2 == "/sys/fs/cgroup" { print $3 }' /proc/mounts)"

# The shield is up after boot: the unit ran apply, the state is saved, the rule holds.
expect_up() {
    check_eq "$1/unit-active" active "$(systemctl is-active cpushield.service)" "systemctl is-active"
    expect_show "$1/show" 3 3 ""
    if ls /run/cpushield/ 2>/dev/null | grep -q .; then pass "$1/state-saved"; else fail "$1/state-saved" "/run/cpushield is empty"; fi
    snapshot /tmp/up
    expect_rule "$1" "$BEFORE" /tmp/up 3 3
    grep -q "^$CGROOT/cpushield-shield/" /tmp/up/cgtree && pass "$1/cgroups-made" || fail "$1/cgroups-made" "no cpushield cgroup"
}

# `systemctl stop cpushield` (ExecStop=cpushield reset) restores exactly.
expect_stop_restores() {
    systemctl stop cpushield.service
    check_eq "$1/unit-inactive" inactive "$(systemctl is-active cpushield.service)" "systemctl is-active"
    expect_restored "$1/stop-restores" "$BEFORE"
}

if [ ! -d "$BEFORE" ]; then
    fail "$B/snapshot" "cpushield-guest-snapshot.service left no $BEFORE"
else
    probe_irqs
    # The snapshot was taken before the shield, and the shield changed the IRQs.
    if grep -q "^$CGROOT/cpushield-shield/" "$BEFORE/cgtree"; then
        fail "$B/snapshot-before-shield" "the snapshot already has the shield's cgroup"
    else
        pass "$B/snapshot-before-shield"
    fi
    info "$B: cpushield.service: $(journalctl -q -u cpushield.service -o cat 2>/dev/null | head -n 3 | tr '\n' ' ')"
    expect_up "$B/after-boot"
    if cmp -s "$BEFORE/irqs" /tmp/up/irqs; then
        fail "$B/shield-moved-irqs" "no IRQ mask changed between the snapshot and the shield"
    else
        pass "$B/shield-moved-irqs"
    fi
    expect_stop_restores "$B"
    systemctl start cpushield.service
    expect_up "$B/restarted"
    if [ "$BOOT" = 1 ]; then
        # A SIGKILLed agent, then reset: exact.
        systemctl stop cpushield.service
        cs_ok "$B/agent/apply" apply
        "$CS" agent --listen 127.0.0.1:9477 >/tmp/agent.out 2>&1 &
        agent=$!
        sleep 5
        if kill -0 "$agent" 2>/dev/null; then pass "$B/agent/running"; else fail "$B/agent/running" "agent exited: $(head -c 300 /tmp/agent.out | tr '\n' ' ')"; fi
        info "$B: agent said: $(head -n 3 /tmp/agent.out | tr '\n' ' ')"
        kill -9 "$agent"; wait "$agent" 2>/dev/null
        cs_ok "$B/agent/reset" reset
        expect_restored "$B/agent-sigkill-reset" "$BEFORE"
        # `cpushield install` with systemd running: its units (naming this binary) take
        # over from the package's after its daemon-reload; `uninstall` stops and disables
        # them (stop = reset: exact), removes what install put and reloads again.
        cp "$CS" /usr/local/bin/cpushield
        /usr/local/bin/cpushield install >/tmp/install.out 2>&1
        rc=$?
        check_eq "$B/install/exit-0" 0 "$rc" "exit status ($(tail -n 2 /tmp/install.out | tr '\n' ' '))"
        check_eq "$B/install/daemon-reloaded" /etc/systemd/system/cpushield.service \
            "$(systemctl show -P FragmentPath cpushield.service)" "FragmentPath"
        check_eq "$B/install/unit-runs-this-binary" 1 \
            "$(systemctl show -P ExecStart cpushield.service | grep -c /usr/local/bin/cpushield)" "ExecStart"
        grep -q 'keep /etc/cpushield/cpushield.toml' /tmp/install.out \
            && pass "$B/install/config-kept" || fail "$B/install/config-kept" "$(tr '\n' ' ' </tmp/install.out)"
        systemctl start cpushield.service
        expect_show "$B/install/shield-up" 3 3 ""
        /usr/local/bin/cpushield uninstall >/tmp/uninstall.out 2>&1
        rc=$?
        check_eq "$B/uninstall/exit-0" 0 "$rc" "exit status ($(tail -n 2 /tmp/uninstall.out | tr '\n' ' '))"
        check_eq "$B/uninstall/unit-inactive" inactive "$(systemctl is-active cpushield.service)"
        case "$(systemctl show -P FragmentPath cpushield.service)" in
            /etc/*) fail "$B/uninstall/daemon-reloaded" "systemd still loads the unit from /etc" ;;
            *) pass "$B/uninstall/daemon-reloaded" ;;
        esac
        [ -f /etc/cpushield/cpushield.toml ] && [ ! -e /etc/systemd/system/cpushield.service ] \
            && [ ! -e /var/lib/cpushield/install-manifest ] \
            && pass "$B/uninstall/removed-only-its-files" \
            || fail "$B/uninstall/removed-only-its-files" "$(tr '\n' ' ' </tmp/uninstall.out)"
        expect_restored "$B/uninstall-restores" "$BEFORE"
        rm -f /usr/local/bin/cpushield
        # tuned's cpu-partitioning with the .deb's tuned profile (systemd-tuned.sh).
        tuned_boot1
        # Leave it enabled (uninstall disabled it) and up for the reboot.
        systemctl enable cpushield.service 2>/dev/null
        systemctl start cpushield.service
        check_eq "$B/up-for-reboot" active "$(systemctl is-active cpushield.service)"
    else
        # The agent's unit: runs, is restarted after a SIGKILL (Restart=on-failure), stops.
        systemctl start cpushield-agent.service
        sleep 3
        check_eq "$B/agent-unit/active" active "$(systemctl is-active cpushield-agent.service)"
        pid1=$(systemctl show -P MainPID cpushield-agent.service)
        systemctl kill -s SIGKILL cpushield-agent.service
        i=0
        while [ $i -lt 30 ]; do
            sleep 1; i=$((i + 1))
            pid2=$(systemctl show -P MainPID cpushield-agent.service)
            [ "$pid2" != 0 ] && [ "$pid2" != "$pid1" ] && break
        done
        if [ "$pid2" != 0 ] && [ "$pid2" != "$pid1" ]; then
            pass "$B/agent-unit/restarted-after-sigkill"
        else
            fail "$B/agent-unit/restarted-after-sigkill" "MainPID was $pid1, now $pid2 ($(systemctl is-active cpushield-agent.service))"
        fi
        systemctl stop cpushield-agent.service
        check_eq "$B/agent-unit/stopped" inactive "$(systemctl is-active cpushield-agent.service)"
        # tuned-adm verify, on the boot line tuned asked for in boot 1 (systemd-tuned.sh).
        expect_stop_restores "$B/before-tuned"
        tuned_boot2
        # Removing the package stops the unit first (its prerm), so the shield goes exactly.
        /usr/bin/dpkg -r cpushield >/tmp/dpkg.out 2>&1
        rc=$?
        check_eq "$B/dpkg-remove-exit-0" 0 "$rc" "dpkg -r exit status ($(tail -n 2 /tmp/dpkg.out | tr '\n' ' '))"
        [ ! -e /usr/bin/cpushield ] && [ ! -e /lib/systemd/system/cpushield.service ] \
            && pass "$B/dpkg-remove-files-gone" \
            || fail "$B/dpkg-remove-files-gone" "binary or unit still there"
        expect_restored "$B/dpkg-remove-restores" "$BEFORE"
    fi
fi
if [ "$BOOT" = 1 ]; then
    echo "GUEST-BOOT-DONE boot=1 failures=$GUEST_FAILURES"
else
    echo "GUEST-DONE failures=$GUEST_FAILURES"
fi
sync
systemctl poweroff
