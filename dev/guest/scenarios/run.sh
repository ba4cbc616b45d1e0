# Scenario run: `cpushield run` onto CPU 3 of a 4-CPU guest whose whole system is
# shielded (cgroup v2 isolated partition): the started task lands in the shield
# cgroup with the asked policy before it runs; the IRQ named with --irq moves to
# CPU 3 while the task lives and comes back after; --reserve refuses a second
# placement naming the holder and is released when the holder is SIGKILLed;
# --pid moves an existing task into the shield; unshielded CPUs are refused.
# guest-test: run_places_a_task_on_the_v2_shield_binds_irqs_and_reserves
# guest-cost: 8
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 300
GUEST_CGROUP=v2

# policy_of PID: "POLICY PRIO" from /proc/PID/stat (0 other, 1 fifo, 2 rr).
policy_of() { awk '{ print $41, $40 }' "/proc/$1/stat"; }

# wait_holder CPU NOT_PID: PID recorded in CPU's reservation once it is not NOT_PID.
wait_holder() {
    _i=0
    while [ "$_i" -lt 200 ]; do
        _h=$(cut -d' ' -f1 "/run/cpushield/reserve/cpu$1" 2>/dev/null)
        if [ -n "$_h" ] && [ "$_h" != "$2" ] && [ "$_h" != 0 ]; then
            echo "$_h"
            return 0
        fi
        usleep 50000
        _i=$((_i + 1))
    done
    return 1
}

scenario_main() {
    probe_irqs
    spawn_many 20 all
    cs_ok run/shield shield --all 3

    # An IRQ the shield moved off CPU 3 and that can be moved back.
    irq=
    for n in $(writable_irqs); do
        m=$(cat "/proc/irq/$n/smp_affinity_list")
        cpus_has "$m" 3 || { irq=$n; break; }
    done
    [ -n "$irq" ] || fail run/irq-candidate "no writable IRQ off CPU 3"
    irq_before=$(cat "/proc/irq/$irq/smp_affinity")
    info "binding IRQ $irq (mask $irq_before) while the task runs"

    # 1. A started command: shield cgroup, CPU 3, SCHED_FIFO 50, IRQ on CPU 3, exit status.
    cs run --cpus 3 --fifo 50 --irq "$irq" -- sh -c \
        "grep -c cpushield-shield /proc/\$\$/cgroup; \
         sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/\$\$/status; \
         awk '{ print \$41, \$40 }' /proc/\$\$/stat; \
         cat /proc/irq/$irq/smp_affinity_list; exit 5"
    check_eq run/exit-status 5 "$CS_RC"
    check_eq run/in-shield-cgroup 1 "$(sed -n 1p /tmp/cs.out)"
    check_eq run/on-cpu-3 3 "$(sed -n 2p /tmp/cs.out)"
    check_eq run/fifo-50 "1 50" "$(sed -n 3p /tmp/cs.out)"
    check_eq run/irq-moved 3 "$(sed -n 4p /tmp/cs.out)"
    check_eq run/irq-restored "$irq_before" "$(cat "/proc/irq/$irq/smp_affinity")"

    # 2. --reserve: a second placement is refused naming the holder; SIGKILL releases it.
    "$CS" run --cpus 3 --reserve -- sleep 1000 >/tmp/holder.out 2>&1 &
    runner=$!
    if holder=$(wait_holder 3 "$runner"); then
        pass run/reserved
        cs run --cpus 3 -- true
        check_eq run/second-refused 1 "$CS_RC"
        if grep -q "CPU 3 is reserved by PID $holder (sleep 1000)" /tmp/cs.err; then
            pass run/refusal-names-holder
        else
            fail run/refusal-names-holder "$(head -c 300 /tmp/cs.err)"
        fi
        kill -9 "$holder"
        wait "$runner"
        check_eq run/holder-status 137 "$?"
        cs_ok run/released run --cpus 3 --reserve -- true
    else
        fail run/reserved "no reservation of CPU 3 appeared"
        kill "$runner"
    fi

    # 3. --pid: an existing task moves into the shield with SCHED_RR 20.
    spawn mover all
    mover=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    cs_ok run/pid-moved run --cpus 3 --rr 20 --pid "$mover"
    check_eq run/pid-on-cpu-3 3 "$(cpus_of "$mover")"
    check_eq run/pid-rr-20 "2 20" "$(policy_of "$mover")"
    if grep -q cpushield-shield "/proc/$mover/cgroup"; then
        pass run/pid-in-shield-cgroup
    else
        fail run/pid-in-shield-cgroup "$(cat "/proc/$mover/cgroup")"
    fi
    kill "$mover"

    # 4. CPUs that are not shielded are refused, pointing at the shield command.
    cs run --cpus 1 -- true
    check_eq run/unshielded-refused 1 "$CS_RC"
    grep -q "cpushield shield" /tmp/cs.err && pass run/unshielded-remedy ||
        fail run/unshielded-remedy "$(head -c 300 /tmp/cs.err)"

    cs_ok run/reset reset
}
