# Scenario compare-smt: `compare --smt` (Brosky & Rotolo Figure 4, SMT on vs off) on a
# guest with two threads per core. The mechanics only (timings under TCG mean nothing):
# CPU 3 is shielded and measured three times, its sibling CPU 2 spinning, idle and
# offline; the report has the three rows; CPU 2 is back online and the shield is gone
# afterwards, everything restored. Then `run --reserve --smt-siblings` on CPU 3 holds
# CPU 2 too: a placement there is refused naming the holder.
# guest-test: compare_smt_measures_the_sibling_busy_idle_and_offline_and_brings_it_back
# guest-cost: 18
# guest-boot: shared
# guest-tcg: single
# guest-smp: 4,threads=2
# guest-cpu: max,vendor=GenuineIntel
# guest-timeout: 400
GUEST_CGROUP=v2

scenario_main() {
    check_eq smt/topology 2-3 "$(cat /sys/devices/system/cpu/cpu3/topology/thread_siblings_list)" "siblings of CPU 3"
    snapshot /tmp/before
    # Watch what happens to the sibling while compare runs.
    (
        while [ ! -e /tmp/smt-stop ]; do
            cat /sys/devices/system/cpu/online >>/tmp/online.seen
            grep -l smt-sibling /proc/[0-9]*/task/*/comm >>/tmp/spinner.seen 2>/dev/null
            usleep 100000
        done
    ) &
    watcher=$!
    cs compare --smt --duration 2s --rate 1000 --runs 2 --work 20ms --no-attribute \
        --no-anchor --idle halt --out /tmp/smt-report
    touch /tmp/smt-stop
    wait "$watcher"
    check_eq smt/exit-0 0 "$CS_RC" "exit status ($(head -c 300 /tmp/cs.err | tr '\n' ' '))"
    for row in smt-busy smt-idle smt-offline; do
        if grep -q "\"name\": \"$row\"" /tmp/smt-report/report.json 2>/dev/null; then
            pass "smt/report-$row"
        else
            fail "smt/report-$row" "no scenario $row in /tmp/smt-report/report.json"
        fi
    done
    if grep -q "Figure 4" /tmp/smt-report/report.json 2>/dev/null; then
        pass smt/figure-4-line
    else
        fail smt/figure-4-line "no busy-vs-offline line in the report"
    fi
    if grep -qx "0-1,3" /tmp/online.seen; then
        pass smt/sibling-went-offline
    else
        fail smt/sibling-went-offline "CPU 2 never seen offline: $(sort -u /tmp/online.seen | tr '\n' ' ')"
    fi
    if [ -s /tmp/spinner.seen ]; then
        pass smt/sibling-spinner-ran
    else
        fail smt/sibling-spinner-ran "no smt-sibling thread seen"
    fi
    check_eq smt/sibling-back-online 0-3 "$(cat /sys/devices/system/cpu/online)"
    if [ -d "$CGROOT/cpushield-shield" ]; then
        fail smt/shield-gone "$CGROOT/cpushield-shield still exists"
    else
        pass smt/shield-gone
    fi
    expect_restored smt/restored /tmp/before

    # Sherer §6: a reservation that covers the sibling thread.
    "$CS" run --cpus 3 --allow-unshielded --reserve --smt-siblings -- sleep 1000 \
        >/tmp/holder.out 2>&1 &
    runner=$!
    holder=$(reserve_holder 2 "$runner")
    if [ -n "$holder" ]; then
        pass smt/sibling-reserved
        cs run --cpus 2 --allow-unshielded -- true
        check_eq smt/sibling-placement-refused 1 "$CS_RC"
        if grep -q "CPU 2 is reserved by PID $holder (sleep 1000)" /tmp/cs.err; then
            pass smt/sibling-refusal-names-holder
        else
            fail smt/sibling-refusal-names-holder "$(head -c 300 /tmp/cs.err)"
        fi
        kill "$holder"
    else
        fail smt/sibling-reserved "CPU 2 never reserved: $(head -c 300 /tmp/holder.out)"
        kill "$runner"
    fi
    wait "$runner" 2>/dev/null
}
