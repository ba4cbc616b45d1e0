# Scenario state-lost: a shield whose saved state is gone (state.json and state.json.bak
# removed after `shield --all 3`) is found and said, and undone as far as the kernel shows
# (docs/RELIABILITY.md). `show` reports it with the CPUs it shields; `reset` and `check`
# exit 1 naming what shows it and the way out, and change nothing; `check --cpus 3` exits 3
# leading with the lost state and `reset --without-state`, advising no `cpushield shield`;
# `unshield` is refused in one line naming the same; `reset --without-state`
# removes cpushield's cgroups, gives the tasks it confined every CPU, the IRQs and settings
# the kernel's defaults, and says what it cannot know; a plain `reset` then finds nothing.
# guest-test: a_shield_whose_state_is_gone_is_said_refused_and_undone_without_it
# guest-cost: 14
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 300
GUEST_CGROUP=v2

SD=/run/cpushield

scenario_main() {
    : >/tmp/spawned
    for cpus in all 3 1 all; do spawn "t-$cpus" "$cpus"; done
    spawn_mix 30
    sleep 1
    probe_irqs
    snapshot /tmp/before

    cs_ok lost/shield shield --all 3
    snapshot /tmp/shielded
    rm "$SD/state.json" "$SD/state.json.bak"

    # show: the shield, its CPUs, and what to do.
    expect_show lost/show 3 3 3
    cs show
    if grep -q 'NO STATE: a shield is in place without its saved state' /tmp/cs.out &&
        grep -q 'cpushield reset --without-state' /tmp/cs.out; then
        pass lost/show-says-so
    else
        fail lost/show-says-so "$(head -c 400 /tmp/cs.out | tr '\n' ' ')"
    fi

    # reset and check: refused, each sign named, nothing changed.
    cs reset
    check_eq lost/reset-exit-1 1 "$CS_RC" "exit status of reset"
    for sign in "cpushield-shield holds CPUs 3" "default_smp_affinity leaves out CPU 3" \
        "watchdog_cpumask leaves out CPU 3" "cpushield reset --without-state"; do
        if grep -qF -- "$sign" /tmp/cs.err; then pass "lost/reset-names"; else
            fail lost/reset-names "message lacks [$sign]: $(head -c 400 /tmp/cs.err | tr '\n' ' ')"
        fi
    done
    snapshot /tmp/snap-refused
    if same_snapshot /tmp/shielded /tmp/snap-refused; then pass lost/reset-changed-nothing; else
        compare_snapshots lost/reset-changed-nothing /tmp/shielded /tmp/snap-refused
    fi
    cs check --interval 1s
    check_eq lost/check-exit-1 1 "$CS_RC" "exit status of check"
    if grep -q -- '--cpus 3' /tmp/cs.err; then pass lost/check-names-the-cpus; else
        fail lost/check-names-the-cpus "$(head -c 400 /tmp/cs.err | tr '\n' ' ')"
    fi

    # check with its CPUs given: the shield without its state breaks it (exit 3), named
    # with `reset --without-state`, and no `cpushield shield` advice (it would be refused).
    cs check --cpus 3 --interval 1s --verbose
    check_eq lost/check-cpus-exit-3 3 "$CS_RC" "exit status of check --cpus 3"
    if head -n 1 /tmp/cs.out | grep -q 'without its saved state; undo it with `cpushield reset --without-state`'; then
        pass lost/check-cpus-verdict
    else
        fail lost/check-cpus-verdict "$(head -n 3 /tmp/cs.out | tr '\n' ' ')"
    fi
    if grep -q 'cpushield shield --' /tmp/cs.out; then
        fail lost/check-cpus-no-shield-advice "$(grep 'cpushield shield --' /tmp/cs.out | head -n 3 | tr '\n' ' ')"
    else
        pass lost/check-cpus-no-shield-advice
    fi

    # unshield: refused in one line naming `reset --without-state`, nothing changed.
    cs unshield --all 3
    check_eq lost/unshield-exit-1 1 "$CS_RC" "exit status of unshield"
    check_eq lost/unshield-one-line 1 "$(wc -l </tmp/cs.err)" "lines on stderr of unshield"
    if grep -qF 'cpushield reset --without-state' /tmp/cs.err; then pass lost/unshield-names-the-way-out; else
        fail lost/unshield-names-the-way-out "$(head -c 400 /tmp/cs.err | tr '\n' ' ')"
    fi
    snapshot /tmp/snap-unshield-refused
    if same_snapshot /tmp/shielded /tmp/snap-unshield-refused; then pass lost/unshield-changed-nothing; else
        compare_snapshots lost/unshield-changed-nothing /tmp/shielded /tmp/snap-unshield-refused
    fi

    # reset --without-state: as far as the kernel shows, and it says what it cannot know.
    cs_ok lost/undo reset --without-state
    if grep -q 'cannot be undone exactly' /tmp/cs.out; then pass lost/undo-says-what-it-cannot-know; else
        fail lost/undo-says-what-it-cannot-know "$(head -c 400 /tmp/cs.out | tr '\n' ' ')"
    fi
    check_eq lost/no-cgroup-left "" "$(ls -d "$CGROOT"/cpushield-* 2>/dev/null)" "cpushield's cgroups"
    while read -r pid want name; do
        case $name in
            t-all | t-3)
                # Confined by the shield: every CPU again, in the root cgroup.
                check_eq "lost/$name-every-cpu" "0-3" "$(cpus_of "$pid")" "affinity of $name"
                if grep -q '^0::/$' "/proc/$pid/cgroup"; then pass "lost/$name-in-root"; else
                    fail "lost/$name-in-root" "$(cgroups_of "$pid")"
                fi
                ;;
            t-1) check_eq "lost/$name-kept" 1 "$(cpus_of "$pid")" "affinity of $name" ;;
        esac
    done </tmp/spawned
    for irq in $(writable_irqs); do
        check_eq "lost/irq-$irq-default" "0-3" "$(cat "/proc/irq/$irq/smp_affinity_list")" "IRQ $irq"
    done
    check_eq lost/default-irq-affinity "0-3" "$(mask_to_list "$(cat /proc/irq/default_smp_affinity)")" \
        "default_smp_affinity"
    check_eq lost/watchdog-cpumask "0-3" "$(cat /proc/sys/kernel/watchdog_cpumask)" "watchdog_cpumask"
    check_eq lost/stat-interval 1 "$(cat /proc/sys/vm/stat_interval)" "vm.stat_interval"
    check_eq lost/workqueue-cpumask "0-3" \
        "$(mask_to_list "$(cat /sys/devices/virtual/workqueue/cpumask)")" "workqueue cpumask"

    # Nothing shows a shield any more.
    cs_ok lost/reset-after reset
    expect_show lost/show-after "" "" ""
}
