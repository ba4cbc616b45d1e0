# The shield's semantics (processes, IRQs and the local timer kept off the CPUs, enforced by the kernel, undone exactly) on whatever cgroup hierarchy is mounted (scenarios shield-v2,
# shield-v1). Every check prints one GUEST-PASS/GUEST-FAIL line named <step>/<what>.

# setup_tasks MODE: a few dozen sleepers with varied affinities, some in a pre-existing
# cgroup like a systemd slice (v2) or a foreign cpuset that does not touch CPU 3 (v1),
# and a varied IRQ affinity layout.
setup_tasks() {
    : >/tmp/spawned
    case "$1" in
        v2)
            mkdir -p "$CGROOT/system.slice"
            slice="$CGROOT/system.slice"
            ;;
        v1)
            mkdir -p "$CGROOT/cpuset/existing"
            echo 0-1 >"$CGROOT/cpuset/existing/cpuset.cpus"
            echo 0 >"$CGROOT/cpuset/existing/cpuset.mems"
            slice="$CGROOT/cpuset/existing"
            ;;
    esac
    for i in 1 2 3 4 5 6; do
        for cpus in all 3 2-3 1 0-1 1-3; do
            spawn "root-$cpus" "$cpus"
        done
    done
    for i in 1 2 3 4; do
        for cpus in all 1 0-1; do
            spawn "slice-$cpus" "$cpus" "$slice"
        done
        if [ "$1" = v2 ]; then
            for cpus in 2 3 2-3 1-3; do spawn "slice-$cpus" "$cpus" "$slice"; done
        fi
    done
    # W: widened with taskset -p while shielded.
    spawn widen all
    WIDEN=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    sleep 1
    # Every spawned task must run with the affinity it asked for.
    bad=$(while read -r pid cpus name; do
        got=$(cpus_of "$pid")
        [ "$got" = "$cpus" ] || echo "$name pid $pid wants $cpus has '$got'"
    done </tmp/spawned)
    if [ -z "$bad" ]; then pass setup/tasks; else fail setup/tasks "$bad"; fi
    info "$(wc -l </tmp/spawned) tasks started"

    probe_irqs
    info "IRQs: $(cd /proc/irq && ls -d [0-9]* | tr '\n' ' '); unwritable: $(tr '\n' ' ' </tmp/irq-unwritable)"
    set -- $(writable_irqs)
    [ $# -ge 1 ] && echo 3 >"/proc/irq/$1/smp_affinity_list"
    [ $# -ge 2 ] && echo 2-3 >"/proc/irq/$2/smp_affinity_list"
    [ $# -ge 3 ] && echo 1 >"/proc/irq/$3/smp_affinity_list"
    if [ $# -lt 2 ]; then fail setup/irqs "fewer than 2 IRQs with a writable affinity"; else pass setup/irqs; fi
}

# expect_mechanism NAME MODE CPUS: the kernel enforcement the shield relies on is in place.
expect_mechanism() {
    case "$2" in
        v2)
            found=""
            for d in $(find "$CGROOT" -mindepth 1 -type d); do
                [ "$(cat "$d/cpuset.cpus.partition" 2>/dev/null)" = isolated ] || continue
                [ "$(cat "$d/cpuset.cpus.effective")" = "$3" ] && found=$d
            done
            if [ -n "$found" ]; then
                pass "$1/isolated-partition"; info "isolated partition: $found"
            else
                fail "$1/isolated-partition" "no cgroup with cpuset.cpus.partition=isolated and cpuset.cpus.effective=$3 ($(grep -H '' $(find "$CGROOT" -name cpuset.cpus.partition) | tr '\n' ' '))"
            fi
            ;;
        v1)
            found=""
            for d in $(find "$CGROOT/cpuset" -mindepth 1 -type d); do
                [ "$(cat "$d/cpuset.cpus")" = "$3" ] || continue
                [ "$(cat "$d/cpuset.cpu_exclusive")" = 1 ] || continue
                [ "$(cat "$d/cpuset.sched_load_balance")" = 0 ] && found=$d
            done
            if [ -n "$found" ]; then
                pass "$1/exclusive-cpuset"; info "shield cpuset: $found"
            else
                fail "$1/exclusive-cpuset" "no cpuset with cpus=$3 cpu_exclusive=1 sched_load_balance=0 ($(for d in $(find "$CGROOT/cpuset" -mindepth 1 -type d); do echo "$d cpus=$(cat "$d/cpuset.cpus") excl=$(cat "$d/cpuset.cpu_exclusive") lb=$(cat "$d/cpuset.sched_load_balance")"; done | tr '\n' ' '))"
            fi
            ;;
    esac
}

# expect_off NAME PID CPUS: task PID has no CPU of CPUS in its affinity.
expect_off() {
    got=$(cpus_of "$2")
    if [ -z "$got" ]; then fail "$1" "task $2 is gone"; return; fi
    for c in $(echo "$3" | tr ',' ' '); do
        if cpus_has "$got" "$c"; then fail "$1" "task $2 has affinity $got, which includes shielded CPU $c"; return; fi
    done
    pass "$1"
}

shield_semantics() {
    mode=$1
    setup_tasks "$mode"
    snapshot /tmp/before
    pid1_cgroups=$(awk '$1 == 1 { print $2 }' /tmp/before/cgroups)
    unmovable=$(unmovable_tasks /tmp/before | awk '{ printf "%s(%s) ", $2, $3 }')
    info "tasks the kernel will not let anyone move: $unmovable"

    # --- bad input: exit 1, nothing changed ---
    expect_refused bad/all-cpus /tmp/before shield --all 0-3
    expect_refused bad/no-such-cpu /tmp/before shield --all 9
    expect_refused bad/malformed-mask /tmp/before shield --all 0xZZ
    expect_refused bad/malformed-list /tmp/before shield --all 3-
    expect_refused bad/empty-list /tmp/before shield --all ""
    expect_refused bad/one-bad-list /tmp/before shield --procs 2-3 --irqs 9
    # Not root: the same binary run as nobody.
    cp /bin/cpushield /tmp/cpushield-user && chmod 755 /tmp/cpushield-user
    su -s /bin/sh nobody -c "/tmp/cpushield-user shield --all 3" >/tmp/cs.out 2>/tmp/cs.err
    check_eq bad/not-root/exit-1 1 "$?" "exit status of shield as nobody"
    check_eq bad/not-root/one-line 1 "$(($(wc -l </tmp/cs.err)))" "lines on stderr ($(head -c 300 /tmp/cs.err | tr '\n' '|'))"
    info "bad/not-root: $(head -n 1 /tmp/cs.err)"
    expect_restored bad/not-root/nothing-changed /tmp/before

    # --- reset with nothing shielded is a no-op success ---
    cs_ok reset-noop/exit-0 reset
    expect_restored reset-noop /tmp/before
    expect_show reset-noop/show "" "" ""

    # --- shield --all 3 ---
    cs_ok shield/exit-0 shield --all 3
    snapshot /tmp/shielded
    expect_rule shield /tmp/before /tmp/shielded 3 3
    expect_mechanism shield "$mode" 3
    check_eq shield/workqueue-cpumask "0-2" \
        "$(mask_to_list "$(cat /sys/devices/virtual/workqueue/cpumask)")" "workqueue cpumask"
    expect_show shield/show 3 3 3
    only3=$(while read -r pid cpus name; do
        [ "$cpus" = 3 ] && [ "$(cpus_of "$pid")" != 3 ] && echo "$name pid $pid has $(cpus_of "$pid")"
    done </tmp/spawned)
    if [ -z "$only3" ]; then pass shield/only-3-stay; else fail shield/only-3-stay "$only3"; fi
    on3=$(awk -v PF="$PF_NO_SETAFFINITY" "$AWK_CPUS"'
        FILENAME == ARGV[1] { f[$1] = $2; next }
        { cpus_parse($3, s) }
        (3 in s) && int(f[$1] / PF) % 2 == 0 { printf "%s(%s) ", $2, $3 }' /tmp/shielded/flags /tmp/shielded/procs)
    info "movable tasks that may still use CPU 3 (asked only for shielded CPUs): $on3"

    # --- the kernel keeps new and widened tasks off CPU 3 ---
    sleep 1000 &
    FORKED=$!
    expect_off enforce/fork "$FORKED" 3
    taskset -c 0-3 sleep 1000 &
    ASKED=$!
    expect_off enforce/fork-asking-all "$ASKED" 3
    taskset -p -c 0-3 "$WIDEN" >/dev/null 2>&1
    expect_off enforce/taskset-widen "$WIDEN" 3
    taskset -p -c 3 "$WIDEN" >/dev/null 2>&1
    expect_off enforce/taskset-only-3 "$WIDEN" 3
    taskset -p -c 0-3 "$WIDEN" >/dev/null 2>&1
    info "after enforcement checks: forked $(cpus_of "$FORKED"), asked-all $(cpus_of "$ASKED"), widened $(cpus_of "$WIDEN")"

    # --- a second shield adding CPU 2 to the process shield re-applies the rule ---
    cs_ok add/exit-0 shield --procs 2
    snapshot /tmp/added
    expect_rule add /tmp/before /tmp/added 2-3 3
    expect_show add/show 2-3 3 3
    for pid in $FORKED $ASKED $WIDEN; do expect_off "add/new-task-$pid" "$pid" 2,3; done

    # --- unshield --irqs 3: IRQs back to what they asked for, processes still shielded ---
    cs_ok unshield-irqs/exit-0 unshield --irqs 3
    snapshot /tmp/unshielded
    expect_rule unshield-irqs /tmp/before /tmp/unshielded 2-3 ""
    expect_show unshield-irqs/show 2-3 "" 3

    # --- reset: everything exactly as before ---
    cs_ok reset/exit-0 reset
    expect_restored reset /tmp/before
    expect_show reset/show "" "" ""
    # Tasks started or widened while shielded: where a new task would have been before.
    for pid in $FORKED $ASKED $WIDEN; do
        check_eq "reset/new-task-$pid/affinity" 0-3 "$(cpus_of "$pid")" "affinity"
        check_eq "reset/new-task-$pid/cgroup" "$pid1_cgroups" "$(cgroups_of "$pid")" "cgroups (those of its parent, pid 1)"
    done

    # --- reset is idempotent ---
    cs_ok reset-again/exit-0 reset
    expect_restored reset-again /tmp/before

    # --- a shield overlapping a foreign cpuset (v1: "existing" has CPUs 0-1) ---
    # Either policy is acceptable as long as the system stays consistent: shielded by
    # the rule and exactly reset, or refused (exit 1) with nothing changed.
    if [ "$mode" = v1 ]; then
        cs shield --all 1
        if [ "$CS_RC" = 0 ]; then
            info "foreign-overlap: shield --all 1 accepted: $(head -n 3 /tmp/cs.out | tr '\n' ' ')"
            snapshot /tmp/overlap
            expect_rule foreign-overlap /tmp/before /tmp/overlap 1 1
            cs_ok foreign-overlap/reset-exit-0 reset
            expect_restored foreign-overlap/restored /tmp/before
        elif [ "$CS_RC" = 1 ]; then
            info "foreign-overlap: shield --all 1 refused: $(head -n 1 /tmp/cs.err)"
            expect_restored foreign-overlap/refused-nothing-changed /tmp/before
            cs_ok foreign-overlap/reset-exit-0 reset
        else
            fail foreign-overlap/exit "shield --all 1 exited $CS_RC: $(head -n 1 /tmp/cs.err)"
        fi
        # Growing an existing shield into the foreign cpuset's CPUs: the same two outcomes,
        # and whatever happened, later commands still work.
        cs_ok foreign-grow/first-exit-0 shield --all 3
        snapshot /tmp/grow-base
        cs shield --procs 1
        if [ "$CS_RC" = 0 ]; then
            snapshot /tmp/grow
            expect_rule foreign-grow /tmp/before /tmp/grow 1,3 3
        elif [ "$CS_RC" = 1 ]; then
            info "foreign-grow: shield --procs 1 refused: $(head -n 1 /tmp/cs.err)"
            expect_restored foreign-grow/refused-nothing-changed /tmp/grow-base
            expect_show foreign-grow/show-unchanged 3 3 3
        else
            fail foreign-grow/exit "shield --procs 1 exited $CS_RC: $(head -n 1 /tmp/cs.err)"
        fi
        cs_ok foreign-grow/unshield-irqs-exit-0 unshield --irqs 3
        cs_ok foreign-grow/reset-exit-0 reset
        expect_restored foreign-grow/restored /tmp/before
    fi

    # --- an offline CPU is refused (last: offlining moves tasks for good) ---
    kill "$FORKED" "$ASKED" 2>/dev/null
    if echo 0 >/sys/devices/system/cpu/cpu2/online; then
        sleep 1
        snapshot /tmp/offline
        expect_refused bad/offline-cpu /tmp/offline shield --all 2
        echo 1 >/sys/devices/system/cpu/cpu2/online
    else
        fail bad/offline-cpu "could not take CPU 2 offline to test"
    fi
}
