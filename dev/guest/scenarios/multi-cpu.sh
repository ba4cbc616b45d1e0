# Scenario multi-cpu: shields of several CPUs on an 8-vCPU guest (cgroup v2). `shield --all
# 2-7`, then `--procs 2-7 --irqs 4-7`, then two groups `--all 2-3` and `--all 6-7` (the shield
# has one cpuset: a second call adds its CPUs to it, so the two groups are one shield of
# 2-3,6-7, and a task asking for 2-3 is kept there): each follows Brosky's rule on every task
# and IRQ and resets exactly. Then `run --cpus 4-7 --reserve` of a 4-thread program whose
# threads each pin themselves to one CPU: one thread per CPU, a second placement on those
# CPUs is refused naming the holder.
# guest-test: shields_of_several_cpus_on_eight_cpus_follow_the_rule_and_reset_exactly
# guest-smp: 8
# guest-tcg: single
# guest-cost: 30
# guest-timeout: 300
GUEST_CGROUP=v2

# threads_cpus PID: "TID:CPU_LIST" of each thread of PID but the first, space-separated.
threads_cpus() {
    for _t in /proc/"$1"/task/*; do
        [ "${_t##*/}" = "$1" ] && continue
        echo "${_t##*/}:$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$_t/status")"
    done | sort -t: -k2 -n | tr '\n' ' '
}

scenario_main() {
    check_eq multi/online 0-7 "$(cat /sys/devices/system/cpu/online)" "online CPUs"
    : >/tmp/spawned
    for cpus in all 0-7 2-7 4-5 2-3 6 0-1; do spawn "t-$cpus" "$cpus"; done
    sleep 1
    probe_irqs
    snapshot /tmp/before

    cs_ok all/shield shield --all 2-7
    expect_show all/show 2-7 2-7 2-7
    snapshot /tmp/s-all
    expect_rule all /tmp/before /tmp/s-all 2-7 2-7
    cs_ok all/reset reset
    expect_restored all/restored /tmp/before

    cs_ok split/shield shield --procs 2-7 --irqs 4-7
    expect_show split/show 2-7 4-7 ""
    snapshot /tmp/s-split
    expect_rule split /tmp/before /tmp/s-split 2-7 4-7
    cs_ok split/reset reset
    expect_restored split/restored /tmp/before

    cs_ok groups/first shield --all 2-3
    cs_ok groups/second shield --all 6-7
    expect_show groups/show 2-3,6-7 2-3,6-7 2-3,6-7
    snapshot /tmp/s-groups
    expect_rule groups /tmp/before /tmp/s-groups 2-3,6-7 2-3,6-7
    cs_ok groups/reset reset
    expect_restored groups/restored /tmp/before

    cs_ok run/shield shield --all 2-7
    "$CS" run --cpus 4-7 --reserve -- "$CS" thread-demo --per-cpu --cpus 4-7 >/tmp/demo.out 2>&1 &
    runner=$!
    _i=0
    while [ "$_i" -lt 100 ] && ! grep -q '^[0-9]* [0-9]* [0-9]* [0-9]* [0-9]*$' /tmp/demo.out; do
        usleep 100000; _i=$((_i + 1))
    done
    set -- $(grep '^[0-9]* [0-9]* [0-9]* [0-9]* [0-9]*$' /tmp/demo.out)
    if [ $# = 5 ]; then
        demo=$1
        check_eq run/one-thread-per-cpu "$2:4 $3:5 $4:6 $5:7" "$(threads_cpus "$demo" | sed 's/ $//')" "thread:CPUs"
        check_eq run/process-cpus 4-7 "$(cpus_of "$demo")" "the program's CPUs"
        if grep -q cpushield-shield "/proc/$demo/cgroup"; then pass run/in-shield; else fail run/in-shield "$(cat "/proc/$demo/cgroup")"; fi
        cs run --cpus 5 -- true
        if [ "$CS_RC" = 1 ] && grep -q "$demo" /tmp/cs.err; then
            pass run/reserved
        else
            fail run/reserved "rc $CS_RC: $(head -c 300 /tmp/cs.err | tr '\n' ' ')"
        fi
        kill "$demo"
    else
        fail run/started "$(head -c 300 /tmp/demo.out | tr '\n' '|')"
    fi
    wait "$runner"
    cs_ok run/reset reset
    expect_restored run/restored /tmp/before
}
