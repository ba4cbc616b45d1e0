# Brosky's rule over time, shared by follow-requests-v1 and -v2: an
# affinity a task or an IRQ's owner sets while the shield is up becomes its requested
# affinity; a later shield applies the rule to it and `reset` gives it back instead of
# the one saved at the first shield. Everything nobody touched is restored exactly.

# set_cpus_in SNAPSHOT_DIR PID CPUS: the snapshot's procs line of PID with affinity CPUS.
set_cpus_in() {
    awk -v p="$2" -v c="$3" '$1 == p { $3 = c } { print }' "$1/procs" >"$1/procs.new" \
        && mv "$1/procs.new" "$1/procs"
}

follow_requests() {
    : >/tmp/spawned
    spawn narrowed all
    NARROWED=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn widened 1
    WIDENED=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn untouched 2-3
    UNTOUCHED=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn later all
    LATER=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn_mix 30
    sleep 1
    probe_irqs
    set -- $(writable_irqs)
    if [ $# -lt 2 ]; then
        fail follow/irqs "fewer than 2 IRQs whose affinity can be written: $*"
        return
    fi
    IRQ_A=$1
    IRQ_B=$2
    echo f >"/proc/irq/$IRQ_A/smp_affinity"
    echo f >"/proc/irq/$IRQ_B/smp_affinity"
    snapshot /tmp/before

    cs_ok shield/exit-0 shield --all 3
    check_eq shield/narrowed 0-2 "$(cpus_of "$NARROWED")" "affinity of the task before taskset"
    check_eq shield/irq-a 0-2 "$(cat "/proc/irq/$IRQ_A/smp_affinity_list")" "IRQ $IRQ_A"

    # Behind the shield's back: a task narrows itself, one widens itself (its cpuset clamps
    # it to the housekeeping CPUs), one narrows to 1-2; an IRQ's owner writes CPU 1.
    taskset -p -c 1 "$NARROWED" >/dev/null 2>&1 || fail follow/taskset-narrow "taskset -p -c 1 $NARROWED failed"
    taskset -p -c 0-3 "$WIDENED" >/dev/null 2>&1 || fail follow/taskset-widen "taskset -p -c 0-3 $WIDENED failed"
    taskset -p -c 1-2 "$LATER" >/dev/null 2>&1 || fail follow/taskset-later "taskset -p -c 1-2 $LATER failed"
    echo 2 >"/proc/irq/$IRQ_A/smp_affinity" || fail follow/irq-write "IRQ $IRQ_A refused CPU 1"
    info "after taskset: narrowed $(cpus_of "$NARROWED"), widened $(cpus_of "$WIDENED"), later $(cpus_of "$LATER"), IRQ $IRQ_A $(cat "/proc/irq/$IRQ_A/smp_affinity_list")"

    # A second shield applies the rule to the new requests.
    cs_ok add/exit-0 shield --procs 2
    check_eq add/narrowed 1 "$(cpus_of "$NARROWED")" "rule on request 1, shield 2-3"
    check_eq add/widened 0-1 "$(cpus_of "$WIDENED")" "rule on request 0-3, shield 2-3"
    check_eq add/later 1 "$(cpus_of "$LATER")" "rule on request 1-2, shield 2-3"
    check_eq add/untouched 2-3 "$(cpus_of "$UNTOUCHED")" "rule on request 2-3, shield 2-3"
    check_eq add/irq-a 1 "$(cat "/proc/irq/$IRQ_A/smp_affinity_list")" "IRQ $IRQ_A, request 1"
    check_eq add/irq-b 0-2 "$(cat "/proc/irq/$IRQ_B/smp_affinity_list")" "IRQ $IRQ_B, request 0-3"
    if grep -q "task $NARROWED (sleep) set its affinity to 1 while shielded" /tmp/cs.out /tmp/cs.err \
        && grep -q "IRQ $IRQ_A: smp_affinity was set to" /tmp/cs.out /tmp/cs.err; then
        pass add/notes
    else
        fail add/notes "no note naming task $NARROWED and IRQ $IRQ_A: $(cat /tmp/cs.out /tmp/cs.err | head -c 600 | tr '\n' ' ')"
    fi

    # Reset: the new requests, and everything else exactly as before the shield.
    cs_ok reset/exit-0 reset
    check_eq reset/narrowed 1 "$(cpus_of "$NARROWED")" "taskset -p -c 1 while shielded"
    check_eq reset/widened 0-3 "$(cpus_of "$WIDENED")" "taskset -p -c 0-3 while shielded"
    check_eq reset/later 1-2 "$(cpus_of "$LATER")" "taskset -p -c 1-2 while shielded"
    check_eq reset/untouched 2-3 "$(cpus_of "$UNTOUCHED")" "untouched"
    check_eq reset/irq-a 1 "$(cat "/proc/irq/$IRQ_A/smp_affinity_list")" "IRQ $IRQ_A written while shielded"
    check_eq reset/irq-b 0-3 "$(cat "/proc/irq/$IRQ_B/smp_affinity_list")" "IRQ $IRQ_B untouched"
    rm -rf /tmp/expected
    cp -r /tmp/before /tmp/expected
    set_cpus_in /tmp/expected "$NARROWED" 1
    set_cpus_in /tmp/expected "$WIDENED" 0-3
    set_cpus_in /tmp/expected "$LATER" 1-2
    awk -v i="$IRQ_A" '$1 == i { $2 = "1" } { print }' /tmp/before/irqs >/tmp/expected/irqs
    # The mask as the kernel prints CPU 1 on this 4-CPU guest.
    sed "s#^/proc/irq/$IRQ_A/smp_affinity:.*#/proc/irq/$IRQ_A/smp_affinity:2#" \
        /tmp/before/irqmasks >/tmp/expected/irqmasks
    expect_restored reset/rest /tmp/expected
    cs_ok reset-again/exit-0 reset
    expect_restored reset-again/rest /tmp/expected
}
