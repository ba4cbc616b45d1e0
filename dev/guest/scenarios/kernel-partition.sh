# Scenario kernel-partition: the kernel behaviour cpushield relies on, without cpushield.
# A cgroup v2 cpuset partition "isolated" on CPU 3 takes CPU 3 away from every other cgroup,
# clamps the affinity of tasks outside it, refuses sched_setaffinity onto CPU 3 from
# outside, and undoes cleanly. If this fails the kernel, not cpushield, has changed.
# guest-test: kernel_isolated_partition_behaves_as_cpushield_assumes
# guest-cost: 5
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 120
GUEST_CGROUP=v2

scenario_main() {
    spawn outside all
    outside=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn narrow 1-3
    narrow=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    check_eq partition/affinity-before "0-3" "$(cpus_of "$outside")"

    mkdir "$CGROOT/shield" || fail partition/mkdir "mkdir $CGROOT/shield failed"
    echo 3 >"$CGROOT/shield/cpuset.cpus" || fail partition/cpus "cpuset.cpus=3 refused"
    echo isolated >"$CGROOT/shield/cpuset.cpus.partition" || fail partition/write "partition=isolated refused"
    check_eq partition/state "isolated" "$(cat "$CGROOT/shield/cpuset.cpus.partition")"
    check_eq partition/effective "3" "$(cat "$CGROOT/shield/cpuset.cpus.effective")"
    check_eq partition/root-effective "0-2" "$(cat "$CGROOT/cpuset.cpus.effective")"
    check_eq partition/clamps-outside "0-2" "$(cpus_of "$outside")"
    # 6.1 overwrites the affinity with the cpuset's CPUs (no intersection with what the task
    # asked for): a task that asked for 1-3 now has 0-2. 6.2+ keeps the mask the task asked
    # for and intersects it: 1-2. cpushield must set every task's affinity again after
    # creating or resizing a partition.
    case "$(uname -r)" in
        6.[01].* | [0-5].*) narrowed=0-2 ;;
        *) narrowed=1-2 ;;
    esac
    check_eq partition/clamps-narrow "$narrowed" "$(cpus_of "$narrow")"
    # 6.1 lists only isolcpus= there, not runtime partitions: tools must not rely on it.
    info "/sys/devices/system/cpu/isolated with an isolated partition: '$(cat /sys/devices/system/cpu/isolated)'"

    # Widening from outside the partition stays off CPU 3; asking for CPU 3 alone fails.
    taskset -p -c 0-3 "$outside" >/dev/null 2>&1
    check_eq partition/widen-clamped "0-2" "$(cpus_of "$outside")"
    if taskset -p -c 3 "$outside" >/dev/null 2>&1 && cpus_has "$(cpus_of "$outside")" 3; then
        fail partition/only-3-refused "taskset -p -c 3 moved an outside task onto CPU 3"
    else
        pass partition/only-3-refused
    fi
    # A task forked outside after the partition exists cannot reach CPU 3.
    taskset -c 0-3 sleep 1000 &
    forked=$!
    check_eq partition/fork-clamped "0-2" "$(cpus_of "$forked")"

    # A task moved into the partition runs on CPU 3 only.
    spawn inside all
    inside=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    echo "$inside" >"$CGROOT/shield/cgroup.procs"
    check_eq partition/inside "3" "$(cpus_of "$inside")"

    # Undo: the partition back to member, tasks out, directory removed.
    echo "$inside" >"$CGROOT/cgroup.procs"
    echo member >"$CGROOT/shield/cpuset.cpus.partition"
    rmdir "$CGROOT/shield" || fail partition/rmdir "rmdir $CGROOT/shield failed"
    check_eq partition/root-effective-after "0-3" "$(cat "$CGROOT/cpuset.cpus.effective")"
    # 6.1 does not give back the affinity it took (it keeps no user-requested mask): a task
    # that asked for 1-3 gets the whole cpuset, so cpushield must remember and restore;
    # 6.2+ gives the task its 1-3 back.
    info "task that asked for 1-3: after undo of the partition it has $(cpus_of "$narrow")"
    kill "$forked" "$outside" "$inside" "$narrow"
}
